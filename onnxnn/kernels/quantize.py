"""Linear quantization kernels: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.

Scales and zero points are per tensor (a scalar), per axis (a 1-D tensor along ``axis``) or per
block (``block_size`` consecutive elements along ``axis`` share one); ``_broadcastable`` expands
them to broadcast against the data. Quantizing rounds half to even and saturates to the target
type's range, as the spec says.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ._common import normalize_axis, numpy_dtype
from ..ir.kernel_registry import FLOATING, INTEGER, kernels

__all__: list[str] = []

# The 8-bit float element types, which onnxnn's dtype table does not hold.
_FLOAT8 = {
    17: np.dtype(ml_dtypes.float8_e4m3fn),
    18: np.dtype(ml_dtypes.float8_e4m3fnuz),
    19: np.dtype(ml_dtypes.float8_e5m2),
    20: np.dtype(ml_dtypes.float8_e5m2fnuz),
}


def _element_dtype(onnx_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type, the 8-bit floats included."""
    return _FLOAT8[onnx_type] if onnx_type in _FLOAT8 else numpy_dtype(onnx_type)


def _broadcastable(xp, parameter, shape, axis: int, block_size: int):
    """A scale or zero point reshaped (and, for blocks, repeated) to broadcast against ``shape``."""
    if parameter.ndim == 0 or parameter.size == 1 and block_size == 0:
        return parameter.reshape(())
    axis = normalize_axis(axis, len(shape))
    if block_size:
        expanded = xp.repeat(parameter, block_size, axis=axis)
        index = [slice(None)] * len(shape)
        index[axis] = slice(0, shape[axis])
        return expanded[tuple(index)]
    return parameter.reshape([-1 if a == axis else 1 for a in range(len(shape))])


def _saturate_to(xp, values, dtype: np.dtype, saturate: bool = True):
    """Float ``values`` rounded half to even and clipped into an integer ``dtype``, or cast to a float8."""
    if dtype.kind in "iu":
        info: np.iinfo | ml_dtypes.finfo = np.iinfo(dtype)
        return xp.clip(xp.rint(values), info.min, info.max).astype(dtype)
    if saturate:
        info = ml_dtypes.finfo(dtype)
        values = xp.clip(values, float(info.min), float(info.max))
    return values.astype(dtype)


@kernels.register("QuantizeLinear", types=FLOATING | {"int32"})
def quantize_linear(xp, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    zero_point = inputs[2] if len(inputs) > 2 else None
    axis, block_size = attrs.get("axis", 1), attrs.get("block_size", 0)
    if zero_point is not None:
        dtype = zero_point.dtype
    elif attrs.get("output_dtype"):
        dtype = _element_dtype(attrs["output_dtype"])
    else:
        dtype = np.dtype(np.uint8)
    scaled = x / _broadcastable(xp, scale, x.shape, axis, block_size)
    if dtype.kind in "iu":
        # Rounded before the zero point is added, so ties round to even in the unshifted scale.
        scaled = xp.rint(scaled)
        if zero_point is not None:
            scaled = scaled + _broadcastable(xp, zero_point, x.shape, axis, block_size).astype(scaled.dtype)
    return [_saturate_to(xp, scaled, dtype, bool(attrs.get("saturate", 1)))]


@kernels.register("DequantizeLinear", types=INTEGER | FLOATING)
def dequantize_linear(xp, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    zero_point = inputs[2] if len(inputs) > 2 else None
    axis, block_size = attrs.get("axis", 1), attrs.get("block_size", 0)
    dtype = _element_dtype(attrs["output_dtype"]) if attrs.get("output_dtype") else scale.dtype
    values = x.astype(np.float32)
    if zero_point is not None:
        values = values - _broadcastable(xp, zero_point, x.shape, axis, block_size).astype(np.float32)
    values = values * _broadcastable(xp, scale, x.shape, axis, block_size).astype(np.float32)
    return [values.astype(dtype)]


@kernels.register("DynamicQuantizeLinear", types=frozenset({"float32"}))
def dynamic_quantize_linear(xp, inputs, attrs):
    x = inputs[0]
    # The range always holds 0, so that 0 is exactly representable (as the zero point).
    high = xp.maximum(x.max(), 0).astype(np.float32) if x.size else np.float32(0)
    low = xp.minimum(x.min(), 0).astype(np.float32) if x.size else np.float32(0)
    span = high - low
    scale = xp.where(span == 0, np.float32(1), span) / np.float32(255)
    zero_point = xp.rint(xp.clip(-low / scale, 0, 255))
    quantized = xp.clip(xp.rint(x / scale) + zero_point, 0, 255).astype(np.uint8)
    return [quantized, xp.asarray(scale, dtype=np.float32), xp.asarray(zero_point).astype(np.uint8)]
