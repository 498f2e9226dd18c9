"""Helpers shared by the distributions, as ``torch.distributions.utils``: broadcasting parameters,
converting between probabilities and logits, and the lazily computed attributes.

Example::

    >>> from onnxnn.distributions.utils import broadcast_all
    >>> loc, scale = broadcast_all(onnxnn.zeros(3), 1.0)
    >>> scale
    tensor([1., 1., 1.])
"""

from __future__ import annotations

import functools
import numbers
from typing import Any, Callable, Generic, TypeVar, overload

import numpy as np

from ..ir import dtypes
from ..runtime import ops as _ops
from ..runtime.creation import tensor
from ..runtime.random_creation import randn
from ..runtime.grad_mode import enable_grad
from ..runtime.tensor import Size, Tensor

__all__ = [
    "broadcast_all",
    "logits_to_probs",
    "clamp_probs",
    "probs_to_logits",
    "lazy_property",
    "euler_constant",
]

euler_constant = 0.57721566490153286060  # the Euler-Mascheroni constant


def _is_number(value: Any) -> bool:
    # bool is a Number for PyTorch too (a Bernoulli's probs may be True).
    return isinstance(value, numbers.Number)


def broadcast_all(*values: Tensor | float) -> tuple[Tensor, ...]:
    """Broadcasts tensors and numbers to one shape.

    Numbers become tensors of the first tensor's dtype and device (the default dtype when all are
    numbers); the tensors are broadcast as :func:`onnxnn.broadcast_tensors` does.

    Args:
        *values: tensors and Python numbers.

    Returns:
        The broadcast tensors, in order.

    Raises:
        ValueError: a value is neither a number nor a tensor.

    Example::

        >>> broadcast_all(onnxnn.tensor([0.0, 1.0]), 2.0)[1]
        tensor([2., 2.])
    """
    if not all(isinstance(value, Tensor) or _is_number(value) for value in values):
        raise ValueError(
            "Input arguments must all be instances of Number, torch.Tensor or objects implementing __torch_function__."
        )
    options: dict = {"dtype": dtypes.get_default_dtype()}
    for value in values:
        if isinstance(value, Tensor):
            options = {"dtype": value.dtype, "device": value.device}
            break
    tensors = [value if isinstance(value, Tensor) else tensor(value, **options) for value in values]
    return tuple(_ops.broadcast_tensors(*tensors))


def _standard_normal(shape: tuple, dtype, device) -> Tensor:
    """Standard normal draws from onnxnn's generator (so ``manual_seed`` repeats them)."""
    return randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sums the ``dim`` rightmost dimensions of ``value`` (nothing when ``dim`` is 0)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


def _finfo(dtype) -> Any:
    """numpy's float info for an onnxnn dtype (bfloat16 through ml_dtypes, which onnx brings)."""
    try:
        return np.finfo(dtype.numpy_dtype)
    except ValueError:
        import ml_dtypes

        return ml_dtypes.finfo(dtype.numpy_dtype)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: the sigmoid of log-odds (``is_binary``), else a softmax over the last dim.

    Example::

        >>> logits_to_probs(onnxnn.tensor([0.0]), is_binary=True)
        tensor([0.5000])
    """
    if is_binary:
        return _ops.sigmoid(logits)
    return _ops.softmax(logits, -1)


def clamp_probs(probs: Tensor) -> Tensor:
    """Clamps probabilities to ``[eps, 1 - eps]`` (``eps`` the machine epsilon of their dtype).

    Example::

        >>> clamp_probs(onnxnn.tensor([0.0, 0.5, 1.0]))
        tensor([1.1921e-07, 5.0000e-01, 1.0000e+00])
    """
    eps = float(_finfo(probs.dtype).eps)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities: log-odds (``is_binary``), else log-probabilities (clamped away from 0 and 1).

    Example::

        >>> probs_to_logits(onnxnn.tensor([0.5]), is_binary=True)
        tensor([0.])
    """
    clamped = clamp_probs(probs)
    if is_binary:
        return clamped.log() - (-clamped).log1p()
    return clamped.log()


_Owner = TypeVar("_Owner", contravariant=True)
_Result = TypeVar("_Result", covariant=True)


class lazy_property(Generic[_Owner, _Result]):
    """An attribute computed on first access (with gradients recorded) and then stored on the instance.

    A distribution built from ``probs`` computes its ``logits`` this way, and the other way round.
    Accessed on the class it behaves as a ``property`` (for documentation tools).
    """

    def __init__(self, wrapped: Callable[[_Owner], _Result]) -> None:
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)  # type: ignore[arg-type]

    @overload
    def __get__(self, instance: None, owner: Any = None) -> _LazyPropertyAndProperty: ...

    @overload
    def __get__(self, instance: _Owner, owner: Any = None) -> _Result: ...

    def __get__(self, instance, owner=None):
        if instance is None:
            return _LazyPropertyAndProperty(self.wrapped)
        # Recorded with gradients even under no_grad, as PyTorch: the cached value serves later calls.
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _LazyPropertyAndProperty(lazy_property, property):
    """What a lazy_property is on the class: a property to documentation tools, lazy to validation."""

    def __init__(self, wrapped: Callable) -> None:
        property.__init__(self, wrapped)


def _as_size(shape) -> Size:
    """A ``Size`` from a shape given as a Size, tuple or list (an int is refused, as ``torch.Size(5)`` is)."""
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"'{type(shape).__name__}' object is not iterable")
    return Size(tuple(int(size) for size in shape))
