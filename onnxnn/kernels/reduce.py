"""Reduction kernels: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax/ArgMin,
CumSum/CumProd and TopK.

Axes come from the ``axes`` input (opset 18; 13 for ReduceSum) or, for older models, the
attribute. No axes reduces everything unless ``noop_with_empty_axes`` is set. Reducing an empty
set gives the operation's identity (0 for sums, 1 for products, -inf for max, +inf for min).
"""

from __future__ import annotations

import numpy as np

from ._common import (
    axes_argument,
    highest,
    lowest,
    normalize_axis,
    reduce_max as _max,
    reduce_min as _min,
    reduce_sum as _sum,
    to_scalar,
)
from ..ir.kernel_registry import NUMERIC, kernels

__all__: list[str] = []


def _reduction(op_type: str, types=NUMERIC):
    """Registers ``function(xp, x, axes, keepdims)`` as the kernel of a Reduce* op."""

    def decorate(function):
        @kernels.register(op_type, types=types)
        def kernel(xp, inputs, attrs):
            x = inputs[0]
            axes = axes_argument(inputs, attrs)
            if axes is None:
                # noop_with_empty_axes reduces over no axis: ReduceL1 still takes |x|, ReduceLogSum
                # log(x), as the ops' ONNX function definitions (opset 18) do.
                axes = () if attrs.get("noop_with_empty_axes", 0) else tuple(range(x.ndim))
            else:
                axes = tuple(sorted({normalize_axis(axis, x.ndim) for axis in axes}))
            return [function(xp, x, axes, bool(attrs.get("keepdims", 1)))]

        kernel.__name__ = op_type
        return function

    return decorate


def _count(x, axes) -> int:
    count = 1
    for axis in axes:
        count *= x.shape[axis]
    return count


def _accumulator(x):
    """The dtype a sum accumulates in: the input's own (int32 sums stay int32, as in ONNX)."""
    return x.dtype


@_reduction("ReduceSum")
def reduce_sum(xp, x, axes, keepdims):
    return _sum(xp, x, axes, keepdims, _accumulator(x))


@_reduction("ReduceSumSquare")
def reduce_sum_square(xp, x, axes, keepdims):
    return _sum(xp, x * x, axes, keepdims, _accumulator(x))


@_reduction("ReduceL1")
def reduce_l1(xp, x, axes, keepdims):
    return _sum(xp, xp.abs(x), axes, keepdims, _accumulator(x))


@_reduction("ReduceL2")
def reduce_l2(xp, x, axes, keepdims):
    squares = _sum(xp, x * x, axes, keepdims, _accumulator(x))
    return xp.sqrt(squares).astype(x.dtype, copy=False)


@_reduction("ReduceMean")
def reduce_mean(xp, x, axes, keepdims):
    total = _sum(xp, x, axes, keepdims, _accumulator(x))
    count = _count(x, axes)
    if not count:
        # ONNX leaves the mean of nothing undefined; onnxruntime gives 0 (the sum), and so do these
        # kernels, so that an imported graph (an EmbeddingBag's empty bag) computes the same on both.
        # onnxnn's own mean() records PyTorch's NaN explicitly (runtime/ops/reduce.py).
        return total
    if x.dtype.kind in "iu":
        # Integer means truncate toward zero, as integer division does in ONNX.
        return xp.trunc(total / count).astype(x.dtype)
    return total / x.dtype.type(count)


@_reduction("ReduceProd")
def reduce_prod(xp, x, axes, keepdims):
    return xp.prod(x, axis=axes, keepdims=keepdims, dtype=_accumulator(x))


def _reduced_shape(x, axes, keepdims) -> tuple:
    return tuple(1 if axis in axes else size for axis, size in enumerate(x.shape) if keepdims or axis not in axes)


@_reduction("ReduceMax", types=NUMERIC | {"bool"})
def reduce_max(xp, x, axes, keepdims):
    if x.size == 0:
        return xp.full(_reduced_shape(x, axes, keepdims), lowest(x.dtype), dtype=x.dtype)
    return _max(xp, x, axes, keepdims)


@_reduction("ReduceMin", types=NUMERIC | {"bool"})
def reduce_min(xp, x, axes, keepdims):
    if x.size == 0:
        return xp.full(_reduced_shape(x, axes, keepdims), highest(x.dtype), dtype=x.dtype)
    return _min(xp, x, axes, keepdims)


@_reduction("ReduceLogSum")
def reduce_log_sum(xp, x, axes, keepdims):
    return xp.log(_sum(xp, x, axes, keepdims, _accumulator(x)))


@_reduction("ReduceLogSumExp")
def reduce_log_sum_exp(xp, x, axes, keepdims):
    if x.size == 0:
        return xp.full(_reduced_shape(x, axes, keepdims), -np.inf, dtype=x.dtype)
    peak = _max(xp, x, axes, True)
    # An all -inf (or inf) slice would give inf - inf = nan: shift by 0 there instead.
    peak = xp.where(xp.isfinite(peak), peak, x.dtype.type(0))
    total = _sum(xp, xp.exp(x - peak), axes, True)
    result = xp.log(total) + peak
    if not keepdims:
        result = result.reshape(_reduced_shape(x, axes, False))
    return result


# ---------------------------------------------------------------- ArgMax / ArgMin


def _arg_reduction(function_name: str):
    def kernel(xp, inputs, attrs):
        x = inputs[0]
        if x.ndim == 0:
            x = x.reshape(1)
        axis = normalize_axis(attrs.get("axis", 0), x.ndim)
        function = getattr(xp, function_name)
        if attrs.get("select_last_index", 0):
            index = (x.shape[axis] - 1) - function(xp.flip(x, axis), axis=axis)
        else:
            index = function(x, axis=axis)
        if attrs.get("keepdims", 1):
            index = xp.expand_dims(index, axis)
        return [index.astype(np.int64, copy=False)]

    return kernel


kernels.register("ArgMax", types=NUMERIC)(_arg_reduction("argmax"))
kernels.register("ArgMin", types=NUMERIC)(_arg_reduction("argmin"))


# ---------------------------------------------------------------- cumulative ops


def _cumulative(function_name: str, identity: int):
    def kernel(xp, inputs, attrs):
        x = inputs[0]
        axis = normalize_axis(int(to_scalar(inputs[1])), x.ndim)
        reverse = attrs.get("reverse", 0)
        if reverse:
            x = xp.flip(x, axis)
        result = getattr(xp, function_name)(x, axis=axis, dtype=x.dtype)
        if attrs.get("exclusive", 0):
            # Shift by one along the axis: the first element becomes the identity.
            head_shape = list(x.shape)
            head_shape[axis] = 1
            head = xp.full(head_shape, identity, dtype=x.dtype)
            body = xp.take(result, xp.arange(x.shape[axis] - 1), axis=axis)
            result = xp.concatenate([head, body], axis=axis)
        if reverse:
            result = xp.flip(result, axis)
        return [result]

    return kernel


kernels.register("CumSum", types=NUMERIC)(_cumulative("cumsum", 0))
kernels.register("CumProd", types=NUMERIC)(_cumulative("cumprod", 1))


def _descending_order(xp, x, axis: int):
    """Positions sorting ``x`` from largest to smallest along ``axis``, ties in index order (ONNX: the
    lower index first), NaN the largest (as PyTorch's topk): a stable ascending sort of reversed keys."""
    if x.dtype.kind in "iu":
        # ~x is -x - 1 for signed and max - x for unsigned integers: reversed order, never overflowing
        # (-x maps the most negative integer onto itself).
        return xp.argsort(xp.invert(x), axis=axis, kind="stable")
    nan = xp.isnan(x)
    if not nan.any():
        return xp.argsort(xp.negative(x), axis=axis, kind="stable")
    # NaN before +inf, both before the rest: lexsort's last key sorts first, the others break its ties.
    keys = xp.where(nan, x.dtype.type(-np.inf), xp.negative(x))
    return xp.lexsort((xp.logical_not(nan), keys), axis=axis)


@kernels.register("TopK", types=NUMERIC)
def top_k(xp, inputs, attrs):
    x = inputs[0]
    k = int(to_scalar(inputs[1])) if len(inputs) > 1 and inputs[1] is not None else int(attrs["k"])
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    if attrs.get("largest", 1):
        order = _descending_order(xp, x, axis)
    else:
        order = xp.argsort(x, axis=axis, kind="stable")
    order = xp.take(order, xp.arange(k), axis=axis)
    values = xp.take_along_axis(x, order, axis=axis)
    return [values, order.astype(np.int64, copy=False)]
