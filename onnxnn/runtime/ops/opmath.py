"""The dtypes PyTorch's CPU kernels compute in, for the composite ops that follow them.

Two rules of PyTorch's TensorIterator that plain promotion misses:

- An op whose integer inputs give a float result (atan2, hypot, copysign, ...) casts each input
  straight from its own dtype to the float dtype it computes in. A 0-d int8 -1 beside a uint8
  tensor stays -1, where the integer common dtype (uint8) would make it 255 first.
- float16 and bfloat16 ("reduced" floats) are computed in float32 (``opmath``) and rounded once
  at the end, so a composite recorded as several ops must not round its intermediates to the
  half dtype.
- Their products and quotients read a CPU scalar operand (a Python number, or a one-element tensor
  second operand) at float32 (``with_float32_number``).
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...ir.mode import MODE
from ._common import Tensor, apply_op, scalar_constant

__all__ = ["REDUCED_FLOATS", "widened", "rounded"]

REDUCED_FLOATS = (dtypes.float16, dtypes.bfloat16)


def rounds_half_products_once() -> bool:
    """Whether a float16/bfloat16 product with a bias or scaling (``linear``, ``addmm``) is computed in
    float32 and rounded once, as PyTorch's kernels do: always, but in a graph being exported under
    autocast, which keeps autocast's half casts next to a half product (the GPU that serves it runs
    half GEMMs, the point of exporting under autocast)."""
    return MODE.autocast is None or not (MODE.grad.unbounded_depth or MODE.grad.recording_only)


def float_operands(operands: list, name: str | None = None) -> tuple[list[Tensor], dtypes.dtype]:
    """``operands`` (tensors or Python numbers) as tensors of the float dtype an int-to-float op
    computes in: the promoted dtype, or the default float dtype where that is an integer or bool.

    Each tensor converts from its own dtype, never through the integer common dtype. With
    ``name``, an integer or bool common dtype is refused instead, as PyTorch's kernels that exist
    only for floats are (``"hypot_cpu" not implemented for 'Long'``).
    """
    tensors = [(operand._value.dtype, len(operand._value.shape)) for operand in operands if isinstance(operand, Tensor)]
    if not tensors:  # PyTorch's overloads take a Number beside a Tensor, never Numbers alone
        names = ", ".join(type(operand).__name__ for operand in operands)
        raise TypeError(f"expected at least one Tensor operand, but got ({names})")
    scalars = [operand for operand in operands if not isinstance(operand, Tensor)]
    common = dtypes.result_type(tensors, scalars)
    if not common.is_floating_point:
        if name is not None:
            raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtypes.scalar_type_name(common)}'")
        common = dtypes.get_default_dtype()
    device = next(operand._value.device for operand in operands if isinstance(operand, Tensor))
    converted = [
        (operand if operand._value.dtype is common else operand.to(common))
        if isinstance(operand, Tensor)
        else Tensor._full((), operand, common, device)
        for operand in operands
    ]
    return converted, common


def widened(tensor: Tensor) -> Tensor:
    """``tensor`` in the dtype PyTorch's kernels compute it in: float32 for float16/bfloat16."""
    return tensor.to(dtypes.float32) if tensor._value.dtype in REDUCED_FLOATS else tensor


def rounded(result: Tensor, dtype: dtypes.dtype) -> Tensor:
    """A result computed in ``widened`` precision, rounded once to the op's ``dtype``."""
    return result if result._value.dtype is dtype else result.to(dtype)


def with_float32_number(op_type: str, input, other, name: str) -> Tensor | None:
    """A product or quotient of a float16/bfloat16 tensor and a Python number its dtype cannot hold
    exactly (either operand), computed in float32 and rounded once; None for any other operands.

    PyTorch's CPU kernels keep such a number at the precision they multiply and divide in (float32):
    float16 ``x * 2.7`` multiplies by 2.7, not 2.69921875, and ``0 * 70000`` is 0, not 0 times
    float16's inf. (Its sums and differences round the number to the dtype first, as onnxnn's do.)
    A number the dtype holds gives the same result either way, and the op stays in the dtype.

    The same holds for a one-element tensor of another dtype as the second operand (``x * scale``
    with a 0-d float32 ``scale``, ``x / x.new_tensor(n)``): PyTorch reads such a "CPU scalar" from
    its own dtype (``original_scalar_value``), but only in that place; a first operand is rounded.
    """
    if isinstance(other, Tensor) and isinstance(input, Tensor):
        return _with_float32_scalar_tensor(op_type, input, other, name)
    tensor, number = (input, other) if isinstance(input, Tensor) else (other, input)
    if not isinstance(tensor, Tensor) or tensor._value.dtype not in REDUCED_FLOATS:
        return None
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return None
    try:
        number = float(number)
    except OverflowError:
        return None
    with np.errstate(over="ignore"):
        if math.isnan(number) or float(np.asarray(number, tensor._value.dtype.numpy_dtype)) == number:
            return None
    wide = tensor.to(dtypes.float32)
    constant = scalar_constant(number, dtypes.float32, tensor._value.device)
    result = apply_op(op_type, (wide, constant) if tensor is input else (constant, wide), None, name)
    return result.to(tensor._value.dtype)


def _with_float32_scalar_tensor(op_type: str, input, other: Tensor, name: str) -> Tensor | None:
    """``with_float32_number`` for a second operand that is a one-element tensor whose dtype differs
    from a float16/bfloat16 result: it converts to float32 from its own dtype, the first operand
    to the result dtype, and the op runs in float32, rounded once."""
    scalar_dtype, input_dtype = other._value.dtype, input._value.dtype
    # Cheapest tests first: only a float16/bfloat16 first operand can give a half result with a
    # scalar of another dtype (an integer one would take the scalar's dtype).
    if input_dtype not in REDUCED_FLOATS or scalar_dtype is input_dtype or scalar_dtype is dtypes.bool:
        return None
    if any(size != 1 for size in other._value.shape):
        return None
    result_dtype = dtypes.result_type([(input_dtype, len(input._value.shape)), (scalar_dtype, len(other._value.shape))])
    if result_dtype not in REDUCED_FLOATS or scalar_dtype is result_dtype:
        return None
    wide = input.to(result_dtype).to(dtypes.float32)
    result = apply_op(op_type, (wide, other.to(dtypes.float32)), None, name)
    return result.to(result_dtype)
