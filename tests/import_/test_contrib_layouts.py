"""Contrib ops in the layouts onnxruntime's CPU provider does not run (its CUDA provider does):
NhwcConv (channels-last Conv) and MultiHeadAttention with packed query/key/value.

The reference is the equivalent model in ops that onnxruntime's CPU provider runs, computed by
onnxruntime: the standard Conv between Transposes for NhwcConv, and MultiHeadAttention with the
packed tensor split into separate query, key and value for the packed layouts. Tolerances and
gradient checks as in ``contrib_cases.py`` (its module docstring), whose helpers run them.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

from onnxnn.import_ import from_onnx

from .contrib_cases import (
    HEADS,
    HIDDEN,
    MS,
    OPSETS,
    Case,
    _arrays,
    _inputs,
    _model,
    _normal,
    check_first_output_gradients,
    check_forward,
    check_reexport,
    gradient_runs,
)


def _onnxruntime_run(nodes: list, arrays: list, num_outputs: int = 1) -> list:
    """Runs ``nodes`` (inputs ``in_0``, ``in_1``... where ``arrays`` holds no None; outputs
    ``out_0``...) in onnxruntime's CPU provider, floating inputs in float32; floating results as
    float64, as a case's reference returns them."""
    feeds = {
        f"in_{position}": array.astype(np.float32) if array.dtype.kind == "f" else array
        for position, array in enumerate(arrays)
        if array is not None
    }
    graph = helper.make_graph(
        nodes,
        "reference",
        [
            helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)
            for name, array in feeds.items()
        ],
        [onnx.ValueInfoProto(name=f"out_{position}") for position in range(num_outputs)],
    )
    model = helper.make_model(graph, opset_imports=OPSETS, ir_version=10)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [output if output.dtype.kind in "iub" else output.astype(np.float64) for output in session.run(None, feeds)]


# ----------------------------------------------------------------------------- NhwcConv


def _nhwc_conv_reference(**conv_attributes):
    """Transpose X and W to channels-first, Conv, transpose Y back: in onnxruntime."""

    def reference(x, w, b=None):
        rank = x.ndim
        first, last = [0, rank - 1, *range(1, rank - 1)], [0, *range(2, rank), 1]
        conv_inputs = ["x_first", "w_first"] + ([] if b is None else ["in_2"])
        nodes = [
            helper.make_node("Transpose", ["in_0"], ["x_first"], perm=first),
            helper.make_node("Transpose", ["in_1"], ["w_first"], perm=first),
            helper.make_node("Conv", conv_inputs, ["y_first"], **conv_attributes),
            helper.make_node("Transpose", ["y_first"], ["out_0"], perm=last),
        ]
        return _onnxruntime_run(nodes, [x, w] if b is None else [x, w, b])

    return reference


def _nhwc_conv(inputs, id: str, terms: int = 20, **conv_attributes) -> Case:
    # onnxruntime's CPU provider has no float64 Conv: the float64 gradients run on the kernels.
    return Case(
        "NhwcConv",
        inputs,
        conv_attributes,
        terms=terms,
        id=id,
        reference=_nhwc_conv_reference(**conv_attributes),
        gradient_executors=("kernels",),
    )


LAYOUT_CASES = [
    _nhwc_conv(
        _inputs(_normal(1, 5, 5, 2), _normal(3, 3, 3, 2), _normal(3)),
        "NhwcConv",
        kernel_shape=[3, 3],
        pads=[1, 1, 1, 1],
    ),
    _nhwc_conv(
        _inputs(_normal(2, 6, 5, 4), _normal(4, 3, 2, 2)),
        "NhwcConv-grouped-strided-dilated-no-bias",
        group=2,
        strides=[2, 1],
        dilations=[1, 2],
    ),
    _nhwc_conv(_inputs(_normal(1, 7, 3), _normal(2, 3, 3)), "NhwcConv-1d-same-upper", auto_pad="SAME_UPPER"),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", LAYOUT_CASES, ids=str)
def test_forward_matches_onnxruntime_equivalent(case, executor):
    check_forward(case, executor)


@pytest.mark.parametrize("case, executor", gradient_runs(LAYOUT_CASES), ids=lambda value: str(value))
def test_gradients_match_finite_differences(case, executor):
    check_first_output_gradients(case, executor)


def test_nhwc_conv_with_weights_of_another_rank_is_refused_naming_the_node():
    case = LAYOUT_CASES[0]
    arrays = _arrays(case, np.float32)
    arrays[1] = arrays[1].reshape(3, 9, 2)
    module = from_onnx(_model(case, arrays, [((1, 5, 5, 3), np.dtype(np.float32))]))
    with pytest.raises(ValueError, match="NhwcConv node 'NhwcConv_0'.*same rank"):
        module(*arrays)


# ----------------------------------------------------------------------------- packed MultiHeadAttention

HEAD_SIZE = HIDDEN // HEADS


def _packed_attention_reference(makers: list, attrs: dict, num_outputs: int):
    """MultiHeadAttention in onnxruntime with the packed query (or key) split into query, key and value."""
    present = [position for position, maker in enumerate(makers) if maker is not None]

    def reference(*given):
        arrays = [None] * max(len(makers), 3)
        for position, array in zip(present, given):
            arrays[position] = array
        query, key = arrays[0], arrays[1]
        if query.ndim == 5:
            arrays[0], arrays[1], arrays[2] = (query[:, :, :, part].reshape(*query.shape[:2], -1) for part in range(3))
        else:
            arrays[1], arrays[2] = (key[:, :, :, part].reshape(*key.shape[:2], -1) for part in range(2))
        names = ["" if array is None else f"in_{position}" for position, array in enumerate(arrays)]
        while not names[-1]:
            names.pop()
        node = helper.make_node(
            "MultiHeadAttention", names, [f"out_{i}" for i in range(num_outputs)], domain=MS, **attrs
        )
        return _onnxruntime_run([node], arrays[: len(names)], num_outputs)

    return reference


def _packed_attention(makers: list, attrs: dict, id: str, num_outputs: int = 1) -> Case:
    return Case(
        "MultiHeadAttention",
        _inputs(*makers),
        attrs,
        num_outputs=num_outputs,
        terms=24,
        scale=16.0,
        id=id,
        reference=_packed_attention_reference(makers, attrs, num_outputs),
    )


PACKED_QKV = _normal(2, 4, HEADS, 3, HEAD_SIZE)
PACKED_KV = _normal(2, 5, HEADS, 2, HEAD_SIZE)
PACKED_CASES = [
    _packed_attention([PACKED_QKV], {"num_heads": HEADS}, "MultiHeadAttention-packed-qkv"),
    _packed_attention(
        [PACKED_QKV, None, None, _normal(3 * HIDDEN)],
        {"num_heads": HEADS, "unidirectional": 1, "scale": 0.3},
        "MultiHeadAttention-packed-qkv-bias-causal",
    ),
    _packed_attention(
        [
            _normal(2, 1, HEADS, 3, HEAD_SIZE),
            None,
            None,
            None,
            None,
            None,
            _normal(2, HEADS, 3, HEAD_SIZE),
            _normal(2, HEADS, 3, HEAD_SIZE),
        ],
        {"num_heads": HEADS, "unidirectional": 1},
        "MultiHeadAttention-packed-qkv-past-present",
        num_outputs=3,
    ),
    _packed_attention([_normal(2, 3, HIDDEN), PACKED_KV], {"num_heads": HEADS}, "MultiHeadAttention-packed-kv"),
    _packed_attention(
        [
            _normal(2, 3, HIDDEN),
            PACKED_KV,
            None,
            _normal(3 * HIDDEN),
            lambda rng: np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.int32),
            _normal(2, HEADS, 3, 5),
        ],
        {"num_heads": HEADS},
        "MultiHeadAttention-packed-kv-bias-mask-attention_bias",
    ),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", PACKED_CASES, ids=str)
def test_packed_attention_matches_onnxruntime_unpacked(case, executor):
    check_forward(case, executor)


@pytest.mark.parametrize("case, executor", gradient_runs(PACKED_CASES), ids=lambda value: str(value))
def test_packed_attention_gradients_match_finite_differences(case, executor):
    check_first_output_gradients(case, executor)


def test_key_beside_packed_query_key_value_is_refused_naming_node_and_input():
    case = PACKED_CASES[0]
    arrays = _arrays(case, np.float32) + [np.zeros((2, 4, HIDDEN), np.float32)]
    module = from_onnx(_model(case, arrays, [((2, 4, HIDDEN), np.dtype(np.float32))]))
    with pytest.raises(NotImplementedError, match="MultiHeadAttention node 'MultiHeadAttention_0'.*key or value"):
        module(*arrays)


@pytest.mark.parametrize("case", [LAYOUT_CASES[1], PACKED_CASES[2], PACKED_CASES[4]], ids=str)
def test_reexported_module_runs_in_onnxruntime(case):
    check_reexport(case)
