"""Quantization-aware training: prepare_qat swaps in fake-quantized layers, training lowers the loss
through the straight-through gradient, and the converted model exports as a QDQ graph that
onnxruntime runs as the module computes.

Served without graph optimizations, onnxruntime evaluates the QDQ nodes one by one in float32 as
onnxnn does (equal up to summation order: float32 tolerances). With its optimizations it fuses them
into int8 kernels whose requantization may round a value to the neighbouring level: at most one
step of the output's grid (its scale) apart, checked with one step of slack for the float sums.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.quantization import DeQuantStub, FakeQuantize, QuantStub, convert, get_default_qat_qconfig, prepare_qat, qat


def small_cnn():
    return nn.Sequential(
        QuantStub(), nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3), DeQuantStub()
    )


def train(model, steps=12):
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.05)
    x, target = onnxnn.randn(16, 1, 8, 8), onnxnn.randint(0, 3, (16,))
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, x


def test_prepare_qat_swaps_layers_and_keeps_the_original():
    model = small_cnn().train()
    prepared = prepare_qat(model)
    assert type(model[1]) is nn.Conv2d and type(model[4]) is nn.Linear  # not in place
    assert isinstance(prepared[1], qat.Conv2d) and isinstance(prepared[4], qat.Linear)
    assert isinstance(prepared[0].activation_post_process, FakeQuantize)
    np.testing.assert_array_equal(prepared[1].weight.detach().numpy(), model[1].weight.detach().numpy())
    keys = list(prepared.state_dict())
    assert "1.weight_fake_quant.scale" in keys and "4.activation_post_process.zero_point" in keys
    assert prepared[1].weight_fake_quant.qscheme == "per_channel_symmetric"
    # 7-bit activations, 8-bit weights: onnxruntime's x86 int8 kernels without VNNI sum pairs of
    # products in int16, which 255 * 128 * 2 overflows and 127 * 128 * 2 does not.
    for activations in (prepared[0].activation_post_process, prepared[1].activation_post_process):
        assert (activations.quant_min, activations.quant_max) == (0, 127)
    assert (prepared[1].weight_fake_quant.quant_min, prepared[1].weight_fake_quant.quant_max) == (-128, 127)


def test_a_none_qconfig_keeps_a_layer_float():
    model = small_cnn().train()
    model[4].qconfig = None
    prepared = prepare_qat(model, qconfig=get_default_qat_qconfig())
    assert isinstance(prepared[1], qat.Conv2d) and type(prepared[4]) is nn.Linear


def test_training_lowers_the_loss_and_the_export_runs_in_onnxruntime():
    prepared = prepare_qat(small_cnn().train())
    losses, x = train(prepared)
    assert losses[-1] < 0.9 * losses[0], losses
    assert prepared[1].weight.grad is not None and np.abs(prepared[1].weight.grad.numpy()).sum() > 0
    converted = convert(prepared)
    assert prepared[1].weight_fake_quant._flag("observer_enabled")  # convert copied
    exported = to_onnx(converted, (x,))
    ops = [node.op_type for node in exported.graph.node]
    # Input, conv weight, conv output, linear weight, linear output: one pair each.
    assert ops.count("QuantizeLinear") == 5 and ops.count("DequantizeLinear") == 5
    expected = converted(x).detach().numpy()
    plain = onnxruntime.SessionOptions()
    plain.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    for options, tolerance in ((plain, 1e-5), (onnxruntime.SessionOptions(), None)):
        session = onnxruntime.InferenceSession(
            exported.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        served = session.run(None, {"input_0": x.numpy()})[0]
        if tolerance is not None:
            np.testing.assert_allclose(served, expected, rtol=tolerance, atol=tolerance)
        else:
            step = converted[4].activation_post_process.scale.numpy()[0]
            assert np.abs(served - expected).max() <= 2 * step


def test_converted_model_is_frozen():
    prepared = prepare_qat(small_cnn().train())
    _, x = train(prepared, steps=2)
    converted = convert(prepared)
    scale = converted[4].activation_post_process.scale.numpy().copy()
    converted(x * 5)
    np.testing.assert_array_equal(converted[4].activation_post_process.scale.numpy(), scale)
    assert not converted.training


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: prepare_qat("model"), TypeError, "expected an nn.Module"),
        (lambda: prepare_qat(small_cnn(), qconfig=("a", "b")), TypeError, "qconfig must be a QConfig"),
        (lambda: convert(small_cnn(), mapping={}), ValueError, "mapping is not supported"),
        (lambda: get_default_qat_qconfig("tensorrt"), ValueError, "unknown backend 'tensorrt'"),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
