"""Seed models and seeded mutations for the ONNX import fuzzer (``test_onnx_fuzz.py``).

``make_case(rng, folder)`` writes one mutated model (``model.onnx``, plus its external data files
when the seed has them) into ``folder`` and returns a short description of what was mutated.
Everything is drawn from ``rng``, so a seed gives the same sequence of cases on every machine.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

__all__ = ["SEEDS", "make_case"]

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _init(name: str, array) -> TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, initializers=(), sparse=(), opset=21) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "seed", inputs, outputs, list(initializers), sparse_initializer=list(sparse))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def mlp() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    weights = [
        _init("w1", rng.standard_normal((4, 8)).astype(np.float32)),
        _init("b1", np.zeros(8, np.float32)),
        _init("w2", rng.standard_normal((8, 2)).astype(np.float32)),
        _init("b2", np.ones(2, np.float32)),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("Gemm", ["h2", "w2", "b2"], ["y"], name="fc2", alpha=1.0, beta=1.0, transB=0),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 2])],
        weights,
    )


def cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(2)
    weights = [
        _init("conv.weight", rng.standard_normal((4, 3, 3, 3)).astype(np.float32)),
        _init("conv.bias", np.zeros(4, np.float32)),
        _init("bn.scale", np.ones(4, np.float32)),
        _init("bn.bias", np.zeros(4, np.float32)),
        _init("bn.mean", np.zeros(4, np.float32)),
        _init("bn.var", np.ones(4, np.float32)),
        _init("fc.weight", rng.standard_normal((4, 3)).astype(np.float32)),
        _init("perm_shape", np.array([0, -1], np.int64)),
    ]
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "conv.weight", "conv.bias"],
            ["c"],
            name="conv",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[1, 1],
            dilations=[1, 1],
            group=1,
        ),
        helper.make_node(
            "BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["n"], name="bn", epsilon=1e-5
        ),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p"], ["t"], name="transpose", perm=[0, 2, 3, 1]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Reshape", ["g", "perm_shape"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc.weight"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
        helper.make_node("Concat", ["t", "t"], ["tt"], name="concat", axis=3),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 3, 8, 8])],
        [
            helper.make_tensor_value_info("y", FLOAT, ["batch", 3]),
            helper.make_tensor_value_info("tt", FLOAT, ["batch", 4, 4, 8]),
        ],
        weights,
    )


def with_if() -> onnx.ModelProto:
    then_branch = helper.make_graph(
        [
            helper.make_node("Constant", [], ["k"], value=_init("k_value", np.full(4, 2.0, np.float32)), name="k"),
            helper.make_node("Mul", ["x", "k"], ["then_out"], name="scale"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", FLOAT, ["batch", 4])],
    )
    else_branch = helper.make_graph(
        [
            helper.make_node("Gather", ["x", "index"], ["gathered"], name="gather", axis=1),
            helper.make_node("Tile", ["gathered", "repeats"], ["else_out"], name="tile"),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", FLOAT, ["batch", 4])],
        [_init("index", np.array([0, 1], np.int64)), _init("repeats", np.array([1, 2], np.int64))],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], name="sum", keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["cond"], name="positive"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("x", FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", FLOAT, ["batch", 4])],
        [_init("zero", np.float32(0.0))],
    )


def external() -> onnx.ModelProto:
    """The MLP with every initializer in 'weights.bin', plus a sparse initializer in 'sparse.bin'."""
    model = mlp()
    values = _init("bias_values", np.array([0.5, -0.5], np.float32))
    indices = _init("bias_indices", np.array([1, 3], np.int64))
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [8]))
    model.graph.node.insert(2, helper.make_node("Add", ["h1", "bias_values"], ["h1b"], name="sparse_bias"))
    model.graph.node[3].input[0] = "h1b"
    return model


SEEDS = {"mlp": mlp, "cnn": cnn, "if": with_if, "external": external}


def _externalize(model: onnx.ModelProto, folder: str) -> None:
    """Moves the data of every initializer and sparse value into files of ``folder``."""
    offset = 0
    with open(os.path.join(folder, "weights.bin"), "wb") as weights:
        for tensor in model.graph.initializer:
            data = numpy_helper.to_array(tensor).tobytes()
            _set_external(tensor, "weights.bin", offset, len(data))
            weights.write(data)
            offset += len(data)
    with open(os.path.join(folder, "sparse.bin"), "wb") as sparse_file:
        for sparse in model.graph.sparse_initializer:
            data = numpy_helper.to_array(sparse.values).tobytes()
            _set_external(sparse.values, "sparse.bin", 0, len(data))
            sparse_file.write(data)


def _set_external(tensor: TensorProto, location: str, offset: int, length: int) -> None:
    for field in ("float_data", "int64_data", "int32_data", "double_data", "raw_data"):
        tensor.ClearField(field)
    tensor.data_location = TensorProto.EXTERNAL
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


# ----------------------------------------------------------------------------- structure-aware mutations

INTERESTING_INTS = [-(2**63), -(2**31), -5, -2, -1, 0, 1, 2, 3, 4, 5, 7, 2**20, 2**31, 2**40, 2**63 - 1]
INTERESTING_FLOATS = [float("nan"), float("inf"), -float("inf"), -1.0, 0.0, 1e-30, 1e30]
OP_TYPES = [
    "Transpose",
    "Reshape",
    "Concat",
    "Gather",
    "Softmax",
    "Conv",
    "MaxPool",
    "If",
    "Loop",
    "Split",
    "Slice",
    "ConstantOfShape",
    "Expand",
    "Tile",
    "Pad",
    "Resize",
    "TopK",
    "NonZero",
    "Einsum",
    "Unknown",
]
DOMAINS = ["", "ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training", "org.example"]


def _all_graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from _all_graphs(attribute.g)
            for subgraph in attribute.graphs:
                yield from _all_graphs(subgraph)


def _nodes(model):
    return [node for graph in _all_graphs(model.graph) for node in graph.node]


def _tensors(model):
    found = []
    for graph in _all_graphs(model.graph):
        found += list(graph.initializer)
        found += [sparse.values for sparse in graph.sparse_initializer]
        found += [sparse.indices for sparse in graph.sparse_initializer]
        for node in graph.node:
            found += [attribute.t for attribute in node.attribute if attribute.HasField("t")]
    return found


def _value_infos(model):
    return [
        info
        for graph in _all_graphs(model.graph)
        for info in list(graph.input) + list(graph.output) + list(graph.value_info)
        if info.type.HasField("tensor_type")
    ]


def _pick(rng, items):
    return items[int(rng.integers(len(items)))] if len(items) else None


def mutate_attribute(rng, model):
    node = _pick(rng, _nodes(model))
    if node is None or not len(node.attribute):
        return "no attribute"
    attribute = _pick(rng, node.attribute)
    choice = int(rng.integers(6))
    if choice == 0 and attribute.type == AttributeProto.INT:
        attribute.i = int(_pick(rng, INTERESTING_INTS))
    elif choice <= 1 and attribute.type == AttributeProto.INTS and len(attribute.ints):
        attribute.ints[int(rng.integers(len(attribute.ints)))] = int(_pick(rng, INTERESTING_INTS))
    elif choice == 2 and attribute.type == AttributeProto.INTS:
        attribute.ints.append(int(_pick(rng, INTERESTING_INTS)))  # a perm or kernel with an extra entry
    elif choice == 3 and attribute.type in (AttributeProto.FLOAT, AttributeProto.FLOATS):
        attribute.f = float(_pick(rng, INTERESTING_FLOATS))
    elif choice == 4:
        attribute.type = int(_pick(rng, list(AttributeProto.AttributeType.values())))  # disagreeing with its value
    else:
        node.attribute.remove(attribute)
        return f"removed attribute {attribute.name} of {node.op_type}"
    return f"attribute {attribute.name} of {node.op_type}"


def mutate_dims(rng, model):
    if rng.random() < 0.5:
        tensor = _pick(rng, _tensors(model))
        if tensor is None:
            return "no tensor"
        if len(tensor.dims) and rng.random() < 0.7:
            tensor.dims[int(rng.integers(len(tensor.dims)))] = int(_pick(rng, [2**40, 2**31, -1, 0, 3, 2**62]))
        else:
            tensor.dims.append(int(_pick(rng, [2**40, 0, 2])))
        return f"dims of tensor {tensor.name}"
    info = _pick(rng, _value_infos(model))
    dims = info.type.tensor_type.shape.dim
    if len(dims):
        dims[int(rng.integers(len(dims)))].dim_value = int(_pick(rng, [2**40, 0, 1, 7, 2**62]))
    else:
        dims.add().dim_value = 2**40
    return f"dims of value {info.name}"


def mutate_dtype(rng, model):
    kinds = list(TensorProto.DataType.values()) + [99]
    if rng.random() < 0.5:
        tensor = _pick(rng, _tensors(model))
        if tensor is None:
            return "no tensor"
        tensor.data_type = int(_pick(rng, kinds))
        return f"dtype of tensor {tensor.name}"
    info = _pick(rng, _value_infos(model))
    info.type.tensor_type.elem_type = int(_pick(rng, kinds))
    return f"dtype of value {info.name}"


def mutate_values(rng, model):
    """Integer initializers (shapes, indices, repeats) get extreme values, keeping their dims."""
    tensors = [tensor for tensor in _tensors(model) if tensor.data_type == INT64 and tensor.data_location == 0]
    tensor = _pick(rng, tensors)
    if tensor is None:
        return "no integer tensor"
    try:
        array = numpy_helper.to_array(tensor).copy()
    except ValueError:  # an earlier mutation changed its dims
        return "unreadable integer tensor"
    if array.size:
        array.reshape(-1)[int(rng.integers(array.size))] = int(_pick(rng, INTERESTING_INTS))
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return f"values of {tensor.name}"


def mutate_node(rng, model):
    node = _pick(rng, _nodes(model))
    choice = int(rng.integers(4))
    if choice == 0:
        node.op_type = _pick(rng, OP_TYPES)
    elif choice == 1:
        node.domain = _pick(rng, DOMAINS)
    elif choice == 2 and len(node.input):
        node.input[int(rng.integers(len(node.input)))] = _pick(rng, ["", "missing", "x", "y"])
    else:
        node.output.append("extra")
    return f"node {node.name or node.op_type}"


def mutate_external(rng, model):
    tensors = [tensor for tensor in _tensors(model)]
    tensor = _pick(rng, tensors)
    if tensor is None:
        return "no tensor"
    if tensor.data_location != TensorProto.EXTERNAL:
        _set_external(tensor, "weights.bin", 0, 16)
    entry = _pick(rng, tensor.external_data)
    values = {
        "location": [
            "../secret.bin",
            "/etc/hostname",
            "missing.bin",
            "sub/../../secret.bin",
            "",
            ".",
            "weights.bin\0x",
            "link.bin",
            "sparse.bin",
        ],
        "offset": ["-1", "99999999999", "1e3", "0", "4", " 8", "18446744073709551617"],
        "length": ["-4", "0", "3", "99999999999", "abc", "16"],
    }
    key = _pick(rng, ["location", "offset", "length"])
    if entry is not None and rng.random() < 0.2:
        entry.key = _pick(rng, ["checksum", "basepath", "locatio"])
        return f"external entry key of {tensor.name}"
    for item in tensor.external_data:
        if item.key == key:
            item.value = _pick(rng, values[key])
            break
    else:
        added = tensor.external_data.add()
        added.key, added.value = key, _pick(rng, values[key])
    return f"external {key} of {tensor.name}"


def mutate_opset(rng, model):
    model.opset_import[0].version = int(rng.integers(1, 26))
    if rng.random() < 0.3:
        model.ir_version = int(_pick(rng, [0, 1, 3, 7, 11, 99]))
    return "opset"


STRUCTURAL = [mutate_attribute, mutate_dims, mutate_dtype, mutate_values, mutate_node, mutate_external, mutate_opset]


# ----------------------------------------------------------------------------- byte-level mutations


def _names(model) -> list[str]:
    names = [node.name for node in _nodes(model) if node.name]
    names += [tensor.name for tensor in _tensors(model) if tensor.name]
    names += [node.op_type for node in _nodes(model)]
    return names


def bad_utf8(rng, model, data: bytes) -> tuple[bytes, str]:
    """A name or op_type gets an invalid UTF-8 byte in place (the lengths stay valid)."""
    name = _pick(rng, _names(model)).encode()
    position = data.find(name)
    if position < 0:
        return data, "no name"
    index = position + int(rng.integers(len(name)))
    return data[:index] + bytes([int(_pick(rng, [0xFF, 0xC3, 0x80, 0xED]))]) + data[index + 1 :], "bad utf-8"


def bytes_level(rng, data: bytes) -> tuple[bytes, str]:
    array = bytearray(data)
    choice = int(rng.integers(5))
    if choice == 0:
        for _ in range(int(rng.integers(1, 8))):
            array[int(rng.integers(len(array)))] = int(rng.integers(256))
        return bytes(array), "byte flips"
    if choice == 1:
        return bytes(array[: int(rng.integers(len(array)))]), "truncated"
    if choice == 2:
        start = int(rng.integers(len(array)))
        return bytes(array[:start] + array[start : start + int(rng.integers(1, 64))] * 2 + array[start:]), "duplicated"
    if choice == 3:
        start = int(rng.integers(len(array)))
        del array[start : start + int(rng.integers(1, 16))]
        return bytes(array), "deleted"
    position = int(rng.integers(len(array)))
    array[position:position] = bytes(rng.integers(0, 256, int(rng.integers(1, 16)), dtype=np.uint8))
    return bytes(array), "inserted"


# ----------------------------------------------------------------------------- cases


def make_case(rng: np.random.Generator, folder: str) -> str:
    """Writes one mutated seed model (and its data files) into ``folder``; returns what was done."""
    seed = _pick(rng, sorted(SEEDS))
    model = SEEDS[seed]()
    done = [seed]
    if seed == "external":
        _externalize(model, folder)
        if rng.random() < 0.3:
            os.symlink("/etc/hostname", os.path.join(folder, "link.bin"))
    kind = rng.random()
    if kind < 0.6:
        for _ in range(int(rng.integers(1, 4))):
            done.append(_pick(rng, STRUCTURAL)(rng, model))
        data = model.SerializeToString()
    elif kind < 0.7:
        data, what = bad_utf8(rng, model, model.SerializeToString())
        done.append(what)
    else:
        data, what = bytes_level(rng, model.SerializeToString())
        done.append(what)
    with open(os.path.join(folder, "model.onnx"), "wb") as handle:
        handle.write(data)
    return ", ".join(done)
