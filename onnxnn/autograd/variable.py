"""``Variable``: PyTorch's deprecated wrapper from before tensors carried autograd state themselves.

Since PyTorch 0.4 every tensor is what a Variable was: ``Variable(t, requires_grad=True)`` returns a
new tensor sharing ``t``'s data, without its history, with ``requires_grad`` set; and
``isinstance(x, Variable)`` is true for every tensor. onnxnn keeps both so that old scripts port by
changing their imports.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..runtime.creation import empty
from ..runtime.tensor import Tensor

__all__ = ["VariableMeta", "Variable"]


class VariableMeta(type):
    """Makes ``isinstance(x, Variable)`` mean ``isinstance(x, Tensor)``, as in PyTorch."""

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, Tensor)


class Variable(metaclass=VariableMeta):
    """Deprecated: a tensor is a Variable. Returns ``data`` detached (sharing its value) with
    ``requires_grad`` set.

    Args:
        data: the tensor; none gives an empty 1-D tensor.
        requires_grad: whether autograd records operations on the result. Default: False.
        volatile: removed in PyTorch 0.4 (use ``no_grad``); a true value only warns.

    Returns:
        A tensor (``type`` is ``onnxnn.Tensor``, never ``Variable``).

    Raises:
        TypeError: ``data`` is not a tensor.
        RuntimeError: ``requires_grad`` for a tensor that is not floating point.

    Example::

        >>> from onnxnn.autograd import Variable
        >>> x = Variable(onnxnn.ones(2), requires_grad=True)
        >>> x.requires_grad, isinstance(x, Variable)
        (True, True)
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = False, volatile: bool = False) -> Any:
        if volatile:
            warnings.warn(
                "volatile was removed and now has no effect. Use `with onnxnn.no_grad():` instead.",
                UserWarning,
                stacklevel=2,
            )
        if data is None:
            data = empty(0)
        elif not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad and not data.is_floating_point():
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        # A plain Tensor even for a Parameter, as PyTorch's.
        return Tensor.detach(data).requires_grad_(bool(requires_grad))
