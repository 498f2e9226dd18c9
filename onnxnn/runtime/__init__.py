"""The recording runtime: Tensor, dtypes, devices, the recorded graph, op rules, autodiff, executor."""
from __future__ import annotations

from ..ir import dtypes
from . import tensor_ops
from .tensor import Size, Tensor, apply_op
from . import ops

tensor_ops.ops = ops  # the op families import Tensor, so Tensor's methods find them only now

from . import creation  # noqa: E402
