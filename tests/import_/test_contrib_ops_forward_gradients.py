"""onnxruntime's com.microsoft contrib ops in imported models (onnxnn/import_/contrib.py): forward and
gradients of the float ops, and the ops and inputs refused at import.

One row per case: a one-node model (opset_import ai.onnx 21 and com.microsoft 1) imported with
``from_onnx`` must compute what onnxruntime's own kernel computes on the same model, on both of
onnxnn's executors, and its gradients must match float64 central differences (the same node
with DOUBLE inputs, which onnxnn replays in float64 ops; onnxruntime has no float64 kernels for
most contrib ops, so the forward comparison is in float32) on the kernels executor, and on the
onnxruntime executor for the first case of each op.

The forward tolerance and the checks are in contrib_cases.py; the quantized ops (forward only) are in
test_contrib_ops_quantized_forward.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper

from onnxnn.errors import ModelLoadError
from onnxnn.import_ import from_onnx

from .contrib_cases import (
    CONV,
    COS,
    COS_PARTIAL,
    Case,
    GQA_COS,
    GQA_HEAD,
    GQA_LENGTHS,
    GQA_SIN,
    HEADS,
    HIDDEN,
    MS,
    SEQUENCE,
    SIN,
    SIN_PARTIAL,
    _arrays,
    _bias_split_gelu,
    _imported,
    _inputs,
    _integers,
    _mask,
    _model,
    _normal,
    check_first_output_gradients,
    check_forward,
    gradient_runs,
)

CASES = [
    Case("FusedMatMul", _inputs(_normal(2, 3, 4), _normal(2, 4, 5)), {}, terms=4, id="FusedMatMul"),
    Case(
        "FusedMatMul",
        _inputs(_normal(2, 4, 3), _normal(2, 5, 4)),
        {"alpha": 0.125, "transA": 1, "transB": 1},
        terms=5,
        id="FusedMatMul-trans-alpha",
    ),
    Case(
        "FusedMatMul",
        _inputs(_normal(3, 2, 4), _normal(2, 4, 5)),
        {"transBatchA": 1},
        terms=4,
        id="FusedMatMul-transBatchA",
    ),
    Case(
        "FusedMatMul",
        _inputs(_normal(4, 2, 3), _normal(2, 4, 5)),
        {"transBatchA": 1, "transA": 1},
        terms=4,
        id="FusedMatMul-transBatchA-transA",
    ),
    Case(
        "FusedMatMul",
        _inputs(_normal(2, 3, 4), _normal(5, 2, 4)),
        {"transBatchB": 1, "transB": 1},
        terms=4,
        id="FusedMatMul-transBatchB-transB",
    ),
    Case("Gelu", _inputs(_normal(2, 3, 4)), terms=4),
    Case("BiasGelu", _inputs(_normal(2, 3, 4), _normal(4)), terms=5),
    Case("FastGelu", _inputs(_normal(2, 3, 4)), terms=8, id="FastGelu"),
    Case("FastGelu", _inputs(_normal(2, 3, 4), _normal(4)), terms=9, id="FastGelu-bias"),
    Case("QuickGelu", _inputs(_normal(2, 3, 4)), {"alpha": 1.5}, terms=4),
    Case("BiasSplitGelu", _inputs(_normal(2, 3, 8), _normal(8)), terms=6, reference=_bias_split_gelu),
    Case(
        "BiasAdd",
        _inputs(_normal(2, 3, 4), _normal(4), _normal(2, 3, 4)),
        terms=2,
        reference=lambda x, bias, skip: [x + bias + skip],
    ),
    Case(
        "SkipLayerNormalization",
        _inputs(_normal(2, 3, 8), _normal(2, 3, 8), _normal(8), _normal(8), _normal(8)),
        {"epsilon": 1e-5},
        num_outputs=4,
        terms=24,
        id="SkipLayerNormalization-all-outputs",
    ),
    Case(
        "SkipLayerNormalization",
        _inputs(_normal(2, 3, 8), _normal(2, 3, 8), _normal(8)),
        terms=24,
        id="SkipLayerNormalization-no-beta-no-bias",
    ),
    Case(
        "SkipSimplifiedLayerNormalization",
        _inputs(_normal(2, 3, 8), _normal(2, 3, 8), _normal(8), _normal(8)),
        {"epsilon": 1e-6},
        num_outputs=4,
        terms=24,
    ),
    Case(
        "Attention",
        _inputs(_normal(2, 4, HIDDEN), _normal(HIDDEN, 3 * HIDDEN), _normal(3 * HIDDEN)),
        {"num_heads": HEADS},
        terms=40,
        scale=64.0,
        id="Attention",
    ),
    Case(
        "SimplifiedLayerNormalization",
        _inputs(_normal(2, 3, 8), _normal(8)),
        {"epsilon": 1e-6},
        num_outputs=2,
        terms=12,
        domain="",
        id="SimplifiedLayerNormalization-default-domain",
    ),
    Case(
        "LayerNormalization",
        _inputs(_normal(2, 3, 8), _normal(8), _normal(8)),
        {"epsilon": 1e-5},
        num_outputs=3,
        terms=24,
        domain="",
        opset=16,
        id="LayerNormalization-default-domain-opset-16",
    ),
    Case(
        "LayerNormalization",
        _inputs(_normal(2, 3, 4), _normal(3, 4)),
        {"axis": 1},
        num_outputs=3,
        terms=28,
        domain="",
        opset=14,
        id="LayerNormalization-default-domain-opset-14-axis-1",
    ),
    Case(
        "Attention",
        _inputs(_normal(2, 4, HIDDEN), _normal(HIDDEN, 3 * HIDDEN), _normal(3 * HIDDEN), _mask(2, 4, [4, 2])),
        {"num_heads": HEADS},
        terms=40,
        scale=64.0,
        id="Attention-mask-2d",
    ),
    Case(
        "Attention",
        _inputs(_normal(2, 4, HIDDEN), _normal(HIDDEN, 3 * HIDDEN), _normal(3 * HIDDEN), np.array([3, 1], np.int32)),
        {"num_heads": HEADS},
        terms=40,
        scale=64.0,
        id="Attention-mask-lengths",
    ),
    Case(
        "Attention",
        _inputs(_normal(2, 4, HIDDEN), _normal(HIDDEN, 3 * HIDDEN), _normal(3 * HIDDEN)),
        {"num_heads": HEADS, "unidirectional": 1, "scale": 0.3},
        num_outputs=2,
        terms=40,
        scale=64.0,
        id="Attention-causal-present",
    ),
    Case(
        "MultiHeadAttention",
        _inputs(_normal(2, 3, HIDDEN), _normal(2, 5, HIDDEN), _normal(2, 5, HIDDEN)),
        {"num_heads": HEADS},
        terms=24,
        scale=16.0,
        id="MultiHeadAttention",
    ),
    Case(
        "Attention",
        _inputs(
            _normal(2, 1, HIDDEN),
            _normal(HIDDEN, 3 * HIDDEN),
            _normal(3 * HIDDEN),
            _mask(2, 4, [4, 3]),
            _normal(2, 2, HEADS, 3, HIDDEN // HEADS),
        ),
        {"num_heads": HEADS, "unidirectional": 1},
        num_outputs=2,
        terms=40,
        scale=64.0,
        id="Attention-past-decoding-step",
    ),
    Case(
        "MultiHeadAttention",
        _inputs(
            _normal(2, 2, HIDDEN),
            _normal(2, 2, HIDDEN),
            _normal(2, 2, HIDDEN),
            _normal(3 * HIDDEN),
            None,
            None,
            _normal(2, HEADS, 3, HIDDEN // HEADS),
            _normal(2, HEADS, 3, HIDDEN // HEADS),
        ),
        {"num_heads": HEADS, "unidirectional": 1},
        num_outputs=3,
        terms=24,
        scale=16.0,
        id="MultiHeadAttention-past-causal",
    ),
    Case(
        "MultiHeadAttention",
        _inputs(
            _normal(2, 3, HIDDEN),
            _normal(2, 5, HIDDEN),
            _normal(2, 5, HIDDEN),
            _normal(3 * HIDDEN),
            _mask(2, 5, [5, 3]),
            _normal(2, HEADS, 3, 5),
        ),
        {"num_heads": HEADS, "scale": 0.4},
        num_outputs=3,
        terms=24,
        scale=16.0,
        id="MultiHeadAttention-bias-mask-attention_bias-present",
    ),
    Case(
        "MultiHeadAttention",
        _inputs(_normal(2, 4, HIDDEN), _normal(2, 4, HIDDEN), _normal(2, 4, HIDDEN)),
        {"num_heads": HEADS, "unidirectional": 1},
        terms=24,
        scale=16.0,
        id="MultiHeadAttention-causal",
    ),
]


CASES += [
    Case(
        "RotaryEmbedding",
        _inputs(_normal(2, 3, HIDDEN), _integers(8, 2, 3), COS, SIN),
        {"num_heads": HEADS},
        terms=3,
        id="RotaryEmbedding",
    ),
    Case(
        "RotaryEmbedding",
        _inputs(_normal(2, 3, HIDDEN), _integers(8, 2, 3), COS, SIN),
        {"num_heads": HEADS, "interleaved": 1},
        terms=3,
        id="RotaryEmbedding-interleaved",
    ),
    Case(
        "RotaryEmbedding",
        _inputs(_normal(2, HEADS, 3, 4), np.array([2], np.int64), COS, SIN),
        terms=3,
        id="RotaryEmbedding-4d-offset",
    ),
    Case(
        "RotaryEmbedding",
        _inputs(_normal(2, 3, HIDDEN), _integers(8, 2, 3), COS_PARTIAL, SIN_PARTIAL),
        {"num_heads": HEADS, "rotary_embedding_dim": 2},
        terms=3,
        id="RotaryEmbedding-partial",
    ),
    Case(
        "EmbedLayerNormalization",
        _inputs(
            _integers(10, 2, 3, dtype=np.int32),
            _integers(2, 2, 3, dtype=np.int32),
            _normal(10, HIDDEN),
            _normal(5, HIDDEN),
            _normal(2, HIDDEN),
            _normal(HIDDEN),
            _normal(HIDDEN),
            np.array([[1, 1, 1], [1, 1, 0]], np.int32),
        ),
        {"epsilon": 1e-5},
        num_outputs=3,
        terms=24,
        id="EmbedLayerNormalization",
    ),
    Case(
        "EmbedLayerNormalization",
        _inputs(
            _integers(10, 2, 3, dtype=np.int32),
            None,
            _normal(10, HIDDEN),
            _normal(5, HIDDEN),
            None,
            _normal(HIDDEN),
            _normal(HIDDEN),
        ),
        {"epsilon": 1e-5},
        num_outputs=2,
        terms=24,
        id="EmbedLayerNormalization-no-segment-no-mask",
    ),
    Case(
        "FusedConv",
        _inputs(_normal(1, 2, 5, 5), _normal(3, 2, 3, 3), _normal(3), _normal(1, 3, 5, 5)),
        {**CONV, "activation": "Relu"},
        terms=20,
        id="FusedConv-Relu-residual",
        gradient_executors=("kernels",),
    ),
    Case(
        "FusedConv",
        _inputs(_normal(1, 2, 5, 5), _normal(3, 2, 3, 3), _normal(3)),
        {**CONV, "activation": "LeakyRelu", "activation_params": [0.2]},
        terms=20,
        id="FusedConv-LeakyRelu",
        gradient_executors=("kernels",),
    ),
    Case(
        "FusedConv",
        _inputs(_normal(1, 2, 5, 5), _normal(3, 2, 3, 3)),
        {**CONV, "activation": "Clip", "activation_params": [-0.5, 1.0]},
        terms=20,
        id="FusedConv-Clip",
        gradient_executors=("kernels",),
    ),
    Case(
        "FusedConv",
        _inputs(_normal(1, 2, 5, 5), _normal(3, 2, 3, 3), _normal(3)),
        {**CONV, "activation": "Tanh", "strides": [2, 2]},
        terms=24,
        id="FusedConv-Tanh-strided",
        gradient_executors=("kernels",),
    ),
    Case(
        "FusedConv",
        _inputs(_normal(1, 2, 5, 5), _normal(3, 2, 3, 3), _normal(3)),
        {**CONV, "activation": "Sigmoid"},
        terms=24,
        id="FusedConv-Sigmoid",
        gradient_executors=("kernels",),
    ),
    Case(
        "FusedConv",
        _inputs(_normal(1, 2, 5, 5), _normal(3, 2, 3, 3), _normal(3)),
        {**CONV, "activation": "HardSigmoid", "activation_params": [0.3, 0.4]},
        terms=20,
        id="FusedConv-HardSigmoid",
        gradient_executors=("kernels",),
    ),
]

CASES += [
    Case(
        "GroupQueryAttention",
        _inputs(
            _normal(2, SEQUENCE, 2 * GQA_HEAD),
            _normal(2, SEQUENCE, GQA_HEAD),
            _normal(2, SEQUENCE, GQA_HEAD),
            None,
            None,
            *GQA_LENGTHS,
        ),
        {"num_heads": HEADS, "kv_num_heads": 1},
        num_outputs=3,
        terms=24,
        scale=16.0,
        id="GroupQueryAttention",
    ),
    Case(
        "GroupQueryAttention",
        _inputs(
            _normal(2, SEQUENCE, 2 * GQA_HEAD),
            _normal(2, SEQUENCE, GQA_HEAD),
            _normal(2, SEQUENCE, GQA_HEAD),
            None,
            None,
            *GQA_LENGTHS,
            GQA_COS,
            GQA_SIN,
        ),
        {"num_heads": HEADS, "kv_num_heads": 1, "do_rotary": 1},
        num_outputs=3,
        terms=24,
        scale=16.0,
        id="GroupQueryAttention-rotary",
    ),
    Case(
        "GroupQueryAttention",
        _inputs(_normal(2, SEQUENCE, 4 * GQA_HEAD), None, None, None, None, *GQA_LENGTHS),
        {"num_heads": HEADS, "kv_num_heads": 1, "softcap": 2.0, "scale": 0.3},
        num_outputs=1,
        terms=30,
        scale=16.0,
        id="GroupQueryAttention-packed-softcap",
    ),
    Case(
        "GroupQueryAttention",
        _inputs(
            _normal(2, SEQUENCE, 2 * GQA_HEAD),
            _normal(2, SEQUENCE, GQA_HEAD),
            _normal(2, SEQUENCE, GQA_HEAD),
            None,
            None,
            *GQA_LENGTHS,
        ),
        {"num_heads": HEADS, "kv_num_heads": 1, "local_window_size": 2},
        terms=24,
        scale=16.0,
        id="GroupQueryAttention-window",
    ),
    Case(
        "GroupQueryAttention",
        _inputs(
            _normal(2, 1, 2 * GQA_HEAD),
            _normal(2, 1, GQA_HEAD),
            _normal(2, 1, GQA_HEAD),
            _normal(2, 1, 3, GQA_HEAD),
            _normal(2, 1, 3, GQA_HEAD),
            np.full(2, 3, np.int32),
            np.array(4, np.int32),
            GQA_COS,
            GQA_SIN,
        ),
        {"num_heads": HEADS, "kv_num_heads": 1, "do_rotary": 1},
        num_outputs=3,
        terms=24,
        scale=16.0,
        id="GroupQueryAttention-decoding-step-rotary",
    ),
]


def _case(name: str) -> Case:
    return next(case for case in CASES if str(case) == name)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_matches_onnxruntime(case, executor):
    check_forward(case, executor)


@pytest.mark.parametrize("case, executor", gradient_runs(CASES), ids=lambda value: str(value))
def test_gradients_match_finite_differences(case, executor):
    check_first_output_gradients(case, executor)


def test_other_outputs_carry_gradients():
    """SkipLayerNormalization's sum (the next layer's residual) and statistics are differentiable too."""
    module, feeds = _imported(_case("SkipLayerNormalization-all-outputs"), np.float64)

    def all_outputs(*tensors):
        output, mean, inv_std_var, total = module(*tensors)
        return output + total * inv_std_var + mean

    check_gradients(all_outputs, feeds)


@pytest.mark.parametrize("op_type, domain", [("NoSuchOp", MS), ("Gelu", "my.custom.domain")])
def test_unknown_op_or_domain_is_refused_at_import_naming_op_domain_and_opset(op_type, domain):
    node = helper.make_node(op_type, ["x"], ["y"], domain=domain, name="the_node")
    graph = helper.make_graph(
        [node],
        "unknown",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(domain, 3)])
    with pytest.raises(ModelLoadError, match=f"op_type '{op_type}' of domain '{domain}' \\(opset 3\\).*'the_node'"):
        from_onnx(model)


def test_unsupported_attention_input_names_node_and_input():
    attention = _case("Attention")
    arrays = _arrays(attention, np.float32)
    past = np.zeros((2, 2, HEADS, 1, HIDDEN // HEADS), np.float32)
    case = dataclasses.replace(
        attention,
        make_inputs=_inputs(*arrays, None, past),
        num_outputs=2,
        attrs={**attention.attrs, "past_present_share_buffer": 1},
    )
    float32 = np.dtype(np.float32)
    module = from_onnx(
        _model(case, arrays + [None, past], [((2, 4, HIDDEN), float32), ((2, 2, HEADS, 5, HIDDEN // HEADS), float32)])
    )
    with pytest.raises(NotImplementedError, match="Attention node 'Attention_0'.*past_present_share_buffer"):
        module(*arrays, past)
