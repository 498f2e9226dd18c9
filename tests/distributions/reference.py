"""numpy and math formulas the distribution tests compare against (never onnxnn code).

Special functions: ``lgamma`` and ``erf`` from the math module; ``digamma`` by the recurrence
``psi(x) = psi(x + 1) - 1/x`` up to ``x >= 10`` and the asymptotic series with six Bernoulli
terms (next term below 1e-17 there); the regularized incomplete gamma functions ``P(a, x)`` by
the power series below ``x = a + 1`` and ``Q(a, x)`` by Legendre's continued fraction (modified
Lentz) above, each run to a relative change below 1e-16 (Numerical Recipes, section 6.2).
"""

from __future__ import annotations

import math

import numpy as np

LOG_2PI = math.log(2 * math.pi)

lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
erf = np.vectorize(math.erf, otypes=[np.float64])


def _digamma(x: float) -> float:
    shift = 0.0
    while x < 10:
        shift -= 1 / x
        x += 1
    inv2 = 1 / (x * x)
    series = inv2 * (
        1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132 - inv2 * 691 / 32760))))
    )
    return shift + math.log(x) - 0.5 / x - series


digamma = np.vectorize(_digamma, otypes=[np.float64])


def _scaled_incomplete_gamma(a: float, x: float) -> tuple[float, bool]:
    """The smaller regularized incomplete gamma function divided by ``e^L``, ``L = a log x - x - lgamma(a)``:
    ``(S, True)`` with ``P(a, x) = e^L S`` (the power series, below ``x = a + 1``) or ``(H, False)``
    with ``Q(a, x) = e^L H`` (the continued fraction, above). Without ``e^L`` neither underflows
    nor carries the rounding of ``L``'s large terms."""
    if x < a + 1:
        term = total = 1 / a
        n = 0
        while abs(term) > 1e-17 * abs(total):
            n += 1
            term *= x / (a + n)
            total += term
        return total, True
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return h, False


def _lower_regularized_gamma(a: float, x: float) -> float:
    if x <= 0:
        return 0.0
    scaled, lower = _scaled_incomplete_gamma(a, x)
    smaller = scaled * math.exp(a * math.log(x) - x - math.lgamma(a))
    return smaller if lower else 1 - smaller


def _log_gamma_sample_derivative(alpha: float, x: float) -> float:
    """``d log x / d alpha`` of a ``Gamma(alpha, 1)`` draw kept at its quantile: ``-(dP/dalpha) / (p(x) x)``.

    With ``P = e^L S`` and ``p(x) x = e^L``: ``-(S (log x - psi(alpha)) + dS/dalpha)``, and likewise
    ``+(H (log x - psi(alpha)) + dH/dalpha)`` from ``Q = e^L H = 1 - P``. The derivative of S or H
    by central differences, step 1e-5 of the scale over which it changes (alpha below 1, sqrt(alpha)
    above): truncation about 1e-10 relative, rounding about 1e-16 / 1e-5.
    """
    step = 1e-5 * min(alpha, math.sqrt(alpha))
    scaled, lower = _scaled_incomplete_gamma(alpha, x)
    up = _scaled_incomplete_gamma(alpha + step, x)[0]
    down = _scaled_incomplete_gamma(alpha - step, x)[0]
    derivative = (up - down) / (2 * step)
    value = scaled * (math.log(x) - _digamma(alpha)) + derivative
    return -value if lower else value


log_gamma_sample_derivative = np.vectorize(_log_gamma_sample_derivative, otypes=[np.float64])


gammainc = np.vectorize(_lower_regularized_gamma, otypes=[np.float64])


def log_beta(a, b):
    return lgamma(a) + lgamma(b) - lgamma(a + b)


def xlogy(x, y):
    x, y = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x == 0, 0.0, x * np.log(y))


# ---------------------------------------------------------------- log-densities, by distribution


def normal_log_prob(x, loc, scale):
    return -((x - loc) ** 2) / (2 * scale**2) - np.log(scale) - 0.5 * LOG_2PI


def uniform_log_prob(x, low, high):
    with np.errstate(divide="ignore"):
        return np.where((x >= low) & (x < high), -np.log(high - low), -np.inf)


def laplace_log_prob(x, loc, scale):
    return -np.log(2 * scale) - np.abs(x - loc) / scale


def exponential_log_prob(x, rate):
    return np.log(rate) - rate * x


def gamma_log_prob(x, concentration, rate):
    return concentration * np.log(rate) + (concentration - 1) * np.log(x) - rate * x - lgamma(concentration)


def beta_log_prob(x, a, b):
    return (a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - log_beta(a, b)


def cauchy_log_prob(x, loc, scale):
    return -np.log(np.pi * scale * (1 + ((x - loc) / scale) ** 2))


def poisson_log_prob(k, rate):
    return xlogy(k, rate) - rate - lgamma(k + 1)


def binomial_log_prob(k, n, p):
    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + xlogy(k, p) + xlogy(n - k, 1 - p)


def lognormal_log_prob(x, loc, scale):
    return normal_log_prob(np.log(x), loc, scale) - np.log(x)


def student_t_log_prob(x, df, loc, scale):
    y = (x - loc) / scale
    norm = lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * np.log(df * np.pi) - np.log(scale)
    return norm - (df + 1) / 2 * np.log1p(y * y / df)


def dirichlet_log_prob(x, alpha):
    return ((alpha - 1) * np.log(x)).sum(-1) + lgamma(alpha.sum(-1)) - lgamma(alpha).sum(-1)


def mvn_log_prob(x, loc, covariance):
    n = loc.shape[-1]
    diff = x - loc
    solved = np.linalg.solve(covariance, diff[..., None])[..., 0]
    _, logdet = np.linalg.slogdet(covariance)
    return -0.5 * (n * LOG_2PI + logdet + (diff * solved).sum(-1))


def geometric_log_prob(k, p):
    return k * np.log1p(-p) + np.log(p)


def half_normal_log_prob(x, scale):
    return normal_log_prob(x, 0.0, scale) + math.log(2)


def half_cauchy_log_prob(x, scale):
    return cauchy_log_prob(x, 0.0, scale) + math.log(2)


def gumbel_log_prob(x, loc, scale):
    z = (x - loc) / scale
    return -np.log(scale) - z - np.exp(-z)


def pareto_log_prob(x, scale, alpha):
    return np.log(alpha) + alpha * np.log(scale) - (alpha + 1) * np.log(x)


def weibull_log_prob(x, scale, concentration):
    z = x / scale
    return np.log(concentration / scale) + (concentration - 1) * np.log(z) - z**concentration


def negative_binomial_log_prob(k, total_count, p):
    return lgamma(k + total_count) - lgamma(k + 1) - lgamma(total_count) + total_count * np.log1p(-p) + xlogy(k, p)


def multinomial_log_prob(x, p):
    n = x.sum(-1)
    return lgamma(n + 1) - lgamma(x + 1).sum(-1) + xlogy(x, p).sum(-1)


def continuous_bernoulli_log_normalizer(lam):
    # C = 2 atanh(1 - 2 lam) / (1 - 2 lam), for lam away from 1/2.
    return np.log(2 * np.arctanh(1 - 2 * lam) / (1 - 2 * lam))


def continuous_bernoulli_log_prob(x, lam):
    return x * np.log(lam) + (1 - x) * np.log1p(-lam) + continuous_bernoulli_log_normalizer(lam)


def continuous_bernoulli_mean(lam):
    return lam / (2 * lam - 1) + 1 / (2 * np.arctanh(1 - 2 * lam))


def continuous_bernoulli_variance(lam):
    return lam * (lam - 1) / (1 - 2 * lam) ** 2 + 1 / (2 * np.arctanh(1 - 2 * lam)) ** 2


def continuous_bernoulli_cdf(x, lam):
    return (lam**x * (1 - lam) ** (1 - x) + lam - 1) / (2 * lam - 1)


def logistic_log_prob(y, loc, scale):
    z = (y - loc) / scale
    return -z - np.log(scale) - 2 * np.log1p(np.exp(-z))


def concrete_log_prob(x, temperature, probs):
    """The Concrete (Gumbel-softmax) density on the simplex (Maddison et al., 2017, definition 1)."""
    k = x.shape[-1]
    log_terms = np.log(probs) - temperature * np.log(x)
    log_norm = np.log(np.exp(log_terms).sum(-1))
    return (
        math.lgamma(k)
        + (k - 1) * np.log(temperature)
        + (np.log(probs) - (temperature + 1) * np.log(x)).sum(-1)
        - k * log_norm
    )


def kumaraswamy_log_prob(x, a, b):
    return np.log(a * b) + (a - 1) * np.log(x) + (b - 1) * np.log1p(-(x**a))


def fisher_snedecor_log_prob(x, d1, d2):
    return (
        0.5 * d1 * np.log(d1 * x)
        + 0.5 * d2 * np.log(d2)
        - 0.5 * (d1 + d2) * np.log(d1 * x + d2)
        - np.log(x)
        - log_beta(d1 / 2, d2 / 2)
    )
