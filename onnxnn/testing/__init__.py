"""``onnxnn.testing``: ``assert_close`` and ``make_tensor``, as ``torch.testing``.

Example::

    >>> from onnxnn.testing import assert_close, make_tensor
    >>> x = make_tensor(2, 3, dtype=onnxnn.float64, device="cpu")
    >>> assert_close(x.exp().log(), x)
"""

from __future__ import annotations

from ._comparison import assert_close
from ._creation import make_tensor

__all__ = ["assert_close", "make_tensor"]
