"""Specification of ``onnxnn.import_.from_onnx`` and the GraphModule it returns: round trips of exported
onnxnn modules (outputs, state_dict, module hierarchy, graph), initializer names, and training
(gradients, optimizer steps, composition, hooks, frozen attributes).

Expected values come from the onnxnn modules that were exported, from onnxruntime running the
same ONNX model, and from finite differences. Control flow, opsets, files and errors are in
test_from_onnx_graphs.py; the shared models and checks in from_onnx_cases.py.
"""

from __future__ import annotations


import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import GraphModule, from_onnx
from onnxnn.import_.program import compiled_attributes
from onnxnn.ir.graph import FrozenAttributes

from layer_chains import assert_same_model_output
from tolerances import assert_close_to_matmul

from .from_onnx_cases import FLOAT, ROUND_TRIP_MODELS, exported, exported_state, make_model, run_onnxruntime

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
