"""Random samplers: the in-place fills ``exponential_``, ``geometric_``, ``cauchy_``, ``log_normal_``, and
``multinomial``, ``poisson``, ``binomial``.

Randomness works as everywhere in onnxnn (``ir/random.py``): uniform numbers come from onnxnn's
seeded generator and enter the graph as data, so ``manual_seed`` (or a ``Generator``) repeats every
sample on every executor. The fills transform their uniforms by the inverse CDF (their parameters are
numbers, so there is nothing to record). The samplers whose parameters are tensors record the
transform as standard ONNX ops:

- ``multinomial`` with replacement: inverse CDF, ``index = #{k : cdf_k <= u}`` over the normalized
  CumSum (its last entry divided by itself is exactly 1, so ``u < 1`` never runs past the end and a
  zero-weight category is never drawn); without replacement: Gumbel-top-k, the ``num_samples``
  largest ``log w_k - log(-log u_k)``, which draws in the order of sequential sampling.
- ``poisson`` and ``binomial`` of small means (a rate, or ``n min(p, 1 - p)``, below 10): the inverse
  CDF over a window of ``2 W + 1`` consecutive counts around the mean, ``W = ceil(12 sd + 20)`` with
  ``sd`` the largest standard deviation among those elements (read from the data: the window's length
  is the graph's shape; at most 117 counts). The mass outside the window is below ``exp(-72)``, far
  under float64's resolution of ``u``; the pmf is ``exp`` of a log-pmf written with ``lgamma``. Large
  draws go in chunks of elements that bound what one step holds (``WINDOW_ENTRIES_PER_CHUNK``).
- ``poisson`` and ``binomial`` of larger means: Hormann's transformed rejection (PTRS, BTRS), on the
  host in numpy with uniform pairs from the same generator, a few rounds over the elements still
  pending, each element's cost independent of its mean. A tensor mixing both kinds sends each
  element its way; one with small means only draws exactly as the window alone.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...ir import random as _random
from ..realization import host_data
from ._common import Tensor, broadcast_shapes, with_zero_gradients
from . import comparison as _c
from . import elementwise as _e
from . import reduce as _r
from .sorting import cumsum, topk
from .special_functions import lgamma

__all__ = [
    "multinomial",
    "poisson",
    "binomial",
    "bernoulli_fill",
    "exponential_fill",
    "geometric_fill",
    "cauchy_fill",
    "log_normal_fill",
]


def _uniform(shape: tuple, generator, device=None) -> Tensor:
    """Uniform numbers on [0, 1) from onnxnn's generator, as float64 data."""
    return Tensor._from_array(_random.uniform(tuple(shape), np.float64, 0.0, 1.0, generator), dtypes.float64, device)


# ---------------------------------------------------------------- fills (numbers as parameters)


def _uniform_array(shape: tuple, generator) -> np.ndarray:
    return _random.uniform(tuple(shape), np.float64, 0.0, 1.0, generator)


def exponential_fill(shape: tuple, lambd: float, generator=None) -> np.ndarray:
    """Exp(lambd) samples ``-log(1 - u) / lambd`` (``1 - u`` in (0, 1], so never inf)."""
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return -np.log1p(-_uniform_array(shape, generator)) / lambd


def geometric_fill(shape: tuple, p: float, generator=None) -> np.ndarray:
    """The number of Bernoulli(p) trials up to the first success: ``ceil(log(1 - u) / log(1 - p))``, at least 1."""
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    trials = np.ceil(np.log1p(-_uniform_array(shape, generator)) / math.log1p(-p))
    return np.maximum(trials, 1.0)


def cauchy_fill(shape: tuple, median: float, sigma: float, generator=None) -> np.ndarray:
    """Cauchy(median, sigma) samples ``median + sigma tan(pi (u - 1/2))``."""
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return median + sigma * np.tan(math.pi * (_uniform_array(shape, generator) - 0.5))


# ATen's message where a probability tensor holds a value outside [0, 1] (a bare TORCH_CHECK's text).
_PROBABILITY_OUT_OF_RANGE = (
    "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be improved?  "
    "If so, please report an enhancement request to PyTorch.)"
)


def bernoulli_fill(shape: tuple, p, generator=None) -> np.ndarray:
    """``bernoulli_``'s draws, True with probability ``p``: a number, or a tensor expanded to ``shape`` (its
    data read, as PyTorch's CPU kernel reads it, and compared with float64 uniforms)."""
    if not isinstance(p, Tensor):
        if not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
        return _random.bernoulli(tuple(shape), p, generator)
    if not p.dtype.is_floating_point:
        raise NotImplementedError(
            f"\"bernoulli_tensor_cpu_p_\" not implemented for '{dtypes.scalar_type_name(p.dtype)}'"
        )
    probabilities = np.asarray(p.expand(tuple(shape))._realized_data(), dtype=np.float64)
    if not np.all((probabilities >= 0) & (probabilities <= 1)):  # NaN fails both, as in ATen's check
        raise RuntimeError(_PROBABILITY_OUT_OF_RANGE)
    return _uniform_array(shape, generator) < probabilities


# The autograd names of normal's tensor overloads: (mean is a tensor, std is a tensor) -> name.
_NORMAL_BACKWARD_NAMES = {
    (True, False): "NormalBackward1",
    (False, True): "NormalBackward2",
    (True, True): "NormalBackward3",
}


def normal_of_tensors(mean, std, generator=None) -> Tensor:
    """ATen's ``normal`` with a tensor mean and/or std: standard normal noise at their broadcast shape (each
    element its own draw), in the dtype of ``mean`` (else of ``std``), times ``std`` plus ``mean``. Not
    reparameterized: the gradient is zero for both (derivatives.yaml), yet the result requires grad."""
    if isinstance(std, Tensor):
        values = np.asarray(std._realized_data())
        if values.size and not values.min() >= 0:  # NaN fails too
            raise RuntimeError("normal expects all elements of std >= 0.0")
    else:
        _random.check_standard_deviation(std)
    first = mean if isinstance(mean, Tensor) else std
    if not first.dtype.is_floating_point:
        raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{dtypes.scalar_type_name(first.dtype)}'")
    shape = broadcast_shapes(*(tuple(operand.shape) for operand in (mean, std) if isinstance(operand, Tensor)))
    noise = _random.normal(shape, first.dtype.numpy_dtype, generator=generator)
    detached = [operand.detach() if isinstance(operand, Tensor) else operand for operand in (mean, std)]
    # Rounded to the result's dtype after each step, as ATen's in-place ``mul_(std).add_(mean)``.
    scaled = _e.mul(Tensor._from_array(noise, first.dtype, first.device), detached[1]).to(first.dtype)
    result = _e.add(scaled, detached[0]).to(first.dtype)
    name = _NORMAL_BACKWARD_NAMES[isinstance(mean, Tensor), isinstance(std, Tensor)]
    return with_zero_gradients(result, (mean, std), name)


def log_normal_fill(shape: tuple, mean: float, std: float, generator=None) -> np.ndarray:
    """``exp(N(mean, std^2))`` samples."""
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return np.exp(_random.normal(tuple(shape), np.float64, mean, std, generator))


# ---------------------------------------------------------------- multinomial


def check_multinomial_weights(weights: np.ndarray, num_samples: int, replacement: bool) -> None:
    """PyTorch's ``multinomial`` checks of known weights (1-D, or rows of a 2-D array), in its order and
    with its messages (``multinomial``, ``WeightedRandomSampler``)."""
    if not replacement and num_samples > weights.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    flat = weights.reshape(-1)
    bad = np.flatnonzero(~(np.isfinite(flat) & (flat >= 0)))
    if bad.size and replacement and num_samples > 1:
        # The first bad entry decides, as PyTorch's kernel reads them: nan fails its ">= 0" test.
        # (A single draw takes PyTorch's path without replacement, and its message, below.)
        if not flat[bad[0]] >= 0:
            raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
        raise RuntimeError("invalid multinomial distribution (encountering probability entry = infinity or NaN)")
    if bad.size:
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    # The entries are now finite and non-negative: a row's sum is positive unless all are 0. The
    # largest tells, where the sum could overflow to inf.
    if weights.shape[-1] == 0 or np.any(weights.reshape(-1, weights.shape[-1]).max(-1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Category indices drawn from the (unnormalized) weights in each row of ``input``.

    Args:
        input: 1-D or 2-D non-negative float weights (a row need not sum to 1).
        num_samples: draws per row.
        replacement: draw with replacement (else each category at most once per row).

    Returns an int64 tensor ``(num_samples,)`` or ``(rows, num_samples)``. Example::

        >>> onnxnn.manual_seed(0)
        >>> onnxnn.multinomial(onnxnn.tensor([0.0, 1.0, 3.0]), 4, replacement=True).shape
        onnxnn.Size([4])
    """
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError(
            f"multinomial only supports floating-point dtypes for input, got: "
            f"{input.dtype.name.capitalize().replace('Int64', 'Long')}"
        )
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    data = host_data(input._value)  # checked where already known: never computed for it
    if data is not None:
        check_multinomial_weights(np.asarray(data, dtype=np.float64), num_samples, replacement)
    elif not replacement and num_samples > input.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    weights = input.detach().to(dtypes.float64)
    rows = weights if input.dim() == 2 else weights.unsqueeze(0)
    if replacement:
        running = cumsum(rows, -1)
        cdf = running / running[:, -1:]
        u = _uniform((rows.shape[0], num_samples), generator, input.device)
        below = _c.le(cdf.unsqueeze(1), u.unsqueeze(-1))  # (rows, samples, categories)
        samples = _r.sum(below.to(dtypes.int64), -1)
    else:
        u = _uniform(tuple(rows.shape), generator, input.device)
        gumbel = (u.log().neg()).log().neg()
        samples = topk(rows.log() + gumbel, num_samples, -1).indices
    return samples if input.dim() == 2 else samples.squeeze(0)


# ---------------------------------------------------------------- the inverse CDF in a window (small means)


def _window_half_width(largest_sd: float) -> int:
    return int(math.ceil(12 * largest_sd + 20))


# The most window entries (elements x window length) one step of the window sampler holds. Larger
# draws go in chunks of elements, each realized before the next: Poisson(1e5).sample((2000,)) held
# 1.8 GB at once (peak RSS) and 20,000 draws exhausted 23 GB; in chunks of 2**19 entries its peak is
# 330 MB at any count (2**21: 1.0 GB, 2**18: 220 MB, at about the same speed).
WINDOW_ENTRIES_PER_CHUNK = 1 << 19


def _inverse_cdf_in_window(start: Tensor, log_pmf, parameters: list, half_width: int, u: Tensor) -> Tensor:
    """``start + #{j : cdf(start + j) <= u}`` over the counts ``start .. start + 2 W``.

    ``log_pmf(k, *parameters)`` gives the log-probabilities of the counts ``k`` (shape ``(..., 2W + 1)``)
    from the per-element ``parameters`` (each of ``start``'s shape, with a trailing axis of 1).
    """
    window = 2 * half_width + 1
    offsets = Tensor._from_array(np.arange(window, dtype=np.float64), dtypes.float64, start.device)
    elements = math.prod(start.shape)
    chunk = max(1, WINDOW_ENTRIES_PER_CHUNK // window)
    if elements <= chunk:
        return _counts_below(start, offsets, log_pmf, [p.unsqueeze(-1) for p in parameters], u)
    # The per-element inputs as data, each chunk fed its rows: every full chunk is then the same graph,
    # run by one cached session (slices of pending values would make a plan, and a session holding its
    # own buffers, per chunk).
    flat = [np.asarray(tensor.reshape(-1)._realized_data()) for tensor in (start, u, *parameters)]
    pieces = []
    for begin in range(0, elements, chunk):
        part = [Tensor._from_array(array[begin : begin + chunk], dtypes.float64, start.device) for array in flat]
        counts = _counts_below(part[0], offsets, log_pmf, [p.unsqueeze(-1) for p in part[2:]], part[1])
        pieces.append(np.asarray(counts._realized_data()))
    return Tensor._from_array(np.concatenate(pieces).reshape(start.shape), dtypes.float64, start.device)


def _counts_below(start: Tensor, offsets: Tensor, log_pmf, parameters: list, u: Tensor) -> Tensor:
    counts = start.unsqueeze(-1) + offsets
    running = cumsum(log_pmf(counts, *parameters).exp(), -1)
    # Divided by its last entry the CDF ends at exactly 1, so u < 1 never runs past the window (or
    # past n for a binomial, whose counts above n add no mass).
    cdf = running / running[..., -1:]
    below = _c.le(cdf, u.unsqueeze(-1))
    return start + _r.sum(below.to(dtypes.float64), -1)


def _largest(values: Tensor) -> float:
    data = np.asarray(values._realized_data(), dtype=np.float64)
    return float(data.max()) if data.size else 0.0


# ---------------------------------------------------------------- transformed rejection (large rates)

# Hormann's transformed rejection needs rate >= 10 (PTRS) and n min(p, 1 - p) >= 10 (BTRS); below,
# the window's inverse CDF is exact and cheap (a window of at most 117 counts).
TRANSFORMED_REJECTION_MIN_MEAN = 10.0

_HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)
# The Stirling correction fc(k) = log k! - (log(2 pi) / 2 + (k + 1/2) log(k + 1) - (k + 1)), exactly
# (from lgamma) below 16; above, its series to k^-7 (the next term, 1 / (1188 k^9), is below 2e-14).
_STIRLING_TABLE = np.array(
    [math.lgamma(k + 1.0) - (_HALF_LOG_TWO_PI + (k + 0.5) * math.log(k + 1.0) - (k + 1.0)) for k in range(16)]
)


def _stirling_correction(k: np.ndarray) -> np.ndarray:
    """``fc(k)`` for integral ``k >= 0`` (float64)."""
    # The series is in k + 1, the argument of the Stirling formula above.
    x = np.maximum(k, 15.0) + 1.0
    x2 = x * x
    series = (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * x2)) / x2) / x2) / x
    small = np.clip(k, 0, 15).astype(np.int64)
    return np.where(k < 16, _STIRLING_TABLE[small], series)


def _transformed_rejection(draw, pending: int, generator) -> np.ndarray:
    """Calls ``draw(indices, u, v)`` (the pending elements and a uniform pair for each) until every
    element is accepted; ``draw`` returns its candidates and whether each was accepted. Each round
    accepts about 90% of what is left, so a few dozen rounds finish any size."""
    result = np.zeros(pending)
    indices = np.arange(pending)
    while indices.size:
        u, v = _uniform_array((2, indices.size), generator)
        # u = 0 gives u_s = 0 (k = -inf, rejected) and v = 0 gives log 0: no warnings for either.
        with np.errstate(divide="ignore", invalid="ignore"):
            candidates, accepted = draw(indices, u, v)
        result[indices[accepted]] = candidates[accepted]
        indices = indices[~accepted]
    return result


def _poisson_ptrs(rate: np.ndarray, generator) -> np.ndarray:
    """Poisson counts for rates >= 10 by PTRS (W. Hormann, "The transformed rejection method for
    generating Poisson random variables", 1993): ``k = floor((2a / u_s + b) u + rate + 0.43)`` from a
    uniform ``u`` on (-1/2, 1/2), ``u_s = 1/2 - |u|``, accepted when ``v`` lies under the pmf scaled by
    the hat's derivative (a box of the hat, ``v <= v_r``, accepts at once for ``u_s >= 0.07``)."""
    sqrt_rate = np.sqrt(rate)
    b = 0.931 + 2.53 * sqrt_rate
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)
    log_rate = np.log(rate)

    def draw(i, u, v):
        u = u - 0.5
        u_s = 0.5 - np.abs(u)
        k = np.floor((2 * a[i] / u_s + b[i]) * u + rate[i] + 0.43)
        in_box = (u_s >= 0.07) & (v <= v_r[i])
        possible = (k >= 0) & ((u_s >= 0.013) | (v <= u_s))
        safe_k = np.maximum(k, 0.0)
        log_v = np.log(v * inv_alpha[i] / (a[i] / (u_s * u_s) + b[i]))
        # log pmf(k) = k log rate - rate - log k!, with log k! in Stirling's form and
        # d = k + 1 - rate: d - (k + 1/2) log1p(d / rate) keeps the size of the difference (O(1)),
        # not of its terms (O(rate log rate)).
        d = safe_k + 1.0 - rate[i]
        log_pmf = d - (safe_k + 0.5) * np.log1p(d / rate[i]) - 0.5 * log_rate[i]
        log_pmf = log_pmf - _HALF_LOG_TWO_PI - _stirling_correction(safe_k)
        return k, in_box | (possible & (log_v <= log_pmf))

    return _transformed_rejection(draw, rate.size, generator)


def _binomial_btrs(n: np.ndarray, p: np.ndarray, generator) -> np.ndarray:
    """Binomial counts for ``p <= 1/2`` and ``n p >= 10`` by BTRS (W. Hormann, "The generation of
    binomial random variates", 1993): the same transformed rejection, the pmf compared with its value
    at the mode ``m`` through the ratio ``pmf(k) / pmf(m)`` written with Stirling's formula."""
    q = 1.0 - p
    sqrt_npq = np.sqrt(n * p * q)
    b = 1.15 + 2.53 * sqrt_npq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    alpha = (2.83 + 5.1 / b) * sqrt_npq
    v_r = 0.92 - 4.2 / b
    mode = np.floor((n + 1) * p)
    log_odds = np.log(p / q)
    mode_correction = _stirling_correction(mode) + _stirling_correction(n - mode)

    def draw(i, u, v):
        u = u - 0.5
        u_s = 0.5 - np.abs(u)
        k = np.floor((2 * a[i] / u_s + b[i]) * u + c[i])
        inside = (k >= 0) & (k <= n[i])
        in_box = (u_s >= 0.07) & (v <= v_r[i])
        safe_k = np.clip(k, 0.0, n[i])
        log_v = np.log(v * alpha[i] / (a[i] / (u_s * u_s) + b[i]))
        # log(pmf(k) / pmf(m)) = log(m! (n - m)! / (k! (n - k)!)) + (k - m) log(p / q), with each
        # log j! = log(2 pi) / 2 + (j + 1/2) log(j + 1) - (j + 1) + fc(j) (the linear terms cancel):
        # (m + 1/2) log(m + 1) - (k + 1/2) log(k + 1) + (n - m + 1/2) log(n - m + 1)
        #   - (n - k + 1/2) log(n - k + 1), regrouped into logs of ratios near 1.
        m, nn = mode[i], n[i]
        rest_k, rest_m = nn - safe_k + 1.0, nn - m + 1.0
        log_ratio = (
            (m + 0.5) * np.log((m + 1.0) / rest_m)
            - (safe_k + 0.5) * np.log((safe_k + 1.0) / rest_k)
            + (nn + 1.0) * np.log1p((safe_k - m) / rest_k)
            + (safe_k - m) * log_odds[i]
            + mode_correction[i]
            - _stirling_correction(safe_k)
            - _stirling_correction(nn - safe_k)
        )
        return k, inside & (in_box | (log_v <= log_ratio))

    return _transformed_rejection(draw, n.size, generator)


# ---------------------------------------------------------------- Poisson and binomial


def _poisson_by_window(rate: Tensor, uniform: Tensor) -> Tensor:
    half_width = _window_half_width(math.sqrt(_largest(rate)))
    positive = _c.gt(rate, 0)
    safe_rate = _e.where(positive, rate, 1.0)
    start = _e.maximum((safe_rate - half_width).floor(), Tensor._full((), 0.0, dtypes.float64, rate.device))

    def log_pmf(k, rate, log_rate):
        return k * log_rate - rate - lgamma(k + 1.0)

    samples = _inverse_cdf_in_window(start, log_pmf, [safe_rate, safe_rate.log()], half_width, uniform)
    return _e.where(positive, samples, 0.0)


def poisson(input: Tensor, generator=None) -> Tensor:
    """Poisson samples with the rates in ``input`` (same shape and dtype; a rate of 0 gives 0).

    Rates below 10 by the window's inverse CDF, larger ones by Hormann's PTRS, at a cost independent
    of the rate. Reads the rates (both depend on them). Not differentiable. Example::

        >>> onnxnn.poisson(onnxnn.tensor([0.0, 4.0])).shape
        onnxnn.Size([2])
    """
    rate = input.detach().to(dtypes.float64)
    data = np.asarray(rate._realized_data(), dtype=np.float64)
    if data.size and (np.any(data < 0) or not np.all(np.isfinite(data))):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    uniform = _uniform(rate.shape, generator, input.device)
    large = data.reshape(-1) >= TRANSFORMED_REJECTION_MIN_MEAN
    if not large.any():
        return _poisson_by_window(rate, uniform).to(input.dtype)
    # The small rates through the window (sized by the largest of them), the large ones by PTRS.
    flat_rate, flat_uniform = data.reshape(-1), np.asarray(uniform._realized_data()).reshape(-1)
    samples = np.zeros(flat_rate.shape)
    small = np.flatnonzero(~large)
    if small.size:
        window = _poisson_by_window(*(_float64_tensor(a[small], input.device) for a in (flat_rate, flat_uniform)))
        samples[small] = np.asarray(window._realized_data())
    samples[large] = _poisson_ptrs(flat_rate[large], generator)
    return _float64_tensor(samples.reshape(data.shape), input.device).to(input.dtype)


def _float64_tensor(array: np.ndarray, device) -> Tensor:
    return Tensor._from_array(np.ascontiguousarray(array, dtype=np.float64), dtypes.float64, device)


def _binomial_by_window(n: Tensor, safe_p: Tensor, uniform: Tensor) -> Tensor:
    mean = n * safe_p
    half_width = _window_half_width(math.sqrt(max(_largest(mean * (1.0 - safe_p)), 0.0)))
    start = _e.maximum((mean - half_width).floor(), Tensor._full((), 0.0, dtypes.float64, n.device))

    def log_pmf(k, n_k, log_p, log_q, log_choose_n):
        # counts past n have no mass (their lgamma(n - k + 1) argument is replaced by a harmless 1).
        inside = _c.le(k, n_k)
        rest = _e.where(inside, n_k - k, 0.0)
        value = log_choose_n - lgamma(k + 1.0) - lgamma(rest + 1.0) + k * log_p + rest * log_q
        return _e.where(inside, value, -math.inf)

    parameters = [n, safe_p.log(), (1.0 - safe_p).log(), lgamma(n + 1.0)]
    return _inverse_cdf_in_window(start, log_pmf, parameters, half_width, uniform)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Binomial samples: successes in ``count`` trials of probability ``prob`` (float tensors, broadcast).

    Elements with ``count min(prob, 1 - prob) < 10`` by the window's inverse CDF, the others by
    Hormann's BTRS, at a cost independent of the count. Reads the parameters. Not differentiable.
    """
    for name, value in (("count", count), ("prob", prob)):
        if not value.dtype.is_floating_point:
            raise ValueError(
                f"binomial only supports floating-point dtypes for {name}, got: "
                f"{value.dtype.name.capitalize().replace('Int64', 'Long')}"
            )
    n, p = count.detach().to(dtypes.float64), prob.detach().to(dtypes.float64)
    shape = tuple(np.broadcast_shapes(tuple(n.shape), tuple(p.shape)))
    n, p = n.expand(*shape), p.expand(*shape)
    inner = _c.logical_and(_c.gt(p, 0), _c.lt(p, 1))
    safe_p = _e.where(inner, p, 0.5)
    # p of 0 or 1 is decided below; its count must not size the window (n = 1e9 would make it huge).
    trials, n = n, _e.where(inner, n, 0.0)
    uniform = _uniform(shape, generator, count.device)
    n_data = np.asarray(n._realized_data(), dtype=np.float64).reshape(-1)
    p_data = np.asarray(safe_p._realized_data(), dtype=np.float64).reshape(-1)
    inner_data = np.asarray(inner._realized_data(), dtype=bool).reshape(-1)
    smaller_p = np.minimum(p_data, 1.0 - p_data)
    large = inner_data & (n_data * smaller_p >= TRANSFORMED_REJECTION_MIN_MEAN)
    if large.any():
        # Window draws for the rest (sized by their largest deviation), BTRS for the large ones:
        # drawn with the smaller of p and 1 - p, counted from the other end when p > 1/2.
        samples = np.zeros(n_data.shape)
        small = np.flatnonzero(~large)
        if small.size:
            parts = (
                _float64_tensor(a[small], count.device) for a in (n_data, p_data, uniform.reshape(-1)._realized_data())
            )
            samples[small] = np.asarray(_binomial_by_window(*parts)._realized_data())
        counts = _binomial_btrs(n_data[large], smaller_p[large], generator)
        samples[large] = np.where(p_data[large] > 0.5, n_data[large] - counts, counts)
        samples_tensor = _float64_tensor(samples.reshape(shape), count.device)
    else:
        samples_tensor = _binomial_by_window(n, safe_p, uniform)
    samples_tensor = _e.where(inner, samples_tensor, _e.where(_c.ge(p, 1), trials, 0.0))
    return samples_tensor.to(count.dtype)
