"""Every standard float op of ONNX's official node tests has a gradient rule, or a stated reason.

The op types come from ``onnx.backend.test.case.node.collect_testcases()`` (the generators of
``onnx/backend/test/data/node``): single-node cases of the default domain with a float input or
output. An op passes when it has a gradient rule or is declared non-differentiable in the
registries; every other op must sit in exactly one of the commented tables below, and each table
entry must still be needed (no stale entries), so the tables stay the true list of the gap.
The rules themselves are checked against finite differences in tests/runtime/test_gradients_first_order.py.
"""

from __future__ import annotations

import functools

import onnx
import pytest
from onnx import TensorProto
from onnx_node_test_cases import all_node_test_cases

import onnxnn  # noqa: F401  (registers every rule)
import onnxnn.import_  # noqa: F401  (and the importer's)
from onnxnn.ir.registry import importers
from onnxnn.ir.plan import OPSET_VERSION
from onnxnn.ir.registry import gradient_rules, non_differentiable

_FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}

# No derivative exists for a float input: the outputs are integers or bits, random draws, or depend
# on the float input only through its shape or through equality of values.
NO_GRADIENT = {
    "BitCast": "reinterprets the bits: not a function of the value",
    "BlackmanWindow": "the only input is the integer window size",
    "HammingWindow": "the only input is the integer window size",
    "HannWindow": "the only input is the integer window size",
    "Constant": "no inputs",
    "ConstantOfShape": "the input is an integer shape",
    "Size": "an integer count of the input's elements",
    "NonMaxSuppression": "outputs integer box indices",
    "QuantizeLinear": "outputs rounded integers",
    "DynamicQuantizeLinear": "outputs rounded integers (its scale and zero point only describe them)",
    "QLinearConv": "integer inputs and outputs",
    "QLinearMatMul": "integer inputs and outputs",
    "TfIdfVectorizer": "the input is integer or string tokens",
    "Unique": "the output's shape and order depend on equality of values (PyTorch defines no derivative)",
}

# Replayed by the importer as other recorded ops, whose rules give the gradient: control flow and
# sequences (onnxnn/import_/ops.py), CumProd and TensorScatter (onnxnn/import_/newer_ops.py), STFT
# (onnxnn/import_/spectral.py), and ops newer than opset 21 that run their ONNX function body.
REPLAYED_AS_OTHER_OPS = {
    "If",
    "Loop",
    "Scan",
    "SequenceMap",
    "SplitToSequence",
    "OptionalGetElement",
    "CumProd",
    "TensorScatter",
    "STFT",
    "Attention",
    "CausalConvWithState",
    "LinearAttention",
    "RMSNormalization",
    "RotaryEmbedding",
    "SwiGLU",
    "Swish",
}

# Rewritten by the opset conversion on import (the node tests use opsets before 11).
CONVERTED_ON_IMPORT = {"Scatter": "ScatterElements", "Upsample": "Resize"}

# A derivative exists, but onnxnn has no rule yet: the remaining gap, each with what it takes.
KNOWN_GAPS: dict[str, str] = {}

# Gaps closed by earlier work: a rule (checked in the named test file) or a non-differentiability
# mark each must keep. The check above would catch a lost one too; this names what was lost.
CLOSED_GAPS = {
    "RNN": "rule",
    "GRU": "rule",
    "LSTM": "rule",  # tests/runtime/test_recurrent_ops.py
    "DeformConv": "rule",
    "RoiAlign": "rule",  # tests/runtime/test_detection_ops.py
    "MelWeightMatrix": "non-differentiable",  # reads its edge frequencies only through integer bins
}

_TABLES = {
    "NO_GRADIENT": set(NO_GRADIENT),
    "REPLAYED_AS_OTHER_OPS": REPLAYED_AS_OTHER_OPS,
    "CONVERTED_ON_IMPORT": set(CONVERTED_ON_IMPORT),
    "KNOWN_GAPS": set(KNOWN_GAPS),
}


@functools.lru_cache(maxsize=1)
def node_test_float_ops() -> frozenset:
    cases = all_node_test_cases()
    ops = set()
    for case in cases:
        graph = case.model.graph
        if len(graph.node) != 1 or graph.node[0].domain not in ("", "ai.onnx"):
            continue
        types = {
            info.type.tensor_type.elem_type
            for info in list(graph.input) + list(graph.output)
            if info.type.HasField("tensor_type")
        }
        if types & _FLOATS:
            ops.add(graph.node[0].op_type)
    return frozenset(ops)


def _handled(op_type: str) -> bool:
    return gradient_rules.get(op_type) is not None or ("", op_type) in non_differentiable


def test_every_differentiable_node_test_op_has_a_gradient_rule() -> None:
    ops = node_test_float_ops()
    assert len(ops) > 150  # the generators really ran
    listed = set().union(*_TABLES.values())
    missing = sorted(op for op in ops if not _handled(op) and op not in listed)
    handled = sorted(op for op in ops if _handled(op))
    print(
        f"\n{len(handled)} of {len(ops)} float node-test ops have a gradient rule or are non-differentiable; "
        f"{len(ops) - len(handled)} listed here ({len(KNOWN_GAPS)} known gaps)"
    )
    assert not missing, f"node-test ops with neither a gradient rule nor a listed reason: {missing}"


@pytest.mark.parametrize("table", sorted(_TABLES))
def test_listed_ops_are_node_test_ops_still_without_a_rule(table: str) -> None:
    entries = _TABLES[table]
    assert not sorted(entries - node_test_float_ops()), "entries that are not float node-test ops"
    assert not sorted(op for op in entries if _handled(op)), "entries that have a rule now: remove them"


def test_the_tables_do_not_overlap() -> None:
    seen: dict[str, str] = {}
    for name, entries in _TABLES.items():
        for op_type in entries:
            assert op_type not in seen, f"{op_type} is in both {seen[op_type]} and {name}"
            seen[op_type] = name


def test_replayed_ops_really_are_replayed() -> None:
    for op_type in sorted(REPLAYED_AS_OTHER_OPS):
        if ("", op_type) in importers:
            continue
        # Newer than onnxnn's opset, with a function body the importer replays (FunctionBody).
        with pytest.raises(onnx.defs.SchemaError):
            onnx.defs.get_schema(op_type, OPSET_VERSION, "")
        schema = onnx.defs.get_schema(op_type)
        assert schema.has_function or schema.has_context_dependent_function, op_type


def test_converted_ops_become_ops_with_rules() -> None:
    for op_type, target in CONVERTED_ON_IMPORT.items():
        assert _handled(target), f"{op_type} becomes {target}, which has no rule"


@pytest.mark.parametrize("op_type", sorted(CLOSED_GAPS))
def test_closed_gaps_keep_their_rules(op_type: str) -> None:
    assert op_type in node_test_float_ops()
    if CLOSED_GAPS[op_type] == "rule":
        assert gradient_rules.get(op_type) is not None, f"{op_type} lost its gradient rule"
    else:
        assert ("", op_type) in non_differentiable, f"{op_type} lost its non-differentiability mark"
