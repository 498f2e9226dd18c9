"""examples/distributed/train_ddp.py as its README launch: ``mpiexec -n 2 python examples/distributed/train_ddp.py``."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("mpi4py")  # the ``distributed`` extra, part of ``test``

from tests.distributed.mpi_jobs import ROOT, launch  # noqa: E402


def test_train_ddp_learns_and_checkpoints_on_two_ranks():
    result = launch(ROOT / "examples" / "distributed" / "train_ddp.py", timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    losses = [float(value) for value in re.findall(r"mean loss over 2 rank\(s\) ([\d.]+)", result.stdout)]
    assert len(losses) == 5  # printed by rank 0 only
    assert losses[-1] < 0.5 * losses[0]
    assert "saved and reloaded" in result.stdout
