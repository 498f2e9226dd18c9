"""The table of distributions the tests walk: how to make each, points of its support, and the
expected values of each method, from the formulas in ``reference.py`` and the parameters and closed
forms in ``case_parameters.py``.

Every case is float64 with a batch of two parameter sets, so one comparison covers both
broadcasting and values. ``UNSUPPORTED`` marks a method PyTorch does not provide for that
distribution (the test expects NotImplementedError); a ``mode`` of None is not checked.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

import onnxnn
import onnxnn.distributions as D

from . import reference as ref
from .case_parameters import ALPHA, BETA_A, BETA_B, CONC, DF, DF1, DF2, GAMMA_RATE, HIGH, LOC, LOW, RATE, SCALE
from .case_parameters import LOW_RANK_COV, LOW_RANK_DIAG, LOW_RANK_FACTOR, MIX_LOC, MIX_SCALE, MIX_WEIGHTS, MVN_COV
from .case_parameters import MVN_LOC, PARETO_ALPHA, PARETO_SCALE, T_LOC, T_SCALE, TEMPERATURE, WEIBULL_K, WEIBULL_SCALE
from .case_parameters import BINOMIAL_N, BINOMIAL_P, CAT_PROBS, GEOMETRIC_P, MULTINOMIAL_N, NB_COUNT, NB_P, POISSON_RATE
from .case_parameters import DIRICHLET_X, MIX_MEAN, MVN_X, NORMAL_X, PARETO_X, POSITIVE_X, SIMPLEX_X, TANH_Y, UNIT_X
from .case_parameters import beta_entropy, binomial_entropy, categorical_entropy, dirichlet_entropy, gamma_entropy
from .case_parameters import kumaraswamy_moment, mixture_log_prob, multinomial_entropy, mvn_entropy, student_t_entropy
from .case_parameters import PROBS, floats, logit, normal_cdf, tanh_affine_log_prob, weibull_gamma


def t(values) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(values, dtype=np.float64), dtype=onnxnn.float64)


UNSUPPORTED = "unsupported"


@dataclasses.dataclass
class Case:
    name: str
    make: Callable[[], D.Distribution]
    values: np.ndarray  # points of the support, broadcastable to the batch (and event) shape
    log_prob: np.ndarray
    mean: np.ndarray | str
    variance: np.ndarray | str
    entropy: np.ndarray | str
    cdf: Callable[[np.ndarray], np.ndarray] | str = UNSUPPORTED  # the reference cdf, when PyTorch has one
    has_icdf: bool = False
    mode: np.ndarray | None = None
    discrete: bool = False
    # For draws without a finite mean or a cdf method to check them by: an event of each draw (a
    # function of the draws returning booleans, one per batch element) and its probability.
    draw_event: tuple[Callable[[np.ndarray], np.ndarray], np.ndarray] | None = None

    def __repr__(self) -> str:
        return self.name


CASES = [
    Case(
        "Normal",
        lambda: D.Normal(t(LOC), t(SCALE)),
        NORMAL_X,
        ref.normal_log_prob(NORMAL_X, LOC, SCALE),
        LOC,
        SCALE**2,
        0.5 + 0.5 * ref.LOG_2PI + np.log(SCALE),
        cdf=lambda x: normal_cdf(x, LOC, SCALE),
        has_icdf=True,
        mode=LOC,
    ),
    Case(
        "Uniform",
        lambda: D.Uniform(t(LOW), t(HIGH)),
        floats(0.5, 1.2),
        ref.uniform_log_prob(floats(0.5, 1.2), LOW, HIGH),
        (LOW + HIGH) / 2,
        (HIGH - LOW) ** 2 / 12,
        np.log(HIGH - LOW),
        cdf=lambda x: np.clip((x - LOW) / (HIGH - LOW), 0, 1),
        has_icdf=True,
        mode=np.full(2, np.nan),
    ),
    Case(
        "Bernoulli",
        lambda: D.Bernoulli(t(PROBS)),
        floats(1.0, 0.0),
        np.log(floats(0.3, 0.2)),
        PROBS,
        PROBS * (1 - PROBS),
        -(PROBS * np.log(PROBS) + (1 - PROBS) * np.log1p(-PROBS)),
        mode=floats(0.0, 1.0),
        discrete=True,
    ),
    Case(
        "Bernoulli(logits)",
        lambda: D.Bernoulli(logits=t(np.log(PROBS / (1 - PROBS)))),
        floats(0.0, 1.0),
        np.log(floats(0.7, 0.8)),
        PROBS,
        PROBS * (1 - PROBS),
        -(PROBS * np.log(PROBS) + (1 - PROBS) * np.log1p(-PROBS)),
        discrete=True,
    ),
    Case(
        "Categorical",
        lambda: D.Categorical(t(CAT_PROBS * 2.0)),  # unnormalized: divided by the sum
        floats(2.0, 0.0),
        np.log(floats(0.5, 0.1)),
        np.full(2, np.nan),
        np.full(2, np.nan),
        categorical_entropy(CAT_PROBS),
        mode=floats(2.0, 2.0),
        discrete=True,
    ),
    Case(
        "Categorical(logits)",
        lambda: D.Categorical(logits=t(np.log(CAT_PROBS) + 3.0)),
        floats(1.0, 2.0),
        np.log(floats(0.3, 0.8)),
        np.full(2, np.nan),
        np.full(2, np.nan),
        categorical_entropy(CAT_PROBS),
        discrete=True,
    ),
    Case(
        "OneHotCategorical",
        lambda: D.OneHotCategorical(t(CAT_PROBS)),
        np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),
        np.log(floats(0.5, 0.1)),
        CAT_PROBS,
        CAT_PROBS * (1 - CAT_PROBS),
        categorical_entropy(CAT_PROBS),
        mode=np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
        discrete=True,
    ),
    Case(
        "MultivariateNormal(covariance_matrix)",
        lambda: D.MultivariateNormal(t(MVN_LOC), t(MVN_COV)),
        MVN_X,
        ref.mvn_log_prob(MVN_X, MVN_LOC, MVN_COV),
        MVN_LOC,
        np.broadcast_to(np.diag(MVN_COV), (2, 2)),
        np.full(2, mvn_entropy(MVN_COV)),
        mode=MVN_LOC,
    ),
    Case(
        "MultivariateNormal(precision_matrix)",
        lambda: D.MultivariateNormal(t(MVN_LOC), precision_matrix=t(np.linalg.inv(MVN_COV))),
        MVN_X,
        ref.mvn_log_prob(MVN_X, MVN_LOC, MVN_COV),
        MVN_LOC,
        np.broadcast_to(np.diag(MVN_COV), (2, 2)),
        np.full(2, mvn_entropy(MVN_COV)),
    ),
    Case(
        "MultivariateNormal(scale_tril)",
        lambda: D.MultivariateNormal(t(MVN_LOC), scale_tril=t(np.linalg.cholesky(MVN_COV))),
        MVN_X,
        ref.mvn_log_prob(MVN_X, MVN_LOC, MVN_COV),
        MVN_LOC,
        np.broadcast_to(np.diag(MVN_COV), (2, 2)),
        np.full(2, mvn_entropy(MVN_COV)),
    ),
    Case(
        "Independent(Normal)",
        lambda: D.Independent(D.Normal(t(LOC), t(SCALE)), 1),
        NORMAL_X,
        ref.normal_log_prob(NORMAL_X, LOC, SCALE).sum(),
        LOC,
        SCALE**2,
        (0.5 + 0.5 * ref.LOG_2PI + np.log(SCALE)).sum(),
        mode=LOC,
    ),
    Case(
        "LogNormal",
        lambda: D.LogNormal(t(LOC), t(SCALE)),
        POSITIVE_X,
        ref.lognormal_log_prob(POSITIVE_X, LOC, SCALE),
        np.exp(LOC + SCALE**2 / 2),
        np.expm1(SCALE**2) * np.exp(2 * LOC + SCALE**2),
        LOC + 0.5 + 0.5 * ref.LOG_2PI + np.log(SCALE),
        cdf=lambda x: normal_cdf(np.log(x), LOC, SCALE),
        has_icdf=True,
        mode=np.exp(LOC - SCALE**2),
    ),
    Case(
        "Laplace",
        lambda: D.Laplace(t(LOC), t(SCALE)),
        NORMAL_X,
        ref.laplace_log_prob(NORMAL_X, LOC, SCALE),
        LOC,
        2 * SCALE**2,
        1 + np.log(2 * SCALE),
        cdf=lambda x: 0.5 + 0.5 * np.sign(x - LOC) * (1 - np.exp(-np.abs(x - LOC) / SCALE)),
        has_icdf=True,
        mode=LOC,
    ),
    Case(
        "Exponential",
        lambda: D.Exponential(t(RATE)),
        POSITIVE_X,
        ref.exponential_log_prob(POSITIVE_X, RATE),
        1 / RATE,
        1 / RATE**2,
        1 - np.log(RATE),
        cdf=lambda x: -np.expm1(-RATE * x),
        has_icdf=True,
        mode=np.zeros(2),
    ),
    Case(
        "Gamma",
        lambda: D.Gamma(t(CONC), t(GAMMA_RATE)),
        POSITIVE_X,
        ref.gamma_log_prob(POSITIVE_X, CONC, GAMMA_RATE),
        CONC / GAMMA_RATE,
        CONC / GAMMA_RATE**2,
        gamma_entropy(CONC, GAMMA_RATE),
        cdf=lambda x: ref.gammainc(CONC, GAMMA_RATE * x),
        mode=np.maximum((CONC - 1) / GAMMA_RATE, 0),
    ),
    Case(
        "Chi2",
        lambda: D.Chi2(t(2 * CONC)),
        POSITIVE_X,
        ref.gamma_log_prob(POSITIVE_X, CONC, 0.5),
        2 * CONC,
        4 * CONC,
        gamma_entropy(CONC, 0.5),
        cdf=lambda x: ref.gammainc(CONC, 0.5 * x),
    ),
    Case(
        "Beta",
        lambda: D.Beta(t(BETA_A), t(BETA_B)),
        UNIT_X,
        ref.beta_log_prob(UNIT_X, BETA_A, BETA_B),
        BETA_A / (BETA_A + BETA_B),
        BETA_A * BETA_B / ((BETA_A + BETA_B) ** 2 * (BETA_A + BETA_B + 1)),
        beta_entropy(BETA_A, BETA_B),
        mode=floats(0.0, 0.8),  # a < 1 <= b: the density peaks at 0; else (a - 1) / (a + b - 2)
    ),
    Case(
        "Dirichlet",
        lambda: D.Dirichlet(t(ALPHA)),
        DIRICHLET_X,
        ref.dirichlet_log_prob(DIRICHLET_X, ALPHA),
        ALPHA / ALPHA.sum(-1, keepdims=True),
        ALPHA
        * (ALPHA.sum(-1, keepdims=True) - ALPHA)
        / (ALPHA.sum(-1, keepdims=True) ** 2 * (ALPHA.sum(-1, keepdims=True) + 1)),
        dirichlet_entropy(ALPHA),
        mode=np.array([[0.0, 1.0, 0.0], [1 / 4.0, 0.0, 3 / 4.0]]),  # max(alpha - 1, 0), normalized
    ),
    Case(
        "Poisson",
        lambda: D.Poisson(t(POISSON_RATE)),
        floats(0.0, 4.0),
        ref.poisson_log_prob(floats(0.0, 4.0), POISSON_RATE),
        POISSON_RATE,
        POISSON_RATE,
        UNSUPPORTED,  # an exponential family without a carrier measure, as PyTorch's
        mode=np.floor(POISSON_RATE),
        discrete=True,
    ),
    Case(
        "Binomial",
        lambda: D.Binomial(10, t(BINOMIAL_P)),
        floats(3.0, 10.0),
        ref.binomial_log_prob(floats(3.0, 10.0), BINOMIAL_N, BINOMIAL_P),
        BINOMIAL_N * BINOMIAL_P,
        BINOMIAL_N * BINOMIAL_P * (1 - BINOMIAL_P),
        binomial_entropy(10, BINOMIAL_P),
        mode=np.floor((BINOMIAL_N + 1) * BINOMIAL_P),
        discrete=True,
    ),
    Case(
        "Cauchy",
        lambda: D.Cauchy(t(LOC), t(SCALE)),
        NORMAL_X,
        ref.cauchy_log_prob(NORMAL_X, LOC, SCALE),
        np.full(2, np.nan),
        np.full(2, np.inf),
        np.log(4 * np.pi * SCALE),
        cdf=lambda x: np.arctan((x - LOC) / SCALE) / np.pi + 0.5,
        has_icdf=True,
        mode=LOC,
    ),
    Case(
        "StudentT",
        lambda: D.StudentT(t(DF), t(T_LOC), t(T_SCALE)),
        NORMAL_X,
        ref.student_t_log_prob(NORMAL_X, DF, T_LOC, T_SCALE),
        T_LOC,
        T_SCALE**2 * DF / (DF - 2),
        student_t_entropy(DF, T_SCALE),
        mode=T_LOC,
    ),
    Case(
        "Geometric",
        lambda: D.Geometric(t(GEOMETRIC_P)),
        floats(2.0, 0.0),
        ref.geometric_log_prob(floats(2.0, 0.0), GEOMETRIC_P),
        1 / GEOMETRIC_P - 1,
        (1 - GEOMETRIC_P) / GEOMETRIC_P**2,
        -(GEOMETRIC_P * np.log(GEOMETRIC_P) + (1 - GEOMETRIC_P) * np.log1p(-GEOMETRIC_P)) / GEOMETRIC_P,
        mode=np.zeros(2),
        discrete=True,
    ),
    Case(
        "Geometric(logits)",
        lambda: D.Geometric(logits=t(np.log(GEOMETRIC_P / (1 - GEOMETRIC_P)))),
        floats(0.0, 3.0),
        ref.geometric_log_prob(floats(0.0, 3.0), GEOMETRIC_P),
        1 / GEOMETRIC_P - 1,
        (1 - GEOMETRIC_P) / GEOMETRIC_P**2,
        -(GEOMETRIC_P * np.log(GEOMETRIC_P) + (1 - GEOMETRIC_P) * np.log1p(-GEOMETRIC_P)) / GEOMETRIC_P,
        mode=np.zeros(2),
        discrete=True,
    ),
    Case(
        "HalfNormal",
        lambda: D.HalfNormal(t(SCALE)),
        POSITIVE_X,
        ref.half_normal_log_prob(POSITIVE_X, SCALE),
        SCALE * np.sqrt(2 / np.pi),
        SCALE**2 * (1 - 2 / np.pi),
        0.5 * np.log(np.pi / 2) + 0.5 + np.log(SCALE),
        cdf=lambda x: ref.erf(x / (SCALE * math.sqrt(2))),
        has_icdf=True,
        mode=np.zeros(2),
    ),
    Case(
        "HalfCauchy",
        lambda: D.HalfCauchy(t(SCALE)),
        POSITIVE_X,
        ref.half_cauchy_log_prob(POSITIVE_X, SCALE),
        np.full(2, np.inf),
        np.full(2, np.inf),
        np.log(2 * np.pi * SCALE),
        cdf=lambda x: 2 / np.pi * np.arctan(x / SCALE),
        has_icdf=True,
        mode=np.zeros(2),
    ),
    Case(
        "Gumbel",
        lambda: D.Gumbel(t(LOC), t(SCALE)),
        NORMAL_X,
        ref.gumbel_log_prob(NORMAL_X, LOC, SCALE),
        LOC + SCALE * np.euler_gamma,
        np.pi**2 / 6 * SCALE**2,
        np.log(SCALE) + 1 + np.euler_gamma,
        cdf=lambda x: np.exp(-np.exp(-(x - LOC) / SCALE)),
        has_icdf=True,
        mode=LOC,
    ),
    Case(
        "Pareto",
        lambda: D.Pareto(t(PARETO_SCALE), t(PARETO_ALPHA)),
        PARETO_X,
        ref.pareto_log_prob(PARETO_X, PARETO_SCALE, PARETO_ALPHA),
        floats(np.inf, 3.0 * 0.3 / 2.0),  # alpha scale / (alpha - 1) for alpha > 1
        floats(np.inf, 0.3**2 * 3.0 / (2.0**2 * 1.0)),  # scale^2 alpha / ((alpha - 1)^2 (alpha - 2)) for alpha > 2
        np.log(PARETO_SCALE / PARETO_ALPHA) + 1 + 1 / PARETO_ALPHA,
        cdf=lambda x: 1 - (PARETO_SCALE / x) ** PARETO_ALPHA,
        has_icdf=True,
        mode=PARETO_SCALE,
    ),
    Case(
        "Weibull",
        lambda: D.Weibull(t(WEIBULL_SCALE), t(WEIBULL_K)),
        POSITIVE_X,
        ref.weibull_log_prob(POSITIVE_X, WEIBULL_SCALE, WEIBULL_K),
        WEIBULL_SCALE * weibull_gamma(1),
        WEIBULL_SCALE**2 * (weibull_gamma(2) - weibull_gamma(1) ** 2),
        np.euler_gamma * (1 - 1 / WEIBULL_K) + np.log(WEIBULL_SCALE / WEIBULL_K) + 1,
        cdf=lambda x: -np.expm1(-((x / WEIBULL_SCALE) ** WEIBULL_K)),
        has_icdf=True,
        # scale ((k - 1) / k)^(1 / k): PyTorch's formula gives NaN for k < 1 (a negative base to a
        # fractional power), though the density then peaks at 0.
        mode=floats(np.nan, 0.3 * (2.0 / 3.0) ** (1 / 3.0)),
    ),
    Case(
        "TransformedDistribution(tanh, affine)",
        lambda: D.TransformedDistribution(D.Normal(t(LOC), t(SCALE)), [D.TanhTransform(), D.AffineTransform(1.0, 2.0)]),
        TANH_Y,
        tanh_affine_log_prob(TANH_Y),
        UNSUPPORTED,  # no closed form
        UNSUPPORTED,
        UNSUPPORTED,
        cdf=lambda y: normal_cdf(np.arctanh((y - 1) / 2), LOC, SCALE),
        has_icdf=True,
    ),
    Case(
        "NegativeBinomial",
        lambda: D.NegativeBinomial(t(NB_COUNT), t(NB_P)),
        floats(2.0, 5.0),
        ref.negative_binomial_log_prob(floats(2.0, 5.0), NB_COUNT, NB_P),
        NB_COUNT * NB_P / (1 - NB_P),
        NB_COUNT * NB_P / (1 - NB_P) ** 2,
        UNSUPPORTED,
        mode=np.floor((NB_COUNT - 1) * NB_P / (1 - NB_P)),
        discrete=True,
    ),
    Case(
        "NegativeBinomial(logits)",
        lambda: D.NegativeBinomial(t(NB_COUNT), logits=t(logit(NB_P))),
        floats(0.0, 9.0),
        ref.negative_binomial_log_prob(floats(0.0, 9.0), NB_COUNT, NB_P),
        NB_COUNT * NB_P / (1 - NB_P),
        NB_COUNT * NB_P / (1 - NB_P) ** 2,
        UNSUPPORTED,
        discrete=True,
    ),
    Case(
        "Multinomial",
        lambda: D.Multinomial(MULTINOMIAL_N, t(CAT_PROBS * 3.0)),  # unnormalized: divided by the sum
        np.array([[3.0, 3.0, 4.0], [1.0, 0.0, 9.0]]),
        ref.multinomial_log_prob(np.array([[3.0, 3.0, 4.0], [1.0, 0.0, 9.0]]), CAT_PROBS),
        MULTINOMIAL_N * CAT_PROBS,
        MULTINOMIAL_N * CAT_PROBS * (1 - CAT_PROBS),
        multinomial_entropy(MULTINOMIAL_N, CAT_PROBS),
        discrete=True,
    ),
    Case(
        "Multinomial(logits)",
        lambda: D.Multinomial(MULTINOMIAL_N, logits=t(np.log(CAT_PROBS) - 1.0)),
        np.array([[0.0, 10.0, 0.0], [2.0, 2.0, 6.0]]),
        ref.multinomial_log_prob(np.array([[0.0, 10.0, 0.0], [2.0, 2.0, 6.0]]), CAT_PROBS),
        MULTINOMIAL_N * CAT_PROBS,
        MULTINOMIAL_N * CAT_PROBS * (1 - CAT_PROBS),
        multinomial_entropy(MULTINOMIAL_N, CAT_PROBS),
        discrete=True,
    ),
    Case(
        "ContinuousBernoulli",
        lambda: D.ContinuousBernoulli(t(PROBS)),
        UNIT_X,
        ref.continuous_bernoulli_log_prob(UNIT_X, PROBS),
        ref.continuous_bernoulli_mean(PROBS),
        ref.continuous_bernoulli_variance(PROBS),
        # -E[log p(x)], log p linear in x.
        -(ref.continuous_bernoulli_log_prob(ref.continuous_bernoulli_mean(PROBS), PROBS)),
        cdf=lambda x: ref.continuous_bernoulli_cdf(x, PROBS),
        has_icdf=True,
    ),
    Case(
        "ContinuousBernoulli(logits)",
        lambda: D.ContinuousBernoulli(logits=t(logit(PROBS))),
        floats(0.0, 1.0),
        ref.continuous_bernoulli_log_prob(floats(0.0, 1.0), PROBS),
        ref.continuous_bernoulli_mean(PROBS),
        ref.continuous_bernoulli_variance(PROBS),
        -(ref.continuous_bernoulli_log_prob(ref.continuous_bernoulli_mean(PROBS), PROBS)),
        cdf=lambda x: ref.continuous_bernoulli_cdf(x, PROBS),
        has_icdf=True,
    ),
    Case(
        "LogitRelaxedBernoulli",
        lambda: D.LogitRelaxedBernoulli(t(TEMPERATURE), t(PROBS)),
        NORMAL_X,
        # A logistic distribution of location logit(p) / t and scale 1 / t.
        ref.logistic_log_prob(NORMAL_X, logit(PROBS) / TEMPERATURE, 1 / TEMPERATURE),
        UNSUPPORTED,
        UNSUPPORTED,
        UNSUPPORTED,
        draw_event=(lambda y: y <= NORMAL_X, 1 / (1 + np.exp(logit(PROBS) - TEMPERATURE * NORMAL_X))),
    ),
    Case(
        "RelaxedBernoulli",
        lambda: D.RelaxedBernoulli(t(TEMPERATURE), logits=t(logit(PROBS))),
        UNIT_X,
        ref.logistic_log_prob(logit(UNIT_X), logit(PROBS) / TEMPERATURE, 1 / TEMPERATURE)
        - np.log(UNIT_X * (1 - UNIT_X)),
        UNSUPPORTED,
        UNSUPPORTED,
        UNSUPPORTED,
        draw_event=(lambda x: x <= UNIT_X, 1 / (1 + np.exp(logit(PROBS) - TEMPERATURE * logit(UNIT_X)))),
    ),
    Case(
        "ExpRelaxedCategorical",
        lambda: D.ExpRelaxedCategorical(t(TEMPERATURE), t(CAT_PROBS)),
        np.log(SIMPLEX_X),
        # The Concrete density of exp(y), times the Jacobian prod(x) of x = exp(y).
        ref.concrete_log_prob(SIMPLEX_X, TEMPERATURE, CAT_PROBS) + np.log(SIMPLEX_X).sum(-1),
        UNSUPPORTED,
        UNSUPPORTED,
        UNSUPPORTED,
        # The Gumbel-max property: the largest coordinate is category k with probability p_k.
        draw_event=(lambda y: y.argmax(-1) == np.array([2, 0]), floats(0.5, 0.1)),
    ),
    Case(
        "RelaxedOneHotCategorical",
        lambda: D.RelaxedOneHotCategorical(t(TEMPERATURE), logits=t(np.log(CAT_PROBS))),
        SIMPLEX_X,
        ref.concrete_log_prob(SIMPLEX_X, TEMPERATURE, CAT_PROBS),
        UNSUPPORTED,
        UNSUPPORTED,
        UNSUPPORTED,
        draw_event=(lambda x: x.argmax(-1) == np.array([1, 2]), floats(0.3, 0.8)),
    ),
    Case(
        "MixtureSameFamily(Normal)",
        lambda: D.MixtureSameFamily(D.Categorical(t(MIX_WEIGHTS)), D.Normal(t(MIX_LOC), t(MIX_SCALE))),
        NORMAL_X,
        mixture_log_prob(NORMAL_X),
        MIX_MEAN,
        (MIX_WEIGHTS * (MIX_SCALE**2 + MIX_LOC**2)).sum(-1) - MIX_MEAN**2,
        UNSUPPORTED,
        cdf=lambda x: (MIX_WEIGHTS * normal_cdf(x[..., None], MIX_LOC, MIX_SCALE)).sum(-1),
    ),
    Case(
        "Kumaraswamy",
        lambda: D.Kumaraswamy(t(BETA_A), t(BETA_B)),
        UNIT_X,
        ref.kumaraswamy_log_prob(UNIT_X, BETA_A, BETA_B),
        kumaraswamy_moment(1),
        kumaraswamy_moment(2) - kumaraswamy_moment(1) ** 2,
        # (1 - 1/b) + (1 - 1/a) H_b - log(a b), H_b = psi(b + 1) + gamma the harmonic number.
        (1 - 1 / BETA_B) + (1 - 1 / BETA_A) * (ref.digamma(BETA_B + 1) + np.euler_gamma) - np.log(BETA_A * BETA_B),
        cdf=lambda x: 1 - (1 - x**BETA_A) ** BETA_B,
        has_icdf=True,
        # ((a - 1) / (a b - 1))^(1 / a) where a, b >= 1; NaN for a < 1 (an unbounded density at 0).
        mode=floats(np.nan, (2.0 / 3.5) ** (1 / 3.0)),
    ),
    Case(
        "LowRankMultivariateNormal",
        lambda: D.LowRankMultivariateNormal(t(MVN_LOC), t(LOW_RANK_FACTOR), t(LOW_RANK_DIAG)),
        MVN_X,
        ref.mvn_log_prob(MVN_X, MVN_LOC, LOW_RANK_COV),
        MVN_LOC,
        np.broadcast_to(np.diag(LOW_RANK_COV), (2, 2)),
        np.full(2, mvn_entropy(LOW_RANK_COV)),
        mode=MVN_LOC,
    ),
    Case(
        "FisherSnedecor",
        lambda: D.FisherSnedecor(t(DF1), t(DF2)),
        POSITIVE_X,
        ref.fisher_snedecor_log_prob(POSITIVE_X, DF1, DF2),
        DF2 / (DF2 - 2),
        2 * DF2**2 * (DF1 + DF2 - 2) / (DF1 * (DF2 - 2) ** 2 * (DF2 - 4)),
        UNSUPPORTED,
        mode=(DF1 - 2) / DF1 * DF2 / (DF2 + 2),
    ),
]

BY_NAME = {case.name: case for case in CASES}
