"""The ONNX node test cases, generated once per machine and shared by every test process.

The cases ship with the ``onnx`` package as generator code (``onnx.backend.test.case.node``), not
as files: generating them runs onnx's reference implementation and takes 15-20 s. Several test
modules read them and pytest-xdist runs each worker in its own process, so the first process to
ask generates them under a file lock and stores them (about 10 MB) in ``.pytest_cache``; the
others load that file in a tenth of a second. The file is keyed by the onnx and numpy versions
that produced it, the only inputs of the generators.
"""

from __future__ import annotations

import fcntl
import functools
import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import onnx

CACHE_DIRECTORY = Path(__file__).resolve().parents[1] / ".pytest_cache" / "onnxnn"

__all__ = ["all_node_test_cases"]


@functools.lru_cache(maxsize=1)
def all_node_test_cases() -> tuple:
    """Every node test case of the installed onnx (``onnx.backend.test.case.test_case.TestCase``)."""
    CACHE_DIRECTORY.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIRECTORY / f"node-test-cases-onnx{onnx.__version__}-numpy{np.__version__}.pickle"
    with open(CACHE_DIRECTORY / "node-test-cases.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one process generates; the others wait and load
        if path.exists():
            with open(path, "rb") as file:
                return pickle.load(file)  # written below by this same function, never fetched
        cases = tuple(_generate())
        partial = path.with_suffix(f".{os.getpid()}.partial")
        with open(partial, "wb") as file:
            pickle.dump(cases, file, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, path)
        return cases


def _generate() -> list:
    from onnx.backend.test.case.node import collect_testcases  # imports every generator module

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators overflow casts on purpose
        return collect_testcases()
