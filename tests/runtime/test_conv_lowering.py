"""A Conv with a fed weight over small images runs in onnxnn's sessions as one GEMM for the whole batch
(runtime/ops/conv_lowering.py); exported graphs, constant weights and other shapes keep the Conv.

The specification: the lowered graph computes the convolution (against a float64 reference, within
the rounding of its C*k*k-term sums), at the sizes it was built for and at any other size of a
symbolic batch or image; and it is chosen exactly where the bounds say.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.ir.plan import build_model, plan
from onnxnn.nn import functional as F
from onnxnn.runtime.ops import conv_lowering
from onnxnn.runtime.sessions import symbolic_inputs

from .test_conv_ops import conv_reference

EPSILON = np.finfo(np.float32).eps


def _assert_convolution(result, x, w, b, stride, padding, dilation):
    geometry = {"strides": list(stride), "pads_begin": list(padding), "dilations": list(dilation)}
    expected = conv_reference(x, w, b, **geometry)
    # The convolution of magnitudes bounds the rounding of each sum.
    magnitude = conv_reference(np.abs(x), np.abs(w), None if b is None else np.abs(b), **geometry)
    assert result.shape == expected.shape
    terms = w.shape[1] * w.shape[2] * w.shape[3] + (b is not None)
    # A sum of n float32 products is off by at most about n * eps times the sum of their magnitudes.
    np.testing.assert_array_less(np.abs(result - expected), terms * EPSILON * magnitude + 1e-30)


def _pair(value):
    return value if isinstance(value, tuple) else (value, value)


# (input shape, output channels, kernel, stride, padding, dilation, bias, lowered)
CASES = {
    "resnet18 last stage at 64px": ((8, 512, 2, 2), 512, 3, 1, 1, 1, False, True),
    "strided into the last stage": ((8, 256, 4, 4), 512, 3, 2, 1, 1, True, True),
    "1x1 strided downsampling": ((8, 256, 4, 4), 512, 1, 2, 0, 1, False, True),
    "asymmetric padding, dilation, 3 positions": ((4, 64, 5, 5), 128, 3, 2, (0, 2), 2, True, True),
    "rectangular kernel and image": ((3, 128, 3, 6), 192, (1, 3), (1, 2), (0, 1), 1, True, True),
    "one output position": ((2, 256, 3, 3), 256, 3, 1, 0, 1, True, True),
    "16 positions: per-image GEMMs are wide enough": ((8, 256, 4, 4), 256, 3, 1, 1, 1, False, False),
    "small weight": ((8, 16, 2, 2), 16, 3, 1, 1, 1, True, False),
    "one image": ((1, 512, 2, 2), 512, 3, 1, 1, 1, False, False),
    # A 3-channel stem's weight gradient as a Conv: channels and batch trade places, the 32x32 output
    # gradient is the kernel (1,024 taps) and the 3x3 weight the output.
    "weight-gradient Conv with a 32x32 kernel": ((3, 32, 34, 34), 16, 32, 1, 0, 1, False, False),
}


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
def test_a_session_computes_the_convolution_and_lowers_it_where_the_bounds_say(case):
    *shapes, lowered = case
    stride, padding, dilation = (_pair(value) for value in shapes[3:6])
    with onnxnn.set_executor("onnxruntime"):
        output, _, (x, w, b) = _recorded(*shapes)
        model = build_model(plan([output._value], include_shared=False), lower=True)
        _assert_convolution(output.numpy(), x, w, b, stride, padding, dilation)
    op_types = {node.op_type for node in model.graph.node}
    assert ("Conv" not in op_types and "MatMul" in op_types) is lowered


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


@pytest.mark.parametrize(
    "case", [CASES["strided into the last stage"], CASES["asymmetric padding, dilation, 3 positions"]], ids=str
)
def test_the_lowered_graph_is_exact_at_every_size_of_a_symbolic_batch_and_image(case):
    *shapes, _ = case
    stride, padding, dilation = (_pair(value) for value in shapes[3:6])
    output, arguments, (x, w, b) = _recorded(*shapes)
    graph = plan([output._value], include_shared=False)
    model = build_model(graph, lower=True)
    assert "Conv" not in {node.op_type for node in model.graph.node}
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


def test_training_through_a_lowered_convolution_matches_the_conv(monkeypatch):
    def trained(lowered: bool):
        if not lowered:
            monkeypatch.setattr(conv_lowering, "LOWERED_CONV_MAX_POSITIONS", 0)
        onnxnn.manual_seed(0)
        model = onnxnn.nn.Sequential(onnxnn.nn.Conv2d(256, 256, 3, stride=2, padding=1), onnxnn.nn.Tanh())
        optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = onnxnn.from_numpy(np.random.default_rng(0).standard_normal((4, 256, 4, 4)).astype(np.float32))
        with onnxnn.set_executor("onnxruntime"):
            for _ in range(3):
                optimizer.zero_grad()
                model(x).square().mean().backward()
                optimizer.step()
        monkeypatch.undo()
        onnxnn.ir.clear_caches()
        return [parameter.detach().numpy().copy() for parameter in model.parameters()]

    for lowered, plain in zip(trained(True), trained(False)):
        # Three steps of float32 rounding in sums of 2,304 terms, amplified by nothing larger than 1.
        np.testing.assert_allclose(lowered, plain, rtol=1e-4, atol=1e-5)


def test_a_session_shared_across_sizes_keeps_the_conv(monkeypatch):
    # The lowering chose by the plan's sizes; a graph serving other sizes (fastpath.dynamic_shapes)
    # keeps the Conv, whose speed does not depend on that choice.
    from onnxnn.ir.device import CPU
    from onnxnn.runtime import sessions

    output, arguments, _ = _recorded((8, 512, 2, 2), 512, 3, 1, 1, 1, False)
    graph = plan([output._value], include_shared=False)
    built = []
    monkeypatch.setattr(sessions, "CompiledSession", lambda model, device, threads=None: built.append(model))
    x_position = next(i for i, value in enumerate(graph.inputs) if value is arguments[0]._value)
    sessions.OnnxruntimeExecutor().compile_shared(graph, [(x_position, 0)], CPU)
    assert "Conv" in {node.op_type for node in built[0].graph.node}
