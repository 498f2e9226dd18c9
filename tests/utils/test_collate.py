"""default_collate and default_convert: structures, dtypes and PyTorch's errors."""

from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import onnxnn
from onnxnn.utils.data import DataLoader, default_collate, default_convert

Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    "samples, dtype, expected",
    [
        ([1, 2, 3], onnxnn.int64, [1, 2, 3]),
        ([0.5, 1.5], onnxnn.float64, [0.5, 1.5]),
        ([True, False], onnxnn.bool, [True, False]),
        ([np.float32(1), np.float32(2)], onnxnn.float32, [1.0, 2.0]),
        ([np.arange(2, dtype=np.int32), np.arange(2, dtype=np.int32)], onnxnn.int32, [[0, 1], [0, 1]]),
        ([onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([3.0, 4.0])], onnxnn.float32, [[1.0, 2.0], [3.0, 4.0]]),
        # Numbers take the dtype all of them need (the first one's would truncate 2.5 to 2).
        ([1, 2.5], onnxnn.float32, [1.0, 2.5]),
        ([True, 2], onnxnn.int64, [1, 2]),
        # Tensors of several dtypes stack in PyTorch's promoted one (numpy's would be float64).
        ([onnxnn.tensor([1], dtype=onnxnn.int32), onnxnn.tensor([2.5])], onnxnn.float32, [[1.0], [2.5]]),
        (
            [onnxnn.tensor([1.0], dtype=onnxnn.bfloat16), onnxnn.tensor([2.5], dtype=onnxnn.float16)],
            onnxnn.float32,
            [[1.0], [2.5]],
        ),
    ],
)
def test_leaves_become_one_tensor_with_a_batch_dimension(samples, dtype, expected):
    batch = default_collate(samples)
    assert isinstance(batch, onnxnn.Tensor) and batch.dtype == dtype
    np.testing.assert_array_equal(batch.numpy(), np.array(expected))


def test_structures_are_collated_field_by_field():
    samples = [
        {"image": np.zeros((2, 2), np.float32), "label": 1, "name": "a", "point": Point(1, 2.0)},
        {"image": np.ones((2, 2), np.float32), "label": 0, "name": "b", "point": Point(3, 4.0)},
    ]
    batch = default_collate(samples)
    assert batch["image"].shape == (2, 2, 2) and batch["label"].numpy().tolist() == [1, 0]
    assert batch["name"] == ["a", "b"]
    assert isinstance(batch["point"], Point) and batch["point"].x.numpy().tolist() == [1, 3]
    pairs = default_collate([(1, [2.0, 3.0]), (4, [5.0, 6.0])])
    assert isinstance(pairs, list)  # a tuple sample gives a list, as in PyTorch
    assert pairs[0].numpy().tolist() == [1, 4]
    assert [column.numpy().tolist() for column in pairs[1]] == [[2.0, 5.0], [3.0, 6.0]]
    # A field of tuple samples is collated from zip's tuple: strings stay a tuple (in a dict, a list).
    assert default_collate([(1, "x"), (2, "y")])[1] == ("x", "y")


def test_a_defaultdict_sample_keeps_its_default_factory():
    from collections import defaultdict

    samples = [defaultdict(int, {"a": 1}), defaultdict(int, {"a": 2})]
    for batch in (default_collate(samples), default_convert(samples[0])):
        assert isinstance(batch, defaultdict) and batch["missing"] == 0


@pytest.mark.parametrize(
    "samples, error, message",
    [
        (
            [np.zeros(2), np.zeros(3)],
            RuntimeError,
            r"stack expects each tensor to be equal size, but got \[2\] at entry 0 and \[3\] at entry 1",
        ),
        ([[1, 2], [3]], RuntimeError, "each element in list of batch should be of equal size"),
        (
            [object(), object()],
            TypeError,
            "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists",
        ),
        ([np.array(["a"]), np.array(["b"])], TypeError, "default_collate: batch must contain tensors"),
        # PyTorch's torch.stack error names the first item that is not a tensor.
        (
            [onnxnn.zeros(2), np.zeros(2)],
            TypeError,
            "expected Tensor as element 1 in argument 0, but got numpy.ndarray",
        ),
        (
            [onnxnn.zeros(1), onnxnn.zeros(1), 2.5],
            TypeError,
            "expected Tensor as element 2 in argument 0, but got float",
        ),
    ],
)
def test_bad_batches(samples, error, message):
    with pytest.raises(error, match=message):
        default_collate(samples)


def test_default_convert_turns_arrays_into_tensors_and_keeps_the_rest():
    converted = default_convert({"x": np.arange(3), "n": 7, "pair": (np.zeros(1), "s")})
    assert isinstance(converted["x"], onnxnn.Tensor) and converted["n"] == 7
    assert isinstance(converted["pair"], list) and converted["pair"][1] == "s"


def test_tensors_that_require_grad_keep_their_gradient_path():
    weight = onnxnn.ones(2, requires_grad=True)
    batch = default_collate([weight * 2, weight * 3])
    batch.sum().backward()
    np.testing.assert_array_equal(weight.grad.numpy(), [5.0, 5.0])


@pytest.mark.parametrize(
    "samples, dtype",
    [
        ([np.zeros(2, np.int32), np.zeros(2, np.float32)], "float32"),
        ([np.int32(1), np.float32(2)], "float32"),
        ([np.float16(1), np.int64(2)], "float16"),
        ([np.uint8(1), np.int8(2)], "int16"),
    ],
    ids=["arrays", "scalars", "half_and_long", "unsigned_and_signed"],
)
def test_mixed_numpy_dtypes_stack_in_pytorchs_promoted_dtype(samples, dtype):
    assert default_collate(samples).dtype == getattr(onnxnn, dtype)


@pytest.mark.parametrize(
    "samples, dtype",
    [
        # PyTorch gives a Python number among numpy items its own dtype: a float is float32 (the default dtype).
        ([np.float32(1.5), 2.5], onnxnn.float32),
        ([np.array(1.5, np.float32), 2.5], onnxnn.float32),
        ([np.float16(1.5), 2.5], onnxnn.float32),
        ([np.int32(1), 2.5], onnxnn.float32),
        ([np.float64(1.5), 2.5], onnxnn.float64),
        ([np.int8(1), 300], onnxnn.int64),
        ([np.array(1.5, np.float32), True], onnxnn.float32),
    ],
)
def test_python_numbers_among_numpy_items_take_pytorchs_dtype(samples, dtype):
    batch = default_collate(samples)
    assert batch.dtype == dtype
    np.testing.assert_array_equal(batch.numpy(), np.array([float(sample) for sample in samples]))


def test_a_loader_batches_numpy_and_python_floats_as_float32():
    (batch,) = DataLoader([np.float32(1.5), 2.5], batch_size=2)
    assert batch.dtype == onnxnn.float32
