"""quantize_dynamic and quantize_static: onnxruntime's quantizers on the exported graph, imported back.

Dynamic MLP bound: a quantized Linear computes ``W_q q(x)`` for ``W x``; with ``|x - q(x)| <= s_x / 2``
(DynamicQuantizeLinear's per-tensor step ``s_x = (max(x, 0) - min(x, 0)) / 255``) and
``|W - W_q| <= s_w / 2`` (the weight scale stored in the graph), each output is within
``|W| (dx + s_x / 2) + s_w / 2 * sum(|x| + dx + s_x / 2)`` of the float one, where ``dx`` bounds the
error the input already carries (ReLU does not grow it). The bound is exact arithmetic; the float32
rounding of both sides is a million times smaller, covered by a factor 1.01.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.quantization import qint8, quantize_dynamic, quantize_static, quint8


def mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 5)
    ).eval()


def op_types(model: onnx.ModelProto) -> list[str]:
    return [node.op_type for node in model.graph.node]


def layer_bound(weight, weight_scale, x, input_error):
    """Elementwise bound of |W x - W_q q(x + e)| for |e| <= input_error (rows of x are samples)."""
    step = (max(x.max() + input_error.max(), 0) - min(x.min() - input_error.max(), 0)) / 255
    reach = np.abs(x) + input_error + step / 2
    return (input_error + step / 2) @ np.abs(weight).T + weight_scale / 2 * reach.sum(axis=1, keepdims=True)


def float_arrays(model):
    return {name: tensor.detach().numpy().copy() for name, tensor in model.state_dict().items()}


@pytest.mark.parametrize("dtype", [qint8, "qint8", "quint8", onnxnn.int8])
def test_dynamic_mlp_within_the_int8_bound(dtype):
    model = mlp()
    x = onnxnn.randn(16, 64)
    quantized = quantize_dynamic(model, x, {nn.Linear}, dtype=dtype)
    state = quantized.state_dict()
    first, second = model[0], model[2]
    data = x.numpy()
    hidden = np.maximum(data @ first.weight.detach().numpy().T + first.bias.detach().numpy(), 0)
    expected = model(x).detach().numpy()
    hidden_error = layer_bound(
        first.weight.detach().numpy(), state["0.weight_scale"].numpy(), data, np.zeros_like(data)
    )
    output_error = layer_bound(second.weight.detach().numpy(), state["2.weight_scale"].numpy(), hidden, hidden_error)
    difference = np.abs(quantized(x).numpy() - expected)
    assert (difference <= 1.01 * output_error).all(), (difference.max(), output_error.min())
    # The worst case adds every rounding error with one sign; in fact they mostly cancel.
    assert 0 < difference.max() < 0.05 * np.abs(expected).max()


# onnxruntime's x86 kernels without VNNI sum pairs of uint8 x int8 products in int16: 255 * 128 * 2
# saturates, 255 * 64 * 2 does not. int8 weights take 7 bits unless the caller says otherwise.
@pytest.mark.parametrize(
    "reduce_range, dtype, low, high",
    [
        (None, qint8, -64, 64),
        (True, qint8, -64, 64),
        (False, qint8, -127, 127),
        (None, quint8, 0, 255),
        (True, quint8, 0, 127),
    ],
)
def test_int8_weights_take_seven_bits_by_default(reduce_range, dtype, low, high):
    model = mlp()
    x = onnxnn.randn(4, 64)
    dynamic = quantize_dynamic(model, x, dtype=dtype, reduce_range=reduce_range).state_dict()
    static = quantize_static(model, x, [x], weight_type=dtype, reduce_range=reduce_range).state_dict()
    for state in (dynamic, static):
        for name in ("0.weight_quantized", "2.weight_quantized"):
            weight = state[name].numpy()
            # The scale puts the largest weight (int8: in magnitude) on an end of the range.
            assert low <= weight.min() and weight.max() <= high
            assert weight.min() == low or weight.max() == high


def test_dynamic_graph_holds_integer_ops_and_is_smaller():
    model = mlp()
    x = onnxnn.randn(4, 64)
    quantized = quantize_dynamic(model, x)
    exported = to_onnx(quantized, (x,))
    ops = op_types(exported)
    assert ops.count("MatMulInteger") == 2 and ops.count("DynamicQuantizeLinear") == 2
    assert "Gemm" not in ops and "MatMul" not in ops
    int8 = [init for init in exported.graph.initializer if init.data_type == onnx.TensorProto.INT8]
    assert {init.name for init in int8} >= {"0.weight_quantized", "2.weight_quantized"}
    # 9472 float weights become bytes; biases and scales stay float: close to 4x smaller.
    ratio = to_onnx(model.eval(), (x,)).ByteSize() / exported.ByteSize()
    assert 3.3 < ratio < 4.1, ratio
    # onnxruntime serves the re-exported file and computes what the imported module computes.
    session = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    served = session.run(None, {"input_0": x.numpy()})[0]
    np.testing.assert_allclose(served, quantized(x).numpy(), rtol=1e-5, atol=1e-5)


def test_dynamic_conv_and_per_channel():
    model = cnn()
    x = onnxnn.randn(2, 3, 8, 8)
    quantized = quantize_dynamic(model, x, {nn.Conv2d, nn.Linear}, per_channel=True)
    ops = op_types(to_onnx(quantized, (x,)))
    assert ops.count("ConvInteger") == 2 and ops.count("MatMulInteger") == 1
    expected = model(x).detach().numpy()
    assert np.abs(quantized(x).numpy() - expected).max() < 0.05 * np.abs(expected).max()


def test_quantize_dynamic_leaves_the_module_unchanged():
    model = mlp().train()
    model[2].eval()
    before = float_arrays(model)
    parameters = list(model.parameters())
    quantize_dynamic(model, onnxnn.randn(4, 64))
    assert model.training and model[0].training and not model[2].training
    assert list(model.parameters()) == parameters and all(p.requires_grad for p in parameters)
    for name, array in float_arrays(model).items():
        np.testing.assert_array_equal(array, before[name])


@pytest.mark.parametrize(
    "quant_format, expected_ops",
    [("QDQ", {"QuantizeLinear", "DequantizeLinear", "Conv"}), ("QOperator", {"QLinearConv"})],
)
def test_static_cnn_close_to_float(quant_format, expected_ops):
    model = cnn()
    samples = [onnxnn.randn(2, 3, 8, 8) for _ in range(6)]
    quantized = quantize_static(model, samples[0], samples, quant_format=quant_format, per_channel=True)
    exported = to_onnx(quantized, (samples[0],))
    assert expected_ops <= set(op_types(exported))
    weights = [init for init in exported.graph.initializer if init.data_type == onnx.TensorProto.INT8 and init.dims]
    assert len([init for init in weights if len(init.dims) > 1]) == 3  # both convolutions' and the Linear's weights
    for x in samples[:2]:
        expected = model(x).detach().numpy()
        # Each of the four activations quantized to 256 levels of its calibrated range.
        assert np.abs(quantized(x).numpy() - expected).max() < 0.05 * np.abs(expected).max()


def test_static_qdq_served_by_onnxruntime_as_imported():
    model = cnn()
    samples = [(onnxnn.randn(2, 3, 8, 8).numpy(),) for _ in range(4)]  # tuples of arrays are samples too
    quantized = quantize_static(model, onnxnn.tensor(samples[0][0]), samples, activation_type=quint8)
    exported = to_onnx(quantized, (samples[0][0],))
    assert op_types(exported).count("QuantizeLinear") >= 4
    options = onnxruntime.SessionOptions()
    # Unoptimized, onnxruntime evaluates the QDQ graph node by node, as onnxnn does: the same
    # float32 operations, up to the convolutions' summation order.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(exported.SerializeToString(), options, providers=["CPUExecutionProvider"])
    served = session.run(None, {"input_0": samples[1][0]})[0]
    ours = quantized(onnxnn.tensor(samples[1][0])).numpy()
    np.testing.assert_allclose(served, ours, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda m, x: quantize_dynamic(m, x, dtype="qint4"), "unsupported quantized dtype 'qint4'"),
        (lambda m, x: quantize_dynamic(m, x, dtype=onnxnn.float16), "unsupported quantized dtype"),
        (lambda m, x: quantize_dynamic(m, x, {nn.ReLU}), "no quantized form for ReLU"),
        (lambda m, x: quantize_dynamic(m, x, {"fc1"}), "unknown entry 'fc1'"),
        (lambda m, x: quantize_dynamic(m, x, inplace=True), "inplace=True is not supported"),
        (lambda m, x: quantize_static(m, x, []), "calibration_data is empty"),
        (lambda m, x: quantize_static(m, x, [(x, x)]), "a sample has 2 inputs"),
        (lambda m, x: quantize_static(m, x, [x], quant_format="QInt"), "unsupported quant_format 'QInt'"),
        (lambda m, x: quantize_static(m, x, [x], calibrate_method="Max"), "unsupported calibrate_method 'Max'"),
        (lambda m, x: quantize_static(m, x, [x], weight_type="int16"), "weight_type: unsupported quantized dtype"),
    ],
)
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call(mlp(), onnxnn.randn(2, 64))
