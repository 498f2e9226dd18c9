"""Poisson and binomial samples of large means (Hormann's PTRS and BTRS, at a cost independent of the
mean): means and variances within 5 standard errors of 20,000 draws, chi-square goodness of fit
against the exact pmf (computed here with lgamma), tensors mixing small and huge means, the
NegativeBinomial draws that go through them.

Standard errors as in test_random_samplers.py: ``sd / sqrt(n)`` for a mean, ``sqrt((mu4 - var^2) / n)``
for a sample variance, with the distribution's fourth central moment ``mu4``. With the seed fixed
each check is deterministic; a correct sampler fails one with probability about 6e-7.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D

N = 20000
SIGMAS = 5


def _check_moments(samples, mean, variance, fourth_moment, label):
    mean_error = SIGMAS * math.sqrt(variance / samples.size)
    assert abs(samples.mean() - mean) <= mean_error, f"{label}: mean {samples.mean()} vs {mean} (+-{mean_error})"
    variance_error = SIGMAS * math.sqrt((fourth_moment - variance**2) / samples.size)
    assert abs(samples.var() - variance) <= variance_error, (
        f"{label}: variance {samples.var()} vs {variance} (+-{variance_error})"
    )


def _poisson_moments(rate):
    return rate, rate, rate * (1 + 3 * rate)


def _binomial_moments(n, p):
    variance = n * p * (1 - p)
    return n * p, variance, variance * (1 + 3 * (n - 2) * p * (1 - p))


# Columns drawn together: small rates (the window) beside large ones (PTRS), 10 at the switch.
RATES = np.array([0.0, 0.3, 4.0, 9.99, 10.0, 1e3, 1e6, 1e10])


@pytest.mark.parametrize("executor", ("onnxruntime", "kernels"))
def test_poisson_moments_for_small_and_huge_rates_in_one_tensor(executor):
    onnxnn.manual_seed(11)
    with onnxnn.set_executor(executor):
        samples = onnxnn.poisson(onnxnn.tensor(RATES, dtype=onnxnn.float64).expand(N, RATES.size)).numpy()
    assert np.all(samples == np.floor(samples)) and np.all(samples[:, 0] == 0)
    for column, rate in enumerate(RATES[1:], start=1):
        _check_moments(samples[:, column], *_poisson_moments(rate), f"rate {rate}")


# (count, prob): both sides of 1/2 (BTRS draws with min(p, 1 - p)), n min(p, 1 - p) from 10 up.
BINOMIALS = [
    (1e4, 0.001), (1e4, 0.3), (1e4, 0.5), (1e4, 0.9),
    (1e6, 0.02), (1e6, 0.75), (1e9, 1e-8), (1e9, 0.4), (1e9, 0.999),
    (40.0, 0.25), (30.0, 0.1),  # the window's side of the switch (n min(p, q) = 10 and 3)
]  # fmt: skip


def test_binomial_moments_for_small_and_huge_counts_in_one_tensor():
    counts = np.array([n for n, _ in BINOMIALS])
    probs = np.array([p for _, p in BINOMIALS])
    onnxnn.manual_seed(12)
    samples = onnxnn.binomial(onnxnn.tensor(counts).expand(N, counts.size), onnxnn.tensor(probs)).numpy()
    assert np.all(samples == np.floor(samples)) and np.all(samples >= 0) and np.all(samples <= counts)
    for column, (n, p) in enumerate(BINOMIALS):
        _check_moments(samples[:, column], *_binomial_moments(n, p), f"n={n}, p={p}")


def _poisson_log_pmf(k, rate):
    return k * math.log(rate) - rate - math.lgamma(k + 1)


def _binomial_log_pmf(k, n, p):
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def _chi_square_critical(degrees):
    """The chi-square quantile of upper tail 1e-6 (normal quantile 4.753), by Wilson and Hilferty's
    cube-root approximation (relative error below 1% for these degrees of freedom)."""
    z = 4.753
    return degrees * (1 - 2 / (9 * degrees) + z * math.sqrt(2 / (9 * degrees))) ** 3


GOODNESS_OF_FIT = [
    ("Poisson(30)", lambda: onnxnn.poisson(onnxnn.full((N,), 30.0, dtype=onnxnn.float64)),
     lambda k: _poisson_log_pmf(k, 30.0), 0, 120),
    ("Poisson(200)", lambda: onnxnn.poisson(onnxnn.full((N,), 200.0, dtype=onnxnn.float64)),
     lambda k: _poisson_log_pmf(k, 200.0), 0, 400),
    ("Binomial(100, 0.3)", lambda: onnxnn.binomial(onnxnn.full((N,), 100.0, dtype=onnxnn.float64),
                                                   onnxnn.tensor(0.3, dtype=onnxnn.float64)),
     lambda k: _binomial_log_pmf(k, 100, 0.3), 0, 100),
    ("Binomial(2000, 0.8)", lambda: onnxnn.binomial(onnxnn.full((N,), 2000.0, dtype=onnxnn.float64),
                                                    onnxnn.tensor(0.8, dtype=onnxnn.float64)),
     lambda k: _binomial_log_pmf(k, 2000, 0.8), 0, 2000),
]  # fmt: skip


@pytest.mark.parametrize("name, draw, log_pmf, low, high", GOODNESS_OF_FIT, ids=[c[0] for c in GOODNESS_OF_FIT])
def test_counts_fit_the_exact_pmf(name, draw, log_pmf, low, high):
    onnxnn.manual_seed(13)
    samples = draw().numpy().astype(np.int64)
    observed = np.bincount(samples - low, minlength=high - low + 1)
    assert observed.size == high - low + 1, f"{name}: a count beyond {high}"
    expected = N * np.exp([log_pmf(k) for k in range(low, high + 1)])
    # Cells with at least 5 expected counts; the tails beyond them pooled into one cell each.
    enough = np.flatnonzero(expected >= 5)
    first, last = enough[0], enough[-1]
    cells_observed = np.concatenate(
        [[observed[:first].sum()], observed[first : last + 1], [observed[last + 1 :].sum()]]
    )
    cells_expected = np.concatenate(
        [[expected[:first].sum()], expected[first : last + 1], [N - expected[: last + 1].sum()]]
    )
    chi_square = float(((cells_observed - cells_expected) ** 2 / cells_expected).sum())
    degrees = cells_observed.size - 1
    assert chi_square <= _chi_square_critical(degrees), f"{name}: chi-square {chi_square} with {degrees} degrees"


def test_a_huge_rate_draws_at_once():
    # The inverse-CDF window took about 0.4 s per element at 1e10 (and grew with sqrt(rate)).
    rate = onnxnn.tensor([1e10, 1e14, 2.0], dtype=onnxnn.float64)
    samples = D.Poisson(rate).sample((100,)).numpy()
    assert samples.shape == (100, 3) and np.all(
        np.abs(samples[:, :2] - rate.numpy()[:2]) < 10 * np.sqrt(rate.numpy()[:2])
    )
    binomial = onnxnn.binomial(
        onnxnn.full((100,), 1e15, dtype=onnxnn.float64), onnxnn.tensor(0.5, dtype=onnxnn.float64)
    )
    assert np.all(np.abs(binomial.numpy() - 5e14) < 10 * math.sqrt(2.5e14))
    # Certain outcomes: their counts once sized the window too.
    count = onnxnn.tensor([1e12, 1e12, 3.0], dtype=onnxnn.float64)
    certain = onnxnn.binomial(count, onnxnn.tensor([1.0, 0.0, 1.0], dtype=onnxnn.float64)).numpy()
    np.testing.assert_array_equal(certain, [1e12, 0.0, 3.0])


def test_negative_binomial_with_huge_gamma_rates_draws_its_moments():
    # Poisson counts at gamma rates near 1e7: the case that hung the window sampler.
    total_count, probs = 1e4, 0.999
    onnxnn.manual_seed(14)
    samples = (
        D.NegativeBinomial(
            onnxnn.tensor(total_count, dtype=onnxnn.float64), probs=onnxnn.tensor(probs, dtype=onnxnn.float64)
        )
        .sample((N,))
        .numpy()
    )
    mean = total_count * probs / (1 - probs)
    variance = mean / (1 - probs)
    # The sample mean only (the variance's standard error needs the fourth moment): sd / sqrt(N).
    assert abs(samples.mean() - mean) <= SIGMAS * math.sqrt(variance / N)


def test_large_means_reproduce_under_a_seed():
    def draw():
        onnxnn.manual_seed(15)
        rate = onnxnn.tensor([2.0, 50.0, 1e8], dtype=onnxnn.float64).expand(50, 3)
        counts = onnxnn.binomial(onnxnn.tensor([5.0, 1e3, 1e7]).expand(50, 3), onnxnn.tensor([0.5, 0.3, 0.9]))
        return onnxnn.poisson(rate).numpy(), counts.numpy()

    for first, second in zip(draw(), draw()):
        np.testing.assert_array_equal(first, second)
