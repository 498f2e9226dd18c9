"""onnxnn's BatchNormalizationTraining op: what ``F.batch_norm(training=True)`` records.

The node gives the normalized input and the batch's mean and biased variance; its decomposition
(onnxruntime) and kernel (onnxnn's kernels) compute them, its gradient rule differentiates all
three outputs. Expectations are numpy formulas and float64 central differences.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn.runtime.tensor import apply_op

EXECUTORS = ["onnxruntime", "kernels"]
SHAPES = [(6, 3), (4, 3, 5), (2, 3, 4, 4), (2, 3, 2, 3, 2)]


def _numpy_batch_norm(x, weight, bias, epsilon):
    axes = (0,) + tuple(range(2, x.ndim))
    mean, variance = x.mean(axis=axes), x.var(axis=axes)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    normalized = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + epsilon)
    return normalized * weight.reshape(shape) + bias.reshape(shape), mean, variance


def _recorded(x, weight, bias, epsilon=1e-5):
    return F.batch_norm(x, None, None, weight, bias, training=True, eps=epsilon)


def _node_outputs(x, weight, bias, epsilon=1e-5):
    """The op's three outputs: the normalized input, the batch mean and the biased batch variance."""
    return apply_op("BatchNormalizationTraining", (x, weight, bias), {"epsilon": epsilon}, domain="ai.onnxnn")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape", SHAPES)
def test_output_and_batch_statistics_are_the_formula(shape, executor):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 3 + 2
    weight, bias = rng.standard_normal(3), rng.standard_normal(3)
    with onnxnn.set_executor(executor):
        output, mean, variance = _node_outputs(onnxnn.tensor(x), onnxnn.tensor(weight), onnxnn.tensor(bias), 1e-3)
        expected, expected_mean, expected_variance = _numpy_batch_norm(x, weight, bias, 1e-3)
        # float64 over at most 48 values per channel: a few ulps; epsilon is PyTorch's own (not float32's).
        np.testing.assert_allclose(output.numpy(), expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mean.numpy(), expected_mean, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(variance.numpy(), expected_variance, rtol=1e-12)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
def test_a_batchnorm_layer_records_one_node(dtype):
    layer = onnxnn.nn.BatchNorm2d(4).train().to(dtype)
    output = layer(onnxnn.randn(2, 4, 3, 3, dtype=dtype))
    assert (output._value.node.domain, output._value.node.op_type) == ("ai.onnxnn", "BatchNormalizationTraining")
    assert output.grad_fn.name() == "NativeBatchNormBackward0"


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape", SHAPES)
def test_gradients_match_finite_differences(shape, executor):
    rng = np.random.default_rng(1)
    with onnxnn.set_executor(executor):
        check_gradients(
            lambda x, w, b: _recorded(x, w, b),
            [rng.standard_normal(shape), rng.standard_normal(3), rng.standard_normal(3)],
        )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_gradients_through_the_statistics_outputs_match_finite_differences(executor):
    # A loss reading the batch mean and variance (as a second-order gradient does) sends gradients
    # into those outputs, which the rule adds to the input's.
    def loss_of_statistics(x, w, b):
        output, mean, variance = _node_outputs(x, w, b)
        return (output * output).sum() + (mean * variance).sum() * 3.0

    rng = np.random.default_rng(2)
    with onnxnn.set_executor(executor):
        check_gradients(
            loss_of_statistics, [rng.standard_normal((4, 3, 2)), rng.standard_normal(3), rng.standard_normal(3)]
        )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_second_order_gradients_match_finite_differences(executor):
    # f(x) = |d/dx sum(y * c)|^2 differentiated again, against central differences of f along a
    # random direction: the gradient graph reads the saved statistics, so this runs the rule on
    # gradients reaching them.
    rng = np.random.default_rng(3)
    x0, weight, cotangent = rng.standard_normal((5, 3)), rng.standard_normal(3), rng.standard_normal((5, 3))
    direction = rng.standard_normal((5, 3))

    def gradient_norm(array, create_graph):
        x = onnxnn.tensor(array, requires_grad=True)
        output = _recorded(x, onnxnn.tensor(weight), onnxnn.tensor(np.zeros(3)))
        (grad_x,) = onnxnn.autograd.grad((output * onnxnn.tensor(cotangent)).sum(), [x], create_graph=create_graph)
        return x, (grad_x * grad_x).sum()

    with onnxnn.set_executor(executor):
        x, value = gradient_norm(x0, True)
        (analytic,) = onnxnn.autograd.grad(value, [x])
        step = 1e-5
        ahead, behind = (float(gradient_norm(x0 + sign * step * direction, False)[1]) for sign in (1, -1))
    # Central differences of a smooth float64 function: O(step^2) truncation, rounding ~1e-16 / step.
    np.testing.assert_allclose(
        np.sum(analytic.numpy() * direction), (ahead - behind) / (2 * step), rtol=1e-6, atol=1e-8
    )


def test_a_batch_of_inf_does_not_reach_later_batches():
    # onnxruntime's training-mode BatchNormalization would keep statistics written over an
    # initializer; this op's graph holds none, so the next clean batch is clean.
    layer = onnxnn.nn.BatchNorm2d(4, track_running_stats=False).train()
    with onnxnn.set_executor("onnxruntime"):
        x = np.random.default_rng(4).standard_normal((8, 4, 16, 16)).astype(np.float32)
        poisoned = x.copy()
        poisoned[0, 0, 0, 0] = np.inf
        with onnxnn.no_grad():
            assert not np.isfinite(layer(onnxnn.tensor(poisoned)).numpy()).all()
            clean = layer(onnxnn.tensor(x)).numpy()
    expected, _, _ = _numpy_batch_norm(x.astype(np.float64), np.ones(4), np.zeros(4), 1e-5)
    np.testing.assert_allclose(clean, expected, rtol=1e-4, atol=1e-5)


# One rounding to the dtype (relative half an ulp: 2^-11, 2^-8) after float32 arithmetic far more precise.
SIXTEEN_BIT_RTOL = {onnxnn.float16: 2.0**-10, onnxnn.bfloat16: 2.0**-7}


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_sixteen_bit_inputs_are_normalized_in_float32_and_rounded_once(dtype, executor):
    # PyTorch's CPU kernel computes half-precision statistics in float32: values of magnitude ~300 have
    # a variance past float16's largest value (65504), which zeroed their channels when computed in it.
    x = (np.random.default_rng(5).standard_normal((8, 4)) * 300).astype(np.float32)
    inputs = onnxnn.tensor(x).to(dtype)
    seen = inputs.float().numpy().astype(np.float64)  # the values the layer gets
    with onnxnn.set_executor(executor):
        layer = onnxnn.nn.BatchNorm1d(4).to(dtype).train()
        output = layer(inputs)
        assert output.dtype is dtype
        expected, _, variance = _numpy_batch_norm(seen, np.ones(4), np.zeros(4), 1e-5)
        rtol = SIXTEEN_BIT_RTOL[dtype]
        np.testing.assert_allclose(output.detach().float().numpy(), expected, rtol=rtol, atol=1e-5)
        # 0.9 * 1 + 0.1 * the unbiased variance, computed before rounding: finite although the variance is not.
        expected_running = 0.9 + 0.1 * variance * 8 / 7
        np.testing.assert_allclose(layer.running_var.float().numpy(), expected_running, rtol=rtol)


def test_the_training_graph_exports_as_standard_onnx_that_onnxruntime_runs():
    import onnxruntime

    from onnxnn.export import to_onnx

    layer = onnxnn.nn.Sequential(onnxnn.nn.Conv2d(2, 3, 3), onnxnn.nn.BatchNorm2d(3)).train()
    x = onnxnn.randn(4, 2, 5, 5)
    with pytest.warns(UserWarning, match="training mode"):
        proto = to_onnx(layer, x, input_names=["x"])
    assert {node.domain for node in proto.graph.node} <= {"", "ai.onnx"}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"x": x.numpy()})[:1]
    with onnxnn.no_grad():
        ours = layer(x).numpy()
    # float32 over 36 values per channel, then a division by the standard deviation: a few ulps.
    np.testing.assert_allclose(exported, ours, rtol=1e-5, atol=1e-5)


def test_an_empty_batch_leaves_running_statistics_and_gives_zero_parameter_gradients():
    layer = onnxnn.nn.BatchNorm2d(3).train()
    x = onnxnn.randn(0, 3, 4, 4, requires_grad=True)
    output = layer(x)
    output.sum().backward()
    assert tuple(output.shape) == (0, 3, 4, 4) and tuple(x.grad.shape) == (0, 3, 4, 4)
    np.testing.assert_array_equal(layer.weight.grad.numpy(), np.zeros(3))
    np.testing.assert_array_equal(layer.bias.grad.numpy(), np.zeros(3))
    np.testing.assert_array_equal(layer.running_mean.numpy(), np.zeros(3))
    np.testing.assert_array_equal(layer.running_var.numpy(), np.ones(3))


def test_statistics_no_loss_reads_get_no_materialized_zero_gradients(monkeypatch):
    # Marked in ``unmaterialized_gradients``: the rule gets None there, not zeros to add in.
    from onnxnn.ir.registry import gradient_rules

    key = ("ai.onnxnn", "BatchNormalizationTraining")
    rule, received = gradient_rules.table[key], []

    def spy(ctx, *gradients):
        received.append([gradient is None for gradient in gradients])
        return rule(ctx, *gradients)

    monkeypatch.setitem(gradient_rules.table, key, spy)
    onnxnn.runtime.fastpath.backward_replay.clear_templates()
    x = onnxnn.randn(4, 3, requires_grad=True)
    _recorded(x, onnxnn.ones(3), onnxnn.zeros(3)).sum().backward()
    output, mean, _ = _node_outputs(x, onnxnn.ones(3), onnxnn.zeros(3))
    (output.sum() + mean.sum()).backward()
    assert received == [[False, True, True], [False, False, True]]


def test_off_the_cpu_the_decomposition_uses_no_batch_normalization_node():
    # onnxruntime's CUDA BatchNormalization raises epsilon to cuDNN's 1e-5, so the epsilon-0 form
    # would add it twice there: the decomposition writes explicit ops, checked here on the CPU.
    import types

    import onnxruntime
    from onnx import TensorProto, helper

    from onnxnn.ir.device import device
    from onnxnn.ir.registry import decompositions

    decomposition = decompositions.get("BatchNormalizationTraining", "ai.onnxnn")
    shape = (4, 3, 2)
    x_value = types.SimpleNamespace(shape=shape, dtype=onnxnn.float32, device=device("cuda"))
    node = types.SimpleNamespace(inputs=[x_value, None, None], attrs={"epsilon": 1e-3})
    names = iter(range(10**6))
    nodes, initializers = decomposition(
        node, ["x", "scale", "bias"], ["y", "mean", "var"], lambda s: f"{s}_{next(names)}"
    )
    assert "BatchNormalization" not in {n.op_type for n in nodes}
    graph = helper.make_graph(
        nodes,
        "decomposed",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("scale", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("bias", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("y", "mean", "var")],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(6)
    x, weight, bias = (rng.standard_normal(s).astype(np.float32) for s in (shape, (3,), (3,)))
    y, mean, variance = session.run(None, {"x": x, "scale": weight, "bias": bias})
    expected, expected_mean, expected_variance = _numpy_batch_norm(x.astype(np.float64), weight, bias, 1e-3)
    # float32 over 8 values per channel: a few ulps of unit-scale values.
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(variance, expected_variance, rtol=1e-5, atol=1e-6)
