"""Specification of ``onnxnn.import_.from_onnx`` on ONNX graphs and files: control flow (If, Loop, Scan),
Constant and Dropout nodes, older and newer opsets, accepted sources and external data, optional
inputs, and the errors for bad sources and bad inputs at call time.

Expected values come from onnxruntime running the same ONNX model. Round trips of exported onnxnn
modules, names and training are in test_from_onnx_round_trips.py; the shared models and checks in
from_onnx_cases.py.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onnxnn
from onnxnn import ModelLoadError
from onnxnn.import_ import from_onnx

from layer_chains import assert_same_model_output
from tolerances import TRANSCENDENTAL_ULPS, rtol_for

from .from_onnx_cases import BOOL, FLOAT, INT64, assert_matches_onnxruntime, exported, make_model

# ----------------------------------------------------------------------------- control flow


def _if_model() -> onnx.ModelProto:
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", FLOAT, [3])]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["x", "one"], ["e"])], "else", [], [helper.make_tensor_value_info("e", FLOAT, [3])]
    )
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    node = helper.make_node("If", ["cond"], ["y"], then_branch=then_branch, else_branch=else_branch)
    return make_model(
        [node],
        [helper.make_tensor_value_info("cond", BOOL, []), helper.make_tensor_value_info("x", FLOAT, [3])],
        [helper.make_tensor_value_info("y", FLOAT, [3])],
        [one],
    )


def _loop_model() -> onnx.ModelProto:
    # for i in range(M) while cond: total += x * i; stack x + i; stop once total's sum exceeds 20.
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
            helper.make_node("Mul", ["x", "i_float"], ["scaled"]),
            helper.make_node("Add", ["total_in", "scaled"], ["total_out"]),
            helper.make_node("Add", ["x", "i_float"], ["shifted"]),
            helper.make_node("ReduceSum", ["total_out"], ["sum"], keepdims=0),
            helper.make_node("Less", ["sum", "limit"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", INT64, []),
            helper.make_tensor_value_info("cond_in", BOOL, []),
            helper.make_tensor_value_info("total_in", FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", BOOL, []),
            helper.make_tensor_value_info("total_out", FLOAT, [3]),
            helper.make_tensor_value_info("shifted", FLOAT, [3]),
        ],
    )
    limit = numpy_helper.from_array(np.array(20.0, np.float32), "limit")
    node = helper.make_node("Loop", ["M", "cond", "start"], ["total", "stacked"], body=body)
    return make_model(
        [node],
        [
            helper.make_tensor_value_info("M", INT64, []),
            helper.make_tensor_value_info("cond", BOOL, []),
            helper.make_tensor_value_info("start", FLOAT, [3]),
            helper.make_tensor_value_info("x", FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("total", FLOAT, [3]),
            helper.make_tensor_value_info("stacked", FLOAT, ["steps", 3]),
        ],
        [limit],
    )


def _scan_model(axis: int, direction: int) -> onnx.ModelProto:
    # Running sum over the scan axis, and each step's running sum times 2.
    body = helper.make_graph(
        [
            helper.make_node("Add", ["sum_in", "row"], ["sum_out"]),
            helper.make_node("Add", ["sum_out", "sum_out"], ["doubled"]),
        ],
        "body",
        [helper.make_tensor_value_info("sum_in", FLOAT, [2]), helper.make_tensor_value_info("row", FLOAT, [2])],
        [helper.make_tensor_value_info("sum_out", FLOAT, [2]), helper.make_tensor_value_info("doubled", FLOAT, [2])],
    )
    node = helper.make_node(
        "Scan",
        ["initial", "xs"],
        ["final", "steps"],
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[axis],
        scan_input_directions=[direction],
        scan_output_axes=[axis],
        scan_output_directions=[direction],
    )
    shape = [4, 2] if axis == 0 else [2, 4]
    return make_model(
        [node],
        [helper.make_tensor_value_info("initial", FLOAT, [2]), helper.make_tensor_value_info("xs", FLOAT, shape)],
        [helper.make_tensor_value_info("final", FLOAT, [2]), helper.make_tensor_value_info("steps", FLOAT, shape)],
    )


X3 = np.array([1.0, -2.0, 3.0], np.float32)
CONTROL_FLOW_CASES = {
    "if_true": (_if_model, (np.array(True), X3)),
    "if_false": (_if_model, (np.array(False), X3)),
    "loop_trip_count": (
        _loop_model,
        (np.array(3, np.int64), np.array(True), np.zeros(3, np.float32), np.array([0.5, 0.25, 0.125], np.float32)),
    ),
    "loop_until_condition": (_loop_model, (np.array(100, np.int64), np.array(True), np.zeros(3, np.float32), X3)),
    "scan_axis0": (lambda: _scan_model(0, 0), (np.ones(2, np.float32), np.arange(8, dtype=np.float32).reshape(4, 2))),
    "scan_axis1_reverse": (
        lambda: _scan_model(1, 1),
        (np.ones(2, np.float32), np.arange(8, dtype=np.float32).reshape(2, 4)),
    ),
}


@pytest.mark.parametrize("case", sorted(CONTROL_FLOW_CASES))
def test_control_flow_matches_onnxruntime(case):
    build, inputs = CONTROL_FLOW_CASES[case]
    assert_matches_onnxruntime(build(), *inputs)


def test_gradients_flow_through_the_chosen_branch():
    imported = from_onnx(_if_model())
    x = onnxnn.tensor(X3, requires_grad=True)
    imported(np.array(True), x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * X3)
    x.grad = None
    imported(np.array(False), x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.ones(3))


def test_constant_and_dropout_nodes():
    value = helper.make_tensor("c", FLOAT, [3], [1.0, 2.0, 3.0])
    ratio = numpy_helper.from_array(np.array(0.5, np.float32), "ratio")
    proto = make_model(
        [
            helper.make_node("Constant", [], ["c"], value=value),
            helper.make_node("Dropout", ["x", "ratio"], ["d"]),
            helper.make_node("Tile", ["c", "repeats"], ["c_tiled"]),
            helper.make_node("Slice", ["c_tiled", "zero", "thousand"], ["c_long"]),
            helper.make_node("Add", ["d", "c_long"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", FLOAT, [1000])],
        [helper.make_tensor_value_info("y", FLOAT, [1000])],
        [
            ratio,
            numpy_helper.from_array(np.array([334], np.int64), "repeats"),
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
            numpy_helper.from_array(np.array([1000], np.int64), "thousand"),
        ],
    )
    imported = from_onnx(proto)
    x = np.ones(1000, np.float32)
    c = np.tile([1.0, 2.0, 3.0], 334)[:1000]
    with onnxnn.no_grad():
        np.testing.assert_allclose(imported.eval()(x).numpy(), 1.0 + c)  # Dropout is the identity in eval
        dropped = imported.train()(x).numpy() - c
    assert set(np.round(dropped, 5)) == {0.0, 2.0} and 300 < np.count_nonzero(dropped) < 700


# ----------------------------------------------------------------------------- opsets and files


def test_an_older_opset_is_converted():
    # Opset 11: ReduceSum takes its axes as an attribute and Squeeze as well; opset 13 made them inputs.
    proto = make_model(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], axes=[1], keepdims=1),
            helper.make_node("Squeeze", ["s"], ["y"], axes=[1]),
        ],
        [helper.make_tensor_value_info("x", FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", FLOAT, [2])],
        opset=11,
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_matches_onnxruntime(proto, x)
    metadata = from_onnx(proto).metadata
    assert (metadata.original_opset_version, metadata.opset_imports[""]) == (11, 21)


def test_an_op_newer_than_opset_21_runs_its_function_body():
    proto = make_model(
        [helper.make_node("RMSNormalization", ["x", "scale"], ["y"], epsilon=1e-3)],
        [helper.make_tensor_value_info("x", FLOAT, [2, 4]), helper.make_tensor_value_info("scale", FLOAT, [4])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 4])],
        opset=23,
    )
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3.0
    scale = np.array([1.0, 0.5, 2.0, -1.0], np.float32)
    expected = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-3) * scale
    with onnxnn.no_grad():
        # mean(x * x) sums 4 positive terms (no cancellation: a relative bound), then +eps, the
        # square root (a few ulps) and two products.
        np.testing.assert_allclose(
            from_onnx(proto)(x, scale).numpy(), expected, rtol=rtol_for(4 + 3 + TRANSCENDENTAL_ULPS)
        )


@pytest.mark.parametrize("kind", ["path", "pathlike", "bytes", "proto"])
def test_accepted_sources(kind, tmp_path):
    _, x, proto = exported("mlp")
    path = tmp_path / "model.onnx"
    onnx.save(proto, str(path))
    source = {"path": str(path), "pathlike": path, "bytes": proto.SerializeToString(), "proto": proto}[kind]
    imported = from_onnx(source)
    assert imported.metadata.producer_name == "onnxnn" and imported.opset_version == 21
    assert repr(imported).startswith("GraphModule(\n  inputs=['input_0'], outputs=['output_0'], opset=21")
    assert "(0): Module()" in repr(imported)


def test_external_data_next_to_the_model_is_loaded(tmp_path):
    model, x, proto = exported("mlp")
    path = tmp_path / "model.onnx"
    onnx.save_model(
        proto,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    assert (tmp_path / "weights.bin").exists()
    with onnxnn.no_grad():
        assert_same_model_output(from_onnx(path)(x), model, x)


def test_initializers_that_are_graph_inputs_are_optional_inputs():
    weight = numpy_helper.from_array(np.array([2.0, 3.0], np.float32), "w")
    proto = make_model(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", FLOAT, [2]), helper.make_tensor_value_info("w", FLOAT, [2])],
        [helper.make_tensor_value_info("y", FLOAT, [2])],
        [weight],
    )
    imported = from_onnx(proto)
    assert (imported.input_names, imported.optional_input_names) == (["x"], ["w"])
    x = np.ones(2, np.float32)
    with onnxnn.no_grad():
        np.testing.assert_allclose(imported(x).numpy(), [2.0, 3.0])
        np.testing.assert_allclose(imported(x, np.array([5.0, 7.0], np.float32)).numpy(), [5.0, 7.0])
        np.testing.assert_allclose(imported(x, w=np.array([1.0, 1.0], np.float32)).numpy(), [1.0, 1.0])


# ----------------------------------------------------------------------------- errors


def _write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _missing_external_data(tmp_path) -> str:
    _, _, proto = exported("mlp")
    path = tmp_path / "model.onnx"
    onnx.save_model(
        proto,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location="weights.bin",
        size_threshold=0,
    )
    os.remove(tmp_path / "weights.bin")
    return str(path)


def _fails_checker(tmp_path) -> bytes:
    node = helper.make_node("Relu", ["undefined"], ["y"])
    return make_model(
        [node], [helper.make_tensor_value_info("x", FLOAT, [2])], [helper.make_tensor_value_info("y", FLOAT, [2])]
    ).SerializeToString()


def _custom_domain_op(tmp_path) -> onnx.ModelProto:
    node = helper.make_node("FancyOp", ["x"], ["y"], domain="com.example", name="fancy_1")
    return make_model(
        [node],
        [helper.make_tensor_value_info("x", FLOAT, [2])],
        [helper.make_tensor_value_info("y", FLOAT, [2])],
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.example", 3)],
    )


BAD_SOURCES = {
    "missing_file": (lambda tmp: str(tmp / "absent.onnx"), FileNotFoundError, "absent.onnx"),
    "truncated": (
        lambda tmp: _write(tmp, "cut.onnx", exported("mlp")[2].SerializeToString()[:150]),
        ModelLoadError,
        "not a valid ONNX model",
    ),
    "not_onnx": (
        lambda tmp: _write(tmp, "text.onnx", b"name,value\nlearning_rate,0.1\n"),
        ModelLoadError,
        "not a valid ONNX model",
    ),
    "empty_file": (lambda tmp: _write(tmp, "empty.onnx", b""), ModelLoadError, "not a valid ONNX model"),
    "fails_checker": (_fails_checker, ModelLoadError, "check_model.*undefined"),
    "missing_external_data": (_missing_external_data, ModelLoadError, "weights.bin.*not found"),
    "custom_domain_op": (_custom_domain_op, ModelLoadError, "'FancyOp'.*'com.example'.*opset 3.*'fancy_1'"),
    "wrong_type": (lambda tmp: 42, TypeError, "path, bytes or an onnx.ModelProto"),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_bad_sources_raise_clear_errors(case, tmp_path):
    make, error, message = BAD_SOURCES[case]
    with pytest.raises(error, match=message):
        from_onnx(make(tmp_path))


def _typed_model() -> onnx.ModelProto:
    return make_model(
        [helper.make_node("Add", ["x", "y"], ["z"])],
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 4]), helper.make_tensor_value_info("y", FLOAT, [1, 4])],
        [helper.make_tensor_value_info("z", FLOAT, ["batch", 4])],
    )


ONE_FOUR = np.zeros((1, 4), np.float32)
BAD_CALLS = {
    "too_few_inputs": ((np.zeros((2, 4), np.float32),), TypeError, "missing 1 required input.*'y'"),
    "too_many_inputs": ((ONE_FOUR, ONE_FOUR, ONE_FOUR), TypeError, "takes 2 positional inputs but 3 were given"),
    "wrong_dtype": ((np.zeros((2, 4), np.float64), ONE_FOUR), TypeError, "'x' expects dtype float32, but got float64"),
    "wrong_static_dim": (
        (ONE_FOUR, np.zeros((1, 5), np.float32)),
        ValueError,
        r"'y' expects shape \[1, 4\], but got \[1, 5\]",
    ),
    "wrong_rank": ((np.zeros(4, np.float32), ONE_FOUR), ValueError, r"'x' expects shape \['batch', 4\], but got \[4\]"),
    "not_a_tensor": (([[0.0] * 4], ONE_FOUR), TypeError, "'x' must be a Tensor or a numpy array"),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_inputs_at_call_time(case):
    inputs, error, message = BAD_CALLS[case]
    with pytest.raises(error, match=message):
        from_onnx(_typed_model())(*inputs)


@pytest.mark.parametrize("batch", [1, 7])
def test_symbolic_dims_accept_any_size(batch):
    x = np.random.default_rng(0).standard_normal((batch, 4)).astype(np.float32)
    with onnxnn.no_grad():
        np.testing.assert_allclose(from_onnx(_typed_model())(x, ONE_FOUR + 1).numpy(), x + 1)
