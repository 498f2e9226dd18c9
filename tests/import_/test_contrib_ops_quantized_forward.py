"""onnxruntime's com.microsoft quantized contrib ops in imported models (onnxnn/import_/contrib.py),
forward only.

One row per case: a one-node model (opset_import ai.onnx 21 and com.microsoft 1) imported with
``from_onnx`` must compute what onnxruntime's own kernel computes on the same model, on both of
onnxnn's executors (:func:`check_quantized_forward` in contrib_cases.py). The float contrib ops, with
their gradients, are in test_contrib_ops_forward_gradients.py.
"""

from __future__ import annotations


import numpy as np
import pytest


from .contrib_cases import (
    Case,
    _inputs,
    _nbits_inputs,
    _normal,
    _quantized,
    _scalar,
    check_quantized_forward,
)

# ----------------------------------------------------------------------------- quantized ops (forward only)


UINT8_PAIR = (_quantized(np.uint8, 2, 3, 4), _scalar(0.05), np.array(120, np.uint8))
INT8_PAIR = (_quantized(np.int8, 2, 3, 4), _scalar(0.03), np.array(-3, np.int8))
QUANTIZED_CASES = [
    Case(
        "QLinearAdd",
        _inputs(
            *UINT8_PAIR, *UINT8_PAIR[:1], _scalar(0.04), np.array(100, np.uint8), _scalar(0.1), np.array(128, np.uint8)
        ),
        id="QLinearAdd-uint8",
    ),
    Case(
        "QLinearAdd",
        _inputs(
            *INT8_PAIR, _quantized(np.int8, 4), _scalar(0.02), np.array(5, np.int8), _scalar(0.05), np.array(0, np.int8)
        ),
        id="QLinearAdd-int8-broadcast",
    ),
    Case(
        "QLinearMul",
        _inputs(
            *UINT8_PAIR, *UINT8_PAIR[:1], _scalar(0.04), np.array(100, np.uint8), _scalar(0.3), np.array(128, np.uint8)
        ),
        id="QLinearMul",
    ),
    Case("QLinearSigmoid", _inputs(*UINT8_PAIR, _scalar(1 / 256), np.array(0, np.uint8)), id="QLinearSigmoid"),
    Case(
        "QLinearLeakyRelu",
        _inputs(*INT8_PAIR, _scalar(0.02), np.array(-10, np.int8)),
        {"alpha": 0.1},
        id="QLinearLeakyRelu",
    ),
    Case(
        "QLinearGlobalAveragePool",
        _inputs(
            _quantized(np.uint8, 1, 3, 4, 4),
            _scalar(0.05),
            np.array(128, np.uint8),
            _scalar(0.02),
            np.array(120, np.uint8),
        ),
        id="QLinearGlobalAveragePool",
    ),
    Case(
        "QLinearSoftmax",
        _inputs(*UINT8_PAIR, _scalar(1 / 256), np.array(0, np.uint8)),
        {"opset": 13},
        id="QLinearSoftmax-opset-13",
    ),
    Case(
        "QLinearSoftmax",
        _inputs(*INT8_PAIR, _scalar(1 / 256), np.array(-128, np.int8)),
        {"opset": 12, "axis": 1},
        id="QLinearSoftmax-opset-12-axis-1",
    ),
    Case(
        "QLinearAveragePool",
        _inputs(
            _quantized(np.uint8, 1, 3, 5, 5),
            _scalar(0.05),
            np.array(128, np.uint8),
            _scalar(0.03),
            np.array(120, np.uint8),
        ),
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
        id="QLinearAveragePool",
    ),
    Case(
        "QLinearAveragePool",
        _inputs(
            _quantized(np.uint8, 1, 5, 5, 3),
            _scalar(0.05),
            np.array(128, np.uint8),
            _scalar(0.03),
            np.array(120, np.uint8),
        ),
        {"kernel_shape": [2, 2], "channels_last": 1, "count_include_pad": 1},
        id="QLinearAveragePool-channels-last",
    ),
    Case(
        "QLinearConcat",
        _inputs(
            _scalar(0.05),
            np.array(128, np.uint8),
            *UINT8_PAIR,
            _quantized(np.uint8, 2, 2, 4),
            _scalar(0.02),
            np.array(10, np.uint8),
        ),
        {"axis": 1},
        id="QLinearConcat",
    ),
    # int8 weights in 7 bits, as onnxruntime's quantizer writes them (reduce_range): with the full
    # range its AVX2 u8 x s8 kernel saturates pairs of products at int16, which exact math does not.
    Case(
        "DynamicQuantizeMatMul",
        _inputs(
            _normal(3, 16),
            lambda rng: rng.integers(-64, 64, (16, 5)).astype(np.int8),
            _scalar(0.02),
            np.array(0, np.int8),
            _normal(5),
        ),
        terms=18,
        id="DynamicQuantizeMatMul",
    ),
    Case(
        "DynamicQuantizeMatMul",
        _inputs(
            _normal(2, 3, 16),
            _quantized(np.uint8, 16, 5),
            lambda rng: rng.uniform(0.01, 0.03, 5).astype(np.float32),
            _quantized(np.uint8, 5),
        ),
        terms=18,
        id="DynamicQuantizeMatMul-per-column",
    ),
    Case(
        "MatMulNBits",
        _nbits_inputs(4, 2, 16, 5, False),
        {"K": 32, "N": 5, "bits": 4, "block_size": 16},
        terms=34,
        id="MatMulNBits-4bit",
    ),
    Case(
        "MatMulNBits",
        _nbits_inputs(4, 2, 16, 5, True),
        {"K": 32, "N": 5, "bits": 4, "block_size": 16},
        terms=34,
        id="MatMulNBits-4bit-zero-points",
    ),
    Case(
        "MatMulNBits",
        _nbits_inputs(4, 2, 16, 5, "float"),
        {"K": 32, "N": 5, "bits": 4, "block_size": 16},
        terms=34,
        id="MatMulNBits-4bit-float-zero-points",
    ),
    Case(
        "MatMulNBits",
        _nbits_inputs(8, 2, 16, 5, True),
        {"K": 32, "N": 5, "bits": 8, "block_size": 16},
        terms=34,
        id="MatMulNBits-8bit-zero-points",
    ),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", QUANTIZED_CASES, ids=str)
def test_quantized_forward_matches_onnxruntime(case, executor):
    check_quantized_forward(case, executor)
