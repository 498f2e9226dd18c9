"""The optimizer kernels' block-wise path (onnxnn/kernels/update_driver.py ``_apply``): a large tensor is
updated block by block into recycled buffers. The specification: for every optimizer and option,
a chain of updates run block by block (blocks that do not divide the tensors, a 0-d parameter
among them) equals the same chain run whole, bit for bit; nothing fed in is written."""

from __future__ import annotations

import pytest

from onnxnn.kernels import compiled_updates, update_driver

from .update_chains import CASES, update_chain


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_chain_of_block_wise_updates_equals_the_whole_updates_bitwise(case, monkeypatch):
    monkeypatch.setattr(compiled_updates, "ENABLED", False)  # the numpy formulas, whose blocks are tested
    monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)  # one tensor at a time, as large ones go
    whole = update_chain(case)
    monkeypatch.setattr(update_driver, "RECYCLE_MIN_ELEMENTS", 1)  # every tensor takes the block-wise path
    monkeypatch.setattr(update_driver, "BLOCK_ELEMENTS", 4)  # blocks that divide none of the shapes
    blocked = update_chain(case)
    for whole_step, blocked_step in zip(whole, blocked):
        assert len(whole_step) == len(blocked_step)
        for expected, result in zip(whole_step, blocked_step):
            assert result.shape == expected.shape and result.dtype == expected.dtype
            assert result.tobytes() == expected.tobytes()
