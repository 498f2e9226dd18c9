"""Integer sums, ``fmod`` and powers are exact and wrap on overflow, as PyTorch's are, on every executor
and in exported graphs: onnxruntime's integer ReduceSum, Mod(fmod=1) and Pow go through double (int64
values past 2**53 lose their last digits, an overflow saturates). Expectations are Python's integers,
wrapped to the dtype."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn.ir.model_building import build_model
from onnxnn.ir.plan import plan as plan_of

EXECUTORS = ["onnxruntime", "kernels", "auto"]
TIMESTAMPS = [1733130000123456789, 1733130001987654321, -1733130002555555555]


def wrapped(value: int, dtype) -> int:
    """``value`` modulo 2**bits, as a two's complement number for a signed dtype."""
    info = np.iinfo(dtype)
    span = 1 << info.bits
    value %= span
    return value - span if value > info.max else value


def twice(executor: str, program):
    """``program()``'s result, run twice: 'auto' runs a graph's first call on the kernels, later ones in a session."""
    with onnxnn.set_executor(executor):
        return [program().numpy() for _ in range(2)]


SUMS = [
    # (values, dtype, dim, keepdim, summed dtype)
    (TIMESTAMPS, np.int64, None, False, None),
    ([2**62] * 4 + [5], np.int64, None, False, None),  # wraps to 5
    ([2**60 + 1, -(2**60)] + [0] * 100_000, np.int64, None, False, None),
    ([[2**31 - 1, 1], [7, -8]], np.int32, 1, False, np.int32),
    ([[2**53 + 1, 2], [3, 2**62]], np.int64, 0, True, None),
    ([[100, 100], [100, 27]], np.int8, 0, False, np.int8),  # int8 sums wrap to -56 and 127
    ([[40000, 40000], [1, 2]], np.uint16, 1, False, None),  # promoted to int64: no wrap
    ([[200, 100], [50, 6]], np.uint8, 1, False, np.uint8),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("values, dtype, dim, keepdim, summed", SUMS)
def test_integer_sums_are_exact_and_wrap(values, dtype, dim, keepdim, summed, executor):
    array = np.asarray(values, dtype=dtype)
    result_dtype = summed or np.int64
    x = onnxnn.tensor(array)
    keywords = {} if summed is None else {"dtype": onnxnn.tensor(np.zeros(0, summed)).dtype}
    program = (lambda: x.sum(**keywords)) if dim is None else (lambda: x.sum(dim, keepdim=keepdim, **keywords))
    python_values = array.astype(object)
    exact = python_values.sum() if dim is None else python_values.sum(axis=dim, keepdims=keepdim)
    expected = np.vectorize(lambda value: wrapped(int(value), result_dtype), otypes=[result_dtype])(exact)
    for actual in twice(executor, program):
        assert actual.dtype == result_dtype
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape, dim", [((0, 3), 0), ((4, 0), 1), ((0,), None)])
def test_empty_integer_sums_are_zero(shape, dim, executor):
    x = onnxnn.zeros(shape, dtype=onnxnn.int64)
    for actual in twice(executor, lambda: x.sum() if dim is None else x.sum(dim)):
        assert not actual.any()


def c_remainder(a: int, b: int) -> int:
    """C's ``a % b`` (the sign of the dividend) in Python's integers."""
    remainder = abs(a) % abs(b)
    return -remainder if a < 0 else remainder


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "dividends, divisors",
    [
        (TIMESTAMPS, [10**9, 7, -(10**9) - 7]),
        ([-(2**63), 2**63 - 1, -5], [-1, -1, 3]),  # INT64_MIN by -1 is 0, not a trap
        ([2**62 + 1, -(2**62) - 1, 9], [3, 3, -4]),
    ],
)
def test_int64_fmod_is_exact(dividends, divisors, executor):
    a, b = onnxnn.tensor(dividends), onnxnn.tensor(divisors)
    expected = [c_remainder(x, y) for x, y in zip(dividends, divisors)]
    for actual in twice(executor, lambda: onnxnn.fmod(a, b)):
        assert actual.tolist() == expected


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "values, dtype, exponent",
    [
        ([100_000_001, -3, 2**31], np.int64, 2),
        ([3, -3, 7], np.int64, 41),  # wraps
        ([46341, -46341, 3], np.int32, 2),  # wraps past 2**31
        ([5, -2, 3], np.int8, 3),  # wraps; onnxruntime has no int8 Pow
        ([2, 3, 255], np.uint8, 2),
        ([2, -3, 9], np.int16, 0),
        ([3, 5, -7], np.int64, 64),
    ],
)
def test_integer_powers_are_exact_and_wrap(values, dtype, exponent, executor):
    x = onnxnn.tensor(np.asarray(values, dtype=dtype))
    expected = [wrapped(value**exponent, dtype) for value in values]
    for actual in twice(executor, lambda: x**exponent):
        assert actual.dtype == dtype
        assert actual.tolist() == expected


def test_exported_integer_sums_are_exact_on_plain_onnxruntime():
    class Total(onnxnn.nn.Module):
        def forward(self, x):
            return x.sum(), x.sum(1)

    example = np.asarray([TIMESTAMPS, [2**62, 2**62, 2**62]], dtype=np.int64)
    model = onnxnn.export.to_onnx(Total(), (onnxnn.tensor(example),))
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    total, rows = session.run(None, {session.get_inputs()[0].name: example})
    assert int(total) == wrapped(sum(TIMESTAMPS) + 3 * 2**62, np.int64)
    assert rows.tolist() == [wrapped(sum(TIMESTAMPS), np.int64), wrapped(3 * 2**62, np.int64)]


@pytest.mark.parametrize(
    "program",
    [lambda x: (x > 0).sum(), lambda x: onnxnn.count_nonzero(x, 0), lambda x: x.to(onnxnn.int16).sum()],
    ids=["count of booleans", "count_nonzero", "int16 values"],
)
def test_sums_of_narrow_values_keep_the_plain_node(program):
    # 2**16 times any count that fits in memory stays below 2**53: onnxruntime's double sum is exact.
    x = onnxnn.randn(64, 8)
    model = build_model(plan_of([program(x)._value]))
    assert [node.op_type for node in model.graph.node].count("CumSum") == 0
