"""gcd, lcm, the bitwise shifts, frexp and nextafter (issue #12): exact results against Python's
integers and ``math.frexp``/``math.nextafter`` (numpy's nextafter for float32/float16) on both
executors, PyTorch's edge cases (zeros, shifts past the width, infinities, subnormals), frexp's
mantissa gradient, export run by onnxruntime, and PyTorch's errors.
"""

from __future__ import annotations

import math
import operator

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

EXECUTORS = ("onnxruntime", "kernels")
INT_DTYPES = [(onnxnn.int64, np.int64), (onnxnn.int32, np.int32), (onnxnn.int16, np.int16), (onnxnn.int8, np.int8)]
# Consecutive Fibonacci numbers: Euclid's worst case (Lame), here the longest int32 run.
A = [0, -4, 6, -9, 12, 7, 1836311903, 0, 120]
B = [0, 6, -4, 0, 18, -7, 1134903170, -5, 84]


def _wrap(value: int, numpy_dtype) -> int:
    return int(np.array(value & ((1 << np.iinfo(numpy_dtype).bits) - 1), dtype=np.uint64).astype(numpy_dtype))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype,numpy_dtype", INT_DTYPES)
def test_gcd_and_lcm_match_python_integers(executor, dtype, numpy_dtype):
    limit = np.iinfo(numpy_dtype).max
    a = [v if abs(v) <= limit else v % 97 for v in A]
    b = [v if abs(v) <= limit else v % 89 for v in B]
    with onnxnn.set_executor(executor):
        x, y = onnxnn.tensor(a, dtype=dtype), onnxnn.tensor(b, dtype=dtype)
        gcd, lcm = onnxnn.gcd(x, y), onnxnn.lcm(x, y)
        gcd_values, lcm_values = gcd.numpy(), lcm.numpy()  # realized on ``executor`` (onnxnn is lazy)
    np.testing.assert_array_equal(gcd_values, [math.gcd(p, q) for p, q in zip(a, b)])
    np.testing.assert_array_equal(lcm_values, [_lcm_reference(p, q, numpy_dtype) for p, q in zip(a, b)])
    assert gcd.dtype is dtype and lcm.dtype is dtype


def _lcm_reference(a: int, b: int, numpy_dtype) -> int:
    """PyTorch's ``|a / gcd * b|`` in C++: 8- and 16-bit operands are promoted to int (the product is
    exact, then wrapped); 32- and 64-bit products wrap before the absolute value."""
    g = math.gcd(a, b)
    if g == 0:
        return 0
    product = (abs(a) // g) * b if a >= 0 else -(abs(a) // g) * b
    if np.iinfo(numpy_dtype).bits < 32:
        return _wrap(abs(product), numpy_dtype)
    return _wrap(abs(_wrap(product, numpy_dtype)), numpy_dtype)


def test_lcm_overflow_wraps_like_pytorch():
    torch = pytest.importorskip("torch")
    for dtype, torch_dtype in ((onnxnn.int32, torch.int32), (onnxnn.int16, torch.int16)):
        a, b = [1836311903 % 30011, -1836311903 % 1000003, 1836311903], [1134903170 % 30011, 999983, -1134903170]
        if dtype is onnxnn.int16:
            a, b = [v % 32000 for v in a], [v % 32000 - 16000 for v in b]
        ours = onnxnn.lcm(onnxnn.tensor(a, dtype=dtype), onnxnn.tensor(b, dtype=dtype)).numpy()
        theirs = torch.lcm(torch.tensor(a, dtype=torch_dtype), torch.tensor(b, dtype=torch_dtype)).numpy()
        np.testing.assert_array_equal(ours, theirs)


def _shift_reference(value: int, amount: int, bits: int, left: bool, signed: bool) -> int:
    """PyTorch's shifts: out-of-range amounts give 0 (left) or the sign fill (right)."""
    if left:
        result = 0 if not 0 <= amount < bits else value << amount
        return result
    if not 0 <= amount < bits:
        return -1 if (signed and value < 0) else 0
    return value >> amount  # Python's >> is arithmetic, like PyTorch's on signed dtypes


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype,numpy_dtype", INT_DTYPES + [(onnxnn.uint8, np.uint8)])
def test_shifts_match_python_integers(executor, dtype, numpy_dtype):
    info = np.iinfo(numpy_dtype)
    values = [5, -5, info.max, info.min, -1, 7, 3] if info.min else [5, 250, info.max, 0, 1, 7, 128]
    amounts = [1, info.bits, -1 if info.min else 200, 0, 3, info.bits - 1, 2]
    with onnxnn.set_executor(executor):
        x, s = onnxnn.tensor(values, dtype=dtype), onnxnn.tensor(amounts, dtype=dtype)
        left, right = onnxnn.bitwise_left_shift(x, s), x >> s
        method = x.bitwise_left_shift(2)
        left, right, method = left.numpy(), right.numpy(), method.numpy()  # realized on ``executor``
    signed = bool(info.min)
    amounts = [int(np.array(a).astype(numpy_dtype)) for a in amounts]
    expected_left = [
        _wrap(_shift_reference(v, a, info.bits, True, signed), numpy_dtype) for v, a in zip(values, amounts)
    ]
    expected_right = [_shift_reference(v, a, info.bits, False, signed) for v, a in zip(values, amounts)]
    np.testing.assert_array_equal(left, expected_left)
    np.testing.assert_array_equal(right, expected_right)
    np.testing.assert_array_equal(method, [_wrap(v << 2, numpy_dtype) for v in values])


FLOATS = [
    0.0,
    -0.0,
    1.0,
    -3.0,
    0.1,
    1024.0,
    1 - 2**-53,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    math.inf,
    -math.inf,
    math.nan,
]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_frexp_matches_math_frexp(executor):
    with onnxnn.set_executor(executor):
        mantissa, exponent = onnxnn.frexp(onnxnn.tensor(FLOATS, dtype=onnxnn.float64))
        single = onnxnn.tensor([3.0, 1e-45, -0.375], dtype=onnxnn.float32).frexp()
        # Realized on ``executor`` (onnxnn is lazy: a graph run after the block would run on "auto").
        mantissas, exponents = mantissa.numpy(), exponent.numpy()
        single_mantissas, single_exponents = single.mantissa.numpy(), single.exponent.numpy()
    # PyTorch (like C's frexp) returns (x, 0) for infinities and NaN; math.frexp agrees.
    expected = [math.frexp(v) for v in FLOATS]
    np.testing.assert_array_equal(mantissas, [m for m, _ in expected])
    np.testing.assert_array_equal(exponents, [e for _, e in expected])
    assert exponent.dtype is onnxnn.int32 and single.mantissa.dtype is onnxnn.float32
    single_expected = [math.frexp(float(np.float32(v))) for v in (3.0, 1e-45, -0.375)]
    np.testing.assert_array_equal(single_mantissas, [m for m, _ in single_expected])
    np.testing.assert_array_equal(single_exponents, [e for _, e in single_expected])


def test_frexp_mantissa_gradient():
    # d mantissa / dx = 2^-exponent, piecewise constant: finite differences away from powers of two.
    check_gradients(lambda t: onnxnn.frexp(t).mantissa, [np.array([3.0, -0.1, 700.0, 1e-5])])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "dtype,numpy_dtype", [(onnxnn.float64, np.float64), (onnxnn.float32, np.float32), (onnxnn.float16, np.float16)]
)
def test_nextafter_matches_numpy(executor, dtype, numpy_dtype):
    finite = [v for v in FLOATS if not math.isnan(v)]
    x = np.array(finite + [1.0, 0.5, -0.5, 2.0], numpy_dtype)
    y = np.array(list(reversed(finite)) + [1.0, 0.0, -1.0, 0.0], numpy_dtype)
    with onnxnn.set_executor(executor):
        actual = onnxnn.nextafter(onnxnn.tensor(x, dtype=dtype), onnxnn.tensor(y, dtype=dtype)).numpy()
        nan = onnxnn.tensor([1.0, math.nan], dtype=dtype).nextafter(onnxnn.tensor([math.nan, 1.0], dtype=dtype))
        nan = nan.numpy()
    np.testing.assert_array_equal(actual, np.nextafter(x, y))
    assert np.isnan(nan).all()


class _Integers(nn.Module):
    def forward(self, a, b):
        return onnxnn.stack([onnxnn.gcd(a, b), onnxnn.lcm(a, b), a << 2, a >> 1])


def test_exported_model_runs_in_plain_onnxruntime_like_onnxnn():
    a, b = onnxnn.tensor([12, -9, 7, 0], dtype=onnxnn.int32), onnxnn.tensor([18, 6, 0, 0], dtype=onnxnn.int32)
    module = _Integers().eval()
    expected = module(a, b).numpy()
    proto = to_onnx(module, (a, b))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), (a, b))}
    np.testing.assert_array_equal(session.run(None, feeds)[0], expected)


def test_in_place_variants():
    a = onnxnn.tensor([12, 9])
    a.gcd_(onnxnn.tensor([8, 6]))
    np.testing.assert_array_equal(a.numpy(), [4, 3])
    a <<= 1
    np.testing.assert_array_equal(a.numpy(), [8, 6])
    x = onnxnn.tensor([1.0])
    x.nextafter_(onnxnn.tensor([2.0]))
    assert x.item() == float(np.nextafter(np.float32(1), np.float32(2)))


def test_bad_dtypes_raise_pytorchs_errors():
    with pytest.raises(NotImplementedError, match="\"gcd_cpu\" not implemented for 'Float'"):
        onnxnn.gcd(onnxnn.tensor([1.0]), onnxnn.tensor([2.0]))
    with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for 'Double'"):
        onnxnn.bitwise_left_shift(onnxnn.tensor([1.0], dtype=onnxnn.float64), 1)
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
        onnxnn.frexp(onnxnn.tensor([1]))


# Python's bitwise operators on tensors are PyTorch's: bit by bit on integers, logical on bools
# (numpy's operators mean the same, so they give the expectations).
OPERATOR_LEFT, OPERATOR_RIGHT = [1, 2, 0, 7, 100], [3, 2, 1, 0, 27]
OPERATORS = {
    "~": lambda a, b: ~a,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "& int": lambda a, b: a & 6,
    "int |": lambda a, b: 6 | a,
}


# A bool tensor with a Python int promotes to int64 (the int64 rows cover it).
OPERATOR_CASES = [
    (name, dtype)
    for name in OPERATORS
    for dtype in ("uint8", "int8", "int32", "int64", "bool")
    if not (dtype == "bool" and "int" in name)
]


@pytest.mark.parametrize("name, dtype", OPERATOR_CASES)
def test_bitwise_operators_are_bitwise_on_integers(name, dtype):
    left, right = (np.array(values).astype(dtype) for values in (OPERATOR_LEFT, OPERATOR_RIGHT))
    expected = OPERATORS[name](left, right)
    result = OPERATORS[name](onnxnn.tensor(left), onnxnn.tensor(right))
    assert result.dtype is getattr(onnxnn, dtype)
    np.testing.assert_array_equal(result.numpy(), expected)


@pytest.mark.parametrize("symbol", ["&=", "|=", "^="])
def test_in_place_bitwise_operators_write_the_tensor(symbol):
    left, right = np.array(OPERATOR_LEFT, np.int64), np.array(OPERATOR_RIGHT, np.int64)
    tensor = onnxnn.tensor(left)
    view = tensor[1:]
    namespace = {"tensor": tensor, "right": onnxnn.tensor(right)}
    exec(f"tensor {symbol} right", namespace)
    expected = left.copy()
    exec(f"expected {symbol} right", {"expected": expected, "right": right})
    assert namespace["tensor"] is tensor  # in place, as PyTorch's
    np.testing.assert_array_equal(tensor.numpy(), expected)
    np.testing.assert_array_equal(view.numpy(), expected[1:])


def test_bitwise_operators_refuse_floats_as_pytorch_does():
    with pytest.raises(TypeError, match=r"~ \(operator.invert\) is only implemented on integer and Boolean"):
        ~onnxnn.tensor([1.0])
    with pytest.raises(NotImplementedError, match="\"bitwise_and_cpu\" not implemented for 'Float'"):
        onnxnn.tensor([1.0]) & onnxnn.tensor([1.0])


# PyTorch checks the cast of the result to ``self``'s dtype before the kernel's dtypes: an integer or
# bool tensor given a float (or a bool one an int) is refused as a cast, a RuntimeError, not as a
# missing float kernel (a NotImplementedError, which is a RuntimeError too: the message tells them apart).
IN_PLACE_CAST_CASES = {
    "bitwise_and_ float tensor": lambda: onnxnn.tensor([1, 2]).bitwise_and_(onnxnn.tensor([1.0, 2.0])),
    "bitwise_or_ 0-d float": lambda: onnxnn.tensor([1, 2]).bitwise_or_(onnxnn.tensor(1.0)),
    "bitwise_xor_ Python float": lambda: onnxnn.tensor([1, 2]).bitwise_xor_(1.5),
    "&= float": lambda: operator.iand(onnxnn.tensor([1, 2]), onnxnn.tensor([1.0, 2.0])),
    "|= Python float": lambda: operator.ior(onnxnn.tensor([1, 2]), 1.5),
    "^= float": lambda: operator.ixor(onnxnn.tensor([1, 2]), onnxnn.tensor([1.0, 2.0])),
    "<<= float": lambda: operator.ilshift(onnxnn.tensor([1, 2]), onnxnn.tensor([1.0, 2.0])),
    ">>= Python float": lambda: operator.irshift(onnxnn.tensor([1, 2]), 1.0),
    "gcd_ float tensor": lambda: onnxnn.tensor([4, 6]).gcd_(onnxnn.tensor([2.0, 3.0])),
    "lcm_ float tensor": lambda: onnxnn.tensor([4, 6]).lcm_(onnxnn.tensor([2.0, 3.0])),
    "onnxnn.gcd_ float tensor": lambda: onnxnn.gcd_(onnxnn.tensor([4, 6]), onnxnn.tensor([2.0, 3.0])),
    "bool gcd_ int": lambda: onnxnn.tensor([True]).gcd_(onnxnn.tensor([1])),
    "bool bitwise_left_shift_ int": lambda: onnxnn.tensor([True]).bitwise_left_shift_(onnxnn.tensor([1])),
    "bool bitwise_and_ float": lambda: onnxnn.tensor([True]).bitwise_and_(onnxnn.tensor([1.0])),
}


@pytest.mark.parametrize("case", IN_PLACE_CAST_CASES)
def test_in_place_integer_ops_refuse_a_higher_category_as_a_cast(case):
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type") as raised:
        IN_PLACE_CAST_CASES[case]()
    assert type(raised.value) is RuntimeError


# A float ``self`` has no cast to refuse: the kernel's refusal stays, as in PyTorch, out of place too.
FLOAT_KERNEL_CASES = {
    "bitwise_and_ float self": (lambda: onnxnn.tensor([1.0]).bitwise_and_(onnxnn.tensor([1])), "bitwise_and_cpu"),
    "|= float self": (lambda: operator.ior(onnxnn.tensor([1.0]), onnxnn.tensor([1])), "bitwise_or_cpu"),
    "gcd_ float self": (lambda: onnxnn.tensor([4.0]).gcd_(onnxnn.tensor([2])), "gcd_cpu"),
    "bitwise_xor int, float": (lambda: onnxnn.tensor([1]).bitwise_xor(onnxnn.tensor([1.0])), "bitwise_xor_cpu"),
    "lcm int, float": (lambda: onnxnn.lcm(onnxnn.tensor([1]), onnxnn.tensor([1.0])), "lcm_cpu"),
}


@pytest.mark.parametrize("case", FLOAT_KERNEL_CASES)
def test_integer_ops_on_a_float_result_keep_the_kernel_refusal(case):
    function, kernel = FLOAT_KERNEL_CASES[case]
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for 'Float'"):
        function()


# PyTorch's gcd and lcm take Tensors only, in place or not (the shifts take numbers).
GCD_NUMBER_CASES = {
    "gcd Python int": lambda: onnxnn.gcd(onnxnn.tensor([4]), 2),
    "gcd int first": lambda: onnxnn.gcd(2, onnxnn.tensor([4])),
    "lcm method numpy int": lambda: onnxnn.tensor([4]).lcm(np.int64(2)),
    "gcd_ Python float": lambda: onnxnn.tensor([4]).gcd_(1.5),
    "lcm_ Python int": lambda: onnxnn.tensor([4]).lcm_(2),
}


@pytest.mark.parametrize("case", GCD_NUMBER_CASES)
def test_gcd_and_lcm_refuse_numbers(case):
    with pytest.raises(TypeError, match="must be Tensor, not"):
        GCD_NUMBER_CASES[case]()


def _truncated(a: int, b: int) -> int:
    return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)


# (name, the op, its result on Python integers before wrapping to the dtype)
DIVISIONS = [
    ("floor_divide", lambda x, y: x // y, lambda a, b: a // b),
    ("trunc", lambda x, y: onnxnn.div(x, y, rounding_mode="trunc"), _truncated),
    ("remainder", lambda x, y: x % y, lambda a, b: a % b),
    ("fmod", onnxnn.fmod, lambda a, b: a - b * _truncated(a, b)),
]


@pytest.mark.parametrize("pending", [False, True], ids=["known divisor", "pending divisor"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype,numpy_dtype", INT_DTYPES[:2])
@pytest.mark.parametrize("name,operation,reference", DIVISIONS, ids=[case[0] for case in DIVISIONS])
def test_the_smallest_integer_divided_by_minus_one_wraps_as_pytorchs(
    name, operation, reference, dtype, numpy_dtype, executor, pending
):
    # x86's idiv traps there (SIGFPE): onnxruntime's Div and Mod ended the Python process.
    smallest = int(np.iinfo(numpy_dtype).min)
    a, b = [smallest, 7, -7, smallest, smallest], [-1, -1, 2, 3, smallest]
    with onnxnn.set_executor(executor):
        divisor = onnxnn.tensor(b, dtype=dtype)
        if pending:
            divisor = divisor * 1
        result = operation(onnxnn.tensor(a, dtype=dtype), divisor).numpy()
    np.testing.assert_array_equal(result, [_wrap(reference(p, q), numpy_dtype) for p, q in zip(a, b)])


# (dividend's shape, divisor's shape): a size-0 axis on either side makes an empty result.
EMPTY_DIVISIONS = [((0,), ()), ((0,), (1,)), ((1, 0), (1,)), ((0, 2), (2,)), ((1,), (0,))]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dividend_shape,divisor_shape", EMPTY_DIVISIONS)
@pytest.mark.parametrize("name,operation,reference", DIVISIONS, ids=[case[0] for case in DIVISIONS])
def test_an_empty_integer_division_by_zero_is_empty_as_pytorchs(
    name, operation, reference, dividend_shape, divisor_shape, executor
):
    # onnxruntime's Div and Mod refuse a zero divisor even beside an empty dividend.
    with onnxnn.set_executor(executor):
        dividend = onnxnn.zeros(dividend_shape, dtype=onnxnn.int32)
        result = operation(dividend, onnxnn.zeros(divisor_shape, dtype=onnxnn.int32))
        data = result.numpy()
    assert result.dtype is onnxnn.int32
    assert data.shape == np.broadcast_shapes(dividend_shape, divisor_shape)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name,operation,reference", DIVISIONS, ids=[case[0] for case in DIVISIONS])
def test_a_nonempty_integer_division_by_zero_still_raises(name, operation, reference, executor):
    with onnxnn.set_executor(executor), pytest.raises(RuntimeError, match="by zero"):
        operation(onnxnn.tensor([3, 4]), onnxnn.tensor([1, 0])).numpy()
