"""Gradient clipping: ``clip_grad_norm_``, ``clip_grad_value_``, ``get_total_norm``, ``clip_grads_with_norm_``
(and ``clip_grad_norm``, PyTorch's deprecated alias of ``clip_grad_norm_``).

PyTorch's ``torch.nn.utils.clip_grad`` semantics: the total norm is the norm of the per-tensor norms
(so it equals the norm of all gradients concatenated), clipping scales by
``min(max_norm / (total_norm + 1e-6), 1)``, and everything runs in place under ``no_grad``.
``foreach`` selects a multi-tensor kernel in PyTorch; the recorded graph here is the same either
way, so the flag is accepted and changes nothing.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterable
from typing import Optional, Union

from ...ir.dtypes import promote_types
from ...runtime.creation import tensor as _tensor
from ...runtime.grad_mode import no_grad
from ...runtime.ops import clamp, isfinite, norm, stack
from ...runtime.tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]

TensorOrTensors = Union[Tensor, Iterable[Tensor]]


def _as_list(tensors: TensorOrTensors) -> list:
    # A single tensor is accepted as PyTorch accepts it; a generator is consumed once here.
    if isinstance(tensors, Tensor):
        return [tensors]
    return list(tensors)


def _gradients(parameters: TensorOrTensors) -> list:
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def get_total_norm(
    tensors: TensorOrTensors,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Optional[bool] = None,
) -> Tensor:
    r"""Computes the norm of an iterable of tensors, as if they were concatenated into one vector.

    Args:
        tensors: a tensor or an iterable of tensors (typically gradients).
        norm_type: type of the p-norm; ``inf`` for the infinity norm.
        error_if_nonfinite: if ``True``, raise when the total norm is ``nan``, ``inf`` or ``-inf``.
        foreach: accepted for PyTorch compatibility; the recorded computation is the same.

    Returns:
        Total norm of the tensors (viewed as a single vector).

    Example::

        >>> nn.utils.get_total_norm([onnxnn.ones(3), onnxnn.ones(1)])
        tensor(2.)
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return _tensor(0.0)
    with no_grad():
        norms = [norm(t, norm_type) for t in tensors]
        # Stacked in their promoted dtype, as PyTorch's stack promotes: a float16 gradient first must
        # not cast a float32 one's norm of 2e5 to float16's inf.
        common = functools.reduce(promote_types, [tensor_norm.dtype for tensor_norm in norms])
        total_norm = norm(stack([tensor_norm.to(common) for tensor_norm in norms]), norm_type)
    if error_if_nonfinite and not bool(isfinite(total_norm)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, "
            "set `error_if_nonfinite=False`"
        )
    return total_norm


def clip_grads_with_norm_(
    parameters: TensorOrTensors,
    max_norm: float,
    total_norm: Tensor,
    foreach: Optional[bool] = None,
) -> None:
    r"""Scales the gradients of ``parameters`` in place by ``min(max_norm / (total_norm + 1e-6), 1)``.

    Args:
        parameters: a tensor or an iterable of tensors whose ``.grad`` is scaled.
        max_norm: max norm of the gradients.
        total_norm: the total norm of the gradients (see :func:`get_total_norm`).
        foreach: accepted for PyTorch compatibility.

    Example::

        >>> norm = nn.utils.get_total_norm([p.grad for p in model.parameters()])
        >>> nn.utils.clip_grads_with_norm_(model.parameters(), 1.0, norm)
    """
    grads = _gradients(parameters)
    max_norm = float(max_norm)
    if len(grads) == 0:
        return
    with no_grad():
        # The 1e-6 keeps the coefficient finite for all-zero gradients (PyTorch's constant).
        clip_coef = clamp(max_norm / (total_norm + 1e-6), max=1.0)
        for grad in grads:
            grad.mul_(clip_coef.to(grad.dtype))


def clip_grad_norm_(
    parameters: TensorOrTensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Optional[bool] = None,
) -> Tensor:
    r"""Clips the gradient norm of an iterable of parameters, in place.

    The norm is computed over the norms of the individual gradients, as if they were concatenated
    into a single vector.

    Args:
        parameters: a tensor or an iterable of tensors that will have gradients normalized.
        max_norm: max norm of the gradients.
        norm_type: type of the used p-norm; ``inf`` for the infinity norm.
        error_if_nonfinite: if ``True``, raise when the total norm is non-finite.
        foreach: accepted for PyTorch compatibility.

    Returns:
        Total norm of the gradients before clipping (viewed as a single vector).

    Example::

        >>> loss.backward()
        >>> nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    """
    parameters = _as_list(parameters)
    grads = _gradients(parameters)
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(
    parameters: TensorOrTensors,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Optional[bool] = None,
) -> Tensor:
    r"""Deprecated alias of :func:`clip_grad_norm_` (as in PyTorch): warns, then clips in place.

    Args:
        parameters: a tensor or an iterable of tensors that will have gradients normalized.
        max_norm: max norm of the gradients.
        norm_type: type of the used p-norm; ``inf`` for the infinity norm.
        error_if_nonfinite: if ``True``, raise when the total norm is non-finite.
        foreach: accepted for PyTorch compatibility.

    Returns:
        Total norm of the gradients before clipping (viewed as a single vector).

    Example::

        >>> nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)  # instead of clip_grad_norm
    """
    warnings.warn(
        "`onnxnn.nn.utils.clip_grad_norm` is now deprecated in favor of `onnxnn.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: TensorOrTensors, clip_value: float, foreach: Optional[bool] = None) -> None:
    r"""Clips the gradients of an iterable of parameters at a specified value, in place.

    Gradients are clamped to ``[-clip_value, clip_value]``.

    Args:
        parameters: a tensor or an iterable of tensors that will have gradients clipped.
        clip_value: maximum allowed absolute value of the gradients.
        foreach: accepted for PyTorch compatibility.

    Example::

        >>> nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
    """
    clip_value = float(clip_value)
    with no_grad():
        for grad in _gradients(parameters):
            grad.clamp_(min=-clip_value, max=clip_value)
