"""``Solve(A, B) -> X`` with ``A X = B``: onnxnn's op (domain ``ai.onnxnn``) behind ``linalg.solve`` and
``inverse``, so that their gradients are the closed forms

    dB = solve(A^T, G),    dA = -dB X^T    (for the inverse, X = A^-1 and B = I: dA = -A^-T G A^-T)

instead of the reverse pass through an unrolled elimination (O(n) graph depth, where the closed form
is one solve and one product, itself differentiable for higher orders).

onnxnn's kernels run it with LAPACK (``numpy.linalg.solve``); onnxruntime lacks the op, so every
graph built for it or exported writes the node as standard ONNX through the decomposition below:
Gauss-Jordan elimination with partial pivoting on ``[A | B]``, unrolled over n (ArgMax picks the pivot
row, a one-hot permutation matrix swaps it in, one rank-1 update clears the column). Every step
acts on the last two axes only, so the same nodes serve any batch size. A singular A gives inf/NaN
on both executors (PyTorch raises after reading the values; a lazy op cannot).

    Solve(A (..., n, n), B (..., n, k); size = n) -> X (..., n, k)

The ``size`` attribute repeats n so that graphs of different matrix sizes never share one compiled
graph with symbolic sizes (``runtime/fastpath/dynamic_shapes.py``): the decomposition is unrolled
over n.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from ...ir.domains import ONNXNN_DOMAIN
from ...ir.registry import decompositions, gradient_rules, shape_rules
from ._common import Tensor, apply_op
from .linalg import matmul

__all__: list[str] = []


def solve(A: Tensor, B: Tensor, backward_name: str = "LinalgSolveExBackward0") -> Tensor:
    """X with ``A X = B`` for A (..., n, n) and B (..., n, k) of the same batch shape and dtype."""
    return apply_op("Solve", (A, B), {"size": A.shape[-1]}, backward_name, domain=ONNXNN_DOMAIN)


@shape_rules.register("Solve", domain=ONNXNN_DOMAIN)
def _solve_shape(inputs, attrs):
    a, b = inputs[0], inputs[1]
    if len(a.shape) < 2 or a.shape[-1] != a.shape[-2] or a.shape[-1] != attrs.get("size", a.shape[-1]):
        raise RuntimeError(
            f"Solve: A must be batches of square matrices of size {attrs.get('size')}, got shape {list(a.shape)}"
        )
    if len(b.shape) != len(a.shape) or b.shape[:-2] != a.shape[:-2] or b.shape[-2] != a.shape[-1]:
        raise RuntimeError(f"Solve: B of shape {list(b.shape)} does not match A of shape {list(a.shape)}")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"Solve: A and B must have one dtype, got {a.dtype.name} and {b.dtype.name}")
    return [(b.shape, b.dtype)]


@gradient_rules.register("Solve", domain=ONNXNN_DOMAIN)
def _solve_grad(ctx, g):
    grad_b = solve(ctx.input(0).mT, g)
    grad_a = -matmul(grad_b, ctx.output().mT) if ctx.needs_input_grad(0) else None
    return grad_a, grad_b


class _Emitter:
    """Writes ONNX nodes and constant initializers for a decomposition."""

    def __init__(self, fresh_name, value_dtype):
        self.fresh_name = fresh_name
        self.dtype = value_dtype
        self.nodes: list = []
        self.initializers: list = []

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attributes) -> str:
        output = output or self.fresh_name(op_type)
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=self.fresh_name(op_type), **attributes)
        )
        return output

    def constant(self, array, stem: str, numpy_dtype=None) -> str:
        name = self.fresh_name(stem)
        array = np.asarray(array, numpy_dtype or self.dtype.numpy_dtype)
        self.initializers.append(onnx.numpy_helper.from_array(array, name))
        return name


@decompositions.register("Solve", domain=ONNXNN_DOMAIN)
def _solve_decomposition(node, input_names: list, output_names: list, fresh_name):
    """Gauss-Jordan elimination with partial pivoting on ``[A | B]``, as standard ONNX.

    Unrolled over the matrix size, which the node's ``size`` attribute pins (so a structure seen at
    several sizes is several structures, never one graph with symbolic sizes)."""
    n = int(node.attrs.get("size", node.inputs[0].shape[-1]))
    emit = _Emitter(fresh_name, node.inputs[0].dtype)
    identity = np.eye(n)
    rows = emit.constant(np.arange(n), "rows", np.int64)
    last, second_last = emit.constant([-1], "axis", np.int64), emit.constant([-2], "axis", np.int64)
    minus_one = emit.constant(-1.0, "minus_one")
    work = emit.op("Concat", input_names[0], input_names[1], axis=-1)  # (..., n, n + k)
    for j in range(n):
        index = emit.constant(j, "index", np.int64)
        column = emit.op("Gather", work, index, axis=-1)  # (..., n)
        # rows above j are out of the running: -1 is below every magnitude; ArgMax takes the first maximum
        candidates = emit.op(
            "Where", emit.constant(np.arange(n) >= j, "below", bool), emit.op("Abs", column), minus_one
        )
        target = emit.op("ArgMax", candidates, axis=-1, keepdims=1)  # (..., 1)
        one_hot = emit.op("Cast", emit.op("Equal", target, rows), to=emit.dtype.onnx_type)  # (..., n)
        one_hot_column, one_hot_row = emit.op("Unsqueeze", one_hot, last), emit.op("Unsqueeze", one_hot, second_last)
        e_j = identity[j]
        # I - e_j e_j^T - p p^T + e_j p^T + p e_j^T: swaps rows j and p (the identity when p == j)
        swap = emit.op(
            "Add",
            emit.op(
                "Sub",
                emit.constant(identity - np.outer(e_j, e_j), "fixed"),
                emit.op("Mul", one_hot_column, one_hot_row),
            ),
            emit.op(
                "Add",
                emit.op("Mul", emit.constant(e_j[:, None], "e_column"), one_hot_row),
                emit.op("Mul", one_hot_column, emit.constant(e_j[None, :], "e_row")),
            ),
        )
        work = emit.op("MatMul", swap, work)
        pivot_row = emit.op("Gather", work, index, axis=-2)  # (..., n + k)
        pivot = emit.op("Unsqueeze", emit.op("Gather", pivot_row, index, axis=-1), last)  # (..., 1)
        normalized = emit.op("Div", pivot_row, pivot)
        others = emit.op("Mul", emit.op("Gather", work, index, axis=-1), emit.constant(1.0 - e_j, "others"))
        update = emit.op("Mul", emit.op("Unsqueeze", others, last), emit.op("Unsqueeze", normalized, second_last))
        work = emit.op(
            "Where",
            emit.constant((np.arange(n) == j)[:, None], "row_j", bool),
            emit.op("Unsqueeze", normalized, second_last),
            emit.op("Sub", work, update),
        )
    emit.op(
        "Slice",
        work,
        emit.constant([n], "start", np.int64),
        emit.constant([np.iinfo(np.int64).max], "end", np.int64),
        last,
        output=output_names[0],
    )
    return emit.nodes, emit.initializers
