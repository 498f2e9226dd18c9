"""Edge cases where onnxnn's answer was not PyTorch's, found side by side with torch 2.13: each
expectation is PyTorch's documented behaviour, written as numpy or as the error it raises."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: onnxnn.zeros(0).max(), RuntimeError, r"max\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(0).min(), RuntimeError, r"min\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(0).amax(), RuntimeError, r"amax\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(0).argmax(), IndexError, r"argmax\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(2, 0).max(dim=1), IndexError, r"max\(\): Expected reduction dim 1 to have non-zero"),
        (lambda: onnxnn.zeros(2, 0).amin(dim=-1), IndexError, r"amin\(\): Expected reduction dim 1 to have non-zero"),
        (lambda: onnxnn.zeros(0, 3).amax(dim=(0, 1)), IndexError, r"amax\(\): Expected reduction dim 0"),
        (lambda: onnxnn.zeros(2, 0).argmin(1), IndexError, r"argmin\(\): Expected reduction dim 1"),
    ],
)
def test_max_and_min_over_no_elements_are_refused(call, error, message):
    # ONNX's ReduceMax/ReduceMin give -inf/inf over no elements; PyTorch refuses them.
    with pytest.raises(error, match=message):
        call()


def test_max_and_min_along_a_nonempty_dim_of_an_empty_tensor_are_empty():
    empty = onnxnn.zeros(0, 3)
    assert tuple(empty.max(dim=1).values.shape) == (0,) and tuple(empty.amin(dim=1).shape) == (0,)


def test_masked_fill_keeps_the_tensors_dtype():
    values = onnxnn.tensor([1, 5])
    mask = onnxnn.tensor([True, False])
    filled = values.masked_fill(mask, 2.7)  # the value becomes an int64, as PyTorch casts it
    assert filled.dtype is onnxnn.int64 and filled.tolist() == [2, 5]
    values.masked_fill_(mask, 2.7)
    assert values.dtype is onnxnn.int64 and values.tolist() == [2, 5]
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        values.masked_fill(onnxnn.tensor([1, 0]), 0)


def test_negating_an_unsigned_tensor_wraps_around():
    values = onnxnn.tensor([0, 1, 200], dtype=onnxnn.uint8)
    np.testing.assert_array_equal((-values).numpy(), -np.array([0, 1, 200], np.uint8))


def test_maximum_and_minimum_of_bool_tensors_are_or_and_and():
    a, b = onnxnn.tensor([True, True, False]), onnxnn.tensor([True, False, False])
    assert onnxnn.maximum(a, b).tolist() == [True, True, False] and onnxnn.maximum(a, b).dtype is onnxnn.bool
    assert onnxnn.minimum(a, b).tolist() == [True, False, False]


@pytest.mark.parametrize(
    "layout, shape",
    [
        ("contiguous_format", (1, 2, 3)),
        ("channels_last", (1, 2, 3, 4)),
        ("channels_last_3d", (1, 2, 1, 3, 4)),
        ("preserve_format", (2, 3)),
    ],
)
def test_memory_formats_are_accepted_and_change_nothing(layout, shape):
    memory_format = getattr(onnxnn, layout)
    assert isinstance(memory_format, onnxnn.memory_format) and repr(memory_format) == f"onnxnn.{layout}"
    x = onnxnn.arange(float(np.prod(shape))).reshape(shape)
    for converted in (x.contiguous(memory_format=memory_format), x.clone(memory_format=memory_format)):
        np.testing.assert_array_equal(converted.numpy(), x.numpy())


@pytest.mark.parametrize("layout, rank", [("channels_last", 4), ("channels_last_3d", 5)])
def test_a_channels_last_format_needs_its_rank(layout, rank):
    x = onnxnn.zeros(*([2] * (rank + 1)))
    with pytest.raises(RuntimeError, match=f"required rank {rank} tensor to use {layout} format"):
        x.contiguous(memory_format=getattr(onnxnn, layout))
    with pytest.raises(RuntimeError, match=f"required rank {rank}"):
        x.clone(memory_format=getattr(onnxnn, layout))
