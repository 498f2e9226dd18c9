"""Bilinear: ``y = x1^T A x2 + b``, a learned bilinear form per output feature."""

from __future__ import annotations

import math

from ...runtime.creation import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Bilinear"]


class Bilinear(Module):
    """Applies ``y = x1^T A x2 + b`` to inputs ``(*, in1_features)`` and ``(*, in2_features)``.

    Args:
        in1_features, in2_features: the sizes of the two inputs' last dimension.
        out_features: the size of the output's last dimension.
        bias: whether to learn an additive bias. Default: ``True``.
        device, dtype: where and in which dtype to create the parameters.

    Attributes:
        weight: ``(out_features, in1_features, in2_features)``, from U(-k^0.5, k^0.5), k = 1/in1_features.
        bias: ``(out_features)``, from the same distribution.

    Example::

        >>> nn.Bilinear(20, 30, 40)(onnxnn.randn(128, 20), onnxnn.randn(128, 30)).shape
        onnxnn.Size([128, 40])
    """

    __constants__ = ["in1_features", "in2_features", "out_features"]

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if in1_features <= 0:  # PyTorch's check: the initial bound divides by sqrt(in1_features)
            raise ValueError(f"in1_features must be > 0, but got (in1_features={in1_features})")
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), **factory_kwargs))
        if bias:
            self.bias = Parameter(empty(out_features, **factory_kwargs))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draws weight and bias from U(-1/sqrt(in1_features), 1/sqrt(in1_features)), as PyTorch does."""
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
