"""EfficientNet B0-B3 with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

import copy
import math
from functools import partial
from typing import Callable, Optional

from ...nn import AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Dropout, GroupNorm, Linear, Module, Sequential, SiLU, init
from ...runtime.tensor import Tensor
from ._layers import Conv2dNormActivation, SqueezeExcitation, StochasticDepth, make_divisible
from ._weights import WeightsPath, load_weights

__all__ = [
    "EfficientNet",
    "MBConv",
    "MBConvConfig",
    "efficientnet_b0",
    "efficientnet_b1",
    "efficientnet_b2",
    "efficientnet_b3",
]


class MBConvConfig:
    """One stage's settings; channels scale by ``width_mult`` (rounded to 8), repeats by ``depth_mult`` (rounded up)."""

    def __init__(
        self,
        expand_ratio: float,
        kernel: int,
        stride: int,
        input_channels: int,
        out_channels: int,
        num_layers: int,
        width_mult: float = 1.0,
        depth_mult: float = 1.0,
    ) -> None:
        self.expand_ratio = expand_ratio
        self.kernel = kernel
        self.stride = stride
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.num_layers = int(math.ceil(num_layers * depth_mult))

    @staticmethod
    def adjust_channels(channels: int, width_mult: float, min_value: Optional[int] = None) -> int:
        return make_divisible(channels * width_mult, 8, min_value)


class MBConv(Module):
    """Mobile inverted bottleneck with squeeze-excitation and stochastic depth, held in ``block``."""

    def __init__(self, cnf: MBConvConfig, stochastic_depth_prob: float, norm_layer: Callable[..., Module]) -> None:
        super().__init__()
        if not (1 <= cnf.stride <= 2):
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        layers: list[Module] = []
        expanded_channels = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded_channels != cnf.input_channels:
            layers.append(
                Conv2dNormActivation(
                    cnf.input_channels, expanded_channels, kernel_size=1, norm_layer=norm_layer, activation_layer=SiLU
                )
            )
        layers.append(
            Conv2dNormActivation(
                expanded_channels,
                expanded_channels,
                kernel_size=cnf.kernel,
                stride=cnf.stride,
                groups=expanded_channels,
                norm_layer=norm_layer,
                activation_layer=SiLU,
            )
        )
        squeeze_channels = max(1, cnf.input_channels // 4)
        layers.append(SqueezeExcitation(expanded_channels, squeeze_channels, activation=partial(SiLU, inplace=True)))
        layers.append(
            Conv2dNormActivation(
                expanded_channels, cnf.out_channels, kernel_size=1, norm_layer=norm_layer, activation_layer=None
            )
        )
        self.block = Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, input: Tensor) -> Tensor:
        result = self.block(input)
        if self.use_res_connect:
            result = self.stochastic_depth(result) + input
        return result


class EfficientNet(Module):
    """EfficientNet (arXiv:1905.11946) as torchvision builds it: ``features``, ``avgpool``, ``classifier``.

    Args:
        inverted_residual_setting: the stages' :class:`MBConvConfig` list.
        dropout: dropout probability before the classifier's Linear.
        stochastic_depth_prob: the last block's drop probability (earlier blocks' grow linearly to it).
    """

    def __init__(
        self,
        inverted_residual_setting: list[MBConvConfig],
        dropout: float,
        stochastic_depth_prob: float = 0.2,
        num_classes: int = 1000,
        norm_layer: Optional[Callable[..., Module]] = None,
        last_channel: Optional[int] = None,
    ) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, MBConvConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be List[MBConvConfig]")
        if norm_layer is None:
            norm_layer = BatchNorm2d
        first_channels = inverted_residual_setting[0].input_channels
        layers: list[Module] = [
            Conv2dNormActivation(
                3, first_channels, kernel_size=3, stride=2, norm_layer=norm_layer, activation_layer=SiLU
            )
        ]
        total_stage_blocks = sum(cnf.num_layers for cnf in inverted_residual_setting)
        stage_block_id = 0
        for cnf in inverted_residual_setting:
            stage: list[Module] = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                # Only a stage's first block changes the channel count and the resolution.
                if stage:
                    block_cnf.input_channels = block_cnf.out_channels
                    block_cnf.stride = 1
                sd_prob = stochastic_depth_prob * float(stage_block_id) / total_stage_blocks
                stage.append(MBConv(block_cnf, sd_prob, norm_layer))
                stage_block_id += 1
            layers.append(Sequential(*stage))
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = last_channel if last_channel is not None else 4 * lastconv_input_channels
        layers.append(
            Conv2dNormActivation(
                lastconv_input_channels,
                lastconv_output_channels,
                kernel_size=1,
                norm_layer=norm_layer,
                activation_layer=SiLU,
            )
        )
        self.features = Sequential(*layers)
        self.avgpool = AdaptiveAvgPool2d(1)
        self.classifier = Sequential(Dropout(p=dropout, inplace=True), Linear(lastconv_output_channels, num_classes))

        for module in self.modules():
            if isinstance(module, Conv2d):
                init.kaiming_normal_(module.weight, mode="fan_out")
                if module.bias is not None:
                    init.zeros_(module.bias)
            elif isinstance(module, (BatchNorm2d, GroupNorm)):
                init.ones_(module.weight)
                init.zeros_(module.bias)
            elif isinstance(module, Linear):
                init_range = 1.0 / math.sqrt(module.out_features)
                init.uniform_(module.weight, -init_range, init_range)
                init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(x.flatten(1))


def _efficientnet(
    width_mult: float, depth_mult: float, dropout: float, weights: WeightsPath, kwargs: dict
) -> EfficientNet:
    conf = partial(MBConvConfig, width_mult=width_mult, depth_mult=depth_mult)
    setting = [
        conf(1, 3, 1, 32, 16, 1),
        conf(6, 3, 2, 16, 24, 2),
        conf(6, 5, 2, 24, 40, 2),
        conf(6, 3, 2, 40, 80, 3),
        conf(6, 5, 1, 80, 112, 3),
        conf(6, 5, 2, 112, 192, 4),
        conf(6, 3, 1, 192, 320, 1),
    ]
    model = EfficientNet(setting, kwargs.pop("dropout", dropout), **kwargs)
    return load_weights(model, weights)


def efficientnet_b0(*, weights: WeightsPath = None, **kwargs) -> EfficientNet:
    """EfficientNet-B0. ``weights``: a local torchvision state_dict file; kwargs go to :class:`EfficientNet`."""
    return _efficientnet(1.0, 1.0, 0.2, weights, kwargs)


def efficientnet_b1(*, weights: WeightsPath = None, **kwargs) -> EfficientNet:
    """EfficientNet-B1. ``weights``: a local torchvision state_dict file; kwargs go to :class:`EfficientNet`."""
    return _efficientnet(1.0, 1.1, 0.2, weights, kwargs)


def efficientnet_b2(*, weights: WeightsPath = None, **kwargs) -> EfficientNet:
    """EfficientNet-B2. ``weights``: a local torchvision state_dict file; kwargs go to :class:`EfficientNet`."""
    return _efficientnet(1.1, 1.2, 0.3, weights, kwargs)


def efficientnet_b3(*, weights: WeightsPath = None, **kwargs) -> EfficientNet:
    """EfficientNet-B3. ``weights``: a local torchvision state_dict file; kwargs go to :class:`EfficientNet`."""
    return _efficientnet(1.2, 1.4, 0.3, weights, kwargs)
