"""The official ONNX node tests, and which of them onnxruntime passes on this machine.

The node test cases ship with the ``onnx`` package as Python code (``onnx.backend.test.case.node``);
this module builds them in memory, compares outputs the way onnx's backend test runner does
(shape, dtype, ``rtol=1e-3, atol=1e-7`` unless a case says otherwise), and runs them with
onnxruntime. The conformance test (``test_backend_node_tests.py``) measures onnxnn against the
set onnxruntime passes.

Running onnxruntime over every case takes about a minute, so the passing set is stored in
``onnxruntime_node_results.json`` next to this file. Regenerate it after upgrading onnx or
onnxruntime::

    PYTHONPATH=tests .venv/bin/python tests/import_/onnxruntime_node_results.py
"""

from __future__ import annotations

import functools
import json
import os
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx_node_test_cases import all_node_test_cases

RESULTS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "onnxruntime_node_results.json")


@functools.lru_cache(maxsize=1)
def node_test_cases() -> tuple:
    """Every node test case of the installed onnx: ``(name, model, data_sets, rtol, atol)`` tuples."""
    cases = all_node_test_cases()
    return tuple((case.name, case.model, case.data_sets, case.rtol, case.atol) for case in cases)


def _normalize(value):
    """Test data as the runner feeds it: TensorProto/SequenceProto/OptionalProto become numpy/lists."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return [_normalize(item) for item in numpy_helper.to_list(value)]
    if isinstance(value, onnx.OptionalProto):
        return _normalize(numpy_helper.to_optional(value))
    if isinstance(value, (list, tuple)):
        return [_normalize(item) for item in value]
    return value


def mismatch(expected, actual, rtol: float, atol: float) -> str | None:
    """Why ``actual`` differs from ``expected`` (None when they match), as onnx's runner compares.

    Sequences compare element by element; strings exactly; bfloat16 within two ULPs; everything
    else must have the expected shape and dtype and be ``allclose``.
    """
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)):
            return f"expected a sequence, got {type(actual).__name__}"
        if len(actual) != len(expected):
            return f"expected {len(expected)} elements, got {len(actual)}"
        for index, (want, got) in enumerate(zip(expected, actual)):
            problem = mismatch(want, got, rtol, atol)
            if problem:
                return f"element {index}: {problem}"
        return None
    if expected is None or actual is None:
        return None if expected is None and actual is None else f"expected {expected!r}, got {actual!r}"
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.shape != actual.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if expected.dtype == object:
        return None if np.array_equal(actual, expected) else "different strings"
    if expected.dtype != actual.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    tolerance = rtol
    if actual.dtype.name == "bfloat16":
        tolerance = max(rtol, 2**-6)
        actual, expected = actual.astype(np.float32), expected.astype(np.float32)
    try:
        np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=atol)
    except AssertionError as error:
        return " ".join(str(error).split())[:300]
    return None


def run_case(run, data_sets, rtol: float, atol: float) -> str | None:
    """Runs ``run(inputs) -> outputs`` on every data set; returns the first problem, or None."""
    for inputs, expected in data_sets:
        outputs = run([_normalize(item) for item in inputs])
        expected = [_normalize(item) for item in expected]
        if len(outputs) != len(expected):
            return f"{len(outputs)} outputs, expected {len(expected)}"
        for index, (want, got) in enumerate(zip(expected, outputs)):
            problem = mismatch(want, got, rtol, atol)
            if problem:
                return f"output {index}: {problem}"
    return None


def onnxnn_runner(model: onnx.ModelProto):
    """``run(inputs)`` of ``onnxnn.backend`` for one case, with every compiled graph cache emptied first.

    Each case is a fresh model, as onnx's runner prepares a fresh backend per case: compiled graphs
    are not shared between cases. (Shared, the kernels executor's structural cache mixes up plans
    whose output shapes depend on fed data, e.g. test_reshape_* whose target shape is a graph input.)
    """
    import onnxnn.backend
    from onnxnn.kernels import executor as kernels_executor
    from onnxnn.runtime import realization as executor

    executor.clear_cache()
    kernels_executor.clear_cache()
    return onnxnn.backend.prepare(model).run


def failing_cases(cases, selected: set, make_runner) -> dict[str, str]:
    """``{name: problem}`` for the cases in ``selected`` that ``make_runner(model)`` fails (or raises on)."""
    failures = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model, data_sets, rtol, atol in cases:
            if name not in selected:
                continue
            try:
                problem = run_case(make_runner(model), data_sets, rtol, atol)
            except Exception as error:
                problem = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
            if problem is not None:
                failures[name] = problem
    return failures


def _onnxruntime_runner(model: onnx.ModelProto):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [graph_input.name for graph_input in session.get_inputs()]
    return lambda inputs: session.run(None, dict(zip(names, inputs)))


def onnxruntime_passing(cases=None) -> list[str]:
    """Names of the node tests onnxruntime's CPU provider passes."""
    passing = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model, data_sets, rtol, atol in cases or node_test_cases():
            try:
                if run_case(_onnxruntime_runner(model), data_sets, rtol, atol) is None:
                    passing.append(name)
            except Exception:  # a model onnxruntime rejects counts as a failure
                continue
    return passing


def versions() -> dict:
    import onnxruntime

    return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}


def stored_onnxruntime_passing() -> list[str] | None:
    """The stored passing set, or None when it was made with other onnx/onnxruntime versions."""
    if not os.path.exists(RESULTS_PATH):
        return None
    with open(RESULTS_PATH) as handle:
        stored = json.load(handle)
    return stored["passing"] if stored.get("versions") == versions() else None


def main() -> None:
    cases = node_test_cases()
    passing = onnxruntime_passing(cases)
    with open(RESULTS_PATH, "w") as handle:
        json.dump({"versions": versions(), "total": len(cases), "passing": passing}, handle, indent=1)
        handle.write("\n")
    print(f"onnxruntime passes {len(passing)} of {len(cases)} node tests; written to {RESULTS_PATH}")


if __name__ == "__main__":
    main()
