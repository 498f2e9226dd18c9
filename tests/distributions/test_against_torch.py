"""The added distributions against PyTorch's where it is installed (skipped otherwise): the same
parameters and values give the same scores, moments and entropies (float64, to rounding)."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn.distributions as D

torch = pytest.importorskip("torch")

from .cases import BY_NAME, t  # noqa: E402

# PyTorch's constructors for the cases of cases.py, given numpy parameters.
TORCH_TWINS = {
    "NegativeBinomial": lambda: torch.distributions.NegativeBinomial(_tt([2.5, 5.0]), _tt([0.3, 0.6])),
    "Multinomial": lambda: torch.distributions.Multinomial(10, _tt([[0.6, 0.9, 1.5], [0.3, 0.3, 2.4]])),
    "ContinuousBernoulli": lambda: torch.distributions.ContinuousBernoulli(_tt([0.3, 0.8])),
    "LogitRelaxedBernoulli": lambda: torch.distributions.relaxed_bernoulli.LogitRelaxedBernoulli(
        _tt(0.7), _tt([0.3, 0.8])
    ),
    "RelaxedOneHotCategorical": lambda: torch.distributions.RelaxedOneHotCategorical(
        _tt(0.7), logits=_tt(np.log([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]))
    ),
    "Kumaraswamy": lambda: torch.distributions.Kumaraswamy(_tt([0.5, 3.0]), _tt([2.0, 1.5])),
    "LowRankMultivariateNormal": lambda: torch.distributions.LowRankMultivariateNormal(
        _tt([[0.5, -1.0], [0.0, 2.0]]), _tt([[1.0], [0.3]]), _tt([0.5, 1.0])
    ),
    "FisherSnedecor": lambda: torch.distributions.FisherSnedecor(_tt([5.0, 3.0]), _tt([10.0, 8.0])),
}


def _tt(values):
    return torch.tensor(np.asarray(values, dtype=np.float64))


@pytest.mark.parametrize("name", list(TORCH_TWINS))
def test_scores_and_moments_match_pytorch(name):
    case = BY_NAME[name]
    ours, theirs = case.make(), TORCH_TWINS[name]()
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    pairs = [(ours.log_prob(t(case.values)), theirs.log_prob(_tt(case.values)))]
    for method in ("mean", "variance", "entropy"):
        # PyTorch's Multinomial entropy takes lgamma(n + 1) of an int64 tensor, in float32 (an error
        # of about 5e-7); ours matches the exact sum over the support (test_densities.py).
        if name == "Multinomial" and method == "entropy":
            continue
        if not isinstance(getattr(case, method), str):
            value = getattr(ours, method)
            other = getattr(theirs, method)
            pairs.append((value() if callable(value) else value, other() if callable(other) else other))
    for value, other in pairs:
        # Both evaluate the same closed forms in float64: a few ulps of terms of order 1 to 10.
        np.testing.assert_allclose(value.numpy(), other.detach().numpy(), rtol=1e-13, atol=1e-13)


def test_kl_pairs_match_pytorch():
    TD = torch.distributions
    pairs = [
        (D.ContinuousBernoulli(t([0.3, 0.8])), D.ContinuousBernoulli(t([0.6, 0.2])),
         TD.ContinuousBernoulli(_tt([0.3, 0.8])), TD.ContinuousBernoulli(_tt([0.6, 0.2]))),
        (D.Beta(t([0.5, 3.0]), t([2.0, 1.5])), D.ContinuousBernoulli(t([0.6, 0.2])),
         TD.Beta(_tt([0.5, 3.0]), _tt([2.0, 1.5])), TD.ContinuousBernoulli(_tt([0.6, 0.2]))),
        (D.ContinuousBernoulli(t([0.3, 0.8])), D.Normal(t([0.6, 2.0]), t([1.0, 0.5])),
         TD.ContinuousBernoulli(_tt([0.3, 0.8])), TD.Normal(_tt([0.6, 2.0]), _tt([1.0, 0.5]))),
        (D.LowRankMultivariateNormal(t([0.5, -1.0]), t([[1.0], [0.3]]), t([0.5, 1.0])),
         D.MultivariateNormal(t([0.0, 1.0]), t([[2.0, 0.3], [0.3, 1.0]])),
         TD.LowRankMultivariateNormal(_tt([0.5, -1.0]), _tt([[1.0], [0.3]]), _tt([0.5, 1.0])),
         TD.MultivariateNormal(_tt([0.0, 1.0]), _tt([[2.0, 0.3], [0.3, 1.0]]))),
    ]  # fmt: skip
    for p, q, torch_p, torch_q in pairs:
        np.testing.assert_allclose(
            D.kl_divergence(p, q).numpy(), TD.kl_divergence(torch_p, torch_q).numpy(), rtol=1e-13, atol=1e-13
        )
