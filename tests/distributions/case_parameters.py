"""The inputs of the table in ``cases.py``: each distribution's parameters (float64, a batch of two),
the points its methods are evaluated at, and the expected values in closed form (entropies, moments
and the like) that are not a density of ``reference.py``.
"""

from __future__ import annotations

import math

import numpy as np

from . import reference as ref


def normal_cdf(x, loc, scale):
    return 0.5 * (1 + ref.erf((x - loc) / (scale * math.sqrt(2))))


def floats(*values):
    return np.array(values, dtype=np.float64)


# ---------------------------------------------------------------- parameters


LOC, SCALE = floats(0.5, -1.0), floats(1.5, 0.3)
LOW, HIGH = floats(0.0, -1.0), floats(2.0, 1.5)
PROBS = floats(0.3, 0.8)
CAT_PROBS = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
RATE = floats(0.5, 3.0)
CONC, GAMMA_RATE = floats(0.5, 3.0), floats(2.0, 0.7)
BETA_A, BETA_B = floats(0.5, 3.0), floats(2.0, 1.5)
ALPHA = np.array([[0.5, 3.0, 1.0], [2.0, 0.7, 4.0]])
POISSON_RATE = floats(0.5, 7.0)
BINOMIAL_N, BINOMIAL_P = 10.0, floats(0.2, 0.7)
DF, T_LOC, T_SCALE = floats(2.5, 5.0), floats(0.0, 1.0), floats(1.0, 2.0)
MVN_LOC = np.array([[0.5, -1.0], [0.0, 2.0]])
MVN_COV = np.array([[2.0, 0.3], [0.3, 1.0]])
GEOMETRIC_P = floats(0.3, 0.8)
PARETO_SCALE, PARETO_ALPHA = floats(1.5, 0.3), floats(0.8, 3.0)  # alpha <= 1, 2: infinite mean, variance
WEIBULL_SCALE, WEIBULL_K = floats(1.5, 0.3), floats(0.7, 3.0)
NB_COUNT, NB_P = floats(2.5, 5.0), floats(0.3, 0.6)  # a real total_count too
MULTINOMIAL_N = 10
TEMPERATURE = 0.7
MIX_WEIGHTS, MIX_LOC, MIX_SCALE = floats(0.3, 0.7), np.array([[-1.0, 1.0], [0.0, 2.0]]), floats(1.0, 0.5)
LOW_RANK_FACTOR, LOW_RANK_DIAG = np.array([[1.0], [0.3]]), floats(0.5, 1.0)
LOW_RANK_COV = LOW_RANK_FACTOR @ LOW_RANK_FACTOR.T + np.diag(LOW_RANK_DIAG)
DF1, DF2 = floats(5.0, 3.0), floats(10.0, 8.0)


def categorical_entropy(p):
    return -(p * np.log(p)).sum(-1)


def binomial_entropy(n, p):
    k = np.arange(n + 1)[:, None]
    log_pmf = ref.binomial_log_prob(k, n, p)
    return -(np.exp(log_pmf) * log_pmf).sum(0)


def beta_entropy(a, b):
    return ref.log_beta(a, b) - (a - 1) * ref.digamma(a) - (b - 1) * ref.digamma(b) + (a + b - 2) * ref.digamma(a + b)


def dirichlet_entropy(alpha):
    total = alpha.sum(-1)
    k = alpha.shape[-1]
    log_b = ref.lgamma(alpha).sum(-1) - ref.lgamma(total)
    return log_b + (total - k) * ref.digamma(total) - ((alpha - 1) * ref.digamma(alpha)).sum(-1)


def gamma_entropy(a, rate):
    return a - np.log(rate) + ref.lgamma(a) + (1 - a) * ref.digamma(a)


def student_t_entropy(df, scale):
    half = (df + 1) / 2
    return (
        half * (ref.digamma(half) - ref.digamma(df / 2)) + 0.5 * np.log(df) + ref.log_beta(df / 2, 0.5) + np.log(scale)
    )


def tanh_affine_log_prob(y):
    # y = 1 + 2 tanh(x), x ~ Normal(LOC, SCALE): log p(y) = log p(x) - log 2 - log(1 - tanh(x)^2).
    u = (y - 1) / 2
    x = np.arctanh(u)
    return ref.normal_log_prob(x, LOC, SCALE) - math.log(2) - np.log1p(-(u**2))


def weibull_gamma(order):
    # Gamma(1 + order / k), the Weibull's raw moment of that order over scale^order.
    return np.exp(ref.lgamma(1 + order / WEIBULL_K))


def multinomial_entropy(n, p):
    # -sum over every count vector (the compositions of n into 3 parts) of pmf log pmf.
    counts = np.array([(i, j, n - i - j) for i in range(n + 1) for j in range(n + 1 - i)], dtype=np.float64)
    log_pmf = ref.multinomial_log_prob(counts[:, None, :], p)
    return -(np.exp(log_pmf) * log_pmf).sum(0)


def logit(p):
    return np.log(p / (1 - p))


def kumaraswamy_moment(order):
    # b B(1 + order / a, b).
    a, b = BETA_A, BETA_B
    return b * np.exp(ref.log_beta(1 + order / a, b))


def mixture_log_prob(x):
    terms = np.log(MIX_WEIGHTS) + ref.normal_log_prob(x[..., None], MIX_LOC, MIX_SCALE)
    return np.log(np.exp(terms).sum(-1))


def mvn_entropy(cov):
    return 0.5 * np.linalg.slogdet(2 * math.pi * math.e * cov)[1]


NORMAL_X = floats(0.2, -1.1)
POSITIVE_X = floats(0.2, 1.1)
UNIT_X = floats(0.2, 0.9)
MVN_X = np.array([0.2, -1.1])
DIRICHLET_X = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
TANH_Y = floats(0.2, 2.5)
SIMPLEX_X = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
MIX_MEAN = (MIX_WEIGHTS * MIX_LOC).sum(-1)
PARETO_X = floats(2.0, 0.5)  # at least the scale
