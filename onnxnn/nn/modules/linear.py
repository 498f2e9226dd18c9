"""Identity and Linear layers."""
from __future__ import annotations

import math

from ...runtime.creation import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Identity", "Linear"]


def reset_weight_and_bias(weight: Tensor, bias: Tensor | None) -> None:
    """PyTorch's default draw for Linear and Conv layers: kaiming_uniform_(a=sqrt(5)) for ``weight`` and
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for ``bias``, fan_in being ``weight``'s."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Identity(Module):
    """A placeholder that returns its input unchanged; constructor arguments are ignored.

    Example::

        >>> nn.Identity(54, unused_argument=0.1)(onnxnn.randn(128, 20)).shape
        onnxnn.Size([128, 20])
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """Applies an affine transformation ``y = x W^T + b``.

    Args:
        in_features: size of each input sample.
        out_features: size of each output sample.
        bias: whether to learn an additive bias. Default: ``True``.
        device, dtype: where and in which dtype to create the parameters.

    Attributes:
        weight: ``(out_features, in_features)``, initialized from U(-k^0.5, k^0.5), k = 1/in_features
            (``kaiming_uniform_`` with ``a=sqrt(5)``).
        bias: ``(out_features)``, initialized from U(-k^0.5, k^0.5).

    Example::

        >>> m = nn.Linear(20, 30)
        >>> m(onnxnn.randn(128, 20)).shape
        onnxnn.Size([128, 30])
    """

    __constants__ = ["in_features", "out_features"]

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), **factory_kwargs))
        if bias:
            self.bias = Parameter(empty(out_features, **factory_kwargs))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draws weight and bias with PyTorch's default scheme."""
        # kaiming_uniform_ with a=sqrt(5) gives U(-1/sqrt(in_features), 1/sqrt(in_features)).
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
