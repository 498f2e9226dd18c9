"""Sorting and scans: TopK and CumSum (shape and gradient rules), with PyTorch's topk, sort, argsort,
msort, kthvalue, median, cumsum, cumprod, logcumsumexp, cummax and cummin on top.

cumprod, logcumsumexp, cummax and cummin are log-depth scans (``scans.inclusive_scan``: ``ceil(log2(n))``
steps of shifted copies combined elementwise, ``O(n log n)`` work for a dim of size n) of Mul, a stable
log-add-exp (no underflow of prefixes far below the maximum, as ``log(cumsum(exp(x)))`` would) and a
(value, index) selection; autograd differentiates the recorded ops (exactly at cumprod's zeros).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ...ir.type_info import finfo
from ...ir.registry import gradient_rules, shape_rules
from ._common import (
    Tensor,
    apply_op,
    check_floating,
    int64_constant,
    normalize_axes,
    with_closed_form_gradient,
    with_zero_gradients,
)
from ..grad_mode import is_grad_enabled
from .elementwise import where as _where  # ``where`` is a local name below (gather positions)
from .indexing import gather_within
from .reduce import check_extent, holds_nan, nan_position
from .scans import inclusive_scan
from .shape import _constant_list

__all__ = [
    "topk",
    "sort",
    "argsort",
    "msort",
    "kthvalue",
    "median",
    "nanmedian",
    "cumsum",
    "cumprod",
    "logcumsumexp",
    "cummax",
    "cummin",
]

TopkResult = namedtuple("topk", ["values", "indices"])
SortResult = namedtuple("sort", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])
CummaxResult = namedtuple("cummax", ["values", "indices"])
CumminResult = namedtuple("cummin", ["values", "indices"])


# ---------------------------------------------------------------- shape and gradient rules


@shape_rules.register("TopK")
def _topk_shape(inputs, attrs):
    shape = list(inputs[0].shape)
    axis = normalize_axes([attrs.get("axis", -1)], len(shape))[0]
    k = int(_constant_list(inputs[1])[0])
    if not 0 <= k <= shape[axis]:
        raise ValueError(f"TopK: k ({k}) must be in [0, {shape[axis]}] (the size of axis {axis})")
    shape[axis] = k
    return [(tuple(shape), inputs[0].dtype), (tuple(shape), dtypes.int64)]


@gradient_rules.register("TopK")
def _topk_grad(ctx, g, *unused):
    # Each selected value came from one element: its gradient goes back there, the rest get zero.
    # The k positions are distinct, so a plain scatter suffices (onnxruntime cannot add in float16).
    shape = ctx.input_shape(0)
    axis = normalize_axes([ctx.attrs.get("axis", -1)], len(shape))[0]
    zeros = Tensor._zeros(shape, g.dtype, g.device)
    indices = ctx.output(1).detach()
    return apply_op("ScatterElements", (zeros, indices, g), {"axis": axis}, "TopkBackward0"), None


@shape_rules.register("CumSum")
def _cumsum_shape(inputs, attrs):
    return [(inputs[0].shape, inputs[0].dtype)]


@gradient_rules.register("CumSum")
def _cumsum_grad(ctx, g):
    # The transpose of a prefix sum is the suffix sum (exclusive stays exclusive).
    attrs = {"exclusive": ctx.attrs.get("exclusive", 0), "reverse": 1 - ctx.attrs.get("reverse", 0)}
    return apply_op("CumSum", (g, ctx.input_value(1)), attrs, "CumsumBackward0"), None


# ---------------------------------------------------------------- sorting


def _axis(input: Tensor, dim: int) -> int:
    return normalize_axes([dim], input.dim())[0]


# PyTorch orders NaN above every number (sort puts NaNs last, topk takes them first); onnxruntime's
# TopK and onnxnn's kernel place them by where they sit. A float TopK therefore ranks the input with
# each NaN replaced by +inf and gathers the values at the indices it returns. TopK keeps the lower
# index first among equal keys, so NaNs keep their order among themselves. In a line holding a NaN,
# +inf ranks as the largest finite number, so that the NaNs follow it: only a line holding a NaN,
# +inf and that number (3.4e38 in float32) still ties the last two, which then keep their order
# of index. (An exact key, the input in float64 with +inf as its largest finite number, made a
# 64x10000 topk 5.5x slower instead of 1.9x.)


def _topk(input: Tensor, k: int, axis: int, largest: bool, name: str):
    if input.dim() == 0:
        # A 0-d tensor is its own top element, for k = 0 too (PyTorch's topk returns it then as well).
        values, indices = _topk(input.reshape(1), max(k, 1), 0, largest, name)
        return values.reshape(()), indices.reshape(())
    attributes = {"axis": axis, "largest": int(largest), "sorted": 1}
    if not input.dtype.is_floating_point:
        values, indices = apply_op("TopK", (input, int64_constant([k])), attributes, name)
        return values, indices
    detached = input.detach()
    is_nan = detached.isnan()
    largest_finite = finfo(input.dtype).max
    infinite_below_nan = (detached == float("inf")) & holds_nan(detached, axis, True)
    key = _where(is_nan, float("inf"), _where(infinite_below_nan, largest_finite, detached))
    _, indices = apply_op("TopK", (key, int64_constant([k])), attributes)
    return apply_op("GatherElements", (input, indices), {"axis": axis}, name), indices


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> TopkResult:
    """The ``k`` largest (or smallest) elements along ``dim`` and their indices; ONNX TopK.

    Ties keep the lower index first. Example::

        >>> onnxnn.topk(onnxnn.tensor([1., 5., 3., 4.]), 2)
        topk(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    if input.dtype is dtypes.bool:  # (sort does take bools: as 0s and 1s)
        raise RuntimeError("topk does not support bool dtypes on CPU")
    axis = _axis(input, dim)
    size = input.shape[axis] if input.dim() else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    return TopkResult(*_topk(input, k, axis, largest, "TopkBackward0"))


def sort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> SortResult:
    """Sorted values along ``dim`` and the permutation that sorts; equal values keep their order."""
    axis = _axis(input, dim)
    size = input.shape[axis] if input.dim() else 1
    if input.dtype is dtypes.bool:  # ONNX's TopK takes no bool: sorted as 0 and 1
        values, indices = sort(input.to(dtypes.uint8), dim, descending, stable)
        return SortResult(values.to(dtypes.bool), indices)
    return SortResult(*_topk(input, size, axis, descending, "SortBackward0"))


def argsort(input: Tensor, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
    return sort(input, dim, descending, stable).indices


def msort(input: Tensor) -> Tensor:
    """``sort(input, dim=0).values``."""
    return sort(input, 0).values


def _select(t: Tensor, axis: int, position: int, keepdim: bool) -> Tensor:
    picked = apply_op(
        "Slice",
        (t, int64_constant([position]), int64_constant([position + 1]), int64_constant([axis])),
        None,
        "SliceBackward0",
    )
    return picked if keepdim else picked.squeeze(axis)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> KthvalueResult:
    """The ``k``-th smallest element along ``dim`` (1-based) and its index."""
    axis = _axis(input, dim)
    check_extent(input, axis, "kthvalue")
    size = input.shape[axis] if input.dim() else 1
    if not 1 <= k <= size:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    if input.dim() == 0:
        return KthvalueResult(input, Tensor._zeros((), dtypes.int64, input.device))
    _refuse_bool(input, "kthvalue_cpu")  # after PyTorch's checks of k and dim, as its kernel's dispatch
    values, indices = _topk(input, k, axis, False, "KthvalueBackward0")
    return KthvalueResult(_select(values, axis, k - 1, keepdim), _select(indices, axis, k - 1, keepdim))


def median(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The lower median (of the flattened input without ``dim``; else ``(values, indices)`` along it).

    A line holding a NaN has the median NaN, at its first NaN's index (PyTorch's; ``nanmedian``
    skips them).
    """
    if dim is None:
        flat = input.reshape(-1)
        if flat.shape[0] == 0:
            return _no_median(input)
        _refuse_bool(input, "median_cpu")
        middle = kthvalue(flat, (flat.shape[0] + 1) // 2, 0).values
        if not input.dtype.is_floating_point:
            return middle
        return _spread_over_ties(flat, _where(holds_nan(flat, None, False), float("nan"), middle))
    axis = _axis(input, dim)
    check_extent(input, axis, "median")
    _refuse_bool(input, "median_out")
    size = input.shape[axis] if input.dim() else 1
    values, indices = kthvalue(input, (size + 1) // 2, axis, keepdim)
    if not input.dtype.is_floating_point or input.dim() == 0:
        return MedianResult(values, indices)
    has_nan, first_nan = nan_position(input, axis, True)
    # Gathered at the first NaN where a line holds one: its value, and its gradient, are that NaN's.
    kept_indices = _where(has_nan, first_nan, indices if keepdim else indices.unsqueeze(axis))
    values = gather_within(input, axis, kept_indices)
    if not keepdim:
        values, kept_indices = values.squeeze(axis), kept_indices.squeeze(axis)
    return MedianResult(values, kept_indices)


def _refuse_bool(input: Tensor, kernel: str) -> None:
    """PyTorch's selection kernels (kthvalue, median, nanmedian) have no bool version: its words."""
    if input.dtype is dtypes.bool:
        check_floating(input, kernel)


def _no_median(input: Tensor) -> Tensor:
    """The median of no elements: NaN, with a zero gradient for the (empty) input, as PyTorch's."""
    return with_zero_gradients(Tensor._full((), np.nan, input.dtype, input.device), (input,), "MedianBackward0")


def _spread_over_ties(flat: Tensor, value: Tensor) -> Tensor:
    """``value`` (one of ``flat``'s elements, or NaN where ``flat`` holds one) with its gradient
    spread evenly over the elements equal to it (over the NaNs when it is NaN), as PyTorch's
    ``median()`` without ``dim`` gives it.

    The gradient is the mean's of those elements, whose value may round differently from ``value``:
    where finite, it is corrected by ``value`` minus that mean, an exact difference of two close
    numbers, so the result is ``value`` exactly.
    """
    settled = value.detach()
    is_nan = settled.isnan()
    # onnxruntime has no bool Where: the two masks are combined with logical operators.
    ties = (is_nan & flat.isnan()) | (~is_nan & (flat == settled))
    mean = _where(ties, flat, 0.0).sum() / ties.to(flat.dtype).sum()
    rounded = mean.detach()
    return _where(rounded.isfinite(), mean + (settled - rounded), mean)


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """``median`` ignoring NaNs. The count of NaNs is data, so the input is realized."""
    if dim is not None:
        check_extent(input, dim, "median")  # PyTorch's name for both
    if input.dtype is dtypes.bool:
        return median(input, dim, keepdim)  # (its checks and words)
    data = input._realized_data()
    if not np.isnan(data).any():
        return median(input, dim, keepdim)
    # NaN sorts last (``_topk``), so the k-th of the non-NaN entries is the one at position
    # (count - 1) // 2 of each line: gather it with indices from the data.
    if dim is None:
        valid = data[~np.isnan(data)]
        flat = input.reshape(-1)
        if valid.size == 0:  # all NaN: NaN, its gradient spread over the NaNs (PyTorch's)
            return _spread_over_ties(flat, Tensor._full((), np.nan, input.dtype, input.device))
        return _spread_over_ties(flat, kthvalue(flat, (valid.size + 1) // 2, 0).values)
    axis = _axis(input, dim)
    counts = (~np.isnan(data)).sum(axis=axis, keepdims=True)
    position = np.maximum((counts - 1) // 2, 0).astype(np.int64)
    values, indices = sort(input, axis)
    where = Tensor._from_array(position, dtypes.int64, input.device)
    picked_values, picked_indices = gather_within(values, axis, where), gather_within(indices, axis, where)
    if not keepdim:
        picked_values, picked_indices = picked_values.squeeze(axis), picked_indices.squeeze(axis)
    return MedianResult(picked_values, picked_indices)


# ---------------------------------------------------------------- scans


def _scan_input(input: Tensor, dtype) -> Tensor:
    if dtype is not None:
        return input.to(dtype)
    if not input.dtype.is_floating_point and input.dtype is not dtypes.int64:
        return input.to(dtypes.int64)  # integer and bool scans accumulate in int64, as in PyTorch
    return input


def cumsum(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running sums along ``dim``; ONNX CumSum. Example::

    >>> onnxnn.cumsum(onnxnn.tensor([1, 2, 3]), 0)
    tensor([1, 3, 6])
    """
    input = _scan_input(input, dtype)
    if input.dim() == 0:
        return _scalar_scan(input, dim)
    axis = _axis(input, dim)
    if input.dtype is dtypes.bool:  # (dtype=bool) neither ONNX's CumSum nor PyTorch's kernel sums bools
        return _empty_bool_scan(input, "cumsum")
    if input.dtype is dtypes.float32:
        # PyTorch's CPU cumsum accumulates float32 in double (its error stays half an ulp; float32's
        # running sum erred by 28 ulps at 10^4 elements, 100 to 1000 from 10^5 on, on both executors).
        # float16 and bfloat16 are summed in float32 by both already, as PyTorch's are. The Casts cost
        # onnxruntime 7% at 10^4 elements and 20% at 10^7 (one thread), the kernels 10% up to 10^5
        # and 45 to 90% from 10^6 (numpy's float64 scan; a scan is memory-bound and serial anyway).
        total = apply_op("CumSum", (input.to(dtypes.float64), int64_constant(axis)), {})
        return apply_op("Cast", (total,), {"to": dtypes.float32}, "CumsumBackward0")
    return apply_op("CumSum", (input, int64_constant(axis)), {}, "CumsumBackward0")


# Floating scans accumulate as PyTorch's CPU kernels do (``acc_type``): float32 in float64, float16
# and bfloat16 in float32; the result is rounded back once.
_ACCUMULATED_IN = {dtypes.float32: dtypes.float64, dtypes.float16: dtypes.float32, dtypes.bfloat16: dtypes.float32}


def _accumulated(input: Tensor) -> Tensor:
    wide = _ACCUMULATED_IN.get(input.dtype)
    return input if wide is None else input.to(wide)


def _rounded_back(result: Tensor, dtype) -> Tensor:
    return result if result.dtype is dtype else result.to(dtype)


def cumprod(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """Running products along ``dim``: a log-depth scan of Mul (``scans.inclusive_scan``).

    Integer products are exact and wrap on overflow, as PyTorch's do. Floating products associate
    as a balanced tree where PyTorch multiplies left to right: with float32 (accumulated in float64,
    as PyTorch's CPU kernel does) the results are PyTorch's but for a rare double rounding; in
    float64 they differ from PyTorch's by a few ulps. (Unlike a sum's, a product's error does not
    shrink with the tree's depth: each of prefix i's i roundings scales the whole product, so the
    bound stays a sequential product's ``i * eps / 2`` relative, typically ``sqrt(i)`` ulps.)
    The gradient is autograd's through the Muls: exact at zeros, to any order.
    """
    input = _scan_input(input, dtype)
    if input.dim() == 0:
        return _scalar_scan(input, dim)
    axis = _axis(input, dim)
    if input.dtype is dtypes.bool:
        return _empty_bool_scan(input, "cumprod")
    (product,) = inclusive_scan((_accumulated(input),), axis, (1,), _multiplied)
    return _rounded_back(product, input.dtype)


def _empty_bool_scan(input: Tensor, name: str) -> Tensor:
    """A bool scan (``dtype=bool``): PyTorch's kernels have none, but an empty one is returned empty."""
    if input.numel() != 0:
        raise NotImplementedError(f"\"{name}_out_cpu\" not implemented for 'Bool'")  # PyTorch's words
    return input.clone()


def _multiplied(earlier: tuple[Tensor, ...], later: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return (earlier[0] * later[0],)


def logcumsumexp(input: Tensor, dim: int) -> Tensor:
    """``log(cumsum(exp(input)))`` along ``dim``, without overflow or underflow: a log-depth scan of
    a stable log-add-exp (``_log_add_exp``). Each log-add-exp passes its operands' errors on with
    weights summing to 1, so an element's error is the roundings along one path of the scan's tree,
    about ``log2(n)`` ulps of ``|result| + 1`` (PyTorch's left to right: up to n); float32 and the
    half types are accumulated wider, as ``cumprod``, so their results are PyTorch's but for a rare
    double rounding."""
    check_floating(input, "logcumsumexp_out_cpu")  # PyTorch's kernel takes floating types only
    if input.dim() == 0:
        return _scalar_scan(input, dim)
    axis = _axis(input, dim)
    (total,) = inclusive_scan((_accumulated(input),), axis, (float("-inf"),), _log_added)
    total = _rounded_back(total, input.dtype)
    if input._requires_grad and is_grad_enabled():
        total = _undefined_after_empty_prefixes(total, input)
    return total


def _undefined_after_empty_prefixes(total: Tensor, input: Tensor) -> Tensor:
    """``total`` with a NaN added to its input's gradient where a prefix is all -inf (``total`` is
    -inf): PyTorch's gradient there (``exp(input - total)``, -inf minus -inf). The scan's own is 0
    (its log-add-exp masks the NaN of two equal infinities, which must not reach a -inf entry after
    a finite one, whose gradient is 0)."""
    empty = total.detach() == float("-inf")
    zeros = Tensor._zeros(tuple(input.shape), input.dtype, input.device)
    return with_closed_form_gradient(
        total,
        (total, input),
        (empty,),
        lambda G, empty: (G, _where(empty, float("nan"), zeros)),
        "LogcumsumexpBackward0",
    )


def _log_added(earlier: tuple[Tensor, ...], later: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return (_log_add_exp(earlier[0], later[0]),)


def _log_add_exp(a: Tensor, b: Tensor) -> Tensor:
    """``log(exp(a) + exp(b))`` as ``max + log1p(exp(min - max))``, with PyTorch's special cases
    (``_log_add_exp_helper``): NaN propagates, and two equal infinities give that infinity (their
    difference would be NaN), -inf being the identity.

    The formula is symmetric, so which of two equal values is taken as the larger one changes
    neither the value nor the gradient (half to each). An identity (-inf) operand gets a zero
    gradient: ``exp(-inf)`` is 0 and the NaN of ``-inf - -inf`` is masked before any op sees it.
    """
    a_larger = a >= b  # False where either is NaN: b is then the larger, and the NaN goes through
    larger, smaller = _where(a_larger, a, b), _where(a_larger, b, a)
    equal_infinities = (a == b) & a.isinf()
    difference = _where(equal_infinities, 0.0, smaller - larger)
    return larger + difference.exp().log1p()


def _scalar_scan(input: Tensor, dim: int) -> Tensor:
    """A scan of a 0-d tensor: itself (a new tensor), ``dim`` checked as PyTorch wraps a scalar's (0 or -1)."""
    normalize_axes([dim], 1)
    return input.clone()


def _cumulative_extremum(input: Tensor, dim: int, largest: bool, result):
    """Running maxima (``largest``) or minima and their positions: a log-depth scan of (value,
    index) pairs where the later segment's extremum wins unless the earlier one's is strictly
    better. So PyTorch's rules hold: the LAST position of a repeated extremum is reported, and a
    NaN, once seen, is the extremum both ways, at the last NaN's position. The values are gathered
    from the input at the indices, so their gradient goes to the chosen positions, as PyTorch's."""
    if input.dim() == 0:
        return result(_scalar_scan(input, dim), Tensor._zeros((), dtypes.int64, input.device))
    axis = _axis(input, dim)
    if input.numel() == 0:  # no prefixes to reduce: empty values and indices of the input's shape
        return result(input.clone(), Tensor._zeros(tuple(input.shape), dtypes.int64, input.device))
    floating = input.dtype.is_floating_point
    if floating:
        identity = float("-inf") if largest else float("inf")
    else:  # the identity never wins: the later element is taken on ties
        info = np.iinfo(input.dtype.numpy_dtype)
        identity = info.min if largest else info.max
    size = input.shape[axis]
    positions = np.arange(size, dtype=np.int64).reshape([-1 if a == axis else 1 for a in range(input.dim())])
    index_line = Tensor._from_array(positions, dtypes.int64, input.device)

    def combine(earlier: tuple[Tensor, ...], later: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        (earlier_value, earlier_index), (later_value, later_index) = earlier, later
        later_wins = later_value >= earlier_value if largest else later_value <= earlier_value
        if floating:  # a NaN wins both ways, the later one among NaNs
            later_wins = later_value.isnan() | (later_wins & ~earlier_value.isnan())
        return _where(later_wins, later_value, earlier_value), _where(later_wins, later_index, earlier_index)

    _, indices = inclusive_scan((input.detach(), index_line), axis, (identity, 0), combine)
    if size == 1:  # no step ran to broadcast the positions
        indices = Tensor._zeros(tuple(input.shape), dtypes.int64, input.device)
    return result(gather_within(input, axis, indices), indices)


def cummax(input: Tensor, dim: int) -> CummaxResult:
    """Running maxima along ``dim`` and where each was found."""
    return _cumulative_extremum_of(input, dim, True, CummaxResult)


def cummin(input: Tensor, dim: int) -> CumminResult:
    """Running minima along ``dim`` and where each was found."""
    return _cumulative_extremum_of(input, dim, False, CumminResult)


def _cumulative_extremum_of(input: Tensor, dim: int, largest: bool, result):
    if input.dtype is dtypes.bool:  # scanned as 0 and 1 (uint8): ordered, with identities 0 and 255
        values, indices = _cumulative_extremum(input.to(dtypes.uint8), dim, largest, result)
        return result(values.to(dtypes.bool), indices)
    return _cumulative_extremum(input, dim, largest, result)
