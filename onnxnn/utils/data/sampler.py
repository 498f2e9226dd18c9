"""Index samplers, as ``torch.utils.data.sampler``."""

from __future__ import annotations

from typing import Generic, Iterator, Sequence, TypeVar

import numpy as np

from ...ir import dtypes
from ...ir.random import Generator, default_generator
from ...runtime.creation import tensor
from ...runtime.ops.random_samplers import check_multinomial_weights

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]


T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base class: an iterable of dataset indices (or of index lists, for batch samplers); generic in
    what it yields, as PyTorch's (``Sampler[int]``)."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _fresh_rng(generator: Generator | None) -> np.random.Generator:
    """The stream of one pass: ``generator``'s, or, without one, a new stream seeded from the default
    generator, so each pass differs and ``onnxnn.manual_seed`` makes the passes repeat (as PyTorch)."""
    if generator is not None:
        return generator.numpy
    return np.random.Generator(np.random.PCG64(int(default_generator.numpy.integers(2**63))))


def _check_replacement_and_num_samples(replacement, num_samples) -> None:
    if not isinstance(replacement, bool):
        raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
    if num_samples is not None and (
        not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0
    ):
        raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")


class RandomSampler(Sampler):
    """A random permutation of the indices, or ``num_samples`` draws with replacement.

    Args:
        data_source: the dataset (only its length is used).
        replacement: draw with replacement (then ``num_samples`` may exceed the length).
        num_samples: how many indices one pass yields (default: the dataset's length).
        generator: the generator of the draws.
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None, generator=None) -> None:
        _check_replacement_and_num_samples(replacement, num_samples)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_replacement_and_num_samples(replacement, self.num_samples)  # an empty dataset's 0 too

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        size = len(self.data_source)
        rng = _fresh_rng(self.generator)
        if self.replacement:
            if size == 0:  # PyTorch's error type; numpy's would be ValueError("high <= 0")
                raise RuntimeError(
                    f"RandomSampler cannot draw num_samples={self.num_samples} indices with replacement "
                    "from an empty data_source (random_ expects 'from' to be less than 'to', but got from=0 >= to=0)"
                )
            yield from rng.integers(0, size, self.num_samples).tolist()
            return
        # Whole permutations, then the head of one more, as PyTorch's sampler without replacement.
        for _ in range(self.num_samples // size):
            yield from rng.permutation(size).tolist()
        yield from rng.permutation(size)[: self.num_samples % size].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order, a new one each pass."""

    def __init__(self, indices: Sequence[int], generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for position in _fresh_rng(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[position]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    Args:
        weights: one non-negative weight per index (need not sum to 1).
        num_samples: how many indices one pass yields.
        replacement: draw with replacement; without it each index appears at most once.
        generator: the generator of the draws.

    Example::

        >>> sampler = WeightedRandomSampler([0.1, 0.9, 0.4, 0.7, 3.0, 0.6], 5, replacement=True)
        >>> len(list(sampler))
        5
    """

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None) -> None:
        # PyTorch's checks in its order, both ValueError (RandomSampler's replacement check is a TypeError).
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        values = np.asarray(weights.numpy(force=True) if hasattr(weights, "numpy") else weights, dtype=np.float64)
        if values.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(values.shape)}")
        self.weights = tensor(values, dtype=dtypes.float64)  # a float64 tensor, as PyTorch's attribute
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        weights = np.asarray(self.weights.numpy(force=True), dtype=np.float64)  # as it is now: it may be set
        check_multinomial_weights(weights, self.num_samples, self.replacement)
        rng = _fresh_rng(self.generator)
        if self.replacement:
            scaled = weights / weights.max()  # first by the largest, so that a sum past float64's range is finite
            drawn = rng.choice(len(weights), size=self.num_samples, replace=True, p=scaled / scaled.sum())
        else:
            # PyTorch's way without replacement: the smallest exponential(1) / weight first, so that
            # weights of 0 come last (numpy's choice refuses to reach them), in their order.
            with np.errstate(divide="ignore"):
                keys = rng.exponential(size=len(weights)) / weights
            drawn = np.argsort(keys, kind="stable")[: self.num_samples]
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups ``sampler``'s indices into lists of ``batch_size``; ``drop_last`` drops a short tail."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
