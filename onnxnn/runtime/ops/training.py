"""onnxnn's optimizer ops: Momentum (shape rule and decomposition).

An SGD step records one Momentum node per group of parameters instead of six elementwise nodes per
parameter, which keeps a training step's recording and planning short. The op is ONNX's
``ai.onnx.preview.training`` Momentum with its hyperparameters as inputs instead of attributes (so
it lives in onnxnn's own custom-op domain, ``ai.onnxnn``), so a scheduler changing the momentum or
the weight decay feeds new data to the same compiled step:

    Momentum(R, T, alpha, beta?, norm_coefficient?, X_1..X_n, G_1..G_n, V_1..V_n; mode)
        -> X_1_new..X_n_new, V_1_new..V_n_new

An omitted ``beta`` means 1 and an omitted ``norm_coefficient`` means no weight decay (whether they
are given is structure, as PyTorch's ``if weight_decay != 0`` is). onnxruntime lacks the op, so
``build_model`` writes it as standard ONNX through its decomposition; onnxnn's kernels run it
directly.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ...ir.registry import decompositions, non_differentiable, shape_rules
from ...ir.domains import MOMENTUM_TENSORS_START, TRAINING_DOMAIN

__all__ = ["TRAINING_DOMAIN", "MOMENTUM_TENSORS_START"]



@shape_rules.register("Momentum", domain=TRAINING_DOMAIN)
def _momentum_shape(inputs, attrs):
    tensors = inputs[MOMENTUM_TENSORS_START:]
    if len(tensors) == 0 or len(tensors) % 3:
        raise RuntimeError(f"Momentum takes R, T, alpha, beta, norm_coefficient and then X, G and V for each "
                           f"tensor, got {len(inputs)} inputs")
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


non_differentiable.mark("Momentum", domain=TRAINING_DOMAIN)


@decompositions.register("Momentum", domain=TRAINING_DOMAIN)
def _momentum_decomposition(node, input_names: list, output_names: list, fresh_name):
    """Momentum as Mul/Add/Sub nodes per tensor; hyperparameters are cast once per tensor dtype."""
    learning_rate, update_count, alpha, beta, norm_coefficient = input_names[:MOMENTUM_TENSORS_START]
    hyperparameter_dtype = node.inputs[0].dtype
    tensors = node.inputs[MOMENTUM_TENSORS_START:]
    names = input_names[MOMENTUM_TENSORS_START:]
    count = len(tensors) // 3
    nesterov = node.attrs.get("mode", "standard") == "nesterov"
    nodes, initializers = [], []
    as_dtype: dict = {}

    def emit(op_type: str, *inputs: str, output: str | None = None, **attributes) -> str:
        output = output or fresh_name(op_type)
        nodes.append(helper.make_node(op_type, list(inputs), [output], name=fresh_name(op_type), **attributes))
        return output

    def typed(name: str, dtype) -> str:
        """A hyperparameter in the tensors' dtype (Cast once, where it differs)."""
        if dtype is hyperparameter_dtype:
            return name
        if (name, dtype) not in as_dtype:
            as_dtype[(name, dtype)] = emit("Cast", name, to=dtype.onnx_type)
        return as_dtype[(name, dtype)]

    beta_adjusted = None
    if beta:
        # beta applies from the second update on (T > 0): the first one takes the whole gradient.
        one = fresh_name("one")
        initializers.append(onnx.numpy_helper.from_array(np.array(1, hyperparameter_dtype.numpy_dtype), one))
        zero = fresh_name("zero")
        initializers.append(onnx.numpy_helper.from_array(np.array(0, np.int64), zero))
        beta_adjusted = emit("Where", emit("Greater", update_count, zero), beta, one)
    for index in range(count):
        dtype = tensors[index].dtype
        x_name, g_name, v_name = names[index], names[count + index], names[2 * count + index]
        gradient = g_name
        if norm_coefficient:
            gradient = emit("Add", emit("Mul", x_name, typed(norm_coefficient, dtype)), g_name)
        scaled = gradient if beta_adjusted is None else emit("Mul", gradient, typed(beta_adjusted, dtype))
        momentum = typed(alpha, dtype)
        velocity = emit("Add", emit("Mul", v_name, momentum), scaled, output=output_names[count + index])
        direction = velocity
        if nesterov:
            direction = emit("Add", gradient, emit("Mul", velocity, momentum))
        emit("Sub", x_name, emit("Mul", typed(learning_rate, dtype), direction), output=output_names[index])
    return nodes, initializers
