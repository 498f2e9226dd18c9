"""The global switches PyTorch scripts set: deterministic algorithms and float32 matmul precision.

``use_deterministic_algorithms`` and its debug-mode spelling keep PyTorch's state and errors, and
the onnxruntime sessions built while it is on use onnxruntime's deterministic kernels.
``set_float32_matmul_precision`` keeps PyTorch's three names (an unknown one warns and changes
nothing) and decides whether CUDA sessions may use TF32.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.device import device
from onnxnn.ir.device_arrays import execution_provider
from onnxnn.runtime.sessions import create_session


@pytest.fixture(autouse=True)
def _switches_restored():
    yield
    onnxnn.use_deterministic_algorithms(False)
    onnxnn.set_float32_matmul_precision("highest")


@pytest.mark.parametrize(
    "mode, warn_only, debug_mode",
    [(False, False, 0), (True, True, 1), (True, False, 2), (False, True, 0)],
)
def test_deterministic_state_reads_back_in_both_spellings(mode, warn_only, debug_mode):
    onnxnn.use_deterministic_algorithms(mode, warn_only=warn_only)
    assert onnxnn.are_deterministic_algorithms_enabled() is mode
    assert onnxnn.is_deterministic_algorithms_warn_only_enabled() is warn_only
    assert onnxnn.get_deterministic_debug_mode() == debug_mode


@pytest.mark.parametrize(
    "name, number, enabled, warn_only",
    [("default", 0, False, False), ("warn", 1, True, True), ("error", 2, True, False)],
)
def test_debug_mode_names_and_numbers_set_the_same_state(name, number, enabled, warn_only):
    for spelling in (name, number):
        onnxnn.set_deterministic_debug_mode(spelling)
        assert onnxnn.get_deterministic_debug_mode() == number
        assert (
            onnxnn.are_deterministic_algorithms_enabled(),
            onnxnn.is_deterministic_algorithms_warn_only_enabled(),
        ) == (
            enabled,
            warn_only,
        )


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: onnxnn.use_deterministic_algorithms(1), TypeError, "argument 'mode' must be bool, not int"),
        (lambda: onnxnn.use_deterministic_algorithms(True, warn_only="yes"), TypeError, "'warn_only' must be bool"),
        (
            lambda: onnxnn.set_deterministic_debug_mode("loud"),
            RuntimeError,
            "expected one of `default`, `warn`, `error`",
        ),
        (lambda: onnxnn.set_deterministic_debug_mode(3), RuntimeError, "expected 0, 1, or 2, but got 3"),
        (lambda: onnxnn.set_deterministic_debug_mode(1.0), TypeError, "must be str or int"),
    ],
)
def test_bad_deterministic_arguments_raise_and_change_nothing(call, error, message):
    onnxnn.use_deterministic_algorithms(True, warn_only=True)
    with pytest.raises(error, match=message):
        call()
    assert onnxnn.get_deterministic_debug_mode() == 1


def _identity_model():
    import onnx.helper as helper
    from onnx import TensorProto

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("enabled", [False, True])
def test_sessions_built_while_deterministic_use_deterministic_compute(enabled):
    onnxnn.use_deterministic_algorithms(enabled)
    session = create_session(_identity_model(), threads=1)
    assert session.get_session_options().use_deterministic_compute is enabled


def test_turning_determinism_on_drops_the_cached_sessions():
    x = onnxnn.from_numpy(np.arange(6, dtype=np.float32))
    with onnxnn.set_executor("onnxruntime"):
        (x * 2).sum().item()
        assert onnxnn.runtime.realization.cache_info()["sessions"] > 0
        onnxnn.use_deterministic_algorithms(True)
        assert onnxnn.runtime.realization.cache_info()["sessions"] == 0
        assert (x * 2).sum().item() == 30.0


@pytest.mark.parametrize("precision, use_tf32", [("highest", 0), ("high", 1), ("medium", 1)])
def test_matmul_precision_decides_tf32_on_cuda_sessions(precision, use_tf32):
    onnxnn.set_float32_matmul_precision(precision)
    assert onnxnn.get_float32_matmul_precision() == precision
    cuda_provider, _cpu = execution_provider(device("cuda"))
    assert cuda_provider[1]["use_tf32"] == use_tf32


def test_an_unknown_matmul_precision_warns_and_changes_nothing():
    onnxnn.set_float32_matmul_precision("high")
    with pytest.warns(UserWarning, match="low is not one of 'highest', 'high', or 'medium'"):
        onnxnn.set_float32_matmul_precision("low")
    assert onnxnn.get_float32_matmul_precision() == "high"
