"""GraphModule state: dtype conversions reach the graph's own constants, and load errors name state_dict keys.

``.double()``, ``.half()`` and ``.to(dtype)`` convert the constants a graph holds in its nodes
(``Constant``, ``ConstantOfShape``'s value) as they convert its parameters, so a converted model
computes in one dtype on every executor (onnxruntime refuses nodes that mix float32 and float64)
and exports to a file onnxruntime loads. Expected values are numpy formulas of the graph.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx

FLOAT = TensorProto.FLOAT


def constants_model() -> onnx.ModelProto:
    """``clip(x * 0.5, 0, 6) + [1, 2, 3] + 0.25 + w``: every float constant form a file holds."""
    nodes = [
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Mul", ["x", "half"], ["scaled"]),
        helper.make_node("Constant", [], ["low"], value=helper.make_tensor("low", FLOAT, [], [0.0])),
        helper.make_node("Constant", [], ["high"], value=helper.make_tensor("high", FLOAT, [], [6.0])),
        helper.make_node("Clip", ["scaled", "low", "high"], ["clipped"]),
        helper.make_node("Constant", [], ["steps"], value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Add", ["clipped", "steps"], ["stepped"]),
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node(
            "ConstantOfShape", ["shape"], ["quarter"], value=helper.make_tensor("value", FLOAT, [1], [0.25])
        ),
        helper.make_node("Add", ["stepped", "quarter"], ["shifted"]),
        helper.make_node("Add", ["shifted", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "constants",
        [helper.make_tensor_value_info("x", FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", FLOAT, ["n", 3])],
        [helper.make_tensor("w", FLOAT, [3], [0.125, -0.5, 2.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def expected(x: np.ndarray) -> np.ndarray:
    return np.clip(x * 0.5, 0.0, 6.0) + np.array([1.0, 2.0, 3.0]) + 0.25 + np.array([0.125, -0.5, 2.0])


# float16 is exported below: onnxnn's onnxruntime executor runs float16 graphs by its own rules.
CONVERSIONS = [
    # name, conversion, the dtype it converts float32 to
    ("double", lambda module: module.double(), onnxnn.float64),
    ("to_float64", lambda module: module.to(onnxnn.float64), onnxnn.float64),
]


@pytest.mark.parametrize("executor", ["onnxruntime"])  # the kernels executor promotes mixed types itself
@pytest.mark.parametrize("name, convert, dtype", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
def test_conversion_reaches_the_graphs_constants(name, convert, dtype, executor):
    module = convert(from_onnx(constants_model()))
    x = np.random.default_rng(0).uniform(-4.0, 16.0, (5, 3))
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        result = module(onnxnn.tensor(x, dtype=dtype))
        computed = result.double().numpy()  # realized by the executor under test
    assert result.dtype is dtype
    reference = expected(np.asarray(x, dtype.numpy_dtype).astype(np.float64))
    # Five roundings of values up to |y| in the target dtype (the constants are exact in each).
    bound = 5 * float(np.finfo(dtype.numpy_dtype).eps) * float(np.abs(reference).max())
    np.testing.assert_allclose(computed, reference, rtol=0, atol=bound)


EXPORTED_CONVERSIONS = [
    ("double", lambda module: module.double(), onnxnn.float64),
    ("half", lambda module: module.half(), onnxnn.float16),
]


@pytest.mark.parametrize("name, convert, dtype", EXPORTED_CONVERSIONS, ids=[c[0] for c in EXPORTED_CONVERSIONS])
def test_converted_model_exports_to_a_file_onnxruntime_runs(name, convert, dtype):
    module = convert(from_onnx(constants_model()))
    x = np.random.default_rng(1).uniform(-4.0, 16.0, (4, 3)).astype(dtype.numpy_dtype)
    proto = to_onnx(module, (onnxnn.tensor(x),), input_names=["x"])
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {"x": x})
    assert result.dtype == dtype.numpy_dtype
    reference = expected(x.astype(np.float64))
    bound = 5 * float(np.finfo(dtype.numpy_dtype).eps) * float(np.abs(reference).max())
    np.testing.assert_allclose(result.astype(np.float64), reference, rtol=0, atol=bound)


def test_float_after_double_restores_float32_constants():
    module = from_onnx(constants_model()).double().float()
    x = np.random.default_rng(2).uniform(-4.0, 16.0, (2, 3)).astype(np.float32)
    with onnxnn.set_executor("onnxruntime"), onnxnn.no_grad():
        result = module(onnxnn.tensor(x))
        computed = result.numpy()
    assert result.dtype is onnxnn.float32
    np.testing.assert_allclose(computed, expected(x.astype(np.float64)), rtol=0, atol=5 * 2.0**-23 * 24)


# ----------------------------------------------------------------------------- load errors


def renamed_initializer_model() -> onnx.ModelProto:
    """``y = x + onnx::Add_1``: an initializer named as torch.onnx.export names folded constants,
    which the module holds as the sanitized attribute ``onnx__Add_1``."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "onnx::Add_1"], ["y"])],
        "renamed",
        [helper.make_tensor_value_info("x", FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", FLOAT, [2, 3])],
        [helper.make_tensor("onnx::Add_1", FLOAT, [3], [1.0, 2.0, 3.0])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


LOAD_ERRORS = [
    # name, the module holding the graph, the key, the bad value, what the message must say
    ("size_mismatch", lambda module: module, "onnx::Add_1", onnxnn.zeros(1, 2), "size mismatch for onnx::Add_1:"),
    (
        "size_mismatch_nested",
        lambda module: nn.Sequential(module),
        "0.onnx::Add_1",
        onnxnn.zeros(2),
        "for 0.onnx::Add_1:",
    ),
    ("not_a_tensor", lambda module: module, "onnx::Add_1", 3, 'parameter named "onnx::Add_1"'),
]


@pytest.mark.parametrize("name, wrap, key, value, message", LOAD_ERRORS, ids=[e[0] for e in LOAD_ERRORS])
def test_load_errors_name_the_state_dict_key(name, wrap, key, value, message):
    module = wrap(from_onnx(renamed_initializer_model()))
    state = module.state_dict()
    assert key in state
    state[key] = value
    with pytest.raises(RuntimeError) as error:
        module.load_state_dict(state)
    assert message in str(error.value)
    assert "onnx__Add_1" not in str(error.value)
