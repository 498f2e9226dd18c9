"""ResNet, ResNeXt and Wide ResNet with torchvision's module tree, parameter names and initialization.

``resnet18(weights="resnet18.pth")`` loads a state_dict saved from ``torchvision.models.resnet18``.
"""

from __future__ import annotations

from typing import Callable, Optional

from ...nn import (
    AdaptiveAvgPool2d,
    BatchNorm2d,
    Conv2d,
    GroupNorm,
    Linear,
    MaxPool2d,
    Module,
    ReLU,
    Sequential,
    init,
)
from ...runtime.tensor import Tensor
from ._weights import WeightsPath, load_weights

__all__ = [
    "ResNet",
    "BasicBlock",
    "Bottleneck",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "resnext50_32x4d",
    "resnext101_32x8d",
    "resnext101_64x4d",
    "wide_resnet50_2",
    "wide_resnet101_2",
]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1) -> Conv2d:
    """3x3 convolution with padding, no bias (a BatchNorm follows)."""
    return Conv2d(
        in_planes,
        out_planes,
        kernel_size=3,
        stride=stride,
        padding=dilation,
        groups=groups,
        bias=False,
        dilation=dilation,
    )


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> Conv2d:
    """1x1 convolution, no bias."""
    return Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion: int = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: Optional[Module] = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = BatchNorm2d
        if groups != 1 or base_width != 64:
            raise ValueError("BasicBlock only supports groups=1 and base_width=64")
        if dilation > 1:
            raise NotImplementedError("Dilation > 1 not supported in BasicBlock")
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(Module):
    """1x1 reduce, 3x3 (grouped for ResNeXt), 1x1 expand, with a residual connection (ResNet-50 and up).

    The stride sits on the 3x3 convolution (ResNet V1.5), as in torchvision.
    """

    expansion: int = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: Optional[Module] = None,
        groups: int = 1,
        base_width: int = 64,
        dilation: int = 1,
        norm_layer: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(Module):
    """torchvision's ResNet: stem, four stages of ``block``, global average pool, ``fc``.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: number of blocks in each of the four stages.
        num_classes: output size of ``fc``.
        zero_init_residual: start each block's last BatchNorm weight at zero.
        groups, width_per_group: ResNeXt's cardinality and width (Wide ResNet doubles the width).
        replace_stride_with_dilation: for stages 2-4, dilate instead of striding.
        norm_layer: the normalization module (default BatchNorm2d).
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: list[int],
        num_classes: int = 1000,
        zero_init_residual: bool = False,
        groups: int = 1,
        width_per_group: int = 64,
        replace_stride_with_dilation: Optional[list[bool]] = None,
        norm_layer: Optional[Callable[..., Module]] = None,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            norm_layer = BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = 64
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError(
                f"replace_stride_with_dilation should be None or a 3-element tuple, got {replace_stride_with_dilation}"
            )
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = ReLU(inplace=True)
        self.maxpool = MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=replace_stride_with_dilation[2])
        self.avgpool = AdaptiveAvgPool2d((1, 1))
        self.fc = Linear(512 * block.expansion, num_classes)

        for module in self.modules():
            if isinstance(module, Conv2d):
                init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, (BatchNorm2d, GroupNorm)):
                init.constant_(module.weight, 1)
                init.constant_(module.bias, 0)
        # Each residual branch then starts as the identity, which helps training (arXiv:1706.02677).
        if zero_init_residual:
            for module in self.modules():
                if isinstance(module, Bottleneck) and module.bn3.weight is not None:
                    init.constant_(module.bn3.weight, 0)
                elif isinstance(module, BasicBlock) and module.bn2.weight is not None:
                    init.constant_(module.bn2.weight, 0)

    def _make_layer(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        planes: int,
        blocks: int,
        stride: int = 1,
        dilate: bool = False,
    ) -> Sequential:
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )
        layers = [
            block(
                self.inplanes, planes, stride, downsample, self.groups, self.base_width, previous_dilation, norm_layer
            )
        ]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(
                block(
                    self.inplanes,
                    planes,
                    groups=self.groups,
                    base_width=self.base_width,
                    dilation=self.dilation,
                    norm_layer=norm_layer,
                )
            )
        return Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.avgpool(x)
        return self.fc(x.flatten(1))


def _resnet(block: type, layers: list[int], weights: WeightsPath, **kwargs) -> ResNet:
    return load_weights(ResNet(block, layers, **kwargs), weights)


def resnet18(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNet-18 (arXiv:1512.03385). ``weights``: a local torchvision state_dict file; kwargs go to :class:`ResNet`."""
    return _resnet(BasicBlock, [2, 2, 2, 2], weights, **kwargs)


def resnet34(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNet-34 (arXiv:1512.03385). ``weights``: a local torchvision state_dict file; kwargs go to :class:`ResNet`."""
    return _resnet(BasicBlock, [3, 4, 6, 3], weights, **kwargs)


def resnet50(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNet-50 (arXiv:1512.03385). ``weights``: a local torchvision state_dict file; kwargs go to :class:`ResNet`."""
    return _resnet(Bottleneck, [3, 4, 6, 3], weights, **kwargs)


def resnet101(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNet-101 (arXiv:1512.03385). ``weights``: a local torchvision state_dict file; kwargs go to :class:`ResNet`."""
    return _resnet(Bottleneck, [3, 4, 23, 3], weights, **kwargs)


def resnet152(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNet-152 (arXiv:1512.03385). ``weights``: a local torchvision state_dict file; kwargs go to :class:`ResNet`."""
    return _resnet(Bottleneck, [3, 8, 36, 3], weights, **kwargs)


def resnext50_32x4d(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNeXt-50 32x4d (arXiv:1611.05431): 32 groups of width 4."""
    return _resnet(Bottleneck, [3, 4, 6, 3], weights, groups=32, width_per_group=4, **kwargs)


def resnext101_32x8d(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNeXt-101 32x8d (arXiv:1611.05431): 32 groups of width 8."""
    return _resnet(Bottleneck, [3, 4, 23, 3], weights, groups=32, width_per_group=8, **kwargs)


def resnext101_64x4d(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """ResNeXt-101 64x4d (arXiv:1611.05431): 64 groups of width 4."""
    return _resnet(Bottleneck, [3, 4, 23, 3], weights, groups=64, width_per_group=4, **kwargs)


def wide_resnet50_2(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """Wide ResNet-50-2 (arXiv:1605.07146): bottleneck width doubled."""
    return _resnet(Bottleneck, [3, 4, 6, 3], weights, width_per_group=64 * 2, **kwargs)


def wide_resnet101_2(*, weights: WeightsPath = None, **kwargs) -> ResNet:
    """Wide ResNet-101-2 (arXiv:1605.07146): bottleneck width doubled."""
    return _resnet(Bottleneck, [3, 4, 23, 3], weights, width_per_group=64 * 2, **kwargs)
