"""Resampling, cropping and quantization kernels against the ONNX reference implementation.

Each table row runs one kernel on numpy arrays and the same one-node model through
``onnx.reference.ReferenceEvaluator`` (which generated the official test data), for Resize,
GridSample, AffineGrid, CenterCropPad, Col2Im, QuantizeLinear, DequantizeLinear and
DynamicQuantizeLinear. The last test runs the official ONNX node tests of these ops through
``onnxnn.backend`` on the kernels executor and requires every case onnxruntime passes to pass.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxnn
import onnxnn.backend
from onnxnn.kernels import kernels

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _REPOSITORY not in sys.path:
    sys.path.insert(0, _REPOSITORY)
from tests.import_.onnxruntime_node_results import (  # noqa: E402
    node_test_cases,
    run_case,
    stored_onnxruntime_passing,
)

OPSET = 22
RESAMPLING_OPS = (
    "Resize",
    "GridSample",
    "AffineGrid",
    "CenterCropPad",
    "Col2Im",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
)


def reference(op_type: str, inputs: list, attrs: dict, num_outputs: int = 1) -> list:
    """The outputs of ``op_type`` on ``inputs`` (None = omitted) per onnx's reference evaluator."""
    names = [f"input{i}" if value is not None else "" for i, value in enumerate(inputs)]
    while names and names[-1] == "":
        names.pop()
    graph_inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in zip(names, inputs)
        if name
    ]
    outputs = [f"output{i}" for i in range(num_outputs)]
    node = helper.make_node(op_type, names, outputs, **attrs)
    graph = helper.make_graph(
        [node],
        "case",
        graph_inputs,
        [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    feeds = {name: value for name, value in zip(names, inputs) if name}
    return ReferenceEvaluator(model).run(None, feeds)


def onnxruntime_outputs(op_type: str, inputs: list, attrs: dict) -> list:
    """The outputs of a one-node opset-20 model of ``op_type`` run by onnxruntime (None = omitted)."""
    import onnxruntime  # deferred: heavy

    names = [f"input{i}" if value is not None else "" for i, value in enumerate(inputs)]
    given = [(name, value) for name, value in zip(names, inputs) if name]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["output0"], **attrs)],
        "case",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in given
        ],
        [helper.make_tensor_value_info("output0", helper.np_dtype_to_tensor_dtype(inputs[0].dtype), None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, dict(given))


def run_kernel(op_type: str, inputs: list, attrs: dict, num_outputs: int = 1) -> list:
    """The kernel's outputs, called the way the kernels executor calls it."""
    kernel_attrs = dict(attrs, _num_outputs=num_outputs, _used_outputs=tuple(range(num_outputs)))
    return kernels.lookup(op_type)(np, list(inputs), kernel_attrs)


# Interpolations and the other ops here round at most a few dozen times per element (weights,
# products, a sum over at most 4^3 taps for cubic 3-D) against onnx's reference implementation:
# float32 1e-5 is 168 u, i.e. 2 gamma(84), over results and inputs of unit scale (atol).
# float16 cases pass 1e-3, two float16 ulps (u = 2^-11).
def assert_same(op_type: str, inputs: list, attrs: dict, num_outputs: int = 1, rtol=1e-5, atol=1e-5) -> None:
    expected = reference(op_type, inputs, attrs, num_outputs)
    actual = run_kernel(op_type, inputs, attrs, num_outputs)
    assert len(actual) == len(expected)
    for want, got in zip(expected, actual):
        got = np.asarray(got)
        assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
        assert got.dtype == want.dtype, f"dtype {got.dtype}, expected {want.dtype}"
        if want.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _data(shape, dtype=np.float32, low=-2.0, high=2.0):
    values = np.random.RandomState(sum(shape) + len(shape)).uniform(low, high, shape)
    return values.astype(dtype)


def _floats(values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def _ints(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# ---------------------------------------------------------------------------------------------- Resize

TRANSFORMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
# Up, down and mixed, with fractional resized lengths (input length * scale).
SCALES = [[1, 1, 1.3, 2.2], [1, 1, 0.7, 0.6], [1, 1, 0.45, 1.9], [1, 1, 0.34, 3.0]]
# Exact ratios put source coordinates on whole pixels. Not used with half_pixel_symmetric: for it
# they give coordinates one ulp above a whole pixel, where the reference implementation picks
# its taps one pixel too far left (it re-floors the coordinate after adding a padding offset,
# which rounds the ulp away); the official half_pixel_symmetric node tests pass.
EXACT_SCALES = [[1, 1, 2.0, 0.5], [1, 1, 3.0, 4.0], [1, 1, 0.6, 1.5]]


def _scales_for(transform: str) -> list:
    return SCALES + ([] if transform == "half_pixel_symmetric" else EXACT_SCALES)


RESIZE_CASES = (
    # nearest: every rounding rule under every transform, up and down.
    [
        ("nearest", {"nearest_mode": rounding, "coordinate_transformation_mode": transform}, scales)
        for rounding in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
        for transform in TRANSFORMS
        for scales in _scales_for(transform)[:2] + _scales_for(transform)[4:]
    ]
    # linear and cubic under every transform, with and without antialiasing.
    + [
        (mode, {"coordinate_transformation_mode": transform, "antialias": antialias}, scales)
        for mode in ["linear", "cubic"]
        for transform in TRANSFORMS
        for antialias in [0, 1]
        for scales in _scales_for(transform)
    ]
    # cubic's coefficient and exclude_outside.
    + [("cubic", {"cubic_coeff_a": -0.5, "exclude_outside": 1}, scales) for scales in SCALES]
    + [("cubic", {"cubic_coeff_a": -0.5, "exclude_outside": 1, "antialias": 1}, scales) for scales in SCALES]
)


@pytest.mark.parametrize("mode, attrs, scales", RESIZE_CASES)
def test_resize_with_scales_matches_onnxruntime(mode, attrs, scales):
    # onnxruntime, not onnx's reference implementation: with scales the two differ where the
    # resized length (input * scale) is not an integer (ir/resize_geometry.py), and onnxruntime is
    # what serves an imported model (and agrees with PyTorch, which exports such models).
    x = _data((2, 3, 5, 7))
    inputs, attrs = [x, None, _floats(scales)], dict(attrs, mode=mode)
    (expected,) = onnxruntime_outputs("Resize", inputs, attrs)
    if mode == "nearest" and attrs["coordinate_transformation_mode"] == "half_pixel_symmetric":
        # Its coordinates land within an ulp of a half here (0.7 of 5, 0.6 of 7), where
        # onnxruntime's float32 sums and onnx's float64 reference round to different pixels
        # (each of the two, and the kernel, agrees with the other in 7 of the 8 rounding cases).
        (specified,) = reference("Resize", inputs, attrs)
        (actual,) = run_kernel("Resize", inputs, attrs)
        assert np.all((actual == expected) | (actual == specified))
        return
    (actual,) = run_kernel("Resize", inputs, attrs)
    assert actual.shape == expected.shape
    if mode == "nearest":  # the same float32 coordinates, floored or rounded alike
        np.testing.assert_array_equal(actual, expected)
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize(
    "sizes, axes",
    [
        ([1, 2, 9, 4], None),
        ([1, 2, 3, 11], None),
        ([9, 4], [2, 3]),
        ([4, 9], [3, 2]),
        ([6], [3]),
    ],
)
def test_resize_with_sizes_matches_reference(mode, policy, sizes, axes):
    x = _data((1, 2, 5, 6))
    attrs = {"mode": mode, "keep_aspect_ratio_policy": policy}
    if axes is not None:
        attrs["axes"] = axes
    assert_same("Resize", [x, None, None, _ints(sizes)], attrs)


@pytest.mark.parametrize("negative, positive", [([-1], [3]), ([-2, -1], [2, 3]), ([-1, 2], [3, 2])])
def test_resize_negative_axes_count_from_the_end(negative, positive):
    # The reference implementation does not take negative axes, so they are checked against positive ones.
    x = _data((1, 2, 5, 6))
    sizes = _ints([7, 3][: len(negative)])
    (expected,) = run_kernel("Resize", [x, None, None, sizes], {"mode": "linear", "axes": positive})
    (actual,) = run_kernel("Resize", [x, None, None, sizes], {"mode": "linear", "axes": negative})
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize(
    "roi, axes, sizes",
    [
        ([0, 0, 0.4, 0.6, 1, 1, 0.6, 0.8], None, [1, 2, 3, 3]),
        ([0, 0, -0.2, 0.3, 1, 1, 1.2, 0.9], None, [1, 2, 4, 5]),  # partly outside: extrapolated
        ([0.4, 0.6, 0.6, 0.8], [2, 3], [3, 3]),
        ([0.6, 0.4, 0.8, 0.6], [3, 2], [3, 3]),
        ([0, 0, 0.2, 0.2, 1, 1, 0.8, 0.8], None, [1, 2, 1, 1]),  # one output: the roi's centre
    ],
)
def test_resize_tf_crop_and_resize_matches_reference(mode, roi, axes, sizes):
    x = _data((1, 2, 5, 6))
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 10.0}
    if axes is not None:
        attrs["axes"] = axes
    assert_same("Resize", [x, _floats(roi), None, _ints(sizes)], attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_of_integers_rounds_and_saturates_like_reference(dtype, mode):
    info = np.iinfo(dtype)
    x = np.random.RandomState(0).randint(max(info.min, -1000), min(info.max, 1000) + 1, (1, 1, 4, 5)).astype(dtype)
    assert_same("Resize", [x, None, _floats([1, 1, 1.5, 2.5])], {"mode": mode})


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_resize_keeps_floating_dtype(dtype):
    x = _data((1, 1, 3, 4), dtype)
    assert_same("Resize", [x, None, _floats([1, 1, 2, 2])], {"mode": "linear"}, rtol=1e-3, atol=1e-3)


def test_resize_identity_scales_copies_input():
    x = _data((1, 1, 3, 4))
    (result,) = run_kernel("Resize", [x, None, _floats([1, 1, 1, 1])], {"mode": "linear"})
    np.testing.assert_array_equal(result, x)
    assert result is not x


@pytest.mark.parametrize(
    "attrs, message",
    [
        ({"mode": "bilinear"}, "unknown mode"),
        ({"mode": "nearest", "nearest_mode": "round"}, "unknown nearest_mode"),
        ({"mode": "linear", "coordinate_transformation_mode": "corners"}, "unknown coordinate_transformation_mode"),
    ],
)
def test_resize_rejects_unknown_attribute_values(attrs, message):
    with pytest.raises(ValueError, match=message):
        run_kernel("Resize", [_data((1, 1, 2, 2)), None, _floats([1, 1, 2, 2])], attrs)


# ------------------------------------------------------------------------------ GridSample, AffineGrid


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_2d_matches_reference(mode, padding_mode, align_corners):
    x = _data((2, 3, 4, 5))
    # Coordinates beyond [-1, 1] exercise the padding modes; exact halves exercise nearest's ties.
    grid = _data((2, 3, 6, 2), low=-1.4, high=1.4)
    grid[0, 0, :4] = [[-1, -1], [1, 1], [0.5, -0.25], [0.0, 0.75]]
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    if mode == "cubic" and padding_mode == "border":
        # onnx's reference clamps the coordinate before taking the 4 taps; onnxruntime and PyTorch
        # clamp each tap, and so do the kernels: compare with onnxruntime.
        expected = onnxruntime_outputs("GridSample", [x, grid], attrs)[0]
        np.testing.assert_allclose(run_kernel("GridSample", [x, grid], attrs)[0], expected, rtol=1e-5, atol=1e-5)
        return
    assert_same("GridSample", [x, grid], attrs)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_3d_matches_reference(mode, padding_mode, align_corners):
    x = _data((1, 2, 3, 4, 5))
    grid = _data((1, 2, 3, 4, 3), low=-1.3, high=1.3)
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    assert_same("GridSample", [x, grid], attrs)


@pytest.mark.parametrize("size", [[2, 3, 4, 5], [2, 3, 3, 4, 5], [1, 1, 1, 4]])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_matches_reference(size, align_corners):
    spatial = len(size) - 2
    theta = _data((size[0], spatial, spatial + 1))
    assert_same("AffineGrid", [theta, _ints(size)], {"align_corners": align_corners})


# ----------------------------------------------------------------------------- CenterCropPad, Col2Im


@pytest.mark.parametrize(
    "shape, target, axes",
    [
        ((5, 6, 3), [3, 4, 3], None),  # crop, odd and even differences
        ((3, 4, 2), [6, 7, 2], None),  # pad
        ((5, 3, 2), [2, 6, 2], None),  # crop one axis, pad another
        ((5, 6, 3), [3, 3], [0, 1]),
        ((5, 6, 3), [4, 9], [-3, -2]),
        ((3, 5, 6), [4, 4], [2, 1]),
        ((4, 4), [4, 4], None),  # unchanged
    ],
)
def test_center_crop_pad_matches_reference(shape, target, axes):
    attrs = {} if axes is None else {"axes": axes}
    assert_same("CenterCropPad", [_data(shape), _ints(target)], attrs)


@pytest.mark.parametrize(
    "image, block, attrs",
    [
        ([5, 5], [1, 5], {}),
        ([5, 5], [2, 2], {}),
        ([5, 5], [2, 2], {"strides": [2, 2]}),
        ([5, 5], [2, 2], {"pads": [1, 0, 1, 2]}),
        ([6, 6], [2, 2], {"dilations": [2, 2]}),
        ([6, 7], [3, 2], {"strides": [2, 1], "pads": [1, 1, 0, 2], "dilations": [1, 2]}),
        ([3, 4, 5], [2, 2, 2], {"strides": [1, 2, 1]}),
    ],
)
def test_col2im_matches_reference(image, block, attrs):
    spatial = len(image)
    strides = attrs.get("strides", [1] * spatial)
    dilations = attrs.get("dilations", [1] * spatial)
    pads = attrs.get("pads", [0] * 2 * spatial)
    counts = [
        (image[i] + pads[i] + pads[i + spatial] - (block[i] - 1) * dilations[i] - 1) // strides[i] + 1
        for i in range(spatial)
    ]
    columns = _data((2, 3 * int(np.prod(block)), int(np.prod(counts))))
    assert_same("Col2Im", [columns, _ints(image), _ints(block)], attrs)


# ------------------------------------------------------------------------------------ quantization

QUANTIZE_CASES = [
    # (x shape, scale, zero point, attrs)
    ((3, 4), _floats(0.5), None, {}),
    ((3, 4), _floats(0.02), np.array(128, np.uint8), {}),  # saturates at 0 and 255
    ((3, 4), _floats(0.1), np.array(-3, np.int8), {}),
    ((3, 4), _floats(0.01), np.array(5, np.int16), {}),
    ((3, 4), _floats(0.5), None, {"output_dtype": onnx.TensorProto.INT8}),
    ((2, 3, 4), _floats([0.1, 0.2, 0.5]), np.array([1, 2, 3], np.uint8), {"axis": 1}),
    ((2, 3, 4), _floats([0.1, 0.2, 0.3, 0.5]), np.array([0, -1, 2, 4], np.int8), {"axis": -1}),
    ((2, 6), _floats([[0.1, 0.2], [0.3, 0.4]]), np.array([[1, 2], [3, 4]], np.uint8), {"axis": 1, "block_size": 3}),
    ((5, 2), _floats([[0.1, 0.2], [0.3, 0.4]]), None, {"axis": 0, "block_size": 3}),  # a short last block
]


@pytest.mark.parametrize("shape, scale, zero_point, attrs", QUANTIZE_CASES)
def test_quantize_linear_matches_reference(shape, scale, zero_point, attrs):
    x = _data(shape, low=-4, high=4)
    assert_same("QuantizeLinear", [x, scale, zero_point], attrs)


def test_quantize_linear_rounds_half_to_even():
    x = _floats([0.5, 1.5, 2.5, -0.5, -1.5, -2.5])
    (result,) = run_kernel("QuantizeLinear", [x, _floats(1.0), np.array(10, np.uint8)], {})
    np.testing.assert_array_equal(result, [10, 12, 12, 10, 8, 8])


@pytest.mark.parametrize("shape, scale, zero_point, attrs", QUANTIZE_CASES)
def test_dequantize_linear_matches_reference(shape, scale, zero_point, attrs):
    dtype = zero_point.dtype if zero_point is not None else np.dtype(np.uint8)
    info = np.iinfo(dtype)
    x = np.random.RandomState(1).randint(info.min, info.max + 1, shape).astype(dtype)
    attrs = {key: value for key, value in attrs.items() if key != "output_dtype"}
    assert_same("DequantizeLinear", [x, scale, zero_point], attrs)


def test_dequantize_linear_of_int32_has_no_zero_point_requirement():
    x = np.array([-5, 0, 7], np.int32)
    assert_same("DequantizeLinear", [x, _floats(0.25)], {})


@pytest.mark.parametrize(
    "values",
    [
        [-1.0, 0.0, 2.5, 3.1, -0.4],
        [0.5, 1.0, 2.0, 4.0],  # all positive: the zero point is 0
        [-3.0, -2.0, -0.25],  # all negative: the zero point is 255
        [0.0, 0.0, 0.0],  # an empty range: scale 1/255
    ],
)
def test_dynamic_quantize_linear_matches_reference(values):
    assert_same("DynamicQuantizeLinear", [_floats(values).reshape(1, -1)], {}, num_outputs=3)


# ----------------------------------------------------------------------------- official node tests


def _official_cases() -> list:
    passing = set(stored_onnxruntime_passing() or [])
    return [
        case
        for case in node_test_cases()
        if case[0] in passing and {node.op_type for node in case[1].graph.node} & set(RESAMPLING_OPS)
    ]


@pytest.mark.parametrize("case", _official_cases(), ids=lambda case: case[0])
def test_official_node_tests_pass_on_kernels_executor(case):
    name, model, data_sets, rtol, atol = case
    with warnings.catch_warnings(), onnxnn.set_executor("kernels"):
        warnings.simplefilter("ignore")
        problem = run_case(onnxnn.backend.prepare(model).run, data_sets, rtol, atol)
    assert problem is None, f"{name}: {problem}"


def test_official_node_tests_cover_every_op():
    covered = {node.op_type for case in _official_cases() for node in case[1].graph.node}
    assert {"Resize", "GridSample", "AffineGrid", "CenterCropPad", "Col2Im", "DynamicQuantizeLinear"} <= covered
