"""The recording runtime: the lazy Tensor, recording, realization, autodiff and the op families.

The op families (``runtime/ops``) are imported first: they import ``Tensor``, and Tensor's
methods call them through a module reference read at call time, so with this order every module
of the package imports what it needs at its top.
"""

from __future__ import annotations

from . import ops
from .tensor import Size, Tensor, apply_op
from . import creation
