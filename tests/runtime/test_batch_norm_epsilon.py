"""A float64 inference batch normalization adds PyTorch's epsilon, not its float32 rounding, on every executor.

ONNX's epsilon attribute is a float32; the expected values are the numpy formula in float64 with the
epsilon as given, within a few float64 roundings (about eight operations per element).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.nn import functional as F

_rng = np.random.default_rng(3)
# Running variances from zero up: the smaller, the larger epsilon's share of the denominator.
RUNNING_VARIANCE = np.array([0.0, 1e-12, 1e-7, 3e-6, 1.0])


def reference(x, mean, variance, weight, bias, eps):
    shape = (1, -1, 1, 1)
    scaled = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + eps) * weight.reshape(shape)
    return scaled + bias.reshape(shape), np.abs(scaled) + np.abs(bias.reshape(shape))


def assert_close(actual, expected_and_magnitude):
    """Within eight roundings of each term's magnitude (the bias may cancel the normalized value)."""
    expected, magnitude = expected_and_magnitude
    bound = 8 * np.finfo(np.float64).eps * magnitude
    assert np.all(np.abs(actual - expected) <= bound), np.max(np.abs(actual - expected) / bound)


def arguments():
    x = _rng.standard_normal((2, 5, 3, 3))
    mean = _rng.standard_normal(5) * 1e-3
    weight, bias = _rng.standard_normal(5), _rng.standard_normal(5)
    return x, mean, RUNNING_VARIANCE.copy(), weight, bias


@pytest.mark.parametrize("eps", [1e-5, 1e-3, 0.1])
@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_float64_batch_norm_adds_the_epsilon_given(eps, executor):
    x, mean, variance, weight, bias = arguments()
    with onnxnn.set_executor(executor):
        tensors = [onnxnn.tensor(array) for array in (x, mean, variance, weight, bias)]
        actual = F.batch_norm(tensors[0], tensors[1], tensors[2], tensors[3], tensors[4], eps=eps).numpy()
    assert_close(actual, reference(x, mean, variance, weight, bias, eps))


def test_an_export_keeps_one_node_reading_the_running_variance():
    # An ONNX file can only say float32(eps) (as torch.onnx.export's); an Add before the node would
    # make the running variance a computed value, and a re-import add the remainder again.
    layer = onnxnn.nn.BatchNorm2d(5, eps=1e-5).double().eval()
    proto = onnxnn.export.to_onnx(layer, onnxnn.randn(2, 5, 3, 3, dtype=onnxnn.float64))
    (node,) = proto.graph.node
    assert node.op_type == "BatchNormalization" and node.input[4] == "running_var"
    assert [attribute.f for attribute in node.attribute if attribute.name == "epsilon"] == [np.float32(1e-5)]


def test_a_session_shared_across_input_sizes_adds_the_epsilon_given_too():
    # A structure seen at several batch sizes gets one session for all of them (fastpath/dynamic_shapes.py).
    _, mean, variance, weight, bias = arguments()
    with onnxnn.set_executor("onnxruntime"):
        for batch in range(1, 9):
            x = _rng.standard_normal((batch, 5, 3, 3))
            tensors = [onnxnn.tensor(array) for array in (x, mean, variance, weight, bias)]
            actual = F.batch_norm(*tensors, eps=1e-5).numpy()
            assert_close(actual, reference(x, mean, variance, weight, bias, 1e-5))
