"""ContinuousBernoulli in float32 and half just outside ``lims``, where the closed forms cancel (the
variance at logits -0.005 came out -0.707; it is 1/12): against float64 truth from the closed forms
at the probabilities the distribution holds (exact there to about 1e-10 relative).

A float32 result rounded from float64 is within a few ulps (rtol 1e-6); ``log_prob`` and ``entropy``
are differences of terms near log 2 that nearly cancel, so they are compared to a few float32 ulps of
those terms (atol 1e-6).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.distributions as D

from . import reference as ref

X, U = 0.3, 0.7


def _icdf(u, lam):
    # cdf(x) = u  <=>  lam^x (1 - lam)^(1 - x) = (1 - lam) + u (2 lam - 1).
    return (np.log1p(-lam + u * (2 * lam - 1)) - np.log1p(-lam)) / (np.log(lam) - np.log1p(-lam))


QUANTITIES = [
    ("mean", lambda m: m.mean, ref.continuous_bernoulli_mean, 1e-6, 0.0),
    ("variance", lambda m: m.variance, ref.continuous_bernoulli_variance, 1e-6, 0.0),
    ("stddev", lambda m: m.stddev, lambda lam: np.sqrt(ref.continuous_bernoulli_variance(lam)), 1e-6, 0.0),
    ("cdf", lambda m: m.cdf(onnxnn.tensor(X)), lambda lam: ref.continuous_bernoulli_cdf(X, lam), 1e-6, 0.0),
    ("icdf", lambda m: m.icdf(onnxnn.tensor(U)), lambda lam: _icdf(U, lam), 1e-6, 0.0),
    ("log_prob", lambda m: m.log_prob(onnxnn.tensor(X)),
     lambda lam: ref.continuous_bernoulli_log_prob(X, lam), 0.0, 1e-6),
    ("entropy", lambda m: m.entropy(),
     lambda lam: -ref.continuous_bernoulli_log_prob(ref.continuous_bernoulli_mean(lam), lam), 0.0, 1e-6),
]  # fmt: skip

# Just outside the default lims (0.499, 0.501), and farther away.
LOGITS = [-0.005, -0.0041, 0.0045, 0.006, -0.02, 0.1, 1.0, -4.0]
PROBS = [0.4989, 0.5011, 0.497, 0.45, 0.9]


def _distributions(dtype):
    yield "logits", D.ContinuousBernoulli(logits=onnxnn.tensor(LOGITS, dtype=dtype))
    yield "probs", D.ContinuousBernoulli(probs=onnxnn.tensor(PROBS, dtype=dtype))


@pytest.mark.parametrize("name, quantity, truth, rtol, atol", QUANTITIES, ids=[case[0] for case in QUANTITIES])
def test_float32_closed_forms_near_lims_match_float64_truth(name, quantity, truth, rtol, atol):
    for parameterization, m in _distributions(onnxnn.float32):
        lam = m.probs.numpy().astype(np.float64)
        assert np.all((lam <= 0.499) | (lam > 0.501))
        actual = quantity(m)
        assert actual.dtype == onnxnn.float32
        np.testing.assert_allclose(
            actual.numpy(), truth(lam), rtol=rtol, atol=atol, err_msg=f"{name} ({parameterization})"
        )


def test_half_variance_near_lims_is_positive_and_close():
    m = D.ContinuousBernoulli(logits=onnxnn.tensor([-0.005, 0.006, 0.05], dtype=onnxnn.float16))
    lam = m.probs.float().numpy().astype(np.float64)
    variance = m.variance
    assert variance.dtype == onnxnn.float16
    # float16 keeps 11 bits: the truth at the held probabilities within 2 ulps.
    np.testing.assert_allclose(variance.float().numpy(), ref.continuous_bernoulli_variance(lam), rtol=2e-3)


def test_float32_gradients_near_lims_match_float64_truth():
    logits = onnxnn.tensor(LOGITS[:6], dtype=onnxnn.float32, requires_grad=True)
    D.ContinuousBernoulli(logits=logits).variance.sum().backward()
    # d variance / d logit = variance'(lam) lam (1 - lam), by central differences of the float64 truth
    # (step 1e-4: truncation about 1e-9 relative, rounding about 1e-7).
    lam = D.ContinuousBernoulli(logits=onnxnn.tensor(LOGITS[:6], dtype=onnxnn.float32)).probs.numpy().astype(float)
    step = 1e-4
    variance = ref.continuous_bernoulli_variance
    expected = (variance(lam + step) - variance(lam - step)) / (2 * step) * lam * (1 - lam)
    # The closed form's derivative cancels from terms of order |1 - 2 lam|^-3 to order |1 - 2 lam|: at
    # lam - 1/2 ~ 1e-3 even float64 keeps only about 2 digits (PyTorch's float32 gives 1e2, not 4e-5).
    np.testing.assert_allclose(logits.grad.numpy()[:4], expected[:4], rtol=5e-2)
    np.testing.assert_allclose(logits.grad.numpy()[4:], expected[4:], rtol=1e-4)
