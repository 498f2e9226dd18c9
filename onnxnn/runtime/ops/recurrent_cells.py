"""LSTM and GRU cells' elementwise work as one node each: onnxnn's ``FusedLSTMCell`` and ``FusedGRUCell``.

Both read a step's gate products, ``input_gates = x W_ih^T + b_ih`` and ``hidden_gates = h W_hh^T +
b_hh`` (``[batch, gates * hidden]``, PyTorch's gate order), and the state:

    FusedLSTMCell(input_gates, hidden_gates, C) -> H, C_new, I, F, G, O, T

with gates ``i, f, g, o``: ``I, F, O`` the sigmoids of the summed blocks, ``G`` the tanh of the cell
block, ``C_new = F * C + I * G``, ``T = tanh(C_new)``, ``H = O * T``; and

    FusedGRUCell(input_gates, hidden_gates, H) -> H_new, R, Z, N, HN

with gates ``r, z, n``: ``R, Z`` the sigmoids of the summed blocks, ``HN`` the hidden product's n
block, ``N = tanh(x_n + R * HN)`` and ``H_new = N + Z * (H - N)``. The outputs after the first (two
for the LSTM) are what the gradients read; nothing else does.

Why nodes of their own: a training network's recurrence runs unrolled (nn/modules/_rnn_fused.py
says why), and each step's cell recorded ten or more nodes forward and twenty backward. Each node
costs Python at every step (its recording or replay, its part of the plan's walk, its objects,
which the cycle collector visits while the step is alive) far beyond its arithmetic: an
``LSTM(128, 256)`` over 32 steps of 16 sequences spent more in that Python than PyTorch's whole step
spends on its cells.

The decompositions write the same arithmetic, operation for operation, as the ops a node replaces,
so results are equal to the last bit: sigmoid in onnxnn's exact form (activation_accuracy.py) over
every block at once (a wasted block, but four nodes fewer per sigmoid), ``(g * s) * (1 - s)`` and
``g * (1 - t * t)`` as the Sigmoid and Tanh rules write their gradients, ``a - b`` for Sub's ``a + (-b)``.
onnxnn's kernels compute them with the same kernels as those ops (kernels/recurrent_cells.py).

A backward not itself differentiated records each gradient as one node too,

    FusedLSTMCellGradient(dH, dC_new, C, I, F, G, O, T) -> dGates, dC
    FusedGRUCellGradient(dH_new, H, R, Z, N, HN) -> dInputGates, dHiddenGates, dH

(``dC_new`` optional: the last step's cell state, when nothing reads it; an LSTM's gate gradient is
both products'). A backward recorded for a further derivative (``create_graph=True``), or one where
gradients reach the saved outputs or miss the new hidden state, records the formulas as ops, which
autograd differentiates.
"""

from __future__ import annotations

from onnx import helper

from ...ir import dtypes
from ...ir.domains import ONNXNN_DOMAIN
from ...ir.mode import MODE
from ...ir.registry import decompositions, gradient_rules, shape_rules, unmaterialized_gradients
from ..grad_mode import is_grad_enabled
from ..tensor import Tensor, apply_op
from .activation_accuracy import FormBuilder, exact_sigmoid
from .activations import sigmoid_gradient, tanh_gradient
from .shape import cat

__all__ = ["fused_lstm_cell", "fused_gru_cell", "fuses_cell"]

LSTM_CELL, LSTM_CELL_GRADIENT = "FusedLSTMCell", "FusedLSTMCellGradient"
GRU_CELL, GRU_CELL_GRADIENT = "FusedGRUCell", "FusedGRUCellGradient"
_LSTM_GATES, _GRU_GATES = 4, 3
_GATES = {"LSTM": _LSTM_GATES, "GRU": _GRU_GATES}
# float16 and bfloat16 cells keep their ops, whose rules compute in float32 where PyTorch's do.
_FUSED_DTYPES = frozenset({dtypes.float32, dtypes.float64})


def fuses_cell(mode: str, input_gates: Tensor, hidden_gates: Tensor, state: Tensor) -> bool:
    """Whether ``mode``'s cell (``"LSTM"``: ``fused_lstm_cell``, ``"GRU"``: ``fused_gru_cell``) takes
    these operands: one float32 or float64 dtype, ``[batch, gates * hidden]`` products beside a
    ``[batch, hidden]`` state, outside autocast (which casts per op)."""
    gates = _GATES.get(mode)
    dtype = state.dtype
    return (
        gates is not None
        and MODE.autocast is None
        and dtype in _FUSED_DTYPES
        and input_gates.dtype is dtype
        and hidden_gates.dtype is dtype
        and input_gates.shape == hidden_gates.shape
        and state.dim() == 2
        and input_gates.dim() == 2
        and input_gates.shape[0] == state.shape[0]
        and input_gates.shape[1] == gates * state.shape[1]
    )


def fused_lstm_cell(input_gates: Tensor, hidden_gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """One LSTM step from its gate products (``[batch, 4 * hidden]``) and cell state: the new ``(h, c)``."""
    outputs = apply_op(LSTM_CELL, (input_gates, hidden_gates, c), None, "MulBackward0", domain=ONNXNN_DOMAIN)
    return outputs[0], outputs[1]


def fused_gru_cell(input_gates: Tensor, hidden_gates: Tensor, h: Tensor) -> Tensor:
    """One GRU step from its gate products (``[batch, 3 * hidden]``) and hidden state: the new hidden state."""
    return apply_op(GRU_CELL, (input_gates, hidden_gates, h), None, "AddBackward0", domain=ONNXNN_DOMAIN)[0]


# ---------------------------------------------------------------- shapes


def _check(op_type: str, named_values, shape: tuple, dtype) -> None:
    for name, value in named_values:
        if value is not None and (tuple(value.shape) != shape or value.dtype is not dtype):
            raise RuntimeError(
                f"{op_type}: {name} must be {dtype.name} of shape {list(shape)}, "
                f"got {value.dtype.name} of shape {list(value.shape)}"
            )


def _gate_shape(op_type: str, state, gates: int) -> tuple:
    if len(state.shape) != 2 or not state.dtype.is_floating_point:
        raise RuntimeError(
            f"{op_type}: the state must be a floating [batch, hidden] tensor, "
            f"got {state.dtype.name} of shape {list(state.shape)}"
        )
    return (state.shape[0], gates * state.shape[1])


def _cell_shape(op_type: str, inputs, gates: int, outputs: int) -> list:
    if len(inputs) != 3:
        raise RuntimeError(f"{op_type} takes 3 inputs (input_gates, hidden_gates, state), got {len(inputs)}")
    input_gates, hidden_gates, state = inputs
    gate_shape = _gate_shape(op_type, state, gates)
    _check(op_type, (("input_gates", input_gates), ("hidden_gates", hidden_gates)), gate_shape, state.dtype)
    return [(state.shape, state.dtype)] * outputs


def _gradient_inputs(op_type: str, inputs, names: tuple, state_position: int, gates: int) -> tuple:
    """Checks a gradient node's inputs (each ``names``' entry of the state's shape and dtype, the first
    required); returns its gate shape."""
    if len(inputs) != len(names):
        raise RuntimeError(f"{op_type} takes {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
    state = inputs[state_position]
    gate_shape = _gate_shape(op_type, state, gates)
    _check(op_type, zip(names, inputs), tuple(state.shape), state.dtype)
    if inputs[0] is None:
        raise RuntimeError(f"{op_type}: {names[0]} is required")
    return gate_shape


@shape_rules.register(LSTM_CELL, domain=ONNXNN_DOMAIN)
def _lstm_shape(inputs, attrs):
    return _cell_shape(LSTM_CELL, inputs, _LSTM_GATES, 7)


@shape_rules.register(GRU_CELL, domain=ONNXNN_DOMAIN)
def _gru_shape(inputs, attrs):
    return _cell_shape(GRU_CELL, inputs, _GRU_GATES, 5)


@shape_rules.register(LSTM_CELL_GRADIENT, domain=ONNXNN_DOMAIN)
def _lstm_gradient_shape(inputs, attrs):
    names = ("dH", "dC_new", "C", "I", "F", "G", "O", "T")
    gate_shape = _gradient_inputs(LSTM_CELL_GRADIENT, inputs, names, 2, _LSTM_GATES)
    state = inputs[2]
    return [(gate_shape, state.dtype), (state.shape, state.dtype)]


@shape_rules.register(GRU_CELL_GRADIENT, domain=ONNXNN_DOMAIN)
def _gru_gradient_shape(inputs, attrs):
    names = ("dH_new", "H", "R", "Z", "N", "HN")
    gate_shape = _gradient_inputs(GRU_CELL_GRADIENT, inputs, names, 1, _GRU_GATES)
    state = inputs[1]
    return [(gate_shape, state.dtype), (gate_shape, state.dtype), (state.shape, state.dtype)]


# ---------------------------------------------------------------- decompositions


class _Emitter(FormBuilder):
    """Nodes and constants of one decomposition, with the formulas the replaced ops' rules write."""

    def __init__(self, fresh_name, dtype):
        super().__init__(fresh_name, dtype)
        self.emit = self.op
        self.one = self.constant(1.0)

    def sigmoid(self, x: str) -> str:
        return exact_sigmoid(self, x)

    def split(self, x: str, outputs: list) -> None:
        """``x``'s gate blocks into ``outputs`` (None: a block nothing reads)."""
        names = [name or self.fresh_name("unread") for name in outputs]
        self.nodes.append(
            helper.make_node("Split", [x], names, name=self.fresh_name("Split"), axis=-1, num_outputs=len(names))
        )

    def sigmoid_gradient(self, grad: str, s: str) -> str:
        """``sigmoid_gradient``'s ``(g * s) * (1 - s)``."""
        return self.op("Mul", self.op("Mul", grad, s), self.op("Sub", self.one, s))

    def tanh_gradient(self, grad: str, t: str) -> str:
        """``tanh_gradient``'s ``g * (1 - t * t)``."""
        return self.op("Mul", grad, self.op("Sub", self.one, self.op("Mul", t, t)))

    def result(self) -> tuple:
        return self.nodes, self.constants


@decompositions.register(LSTM_CELL, domain=ONNXNN_DOMAIN)
def _lstm_decomposition(node, input_names: list, output_names: list, fresh_name):
    input_gates, hidden_gates, c = input_names
    h, c_new, i, f, g, o, t = output_names
    build = _Emitter(fresh_name, node.inputs[2].dtype)
    emit = build.emit
    gates = emit("Add", input_gates, hidden_gates)
    build.split(build.sigmoid(gates), [i, f, None, o])
    cell_block = fresh_name("cell_block")
    build.split(gates, [None, None, cell_block, None])
    emit("Tanh", cell_block, output=g)
    emit("Add", emit("Mul", f, c), emit("Mul", i, g), output=c_new)
    emit("Tanh", c_new, output=t)
    emit("Mul", o, t, output=h)
    return build.result()


@decompositions.register(LSTM_CELL_GRADIENT, domain=ONNXNN_DOMAIN)
def _lstm_gradient_decomposition(node, input_names: list, output_names: list, fresh_name):
    grad_h, grad_c_new, c, i, f, g, o, t = input_names
    build = _Emitter(fresh_name, node.inputs[2].dtype)
    emit = build.emit
    grad_c = build.tanh_gradient(emit("Mul", grad_h, o), t)
    if grad_c_new:
        grad_c = emit("Add", grad_c, grad_c_new)
    emit(
        "Concat",
        build.sigmoid_gradient(emit("Mul", grad_c, g), i),
        build.sigmoid_gradient(emit("Mul", grad_c, c), f),
        build.tanh_gradient(emit("Mul", grad_c, i), g),
        build.sigmoid_gradient(emit("Mul", grad_h, t), o),
        axis=-1,
        output=output_names[0],
    )
    emit("Mul", grad_c, f, output=output_names[1])
    return build.result()


@decompositions.register(GRU_CELL, domain=ONNXNN_DOMAIN)
def _gru_decomposition(node, input_names: list, output_names: list, fresh_name):
    input_gates, hidden_gates, h = input_names
    h_new, r, z, n, hidden_n = output_names
    build = _Emitter(fresh_name, node.inputs[2].dtype)
    emit = build.emit
    build.split(build.sigmoid(emit("Add", input_gates, hidden_gates)), [r, z, None])
    input_n = fresh_name("input_n")
    build.split(input_gates, [None, None, input_n])
    build.split(hidden_gates, [None, None, hidden_n])
    emit("Tanh", emit("Add", input_n, emit("Mul", r, hidden_n)), output=n)
    emit("Add", n, emit("Mul", z, emit("Sub", h, n)), output=h_new)
    return build.result()


@decompositions.register(GRU_CELL_GRADIENT, domain=ONNXNN_DOMAIN)
def _gru_gradient_decomposition(node, input_names: list, output_names: list, fresh_name):
    grad_h_new, h, r, z, n, hidden_n = input_names
    build = _Emitter(fresh_name, node.inputs[1].dtype)
    emit = build.emit
    grad_difference = emit("Mul", grad_h_new, z, output=output_names[2])
    grad_n = build.tanh_gradient(emit("Sub", grad_h_new, grad_difference), n)
    grad_r = build.sigmoid_gradient(emit("Mul", grad_n, hidden_n), r)
    grad_z = build.sigmoid_gradient(emit("Mul", grad_h_new, emit("Sub", h, n)), z)
    emit("Concat", grad_r, grad_z, grad_n, axis=-1, output=output_names[0])
    emit("Concat", grad_r, grad_z, emit("Mul", grad_n, r), axis=-1, output=output_names[1])
    return build.result()


# ---------------------------------------------------------------- gradients

# The saved outputs take a gradient only where something reads them (a second-order gradient does).
unmaterialized_gradients.mark(LSTM_CELL, GRU_CELL, domain=ONNXNN_DOMAIN)


def _one_node(grad, grad_saved: tuple) -> bool:
    """Whether a cell's backward is one gradient node: the new state's gradient present, none for the
    saved outputs, and no derivative of it recorded."""
    return grad is not None and all(g is None for g in grad_saved) and not is_grad_enabled()


def _plus(total: Tensor | None, term: Tensor | None) -> Tensor | None:
    if term is None:
        return total
    return term if total is None else total + term


def _gate_gradients(blocks: list, like: Tensor) -> Tensor | None:
    """The blocks' gradients side by side (zeros for an absent one), or None if all are."""
    if all(block is None for block in blocks):
        return None
    return cat([like.new_zeros(like.shape) if block is None else block for block in blocks], -1)


def _sigmoid_gradient(grad: Tensor | None, s: Tensor) -> Tensor | None:
    return None if grad is None else sigmoid_gradient(grad, s)


def _tanh_gradient(grad: Tensor | None, t: Tensor) -> Tensor | None:
    return None if grad is None else tanh_gradient(grad, t)


@gradient_rules.register(LSTM_CELL, domain=ONNXNN_DOMAIN)
def _lstm_gradient(ctx, grad_h=None, grad_c_new=None, *grad_saved):
    if _one_node(grad_h, grad_saved):
        saved = (ctx.input(2), *(ctx.output(index) for index in range(2, 7)))
        grad_gates, grad_c = apply_op(
            LSTM_CELL_GRADIENT, (grad_h, grad_c_new, *saved), None, "MulBackward0", domain=ONNXNN_DOMAIN
        )
        return grad_gates, grad_gates, grad_c if ctx.needs_input_grad(2) else None
    grad_i, grad_f, grad_g, grad_o, grad_t = grad_saved + (None,) * (5 - len(grad_saved))
    i, f, g, o, t = (ctx.output(index) for index in range(2, 7))
    if grad_h is not None:
        grad_t = _plus(grad_t, grad_h * o)
        grad_o = _plus(grad_o, grad_h * t)
    grad_c = _plus(grad_c_new, _tanh_gradient(grad_t, t))
    grad_previous_c = None
    if grad_c is not None:
        grad_i = _plus(grad_i, grad_c * g)
        grad_f = _plus(grad_f, grad_c * ctx.input(2))
        grad_g = _plus(grad_g, grad_c * i)
        grad_previous_c = grad_c * f if ctx.needs_input_grad(2) else None
    blocks = [_sigmoid_gradient(grad_i, i), _sigmoid_gradient(grad_f, f), _tanh_gradient(grad_g, g)]
    grad_gates = _gate_gradients(blocks + [_sigmoid_gradient(grad_o, o)], i)
    return grad_gates, grad_gates, grad_previous_c


@gradient_rules.register(GRU_CELL, domain=ONNXNN_DOMAIN)
def _gru_gradient(ctx, grad_h_new=None, *grad_saved):
    if _one_node(grad_h_new, grad_saved):
        saved = (ctx.input(2), *(ctx.output(index) for index in range(1, 5)))
        grad_input_gates, grad_hidden_gates, grad_h = apply_op(
            GRU_CELL_GRADIENT, (grad_h_new, *saved), None, "AddBackward0", domain=ONNXNN_DOMAIN
        )
        return grad_input_gates, grad_hidden_gates, grad_h if ctx.needs_input_grad(2) else None
    grad_r, grad_z, grad_n, grad_hidden_n = grad_saved + (None,) * (4 - len(grad_saved))
    h = ctx.input(2)
    r, z, n, hidden_n = (ctx.output(index) for index in range(1, 5))
    grad_h = None
    if grad_h_new is not None:
        grad_h = grad_h_new * z
        grad_z = _plus(grad_z, grad_h_new * (h - n))
        grad_n = _plus(grad_n, grad_h_new - grad_h)
    grad_n = _tanh_gradient(grad_n, n)
    if grad_n is not None:
        grad_r = _plus(grad_r, grad_n * hidden_n)
        grad_hidden_n = _plus(grad_hidden_n, grad_n * r)
    grad_r, grad_z = _sigmoid_gradient(grad_r, r), _sigmoid_gradient(grad_z, z)
    grad_input_gates = _gate_gradients([grad_r, grad_z, grad_n], r)
    grad_hidden_gates = _gate_gradients([grad_r, grad_z, grad_hidden_n], r)
    return grad_input_gates, grad_hidden_gates, grad_h if ctx.needs_input_grad(2) else None
