"""Gradients by recomputation: a node's forward recorded again as differentiable ops, then ``grad``.

Some nodes (RNN/LSTM/GRU, RoiAlign, DeformConv) have a vector-Jacobian product that is easiest
to state as "the gradient of the same computation written with ops that have rules". Their rules
record that computation over the node's inputs and return its vector-Jacobian product. With
``create_graph`` the recomputation hangs off the inputs' own history, so second derivatives flow
through it; without, the inputs are fresh leaves and the inner backward frees what it walks.
"""

from __future__ import annotations

from typing import Callable

from ..backward import grad
from ..grad_mode import enable_grad
from ._common import Tensor

__all__ = ["gradient_by_recomputation"]


def gradient_by_recomputation(ctx, forward: Callable, differentiable, grad_outputs: list) -> tuple:
    """The gradients w.r.t. the node's inputs of ``forward(*inputs)``, whose outputs pair with ``grad_outputs``.

    Args:
        ctx: the gradient rule's context.
        forward: records the node's computation from its inputs (Tensors, or None for omitted
            ones) and returns a list of outputs.
        differentiable: the input positions that can get a gradient; the others enter detached.
        grad_outputs: the cotangents of ``forward``'s outputs.

    Returns:
        One gradient or None per node input.
    """
    inputs: list[Tensor | None] = []
    wanted: list[int] = []
    for index in range(ctx.num_inputs):
        value = ctx.input_value(index)
        if value is None:
            inputs.append(None)
        elif index not in differentiable or not ctx.needs_input_grad(index):
            inputs.append(Tensor._from_value(value).detach())
        elif ctx.create_graph:
            inputs.append(ctx.input(index))
            wanted.append(index)
        else:
            inputs.append(ctx.input(index).detach().requires_grad_())
            wanted.append(index)
    result = [None] * ctx.num_inputs
    if not wanted:
        return tuple(result)
    with enable_grad():
        outputs = forward(*inputs)
    found = grad(
        list(outputs),
        [inputs[index] for index in wanted],
        grad_outputs=list(grad_outputs),
        retain_graph=ctx.create_graph,
        create_graph=ctx.create_graph,
        allow_unused=True,
        materialize_grads=True,
    )
    for index, gradient in zip(wanted, found):
        result[index] = gradient
    return tuple(result)
