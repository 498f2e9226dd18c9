"""VGG 11/13/16/19, with and without BatchNorm, with torchvision's module tree, parameter names and init."""

from __future__ import annotations

from functools import partial
from typing import Union

from ...nn import AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Dropout, Linear, MaxPool2d, Module, ReLU, Sequential, init
from ...nn.utils import skip_init
from ...runtime.tensor import Tensor
from ._weights import WeightsPath, load_weights

__all__ = ["VGG", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"]

# Output channels of each 3x3 convolution; "M" is a 2x2 max pool (configurations A, B, D, E of arXiv:1409.1556).
CFGS: dict[str, list[Union[str, int]]] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


def make_layers(cfg: list[Union[str, int]], batch_norm: bool = False) -> Sequential:
    """The ``features`` Sequential of a VGG configuration."""
    layers: list[Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(Conv2d(in_channels, int(v), kernel_size=3, padding=1))
        if batch_norm:
            layers.append(BatchNorm2d(int(v)))
        layers.append(ReLU(inplace=True))
        in_channels = int(v)
    return Sequential(*layers)


class VGG(Module):
    """VGG (arXiv:1409.1556) as torchvision builds it: ``features``, a 7x7 ``avgpool``, ``classifier``."""

    def __init__(self, features: Module, num_classes: int = 1000, init_weights: bool = True, dropout: float = 0.5):
        super().__init__()
        self.features = features
        self.avgpool = AdaptiveAvgPool2d((7, 7))
        # The default initialization would draw 123M values that init_weights overwrites (1.7 s of
        # the 5.9 s a vgg19 takes to build); torchvision draws them, but onnxnn's stream differs anyway.
        linear = partial(skip_init, Linear) if init_weights else Linear
        self.classifier = Sequential(
            linear(512 * 7 * 7, 4096),
            ReLU(True),
            Dropout(p=dropout),
            linear(4096, 4096),
            ReLU(True),
            Dropout(p=dropout),
            linear(4096, num_classes),
        )
        if init_weights:
            for module in self.modules():
                if isinstance(module, Conv2d):
                    init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                    if module.bias is not None:
                        init.constant_(module.bias, 0)
                elif isinstance(module, BatchNorm2d):
                    init.constant_(module.weight, 1)
                    init.constant_(module.bias, 0)
                elif isinstance(module, Linear):
                    init.normal_(module.weight, 0, 0.01)
                    init.constant_(module.bias, 0)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(x.flatten(1))


def _vgg(cfg: str, batch_norm: bool, weights: WeightsPath, kwargs: dict) -> VGG:
    if weights is not None:
        kwargs["init_weights"] = False  # the file overwrites every parameter
    return load_weights(VGG(make_layers(CFGS[cfg], batch_norm=batch_norm), **kwargs), weights)


def vgg11(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-11 (configuration A). ``weights``: a local torchvision state_dict file."""
    return _vgg("A", False, weights, kwargs)


def vgg11_bn(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-11 with BatchNorm. ``weights``: a local torchvision state_dict file."""
    return _vgg("A", True, weights, kwargs)


def vgg13(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-13 (configuration B). ``weights``: a local torchvision state_dict file."""
    return _vgg("B", False, weights, kwargs)


def vgg13_bn(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-13 with BatchNorm. ``weights``: a local torchvision state_dict file."""
    return _vgg("B", True, weights, kwargs)


def vgg16(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-16 (configuration D). ``weights``: a local torchvision state_dict file."""
    return _vgg("D", False, weights, kwargs)


def vgg16_bn(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-16 with BatchNorm. ``weights``: a local torchvision state_dict file."""
    return _vgg("D", True, weights, kwargs)


def vgg19(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-19 (configuration E). ``weights``: a local torchvision state_dict file."""
    return _vgg("E", False, weights, kwargs)


def vgg19_bn(*, weights: WeightsPath = None, **kwargs) -> VGG:
    """VGG-19 with BatchNorm. ``weights``: a local torchvision state_dict file."""
    return _vgg("E", True, weights, kwargs)
