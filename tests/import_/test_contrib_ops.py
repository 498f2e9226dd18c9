"""onnxruntime's com.microsoft contrib ops in imported models (onnxnn/import_/contrib.py).

One row per case: a one-node model (opset_import ai.onnx 21 and com.microsoft 1) imported with
``from_onnx`` must compute what onnxruntime's own kernel computes on the same model, on both of
onnxnn's executors, and its gradients must match float64 central differences (the same node
with DOUBLE inputs, which onnxnn replays in float64 ops; onnxruntime has no float64 kernels for
most contrib ops, so the forward comparison is in float32) on the kernels executor, and on the
onnxruntime executor for the first case of each op.

Forward tolerance: both sides round each of the ``terms`` operations of the longest chain
(reductions count their length) once in float32, so they differ by at most
``2 * gamma(terms) * magnitude`` plus a few ulps of the transcendental functions; ``magnitude``
bounds the absolute values the chain sums (``1 + |result|`` times the row's ``scale``, the
largest sum of absolute products relative to the result: inputs are standard normal).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper
from tolerances import accumulation_bound, assert_within, ulps

import onnxnn
from onnxnn.errors import ModelLoadError
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

MS = "com.microsoft"
OPSETS = [helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)]


@dataclasses.dataclass
class Case:
    op_type: str
    make_inputs: Callable[[np.random.Generator], list]  # arrays (None: an omitted optional input)
    attrs: dict = dataclasses.field(default_factory=dict)
    num_outputs: int = 1
    terms: int = 8  # rounded operations along the longest chain (see the module docstring)
    scale: float = 4.0  # magnitude of the summed terms relative to 1 + |result|
    id: str = ""
    # For ops onnxruntime's CPU provider lacks (its CUDA provider has them): the op's definition
    # in numpy, float64, from onnxruntime's contrib op documentation.
    reference: Callable | None = None
    # onnxruntime's CPU provider has no float64 Conv: FusedConv's float64 gradients run on the kernels.
    gradient_executors: tuple = ("onnxruntime", "kernels")
    # onnxruntime writes a few contrib ops in the default domain (see onnxnn/import_/validation.py).
    domain: str = MS
    opset: int = 21

    def __str__(self) -> str:
        return self.id or self.op_type


def _normal(*shape):
    return lambda rng: rng.standard_normal(shape)


def _inputs(*makers):
    def make(rng):
        return [None if maker is None else maker(rng) if callable(maker) else maker for maker in makers]

    return make


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _bias_split_gelu(x, bias):
    left, right = np.split(x + bias, 2, axis=-1)
    return [left * _gelu(right)]


def _mask(batch, length, valid):
    """A [batch, length] int32 key mask: 1 for the first ``valid[b]`` keys of each row."""
    return lambda rng: (np.arange(length)[None, :] < np.array(valid)[:, None]).astype(np.int32)


HIDDEN, HEADS = 8, 2
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


def _integers(high, *shape, dtype=np.int64):
    return lambda rng: rng.integers(0, high, shape).astype(dtype)


def _angles(positions, half):
    """cos and sin caches [positions, half] of RoPE's angles (base 10000)."""
    angles = np.arange(positions)[:, None] * 10000.0 ** (-np.arange(half)[None, :] / half)
    return (lambda rng: np.cos(angles)), (lambda rng: np.sin(angles))


COS, SIN = _angles(8, 2)
COS_PARTIAL, SIN_PARTIAL = _angles(8, 1)
CONV = {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}
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

SEQUENCE = 4
GQA_HEAD = 16  # onnxruntime's CPU kernel wants head sizes that are multiples of 16 (with rotary)
GQA_COS, GQA_SIN = _angles(8, GQA_HEAD // 2)
GQA_LENGTHS = (np.full(2, SEQUENCE - 1, np.int32), np.array(SEQUENCE, np.int32))  # seqlens_k, total_sequence_length
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

_ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int16): TensorProto.INT16,
}


def _model(case: Case, arrays: list, output_types=None) -> onnx.ModelProto:
    """The one-node model; onnx's checker wants output shapes, which onnxruntime's run tells
    (``output_types``: (shape, dtype) pairs; None for the model that onnxruntime runs first)."""
    names = ["" if array is None else f"in_{position}" for position, array in enumerate(arrays)]
    while names and not names[-1]:
        names.pop()
    outputs = [f"out_{position}" for position in range(case.num_outputs)]
    node = helper.make_node(case.op_type, names, outputs, domain=case.domain, **case.attrs)
    graph = helper.make_graph(
        [node],
        "contrib",
        [
            helper.make_tensor_value_info(name, _ONNX_TYPES[array.dtype], array.shape)
            for name, array in zip(names, arrays)
            if name
        ],
        [onnx.ValueInfoProto(name=name) for name in outputs]
        if output_types is None
        else [
            helper.make_tensor_value_info(name, _ONNX_TYPES[dtype], shape)
            for name, (shape, dtype) in zip(outputs, output_types)
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset), OPSETS[1]], ir_version=10)


def _arrays(case: Case, dtype) -> list:
    arrays = case.make_inputs(np.random.default_rng(0))
    return [None if array is None else array.astype(dtype) if array.dtype.kind == "f" else array for array in arrays]


def _onnxruntime_outputs(case: Case) -> list:
    """onnxruntime's outputs for the float32 inputs of ``case`` (or its reference's, rounded to float32)."""
    arrays = _arrays(case, np.float32)
    if case.reference is not None:
        outputs = case.reference(*(a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays if a is not None))
        return [output if output.dtype.kind in "iu" else np.asarray(output, np.float32) for output in outputs]
    session = onnxruntime.InferenceSession(_model(case, arrays).SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {f"in_{i}": a for i, a in enumerate(arrays) if a is not None})


def _imported(case: Case, dtype):
    """(module, its inputs) for ``case`` with floating inputs of ``dtype``."""
    arrays = _arrays(case, dtype)
    types = [
        (output.shape, np.dtype(dtype) if output.dtype.kind == "f" else output.dtype)
        for output in _onnxruntime_outputs(case)
    ]
    return from_onnx(_model(case, arrays, types)), [array for array in arrays if array is not None]


def _case(name: str) -> Case:
    return next(case for case in CASES if str(case) == name)


def _as_tuple(result) -> tuple:
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_forward_matches_onnxruntime(case, executor):
    check_forward(case, executor)


def check_forward(case: Case, executor: str) -> None:
    """The imported node's outputs on ``executor`` against onnxruntime's (or the case's reference)."""
    expected = _onnxruntime_outputs(case)
    module, feeds = _imported(case, np.float32)
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        # Realized inside the block: onnxnn is lazy, and a graph run after it would run on "auto".
        actual = [output.numpy() for output in _as_tuple(module(*feeds))]
    assert len(actual) == len(expected)
    for position, (got, want) in enumerate(zip(actual, expected)):
        assert got.dtype == want.dtype, f"output {position}"
        bound = accumulation_bound((1 + np.abs(want)) * case.scale, case.terms) + ulps(want)
        assert_within(got, want, bound, f"output {position} of {case}")


def check_reexport(case: Case) -> None:
    """The imported node re-exported (``to_onnx``: standard ops only) and run by onnxruntime gives
    the imported module's outputs: floats within the forward tolerance, quantized within one step."""
    module, feeds = _imported(case, np.float32)
    module.eval()
    with onnxnn.no_grad():
        expected = [output.numpy() for output in _as_tuple(module(*feeds))]
    proto = to_onnx(module, tuple(onnxnn.tensor(array) for array in feeds))
    assert all(node.domain in ("", "ai.onnx") for node in proto.graph.node)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    given = {f"input_{position}": array for position, array in enumerate(feeds)}
    actual = session.run(None, {graph_input.name: given[graph_input.name] for graph_input in session.get_inputs()})
    assert len(actual) == len(expected)
    for position, (got, want) in enumerate(zip(actual, expected)):
        assert got.dtype == want.dtype, f"output {position}"
        if want.dtype.kind in "iu":
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
        else:
            bound = accumulation_bound((1 + np.abs(want)) * case.scale, case.terms) + ulps(want)
            assert_within(got, want, bound, f"re-exported output {position} of {case}")


def gradient_runs(cases: list) -> list:
    """(case, executor) pairs: every case on the kernels executor, the first case of each op on
    onnxruntime's too (both run the same recorded graph and gradient rules; once per op checks
    onnxruntime's kernels on it and keeps the file's run time down)."""
    runs, seen = [], set()
    for case in cases:
        for executor in case.gradient_executors:
            if executor == "kernels" or case.op_type not in seen:
                runs.append((case, executor))
        seen.add(case.op_type)
    return runs


@pytest.mark.parametrize("case, executor", gradient_runs(CASES), ids=lambda value: str(value))
def test_gradients_match_finite_differences(case, executor):
    check_first_output_gradients(case, executor)


def check_first_output_gradients(case: Case, executor: str) -> None:
    """The gradients of the imported node's first output (float64) against central differences."""
    module, feeds = _imported(case, np.float64)
    differentiable = [array.dtype.kind == "f" for array in feeds]

    def first_output(*tensors):
        return _as_tuple(module(*tensors))[0]

    with onnxnn.set_executor(executor):
        check_gradients(first_output, feeds, requires_grad=differentiable)


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


# ----------------------------------------------------------------------------- quantized ops (forward only)


def _quantized(dtype, *shape):
    info = np.iinfo(dtype)
    return lambda rng: rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _scalar(value, dtype=np.float32):
    return np.array(value, dtype)


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """Packs ``bits``-bit values along the last axis into bytes, low bits first (MatMulNBits' layout)."""
    per_byte = 8 // bits
    grouped = values.reshape(*values.shape[:-1], -1, per_byte).astype(np.uint8)
    return np.bitwise_or.reduce(grouped << (np.arange(per_byte, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


def _nbits_inputs(bits, blocks, block_size, n, zero_points):
    def make(rng):
        k = blocks * block_size
        quantized = rng.integers(0, 2**bits, (n, blocks, block_size))
        arrays = [
            rng.standard_normal((3, k)).astype(np.float32),
            _pack(quantized, bits),
            (rng.uniform(0.01, 0.1, n * blocks)).astype(np.float32),
        ]
        if zero_points == "float":
            arrays.append(rng.uniform(-0.5, 0.5, n * blocks).astype(np.float32))
        elif zero_points:
            arrays.append(_pack(rng.integers(0, 2**bits, (n, blocks + (-blocks) % (8 // bits))), bits).reshape(-1))
        return arrays

    return make


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


def check_quantized_forward(case: Case, executor: str) -> None:
    """Quantized results within one quantization step of onnxruntime's (see contrib_quantized's
    docstring); float results of the matrix products within float32 rounding of the sums."""
    expected = _onnxruntime_outputs(case)
    arrays = _arrays(case, np.float32)
    module = from_onnx(_model(case, arrays, [(output.shape, output.dtype) for output in expected]))
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        # Realized inside the block: onnxnn is lazy, and a graph run after it would run on "auto".
        actual = [output.numpy() for output in _as_tuple(module(*[array for array in arrays if array is not None]))]
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype
        if want.dtype.kind in "iu":
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1
        else:
            assert_within(got, want, accumulation_bound((1 + np.abs(want)) * case.scale, case.terms))
