"""float64 ``nn.LSTM``/``nn.GRU``/``nn.RNN`` exports run in plain onnxruntime.

onnxruntime's CPU recurrent kernels take float32 only, so ``to_onnx`` writes a float64 recurrent
node as the float32 node between Casts: the graph takes and returns float64, and its values are the
module's own (onnxnn's kernels run the float64 node in double) within float32's precision. Each
step rounds the state to float32 (2**-24 relative) and the gates are at most 1 in size, so after 6
steps of inputs and weights of order 1 the outputs agree to well under 1e-5.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

TOLERANCE = 1e-5

# (layer, kwargs, takes a (h, c) state)
LAYERS = [
    (nn.LSTM, {}, True),
    (nn.GRU, {}, False),
    (nn.RNN, {}, False),
    (nn.RNN, {"nonlinearity": "relu"}, False),
    (nn.LSTM, {"num_layers": 2, "bidirectional": True}, True),
    (nn.GRU, {"batch_first": True, "bias": False}, False),
]


def _export(module, x, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_onnx(module, x, **kwargs)


@pytest.mark.parametrize("layer, kwargs, lstm", LAYERS)
def test_float64_recurrent_export_runs_in_onnxruntime_with_the_modules_values(layer, kwargs, lstm):
    onnxnn.manual_seed(0)
    module = layer(4, 5, **kwargs).double().eval()
    x = onnxnn.randn(6, 3, 4, dtype=onnxnn.float64)
    with onnxnn.set_executor("kernels"), onnxnn.no_grad():
        output, state = module(x)
    proto = _export(module, x, input_names=["x"])
    results = onnxruntime.InferenceSession(proto.SerializeToString()).run(None, {"x": x.numpy()})
    expected = [output] + (list(state) if lstm else [state])
    assert len(results) == len(expected)
    for actual, wanted in zip(results, expected):
        assert actual.dtype == np.float64
        np.testing.assert_allclose(actual, wanted.numpy(), rtol=0, atol=TOLERANCE)


def test_float64_lstm_export_keeps_a_dynamic_sequence_length():
    onnxnn.manual_seed(1)
    module = nn.LSTM(4, 5).double().eval()
    proto = _export(
        module, onnxnn.randn(6, 2, 4, dtype=onnxnn.float64), input_names=["x"], dynamic_axes={"x": {0: "steps"}}
    )
    session = onnxruntime.InferenceSession(proto.SerializeToString())
    for steps in (1, 3, 11):
        x = onnxnn.randn(steps, 2, 4, dtype=onnxnn.float64)
        with onnxnn.set_executor("kernels"), onnxnn.no_grad():
            output, _ = module(x)
        (actual, *_) = session.run(None, {"x": x.numpy()})
        np.testing.assert_allclose(actual, output.numpy(), rtol=0, atol=TOLERANCE)


def test_float32_recurrent_export_writes_the_node_alone():
    proto = _export(nn.LSTM(4, 5).eval(), onnxnn.randn(6, 2, 4))
    ops = [node.op_type for node in proto.graph.node]
    assert ops.count("LSTM") == 1 and "Cast" not in ops, ops
