"""ONNX RoiAlign and DeformConv: the kernels against onnx's reference, gradients on both executors.

Forward: onnxnn's kernels (onnxnn/kernels/detection.py) and the recorded node on each executor
against ``onnx.reference`` (the implementation that generated the official node tests), over the
attributes the node tests and detection models use (the official DeformConv node tests run on the
kernels in tests/kernels/test_node_tests_on_kernels.py): RoiAlign's modes, coordinate transformations,
fixed and adaptive sampling (regions of different sizes, one past the image, one empty);
DeformConv's pads, strides, dilations, groups, offset groups, mask and bias. The reference
accumulates in float64 and rounds once; the kernels round each of at most
``4 * samples`` (RoiAlign) or ``4 * C * kH * kW`` (DeformConv) products and sums, so they agree within
``2 * gamma(terms)`` of the sum of the magnitudes (float32 here, with unit-scale data).
Gradients: float64 central differences (tests/gradcheck.py) of the node run by each executor,
w.r.t. every float input (RoiAlign: ``X`` only), and a second derivative of DeformConv.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.kernels import kernels
from onnxnn.runtime.ops._common import apply_op

from gradcheck import check_gradients
from tolerances import gamma

EXECUTORS = ["kernels", "onnxruntime"]


def _reference(op_type: str, inputs: list, attrs: dict) -> np.ndarray:
    names = [f"in{i}" if value is not None else "" for i, value in enumerate(inputs)]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["out"], **attrs)],
        "case",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
            for name, value in zip(names, inputs)
            if name
        ],
        [helper.make_tensor_value_info("out", onnx.TensorProto.UNDEFINED, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    feeds = {name: value for name, value in zip(names, inputs) if name}
    return ReferenceEvaluator(model).run(None, feeds)[0]


def _tensor(array):
    return None if array is None else onnxnn.tensor(array)


# ---------------------------------------------------------------- RoiAlign

ROIS = np.array(
    [
        [0.3, 1.1, 8.2, 7.7],  # inside
        [2.5, -3.0, 13.4, 9.1],  # partly past the top and right
        [1.0, 1.0, 1.5, 1.2],  # smaller than a bin
        [4.0, 4.0, 4.0, 4.0],
    ]
)  # empty
BATCH_INDICES = np.array([1, 0, 1, 0], dtype=np.int64)

# (id, attributes)
ROI_CASES = [
    ("avg_adaptive", {"output_height": 2, "output_width": 3, "spatial_scale": 0.5}),
    (
        "avg_ratio_2_output_half_pixel",
        {
            "output_height": 3,
            "output_width": 2,
            "sampling_ratio": 2,
            "coordinate_transformation_mode": "output_half_pixel",
        },
    ),
    ("max_ratio_2", {"mode": "max", "output_height": 2, "output_width": 2, "sampling_ratio": 2, "spatial_scale": 0.5}),
    (
        "max_adaptive_output_half_pixel",
        {
            "mode": "max",
            "output_height": 2,
            "output_width": 3,
            "coordinate_transformation_mode": "output_half_pixel",
            "spatial_scale": 0.5,
        },
    ),
]
ROI_IDS = [case[0] for case in ROI_CASES]


def _roi_arrays(dtype=np.float32, seed=0):
    x = np.random.default_rng(seed).standard_normal((2, 3, 5, 6)).astype(dtype)
    return x, ROIS.astype(dtype), BATCH_INDICES


def _roi_bound(x, attrs):
    # Each output sums at most 4 * samples weighted taps (weights in [0, 1]); samples per bin stay
    # below 25 for these regions.
    return 2 * gamma(4 * 25 + 2, np.float32) * 4 * 25 * np.abs(x).max()


@pytest.mark.parametrize("case", ROI_CASES, ids=ROI_IDS)
def test_roi_align_kernel_matches_the_reference(case):
    _, attrs = case
    inputs = _roi_arrays()
    expected = _reference("RoiAlign", list(inputs), attrs)
    actual = kernels.lookup("RoiAlign")(np, list(inputs), dict(attrs))[0]
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_roi_bound(inputs[0], attrs))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", ROI_CASES, ids=ROI_IDS)
def test_recorded_roi_align_matches_the_reference(case, executor):
    _, attrs = case
    inputs = _roi_arrays()
    with onnxnn.set_executor(executor):
        actual = apply_op("RoiAlign", tuple(_tensor(a) for a in inputs), dict(attrs)).numpy()
    np.testing.assert_allclose(
        actual, _reference("RoiAlign", list(inputs), attrs), rtol=0, atol=_roi_bound(inputs[0], attrs)
    )


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", ROI_CASES, ids=ROI_IDS)
def test_roi_align_gradients_match_finite_differences(case, executor):
    _, attrs = case
    x, rois, batch_indices = _roi_arrays(np.float64, seed=1)
    with onnxnn.set_executor(executor):
        check_gradients(
            lambda x, r, b: apply_op("RoiAlign", (x, r, b), dict(attrs)),
            [x, rois, batch_indices],
            requires_grad=[True, False, False],
        )


def test_roi_align_regions_take_no_gradient():
    x = onnxnn.tensor(_roi_arrays(np.float64)[0], requires_grad=True)
    rois = onnxnn.tensor(ROIS, requires_grad=True)
    out = apply_op("RoiAlign", (x, rois, onnxnn.tensor(BATCH_INDICES)), {"output_height": 2, "output_width": 2})
    out.sum().backward()
    assert x.grad is not None and rois.grad is None


# ---------------------------------------------------------------- DeformConv

# (id, X shape, W shape, attributes, with bias, with mask)
DEFORM_CASES = [
    ("defaults", (1, 2, 4, 4), (3, 2, 2, 2), {}, False, False),
    ("pads_strides_bias_mask", (2, 2, 5, 4), (2, 2, 3, 2), {"pads": [1, 0, 1, 1], "strides": [2, 1]}, True, True),
    (
        "dilations_groups",
        (1, 4, 5, 5),
        (4, 2, 2, 2),
        {"dilations": [2, 1], "group": 2, "pads": [1, 1, 0, 0]},
        True,
        False,
    ),
    ("offset_groups_mask", (1, 4, 4, 5), (2, 4, 2, 2), {"offset_group": 2, "strides": [1, 2]}, False, True),
]
DEFORM_IDS = [case[0] for case in DEFORM_CASES]


def _deform_arrays(case, dtype=np.float32, seed=0):
    _, x_shape, w_shape, attrs, with_bias, with_mask = case
    rng = np.random.default_rng(seed)
    kernel = w_shape[2:]
    strides, dilations = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    output = [
        (x_shape[2 + i] + pads[i] + pads[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1
        for i in range(2)
    ]
    offset_group = attrs.get("offset_group", 1)
    taps = offset_group * kernel[0] * kernel[1]
    arrays = [
        rng.standard_normal(x_shape),
        rng.standard_normal(w_shape),
        rng.uniform(-1.7, 1.7, (x_shape[0], 2 * taps, *output)),  # taps up to 2 pixels outside
        rng.standard_normal(w_shape[0]) if with_bias else None,
        rng.uniform(0.2, 1.0, (x_shape[0], taps, *output)) if with_mask else None,
    ]
    return [None if a is None else a.astype(dtype) for a in arrays]


def _deform_bound(case, arrays):
    w_shape = case[2]
    terms = 4 * w_shape[1] * w_shape[2] * w_shape[3] + 2
    # |W| * |X| summed over the terms (bilinear weights sum to at most 1, the mask to at most 1).
    return 2 * gamma(terms, np.float32) * np.abs(arrays[1]).max() * np.abs(arrays[0]).max() * terms


@pytest.mark.parametrize("case", DEFORM_CASES, ids=DEFORM_IDS)
def test_deform_conv_kernel_matches_the_reference(case):
    arrays = _deform_arrays(case)
    attrs = case[3]
    expected = _reference("DeformConv", arrays, attrs)
    actual = kernels.lookup("DeformConv")(np, list(arrays), dict(attrs))[0]
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_deform_bound(case, arrays))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", DEFORM_CASES, ids=DEFORM_IDS)
def test_recorded_deform_conv_matches_the_reference(case, executor):
    arrays = _deform_arrays(case)
    with onnxnn.set_executor(executor):
        actual = apply_op("DeformConv", tuple(_tensor(a) for a in arrays), dict(case[3])).numpy()
    np.testing.assert_allclose(
        actual, _reference("DeformConv", arrays, case[3]), rtol=0, atol=_deform_bound(case, arrays)
    )


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", DEFORM_CASES, ids=DEFORM_IDS)
def test_deform_conv_gradients_match_finite_differences(case, executor):
    arrays = _deform_arrays(case, np.float64, seed=2)
    given = [index for index, array in enumerate(arrays) if array is not None]
    attrs = dict(case[3])

    def deform_conv(*tensors):
        inputs = [None] * 5
        for index, tensor in zip(given, tensors):
            inputs[index] = tensor
        return apply_op("DeformConv", tuple(inputs), attrs)

    with onnxnn.set_executor(executor):
        check_gradients(deform_conv, [arrays[index] for index in given])


def test_deform_conv_second_derivative_matches_finite_differences_of_the_gradient():
    # With create_graph the rule's recomputation hangs off the inputs' history: d/d offset of
    # <grad_X, v> against central differences of grad_X along a direction u of the offsets.
    case = DEFORM_CASES[1]
    x_array, w_array, offset_array, bias_array, mask_array = _deform_arrays(case, np.float64, seed=3)
    rng = np.random.default_rng(4)
    v, u = rng.standard_normal(x_array.shape), rng.standard_normal(offset_array.shape)

    def gradient(offset_values, create_graph):
        x = onnxnn.tensor(x_array, requires_grad=True)
        offset = onnxnn.tensor(offset_values, requires_grad=True)
        out = apply_op(
            "DeformConv",
            (x, onnxnn.tensor(w_array), offset, onnxnn.tensor(bias_array), onnxnn.tensor(mask_array)),
            dict(case[3]),
        )
        (g,) = onnxnn.autograd.grad((out**2).sum(), x, create_graph=create_graph)
        return offset, g

    eps = 1e-6
    with onnxnn.set_executor("kernels"):
        offset, g = gradient(offset_array, True)
        (second,) = onnxnn.autograd.grad((g * onnxnn.tensor(v)).sum(), offset)
        analytic = float((second.numpy() * u).sum())
        numeric = float(
            (
                (
                    (
                        gradient(offset_array + eps * u, False)[1].numpy()
                        - gradient(offset_array - eps * u, False)[1].numpy()
                    )
                    / (2 * eps)
                )
                * v
            ).sum()
        )
    # Central differences in float64 at eps 1e-6 (see gradcheck.py): ~1e-9 relative.
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric))


def test_deform_conv_graph_exports_and_runs_on_onnxruntime():
    class Deformable(onnxnn.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = onnxnn.nn.Parameter(onnxnn.randn(2, 2, 3, 2))

        def forward(self, x, offset):
            return apply_op("DeformConv", (x, self.weight, offset), {"pads": [1, 0, 1, 1], "strides": [2, 1]})

    arrays = _deform_arrays(DEFORM_CASES[1])
    model = Deformable().eval()
    proto = to_onnx(model, (onnxnn.tensor(arrays[0]), onnxnn.tensor(arrays[2])))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [graph_input.name for graph_input in session.get_inputs()]
    actual = session.run(None, dict(zip(names, (arrays[0], arrays[2]))))[0]
    expected = _reference("DeformConv", [arrays[0], model.weight.detach().numpy(), arrays[2]], DEFORM_CASES[1][3])
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_deform_bound(DEFORM_CASES[1], arrays))


@pytest.mark.parametrize(
    "op_type, shapes, message",
    [
        ("DeformConv", [(1, 2, 4, 4), (3, 3, 2, 2), (1, 8, 3, 3)], "inconsistent"),
        ("DeformConv", [(1, 2, 4, 4), (3, 2, 2, 2), (1, 6, 3, 3)], "offset has 6 channels"),
        ("DeformConv", [(1, 2, 4), (3, 2, 2), (1, 4, 3)], "only 2-D inputs"),
    ],
)
def test_deform_conv_kernel_rejects_inconsistent_shapes(op_type, shapes, message):
    arrays = [np.zeros(shape, dtype=np.float32) for shape in shapes]
    with pytest.raises((ValueError, NotImplementedError), match=message):
        kernels.lookup(op_type)(np, arrays, {})
