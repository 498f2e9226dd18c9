"""Conformance: the official ONNX node tests through ``onnxnn.backend``, against onnxruntime.

Every node test case that ships with onnx (``onnx.backend.test.case.node``) is run through
``onnxnn.backend.prepare(model).run(inputs)`` and compared as onnx's backend test runner compares
(shape, dtype, ``rtol=1e-3, atol=1e-7``). The bar is the set onnxruntime itself passes on this
machine (stored by ``onnxruntime_node_results.py``): onnxnn must pass at least 95% of it, and the
tests it fails must be exactly ``KNOWN_FAILURES``, each with its reason.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx_node_test_cases import all_node_test_cases

import onnxnn
import onnxnn.backend

from .onnxruntime_node_results import (
    failing_cases,
    node_test_cases,
    onnxnn_runner,
    onnxruntime_passing,
    stored_onnxruntime_passing,
)

REQUIRED_SHARE = 0.95

_STRING = "onnxnn tensors cannot hold strings"


def _by_dtype(reason: str, *names: str) -> dict[str, str]:
    return {name: reason for name in names}


# Node tests onnxruntime passes and onnxnn fails, with the reason: strings, which onnxnn's Tensor
# cannot hold (as PyTorch's cannot), one opset conversion onnx's converter gets wrong, and one float16
# case where rounding every op to float16 lands 2 ulps from the expected output.
KNOWN_FAILURES: dict[str, str] = {
    **_by_dtype(
        _STRING,
        "test_ai_onnx_ml_label_encoder_string_int",
        "test_ai_onnx_ml_label_encoder_string_int_no_default",
        "test_ai_onnx_ml_label_encoder_tensor_mapping",
        "test_ai_onnx_ml_label_encoder_tensor_value_only_mapping",
        "test_equal_string",
        "test_equal_string_broadcast",
        "test_regex_full_match_basic",
        "test_regex_full_match_email_domain",
        "test_regex_full_match_empty",
        "test_string_concat",
        "test_string_concat_broadcasting",
        "test_string_concat_empty_string",
        "test_string_concat_utf8",
        "test_string_concat_zero_dimensional",
        "test_string_split_basic",
        "test_string_split_consecutive_delimiters",
        "test_string_split_empty_string_delimiter",
        "test_string_split_empty_tensor",
        "test_string_split_maxsplit",
        "test_string_split_no_delimiter",
        "test_strnormalizer_export_monday_casesensintive_nochangecase",
        "test_strnormalizer_nostopwords_nochangecase",
    ),
    "test_attention_4d_causal_fp16_expanded": "float16: every op of the expanded graph rounds its result to "
    "float16 (as PyTorch's and the kernels executor's do); 2 of 192 "
    "elements land 2 ulps from the expected output, beyond rtol 1e-3",
    "test_scan_sum": "opset 8 Scan: onnx.version_converter's Scan 8->9 adapter drops the batch axis of the "
    "graph inputs, so from_onnx refuses the conversion",
}


@pytest.fixture(scope="module")
def conformance() -> dict:
    """``{"onnxruntime": [names], "failures": {name: problem}}`` over the node tests onnxruntime passes."""
    cases = node_test_cases()
    passing = stored_onnxruntime_passing()
    if passing is None:
        print("\nonnxruntime_node_results.json is for other onnx/onnxruntime versions: running onnxruntime now")
        passing = onnxruntime_passing(cases)
    failures = failing_cases(cases, set(passing), onnxnn_runner)
    total = len(cases)
    passed = len(passing) - len(failures)
    print(
        f"\nONNX node tests: onnxruntime passes {len(passing)} of {total}; onnxnn passes {passed} of those "
        f"{len(passing)} ({100.0 * passed / max(len(passing), 1):.1f}%)"
    )
    return {"onnxruntime": passing, "failures": failures}


def test_onnxnn_passes_most_node_tests_onnxruntime_passes(conformance):
    passing = conformance["onnxruntime"]
    passed = len(passing) - len(conformance["failures"])
    assert len(passing) > 1000, "the node test collection looks incomplete"
    assert passed >= REQUIRED_SHARE * len(passing), (
        f"onnxnn passes {passed} of the {len(passing)} node tests onnxruntime passes, below {REQUIRED_SHARE:.0%}"
    )


def _fed_strings(problem: str) -> bool:
    """Whether a node test failed because its inputs are strings, which onnxnn tensors cannot hold (onnx
    1.23.1 ships four more such StringNormalizer tests than 1.23.2, which KNOWN_FAILURES is measured with)."""
    return "numpy array of dtype object, which onnxnn tensors cannot hold" in problem


def test_failing_node_tests_are_exactly_the_known_failures(conformance):
    failures = conformance["failures"]
    new = {
        name: problem
        for name, problem in sorted(failures.items())
        if name not in KNOWN_FAILURES and not _fed_strings(problem)
    }
    fixed = sorted(set(KNOWN_FAILURES) & set(conformance["onnxruntime"]) - set(failures))
    assert not new, "node tests failing that are not in KNOWN_FAILURES:\n" + "\n".join(
        f"  {name}: {problem}" for name, problem in new.items()
    )
    assert not fixed, f"KNOWN_FAILURES lists tests that pass now; remove them: {fixed}"


def test_known_failures_are_tests_onnxruntime_passes(conformance):
    # An entry for a test onnxruntime fails (or that no longer exists) is stale.
    stale = sorted(set(KNOWN_FAILURES) - set(conformance["onnxruntime"]))
    assert not stale, f"KNOWN_FAILURES entries that onnxruntime does not pass: {stale}"


# ----------------------------------------------------------------------------- the backend API


def _add_model():
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Neg", ["a"], ["neg"])],
        "add",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in "ab"],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in ("sum", "neg")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


A, B = np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)


@pytest.mark.parametrize("inputs", [[A, B], (A, B), {"a": A, "b": B}], ids=["list", "tuple", "dict"])
def test_prepare_runs_a_model_repeatedly(inputs):
    rep = onnxnn.backend.prepare(_add_model())
    for _ in range(2):
        outputs = rep.run(inputs)
        assert isinstance(outputs, tuple) and len(outputs) == 2
        np.testing.assert_array_equal(outputs[0], A + B)
        np.testing.assert_array_equal(outputs["neg"], -A)
        assert isinstance(outputs[0], np.ndarray) and outputs[0].dtype == np.float32


def test_run_model_and_run_node():
    np.testing.assert_array_equal(onnxnn.backend.run_model(_add_model(), [A, B])[0], A + B)
    from onnx import helper

    node = helper.make_node("Mul", ["x", "y"], ["z"])
    np.testing.assert_array_equal(onnxnn.backend.run_node(node, [A, B])[0], A * B)
    softmax = helper.make_node("Softmax", ["x"], ["y"], axis=0)
    expected = np.exp(A) / np.exp(A).sum()
    np.testing.assert_allclose(onnxnn.backend.run_node(softmax, [A])[0], expected, rtol=1e-6)


def test_supports_device():
    assert onnxnn.backend.supports_device("CPU")
    assert onnxnn.backend.supports_device("CUDA") == onnxnn.cuda.is_available()
    if not onnxnn.cuda.is_available():
        with pytest.raises(RuntimeError, match="device 'CUDA' is not available"):
            onnxnn.backend.prepare(_add_model(), "CUDA")


def test_onnx_backend_test_machinery_runs_on_onnxnn(monkeypatch):
    import unittest

    import onnx.backend.test
    import onnx.backend.test.loader

    # The runner generates every node case again (15-20 s); hand it the ones already generated.
    monkeypatch.setattr(onnx.backend.test.loader, "load_node_model_tests", lambda: list(all_node_test_cases()))
    backend_test = onnx.backend.test.BackendTest(onnxnn.backend, __name__)
    backend_test.include(r"^test_(single_relu_model|sign_model|expand_shape_model1|operator_add_broadcast)_cpu$")
    suite = unittest.TestSuite(
        unittest.defaultTestLoader.loadTestsFromTestCase(case) for case in backend_test.test_cases.values()
    )
    result = unittest.TextTestRunner(stream=open(os.devnull, "w")).run(suite)
    assert result.testsRun - len(result.skipped) == 4
    assert result.wasSuccessful(), result.failures + result.errors
