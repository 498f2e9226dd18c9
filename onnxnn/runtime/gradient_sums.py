"""The sum of the gradients that reach one value from its several uses, as the backward driver takes it.

A value read by many ops gets one gradient from each, summed in the order they arrive. Where every
one is a matrix product over rows, ``Gemm(a_i, b_i, transA=1)`` (``a_i^T b_i``: the gradient of a
weight that several products read, as a recurrent network's hidden-to-hidden weight is read once
per time step), their sum is one product over all the rows, ``Gemm(Concat(a_i), Concat(b_i),
transA=1)``: one GEMM with as many rows as all of theirs, where the products each wrote a full
weight-sized result, summed by an Add each. An LSTM of hidden size 256 over 16 steps of a batch of
32: sixteen GEMMs of 32 rows and fifteen Adds of a 256 x 1024 matrix, against one GEMM of 512 rows
and the Concats of the rows (a quarter of one such matrix).

Likewise a bias added at every step gets one sum of rows per step, ``ReduceSum(g_i, axes=[0])``:
from four of them on, their sum is ``ReduceSum(Concat(g_i), axes=[0])``, two nodes for two per step
(the same LSTM's training row: 2-3% faster). Its Concat is the one the weight's product takes
(the same rows), which onnxruntime computes once (its common-subexpression elimination).

The product is taken only where the rows copied are fewer than the sums saved read and write (a
weight shared by two products over large batches keeps its Adds); neither is taken while the
backward is recorded for differentiation (``create_graph``: the products' inputs are then tensors
with a history of their own, which this does not follow). The result equals the sum up to float
rounding (one product's or one sum's accumulation order instead of several and their sums').
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import dtypes
from ..ir.graph import static_constant
from . import tensor as _tensor  # circular (tensor imports backward, which imports this): read at call time
from .grad_mode import is_grad_enabled

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["summed"]

# The fewest row sums taken as one: below it the Concat's copy outweighs the nodes it saves.
_LEAST_ROW_SUMS = 4


def summed(gradients: list) -> Tensor:
    """The sum of ``gradients`` (two or more Tensors of one shape), as one product over their rows
    where each is a pending ``Gemm(a, b, transA=1)`` and that pays, as one sum over their rows where
    each is a pending sum of a matrix's rows (see the module doc), else added in order."""
    merged = _one_product(gradients)
    if merged is None:
        merged = _one_row_sum(gradients)
    if merged is not None:
        return merged
    total = gradients[0]
    for gradient in gradients[1:]:
        total = total + gradient
    return total


def _producers(gradients: list, op_type: str, inputs: int) -> list | None:
    """The nodes computing ``gradients``, each a pending default-domain ``op_type`` node of ``inputs``
    inputs, or None (also while the backward is recorded for differentiation)."""
    if is_grad_enabled():
        return None
    nodes = []
    for gradient in gradients:
        value = gradient._value
        node = value.node if value.data is None else None
        if node is None or node.op_type != op_type or node.domain or len(node.inputs) != inputs:
            return None
        nodes.append(node)
    return nodes


def _rows_of(values: list) -> Tensor:
    """``values`` (matrices) concatenated along their rows."""
    tensor = _tensor.Tensor._from_value
    return _tensor.apply_op("Concat", tuple(tensor(value) for value in values), {"axis": 0}, "CatBackward0")


def _one_product(gradients: list) -> Tensor | None:
    nodes = _producers(gradients, "Gemm", 2)
    if nodes is None or any(len(node.attrs) != 1 or node.attrs.get("transA") != 1 for node in nodes):
        return None
    first = nodes[0]
    if any(node.inputs[0].dtype is not first.inputs[0].dtype for node in nodes):
        return None
    inner, outer = first.inputs[0].shape[1], first.inputs[1].shape[1]
    rows = sum(node.inputs[0].shape[0] for node in nodes)
    # The rows copied into the Concats against the Adds' reads and writes of the weight-sized sums.
    if rows * (inner + outer) > 3 * inner * outer * (len(nodes) - 1):
        return None
    left, right = _rows_of([node.inputs[0] for node in nodes]), _rows_of([node.inputs[1] for node in nodes])
    return _tensor.apply_op("Gemm", (left, right), first.attrs, "MmBackward0")


# The key of ReduceSum's axes input for a matrix's rows, the constant ``sum(dim=[0])`` records.
_ROWS = static_constant([0], dtypes.int64).static


def _one_row_sum(gradients: list) -> Tensor | None:
    """``ReduceSum(Concat(g_i), axes=[0])`` for gradients that are each ``ReduceSum(g_i, axes=[0])`` of a
    matrix ``g_i``: a bias added at every step of a recurrence gets one gradient per step."""
    if len(gradients) < _LEAST_ROW_SUMS:
        return None
    nodes = _producers(gradients, "ReduceSum", 2)
    if nodes is None:
        return None
    for node in nodes:
        if node.attrs.get("keepdims", 1) != 0 or node.inputs[1].static != _ROWS or len(node.inputs[0].shape) != 2:
            return None
    rows = [node.inputs[0] for node in nodes]
    if any(row.dtype is not rows[0].dtype for row in rows):
        return None
    return _rows_of(rows).sum(dim=[0], keepdim=False)
