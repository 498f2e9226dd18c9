"""torchvision's image classification models, with its module trees and state_dict names.

Each builder takes ``weights=`` a local ``.pth``/``.pt``/``.safetensors`` file holding the
torchvision model's ``state_dict()``, and the constructor's keyword arguments (``num_classes``...).
"""

from __future__ import annotations

from .mobilenet import MobileNetV2, MobileNetV3, mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small
from .resnet import (
    ResNet,
    resnet18,
    resnet34,
    resnet50,
    resnet101,
    resnet152,
    resnext50_32x4d,
    resnext101_32x8d,
    resnext101_64x4d,
    wide_resnet50_2,
    wide_resnet101_2,
)
from .transforms import imagenet_preprocess
from .vit import VisionTransformer, vit_b_16, vit_b_32, vit_h_14, vit_l_16, vit_l_32

__all__ = [
    "ResNet",
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
    "MobileNetV2",
    "MobileNetV3",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "VisionTransformer",
    "vit_b_16",
    "vit_b_32",
    "vit_l_16",
    "vit_l_32",
    "vit_h_14",
    "imagenet_preprocess",
]
