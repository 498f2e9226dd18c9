"""onnxnn's onnxruntime sessions: which graph transformers each graph leaves out, and why it shows."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

from onnxnn.runtime.session_optimizers import (
    COMMON_SUBEXPRESSIONS_MOST_NODES,
    CPU_DISABLED_OPTIMIZERS,
    DISABLED_OPTIMIZERS,
    disabled_optimizers,
)
from onnxnn.runtime.sessions import create_session
from onnxnn.runtime.split_sessions import SPINNING_MOST_SESSIONS, SPLIT_PART_KEY
from tests.tolerances import normalization_bound, unit_roundoff

OPSET = [helper.make_opsetid("", 17)]


def _node(op_type: str, inputs=("x",), outputs=("y",), **attributes):
    defaults = {
        "Conv": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        "MaxPool": {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        "AveragePool": {"kernel_shape": [2, 2], "strides": [2, 2]},
    }
    return helper.make_node(op_type, list(inputs), list(outputs), **{**defaults.get(op_type, {}), **attributes})


def _model(nodes, initializers=(), functions=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(initializers),
    )
    return helper.make_model(
        graph, opset_imports=[*OPSET, helper.make_opsetid("local", 1)], functions=list(functions), ir_version=8
    )


def _weight():
    return helper.make_tensor("w", TensorProto.FLOAT, [16, 16, 3, 3], np.zeros(16 * 16 * 9, np.float32))


def _conv_in_subgraph():
    branch = helper.make_graph(
        [_node("Conv", ("x", "w"), ("z",))], "branch", [], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    )
    other = helper.make_graph(
        [_node("Identity", ("x",), ("z",))], "other", [], [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)]
    )
    condition = helper.make_tensor("c", TensorProto.BOOL, [], [True])
    return _model(
        [_node("If", ("c",), ("t",), then_branch=branch, else_branch=other), _node("MaxPool", ("t",))],
        [_weight(), condition],
    )


def _conv_in_function():
    function = helper.make_function("local", "Block", ["a", "b"], ["c"], [_node("Conv", ("a", "b"), ("c",))], OPSET)
    node = helper.make_node("Block", ["x", "w"], ["t"], domain="local")
    return _model([node, _node("MaxPool", ("t",))], [_weight()], [function])


# A graph keeps onnxruntime's NCHWc layout only when it holds a convolution with a constant weight,
# an AveragePool or a GlobalMaxPool, whose kernels repay the reorders around them
# (session_optimizers.NCHWC_REPAYING_OPS; a fed weight, as in training, leaves the convolution as it is).
LAYOUT_CASES = [
    ("max pool alone", lambda: _model([_node("MaxPool")]), True),
    ("global average pool alone", lambda: _model([_node("GlobalAveragePool")]), True),
    ("relu and max pool", lambda: _model([_node("Relu", ("x",), ("r",)), _node("MaxPool", ("r",))]), True),
    ("no layout op at all", lambda: _model([_node("Relu")]), True),
    (
        "convolution and max pool",
        lambda: _model([_node("Conv", ("x", "w"), ("t",)), _node("MaxPool", ("t",))], [_weight()]),
        False,
    ),
    (
        "convolution with a fed weight and max pool",
        lambda: _model([_node("Conv", ("x", "v"), ("t",)), _node("MaxPool", ("t",))]),
        True,
    ),
    (
        "convolution with a fed weight and average pool",
        lambda: _model([_node("Conv", ("x", "v"), ("t",)), _node("AveragePool", ("t",))]),
        False,
    ),
    (
        "convolution whose weight is a Constant node",
        lambda: _model(
            [
                helper.make_node("Constant", [], ["c"], value=_weight()),
                _node("Conv", ("x", "c"), ("t",)),
                _node("MaxPool", ("t",)),
            ]
        ),
        False,
    ),
    ("average pool", lambda: _model([_node("AveragePool")]), False),
    ("global max pool", lambda: _model([_node("GlobalMaxPool")]), False),
    ("convolution in an If branch", _conv_in_subgraph, False),
    ("convolution in a local function", _conv_in_function, False),
]


@pytest.mark.parametrize("build, leaves_out_nchwc", [c[1:] for c in LAYOUT_CASES], ids=[c[0] for c in LAYOUT_CASES])
def test_nchwc_transformer_is_left_out_where_its_kernels_do_not_repay_it(build, leaves_out_nchwc):
    disabled = disabled_optimizers(build())
    assert ("NchwcTransformer" in disabled) is leaves_out_nchwc
    assert set(DISABLED_OPTIMIZERS) <= set(disabled)


def _chain_of(count: int) -> onnx.ModelProto:
    """``count`` Relu nodes, each reading the graph's input: every one but the first repeats it."""
    nodes = [_node("Relu", outputs=(f"r{index}",)) for index in range(count - 1)]
    return _model([*nodes, _node("Sum", inputs=[f"r{index}" for index in range(count - 1)] + ["x"])])


@pytest.mark.parametrize(
    "count, leaves_out", [(COMMON_SUBEXPRESSIONS_MOST_NODES, False), (COMMON_SUBEXPRESSIONS_MOST_NODES + 1, True)]
)
def test_common_subexpression_elimination_is_left_out_of_large_graphs(count, leaves_out):
    model = _chain_of(count)
    assert ("CommonSubexpressionElimination" in disabled_optimizers(model)) is leaves_out
    x = np.random.default_rng(0).standard_normal((2, 16, 16, 16)).astype(np.float32)
    (y,) = create_session(model, threads=1).run(None, {"x": x})
    np.testing.assert_allclose(y, (count - 1) * np.maximum(x, 0) + x, rtol=count * 2**-24)


def test_a_serialized_model_keeps_the_default_list():
    serialized = _model([_node("MaxPool")]).SerializeToString()
    assert disabled_optimizers(serialized) == DISABLED_OPTIMIZERS + CPU_DISABLED_OPTIMIZERS
    assert disabled_optimizers(serialized, on_cpu=False) == DISABLED_OPTIMIZERS  # a GPU's kernels were not measured


def _kernels_run(session, x, **feeds) -> set[str]:
    """The op types of the kernels one run of ``session`` (created with profiling on) executed."""
    session.run(None, {"x": x, **feeds})
    with open(session.end_profiling()) as file:
        events = json.load(file)
    return {
        event["args"]["op_name"]
        for event in events
        if event.get("cat") == "Node" and "op_name" in event.get("args", {})
    }


def test_a_pool_only_session_runs_without_reorders_where_onnxruntime_would_add_them(tmp_path):
    model = _model([_node("MaxPool")])
    x = np.random.default_rng(0).standard_normal((2, 16, 16, 16)).astype(np.float32)
    options = onnxruntime.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "default")
    default = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    if "ReorderInput" not in _kernels_run(default, x):
        pytest.skip("onnxruntime uses no NCHWc layout on this CPU (it needs AVX2 or AVX-512)")
    ours = create_session(model, threads=1, profile_file_prefix=str(tmp_path / "ours"))
    assert _kernels_run(ours, x) == {"MaxPool"}
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], default.run(None, {"x": x})[0])


def test_a_residual_sum_and_layer_norm_run_as_the_two_ops_not_the_slower_fused_kernel(tmp_path):
    # onnxruntime's SkipLayerNormalization ran 4-6.6x slower than Add + LayerNormalization (session_optimizers).
    shape = [2, 8, 16]
    graph = helper.make_graph(
        [_node("Add", ("x", "r"), ("s",)), _node("LayerNormalization", ("s", "g", "b"), ("y",), axis=-1)],
        "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in ("x", "r")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [
            helper.make_tensor("g", TensorProto.FLOAT, [16], np.linspace(0.5, 1.5, 16, dtype=np.float32)),
            helper.make_tensor("b", TensorProto.FLOAT, [16], np.linspace(-1, 1, 16, dtype=np.float32)),
        ],
    )
    model = helper.make_model(graph, opset_imports=OPSET, ir_version=8)
    rng = np.random.default_rng(0)
    x, r = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    options = onnxruntime.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "default")
    default = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    assert _kernels_run(default, x, r=r) == {"SkipLayerNormalization"}  # what onnxruntime does by itself
    ours = create_session(model, threads=1, profile_file_prefix=str(tmp_path / "ours"))
    assert _kernels_run(ours, x, r=r) == {"Add", "LayerNormalization"}
    s = (x + r).astype(np.float64)
    gain, bias = np.linspace(0.5, 1.5, 16), np.linspace(-1, 1, 16)
    expected = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5) * gain + bias
    bound = normalization_bound(s, -1, 1e-5) * gain + 4 * unit_roundoff(np.float32) * np.abs(expected)
    np.testing.assert_array_less(np.abs(ours.run(None, {"x": x, "r": r})[0] - expected), bound)


def _config_entry(session, key: str) -> str | None:
    try:
        return session.get_session_options().get_session_config_entry(key)
    except RuntimeError:  # never set: onnxruntime's default
        return None


def _cut_part(model: onnx.ModelProto, sessions: int) -> onnx.ModelProto:
    """``model`` marked as one of the ``sessions`` sessions of a cut plan (split_sessions.SPLIT_PART_KEY)."""
    model.metadata_props.add(key=SPLIT_PART_KEY, value=f"{1 << 20} {sessions}")
    return model


@pytest.mark.parametrize(
    "threads, cut_sessions, spins, stops_spinning_after_runs",
    [
        (2, None, True, True),  # a plan's one session: its pool spins within a run only
        (0, None, True, True),  # onnxruntime's default threads (one per core)
        (2, SPINNING_MOST_SESSIONS, True, True),  # a plan cut around its weight gradients
        (2, SPINNING_MOST_SESSIONS + 1, False, False),  # cut further: the pools never spin
        (1, None, True, False),  # no pool threads: nothing to stop
    ],
)
def test_a_sessions_pool_never_spins_after_its_run(threads, cut_sessions, spins, stops_spinning_after_runs):
    # Each session has its own pool: one left spinning after its run took the cores from the next
    # session's (bench_sessions_in_turn.py: two models in turn on two threads, 2.2x the time).
    model = _model([_node("Relu")])
    session = create_session(model if cut_sessions is None else _cut_part(model, cut_sessions), threads=threads)
    assert (_config_entry(session, "session.intra_op.allow_spinning") != "0") is spins
    assert (_config_entry(session, "session.force_spinning_stop") == "1") is stops_spinning_after_runs
