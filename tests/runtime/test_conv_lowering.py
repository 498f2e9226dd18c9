"""A convolution with a fed weight runs in onnxnn's sessions in the form onnxruntime runs fastest
(runtime/ops/conv_lowering.py): over small images as one GEMM for the whole batch, over large ones
(and a stride-1 ConvTranspose) with onnxruntime's blocked-channel kernels; exported graphs, constant
weights and other shapes keep the op.

The specification: the lowered graph computes the convolution (against a float64 reference, within
the rounding of its C*k*k-term sums), at the sizes it was built for and at any other size of a
symbolic batch or image; and each form is chosen exactly where the bounds say.
"""

from __future__ import annotations

import platform

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.ir.plan import plan
from onnxnn.ir.model_building import build_model
from onnxnn.nn import functional as F
from onnxnn.runtime.ops import conv_lowering
from onnxnn.runtime.ops.conv_nchwc import block_size
from onnxnn.runtime.sessions import symbolic_inputs

from .conv_cases import conv_reference, conv_transpose_reference

EPSILON = np.finfo(np.float32).eps


def _assert_convolution(result, x, w, b, stride, padding, dilation, reference=conv_reference, group=1):
    geometry = {"strides": list(stride), "pads_begin": list(padding), "dilations": list(dilation), "group": group}
    expected = reference(x, w, b, **geometry)
    # The convolution of magnitudes bounds the rounding of each sum.
    magnitude = reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), **geometry)
    assert result.shape == expected.shape
    terms = w.shape[1] * w.shape[2] * w.shape[3] + (b is not None)
    if reference is conv_transpose_reference:
        terms = w.shape[0] // group * w.shape[2] * w.shape[3] + (b is not None)
    # A sum of n float32 products is off by at most about n * eps times the sum of their magnitudes.
    np.testing.assert_array_less(np.abs(result - expected), terms * EPSILON * magnitude + 1e-30)


def _pair(value):
    return value if isinstance(value, tuple) else (value, value)


ONE_GEMM, BLOCKED, AS_CONV = "one GEMM", "blocked", "as a Conv"

# (input shape, output channels, kernel, stride, padding, dilation, bias, form: None keeps the Conv)
CASES = {
    "resnet18 last stage at 64px": ((8, 512, 2, 2), 512, 3, 1, 1, 1, False, ONE_GEMM),
    "strided into the last stage": ((8, 256, 4, 4), 512, 3, 2, 1, 1, True, ONE_GEMM),
    "1x1 strided downsampling": ((8, 256, 4, 4), 512, 1, 2, 0, 1, False, ONE_GEMM),
    "asymmetric padding, dilation, 3 positions": ((4, 64, 5, 5), 128, 3, 2, (0, 2), 2, True, ONE_GEMM),
    "rectangular kernel and image": ((3, 128, 3, 6), 192, (1, 3), (1, 2), (0, 1), 1, True, ONE_GEMM),
    "one output position": ((2, 256, 3, 3), 256, 3, 1, 0, 1, True, ONE_GEMM),
    "16 positions, 128 columns: below the blocked kernels' bound": ((8, 256, 4, 4), 256, 3, 1, 1, 1, False, None),
    "16 positions, 256 columns": ((16, 256, 4, 4), 256, 3, 1, 1, 1, False, BLOCKED),
    "small weight, 32 columns": ((8, 16, 2, 2), 16, 3, 1, 1, 1, True, None),
    "one image, 4 columns": ((1, 512, 2, 2), 512, 3, 1, 1, 1, False, None),
    # A 3-channel stem's weight gradient as a Conv: channels and batch trade places, the 32x32 output
    # gradient is the kernel (1,024 taps) and the 3x3 weight the output.
    "weight-gradient Conv with a 32x32 kernel": ((3, 32, 34, 34), 16, 32, 1, 0, 1, False, None),
    "small ResNet's 16 channels at 32x32": ((4, 16, 32, 32), 16, 3, 1, 1, 1, False, BLOCKED),
    "strided to 16x16, with bias": ((2, 16, 32, 32), 32, 3, 2, 1, 1, True, BLOCKED),
    "dilated, asymmetric padding, rectangular kernel": ((1, 32, 20, 18), 16, (3, 2), 1, (2, 0), 2, True, BLOCKED),
    "one image of 64 channels at 16x16": ((1, 64, 16, 16), 64, 3, 1, 1, 1, False, BLOCKED),
    "64 positions": ((8, 128, 8, 8), 128, 3, 1, 1, 1, False, BLOCKED),
    "1x1 kernel over a large image": ((2, 32, 32, 32), 32, 1, 1, 0, 1, False, None),
    "channels not a multiple of the block": ((2, 20, 16, 16), 16, 3, 1, 1, 1, False, None),
    "an RGB stem": ((2, 3, 32, 32), 16, 3, 1, 1, 1, False, None),
}


def _expected_form(form):
    # The blocked kernels exist where onnxruntime has them (x86-64); elsewhere the Conv stays.
    return None if form == BLOCKED and block_size() is None else form


def _form_of(model, transposed: bool = False):
    """The form of a lowered Conv, or (``transposed``) ConvTranspose; None where the op stays."""
    op_types = {node.op_type for node in model.graph.node}
    if "ReorderInput" in op_types:
        return BLOCKED
    if "Conv" not in op_types and "ConvTranspose" not in op_types and "MatMul" in op_types:
        return ONE_GEMM
    if transposed and "Conv" in op_types and "ConvTranspose" not in op_types:
        return AS_CONV
    return None


def _recorded(input_shape, out_channels, kernel, stride, padding, dilation, bias):
    rng = np.random.default_rng(0)
    kernel = _pair(kernel)
    x = rng.standard_normal(input_shape).astype(np.float32)
    w = rng.standard_normal((out_channels, input_shape[1], *kernel)).astype(np.float32)
    b = rng.standard_normal(out_channels).astype(np.float32) if bias else None
    arguments = (onnxnn.from_numpy(x), onnxnn.from_numpy(w), None if b is None else onnxnn.from_numpy(b))
    output = F.conv2d(*arguments, stride=stride, padding=padding, dilation=dilation)
    return output, arguments, (x, w, b)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_session_computes_the_convolution_in_the_form_the_bounds_say(case):
    *shapes, form = case
    stride, padding, dilation = (_pair(value) for value in shapes[3:6])
    with onnxnn.set_executor("onnxruntime"):
        output, _, (x, w, b) = _recorded(*shapes)
        model = build_model(plan([output._value], include_shared=False), lower=True)
        _assert_convolution(output.numpy(), x, w, b, stride, padding, dilation)
    assert _form_of(model) == _expected_form(form)


# (input shape, kernel, stride, padding, dilation, bias, form, groups): a depthwise convolution (groups of
# one input and one output channel) takes the blocked kernels at every size where its channels are a
# multiple of their block: onnxruntime's own Conv convolves each channel as a GEMM of one row.
DEPTHWISE_CASES = {
    "MobileNetV2's 3x3 at 12x12": ((2, 32, 12, 12), 3, 1, 1, 1, False, BLOCKED, 32),
    "strided, with bias": ((2, 32, 15, 15), 3, 2, 1, 1, True, BLOCKED, 32),
    "dilated, asymmetric padding, rectangular kernel": ((1, 48, 11, 10), (3, 2), 1, (2, 0), 2, True, BLOCKED, 48),
    "one 2x2 image": ((1, 64, 2, 2), 3, 1, 1, 1, False, BLOCKED, 64),
    "a 1x1 kernel": ((2, 32, 5, 5), 1, 1, 0, 1, True, BLOCKED, 32),
    "channels not a multiple of the block": ((2, 12, 9, 9), 3, 1, 1, 1, False, None, 12),
    "groups of two channels keep the op": ((2, 32, 8, 8), 3, 1, 1, 1, False, None, 16),
}


@pytest.mark.parametrize("case", DEPTHWISE_CASES.values(), ids=DEPTHWISE_CASES.keys())
def test_a_depthwise_convolution_runs_on_the_blocked_kernels_where_its_channels_allow(case):
    input_shape, kernel, stride, padding, dilation, bias, form, group = case
    kernel, stride, padding, dilation = _pair(kernel), _pair(stride), _pair(padding), _pair(dilation)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype(np.float32)
    w = rng.standard_normal((input_shape[1], input_shape[1] // group, *kernel)).astype(np.float32)
    b = rng.standard_normal(input_shape[1]).astype(np.float32) if bias else None
    with onnxnn.set_executor("onnxruntime"):
        arguments = (onnxnn.from_numpy(x), onnxnn.from_numpy(w), None if b is None else onnxnn.from_numpy(b))
        output = F.conv2d(*arguments, stride=stride, padding=padding, dilation=dilation, groups=group)
        model = build_model(plan([output._value], include_shared=False), lower=True)
        result = output.numpy()
    _assert_convolution(result, x, w, b, stride, padding, dilation, group=group)
    assert _form_of(model) == _expected_form(form)


BLOCKED_CASES = {name: case for name, case in CASES.items() if case[-1] == BLOCKED}


# The blocked weight's reorder by threads (conv_nchwc.py): on one, the taps and the input-channel block
# trade places first; on more, where onnxruntime's Transpose of many small matrices is 20x slower, the
# output-channel block moves innermost first and then whole blocks move.
REORDER_TRANSPOSES = {"one_thread": [[0, 1, 3, 2], [0, 2, 1]], "two_threads": [[0, 2, 1], [0, 2, 1, 3]]}


@pytest.mark.parametrize("threads", REORDER_TRANSPOSES)
@pytest.mark.parametrize("case", BLOCKED_CASES.values(), ids=BLOCKED_CASES.keys())
def test_the_blocked_weight_is_reordered_as_the_threads_say(case, threads, request):
    if block_size() is None:
        pytest.skip("onnxruntime has no blocked-channel kernels on this CPU")
    request.getfixturevalue(threads)
    *shapes, _ = case
    stride, padding, dilation = (_pair(value) for value in shapes[3:6])
    output, _, (x, w, b) = _recorded(*shapes)
    model = build_model(plan([output._value], include_shared=False), lower=True)
    _assert_convolution(output.numpy(), x, w, b, stride, padding, dilation)
    transposes = [node for node in model.graph.node if node.op_type == "Transpose"]
    assert [list(node.attribute[0].ints) for node in transposes] == REORDER_TRANSPOSES[threads]


# (input shape, output channels per group, kernel, padding, dilation, bias, form[, groups]): stride 1
# throughout. 1x1 kernels and groups of one output channel (depthwise layers' input gradients) run as
# a plain Conv, with the weight transposed or (per group) flipped; groups of one input and one output
# channel whose number is a multiple of the block on the blocked kernels, flipped.
TRANSPOSE_CASES = {
    "small ResNet's input gradient at 32x32": ((4, 16, 32, 32), 16, 3, 1, 1, False, BLOCKED),
    "into more channels, with bias": ((2, 32, 16, 16), 48, 3, 1, 1, True, BLOCKED),
    "dilated, asymmetric padding, rectangular kernel": ((1, 16, 18, 20), 32, (3, 2), (2, 1), 2, True, BLOCKED),
    "full padding: a larger output": ((1, 16, 15, 15), 16, 3, 0, 1, False, BLOCKED),
    "64 positions": ((8, 128, 8, 8), 128, 3, 1, 1, False, BLOCKED),
    "4x4 images, 128 columns": ((8, 64, 4, 4), 32, 3, 1, 1, True, None),
    "4x4 images, 256 columns": ((16, 64, 4, 4), 32, 3, 1, 1, True, BLOCKED),
    "one 8x8 image, 64 columns": ((1, 128, 8, 8), 128, 3, 1, 1, False, None),
    "channels not a multiple of the block": ((2, 16, 16, 16), 20, 3, 1, 1, False, None),
    "a 1x1 kernel, with bias": ((2, 24, 9, 9), 40, 1, 0, 1, True, AS_CONV),
    "a 1x1 kernel, channels a multiple of the block": ((8, 32, 8, 8), 64, 1, 0, 1, False, AS_CONV),
    "a 1x1 kernel cropping its output keeps the op": ((2, 8, 9, 9), 8, 1, 1, 1, False, None),
    "depthwise 3x3, with bias": ((2, 12, 9, 9), 1, 3, 1, 1, True, AS_CONV, 12),
    "depthwise 3x3, channels a multiple of the block, with bias": ((2, 32, 9, 9), 1, 3, 1, 1, True, BLOCKED, 32),
    "depthwise, dilated, rectangular kernel, one 3x3 image": ((1, 64, 3, 3), 1, (3, 2), (2, 1), 2, False, BLOCKED, 64),
    "groups of three input channels, dilated, rectangular": ((1, 12, 10, 11), 1, (3, 2), (2, 1), 2, False, AS_CONV, 4),
    "depthwise 7x7": ((2, 6, 12, 12), 1, 7, 3, 1, False, AS_CONV, 6),
    "groups of two output channels keep the op": ((2, 8, 9, 9), 2, 3, 1, 1, False, None, 4),
}


@pytest.mark.parametrize("case", TRANSPOSE_CASES.values(), ids=TRANSPOSE_CASES.keys())
def test_a_stride_one_conv_transpose_runs_as_the_flipped_convolution_where_the_bounds_say(case):
    input_shape, out_channels, kernel, padding, dilation, bias, form, *groups = case
    group = groups[0] if groups else 1
    kernel, padding, dilation = _pair(kernel), _pair(padding), _pair(dilation)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(input_shape).astype(np.float32)
    w = rng.standard_normal((input_shape[1], out_channels, *kernel)).astype(np.float32)
    b = rng.standard_normal(out_channels * group).astype(np.float32) if bias else None
    with onnxnn.set_executor("onnxruntime"):
        arguments = (onnxnn.from_numpy(x), onnxnn.from_numpy(w), None if b is None else onnxnn.from_numpy(b))
        output = F.conv_transpose2d(*arguments, padding=padding, dilation=dilation, groups=group)
        model = build_model(plan([output._value], include_shared=False), lower=True)
        result = output.numpy()
    _assert_convolution(result, x, w, b, (1, 1), padding, dilation, conv_transpose_reference, group)
    # Without the blocked kernels, groups of one channel still run as a plain Conv.
    expected = AS_CONV if form == BLOCKED and group > 1 and block_size() is None else _expected_form(form)
    assert _form_of(model, transposed=True) == expected


def test_a_strided_conv_transpose_keeps_the_op():
    x, w = onnxnn.randn(2, 16, 16, 16), onnxnn.randn(16, 16, 3, 3)
    output = F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)
    model = build_model(plan([output._value], include_shared=False), lower=True)
    assert _form_of(model) is None


def test_graphs_built_without_lowering_and_constant_weights_keep_the_conv():
    output, (x, w, _), _ = _recorded((8, 512, 2, 2), 512, 3, 1, 1, 1, False)
    graph = plan([output._value], include_shared=False)
    assert "Conv" in {node.op_type for node in build_model(graph).graph.node}
    roles = [("initializer", "weight") if value is w._value else ("input", "x") for value in graph.inputs]
    embedded = build_model(graph, roles, lower=True)
    assert "Conv" in {node.op_type for node in embedded.graph.node}


def test_an_exported_module_keeps_the_conv():
    exported = to_onnx(onnxnn.nn.Conv2d(512, 512, 3, padding=1).eval(), (onnxnn.randn(8, 512, 2, 2),))
    assert [node.op_type for node in exported.graph.node] == ["Conv"]


SYMBOLIC_CASES = [
    "strided into the last stage",
    "asymmetric padding, dilation, 3 positions",
    "strided to 16x16, with bias",
]


@pytest.mark.parametrize("name", SYMBOLIC_CASES)
def test_the_lowered_graph_is_exact_at_every_size_of_a_symbolic_batch_and_image(name):
    *shapes, form = CASES[name]
    stride, padding, dilation = (_pair(value) for value in shapes[3:6])
    output, arguments, (x, w, b) = _recorded(*shapes)
    graph = plan([output._value], include_shared=False)
    model = build_model(graph, lower=True)
    assert _form_of(model) == _expected_form(form)
    x_position = next(i for i, value in enumerate(graph.inputs) if value is arguments[0]._value)
    symbolic_inputs(model, [(x_position, axis) for axis in (0, 2, 3)])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {model.graph.input[i].name: value.data for i, value in enumerate(graph.inputs)}
    x_name = model.graph.input[x_position].name
    rng = np.random.default_rng(1)
    for batch, height, width in [(3, 9, 7), (1, 5, 1), (5, 16, 11)]:
        other = rng.standard_normal((batch, x.shape[1], height, width)).astype(np.float32)
        (result,) = session.run(None, {**feeds, x_name: other})
        _assert_convolution(result, other, w, b, stride, padding, dilation)


# (bound that lowering is switched off by, layers, input shape)
TRAINING_CASES = {
    ONE_GEMM: (
        "LOWERED_CONV_MAX_POSITIONS",
        lambda: [onnxnn.nn.Conv2d(256, 256, 3, stride=2, padding=1)],
        (4, 256, 4, 4),
    ),
    # The second Conv's input gradient is a stride-1 ConvTranspose, blocked too.
    BLOCKED: (
        "BLOCKED_CONV_MIN_COLUMNS",
        lambda: [onnxnn.nn.Conv2d(16, 32, 3, padding=1), onnxnn.nn.Tanh(), onnxnn.nn.Conv2d(32, 16, 3, padding=1)],
        (2, 16, 16, 16),
    ),
}


@pytest.mark.parametrize("form", TRAINING_CASES)
def test_training_through_a_lowered_convolution_matches_the_conv(monkeypatch, form):
    bound, layers, input_shape = TRAINING_CASES[form]
    writer = "_conv_as_one_gemm" if form == ONE_GEMM else "emit_blocked_conv"
    written = []

    def trained(lowered: bool):
        original = getattr(conv_lowering, writer)
        monkeypatch.setattr(
            conv_lowering, writer, lambda *args, **kwargs: written.append(1) or original(*args, **kwargs)
        )
        if not lowered:
            monkeypatch.setattr(conv_lowering, bound, 0 if bound == "LOWERED_CONV_MAX_POSITIONS" else 1 << 62)
        onnxnn.manual_seed(0)
        model = onnxnn.nn.Sequential(*layers(), onnxnn.nn.Tanh())
        optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = onnxnn.from_numpy(np.random.default_rng(0).standard_normal(input_shape).astype(np.float32))
        with onnxnn.set_executor("onnxruntime"):
            for _ in range(3):
                optimizer.zero_grad()
                model(x).square().mean().backward()
                optimizer.step()
        monkeypatch.undo()
        onnxnn.ir.clear_caches()
        return [parameter.detach().numpy().copy() for parameter in model.parameters()]

    if form == BLOCKED and block_size() is None:
        pytest.skip("onnxruntime has no blocked-channel kernels on this CPU")
    lowered_parameters = trained(True)
    # The forward Conv; with blocked kernels also the second Conv's ConvTranspose (its input gradient).
    assert len(written) >= (1 if form == ONE_GEMM else 2)
    written.clear()
    for lowered, plain in zip(lowered_parameters, trained(False)):
        # Three steps of float32 rounding in sums of up to 2,304 terms, amplified by nothing larger than 1.
        np.testing.assert_allclose(lowered, plain, rtol=1e-4, atol=1e-5)
    assert not written


def test_a_session_shared_across_sizes_keeps_the_conv(monkeypatch):
    # The lowering chose by the plan's sizes; a graph serving other sizes (fastpath.dynamic_shapes)
    # keeps the Conv, whose speed does not depend on that choice.
    from onnxnn.ir.device import CPU
    from onnxnn.runtime import sessions

    output, arguments, _ = _recorded((8, 512, 2, 2), 512, 3, 1, 1, 1, False)
    graph = plan([output._value], include_shared=False)
    built = []
    monkeypatch.setattr(sessions, "session_for", lambda model, device, threads=None: built.append(model))
    x_position = next(i for i, value in enumerate(graph.inputs) if value is arguments[0]._value)
    sessions.OnnxruntimeExecutor().compile_shared(graph, [(x_position, 0)], CPU)
    assert "Conv" in {node.op_type for node in built[0].graph.node}


def test_the_probe_finds_the_block_of_the_x86_kernels_and_none_where_they_fail(monkeypatch):
    from onnxnn.runtime.ops import conv_nchwc

    if platform.machine().lower() in ("x86_64", "amd64"):
        assert block_size() in (8, 16)  # AVX2 / AVX-512

    def missing(*args):
        raise RuntimeError("no kernel for Conv(1) in domain com.microsoft.nchwc")

    block_size.cache_clear()
    monkeypatch.setattr(conv_nchwc, "_run_probe", missing)
    try:
        assert block_size() is None
        output, _, (x, w, b) = _recorded(*CASES["small ResNet's 16 channels at 32x32"][:-1])
        assert _form_of(build_model(plan([output._value], include_shared=False), lower=True)) is None
    finally:
        block_size.cache_clear()
