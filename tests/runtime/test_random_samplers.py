"""Random samplers (issue #12): exponential_, geometric_, cauchy_, log_normal_, multinomial, poisson,
binomial. Sample statistics against the distributions' formulas, within 6 standard errors of the
sample size (a correct sampler fails such a check with probability about 2e-9 per statistic);
seeds reproduce; PyTorch's errors.

Standard errors: a mean of ``n`` draws has ``sd / sqrt(n)``; a frequency ``p`` has
``sqrt(p (1 - p) / n)``; a sample variance has about ``sqrt((mu4 - var^2) / n)``, with the fourth
central moment ``mu4`` of the distribution (given per case). Heavy-tailed Cauchy is checked by its
quartiles (frequencies), whose standard errors exist.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.ops import random_samplers

EXECUTORS = ("onnxruntime", "kernels")
N = 20000
SIGMAS = 6


def _assert_mean(samples, mean, variance, label=""):
    error = SIGMAS * math.sqrt(variance / samples.size)
    assert abs(samples.mean() - mean) <= error, f"{label}: mean {samples.mean()} vs {mean} (+-{error})"


def _assert_variance(samples, variance, fourth_moment, label=""):
    error = SIGMAS * math.sqrt((fourth_moment - variance**2) / samples.size)
    assert abs(samples.var() - variance) <= error, f"{label}: variance {samples.var()} vs {variance} (+-{error})"


def _assert_frequency(hits, p, n, label=""):
    error = SIGMAS * math.sqrt(p * (1 - p) / n) + 1e-12
    assert abs(hits / n - p) <= error, f"{label}: frequency {hits / n} vs {p} (+-{error})"


@pytest.mark.parametrize("executor", EXECUTORS)
def test_fills_have_their_distributions_moments(executor):
    onnxnn.manual_seed(1)
    with onnxnn.set_executor(executor):
        lam = 2.0
        exponential = onnxnn.empty(N, dtype=onnxnn.float64).exponential_(lam).numpy()
        _assert_mean(exponential, 1 / lam, 1 / lam**2, "exponential")
        _assert_variance(exponential, 1 / lam**2, 9 / lam**4, "exponential")  # mu4 = 9 / lambda^4
        p = 0.3
        geometric = onnxnn.empty(N, dtype=onnxnn.float64).geometric_(p).numpy()
        assert geometric.min() >= 1 and np.all(geometric == np.round(geometric))
        _assert_mean(geometric, 1 / p, (1 - p) / p**2, "geometric")
        _assert_frequency(np.sum(geometric == 1), p, N, "geometric P(1)")
        mean, std = 0.2, 0.5
        log_normal = onnxnn.empty(N, dtype=onnxnn.float64).log_normal_(mean, std).numpy()
        logs = np.log(log_normal)
        _assert_mean(logs, mean, std**2, "log of log-normal")
        _assert_variance(logs, std**2, 3 * std**4, "log of log-normal")
        cauchy = onnxnn.empty(N, dtype=onnxnn.float64).cauchy_(1.0, 2.0).numpy()
        # Quartiles of Cauchy(m, s) are m -+ s.
        _assert_frequency(np.sum(cauchy < -1.0), 0.25, N, "cauchy lower quartile")
        _assert_frequency(np.sum(cauchy < 1.0), 0.5, N, "cauchy median")
        _assert_frequency(np.sum(cauchy < 3.0), 0.75, N, "cauchy upper quartile")


def test_fills_keep_the_dtype_and_reproduce_under_a_seed():
    def draw():
        onnxnn.manual_seed(7)
        return [
            onnxnn.zeros(5).exponential_().numpy(),
            onnxnn.zeros(5, dtype=onnxnn.int64).geometric_(0.5).numpy(),
            onnxnn.zeros(5).cauchy_().numpy(),
            onnxnn.zeros(5, dtype=onnxnn.float16).log_normal_().numpy(),
        ]

    first, second = draw(), draw()
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert first[1].dtype == np.int64 and first[3].dtype == np.float16
    generator = onnxnn.Generator().manual_seed(3)
    one = onnxnn.zeros(4).exponential_(generator=generator).numpy()
    generator.manual_seed(3)
    np.testing.assert_array_equal(onnxnn.zeros(4).exponential_(generator=generator).numpy(), one)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_multinomial_with_replacement_draws_each_category_by_its_weight(executor):
    weights = np.array([[0.0, 1.0, 3.0, 0.0], [2.0, 2.0, 0.0, 4.0]])
    onnxnn.manual_seed(2)
    with onnxnn.set_executor(executor):
        samples = onnxnn.multinomial(onnxnn.tensor(weights), N, replacement=True)
        drawn = samples.numpy()  # realized on ``executor`` (onnxnn is lazy)
    assert samples.dtype is onnxnn.int64 and tuple(samples.shape) == (2, N)
    for row, w in zip(drawn, weights):
        counts = np.bincount(row, minlength=4)
        for category, weight in enumerate(w / w.sum()):
            _assert_frequency(counts[category], weight, N, f"category {category}")
        assert np.all(counts[w == 0] == 0)  # zero weights are never drawn


@pytest.mark.parametrize("executor", EXECUTORS)
def test_multinomial_without_replacement_draws_distinct_categories_in_sequential_order(executor):
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    trials = 3000
    onnxnn.manual_seed(3)
    with onnxnn.set_executor(executor):
        rows = onnxnn.tensor(weights, dtype=onnxnn.float64).expand(trials, 4)
        samples = onnxnn.multinomial(rows, 2).numpy()
    assert np.all(samples[:, 0] != samples[:, 1])
    p = weights / weights.sum()
    first = np.bincount(samples[:, 0], minlength=4)
    # Sequential draws: P(second = j) = sum_i p_i p_j / (1 - p_i), i != j.
    second = np.bincount(samples[:, 1], minlength=4)
    for j in range(4):
        _assert_frequency(first[j], p[j], trials, f"first {j}")
        expected = sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j)
        _assert_frequency(second[j], expected, trials, f"second {j}")
    full = onnxnn.multinomial(onnxnn.tensor([0.5, 0.0, 2.0]), 2).numpy()
    assert sorted(full.tolist()) == [0, 2]  # the zero-weight category comes last


def test_multinomial_reproduces_under_a_seed_and_raises_pytorchs_errors():
    w = onnxnn.tensor([0.2, 0.3, 0.5])
    onnxnn.manual_seed(11)
    a = onnxnn.multinomial(w, 6, True).numpy()
    onnxnn.manual_seed(11)
    np.testing.assert_array_equal(w.multinomial(6, True).numpy(), a)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        onnxnn.multinomial(w, 4)
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        onnxnn.multinomial(onnxnn.zeros(2, 2, 2), 1)
    with pytest.raises(RuntimeError, match="cannot sample n_sample <= 0 samples"):
        onnxnn.multinomial(w, 0)
    with pytest.raises(RuntimeError, match="contains either `inf`, `nan` or element < 0"):
        onnxnn.multinomial(onnxnn.tensor([0.5, -0.1]), 1)
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):
        onnxnn.multinomial(onnxnn.tensor([0.0, 0.0]), 1, True)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "weights, num_samples, replacement, message",
    [
        # With replacement and more than one draw, the first bad weight decides (PyTorch's kernel).
        ([1.0, NAN], 2, True, r"invalid multinomial distribution \(encountering probability entry < 0\)"),
        ([1.0, INF, NAN], 2, True, r"encountering probability entry = infinity or NaN"),
        ([[1.0, 1.0], [1.0, -1.0]], 2, True, r"encountering probability entry < 0"),
        ([1.0, INF], 1, True, "probability tensor contains either `inf`, `nan` or element < 0"),
        ([[1.0, 1.0], [1.0, -1.0]], 1, False, "probability tensor contains either `inf`, `nan` or element < 0"),
        ([1.0, NAN], 3, False, r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"),
        ([[1.0, 1.0], [0.0, 0.0]], 2, True, r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
    ],
)
def test_multinomial_bad_weights_get_pytorchs_errors_in_its_order(weights, num_samples, replacement, message):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.multinomial(onnxnn.tensor(weights), num_samples, replacement)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_poisson_samples_have_the_rates_mean_and_variance(executor):
    rates = np.array([0.0, 0.3, 4.0, 60.0])
    draws = 2500
    onnxnn.manual_seed(4)
    with onnxnn.set_executor(executor):
        samples = onnxnn.poisson(onnxnn.tensor(rates, dtype=onnxnn.float64).expand(draws, 4)).numpy()
    assert np.all(samples == np.round(samples)) and np.all(samples[:, 0] == 0)
    for column, rate in enumerate(rates[1:], start=1):
        # Poisson: variance = rate, fourth central moment = rate (1 + 3 rate).
        _assert_mean(samples[:, column], rate, rate, f"rate {rate}")
        _assert_variance(samples[:, column], rate, rate * (1 + 3 * rate), f"rate {rate}")
    _assert_frequency(np.sum(samples[:, 1] == 0), math.exp(-0.3), draws, "P(0) at rate 0.3")


@pytest.mark.parametrize("executor", EXECUTORS)
def test_binomial_samples_have_the_mean_and_variance(executor):
    counts = np.array([10.0, 10.0, 0.0, 40.0, 120.0])
    probs = np.array([0.0, 1.0, 0.5, 0.25, 0.6])
    draws = 2000
    onnxnn.manual_seed(5)
    with onnxnn.set_executor(executor):
        samples = onnxnn.binomial(onnxnn.tensor(counts).expand(draws, 5), onnxnn.tensor(probs)).numpy()
    assert samples.dtype == np.float64  # count's dtype
    np.testing.assert_array_equal(samples[:, :3], np.broadcast_to([0.0, 10.0, 0.0], (draws, 3)))
    assert np.all(samples <= counts) and np.all(samples >= 0)
    for column in (3, 4):
        n, p = counts[column], probs[column]
        variance = n * p * (1 - p)
        fourth = variance * (1 + 3 * (n - 2) * p * (1 - p))  # binomial's fourth central moment
        _assert_mean(samples[:, column], n * p, variance, f"n={n}")
        _assert_variance(samples[:, column], variance, fourth, f"n={n}")


def test_poisson_and_binomial_reproduce_under_a_seed():
    rate = onnxnn.tensor([1.0, 30.0])
    onnxnn.manual_seed(9)
    a = (onnxnn.poisson(rate).numpy(), onnxnn.binomial(onnxnn.tensor([5.0]), onnxnn.tensor([0.5])).numpy())
    onnxnn.manual_seed(9)
    b = (onnxnn.poisson(rate).numpy(), onnxnn.binomial(onnxnn.tensor([5.0]), onnxnn.tensor([0.5])).numpy())
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_poisson_and_binomial_in_chunks_draw_what_one_pass_draws(executor, monkeypatch):
    # Large draws go through the window in chunks of elements (bounded memory): the same counts.
    def draws():
        onnxnn.manual_seed(5)
        rates = onnxnn.tensor(np.array([[0.0, 4.0, 100.0], [2.5, 1e3, 7.0]])).expand(7, 2, 3)
        counts = onnxnn.binomial(
            onnxnn.tensor(np.array([[10.0, 1000.0, 0.0]])), onnxnn.tensor(np.array([[0.3], [0.9]]))
        )
        return onnxnn.poisson(rates).numpy(), counts.numpy()

    with onnxnn.set_executor(executor):
        whole = draws()
        monkeypatch.setattr(random_samplers, "WINDOW_ENTRIES_PER_CHUNK", 1000)  # a few elements per chunk
        chunked = draws()
    for one_pass, in_chunks in zip(whole, chunked):
        np.testing.assert_array_equal(in_chunks, one_pass)


def test_fill_parameters_are_checked_like_pytorch():
    t = onnxnn.zeros(3)
    with pytest.raises(RuntimeError, match="exponential_ expects lambda > 0.0"):
        t.exponential_(0.0)
    with pytest.raises(RuntimeError, match=r"geometric_ expects p to be in \(0, 1\)"):
        t.geometric_(1.5)
    with pytest.raises(RuntimeError, match="log_normal_ expects std > 0.0"):
        t.log_normal_(0.0, -1.0)
    with pytest.raises(RuntimeError, match="cauchy_ expects sigma > 0.0"):
        t.cauchy_(0.0, -1.0)
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        onnxnn.poisson(onnxnn.tensor([-1.0]))
    with pytest.raises(RuntimeError, match="multinomial only supports floating-point dtypes for input, got: Long"):
        onnxnn.multinomial(onnxnn.tensor([1, 2]), 1)
    with pytest.raises(ValueError, match="binomial only supports floating-point dtypes for count, got: Long"):
        onnxnn.binomial(onnxnn.tensor([1]), onnxnn.tensor([0.5]))


# (args, from, to): with one argument it is ``to`` and ``from`` is 0.
EMPTY_RANDOM_RANGES = [((5, 2), 5, 2), ((2, 2), 2, 2), ((0,), 0, 0), ((-3,), 0, -3)]


@pytest.mark.parametrize("args, low, high", EMPTY_RANDOM_RANGES)
def test_random_refuses_an_empty_range_like_pytorch(args, low, high):
    message = f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}"
    with pytest.raises(RuntimeError, match=message):
        onnxnn.zeros(3).random_(*args)


@pytest.mark.parametrize("dtype, digits", [(onnxnn.float16, 11), (onnxnn.bfloat16, 8)], ids=str)
def test_reduced_float_uniforms_take_the_dtypes_multiples_below_one(dtype, digits):
    # As PyTorch's: 2**digits equally likely values k / 2**digits, so rand never gives 1.0 (a
    # float32 draw rounded to bfloat16 did, once in 512) and uniform_(a, b) stays below b here.
    onnxnn.manual_seed(0)
    draws = onnxnn.rand(200_000, dtype=dtype).float().numpy()
    steps = draws * 2**digits
    np.testing.assert_array_equal(steps, np.floor(steps))
    assert draws.min() >= 0.0 and draws.max() == 1.0 - 2.0**-digits
    assert len(np.unique(draws)) == 2**digits
    filled = onnxnn.empty(200_000, dtype=dtype).uniform_(-9.0, 9.0).float().numpy()
    assert filled.max() < 9.0 and filled.min() >= -9.0
