"""The runtime's internal API: what the layers above it (nn, optim, export, import_) may use of a Tensor's insides.

A user never needs these; upper layers do: the recorded ``Value`` behind a Tensor, a Tensor around
a Value, rebinding a Tensor to a new value, recording a node on Values without autograd. These
functions are the one way they do it, so Tensor's private attributes and the runtime's liveness and
depth bookkeeping stay in the runtime (DESIGN principle 10).

Example::

    >>> from onnxnn.runtime import internal
    >>> value = internal.value_of(param)
    >>> (new_value,) = internal.record_op("Sub", (value, internal.value_of(step)))
    >>> internal.rebind(param, new_value)   # param now holds the pending update
"""
from __future__ import annotations

from typing import Sequence

from ..ir.graph import Value
from ..ir.mode import MODE
from .autograd import Function
from .depth import MAX_PENDING_DEPTH, bound_depth
from .realization import realize
from .recording import record
from .tensor import Tensor

__all__ = ["value_of", "tensor_of", "rebind", "record_op", "grad_function", "requires_grad_flag"]


def value_of(tensor: Tensor) -> Value:
    """The recorded :class:`~onnxnn.ir.graph.Value` a tensor currently holds (pending or computed)."""
    return tensor._value


def tensor_of(value: Value, grad_fn: Function | None = None, output_nr: int = 0,
              requires_grad: bool = False) -> Tensor:
    """A new Tensor handle on ``value``.

    Args:
        value: the recorded value the tensor holds.
        grad_fn: the autograd function that produced it (its ``output_nr``-th output), if any.
        output_nr: which output of ``grad_fn`` the tensor is.
        requires_grad: whether a leaf (no ``grad_fn``) requires gradient; implied by ``grad_fn``.
    """
    return Tensor._from_value(value, grad_fn, output_nr, requires_grad)


def rebind(tensor: Tensor, value: Value) -> None:
    """Replaces the value ``tensor`` holds, without autograd checks, and bumps its version.

    For writes autograd must not refuse (gradient accumulation, optimizer updates, restoring a
    state): the tensor keeps its ``grad_fn`` and flags, and becomes the handle that keeps a pending
    ``value`` needed.
    """
    tensor._rebind(value)


def record_op(op_type: str, inputs: Sequence[Value | None], attrs: dict | None = None, domain: str = "",
              num_outputs: int | None = None) -> tuple[Value, ...]:
    """Records one ONNX node on Values, without autograd, and returns its output Values.

    The node is recorded as :func:`~onnxnn.runtime.tensor.apply_op` records one (computed at once
    in eager mode, a history deeper than ``MAX_PENDING_DEPTH`` realized), but no Tensor or
    ``grad_fn`` is made.

    Raises:
        NotImplementedError: no shape rule is registered for the op.
        RuntimeError: the inputs live on different devices, or the shape rule rejects them.
    """
    outputs = record(op_type, tuple(inputs), attrs, domain, num_outputs)
    first = outputs[0]
    if first.data is not None:  # an op without a shape rule, computed on the spot
        return outputs
    if MODE.eager:
        realize(outputs)
    elif first.node.depth > MAX_PENDING_DEPTH:
        bound_depth(first.node, outputs)
    return outputs


def grad_function(tensor: Tensor) -> Function | None:
    """The autograd function that produced ``tensor`` (its ``grad_fn``), None for a leaf."""
    return tensor._grad_fn


def requires_grad_flag(tensor: Tensor) -> bool:
    """Whether ``tensor`` requires gradient (the flag itself: no leaf or dtype checks)."""
    return tensor._requires_grad
