"""Output sizes of ``interpolate(scale_factor=...)`` and of imported Resize nodes with float32 scales.

- ``F.interpolate``/``nn.Upsample`` with a scale factor have PyTorch's length ``floor(size * factor)``
  (the product in double) at every size: eager on both executors, in an exported graph run by plain
  onnxruntime (a dynamic axis included), and after ``from_onnx`` of that graph. Values follow
  PyTorch's coordinate map ``(i + 0.5) / factor - 0.5`` (a numpy formula below).
- ``from_onnx`` of a Resize with float32 scales written elsewhere gives onnxruntime's length,
  ``floor(size * scale)`` with the product in float32 (``50 * 2.3f`` rounds to 115).

Values: the coordinates are float32 in onnxruntime's kernel (up to 3 * 120 / 0.45 < 800, ulp 6e-5 at
most) and the inputs lie in [0, 1), so a weight off by a few ulps of the coordinate moves an output
by under 2e-4; a whole sample off (a wrong length or tap) moves it by ~0.3.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

EXECUTORS = ("onnxruntime", "kernels")
# Factors whose float32 product sizes some lengths unlike the double one (2.3, 0.7, 1.3, 0.45), and
# ones it never does (1/3 rounds the other way here, 1.5 and 2 are exact).
FACTORS = (2.3, 0.7, 1.3, 0.45, 1 / 3, 1.5, 2.0)
LENGTHS = tuple(range(4, 121))
VALUE_TOLERANCE = 2e-4


def _torch_linear(x: np.ndarray, factor: float) -> np.ndarray:
    """PyTorch's ``interpolate(x, scale_factor=factor, mode='linear')`` along the last axis (numpy, double)."""
    size = x.shape[-1]
    out = math.floor(size * factor)
    source = np.maximum((np.arange(out) + 0.5) / factor - 0.5, 0.0)
    low = np.floor(source).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    weight = source - low
    return x[..., low] * (1 - weight) + x[..., high] * weight


def _inputs(length: int, channels: int = 2) -> np.ndarray:
    return np.random.default_rng(length).random((1, channels, length)).astype(np.float32)


def _session(proto):
    return onnxruntime.InferenceSession(proto.SerializeToString())


def _exported(factor: float, mode: str = "linear", rank: int = 3):
    example = onnxnn.rand(*((1, 2) + (6,) * (rank - 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_onnx(
            nn.Upsample(scale_factor=factor, mode=mode),
            example,
            input_names=["x"],
            dynamic_axes={"x": {rank - 1: "t"}},
        )


@pytest.mark.parametrize("factor", FACTORS)
def test_exported_dynamic_linear_upsample_has_pytorchs_length_and_values_on_onnxruntime(factor):
    session = _session(_exported(factor))
    for length in LENGTHS:
        x = _inputs(length)
        (actual,) = session.run(None, {"x": x})
        expected = _torch_linear(x.astype(np.float64), factor)
        assert actual.shape == expected.shape, (length, actual.shape, expected.shape)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=VALUE_TOLERANCE)


@pytest.mark.parametrize("factor", FACTORS)
def test_imported_export_keeps_pytorchs_length_and_values(factor):
    imported = from_onnx(_exported(factor))
    for length in LENGTHS[::7]:
        x = _inputs(length)
        actual = imported(onnxnn.tensor(x)).detach().numpy()
        expected = _torch_linear(x.astype(np.float64), factor)
        assert actual.shape == expected.shape, (length, actual.shape, expected.shape)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=VALUE_TOLERANCE)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("factor", FACTORS)
def test_eager_linear_interpolate_has_pytorchs_length_and_values(executor, factor):
    with onnxnn.set_executor(executor):
        for length in LENGTHS[::5]:
            x = _inputs(length)
            actual = nn.functional.interpolate(onnxnn.tensor(x), scale_factor=factor, mode="linear").numpy()
            expected = _torch_linear(x.astype(np.float64), factor)
            assert actual.shape == expected.shape, (length, actual.shape, expected.shape)
            np.testing.assert_allclose(actual, expected, rtol=0, atol=VALUE_TOLERANCE)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("factor", (2.3, 0.7))
def test_gradient_is_the_transposed_interpolation(executor, factor):
    # d sum(y * w) / dx = M^T w, M the (out, in) matrix of the numpy formula (its columns: unit inputs).
    length = 50  # 50 * 2.3f rounds up in float32; 50 * 0.7 is 35 exactly in double, 34.99... in float32
    matrix = _torch_linear(np.eye(length), factor).T  # (out, in)
    w = np.random.default_rng(1).random((1, 1, matrix.shape[0]))
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(_inputs(length, channels=1), requires_grad=True)
        y = nn.functional.interpolate(x, scale_factor=factor, mode="linear")
        (y * onnxnn.tensor(w.astype(np.float32))).sum().backward()
        np.testing.assert_allclose(x.grad.numpy()[0, 0], matrix.T @ w[0, 0], rtol=0, atol=VALUE_TOLERANCE)


# (mode, factor, spatial shape): PyTorch's floor(size * factor) in double at each axis.
SPATIAL_CASES = [
    ("bilinear", 2.3, (7, 50)),
    ("bicubic", 2.3, (50, 10)),
    ("bilinear", 0.7, (90, 11)),
    ("trilinear", 2.3, (3, 50, 10)),
    ("bicubic", 1.3, (20, 17)),
]


@pytest.mark.parametrize("mode, factor, spatial", SPATIAL_CASES)
def test_fixed_size_exports_have_pytorchs_shape_and_eager_values_on_onnxruntime(mode, factor, spatial):
    x = np.random.default_rng(0).random((1, 2) + spatial).astype(np.float32)
    eager = nn.functional.interpolate(onnxnn.tensor(x), scale_factor=factor, mode=mode).numpy()
    expected_shape = (1, 2) + tuple(math.floor(size * factor) for size in spatial)
    assert eager.shape == expected_shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = to_onnx(nn.Upsample(scale_factor=factor, mode=mode), onnxnn.tensor(x), input_names=["x"])
    (actual,) = _session(proto).run(None, {"x": x})
    assert actual.shape == expected_shape
    # Cubic weights reach 1.3 in size and a coordinate within an ulp moves them by ~1e-7 relative.
    np.testing.assert_allclose(actual, eager, rtol=0, atol=VALUE_TOLERANCE)


@pytest.mark.parametrize("factor", (2.0, 1.5, 0.5))
def test_factors_exact_in_float32_write_one_resize(factor):
    ops = [node.op_type for node in _exported(factor).graph.node]
    assert ops.count("Resize") == 1 and "Slice" not in ops, ops


def _foreign_resize(scale: float):
    """A Resize with float32 scales as another exporter writes it: ``(1, 1, t)`` -> linear, half_pixel."""
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="linear")
    graph = helper.make_graph(
        [node],
        "foreign",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "t"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "u"])],
        [
            helper.make_tensor("roi", TensorProto.FLOAT, [0], []),
            helper.make_tensor("scales", TensorProto.FLOAT, [3], [1.0, 1.0, scale]),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("scale", (2.3, 0.7, 1.3))
def test_imported_float32_scales_give_onnxruntimes_length(executor, scale):
    proto = _foreign_resize(scale)
    onnx.checker.check_model(proto)
    session = _session(proto)
    imported = from_onnx(proto)
    with onnxnn.set_executor(executor):
        for length in LENGTHS[::3]:
            x = _inputs(length, channels=1)
            (expected,) = session.run(None, {"x": x})
            # onnxruntime's rule: the float32 product, floored.
            assert expected.shape[-1] == math.floor(np.float32(length) * np.float32(scale))
            actual = imported(onnxnn.tensor(x)).detach().numpy()
            assert actual.shape == expected.shape, (length, actual.shape, expected.shape)
            np.testing.assert_allclose(actual, expected, rtol=0, atol=VALUE_TOLERANCE)
