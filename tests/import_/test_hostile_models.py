"""Specification of ``from_onnx`` on malformed and hostile ONNX models.

Every tensor stored externally is read from inside the model's own folder only, whatever kind
of tensor it is and wherever it sits; malformed files, strings, attributes and dims end in a
:class:`ModelLoadError` naming what is wrong (or, at replay, the node and op), never in a raw
``UnicodeDecodeError``/``IndexError`` or a huge allocation. Expected values come from numpy.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn import ModelLoadError
from onnxnn.import_ import from_onnx

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
SECRET = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def make_model(nodes, inputs, outputs, initializers=(), sparse=(), opset=21) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(initializers), sparse_initializer=list(sparse))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def external(tensor: TensorProto, location: str, offset: int | None = 0, length: int | None = None) -> TensorProto:
    """``tensor`` with its data moved to ``location`` (the file itself is written by the test)."""
    tensor.ClearField("float_data")
    tensor.ClearField("int64_data")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    entries += [] if offset is None else [("offset", str(offset))]
    entries += [] if length is None else [("length", str(length))]
    for key, value in entries:
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def sparse_external_model(location: str = "secret.bin", **where) -> onnx.ModelProto:
    """y = x + w, w a sparse initializer whose values are read from ``location``."""
    values = external(numpy_helper.from_array(np.zeros(4, np.float32), "w"), location, **where)
    indices = numpy_helper.from_array(np.arange(4, dtype=np.int64), "w_indices")
    return make_model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", FLOAT, [4])],
        [helper.make_tensor_value_info("y", FLOAT, [4])],
        sparse=[helper.make_sparse_tensor(values, indices, [4])],
    )


def run(model, base_dir=None) -> np.ndarray:
    with onnxnn.no_grad():
        return from_onnx(model, base_dir=base_dir)(np.zeros(4, np.float32)).numpy()


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A model folder and, as the working directory, another folder holding 'secret.bin'."""
    model_dir, cwd = tmp_path / "model", tmp_path / "cwd"
    model_dir.mkdir()
    cwd.mkdir()
    (cwd / "secret.bin").write_bytes(SECRET.tobytes())
    monkeypatch.chdir(cwd)
    return model_dir, cwd


# ----------------------------------------------------------------------------- external data


def test_sparse_initializer_data_in_the_working_directory_is_not_read(folders):
    model_dir, _ = folders
    onnx.save(sparse_external_model(), str(model_dir / "model.onnx"))
    with pytest.raises(ModelLoadError, match="'secret.bin' of sparse_initializer 'w' .values. was not found"):
        from_onnx(model_dir / "model.onnx")


def test_sparse_initializer_data_in_the_model_folder_is_read(folders):
    model_dir, _ = folders
    onnx.save(sparse_external_model(), str(model_dir / "model.onnx"))
    (model_dir / "secret.bin").write_bytes(SECRET.tobytes() * 2)
    np.testing.assert_array_equal(run(str(model_dir / "model.onnx")), SECRET)


def test_sparse_indices_are_checked_like_values(folders):
    model_dir, _ = folders
    model = sparse_external_model()
    model.graph.sparse_initializer[0].values.CopyFrom(numpy_helper.from_array(SECRET, "w"))
    external(model.graph.sparse_initializer[0].indices, "../cwd/secret.bin")
    onnx.save(model, str(model_dir / "model.onnx"))
    with pytest.raises(ModelLoadError, match=r"sparse_initializer 'w' \(indices\)"):
        from_onnx(model_dir / "model.onnx")


def if_model_with_external_branch_constant(location: str) -> onnx.ModelProto:
    """y = If(c) then Constant(external tensor) else x: the external tensor sits in a subgraph."""
    value = external(numpy_helper.from_array(np.zeros(4, np.float32), "k"), location)
    then_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["k_out"], value=value, name="inner")],
        "then",
        [],
        [helper.make_tensor_value_info("k_out", FLOAT, [4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["x_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("x_out", FLOAT, [4])],
    )
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch, name="branch")
    return make_model(
        [node],
        [helper.make_tensor_value_info("x", FLOAT, [4]), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", FLOAT, [4])],
    )


def test_attribute_tensors_inside_subgraphs_are_checked(folders):
    model_dir, _ = folders
    onnx.save(if_model_with_external_branch_constant("../cwd/secret.bin"), str(model_dir / "model.onnx"))
    with pytest.raises(
        ModelLoadError,
        match="'../cwd/secret.bin' of attribute 'value' of node 'inner'.*points outside the model's folder",
    ):
        from_onnx(model_dir / "model.onnx")


def test_attribute_tensors_inside_subgraphs_load_from_the_model_folder(folders):
    model_dir, _ = folders
    onnx.save(if_model_with_external_branch_constant("k.bin"), str(model_dir / "model.onnx"))
    (model_dir / "k.bin").write_bytes(SECRET.tobytes())
    with onnxnn.no_grad():
        got = from_onnx(model_dir / "model.onnx")(np.zeros(4, np.float32), np.array(True)).numpy()
    np.testing.assert_array_equal(got, SECRET)


def _symlink_out(model_dir, cwd) -> str:
    os.symlink(cwd / "secret.bin", model_dir / "link.bin")
    return "link.bin"


ESCAPES = {
    "absolute": (lambda model_dir, cwd: str(cwd / "secret.bin"), "absolute path"),
    "dot_dot": (lambda model_dir, cwd: "../cwd/secret.bin", "points outside the model's folder"),
    "dot_dot_inside_then_out": (lambda model_dir, cwd: "sub/../../cwd/secret.bin", "points outside"),
    "symlink": (_symlink_out, "points outside the model's folder"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_locations_escaping_the_model_folder_are_refused(case, folders):
    model_dir, cwd = folders
    make_location, message = ESCAPES[case]
    onnx.save(sparse_external_model(make_location(model_dir, cwd)), str(model_dir / "model.onnx"))
    with pytest.raises(ModelLoadError, match=message):
        from_onnx(model_dir / "model.onnx")


RANGES = {
    "offset_past_the_end": ({"offset": 8}, "asks for bytes 8..24 of 'w.bin', which holds only 16 bytes"),
    "length_disagreeing_with_dims": ({"length": 8}, "has length 8, but its dims \\[4\\] and element type need 16"),
    "length_beyond_the_file": ({"offset": 0, "length": 16, "dims": [8]}, "length 16, but its dims \\[8\\]"),
    "huge_dims": ({"dims": [2**40]}, "asks for bytes 0..4398046511104"),
    "offset_not_a_number": ({"offset": "1e3"}, "'offset' of .* is '1e3', not a non-negative integer"),
}


@pytest.mark.parametrize("case", sorted(RANGES))
def test_offsets_and_lengths_must_lie_within_the_file(case, tmp_path):
    settings, message = dict(RANGES[case][0]), RANGES[case][1]
    dims = settings.pop("dims", [4])
    weight = external(TensorProto(name="w", data_type=FLOAT, dims=dims), "w.bin", **settings)
    (tmp_path / "w.bin").write_bytes(SECRET.tobytes())
    model = make_model(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", FLOAT, dims)],
        [helper.make_tensor_value_info("y", FLOAT, dims)],
        [weight],
    )
    onnx.save(model, str(tmp_path / "model.onnx"))
    with pytest.raises(ModelLoadError, match=message):
        from_onnx(tmp_path / "model.onnx")


@pytest.mark.parametrize("kind", ["bytes", "proto"])
def test_models_given_in_memory_need_base_dir_for_external_data(kind, folders):
    model_dir, _ = folders
    model = sparse_external_model()
    (model_dir / "secret.bin").write_bytes(SECRET.tobytes())
    source = model.SerializeToString() if kind == "bytes" else model
    with pytest.raises(ModelLoadError, match="pass base_dir="):
        from_onnx(source)
    np.testing.assert_array_equal(run(source, base_dir=model_dir), SECRET)


# ----------------------------------------------------------------------------- malformed files and strings


def relu_model() -> onnx.ModelProto:
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"], name="NODE")],
        [helper.make_tensor_value_info("x", FLOAT, [4])],
        [helper.make_tensor_value_info("y", FLOAT, [4])],
    )
    model.doc_string = "DOCS"
    return model


BAD_UTF8 = {
    "node_name": (b"NODE", b"N\xffDE", r"graph\.node\[0\]\.name"),
    "op_type": (b"Relu", b"R\xfflu", r"graph\.node\[0\]\.op_type"),
    "doc_string": (b"DOCS", b"\xfe\xff\xfe\xff", r"model\.doc_string"),
    "input_name": (b"\n\x01x\x12\x01y", b"\n\x01\xff\x12\x01y", r"graph\.node\[0\]\.input\[0\]"),
}


@pytest.mark.parametrize("case", sorted(BAD_UTF8))
def test_strings_that_are_not_utf8_are_refused_naming_the_field(case):
    old, new, field = BAD_UTF8[case]
    data = relu_model().SerializeToString()
    assert data.count(old) == 1
    with pytest.raises(ModelLoadError, match=field + " is not valid UTF-8"):
        from_onnx(data.replace(old, new))


def test_string_attributes_that_are_not_utf8_are_refused_naming_the_attribute():
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], auto_pad="VALID", name="pool")
    model = make_model(
        [node],
        [helper.make_tensor_value_info("x", FLOAT, [1, 1, 4])],
        [helper.make_tensor_value_info("y", FLOAT, [1, 1, 3])],
    )
    next(attribute for attribute in model.graph.node[0].attribute if attribute.name == "auto_pad").s = b"VAL\xffD"
    with pytest.raises(ModelLoadError, match="'auto_pad'.*not valid UTF-8"):
        from_onnx(model)


@pytest.mark.parametrize("cut", [0.25, 0.5, 0.9])
def test_truncated_protobuf_is_refused(cut):
    data = relu_model().SerializeToString()
    with pytest.raises(ModelLoadError, match="not a valid ONNX model|fails onnx.checker"):
        from_onnx(data[: int(len(data) * cut)])


# ----------------------------------------------------------------------------- attributes, domains, dims


def test_a_perm_out_of_range_is_refused_at_load_naming_the_node():
    model = make_model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5], name="swap")],
        [helper.make_tensor_value_info("x", FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", FLOAT, [3, 2])],
    )
    with pytest.raises(ModelLoadError, match="Transpose.*swap.*perm"):
        from_onnx(model)


def test_a_perm_out_of_range_found_at_replay_names_the_node_and_keeps_the_cause():
    # The Reshape target is a graph input, so the Transpose's input rank is unknown until replay.
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["y"], perm=[0, 5], name="swap"),
    ]
    model = make_model(
        nodes,
        [helper.make_tensor_value_info("x", FLOAT, [2, 3]), helper.make_tensor_value_info("shape", INT64, ["rank"])],
        [helper.make_tensor_value_info("y", FLOAT, ["a", "b"])],
    )
    module = from_onnx(model)
    with pytest.raises(ModelLoadError, match="node 'swap' of op_type 'Transpose' is invalid") as caught:
        module(np.zeros((2, 3), np.float32), np.array([3, 2]))
    assert isinstance(caught.value.__cause__, IndexError)


def test_an_unknown_domain_is_refused_at_load_naming_op_and_domain():
    # com.microsoft's Gelu imports now (onnxnn/import_/contrib.py); an op of no known domain does not.
    node = helper.make_node("Gelu", ["x"], ["y"], domain="com.example", name="gelu")
    model = make_model(
        [node], [helper.make_tensor_value_info("x", FLOAT, [4])], [helper.make_tensor_value_info("y", FLOAT, [4])]
    )
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(ModelLoadError, match="'Gelu' of domain 'com.example'.*'gelu'"):
        from_onnx(model)


def test_an_initializer_whose_dims_numpy_cannot_hold_is_refused_naming_the_model(tmp_path):
    # A 0 beside 2**62 makes an empty tensor, but numpy cannot represent the shape.
    weight = TensorProto(name="w", data_type=FLOAT, dims=[0, 2**62, 2**62])
    output = helper.make_tensor_value_info("y", FLOAT, ["a", "b", "c"])
    onnx.save(make_model([helper.make_node("Identity", ["w"], ["y"])], [], [output], [weight]), tmp_path / "huge.onnx")
    with pytest.raises(ModelLoadError, match="huge.onnx'?: initializer 'w' cannot be read"):
        from_onnx(tmp_path / "huge.onnx")


def test_a_sparse_initializer_declaring_huge_dims_is_refused_before_allocating():
    values = numpy_helper.from_array(np.ones(1, np.float32), "w")
    indices = numpy_helper.from_array(np.zeros(1, np.int64), "w_indices")
    model = make_model(
        [helper.make_node("Identity", ["w"], ["y"])],
        [],
        [helper.make_tensor_value_info("y", FLOAT, [2**20, 2**20])],
        sparse=[helper.make_sparse_tensor(values, indices, [2**20, 2**20])],
    )
    with pytest.raises(ModelLoadError, match="sparse tensor 'w' has dims .* more than this process may allocate"):
        from_onnx(model)


@pytest.mark.parametrize("indices, message", [([4], "out of range"), ([-1], "out of range"), ([0, 1], "indices")])
def test_sparse_indices_must_match_values_and_dims(indices, message):
    values = numpy_helper.from_array(np.ones(1, np.float32), "w")
    model = make_model(
        [helper.make_node("Identity", ["w"], ["y"])],
        [],
        [helper.make_tensor_value_info("y", FLOAT, [4])],
        sparse=[helper.make_sparse_tensor(values, numpy_helper.from_array(np.array(indices), "i"), [4])],
    )
    with pytest.raises(ModelLoadError, match=message):
        from_onnx(model)


def test_a_huge_tensor_computed_at_replay_is_refused_before_allocating():
    shape = numpy_helper.from_array(np.array([2**40], np.int64), "shape")
    model = make_model(
        [helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")],
        [],
        [helper.make_tensor_value_info("y", FLOAT, [2**40])],
        [shape],
    )
    module = from_onnx(model)
    with pytest.raises(
        RuntimeError,
        match="node 'fill' of op_type 'ConstantOfShape' would create a tensor of shape "
        r"\[1099511627776\]",
    ):
        module()
