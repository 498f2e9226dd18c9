"""isclose and allclose as PyTorch defines them: equal, or both NaN with ``equal_nan``, or a finite
difference within ``atol + rtol * |other|``. So an infinity is close only to an equal infinity (its
allowance ``rtol * inf`` is infinite, but ``inf - x`` is not a finite difference); floating values are
compared in their dtype, integers and bools in the default float dtype (no wrapping difference, and
bools honour the tolerances); and the arguments are checked as PyTorch checks them.
"""

from __future__ import annotations

import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
FLOAT_DTYPES = (onnxnn.float16, onnxnn.bfloat16, onnxnn.float32, onnxnn.float64)
INF, NAN = float("inf"), float("nan")

# (input, other, rtol, atol, equal_nan, expected): exact in every float dtype.
NON_FINITE_CASES = [
    ([INF, 2.0, -INF], [-INF, -INF, INF], 1e-05, 1e-08, False, [False, False, False]),
    ([INF, -INF], [INF, -INF], 1e-05, 1e-08, False, [True, True]),
    ([2.0, 2.0], [INF, -INF], 0.5, 1.0, False, [False, False]),
    ([INF, -INF], [2.0, 2.0], 0.5, 1.0, False, [False, False]),
    ([1.0, 3.0], [2.0, 2.0], 0.0, INF, False, [True, True]),  # an infinite allowance for finite values
    ([INF], [2.0], 0.0, INF, False, [False]),  # but inf - 2 is no finite difference
    ([NAN, NAN, NAN], [NAN, 1.0, INF], 1e-05, 1e-08, False, [False, False, False]),
    ([NAN, NAN, NAN], [NAN, 1.0, INF], 1e-05, 1e-08, True, [True, False, False]),
    ([0.0, -0.0], [-0.0, 0.0], 0.0, 0.0, False, [True, True]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("input,other,rtol,atol,equal_nan,expected", NON_FINITE_CASES)
def test_non_finite_values_are_close_only_when_equal(executor, dtype, input, other, rtol, atol, equal_nan, expected):
    with onnxnn.set_executor(executor):
        a, b = onnxnn.tensor(input, dtype=dtype), onnxnn.tensor(other, dtype=dtype)
        assert onnxnn.isclose(a, b, rtol, atol, equal_nan).tolist() == expected
        assert a.isclose(b, rtol, atol, equal_nan).tolist() == expected
        assert onnxnn.allclose(a, b, rtol, atol, equal_nan) is all(expected)


# (dtype, input, other, rtol, atol, expected)
TOLERANCE_CASES = [
    # float16's difference overflows to inf: not finite, so not close, whatever the allowance.
    (onnxnn.float16, [60000.0], [-60000.0], 0.0, 1e6, [False]),
    (onnxnn.float32, [60000.0], [-60000.0], 0.0, 1e6, [True]),
    # |1.5 - 1| = 0.5 against 0.1 + 0.4 * 1: on the boundary (<=) in float32.
    (onnxnn.float32, [1.5, 1.5], [1.0, 1.0], 0.4, 0.1, [True, True]),
    (onnxnn.float32, [1.5], [1.0], 0.0, 0.25, [False]),
    # Bools count as 0 and 1: |True - False| = 1 is within atol 1, not within 0.99.
    (onnxnn.bool, [True, False, True], [False, False, True], 0.1, 1.0, [True, True, True]),
    (onnxnn.bool, [True, False, True], [False, True, True], 0.0, 0.99, [False, False, True]),
    (onnxnn.bool, [False], [True], 0.5, 0.5, [True]),  # 1 <= 0.5 + 0.5 * 1
    (onnxnn.bool, [False], [True], 0.5, 0.49, [False]),
    # Integer differences do not wrap: uint8 |100 - 200| is 100, not 156.
    (onnxnn.uint8, [100, 200], [200, 100], 0.0, 100.0, [True, True]),
    (onnxnn.uint8, [100, 200], [200, 100], 0.0, 99.0, [False, False]),
    (onnxnn.int8, [-128, 5, 100], [127, 6, -100], 0.5, 0.0, [False, True, False]),
    (onnxnn.int64, [3], [0], 1e30, 0.0, [False]),  # rtol scales |other| = 0
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype,input,other,rtol,atol,expected", TOLERANCE_CASES)
def test_tolerances_apply_to_every_dtype(executor, dtype, input, other, rtol, atol, expected):
    with onnxnn.set_executor(executor):
        a, b = onnxnn.tensor(input, dtype=dtype), onnxnn.tensor(other, dtype=dtype)
        assert onnxnn.isclose(a, b, rtol=rtol, atol=atol).tolist() == expected


def test_zero_tolerances_compare_for_equality():
    a = onnxnn.tensor([1.0, 1.0 + 2**-23, NAN])
    b = onnxnn.tensor([1.0, 1.0, NAN])
    assert onnxnn.isclose(a, b, rtol=0, atol=0).tolist() == [True, False, False]
    assert onnxnn.isclose(a, b, rtol=0, atol=0, equal_nan=True).tolist() == [True, False, True]


def test_operands_broadcast():
    close = onnxnn.isclose(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([[1.0], [2.0]]))
    assert close.tolist() == [[True, False], [False, True]]


ARGUMENT_ERRORS = [
    (
        lambda: onnxnn.isclose(onnxnn.tensor([1.0]), float("-inf")),
        TypeError,
        "isclose(): argument 'other' (position 2) must be Tensor, not float",
    ),
    (
        lambda: onnxnn.allclose(onnxnn.tensor([1.0]), 2),
        TypeError,
        "allclose(): argument 'other' (position 2) must be Tensor, not int",
    ),
    (
        lambda: onnxnn.isclose(1.0, onnxnn.tensor([1.0])),
        TypeError,
        "isclose(): argument 'input' (position 1) must be Tensor, not float",
    ),
    (
        lambda: onnxnn.isclose(onnxnn.tensor([1.0]), onnxnn.tensor([1.0], dtype=onnxnn.float64)),
        RuntimeError,
        "Float did not match Double",
    ),
    (
        lambda: onnxnn.allclose(onnxnn.tensor([1]), onnxnn.tensor([1], dtype=onnxnn.int32)),
        RuntimeError,
        "Long did not match Int",
    ),
    (
        lambda: onnxnn.isclose(onnxnn.tensor([1.0]), onnxnn.tensor([1.0]), rtol=-1),
        RuntimeError,
        "rtol must be greater than or equal to zero, but got -1",
    ),
    (
        lambda: onnxnn.allclose(onnxnn.tensor([1.0]), onnxnn.tensor([1.0]), atol=-0.5),
        RuntimeError,
        "atol must be greater than or equal to zero, but got -0.5",
    ),
    (
        lambda: onnxnn.isclose(onnxnn.tensor([1.0]), onnxnn.tensor([1.0]), atol=NAN),
        RuntimeError,
        "atol must be greater than or equal to zero, but got nan",
    ),
]


@pytest.mark.parametrize("call,error,message", ARGUMENT_ERRORS)
def test_arguments_are_checked_as_pytorch_checks_them(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()
