"""Activation layers: every activation module of ``torch.nn`` but MultiheadAttention."""

from __future__ import annotations

from typing import Any, Callable

import warnings

from ...runtime.creation import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init as _init
from ..parameter import Parameter
from .module import Module

__all__ = [
    "ReLU",
    "LeakyReLU",
    "Sigmoid",
    "Tanh",
    "GELU",
    "Softmax",
    "LogSoftmax",
    "Threshold",
    "RReLU",
    "Hardtanh",
    "ReLU6",
    "Hardsigmoid",
    "SiLU",
    "Mish",
    "Hardswish",
    "ELU",
    "CELU",
    "SELU",
    "GLU",
    "Hardshrink",
    "LogSigmoid",
    "Softplus",
    "Softshrink",
    "PReLU",
    "Softsign",
    "Tanhshrink",
    "Softmin",
    "Softmax2d",
]


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


def _inplace_suffix(inplace: bool) -> str:
    return ", inplace=True" if inplace else ""


class _InplaceOnly(Module):
    """An activation whose only option is ``inplace`` (SiLU, Mish, SELU, Hardswish, Hardsigmoid)."""

    __constants__ = ["inplace"]
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class _Stateless(Module):
    """An activation without options (LogSigmoid, Softsign, Tanhshrink)."""

    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input)


class Threshold(Module):
    """Returns ``x`` where ``x > threshold``, else ``value``.

    Args:
        threshold: the value to threshold at.
        value: the value to replace with.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    __constants__ = ["threshold", "value", "inplace"]

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace_suffix(self.inplace)}"


class RReLU(Module):
    """Randomized leaky ReLU: negative inputs get a slope from ``U(lower, upper)`` in training, the mean in eval.

    Args:
        lower: lower bound of the slope distribution. Default: 1/8.
        upper: upper bound of the slope distribution. Default: 1/3.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    __constants__ = ["lower", "upper", "inplace"]

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace_suffix(self.inplace)}"


class Hardtanh(Module):
    """Clamps to ``[min_val, max_val]``.

    Args:
        min_val: the lower end of the linear region. Default: -1.
        max_val: the upper end of the linear region. Default: 1.
        inplace: rebind the input tensor to the result. Default: ``False``.
        min_value, max_value: deprecated names of ``min_val`` and ``max_val``.
    """

    __constants__ = ["min_val", "max_val", "inplace"]

    def __init__(
        self,
        min_val: float = -1.0,
        max_val: float = 1.0,
        inplace: bool = False,
        min_value: float | None = None,
        max_value: float | None = None,
    ) -> None:
        super().__init__()
        if min_value is not None:
            warnings.warn(
                "keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning, stacklevel=2
            )
            min_val = min_value
        if max_value is not None:
            warnings.warn(
                "keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning, stacklevel=2
            )
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val ({self.min_val})")

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace_suffix(self.inplace)}"


class ReLU6(Hardtanh):
    """Applies ``min(max(0, x), 6)``.

    Args:
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Hardsigmoid(_InplaceOnly):
    """Applies ``relu6(x + 3) / 6``."""

    _function = staticmethod(F.hardsigmoid)

    def extra_repr(self) -> str:
        return ""  # PyTorch's Hardsigmoid shows no inplace flag


class SiLU(_InplaceOnly):
    """Applies ``x * sigmoid(x)``, the swish function."""

    _function = staticmethod(F.silu)


class Mish(_InplaceOnly):
    """Applies ``x * tanh(softplus(x))``."""

    _function = staticmethod(F.mish)


class Hardswish(_InplaceOnly):
    """Applies ``x * relu6(x + 3) / 6``, MobileNetV3's h-swish."""

    _function = staticmethod(F.hardswish)

    def extra_repr(self) -> str:
        return ""  # PyTorch's Hardswish shows no inplace flag


class SELU(_InplaceOnly):
    """Applies ``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))`` with alpha ~ 1.6733, scale ~ 1.0507."""

    _function = staticmethod(F.selu)


class ELU(Module):
    """Applies ``x if x > 0 else alpha * (exp(x) - 1)``.

    Args:
        alpha: the saturation value for negative inputs. Default: 1.0.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    __constants__ = ["alpha", "inplace"]

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace_suffix(self.inplace)}"


class CELU(ELU):
    """Applies ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Args:
        alpha: the alpha of the CELU formulation. Default: 1.0.
        inplace: rebind the input tensor to the result. Default: ``False``.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)


class GLU(Module):
    """The gated linear unit ``a * sigmoid(b)``, ``a`` and ``b`` the halves of the input along ``dim``.

    Args:
        dim: the dimension to split. Default: -1.
    """

    __constants__ = ["dim"]

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Hardshrink(Module):
    """Returns ``x`` where ``|x| > lambd``, else 0.

    Args:
        lambd: the half-width of the zeroed interval. Default: 0.5.
    """

    __constants__ = ["lambd"]

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """Moves ``x`` towards 0 by ``lambd``, and to 0 where ``|x| <= lambd``.

    Args:
        lambd: the shrinkage, at least 0. Default: 0.5.
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class LogSigmoid(_Stateless):
    """Applies ``log(sigmoid(x))``, stably."""

    _function = staticmethod(F.logsigmoid)


class Softsign(_Stateless):
    """Applies ``x / (1 + |x|)``."""

    _function = staticmethod(F.softsign)


class Tanhshrink(_Stateless):
    """Applies ``x - tanh(x)``."""

    _function = staticmethod(F.tanhshrink)


class Softplus(Module):
    """Applies ``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``.

    Args:
        beta: the sharpness. Default: 1.
        threshold: above it the function is the identity. Default: 20.
    """

    __constants__ = ["beta", "threshold"]

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """Applies ``max(0, x) + weight * min(0, x)`` with a learned slope, shared or one per channel (dim 1).

    Args:
        num_parameters: 1, or the number of input channels. Default: 1.
        init: the initial slope. Default: 0.25.
        device, dtype: where and in which dtype to create the weight.

    Example::

        >>> m = nn.PReLU(3)
        >>> m.weight.shape
        onnxnn.Size([3])
    """

    __constants__ = ["num_parameters"]

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Sets every slope to ``init``."""
        _init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softmin(Softmax):
    """Applies ``softmax(-x)`` along ``dim``.

    Args:
        dim: the dimension to normalize (None picks PyTorch's legacy default, with a warning).
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """Applies softmax over the channels (dim -3) of a ``(C, H, W)`` or ``(N, C, H, W)`` input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)
