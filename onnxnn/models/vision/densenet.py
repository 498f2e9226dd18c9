"""DenseNet-121/161/169/201 with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

from collections import OrderedDict

from ...nn import AvgPool2d, BatchNorm2d, Conv2d, Linear, MaxPool2d, Module, ModuleDict, ReLU, Sequential, init
from ...nn import functional as F
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ._weights import WeightsPath, load_weights

__all__ = ["DenseNet", "densenet121", "densenet161", "densenet169", "densenet201"]


class _DenseLayer(Module):
    """BN-ReLU-1x1 conv (bottleneck), BN-ReLU-3x3 conv: ``growth_rate`` new channels from all earlier ones."""

    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float) -> None:
        super().__init__()
        self.norm1 = BatchNorm2d(num_input_features)
        self.relu1 = ReLU(inplace=True)
        self.conv1 = Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = BatchNorm2d(bn_size * growth_rate)
        self.relu2 = ReLU(inplace=True)
        self.conv2 = Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = float(drop_rate)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        concatenated = cat(inputs, 1)
        bottleneck = self.conv1(self.relu1(self.norm1(concatenated)))
        new_features = self.conv2(self.relu2(self.norm2(bottleneck)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(ModuleDict):
    """``denselayer1..n``: each layer sees the concatenation of the block input and all earlier layers' outputs."""

    def __init__(self, num_layers: int, num_input_features: int, bn_size: int, growth_rate: int, drop_rate: float):
        super().__init__()
        for i in range(num_layers):
            layer = _DenseLayer(num_input_features + i * growth_rate, growth_rate, bn_size, drop_rate)
            self.add_module(f"denselayer{i + 1}", layer)

    def forward(self, init_features: Tensor) -> Tensor:
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return cat(features, 1)


class _Transition(Sequential):
    """BN-ReLU-1x1 conv halving the channels, then a 2x2 average pool."""

    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = BatchNorm2d(num_input_features)
        self.relu = ReLU(inplace=True)
        self.conv = Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)
        self.pool = AvgPool2d(kernel_size=2, stride=2)


class DenseNet(Module):
    """DenseNet-BC (arXiv:1608.06993) as torchvision builds it: ``features`` then ``classifier``.

    Args:
        growth_rate: channels each layer adds.
        block_config: layers in each of the four dense blocks.
        num_init_features: channels of the stem convolution.
        bn_size: bottleneck width as a multiple of ``growth_rate``.
        drop_rate: dropout after each dense layer.
    """

    def __init__(
        self,
        growth_rate: int = 32,
        block_config: tuple[int, int, int, int] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        drop_rate: float = 0,
        num_classes: int = 1000,
        memory_efficient: bool = False,
    ) -> None:
        super().__init__()
        # memory_efficient (checkpointing) changes no parameter; onnxnn's lazy graphs keep what backward needs.
        self.features = Sequential(
            OrderedDict(
                [
                    ("conv0", Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
                    ("norm0", BatchNorm2d(num_init_features)),
                    ("relu0", ReLU(inplace=True)),
                    ("pool0", MaxPool2d(kernel_size=3, stride=2, padding=1)),
                ]
            )
        )
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(num_layers, num_features, bn_size, growth_rate, drop_rate)
            self.features.add_module(f"denseblock{i + 1}", block)
            num_features = num_features + num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(num_features, num_features // 2))
                num_features = num_features // 2
        self.features.add_module("norm5", BatchNorm2d(num_features))
        self.classifier = Linear(num_features, num_classes)
        for module in self.modules():
            if isinstance(module, Conv2d):
                init.kaiming_normal_(module.weight)
            elif isinstance(module, BatchNorm2d):
                init.constant_(module.weight, 1)
                init.constant_(module.bias, 0)
            elif isinstance(module, Linear):
                init.constant_(module.bias, 0)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.features(x))
        out = F.adaptive_avg_pool2d(out, (1, 1))
        return self.classifier(out.flatten(1))


def _densenet(growth_rate: int, block_config, num_init_features: int, weights: WeightsPath, kwargs: dict) -> DenseNet:
    return load_weights(DenseNet(growth_rate, block_config, num_init_features, **kwargs), weights)


def densenet121(*, weights: WeightsPath = None, **kwargs) -> DenseNet:
    """DenseNet-121. ``weights``: a local torchvision state_dict file; kwargs go to :class:`DenseNet`."""
    return _densenet(32, (6, 12, 24, 16), 64, weights, kwargs)


def densenet161(*, weights: WeightsPath = None, **kwargs) -> DenseNet:
    """DenseNet-161. ``weights``: a local torchvision state_dict file."""
    return _densenet(48, (6, 12, 36, 24), 96, weights, kwargs)


def densenet169(*, weights: WeightsPath = None, **kwargs) -> DenseNet:
    """DenseNet-169. ``weights``: a local torchvision state_dict file."""
    return _densenet(32, (6, 12, 32, 32), 64, weights, kwargs)


def densenet201(*, weights: WeightsPath = None, **kwargs) -> DenseNet:
    """DenseNet-201. ``weights``: a local torchvision state_dict file."""
    return _densenet(32, (6, 12, 48, 32), 64, weights, kwargs)
