"""DistributedSampler's shares in one process (explicit ``num_replicas``/``rank``); under MPI in test_distributed.py."""

from __future__ import annotations

import pytest

pytest.importorskip("mpi4py")  # onnxnn.utils.data.distributed reads the default group through onnxnn.distributed

from onnxnn.utils.data.distributed import DistributedSampler  # noqa: E402 - needs mpi4py


def _shares(size: int, replicas: int, **kwargs) -> list[list[int]]:
    return [list(DistributedSampler(range(size), replicas, rank, **kwargs)) for rank in range(replicas)]


@pytest.mark.parametrize("shuffle", [False, True])
def test_shares_cover_the_dataset_once_when_it_divides(shuffle):
    shares = _shares(12, 3, shuffle=shuffle, seed=5)
    assert sorted(sum(shares, [])) == list(range(12))
    assert all(len(share) == 4 for share in shares)


def test_padding_repeats_the_first_indices_and_drop_last_drops_the_tail():
    padded = _shares(10, 3, shuffle=False)
    assert padded == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]  # 12 slots: indices 0 and 1 twice
    dropped = _shares(10, 3, shuffle=False, drop_last=True)
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert len(DistributedSampler(range(10), 3, 0, drop_last=True)) == 3


def test_the_shuffle_depends_on_seed_and_epoch_only():
    first = DistributedSampler(range(50), 2, 0, seed=1)
    again = DistributedSampler(range(50), 2, 0, seed=1)
    assert list(first) == list(again)
    first.set_epoch(1)
    assert list(first) != list(again)
    assert sorted(list(first) + _epoch_share(1)) == list(range(50))  # both ranks agree on epoch 1's permutation


def _epoch_share(epoch: int) -> list[int]:
    other = DistributedSampler(range(50), 2, 1, seed=1)
    other.set_epoch(epoch)
    return list(other)


def test_bad_rank_is_a_value_error():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval \[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=3)


@pytest.mark.parametrize("arguments", [{}, {"num_replicas": 2}, {"rank": 0}])
def test_defaults_need_the_default_process_group(arguments):
    with pytest.raises(ValueError, match="Default process group has not been initialized, please make sure to call"):
        DistributedSampler(range(4), **arguments)
