"""Conv and ConvTranspose: shape rules, values, PyTorch's conv*d functions, and errors in PyTorch's words.

Expected values come from a direct numpy convolution (conv_cases.py), from the ONNX backend node
cases that ship with the ``onnx`` package (replayed node by node), and from the models PyTorch
exported into ``onnx/backend/test/data/pytorch-converted``. Gradients are in
test_conv_ops_gradients.py.
"""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
from onnxnn.runtime import ops
from onnxnn.runtime.tensor import apply_op

from tolerances import assert_within, conv_bound, conv_transpose_bound, unit_roundoff

from .conv_cases import (
    conv_reference,
    conv_transpose_reference,
    onnx_node_cases,
    pytorch_converted_cases,
    replay_node,
    replay_pytorch_converted,
)

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
        RuntimeError,
        "Invalid padding string: 'full'",
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
