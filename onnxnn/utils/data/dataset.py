"""Map-style and iterable datasets, as ``torch.utils.data.dataset``."""

from __future__ import annotations

import bisect
import math
import warnings
from typing import Generic, Iterable, Iterator, Sequence, TypeVar

from ...ir.random import Generator, default_generator

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "StackDataset",
    "ConcatDataset",
    "ChainDataset",
    "Subset",
    "random_split",
]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``). Generic in its
    samples' type, as PyTorch's (``class Pairs(Dataset[tuple])``)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A stream of samples: subclasses define ``__iter__``. ``a + b`` chains two streams."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: "Dataset") -> "ChainDataset":  # type: ignore[override]
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """The samples of several iterable datasets, one after another (lazily).

    Args:
        datasets: the ``IterableDataset`` objects to chain.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator:
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self) -> int:
        total = 0
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(dataset)  # type: ignore[arg-type]
        return total


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; all tensors share their first dimension."""

    def __init__(self, *tensors) -> None:
        if not all(tensors[0].shape[0] == t.shape[0] for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


def _read_many(dataset, indices: list) -> list:
    read_batch = getattr(dataset, "__getitems__", None)
    if not read_batch:
        return [dataset[index] for index in indices]
    samples = read_batch(indices)
    if len(samples) != len(indices):
        raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(samples)}")
    return list(samples)


class StackDataset(Dataset):
    """Sample ``i`` is ``(d[i] for d in args)``, or ``{key: d[i]}`` for keyword datasets.

    Args:
        *args: datasets whose samples form a tuple.
        **kwargs: datasets whose samples form a dict; not together with ``args``.

    Example::

        >>> pairs = StackDataset(images, labels)
        >>> named = StackDataset(image=images, label=labels)
    """

    def __init__(self, *args, **kwargs) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/output, "
                "but both types are given."
            )
        datasets = list(args) or list(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(self._length != len(dataset) for dataset in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets: tuple | dict = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __getitems__(self, indices: list) -> list:
        """The samples at ``indices``, each dataset read by its own batched read where it has one."""
        datasets = self.datasets.values() if isinstance(self.datasets, dict) else self.datasets
        columns = [_read_many(dataset, indices) for dataset in datasets]
        if isinstance(self.datasets, dict):
            return [dict(zip(self.datasets, row)) for row in zip(*columns)]
        return [tuple(row) for row in zip(*columns)]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = []
        total = 0
        for dataset in self.datasets:
            if isinstance(dataset, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
            total += len(dataset)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index = len(self) + index
        which = bisect.bisect_right(self.cumulative_sizes, index)
        offset = index - (self.cumulative_sizes[which - 1] if which > 0 else 0)
        return self.datasets[which][offset]


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):  # one batched read of the wrapped dataset, as PyTorch's Subset
            return self.dataset[[self.indices[position] for position in index]]
        return self.dataset[self.indices[index]]

    def __getitems__(self, indices: list) -> list:
        # The wrapped dataset's batched read where it has one, as PyTorch's Subset passes it on.
        read_batch = getattr(self.dataset, "__getitems__", None)
        if read_batch:
            return read_batch([self.indices[index] for index in indices])
        return [self.dataset[self.indices[index]] for index in indices]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset, lengths: Sequence, generator: Generator | None = default_generator) -> list[Subset]:
    """Splits ``dataset`` into non-overlapping random subsets of the given lengths.

    Args:
        dataset: the dataset to split.
        lengths: the subsets' lengths, or fractions summing to 1 (each subset gets ``floor(n * f)``
            samples and the remainder is dealt one by one, round-robin, as PyTorch does).
        generator: the generator of the permutation.

    Returns:
        One :class:`Subset` per length.

    Example::

        >>> train, test = random_split(range(10), [0.8, 0.2], generator=onnxnn.Generator().manual_seed(0))
    """
    lengths = list(lengths)
    total = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for index, fraction in enumerate(lengths):
            if fraction < 0 or fraction > 1:
                raise ValueError(f"Fraction at index {index} is not between 0 and 1")
            counts.append(int(math.floor(total * fraction)))
        for index in range(total - sum(counts)):
            counts[index % len(counts)] += 1
        for index, count in enumerate(counts):
            if count == 0:
                warnings.warn(f"Length of split at index {index} is 0. This might result in an empty dataset.")
        lengths = counts
    if sum(lengths) != total:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    rng = (generator or default_generator).numpy
    indices = rng.permutation(sum(lengths)).tolist()
    subsets: list[Subset] = []
    offset = 0
    for length in lengths:
        subsets.append(Subset(dataset, indices[offset : offset + length]))
        offset += length
    return subsets
