"""Random samplers, random_split and StackDataset, against their definitions and PyTorch's errors."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import onnxnn
from onnxnn.utils.data import (
    RandomSampler,
    StackDataset,
    SubsetRandomSampler,
    WeightedRandomSampler,
    random_split,
)


def _generator(seed: int = 0):
    return onnxnn.Generator().manual_seed(seed)


@pytest.mark.parametrize("num_samples", [None, 4, 10, 23])
def test_random_sampler_without_replacement_draws_whole_permutations(num_samples):
    sampler = RandomSampler(range(10), num_samples=num_samples, generator=_generator())
    drawn = list(sampler)
    expected_length = 10 if num_samples is None else num_samples
    assert len(drawn) == len(sampler) == expected_length
    full, rest = divmod(expected_length, 10)
    for block in range(full):
        assert sorted(drawn[block * 10 : block * 10 + 10]) == list(range(10))
    tail = drawn[full * 10 :]
    assert len(set(tail)) == rest  # the head of one more permutation: no repeats


def test_random_sampler_with_replacement_and_reproducibility():
    drawn = list(RandomSampler(range(5), replacement=True, num_samples=200, generator=_generator(1)))
    assert len(drawn) == 200 and set(drawn) <= set(range(5)) and len(set(drawn)) == 5
    assert list(RandomSampler(range(5), replacement=True, num_samples=200, generator=_generator(1))) == drawn


def test_random_sampler_without_generator_follows_manual_seed():
    onnxnn.manual_seed(5)
    first = list(RandomSampler(range(20)))
    second = list(RandomSampler(range(20)))
    onnxnn.manual_seed(5)
    assert list(RandomSampler(range(20))) == first and first != second


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        ({"replacement": 1}, TypeError, "replacement should be a boolean value, but got replacement=1"),
        ({"num_samples": 0}, ValueError, "num_samples should be a positive integer value, but got num_samples=0"),
        ({"num_samples": 2.5}, ValueError, "num_samples should be a positive integer value"),
    ],
)
def test_random_sampler_bad_arguments(arguments, error, message):
    with pytest.raises(error, match=message):
        RandomSampler(range(3), **arguments)


def test_subset_random_sampler_permutes_the_given_indices():
    indices = [3, 8, 11, 20]
    drawn = list(SubsetRandomSampler(indices, generator=_generator()))
    assert sorted(drawn) == indices


def test_weighted_sampler_frequencies_follow_the_weights():
    weights = np.array([1.0, 0.0, 3.0, 6.0])
    count = 20_000
    drawn = Counter(WeightedRandomSampler(weights, count, generator=_generator(2)))
    assert drawn[1] == 0
    for index, weight in enumerate(weights):
        p = weight / weights.sum()
        # Six binomial standard deviations: a correct sampler fails this about once in 10^9 runs.
        assert abs(drawn[index] - count * p) <= 6 * math.sqrt(count * p * (1 - p)) + 1e-9


def test_weighted_sampler_without_replacement_gives_distinct_indices():
    drawn = list(WeightedRandomSampler([1.0, 2.0, 3.0, 4.0], 4, replacement=False, generator=_generator()))
    assert sorted(drawn) == [0, 1, 2, 3]


def test_weighted_sampler_without_replacement_reaches_weights_of_zero_last():
    # As PyTorch's: every index once, those of weight 0 after the others.
    drawn = list(WeightedRandomSampler([0.1, 0.0, 0.3, 0.6], 4, replacement=False, generator=_generator()))
    assert sorted(drawn) == [0, 1, 2, 3] and drawn[-1] == 1


def test_weighted_sampler_without_replacement_draws_first_by_the_weights():
    weights = np.array([1.0, 3.0, 6.0])
    count = 6_000
    first = Counter(
        next(iter(WeightedRandomSampler(weights, 1, replacement=False, generator=_generator(seed))))
        for seed in range(count)
    )
    for index, weight in enumerate(weights):
        p = weight / weights.sum()
        # Six binomial standard deviations: a correct sampler fails this about once in 10^9 runs.
        assert abs(first[index] - count * p) <= 6 * math.sqrt(count * p * (1 - p))


@pytest.mark.parametrize(
    "weights, num_samples, replacement, error, message",
    [
        ([[1.0, 2.0]], 2, True, ValueError, "weights should be a 1d sequence but given weights have shape"),
        ([1.0, 2.0], 0, True, ValueError, "num_samples should be a positive integer value"),
        ([1.0, 2.0], 3, False, RuntimeError, "cannot sample n_sample > prob_dist.size"),
        ([1.0, -2.0], 2, True, RuntimeError, "invalid multinomial distribution"),
    ],
)
def test_weighted_sampler_errors(weights, num_samples, replacement, error, message):
    with pytest.raises(error, match=message):
        list(WeightedRandomSampler(weights, num_samples, replacement=replacement))


@pytest.mark.parametrize(
    "lengths, sizes", [([3, 7], [3, 7]), ([0.5, 0.5], [5, 5]), ([0.33, 0.33, 0.34], [4, 3, 3]), ([1.0], [10])]
)
def test_random_split_partitions_the_dataset(lengths, sizes):
    parts = random_split(range(100, 110), lengths, generator=_generator())
    assert [len(part) for part in parts] == sizes
    assert sorted(value for part in parts for value in part) == list(range(100, 110))
    again = random_split(range(100, 110), lengths, generator=_generator())
    assert [list(part) for part in again] == [list(part) for part in parts]


def test_random_split_bad_lengths():
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset!"):
        random_split(range(10), [3, 3])


def test_stack_dataset_tuple_and_dict_forms():
    numbers, letters = list(range(3)), ["a", "b", "c"]
    assert StackDataset(numbers, letters)[1] == (1, "b")
    assert StackDataset(number=numbers, letter=letters)[2] == {"number": 2, "letter": "c"}
    assert len(StackDataset(numbers, letters)) == 3


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (([1], [2]), {"c": [3]}, "Supported either"),
        (([1], [2, 3]), {}, "Size mismatch between datasets"),
        ((), {}, "At least one dataset should be passed"),
    ],
)
def test_stack_dataset_errors(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        StackDataset(*args, **kwargs)


def test_a_random_sampler_of_an_empty_dataset_is_refused_at_construction():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but got num_samples=0"):
        RandomSampler([])


def test_weighted_sampler_keeps_its_weights_as_a_float64_tensor():
    from onnxnn.utils.data import WeightedRandomSampler

    sampler = WeightedRandomSampler([1, 3], 4)
    assert isinstance(sampler.weights, onnxnn.Tensor) and sampler.weights.dtype is onnxnn.float64
    sampler.weights = onnxnn.tensor([0.0, 1.0], dtype=onnxnn.float64)  # read when drawn, as PyTorch's
    assert list(sampler) == [1, 1, 1, 1]


@pytest.mark.parametrize(
    "num_samples, replacement, message",
    [
        # PyTorch checks num_samples first, then replacement, both as ValueError.
        (3, 1, "replacement should be a boolean value, but got replacement=1"),
        (3, None, "replacement should be a boolean value, but got replacement=None"),
        (0, None, "num_samples should be a positive integer value, but got num_samples=0"),
        (True, "yes", "num_samples should be a positive integer value, but got num_samples=True"),
    ],
)
def test_weighted_sampler_checks_its_arguments_in_pytorchs_order(num_samples, replacement, message):
    with pytest.raises(ValueError, match=message):
        WeightedRandomSampler([1.0, 2.0, 3.0], num_samples, replacement=replacement)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "weights, num_samples, replacement, message",
    [
        # With replacement the first bad weight decides, as PyTorch's multinomial reads them.
        ([1.0, NAN], 2, True, r"invalid multinomial distribution \(encountering probability entry < 0\)"),
        ([1.0, INF, NAN], 2, True, r"encountering probability entry = infinity or NaN"),
        ([-1.0, INF], 2, True, r"encountering probability entry < 0"),
        ([1.0, NAN], 2, False, "probability tensor contains either `inf`, `nan` or element < 0"),
        # A single draw with replacement gets the message of the draws without.
        ([1.0, INF], 1, True, "probability tensor contains either `inf`, `nan` or element < 0"),
        ([1.0, INF], 2, False, "probability tensor contains either `inf`, `nan` or element < 0"),
        ([1.0, -1.0], 2, False, "probability tensor contains either `inf`, `nan` or element < 0"),
        # Too many samples without replacement is checked before the weights.
        ([1.0, NAN], 3, False, r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"),
        ([0.0, 0.0], 2, True, r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
    ],
)
def test_weighted_sampler_bad_weights_get_pytorchs_errors(weights, num_samples, replacement, message):
    with pytest.raises(RuntimeError, match=message):
        list(WeightedRandomSampler(weights, num_samples, replacement=replacement))


@pytest.mark.parametrize("replacement", [True, False])
def test_weighted_sampler_draws_from_weights_whose_sum_overflows(replacement):
    assert sorted(WeightedRandomSampler([1e308, 1e308], 2, replacement=replacement)) in ([0, 0], [0, 1], [1, 1])


def test_a_random_sampler_with_replacement_of_an_empty_dataset_raises_when_drawn():
    sampler = RandomSampler([], replacement=True, num_samples=3)
    with pytest.raises(RuntimeError, match="cannot draw num_samples=3 indices with replacement from an empty"):
        list(sampler)
