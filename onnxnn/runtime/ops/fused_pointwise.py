"""PyTorch's fused pointwise kernels that ONNX writes as several ops: ``lerp``, ``addcmul``, ``addcdiv``.

Each follows its ATen kernel's arithmetic, not just its formula: lerp's two-sided form (exact at both
ends), the order of addcmul's products, and float16/bfloat16 computed in float32 and rounded once.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ._common import Tensor
from . import comparison as _c
from . import division as _division
from . import elementwise as _e
from .opmath import rounded, widened

__all__ = ["lerp", "addcmul", "addcdiv"]


def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """``input + weight * (end - input)`` for ``|weight| < 0.5``, else ``end - (end - input) * (1 - weight)``.

    PyTorch's formula (ATen's ``lerp``): each side is exact at its own end, so ``weight == 1`` gives
    ``end`` itself. float16/bfloat16 compute in float32 and round once, as PyTorch's kernel does.
    """
    _check_lerp_dtypes(input, end, weight)
    if isinstance(weight, Tensor) and weight.dim() == 0:
        # PyTorch promotes a 0-d weight with the operands: a float64 one beside float32 tensors reads
        # as float32; with 0-d operands too, the result is float64.
        common = dtypes.result_type([(operand.dtype, operand.dim()) for operand in (input, end, weight)])
        input, end, weight = input.to(common), end.to(common), weight.to(common)
    start, stop = widened(input), widened(end)
    difference = _e.sub(stop, start)
    if isinstance(weight, Tensor):
        w = widened(weight)
        near = _c.lt(_e.abs(w.detach()), 0.5)
        # Each side reads the weight only where it is taken (0 and 1 elsewhere): the side not taken gets
        # a zero gradient, and a zero times an infinite difference or 1 - w would add NaN to PyTorch's
        # gradients (grad * (1 - w), grad * w, grad * (end - start)).
        near_start = _e.add(start, _e.mul(_e.where(near, w, 0.0), difference))
        near_end = _e.sub(stop, _e.mul(difference, _e.sub(1.0, _e.where(near, 1.0, w))))
        result = _e.where(near, near_start, near_end)
    else:
        # The weight as the kernel holds it (in the dtype it computes in), and 1 - weight in that dtype.
        computed = start.dtype.numpy_dtype
        w_held = np.asarray(weight, computed)
        if abs(w_held) < 0.5:
            result = _e.add(start, _e.mul(difference, weight))
        else:
            result = _e.sub(stop, _e.mul(difference, float(np.asarray(1, computed) - w_held)))
    return rounded(result, input.dtype)


def _check_lerp_dtypes(input: Tensor, end: Tensor, weight) -> None:
    """PyTorch's lerp takes float tensors of one dtype (a tensor weight too, unless it is 0-d)."""
    if not input.dtype.is_floating_point:
        raise NotImplementedError(
            f"\"lerp_kernel_scalar\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'"
        )
    for name, operand in (("end", end), ("weight", weight)):
        if isinstance(operand, Tensor) and operand.dtype is not input.dtype and (name == "end" or operand.dim()):
            raise RuntimeError(
                f"expected dtype {_c_type_name(input.dtype)} for `{name}` but got dtype {_c_type_name(operand.dtype)}"
            )


def _c_type_name(dtype) -> str:
    """The C++ name PyTorch's messages give a dtype (``float``, ``c10::Half``)."""
    return {dtypes.float16: "c10::Half", dtypes.bfloat16: "c10::BFloat16", dtypes.float32: "float"}.get(
        dtype, dtype.name
    )


def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """``input + value * tensor1 * tensor2``, in the promoted dtype of the three tensors (``value``
    does not widen it), multiplied in PyTorch's order; float16/bfloat16 in float32, rounded once."""
    common = dtypes.result_type([(t.dtype, t.dim()) for t in (input, tensor1, tensor2)])
    if common is dtypes.bool:
        return _e.add(input, _e.mul(_e.mul(tensor1, tensor2), value))
    base, first, second = (widened(t.to(common)) for t in (input, tensor1, tensor2))
    if value != 1:
        number = value if common.is_floating_point else int(value)
        first = _e.mul(Tensor._full((), number, first.dtype, first.device), first)
    return rounded(_e.add(base, _e.mul(first, second)), common)


def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, *, value=1) -> Tensor:
    """``input + value * tensor1 / tensor2`` (integer division is refused, as in PyTorch); float16 and
    bfloat16 compute in float32 and round once."""
    if not tensor1.dtype.is_floating_point and not tensor2.dtype.is_floating_point:
        raise RuntimeError(
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
            "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
            "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
            "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
            "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
            "for all dtypes."
        )
    common = dtypes.result_type([(t.dtype, t.dim()) for t in (input, tensor1, tensor2)])
    base, first, second = (widened(t.to(common)) for t in (input, tensor1, tensor2))
    if value != 1:
        first = _e.mul(Tensor._full((), value, first.dtype, first.device), first)
    return rounded(_e.add(base, _division.div(first, second)), common)
