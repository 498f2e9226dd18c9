"""Flatten and Unflatten layers."""

from __future__ import annotations

from ...runtime.tensor import Tensor
from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flattens the dims ``start_dim`` to ``end_dim`` into one.

    Args:
        start_dim: first dim to flatten. Default: 1 (keeps the batch dim).
        end_dim: last dim to flatten. Default: -1.

    Example::

        >>> nn.Flatten()(onnxnn.randn(32, 1, 5, 5)).shape
        onnxnn.Size([32, 25])
    """

    __constants__ = ["start_dim", "end_dim"]

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


def _require_tuple_int(value) -> None:
    if isinstance(value, (tuple, list)):
        for position, element in enumerate(value):
            if not isinstance(element, int):
                raise TypeError(
                    f"unflattened_size must be tuple of ints, but found element of type "
                    f"{type(element).__name__} at pos {position}"
                )
        return
    raise TypeError(f"unflattened_size must be a tuple of ints, but found type {type(value).__name__}")


class Unflatten(Module):
    """Expands dim ``dim`` of the input into ``unflattened_size`` (one entry may be -1).

    Args:
        dim: the dim to unflatten.
        unflattened_size: the new shape of that dim.

    Example::

        >>> nn.Unflatten(1, (2, 5, 5))(onnxnn.randn(2, 50)).shape
        onnxnn.Size([2, 2, 5, 5])
    """

    __constants__ = ["dim", "unflattened_size"]

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if isinstance(dim, int):
            _require_tuple_int(unflattened_size)
        else:
            # PyTorch also takes a dim name with named sizes; onnxnn tensors have no named dims.
            raise TypeError("invalid argument type for dim parameter")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        sizes = list(self.unflattened_size)
        extent = input.size(self.dim)  # raises for a dim out of range
        known = 1
        for size in sizes:
            if size != -1:
                known *= size
        inferred = sizes.count(-1)
        if inferred > 1 or (inferred == 0 and known != extent) or (inferred == 1 and (known == 0 or extent % known)):
            raise RuntimeError(
                f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {self.dim} "
                f"({extent}) in the input tensor"
            )
        return input.unflatten(self.dim, sizes)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
