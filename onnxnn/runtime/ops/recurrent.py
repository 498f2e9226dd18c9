"""Gradient rules of ONNX RNN, LSTM and GRU: backward through time of the unrolled recurrence.

The rule records the node's forward again, unrolled step by step with standard ops (MatMul, Add,
Mul, Sigmoid, Tanh, Slice, Concat, Where: onnxnn/runtime/recurrence.py, the same code the kernels
run), on the node's inputs, and returns that graph's vector-Jacobian product (``autograd.grad``).
Sequence lengths are static (the recorded input shape); ``sequence_lens`` is data and enters only
through masks. The outputs' shapes come from ONNX shape inference, so no shape rule is needed.

``unrolled_recurrence`` records a node's forward the same way, for nodes onnxruntime cannot run
(float64: its recurrent kernels are float32 only).

With ``create_graph`` the recomputation hangs off the inputs' own history, so second derivatives
flow through it like through any other recorded op.

A float64 node (``nn.LSTM(...).double()`` traced by ``to_onnx``; the kernels executor runs it in
double) is written as the float32 node between Casts (``_float64_decomposition``): onnxruntime's CPU
recurrent kernels take float32 only (1.31), and the graph keeps float64 inputs and outputs and a
sequence length free to change, at float32's precision inside the recurrence.
"""

from __future__ import annotations

from onnx import TensorProto, helper

from ...ir import dtypes
from ...ir.recurrence import unroll
from ...ir.registry import decompositions, gradient_rules, value_blind_decompositions
from ._common import apply_op, expanded_zeros
from .elementwise import where
from .recomputation import gradient_by_recomputation
from .shape import stack
from .splitting import split, unbind
from .training import node_emitter

__all__ = ["unrolled_recurrence"]

_SEQUENCE_LENS = 4


class _TensorBackend:
    """The recurrence's array operations as recorded ops (each with its own gradient rule)."""

    def activation(self, x, name, alpha, beta):
        if name in ("Tanh", "Sigmoid", "Relu", "Softsign", "Softplus"):
            return apply_op(name, (x,))
        if name == "Affine":
            return x * alpha + beta
        if name == "ScaledTanh":
            return (x * beta).tanh() * alpha
        if name in ("LeakyRelu", "ThresholdedRelu", "Elu"):
            return apply_op(name, (x,), {"alpha": alpha})
        if name == "HardSigmoid":
            return apply_op(name, (x,), {"alpha": alpha, "beta": beta})
        raise ValueError(f"unsupported activation '{name}'")

    def clip(self, x, bound):
        return x.clamp(-bound, bound)

    def stack(self, tensors, axis):
        return stack(tensors, axis)

    def unstack(self, x):
        return unbind(x, 0)

    def split(self, x, parts, axis):
        return split(x, [x.shape[axis] // parts] * parts, axis)  # sizes: a zero hidden size keeps its parts

    def transpose(self, x, perm):
        return x.permute(*perm)

    def mask(self, lengths, t):
        return (lengths > t).reshape(-1, 1)

    def where(self, mask, a, b):
        return where(mask, a, b)

    def zeros_like(self, x):
        return expanded_zeros(x.shape, x.dtype, x.device)

    def zeros(self, shape, like):
        return expanded_zeros(shape, like.dtype, like.device)


def unrolled_recurrence(op_type: str, inputs: list, attrs: dict, num_outputs: int) -> list:
    """An ONNX ``RNN``/``GRU``/``LSTM`` node's first ``num_outputs`` outputs (Y, Y_h, Y_c), recorded
    as its unrolled steps of standard ops (``inputs``: the node's, None for omitted ones)."""
    return unroll(_TensorBackend(), op_type, list(inputs), attrs, num_outputs)


def _recurrent_grad(ctx, *grads):
    op_type, attrs = ctx.node.op_type, dict(ctx.attrs)
    differentiable = [index for index in range(ctx.num_inputs) if index != _SEQUENCE_LENS]
    return gradient_by_recomputation(
        ctx, lambda *inputs: unroll(_TensorBackend(), op_type, list(inputs), attrs, len(grads)), differentiable, grads
    )


gradient_rules.register("RNN", "GRU", "LSTM")(_recurrent_grad)


@decompositions.register("RNN", "GRU", "LSTM")
def _float64_decomposition(node, input_names: list, output_names: list, fresh_name):
    """A float64 node as the float32 node between Casts (the module docstring); others as recorded."""
    if node.inputs[0].dtype is not dtypes.float64:
        return None
    nodes: list = []
    emit = node_emitter(nodes, fresh_name)
    # Every input but sequence_lens (int32) is of X's type; an omitted one stays omitted ("").
    narrowed = [
        name if not name or position == _SEQUENCE_LENS else emit("Cast", name, to=TensorProto.FLOAT)
        for position, name in enumerate(input_names)
    ]
    float32_outputs = [fresh_name(f"{node.op_type}_float32") if name else "" for name in output_names]
    attributes = {name: value for name, value in node.attrs.items() if not name.startswith("_")}
    nodes.append(helper.make_node(node.op_type, narrowed, float32_outputs, name=fresh_name(node.op_type), **attributes))
    for narrow, name in zip(float32_outputs, output_names):
        if name:
            emit("Cast", narrow, to=TensorProto.DOUBLE, output=name)
    return nodes, []


value_blind_decompositions.mark("RNN", "GRU", "LSTM")
