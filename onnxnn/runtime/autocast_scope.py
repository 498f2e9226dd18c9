"""Autocast at the level of tensor functions: the casts PyTorch's dispatcher makes before a kernel runs,
and functions that run outside autocast (``amp/`` sets ``MODE.autocast``, the policy; the runtime never
imports it).
"""

from __future__ import annotations

import functools
from typing import Callable

from ..ir.mode import MODE

__all__ = ["autocast_arguments", "outside_autocast"]


def autocast_arguments(op_type: str, arguments: tuple, name: str | None = None) -> tuple:
    """``arguments`` cast as autocast casts the inputs of ``op_type`` (unchanged while it is off).

    For functions that check their arguments' dtypes before recording (``F.linear``, the
    convolutions), and for losses (``name``, their grad_fn name, which autocast's policy knows):
    autocast casts first, as PyTorch's dispatcher does before a kernel runs. Items that are not
    tensors (None, numbers) pass through.
    """
    autocast = MODE.autocast
    if autocast is None:
        return arguments
    return autocast(op_type, arguments, "", name)


def outside_autocast(listed_as: str | None = None) -> Callable:
    """Decorates a function that autocast does not list in PyTorch, but which records ops it lists.

    PyTorch's autocast casts at the ATen ops it lists; ``linalg.cholesky``, ``det`` or ``dot`` are
    not among them and run in their inputs' dtype, while onnxnn's versions record the ``MatMul``
    nodes that autocast lowers (a determinant off in its third digit). Inside the decorated function
    this thread's autocast leaves every recorded op as it is. ``listed_as``: the op type or PyTorch
    function name under which autocast lists the function itself (``"Det"``, ``"inverse"``: float32
    ops on the CPU; see ``amp/op_lists.py``): its tensor arguments, positional and keyword, are cast
    as that op's inputs first (together, so that a promoting op sees them all).
    """

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            if MODE.autocast is None:
                return function(*args, **kwargs)
            if listed_as is not None:
                if kwargs:
                    # ``sdpa(q, k, v, attn_mask=mask)``, ``cdist(a, x2=b)``: keyword tensors are
                    # arguments of the listed op as much as positional ones.
                    count = len(args)
                    cast = MODE.autocast(listed_as, args + tuple(kwargs.values()), "", listed_as)
                    args, kwargs = cast[:count], dict(zip(kwargs, cast[count:]))
                else:
                    args = MODE.autocast(listed_as, args, "", listed_as)
            grad_mode = MODE.grad
            grad_mode.autocast_paused += 1
            try:
                return function(*args, **kwargs)
            finally:
                grad_mode.autocast_paused -= 1

        return wrapper

    return decorate
