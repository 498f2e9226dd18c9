"""Choosing the executor: auto (default), onnxruntime, kernels; the eager debugging mode."""
from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime import executor
from onnxnn.runtime.sessions import CompiledSession
from onnxnn.runtime.tensor import apply_op


def test_auto_is_the_default_and_the_context_restores_the_previous_choice():
    assert onnxnn.get_executor() == "auto"
    with onnxnn.set_executor("kernels"):
        assert onnxnn.get_executor() == "kernels"
        with onnxnn.set_executor("onnxruntime"):
            assert onnxnn.get_executor() == "onnxruntime"
        assert onnxnn.get_executor() == "kernels"
    assert onnxnn.get_executor() == "auto"


def test_an_unknown_executor_is_a_value_error():
    with pytest.raises(ValueError, match="unknown executor 'tvm'"):
        onnxnn.set_executor("tvm")
    assert onnxnn.get_executor() == "auto"


@pytest.mark.parametrize("name", ["onnxruntime", "kernels", "auto"])
def test_each_executor_computes_the_same_values(name):
    x = onnxnn.randn(3, 4)
    w = onnxnn.randn(4, 2)
    with onnxnn.set_executor(name):
        result = ((x @ w).relu() * 2 - 1).softmax(1).numpy()
    logits = np.maximum(x.numpy() @ w.numpy(), 0) * 2 - 1
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.testing.assert_allclose(result, expected, rtol=1e-5)


def test_auto_runs_graphs_of_small_values_on_kernels_and_larger_ones_on_onnxruntime():
    tiny = onnxnn.randn(4) + 1
    graph = executor.plan([tiny._value])
    assert not isinstance(executor._compile(graph, "auto"), CompiledSession)
    hidden = onnxnn.randn(16)
    for _ in range(20):  # many nodes, all on small values: still the kernels
        hidden = (hidden * 0.5).relu() + 1
    graph = executor.plan([hidden._value])
    assert not isinstance(executor._compile(graph, "auto"), CompiledSession)
    large = onnxnn.randn(128, 128)
    for _ in range(4):
        large = (large @ large).tanh()
    graph = executor.plan([large._value])
    assert isinstance(executor._compile(graph, "auto"), CompiledSession)


def test_auto_falls_back_to_kernels_for_ops_onnxruntime_lacks():
    # onnxruntime's CPU provider has no float64 LeakyRelu or Erf.
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=onnxnn.float64)
    y = (onnxnn.leaky_relu(x, 0.1) * 2).erf() + x
    expected = np.array([__import__("math").erf(v) for v in np.where(x.numpy() > 0, x.numpy(), 0.1 * x.numpy()) * 2])
    np.testing.assert_allclose(y.numpy(), expected + x.numpy(), rtol=1e-12)
    with onnxnn.set_executor("onnxruntime"), pytest.raises(RuntimeError, match="could not compile"):
        ((onnxnn.leaky_relu(x, 0.1) * 2).erf() + x).numpy()


def test_eager_mode_realizes_every_op_as_it_is_recorded():
    x = onnxnn.randn(3)
    with onnxnn.set_executor("kernels", eager=True):
        hidden = x * 2
        assert hidden._value.realized
        out = hidden.exp()
        assert out._value.realized
    lazy = x * 2
    assert not lazy._value.realized


def test_forcing_kernels_on_an_op_without_a_kernel_names_the_op_and_executor():
    x = onnxnn.randn(3)
    with onnxnn.set_executor("kernels"):
        y = apply_op("Hardmax", (x.reshape(1, 3),), {"axis": 1}) * 2
        try:
            y.numpy()
        except NotImplementedError as error:
            assert "Hardmax" in str(error) and "kernels" in str(error)
        else:  # the kernels cover Hardmax: then it must agree with onnxruntime
            with onnxnn.set_executor("onnxruntime"):
                expected = (apply_op("Hardmax", (x.reshape(1, 3),), {"axis": 1}) * 2).numpy()
            np.testing.assert_array_equal(y.numpy(), expected)
