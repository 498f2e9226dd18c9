"""Exported graphs keep their meaning through plain onnxruntime's graph optimizers.

Each case exports a computation one of onnxruntime 1.31's optimizers mishandles and serves it twice:
in a session with every optimizer (what a user's server runs) and in one with none (the graph as
written). Both must agree, and agree with onnxnn's own result; without the guards of
``onnxnn/export/onnxruntime_optimizer_guards.py`` each case serves other values or none.
"""

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn as nn
import onnxnn.nn.functional as F
from onnxnn.export import to_onnx


class Computation(nn.Module):
    def __init__(self, function, parameters=()):
        super().__init__()
        self.function = function
        self.weights = nn.ParameterList([nn.Parameter(onnxnn.tensor(p)) for p in parameters])

    def forward(self, *inputs):
        return self.function(*inputs, *self.weights)


def _pow4_normalization(x, weight, bias):
    centred = x - x.mean(-1, keepdim=True)
    return centred / (centred.pow(4).mean(-1, keepdim=True) + 1e-5).sqrt() * weight + bias


_RANDOM = np.random.default_rng(0)
_NEGATIVE = -1.0 - _RANDOM.random((2, 3, 5, 5), dtype=np.float32)
_SIGNED = _RANDOM.standard_normal((2, 3, 5, 5), dtype=np.float32)
_DIVISORS = np.array([1, -1, 2, -3, 7, 1], np.int64)
_FACTORS = np.array([5, 6, -7, 8, 9, -10], np.int64)
_ROWS = _RANDOM.standard_normal((4, 8), dtype=np.float32)

CASES = {
    # Pad_Fusion would fold the zero padding into MaxPool's -inf padding.
    "max_pool_of_zero_pad": (lambda x: F.max_pool2d(F.pad(x, (1, 1, 1, 1)), 2), (_NEGATIVE,), ()),
    "max_pool_of_zero_pad_through_cast": (
        lambda x: F.max_pool2d(F.pad(x, (1, 2, 0, 1)).double(), 3, 1),
        (_NEGATIVE,),
        (),
    ),
    "max_pool_of_zero_pad_of_transpose": (
        lambda x: F.max_pool2d(F.pad(x.permute(0, 3, 1, 2), (1, 1, 1, 1)), 2),
        (_NEGATIVE,),
        (),
    ),
    # ... and into AveragePool's own padding, past the kernel's size: a session that cannot be built.
    "avg_pool_of_zero_pad": (
        lambda x: F.avg_pool2d(F.pad(x, (1, 0, 2, 1)), 3, 1, padding=1, count_include_pad=True),
        (_SIGNED,),
        (),
    ),
    # DivMulFusion would serve (1 // a) * b as b // a.
    "integer_reciprocal_times": (
        lambda a, b: onnxnn.div(1, a, rounding_mode="trunc") * b,
        (_DIVISORS, _FACTORS),
        (),
    ),
    # LayerNormFusionL1 would serve a pow(4) normalization as LayerNormalization.
    "pow4_normalization": (
        _pow4_normalization,
        (_ROWS,),
        (_RANDOM.random(8, dtype=np.float32) + 0.5, _RANDOM.standard_normal(8, dtype=np.float32)),
    ),
    # MatmulTransposeFusion (with two other optimizers) would crash the process building the session,
    # for every batch-moving transpose that reaches the product, also one onnxruntime merges or moves.
    "float16_linear_of_sequence_first_transpose": (
        lambda x, weight: F.linear(x.transpose(0, 1), weight),
        (_RANDOM.standard_normal((2, 32, 4)).astype(np.float16),),
        (_RANDOM.standard_normal((1, 4)).astype(np.float16),),
    ),
    "float16_linear_of_permute_1_2_0": (
        lambda x, weight: F.linear(x.permute(1, 2, 0), weight),
        (_RANDOM.standard_normal((4, 2, 5)).astype(np.float16),),
        (_RANDOM.standard_normal((3, 4)).astype(np.float16),),
    ),
    "float16_linear_of_permute_1_2_3_0": (
        lambda x, weight: F.linear(x.permute(1, 2, 3, 0), weight),
        (_RANDOM.standard_normal((4, 2, 3, 5)).astype(np.float16),),
        (_RANDOM.standard_normal((3, 4)).astype(np.float16),),
    ),
    "float16_linear_of_merged_transposes": (
        lambda x, weight: F.linear(x.transpose(0, 1).transpose(1, 2), weight),
        (_RANDOM.standard_normal((4, 2, 5)).astype(np.float16),),
        (_RANDOM.standard_normal((3, 4)).astype(np.float16),),
    ),
    "float16_matrix_vector_of_transpose": (
        lambda x, vector: x.transpose(0, 1) @ vector,
        (_RANDOM.standard_normal((2, 6, 4)).astype(np.float16),),
        (_RANDOM.standard_normal(4).astype(np.float16),),
    ),
    "float16_matrix_times_permute_1_0_2": (
        lambda x, weight: weight @ x.permute(1, 0, 2),
        (_RANDOM.standard_normal((4, 2, 5)).astype(np.float16),),
        (_RANDOM.standard_normal((3, 4)).astype(np.float16),),
    ),
    "float16_matrix_times_permute_1_2_0": (
        lambda x, weight: weight @ x.permute(1, 2, 0),
        (_RANDOM.standard_normal((5, 2, 4)).astype(np.float16),),
        (_RANDOM.standard_normal((3, 4)).astype(np.float16),),
    ),
    # FuseReluClip would throw for a float64 bound: no session.
    "float64_relu_then_clamp": (
        lambda x: F.relu(x).clamp(max=6.0) + F.hardtanh(F.relu(x), -1.0, 1.0) + F.relu6(F.relu(x)),
        (np.array([[-8.0, -0.0, 0.0, 0.5, 7.0, np.nan, -np.inf, np.inf]]),),
        (),
    ),
    # NoopElimination would drop y + 0.0, which turns y = -0.0 into +0.0 (here 1 / y: +inf, not -inf).
    "reciprocal_of_a_sum_with_zero": (
        lambda x: 1.0 / (-x.abs() + 0.0) + 1.0 / (-x.abs() - (-0.0)),
        (np.array([[0.0, -0.0, 2.0, np.nan]], np.float32),),
        (),
    ),
    # MatMulScaleFusion would fold float64 scales into a float32 attribute.
    "float64_scaled_products": (
        lambda x: (x / 3.0) @ x.mT * 0.1 + F.scaled_dot_product_attention(x, x, x).sum(-1, keepdim=True),
        (_RANDOM.standard_normal((2, 5, 4)),),
        (),
    ),
    # The guards' own nodes are named apart from the exporter's (two nodes of one name: no session).
    "two_integer_reciprocals": (
        lambda x: 1 // (x + 1).abs().clamp(min=1) + 1 // ((x + 1) * 2).abs().clamp(min=1),
        (np.array([[-3, -1, 0, 1, 2]], np.int64),),
        (),
    ),
}


def _serve(proto, inputs, level):
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = level
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [graph_input.name for graph_input in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))[0]


@pytest.mark.parametrize("opset", [17, 18, None])
@pytest.mark.parametrize("case", list(CASES))
def test_exported_graph_means_the_same_after_onnxruntime_optimizers(case, opset):
    function, inputs, parameters = CASES[case]
    model = Computation(function, parameters).eval()
    tensors = tuple(onnxnn.tensor(value) for value in inputs)
    expected = model(*tensors).detach().numpy()
    proto = to_onnx(model, tensors, opset_version=opset)

    as_written = _serve(proto, inputs, onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)
    optimized = _serve(proto, inputs, onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL)

    # The guards rewrite exactly; the optimizers that remain may reassociate a float sum (a mean of
    # 8 terms at most) or keep a float16 chain in float32 between its ops, so results agree to a
    # few units in the last place of their dtype.
    tolerance = 4 * float(np.finfo(expected.dtype).eps) if expected.dtype.kind == "f" else 0
    np.testing.assert_allclose(as_written, expected, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(optimized, as_written, rtol=tolerance, atol=tolerance)
