"""linear: ``y = x W^T + b``."""

from __future__ import annotations

from ...ir.dtypes import float32, float64
from ...ir.graph import FrozenAttributes
from ...runtime import ops as _ops
from ...ir.mode import MODE
from ...runtime.ops.opmath import REDUCED_FLOATS, rounds_half_products_once
from ...runtime.tensor import Tensor, apply_op, autocast_arguments, outside_autocast
from ...ir.dtypes import scalar_type_name

__all__ = ["linear"]

# Gemm's ONNX types that onnxruntime's CPU provider and onnxnn's kernels both run at full precision.
# float16/bfloat16 with a bias are computed in float32 and rounded once (``_linear_in_float32``);
# without one they keep the half MatMul, which accumulates in float32 and rounds once already.
_GEMM_DTYPES = (float32, float64)
_TRANSPOSE_B = FrozenAttributes(transB=1)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """Applies ``y = x W^T + b``.

    A matrix input (float32/float64, bias absent or a vector) is recorded as one
    ``Gemm(x, W, b, transB=1)``: onnxruntime runs it as fast as the ``MatMul(x, Transpose(W))`` plus
    ``Add`` it fuses, and one node instead of three is a third of the recording, planning and
    backward bookkeeping per layer. A vector input is recorded as ``MatMul(W, x)`` plus ``Add`` (no
    Transpose). Other ranks and dtypes take ``MatMul(x, Transpose(W))`` plus ``Add``. float16 and
    bfloat16 with a bias are computed in float32 and rounded once, as PyTorch's addmm (opmath): a
    half product rounded before the bias is added loses the digits the sum cancels (tens of ulps).

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features)`` or None.

    Returns:
        ``(*, out_features)``.
    """
    if MODE.autocast is not None:  # autocast casts before the dtype check, as PyTorch's dispatcher does
        input, weight, bias = autocast_arguments("Gemm", (input, weight, bias))
    input_shape, weight_shape = input.shape, weight.shape
    rank, in_features = len(input_shape), weight_shape[-1]
    if rank == 0 or input_shape[-1] != in_features:
        rows = input.numel() // input_shape[-1] if rank and input_shape[-1] else 1
        columns = input_shape[-1] if rank else 1
        out_features = weight_shape[0] if len(weight_shape) == 2 else 1
        raise RuntimeError(
            f"mat1 and mat2 shapes cannot be multiplied ({rows}x{columns} and {in_features}x{out_features})"
        )
    dtype = input.dtype
    if dtype is not weight.dtype:
        raise mixed_dtypes_error(dtype, weight.dtype)
    if rank == 2 and len(weight_shape) == 2 and dtype in _GEMM_DTYPES:
        if bias is None:
            return apply_op("Gemm", (input, weight), _TRANSPOSE_B, "MmBackward0")
        if bias.dim() == 1:
            if bias.dtype is not dtype:
                bias = bias.to(dtype)
            return apply_op("Gemm", (input, weight, bias), _TRANSPOSE_B, "AddmmBackward0")
    if bias is not None and dtype in REDUCED_FLOATS and rounds_half_products_once():
        return _linear_in_float32(input, weight, bias if bias.dtype is dtype else bias.to(dtype))
    if input.dim() == 1 and weight.dim() == 2:
        # W x: the same dot products as x W^T without a Transpose node (nor its backward).
        product = apply_op("MatMul", (weight, input), None, "MmBackward0")
        if bias is None:
            return product
        if bias.dtype is not product.dtype:
            bias = bias.to(product.dtype)
        return apply_op("Add", (product, bias), None, "AddBackward0")
    weight_t = weight.t()
    if input.dim() == 2 and weight.dim() == 2:
        product = apply_op("MatMul", (input, weight_t), None, "MmBackward0")
        add_name = "AddmmBackward0"
    else:
        product = _ops.matmul(input, weight_t)
        # PyTorch folds 3-D inputs into one addmm and views the result back.
        add_name = "ViewBackward0" if input.dim() == 3 else "AddBackward0"
    if bias is None:
        return product
    if bias.dtype is not product.dtype:
        bias = bias.to(product.dtype)
    return apply_op("Add", (product, bias), None, add_name)


def mixed_dtypes_error(first, second) -> RuntimeError:
    """PyTorch's error for a matrix product of operands of two dtypes (``linear``, the RNN cells)."""
    return RuntimeError(
        f"mat1 and mat2 must have the same dtype, but got {scalar_type_name(first)} and {scalar_type_name(second)}"
    )


@outside_autocast()  # under autocast too: the half inputs it cast are widened exactly, as PyTorch's addmm does
def _linear_in_float32(input: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``x W^T + b`` for float16/bfloat16: the float32 paths of ``linear``, rounded once (one Cast
    that carries the grad_fn name the half ops would have had)."""
    dtype = input.dtype
    result = linear(input.to(float32), weight.to(float32), bias.to(float32))
    if input.dim() == 2 and weight.dim() == 2:
        name = "AddmmBackward0"
    else:
        name = "ViewBackward0" if input.dim() == 3 else "AddBackward0"
    return apply_op("Cast", (result,), {"to": dtype}, name)
