"""Where a backward's gradients end up: tensor and node hooks, and the ``.grad`` of the tensors
that keep one (leaves, and non-leaves that retain it).

The engine (``runtime/backward.py``) calls these as gradients reach a leaf's ``AccumulateGrad``
or an output of a node with tensor hooks or a retained gradient. Hooks may replace the gradient;
what they return is checked as PyTorch checks it.

Backwards in several threads may reach the same leaf (threads training one shared model): each
adds to its ``.grad`` under ``GRADIENT_LOCK``, as PyTorch's ``AccumulateGrad`` does under its mutex,
so every contribution is kept; only the order of the additions varies.
"""

from __future__ import annotations

import threading

from ..ir.graph import hold
from . import tensor as _tensor  # circular (tensor imports backward, which imports this): read at call time
from .autograd import AccumulateGrad, Function, sum_to_shape
from .grad_mode import no_grad

__all__ = ["apply_hooks", "node_hook_result", "output_gradient_hooks", "accumulate", "add_to_grad", "GRADIENT_LOCK"]

# Held while a backward reads a ``.grad`` and writes its sum back: around each accumulation of the
# general driver, and around a whole replayed backward (``fastpath/backward_replay.py``), whose
# generated code reads the leaves' gradients first and writes them last. One lock for every leaf:
# what it guards is recording nodes, which holds the GIL anyway. Reentrant: a traced backward runs
# the general driver while holding it.
GRADIENT_LOCK = threading.RLock()


def apply_hooks(hooks, value):
    """``value`` passed through the tensor hooks ``hooks`` (a dict of ``hook(grad) -> Tensor | None``)."""
    for hook in list(hooks.values()):
        result = hook(value)
        if result is not None:
            _check_hook_result(hook, value, result)
            value = result
    return value


def _check_hook_result(hook, value, result) -> None:
    """Refuses what a tensor hook returned in place of ``value`` unless it is a tensor like it, as PyTorch."""
    if not isinstance(result, _tensor.Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if result._value.dtype is not value._value.dtype or result._value.device is not value._value.device:
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has changed the type of value (was {value.type()} got {result.type()})"
        )
    if result._value.shape != value._value.shape:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")


def node_hook_result(hook, result, previous: list) -> list:
    """The gradients a node hook (pre or post) returned in place of ``previous``, checked as PyTorch
    checks them: a tuple of as many entries, each None or a tensor like the one it replaces."""
    if not isinstance(result, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(result).__name__}'")
    if len(result) != len(previous):
        raise RuntimeError(
            f"hook '{_hook_name(hook)}' has returned an incorrect number of values "
            f"(got {len(result)}, but expected {len(previous)})"
        )
    for value, replacement in zip(previous, result):
        if replacement is None:
            continue
        if value is None:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        _check_hook_result(hook, value, replacement)
    return list(result)


def _hook_name(hook) -> str:
    return getattr(hook, "__name__", "<unknown>")


def output_gradient_hooks(function: Function, output_nr: int, gradient, create_graph: bool):
    """Tensor hooks registered on a non-leaf output, then ``retain_grad``'s copy into ``.grad``
    (so the retained gradient is what the hooks gave, as PyTorch's)."""
    if function._tensor_hooks and output_nr in function._tensor_hooks:
        gradient = apply_hooks(function._tensor_hooks[output_nr], gradient)
    if function._retained and output_nr in function._retained:
        tensor = function._retained[output_nr]()
        if tensor is not None:
            add_to_grad(tensor, gradient, create_graph)  # accumulated across backwards, as a leaf's
    return gradient


def accumulate(accumulator: AccumulateGrad, gradient, create_graph: bool) -> None:
    """Adds ``gradient`` to the leaf's ``.grad``, in PyTorch's order: the tensor's hooks, the node's
    pre-hooks, the accumulation and the tensor's post-accumulate hooks, the node's hooks."""
    variable = accumulator.variable
    if variable._backward_hooks:
        gradient = apply_hooks(variable._backward_hooks, gradient)
    if accumulator._pre_hooks:
        for hook in list(accumulator._pre_hooks.values()):
            result = hook((gradient,))
            if result is not None:
                (gradient,) = node_hook_result(hook, result, [gradient])
        if gradient is None:  # a pre-hook dropped it: nothing to accumulate (nor to hook after)
            return
    if gradient._value.shape != variable._value.shape:
        gradient = sum_to_shape(gradient, variable._value.shape)
    add_to_grad(variable, gradient, create_graph)
    if variable._post_accumulate_grad_hooks:
        for hook in list(variable._post_accumulate_grad_hooks.values()):
            result = hook(variable)
            if isinstance(result, _tensor.Tensor):  # PyTorch's words, for a tensor and for anything else
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")
            if result is not None:
                raise TypeError(f"expected Variable, but hook returned '{type(result).__name__}'")
    if accumulator._hooks:
        for hook in list(accumulator._hooks.values()):
            result = hook((), (gradient,))  # an AccumulateGrad has no inputs: no gradients to give
            if result is not None:
                node_hook_result(hook, result, [])


def add_to_grad(tensor, gradient, create_graph: bool) -> None:
    """``tensor.grad`` plus ``gradient`` (``gradient`` itself, stored, when there is none yet).

    Writes ``_grad``, past the ``grad`` setter's checks: the gradient fits the tensor already.
    Under ``GRADIENT_LOCK``: another thread's backward may be adding to the same ``.grad``.
    """
    with GRADIENT_LOCK:
        stored = tensor._grad
        if stored is None:
            tensor._grad = _stored_gradient(gradient, create_graph)
        elif create_graph:
            tensor._grad = stored + gradient
        else:
            with no_grad():
                stored._rebind((stored + gradient)._value)


def _stored_gradient(gradient, create_graph: bool):
    """The tensor a ``.grad`` keeps: a new tensor of the gradient's value, without history or (with
    ``create_graph``) as a differentiable copy. It holds the pending value from now on
    (``graph.hold``): the backward's own tensors die when it returns, and a value no live handle
    holds is left out of the run that computes it, so reading ``.grad`` after the optimizer's step
    would run the whole backward again.

    Never an alias (``detach``): one gradient reaches several leaves (an Add's inputs) and may be
    the caller's own tensor (``x.backward(g)``), and an in-place write to one ``.grad`` (a later
    backward's accumulation, ``clip_grad_norm_``, ``zero_()``) must change it alone.
    """
    stored = gradient.clone() if create_graph else gradient._detached()
    hold(stored._value, stored)
    return stored
