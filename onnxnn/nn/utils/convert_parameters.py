"""``parameters_to_vector`` and ``vector_to_parameters`` (PyTorch's ``torch.nn.utils.convert_parameters``)."""

from __future__ import annotations

from collections.abc import Iterable

from ...runtime.ops import cat
from ...runtime.tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _typename(obj) -> str:
    # torch.typename: the qualified class name, builtins without their module.
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in ("builtins", "") else f"{module}.{cls.__qualname__}"


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    r"""Flattens an iterable of parameters into a single vector.

    The result is recorded from the parameters (``view`` and ``cat``), so gradients flow back to them.

    Args:
        parameters: an iterable of tensors that are the parameters of a model.

    Returns:
        The parameters represented by a single vector.

    Example::

        >>> vec = nn.utils.parameters_to_vector(model.parameters())
    """
    return cat([param.reshape(-1) for param in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    r"""Copies slices of a vector into an iterable of parameters (their ``.data``), in order.

    Args:
        vec: a single vector representing the parameters of a model.
        parameters: an iterable of tensors that are the parameters of a model.

    Example::

        >>> nn.utils.vector_to_parameters(vec * 0.5, model.parameters())
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(vec)}")
    pointer = 0
    for param in parameters:
        count = param.numel()
        param.data = vec[pointer : pointer + count].reshape(param.shape).detach()
        pointer += count
