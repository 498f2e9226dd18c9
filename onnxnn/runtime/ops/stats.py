"""Statistics of PyTorch's API: std_mean/var_mean, cov/corrcoef, dist/cdist, trapezoid,
and the functions whose result shape depends on the data (unique, unique_consecutive, bincount,
histc, mode).

The data-dependent ones read their input at the call, as PyTorch synchronizes with the device for
them; their results are constants of the graph (bincount's and histc's counts carry no gradient in
PyTorch either). ``mode``'s values are gathered from the input at the positions found, so its
gradient flows as PyTorch's does.
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np

from ...ir import dtypes
from ._common import Tensor, broadcast_shapes, normalize_axes, with_zero_gradients
from . import comparison as _c
from . import elementwise as _e
from . import reduce as _r
from . import variance as _v
from .reduce import check_extent
from .indexing import gather_within
from .sorting import cumsum
from ..tensor import outside_autocast

__all__ = [
    "std_mean",
    "var_mean",
    "cov",
    "corrcoef",
    "dist",
    "cdist",
    "trapezoid",
    "trapz",
    "cumulative_trapezoid",
    "unique",
    "unique_consecutive",
    "bincount",
    "histc",
    "mode",
]

ModeResult = namedtuple("mode", ["values", "indices"])


def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(var, mean)`` over ``dim``."""
    dim, unbiased = _v.unbiased_overload(dim, unbiased)
    return (_v.var(input, dim, unbiased, keepdim, correction=correction), _r.mean(input, dim, keepdim))


def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(std, mean)`` over ``dim``."""
    dim, unbiased = _v.unbiased_overload(dim, unbiased)
    return (_v.std(input, dim, unbiased, keepdim, correction=correction), _r.mean(input, dim, keepdim))


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None):
    """Covariance of the variables in the rows of ``input`` (observations in columns).

    As PyTorch's: the weights are checked against their data (not negative, a nonzero sum), a
    normalizer ``<= 0`` (``correction`` at least the observations' weight) warns and divides by 0,
    and the result is squeezed (a single variable's covariance is 0-d).
    """
    if input.dim() > 2:
        raise RuntimeError(
            f"cov(): expected input to have two or fewer dimensions but got an input with {input.dim()} dimensions"
        )
    if input.dtype is dtypes.bool:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    x = _e._floating(x)
    observations = x.shape[1]
    _check_cov_weights("fweights", fweights, observations)
    _check_cov_weights("aweights", aweights, observations)
    weights = None
    if fweights is not None:
        weights = fweights.to(x.dtype)
    if aweights is not None:
        weights = aweights.to(x.dtype) if weights is None else weights * aweights.to(x.dtype)
    if weights is None:
        centered = x - x.mean(1, keepdim=True)
        norm = observations - correction
        product = centered @ centered.transpose(0, 1)
    else:
        total = weights.sum()
        if total.item() == 0:
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        centered = x - (x * weights).sum(1, keepdim=True) / total
        if correction == 0 or aweights is None:
            norm = total - correction
        else:
            norm = total - correction * (weights * aweights.to(x.dtype)).sum() / total
        product = (centered * weights) @ centered.transpose(0, 1)
    if (norm.item() if isinstance(norm, Tensor) else norm) <= 0:
        warnings.warn(
            "cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of observations.",
            stacklevel=2,
        )
        norm = 0
    result = product / norm
    return result.reshape(()) if result.shape == (1, 1) else result


def _check_cov_weights(name: str, weights: Tensor | None, observations: int) -> None:
    """PyTorch's checks of cov's ``fweights`` (integers) or ``aweights`` (floats), in its order and words."""
    if weights is None:
        return
    if weights.dim() > 1:
        raise RuntimeError(
            f"cov(): expected {name} to have one or fewer dimensions but got {name} with {weights.dim()} dimensions"
        )
    integral = name == "fweights"
    if (
        (weights.dtype.is_floating_point or weights.dtype is dtypes.bool)
        if integral
        else not weights.dtype.is_floating_point
    ):
        kind = "integral" if integral else "floating point"
        raise RuntimeError(
            f"cov(): expected {name} to have {kind} dtype but got {name} with "
            f"{dtypes.scalar_type_name(weights.dtype)} dtype"
        )
    if weights.numel() != observations:
        raise RuntimeError(
            f"cov(): expected {name} to have the same numel as there are observations in the input "
            f"but got {weights.numel()} != {observations}"
        )
    if observations and np.asarray(weights._realized_data()).min() < 0:
        raise RuntimeError(f"cov(): {name} cannot be negative")


def corrcoef(input: Tensor) -> Tensor:
    """Pearson correlation coefficients of the rows, clipped to [-1, 1] as PyTorch."""
    if input.dim() > 2:
        raise RuntimeError(
            f"corrcoef(): expected input to have two or fewer dimensions but got an input with {input.dim()} dimensions"
        )
    c = cov(input)
    if c.dim() == 0:
        return c / c
    stddev = c.diagonal().sqrt()
    return (c / stddev.unsqueeze(1) / stddev.unsqueeze(0)).clamp(-1, 1)


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm of ``input - other``."""
    return _r.norm(input - other, p)


_COMPUTE_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@outside_autocast("cdist")
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distances between each row of ``x1`` and each row of ``x2`` (batched over leading dims).

    Args:
        x1: ``(B, P, M)``.
        x2: ``(B, R, M)``, of ``x1``'s dtype.
        p: the norm's order, ``0`` to ``inf``. Default: 2.
        compute_mode: one of PyTorch's three names, checked; every mode computes from the pairwise
            differences (not the ``|a|^2 + |b|^2 - 2ab`` matmul form, which cancels).

    Example::

        >>> onnxnn.cdist(onnxnn.tensor([[0.0, 0.0]]), onnxnn.tensor([[3.0, 4.0], [0.0, 1.0]])).tolist()
        [[5.0, 1.0]]
    """
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.dim() < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.dim()}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(
                f"cdist only supports floating-point dtypes, {name} got: {dtypes.scalar_type_name(x.dtype)}"
            )
    if not p >= 0:  # NaN too
        raise RuntimeError("cdist only supports non-negative p values")
    if x1.dtype != x2.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_type_name(x1.dtype)} but found {dtypes.scalar_type_name(x2.dtype)}"
        )
    batch = broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    shape = (*batch, x1.shape[-2], x2.shape[-2])
    if 0 in shape or x1.shape[-1] == 0:
        return empty_distances(shape, (x1, x2), "CdistBackward0")
    return norm_of_differences(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, "CdistBackward0")


def empty_distances(shape: tuple, inputs: tuple, name: str) -> Tensor:
    """The distances when there are no pairs or no coordinates: zeros, with zero gradients.

    Recorded as a constant: differences with a zero-size axis send zero-size tensors through the
    gradient graph, which onnxruntime's Reduce and ScatterElements kernels reject.
    """
    zeros = Tensor._zeros(shape, inputs[0].dtype, inputs[0].device)
    return with_zero_gradients(zeros, inputs, name)


def norm_of_differences(differences: Tensor, p: float, name: str) -> Tensor:
    """The ``p``-norm over the last dim of ``differences``, with PyTorch's distance gradients: 0 for
    a distance of 0 (``reduce.root``), and for ``p < 1`` 0 at each zero difference too, where
    ``|d| ** p`` has an infinite slope. ``p = 0`` counts the nonzero differences, NaN where one is NaN
    (PyTorch's ``min(ceil(|d|), 1)`` per term), with a zero gradient (``name`` the gradient's, as
    PyTorch's cdist and pdist require grad then too)."""
    if p == 0:
        fixed = differences.detach()
        terms = _e.where(_c.isnan(fixed), fixed, _c.ne(fixed, 0).to(fixed.dtype))
        count = _r.sum(terms, -1)
        return with_zero_gradients(count, (differences,), name)
    if p == float("inf"):
        return _largest_magnitude(differences)
    if p == 2:
        return _r.root(_r.sum(differences * differences, -1), 2)
    return _r.root(_r.sum(_r.powers(_e.abs(differences), p), -1), p)


def _largest_magnitude(differences: Tensor) -> Tensor:
    """The largest ``|d|`` over the last dim, with PyTorch's cdist/pdist gradient: each difference tied
    at the largest magnitude takes the whole gradient times its sign (amax, and so ``dist`` and
    ``vector_norm``, share it evenly among the ties instead)."""
    if differences.shape[-1] == 0:
        return _r.sum(differences, -1)  # no coordinates: a distance of 0, as PyTorch's
    magnitudes = _e.abs(differences)
    fixed = magnitudes.detach()
    largest = _r.amax(fixed, -1)
    # Each tied magnitude minus itself: exactly 0, with the magnitude's gradient. An infinite distance
    # (inf - inf there) is kept as it is, without a gradient (PyTorch's is NaN).
    slack = _r.sum(_e.where(_c.eq(fixed, largest.unsqueeze(-1)), magnitudes - fixed, 0.0), -1)
    return _e.where(_c.isinf(largest), largest, largest + slack)


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: spacing ``dx`` (default 1) or sample points ``x``."""
    if y.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    axis = normalize_axes([dim], y.dim())[0]
    if y.shape[axis] == 0:
        return _r.sum(y, axis)
    if x is not None:
        _refuse_bools("trapezoid", "`x` or `y`", y, x)
        left, right = _ends(y, axis)
        return _r.sum((right + left) * _steps(x, y, axis, "trapezoid"), axis) / 2
    _refuse_bools("trapezoid", "`y`", y)
    left, right = _ends(y, axis)
    return _r.sum(right + left, axis) * ((1.0 if dx is None else dx) / 2)


def _refuse_bools(name: str, described: str, *tensors: Tensor) -> None:
    if any(tensor.dtype is dtypes.bool for tensor in tensors):
        raise RuntimeError(f"{name}: received a bool input for {described}, but bool is not supported")


def _ends(t: Tensor, axis: int) -> tuple[Tensor, Tensor]:
    """``t``'s slices ``[:-1]`` and ``[1:]`` along ``axis`` (both empty where ``t`` is)."""
    count = max(t.shape[axis] - 1, 0)
    return t.narrow(axis, 0, count), t.narrow(axis, t.shape[axis] - count, count)


def _steps(x: Tensor, y: Tensor, axis: int, name: str) -> Tensor:
    """The spacings of the sample points ``x`` along ``axis`` of ``y``, as PyTorch lays ``x`` out: a 1-D
    ``x`` along that dim, one of fewer dims than ``y`` with leading dims of 1 (then broadcast)."""
    if x.dim() == 1:
        if x.shape[0] != y.shape[axis]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        x = x.reshape(tuple(x.shape[0] if index == axis else 1 for index in range(y.dim())))
    elif x.dim() < y.dim():
        x = x.reshape((1,) * (y.dim() - x.dim()) + tuple(x.shape))
    left, right = _ends(x, axis)
    return right - left


def trapz(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """Running trapezoidal integrals along ``dim`` (one fewer element than ``y``; none for an empty dim)."""
    if y.dim() == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    axis = normalize_axes([dim], y.dim())[0]
    if x is not None:
        _refuse_bools("cumulative_trapezoid", "`x` or `y`", y, x)
        steps = _steps(x, y, axis, "cumulative_trapezoid")
        left, right = _ends(y, axis)
        areas = (right + left) * steps / 2
    else:
        left, right = _ends(y, axis)
        areas = (right + left) * ((1.0 if dx is None else dx) / 2)
    return cumsum(areas, axis)


# ---------------------------------------------------------------- shapes that depend on the data


def _constant(array: np.ndarray, like: Tensor, value_dtype=None) -> Tensor:
    value_dtype = value_dtype or like.dtype
    return Tensor._from_array(np.asarray(array, dtype=value_dtype.numpy_dtype, order="C"), value_dtype, like.device)


def unique(
    input: Tensor,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
):
    """The distinct values (sorted), with the inverse indices and counts when asked. Reads the data."""
    data = np.asarray(input._realized_data())
    if input.dtype is dtypes.bfloat16:
        # ml_dtypes' bfloat16 sorts and compares NaN wrongly in numpy's unique; float32 holds every value.
        data = data.astype(np.float32)
    if dim is None:
        # Each NaN is a value of its own, as in PyTorch (numpy merges them by default).
        values, inverse, counts = np.unique(data.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
        inverse = inverse.reshape(data.shape)
    else:
        axis = _unique_axis(input, dim)
        values, inverse, counts = np.unique(data, return_inverse=True, return_counts=True, axis=axis)
        inverse = inverse.reshape(-1)
    result = [_constant(values, input)]
    if return_inverse:
        result.append(_constant(inverse, input, dtypes.int64))
    if return_counts:
        result.append(_constant(counts, input, dtypes.int64))
    return result[0] if len(result) == 1 else tuple(result)


def _unique_axis(input: Tensor, dim: int) -> int:
    """``dim`` of ``unique`` or ``unique_consecutive``, checked as PyTorch's: a 0-d tensor has none, and
    a tensor with a zero-size dim takes only that dim (its slices then are none: empty results)."""
    if input.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    axis = normalize_axes([dim], input.dim())[0]
    zero_sized = sum(size == 0 for size in input.shape)
    if input.shape[axis] == 0 and zero_sized > 1:
        raise RuntimeError("Number of zero sized dimensions is more than one, so unique cannot be applied ")
    if input.shape[axis] != 0 and zero_sized:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    return axis


def unique_consecutive(
    input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
):
    """Collapses runs of equal consecutive values (slices along ``dim``). Reads the data."""
    data = np.asarray(input._realized_data())
    if dim is None:
        flat = data.reshape(-1)
        starts = np.concatenate([[True], flat[1:] != flat[:-1]]) if flat.size else np.zeros(0, bool)
        values = flat[starts]
        inverse = (np.cumsum(starts) - 1).reshape(data.shape)
    else:
        axis = _unique_axis(input, dim)
        # One row per slice along the dim (its width given: -1 cannot be read beside an extent of 0).
        moved = np.moveaxis(data, axis, 0).reshape(data.shape[axis], int(np.prod(np.delete(data.shape, axis))))
        changed = (moved[1:] != moved[:-1]).any(axis=1)
        starts = np.concatenate([[True], changed]) if moved.shape[0] else np.zeros(0, bool)
        values = np.take(data, np.flatnonzero(starts), axis=axis)
        inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(np.flatnonzero(starts), starts.size))
    result = [_constant(values, input)]
    if return_inverse:
        result.append(_constant(inverse, input, dtypes.int64))
    if return_counts:
        result.append(_constant(counts, input, dtypes.int64))
    return result[0] if len(result) == 1 else tuple(result)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Counts of each value of a 1-D non-negative integer tensor (sums of ``weights`` when given). Reads the data."""
    if input.dtype.is_floating_point or input.dtype is dtypes.bool:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.dim() != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    data = np.asarray(input._realized_data()).astype(np.int64)
    if data.size and data.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return _constant(np.bincount(data, minlength=minlength), input, dtypes.int64)
    if weights.dim() != 1 or weights.shape[0] != input.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    weight_data = np.asarray(weights._realized_data(), dtype=np.float64)
    # PyTorch's CPU kernel sums float weights in float and every other dtype (half ones too) in double.
    target = dtypes.float32 if weights.dtype is dtypes.float32 else dtypes.float64
    return _constant(np.bincount(data, weight_data, minlength=minlength), weights, target)


def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
    """Histogram with ``bins`` equal bins on [min, max] (the data's range when both are equal); values outside
    it and NaNs are ignored. Reads the data.

    Binned as PyTorch's CPU kernel: in the input's dtype, bin ``int((x - min) * bins / (max - min))``,
    the value ``max`` in the last bin, so values on decimal edges land where PyTorch puts them.

    Example::

        >>> onnxnn.histc(onnxnn.tensor([0.1, 0.2, 0.3, 0.7, 0.9]), bins=10, min=0, max=1).tolist()
        [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0]
    """
    data = np.asarray(input._realized_data()).reshape(-1)
    low, high = float(min), float(max)
    if low == high and data.size:
        low, high = float(data.min()), float(data.max())
    if low == high:
        low, high = low - 1, high + 1
    if not (np.isfinite(low) and np.isfinite(high)):
        raise RuntimeError(f"torch.histc: range of [{cpp_number(low)}, {cpp_number(high)}] is not finite")
    if not low < high:
        raise RuntimeError("torch.histc: max must be larger than min")
    check_bin_count(bins)
    # The dtype last, as PyTorch's kernel dispatch follows its checks of the range and bins.
    if input.dtype not in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{dtypes.scalar_type_name(input.dtype)}'")
    # Only the outer edges take part (no search among the others): PyTorch's linspace gives them exactly.
    edges = np.asarray([low, high]).astype(data.dtype)
    positions = linear_bin_positions(data, edges, bins)
    counts = np.bincount(positions[positions >= 0], minlength=bins)
    return _constant(counts, input)


def cpp_number(value: float) -> str:
    """``value`` as PyTorch's messages print a double (C++ ``ostream``): ``1``, ``0.5``, ``inf``, ``nan``."""
    if np.isnan(value):
        return "-nan" if np.signbit(value) else "nan"
    return format(value, "g")


def check_bin_count(count: int) -> None:
    if count <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {count} for dimension 0")


def linear_bin_positions(data: np.ndarray, edges: np.ndarray, bins: int, search: bool = False) -> np.ndarray:
    """The bin of each value of ``data`` (-1 outside ``[edges[0], edges[-1]]`` or NaN), as PyTorch's
    LINEAR_INTERPOLATION: ``int((x - left) * bins / (right - left))`` in ``data``'s dtype, then, with
    ``search``, ``upper_bound`` among the edges next to it, as histogram's does; the right edge in the last bin.
    """
    left, right = edges[0], edges[-1]
    inside = (data >= left) & (data <= right)  # False for NaN
    values = np.where(inside, data, left)
    with np.errstate(over="ignore", invalid="ignore"):
        # In the data's dtype step by step (numpy rounds each half-type operation as c10::Half does),
        # the bin count cast to that dtype as C++ converts the int64 operand.
        scaled = (values - left) * data.dtype.type(bins) / (right - left)
    positions = np.trunc(scaled.astype(np.float64)).astype(np.int64)
    if search:
        low = np.maximum(positions - 1, 0)
        high = np.minimum(positions + 2, edges.size)
        positions = upper_bound(edges, values, low, high) - 1
    positions = np.where(positions == bins, bins - 1, positions)
    return np.where(inside, positions, -1)


def upper_bound(edges: np.ndarray, values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``std::upper_bound(edges + low, edges + high, value) - edges`` for each value: its probes, so edges
    that do not increase give PyTorch's answer too."""
    first, count = low.copy(), high - low
    while (count > 0).any():
        half = count >> 1
        middle = first + half
        probe = edges[np.minimum(middle, edges.size - 1)]
        right = (count > 0) & ~(values < probe)
        first = np.where(right, middle + 1, first)
        count = np.where(count > 0, np.where(right, count - half - 1, half), 0)
    return first


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> ModeResult:
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and an index of it.

    Which value is the mode is data; the value is then gathered from the input, so gradients flow to it.
    """
    axis = normalize_axes([dim], input.dim())[0] if input.dim() else 0
    check_extent(input, axis, "mode")
    source = input.reshape(1) if input.dim() == 0 else input
    data = np.moveaxis(np.asarray(source._realized_data()), axis, -1)
    if input.dtype is dtypes.bfloat16:
        data = data.astype(np.float32)  # every value held (ml_dtypes' bfloat16 mishandles NaN in np.unique)
    indices = np.zeros(data.shape[:-1], dtype=np.int64)
    for line in np.ndindex(data.shape[:-1]):
        values, counts = np.unique(data[line], return_counts=True)
        best = values[np.argmax(counts)]
        matches = np.isnan(data[line]) if best != best else data[line] == best  # NaNs as one value
        indices[line] = np.flatnonzero(matches)[-1]
    index = _constant(np.expand_dims(indices, axis), input, dtypes.int64)
    picked = gather_within(source, axis, index)
    if not keepdim or input.dim() == 0:
        picked, index = picked.squeeze(axis), index.squeeze(axis)
    if input.dim() == 0:
        picked, index = picked.reshape(()), index.reshape(())
    return ModeResult(picked, index)
