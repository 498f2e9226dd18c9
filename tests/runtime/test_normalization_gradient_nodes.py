"""The backward's one-node forms of batch normalization's and ReLU's gradients, and where they run.

A backward not recorded for differentiation records ``BatchNormalizationTrainingGradient`` for a
training batch normalization and ``ReluGradient`` for a ReLU (runtime/ops/batch_norm_training.py,
runtime/ops/relu_gradient.py); onnxnn's CPU sessions run large float32 ones, and the forward node, as
compiled loops (kernels/compiled_normalization.py). Their decompositions and kernels are checked
against finite differences by tests/runtime/test_batch_norm_training.py and the gradient tables.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn.ir.executors import executor
from onnxnn.kernels import compiled_normalization, normalization
from onnxnn.runtime.realization import clear_cache
from onnxnn.runtime.split_sessions import SplitSession
from onnxnn.runtime.tensor import apply_op

from gradcheck import check_gradients
from tolerances import assert_within, gamma


def _pending_op(tensor) -> tuple:
    node = tensor._value.node
    return node.domain, node.op_type


def test_relus_backward_records_one_node():
    x = onnxnn.randn(4, 5, requires_grad=True)
    (grad,) = onnxnn.autograd.grad(F.relu(x).sum(), [x])
    assert _pending_op(grad) == ("ai.onnxnn", "ReluGradient")
    np.testing.assert_array_equal(grad.numpy(), (x.detach().numpy() > 0).astype(np.float32))


def test_a_batch_normalizations_backward_records_one_node_unless_differentiated():
    x = onnxnn.randn(4, 3, 5, 5, requires_grad=True)
    weight = onnxnn.randn(3, requires_grad=True)
    output = F.batch_norm(x, None, None, weight, None, training=True)
    (grad,) = onnxnn.autograd.grad((output * output).sum(), [x], retain_graph=True)
    assert _pending_op(grad) == ("ai.onnxnn", "BatchNormalizationTrainingGradient")
    (differentiable,) = onnxnn.autograd.grad((output * output).sum(), [x], create_graph=True)
    assert _pending_op(differentiable) != ("ai.onnxnn", "BatchNormalizationTrainingGradient")


# Activations whose gradient a batch normalization's gradient node takes over: (function, its bounds,
# the gradient node's inputs then, the activation gradient's op).
FOLDED = {
    "relu": (F.relu, (0.0, None), 6, "ReluGradient"),
    "relu6": (F.relu6, (0.0, 6.0), 8, "HardtanhGradient"),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.8), (-0.5, 0.8), 8, "HardtanhGradient"),
}


@pytest.mark.parametrize("name", FOLDED)
def test_an_activation_after_a_batch_normalization_is_folded_into_its_gradient(name):
    activation, _, inputs, gradient_op = FOLDED[name]
    x = onnxnn.randn(4, 3, 5, 5, requires_grad=True)
    output = activation(F.batch_norm(x, None, None, None, None, training=True))
    (grad,) = onnxnn.autograd.grad(output.sum(), [x])
    node = grad._value.node
    assert (node.op_type, len(node.inputs)) == ("BatchNormalizationTrainingGradient", inputs)
    assert node.inputs[5] is output._value  # the mask is the activation's output
    assert node.inputs[0].node is None or node.inputs[0].node.op_type != gradient_op


@pytest.mark.parametrize("name", FOLDED)
@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
def test_the_folded_gradient_matches_finite_differences(executor_name, name):
    activation = FOLDED[name][0]
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal((3, 2, 4, 4)), rng.standard_normal(2), rng.standard_normal(2)]
    with onnxnn.set_executor(executor_name):
        check_gradients(lambda x, w, b: activation(F.batch_norm(x, None, None, w, b, training=True)) * 1.5, arrays)


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
def test_relus_gradient_is_differentiable_in_its_incoming_gradient(executor_name):
    # d/dc sum((c * [x > 0])^2) = 2 c [x > 0]: the gradient of ReluGradient for G.
    rng = np.random.default_rng(0)
    x_array, c_array = rng.standard_normal((6, 7)), rng.standard_normal((6, 7))
    with onnxnn.set_executor(executor_name):
        x = onnxnn.tensor(x_array, requires_grad=True)
        c = onnxnn.tensor(c_array, requires_grad=True)
        (grad_x,) = onnxnn.autograd.grad((F.relu(x) * c).sum(), [x], create_graph=True)
        (grad_c,) = onnxnn.autograd.grad((grad_x * grad_x).sum(), [c])
        np.testing.assert_array_equal(grad_c.numpy(), 2 * c_array * (x_array > 0))


def _cut_runners() -> list:
    """The plans' runners cut around compiled nodes, each once (the cache may hold one under several keys)."""
    runners = {id(runner): runner for runner in executor("onnxruntime").cache.sessions.values()}
    return [runner for runner in runners.values() if isinstance(runner, SplitSession)]


@pytest.mark.skipif(not compiled_normalization.available(), reason=f"{compiled_normalization.unavailable_reason()}")
@pytest.mark.parametrize("name", ["relu", "hardtanh"])
@pytest.mark.parametrize("loops", [True, False])
def test_a_batchnorm_activation_layers_gradients_with_and_without_the_loops(loops, name, monkeypatch, one_thread):
    activation, (low, high), _, _ = FOLDED[name]
    monkeypatch.setattr(compiled_normalization, "ENABLED", loops)
    rng = np.random.default_rng(1)
    shape = (32, 16, 16, 16)
    x_array = (rng.standard_normal(shape) * 2 + 1).astype(np.float32)
    weight_array, bias_array = rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    cotangent = rng.standard_normal(shape).astype(np.float32)
    x = onnxnn.tensor(x_array, requires_grad=True)
    layer = onnxnn.nn.BatchNorm2d(16)
    layer.weight.data = onnxnn.tensor(weight_array)
    layer.bias.data = onnxnn.tensor(bias_array)
    (activation(layer(x)) * onnxnn.tensor(cotangent)).sum().backward()
    results = [x.grad.numpy(), layer.weight.grad.numpy(), layer.bias.grad.numpy()]
    cut = {(runner.compiled, runner.absorbed) for runner in _cut_runners()}
    # The forward, writing the activation's output, and the gradient with the activation's folded in.
    assert cut == ({(2, 1)} if loops else set())

    # float64: y = BN(x), g = cotangent where low < y (< high), then the gradient's formulas.
    x64, axes, count = x_array.astype(np.float64), (0, 2, 3), x_array.size // 16
    mean, variance = x64.mean(axes, keepdims=True), x64.var(axes, keepdims=True)
    normalized = (x64 - mean) / np.sqrt(variance + 1e-5)
    channel = weight_array.reshape(1, -1, 1, 1).astype(np.float64)
    y = normalized * channel + bias_array.reshape(1, -1, 1, 1)
    g = np.where((y > low) & (y < (np.inf if high is None else high)), cotangent, 0)
    sum_g, sum_gn = g.sum(axes, keepdims=True), (g * normalized).sum(axes, keepdims=True)
    expected_x = channel / np.sqrt(variance + 1e-5) * (g - sum_g / count - normalized * sum_gn / count)
    # Each a sum of ``count`` terms per channel, in any order, then a few roundings. (An element whose
    # normalized value is within rounding of -bias/weight could take the other side of the mask: none
    # is, with this seed, as the exact comparison of the masks below shows.)
    bound = gamma(count + 16)
    magnitude = np.abs(g).sum(axes, keepdims=True) + (np.abs(g * normalized)).sum(axes, keepdims=True)
    scale = np.abs(channel) / np.sqrt(variance + 1e-5)
    assert_within(results[0], expected_x, bound * scale * (np.abs(g) + (1 + np.abs(normalized)) * magnitude / count))
    assert_within(results[1], sum_gn.reshape(-1), bound * np.abs(g * normalized).sum(axes))
    assert_within(results[2], sum_g.reshape(-1), bound * np.abs(g).sum(axes))


@pytest.mark.skipif(not compiled_normalization.available(), reason=f"{compiled_normalization.unavailable_reason()}")
@pytest.mark.parametrize("also_read", ["held", "second_reader"])
def test_a_normalization_output_read_elsewhere_keeps_its_relu(also_read, one_thread):
    # The loop writes a ReLU's output in place of the normalization's only where nothing else reads it.
    rng = np.random.default_rng(5)
    x = onnxnn.tensor(rng.standard_normal((8, 16, 32, 32)).astype(np.float32))
    normalized = F.batch_norm(x, None, None, None, None, training=True)
    rectified = F.relu(normalized)
    if also_read == "held":
        results = [rectified.numpy(), normalized.numpy()]
    else:
        results = [(rectified + normalized * 2.0).numpy()]
    assert [runner.absorbed for runner in _cut_runners()] == [0]
    x64 = x.numpy().astype(np.float64)
    expected = (x64 - x64.mean((0, 2, 3), keepdims=True)) / np.sqrt(x64.var((0, 2, 3), keepdims=True) + 1e-5)
    # A sum of 8192 terms per channel for the statistics, then a few roundings.
    bound = gamma(8192 + 16) * (np.abs(expected) + 1)
    if also_read == "held":
        assert_within(results[1], expected, bound)
        np.testing.assert_array_equal(results[0], np.maximum(results[1], 0))
    else:
        assert_within(results[0], np.maximum(expected, 0) + expected * 2, 4 * bound)


@pytest.mark.parametrize(
    "op_type, shapes, message",
    [
        (
            "BatchNormalizationTrainingGradient",
            [(2, 3, 4), (2, 3, 4), (3,), (3,), (4,)],
            "var must be float32 of shape [3]",
        ),
        (
            "BatchNormalizationTrainingGradient",
            [(2, 3, 5), (2, 3, 4), (3,), (3,), (3,)],
            "G must be float32 of X's shape",
        ),
        (
            "BatchNormalizationTrainingGradient",
            [(2, 3, 4)] * 2 + [(3,)] * 3 + [(2, 3)],
            "A must be float32 of X's shape",
        ),
        ("BatchNormalizationTrainingGradient", [(2, 3, 4)] * 2 + [(3,)] * 2, "takes 5, 6 or 8 inputs"),
        (
            "BatchNormalizationTrainingGradient",
            [(2, 3, 4)] * 2 + [(3,)] * 3 + [(2, 3, 4), (), (1,)],
            "max must be a 0-d",
        ),
        ("HardtanhGradient", [(2, 3), (3, 2), (), ()], "G and Y must have one shape and dtype"),
        ("HardtanhGradient", [(2, 3), (2, 3), (2,), ()], "min must be a 0-d float32 tensor"),
        ("ReluGradient", [(2, 3), (3, 2)], "G and Y must have one shape and dtype"),
        ("AbsGradient", [(2, 3), (3, 2)], "G and X must have one shape and dtype"),
    ],
)
def test_bad_gradient_nodes_are_refused_naming_the_input(op_type, shapes, message):
    inputs = tuple(onnxnn.zeros(shape) for shape in shapes)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        apply_op(op_type, inputs, None, None, domain="ai.onnxnn")


@pytest.mark.skipif(not compiled_normalization.available(), reason=f"{compiled_normalization.unavailable_reason()}")
@pytest.mark.parametrize("threads, relu, loops", [(1, False, 2), (1, True, 2), (2, False, 2), (2, True, 2)])
def test_a_normalization_takes_its_loops_on_any_number_of_threads(threads, relu, loops, request):
    # With a ReLU to take or without (the loops' threads are a pool: kernels/normalization.py measures it).
    request.getfixturevalue("one_thread" if threads == 1 else "two_threads")
    rng = np.random.default_rng(6)
    x = onnxnn.tensor(rng.standard_normal((32, 16, 16, 16)).astype(np.float32), requires_grad=True)
    activation = F.relu if relu else F.elu  # elu: an activation not taken
    (activation(F.batch_norm(x, None, None, None, None, training=True)) * 1.5).sum().backward()
    x.grad.numpy()
    assert sum(runner.compiled for runner in _cut_runners()) == loops


def _normalized_conv(x, weight):
    return F.batch_norm(F.conv2d(x, weight, padding=1), None, None, None, None, training=True)


def _residual_block(rng, shortcut: str):
    """relu(bn(conv(x)) + shortcut) on a 16-channel 32x32 batch: the shortcut the input itself, another
    normalization's output (both only read by the Add), or (``"read_twice"``) a sum read again after.
    No intermediate is held (a held one is a plan output, which the loop does not replace)."""
    x = onnxnn.tensor(rng.standard_normal((8, 16, 32, 32)).astype(np.float32))
    weight = onnxnn.tensor(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1)
    if shortcut == "normalized":
        return F.relu(_normalized_conv(x, weight) + _normalized_conv(x, weight * 0.5)).numpy()
    if shortcut == "input":
        return F.relu(x + _normalized_conv(x, weight)).numpy()  # the residual first: the same sum
    summed = x + _normalized_conv(x, weight)
    return (F.relu(summed) + summed * 0.5).numpy()


@pytest.mark.skipif(not compiled_normalization.available(), reason=f"{compiled_normalization.unavailable_reason()}")
@pytest.mark.parametrize(
    "shortcut, absorbed",
    [("input", 2), ("normalized", 2), ("read_twice", 1)],
    ids=["identity shortcut", "normalized shortcut", "sum read twice"],
)
@pytest.mark.parametrize("threads", ["one_thread", "two_threads"])
def test_a_residual_blocks_add_and_relu_are_computed_by_the_normalizations_loop(
    shortcut, absorbed, threads, monkeypatch, request
):
    # The loop's sum and ReLU round as onnxruntime's Add and Relu. On one thread the normalization is
    # the loop either way, so the values are the same bits as with the Add and the ReLU left to the
    # session; on two, a normalization taking no ReLU or sum is onnxruntime's graph, whose statistics
    # (sums of 8,192 terms per channel) round differently.
    request.getfixturevalue(threads)
    fused = _residual_block(np.random.default_rng(9), shortcut)
    assert sum(runner.absorbed for runner in _cut_runners()) == absorbed
    clear_cache()  # every runner, the plan entries' too
    monkeypatch.setattr(normalization, "_adds_a_residual", lambda add, x: False)
    unfused = _residual_block(np.random.default_rng(9), shortcut)
    assert sum(runner.absorbed for runner in _cut_runners()) == 0
    if threads == "one_thread":
        np.testing.assert_array_equal(fused, unfused)
    else:
        assert_within(fused, unfused, 4 * gamma(8192 + 16) * (np.abs(unfused) + 1))
