"""``InstanceNorm(track_running_stats=True).eval()``: the running statistics stay buffers.

In evaluation the layer normalizes by its running statistics,
``(x - running_mean) / sqrt(running_var + eps) * weight + bias`` per channel (PyTorch batch-normalizes
with them). onnxnn records that as one ``BatchNormalization`` node, as ``batch_norm``'s evaluation:
an export reads ``running_mean``/``running_var`` as the node's mean and variance, so ``from_onnx``
keeps them buffers, and a fine-tuning step moves the affine parameters only.

Tolerances: a handful of float32 roundings of values of order 10 (the formula below in double).
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

EXECUTORS = ("onnxruntime", "kernels")
LAYERS = [(nn.InstanceNorm1d, 1), (nn.InstanceNorm2d, 2), (nn.InstanceNorm3d, 3)]
TOLERANCE = {onnxnn.float32: 1e-5, onnxnn.float64: 1e-12}


def _trained(layer, spatial: int, affine: bool, channels: int = 3):
    """The layer with running statistics and affine parameters away from their initial values."""
    onnxnn.manual_seed(spatial)
    module = layer(channels, affine=affine, track_running_stats=True, eps=1e-3)
    module(onnxnn.randn(*((4, channels) + (5,) * spatial)) * 3 + 2)  # one training step of the statistics
    if affine:
        with onnxnn.no_grad():
            module.weight.copy_(onnxnn.tensor([0.5, -2.0, 1.5]))
            module.bias.copy_(onnxnn.tensor([1.0, 0.0, -3.0]))
    return module.eval()


def _formula(module, x: np.ndarray) -> np.ndarray:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean = module.running_mean.numpy().astype(np.float64).reshape(shape)
    var = module.running_var.numpy().astype(np.float64).reshape(shape)
    result = (x.astype(np.float64) - mean) / np.sqrt(var + module.eps)
    if module.affine:
        result = result * module.weight.detach().numpy().reshape(shape) + module.bias.detach().numpy().reshape(shape)
    return result


def _example(spatial: int, dtype=np.float32) -> np.ndarray:
    return (np.random.default_rng(spatial).standard_normal((2, 3) + (4,) * spatial) * 3 + 2).astype(dtype)


@pytest.mark.parametrize("layer, spatial", LAYERS)
@pytest.mark.parametrize("affine", (True, False))
def test_export_reads_running_statistics_in_a_batch_normalization(layer, spatial, affine):
    module = _trained(layer, spatial, affine)
    x = _example(spatial)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = to_onnx(module, onnxnn.tensor(x), input_names=["x"])
    nodes = [node for node in proto.graph.node if node.op_type == "BatchNormalization"]
    assert len(nodes) == 1
    assert [name.split(".")[-1] for name in nodes[0].input[3:]] == ["running_mean", "running_var"]
    (actual,) = onnxruntime.InferenceSession(proto.SerializeToString()).run(None, {"x": x})
    np.testing.assert_allclose(actual, _formula(module, x), rtol=0, atol=TOLERANCE[onnxnn.float32])


@pytest.mark.parametrize("affine", (True, False))
def test_imported_running_statistics_are_buffers_a_fine_tuning_step_keeps(affine):
    module = _trained(nn.InstanceNorm2d, 2, affine)
    x = onnxnn.tensor(_example(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imported = from_onnx(to_onnx(module, x))
    parameters = {name.split(".")[-1] for name, _ in imported.named_parameters()}
    buffers = {name.split(".")[-1]: value.numpy().copy() for name, value in imported.named_buffers()}
    assert parameters == ({"weight", "bias"} if affine else set())
    assert {"running_mean", "running_var"} <= set(buffers)
    np.testing.assert_array_equal(buffers["running_mean"], module.running_mean.numpy())
    if affine:
        optimizer = onnxnn.optim.SGD(imported.parameters(), lr=0.1)
        (imported(x) ** 2).sum().backward()
        optimizer.step()
    after = {name.split(".")[-1]: value.numpy() for name, value in imported.named_buffers()}
    for name in ("running_mean", "running_var"):
        np.testing.assert_array_equal(after[name], buffers[name])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", (onnxnn.float32, onnxnn.float64))
@pytest.mark.parametrize("layer, spatial", LAYERS)
def test_eval_values_and_input_gradient_follow_the_running_statistics(executor, dtype, layer, spatial):
    module = _trained(layer, spatial, affine=True).to(dtype)
    x_array = _example(spatial, dtype.numpy_dtype)
    upstream = np.random.default_rng(7).standard_normal(x_array.shape)
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(x_array, requires_grad=True)
        y = module(x)
        (y * onnxnn.tensor(upstream, dtype=dtype)).sum().backward()
        actual, gradient = y.detach().numpy(), x.grad.numpy()
    np.testing.assert_allclose(actual, _formula(module, x_array), rtol=0, atol=TOLERANCE[dtype])
    # d y / d x = weight / sqrt(running_var + eps) per channel.
    shape = (1, -1) + (1,) * spatial
    factor = module.weight.detach().numpy().astype(np.float64) / np.sqrt(
        module.running_var.numpy().astype(np.float64) + module.eps
    )
    np.testing.assert_allclose(gradient, upstream * factor.reshape(shape), rtol=0, atol=TOLERANCE[dtype])
