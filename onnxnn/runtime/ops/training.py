"""Optimizer ops of the ``ai.onnx.preview.training`` domain: Momentum (shape rule and decomposition).

An SGD step records one Momentum node per group of parameters instead of six elementwise nodes per
parameter, which keeps a training step's recording and planning short. onnxruntime's inference
builds lack the op, so ``build_model`` writes it as standard ONNX through its decomposition;
onnxnn's kernels executor runs it directly.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ..registry import decompositions, non_differentiable, shape_rules

__all__ = ["TRAINING_DOMAIN"]

TRAINING_DOMAIN = "ai.onnx.preview.training"


@shape_rules.register("Momentum", domain=TRAINING_DOMAIN)
def _momentum_shape(inputs, attrs):
    """Inputs ``R, T, X_1..X_n, G_1..G_n, V_1..V_n``; outputs ``X_1_new..X_n_new, V_1_new..V_n_new``."""
    tensors = inputs[2:]
    if len(tensors) == 0 or len(tensors) % 3:
        raise RuntimeError(f"Momentum takes R, T and then X, G and V for each tensor, got {len(inputs)} inputs")
    if attrs.get("mode", "standard") not in ("standard", "nesterov"):
        raise RuntimeError(f"Momentum: mode must be 'standard' or 'nesterov', got {attrs.get('mode')!r}")
    count = len(tensors) // 3
    for index in range(count):
        x, g, v = tensors[index], tensors[count + index], tensors[2 * count + index]
        if not (x.shape == g.shape == v.shape) or not (x.dtype is g.dtype is v.dtype):
            raise RuntimeError(f"Momentum: tensor {index} has X {x.dtype.name}{list(x.shape)}, "
                               f"G {g.dtype.name}{list(g.shape)} and V {v.dtype.name}{list(v.shape)}; "
                               "they must agree")
    return [(x.shape, x.dtype) for x in tensors[:count]] + [(v.shape, v.dtype) for v in tensors[2 * count:]]


non_differentiable("Momentum", domain=TRAINING_DOMAIN)


@decompositions.register("Momentum", domain=TRAINING_DOMAIN)
def _momentum_decomposition(node, input_names: list, output_names: list, fresh_name):
    """Momentum as Mul/Add/Sub nodes, per tensor, with the hyperparameters as typed initializers."""
    learning_rate, update_count = input_names[0], input_names[1]
    tensors = node.inputs[2:]
    count = len(tensors) // 3
    alpha, beta = node.attrs["alpha"], node.attrs["beta"]
    norm_coefficient = node.attrs["norm_coefficient"]
    nesterov = node.attrs.get("mode", "standard") == "nesterov"
    nodes, initializers = [], []
    constants: dict = {}

    def constant(value, numpy_dtype) -> str:
        key = (value, numpy_dtype)
        if key not in constants:
            name = constants[key] = fresh_name("constant")
            initializers.append(onnx.numpy_helper.from_array(np.array(value, dtype=numpy_dtype), name))
        return constants[key]

    def emit(op_type: str, *inputs: str, output: str | None = None, **attributes) -> str:
        output = output or fresh_name(op_type)
        nodes.append(helper.make_node(op_type, list(inputs), [output], name=fresh_name(op_type), **attributes))
        return output

    later_update = None
    for index in range(count):
        x = tensors[index]
        dtype = x.dtype.numpy_dtype
        x_name, g_name, v_name = (input_names[2 + index], input_names[2 + count + index],
                                  input_names[2 + 2 * count + index])
        gradient = g_name
        if norm_coefficient != 0:
            gradient = emit("Add", emit("Mul", x_name, constant(norm_coefficient, dtype)), g_name)
        scaled = gradient
        if beta != 1:
            # beta applies from the second update on (T > 0): the first one takes the whole gradient.
            if later_update is None:
                later_update = emit("Greater", update_count, constant(0, np.int64))
            beta_adjusted = emit("Where", later_update, constant(beta, dtype), constant(1, dtype))
            scaled = emit("Mul", gradient, beta_adjusted)
        velocity = emit("Add", emit("Mul", v_name, constant(alpha, dtype)), scaled,
                        output=output_names[count + index])
        direction = velocity
        if nesterov:
            direction = emit("Add", gradient, emit("Mul", velocity, constant(alpha, dtype)))
        rate = learning_rate
        if node.inputs[0].dtype is not x.dtype:
            rate = emit("Cast", learning_rate, to=x.dtype.onnx_type)
        emit("Sub", x_name, emit("Mul", rate, direction), output=output_names[index])
    return nodes, initializers
