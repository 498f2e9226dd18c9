"""Choosing the executor: auto (default), onnxruntime, kernels; the eager debugging mode."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.plan import plan
from onnxnn.runtime.fastpath import plan_cache
from onnxnn.runtime.tensor import apply_op

from tolerances import TRANSCENDENTAL_ULPS, assert_within, matmul_bound, rtol_for, unit_roundoff


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
    x64, w64 = x.numpy().astype(np.float64), w.numpy().astype(np.float64)
    logits = np.maximum(x64 @ w64, 0) * 2 - 1
    expected = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    # A logit's error (the 4-term matmul, doubled, and the subtraction's rounding) changes a
    # softmax probability p by at most p * 2 * max |error| of its row; the exps, the 2-term sum
    # and the division add their own relative error on top.
    logit_error = matmul_bound(x64, w64) + unit_roundoff(np.float32) * (2 * np.abs(x64 @ w64) + 1)
    bound = expected * (2 * logit_error.max(1, keepdims=True) + rtol_for(2 * TRANSCENDENTAL_ULPS + 2 + 1) / 2)
    assert_within(result, expected, bound)


def _small_plan():
    hidden = onnxnn.randn(16)
    for _ in range(20):
        hidden = (hidden * 0.5).relu() + 1
    return hidden


def _long_small_plan(nodes: int):
    hidden = onnxnn.randn(4)
    for _ in range(nodes // 2):
        hidden = (hidden * 0.5).relu()
    return hidden


def test_auto_runs_plans_of_small_values_on_kernels_and_larger_ones_on_onnxruntime():
    for small in [onnxnn.randn(4) + 1, _small_plan()]:
        assert plan_cache.choose(plan([small._value])) == "kernels"
    large = onnxnn.randn(128, 128)
    for _ in range(4):
        large = (large @ large).tanh()
    assert plan_cache.choose(plan([large._value])) == "onnxruntime"
    assert plan_cache.choose(plan([(onnxnn.randn(8).half() * 2)._value])) == "onnxruntime"  # float16


def test_the_cost_model_sends_long_plans_of_small_values_to_one_session_run():
    # Per node the kernels cost more than a session; a session run costs a fixed amount more.
    crossover = plan_cache.SESSION_RUN_COST / (plan_cache.KERNEL_NODE_COST - plan_cache.SESSION_NODE_COST)
    assert plan_cache.choose(plan([_long_small_plan(int(crossover) // 2)._value])) == "kernels"
    assert plan_cache.choose(plan([_long_small_plan(int(crossover) * 2)._value])) == "onnxruntime"


def test_the_choice_depends_on_the_structure_only():
    # No timing: the same structure gets the same executor on every run, whatever the machine's load.
    choices = {plan_cache.choose(plan([_small_plan()._value])) for _ in range(5)}
    assert choices == {"kernels"}
    x = onnxnn.randn(4, 5)
    first = x.sigmoid().numpy()
    for _ in range(10):
        np.testing.assert_array_equal(x.sigmoid().numpy(), first)


def _large_plan(dtype=onnxnn.float32, convolution: bool = False) -> onnxnn.Tensor:
    """A structure "auto" gives onnxruntime (values over AUTO_KERNELS_MAX_ELEMENTS elements)."""
    if convolution:
        return onnxnn.nn.functional.conv2d(onnxnn.randn(1, 8, 32, 32), onnxnn.randn(8, 8, 3, 3)).relu()
    x = onnxnn.randn(96, 96).to(dtype)
    return ((x @ x).tanh() * 2).sum(1)


def _sessions_compiled() -> int:
    return onnxnn.runtime.realization.cache_info()["misses"]


def test_a_structure_first_runs_on_the_kernels_and_compiles_its_session_when_it_comes_back():
    # A one-off call never pays for compiling a session (FIRST_RUNS_ON_KERNELS runs: 1).
    onnxnn.clear_caches()
    x = onnxnn.randn(96, 96)
    x64 = x.numpy().astype(np.float64)
    expected = (np.tanh(x64 @ x64) * 2).sum(1)
    compiled = _sessions_compiled()
    first = ((x @ x).tanh() * 2).sum(1).numpy()
    assert _sessions_compiled() == compiled, "the first run compiled no session"
    second = ((x @ x).tanh() * 2).sum(1).numpy()
    assert _sessions_compiled() == compiled + 1, "the structure came back: its session is compiled"
    third = ((x @ x).tanh() * 2).sum(1).numpy()
    assert _sessions_compiled() == compiled + 1
    np.testing.assert_array_equal(third, second)
    # Each executor within the arithmetic's bound: the 96-term products, tanh, doubling, the 96-term sum.
    product_error = matmul_bound(x64, x64)
    bound = 2 * (96 * product_error.max(1) + rtol_for(TRANSCENDENTAL_ULPS + 96 + 2) * 96)
    for result in (first, second):
        assert_within(result, expected, bound)


@pytest.mark.parametrize(
    "build, reason",
    [
        (lambda: _large_plan(onnxnn.float16), "float16 rounds per op: one executor only"),
        (lambda: _large_plan(convolution=True), "convolutions cost the kernels far more"),
    ],
    ids=["float16", "convolution"],
)
def test_some_structures_compile_their_session_on_the_first_run(build, reason):
    onnxnn.clear_caches()
    compiled = _sessions_compiled()
    build().numpy()
    assert _sessions_compiled() == compiled + 1, reason


def test_first_runs_on_the_kernels_can_be_turned_off_and_happen_only_under_auto(monkeypatch):
    onnxnn.clear_caches()
    compiled = _sessions_compiled()
    with onnxnn.set_executor("onnxruntime"):
        _large_plan().numpy()
    assert _sessions_compiled() == compiled + 1
    monkeypatch.setattr(plan_cache, "FIRST_RUNS_ON_KERNELS", 0)
    onnxnn.clear_caches()
    compiled = _sessions_compiled()
    _large_plan().numpy()
    assert _sessions_compiled() == compiled + 1


def test_a_structure_too_large_for_the_kernels_compiles_at_once(monkeypatch):
    monkeypatch.setattr(plan_cache, "FIRST_RUNS_MAX_ELEMENTS", 96 * 96)
    onnxnn.clear_caches()
    compiled = _sessions_compiled()
    _large_plan().numpy()
    assert _sessions_compiled() == compiled + 1


def test_auto_falls_back_to_kernels_for_ops_onnxruntime_lacks():
    # onnxruntime's CPU provider has no float64 LeakyRelu or Erf. (Its alpha attribute is float32, as in ONNX.)
    x = onnxnn.tensor([0.5, -1.0, 2.0], dtype=onnxnn.float64)
    y = (onnxnn.leaky_relu(x, 0.1) * 2).erf() + x
    alpha = float(np.float32(0.1))
    expected = np.array([__import__("math").erf(v) for v in np.where(x.numpy() > 0, x.numpy(), alpha * x.numpy()) * 2])
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


def test_executors_read_float_attributes_as_32_bit_like_onnx():
    # ONNX FLOAT attributes are float32: onnxruntime computes with float32(0.1) even on float64
    # data, and so must the kernels, or "auto" moving a plan between them would shift results.
    # (Ops whose sessions write another form, as a float64 BatchNormalization adding PyTorch's
    # epsilon, keep the Python float on both: tests/runtime/test_batch_norm_epsilon.py.)
    generator = np.random.default_rng(0)
    x, scale, bias = generator.standard_normal((6, 3)), generator.standard_normal(3), generator.standard_normal(3)
    results = {}
    for name in ["onnxruntime", "kernels"]:
        with onnxnn.set_executor(name):
            inputs = tuple(onnxnn.tensor(array) for array in (x, scale, bias))
            results[name] = apply_op("LayerNormalization", inputs, {"axis": -1, "epsilon": 0.1})[0].numpy()
    np.testing.assert_allclose(results["kernels"], results["onnxruntime"], rtol=1e-14, atol=1e-14)
    centered = x - x.mean(axis=-1, keepdims=True)
    variance = (centered**2).mean(axis=-1, keepdims=True)
    expected = centered / np.sqrt(variance + float(np.float32(0.1))) * scale + bias
    np.testing.assert_allclose(results["kernels"], expected, rtol=1e-14, atol=1e-14)
