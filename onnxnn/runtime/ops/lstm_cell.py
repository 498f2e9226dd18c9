"""An LSTM cell's elementwise work as one node: onnxnn's ``FusedLSTMCell`` op and its gradient.

    FusedLSTMCell(input_gates, hidden_gates, C) -> H, C_new, I, F, G, O, T

For gate pre-activations ``input_gates + hidden_gates`` laid out ``[..., 4 * hidden]`` in PyTorch's
order (input, forget, cell, output): ``I, F, O`` the sigmoids of their blocks, ``G`` the tanh of the
cell block, ``C_new = F * C + I * G``, ``T = tanh(C_new)`` and ``H = O * T``. ``I, F, G, O, T`` are
what the gradient reads; nothing else does.

Why a node of its own: a training LSTM runs unrolled (nn/modules/_rnn_fused.py says why), and each
step's cell recorded ten nodes forward and twenty-two backward. Each node costs Python at every
step (its recording or replay, its part of the plan's walk, its objects, which the cycle collector
visits while the step is alive) far beyond its arithmetic: an ``LSTM(128, 256)`` over 32 steps of 16
sequences spent more in that Python than PyTorch's whole step spends on its cells.

The decomposition writes the same arithmetic, operation for operation, as the ops the node
replaces, so results are equal to the last bit: sigmoid in onnxnn's exact form
(runtime/ops/activation_accuracy.py) over all four blocks at once (one Exp over the cell block
more, four nodes fewer), ``(g * s) * (1 - s)`` and ``g * (1 - t * t)`` as the Sigmoid and Tanh rules
write their gradients. onnxnn's kernels compute it with the same kernels as those ops
(kernels/lstm_cell.py).

A backward not itself differentiated records the gradient as one node too,

    FusedLSTMCellGradient(dH, dC_new, C, I, F, G, O, T) -> dGates, dC

``dC_new`` optional (the last step's cell state, when nothing reads it). A backward recorded for a
further derivative (``create_graph=True``), or one where gradients reach ``I, F, G, O, T`` or miss
``H``, records the formulas as ops, which autograd differentiates.
"""

from __future__ import annotations

import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.domains import ONNXNN_DOMAIN
from ...ir.mode import MODE
from ...ir.registry import decompositions, gradient_rules, shape_rules, unmaterialized_gradients
from ..grad_mode import is_grad_enabled
from ..tensor import Tensor, apply_op
from .shape import cat
from .training import node_emitter

__all__ = ["fused_lstm_cell", "fuses_lstm_cell"]

OP_TYPE = "FusedLSTMCell"
GRADIENT_OP_TYPE = "FusedLSTMCellGradient"
_GATES = 4
# float16 and bfloat16 cells keep their ops, whose rules compute in float32 where PyTorch's do.
_FUSED_DTYPES = frozenset({dtypes.float32, dtypes.float64})


def fuses_lstm_cell(input_gates: Tensor, hidden_gates: Tensor, c: Tensor) -> bool:
    """Whether ``fused_lstm_cell`` takes these operands: one float32 or float64 dtype, ``[batch, 4 *
    hidden]`` gates beside a ``[batch, hidden]`` state, outside autocast (which casts per op)."""
    dtype = c.dtype
    return (
        MODE.autocast is None
        and dtype in _FUSED_DTYPES
        and input_gates.dtype is dtype
        and hidden_gates.dtype is dtype
        and input_gates.shape == hidden_gates.shape
        and c.dim() == 2
        and tuple(input_gates.shape) == (c.shape[0], _GATES * c.shape[1])
    )


def fused_lstm_cell(input_gates: Tensor, hidden_gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """One LSTM step from its gate products: the new ``(h, c)`` (see the module doc).

    Args:
        input_gates: ``x W_ih^T + b_ih``, ``[batch, 4 * hidden]``.
        hidden_gates: ``h W_hh^T + b_hh``, of the same shape.
        c: the cell state, ``[batch, hidden]``.
    """
    outputs = apply_op(OP_TYPE, (input_gates, hidden_gates, c), None, "MulBackward0", domain=ONNXNN_DOMAIN)
    return outputs[0], outputs[1]


def _check(op_type: str, named_values, shape: tuple, dtype) -> None:
    for name, value in named_values:
        if value is not None and (tuple(value.shape) != shape or value.dtype is not dtype):
            raise RuntimeError(
                f"{op_type}: {name} must be {dtype.name} of shape {list(shape)}, "
                f"got {value.dtype.name} of shape {list(value.shape)}"
            )


def _gate_shape(op_type: str, state) -> tuple:
    if len(state.shape) != 2 or not state.dtype.is_floating_point:
        raise RuntimeError(
            f"{op_type}: the cell state must be a floating [batch, hidden] tensor, "
            f"got {state.dtype.name} of shape {list(state.shape)}"
        )
    return (state.shape[0], _GATES * state.shape[1])


@shape_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _shape(inputs, attrs):
    if len(inputs) != 3:
        raise RuntimeError(f"{OP_TYPE} takes 3 inputs (input_gates, hidden_gates, C), got {len(inputs)}")
    input_gates, hidden_gates, c = inputs
    _check(OP_TYPE, (("input_gates", input_gates), ("hidden_gates", hidden_gates)), _gate_shape(OP_TYPE, c), c.dtype)
    return [(c.shape, c.dtype)] * 7


@shape_rules.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_shape(inputs, attrs):
    if len(inputs) != 8:
        raise RuntimeError(f"{GRADIENT_OP_TYPE} takes 8 inputs (dH, dC_new, C, I, F, G, O, T), got {len(inputs)}")
    c = inputs[2]
    gate_shape = _gate_shape(GRADIENT_OP_TYPE, c)
    names = ("dH", "dC_new", "C", "I", "F", "G", "O", "T")
    _check(GRADIENT_OP_TYPE, zip(names, inputs), tuple(c.shape), c.dtype)
    if inputs[0] is None:
        raise RuntimeError(f"{GRADIENT_OP_TYPE}: dH is required")
    return [(gate_shape, c.dtype), (c.shape, c.dtype)]


def _one(initializers: list, fresh_name, dtype) -> str:
    name = fresh_name("one")
    initializers.append(numpy_helper.from_array(np.array(1, dtype.numpy_dtype), name))
    return name


@decompositions.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    input_gates, hidden_gates, c = input_names
    h, c_new, i, f, g, o, t = output_names
    initializers: list = []
    one = _one(initializers, fresh_name, node.inputs[2].dtype)
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    gates = emit("Add", input_gates, hidden_gates)
    # activation_accuracy's sigmoid, 1 / (1 + exp(-x)), over every block: the cell block's is unread.
    sigmoids = emit("Reciprocal", emit("Add", emit("Exp", emit("Neg", gates)), one))
    nodes.append(_split(sigmoids, [i, f, fresh_name("unread"), o], fresh_name))
    cell_block = fresh_name("cell_block")
    nodes.append(
        _split(gates, [fresh_name("unread"), fresh_name("unread"), cell_block, fresh_name("unread")], fresh_name)
    )
    emit("Tanh", cell_block, output=g)
    emit("Add", emit("Mul", f, c), emit("Mul", i, g), output=c_new)
    emit("Tanh", c_new, output=t)
    emit("Mul", o, t, output=h)
    return nodes, initializers


def _split(x: str, outputs: list, fresh_name):
    return helper.make_node("Split", [x], outputs, name=fresh_name("Split"), axis=-1, num_outputs=_GATES)


@decompositions.register(GRADIENT_OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient_decomposition(node, input_names: list, output_names: list, fresh_name):
    grad_h, grad_c_new, c, i, f, g, o, t = input_names
    initializers: list = []
    one = _one(initializers, fresh_name, node.inputs[2].dtype)
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)

    def sigmoid_gradient(grad: str, s: str) -> str:
        return emit("Mul", emit("Mul", grad, s), emit("Sub", one, s))

    def tanh_gradient(grad: str, y: str) -> str:
        return emit("Mul", grad, emit("Sub", one, emit("Mul", y, y)))

    grad_c = tanh_gradient(emit("Mul", grad_h, o), t)
    if grad_c_new:
        grad_c = emit("Add", grad_c, grad_c_new)
    emit(
        "Concat",
        sigmoid_gradient(emit("Mul", grad_c, g), i),
        sigmoid_gradient(emit("Mul", grad_c, c), f),
        tanh_gradient(emit("Mul", grad_c, i), g),
        sigmoid_gradient(emit("Mul", grad_h, t), o),
        axis=-1,
        output=output_names[0],
    )
    emit("Mul", grad_c, f, output=output_names[1])
    return nodes, initializers


# I, F, G, O and T take a gradient only where something reads them (a second-order gradient does).
unmaterialized_gradients.mark(OP_TYPE, domain=ONNXNN_DOMAIN)


@gradient_rules.register(OP_TYPE, domain=ONNXNN_DOMAIN)
def _gradient(ctx, grad_h=None, grad_c_new=None, *grad_activations):
    if grad_h is not None and not any(grad is not None for grad in grad_activations) and not is_grad_enabled():
        saved = (ctx.input(2), *(ctx.output(index) for index in range(2, 7)))
        grad_gates, grad_c = apply_op(
            GRADIENT_OP_TYPE, (grad_h, grad_c_new, *saved), None, "MulBackward0", domain=ONNXNN_DOMAIN
        )
        return grad_gates, grad_gates, grad_c if ctx.needs_input_grad(2) else None
    return _gradient_as_ops(ctx, grad_h, grad_c_new, *(grad_activations + (None,) * (5 - len(grad_activations))))


def _plus(total: Tensor | None, term: Tensor) -> Tensor:
    return term if total is None else total + term


def _gradient_as_ops(ctx, grad_h, grad_c_new, grad_i, grad_f, grad_g, grad_o, grad_t):
    """The decomposition's formulas as recorded ops, for any outputs' gradients (the module doc)."""
    i, f, g, o, t = (ctx.output(index) for index in range(2, 7))
    if grad_h is not None:
        grad_t = _plus(grad_t, grad_h * o)
        grad_o = _plus(grad_o, grad_h * t)
    grad_c = grad_c_new
    if grad_t is not None:
        grad_c = _plus(grad_c, grad_t * (1 - t * t))
    grad_previous_c = None
    if grad_c is not None:
        c = ctx.input(2)
        grad_i = _plus(grad_i, grad_c * g)
        grad_f = _plus(grad_f, grad_c * c)
        grad_g = _plus(grad_g, grad_c * i)
        grad_previous_c = grad_c * f if ctx.needs_input_grad(2) else None
    blocks = [
        None if grad_i is None else grad_i * i * (1 - i),
        None if grad_f is None else grad_f * f * (1 - f),
        None if grad_g is None else grad_g * (1 - g * g),
        None if grad_o is None else grad_o * o * (1 - o),
    ]
    if all(block is None for block in blocks):
        return None, None, grad_previous_c
    blocks = [i.new_zeros(i.shape) if block is None else block for block in blocks]
    grad_gates = cat(blocks, -1)
    return grad_gates, grad_gates, grad_previous_c
