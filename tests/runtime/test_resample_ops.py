"""Resize, GridSample, AffineGrid, DepthToSpace, SpaceToDepth and CenterCropPad nodes as imported models use
them: shape rules, values and gradients on both executors.

Expected values come from onnx's reference implementation (``onnx.reference.ReferenceEvaluator``).
Every op here is linear in its data input (GridSample also differentiable in the grid almost
everywhere), so gradients are checked against float64 finite differences on the kernels executor
(onnxruntime's CPU provider runs Resize and GridSample in float32 only) and the float32 ones on
onnxruntime where its kernels exist.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxnn
from onnxnn.ir import dtypes
from onnxnn.ir.graph import static_constant
from onnxnn.runtime.tensor import apply_op

from .conv_cases import check_gradients_float32

RNG = np.random.default_rng(81)


def reference(op_type, inputs, attrs, opset=20):
    present = [(f"i{k}", a) for k, a in enumerate(inputs) if a is not None]
    names = [f"i{k}" if a is not None else "" for k, a in enumerate(inputs)]
    types = {n: TensorProto.INT64 if np.asarray(a).dtype.kind == "i" else TensorProto.FLOAT for n, a in present}
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, types[n], None) for n, _ in present],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, {n: np.asarray(a) for n, a in present})[0]


def _structural(value):
    """A constant input as the importer records it: int64 sizes/shapes, float32 scales/roi."""
    if value is None:
        return None
    array = np.asarray(value)
    return static_constant(array.tolist(), dtypes.int64 if array.dtype.kind == "i" else dtypes.float32)


def node(op_type, attrs, constants):
    """``x -> op(x, *constants)``: the node with its constant inputs embedded, as in an imported graph."""

    def apply(x, *data):
        return apply_op(op_type, (x, *data, *[_structural(c) for c in constants]), attrs)

    return apply


# (id, input shape, roi, scales, sizes, attributes)
RESIZE_CASES = [
    ("nearest-round-floor-half-pixel", (1, 2, 3, 4), None, [1, 1, 2.0, 1.5], None, {"mode": "nearest"}),
    (
        "nearest-ceil-asymmetric",
        (1, 1, 5, 4),
        None,
        None,
        [1, 1, 3, 7],
        {"mode": "nearest", "nearest_mode": "ceil", "coordinate_transformation_mode": "asymmetric"},
    ),
    (
        "nearest-prefer-ceil-align",
        (1, 1, 4, 3),
        None,
        None,
        [1, 1, 7, 5],
        {"mode": "nearest", "nearest_mode": "round_prefer_ceil", "coordinate_transformation_mode": "align_corners"},
    ),
    ("linear-half-pixel-down", (2, 1, 6, 5), None, [1, 1, 0.5, 0.8], None, {"mode": "linear"}),
    (
        "linear-half-pixel-symmetric",
        (1, 1, 4, 5),
        None,
        [1, 1, 1.7, 0.6],
        None,
        {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
    ),
    (
        "linear-axes",
        (1, 2, 3, 5),
        None,
        None,
        [4],
        {"mode": "linear", "axes": [3], "coordinate_transformation_mode": "pytorch_half_pixel"},
    ),
    ("linear-antialias", (1, 1, 9, 8), None, None, [1, 1, 4, 3], {"mode": "linear", "antialias": 1}),
    (
        "cubic-exclude-outside",
        (1, 1, 4, 5),
        None,
        [1, 1, 1.5, 2.0],
        None,
        {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5},
    ),
    (
        "cubic-align",
        (1, 2, 3, 4),
        None,
        None,
        [1, 2, 5, 6],
        {"mode": "cubic", "coordinate_transformation_mode": "align_corners"},
    ),
    (
        "linear-not-larger",
        (1, 1, 4, 6),
        None,
        None,
        [6, 12],
        {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"},
    ),
    ("linear-3d", (1, 1, 2, 3, 4), None, [1, 1, 2.0, 0.7, 1.25], None, {"mode": "linear"}),
]


def _resize_constants(roi, scales, sizes):
    return [
        None if roi is None else np.array(roi, np.float32),
        None if scales is None else np.array(scales, np.float32),
        None if sizes is None else np.array(sizes, np.int64),
    ]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case_id, shape, roi, scales, sizes, attrs", RESIZE_CASES, ids=[c[0] for c in RESIZE_CASES])
def test_resize_node_matches_the_reference(case_id, shape, roi, scales, sizes, attrs, executor):
    x = RNG.standard_normal(shape).astype(np.float32)
    constants = _resize_constants(roi, scales, sizes)
    expected = reference("Resize", [x, *constants], attrs)
    with onnxnn.set_executor(executor):
        out = node("Resize", attrs, constants)(onnxnn.tensor(x))
        actual = out.numpy()
    assert tuple(out.shape) == expected.shape  # the shape rule, before any run
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case_id, shape, roi, scales, sizes, attrs", RESIZE_CASES, ids=[c[0] for c in RESIZE_CASES])
def test_resize_gradients_match_finite_differences(case_id, shape, roi, scales, sizes, attrs):
    with onnxnn.set_executor("kernels"):
        check_gradients(node("Resize", attrs, _resize_constants(roi, scales, sizes)), [RNG.standard_normal(shape)])


@pytest.mark.parametrize(
    "case_id, shape, roi, scales, sizes, attrs", RESIZE_CASES[:4], ids=[c[0] for c in RESIZE_CASES[:4]]
)
def test_resize_gradients_in_float32_on_onnxruntime(case_id, shape, roi, scales, sizes, attrs):
    with onnxnn.set_executor("onnxruntime"):
        check_gradients_float32(
            node("Resize", attrs, _resize_constants(roi, scales, sizes)), [RNG.standard_normal(shape)]
        )


# Scales whose resized lengths are not integers (1.7 of 5, 0.6 of 7), as PyTorch exports
# interpolate(scale_factor=...): onnxruntime takes the output size as align_corners' length and
# floors nearest's float32 coordinates (3 / float32(0.6) is 5.0), where onnx's reference takes
# 8.5 and 4.2 and computes in float64; both executors follow onnxruntime (ir/resize_geometry.py).
ONNXRUNTIME_CASES = [
    ("linear-align-corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    ("cubic-align-corners", {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}),
    (
        "nearest-asymmetric-floor",
        {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    ),
    ("linear-pytorch-half-pixel", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
]


def _onnxruntime_resize(x: np.ndarray, scales: np.ndarray, attrs: dict) -> np.ndarray:
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(scales, "scales")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case_id, attrs", ONNXRUNTIME_CASES, ids=[c[0] for c in ONNXRUNTIME_CASES])
def test_resize_with_fractional_lengths_matches_onnxruntime_and_differentiates(case_id, attrs, executor):
    x = RNG.standard_normal((1, 2, 5, 7)).astype(np.float32)
    scales = np.array([1, 1, 1.7, 0.6], np.float32)
    expected = _onnxruntime_resize(x, scales, attrs)
    resize = node("Resize", attrs, [None, scales])
    with onnxnn.set_executor(executor):
        actual = resize(onnxnn.tensor(x)).numpy()
        # A few products of weights (each within rounding of onnxruntime's float32 ones) per output.
        np.testing.assert_allclose(actual, expected, rtol=0, atol=16 * 2.0**-24 * np.abs(x).max() * 4)
        check = check_gradients_float32 if executor == "onnxruntime" else check_gradients
        check(resize, [RNG.standard_normal(x.shape)])


def test_resize_gradient_refuses_tf_crop_and_resize():
    x = onnxnn.tensor(RNG.standard_normal((1, 1, 4, 4)), requires_grad=True)
    attrs = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}
    out = node(
        "Resize",
        attrs,
        [np.array([0, 0, 0.1, 0.1, 1, 1, 0.9, 0.9], np.float32), None, np.array([1, 1, 3, 3], np.int64)],
    )(x)
    with pytest.raises(NotImplementedError, match="tf_crop_and_resize"):
        out.sum().backward()


BLOCK_CASES = [
    ("DepthToSpace", {"blocksize": 2, "mode": "DCR"}, (1, 8, 2, 3)),
    ("DepthToSpace", {"blocksize": 2, "mode": "CRD"}, (2, 8, 3, 2)),
    ("SpaceToDepth", {"blocksize": 2}, (1, 2, 4, 6)),
    ("SpaceToDepth", {"blocksize": 3}, (2, 1, 3, 6)),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("op_type, attrs, shape", BLOCK_CASES)
def test_block_rearrangements_match_the_reference_and_differentiate(op_type, attrs, shape, executor):
    x = RNG.standard_normal(shape)
    expected = reference(op_type, [x.astype(np.float32)], attrs)
    with onnxnn.set_executor(executor):
        out = node(op_type, attrs, [])(onnxnn.tensor(x.astype(np.float32)))
        assert tuple(out.shape) == expected.shape
        np.testing.assert_array_equal(out.numpy(), expected)
        check_gradients(node(op_type, attrs, []), [x])


CROP_CASES = [
    ((5, 6, 3), [3, 4, 3], None),
    ((3, 4, 2), [6, 7, 2], None),
    ((5, 3, 2), [2, 6, 2], None),
    ((5, 6, 3), [4, 9], [-3, -2]),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("shape, target, axes", CROP_CASES)
def test_center_crop_pad_matches_the_reference_and_differentiates(shape, target, axes, executor):
    x = RNG.standard_normal(shape)
    attrs = {} if axes is None else {"axes": axes}
    constants = [np.array(target, np.int64)]
    expected = reference("CenterCropPad", [x.astype(np.float32), *constants], attrs, opset=18)
    with onnxnn.set_executor(executor):
        out = node("CenterCropPad", attrs, constants)(onnxnn.tensor(x.astype(np.float32)))
        assert tuple(out.shape) == expected.shape
        np.testing.assert_array_equal(out.numpy(), expected)
        check_gradients(node("CenterCropPad", attrs, constants), [x])


GRID_CASES = [
    ("linear", "zeros", 0, (1, 2, 4, 5), (1, 3, 2, 2)),
    ("linear", "reflection", 1, (1, 1, 3, 4), (1, 2, 2, 2)),
    ("nearest", "border", 0, (2, 1, 3, 3), (2, 2, 1, 2)),
    ("linear", "border", 1, (1, 1, 2, 3, 3), (1, 2, 1, 2, 3)),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("mode, padding_mode, align_corners, shape, grid_shape", GRID_CASES)
def test_grid_sample_node_matches_the_reference_and_differentiates(
    mode, padding_mode, align_corners, shape, grid_shape, executor
):
    x, grid = RNG.standard_normal(shape), RNG.uniform(-1.2, 1.2, grid_shape)
    attrs = {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners}
    expected = reference("GridSample", [x.astype(np.float32), grid.astype(np.float32)], attrs)
    with onnxnn.set_executor(executor):
        actual = apply_op(
            "GridSample", (onnxnn.tensor(x.astype(np.float32)), onnxnn.tensor(grid.astype(np.float32))), attrs
        ).numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    with onnxnn.set_executor("kernels"):
        check_gradients(lambda a, b: apply_op("GridSample", (a, b), attrs), [x, grid])


@pytest.mark.parametrize("size, align_corners", [([2, 1, 3, 4], 0), ([1, 1, 2, 3, 2], 1)])
def test_affine_grid_node_matches_the_reference_and_differentiates(size, align_corners):
    spatial = len(size) - 2
    theta = RNG.standard_normal((size[0], spatial, spatial + 1))
    expected = reference(
        "AffineGrid", [theta.astype(np.float32), np.array(size, np.int64)], {"align_corners": align_corners}
    )
    apply = node("AffineGrid", {"align_corners": align_corners}, [np.array(size, np.int64)])
    for executor in ("onnxruntime", "kernels"):
        with onnxnn.set_executor(executor):
            out = apply(onnxnn.tensor(theta.astype(np.float32)))
            assert tuple(out.shape) == expected.shape
            np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    with onnxnn.set_executor("kernels"):
        check_gradients(apply, [theta])
