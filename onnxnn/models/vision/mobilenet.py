"""MobileNetV2 and MobileNetV3 with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

from ...nn import (
    AdaptiveAvgPool2d,
    BatchNorm2d,
    Conv2d,
    Dropout,
    GroupNorm,
    Hardsigmoid,
    Hardswish,
    Linear,
    Module,
    ReLU,
    ReLU6,
    Sequential,
    init,
)
from ...nn import functional as F
from ...runtime.tensor import Tensor
from ._layers import Conv2dNormActivation, SqueezeExcitation, make_divisible
from ._weights import WeightsPath, load_weights

__all__ = [
    "MobileNetV2",
    "MobileNetV3",
    "InvertedResidual",
    "InvertedResidualConfig",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
]


def _init_mobilenet(model: Module) -> None:
    for module in model.modules():
        if isinstance(module, Conv2d):
            init.kaiming_normal_(module.weight, mode="fan_out")
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, (BatchNorm2d, GroupNorm)):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, Linear):
            init.normal_(module.weight, 0, 0.01)
            init.zeros_(module.bias)


class InvertedResidual(Module):
    """MobileNetV2's block: 1x1 expand, 3x3 depthwise, 1x1 linear projection; residual when shapes allow."""

    def __init__(
        self, inp: int, oup: int, stride: int, expand_ratio: int, norm_layer: Optional[Callable[..., Module]] = None
    ) -> None:
        super().__init__()
        self.stride = stride
        if stride not in [1, 2]:
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        if norm_layer is None:
            norm_layer = BatchNorm2d
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers: list[Module] = []
        if expand_ratio != 1:
            layers.append(
                Conv2dNormActivation(inp, hidden_dim, kernel_size=1, norm_layer=norm_layer, activation_layer=ReLU6)
            )
        layers.extend(
            [
                Conv2dNormActivation(
                    hidden_dim,
                    hidden_dim,
                    stride=stride,
                    groups=hidden_dim,
                    norm_layer=norm_layer,
                    activation_layer=ReLU6,
                ),
                Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                norm_layer(oup),
            ]
        )
        self.conv = Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x: Tensor) -> Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(Module):
    """MobileNetV2 (arXiv:1801.04381) as torchvision builds it: ``features``, then ``classifier``.

    Args:
        num_classes: output size.
        width_mult: scales every channel count (rounded by ``round_nearest``).
        inverted_residual_setting: rows of (expansion t, channels c, repeats n, stride s).
        dropout: dropout probability before the classifier's Linear.
    """

    def __init__(
        self,
        num_classes: int = 1000,
        width_mult: float = 1.0,
        inverted_residual_setting: Optional[list[list[int]]] = None,
        round_nearest: int = 8,
        block: Optional[Callable[..., Module]] = None,
        norm_layer: Optional[Callable[..., Module]] = None,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        if block is None:
            block = InvertedResidual
        if norm_layer is None:
            norm_layer = BatchNorm2d
        input_channel = 32
        last_channel = 1280
        if inverted_residual_setting is None:
            inverted_residual_setting = [
                [1, 16, 1, 1],
                [6, 24, 2, 2],
                [6, 32, 3, 2],
                [6, 64, 4, 2],
                [6, 96, 3, 1],
                [6, 160, 3, 2],
                [6, 320, 1, 1],
            ]
        if len(inverted_residual_setting) == 0 or len(inverted_residual_setting[0]) != 4:
            raise ValueError(
                f"inverted_residual_setting should be non-empty or a 4-element list, got {inverted_residual_setting}"
            )
        input_channel = make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features: list[Module] = [
            Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer, activation_layer=ReLU6)
        ]
        for t, c, n, s in inverted_residual_setting:
            output_channel = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(block(input_channel, output_channel, stride, expand_ratio=t, norm_layer=norm_layer))
                input_channel = output_channel
        features.append(
            Conv2dNormActivation(
                input_channel, self.last_channel, kernel_size=1, norm_layer=norm_layer, activation_layer=ReLU6
            )
        )
        self.features = Sequential(*features)
        self.classifier = Sequential(Dropout(p=dropout), Linear(self.last_channel, num_classes))
        _init_mobilenet(self)

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        return self.classifier(x.flatten(1))


class InvertedResidualConfig:
    """One MobileNetV3 block's settings; channel counts are scaled by ``width_mult`` and rounded to 8."""

    def __init__(
        self,
        input_channels: int,
        kernel: int,
        expanded_channels: int,
        out_channels: int,
        use_se: bool,
        activation: str,
        stride: int,
        dilation: int,
        width_mult: float,
    ) -> None:
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels: int, width_mult: float) -> int:
        return make_divisible(channels * width_mult, 8)


class _V3InvertedResidual(Module):
    """MobileNetV3's block: expand, depthwise, optional squeeze-excitation, project; held in ``block``."""

    def __init__(self, cnf: InvertedResidualConfig, norm_layer: Callable[..., Module]) -> None:
        super().__init__()
        if not (1 <= cnf.stride <= 2):
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        activation_layer = Hardswish if cnf.use_hs else ReLU
        layers: list[Module] = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(
                Conv2dNormActivation(
                    cnf.input_channels,
                    cnf.expanded_channels,
                    kernel_size=1,
                    norm_layer=norm_layer,
                    activation_layer=activation_layer,
                )
            )
        stride = 1 if cnf.dilation > 1 else cnf.stride
        layers.append(
            Conv2dNormActivation(
                cnf.expanded_channels,
                cnf.expanded_channels,
                kernel_size=cnf.kernel,
                stride=stride,
                dilation=cnf.dilation,
                groups=cnf.expanded_channels,
                norm_layer=norm_layer,
                activation_layer=activation_layer,
            )
        )
        if cnf.use_se:
            squeeze_channels = make_divisible(cnf.expanded_channels // 4, 8)
            layers.append(SqueezeExcitation(cnf.expanded_channels, squeeze_channels, scale_activation=Hardsigmoid))
        layers.append(
            Conv2dNormActivation(
                cnf.expanded_channels, cnf.out_channels, kernel_size=1, norm_layer=norm_layer, activation_layer=None
            )
        )
        self.block = Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input: Tensor) -> Tensor:
        result = self.block(input)
        if self.use_res_connect:
            result = result + input
        return result


class MobileNetV3(Module):
    """MobileNetV3 (arXiv:1905.02244) as torchvision builds it: ``features``, ``avgpool``, ``classifier``.

    Args:
        inverted_residual_setting: the blocks' :class:`InvertedResidualConfig` list.
        last_channel: width of the classifier's hidden Linear.
    """

    def __init__(
        self,
        inverted_residual_setting: list[InvertedResidualConfig],
        last_channel: int,
        num_classes: int = 1000,
        block: Optional[Callable[..., Module]] = None,
        norm_layer: Optional[Callable[..., Module]] = None,
        dropout: float = 0.2,
    ) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be List[InvertedResidualConfig]")
        if block is None:
            block = _V3InvertedResidual
        if norm_layer is None:
            norm_layer = partial(BatchNorm2d, eps=0.001, momentum=0.01)
        firstconv_output_channels = inverted_residual_setting[0].input_channels
        layers: list[Module] = [
            Conv2dNormActivation(
                3, firstconv_output_channels, kernel_size=3, stride=2, norm_layer=norm_layer, activation_layer=Hardswish
            )
        ]
        for cnf in inverted_residual_setting:
            layers.append(block(cnf, norm_layer))
        lastconv_input_channels = inverted_residual_setting[-1].out_channels
        lastconv_output_channels = 6 * lastconv_input_channels
        layers.append(
            Conv2dNormActivation(
                lastconv_input_channels,
                lastconv_output_channels,
                kernel_size=1,
                norm_layer=norm_layer,
                activation_layer=Hardswish,
            )
        )
        self.features = Sequential(*layers)
        self.avgpool = AdaptiveAvgPool2d(1)
        self.classifier = Sequential(
            Linear(lastconv_output_channels, last_channel),
            Hardswish(inplace=True),
            Dropout(p=dropout, inplace=True),
            Linear(last_channel, num_classes),
        )
        _init_mobilenet(self)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(x.flatten(1))


def _mobilenet_v3_conf(
    arch: str, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False
) -> tuple[list[InvertedResidualConfig], int]:
    reduce_divider = 2 if reduced_tail else 1
    dilation = 2 if dilated else 1
    conf = partial(InvertedResidualConfig, width_mult=width_mult)
    adjust_channels = partial(InvertedResidualConfig.adjust_channels, width_mult=width_mult)
    rd = reduce_divider
    if arch == "mobilenet_v3_large":
        rows = [
            (16, 3, 16, 16, False, "RE", 1, 1),
            (16, 3, 64, 24, False, "RE", 2, 1),
            (24, 3, 72, 24, False, "RE", 1, 1),
            (24, 5, 72, 40, True, "RE", 2, 1),
            (40, 5, 120, 40, True, "RE", 1, 1),
            (40, 5, 120, 40, True, "RE", 1, 1),
            (40, 3, 240, 80, False, "HS", 2, 1),
            (80, 3, 200, 80, False, "HS", 1, 1),
            (80, 3, 184, 80, False, "HS", 1, 1),
            (80, 3, 184, 80, False, "HS", 1, 1),
            (80, 3, 480, 112, True, "HS", 1, 1),
            (112, 3, 672, 112, True, "HS", 1, 1),
            (112, 5, 672, 160 // rd, True, "HS", 2, dilation),
            (160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dilation),
            (160 // rd, 5, 960 // rd, 160 // rd, True, "HS", 1, dilation),
        ]
        last_channel = adjust_channels(1280 // rd)
    elif arch == "mobilenet_v3_small":
        rows = [
            (16, 3, 16, 16, True, "RE", 2, 1),
            (16, 3, 72, 24, False, "RE", 2, 1),
            (24, 3, 88, 24, False, "RE", 1, 1),
            (24, 5, 96, 40, True, "HS", 2, 1),
            (40, 5, 240, 40, True, "HS", 1, 1),
            (40, 5, 240, 40, True, "HS", 1, 1),
            (40, 5, 120, 48, True, "HS", 1, 1),
            (48, 5, 144, 48, True, "HS", 1, 1),
            (48, 5, 288, 96 // rd, True, "HS", 2, dilation),
            (96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dilation),
            (96 // rd, 5, 576 // rd, 96 // rd, True, "HS", 1, dilation),
        ]
        last_channel = adjust_channels(1024 // rd)
    else:
        raise ValueError(f"Unsupported model type {arch}")
    return [conf(*row) for row in rows], last_channel


def mobilenet_v2(*, weights: WeightsPath = None, **kwargs) -> MobileNetV2:
    """MobileNetV2. ``weights``: a local torchvision state_dict file; kwargs go to :class:`MobileNetV2`."""
    return load_weights(MobileNetV2(**kwargs), weights)


def _mobilenet_v3(arch: str, weights: WeightsPath, kwargs: dict) -> MobileNetV3:
    config_keys = ("width_mult", "reduced_tail", "dilated")
    config = {key: kwargs.pop(key) for key in config_keys if key in kwargs}
    setting, last_channel = _mobilenet_v3_conf(arch, **config)
    return load_weights(MobileNetV3(setting, last_channel, **kwargs), weights)


def mobilenet_v3_large(*, weights: WeightsPath = None, **kwargs) -> MobileNetV3:
    """MobileNetV3-Large. ``weights``: a local torchvision state_dict file; kwargs go to :class:`MobileNetV3`."""
    return _mobilenet_v3("mobilenet_v3_large", weights, kwargs)


def mobilenet_v3_small(*, weights: WeightsPath = None, **kwargs) -> MobileNetV3:
    """MobileNetV3-Small. ``weights``: a local torchvision state_dict file; kwargs go to :class:`MobileNetV3`."""
    return _mobilenet_v3("mobilenet_v3_small", weights, kwargs)
