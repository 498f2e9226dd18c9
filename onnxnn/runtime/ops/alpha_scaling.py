"""The ``alpha`` and ``beta`` factors of PyTorch's scaled sums (add, sub, rsub, index_add, addmm, ...).

PyTorch converts such a factor to the op's *result* dtype (c10's ``checked_convert``) and scales the
operand after promoting it: ``int16 + alpha * int8`` scales in int16 (100 * 3 is 300, not int8's
44), ``float32 + alpha * float16`` in float32 (60000 * 3 is not float16's inf), and a bool result
takes ``bool(alpha)`` (a logical and, then or). add/sub/addr also refuse a factor of the wrong kind
(``alpha_check``): a float factor for an integral or bool result, a bool factor for a non-bool one.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ..creation import check_number_fits
from ._common import Tensor, _scalar_array, apply_op, promote_operands, promote_pair, scalar_constant

__all__ = ["factor_in", "scaled_sum"]


def factor_in(factor, dtype: dtypes.dtype, name: str = "alpha", checked: bool = True) -> int | float | bool:
    """``factor`` as a Python number of ``dtype``, as PyTorch converts a scaling factor.

    ``checked``: PyTorch's ``alpha_check`` first (add, sub, addr; index_add and addmm skip it and
    truncate a float factor of an integral result). A value outside ``dtype``'s range is PyTorch's
    overflow error (``uint8`` takes -255..255, wrapping negatives); a bool result takes any nonzero.
    """
    if isinstance(factor, Tensor):
        factor = factor.item()
    if isinstance(factor, complex):
        raise RuntimeError(f"For non-complex input tensors, argument {name} must not be a complex number.")
    is_bool = isinstance(factor, (bool, np.bool_))
    if checked:
        if is_bool and dtype is not dtypes.bool:
            raise RuntimeError(f"Boolean {name} only supported for Boolean results.")
        if isinstance(factor, (float, np.floating)) and not dtype.is_floating_point:
            raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point number.")
    if dtype is dtypes.bool:
        return bool(factor)
    if isinstance(factor, int) and not is_bool and not -(2**63) <= factor < 2**64:
        raise OverflowError("int too big to convert")  # PyTorch's Scalar holds 64 bits at most
    check_number_fits(factor, dtype, floating=True)
    converted = _scalar_array(factor, dtype)
    return float(converted) if dtype.is_floating_point else int(converted)


def scaled_sum(op_type: str, input, other, alpha, name: str) -> Tensor:
    """``input + alpha * other`` (``op_type`` "Add") or ``input - alpha * other`` ("Sub") for
    ``alpha != 1``: both operands promoted first, the product taken in the result dtype.

    A Python-number ``other`` is scaled at record time in that dtype's arithmetic (a float16 product
    rounded to float16, an int8 one wrapping), so the op stays one node with a fed constant.
    """
    (a, b), result_dtype = promote_pair(input, other) or promote_operands([input, other])
    factor = factor_in(alpha, result_dtype)
    device = (input if isinstance(input, Tensor) else other)._value.device
    if result_dtype is dtypes.bool:  # onnxruntime has no bool Add or Mul: a | (b & alpha)
        if isinstance(other, Tensor):
            b = apply_op("And", (b, scalar_constant(factor, dtypes.bool, device)))
        else:
            b = scalar_constant(bool(other) and factor, dtypes.bool, device)
        return apply_op("Or", (a, b))
    if isinstance(other, Tensor):
        b = apply_op("Mul", (b, scalar_constant(factor, result_dtype, device)), None, "MulBackward0")
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            product = _scalar_array(other, result_dtype) * _scalar_array(factor, result_dtype)
        b = scalar_constant(
            product.item() if result_dtype.numpy_dtype.kind in "fiu" else float(product), result_dtype, device
        )
    return apply_op(op_type, (a, b), None, name)
