"""RegNetY-400MF and RegNetX-400MF with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Callable, Optional

import numpy as np

from ...nn import AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Linear, Module, ReLU, Sequential, init
from ...runtime.tensor import Tensor
from ._layers import Conv2dNormActivation, SqueezeExcitation, make_divisible
from ._weights import WeightsPath, load_weights

__all__ = ["RegNet", "BlockParams", "regnet_y_400mf", "regnet_x_400mf"]


class SimpleStemIN(Conv2dNormActivation):
    """The stem: a stride-2 3x3 convolution, normalization, activation."""

    def __init__(self, width_in: int, width_out: int, norm_layer: Callable[..., Module], activation_layer) -> None:
        super().__init__(
            width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer, activation_layer=activation_layer
        )


class BottleneckTransform(Sequential):
    """``a`` 1x1, ``b`` grouped 3x3 (strided), optional ``se``, ``c`` 1x1 without activation."""

    def __init__(
        self,
        width_in: int,
        width_out: int,
        stride: int,
        norm_layer: Callable[..., Module],
        activation_layer: Callable[..., Module],
        group_width: int,
        bottleneck_multiplier: float,
        se_ratio: Optional[float],
    ) -> None:
        layers: OrderedDict[str, Module] = OrderedDict()
        w_b = int(round(width_out * bottleneck_multiplier))
        groups = w_b // group_width
        layers["a"] = Conv2dNormActivation(
            width_in, w_b, kernel_size=1, stride=1, norm_layer=norm_layer, activation_layer=activation_layer
        )
        layers["b"] = Conv2dNormActivation(
            w_b,
            w_b,
            kernel_size=3,
            stride=stride,
            groups=groups,
            norm_layer=norm_layer,
            activation_layer=activation_layer,
        )
        if se_ratio:
            # The squeeze width follows the block's input width, not the bottleneck's (as in the paper).
            width_se_out = int(round(se_ratio * width_in))
            layers["se"] = SqueezeExcitation(w_b, width_se_out, activation=activation_layer)
        layers["c"] = Conv2dNormActivation(
            w_b, width_out, kernel_size=1, stride=1, norm_layer=norm_layer, activation_layer=None
        )
        super().__init__(layers)


class ResBottleneckBlock(Module):
    """Residual bottleneck: ``x + f(x)``, or ``proj(x) + f(x)`` when the width or resolution changes."""

    def __init__(
        self,
        width_in: int,
        width_out: int,
        stride: int,
        norm_layer: Callable[..., Module],
        activation_layer: Callable[..., Module],
        group_width: int = 1,
        bottleneck_multiplier: float = 1.0,
        se_ratio: Optional[float] = None,
    ) -> None:
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(
                width_in, width_out, kernel_size=1, stride=stride, norm_layer=norm_layer, activation_layer=None
            )
        self.f = BottleneckTransform(
            width_in, width_out, stride, norm_layer, activation_layer, group_width, bottleneck_multiplier, se_ratio
        )
        self.activation = activation_layer(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        shortcut = x if self.proj is None else self.proj(x)
        return self.activation(shortcut + self.f(x))


class AnyStage(Sequential):
    """``depth`` blocks named ``block<stage>-<i>``; the first one changes the width and strides."""

    def __init__(
        self,
        width_in: int,
        width_out: int,
        stride: int,
        depth: int,
        block_constructor: Callable[..., Module],
        norm_layer: Callable[..., Module],
        activation_layer: Callable[..., Module],
        group_width: int,
        bottleneck_multiplier: float,
        se_ratio: Optional[float] = None,
        stage_index: int = 0,
    ) -> None:
        super().__init__()
        for i in range(depth):
            block = block_constructor(
                width_in if i == 0 else width_out,
                width_out,
                stride if i == 0 else 1,
                norm_layer,
                activation_layer,
                group_width,
                bottleneck_multiplier,
                se_ratio,
            )
            self.add_module(f"block{stage_index}-{i}", block)


class BlockParams:
    """The stages' depths, widths, group widths, bottleneck multipliers and strides."""

    def __init__(
        self,
        depths: list[int],
        widths: list[int],
        group_widths: list[int],
        bottleneck_multipliers: list[float],
        strides: list[int],
        se_ratio: Optional[float] = None,
    ) -> None:
        self.depths = depths
        self.widths = widths
        self.group_widths = group_widths
        self.bottleneck_multipliers = bottleneck_multipliers
        self.strides = strides
        self.se_ratio = se_ratio

    @classmethod
    def from_init_params(
        cls,
        depth: int,
        w_0: int,
        w_a: float,
        w_m: float,
        group_width: int,
        bottleneck_multiplier: float = 1.0,
        se_ratio: Optional[float] = None,
    ) -> "BlockParams":
        """The quantized linear width rule of arXiv:2003.13678, section 3.3 (per-block widths grouped into stages).

        Computed in float32 as torchvision does, so the rounding and hence the widths agree.
        """
        quant, stride = 8, 2
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError("Invalid RegNet settings")
        widths_cont = np.arange(depth, dtype=np.float32) * np.float32(w_a) + np.float32(w_0)
        block_capacity = np.round(np.log(widths_cont / np.float32(w_0)) / np.float32(math.log(w_m)))
        block_widths = (
            (np.round(np.float32(w_0) * np.power(np.float32(w_m), block_capacity) / np.float32(quant)) * quant)
            .astype(np.int32)
            .tolist()
        )
        num_stages = len(set(block_widths))
        split_helper = zip(block_widths + [0], [0] + block_widths, block_widths + [0], [0] + block_widths)
        splits = [w != wp or r != rp for w, wp, r, rp in split_helper]
        stage_widths = [w for w, t in zip(block_widths, splits[:-1]) if t]
        stage_depths = np.diff([d for d, t in enumerate(splits) if t]).astype(int).tolist()
        multipliers = [bottleneck_multiplier] * num_stages
        group_widths = [group_width] * num_stages
        stage_widths, group_widths = cls._adjust_widths_groups_compatibilty(stage_widths, multipliers, group_widths)
        return cls(stage_depths, stage_widths, group_widths, multipliers, [stride] * num_stages, se_ratio)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths, bottleneck_ratios, group_widths):
        # Bottleneck widths must be multiples of their group width.
        widths = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        group_widths_min = [min(g, w_bot) for g, w_bot in zip(group_widths, widths)]
        ws_bot = [make_divisible(w_bot, g) for w_bot, g in zip(widths, group_widths_min)]
        stage_widths = [int(w_bot / b) for w_bot, b in zip(ws_bot, bottleneck_ratios)]
        return stage_widths, group_widths_min

    def _get_expanded_params(self):
        return zip(self.widths, self.strides, self.depths, self.group_widths, self.bottleneck_multipliers)


class RegNet(Module):
    """RegNet (arXiv:2003.13678) as torchvision builds it: ``stem``, ``trunk_output``, ``avgpool``, ``fc``."""

    def __init__(
        self,
        block_params: BlockParams,
        num_classes: int = 1000,
        stem_width: int = 32,
        stem_type: Optional[Callable[..., Module]] = None,
        block_type: Optional[Callable[..., Module]] = None,
        norm_layer: Optional[Callable[..., Module]] = None,
        activation: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        stem_type = stem_type or SimpleStemIN
        norm_layer = norm_layer or BatchNorm2d
        block_type = block_type or ResBottleneckBlock
        activation = activation or ReLU
        self.stem = stem_type(3, stem_width, norm_layer, activation)
        current_width = stem_width
        blocks = []
        for i, (width_out, stride, depth, group_width, multiplier) in enumerate(block_params._get_expanded_params()):
            stage = AnyStage(
                current_width,
                width_out,
                stride,
                depth,
                block_type,
                norm_layer,
                activation,
                group_width,
                multiplier,
                block_params.se_ratio,
                stage_index=i + 1,
            )
            blocks.append((f"block{i + 1}", stage))
            current_width = width_out
        self.trunk_output = Sequential(OrderedDict(blocks))
        self.avgpool = AdaptiveAvgPool2d((1, 1))
        self.fc = Linear(in_features=current_width, out_features=num_classes)
        for module in self.modules():
            if isinstance(module, Conv2d):
                fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels
                init.normal_(module.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(module, BatchNorm2d):
                init.ones_(module.weight)
                init.zeros_(module.bias)
            elif isinstance(module, Linear):
                init.normal_(module.weight, mean=0.0, std=0.01)
                init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.trunk_output(self.stem(x)))
        return self.fc(x.flatten(1))


def _regnet(block_params: BlockParams, weights: WeightsPath, kwargs: dict) -> RegNet:
    norm_layer = kwargs.pop("norm_layer", partial(BatchNorm2d, eps=1e-05, momentum=0.1))
    return load_weights(RegNet(block_params, norm_layer=norm_layer, **kwargs), weights)


def regnet_y_400mf(*, weights: WeightsPath = None, **kwargs) -> RegNet:
    """RegNetY-400MF (with squeeze-excitation). ``weights``: a local torchvision state_dict file."""
    params = BlockParams.from_init_params(depth=16, w_0=48, w_a=27.89, w_m=2.09, group_width=8, se_ratio=0.25)
    return _regnet(params, weights, kwargs)


def regnet_x_400mf(*, weights: WeightsPath = None, **kwargs) -> RegNet:
    """RegNetX-400MF. ``weights``: a local torchvision state_dict file."""
    params = BlockParams.from_init_params(depth=22, w_0=24, w_a=24.48, w_m=2.54, group_width=16)
    return _regnet(params, weights, kwargs)
