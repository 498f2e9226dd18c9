"""Gradient rules of standard ops that imported models record and the Tensor API does not (yet).

These ops are recorded without a shape rule of onnxnn's (ONNX shape inference gives their
outputs), by the importer or by ``apply_op`` directly, and both executors run them. Each rule
writes its gradient with recorded ops only and reads no data, so backward passes stay
structural (replayable) and second derivatives come from the same rules.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.graph import Value, constant
from ...ir.registry import gradient_rules, non_differentiable
from ._common import Tensor, apply_op, expanded_zeros, int64_constant, normalize_axes
from .elementwise import where
from ..realization import data_of

__all__: list[str] = []

# Outputs that do not depend on the float input's values (EyeLike reads only its shape) or are
# random draws (Bernoulli: PyTorch's derivative is zero as well).
non_differentiable.mark("EyeLike", "Bernoulli")
# MelWeightMatrix reads its float edge frequencies only through the integer DFT bins they fall in
# (``((dft_length + 1) * hz) // sample_rate``): piecewise constant, derivative zero wherever it exists.
non_differentiable.mark("MelWeightMatrix")


# ---------------------------------------------------------------- scans and selections


@gradient_rules.register("Compress")
def _compress_grad(ctx, g):
    # Output j along the axis is the j-th selected input slice: selected input i reads the output
    # at (number of selected slices before i), found by a cumulative sum of the condition.
    shape = ctx.input_shape(0)
    axis = ctx.attrs.get("axis")
    target = (int(np.prod(shape)),) if axis is None else shape
    axis = 0 if axis is None else normalize_axes([axis], len(shape))[0]
    condition = ctx.input(1).detach().to(dtypes.int64)
    length = target[axis]
    if condition.shape[0] < length:  # slices past the condition's end are dropped
        condition = apply_op("Pad", (condition, int64_constant([0, length - condition.shape[0]])))
    elif condition.shape[0] > length:
        condition = condition[:length]
    if g.shape[axis] == 0:
        return expanded_zeros(shape, g.dtype, g.device), None
    positions = apply_op("CumSum", (condition, int64_constant(0)), {"exclusive": 1})
    positions = apply_op("Min", (positions, int64_constant(g.shape[axis] - 1)))
    gathered = apply_op("Gather", (g, positions), {"axis": axis}, "CompressBackward0")
    broadcast = [1] * len(target)
    broadcast[axis] = length
    selected = (condition != 0).reshape(broadcast)
    return where(selected, gathered, 0.0).reshape(shape), None


@gradient_rules.register("ReverseSequence")
def _reverse_sequence_grad(ctx, g):
    # Reversing the same prefixes again undoes the permutation (its own inverse and adjoint).
    attrs = {"batch_axis": int(ctx.attrs.get("batch_axis", 1)), "time_axis": int(ctx.attrs.get("time_axis", 0))}
    return apply_op("ReverseSequence", (g, ctx.input_value(1)), attrs, "ReverseSequenceBackward0"), None


# ---------------------------------------------------------------- generators with float parameters


@gradient_rules.register("Range")
def _range_grad(ctx, g):
    # out[i] = start + i * delta; the count depends on limit only through a floor (derivative 0).
    steps = Tensor._from_value(constant(np.arange(g.shape[0], dtype=g.dtype.numpy_dtype), g.dtype, g.device))
    return g.sum(), None, (g * steps).sum()


@gradient_rules.register("OneHot")
def _one_hot_grad(ctx, g):
    # out = off + (on - off) * hot, with values = [off, on]: each takes the sum of the gradient
    # over the positions it fills.
    # The 0/1 mask is exact in float32, the values type onnxruntime's OneHot supports everywhere.
    off_on = Tensor._from_value(constant(np.array([0, 1], dtype=np.float32), dtypes.float32, g.device))
    hot = apply_op(
        "OneHot", (ctx.input(0).detach(), ctx.input_value(1), off_on), {"axis": ctx.attrs.get("axis", -1)}
    ).to(g.dtype)
    on = (g * hot).sum()
    return None, None, apply_op("Concat", ((g.sum() - on).reshape(1), on.reshape(1)), {"axis": 0})


# ---------------------------------------------------------------- quantization


@gradient_rules.register("DequantizeLinear")
def _dequantize_linear_grad(ctx, g):
    # y = (x - zero_point) * scale, x and zero_point integers: only the scale takes a gradient,
    # the sum of g * (x - zero_point) over the elements each scale entry multiplies (the whole
    # tensor, one slice along ``axis``, or one block of ``block_size`` along it).
    x_shape, scale_shape = ctx.input_shape(0), ctx.input_shape(1)
    rank = len(x_shape)
    zero_point = ctx.input_value(2) if ctx.num_inputs > 2 else None
    ones = Tensor._from_value(constant(np.ones(scale_shape, dtype=g.dtype.numpy_dtype), g.dtype, g.device))
    attrs = {key: value for key, value in ctx.attrs.items() if key in ("axis", "block_size")}
    shifted = apply_op("DequantizeLinear", (ctx.input(0).detach(), ones, zero_point), attrs)
    product = g * shifted
    if len(scale_shape) == 0 or scale_shape == (1,):
        return None, product.sum().reshape(scale_shape), None
    axis = normalize_axes([ctx.attrs.get("axis", 1)], rank)[0]
    block = int(ctx.attrs.get("block_size", 0) or 0)
    if not block:
        others = [dim for dim in range(rank) if dim != axis]
        return None, product.sum(dim=others) if others else product, None
    if x_shape[axis] % block:
        raise NotImplementedError("gradient of blocked DequantizeLinear whose axis is not a multiple of block_size")
    split = tuple(x_shape[:axis]) + (x_shape[axis] // block, block) + tuple(x_shape[axis + 1 :])
    return None, product.reshape(split).sum(axis + 1), None


# ---------------------------------------------------------------- spectral


def _along(rank: int, axis: int, before: int, after: int) -> Value:
    pads = [0] * (2 * rank)
    pads[axis], pads[rank + axis] = before, after
    return int64_constant(pads)


@gradient_rules.register("DFT")
def _dft_grad(ctx, g):
    # DFT is linear: y = S F P x, with P padding or cutting the signal to dft_length N, F the N-point
    # transform and S keeping the onesided half. The gradient is the adjoint P^T F^H S^T g, where
    # F^H is N times the inverse transform (1/N times the forward one for inverse=1); a real
    # signal keeps the real part.
    shape = ctx.input_shape(0)
    rank = len(shape)
    axis_value = ctx.input_value(2) if ctx.num_inputs > 2 else None
    axis = int(data_of(axis_value)) if axis_value is not None else int(ctx.attrs.get("axis", -2))
    axis %= rank
    length_value = ctx.input_value(1) if ctx.num_inputs > 1 else None
    length = int(data_of(length_value)) if length_value is not None else shape[axis]
    inverse = int(ctx.attrs.get("inverse", 0))
    if inverse and ctx.attrs.get("onesided", 0):
        return _irfft_grad(g, shape, axis, length if length_value is not None else 2 * (shape[axis] - 1)), None, None
    if ctx.attrs.get("onesided", 0) and g.shape[axis] < length:
        g = apply_op("Pad", (g, _along(rank, axis, 0, length - g.shape[axis])))
    adjoint = apply_op("DFT", (g, None, int64_constant(axis)), {"inverse": 1 - inverse}, "FftBackward0")
    adjoint = adjoint * (1.0 / length if inverse else float(length))
    return _shaped_like_input(adjoint, shape, axis, length), None, None


def _shaped_like_input(adjoint, shape: tuple, axis: int, extent: int):
    """An adjoint of ``extent`` along ``axis`` cut or zero-padded to the input's extent, and its real
    part where the input is a real signal (last dim 1)."""
    if extent > shape[axis]:
        adjoint = apply_op(
            "Slice", (adjoint, int64_constant([0]), int64_constant([shape[axis]]), int64_constant([axis]))
        )
    elif extent < shape[axis]:
        adjoint = apply_op("Pad", (adjoint, _along(len(shape), axis, 0, shape[axis] - extent)))
    if shape[-1] == 1:
        adjoint = apply_op("Slice", (adjoint, int64_constant([0]), int64_constant([1]), int64_constant([-1])))
    return adjoint


def _irfft_grad(g, shape: tuple, axis: int, length: int):
    # y = irfft(X, n) reads bins 0..n//2 (zero past the given ones) and weighs each by c_k / n, with
    # c_k = 2 for a bin standing for its mirror too and 1 for the DC and (even n) Nyquist bins, whose
    # imaginary parts it ignores. The gradient with respect to bin k's real and imaginary parts is
    # then c_k / n times rfft(g)'s, zero for the ignored parts and the bins past n//2.
    rank = len(shape)
    bins = length // 2 + 1
    per_bin = np.full((bins, 2), 2.0 / length)
    per_bin[0] = [1.0 / length, 0.0]
    if length % 2 == 0:
        per_bin[-1] = [1.0 / length, 0.0]
    weights = per_bin.reshape((bins,) + (1,) * (rank - 2 - axis) + (2,)).astype(g.dtype.numpy_dtype)
    spectrum = apply_op("DFT", (g, None, int64_constant(axis)), {"onesided": 1}, "FftC2RBackward0")
    adjoint = spectrum * Tensor._from_value(constant(weights, g.dtype, g.device))
    return _shaped_like_input(adjoint, shape, axis, bins)
