"""bucketize/searchsorted as a recorded binary search (``runtime/ops/binary_search.py``) and, for few
boundaries, a count: numpy's searchsorted for finite values, PyTorch's rule for NaN (a value goes past a
boundary unless ``boundary >= value``, ``>`` for ``right``, so a NaN value goes last and NaN boundaries
sorted last give the result of PyTorch's probes), torch bit for bit where it is installed, both executors.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.ops import searching
from onnxnn.runtime.ops.binary_search import search_outcomes

EXECUTORS = ["onnxruntime", "kernels"]
SIZES = [0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 1000, 1023, 1024, 1025]
NAN = float("nan")
INF = float("inf")


def _pytorch_search(sequence, value, right: bool) -> int:
    """PyTorch's CPU loop (``cus_lower_bound``/``cus_upper_bound``) in Python: the reference for NaNs."""
    start, end = 0, len(sequence)
    while start < end:
        mid = start + ((end - start) >> 1)
        if not (sequence[mid] > value if right else sequence[mid] >= value):
            start = mid + 1
        else:
            end = mid
    return start


def _reference(sequence: np.ndarray, values: np.ndarray, right: bool) -> np.ndarray:
    """``_pytorch_search`` over the innermost rows (``sequence`` 1-D, or with ``values``' leading dims)."""
    rows = sequence.reshape(-1, sequence.shape[-1]) if sequence.ndim > 1 else None
    result = np.empty(values.shape, np.int64)
    for position in np.ndindex(values.shape):
        row = sequence if rows is None else sequence[position[:-1]]
        result[position] = _pytorch_search(list(row), values[position], right)
    return result


def _sorted_with_ties(rng, m: int, dtype) -> np.ndarray:
    return np.sort(rng.integers(-m // 2 - 2, m // 2 + 3, m)).astype(dtype)


def _values_around(rng, sequence: np.ndarray, n: int, dtype) -> np.ndarray:
    """Values equal to boundaries (ties), between them, and beyond both ends."""
    low, high = (float(sequence.min()) - 3, float(sequence.max()) + 3) if sequence.size else (-3.0, 3.0)
    drawn = rng.uniform(low, high, n)
    if np.dtype(dtype).kind == "f":
        drawn[::3] = np.round(drawn[::3]) + 0.5
    values = np.round(drawn) if np.dtype(dtype).kind != "f" else drawn
    if sequence.size:
        values[1::4] = rng.choice(sequence.reshape(-1), values[1::4].shape)
    return values.astype(dtype)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("m", SIZES)
def test_1d_boundaries_match_numpy(executor, dtype, m):
    rng = np.random.default_rng(m)
    boundaries = _sorted_with_ties(rng, m, dtype)
    values = _values_around(rng, boundaries, 257, dtype)
    with onnxnn.set_executor(executor):
        for right in (False, True):
            expected = np.searchsorted(boundaries, values, side="right" if right else "left")
            found = onnxnn.searchsorted(onnxnn.tensor(boundaries), onnxnn.tensor(values), right=right)
            bucketed = onnxnn.bucketize(onnxnn.tensor(values), onnxnn.tensor(boundaries), right=right)
            assert found.dtype == onnxnn.int64 and bucketed.dtype == onnxnn.int64
            np.testing.assert_array_equal(found.numpy(), expected)
            np.testing.assert_array_equal(bucketed.numpy(), expected)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("m", [0, 1, 2, 3, 5, 16, 17, 100, 255, 256, 257])
@pytest.mark.parametrize("side", ["left", "right"])
def test_nd_sorted_sequence_searches_each_row(executor, m, side):
    rng = np.random.default_rng(1000 + m)
    sequence = np.sort(rng.integers(-5, 6, (2, 3, m)).astype(np.float32), axis=-1)
    values = rng.integers(-7, 8, (2, 3, 11)).astype(np.float32) + rng.choice([0.0, 0.5], (2, 3, 11))
    expected = np.empty(values.shape, np.int64)
    for i, j in np.ndindex(2, 3):
        expected[i, j] = np.searchsorted(sequence[i, j], values[i, j], side=side)
    with onnxnn.set_executor(executor):
        found = onnxnn.searchsorted(onnxnn.tensor(sequence), onnxnn.tensor(values), side=side)
        np.testing.assert_array_equal(found.numpy(), expected)


# (boundaries, values, right, expected): PyTorch's rule, by hand where the comparisons are monotone.
NAN_CASES = [
    ([1.0, 2.0, 2.0, 3.0], [NAN, INF, -INF, 2.0], False, [4, 4, 0, 1]),
    ([1.0, 2.0, 2.0, 3.0], [NAN, INF, -INF, 2.0], True, [4, 4, 0, 3]),
    ([-INF, 0.0, INF], [-INF, INF, NAN, 0.0], False, [0, 2, 3, 1]),
    ([-INF, 0.0, INF], [-INF, INF, NAN, 0.0], True, [1, 3, 3, 2]),
    ([NAN], [0.0, NAN, INF], False, [1, 1, 1]),
    ([], [NAN, 1.0], False, [0, 0]),
    # NaN boundaries sorted last: the comparisons are not monotone, PyTorch's probes decide.
    ([1.0, 2.0, NAN], [1.5, 3.0, NAN, 0.5], False, [1, 3, 3, 0]),
    ([1.0, NAN, NAN], [0.5, 1.0, 2.0], True, [3, 3, 3]),
    ([1.0, 2.0, 3.0, 4.0, NAN], [0.5, 1.5, 2.5, 3.5, 4.5], False, [0, 1, 2, 5, 5]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("boundaries, values, right, expected", NAN_CASES)
def test_nan_and_infinity_follow_pytorchs_rule(executor, boundaries, values, right, expected):
    boundaries_array, values_array = np.array(boundaries, np.float32), np.array(values, np.float32)
    assert _reference(boundaries_array, values_array, right).tolist() == expected
    with onnxnn.set_executor(executor):
        found = onnxnn.searchsorted(onnxnn.tensor(boundaries_array), onnxnn.tensor(values_array), right=right)
        assert found.numpy().tolist() == expected


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("m", [1, 2, 3, 5, 8, 16, 17, 33, 100])
@pytest.mark.parametrize("right", [False, True])
def test_nan_boundaries_sorted_last_give_pytorchs_probes(executor, m, right):
    """Every count of finite boundaries and every position of the value among them, in both the counted
    form (m <= 16) and the search: the result of PyTorch's probe sequence, not a count."""
    rng = np.random.default_rng(m)
    rows = []
    for finite in range(m + 1):
        rows.append(np.concatenate([np.sort(rng.integers(0, m, finite)).astype(np.float64), np.full(m - finite, NAN)]))
    sequence = np.stack(rows)
    values = np.tile(np.concatenate([np.arange(-1.0, m + 1.0, 0.5), [NAN, INF, -INF]]), (m + 1, 1))
    with onnxnn.set_executor(executor):
        found = onnxnn.searchsorted(onnxnn.tensor(sequence), onnxnn.tensor(values), right=right).numpy()
        np.testing.assert_array_equal(found, _reference(sequence, values, right))
        flat = onnxnn.searchsorted(onnxnn.tensor(sequence[m // 2]), onnxnn.tensor(values[0]), right=right).numpy()
        np.testing.assert_array_equal(flat, _reference(sequence[m // 2], values[0], right))


def test_search_outcomes_table_follows_pytorchs_loop():
    for m in range(8):
        table = search_outcomes(m)
        for nans in range(m + 1):
            for finite_below in range(m - nans + 1):
                sequence = [float(i >= finite_below) for i in range(m - nans)] + [NAN] * nans
                expected = _pytorch_search(sequence, 0.5, right=False)
                assert table[(finite_below + nans) * (m + 1) + nans] == expected


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("m", [0, 1, 3, 16, 17, 1000])
def test_scalars_zero_d_and_empty_values(executor, m):
    boundaries = np.arange(m, dtype=np.float32)
    with onnxnn.set_executor(executor):
        sequence = onnxnn.tensor(boundaries)
        scalar = onnxnn.bucketize(2.5, sequence)
        assert scalar.shape == () and scalar.item() == np.searchsorted(boundaries, 2.5)
        zero_d = onnxnn.searchsorted(sequence, onnxnn.tensor(np.float32(2.0)), right=True)
        assert zero_d.shape == () and zero_d.item() == np.searchsorted(boundaries, 2.0, side="right")
        empty = onnxnn.searchsorted(sequence, onnxnn.tensor(np.zeros((0, 4), np.float32)))
        assert empty.shape == (0, 4) and empty.numpy().size == 0
        rows = onnxnn.tensor(np.stack([boundaries, boundaries]))
        empty_rows = onnxnn.searchsorted(rows, onnxnn.tensor(np.zeros((2, 0), np.float32)))
        assert empty_rows.shape == (2, 0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("m", [0, 5, 40, 1000])
def test_out_int32_side_and_sorter(executor, m):
    rng = np.random.default_rng(m)
    boundaries = rng.permutation(m).astype(np.float64)
    order = np.argsort(boundaries, kind="stable")
    values = rng.uniform(-2, m + 2, 50)
    expected = np.searchsorted(boundaries[order], values, side="right")
    with onnxnn.set_executor(executor):
        found = onnxnn.searchsorted(
            onnxnn.tensor(boundaries), onnxnn.tensor(values), side="right", sorter=onnxnn.tensor(order), out_int32=True
        )
        assert found.dtype == onnxnn.int32
        np.testing.assert_array_equal(found.numpy(), expected)
        bucketed = onnxnn.bucketize(onnxnn.tensor(values), onnxnn.tensor(boundaries[order]), out_int32=True)
        assert bucketed.dtype == onnxnn.int32
        np.testing.assert_array_equal(bucketed.numpy(), np.searchsorted(boundaries[order], values))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("m", [3, 300])
@pytest.mark.parametrize(
    "sequence_dtype, values_dtype",
    [(np.int64, np.float32), (np.float64, np.float32), (np.float32, np.float64), (np.int32, np.int64)],
)
def test_mixed_dtypes_compare_in_the_promoted_dtype(executor, m, sequence_dtype, values_dtype):
    rng = np.random.default_rng(m)
    boundaries = np.sort(rng.uniform(-m, m, m)).astype(sequence_dtype)
    values = np.concatenate([boundaries[::7].astype(values_dtype), rng.uniform(-m, m, 40).astype(values_dtype)])
    common = np.promote_types(sequence_dtype, values_dtype)
    expected = np.searchsorted(boundaries.astype(common), values.astype(common))
    with onnxnn.set_executor(executor):
        found = onnxnn.searchsorted(onnxnn.tensor(boundaries), onnxnn.tensor(values))
        np.testing.assert_array_equal(found.numpy(), expected)


@pytest.mark.parametrize("m", [2, 40])
def test_boundaries_that_require_grad_give_an_index_without_gradient(m):
    boundaries = onnxnn.tensor(np.arange(m, dtype=np.float32), requires_grad=True)
    values = onnxnn.tensor([0.5, 1.5], requires_grad=True)
    found = onnxnn.searchsorted(boundaries, values)
    assert not found.requires_grad
    assert found.tolist() == [1, 2]


def test_the_count_and_the_search_agree_around_the_threshold():
    """Both forms on the same inputs (the threshold moved to either side of them)."""
    rng = np.random.default_rng(7)
    threshold = searching._COUNT_BELOW_UP_TO
    for m in (1, 2, threshold - 1, threshold, threshold + 1):
        boundaries = np.concatenate([np.sort(rng.integers(-4, 5, m - 1)).astype(np.float32), [NAN]])
        values = np.concatenate([np.arange(-5.0, 5.5, 0.5, dtype=np.float32), [NAN]])
        results = []
        for setting in (10**9, 0):
            searching._COUNT_BELOW_UP_TO = setting
            try:
                for right in (False, True):
                    results.append(
                        onnxnn.searchsorted(onnxnn.tensor(boundaries), onnxnn.tensor(values), right=right).numpy()
                    )
            finally:
                searching._COUNT_BELOW_UP_TO = threshold
        np.testing.assert_array_equal(results[0], results[2])
        np.testing.assert_array_equal(results[1], results[3])
        np.testing.assert_array_equal(results[0], _reference(boundaries, values, False))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_hundred_thousand_values_in_a_hundred_thousand_boundaries(executor):
    """The comparison of every value with every boundary needed 1e10 elements (74.5 GiB as int64); the
    search needs 17 steps over 1e5 values."""
    rng = np.random.default_rng(0)
    boundaries = np.sort(rng.standard_normal(100_000)).astype(np.float32)
    values = rng.standard_normal(100_000).astype(np.float32)
    with onnxnn.set_executor(executor):
        start = time.perf_counter()
        found = onnxnn.searchsorted(onnxnn.tensor(boundaries), onnxnn.tensor(values)).numpy()
        elapsed = time.perf_counter() - start
    np.testing.assert_array_equal(found, np.searchsorted(boundaries, values))
    assert elapsed < 3.0, f"took {elapsed:.2f} s"


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("m", [0, 1, 2, 3, 16, 17, 31, 32, 33, 1000, 1024])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_bit_for_bit_with_torch(executor, m, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(m)
    boundaries = _sorted_with_ties(rng, m, dtype)
    values = _values_around(rng, boundaries, 200, dtype)
    nan_cases = dtype.startswith("float") and m > 0
    if nan_cases:
        values[-3:] = [NAN, INF, -INF]
        boundaries[-(m // 3) :] = NAN  # NaN boundaries sorted last
    rows = np.stack([boundaries, boundaries[::-1].copy() if not nan_cases else boundaries])
    rows.sort(axis=-1)
    row_values = np.stack([values, values[::-1].copy()])
    with onnxnn.set_executor(executor):
        for right in (False, True):
            for out_int32 in (False, True):
                expected = torch.searchsorted(
                    torch.from_numpy(boundaries), torch.from_numpy(values), right=right, out_int32=out_int32
                )
                found = onnxnn.searchsorted(
                    onnxnn.tensor(boundaries), onnxnn.tensor(values), right=right, out_int32=out_int32
                )
                assert str(found.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
                np.testing.assert_array_equal(found.numpy(), expected.numpy())
                expected_bucket = torch.bucketize(torch.from_numpy(values), torch.from_numpy(boundaries), right=right)
                found_bucket = onnxnn.bucketize(onnxnn.tensor(values), onnxnn.tensor(boundaries), right=right)
                np.testing.assert_array_equal(found_bucket.numpy(), expected_bucket.numpy())
            expected_rows = torch.searchsorted(torch.from_numpy(rows), torch.from_numpy(row_values), right=right)
            found_rows = onnxnn.searchsorted(onnxnn.tensor(rows), onnxnn.tensor(row_values), right=right)
            np.testing.assert_array_equal(found_rows.numpy(), expected_rows.numpy())
