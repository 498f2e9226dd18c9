"""Conv and ConvTranspose: shape rules, values, gradients, and PyTorch's conv*d functions.

Expected values come from a direct numpy convolution written below, from the ONNX backend node
cases that ship with the ``onnx`` package (replayed node by node), and from the models PyTorch
exported into ``onnx/backend/test/data/pytorch-converted``.

onnxruntime's CPU provider has no float64 kernels for Conv, ConvTranspose, AveragePool, LRN,
InstanceNormalization or the global pools, so gradients through them are checked in float32 with
:func:`check_gradients_float32` (wider eps and tolerance; exact for these linear ops up to rounding).
The helpers at the top are shared with the pooling and normalization tests.
"""

from __future__ import annotations

import glob
import importlib
import os
from typing import Callable

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.realization import plan as executor_plan
from onnxnn.runtime.realization import realize
from onnxnn.runtime.tensor import apply_op

from tolerances import accumulation_bound, assert_within, conv_bound, conv_transpose_bound, sum_bound, unit_roundoff

# ---------------------------------------------------------------- shared helpers


def check_gradients_float32(
    function: Callable,
    inputs: list,
    *,
    eps: float = 1e-2,
    rtol: float = 1e-2,
    atol: float = 2e-3,
    seed: int = 0,
    exhaustive_limit: int = 48,
) -> None:
    """Backward through ``function`` against central differences, all in float32.

    For ops onnxruntime runs only in float32. Small inputs are checked element by element, larger
    ones along a random direction, as ``gradcheck.check_gradients`` does in float64.

    The tolerances are those of central differences in float32, not of the backward pass: with
    step ``eps`` they err by the truncation ``eps**2 / 6 * |f3|`` (f3 the third derivative; 1.7e-5 |f3| at 1e-2) plus
    the rounding of the two evaluations, ``gamma(n) * sum |output * cotangent| / eps`` for n
    output elements (about 6e-6 n per unit of output at 1e-2), which rtol 1e-2 and atol 2e-3
    cover for the unit-scale inputs and outputs of these cases; a wrong rule is off by O(1).
    """
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(a, dtype=np.float32) for a in inputs]
    tensors = [onnxnn.tensor(a, requires_grad=True) for a in arrays]
    output = function(*tensors)
    cotangent = rng.standard_normal(output.shape).astype(np.float32)
    output.backward(onnxnn.tensor(cotangent))

    def evaluate(shifted):
        with onnxnn.no_grad():
            value = function(*[onnxnn.tensor(a) for a in shifted])
        return float(np.sum(value.numpy().astype(np.float64) * cotangent))

    for index, array in enumerate(arrays):
        analytic = tensors[index].grad
        assert analytic is not None, f"input {index} got no gradient"
        analytic = analytic.numpy().astype(np.float64)
        assert analytic.shape == array.shape
        if array.size <= exhaustive_limit:
            numeric = np.zeros(array.shape)
            for position in np.ndindex(array.shape):
                shifted = [a.copy() for a in arrays]
                shifted[index][position] += eps
                up = evaluate(shifted)
                shifted[index][position] -= 2 * eps
                numeric[position] = (up - evaluate(shifted)) / (2 * eps)
            np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of input {index}")
        else:
            direction = rng.standard_normal(array.shape).astype(np.float32)
            shifted = [a.copy() for a in arrays]
            shifted[index] = array + eps * direction
            up = evaluate(shifted)
            shifted[index] = array - eps * direction
            numeric = (up - evaluate(shifted)) / (2 * eps)
            np.testing.assert_allclose(
                float(np.sum(analytic * direction)),
                numeric,
                rtol=rtol,
                atol=atol * np.sqrt(array.size),
                err_msg=f"directional gradient of input {index}",
            )


def onnx_node_cases(module_name: str, op_type: str, skip: tuple = ()) -> list:
    """The ONNX backend node cases of ``onnx.backend.test.case.node.<module_name>`` as pytest params.

    Each export function of the module builds a node and its inputs and expected outputs (computed
    by onnx's reference implementation) and hands them to ``expect``, captured here.
    """
    module = importlib.import_module(f"onnx.backend.test.case.node.{module_name}")
    from onnx.backend.test.case.base import Base

    captured = []

    def capture(node, inputs, outputs, name, **kwargs):
        if node.op_type == op_type and name not in skip:
            captured.append(pytest.param(node, list(inputs), list(outputs), id=name))

    original = module.expect
    module.expect = capture
    try:
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and issubclass(cls, Base) and cls.__module__ == module.__name__:
                for attribute in sorted(vars(cls)):
                    if attribute.startswith("export"):
                        np.random.seed(0)
                        getattr(cls, attribute)()
    finally:
        module.expect = original
    return captured


def node_attributes(node: onnx.NodeProto) -> dict:
    attributes = {}
    for attribute in node.attribute:
        value = onnx.helper.get_attribute_value(attribute)
        attributes[attribute.name] = value.decode() if isinstance(value, bytes) else value
    return attributes


def replay_node(node: onnx.NodeProto, inputs: list) -> list:
    """Runs one ONNX node through ``apply_op`` (absent optional inputs as None) and returns numpy outputs."""
    remaining = iter(inputs)
    operands = [None if name == "" else onnxnn.tensor(np.asarray(next(remaining))) for name in node.input]
    while operands and operands[-1] is None:
        operands.pop()
    result = apply_op(node.op_type, tuple(operands), node_attributes(node), num_outputs=len(node.output))
    results = list(result) if isinstance(result, tuple) else [result]
    realize([tensor._value for tensor in results])  # one run: random or stateful nodes agree with themselves
    for tensor in results:
        assert tuple(tensor.shape) == tensor.numpy().shape, "shape rule disagrees with the computed value"
    return [tensor.numpy() for tensor in results]


def pytorch_converted_cases(prefixes: tuple, op_types: set) -> list:
    """Single-node models PyTorch exported into onnx's test data, with their stored inputs and outputs."""
    base = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "pytorch-converted")
    cases = []
    for directory in sorted(glob.glob(os.path.join(base, "test_*"))):
        name = os.path.basename(directory)[len("test_") :]
        if not name.startswith(prefixes):
            continue
        model = onnx.load(os.path.join(directory, "model.onnx"))
        if len(model.graph.node) != 1 or model.graph.node[0].op_type not in op_types:
            continue
        cases.append(pytest.param(directory, id=name))
    return cases


def replay_pytorch_converted(directory: str) -> None:
    model = onnx.load(os.path.join(directory, "model.onnx"))
    initializers = {tensor.name: onnx.numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    data = os.path.join(directory, "test_data_set_0")
    fed = [name for name in (i.name for i in model.graph.input) if name not in initializers]
    values = dict(initializers)
    for position, name in enumerate(fed):
        values[name] = onnx.numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"input_{position}.pb")))
    node = model.graph.node[0]
    (actual,) = replay_node(node, [values[name] for name in node.input if name])
    expected = onnx.numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "output_0.pb")))
    # Against stored float32 results of another implementation (PyTorch), summed in an unknown
    # order: onnx's own backend-test tolerance (rtol 1e-3, which exceeds 2 gamma(n) for the
    # few hundred terms of these cases by far), atol for outputs near zero.
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5)


# ---------------------------------------------------------------- numpy references


def conv_reference(x, w, b=None, strides=None, pads_begin=None, pads_end=None, dilations=None, group=1):
    """Direct cross-correlation: y[n, o, p] = sum_{c, k} x_padded[n, c, p * s + k * d] * w[o, c, k]."""
    rank = x.ndim - 2
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    pads_begin = pads_begin or [0] * rank
    pads_end = pads_end if pads_end is not None else pads_begin
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end)))
    kernel = w.shape[2:]
    output = [(padded.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(rank)]
    out_channels, per_group_in = w.shape[0], w.shape[1]
    per_group_out = out_channels // group
    y = np.zeros((x.shape[0], out_channels, *output))
    for position in np.ndindex(*output):
        for offset in np.ndindex(*kernel):
            where = tuple(position[i] * strides[i] + offset[i] * dilations[i] for i in range(rank))
            patch = padded[(slice(None), slice(None)) + where]
            for g in range(group):
                taps = w[(slice(g * per_group_out, (g + 1) * per_group_out), slice(None)) + offset]
                y[(slice(None), slice(g * per_group_out, (g + 1) * per_group_out)) + position] += (
                    patch[:, g * per_group_in : (g + 1) * per_group_in] @ taps.T
                )
    if b is not None:
        y += b.reshape((1, -1) + (1,) * rank)
    return y


def conv_transpose_reference(
    x, w, b=None, strides=None, pads_begin=None, output=None, dilations=None, group=1, output_padding=None
):
    """Scatter every input element times the kernel, then crop ``pads_begin`` and keep ``output`` positions."""
    rank = x.ndim - 2
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    pads_begin = pads_begin or [0] * rank
    output_padding = output_padding or [0] * rank
    kernel = w.shape[2:]
    per_group_in, per_group_out = x.shape[1] // group, w.shape[1]
    full = [
        strides[i] * (x.shape[2 + i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(rank)
    ]
    scattered = np.zeros((x.shape[0], per_group_out * group, *full))
    for position in np.ndindex(*x.shape[2:]):
        for offset in np.ndindex(*kernel):
            where = tuple(position[i] * strides[i] + offset[i] * dilations[i] for i in range(rank))
            for g in range(group):
                values = x[(slice(None), slice(g * per_group_in, (g + 1) * per_group_in)) + position]
                taps = w[(slice(g * per_group_in, (g + 1) * per_group_in), slice(None)) + offset]
                scattered[(slice(None), slice(g * per_group_out, (g + 1) * per_group_out)) + where] += values @ taps
    if output is None:
        output = [full[i] - 2 * pads_begin[i] for i in range(rank)]
    result = np.zeros((x.shape[0], per_group_out * group, *output))
    crop = tuple(slice(pads_begin[i], pads_begin[i] + output[i]) for i in range(rank))
    kept = scattered[(slice(None), slice(None)) + crop]
    result[(slice(None), slice(None)) + tuple(slice(0, s) for s in kept.shape[2:])] = kept
    if b is not None:
        result += b.reshape((1, -1) + (1,) * rank)
    return result


_rng = np.random.default_rng(7)


def randn(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


# ---------------------------------------------------------------- conv*d against numpy

CONV_CASES = [
    # id, function, input shape, weight shape, keyword arguments, reference arguments
    ("1d_default", ops.conv1d, (2, 3, 7), (4, 3, 3), {}, {}),
    (
        "1d_stride2_pad1",
        ops.conv1d,
        (2, 2, 8),
        (3, 2, 3),
        {"stride": 2, "padding": 1},
        {"strides": [2], "pads_begin": [1]},
    ),
    (
        "1d_dilation2_groups2",
        ops.conv1d,
        (1, 4, 9),
        (4, 2, 3),
        {"dilation": 2, "groups": 2},
        {"dilations": [2], "group": 2},
    ),
    ("2d_default", ops.conv2d, (2, 3, 6, 5), (4, 3, 3, 3), {}, {}),
    (
        "2d_stride2_pad1",
        ops.conv2d,
        (1, 2, 7, 6),
        (3, 2, 3, 3),
        {"stride": 2, "padding": 1},
        {"strides": [2, 2], "pads_begin": [1, 1]},
    ),
    (
        "2d_rectangular_arguments",
        ops.conv2d,
        (1, 2, 7, 8),
        (2, 2, 3, 2),
        {"stride": (2, 1), "padding": (0, 1), "dilation": (1, 2)},
        {"strides": [2, 1], "pads_begin": [0, 1], "dilations": [1, 2]},
    ),
    ("2d_groups2", ops.conv2d, (2, 4, 5, 5), (6, 2, 3, 3), {"groups": 2}, {"group": 2}),
    (
        "2d_depthwise",
        ops.conv2d,
        (1, 3, 5, 5),
        (3, 1, 3, 3),
        {"groups": 3, "padding": 1},
        {"group": 3, "pads_begin": [1, 1]},
    ),
    (
        "2d_same_even_kernel",
        ops.conv2d,
        (1, 2, 5, 5),
        (2, 2, 4, 4),
        {"padding": "same"},
        {"pads_begin": [1, 1], "pads_end": [2, 2]},
    ),
    (
        "2d_same_dilated",
        ops.conv2d,
        (1, 2, 6, 6),
        (2, 2, 3, 3),
        {"padding": "same", "dilation": 2},
        {"pads_begin": [2, 2], "dilations": [2, 2]},
    ),
    ("2d_valid", ops.conv2d, (1, 2, 5, 4), (2, 2, 2, 2), {"padding": "valid"}, {}),
    (
        "3d_stride_padding",
        ops.conv3d,
        (1, 2, 4, 5, 4),
        (2, 2, 2, 3, 2),
        {"stride": 2, "padding": 1},
        {"strides": [2, 2, 2], "pads_begin": [1, 1, 1]},
    ),
]


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(
    "case_id, function, input_shape, weight_shape, kwargs, reference", CONV_CASES, ids=[case[0] for case in CONV_CASES]
)
def test_conv_matches_numpy(case_id, function, input_shape, weight_shape, kwargs, reference, with_bias):
    x, w = randn(*input_shape).astype(np.float32), randn(*weight_shape).astype(np.float32)
    b = randn(weight_shape[0]).astype(np.float32) if with_bias else None
    result = function(onnxnn.tensor(x), onnxnn.tensor(w), None if b is None else onnxnn.tensor(b), **kwargs)
    expected = conv_reference(x, w, b, **reference)
    assert tuple(result.shape) == expected.shape
    # The reference sums in float64 (exact to float32's eyes): the bound of one float32 computation.
    assert_within(result.numpy(), expected, conv_bound(x, w, b, groups=reference.get("group", 1)) / 2)


def test_conv2d_accepts_unbatched_input():
    x, w = randn(3, 6, 6).astype(np.float32), randn(2, 3, 3, 3).astype(np.float32)
    result = ops.conv2d(onnxnn.tensor(x), onnxnn.tensor(w), padding=1)
    assert result.shape == (2, 6, 6)
    assert_within(result.numpy(), conv_reference(x[None], w, pads_begin=[1, 1])[0], conv_bound(x[None], w)[0] / 2)


def test_conv2d_records_one_conv_node_with_pytorch_grad_fn_name():
    x = onnxnn.tensor(randn(1, 2, 5, 5).astype(np.float32))
    w = onnxnn.tensor(randn(3, 2, 3, 3).astype(np.float32), requires_grad=True)
    result = ops.conv2d(x, w, stride=2)
    assert result._value.node.op_type == "Conv"
    assert result._value.node.attrs["strides"] == [2, 2]
    assert result.grad_fn.name() == "ConvolutionBackward0"


CONV_TRANSPOSE_CASES = [
    # id, function, input shape, weight shape, keyword arguments, reference arguments
    ("1d_default", ops.conv_transpose1d, (2, 3, 4), (3, 2, 3), {}, {}),
    (
        "1d_stride2_pad1_output_padding1",
        ops.conv_transpose1d,
        (1, 2, 5),
        (2, 3, 3),
        {"stride": 2, "padding": 1, "output_padding": 1},
        {"strides": [2], "pads_begin": [1], "output": [10], "output_padding": [1]},
    ),
    ("2d_stride2", ops.conv_transpose2d, (1, 2, 3, 4), (2, 3, 3, 3), {"stride": 2}, {"strides": [2, 2]}),
    (
        "2d_stride3_2_output_padding",
        ops.conv_transpose2d,
        (2, 2, 3, 3),
        (2, 2, 3, 3),
        {"stride": (3, 2), "padding": 1, "output_padding": (2, 1)},
        {"strides": [3, 2], "pads_begin": [1, 1], "output": [9, 6], "output_padding": [2, 1]},
    ),
    (
        "2d_groups2_dilation2",
        ops.conv_transpose2d,
        (1, 4, 3, 3),
        (4, 1, 2, 2),
        {"groups": 2, "dilation": 2},
        {"group": 2, "dilations": [2, 2]},
    ),
    ("3d_stride2", ops.conv_transpose3d, (1, 2, 2, 3, 2), (2, 1, 2, 2, 2), {"stride": 2}, {"strides": [2, 2, 2]}),
]


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize(
    "case_id, function, input_shape, weight_shape, kwargs, reference",
    CONV_TRANSPOSE_CASES,
    ids=[case[0] for case in CONV_TRANSPOSE_CASES],
)
def test_conv_transpose_matches_numpy(case_id, function, input_shape, weight_shape, kwargs, reference, with_bias):
    x, w = randn(*input_shape).astype(np.float32), randn(*weight_shape).astype(np.float32)
    channels = weight_shape[1] * kwargs.get("groups", 1)
    b = randn(channels).astype(np.float32) if with_bias else None
    result = function(onnxnn.tensor(x), onnxnn.tensor(w), None if b is None else onnxnn.tensor(b), **kwargs)
    expected = conv_transpose_reference(x, w, b, **reference)
    assert tuple(result.shape) == expected.shape
    assert_within(result.numpy(), expected, conv_transpose_bound(x, w, b, groups=kwargs.get("groups", 1)) / 2)


def test_conv_transpose_is_the_adjoint_of_conv():
    # <conv(x, w), y> == <x, conv_transpose(y, w)> for matching stride/padding/dilation.
    x, w, y = randn(1, 2, 7, 7), randn(3, 2, 3, 3), randn(1, 3, 4, 4)
    forward = ops.conv2d(
        onnxnn.tensor(x, dtype=onnxnn.float32), onnxnn.tensor(w, dtype=onnxnn.float32), stride=2, padding=1
    ).numpy()
    backward = ops.conv_transpose2d(
        onnxnn.tensor(y, dtype=onnxnn.float32), onnxnn.tensor(w, dtype=onnxnn.float32), stride=2, padding=1
    ).numpy()
    # Exactly equal in exact arithmetic on the float32-rounded x, w, y. Each side errs by its float32
    # convolution's rounding (weighted by the other factor) plus the rounding of x and y to float32.
    x32, w32, y32 = (a.astype(np.float32) for a in (x, w, y))
    forward_error = np.sum(np.abs(y) * conv_bound(x32, w32) / 2)
    backward_error = np.sum(np.abs(x) * conv_transpose_bound(y32, w32) / 2)
    rounding = unit_roundoff(np.float32) * (np.sum(np.abs(forward * y)) + np.sum(np.abs(x * backward)))
    assert abs(np.sum(forward * y) - np.sum(x * backward)) <= forward_error + backward_error + 2 * rounding


# ---------------------------------------------------------------- the ONNX spec's node cases


@pytest.mark.parametrize(
    "node, inputs, outputs", onnx_node_cases("conv", "Conv") + onnx_node_cases("convtranspose", "ConvTranspose")
)
def test_onnx_backend_node_case(node, inputs, outputs):
    for actual, expected in zip(replay_node(node, inputs), outputs):
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("directory", pytorch_converted_cases(("Conv",), {"Conv", "ConvTranspose"}))
def test_pytorch_exported_model(directory):
    replay_pytorch_converted(directory)


@pytest.mark.parametrize(
    "attrs, input_shape, weight_shape, expected_spatial",
    [
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 1, 5, 6), (1, 1, 3, 3), (3, 3)),
        ({"auto_pad": "SAME_LOWER", "strides": [1, 1]}, (1, 1, 5, 6), (1, 1, 4, 4), (5, 6)),
        ({"auto_pad": "VALID", "strides": [2, 1]}, (1, 1, 5, 6), (1, 1, 3, 3), (2, 4)),
        ({"pads": [0, 1, 2, 0], "dilations": [2, 1]}, (1, 1, 5, 6), (1, 1, 3, 3), (3, 5)),
    ],
)
def test_conv_node_shape_rule_follows_the_spec(attrs, input_shape, weight_shape, expected_spatial):
    x = onnxnn.tensor(randn(*input_shape).astype(np.float32))
    w = onnxnn.tensor(randn(*weight_shape).astype(np.float32))
    result = apply_op("Conv", (x, w), attrs)
    assert tuple(result.shape[2:]) == expected_spatial
    assert result.numpy().shape == tuple(result.shape)


@pytest.mark.parametrize(
    "attrs, expected_spatial",
    [
        ({"strides": [2], "output_shape": [10]}, (10,)),
        ({"strides": [2], "output_shape": [8], "auto_pad": "SAME_UPPER"}, (8,)),
        ({"strides": [2], "auto_pad": "SAME_LOWER"}, (8,)),
        ({"strides": [4], "auto_pad": "SAME_UPPER"}, (15,)),  # onnxruntime never grows past the uncropped size
        ({"strides": [2], "pads": [1, 2], "output_padding": [1]}, (7,)),
    ],
)
def test_conv_transpose_node_shape_rule(attrs, expected_spatial):
    x = onnxnn.tensor(randn(1, 2, 4).astype(np.float32))
    w = onnxnn.tensor(randn(2, 2, 3).astype(np.float32))
    result = apply_op("ConvTranspose", (x, w), attrs)
    assert tuple(result.shape[2:]) == expected_spatial
    assert result.numpy().shape == tuple(result.shape)


# ---------------------------------------------------------------- gradients

GRADIENT_CASES = [
    # id, op type, attributes, input shape, weight shape, bias size
    ("conv1d_plain", "Conv", {}, (2, 2, 5), (3, 2, 3), 3),
    ("conv1d_stride2_uneven", "Conv", {"strides": [2]}, (1, 2, 6), (2, 2, 3), 2),
    ("conv1d_dilation2_pads", "Conv", {"dilations": [2], "pads": [2, 1]}, (2, 1, 6), (2, 1, 3), 2),
    ("conv2d_stride2_pad1", "Conv", {"strides": [2, 2], "pads": [1, 1, 1, 1]}, (1, 2, 5, 4), (2, 2, 3, 3), 2),
    (
        "conv2d_stride3_pads_not_dividing",
        "Conv",
        {"strides": [3, 2], "pads": [0, 1, 1, 0]},
        (1, 1, 6, 5),
        (2, 1, 2, 2),
        2,
    ),
    ("conv2d_dilation2", "Conv", {"dilations": [2, 2]}, (1, 2, 5, 5), (2, 2, 2, 2), 2),
    ("conv2d_groups2", "Conv", {"group": 2, "pads": [1, 0, 1, 0]}, (2, 4, 3, 3), (4, 2, 2, 2), 4),
    ("conv2d_depthwise", "Conv", {"group": 3, "strides": [2, 2]}, (1, 3, 4, 4), (3, 1, 2, 2), 3),
    ("conv2d_same_upper_stride2", "Conv", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 1, 4, 5), (2, 1, 2, 3), 2),
    ("conv2d_same_lower", "Conv", {"auto_pad": "SAME_LOWER"}, (1, 1, 4, 4), (1, 1, 2, 2), 1),
    (
        "conv3d_stride2_pad1",
        "Conv",
        {"strides": [2, 1, 2], "pads": [1, 0, 0, 1, 1, 0]},
        (1, 2, 3, 3, 4),
        (2, 2, 2, 2, 2),
        2,
    ),
    ("conv_transpose1d_plain", "ConvTranspose", {}, (2, 2, 3), (2, 3, 3), 3),
    (
        "conv_transpose1d_stride2_output_padding",
        "ConvTranspose",
        {"strides": [2], "output_padding": [1], "pads": [1, 1]},
        (1, 2, 4),
        (2, 2, 3),
        2,
    ),
    ("conv_transpose1d_output_shape", "ConvTranspose", {"strides": [2], "output_shape": [10]}, (1, 1, 4), (1, 2, 3), 2),
    (
        "conv_transpose1d_same_upper",
        "ConvTranspose",
        {"strides": [2], "auto_pad": "SAME_UPPER"},
        (1, 1, 3),
        (1, 1, 4),
        1,
    ),
    (
        "conv_transpose2d_stride2_pads",
        "ConvTranspose",
        {"strides": [2, 2], "pads": [1, 0, 0, 1]},
        (1, 2, 3, 3),
        (2, 2, 3, 2),
        2,
    ),
    (
        "conv_transpose2d_groups2_dilation2",
        "ConvTranspose",
        {"group": 2, "dilations": [2, 2]},
        (1, 4, 2, 2),
        (4, 1, 2, 2),
        2,
    ),
    ("conv_transpose3d_stride2", "ConvTranspose", {"strides": [2, 2, 1]}, (1, 2, 2, 2, 2), (2, 1, 2, 2, 2), 1),
    (
        "conv_transpose2d_depthwise_stride3",
        "ConvTranspose",
        {"group": 2, "strides": [3, 3], "output_padding": [2, 1]},
        (1, 2, 2, 2),
        (2, 1, 2, 2),
        2,
    ),
]


@pytest.mark.parametrize(
    "case_id, op_type, attrs, input_shape, weight_shape, bias_size",
    GRADIENT_CASES,
    ids=[case[0] for case in GRADIENT_CASES],
)
def test_gradients_match_finite_differences(case_id, op_type, attrs, input_shape, weight_shape, bias_size):
    # Conv and ConvTranspose are bilinear, so a wide eps is exact up to float32 rounding.
    check_gradients_float32(
        lambda x, w, b: apply_op(op_type, (x, w, b), attrs),
        [randn(*input_shape), randn(*weight_shape), randn(bias_size)],
        eps=0.25,
    )


def test_conv2d_gradient_through_the_tensor_function():
    check_gradients_float32(
        lambda x, w, b: ops.conv2d(x, w, b, stride=2, padding="valid", dilation=(1, 2)),
        [randn(2, 2, 5, 6), randn(3, 2, 2, 2), randn(3)],
        eps=0.25,
    )


def test_second_order_gradient_of_conv():
    # d/dw <d<conv(x, w), c>/dx, u> runs the gradient rule of the ConvTranspose that Conv's backward emitted.
    x0, c, u = randn(1, 2, 5, 5).astype(np.float32), randn(1, 2, 3, 3).astype(np.float32), randn(1, 2, 5, 5)

    def input_gradient_projection(w):
        with onnxnn.enable_grad():  # the finite differences evaluate this under no_grad
            x = onnxnn.tensor(x0, requires_grad=True)
            (grad_x,) = onnxnn.autograd.grad(
                ops.conv2d(x, w, stride=2, padding=1), x, onnxnn.tensor(c), create_graph=True
            )
            return (grad_x * onnxnn.tensor(u.astype(np.float32))).sum().reshape(1)

    check_gradients_float32(input_gradient_projection, [randn(2, 2, 3, 3)], eps=0.25)


def test_weight_gradient_of_a_sum_is_the_sum_of_input_patches():
    x = randn(2, 2, 5, 5).astype(np.float32)
    w = onnxnn.tensor(randn(3, 2, 3, 3).astype(np.float32), requires_grad=True)
    ops.conv2d(onnxnn.tensor(x), w).sum().backward()
    patches = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # (2, 2, 3, 3, 3, 3)
    expected = np.broadcast_to(patches.astype(np.float64).sum(axis=(0, 2, 3)), (3, 2, 3, 3))
    # Each element sums 2 * 3 * 3 input values (times a cotangent of ones).
    assert_within(w.grad.numpy(), expected, sum_bound(patches, axis=(0, 2, 3)) / 2)


def numpy_weight_gradient(x, g, kernel, strides, dilations, pads_begin, pads_end):
    """d<conv(x, w), g>/dw in float64: each tap's strided window of the padded input against ``g``."""
    rank = len(kernel)
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end)))
    result = np.zeros((g.shape[1], x.shape[1]) + tuple(kernel))
    magnitude = np.zeros_like(result)
    for offsets in np.ndindex(*kernel):
        window = padded[
            (slice(None), slice(None))
            + tuple(
                slice(o * d, o * d + (out - 1) * s + 1, s)
                for o, d, s, out in zip(offsets, dilations, strides, g.shape[2:])
            )
        ]
        axes = [0] + list(range(2, 2 + rank))
        result[(slice(None), slice(None)) + offsets] = np.tensordot(g, window, axes=(axes, axes))
        magnitude[(slice(None), slice(None)) + offsets] = np.tensordot(np.abs(g), np.abs(window), axes=(axes, axes))
    return result, magnitude


TAP_GEMM_CASES = [
    # id, input shape, kernel, strides, dilations, pads (begin + end)
    ("conv1d_stride2_pads", (2, 16, 9), (3,), (2,), (1,), (1, 2)),
    ("conv2d_3x3_pad1", (2, 16, 6, 5), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("conv2d_stride2_uneven", (1, 16, 7, 6), (3, 2), (2, 3), (1, 1), (1, 0, 0, 1)),
    ("conv2d_dilation2", (1, 20, 7, 7), (2, 3), (1, 1), (2, 2), (0, 1, 0, 1)),
    ("conv2d_1x1_stride2", (3, 16, 5, 5), (1, 1), (2, 2), (1, 1), (0, 0, 0, 0)),
    ("conv3d_stride2", (1, 16, 4, 5, 4), (2, 2, 3), (2, 1, 2), (1, 1, 1), (0, 1, 1, 1, 0, 1)),
]


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, input_shape, kernel, strides, dilations, pads", TAP_GEMM_CASES, ids=[c[0] for c in TAP_GEMM_CASES]
)
def test_weight_gradient_of_many_channels_is_the_tap_by_tap_formula(
    executor_name, case_id, input_shape, kernel, strides, dilations, pads
):
    # With at least TAP_GEMM_MIN_CHANNELS input channels the rule takes one GEMM per kernel tap:
    # onnxnn's ConvWeightGradient node, its decomposition on onnxruntime and its kernel on the kernels.
    from onnxnn.runtime.ops.conv_gradients import TAP_GEMM_MIN_CHANNELS

    assert input_shape[1] >= TAP_GEMM_MIN_CHANNELS
    rank = len(kernel)
    x = randn(*input_shape).astype(np.float32)
    w = onnxnn.tensor(randn(3, input_shape[1], *kernel).astype(np.float32), requires_grad=True)
    attrs = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads)}
    with onnxnn.set_executor(executor_name):
        y = apply_op("Conv", (onnxnn.tensor(x), w), attrs)
        g = randn(*y.shape).astype(np.float32)
        (y * onnxnn.tensor(g)).sum().backward()
        w.grad.numpy()
    expected, magnitude = numpy_weight_gradient(x, g, kernel, strides, dilations, pads[:rank], pads[rank:])
    terms = input_shape[0] * int(np.prod(y.shape[2:]))
    assert_within(w.grad.numpy(), expected, accumulation_bound(magnitude, terms + 1))


def numpy_input_gradient(g, w, input_spatial, strides, dilations, pads_begin):
    """d<conv(x, w), g>/dx in float64 (and the sum of the terms' magnitudes): each tap's products scattered back."""
    batch, channels = g.shape[0], w.shape[1]
    kernel = w.shape[2:]
    extent = [
        max(size + b, (out - 1) * s + (k - 1) * d + 1)
        for size, b, out, s, k, d in zip(input_spatial, pads_begin, g.shape[2:], strides, kernel, dilations)
    ]
    result, magnitude = np.zeros((batch, channels, *extent)), np.zeros((batch, channels, *extent))
    for offsets in np.ndindex(*kernel):
        taps = (slice(None), slice(None)) + offsets
        target = (slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (out - 1) * s + 1, s) for o, d, s, out in zip(offsets, dilations, strides, g.shape[2:])
        )
        result[target] += np.einsum("nm...,mc->nc...", g, w[taps])
        magnitude[target] += np.einsum("nm...,mc->nc...", np.abs(g), np.abs(w[taps]))
    crop = (slice(None), slice(None)) + tuple(slice(b, b + size) for b, size in zip(pads_begin, input_spatial))
    return result[crop], magnitude[crop]


COLUMN_GEMM_CASES = [
    # id, input shape, weight shape, strides, dilations, pads (begin + end)
    ("3x3_pad1", (2, 3, 5, 4), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("stride2_uneven_pads", (1, 2, 7, 6), (3, 2, 3, 2), (2, 3), (1, 1), (1, 0, 0, 1)),
    ("dilation2", (1, 2, 7, 7), (2, 2, 2, 3), (1, 1), (2, 2), (0, 1, 0, 1)),
    ("stride2_not_reaching_the_end", (2, 2, 6, 6), (3, 2, 3, 3), (2, 2), (1, 1), (0, 0, 0, 0)),
    ("1x1_stride2", (2, 3, 5, 5), (4, 3, 1, 1), (2, 2), (1, 1), (0, 0, 0, 0)),
]


@pytest.mark.parametrize(
    "case_id, input_shape, weight_shape, strides, dilations, pads",
    COLUMN_GEMM_CASES,
    ids=[c[0] for c in COLUMN_GEMM_CASES],
)
def test_input_gradient_by_columns_is_the_scatter_formula(
    case_id, input_shape, weight_shape, strides, dilations, pads, monkeypatch
):
    # A channel product of at least COLUMN_GEMM_MIN_CHANNEL_PRODUCT takes one GEMM and a Col2Im;
    # lowering it sends these small cases there too.
    from onnxnn.runtime.ops import conv_gradients as conv_ops

    monkeypatch.setattr(conv_ops, "COLUMN_GEMM_MIN_CHANNEL_PRODUCT", 1)
    x = onnxnn.tensor(randn(*input_shape).astype(np.float32), requires_grad=True)
    w = randn(*weight_shape).astype(np.float32)
    attrs = {"strides": list(strides), "dilations": list(dilations), "pads": list(pads)}
    y = apply_op("Conv", (x, onnxnn.tensor(w)), attrs)
    g = randn(*y.shape).astype(np.float32)
    (y * onnxnn.tensor(g)).sum().backward()
    assert any(node.op_type == "Col2Im" for node in _recorded_gradient_nodes(x, w, g, attrs))
    expected, magnitude = numpy_input_gradient(g, w.astype(np.float64), input_shape[2:], strides, dilations, pads[:2])
    terms = weight_shape[0] * int(np.prod(weight_shape[2:]))
    assert_within(x.grad.numpy(), expected, accumulation_bound(magnitude, terms))


def _recorded_gradient_nodes(x, w, g, attrs) -> list:
    """The nodes of the pending input gradient of ``<conv(x, w), g>`` (recorded, not run)."""
    x = onnxnn.tensor(x.detach().numpy(), requires_grad=True)
    y = apply_op("Conv", (x, onnxnn.tensor(w)), attrs)
    (gradient,) = onnxnn.autograd.grad((y * onnxnn.tensor(g)).sum(), x)
    return executor_plan([gradient._value]).nodes


def test_input_gradient_of_a_wide_layer_on_a_small_image():
    # 256 x 256 channels reach the column GEMM as they are (resnet's last stage at a small input).
    x = onnxnn.tensor(randn(2, 256, 3, 3).astype(np.float32), requires_grad=True)
    w = (randn(256, 256, 3, 3) / 48).astype(np.float32)
    g = randn(2, 256, 3, 3).astype(np.float32)
    (ops.conv2d(x, onnxnn.tensor(w), padding=1) * onnxnn.tensor(g)).sum().backward()
    expected, magnitude = numpy_input_gradient(g, w.astype(np.float64), (3, 3), (1, 1), (1, 1), (1, 1))
    assert_within(x.grad.numpy(), expected, accumulation_bound(magnitude, 256 * 9))


def test_input_gradient_of_a_wide_pointwise_layer_is_a_transposed_convolution_run_as_a_conv():
    # 1x1, stride 1, no padding: the ConvTranspose (which onnxnn's sessions write as the 1x1 Conv with
    # the weight transposed) beats the column GEMM even past COLUMN_GEMM_MIN_CHANNEL_PRODUCT.
    x = onnxnn.tensor(randn(2, 256, 4, 4).astype(np.float32), requires_grad=True)
    w = (randn(256, 256, 1, 1) / 16).astype(np.float32)
    g = randn(2, 256, 4, 4).astype(np.float32)
    attrs = {"strides": [1, 1], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
    op_types = {node.op_type for node in _recorded_gradient_nodes(x, w, g, attrs)}
    assert "ConvTranspose" in op_types and "Col2Im" not in op_types
    with onnxnn.set_executor("onnxruntime"):
        (ops.conv2d(x, onnxnn.tensor(w)) * onnxnn.tensor(g)).sum().backward()
        result = x.grad.numpy()
    expected, magnitude = numpy_input_gradient(g, w.astype(np.float64), (4, 4), (1, 1), (1, 1), (0, 0))
    assert_within(result, expected, accumulation_bound(magnitude, 256))


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    (
        "wrong_in_channels",
        lambda: ops.conv2d(onnxnn.zeros(2, 3, 16, 16), onnxnn.zeros(8, 4, 3, 3)),
        RuntimeError,
        "Given groups=1, weight of size [8, 4, 3, 3], expected input[2, 3, 16, 16] to have 4 channels, but got 3 "
        "channels instead",
    ),
    (
        "groups_not_dividing_out_channels",
        lambda: ops.conv2d(onnxnn.zeros(1, 4, 5, 5), onnxnn.zeros(7, 2, 3, 3), groups=2),
        RuntimeError,
        "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size [7, 2, 3, 3] "
        "instead",
    ),
    (
        "bad_bias",
        lambda: ops.conv2d(onnxnn.zeros(1, 3, 5, 5), onnxnn.zeros(8, 3, 3, 3), onnxnn.zeros(7)),
        RuntimeError,
        "Given weight of size [8, 3, 3, 3], expected bias to be 1-dimensional with 8 elements, but got "
        "bias of size [7] instead",
    ),
    (
        "kernel_larger_than_input",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 2, 2), onnxnn.zeros(1, 1, 3, 3)),
        RuntimeError,
        "Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size can't be "
        "greater than actual input size",
    ),
    (
        "input_rank",
        lambda: ops.conv2d(onnxnn.zeros(3, 16), onnxnn.zeros(8, 3, 3, 3)),
        RuntimeError,
        "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [3, 16]",
    ),
    (
        "weight_rank",
        lambda: ops.conv1d(onnxnn.zeros(2, 4, 16), onnxnn.zeros(8, 4, 3, 3)),
        RuntimeError,
        "Expected 4-dimensional input for 4-dimensional weight [8, 4, 3, 3], but got 3-dimensional input of size "
        "[2, 4, 16] instead",
    ),
    (
        "same_with_stride",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 5, 5), onnxnn.zeros(1, 1, 3, 3), stride=2, padding="same"),
        RuntimeError,
        "padding='same' is not supported for strided convolutions",
    ),
    (
        "bad_padding_string",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 5, 5), onnxnn.zeros(1, 1, 3, 3), padding="full"),
        ValueError,
        "Invalid padding string 'full'",
    ),
    (
        "negative_padding",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 5, 5), onnxnn.zeros(1, 1, 3, 3), padding=-1),
        RuntimeError,
        "negative padding is not supported",
    ),
    (
        "zero_stride",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 5, 5), onnxnn.zeros(1, 1, 3, 3), stride=0),
        RuntimeError,
        "non-positive stride is not supported",
    ),
    (
        "stride_tuple_length",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 5, 5), onnxnn.zeros(1, 1, 3, 3), stride=(1, 1, 1)),
        RuntimeError,
        "expected stride to be a single integer value or a list of 2 values to match the convolution "
        "dimensions, but got stride=[1, 1, 1]",
    ),
    (
        "dtype_mismatch",
        lambda: ops.conv2d(onnxnn.zeros(1, 1, 5, 5, dtype=onnxnn.float64), onnxnn.zeros(1, 1, 3, 3)),
        RuntimeError,
        "expected scalar type Double but found Float",
    ),
    (
        "transposed_in_channels",
        lambda: ops.conv_transpose2d(onnxnn.zeros(2, 3, 4, 4), onnxnn.zeros(4, 8, 3, 3)),
        RuntimeError,
        "Given transposed=1, weight of size [4, 8, 3, 3], expected input[2, 3, 4, 4] to have 4 channels, "
        "but got 3 channels instead",
    ),
    (
        "transposed_output_padding",
        lambda: ops.conv_transpose2d(onnxnn.zeros(1, 1, 4, 4), onnxnn.zeros(1, 1, 3, 3), output_padding=1),
        RuntimeError,
        "output padding must be smaller than either stride or dilation",
    ),
    (
        "transposed_bias",
        lambda: ops.conv_transpose2d(onnxnn.zeros(1, 4, 4, 4), onnxnn.zeros(4, 2, 3, 3), onnxnn.zeros(3), groups=2),
        RuntimeError,
        "Given transposed=1, weight of size [4, 2, 3, 3], expected bias to be 1-dimensional with 4 elements, but got "
        "bias of size [3] instead",
    ),
    (
        "transposed_weight_without_input_channels",
        lambda: ops.conv_transpose2d(onnxnn.zeros(1, 0, 5, 5), onnxnn.zeros(0, 3, 3, 3)),
        RuntimeError,
        "Given groups=1, expected weight to be at least 1 at dimension 0, but got weight of size [0, 3, 3, 3] instead",
    ),
    (
        "node_channels",
        lambda: apply_op("Conv", (onnxnn.zeros(1, 3, 5, 5), onnxnn.zeros(2, 2, 3, 3))),
        RuntimeError,
        "Conv: given group=1, weight of size [2, 2, 3, 3], expected input[1, 3, 5, 5] to have 2 channels",
    ),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[case[0] for case in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


# Inputs without channels (PyTorch 2.13: ``(N, 0, *out)``, whatever the weight's output channels).
NO_CHANNEL_CASES = [
    ("conv1d", (2, 0, 5), (3, 0, 3), True, {}),
    ("conv1d", (0, 5), (3, 0, 3), False, {}),
    ("conv2d", (1, 0, 5, 5), (3, 0, 3, 3), True, dict(stride=2, padding=1)),
    ("conv2d", (1, 0, 7, 7), (3, 0, 3, 3), True, dict(groups=3, dilation=2)),
    ("conv2d", (0, 0, 5, 5), (4, 0, 3, 3), False, dict(padding="same")),
    ("conv3d", (1, 0, 4, 4, 4), (3, 0, 3, 3, 3), True, dict(padding=(1, 0, 1))),
]


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
@pytest.mark.parametrize("name, x_shape, w_shape, with_bias, kwargs", NO_CHANNEL_CASES, ids=str)
def test_input_without_channels_gives_pytorchs_empty_output(executor, name, x_shape, w_shape, with_bias, kwargs):
    torch = pytest.importorskip("torch")
    bias_shape = [(w_shape[0],)] if with_bias else []
    expected_inputs = [torch.ones(shape, requires_grad=True) for shape in [x_shape, w_shape, *bias_shape]]
    expected = getattr(torch.nn.functional, name)(*expected_inputs, **kwargs)
    expected.sum().backward()
    with onnxnn.set_executor(executor):
        inputs = [onnxnn.ones(shape, requires_grad=True) for shape in [x_shape, w_shape, *bias_shape]]
        result = getattr(ops, name)(*inputs, **kwargs)
        assert tuple(result.shape) == tuple(expected.shape)
        assert result.requires_grad
        result.sum().backward()
        for ours, theirs in zip(inputs, expected_inputs):
            assert ours.grad is not None and tuple(ours.grad.shape) == tuple(theirs.grad.shape)
            np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


# Integer convolutions, exact and wrapping as PyTorch's CPU kernels (which take no bool, and dilated
# or transposed ones of int64 only).
INTEGER_CASES = [
    ("conv1d", "int64", (2, 4, 9), (6, 2, 3), dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv2d", "int32", (2, 3, 7, 8), (4, 3, 3, 2), dict(stride=(2, 1), padding=1)),
    ("conv2d", "int8", (2, 4, 5, 5), (4, 2, 3, 3), dict(groups=2, padding="same")),
    ("conv2d", "uint8", (0, 3, 5, 5), (4, 3, 3, 3), {}),
    ("conv3d", "int16", (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(padding=(1, 1, 0))),
]


@pytest.mark.parametrize("executor", ["kernels", "onnxruntime"])
@pytest.mark.parametrize("name, dtype, x_shape, w_shape, kwargs", INTEGER_CASES, ids=str)
def test_integer_convolution_matches_pytorch(executor, name, dtype, x_shape, w_shape, kwargs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    info = np.iinfo(dtype)
    # Values over the whole range: the sums wrap (int64's products too, as PyTorch's).
    arrays = [rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True) for shape in (x_shape, w_shape)]
    arrays.append(rng.integers(info.min, info.max, w_shape[:1], dtype=dtype, endpoint=True))
    expected = getattr(torch.nn.functional, name)(*[torch.from_numpy(a) for a in arrays], **kwargs).numpy()
    with onnxnn.set_executor(executor):
        result = getattr(ops, name)(*[onnxnn.tensor(a) for a in arrays], **kwargs).numpy()
    assert result.dtype == expected.dtype
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize(
    "name, dtype, x_shape, w_shape, kwargs",
    [
        ("conv2d", "int32", (1, 2, 7, 7), (3, 2, 3, 3), dict(dilation=2)),
        ("conv1d", "bool", (1, 2, 5), (3, 2, 3), {}),
        ("conv3d", "bool", (1, 2, 4, 4, 4), (3, 2, 3, 3, 3), {}),
        ("conv_transpose2d", "uint8", (1, 2, 4, 4), (2, 3, 3, 3), {}),
        ("conv_transpose3d", "int32", (1, 2, 4, 4, 4), (2, 3, 3, 3, 3), {}),
    ],
    ids=str,
)
def test_integer_convolutions_pytorch_refuses_are_refused_alike(name, dtype, x_shape, w_shape, kwargs):
    torch = pytest.importorskip("torch")
    arrays = [np.ones(x_shape, dtype), np.ones(w_shape, dtype)]
    with pytest.raises(NotImplementedError) as expected:
        getattr(torch.nn.functional, name)(*[torch.from_numpy(a) for a in arrays], **kwargs)
    with pytest.raises(NotImplementedError) as raised:
        getattr(ops, name)(*[onnxnn.tensor(a) for a in arrays], **kwargs)
    assert str(raised.value) == str(expected.value)
