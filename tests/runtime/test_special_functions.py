"""Special functions (lgamma, digamma, polygamma, mvlgamma, erfinv, the modified Bessel functions and
onnxnn.special): forward against float64 references written here, on both executors; gradients
against float64 finite differences; export run by plain onnxruntime.

References never call the code under test: ``math.lgamma`` and ``math.erf``; digamma and polygamma
at integers and half-integers from harmonic sums and zeta values (exact formulas); the Bessel
functions from their power series summed with ``math.fsum`` (every term positive). Tolerances:
the formulas' documented relative accuracy (about 1e-15, see special_functions.py) plus the
rounding of a few dozen float64 operations, so 1e-13 relative; near a root of the function
(lgamma at 1 and 2) the error is absolute, so the bound is ``1e-13 * max(1, |value|)``.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

EXECUTORS = ("onnxruntime", "kernels")
FLOAT64_RTOL = 1e-13
EULER_GAMMA = 0.5772156649015329
ZETA = {2: math.pi**2 / 6, 3: 1.2020569031595942, 4: math.pi**4 / 90}


def _close(actual, expected, rtol=FLOAT64_RTOL):
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    bound = rtol * np.maximum(1.0, np.abs(expected))
    error = np.abs(actual - expected)
    assert np.all((error <= bound) | (actual == expected)), (
        f"worst at index {np.argmax(error / bound)}: {actual.flat[np.argmax(error / bound)]!r} vs "
        f"{expected.flat[np.argmax(error / bound)]!r}"
    )


def _run(function, values, dtype=onnxnn.float64):
    return function(onnxnn.tensor(np.asarray(values), dtype=dtype)).numpy()


# ---------------------------------------------------------------- references


def _polygamma_at_half_integers(n: int, x: float) -> float:
    """psi^(n) at a positive integer or half-integer, from zeta values and finite sums."""
    if n == 0:
        if x == int(x):
            return -EULER_GAMMA + math.fsum(1.0 / k for k in range(1, int(x)))
        return -EULER_GAMMA - 2 * math.log(2) + math.fsum(2.0 / (2 * k - 1) for k in range(1, int(x + 0.5)))
    s = n + 1
    sign_factorial = (-1) ** (n + 1) * math.factorial(n)
    if x == int(x):
        return sign_factorial * (ZETA[s] - math.fsum(k**-s for k in range(1, int(x))))
    # zeta(s, 1/2) = (2^s - 1) zeta(s); then the recurrence up to x.
    return sign_factorial * ((2**s - 1) * ZETA[s] - math.fsum((k + 0.5) ** -s for k in range(int(x - 0.5))))


def _bessel_series(order: int, x: float) -> float:
    term = (x / 2) ** order / math.factorial(order)
    terms = [term]
    for k in range(1, 300):
        term *= (x / 2) ** 2 / (k * (k + order))
        terms.append(term)
    return math.fsum(terms)


LGAMMA_POINTS = np.concatenate([np.linspace(-9.7, 30.3, 81), [0.5, 1.0, 2.0, 1e-7, -1e-7, 171.5, 1e5, -20.5]])
HALF_INTEGERS = [0.5, 1.0, 1.5, 2.0, 3.5, 7.0, 12.5, 40.0]
BESSEL_POINTS = np.concatenate([np.linspace(-45.0, 45.0, 61), [0.0, 1e-6, 19.999, 20.001]])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_lgamma_matches_math_lgamma(executor):
    with onnxnn.set_executor(executor):
        actual = _run(onnxnn.lgamma, LGAMMA_POINTS)
        poles = _run(onnxnn.lgamma, [0.0, -0.0, -1.0, -7.0])
    _close(actual, [math.lgamma(x) for x in LGAMMA_POINTS])
    assert np.all(poles == np.inf)


# float32 points: a grid, and the float32 neighbours of lgamma's zeros at 1 and 2, where an absolute
# error of the formula is a large relative one (lgamma(1 + 2^-23) is -6.9e-8).
_STEPS = np.arange(1, 65)
LGAMMA_FLOAT32_POINTS = np.concatenate(
    [
        np.linspace(-6.3, 12.7, 1901),
        1 + _STEPS * 2.0**-23,
        1 - _STEPS * 2.0**-24,
        2 + _STEPS * 2.0**-22,
        2 - _STEPS * 2.0**-23,
        [0.999, 1.001, 1.999, 2.001, 0.9, 1.1, 1.9, 2.1],
    ]
).astype(np.float32)
LGAMMA_FLOAT32_POINTS = LGAMMA_FLOAT32_POINTS[
    (LGAMMA_FLOAT32_POINTS > 0) | (LGAMMA_FLOAT32_POINTS % 1 != 0)
]  # no poles


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float32_lgamma_is_within_an_ulp_also_near_its_zeros(executor):
    with onnxnn.set_executor(executor):
        actual = onnxnn.lgamma(onnxnn.tensor(LGAMMA_FLOAT32_POINTS)).numpy().astype(np.float64)
    expected = np.array([math.lgamma(float(x)) for x in LGAMMA_FLOAT32_POINTS])
    # One rounding to float32 is half an ulp; the float64 formula adds ~1e-15 absolute, a small
    # fraction of an ulp even at lgamma(1 + 2^-23): one ulp of each expected value bounds the error.
    ulp = np.spacing(np.abs(expected).astype(np.float32)).astype(np.float64)
    error = np.abs(actual - expected)
    worst = int(np.argmax(error / ulp))
    assert np.all(error <= ulp), (
        f"lgamma({LGAMMA_FLOAT32_POINTS[worst]!r}) = {actual[worst]!r}, expected {expected[worst]!r} "
        f"({error[worst] / ulp[worst]:.1f} ulps)"
    )


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_at_integers_and_half_integers(executor, n):
    with onnxnn.set_executor(executor):
        actual = _run(lambda t: onnxnn.polygamma(n, t), HALF_INTEGERS)
        method = onnxnn.tensor(HALF_INTEGERS, dtype=onnxnn.float64).polygamma(n).numpy()
    expected = [_polygamma_at_half_integers(n, x) for x in HALF_INTEGERS]
    _close(actual, expected)
    np.testing.assert_array_equal(method, actual)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", [0, 1, 2])
def test_polygamma_satisfies_recurrence_and_reflection(executor, n):
    # psi^(n)(x + 1) = psi^(n)(x) + (-1)^n n! / x^(n+1), on negative x too (where the reflection formula runs).
    x = np.array([-7.3, -2.5, -0.4, 0.2, 0.7, 3.1, 9.6, 25.2])
    with onnxnn.set_executor(executor):
        here = _run(lambda t: onnxnn.polygamma(n, t), x)
        above = _run(lambda t: onnxnn.polygamma(n, t), x + 1)
    step = (-1) ** n * math.factorial(n) / x ** (n + 1)
    scale = np.maximum(np.abs(here), np.abs(step)) + np.abs(above)
    assert np.all(np.abs(above - (here + step)) <= 1e-12 * np.maximum(1.0, scale))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_digamma_and_polygamma_poles_follow_pytorch(executor):
    with onnxnn.set_executor(executor):
        psi = _run(onnxnn.digamma, [0.0, -0.0, -1.0, -3.0])
        trigamma = _run(lambda t: onnxnn.polygamma(1, t), [0.0, -2.0])
        tetragamma = _run(lambda t: onnxnn.polygamma(2, t), [0.0, -2.0])
    np.testing.assert_array_equal(psi[:2], [-np.inf, np.inf])
    assert np.isnan(psi[2:]).all()
    np.testing.assert_array_equal(trigamma, [np.inf, np.inf])
    np.testing.assert_array_equal(tetragamma, [-np.inf, -np.inf])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_mvlgamma_is_a_sum_of_lgammas(executor):
    x = np.array([1.7, 2.5, 6.25])
    with onnxnn.set_executor(executor):
        actual = _run(lambda t: onnxnn.mvlgamma(t, 3), x)
    expected = [3 * 2 / 4 * math.log(math.pi) + sum(math.lgamma(v - j / 2) for j in range(3)) for v in x]
    _close(actual, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_erfinv_inverts_math_erf(executor):
    y = np.concatenate([np.linspace(-0.999, 0.999, 41), [0.0, 1e-300, 0.5, 1 - 2**-52, -(1 - 1e-12)]])
    with onnxnn.set_executor(executor):
        x = _run(onnxnn.erfinv, y)
        edges = _run(onnxnn.erfinv, [1.0, -1.0, 1.5, np.nan])
        single = _run(onnxnn.erfinv, y, onnxnn.float32)
    # erf(x) rounds to within an ulp of 1 near +-1; a change dx moves it by erf'(x) dx, so x is right to
    # (2 ulps of y) / erf'(x) on top of its own 1e-13 relative.
    slope = 2 / math.sqrt(math.pi) * np.exp(-x * x)
    error = np.abs([math.erf(v) for v in x] - y) / slope
    assert np.all(error <= 1e-13 * np.abs(x) + 2 * np.spacing(np.abs(y)) / slope + 1e-300)
    np.testing.assert_array_equal(edges[:2], [np.inf, -np.inf])
    assert np.isnan(edges[2:]).all()
    # float32: computed in float64 (from the float32-rounded y) and rounded once.
    with onnxnn.set_executor(executor):
        rounded = _run(onnxnn.erfinv, y.astype(np.float32).astype(np.float64))
    np.testing.assert_array_equal(single, rounded.astype(np.float32))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name,order,scaled", [("i0", 0, False), ("i0e", 0, True), ("i1", 1, False), ("i1e", 1, True)])
def test_modified_bessel_functions_match_their_series(executor, name, order, scaled):
    function = getattr(onnxnn.special, name)
    with onnxnn.set_executor(executor):
        actual = _run(function, BESSEL_POINTS)
    expected = [
        math.copysign(_bessel_series(order, abs(x)), x if order else 1.0) * (math.exp(-abs(x)) if scaled else 1)
        for x in BESSEL_POINTS
    ]
    np.testing.assert_allclose(actual, expected, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float16, onnxnn.bfloat16])
def test_lower_precision_dtypes_are_computed_in_float32_and_rounded(dtype):
    x = np.array([0.75, 1.5, 3.25, 7.5], np.float32)
    for function in (onnxnn.lgamma, onnxnn.digamma, onnxnn.i0):
        result = function(onnxnn.tensor(x, dtype=dtype))
        assert result.dtype is dtype
        reference = function(onnxnn.tensor(x, dtype=onnxnn.float64)).numpy()
        # float32 arithmetic of ~40 operations (2e-6 relative), then one rounding to the dtype.
        eps = {onnxnn.float32: 2**-23, onnxnn.float16: 2**-10, onnxnn.bfloat16: 2**-7}[dtype]
        np.testing.assert_allclose(result.to(onnxnn.float64).numpy(), reference, rtol=2e-6 + eps, atol=2e-6)


def test_integer_inputs_become_the_default_float_dtype():
    assert onnxnn.lgamma(onnxnn.tensor([1, 2, 3])).dtype is onnxnn.float32
    _close(onnxnn.lgamma(onnxnn.tensor([4])).numpy(), [math.log(6)], rtol=1e-6)


# Two-argument functions promote their operands as they are (PyTorch's three tiers), and only an
# integer or bool result becomes the default float dtype: an int8 tensor beside a float64 0-d one
# gives float64, a float16 tensor beside an int8 one float16.
TWO_ARGUMENT_DTYPES = [
    # (first, its shape, second, its shape, result dtype)
    (onnxnn.int8, (2,), onnxnn.float64, (), onnxnn.float64),
    (onnxnn.float16, (2,), onnxnn.int8, (2,), onnxnn.float16),
    (onnxnn.bool, (2,), onnxnn.float16, (), onnxnn.float16),
    (onnxnn.int64, (2,), onnxnn.int8, (2,), onnxnn.float32),
    (onnxnn.float32, (2,), onnxnn.float64, (), onnxnn.float32),
]


def _accepts(function, first, second) -> bool:
    """igamma refuses two integer operands and zeta half precision, as PyTorch (tested below)."""
    if function is onnxnn.special.zeta:
        return onnxnn.float16 not in (first, second)
    return first.is_floating_point or second.is_floating_point


@pytest.mark.parametrize(
    "function, first, first_shape, second, second_shape, result",
    [
        (function, *case)
        for function in (onnxnn.igamma, onnxnn.igammac, onnxnn.special.zeta)
        for case in TWO_ARGUMENT_DTYPES
        if _accepts(function, case[0], case[2])
    ],
)
def test_two_argument_functions_promote_before_becoming_floats(
    function, first, first_shape, second, second_shape, result
):
    a = onnxnn.full(first_shape, 3, dtype=first)
    x = onnxnn.full(second_shape, 2, dtype=second)
    output = function(a, x)
    assert output.dtype is result
    expected = function(a.to(onnxnn.float64), x.to(onnxnn.float64)).to(result).to(onnxnn.float64).numpy()
    # The same float64 formulas (a graph with the casts may run on another executor: a few ulps),
    # then one rounding to the result dtype (one unit of it where the float64 values straddle a tie).
    unit = {onnxnn.float64: 1e-13, onnxnn.float32: 2**-23, onnxnn.float16: 2**-10}[result]
    np.testing.assert_allclose(output.to(onnxnn.float64).numpy(), expected, rtol=unit)


@pytest.mark.parametrize("dtype, name", [(onnxnn.float16, "Half"), (onnxnn.bfloat16, "BFloat16")])
def test_zeta_refuses_half_precision_as_pytorch(dtype, name):
    with pytest.raises(NotImplementedError, match=f"not implemented for '{name}'"):
        onnxnn.special.zeta(onnxnn.tensor([2.0], dtype=dtype), 3.0)


INCOMPLETE_A = np.array([0.5, 0.5, 1.0, 1.0, 3.0, 3.0, 0.5, 7.0])
INCOMPLETE_X = np.array([0.2, 4.0, 0.7, 9.5, 0.5, 12.0, 30.0, 6.0])


def _lower_incomplete_reference(a: float, x: float) -> float:
    """P(1/2, x) = erf(sqrt x); for integer a, P(n, x) = 1 - e^-x sum_{k<n} x^k / k!."""
    if a == 0.5:
        return math.erf(math.sqrt(x))
    return 1 - math.exp(-x) * math.fsum(x**k / math.factorial(k) for k in range(int(a)))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_igamma_and_igammac_match_closed_forms(executor):
    with onnxnn.set_executor(executor):
        a, x = onnxnn.tensor(INCOMPLETE_A, dtype=onnxnn.float64), onnxnn.tensor(INCOMPLETE_X, dtype=onnxnn.float64)
        lower, upper = onnxnn.igamma(a, x).numpy(), a.igammac(x).numpy()
        edges_a = onnxnn.tensor([0.0, 0.0, 1.0, -1.0, 1.0, 1.0, math.inf, 2.0], dtype=onnxnn.float64)
        edges_x = onnxnn.tensor([1.0, 0.0, 0.0, 1.0, -1.0, math.inf, 1.0, math.nan], dtype=onnxnn.float64)
        edges = onnxnn.special.gammainc(edges_a, edges_x).numpy()
    expected = np.array([_lower_incomplete_reference(p, q) for p, q in zip(INCOMPLETE_A, INCOMPLETE_X)])
    np.testing.assert_allclose(lower, expected, rtol=1e-13)
    # The upper tail is checked against erfc and the integer-a sum directly (1 - P would lose its digits).
    tail = [
        math.erfc(math.sqrt(q))
        if p == 0.5
        else math.exp(-q) * math.fsum(q**k / math.factorial(k) for k in range(int(p)))
        for p, q in zip(INCOMPLETE_A, INCOMPLETE_X)
    ]
    np.testing.assert_allclose(upper, tail, rtol=1e-12)
    np.testing.assert_array_equal(edges, [1.0, np.nan, 0.0, np.nan, np.nan, 1.0, 0.0, np.nan])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_igamma_recurrence_at_large_a(executor):
    # P(a + 1, x) = P(a, x) - x^a e^-x / Gamma(a + 1), with math.lgamma; a up to 80, x on both branches.
    a = np.array([12.3, 40.5, 79.9, 79.9])
    x = np.array([10.0, 44.0, 60.0, 95.0])
    with onnxnn.set_executor(executor):
        here = _run(lambda t: onnxnn.igamma(t, onnxnn.tensor(x, dtype=onnxnn.float64)), a)
        above = _run(lambda t: onnxnn.igamma(t, onnxnn.tensor(x, dtype=onnxnn.float64)), a + 1)
    step = np.exp(a * np.log(x) - x - np.array([math.lgamma(v + 1) for v in a]))
    np.testing.assert_allclose(above, here - step, rtol=1e-11, atol=1e-15)


GRADIENT_CASES = [
    ("lgamma", onnxnn.lgamma, [np.array([-2.6, -0.3, 0.4, 1.5, 4.2, 25.0])]),
    ("digamma", onnxnn.digamma, [np.array([-2.6, -0.3, 0.4, 1.5, 4.2, 25.0])]),
    ("polygamma2", lambda t: onnxnn.polygamma(2, t), [np.array([-1.4, 0.6, 3.3, 15.0])]),
    ("mvlgamma", lambda t: onnxnn.mvlgamma(t, 2), [np.array([1.2, 3.7])]),
    ("erfinv", onnxnn.erfinv, [np.array([-0.95, 0.0, 0.999])]),
    # Unscaled Bessel values grow like e^|x|: small |x| keeps the finite differences' rounding small.
    ("i0", onnxnn.i0, [np.array([-3.0, 0.5, 2.2, 4.0])]),
    ("i1e", onnxnn.special.i1e, [np.array([-25.0, -3.0, 0.5, 19.0, 22.0])]),
    # Differentiable in x only (as PyTorch's), on both branches (x < a + 1 and above).
    (
        "igamma_x",
        lambda x: onnxnn.igamma(onnxnn.tensor([0.5, 2.0, 6.0], dtype=onnxnn.float64), x),
        [np.array([0.3, 4.5, 5.0])],
    ),
    (
        "igammac_x",
        lambda x: onnxnn.igammac(onnxnn.tensor([0.5, 2.0, 6.0], dtype=onnxnn.float64), x),
        [np.array([1.7, 0.4, 9.0])],
    ),
]


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=[case[0] for case in GRADIENT_CASES])
def test_gradient_matches_finite_differences(case):
    _, function, inputs = case
    check_gradients(function, inputs)


def test_gradients_are_the_known_derivatives():
    # d lgamma = digamma, d digamma = polygamma(1), d i0 = i1, d erfinv = sqrt(pi)/2 exp(erfinv^2).
    x = onnxnn.tensor([0.3, 1.7, 6.0], dtype=onnxnn.float64, requires_grad=True)
    for function, derivative in (
        (onnxnn.lgamma, onnxnn.digamma),
        (onnxnn.digamma, lambda t: onnxnn.polygamma(1, t)),
        (onnxnn.i0, onnxnn.special.i1),
    ):
        (grad,) = onnxnn.autograd.grad(function(x).sum(), [x])
        np.testing.assert_allclose(grad.numpy(), derivative(x.detach()).numpy(), rtol=1e-12)
    y = np.array([-0.4, 0.1, 0.8])
    t = onnxnn.tensor(y, requires_grad=True)
    (grad,) = onnxnn.autograd.grad(onnxnn.erfinv(t).sum(), [t])
    expected = math.sqrt(math.pi) / 2 * np.exp(_run(onnxnn.erfinv, y) ** 2)
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-12)


class _Special(nn.Module):
    def forward(self, x):
        return onnxnn.stack(
            [
                x.lgamma(),
                x.digamma(),
                onnxnn.polygamma(1, x),
                onnxnn.erfinv(x / 4),
                onnxnn.special.i0e(x),
                onnxnn.special.i1(x),
            ]
        )


def test_exported_model_runs_in_plain_onnxruntime_like_onnxnn():
    x = onnxnn.tensor([-2.5, -0.5, 0.25, 1.0, 3.0], dtype=onnxnn.float32)
    module = _Special().eval()
    expected = module(x).numpy()
    proto = to_onnx(module, (x,))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    actual = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


def test_in_place_and_special_namespace_names():
    x = onnxnn.tensor([0.5, 2.0], dtype=onnxnn.float64)
    y = x.clone()
    y.lgamma_()
    np.testing.assert_array_equal(y.numpy(), onnxnn.lgamma(x).numpy())
    z = x.clone()
    z.polygamma_(1)
    np.testing.assert_array_equal(z.numpy(), onnxnn.polygamma(1, x).numpy())
    assert onnxnn.special.gammaln is onnxnn.lgamma and onnxnn.special.psi is onnxnn.digamma
    np.testing.assert_array_equal(onnxnn.special.multigammaln(x + 1, 2).numpy(), onnxnn.mvlgamma(x + 1, 2).numpy())
    _close(onnxnn.special.ndtri(onnxnn.tensor([0.975], dtype=onnxnn.float64)).numpy(), [1.959963984540054])
    _close(onnxnn.special.ndtr(onnxnn.tensor([0.0], dtype=onnxnn.float64)).numpy(), [0.5], rtol=1e-6)


def test_bad_arguments_raise_pytorchs_errors():
    x = onnxnn.tensor([1.5])
    with pytest.raises(RuntimeError, match="does not support negative n"):
        onnxnn.polygamma(-1, x)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        onnxnn.mvlgamma(x, 0)


def test_against_pytorch_on_a_grid():
    torch = pytest.importorskip("torch")
    x = np.linspace(-6.3, 12.7, 77)
    t = torch.tensor(x, dtype=torch.float64)
    for ours, theirs in ((onnxnn.lgamma, torch.lgamma), (onnxnn.digamma, torch.digamma)):
        _close(_run(ours, x), theirs(t).numpy(), rtol=1e-12)
    y = np.linspace(-0.99, 0.99, 45)
    _close(_run(onnxnn.erfinv, y), torch.erfinv(torch.tensor(y)).numpy(), rtol=1e-13)
