"""Identity, Linear and LazyLinear layers."""

from __future__ import annotations

import math

from ...runtime.creation import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ...runtime.grad_mode import no_grad
from ..parameter import Parameter
from .lazy import LazyModuleMixin, UninitializedParameter
from .module import Module

__all__ = ["Identity", "LazyLinear", "Linear"]


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


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is taken from the first input's last dim.

    Until then ``weight`` and ``bias`` are :class:`UninitializedParameter`; the first forward (or a
    loaded ``state_dict``) materializes and initializes them, and the module becomes a :class:`Linear`.

    Args:
        out_features: size of each output sample.
        bias: whether to learn an additive bias. Default: ``True``.
        device, dtype: where and in which dtype to create the parameters.

    Example::

        >>> m = nn.LazyLinear(30)
        >>> m(onnxnn.randn(128, 20)).shape
        onnxnn.Size([128, 30])
        >>> type(m).__name__, m.in_features
        ('Linear', 20)
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        # bias=False here: the bias is an UninitializedParameter too, registered below.
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(**factory_kwargs)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(**factory_kwargs)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))  # type: ignore[attr-defined]  # uninitialized until now
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))  # type: ignore[attr-defined]  # uninitialized until now
                self.reset_parameters()
