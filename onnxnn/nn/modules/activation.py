"""Activation layers: ReLU, LeakyReLU, Sigmoid, Tanh, GELU, Softmax, LogSoftmax."""
from __future__ import annotations

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = ["ReLU", "LeakyReLU", "Sigmoid", "Tanh", "GELU", "Softmax", "LogSoftmax"]


class ReLU(Module):
    """Applies ``max(0, x)`` elementwise.

    Args:
        inplace: rebind the input tensor to the result. Default: ``False``.

    Example::

        >>> nn.ReLU()(onnxnn.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """

    __constants__ = ["inplace"]

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """Applies ``max(0, x) + negative_slope * min(0, x)`` elementwise.

    Args:
        negative_slope: the slope for negative inputs. Default: ``1e-2``.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    __constants__ = ["inplace", "negative_slope"]

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        inplace_str = ", inplace=True" if self.inplace else ""
        return f"negative_slope={self.negative_slope}{inplace_str}"


class Sigmoid(Module):
    """Applies ``1 / (1 + exp(-x))`` elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Tanh(Module):
    """Applies the hyperbolic tangent elementwise."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class GELU(Module):
    """Applies ``x * Phi(x)``, Phi the standard normal CDF, or its tanh approximation.

    Args:
        approximate: ``'none'`` (exact, the default) or ``'tanh'``.
    """

    __constants__ = ["approximate"]

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={repr(self.approximate)}"


class Softmax(Module):
    """Rescales along ``dim`` so the values are in [0, 1] and sum to 1: ``exp(x_i) / sum_j exp(x_j)``.

    Args:
        dim: the dimension to normalize (None picks PyTorch's legacy default, with a warning).

    Example::

        >>> nn.Softmax(dim=1)(onnxnn.zeros(2, 4))
        tensor([[0.2500, 0.2500, 0.2500, 0.2500],
                [0.2500, 0.2500, 0.2500, 0.2500]])
    """

    __constants__ = ["dim"]

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Applies ``log(softmax(x))`` along ``dim``, computed stably.

    Args:
        dim: the dimension to normalize (None picks PyTorch's legacy default, with a warning).
    """

    __constants__ = ["dim"]

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
