"""Seeded mutation fuzzing of ``from_onnx``: every malformed model ends in a documented outcome.

Cases come from ``onnx_fuzz_cases.py``: four valid seed models (an MLP, a CNN with
Conv/BatchNormalization/MaxPool/Transpose/Concat, a model with an ``If`` whose branches hold a
Constant and their own initializers, and the MLP with its weights and a sparse initializer in
external files) mutated structurally (attribute values and types, perm/axes out of range, dims
up to 2**62, dtypes, integer values, op types and domains, external-data entries, opsets) or
byte by byte (flips, truncation, duplication, insertion, invalid UTF-8 in names).

Each case runs in a worker process: ``from_onnx(path)``, and when it loads, one forward in eval
mode on small inputs (symbolic dims set to 2) with its outputs realized. The documented
outcomes are:

- ``from_onnx``: a GraphModule, or :class:`onnxnn.ModelLoadError`;
- forward: outputs, :class:`onnxnn.ModelLoadError` (a node invalid for the given inputs, naming
  it), or ``RuntimeError`` (a computation that fails: onnxruntime's errors, a tensor larger than
  the process may allocate; ``NotImplementedError`` is one).

Anything else fails the test: another exception type, a worker killed by a signal, a case
running longer than ``CASE_SECONDS`` (a hang), or a ``MemoryError`` under the worker's address
space limit of ``MEMORY_LIMIT`` bytes (``RLIMIT_AS``): the seeds are a few KB, so no case has a
reason to allocate anywhere near it, and a model declaring dims of 2**40 must be refused before
it allocates.

The suite runs for about 15 seconds; set ``ONNXNN_FUZZ_SECONDS`` for a longer run (and
``ONNXNN_FUZZ_SEED`` for another sequence of cases). The cases are the same on every machine; a
slower machine runs fewer of them.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

CASE_SECONDS = 60.0
MEMORY_LIMIT = 3 * 2**30
FUZZ_SECONDS = float(os.environ.get("ONNXNN_FUZZ_SECONDS", "15"))
FUZZ_SEED = int(os.environ.get("ONNXNN_FUZZ_SEED", "0"))


# ----------------------------------------------------------------------------- the worker process


def _feeds(module) -> list | None:
    """Small inputs for the module's graph inputs, or None when onnxnn cannot hold one."""
    from onnxnn.ir import dtypes

    feeds = []
    for name in module.input_names:
        dims, elem_type = module._input_types[name]
        if dims is None or elem_type is None:
            return None
        try:
            dtype = dtypes.as_dtype(elem_type)
        except TypeError:
            return None
        if any(isinstance(size, int) and size > 64 for size in dims):
            return None  # an input too large to feed: the load is what is tested
        shape = tuple(size if isinstance(size, int) else 2 for size in dims)
        feeds.append((np.arange(int(np.prod(shape))) % 5 - 2).astype(dtype.numpy_dtype).reshape(shape))
    return feeds


def _realize(outputs) -> None:
    from onnxnn.runtime.tensor import Tensor

    for value in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
        if isinstance(value, Tensor):
            value.numpy()
        elif isinstance(value, list):
            _realize(value)


def run_case(path: str) -> str:
    """The outcome of one case: 'loaded', 'ran', 'refused: ...', or 'LEAK ...' for a finding."""
    import onnxnn
    from onnxnn import ModelLoadError
    from onnxnn.import_ import from_onnx

    try:
        module = from_onnx(path)
    except ModelLoadError:
        return "refused at load"
    except MemoryError as error:
        return f"LEAK load MemoryError: {error}"
    except Exception as error:
        return f"LEAK load {type(error).__name__}: {error}"
    feeds = _feeds(module)
    if feeds is None:
        return "loaded"
    try:
        with onnxnn.no_grad():
            _realize(module.eval()(*feeds))
    except ModelLoadError:
        return "refused at forward (ModelLoadError)"
    except MemoryError as error:
        return f"LEAK forward MemoryError: {error}"
    except RuntimeError:
        return "refused at forward (RuntimeError)"
    except Exception as error:
        return f"LEAK forward {type(error).__name__}: {error}"
    return "ran"


def worker() -> None:
    """Reads case paths from stdin, one a line; writes one JSON outcome a line."""
    import warnings

    warnings.simplefilter("ignore")
    for line in sys.stdin:
        outcome = run_case(line.strip())
        sys.stdout.write(json.dumps(" ".join(outcome.split())[:400]) + "\n")
        sys.stdout.flush()


# ----------------------------------------------------------------------------- the test


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


class Worker:
    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        environment = dict(
            os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1"
        )
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=environment,
            preexec_fn=_limit_memory,
            text=True,
        )

    def run(self, path: str) -> str:
        self.process.stdin.write(path + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], CASE_SECONDS)
        if not ready:
            self.close()
            return f"LEAK hang: no outcome within {CASE_SECONDS} s"
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            return f"LEAK crash: the worker died with exit status {code}"
        return json.loads(line)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def fuzz(seconds: float, seed: int, log=None) -> tuple[int, dict, list]:
    """Runs cases for ``seconds``; returns (count, outcomes counted by kind, findings)."""
    if __package__:
        from .onnx_fuzz_cases import make_case
    else:  # run as a script: its folder is on sys.path
        from onnx_fuzz_cases import make_case
    rng = np.random.default_rng(seed)
    counts: dict = {}
    findings = []
    worker_process = Worker()
    deadline = time.monotonic() + seconds
    count = 0
    try:
        with tempfile.TemporaryDirectory() as scratch:
            while time.monotonic() < deadline:
                folder = tempfile.mkdtemp(dir=scratch)
                what = make_case(rng, folder)
                outcome = worker_process.run(os.path.join(folder, "model.onnx"))
                shutil.rmtree(folder)  # a finding is found again from the seed and its case number
                count += 1
                kind = outcome if not outcome.startswith("LEAK") else "finding"
                counts[kind] = counts.get(kind, 0) + 1
                if log and count % 2000 == 0:
                    print(json.dumps({"cases": count, "outcomes": counts}), file=log, flush=True)
                if outcome.startswith("LEAK"):
                    findings.append(f"case {count - 1} ({what}): {outcome}")
                    if log:
                        print(findings[-1], file=log, flush=True)
                    if worker_process.process.poll() is not None:
                        worker_process = Worker()
    finally:
        worker_process.close()
    return count, counts, findings


@pytest.mark.skipif(sys.platform == "win32", reason="the worker's memory bound uses RLIMIT_AS")
def test_every_mutated_model_loads_or_is_refused_with_a_documented_error():
    count, counts, findings = fuzz(FUZZ_SECONDS, FUZZ_SEED)
    print(f"\n{count} cases: {counts}")
    assert not findings, f"{len(findings)} of {count} cases ended undocumented:\n" + "\n".join(findings[:20])
    # The fuzzer must reach both outcomes, or it tests nothing.
    assert count >= 10 and counts.get("refused at load", 0) > 0 and counts.get("ran", 0) + counts.get("loaded", 0) > 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:  # python tests/import_/test_onnx_fuzz.py SECONDS [SEED]: a long run that prints findings
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.insert(0, root)
        total, kinds, found = fuzz(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0, log=sys.stdout)
        print(json.dumps({"cases": total, "outcomes": kinds, "findings": len(found)}))
