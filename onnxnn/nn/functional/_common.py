"""Helpers shared by the functional submodules."""

from __future__ import annotations

from ...ir import dtypes
from ...runtime import ops as _ops
from ...runtime.tensor import Tensor, autocast_arguments


def lacks_kernels(input: Tensor) -> bool:
    """True for float64: onnxruntime's CPU provider has no float64 LeakyRelu, Elu, Softplus, Gelu or Erf."""
    return input.dtype is dtypes.float64


def stable_softplus(input: Tensor) -> Tensor:
    """``log(1 + exp(x))`` without overflow."""
    if lacks_kernels(input):
        return _ops.relu(input) + _ops.log(_ops.exp(-_ops.abs(input)) + 1.0)
    return _ops.softplus(input)


def loss_inputs_in_float32(name: str, *tensors):
    """``tensors`` cast to float32 under autocast (unchanged otherwise): PyTorch's autocast lists
    the losses among the float32 ops, so a loss computes in float32 from low-precision inputs.

    Args:
        name: the loss's grad_fn name (``"MseLossBackward0"``), by which autocast's policy knows it.
    """
    return autocast_arguments("", tensors, name)
