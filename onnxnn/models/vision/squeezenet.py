"""SqueezeNet 1.0 and 1.1 with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

from ...nn import AdaptiveAvgPool2d, Conv2d, Dropout, MaxPool2d, Module, ReLU, Sequential, init
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ._weights import WeightsPath, load_weights

__all__ = ["SqueezeNet", "Fire", "squeezenet1_0", "squeezenet1_1"]


class Fire(Module):
    """A 1x1 squeeze, then 1x1 and 3x3 expands concatenated along channels."""

    def __init__(self, inplanes: int, squeeze_planes: int, expand1x1_planes: int, expand3x3_planes: int) -> None:
        super().__init__()
        self.inplanes = inplanes
        self.squeeze = Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = ReLU(inplace=True)
        self.expand1x1 = Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = ReLU(inplace=True)
        self.expand3x3 = Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return cat([self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], dim=1)


class SqueezeNet(Module):
    """SqueezeNet (arXiv:1602.07360) as torchvision builds it; ``version`` is ``"1_0"`` or ``"1_1"``."""

    def __init__(self, version: str = "1_0", num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.num_classes = num_classes
        if version == "1_0":
            self.features = Sequential(
                Conv2d(3, 96, kernel_size=7, stride=2),
                ReLU(inplace=True),
                MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(96, 16, 64, 64),
                Fire(128, 16, 64, 64),
                Fire(128, 32, 128, 128),
                MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(256, 32, 128, 128),
                Fire(256, 48, 192, 192),
                Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256),
                MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(512, 64, 256, 256),
            )
        elif version == "1_1":
            self.features = Sequential(
                Conv2d(3, 64, kernel_size=3, stride=2),
                ReLU(inplace=True),
                MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(64, 16, 64, 64),
                Fire(128, 16, 64, 64),
                MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(128, 32, 128, 128),
                Fire(256, 32, 128, 128),
                MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(256, 48, 192, 192),
                Fire(384, 48, 192, 192),
                Fire(384, 64, 256, 256),
                Fire(512, 64, 256, 256),
            )
        else:
            raise ValueError(f"Unsupported SqueezeNet version {version}: 1_0 or 1_1 expected")
        # The final convolution is the classifier, so it gets a small init of its own.
        final_conv = Conv2d(512, self.num_classes, kernel_size=1)
        self.classifier = Sequential(Dropout(p=dropout), final_conv, ReLU(inplace=True), AdaptiveAvgPool2d((1, 1)))
        for module in self.modules():
            if isinstance(module, Conv2d):
                if module is final_conv:
                    init.normal_(module.weight, mean=0.0, std=0.01)
                else:
                    init.kaiming_uniform_(module.weight)
                if module.bias is not None:
                    init.constant_(module.bias, 0)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.features(x)).flatten(1)


def squeezenet1_0(*, weights: WeightsPath = None, **kwargs) -> SqueezeNet:
    """SqueezeNet 1.0. ``weights``: a local torchvision state_dict file; kwargs go to :class:`SqueezeNet`."""
    return load_weights(SqueezeNet("1_0", **kwargs), weights)


def squeezenet1_1(*, weights: WeightsPath = None, **kwargs) -> SqueezeNet:
    """SqueezeNet 1.1 (2.4x less computation than 1.0). ``weights``: a local torchvision state_dict file."""
    return load_weights(SqueezeNet("1_1", **kwargs), weights)
