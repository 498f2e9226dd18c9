"""A pytest plugin that checks onnxruntime's graph optimizations against the graphs as onnxnn wrote them.

Every onnxruntime session onnxnn compiles gets a twin built from the same model with every graph
optimization off (``ORT_DISABLE_ALL``, one thread); each run of the session runs the twin on copies
of the same inputs and compares the outputs. onnxruntime's fusions and layout passes have given
wrong results or crashed on patterns that onnxnn's graphs contain (``runtime/session_optimizers.py``
lists the ones found and turns them off); this finds the next one across whatever the tests record.

Run it over any part of the suite (it roughly doubles the time of the sessions' runs)::

    PYTHONPATH=tools python -m pytest -p unoptimized_twins tests/nn tests/runtime
    ONNXNN_TWINS_EXECUTOR=onnxruntime PYTHONPATH=tools python -m pytest -p unoptimized_twins tests/nn

``ONNXNN_TWINS_EXECUTOR=onnxruntime`` makes onnxruntime the process's executor, so that graphs the
"auto" executor gives onnxnn's kernels go through sessions too (tests that choose an executor keep
their choice; a few that expect "auto" may then fail for that reason alone).

Mismatches are listed at the end of the run (with pytest-xdist too) and written, one JSON line
each, to the file named by ``ONNXNN_TWINS_LOG`` (default ``unoptimized_twins.jsonl``), with the
model and its inputs saved beside it to reproduce. Graphs with random ops are not compared (each
session draws its own numbers). A mismatch is a lead, not a verdict: a computation whose result
hangs on rounding (a normalization of a near-constant batch) differs between any two evaluation
orders; perturbing its inputs by an ulp tells that apart from an optimizer's bug.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

# Ops whose outputs differ between two sessions by design.
RANDOM_OPS = frozenset(
    {"Bernoulli", "Dropout", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
)
# Relative error allowed per floating itemsize: reassociated sums of a few thousand terms.
RELATIVE_TOLERANCE = {2: 2e-2, 4: 1e-3, 8: 1e-9}


def difference(got: np.ndarray, expected: np.ndarray) -> str | None:
    """What differs between an optimized session's output and its twin's, or None."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"shape/dtype {got.shape} {got.dtype} vs {expected.shape} {expected.dtype}"
    if got.size == 0 or got.dtype.kind not in "biufc":
        return None
    if got.dtype.kind in "biu":
        return None if np.array_equal(got, expected) else "integers differ"
    got, expected = (
        np.abs(got) if got.dtype.kind == "c" else got,
        np.abs(expected) if expected.dtype.kind == "c" else expected,
    )
    wide_got, wide_expected = got.astype(np.float64), expected.astype(np.float64)
    finite = np.isfinite(wide_got) & np.isfinite(wide_expected)
    if not np.array_equal(np.isnan(wide_got), np.isnan(wide_expected)):
        return "NaN positions differ"
    infinite = np.isinf(wide_got) | np.isinf(wide_expected)
    if not np.array_equal(wide_got[infinite], wide_expected[infinite]):
        return "infinities differ"
    if finite.any():
        error = np.max(np.abs(wide_got[finite] - wide_expected[finite]))
        scale = np.max(np.abs(wide_expected[finite]))
        tolerance = RELATIVE_TOLERANCE.get(got.dtype.itemsize, 1e-3)
        if error > tolerance * max(scale, 1.0):
            return f"max error {error:.3g} at scale {scale:.3g}"
    return None


def pytest_configure(config) -> None:
    import onnxruntime

    from onnxnn.runtime import sessions

    log = _log()
    if not hasattr(config, "workerinput"):  # the run's controller (or a run without xdist) starts it afresh
        log.unlink(missing_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
    compile_session = sessions.CompiledSession.__init__
    run_session = sessions.CompiledSession.__call__
    # By id(): CompiledSession has slots and no weak references. A new session with a reused id
    # replaces the entry when it is built, before it runs.
    twins: dict = {}

    def compiled(self, model, device, threads=None, profile_file_prefix=None):
        compile_session(self, model, device, threads, profile_file_prefix)
        twins[id(self)] = None
        if RANDOM_OPS.intersection(node.op_type for node in model.graph.node):
            return
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.intra_op_num_threads = 1
        options.log_severity_level = 3
        try:
            twin = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception:  # a model only the optimized session can run (a fusion's contrib op): not compared
            return
        twins[id(self)] = (twin, model)

    def run(self, inputs):
        results = run_session(self, inputs)
        entry = twins.get(id(self))
        if entry is None or self.bfloat16_io is not None:
            return results
        twin, model = entry
        arrays = [np.array(array) for array in inputs]
        expected = twin.run(self.output_names, dict(zip(self.input_names, [array.copy() for array in arrays])))
        for position, shape in self.output_views:
            expected[position] = expected[position].reshape(shape)
        for name, got, want in zip(self.output_names, results, expected):
            problem = difference(np.asarray(got), np.asarray(want))
            if problem is not None:
                _record(log, model, arrays, name, problem)
        return results

    sessions.CompiledSession.__init__ = compiled
    sessions.CompiledSession.__call__ = run
    if os.environ.get("ONNXNN_TWINS_EXECUTOR"):
        import onnxnn

        onnxnn.set_executor(os.environ["ONNXNN_TWINS_EXECUTOR"])


def _record(log: Path, model, inputs: list, output: str, problem: str) -> None:
    serialized = model.SerializeToString()
    stem = log.with_name(f"{log.stem}_{abs(hash(serialized)) % 10**10}")
    if not stem.with_suffix(".onnx").exists():
        stem.with_suffix(".onnx").write_bytes(serialized)
        np.savez(stem.with_suffix(".npz"), *inputs)
    entry = {
        "test": os.environ.get("PYTEST_CURRENT_TEST", "?"),
        "output": output,
        "problem": problem,
        "model": str(stem.with_suffix(".onnx")),
        "ops": sorted({node.op_type for node in model.graph.node}),
    }
    with log.open("a") as file:
        file.write(json.dumps(entry) + "\n")


def _log() -> Path:
    return Path(os.environ.get("ONNXNN_TWINS_LOG", "unoptimized_twins.jsonl"))


def pytest_terminal_summary(terminalreporter) -> None:
    # Read back from the log: with pytest-xdist the workers compare, and this runs in the controller.
    log = _log()
    mismatches = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    terminalreporter.section("unoptimized twins")
    if not mismatches:
        terminalreporter.write_line("every session's outputs matched its unoptimized twin's")
        return
    for entry in mismatches:
        terminalreporter.write_line(f"{entry['test']}: {entry['output']}: {entry['problem']} ({entry['model']})")
