"""Conformance on onnxnn's own kernels: the official ONNX node tests through ``onnxnn.backend``
with ``set_executor("kernels")``.

The same cases and comparison as tests/import_/test_backend_node_tests.py (which runs the default
"auto" executor), but every recorded graph runs on the kernels executor; only nodes whose output
shape depends on data (NonZero, Unique, ...) are still computed at record time by onnxruntime.
The bar: at least 90% of the node tests onnxruntime passes, and the failures exactly
``KNOWN_FAILURES``.
"""

from __future__ import annotations


import pytest

import onnxnn

from import_.onnxruntime_node_results import (
    failing_cases,
    node_test_cases,
    onnxnn_runner,
    onnxruntime_passing,
    stored_onnxruntime_passing,
)
from import_.test_backend_node_tests import KNOWN_FAILURES as KNOWN_ON_EVERY_EXECUTOR

REQUIRED_SHARE = 0.90

# Failures on the kernels executor beyond those of every executor (strings, one conversion): ops
# onnxnn/kernels has no kernel for yet, and one float16 rounding difference.
KNOWN_KERNEL_FAILURES: dict[str, str] = {
    **dict.fromkeys(
        [
            "test_matmulinteger",
        ],
        "no MatMulInteger kernel in onnxnn/kernels",
    ),
    **dict.fromkeys(
        [
            "test_qlinearmatmul_2D_int8_float16",
            "test_qlinearmatmul_2D_int8_float32",
            "test_qlinearmatmul_2D_uint8_float16",
            "test_qlinearmatmul_2D_uint8_float32",
            "test_qlinearmatmul_3D_int8_float16",
            "test_qlinearmatmul_3D_int8_float32",
            "test_qlinearmatmul_3D_uint8_float16",
            "test_qlinearmatmul_3D_uint8_float32",
        ],
        "no QLinearMatMul kernel in onnxnn/kernels",
    ),
    **dict.fromkeys(
        [
            "test_tfidfvectorizer_tf_batch_onlybigrams_skip0",
            "test_tfidfvectorizer_tf_batch_onlybigrams_skip5",
            "test_tfidfvectorizer_tf_batch_uniandbigrams_skip5",
            "test_tfidfvectorizer_tf_only_bigrams_skip0",
            "test_tfidfvectorizer_tf_onlybigrams_levelempty",
            "test_tfidfvectorizer_tf_onlybigrams_skip5",
            "test_tfidfvectorizer_tf_uniandbigrams_skip5",
        ],
        "no TfIdfVectorizer kernel in onnxnn/kernels",
    ),
    "test_attention_4d_causal_fp16_expanded": "float16: an exp of the expanded causal attention rounds differently "
    "from onnxruntime in 2 of 192 elements (rtol 1e-3)",
}


@pytest.fixture(scope="module")
def conformance() -> dict:
    cases = node_test_cases()
    passing = stored_onnxruntime_passing() or onnxruntime_passing(cases)
    with onnxnn.set_executor("kernels"):
        failures = failing_cases(cases, set(passing), onnxnn_runner)
    passed = len(passing) - len(failures)
    print(
        f"\nONNX node tests on the kernels executor: {passed} of the {len(passing)} that onnxruntime passes "
        f"({100.0 * passed / max(len(passing), 1):.1f}%)"
    )
    return {"onnxruntime": passing, "failures": failures}


def test_kernels_pass_most_node_tests_onnxruntime_passes(conformance):
    passing = conformance["onnxruntime"]
    passed = len(passing) - len(conformance["failures"])
    assert passed >= REQUIRED_SHARE * len(passing), f"{passed} of {len(passing)} is below {REQUIRED_SHARE:.0%}"


def test_kernel_failures_are_exactly_the_known_ones(conformance):
    known = {**KNOWN_ON_EVERY_EXECUTOR, **KNOWN_KERNEL_FAILURES}
    failures = conformance["failures"]
    new = {name: problem for name, problem in sorted(failures.items()) if name not in known}
    fixed = sorted(set(known) & set(conformance["onnxruntime"]) - set(failures))
    assert not new, "node tests failing on the kernels that are not known:\n" + "\n".join(
        f"  {name}: {problem}" for name, problem in new.items()
    )
    assert not fixed, f"known failures that pass now on the kernels; remove them: {fixed}"
