"""ConvWeightGradient: a wide convolution's weight gradient is one recorded node, exact, differentiable, exportable.

Its values against the float64 formula, on both executors, are test_conv_ops_gradients.py's tap-by-tap cases;
here: what is recorded, the node's own gradient rule, export, and bad input.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import training_step_to_onnx
from onnxnn.ir.conv_weight_gradient import OP_TYPE
from onnxnn.ir.domains import ONNXNN_DOMAIN
from onnxnn.kernels import compiled_convolutions
from onnxnn.runtime.ops.conv_gradients import TAP_GEMM_MIN_CHANNELS
from onnxnn.runtime.realization import recording_only
from onnxnn.runtime.tensor import apply_op

from gradcheck import check_gradients
from tolerances import assert_within, gamma
from recorded_graphs import pending_op_types

CHANNELS = TAP_GEMM_MIN_CHANNELS


# (channels, kernel, groups): wide and narrow layers, a 7x7 RGB stem (written out as one Conv, the
# others as GEMMs), grouped and depthwise layers (one Conv each, or the depthwise loop).
RECORDED = [(CHANNELS, 3, 1), (3, 3, 1), (1, 5, 1), (3, 7, 1), (8, 3, 2), (6, 3, 6)]


@pytest.mark.parametrize("channels, kernel, groups", RECORDED)
def test_every_convolutions_weight_gradient_is_one_node(channels, kernel, groups):
    x = onnxnn.randn(2, channels, 9, 9)
    weight = onnxnn.randn(2 * groups, channels // groups, kernel, kernel, requires_grad=True)
    with recording_only():
        F.conv2d(x, weight, padding=1, groups=groups).sum().backward()
        recorded = pending_op_types(weight.grad)
    assert recorded.count(OP_TYPE) == 1
    # The GEMMs per tap, or the Conv with batch and channels swapped, are the node's own.
    assert not {"MatMul", "Slice", "Conv", "Transpose"} & set(recorded)


def _numpy_weight_gradient(x, g, kernel=(3, 3), stride=1, padding=1):
    """d<conv2d(x, w, stride, padding), g>/dw in float64, tap by tap."""
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (padding, padding), (padding, padding)])
    height, width = g.shape[2:]

    def tap(i, j):
        window = padded[:, :, i : i + (height - 1) * stride + 1 : stride, j : j + (width - 1) * stride + 1 : stride]
        return np.einsum("nmhw,nchw->mc", g, window)

    rows = [np.stack([tap(i, j) for j in range(kernel[1])], axis=-1) for i in range(kernel[0])]
    return np.stack(rows, axis=-2)


# The decomposition multiplies G by each tap's window, or, when the windows have fewer rows (batch
# times output positions) than G has channels, by all windows side by side in one MatMul (each tap's
# column beside its channel's, so the product is the weight's layout); windows
# smaller together than the input (a strided 1x1 convolution's) are cut before the channels move
# last. With fewer than TAP_GEMM_MIN_CHANNELS channels, all windows of the channels-first input
# make one GEMM.
FORMS = [
    ("a_matmul_per_tap", (4, CHANNELS, 6, 6), 3, 3, 1, 1),
    ("one_matmul_for_few_rows", (1, CHANNELS, 4, 4), 40, 3, 2, 1),
    ("windows_cut_before_moving_channels", (2, CHANNELS, 7, 7), 5, 1, 3, 1),
    ("one_gemm_over_all_windows_for_rgb", (3, 3, 8, 7), 5, 3, 1, 1),
    ("one_gemm_over_all_windows_strided_5x5", (2, 1, 9, 9), 4, 5, 2, 2),
]


@pytest.mark.parametrize("compiled_loop", [False, True], ids=["numpy_matmuls", "compiled_loop"])
@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case_id, x_shape, out_channels, kernel, stride, padding", FORMS, ids=[c[0] for c in FORMS])
def test_every_form_of_the_decomposition_is_the_formula(
    executor_name, case_id, x_shape, out_channels, kernel, stride, padding, compiled_loop, monkeypatch
):
    # The kernels run the compiled loop where it applies (kernels/compiled_convolutions.py), else
    # the decomposition's matmuls; onnxruntime's sessions on several threads, the decomposition.
    monkeypatch.setattr(compiled_convolutions, "ENABLED", compiled_loop and compiled_convolutions.ENABLED)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    weight_shape = (out_channels, x_shape[1], kernel, kernel)
    weight = onnxnn.tensor(rng.standard_normal(weight_shape).astype(np.float32), requires_grad=True)
    with onnxnn.set_executor(executor_name):
        y = F.conv2d(onnxnn.tensor(x), weight, stride=stride, padding=padding)
        g = rng.standard_normal(y.shape).astype(np.float32)
        (y * onnxnn.tensor(g)).sum().backward()
        taps = (kernel, kernel)
        expected = _numpy_weight_gradient(x, g, taps, stride, padding)
        terms = g.shape[0] * g.shape[2] * g.shape[3]
        bound = gamma(terms + 1) * _numpy_weight_gradient(np.abs(x), np.abs(g), taps, stride, padding)
        assert_within(weight.grad.numpy(), expected, bound)


def _grouped_formula(x, g, kernel, stride, padding, groups):
    """The weight gradient of a grouped convolution: each group's output channels with its input channels."""
    per_group, per_group_out = x.shape[1] // groups, g.shape[1] // groups
    return np.concatenate(
        [
            _numpy_weight_gradient(
                x[:, group * per_group : (group + 1) * per_group],
                g[:, group * per_group_out : (group + 1) * per_group_out],
                kernel,
                stride,
                padding,
            )
            for group in range(groups)
        ]
    )


# Grouped convolutions: written out as one Conv with batch and channels swapped; depthwise ones
# (as many groups as input channels) run as the depthwise loop where it is on.
GROUPED = [
    ("depthwise_3x3", (2, 8, 9, 9), 8, 3, 1, 1, 8),
    ("depthwise_stride_2_multiplier_2", (2, 6, 11, 11), 12, 3, 2, 1, 6),
    ("depthwise_7x7", (2, 4, 12, 12), 4, 7, 1, 3, 4),
    ("two_groups", (2, 8, 7, 7), 6, 3, 1, 1, 2),
    ("two_groups_strided_5x5", (3, 4, 11, 9), 4, 5, 2, 2, 2),
]


@pytest.mark.parametrize("compiled_loop", [False, True], ids=["numpy_matmuls", "compiled_loop"])
@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, x_shape, out_channels, kernel, stride, padding, groups", GROUPED, ids=[c[0] for c in GROUPED]
)
def test_grouped_convolutions_weight_gradients_are_the_formula(
    executor_name, case_id, x_shape, out_channels, kernel, stride, padding, groups, compiled_loop, monkeypatch
):
    monkeypatch.setattr(compiled_convolutions, "ENABLED", compiled_loop and compiled_convolutions.ENABLED)
    rng = np.random.default_rng(8)
    x = rng.standard_normal(x_shape).astype(np.float32)
    weight_shape = (out_channels, x_shape[1] // groups, kernel, kernel)
    weight = onnxnn.tensor(rng.standard_normal(weight_shape).astype(np.float32), requires_grad=True)
    with onnxnn.set_executor(executor_name):
        y = F.conv2d(onnxnn.tensor(x), weight, stride=stride, padding=padding, groups=groups)
        g = rng.standard_normal(y.shape).astype(np.float32)
        (y * onnxnn.tensor(g)).sum().backward()
        taps = (kernel, kernel)
        expected = _grouped_formula(x, g, taps, stride, padding, groups)
        terms = g.shape[0] * g.shape[2] * g.shape[3]
        bound = gamma(terms + 1) * _grouped_formula(np.abs(x), np.abs(g), taps, stride, padding, groups)
        assert_within(weight.grad.numpy(), expected, bound)


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
def test_a_depthwise_transposed_convolutions_weight_gradient_is_the_formula(executor_name):
    # <conv_transpose(x, w), g> = <x, conv(g, w)>: ConvTranspose's weight gradient is Conv's with the
    # roles of x and g exchanged, here a depthwise one (the loop's, where it is on).
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 6, 7, 7)).astype(np.float32)
    weight = onnxnn.tensor(rng.standard_normal((6, 1, 3, 3)).astype(np.float32), requires_grad=True)
    with onnxnn.set_executor(executor_name):
        y = F.conv_transpose2d(onnxnn.tensor(x), weight, stride=2, padding=1, groups=6)
        g = rng.standard_normal(y.shape).astype(np.float32)
        (y * onnxnn.tensor(g)).sum().backward()
        gradient = weight.grad.numpy()  # realized on ``executor_name`` (backward only records)
    expected = _grouped_formula(g, x, (3, 3), 2, 1, 6)
    bound = gamma(2 * 7 * 7 + 1) * _grouped_formula(np.abs(g), np.abs(x), (3, 3), 2, 1, 6)
    assert_within(gradient, expected, bound)


@pytest.mark.parametrize("channels, groups", [(CHANNELS, 1), (3, 1), (6, 6), (6, 2)])
def test_sizes_that_change_share_one_graph_whose_windows_follow_the_sizes(channels, groups):
    # fastpath.dynamic_shapes compiles one graph with symbolic sizes for a structure seen at several
    # batch and image sizes; the node's decomposition must read the sizes at run time, not bake the
    # first size's windows in (a larger image would then get a wrong gradient or a failed run).
    from onnxnn.runtime.fastpath import dynamic_shapes

    rng = np.random.default_rng(2)
    out_channels = 3 if groups == 1 else channels
    weight_shape = (out_channels, channels // groups, 3, 3)
    weight = onnxnn.tensor(rng.standard_normal(weight_shape).astype(np.float32), requires_grad=True)
    shared_before = dynamic_shapes.dynamic_info()["shared_runs"]
    with onnxnn.set_executor("onnxruntime"):
        for batch, height, width in [(2, 6, 6), (3, 6, 6), (2, 8, 7), (4, 5, 9), (2, 8, 7), (3, 9, 5)]:
            x = rng.standard_normal((batch, channels, height, width)).astype(np.float32)
            g = rng.standard_normal((batch, out_channels, height, width)).astype(np.float32)
            weight.grad = None
            (F.conv2d(onnxnn.tensor(x), weight, padding=1, groups=groups) * onnxnn.tensor(g)).sum().backward()
            expected = _grouped_formula(x, g, (3, 3), 1, 1, groups)
            # Each entry sums batch * height * width float32 products of unit-scale values.
            np.testing.assert_allclose(weight.grad.numpy(), expected, rtol=1e-4, atol=1e-4 * np.sqrt(x.size))
    assert dynamic_shapes.dynamic_info()["shared_runs"] > shared_before


def _weight_gradient(kernel, strides, dilations, pads, group=1):
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dilations), "pads": list(pads)}
    if group != 1:
        attrs["group"] = group
    return lambda x, g: apply_op(OP_TYPE, (x, g), attrs, domain=ONNXNN_DOMAIN)


GEOMETRIES = [
    # id, X shape, G shape, kernel, strides, dilations, pads (begin + end), groups
    ("2d_3x3_pad1", (2, 3, 5, 4), (2, 2, 5, 4), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("2d_stride2_dilation2", (1, 2, 7, 6), (1, 3, 2, 2), (2, 2), (2, 2), (2, 2), (0, 0, 0, 0), 1),
    ("1d_uneven_end_pad", (2, 2, 6), (2, 2, 3), (3,), (2,), (1,), (1, 0), 1),
    ("2d_depthwise", (2, 3, 5, 4), (2, 3, 5, 4), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 3),
    ("1d_two_groups_strided", (2, 4, 6), (2, 6, 3), (3,), (2,), (1,), (1, 0), 2),
]


@pytest.mark.parametrize(
    "case_id, x_shape, g_shape, kernel, strides, dilations, pads, groups", GEOMETRIES, ids=[c[0] for c in GEOMETRIES]
)
def test_gradients_of_the_weight_gradient_match_finite_differences(
    case_id, x_shape, g_shape, kernel, strides, dilations, pads, groups
):
    # dW is bilinear in X and G: its gradients are a convolution's (with the same groups), G scattered
    # back and Conv(X, H). (float64: onnxruntime has no float64 ConvTranspose, so these run on onnxnn's
    # kernels.)
    rng = np.random.default_rng(0)
    check_gradients(
        _weight_gradient(kernel, strides, dilations, pads, groups),
        [rng.standard_normal(x_shape), rng.standard_normal(g_shape)],
    )


def test_second_order_gradient_through_a_wide_convolution():
    # d/dx of <dL/dW, H>: backward through the weight gradient node itself (create_graph).
    rng = np.random.default_rng(1)
    weight = onnxnn.tensor(rng.standard_normal((3, CHANNELS, 3, 3)), dtype=onnxnn.float64, requires_grad=True)
    direction = onnxnn.tensor(rng.standard_normal((3, CHANNELS, 3, 3)), dtype=onnxnn.float64)

    def directional_weight_gradient(x):
        with onnxnn.enable_grad():  # check_gradients also evaluates it under no_grad
            loss = (F.conv2d(x, weight, stride=2, padding=1) ** 2).sum()
            (grad,) = onnxnn.autograd.grad(loss, weight, create_graph=True)
        return (grad * direction).sum()

    check_gradients(directional_weight_gradient, [rng.standard_normal((2, CHANNELS, 5, 5))])


@pytest.mark.parametrize("groups", [1, CHANNELS], ids=["one_group", "depthwise"])
def test_a_training_step_with_the_node_exports_as_standard_onnx(groups):
    onnxnn.manual_seed(0)
    out_channels = 4 if groups == 1 else CHANNELS
    conv = nn.Conv2d(CHANNELS, out_channels, 3, padding=1, groups=groups)
    net = nn.Sequential(conv, nn.ReLU(), nn.Flatten(), nn.Linear(out_channels * 5 * 5, 2))
    optimizer = onnxnn.optim.SGD(net.parameters(), lr=0.1)
    x, y = onnxnn.randn(3, CHANNELS, 5, 5), onnxnn.randn(3, 2)
    proto, signature = training_step_to_onnx(net, F.mse_loss, optimizer, (x, y))
    assert {node.domain for node in proto.graph.node} <= {"", "ai.onnx"}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    outputs = dict(zip(names, session.run(None, {**signature.initial_state, "input": x.numpy(), "target": y.numpy()})))
    F.mse_loss(net(x), y).backward()
    optimizer.step()
    updated = outputs[signature.state["0.weight"]]
    # One step of lr 0.1 on gradients that are 75-term sums (3 samples x 25 positions) of unit-scale
    # products, computed in two runtimes that sum in different orders: well inside 1e-5 relative
    # plus 1e-6; a tap wrong or missing moves the weight by O(lr).
    np.testing.assert_allclose(updated, net[0].weight.detach().numpy(), rtol=1e-5, atol=1e-6)


BAD_INPUTS = [
    ("batch sizes differ", (2, 3, 5, 5), (3, 2, 5, 5), (3, 3), (1, 1, 1, 1), "differ in batch size"),
    ("ranks differ", (2, 3, 5, 5), (2, 2, 5), (3, 3), (1, 1, 1, 1), "must both have rank"),
    ("windows past the input", (2, 3, 5, 5), (2, 2, 5, 5), (3, 3), (0, 0, 0, 0), "reach past"),
    ("pads of the wrong length", (2, 3, 5, 5), (2, 2, 5, 5), (3, 3), (1, 1), "need 2 entries"),
    ("groups not dividing X's channels", (2, 3, 5, 5), (2, 2, 5, 5), (3, 3), (1, 1, 1, 1), "group 2 must divide"),
    ("groups not dividing G's channels", (2, 4, 5, 5), (2, 6, 5, 5), (3, 3), (1, 1, 1, 1), "group 4 must divide"),
]
BAD_GROUPS = {"groups not dividing X's channels": 2, "groups not dividing G's channels": 4}


@pytest.mark.parametrize("case_id, x_shape, g_shape, kernel, pads, message", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_inconsistent_shapes_or_attributes_are_rejected_when_recorded(case_id, x_shape, g_shape, kernel, pads, message):
    groups = BAD_GROUPS.get(case_id, 1)
    record = _weight_gradient(kernel, (1,) * len(kernel), (1,) * len(kernel), pads, groups)
    with pytest.raises(ValueError, match=message):
        record(onnxnn.randn(*x_shape), onnxnn.randn(*g_shape))
