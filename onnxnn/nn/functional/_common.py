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
        # max(x, 0) + log1p(exp(-|x|)), with the max and -|x| written so that the gradient at 0 is
        # sigmoid(0) = 1/2 (relu's and abs's are 0 there), and log1p keeping exp(x) below -37.
        positive = input > 0
        return _ops.where(positive, input, 0.0) + _ops.log1p(_ops.exp(_ops.where(positive, -input, input)))
    return _ops.softplus(input)


def loss_inputs_in_float32(name: str, *tensors):
    """``tensors`` cast to float32 under autocast (unchanged otherwise): PyTorch's autocast lists
    the losses among the float32 ops, so a loss computes in float32 from low-precision inputs.

    Args:
        name: the loss's grad_fn name (``"MseLossBackward0"``), by which autocast's policy knows it.
    """
    return autocast_arguments("", tensors, name)
