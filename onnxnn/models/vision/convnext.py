"""ConvNeXt-Tiny/Small/Base/Large with torchvision's module tree, parameter names and initialization."""

from __future__ import annotations

from functools import partial
from typing import Callable, Optional

from ...nn import GELU, AdaptiveAvgPool2d, Conv2d, Flatten, LayerNorm, Linear, Module, Parameter, Sequential, init
from ...nn import functional as F
from ...runtime.creation import full
from ...runtime.tensor import Tensor
from ._layers import Conv2dNormActivation, StochasticDepth
from ._weights import WeightsPath, load_weights

__all__ = ["ConvNeXt", "CNBlockConfig", "convnext_tiny", "convnext_small", "convnext_base", "convnext_large"]


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channels of an (N, C, H, W) tensor."""

    def forward(self, x: Tensor) -> Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class Permute(Module):
    """Permutes the dimensions (``torchvision.ops.Permute``)."""

    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x: Tensor) -> Tensor:
        return x.permute(*self.dims)


class CNBlock(Module):
    """7x7 depthwise conv, LayerNorm, 4x MLP with GELU, scaled by ``layer_scale``, residual (stochastic depth)."""

    def __init__(
        self,
        dim: int,
        layer_scale: float,
        stochastic_depth_prob: float,
        norm_layer: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = partial(LayerNorm, eps=1e-6)
        self.block = Sequential(
            Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True),
            Permute([0, 2, 3, 1]),
            norm_layer(dim),
            Linear(in_features=dim, out_features=4 * dim, bias=True),
            GELU(),
            Linear(in_features=4 * dim, out_features=dim, bias=True),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = Parameter(full((dim, 1, 1), layer_scale))  # whole at construction, not a pending product
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, input: Tensor) -> Tensor:
        result = self.layer_scale * self.block(input)
        return self.stochastic_depth(result) + input


class CNBlockConfig:
    """One stage: ``num_layers`` blocks at ``input_channels``, then a downsampling to ``out_channels`` (None: last)."""

    def __init__(self, input_channels: int, out_channels: Optional[int], num_layers: int) -> None:
        self.input_channels = input_channels
        self.out_channels = out_channels
        self.num_layers = num_layers


class ConvNeXt(Module):
    """ConvNeXt (arXiv:2201.03545) as torchvision builds it: ``features``, ``avgpool``, ``classifier``.

    Args:
        block_setting: the stages' :class:`CNBlockConfig` list.
        stochastic_depth_prob: the last block's drop probability (earlier blocks' grow linearly to it).
        layer_scale: initial value of each block's per-channel output scale.
    """

    def __init__(
        self,
        block_setting: list[CNBlockConfig],
        stochastic_depth_prob: float = 0.0,
        layer_scale: float = 1e-6,
        num_classes: int = 1000,
        block: Optional[Callable[..., Module]] = None,
        norm_layer: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        if not block_setting:
            raise ValueError("The block_setting should not be empty")
        if not all(isinstance(s, CNBlockConfig) for s in block_setting):
            raise TypeError("The block_setting should be List[CNBlockConfig]")
        if block is None:
            block = CNBlock
        if norm_layer is None:
            norm_layer = partial(LayerNorm2d, eps=1e-6)
        first_channels = block_setting[0].input_channels
        layers: list[Module] = [
            Conv2dNormActivation(
                3,
                first_channels,
                kernel_size=4,
                stride=4,
                padding=0,
                norm_layer=norm_layer,
                activation_layer=None,
                bias=True,
            )
        ]
        total_stage_blocks = sum(cnf.num_layers for cnf in block_setting)
        stage_block_id = 0
        for cnf in block_setting:
            stage: list[Module] = []
            for _ in range(cnf.num_layers):
                sd_prob = stochastic_depth_prob * stage_block_id / (total_stage_blocks - 1.0)
                stage.append(block(cnf.input_channels, layer_scale, sd_prob))
                stage_block_id += 1
            layers.append(Sequential(*stage))
            if cnf.out_channels is not None:
                layers.append(
                    Sequential(
                        norm_layer(cnf.input_channels),
                        Conv2d(cnf.input_channels, cnf.out_channels, kernel_size=2, stride=2),
                    )
                )
        self.features = Sequential(*layers)
        self.avgpool = AdaptiveAvgPool2d(1)
        last = block_setting[-1]
        lastconv_output_channels = last.out_channels if last.out_channels is not None else last.input_channels
        self.classifier = Sequential(
            norm_layer(lastconv_output_channels), Flatten(1), Linear(lastconv_output_channels, num_classes)
        )
        for module in self.modules():
            if isinstance(module, (Conv2d, Linear)):
                init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    init.zeros_(module.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)))


def _convnext(settings: list[tuple], stochastic_depth_prob: float, weights: WeightsPath, kwargs: dict) -> ConvNeXt:
    block_setting = [CNBlockConfig(*row) for row in settings]
    stochastic_depth_prob = kwargs.pop("stochastic_depth_prob", stochastic_depth_prob)
    return load_weights(ConvNeXt(block_setting, stochastic_depth_prob=stochastic_depth_prob, **kwargs), weights)


def convnext_tiny(*, weights: WeightsPath = None, **kwargs) -> ConvNeXt:
    """ConvNeXt-Tiny. ``weights``: a local torchvision state_dict file; kwargs go to :class:`ConvNeXt`."""
    return _convnext([(96, 192, 3), (192, 384, 3), (384, 768, 9), (768, None, 3)], 0.1, weights, kwargs)


def convnext_small(*, weights: WeightsPath = None, **kwargs) -> ConvNeXt:
    """ConvNeXt-Small. ``weights``: a local torchvision state_dict file."""
    return _convnext([(96, 192, 3), (192, 384, 3), (384, 768, 27), (768, None, 3)], 0.4, weights, kwargs)


def convnext_base(*, weights: WeightsPath = None, **kwargs) -> ConvNeXt:
    """ConvNeXt-Base. ``weights``: a local torchvision state_dict file."""
    return _convnext([(128, 256, 3), (256, 512, 3), (512, 1024, 27), (1024, None, 3)], 0.5, weights, kwargs)


def convnext_large(*, weights: WeightsPath = None, **kwargs) -> ConvNeXt:
    """ConvNeXt-Large. ``weights``: a local torchvision state_dict file."""
    return _convnext([(192, 384, 3), (384, 768, 3), (768, 1536, 27), (1536, None, 3)], 0.5, weights, kwargs)
