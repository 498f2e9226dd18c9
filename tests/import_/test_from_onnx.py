"""Specification of ``onnxnn.import_.from_onnx`` and the GraphModule it returns.

Expected values come from the onnxnn modules that were exported, from onnxruntime running the
same ONNX model, and from finite differences.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn import ModelLoadError, nn
from onnxnn.export import to_onnx
from onnxnn.import_ import GraphModule, from_onnx
from onnxnn.import_.program import compiled_attributes
from onnxnn.ir.graph import FrozenAttributes

from layer_chains import assert_same_model_output, chain_steps, relu_step
from tolerances import TRANSCENDENTAL_ULPS, assert_close_to_matmul, rtol_for

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


# ----------------------------------------------------------------------------- helpers


def make_model(nodes, inputs, outputs, initializers=(), opset=21, **kwargs) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    opsets = kwargs.pop("opset_imports", [helper.make_opsetid("", opset)])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10, **kwargs)


def run_onnxruntime(model: onnx.ModelProto, *inputs) -> list:
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {info.name: value for info, value in zip(session.get_inputs(), inputs)})


def as_list(outputs) -> list:
    return list(outputs) if isinstance(outputs, tuple) else [outputs]


def assert_matches_onnxruntime(model: onnx.ModelProto, *inputs) -> None:
    """Same values as onnxruntime, bit for bit: the models given here add and multiply small
    integers and halves, which float32 represents exactly at every step, so no order of
    evaluation can round differently."""
    expected = run_onnxruntime(model, *inputs)
    with onnxnn.no_grad():
        actual = as_list(from_onnx(model)(*inputs))
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(6, 6)
        self.inner = nn.Sequential(nn.Linear(6, 3), nn.Tanh())

    def forward(self, x):
        return self.inner(self.linear(x).relu())

    def chain_steps(self, shape):
        return chain_steps(self.linear) + [relu_step()] + chain_steps(self.inner)


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 6), nn.Sigmoid())
        self.head = Block()

    def forward(self, x):
        return self.head(self.encoder(x)) * 0.5

    def chain_steps(self, shape):
        return chain_steps(self.encoder) + chain_steps(self.head) + [("apply", lambda v: v * 0.5, 0)]


class Clamped(nn.Module):
    """Its export holds a constant of onnxnn's own writing (a clamp's infinite upper bound), which is
    part of the graph, not state a fine-tuning step may move."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        return self.linear(x).clamp(min=0)

    def chain_steps(self, shape):
        return chain_steps(self.linear) + [relu_step()]


def batchnorm_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    model(onnxnn.randn(8, 4))  # one training step gives the running statistics non-default values
    return model.eval()


ROUND_TRIP_MODELS = {
    "mlp": lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)),
    "batchnorm_eval": batchnorm_model,
    "nested": Nested,
    "clamped": Clamped,
}


def exported(name: str):
    model = ROUND_TRIP_MODELS[name]().eval()
    x = onnxnn.randn(3, 4)
    return model, x, to_onnx(model, x)


def exported_state(model: nn.Module) -> dict:
    # The exporter writes the state the graph uses: BatchNorm's num_batches_tracked is not.
    return {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_MODELS))
def test_round_trip_gives_the_same_outputs(name):
    model, x, proto = exported(name)
    imported = from_onnx(proto)
    assert isinstance(imported, GraphModule) and isinstance(imported, nn.Module)
    with onnxnn.no_grad():
        assert_same_model_output(imported(x), model, x)


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_MODELS))
def test_round_trip_keeps_state_dict_keys_order_and_values(name):
    model, _, proto = exported(name)
    imported = from_onnx(proto)
    expected = exported_state(model)
    state = imported.state_dict()
    assert list(state) == list(expected)
    # onnxnn's anonymous constants (the 0.5 of Nested.forward) are part of the graph, not state.
    named = [t.name for t in proto.graph.initializer if not t.name.startswith("onnxnn::constant_")]
    assert named == list(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(state[key].numpy(), value.numpy())
    # The original's parameters come back as Parameters and its buffers as buffers: a file does not
    # say which tensors were buffers, but a BatchNormalization's mean and variance are statistics.
    assert [key for key, _ in imported.named_parameters()] == [key for key, _ in model.named_parameters()]
    assert [key for key, _ in imported.named_buffers()] == [
        key for key in expected if key in dict(model.named_buffers())
    ]


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_MODELS))
def test_round_trip_rebuilds_the_module_hierarchy(name):
    model, _, proto = exported(name)
    imported = from_onnx(proto)
    owners = {""}
    for key in exported_state(model):
        parts = key.split(".")[:-1]
        owners.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    expected = [path for path, _ in model.named_modules() if path in owners]
    assert [path for path, _ in imported.named_modules()] == expected


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_MODELS))
def test_round_trip_exports_the_same_graph_again(name):
    model, x, proto = exported(name)
    again = to_onnx(from_onnx(proto).eval(), x)
    assert [node.op_type for node in again.graph.node] == [node.op_type for node in proto.graph.node]
    assert [t.name for t in again.graph.initializer] == [t.name for t in proto.graph.initializer]
    for first, second in zip(proto.graph.initializer, again.graph.initializer):
        np.testing.assert_array_equal(numpy_helper.to_array(first), numpy_helper.to_array(second))


def test_round_trip_loads_the_original_state_dict():
    model, x, proto = exported("nested")
    imported = from_onnx(proto)
    for parameter in imported.parameters():
        with onnxnn.no_grad():
            parameter.zero_()
    imported.load_state_dict(exported_state(model))
    with onnxnn.no_grad():
        assert_same_model_output(imported(x), model, x)


def test_parameters_are_trainable_and_other_initializers_are_buffers():
    weight = numpy_helper.from_array(np.ones((2, 2), np.float32), "weight")
    shape = numpy_helper.from_array(np.array([4], np.int64), "shape")
    proto = make_model(
        [helper.make_node("MatMul", ["x", "weight"], ["h"]), helper.make_node("Reshape", ["h", "shape"], ["y"])],
        [helper.make_tensor_value_info("x", FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", FLOAT, [4])],
        [weight, shape],
    )
    imported = from_onnx(proto)
    assert [name for name, p in imported.named_parameters() if p.requires_grad] == ["weight"]
    assert [name for name, _ in imported.named_buffers()] == ["shape"]
    assert imported.shape.dtype == onnxnn.int64


def test_batch_norm_statistics_are_buffers_unless_something_else_reads_them():
    # Read only as BatchNormalization's mean and variance: buffers (an optimizer never moves them, and
    # an update could turn a variance negative). Read by another node as well: a Parameter still.
    def array(name, value):
        return numpy_helper.from_array(np.full((2,), value, np.float32), name)

    nodes = [
        helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["normalized"]),
        helper.make_node("BatchNormalization", ["normalized", "scale", "bias", "shared", "var"], ["twice"]),
        helper.make_node("Mul", ["twice", "shared"], ["y"]),
    ]
    proto = make_model(
        nodes,
        [helper.make_tensor_value_info("x", FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", FLOAT, [3, 2])],
        [array("scale", 1.0), array("bias", 0.0), array("mean", 0.5), array("var", 2.0), array("shared", 0.25)],
    )
    imported = from_onnx(proto)
    assert [name for name, _ in imported.named_parameters()] == ["scale", "bias", "shared"]
    assert [name for name, _ in imported.named_buffers()] == ["mean", "var"]
    assert list(imported.state_dict()) == ["scale", "bias", "shared", "mean", "var"]
    optimizer = onnxnn.optim.SGD(imported.parameters(), lr=0.1)
    imported(onnxnn.randn(3, 2)).sum().backward()
    optimizer.step()
    np.testing.assert_array_equal(imported.var.numpy(), [2.0, 2.0])
    assert not np.array_equal(imported.shared.detach().numpy(), [0.25, 0.25])


# ----------------------------------------------------------------------------- names

ODD_NAMES = [
    "layer1.0.conv1.weight",
    "layer1.0.conv1.bias",
    "onnx::Add_12",
    "block",
    "block.scale",
    "x..y",
    "training",
    "forward.weight",
]


def odd_names_model() -> onnx.ModelProto:
    initializers = [
        numpy_helper.from_array(np.full((2,), index + 1, np.float32), name) for index, name in enumerate(ODD_NAMES)
    ]
    node = helper.make_node("Sum", ["x"] + ODD_NAMES, ["y"])
    return make_model(
        [node],
        [helper.make_tensor_value_info("x", FLOAT, [2])],
        [helper.make_tensor_value_info("y", FLOAT, [2])],
        initializers,
    )


def test_state_dict_keys_are_the_initializer_names_whatever_they_are():
    imported = from_onnx(odd_names_model())
    assert sorted(imported.state_dict()) == sorted(ODD_NAMES)
    # Dotted names that can be attribute paths become submodules; the others stay on the root.
    assert [path for path, _ in imported.named_modules()] == ["", "layer1", "layer1.0", "layer1.0.conv1", "block"]
    assert imported.get_parameter("layer1.0.conv1.weight").shape == (2,)
    assert imported.get_parameter("block.scale").shape == (2,)
    with onnxnn.no_grad():
        np.testing.assert_allclose(imported(np.zeros(2, np.float32)).numpy(), [36.0, 36.0])


@pytest.mark.parametrize("prefix", ["", "0."])
def test_odd_names_load_back_from_their_own_state_dict(prefix):
    imported = from_onnx(odd_names_model())
    container = nn.Sequential(imported) if prefix else imported
    state = {key: onnxnn.full((2,), 2.0) for key in container.state_dict()}
    assert sorted(state) == sorted(prefix + name for name in ODD_NAMES)
    result = container.load_state_dict(state)
    assert not result.missing_keys and not result.unexpected_keys
    with onnxnn.no_grad():
        np.testing.assert_allclose(imported(np.zeros(2, np.float32)).numpy(), [16.0, 16.0])
    with pytest.raises(
        RuntimeError, match=r'Missing key\(s\) in state_dict: "' + prefix.replace(".", r"\.") + 'onnx::Add_12"'
    ):
        container.load_state_dict({k: v for k, v in state.items() if k != prefix + "onnx::Add_12"})


# ----------------------------------------------------------------------------- training


def test_backward_fills_gradients_matching_finite_differences():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double().eval()
    x = onnxnn.randn(5, 3, dtype=onnxnn.float64)
    imported = from_onnx(to_onnx(model, x))
    target = onnxnn.randn(5, 2, dtype=onnxnn.float64)

    def loss_of(module):
        return ((module(x) - target) ** 2).mean()

    loss_of(imported).backward()
    state = {key: np.array(value.numpy()) for key, value in imported.state_dict().items()}
    for name, parameter in imported.named_parameters():
        assert parameter.grad is not None and parameter.grad.shape == parameter.shape, name
    eps = 1e-6
    for name, index in [("0.weight", (1, 2)), ("0.bias", (3,)), ("2.weight", (0, 1)), ("2.bias", (1,))]:
        values = []
        for sign in (1, -1):
            shifted = {key: value.copy() for key, value in state.items()}
            shifted[name][index] += sign * eps
            imported.load_state_dict({key: onnxnn.tensor(value) for key, value in shifted.items()})
            with onnxnn.no_grad():
                values.append(loss_of(imported).item())
        numeric = (values[0] - values[1]) / (2 * eps)
        analytic = imported.get_parameter(name).grad.numpy()[index]
        # float64 central differences at eps=1e-6: truncation eps**2 * (third derivative) / 6 ~ 1e-12
        # and rounding u * |loss| / eps ~ 1e-10 relative, far inside 1e-5; a wrong rule is off by O(1).
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8, err_msg=name)


def test_an_sgd_step_reduces_the_loss():
    model, x, proto = exported("nested")
    imported = from_onnx(proto)
    target = onnxnn.randn(3, 3)
    optimizer = onnxnn.optim.SGD(imported.parameters(), lr=0.5)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = ((imported(x) - target) ** 2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[2] < losses[1] < losses[0]


def test_an_imported_model_composes_with_other_modules():
    _, x, proto = exported("mlp")
    combined = nn.Sequential(from_onnx(proto), nn.Linear(2, 1))
    assert list(combined.state_dict())[:2] == ["0.0.weight", "0.0.bias"]
    combined(x).sum().backward()
    assert all(p.grad is not None for p in combined.parameters())


def test_hooks_on_an_imported_model_fire():
    _, x, proto = exported("mlp")
    imported = from_onnx(proto)
    calls = []
    imported.register_forward_pre_hook(lambda module, args: calls.append("pre") or (args[0] * 0,))
    imported.register_forward_hook(lambda module, args, output: calls.append(("forward", tuple(output.shape))))
    imported.register_full_backward_hook(lambda module, grad_in, grad_out: calls.append("backward"))
    x = x.detach().requires_grad_()
    output = imported(x)
    output.sum().backward()
    assert calls == ["pre", ("forward", (3, 2)), "backward"]
    bias = imported.get_parameter("2.bias").detach().numpy()
    with onnxnn.no_grad():
        zeros_out = imported.get_parameter("0.bias").detach().relu() @ imported.get_parameter("2.weight").detach().t()
    first_bias = np.maximum(imported.get_parameter("0.bias").detach().numpy(), 0)
    second_weight = imported.get_parameter("2.weight").detach().numpy()
    assert_close_to_matmul(
        output.detach().numpy(), np.broadcast_to(first_bias, (3, first_bias.size)), second_weight.T, bias
    )
    assert_close_to_matmul(zeros_out.numpy() + bias, first_bias, second_weight.T, bias)


def test_replays_record_one_frozen_attribute_set_per_node():
    """Each replay of an imported node records the attributes compiled once at import, so node
    signatures and shape rules' per-shape results are not rebuilt per call."""
    weight = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
    model = make_model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 3, 1]),
        ],
        [helper.make_tensor_value_info("x", FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", FLOAT, [1, 4, 4, 2])],
        [weight],
    )
    imported = from_onnx(model)
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    with onnxnn.no_grad():
        first, second = imported(x), imported(x)
    conv_first, conv_second = (output._value.node.inputs[0].node for output in (first, second))
    assert type(conv_first.attrs) is FrozenAttributes
    assert conv_first.attrs is conv_second.attrs
    assert first._value.node.attrs is second._value.node.attrs
    np.testing.assert_array_equal(second.numpy(), run_onnxruntime(model, x)[0])


def test_attributes_without_a_hashable_form_are_kept_as_given():
    attrs = {"values": {1, 2}}  # no attribute reads as a set; a future one must not break the import
    assert compiled_attributes(attrs) is attrs


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
