"""Arithmetic dtype semantics against PyTorch's: operands converted straight to the float dtype an
op computes in, CPU scalars read at float32, float16/bfloat16 composites rounded once, in-place dtype
checks, overflow checks of Python numbers, and a few special points.

Expected values come from ``math``/numpy arithmetic (float32 then rounded, for the half dtypes),
never from onnxnn.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import onnxnn

EXECUTORS = ["kernels", "onnxruntime"]


@pytest.fixture(params=EXECUTORS)
def executor(request):
    with onnxnn.set_executor(request.param):
        yield request.param


def _bfloat16(value: float) -> float:
    return float(np.float32(value).astype(ml_dtypes.bfloat16))


# ---------------------------------------------------------------- int-to-float ops


ZERO_D_OTHER_INT = {
    # A 0-d int tensor of another int dtype keeps its value (no wrap into the tensor's dtype).
    "atan2 int32 by int64 -2**40": (
        lambda: onnxnn.atan2(onnxnn.tensor([1, -1], dtype=onnxnn.int32), onnxnn.tensor(-(2**40))),
        [math.atan2(1, -(2**40)), math.atan2(-1, -(2**40))],
    ),
    "copysign uint8 by int8 -1": (
        lambda: onnxnn.copysign(onnxnn.tensor([1, 2], dtype=onnxnn.uint8), onnxnn.tensor(-1, dtype=onnxnn.int8)),
        [-1.0, -2.0],
    ),
    "atan2 uint8 by int8 -1": (
        lambda: onnxnn.atan2(onnxnn.tensor([1, 2], dtype=onnxnn.uint8), onnxnn.tensor(-1, dtype=onnxnn.int8)),
        [math.atan2(1, -1), math.atan2(2, -1)],
    ),
    "xlogy uint8 by int8 -1": (
        lambda: onnxnn.xlogy(onnxnn.tensor(-1, dtype=onnxnn.int8), onnxnn.tensor([1, 2], dtype=onnxnn.uint8)),
        [0.0, -math.log(2)],
    ),
    "hypot float by int8 -128": (
        lambda: onnxnn.hypot(onnxnn.tensor([0.0, 1.0]), onnxnn.tensor([-128, -128], dtype=onnxnn.int8)),
        [128.0, math.hypot(1, 128)],
    ),
    "hypot float by 0-d int8 -128": (
        lambda: onnxnn.hypot(onnxnn.tensor([0.0]), onnxnn.tensor(-128, dtype=onnxnn.int8)),
        [128.0],
    ),
    "hypot bool by float": (
        lambda: onnxnn.hypot(onnxnn.tensor([True, False]), onnxnn.tensor([0.5, 0.5])),
        [math.hypot(1, 0.5), 0.5],
    ),
    "logaddexp bool by float": (
        lambda: onnxnn.logaddexp(onnxnn.tensor([True, False]), onnxnn.tensor([0.5, 0.5])),
        [math.log(math.e + math.exp(0.5)), math.log(1 + math.exp(0.5))],
    ),
}


@pytest.mark.parametrize("case", ZERO_D_OTHER_INT.values(), ids=ZERO_D_OTHER_INT.keys())
def test_int_operands_convert_straight_to_the_float_dtype(executor, case):
    function, expected = case
    result = function()
    assert result.dtype is onnxnn.float32
    np.testing.assert_allclose(result.numpy(), np.array(expected, np.float32), rtol=2e-7)


@pytest.mark.parametrize("name", ["hypot", "logaddexp", "logaddexp2"])
def test_float_only_ops_refuse_two_integer_operands(name):
    with pytest.raises(NotImplementedError, match=f"{name}_cpu"):
        getattr(onnxnn, name)(onnxnn.tensor([1, 2]), onnxnn.tensor([3, 4]))


RESULT_DTYPES = {
    "ldexp f16 by int32": (
        lambda: onnxnn.ldexp(onnxnn.tensor([1.5], dtype=onnxnn.float16), onnxnn.tensor([3], dtype=onnxnn.int32)),
        onnxnn.float16,
        12.0,
    ),
    "ldexp f32 by 0-d f64": (
        lambda: onnxnn.ldexp(onnxnn.tensor([1.5]), onnxnn.tensor(3.0, dtype=onnxnn.float64)),
        onnxnn.float32,
        12.0,
    ),
    "logaddexp2 f16 by int64": (
        lambda: onnxnn.logaddexp2(onnxnn.tensor([1.5], dtype=onnxnn.float16), onnxnn.tensor([3])),
        onnxnn.float16,
        float(np.float16(math.log2(2**1.5 + 2**3))),
    ),
    "addcmul int16 bool bool value=2": (
        lambda: onnxnn.addcmul(
            onnxnn.tensor([1], dtype=onnxnn.int16), onnxnn.tensor([True]), onnxnn.tensor([True]), value=2
        ),
        onnxnn.int16,
        3,
    ),
}


@pytest.mark.parametrize("case", RESULT_DTYPES.values(), ids=RESULT_DTYPES.keys())
def test_result_dtype_is_the_promoted_one(executor, case):
    function, dtype, expected = case
    result = function()
    assert result.dtype is dtype
    assert result.tolist() == [expected]


# ---------------------------------------------------------------- half precision


def test_a_second_operand_0d_tensor_multiplies_and_divides_at_float32(executor):
    h = onnxnn.tensor([0.0, 1.0, 3.0], dtype=onnxnn.float16)
    values = np.array([0.0, 1.0, 3.0], np.float32)
    assert (h * onnxnn.tensor(1e-8)).tolist() == (values * np.float32(1e-8)).astype(np.float16).tolist()
    assert (h[1:] / onnxnn.tensor(70000.0)).tolist() == (values[1:] / np.float32(70000)).astype(np.float16).tolist()
    assert (h[:2] * onnxnn.tensor(70000)).tolist() == [0.0, math.inf]  # 0 * 70000, not 0 * inf
    assert (h[:2] * onnxnn.tensor([70000])).tolist() == [0.0, math.inf]  # any one-element tensor
    b = onnxnn.tensor([1.0], dtype=onnxnn.bfloat16)
    assert (b / onnxnn.tensor(2.7)).tolist() == [_bfloat16(np.float32(1) / np.float32(2.7))]
    # As the first operand, PyTorch rounds the scalar to the half dtype first: 1e-8 is 0 there.
    assert (onnxnn.tensor(1e-8) * h).tolist() == [0.0, 0.0, 0.0]


HALF_COMPOSITES = {
    # (function, inputs, float32 formula), the formula PyTorch's kernel evaluates in float32.
    "hypot": (onnxnn.hypot, [-10.7133875, -33.606674], lambda a, b: np.hypot(a, b)),
    "addcdiv": (
        lambda a, b, c: onnxnn.addcdiv(a, b, c, value=0.7),
        [-2.6420972, -10.044891, -2.6420972],
        lambda a, b, c: a + np.float32(0.7) * b / c,
    ),
    "addcmul": (
        lambda a, b, c: onnxnn.addcmul(a, b, c, value=0.7),
        [1.2345, -3.21, 2.7182],
        lambda a, b, c: a + np.float32(0.7) * b * c,
    ),
    "lerp": (lambda a, b: onnxnn.lerp(a, b, 0.3), [1.2345, -3.21], lambda a, b: a + np.float32(0.3) * (b - a)),
    "rsqrt": (onnxnn.rsqrt, [18.94162], lambda a: np.float32(1) / np.sqrt(a)),
}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", HALF_COMPOSITES.values(), ids=HALF_COMPOSITES.keys())
def test_half_precision_composites_round_once(executor, case, dtype):
    function, inputs, formula = case
    numpy_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    rounded_inputs = [np.float32(np.float32(v).astype(numpy_dtype)) for v in inputs]
    expected = float(np.float32(formula(*rounded_inputs)).astype(numpy_dtype))
    tensors = [onnxnn.tensor([v], dtype=getattr(onnxnn, dtype)) for v in inputs]
    assert function(*tensors).tolist() == [expected]


# ---------------------------------------------------------------- lerp


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_lerp_at_weight_one_is_the_end(executor, dtype):
    start = onnxnn.tensor([1e4 if dtype == "float16" else 1e8], dtype=getattr(onnxnn, dtype))
    end = onnxnn.tensor([0.1], dtype=getattr(onnxnn, dtype))
    assert onnxnn.lerp(start, end, 1.0).tolist() == end.tolist()
    assert onnxnn.lerp(start, end, onnxnn.ones(1, dtype=getattr(onnxnn, dtype))).tolist() == end.tolist()


def test_lerp_uses_the_formula_of_the_nearer_end(executor):
    start, end = np.float32(3.0), np.float32(-7.25)
    weights = np.array([0.2, 0.75, -0.4, 1.6], np.float32)
    small = np.abs(weights) < 0.5
    expected = np.where(small, start + weights * (end - start), end - (end - start) * (np.float32(1) - weights))
    result = onnxnn.lerp(onnxnn.full((4,), 3.0), onnxnn.full((4,), -7.25), onnxnn.tensor(weights))
    assert result.tolist() == expected.tolist()


def test_lerp_refuses_integers_and_mixed_dtypes():
    with pytest.raises(NotImplementedError, match="Long"):
        onnxnn.lerp(onnxnn.tensor([1, 2]), onnxnn.tensor([3, 4]), 0.5)
    with pytest.raises(RuntimeError, match="expected dtype"):
        onnxnn.lerp(onnxnn.tensor([1.0]), onnxnn.tensor([3.0], dtype=onnxnn.float64), 0.5)


# ---------------------------------------------------------------- in place


def test_floor_divide_modulo_and_power_assign_in_place(executor):
    t = onnxnn.tensor([4, 9])
    alias = t
    alias //= 2
    u = onnxnn.tensor([4, 9])
    view = u[:]
    view %= 3
    v = onnxnn.tensor([2.0, 3.0])
    first = v[0:1]
    first **= 2
    assert (t.tolist(), u.tolist(), v.tolist()) == ([2, 4], [1, 0], [4.0, 3.0])


def _augmented_and(x, y):
    x &= y
    return x


REFUSED_IN_PLACE = {
    "int exp_": (lambda: onnxnn.tensor([1, 2, 0]).exp_(), RuntimeError),
    "uint8 sqrt_": (lambda: onnxnn.tensor([4, 2], dtype=onnxnn.uint8).sqrt_(), RuntimeError),
    "int sigmoid_": (lambda: onnxnn.tensor([1, 2]).sigmoid_(), RuntimeError),
    "int log_": (lambda: onnxnn.tensor([1, 2]).log_(), RuntimeError),
    "bool &= int": (lambda: _augmented_and(onnxnn.tensor([True, True]), onnxnn.tensor([1, 0])), RuntimeError),
    "bool bitwise_and_ int": (lambda: onnxnn.tensor([True, True]).bitwise_and_(onnxnn.tensor([1, 0])), RuntimeError),
    "bool bitwise_xor_ int": (lambda: onnxnn.tensor([True, True]).bitwise_xor_(onnxnn.tensor([1, 0])), RuntimeError),
    "bool clamp_(0)": (lambda: onnxnn.tensor([True, False]).clamp_(0), RuntimeError),
    "int clamp_(0.5)": (lambda: onnxnn.tensor([1, 2]).clamp_(0.5), RuntimeError),
    "int //= 2.5": (lambda: onnxnn.tensor([1, 2]).__ifloordiv__(2.5), RuntimeError),
    "bool floor": (lambda: onnxnn.floor(onnxnn.tensor([True])), NotImplementedError),
    "bool round_": (lambda: onnxnn.tensor([True]).round_(), NotImplementedError),
    "bool trunc": (lambda: onnxnn.trunc(onnxnn.tensor([True])), NotImplementedError),
    "bool ceil": (lambda: onnxnn.ceil(onnxnn.tensor([True])), NotImplementedError),
}


@pytest.mark.parametrize("case", REFUSED_IN_PLACE.values(), ids=REFUSED_IN_PLACE.keys())
def test_in_place_results_that_do_not_fit_the_dtype_are_refused(case):
    function, error = case
    with pytest.raises(error):
        function()


# ---------------------------------------------------------------- Python numbers out of range

CONDITION = [True, False]
OVERFLOWING_NUMBERS = {
    "where uint8 300": lambda: onnxnn.where(onnxnn.tensor(CONDITION), onnxnn.tensor([1, 2], dtype=onnxnn.uint8), 300),
    "where 300 uint8": lambda: onnxnn.where(onnxnn.tensor(CONDITION), 300, onnxnn.tensor([1, 2], dtype=onnxnn.uint8)),
    "where int8 200": lambda: onnxnn.where(onnxnn.tensor(CONDITION), onnxnn.tensor([1, 2], dtype=onnxnn.int8), 200),
    "clamp uint8 max=300": lambda: onnxnn.tensor([1, 2], dtype=onnxnn.uint8).clamp(max=300),
    "clamp float16 max=1e5": lambda: onnxnn.tensor([1.0], dtype=onnxnn.float16).clamp(max=1e5),
    "clamp float32 max=1e39": lambda: onnxnn.tensor([1.0]).clamp(max=1e39),
    "clamp int64 max=2**63": lambda: onnxnn.tensor([1]).clamp(max=2**63),
}


@pytest.mark.parametrize("function", OVERFLOWING_NUMBERS.values(), ids=OVERFLOWING_NUMBERS.keys())
def test_a_python_number_out_of_the_result_range_is_refused(function):
    with pytest.raises(RuntimeError, match="without overflow"):
        function()


def test_numbers_that_pytorch_converts_are_accepted(executor):
    condition = onnxnn.tensor(CONDITION)
    assert onnxnn.where(condition, onnxnn.tensor([1, 2], dtype=onnxnn.uint8), -1).tolist() == [1, 255]
    assert onnxnn.where(condition, onnxnn.tensor([1.0, 2.0], dtype=onnxnn.float16), 1e5).tolist() == [1.0, math.inf]
    assert onnxnn.tensor([1.0, 2.0], dtype=onnxnn.float16).clamp(max=math.inf).tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- unique, special points


def test_unique_of_bfloat16_with_nan_sorts_and_counts(executor):
    values, inverse, counts = onnxnn.unique(
        onnxnn.tensor([3.0, math.nan, 1.0, 3.0], dtype=onnxnn.bfloat16), return_inverse=True, return_counts=True
    )
    assert values.tolist()[:2] == [1.0, 3.0] and math.isnan(values.tolist()[2])
    assert inverse.tolist() == [1, 2, 0, 1] and counts.tolist() == [1, 2, 1]


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_second_derivative_at_a_tie(executor, name):
    a = onnxnn.tensor(1.0, dtype=onnxnn.float64, requires_grad=True)
    b = onnxnn.tensor(1.0, dtype=onnxnn.float64, requires_grad=True)
    (first,) = onnxnn.autograd.grad(getattr(onnxnn, name)(a, b), a, create_graph=True)
    second = [t.item() for t in onnxnn.autograd.grad(first, [a, b])]
    # d2/da2 of log(e^a + e^b) is s(1 - s), s = sigmoid(a - b); base 2 scales it by ln 2.
    scale = 1.0 if name == "logaddexp" else math.log(2)
    np.testing.assert_allclose(second, [0.25 * scale, -0.25 * scale], rtol=1e-14)


def test_power_zero_times_a_function_has_a_finite_second_derivative(executor):
    x = onnxnn.tensor([0.0, 1.0], dtype=onnxnn.float64, requires_grad=True)
    (first,) = onnxnn.autograd.grad((onnxnn.pow(x, 0.0) * onnxnn.exp(x)).sum(), x, create_graph=True)
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    np.testing.assert_allclose(second.tolist(), [1.0, math.e], rtol=1e-15)


def test_power_one_half_is_a_square_root(executor):
    x = onnxnn.tensor([-math.inf, -0.0, 4.0], dtype=onnxnn.float64)
    result = onnxnn.pow(x, 0.5).tolist()
    assert math.isnan(result[0]) and result[1:] == [0.0, 2.0] and math.copysign(1, result[1]) == -1


ERFC_POINTS = [-3.0, -0.5, 0.0, 0.3, 1.0, 1.9, 2.0, 3.0, 4.0, 6.0, 9.0, 10.0, 15.0, 26.0, 27.0]


def test_erfc_keeps_its_relative_precision_in_the_tail(executor):
    expected = np.array([math.erfc(v) for v in ERFC_POINTS])
    result64 = onnxnn.special.erfc(onnxnn.tensor(ERFC_POINTS, dtype=onnxnn.float64)).numpy()
    # math.erfc's own error is about an ulp; the series' 1 - erf below 2 loses up to 5e-14.
    np.testing.assert_allclose(result64, expected, rtol=6e-14, atol=0)
    result32 = onnxnn.special.erfc(onnxnn.tensor(ERFC_POINTS)).numpy().astype(np.float64)
    exact32 = np.array([math.erfc(float(np.float32(v))) for v in ERFC_POINTS])  # at the float32 inputs
    # Computed in float64 and rounded once: within an ulp of the float32 rounding of the true value.
    assert np.all(np.abs(result32 - exact32) <= np.spacing(exact32.astype(np.float32)))


def test_erfc_gradient_is_minus_two_over_root_pi_exp_minus_x_squared(executor):
    points = [-1.0, 0.0, 0.5, 3.0, 10.0]
    x = onnxnn.tensor(points, dtype=onnxnn.float64, requires_grad=True)
    (first,) = onnxnn.autograd.grad(onnxnn.special.erfc(x).sum(), x, create_graph=True)
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    derivative = [-2 / math.sqrt(math.pi) * math.exp(-v * v) for v in points]
    np.testing.assert_allclose(first.tolist(), derivative, rtol=1e-14)
    np.testing.assert_allclose(second.tolist(), [-2 * v * d for v, d in zip(points, derivative)], rtol=1e-14, atol=0)
