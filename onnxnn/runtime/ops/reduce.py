"""Reductions: ReduceSum/Mean/Max/Min/Prod and ArgMax/ArgMin, with PyTorch's sum/mean/max/... on top.

This module defines ``sum``, ``max``, ``min``, ``all`` and ``any``: Python's own are reached as ``builtins.*``.
"""

from __future__ import annotations

import builtins
from collections import namedtuple

from ...ir import dtypes
from ...ir.registry import gradient_rules, non_differentiable, shape_rules
from ._common import Tensor, apply_op, distinct_dims, int64_constant, normalize_axes, with_zero_gradients
from . import comparison as _c
from .clamping import nan_everywhere
from .elementwise import maximum, minimum, onnx_sign, where
from .opmath import REDUCED_FLOATS, rounded, widened
from ..realization import data_of

_REDUCE_OPS = (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceLogSum",
)


def _reduced_axes(inputs, attrs) -> list[int]:
    rank = len(inputs[0].shape)
    axes_value = inputs[1] if len(inputs) > 1 else None
    if axes_value is None:
        axes = attrs.get("axes")
        if axes is None:
            return [] if attrs.get("noop_with_empty_axes", 0) else list(range(rank))
    else:
        axes = data_of(axes_value).tolist()  # data-dependent axes are realized first (principle 2)
        if not axes and not attrs.get("noop_with_empty_axes", 0):
            return list(range(rank))
    return normalize_axes(axes, rank)


def _kept_shape(shape: tuple, axes: list[int]) -> tuple:
    return tuple(1 if axis in axes else size for axis, size in enumerate(shape))


@shape_rules.register(*_REDUCE_OPS)
def _reduce_shape(inputs, attrs):
    shape = inputs[0].shape
    axes = _reduced_axes(inputs, attrs)
    if attrs.get("keepdims", 1):
        return [(_kept_shape(shape, axes), inputs[0].dtype)]
    return [(tuple(size for axis, size in enumerate(shape) if axis not in axes), inputs[0].dtype)]


@shape_rules.register("ArgMax", "ArgMin")
def _arg_reduce_shape(inputs, attrs):
    shape = inputs[0].shape
    axis = normalize_axes([attrs.get("axis", 0)], len(shape))[0]
    if attrs.get("keepdims", 1):
        return [(_kept_shape(shape, [axis]), dtypes.int64)]
    return [(shape[:axis] + shape[axis + 1 :], dtypes.int64)]


non_differentiable.mark("ArgMax", "ArgMin")


def _gradient_with_kept_dims(ctx, g: Tensor) -> tuple[Tensor, list[int]]:
    """The output gradient reshaped to keep the reduced dims (size 1), and those dims."""
    axes = _reduced_axes(ctx.node.inputs, ctx.attrs)
    return g.reshape(_kept_shape(ctx.input_shape(0), axes)), axes


@gradient_rules.register("ReduceSum")
def _reduce_sum_grad(ctx, g):
    kept, _ = _gradient_with_kept_dims(ctx, g)
    return kept.expand(ctx.input_shape(0)), None


@gradient_rules.register("ReduceMean")
def _reduce_mean_grad(ctx, g):
    kept, axes = _gradient_with_kept_dims(ctx, g)
    count = 1
    for axis in axes:
        count *= ctx.input_shape(0)[axis]
    return (kept / builtins.max(count, 1)).expand(ctx.input_shape(0)), None


@gradient_rules.register("ReduceMax", "ReduceMin")
def _reduce_extremum_grad(ctx, g):
    kept, axes = _gradient_with_kept_dims(ctx, g)
    x = ctx.input(0)
    out = ctx.output().reshape(kept.shape)
    chosen = x == out
    if x.dtype.is_floating_point:
        # A line holding NaN has NaN as its extremum (``_extremum``), which equals nothing: its NaNs
        # take the gradient, as PyTorch's max() does (onnxruntime's own result may skip them).
        nans = x.isnan()
        line_has_nan = any(nans, axes, True)
        chosen = (line_has_nan & nans) | (~line_has_nan & chosen)  # onnxruntime has no bool Where
    mask = chosen.to(g.dtype)
    # Ties share the gradient evenly, as PyTorch's amax/amin do.
    return mask * kept / mask.sum(dim=axes, keepdim=True), None


@gradient_rules.register("ReduceProd")
def _reduce_prod_grad(ctx, g):
    # d prod / d x_i is the product of the other elements. A line without zeros takes PyTorch's
    # out / x_i. A line with zeros takes that product itself (PyTorch's exclusive products there), built
    # so that it stays right when differentiated again (Hessians) and next to a NaN or inf.
    kept, axes = _gradient_with_kept_dims(ctx, g)
    x = ctx.input(0)
    out = ctx.output().reshape(kept.shape)
    is_zero = x == 0
    nonzero = where(is_zero, 1.0, x)
    zero_count = is_zero.to(x.dtype).sum(dim=axes, keepdim=True)
    with_zeros = where(
        is_zero,
        _others_at_zero(x, is_zero, nonzero, zero_count, axes),
        _others_at_nonzero(x, is_zero, nonzero, zero_count, axes),
    )
    return kept * where(zero_count == 0, out / nonzero, with_zeros), None


def _zeros_product(x: Tensor, is_zero: Tensor, zero_count: Tensor, axes: list[int], excluded: Tensor | None) -> Tensor:
    """The product of a line's zeros, ``excluded`` (one of them, at each position) left out: its value is
    known (1 or 0), but its derivative in the zeros is not 0 where one or two zeros remain."""
    zeros_sum = where(is_zero, x, 0.0).sum(dim=axes, keepdim=True)
    if excluded is None:
        return where(zero_count == 1, zeros_sum, 0.0)  # the one zero itself; a product of two or more is flat
    # With the zero at this position out: no zero left (1), the other zero (the sum minus this one), or
    # two or more (a product with a flat first derivative).
    return where(zero_count == 1, 1.0, where(zero_count == 2, zeros_sum - excluded, 0.0))


def _others_at_zero(x: Tensor, is_zero: Tensor, nonzero: Tensor, zero_count: Tensor, axes: list[int]) -> Tensor:
    """The product of the other elements, at each zero of a line."""
    return nonzero.prod(dim=axes, keepdim=True) * _zeros_product(x, is_zero, zero_count, axes, x)


def _others_at_nonzero(x: Tensor, is_zero: Tensor, nonzero: Tensor, zero_count: Tensor, axes: list[int]) -> Tensor:
    """The product of the other elements, at each nonzero element of a line that holds a zero: 0, or NaN
    where another element is NaN or inf (0 times it). The nonzero product over ``x_i`` would be NaN at
    an infinite or NaN ``x_i`` itself, so that one takes the product of the finite elements."""
    finite = _c.isfinite(nonzero)
    finite_elements = where(finite, nonzero, 1.0)
    infinite_count = (~finite).to(x.dtype).sum(dim=axes, keepdim=True)
    others = where(
        finite,
        nonzero.prod(dim=axes, keepdim=True) / finite_elements,
        where(infinite_count == 1, finite_elements.prod(dim=axes, keepdim=True), float("nan")),
    )
    return _zeros_product(x, is_zero, zero_count, axes, None) * others


@gradient_rules.register("ReduceSumSquare")
def _reduce_sum_square_grad(ctx, g):
    kept, _ = _gradient_with_kept_dims(ctx, g)
    return kept * ctx.input(0) * 2, None


@gradient_rules.register("ReduceLogSumExp")
def _reduce_log_sum_exp_grad(ctx, g):
    kept, _ = _gradient_with_kept_dims(ctx, g)
    out = ctx.output().reshape(kept.shape)
    return kept * (ctx.input(0) - out).exp(), None


@gradient_rules.register("ReduceL2")
def _reduce_l2_grad(ctx, g):
    kept, _ = _gradient_with_kept_dims(ctx, g)
    out = ctx.output().reshape(kept.shape)
    # A zero norm takes the subgradient 0, as PyTorch's (x / 0 would be nan there).
    return kept * ctx.input(0) / where(out == 0, 1.0, out), None


@gradient_rules.register("ReduceL1")
def _reduce_l1_grad(ctx, g):
    kept, _ = _gradient_with_kept_dims(ctx, g)
    return kept * onnx_sign(ctx.input(0)), None


@gradient_rules.register("ReduceLogSum")
def _reduce_log_sum_grad(ctx, g):
    # d log(s) / dx_i = 1 / s, with s = exp(out) the sum the op took the log of.
    kept, _ = _gradient_with_kept_dims(ctx, g)
    out = ctx.output().reshape(kept.shape)
    return (kept / out.exp()).expand(ctx.input_shape(0)), None


# ---------------------------------------------------------------- tensor functions


def _dims(input: Tensor, dim) -> list[int] | None:
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    return distinct_dims(normalize_axes(dims, input.dim()))


def _reduce(op_type: str, input: Tensor, dim, keepdim: bool, name: str | None) -> Tensor:
    dims = _dims(input, dim)
    if dims == [] or input.dim() == 0:
        dims = None  # a 0-d tensor reduced over its dim 0 (or -1) is itself, as in PyTorch
    # No empty axes input over all dims: onnx's version converter cannot take one to opsets below 18.
    inputs = (input,) if dims is None else (input, int64_constant(dims))
    return apply_op(op_type, inputs, {"keepdims": int(keepdim)}, name)


def _integers_as_int64(input: Tensor, dtype) -> Tensor:
    """sum and prod accumulate bool and integer inputs in int64 unless a dtype is given (PyTorch)."""
    if dtype is not None:
        return input.to(dtype)
    if not input.dtype.is_floating_point and input.dtype is not dtypes.int64:
        return input.to(dtypes.int64)
    return input


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Sum over ``dim`` (all dims when None); bool and integer inputs sum to int64 as in PyTorch."""
    input = _integers_as_int64(input, dtype)
    if input.dtype is dtypes.bool:  # (dtype=bool) PyTorch's bool sum is "any"; ONNX's ReduceSum has no bool
        return _reduce("ReduceSum", input.to(dtypes.int64), dim, keepdim, None).to(dtypes.bool)
    return _reduce("ReduceSum", input, dim, keepdim, "SumBackward0" if dim is None else "SumBackward1")


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be either a floating point "
            f"or complex dtype. Got: {dtypes.scalar_type_name(input.dtype)}"
        )
    return recorded_mean(input, dim, keepdim, "MeanBackward0" if dim is None else "MeanBackward1")


def recorded_mean(input: Tensor, dim, keepdim: bool, name: str) -> Tensor:
    """ReduceMean over ``dim`` (all dims when None) of a float tensor; NaN where it averages no element,
    as PyTorch's 0/0 (onnxruntime's ReduceMean and onnxnn's kernels give 0 there)."""
    result = _reduce("ReduceMean", input, dim, keepdim, name)
    if input.numel() == 0 and result.numel() != 0:
        return nan_everywhere(result, name)
    return result


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Product over ``dim`` (all dims when None); bool and integer inputs multiply in int64."""
    input = _integers_as_int64(input, dtype)
    if input.dtype is dtypes.bool:  # (dtype=bool) PyTorch's bool product is "all"; ONNX's ReduceProd has no bool
        falses = _reduce("ReduceSum", input.logical_not().to(dtypes.int64), dim, keepdim, None)
        return falses == 0
    return _reduce("ReduceProd", input, dim, keepdim, "ProdBackward0")


# NaN is PyTorch's (and numpy's) extremum both ways: a max or min over elements one of which is NaN
# is NaN, and argmax/argmin point at the first NaN. ONNX leaves NaN unspecified, and onnxruntime's
# CPU ReduceMax/ReduceMin and ArgMax/ArgMin skip NaNs or not depending on where they sit
# (microsoft/onnxruntime#10514). So float extrema are recorded with their NaN made explicit:
# - values: NaN where the sum of the reduced elements' magnitudes is NaN, which happens exactly when
#   one of them is NaN (|inf| sums to inf, an overflow to inf). Abs and onnxruntime's vectorized
#   ReduceSum cost 3x a ReduceMax; an IsNaN mask reduced as integers, 12x.
# - indices: ArgMax (ArgMin) of the input with NaN as +inf (-inf): the first NaN, unless a +inf
#   (-inf) comes before it in the line, whose index is returned then (PyTorch would give the NaN's).


def holds_nan(input: Tensor, dim, keepdim: bool) -> Tensor:
    """Whether the elements along ``dim`` (all when None) of a float tensor hold a NaN."""
    return _reduce("ReduceSum", input.detach().abs(), dim, keepdim, None).isnan()


def _extremum(op_type: str, input: Tensor, dim, keepdim: bool, name: str, nan_gradient: bool = False) -> Tensor:
    """ReduceMax or ReduceMin over ``dim``, NaN where the reduced elements hold a NaN.

    There the gradient goes to the NaNs (PyTorch's max() and min(), and its vector norms), or with
    ``nan_gradient`` it is NaN at every reduced element (PyTorch's amax and amin: their rule divides by
    the count of elements equal to the result, 0 for a NaN result)."""
    result = _reduce(op_type, input, dim, keepdim, name)
    if not input.dtype.is_floating_point:
        return result
    has_nan = holds_nan(input, dim, keepdim)
    if nan_gradient:
        # Times NaN, not selected: the output gradient turns NaN on its way to the reduction, whose rule
        # then spreads NaN over the line; times 1 elsewhere, the values and gradients unchanged.
        nan, one = (Tensor._full((), value, result.dtype, result.device) for value in (float("nan"), 1.0))
        return result * where(has_nan, nan, one)
    # NaN added, not selected: the gradient still reaches the reduction, whose rule gives it to the NaNs.
    return where(has_nan, result + float("nan"), result)


def check_extent(input: Tensor, dim, function: str, error: type[Exception] = RuntimeError) -> None:
    """PyTorch's refusal of a reduction that picks an element (max/min/argmax/median/mode/...) over no
    elements (ONNX's reductions give -inf/inf): ``error`` without ``dim`` (argmax/argmin raise IndexError
    there), IndexError along an empty dim."""
    if dim is None:
        if input.numel() == 0:
            raise error(f"{function}(): Expected reduction dim to be specified for input.numel() == 0.")
        return
    if input.dim() == 0:
        return
    for axis in normalize_axes(list(dim) if isinstance(dim, (list, tuple)) else [dim], input.dim()):
        if input.shape[axis] == 0:  # an IndexError for every function, as PyTorch raises it
            raise IndexError(f"{function}(): Expected reduction dim {axis} to have non-zero size.")


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    dim = dim if dim != () else None
    check_extent(input, dim, "amax")
    return _extremum("ReduceMax", input, dim, keepdim, "AmaxBackward0", nan_gradient=True)


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    dim = dim if dim != () else None
    check_extent(input, dim, "amin")
    return _extremum("ReduceMin", input, dim, keepdim, "AminBackward0", nan_gradient=True)


MaxResult = namedtuple("max", ["values", "indices"])
MinResult = namedtuple("min", ["values", "indices"])


def _arg(op_type: str, input: Tensor, dim, keepdim: bool) -> Tensor:
    """ArgMax or ArgMin along ``dim`` (of the flattened input when None); NaN counts as the extremum:
    a line holding one gives its first NaN's index (an infinity of the same sign before it too)."""
    if not input.dtype.is_floating_point:
        return _first_arg(op_type, input, dim, keepdim)
    has_nan, first_nan = nan_position(input.detach(), dim, keepdim)
    return where(has_nan, first_nan, _first_arg(op_type, input.detach(), dim, keepdim))


def nan_position(input: Tensor, dim, keepdim: bool, last: bool = False) -> tuple[Tensor, Tensor]:
    """Whether the elements along ``dim`` (all, flattened, when None) of a float tensor hold a NaN,
    and the index of the first (``last``: the last) NaN there."""
    return holds_nan(input, dim, keepdim), _first_arg("ArgMax", _truth_values(input.isnan()), dim, keepdim, last)


def _first_arg(op_type: str, input: Tensor, dim, keepdim: bool, last: bool = False) -> Tensor:
    """ArgMax or ArgMin: the first position of the extremum (``last``: the last)."""
    if dim is None:
        flat = apply_op(op_type, (input.reshape(-1),), {"axis": 0, "keepdims": 0, "select_last_index": int(last)})
        # keepdim keeps every dim, at size 1 (PyTorch's argmax(x, None, True) of a matrix is (1, 1)).
        return flat.reshape((1,) * input.dim()) if keepdim else flat
    axis = normalize_axes([dim], input.dim())[0]
    if input.dim() == 0:
        return apply_op(op_type, (input.reshape(1),), {"axis": 0, "keepdims": 0})
    return apply_op(op_type, (input,), {"axis": axis, "keepdims": int(keepdim), "select_last_index": int(last)})


def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    if input.dtype is dtypes.bool:
        raise RuntimeError("argmax(): does not support bool input")
    check_extent(input, dim, "argmax", IndexError)
    return _arg("ArgMax", input, dim, keepdim)


def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    if input.dtype is dtypes.bool:
        raise RuntimeError("argmin(): does not support bool input")
    check_extent(input, dim, "argmin", IndexError)
    return _arg("ArgMin", input, dim, keepdim)


def max(input: Tensor, dim=None, keepdim: bool = False):
    """Without ``dim``, the largest element; with ``dim``, a ``(values, indices)`` named tuple.

    A Tensor as second argument means the elementwise maximum, as in PyTorch.
    """
    if isinstance(dim, Tensor):
        return maximum(input, dim)
    check_extent(input, dim, "max")
    if dim is None:
        return _extremum("ReduceMax", input, None, False, "MaxBackward1")
    return MaxResult(*_extremum_along(input, dim, keepdim, "ArgMax", "ReduceMax", "MaxBackward0"))


def min(input: Tensor, dim=None, keepdim: bool = False):
    """Without ``dim``, the smallest element; with ``dim``, a ``(values, indices)`` named tuple."""
    if isinstance(dim, Tensor):
        return minimum(input, dim)
    check_extent(input, dim, "min")
    if dim is None:
        return _extremum("ReduceMin", input, None, False, "MinBackward1")
    return MinResult(*_extremum_along(input, dim, keepdim, "ArgMin", "ReduceMin", "MinBackward0"))


def _extremum_along(input: Tensor, dim: int, keepdim: bool, arg_op: str, reduce_op: str, name: str):
    """(values, indices) of max/min along ``dim``.

    Float values are gathered at the returned indices, so that the gradient goes to that one
    element on ties, as PyTorch's does (ReduceMax's rule splits it evenly); where the line holds a
    NaN, the index is its first NaN's.
    """
    if input.dtype is dtypes.bool:  # neither executor has a bool ArgMax/ArgMin: as 0 and 1
        values, indices = _extremum_along(input.to(dtypes.uint8), dim, keepdim, arg_op, reduce_op, name)
        return values.to(dtypes.bool), indices
    if input.dtype.is_floating_point and input.dim() > 0:
        axis = normalize_axes([dim], input.dim())[0]
        # A line's first NaN, as PyTorch's index: the gathered value is that NaN, and takes the gradient.
        has_nan, first_nan = nan_position(input, axis, True)
        indices = where(has_nan, first_nan, _arg(arg_op, input, dim, True))
        values = apply_op("GatherElements", (input, indices), {"axis": axis}, name)
    else:
        indices = _arg(arg_op, input, dim, True)
        values = _reduce(reduce_op, input, dim, True, name)
    if not keepdim and input.dim() > 0:
        axis = normalize_axes([dim], input.dim())[0]
        values = apply_op("Squeeze", (values, int64_constant([axis])), None, name)
        indices = indices.squeeze(axis)
    return values, indices


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    if not input.dtype.is_floating_point:  # integers and bools, as PyTorch: in the default float dtype
        input = input.to(dtypes.get_default_dtype())
    if input.numel() == 0:  # no peak to shift by (amax refuses an empty dim): log(0) = -inf, as PyTorch
        return input.exp().sum(dim, keepdim).log()
    peak = amax(input, dim, keepdim=True).detach()
    # An infinite peak would give inf - inf = nan; shifting by 0 there keeps the result +-inf (PyTorch).
    peak = where(peak.abs() == float("inf"), 0.0, peak)
    result = (input - peak).exp().sum(dim, keepdim=True).log() + peak
    return result if keepdim else result.squeeze(_dims(input, dim))


def _truth_values(input: Tensor) -> Tensor:
    # Through bool first: a direct cast to int32 would truncate 0.5 to 0 (false).
    return input.to(dtypes.bool).to(dtypes.int32)


# Over no elements ReduceMin gives int32's highest value and ReduceMax its lowest (ONNX's
# identities): compared with 0, not cast, they read True for ``all`` and False for ``any``.


def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether every element over ``dim`` is nonzero; uint8 for a uint8 input, else bool (PyTorch's)."""
    return _truth_reduction("ReduceMin", input, dim, keepdim)


def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether any element over ``dim`` is nonzero; uint8 for a uint8 input, else bool (PyTorch's)."""
    return _truth_reduction("ReduceMax", input, dim, keepdim)


def _truth_reduction(op_type: str, input: Tensor, dim, keepdim: bool) -> Tensor:
    if dim is not None and not isinstance(dim, int) and len(dim) == 0:
        truth = input.to(dtypes.bool)  # an empty dim list reduces nothing here (unlike sum's)
    else:
        truth = _c.gt(_reduce(op_type, _truth_values(input), dim, keepdim, None), 0)
    return truth.to(dtypes.uint8) if input.dtype is dtypes.uint8 else truth


# The norms of ``norm`` computed from singular values, by name: linalg_jacobi fills it (it imports this
# module through sorting, so this one cannot import it).
MATRIX_NORMS: dict = {}


def norm(input: Tensor, p=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The vector ``p``-norm over ``dim`` (all elements when None); ``"fro"`` is the 2-norm, ``"nuc"``
    the nuclear norm of the matrices over ``dim``. With ``dtype``, computed in that float dtype, which
    the input's must promote to without narrowing."""
    if dtype is not None:
        check_norm_dtype("linalg.matrix_norm" if p in MATRIX_NORMS else "linalg.vector_norm", input, dtype)
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. "
            f"Got {dtypes.scalar_type_name(input.dtype)}"
        )
    if not isinstance(p, str) and (p < 0 or p == float("inf")):
        _check_norm_extent(input, p, dim)
    if p == 2 or p == "fro":
        return _reduce("ReduceL2", input, dim, keepdim, "LinalgVectorNormBackward0")
    if p in MATRIX_NORMS:  # "nuc": the sum of the singular values of the matrices over ``dim`` (the last two)
        return MATRIX_NORMS[p](input, p, (-2, -1) if dim is None else tuple(dim), keepdim)
    if isinstance(p, str):
        raise RuntimeError(f"norm: p must be a number, 'fro' or 'nuc', got '{p}'")
    if p == 1:
        return input.abs().sum(dim, keepdim)
    if p in (float("inf"), -float("inf")):
        # Not amax/amin: a line holding NaN gives its NaNs the gradient (times Abs's 0 there), as PyTorch's norms.
        dim = dim if dim != () else None
        return _extremum("ReduceMax" if p > 0 else "ReduceMin", input.abs(), dim, keepdim, "LinalgVectorNormBackward0")
    if p == 0:
        # The count of nonzero elements: it requires grad, with a zero gradient, as PyTorch's.
        count = (input != 0).to(input.dtype).sum(dim, keepdim)
        return with_zero_gradients(count, (input,), "LinalgVectorNormBackward0")
    if input.dtype in REDUCED_FLOATS:  # in float32 (opmath): the p-th powers of float16 values overflow
        return rounded(norm(widened(input), p, dim, keepdim), input.dtype)
    return root(powers(input.abs(), p).sum(dim, keepdim), p)


def check_norm_dtype(name: str, input: Tensor, dtype) -> None:
    """PyTorch's checks of a norm's ``dtype=``: a floating input, computed in a dtype it promotes to."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"{name}: Expected a floating point or complex tensor as input. Got {dtypes.scalar_type_name(input.dtype)}"
        )
    if not dtype.is_floating_point:
        raise RuntimeError(
            f"{name}: dtype should be floating point or complex, but got {dtypes.scalar_type_name(dtype)}"
        )
    if dtypes.promote_types(input.dtype, dtype) is not dtype:
        raise RuntimeError(
            f"{name}: the dtype of the input ({dtypes.scalar_type_name(input.dtype)}) should be convertible "
            f"without narrowing to the specified dtype ({dtypes.scalar_type_name(dtype)})"
        )


def _check_norm_extent(input: Tensor, p, dim) -> None:
    """PyTorch's refusal of the norms without an identity, inf's (a max) and the negative orders' (a
    min, or a root of a sum of negative powers), over no elements; 0 and positive orders give 0 there.

    The order is printed as C++ prints PyTorch's Scalar (-1.0 as -1), the dim as given (-1 stays -1),
    with no space after it, as in PyTorch's message.
    """
    order = str(p) if isinstance(p, int) else f"{float(p):g}"
    dims = [] if dim is None else [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        if input.numel() == 0:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {order} norm on an empty tensor because the operation "
                "does not have an identity"
            )
        return
    if input.dim() == 0:
        return
    for given, axis in zip(dims, normalize_axes(dims, input.dim())):
        if input.shape[axis] == 0:
            raise RuntimeError(
                f"linalg.vector_norm cannot compute the {order} norm on the dimension {given}because this "
                "dimension is empty and the operation does not have an identity"
            )


def powers(magnitudes: Tensor, p: float) -> Tensor:
    """``magnitudes ** p`` (``magnitudes`` >= 0) for a p-norm, with PyTorch's gradient: for ``p < 1``, 0
    where a magnitude is 0, where ``|x| ** p`` has an infinite slope (times Abs's 0: NaN). There it is
    the constant it is, ``0 ** p``: 0, or inf for ``p < 0`` (which makes the norm 0)."""
    if p >= 1:
        return magnitudes**p
    zero = magnitudes == 0
    safe = where(zero, 1.0, magnitudes)
    return where(zero, 0.0 if p > 0 else float("inf"), safe**p)


def root(total: Tensor, p: float) -> Tensor:
    """``total ** (1 / p)`` (``total`` >= 0, a sum of p-th powers), with a gradient of 0 where it is 0.

    As PyTorch's norms, distances and ``std``: there the root's infinite slope meets the sum's zero
    gradient, and their product would be NaN.
    """
    zero = total == 0
    safe = where(zero, 1.0, total)
    rooted = safe.sqrt() if p == 2 else safe ** (1.0 / p)
    return where(zero, 0.0, rooted)
