"""float16 and bfloat16 round and overflow after every op, on every executor.

PyTorch's CPU kernels (and onnxnn's) compute a low-precision op in float32 and round its result to
the dtype; the next op starts from that rounded value. Expectations here are that arithmetic done
in numpy: float32 from the rounded inputs, then rounding, with bfloat16 rounding written out in
bits so it does not depend on the dtype library onnxnn uses.

For +, -, *, / of float16 or bfloat16 operands, float32 rounding followed by rounding to the
dtype is the correctly rounded result (float32 carries more than 2p + 2 bits, so the double
rounding is innocuous), and both executors must match it exactly. Ops whose float32 result
depends on the implementation (exp, reductions, matmul, softmax) may differ by the float32
error bound of the computation before rounding, hence by at most one unit in the last place of
the dtype after it.

Each case ends in ``.float()``: onnxruntime used to drop the float16 -> float32 Cast pair it
had put around an op without a float16 kernel, so the op's result reached ``.float()`` unrounded.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from tolerances import gamma

EXECUTORS = ["onnxruntime", "kernels"]
MANTISSA_BITS = {"float16": 11, "bfloat16": 8}
SMALLEST_SPACING = {"float16": 2.0**-24, "bfloat16": 2.0**-133}


def round_to(dtype_name: str, values) -> np.ndarray:
    """float32 values rounded to ``dtype_name`` (to nearest, ties to even), returned as float32."""
    values = np.asarray(values, np.float32)
    if dtype_name == "float16":
        return values.astype(np.float16).astype(np.float32)
    bits = values.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.where(np.isnan(values), values, rounded.view(np.float32))


def spacing(dtype_name: str, values) -> np.ndarray:
    """The distance between adjacent ``dtype_name`` numbers around ``values`` (one ulp)."""
    _, exponent = np.frexp(np.abs(np.asarray(values, np.float64)))
    return np.maximum(np.ldexp(1.0, exponent - MANTISSA_BITS[dtype_name]), SMALLEST_SPACING[dtype_name])


def low(dtype_name: str, values) -> onnxnn.Tensor:
    """A realized tensor of ``dtype_name`` holding ``values`` rounded to it."""
    return onnxnn.tensor(round_to(dtype_name, values)).to(getattr(onnxnn, dtype_name)).clone().detach()


def run(executor: str, program, *tensors) -> np.ndarray:
    with onnxnn.set_executor(executor):
        return program(*tensors).float().numpy()


rng = np.random.default_rng(0)
A = rng.uniform(-3, 3, (4, 8)).astype(np.float32)
B = rng.uniform(0.5, 3, (4, 8)).astype(np.float32)
C = rng.uniform(-3, 3, (8, 5)).astype(np.float32)

# name, program over onnxnn tensors, the same program in float32 numpy with `r` rounding each op's result
EXACT_CASES = [
    ("add", lambda a, b: a + b, lambda r, a, b: r(a + b)),
    ("sub", lambda a, b: a - b, lambda r, a, b: r(a - b)),
    ("mul", lambda a, b: a * b, lambda r, a, b: r(a * b)),
    ("div", lambda a, b: a / b, lambda r, a, b: r(a / b)),
    ("mul_then_div", lambda a, b: a * b / b, lambda r, a, b: r(r(a * b) / b)),
    ("mul_then_sub", lambda a, b: a * b - a * a, lambda r, a, b: r(r(a * b) - r(a * a))),
    ("three_products", lambda a, b: a * b * b * b, lambda r, a, b: r(r(r(a * b) * b) * b)),
]


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, program, reference", EXACT_CASES, ids=[case[0] for case in EXACT_CASES])
def test_elementwise_arithmetic_rounds_each_result_exactly_as_float32_then_rounding(
    executor, dtype_name, name, program, reference
):
    r = lambda values: round_to(dtype_name, values)  # noqa: E731
    a, b = r(A), r(B)
    expected = reference(r, a, b)
    actual = run(executor, program, low(dtype_name, a), low(dtype_name, b))
    np.testing.assert_array_equal(actual, expected)


# A Python number multiplies and divides at float32 precision (PyTorch's CPU kernels keep it in the
# float32 they compute in); sums and differences round it to the dtype first, as PyTorch's do.
# Numbers the dtypes cannot hold: 2.7 and 0.1 (inexact), 70000 (float16's inf), 1e-8 (below both).
NUMBER_CASES = [
    ("times", lambda a, number: a * number, lambda r, a, number: r(a * np.float32(number))),
    ("number_times", lambda a, number: number * a, lambda r, a, number: r(np.float32(number) * a)),
    ("in_place_times", lambda a, number: a.clone().mul_(number), lambda r, a, number: r(a * np.float32(number))),
    ("divided", lambda a, number: a / number, lambda r, a, number: r(a / np.float32(number))),
    ("number_divided", lambda a, number: number / a, lambda r, a, number: r(np.float32(number) / a)),
    ("plus", lambda a, number: a + number, lambda r, a, number: r(a + r(np.float32(number)))),
    ("minus", lambda a, number: a - number, lambda r, a, number: r(a - r(np.float32(number)))),
]


@pytest.mark.parametrize("number", [2.7, 0.1, 70000, 1e-8])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, program, reference", NUMBER_CASES, ids=[case[0] for case in NUMBER_CASES])
def test_python_numbers_multiply_at_float32_precision_and_add_at_the_dtypes(
    executor, dtype_name, name, program, reference, number
):
    r = lambda values: round_to(dtype_name, values)  # noqa: E731
    a = r(np.concatenate([A.ravel(), [0.0, 1000.0, -65504.0]]))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        expected = reference(r, a, number)
    actual = run(executor, lambda x: program(x, number), low(dtype_name, a))
    np.testing.assert_array_equal(actual, expected)


def test_a_float16_product_with_a_python_number_has_the_float32_gradient():
    x = low("float16", A).requires_grad_()
    (x * 0.1).backward(onnxnn.ones_like(x) * 3)
    np.testing.assert_array_equal(x.grad.float().numpy(), round_to("float16", np.float32(3) * np.float32(0.1)))


def _matmul(r, a, b, c):
    return r(a @ c), 2 * gamma(c.shape[0]) * (np.abs(a.astype(np.float64)) @ np.abs(c.astype(np.float64)))


def _row_sum(r, a, b, c):
    return r(a.sum(axis=1)), 2 * gamma(a.shape[1]) * np.abs(a.astype(np.float64)).sum(axis=1)


def _mean(r, a, b, c):
    terms = a.shape[0]
    return r(a.mean(axis=0)), 2 * gamma(terms + 1) * np.abs(a.astype(np.float64)).mean(axis=0)


def _exp(r, a, b, c):
    # float32 exp implementations are within a few float32 ulps: bound them by gamma(4).
    expected = np.exp(a)
    return r(expected), gamma(4) * np.abs(expected.astype(np.float64))


def _softmax(r, a, b, c):
    shifted = np.exp(a - a.max(axis=1, keepdims=True))
    expected = shifted / shifted.sum(axis=1, keepdims=True)
    # exp, the row sum of 8 terms and the division: a handful of float32 roundings per element.
    return r(expected), 2 * gamma(a.shape[1] + 8) * expected.astype(np.float64)


def _product_then_row_sum(r, a, b, c):
    product = r(a * b)
    return r(product.sum(axis=1)), 2 * gamma(a.shape[1]) * np.abs(product.astype(np.float64)).sum(axis=1)


# name, program over onnxnn tensors, reference returning (float32 result rounded, float32 error bound)
BOUNDED_CASES = [
    ("matmul", lambda a, b, c: a @ c, _matmul),
    ("row_sum", lambda a, b, c: a.sum(dim=1), _row_sum),
    ("mean", lambda a, b, c: a.mean(dim=0), _mean),
    ("exp", lambda a, b, c: a.exp(), _exp),
    ("softmax", lambda a, b, c: F.softmax(a, dim=1), _softmax),
    ("product_then_row_sum", lambda a, b, c: (a * b).sum(dim=1), _product_then_row_sum),
]


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, program, reference", BOUNDED_CASES, ids=[case[0] for case in BOUNDED_CASES])
def test_reductions_and_transcendentals_round_once_per_op(executor, dtype_name, name, program, reference):
    r = lambda values: round_to(dtype_name, values)  # noqa: E731
    a, b, c = r(A), r(B), r(C)
    expected, float32_bound = reference(r, a, b, c)
    actual = run(executor, program, low(dtype_name, a), low(dtype_name, b), low(dtype_name, c))
    # Within float32_bound of the exact float32 result, and float32_bound is far below half a
    # dtype ulp, so rounding can land at most one ulp away; the result must also be representable.
    np.testing.assert_array_equal(round_to(dtype_name, actual), actual)
    error = np.abs(actual.astype(np.float64) - expected)
    assert np.all(error <= spacing(dtype_name, expected) + float32_bound), (name, actual, expected)


# Statistics PyTorch computes in float32 and rounds once (var, std, p-norms): over values of magnitude
# ~300 the squares (cubes) pass float16's largest value, which computing in float16 made inf.
LARGE = rng.standard_normal((3, 16)).astype(np.float32) * 300
STATISTICS_CASES = [
    ("std", lambda x: x.std(1), lambda a: a.std(axis=1, ddof=1)),
    ("std_mean", lambda x: onnxnn.std_mean(x, 1, correction=0)[0], lambda a: a.std(axis=1)),
    ("var of small values", lambda x: (x / 64).var(1), lambda a: (a / 64).var(axis=1, ddof=1)),
    ("norm p=3", lambda x: x.norm(p=3, dim=1), lambda a: (np.abs(a) ** 3).sum(axis=1) ** (1 / 3)),
]


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, program, reference", STATISTICS_CASES, ids=[case[0] for case in STATISTICS_CASES])
def test_statistics_of_large_values_are_computed_in_float32_and_rounded_once(
    executor, dtype_name, name, program, reference
):
    values = round_to(dtype_name, LARGE)
    actual = run(executor, program, low(dtype_name, values))
    expected = reference(values.astype(np.float64))
    # The float32 computation's error (16 squares summed, a root) is far below half an ulp of the dtype.
    float32_bound = 4 * gamma(16 + 4) * np.abs(expected)
    assert np.all(np.abs(actual - expected) <= spacing(dtype_name, expected) + float32_bound), (actual, expected)


# Overflow past float16's largest finite value (65504): results at or beyond 65520 round to inf.
OVERFLOW_CASES = [
    ("mul", lambda x: x * 2, [1.0001, 40000.0, -40000.0], [2.0, np.inf, -np.inf]),
    ("add", lambda x: x + x, [1.0, 33000.0, 32000.0], [2.0, np.inf, 64000.0]),
    ("mul_then_div", lambda x: x * 4 / 4, [1.0, 20000.0, 10000.0], [1.0, np.inf, 10000.0]),
    ("exp", lambda x: x.exp(), [0.0, 12.0, 11.0], [1.0, np.inf, round_to("float16", np.exp(np.float32(11)))]),
    ("sum", lambda x: x.sum().reshape(1), [30000.0, 30000.0, 10000.0], [np.inf]),
    ("matmul", lambda x: (x @ x).reshape(1), [200.0, 150.0, 60.0], [np.inf]),
    # float32 accumulation, as PyTorch's: the sum's 120000 never exists as a float16 value.
    ("mean", lambda x: x.mean().reshape(1), [40000.0, 40000.0, 40000.0], [40000.0]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, program, values, expected", OVERFLOW_CASES, ids=[case[0] for case in OVERFLOW_CASES])
def test_float16_results_overflow_to_inf_as_the_dtype_says(executor, name, program, values, expected):
    actual = run(executor, program, low("float16", values))
    np.testing.assert_array_equal(actual, np.asarray(expected, np.float32))


def test_the_issue_example_overflows_on_every_executor():
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            result = (onnxnn.tensor([1.0001, 70000.0]).half() * 2).float().numpy()
        np.testing.assert_array_equal(result, np.array([2.0, np.inf], np.float32), err_msg=executor)


def test_an_overflow_in_a_float16_backward_reaches_the_same_parameters_on_both_executors():
    """(300 y)^2 overflows float16 for the larger outputs while its float32 value does not: the
    gradient, and the SGD update from it, must be inf where the float16 arithmetic overflows."""
    updated = {}
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            onnxnn.manual_seed(0)
            layer = onnxnn.nn.Linear(8, 5).to(onnxnn.float16)
            optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.5)
            loss = (layer(low("float16", A)) * 300).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            updated[executor] = [p.detach().float().numpy() for p in layer.parameters()]
    for on_sessions, on_kernels in zip(updated["onnxruntime"], updated["kernels"]):
        np.testing.assert_array_equal(np.isinf(on_sessions), np.isinf(on_kernels))
        np.testing.assert_array_equal(round_to("float16", on_sessions), on_sessions)
    assert np.isinf(updated["kernels"][0]).any(), "the case no longer overflows: it tests nothing"


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_floor_division_by_a_python_number_divides_in_float32(executor, dtype_name):
    # PyTorch's opmath keeps the number unrounded: 0.7 in bfloat16 is 0.69921875, by which 5.59375 is 8.
    values = round_to(dtype_name, [5.59375, -5.59375, 2.0, 0.3])
    expected = round_to(dtype_name, np.floor(values / np.float32(0.7)))
    actual = run(executor, lambda x: x // 0.7, low(dtype_name, values))
    np.testing.assert_array_equal(actual, expected)
