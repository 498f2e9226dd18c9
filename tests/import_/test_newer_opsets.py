"""Models newer than opset 21 are imported as written: each node recorded at the oldest opset that
means the same (``onnxnn/import_/opsets.py``), a graph built at the newest opset its nodes need.

Expectations come from ``onnx.reference`` (onnx's own evaluator of every opset) and exact integer
or order arithmetic; both executors run what their opset allows, and onnxruntime's refusal of an
opset newer than it runs names the opset.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxnn
import onnxnn.backend
from gradcheck import check_gradients
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx
from onnxnn.ir.caches import clear_caches
from onnxnn.ir.graph import Node, VersionedNode
from onnxnn.ir.kernel_registry import kernels
from onnxnn.ir.plan import OPSET_VERSION
from onnxnn.runtime.sessions import newest_onnxruntime_opset

from .onnxruntime_node_results import failing_cases, node_test_cases, onnxnn_runner

NEWEST_ONNX_OPSET = onnx.defs.onnx_opset_version()


def _model(nodes, inputs, outputs, opset: int) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "newer_opset", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def _info(name: str, elem_type: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, shape)


# ----------------------------------------------------------------------------- the invariant


def _schemas_from_21(op_type: str):
    since, schemas = None, []
    for opset in range(OPSET_VERSION, NEWEST_ONNX_OPSET + 1):
        try:
            schema = onnx.defs.get_schema(op_type, opset, "")
        except onnx.defs.SchemaError:
            continue
        if schema.since_version != since:
            since = schema.since_version
            schemas.append(schema)
    return schemas


def _changes_that_change_meaning(old, new) -> list[str]:
    problems = []
    for name, attribute in old.attributes.items():
        kept = new.attributes.get(name)
        if kept is None:
            problems.append(f"attribute {name} removed")
        elif (kept.type, kept.required, kept.default_value.SerializeToString()) != (
            attribute.type,
            attribute.required,
            attribute.default_value.SerializeToString(),
        ):
            problems.append(f"attribute {name} changed its type, requiredness or default")
    problems += [
        f"attribute {name} added as required"
        for name, attribute in new.attributes.items()
        if name not in old.attributes and attribute.required
    ]
    if (
        new.min_input > old.min_input
        or new.max_input < old.max_input
        or new.min_output > old.min_output
        or new.max_output < old.max_output
    ):
        problems.append("input or output counts narrowed")
    old_types = {c.type_param_str: set(c.allowed_type_strs) for c in old.type_constraints}
    new_types = {c.type_param_str: set(c.allowed_type_strs) for c in new.type_constraints}
    for position, (before, after) in enumerate(zip(old.inputs, new.inputs)):
        if not old_types.get(before.type_str, {before.type_str}) <= new_types.get(after.type_str, {after.type_str}):
            problems.append(f"input {position} ({before.name}) allows fewer types")
    return problems


# Narrowings that cannot reach a graph: onnxnn records these ops over floating inputs only
# (torch.logsumexp of integers is computed in float, as onnxnn's is).
NARROWINGS_ONNXNN_NEVER_RECORDS = {
    "ReduceLogSum 18->28": ["input 0 (data) allows fewer types"],
    "ReduceLogSumExp 18->28": ["input 0 (data) allows fewer types"],
}


def test_schema_changes_past_opset_21_only_add():
    # What lets a graph hold onnxnn's opset-21 nodes beside an imported model's newer ones: from
    # opset 21 to the newest onnx defines, an op's schema only gained optional attributes whose
    # defaults keep the old meaning, and more allowed types. A new onnx breaking it fails here.
    names = sorted({schema.name for schema in onnx.defs.get_all_schemas_with_history() if schema.domain == ""})
    problems = {}
    for name in names:
        schemas = _schemas_from_21(name)
        for old, new in zip(schemas, schemas[1:]):
            found = _changes_that_change_meaning(old, new)
            change = f"{name} {old.since_version}->{new.since_version}"
            if found and found != NARROWINGS_ONNXNN_NEVER_RECORDS.get(change):
                problems[change] = found
    assert not problems, problems


# ----------------------------------------------------------------------------- importing at a newer opset


def _bitshift_model() -> onnx.ModelProto:
    # BitShift of int32 exists from opset 28 on; the Add beside it means the same at opset 21.
    nodes = [
        helper.make_node("BitShift", ["a", "b"], ["shifted"], direction="LEFT"),
        helper.make_node("Add", ["shifted", "a"], ["y"]),
    ]
    return _model(
        nodes,
        [_info("a", TensorProto.INT32, [4]), _info("b", TensorProto.INT32, [4])],
        [_info("y", TensorProto.INT32, [4])],
        28,
    )


A = np.array([1, -2, 3, 70000], np.int32)
B = np.array([0, 3, 30, 4], np.int32)


def test_opset_28_model_runs_on_kernels_and_onnxruntime_names_the_opset():
    expected = ReferenceEvaluator(_bitshift_model()).run(None, {"a": A, "b": B})[0]
    with onnxnn.set_executor("kernels"):
        np.testing.assert_array_equal(onnxnn.backend.run_model(_bitshift_model(), [A, B])[0], expected)
    with onnxnn.set_executor("auto"):  # onnxruntime cannot load opset 28: the kernels run it
        np.testing.assert_array_equal(onnxnn.backend.run_model(_bitshift_model(), [A, B])[0], expected)
    if newest_onnxruntime_opset() >= 28:
        pytest.skip("the installed onnxruntime runs opset 28")
    with onnxnn.set_executor("onnxruntime"):
        with pytest.raises(
            RuntimeError,
            match=r"needs ONNX opset 28 \(for \['BitShift'\].*runs opsets up to "
            rf"{newest_onnxruntime_opset()}.*set_executor\('kernels'\)",
        ):
            onnxnn.backend.run_model(_bitshift_model(), [A, B])


def test_auto_executor_without_the_kernel_says_both_reasons(monkeypatch):
    # Without a BitShift kernel, neither executor runs the opset-28 node: the error says why for each.
    if newest_onnxruntime_opset() >= 28:
        pytest.skip("the installed onnxruntime runs opset 28")
    monkeypatch.delitem(kernels.table, ("", "BitShift"))
    clear_caches()  # no runner compiled for this structure before
    with onnxnn.set_executor("auto"):
        with pytest.raises(NotImplementedError, match="no kernel for op_type 'BitShift'") as caught:
            onnxnn.backend.run_model(_bitshift_model(), [A, B])
    assert any("needs ONNX opset 28" in note for note in caught.value.__notes__)


def test_only_nodes_that_need_a_newer_opset_are_recorded_at_it():
    module = from_onnx(_bitshift_model())
    assert module.opset_version == 28  # as written: not converted down
    with onnxnn.set_executor("kernels"), onnxnn.no_grad():
        result = module(onnxnn.tensor(A), onnxnn.tensor(B))
        add = result._value.node
        shift = add.inputs[0].node
        assert type(add) is Node and add.opset == OPSET_VERSION
        assert type(shift) is VersionedNode and shift.opset == 28
        # The opset is part of the structural key: the same op at another opset compiles apart.
        assert shift.signature != Node("BitShift", "", (), shift.attrs, 1).signature
        # A plan rewired for shared sizes (runtime/fastpath/dynamic_shapes.py) keeps it.
        copy = shift.rewired(shift.inputs)
        assert type(copy) is VersionedNode and copy.opset == 28 and copy.signature == shift.signature


def _topk_model(opset: int) -> onnx.ModelProto:
    # TopK of bfloat16 exists from opset 24 on: float32 in and out, so onnxruntime can be fed.
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.BFLOAT16),
        helper.make_node("TopK", ["x16", "k"], ["values", "indices"], axis=-1),
        helper.make_node("Cast", ["values"], ["values32"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["values32", "x_scale"], ["y"]),
    ]
    initializers = [
        helper.make_tensor("k", TensorProto.INT64, [1], [3]),
        helper.make_tensor("x_scale", TensorProto.FLOAT, [], [0.5]),
    ]
    graph = helper.make_graph(
        nodes,
        "topk",
        [_info("x", TensorProto.FLOAT, [2, 5])],
        [_info("y", TensorProto.FLOAT, [2, 3]), _info("indices", TensorProto.INT64, [2, 3])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


X = np.array([[0.5, -1.25, 3.0, 2.0, 7.5], [-4.0, 0.75, 0.25, 9.0, 1.5]], np.float32)  # exact in bfloat16


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_opset_24_model_with_an_op_changed_at_24_on_both_executors(executor):
    if newest_onnxruntime_opset() < 24:
        pytest.skip("the installed onnxruntime does not run opset 24")
    model = _topk_model(24)
    expected_values, expected_indices = ReferenceEvaluator(model).run(None, {"x": X})
    with onnxnn.set_executor(executor):
        module = from_onnx(model)
        with onnxnn.no_grad():
            values, indices = module(onnxnn.tensor(X))
            np.testing.assert_array_equal(values.numpy(), expected_values)  # the values and 0.5 are exact
            np.testing.assert_array_equal(indices.numpy(), expected_indices)
        # Exported as recorded: at opset 24, which the TopK needs. (onnxruntime's CPU provider has
        # no bfloat16 TopK: onnxnn's sessions compute it in float32; onnx's evaluator runs the file.)
        proto = to_onnx(module, (onnxnn.tensor(X),), input_names=["x"])
    assert next(entry.version for entry in proto.opset_import if entry.domain == "") == 24
    np.testing.assert_array_equal(ReferenceEvaluator(proto).run(None, {"x": X})[0], expected_values)


def test_spacetodepth_mode_added_at_opset_28_runs_on_kernels():
    # Opset 28 added SpaceToDepth's mode; "CRD" means a different channel order than opset 21's.
    x = np.arange(2 * 2 * 4 * 4, dtype=np.float32).reshape(2, 2, 4, 4)
    model = _model(
        [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD")],
        [_info("x", TensorProto.FLOAT, list(x.shape))],
        [_info("y", TensorProto.FLOAT, [2, 8, 2, 2])],
        28,
    )
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    dcr = ReferenceEvaluator(
        _model(
            [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2)],
            [_info("x", TensorProto.FLOAT, list(x.shape))],
            [_info("y", TensorProto.FLOAT, [2, 8, 2, 2])],
            28,
        )
    ).run(None, {"x": x})[0]
    assert not np.array_equal(expected, dcr)  # the mode matters for this input
    with onnxnn.set_executor("kernels"):
        np.testing.assert_array_equal(onnxnn.backend.run_model(model, [x])[0], expected)


def test_a_node_nothing_here_runs_names_the_opset_it_needs():
    # Unique's output size depends on its data: it is computed at once, by onnxruntime, which
    # cannot load opset 28 (where Unique takes bfloat16).
    if newest_onnxruntime_opset() >= 28:
        pytest.skip("the installed onnxruntime runs opset 28")
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.BFLOAT16),
        helper.make_node("Unique", ["x16"], ["y"]),
    ]
    model = _model(nodes, [_info("x", TensorProto.FLOAT, [4])], [_info("y", TensorProto.BFLOAT16, ["n"])], 28)
    for executor in ("kernels", "onnxruntime"):
        with onnxnn.set_executor(executor):
            with pytest.raises(RuntimeError, match=r"needs ONNX opset 28 \(for \['Unique'\]"):
                onnxnn.backend.run_model(model, [np.array([2.0, 1.0, 2.0, 3.0], np.float32)])


def _layer_model(opset: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["z"]),
        helper.make_node("Tanh", ["z"], ["g"]),
        helper.make_node("LayerNormalization", ["g", "gamma", "beta"], ["y"], axis=-1),
    ]
    initializers = [
        helper.make_tensor(name, TensorProto.DOUBLE, shape, rng.standard_normal(shape).ravel())
        for name, shape in (("w", [4, 5]), ("b", [5]), ("gamma", [5]), ("beta", [5]))
    ]
    graph = helper.make_graph(
        nodes, "layer", [_info("x", TensorProto.DOUBLE, [3, 4])], [_info("y", TensorProto.DOUBLE, [3, 5])], initializers
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_plain_newer_model_records_at_21_and_trains(executor):
    # Nothing in it needs more than opset 21: its nodes are recorded there, run in onnxruntime at
    # opset 21 too, and differentiate as onnxnn's own ops do.
    x = np.random.default_rng(1).standard_normal((3, 4))
    with onnxnn.set_executor(executor):
        module = from_onnx(_layer_model(min(26, NEWEST_ONNX_OPSET)))
        reference = from_onnx(_layer_model(OPSET_VERSION))
        with onnxnn.no_grad():
            result = module(onnxnn.tensor(x))
            assert type(result._value.node) is Node
            np.testing.assert_array_equal(result.numpy(), reference(onnxnn.tensor(x)).numpy())
        check_gradients(lambda t: module(t), [x])
        module(onnxnn.tensor(x)).sum().backward()
        assert module.w.grad is not None and module.w.grad.shape == (4, 5)


def test_models_at_or_below_opset_21_still_convert_to_it():
    nodes = [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)]  # axes an attribute: opset 11
    model = _model(nodes, [_info("x", TensorProto.FLOAT, [2, 3])], [_info("y", TensorProto.FLOAT, [2])], 11)
    module = from_onnx(model)
    assert module.opset_version == OPSET_VERSION and module.metadata.original_opset_version == 11
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with onnxnn.no_grad():
        np.testing.assert_array_equal(module(onnxnn.tensor(x)).numpy(), x.sum(1))


# Official node tests at opsets 27 and 28 that onnxruntime 1.31 cannot run and onnxnn's kernels
# pass: before, onnx's converter could not bring them down to 21, or opset 21's shape inference
# refused their types (Range of float16/bfloat16 bounds, added at 27, which onnxnn computes when
# it is imported, by its kernel: the onnxruntime at hand runs opsets up to 26). (The tests
# onnxruntime passes are in test_backend_node_tests.py.)
KERNELS_PASS_AT_OPSET_28 = [
    *[
        f"test_bitshift_{direction}_{case}"
        for direction, cases in (
            (
                "left",
                [
                    "int16",
                    "int32",
                    "int32_negative_shift",
                    "int32_overflow",
                    "int32_shift_ge_width",
                    "int64",
                    "int8",
                    "int8_negative_shift",
                    "int8_overflow",
                    "int8_shift_ge_width",
                ],
            ),
            (
                "right",
                [
                    "int16",
                    "int32",
                    "int32_negative_input",
                    "int32_negative_shift",
                    "int32_shift_ge_width",
                    "int64",
                    "int8",
                    "int8_negative_input",
                    "int8_negative_shift",
                    "int8_shift_ge_width",
                ],
            ),
        )
        for case in cases
    ],
    "test_celu_bfloat16_expanded",
    "test_onehot_with_bfloat16_values",
    "test_reversesequence_bfloat16",
    "test_spacetodepth_crd_mode_example",
    # Mod with fmod=0 on floats, defined from opset 28 on (onnxruntime refuses it for float16).
    "test_mod_float16_mixed_sign_fmod_0",
    "test_mod_float_edge_cases_fmod_0_float16",
    "test_range_float16_type_positive_delta",
    "test_range_bfloat16_type_positive_delta",
]


@pytest.mark.parametrize("executor", ["kernels", "auto"])
def test_node_tests_newer_than_onnxruntime_pass_on_the_kernels(executor):
    cases = [case for case in node_test_cases() if case[0] in set(KERNELS_PASS_AT_OPSET_28)]
    assert sorted(case[0] for case in cases) == sorted(KERNELS_PASS_AT_OPSET_28)
    with onnxnn.set_executor(executor):  # "auto": onnxruntime refuses opset 28, the kernels take it
        failures = failing_cases(cases, set(KERNELS_PASS_AT_OPSET_28), onnxnn_runner)
    assert not failures, failures


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_range_of_float16_bounds_at_opset_27_is_computed_by_the_kernel_on_both_executors(executor):
    # Range's data-dependent length is computed when the node is recorded: by onnxnn's kernel,
    # since the onnxruntime at hand runs opsets up to 26; the Add after it runs on the executor.
    bounds = [_info(name, TensorProto.FLOAT16, []) for name in ("start", "limit", "delta")]
    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])]
    module = from_onnx(_model(nodes, bounds, [_info("y", TensorProto.FLOAT16, [None])], 27))
    start, limit, delta = (np.array(value, np.float16) for value in (0.5, 3.25, 0.75))
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        result = module(*(onnxnn.tensor(value) for value in (start, limit, delta))).numpy()
    expected = 2 * (0.5 + 0.75 * np.arange(4))  # ceil((3.25 - 0.5) / 0.75) = 4 elements, exact in float16
    assert result.dtype == np.float16
    np.testing.assert_array_equal(result, expected.astype(np.float16))
