"""onnxruntime's quantized contrib ops that ORT-quantized CNNs and transformers contain beyond those
of ``test_contrib_ops_*.py``: QGemm, QLinearConv (channels-last too), QLinearWhere,
QLinearReduceMean, QAttention, the contrib domain's QuantizeLinear/DequantizeLinear (16-bit) and
MatMulIntegerToFloat (onnxnn/import_/contrib_quantized.py).

Each one-node model runs in onnxruntime's CPU provider as the reference; QLinearReduceMean, which
that provider lacks, against its documented definition (DequantizeLinear, ReduceMean,
QuantizeLinear) run by onnxruntime. Quantized results may differ from onnxruntime's by one
quantization step: its kernels sum exact integer products and requantize once with a float
multiplier, onnxnn sums the dequantized products in float32, so a value on a rounding boundary
may round the other way. Float results (QGemm without an output scale, QAttention,
MatMulIntegerToFloat, DequantizeLinear) within float32 rounding of their sums
(``contrib_cases.py``'s module docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .test_contrib_layouts import _onnxruntime_run
from .contrib_cases import Case, _inputs, _normal, _quantized, _scalar, check_quantized_forward, check_reexport


def _weights_int8(*shape):
    # 7-bit int8 weights, as onnxruntime's quantizer writes them (reduce_range): with the full
    # range its AVX2 u8 x s8 kernels saturate pairs of products at int16, which exact math does not.
    return lambda rng: rng.integers(-64, 64, shape).astype(np.int8)


def _int32(*shape):
    # In units of the scales product (0.001 here): up to 15 output steps, so a lost bias shows.
    return lambda rng: rng.integers(-3000, 3000, shape).astype(np.int32)


def _uint8(value):
    return np.array(value, np.uint8)


def _reduce_mean_reference(axes, keepdims):
    """QLinearReduceMean as documented: DequantizeLinear, ReduceMean, QuantizeLinear, in onnxruntime."""

    def reference(data, data_scale, data_zero_point, reduced_scale, reduced_zero_point):
        nodes = [
            helper.make_node("DequantizeLinear", ["in_0", "in_1", "in_2"], ["values"]),
            helper.make_node("Constant", [], ["axes"], value_ints=axes),
            helper.make_node("ReduceMean", ["values", "axes"], ["mean"], keepdims=keepdims),
            helper.make_node("QuantizeLinear", ["mean", "in_3", "in_4"], ["out_0"]),
        ]
        return _onnxruntime_run(nodes, [data, data_scale, data_zero_point, reduced_scale, reduced_zero_point])

    return reference


def _reduce_mean(axes, keepdims, id):
    return Case(
        "QLinearReduceMean",
        _inputs(_quantized(np.uint8, 2, 3, 4), _scalar(0.05), _uint8(128), _scalar(0.01), _uint8(120)),
        {"axes": axes, "keepdims": keepdims},
        id=id,
        reference=_reduce_mean_reference(axes, keepdims),
    )


CASES = [
    Case(
        "QGemm",
        _inputs(
            _quantized(np.uint8, 3, 16),
            _scalar(0.05),
            _uint8(128),
            _weights_int8(16, 5),
            _scalar(0.02),
            np.array(0, np.int8),
            _int32(5),
            _scalar(0.3),
            _uint8(100),
        ),
        id="QGemm-quantized-output-bias",
    ),
    Case(
        "QGemm",
        _inputs(
            _quantized(np.uint8, 16, 3),
            _scalar(0.05),
            _uint8(128),
            _weights_int8(5, 16),
            lambda rng: rng.uniform(0.01, 0.03, 5).astype(np.float32),
            np.zeros(5, np.int8),
        ),
        {"transA": 1, "transB": 1, "alpha": 0.5},
        terms=18,
        id="QGemm-float-output-per-column-transposed-alpha",
    ),
    Case(
        "QLinearConv",
        _inputs(
            _quantized(np.uint8, 1, 2, 5, 5),
            _scalar(0.05),
            _uint8(128),
            _weights_int8(3, 2, 3, 3),
            _scalar(0.02),
            np.array(0, np.int8),
            _scalar(0.2),
            _uint8(120),
            _int32(3),
        ),
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        id="QLinearConv-bias",
    ),
    Case(
        "QLinearConv",
        _inputs(
            _quantized(np.uint8, 1, 6, 5, 4),
            _scalar(0.05),
            _uint8(128),
            _weights_int8(4, 2, 3, 2),
            lambda rng: rng.uniform(0.01, 0.03, 4).astype(np.float32),
            np.zeros(4, np.int8),
            _scalar(0.1),
            _uint8(128),
        ),
        {"channels_last": 1, "group": 2, "strides": [2, 1]},
        id="QLinearConv-channels-last-grouped-per-channel",
    ),
    Case(
        "QLinearWhere",
        _inputs(
            lambda rng: rng.integers(0, 2, (2, 3, 4)).astype(bool),
            _quantized(np.uint8, 2, 3, 4),
            _scalar(0.05),
            _uint8(128),
            _quantized(np.uint8, 4),
            _scalar(0.02),
            _uint8(10),
            _scalar(0.04),
            _uint8(100),
        ),
        id="QLinearWhere-broadcast",
    ),
    _reduce_mean([1], 1, "QLinearReduceMean-keepdims"),
    _reduce_mean([0, 2], 0, "QLinearReduceMean-two-axes"),
    Case(
        "QAttention",
        _inputs(
            _quantized(np.uint8, 2, 4, 8),
            _quantized(np.uint8, 8, 24),
            _normal(24),
            _scalar(0.05),
            _scalar(0.01),
            np.array([4, 2], np.int32),
            _uint8(128),
            _uint8(128),
        ),
        {"num_heads": 2},
        terms=40,
        scale=64.0,
        id="QAttention-mask-lengths",
    ),
    Case(
        "QAttention",
        _inputs(
            _quantized(np.uint8, 2, 4, 8),
            _weights_int8(8, 24),
            _normal(24),
            _scalar(0.05),
            lambda rng: rng.uniform(0.005, 0.02, 24).astype(np.float32),
            None,
            _uint8(128),
            np.zeros(24, np.int8),
        ),
        {"num_heads": 2, "unidirectional": 1},
        num_outputs=2,
        terms=40,
        scale=64.0,
        id="QAttention-causal-per-column-present",
    ),
]


CASES += [
    Case(
        "QuantizeLinear",
        _inputs(
            _normal(2, 3, 4), lambda rng: rng.uniform(1e-4, 1e-3, 3).astype(np.float32), np.arange(3, dtype=np.uint16)
        ),
        {"axis": 1},
        id="QuantizeLinear-uint16-per-axis",
    ),
    Case(
        "DequantizeLinear",
        _inputs(_quantized(np.int16, 2, 3, 4), _scalar(1e-4), np.array(-7, np.int16)),
        id="DequantizeLinear-int16",
    ),
    Case(
        "MatMulIntegerToFloat",
        _inputs(
            _quantized(np.uint8, 2, 3, 16),
            _weights_int8(16, 5),
            np.array([0.05], np.float32),
            lambda rng: rng.uniform(0.01, 0.03, 5).astype(np.float32),
            np.array([128], np.uint8),
            np.zeros(5, np.int8),
            _normal(5),
        ),
        terms=18,
        id="MatMulIntegerToFloat-per-column-bias",
    ),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_quantized_forward_matches_onnxruntime(case, executor):
    check_quantized_forward(case, executor)


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[5], CASES[8]], ids=str)
def test_reexported_module_runs_in_onnxruntime(case):
    check_reexport(case)
