"""onnxnn.utils.data: datasets and samplers against plain-Python expectations."""

import numpy as np
import pytest

import onnxnn
from onnxnn.utils.data import ChainDataset, DataLoader, Dataset, IterableDataset, Sampler
from onnxnn.utils.data.dataset import ConcatDataset, Subset, TensorDataset
from onnxnn.utils.data.sampler import BatchSampler, SequentialSampler


def test_tensor_dataset_items_are_rows():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    dataset = TensorDataset(onnxnn.tensor(x), onnxnn.tensor(np.arange(4)))
    assert len(dataset) == 4
    row, label = dataset[2]
    np.testing.assert_array_equal(row.numpy(), x[2])
    assert int(label.item()) == 2


def test_tensor_dataset_size_mismatch():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(onnxnn.zeros(3), onnxnn.zeros(4))


@pytest.mark.parametrize("index, expected", [(0, 0), (2, 10), (4, 12), (-1, 12)])
def test_concat_and_subset(index, expected):
    dataset = ConcatDataset([[0, 1], Subset(list(range(10, 20)), [0, 1, 2])])
    assert len(dataset) == 5
    assert dataset[index] == expected


def test_subset_takes_a_list_of_positions():
    # PyTorch's Subset passes a list index on as one list of the wrapped dataset's indices.
    subset = Subset(np.arange(0, 100, 10), [3, 5, 7])
    np.testing.assert_array_equal(subset[[0, 2]], [30, 70])
    batches = DataLoader(subset, batch_size=None, sampler=BatchSampler(SequentialSampler(subset), 2, False))
    assert [batch.tolist() for batch in batches] == [[30, 50], [70]]


@pytest.mark.parametrize(
    "n, batch_size, drop_last, expected",
    [(5, 2, False, [[0, 1], [2, 3], [4]]), (5, 2, True, [[0, 1], [2, 3]]), (4, 4, False, [[0, 1, 2, 3]])],
)
def test_batch_sampler(n, batch_size, drop_last, expected):
    sampler = BatchSampler(SequentialSampler(range(n)), batch_size, drop_last)
    assert list(sampler) == expected
    assert len(sampler) == len(expected)


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True])
def test_batch_sampler_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        BatchSampler(range(3), batch_size, False)


class _Stream(IterableDataset):
    def __init__(self, count):
        self.count = count

    def __iter__(self):
        return iter(range(self.count))

    def __len__(self):
        return self.count


def test_iterable_datasets_chain_with_plus_and_chain_dataset():
    chained = _Stream(2) + _Stream(3)
    assert isinstance(chained, ChainDataset)
    assert list(chained) == [0, 1, 0, 1, 2] and len(chained) == 5
    assert [batch.tolist() for batch in DataLoader(chained, batch_size=2)] == [[0, 1], [0, 1], [2]]
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        list(ChainDataset([TensorDataset(onnxnn.ones(2))]))


def test_datasets_and_samplers_are_generic_in_their_items():
    class Pairs(Dataset[tuple]):
        def __getitem__(self, index):
            return (index, index)

        def __len__(self):
            return 2

    class Evens(Sampler[int]):
        def __iter__(self):
            return iter([0])

    assert Pairs()[1] == (1, 1) and list(Evens()) == [0]
    assert Subset[int] is not None and IterableDataset[int] is not None
