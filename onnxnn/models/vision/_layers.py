"""Building blocks torchvision keeps in ``torchvision.ops.misc``, with the same module names."""

from __future__ import annotations

from typing import Callable, Optional

from ...nn import AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Module, ReLU, Sequential, Sigmoid
from ...runtime.random_creation import rand
from ...runtime.tensor import Tensor

__all__ = ["Conv2dNormActivation", "SqueezeExcitation", "StochasticDepth", "make_divisible"]


def make_divisible(value: float, divisor: int, min_value: Optional[int] = None) -> int:
    """Rounds a channel count to a multiple of ``divisor``, never more than 10% below ``value`` (MobileNet's rule)."""
    if min_value is None:
        min_value = divisor
    new_value = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if new_value < 0.9 * value:
        new_value += divisor
    return new_value


class Conv2dNormActivation(Sequential):
    """Convolution, then normalization, then activation, as a Sequential named ``0``, ``1``, ``2``.

    Args:
        padding: by default ``(kernel_size - 1) // 2 * dilation`` ("same" for odd kernels).
        norm_layer: None for no normalization; the convolution then has a bias unless ``bias=False``.
        activation_layer: None for no activation.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        padding: Optional[int] = None,
        groups: int = 1,
        norm_layer: Optional[Callable[..., Module]] = BatchNorm2d,
        activation_layer: Optional[Callable[..., Module]] = ReLU,
        dilation: int = 1,
        inplace: Optional[bool] = True,
        bias: Optional[bool] = None,
    ) -> None:
        if padding is None:
            padding = (kernel_size - 1) // 2 * dilation
        if bias is None:
            bias = norm_layer is None
        layers: list[Module] = [
            Conv2d(
                in_channels,
                out_channels,
                kernel_size,
                stride,
                padding,
                dilation=dilation,
                groups=groups,
                bias=bias,
            )
        ]
        if norm_layer is not None:
            layers.append(norm_layer(out_channels))
        if activation_layer is not None:
            params = {} if inplace is None else {"inplace": inplace}
            layers.append(activation_layer(**params))
        super().__init__(*layers)
        self.out_channels = out_channels


class SqueezeExcitation(Module):
    """Squeeze-and-Excitation (arXiv:1709.01507): channel weights from the global average, times the input."""

    def __init__(
        self,
        input_channels: int,
        squeeze_channels: int,
        activation: Callable[..., Module] = ReLU,
        scale_activation: Callable[..., Module] = Sigmoid,
    ) -> None:
        super().__init__()
        self.avgpool = AdaptiveAvgPool2d(1)
        self.fc1 = Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, input: Tensor) -> Tensor:
        scale = self.fc2(self.activation(self.fc1(self.avgpool(input))))
        return self.scale_activation(scale) * input


class StochasticDepth(Module):
    """Drops whole residual branches at random while training (arXiv:1603.09382), as ``torchvision.ops``.

    Args:
        p: probability of dropping; survivors are scaled by ``1 / (1 - p)``.
        mode: ``"row"`` drops per sample, ``"batch"`` the whole batch at once.
    """

    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        if p < 0.0 or p > 1.0:
            raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
        if mode not in ("batch", "row"):
            raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
        self.p = p
        self.mode = mode

    def forward(self, input: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return input
        survival_rate = 1.0 - self.p
        size = [input.shape[0]] + [1] * (input.dim() - 1) if self.mode == "row" else [1] * input.dim()
        keep = (rand(size, dtype=input.dtype, device=input.device) < survival_rate).to(input.dtype)
        if survival_rate > 0.0:
            keep = keep / survival_rate
        return input * keep

    def extra_repr(self) -> str:
        return f"p={self.p}, mode={self.mode}"
