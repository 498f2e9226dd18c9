"""``onnxnn.distributions``: parameterizable probability distributions and sampling, as
``torch.distributions``.

Distributions are built from onnxnn tensors and their operations, so everything they compute is
recorded like any other code: ``log_prob`` is differentiable (the score-function estimator,
REINFORCE), and ``rsample`` draws reparameterized samples that gradients flow through (the
pathwise estimator, the reparameterization trick of VAEs and of RL's squashed Gaussians). Random
draws come from onnxnn's generator and enter graphs as data, so ``onnxnn.manual_seed`` repeats
them on every executor.

Example (REINFORCE)::

    >>> probs = policy_network(state)
    >>> m = onnxnn.distributions.Categorical(probs)
    >>> action = m.sample()
    >>> loss = -m.log_prob(action) * reward
    >>> loss.backward()

Example (pathwise)::

    >>> m = onnxnn.distributions.Normal(*params)
    >>> action = m.rsample()
    >>> loss = -reward(action)
    >>> loss.backward()

Distributions: Bernoulli, Beta, Binomial, Categorical, Cauchy, Chi2, ContinuousBernoulli, Dirichlet,
Exponential, ExpRelaxedCategorical, FisherSnedecor, Gamma, GeneralizedPareto, Geometric, Gumbel,
HalfCauchy, HalfNormal, Independent, Kumaraswamy, Laplace, LKJCholesky, LogisticNormal,
LogitRelaxedBernoulli, LogNormal, LowRankMultivariateNormal, MixtureSameFamily, Multinomial,
MultivariateNormal, NegativeBinomial, Normal, OneHotCategorical, OneHotCategoricalStraightThrough,
Pareto, Poisson, RelaxedBernoulli, RelaxedOneHotCategorical, StudentT, TransformedDistribution,
Uniform, VonMises, Weibull, Wishart; with
:func:`kl_divergence`/:func:`register_kl`, the :mod:`~onnxnn.distributions.constraints` and the
:mod:`~onnxnn.distributions.transforms`.
"""

from __future__ import annotations

from . import constraints, transforms  # noqa: F401  (submodules, as torch.distributions has them)
from . import _kl_continuous_bernoulli_low_rank  # noqa: F401  (registers its KL pairs)
from . import _kl_gumbel_pareto  # noqa: F401  (registers its KL pairs)
from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .categorical import Categorical
from .cauchy import Cauchy
from .chi2 import Chi2
from .continuous_bernoulli import ContinuousBernoulli
from .dirichlet import Dirichlet
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .fishersnedecor import FisherSnedecor
from .gamma import Gamma
from .generalized_pareto import GeneralizedPareto
from .geometric import Geometric
from .gumbel import Gumbel
from .half_cauchy import HalfCauchy
from .half_normal import HalfNormal
from .independent import Independent
from .kl import kl_divergence, register_kl
from .kumaraswamy import Kumaraswamy
from .laplace import Laplace
from .lkj_cholesky import LKJCholesky
from .log_normal import LogNormal
from .logistic_normal import LogisticNormal
from .lowrank_multivariate_normal import LowRankMultivariateNormal
from .mixture_same_family import MixtureSameFamily
from .multinomial import Multinomial
from .multivariate_normal import MultivariateNormal
from .negative_binomial import NegativeBinomial
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .pareto import Pareto
from .poisson import Poisson
from .relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from .relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
from .studentT import StudentT
from .transformed_distribution import TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    IndependentTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from .uniform import Uniform
from .von_mises import VonMises
from .weibull import Weibull
from .wishart import Wishart

__all__ = [
    "Bernoulli",
    "Beta",
    "Binomial",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ContinuousBernoulli",
    "Dirichlet",
    "Distribution",
    "Exponential",
    "ExponentialFamily",
    "ExpRelaxedCategorical",
    "FisherSnedecor",
    "Gamma",
    "GeneralizedPareto",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "Kumaraswamy",
    "Laplace",
    "LKJCholesky",
    "LogisticNormal",
    "LogitRelaxedBernoulli",
    "LogNormal",
    "LowRankMultivariateNormal",
    "MixtureSameFamily",
    "Multinomial",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "StudentT",
    "Poisson",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "Uniform",
    "VonMises",
    "Weibull",
    "Wishart",
    "TransformedDistribution",
    "kl_divergence",
    "register_kl",
    "AbsTransform",
    "AffineTransform",
    "ComposeTransform",
    "ExpTransform",
    "IndependentTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftplusTransform",
    "TanhTransform",
    "SoftmaxTransform",
    "StickBreakingTransform",
    "Transform",
    "identity_transform",
]
