"""Integer sums, products, ``fmod`` and powers are exact and wrap on overflow, as PyTorch's are, on every
executor and in exported graphs: onnxruntime's integer ReduceSum, ReduceProd, Mod(fmod=1) and Pow go
through double (int64 values past 2**53 lose their last digits, an overflow saturates). Ops over int8,
uint8 and int16 that onnxruntime has no kernel for run too. Expectations are Python's integers, wrapped
to the dtype, or numpy's wrapping integer arithmetic."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
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


PRODUCTS = [
    # (values, dtype, dim, keepdim, product dtype)
    ([2**40 + 1, 3, 2**20 + 7], np.int64, None, False, None),  # past 2**53: exact
    ([2**32, 2**32, 3], np.int64, None, False, None),  # wraps to 0
    ([[2**16, 2**16 + 1], [7, -8]], np.int32, 1, False, np.int32),  # wraps to 65536
    (np.arange(1, 36).reshape(5, 7) * (2**20 + 3), np.int64, 1, True, None),  # odd lines: 7 halve to 4, 2, 1
    (np.arange(-17, 18).reshape(5, 7) * 2**20 + 1, np.int64, 0, False, None),  # columns wrap past 2**64
    ([[100, 3], [2, 50]], np.int8, 0, False, np.int8),  # int8 products wrap to -56 and -106
    ([[200, 100], [50, 6]], np.uint8, 1, False, np.uint8),
    ([[300, -200, 7], [5, 6, 7]], np.int16, 1, True, np.int16),
    (np.zeros((0, 3)), np.int64, 0, False, None),  # empty lines: 1
    (np.zeros((4, 0)), np.int64, 1, True, None),
    (np.zeros((2, 0, 3)), np.int64, None, False, None),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("values, dtype, dim, keepdim, multiplied", PRODUCTS)
def test_integer_products_are_exact_and_wrap(values, dtype, dim, keepdim, multiplied, executor):
    array = np.asarray(values, dtype=dtype)
    result_dtype = multiplied or np.int64
    x = onnxnn.tensor(array)
    keywords = {} if multiplied is None else {"dtype": onnxnn.tensor(np.zeros(0, multiplied)).dtype}
    program = (lambda: x.prod(**keywords)) if dim is None else (lambda: x.prod(dim, keepdim=keepdim, **keywords))
    python_values = array.astype(object)
    exact = np.prod(python_values) if dim is None else np.prod(python_values, axis=dim, keepdims=keepdim)
    expected = np.vectorize(lambda value: wrapped(int(value), result_dtype), otypes=[result_dtype])(exact)
    for actual in twice(executor, program):
        assert actual.dtype == result_dtype
        np.testing.assert_array_equal(actual, expected)


def torch_power(base: int, exponent: int, dtype) -> int:
    """PyTorch's integer ``base ** exponent`` (ATen's ``powi``), wrapped to ``dtype``."""
    if exponent < 0:
        if base == 1:
            return 1
        return (-1 if exponent % 2 else 1) if base == -1 else 0
    return wrapped(pow(base, exponent, 1 << np.iinfo(dtype).bits), dtype)


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
POWERS = [
    # (bases, exponents, dtype)
    ([3, -3, 7, 100_000_001, 2, 2], [41, 41, 22, 2, 63, 64], np.int64),  # wraps; past 2**53
    ([0, 2, -1, 1, -1, 5], [-1, -1, -3, -5, -4, -2], np.int64),  # negative exponents
    ([-1, 31, 3, 31], [INT64_MIN, INT64_MAX, 2**62 + 1, 2**32 - 1], np.int64),  # 63-bit exponents
    ([46341, -3, 2, 0], [2, 21, 31, 0], np.int32),
    ([5, -2, 3, -1], [3, 7, -1, -3], np.int8),  # onnxruntime has no int8 Pow
    ([2, 3, 255, 0], [7, 5, 2, 0], np.uint8),
    ([2, -3, 181, 7], [15, 9, 2, -2], np.int16),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("bases, exponents, dtype", POWERS)
def test_integer_powers_of_tensor_exponents_are_exact_and_wrap(bases, exponents, dtype, executor):
    x, e = onnxnn.tensor(np.asarray(bases, dtype)), onnxnn.tensor(np.asarray(exponents, dtype))
    expected = [torch_power(base, exponent, dtype) for base, exponent in zip(bases, exponents)]
    for actual in twice(executor, lambda: x**e):
        assert actual.dtype == dtype
        assert actual.tolist() == expected
    # Broadcast: every base to every exponent, through onnxnn.pow.
    table = [[torch_power(base, exponent, dtype) for exponent in exponents] for base in bases]
    column = onnxnn.tensor(np.asarray(bases, dtype).reshape(-1, 1))
    for actual in twice(executor, lambda: onnxnn.pow(column, e)):
        assert actual.tolist() == table


def as_wrapped(array, dtype) -> np.ndarray:
    """``array`` (int64 arithmetic) wrapped to ``dtype``, as the narrow dtype's own arithmetic wraps."""
    return np.asarray(array).astype(np.int64).astype(dtype)


NARROW_OPS = [
    # (name, program(x, y), expectation(a, b) in numpy, from int64 values and wrapped)
    ("matmul", lambda x, y: x @ y.t(), lambda a, b: as_wrapped(a.astype(np.int64) @ b.T.astype(np.int64), a.dtype)),
    ("mv", lambda x, y: x @ y[0], lambda a, b: as_wrapped(a.astype(np.int64) @ b[0].astype(np.int64), a.dtype)),
    (
        "einsum",
        lambda x, y: onnxnn.einsum("ij,kj->ik", x, y),
        lambda a, b: as_wrapped(a.astype(np.int64) @ b.T, a.dtype),
    ),
    (
        "cumsum",
        lambda x, y: x.cumsum(1, dtype=x.dtype),
        lambda a, b: as_wrapped(np.cumsum(a.astype(np.int64), 1), a.dtype),
    ),
    ("tril", lambda x, y: x.tril(), lambda a, b: np.tril(a)),
    ("triu", lambda x, y: x.triu(1), lambda a, b: np.triu(a, 1)),
    ("max", lambda x, y: x.max(), lambda a, b: a.max()),
    ("amin", lambda x, y: x.amin(1), lambda a, b: a.min(1)),
    ("argmax", lambda x, y: x.argmax(1), lambda a, b: a.argmax(1)),
    ("argmin", lambda x, y: x.argmin(), lambda a, b: a.argmin()),
    ("clamp", lambda x, y: x.clamp(3, 90), lambda a, b: np.clip(a, 3, 90).astype(a.dtype)),
    ("maximum", lambda x, y: onnxnn.maximum(x, y), lambda a, b: np.maximum(a, b)),
    ("minimum", lambda x, y: onnxnn.minimum(x, y), lambda a, b: np.minimum(a, b)),
    ("pad", lambda x, y: F.pad(x, (1, 2), value=7), lambda a, b: np.pad(a, ((0, 0), (1, 2)), constant_values=7)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
@pytest.mark.parametrize("name, program, expectation", NARROW_OPS, ids=[case[0] for case in NARROW_OPS])
def test_narrow_integer_ops_run_on_every_executor(name, program, expectation, dtype, executor):
    # onnxruntime has no kernel (or ONNX no valid node) for these ops on some narrow dtypes; values
    # over the whole range make products and sums wrap.
    info = np.iinfo(dtype)
    generator = np.random.default_rng(7)
    a = generator.integers(info.min, info.max, (4, 5), endpoint=True).astype(dtype)
    b = generator.integers(info.min, info.max, (4, 5), endpoint=True).astype(dtype)
    x, y = onnxnn.tensor(a), onnxnn.tensor(b)
    expected = np.asarray(expectation(a, b))
    for actual in twice(executor, lambda: program(x, y)):
        assert actual.dtype == expected.dtype
        np.testing.assert_array_equal(actual, expected)


# Rows of values sharing their high 32 bits, with low halves past 2**31: onnxruntime 1.31's int64
# ReduceMax and ReduceMin compare rows of 8 or more of them wrong (as if the low halves were signed).
LOW_HALVES = [3, 2**31 + 9, 5, 2**32 - 1, 7, 2**31 + 11, 1, 9, 2**31]
NEAR_VALUES = np.array([np.roll(LOW_HALVES, row) + ((row - 3) << 32) for row in range(7)], np.int64)
EXTREMES = [
    ("max of [0] * 7 + [2**32 - 1]", lambda x: x.max(), lambda a: a.max(), [0] * 7 + [2**32 - 1]),
    ("max", lambda x: x.max(), lambda a: a.max(), NEAR_VALUES),
    ("min", lambda x: x.min(), lambda a: a.min(), NEAR_VALUES),
    ("amax(1)", lambda x: x.amax(1), lambda a: a.max(1), NEAR_VALUES),
    ("amin(1)", lambda x: x.amin(1), lambda a: a.min(1), NEAR_VALUES),
    ("max(1).values", lambda x: x.max(1).values, lambda a: a.max(1), NEAR_VALUES),
    (
        "amin((1, 2), keepdim)",
        lambda x: x.amin((1, 2), keepdim=True),
        lambda a: a.min((1, 2), keepdims=True),
        NEAR_VALUES.reshape(7, 3, 3),
    ),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, program, expectation, values", EXTREMES, ids=[case[0] for case in EXTREMES])
def test_int64_maxima_and_minima_are_exact(name, program, expectation, values, executor):
    array = np.asarray(values, np.int64)
    x = onnxnn.tensor(array)
    for actual in twice(executor, lambda: program(x)):
        np.testing.assert_array_equal(actual, expectation(array))


def test_products_and_powers_share_one_graph_across_sizes():
    # The forms read no size: a graph shared across sizes (dynamic_shapes) must stay exact at each.
    from onnxnn.runtime.fastpath import dynamic_shapes

    shared_before = dynamic_shapes.dynamic_info()["shared_runs"]
    with onnxnn.set_executor("onnxruntime"):
        for length in (5, 6, 7, 9, 33, 2):
            values = (np.arange(length) * 37 + 2**31 + 1).astype(np.int64)
            exponents = np.arange(length) * 7 - 3
            x, e = onnxnn.tensor(values.reshape(1, length)), onnxnn.tensor(exponents.reshape(1, length))
            product, power = x.prod(1), x**e
            exact = wrapped(int(np.prod(values.astype(object))), np.int64)
            assert product.tolist() == [exact]
            assert power.tolist() == [[torch_power(int(v), int(p), np.int64) for v, p in zip(values, exponents)]]
    assert dynamic_shapes.dynamic_info()["shared_runs"] > shared_before


def test_exported_integer_products_powers_extremes_and_narrow_ops_are_exact_on_plain_onnxruntime():
    class Integers(onnxnn.nn.Module):
        def forward(self, x, e):
            narrow = x.to(onnxnn.int8)
            return (
                x.prod(),
                x.prod(1, keepdim=True),
                x**e,
                narrow @ narrow.t(),
                x.to(onnxnn.int16).amax(0),
                narrow.tril(),
            )

    x = np.array([[2**40 + 1, 3, -7], [5, 2**33, 9]], np.int64)
    e = np.array([[41, 2, -1], [0, 3, 63]], np.int64)
    model = onnxnn.export.to_onnx(Integers().eval(), (onnxnn.tensor(x), onnxnn.tensor(e)))
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_inputs()]
    total, rows, powers, products, largest, lower = session.run(None, dict(zip(names, (x, e))))
    python_x = x.astype(object)
    assert int(total) == wrapped(int(np.prod(python_x)), np.int64)
    assert rows.tolist() == [[wrapped(int(value), np.int64)] for value in np.prod(python_x, axis=1)]
    assert powers.tolist() == [[torch_power(int(v), int(p), np.int64) for v, p in zip(*pair)] for pair in zip(x, e)]
    narrow = x.astype(np.int8)
    assert (
        products.dtype == np.int8
        and products.tolist() == as_wrapped(narrow.astype(np.int64) @ narrow.T, np.int8).tolist()
    )
    assert largest.tolist() == x.astype(np.int16).max(0).tolist()
    assert lower.tolist() == np.tril(narrow).tolist()

    class Extremes(onnxnn.nn.Module):
        def forward(self, x):
            return x.amax(1), x.min()

    model = onnxnn.export.to_onnx(Extremes().eval(), (onnxnn.tensor(NEAR_VALUES),))
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    row_maxima, least = session.run(None, {session.get_inputs()[0].name: NEAR_VALUES})
    assert row_maxima.tolist() == NEAR_VALUES.max(1).tolist() and int(least) == NEAR_VALUES.min()
