"""Functions at the ends of the float range: no overflow where the result is representable, and
PyTorch's infinities where it is not. Expectations are numpy's ``hypot`` and Python's ``math.lgamma``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn

EXECUTORS = ["onnxruntime", "kernels"]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hypot_neither_overflows_nor_underflows(executor, dtype):
    # Squares of 1e38 overflow float32 and of 3e-39 underflow it; C's hypot (PyTorch's) does neither.
    a = np.array([1e38, -1e38, 3.0, 0.0, 0.0, np.inf, np.nan, np.nan, -np.inf, 1e-30, 3e-39, -7.5], dtype)
    b = np.array([3.0, 1e38, 4.0, 0.0, -2.0, np.nan, np.inf, 1.0, 2.0, 1e-30, 4e-39, 0.25], dtype)
    with onnxnn.set_executor(executor):
        result = onnxnn.hypot(onnxnn.tensor(a), onnxnn.tensor(b)).numpy()
    # A product, a square root and a sum of two terms: a few units of rounding.
    np.testing.assert_allclose(result, np.hypot(a, b), rtol=4 * np.finfo(dtype).eps, atol=0)


def _lgamma(value: float) -> float:
    if math.isnan(value):
        return math.nan
    if math.isinf(value):
        return math.inf  # lgamma(+-inf) is +inf in PyTorch and C
    try:
        return math.lgamma(value)
    except ValueError:  # a pole
        return math.inf


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lgamma_at_the_ends_of_the_range(executor, dtype):
    tiny = float(np.finfo(dtype).smallest_subnormal)
    values = [np.inf, -np.inf, -1e38, -3.0, 0.0, tiny, -tiny, 1e-38, 1e-31, -1e-31, 1e30, np.nan]
    x = np.array(values, dtype)
    with onnxnn.set_executor(executor):
        result = onnxnn.lgamma(onnxnn.tensor(x)).numpy()
    expected = np.array([_lgamma(float(v)) for v in x])
    # Near zero lgamma is -log|x| to rounding; elsewhere these are poles and infinities.
    np.testing.assert_allclose(result, expected.astype(dtype), rtol=4 * np.finfo(dtype).eps, atol=0)


def _magnitudes(dtype) -> np.ndarray:
    """Signed values from 1e-30 to 10 (tiny ones are where log(1 + x) and exp(x) - 1 lose all digits),
    with the special values."""
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(3000) * np.logspace(-30, 1, 3000)
    special = [0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 88.0, -0.99999, 1e-38]
    return np.concatenate([spread, special]).astype(dtype)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["log1p", "expm1"])
def test_log1p_and_expm1_keep_the_digits_of_tiny_inputs(executor, dtype, name):
    x = _magnitudes(dtype)
    with onnxnn.set_executor(executor):
        result = getattr(onnxnn, name)(onnxnn.tensor(x)).numpy()
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(x)  # the C library's, correctly rounded to within an ulp
    # A logarithm or exponential, a product and a quotient: a few units of rounding.
    np.testing.assert_allclose(result, expected, rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64, onnxnn.float16], ids=str)
@pytest.mark.parametrize("name", ["log1p", "expm1"])
def test_log1p_and_expm1_keep_the_sign_of_zero(executor, dtype, name):
    # As C's (numpy's, PyTorch's): f(-0) = -0, and a tiny negative input gives -0 where it rounds to 0.
    x = np.array([-0.0, 0.0, -1e-30, 1e-30, -0.25, 0.25])
    with onnxnn.set_executor(executor):
        result = getattr(onnxnn, name)(onnxnn.tensor(x, dtype=dtype)).numpy()
    expected = getattr(np, name)(x.astype(dtype.numpy_dtype))
    zero = expected == 0
    np.testing.assert_array_equal(result[zero], expected[zero])
    np.testing.assert_array_equal(np.signbit(result), np.signbit(expected))


@pytest.mark.parametrize("name, derivative", [("log1p", lambda x: 1 / (1 + x)), ("expm1", np.exp)])
def test_log1p_and_expm1_gradients(name, derivative):
    x = np.array([1e-10, -0.5, 3.0, 0.0, 2e-3], np.float64)
    t = onnxnn.tensor(x, requires_grad=True)
    getattr(onnxnn, name)(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), derivative(x), rtol=4 * np.finfo(np.float64).eps)


def _log_ndtr(x: float) -> float:
    """log of the normal CDF from the C library's erfc, each tail on its own (no cancellation)."""
    if x > -1:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2)))
    return math.log(0.5 * math.erfc(-x / math.sqrt(2)))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_log_ndtr_in_both_tails(executor):
    # log(ndtr(x)) underflows to -inf below x = -38 and rounds to 0 above 8.3; log_ndtr does neither.
    x = np.linspace(-37.0, 37.0, 297)
    with onnxnn.set_executor(executor):
        result = onnxnn.special.log_ndtr(onnxnn.tensor(x)).numpy()
    expected = np.array([_log_ndtr(v) for v in x])
    # x / sqrt(2), rounded, then squared: t^2 = x^2 / 2 is off by up to x^2 / 2 units of rounding in
    # absolute terms, and exp(-t^2) relatively by as much (about 700 units at the ends); erfcx below
    # t = 2 is exp(t^2) (1 - erf(t)), whose subtraction loses up to 1 / erfc(2), about 214 units.
    tolerance = (x * x + 256) * np.finfo(np.float64).eps
    assert np.all(np.abs(result - expected) <= tolerance * np.abs(expected))
    with onnxnn.set_executor(executor):
        ends = onnxnn.special.log_ndtr(onnxnn.tensor(np.array([-np.inf, np.inf, np.nan]))).numpy()
    np.testing.assert_array_equal(ends, [-np.inf, 0.0, np.nan])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_ndtri_inverts_the_normal_cdf_into_the_far_tail(executor):
    # 2p - 1 rounds a small p away (ndtri(1e-20) was -inf): the tails invert log_ndtr instead.
    # Up to x = 2: above, p rounds next to 1 and no longer tells x to 1e-12 (dx = dp / pdf(x)).
    x = np.linspace(-37.0, 2.0, 157)
    p = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    with onnxnn.set_executor(executor):
        result = onnxnn.special.ndtri(onnxnn.tensor(p)).numpy()
    # The inverse is well conditioned in the tails (dx/x = dp/p / x^2); near 0 the absolute error counts.
    np.testing.assert_allclose(result, x, rtol=1e-12, atol=1e-14)
    with onnxnn.set_executor(executor):
        ends = onnxnn.special.ndtri(onnxnn.tensor(np.array([0.0, 1.0, -0.5, 1.5, np.nan, 0.99]))).numpy()
    np.testing.assert_array_equal(ends[:5], [-np.inf, np.inf, np.nan, np.nan, np.nan])
    assert abs(ends[5] - 2.3263478740408408) < 1e-13  # -ndtri(0.01), as 1 - 0.99 is exact


@pytest.mark.parametrize("executor", EXECUTORS)
def test_limits_of_bessel_functions_and_entropy(executor):
    with onnxnn.set_executor(executor):
        big = onnxnn.tensor([1e38, -1e38])
        np.testing.assert_array_equal(onnxnn.special.i0(big).numpy(), [np.inf, np.inf])
        np.testing.assert_array_equal(onnxnn.special.i1(big).numpy(), [np.inf, -np.inf])
        np.testing.assert_array_equal(onnxnn.special.i0e(big).numpy() > 0, [True, True])
        infinite = onnxnn.tensor([np.inf, -np.inf])
        np.testing.assert_array_equal(onnxnn.special.spherical_bessel_j0(infinite).numpy(), [0.0, 0.0])
        assert np.isnan(onnxnn.special.entr(onnxnn.tensor([np.nan])).numpy()[0])


# clamp with one bound leaves the other side alone, infinities included (ONNX's Clip would bound a
# missing side by the dtype's finite limit: onnxruntime gave FLT_MAX for clamp(inf, min=0)); a NaN
# bound makes every element NaN, with no gradient, as in PyTorch.
EDGES = [np.inf, -np.inf, 1.5, -1.5, np.nan, 0.0]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize(
    "bounds, expected",
    [
        ({"min": 0.0}, lambda x: np.where(x < 0, 0, x)),
        ({"max": 0.0}, lambda x: np.where(x > 0, 0, x)),
        ({"min": np.nan}, lambda x: np.full_like(x, np.nan)),
        ({"max": np.nan}, lambda x: np.full_like(x, np.nan)),
    ],
    ids=["min", "max", "nan_min", "nan_max"],
)
def test_clamp_with_one_bound(executor, dtype, bounds, expected):
    x = np.array(EDGES, dtype)
    with onnxnn.set_executor(executor):
        input = onnxnn.tensor(x, requires_grad=True)
        result = onnxnn.clamp(input, **bounds)
        result.sum().backward()
        np.testing.assert_array_equal(result.detach().numpy(), expected(x))
        if np.isnan(list(bounds.values())[0]):
            np.testing.assert_array_equal(input.grad.numpy(), np.zeros_like(x))


def test_an_exported_clamp_keeps_infinities_in_plain_onnxruntime():
    import onnxruntime

    from onnxnn.export import to_onnx

    class ClampMin(onnxnn.nn.Module):
        def forward(self, x):
            return x.clamp(min=0.0)

    x = onnxnn.tensor(np.array(EDGES, np.float32))
    proto = to_onnx(ClampMin(), (x,), input_names=["x"], output_names=["y"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (served,) = session.run(None, {"x": x.numpy()})
    np.testing.assert_array_equal(served, np.where(x.numpy() < 0, 0, x.numpy()))


# A mean of no elements is 0/0, NaN (onnxruntime's ReduceMean gives 0): mean itself and the mean
# reductions of losses.
EMPTY_MEANS = [
    ("mean_over_empty_dim", lambda: onnxnn.zeros(2, 0).mean(dim=1), [np.nan, np.nan]),
    ("mean_of_empty", lambda: onnxnn.zeros(0).mean(), np.nan),
    ("var_mean", lambda: onnxnn.var_mean(onnxnn.zeros(2, 0), dim=1, correction=0)[1], [np.nan, np.nan]),
    ("mse_loss", lambda: onnxnn.nn.functional.mse_loss(onnxnn.zeros(0), onnxnn.zeros(0)), np.nan),
    ("l1_loss", lambda: onnxnn.nn.functional.l1_loss(onnxnn.zeros(0), onnxnn.zeros(0)), np.nan),
    ("nothing_averaged_nothing_out", lambda: onnxnn.zeros(0, 3).mean(dim=1), np.zeros(0)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("compute, expected", [c[1:] for c in EMPTY_MEANS], ids=[c[0] for c in EMPTY_MEANS])
def test_a_mean_of_nothing_is_nan(executor, compute, expected):
    with onnxnn.set_executor(executor):
        np.testing.assert_array_equal(compute().numpy(), np.array(expected, np.float32))
