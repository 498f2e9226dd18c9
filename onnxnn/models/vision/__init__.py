"""torchvision's image classification models, with its module trees and state_dict names.

Each builder takes ``weights=`` a local ``.pth``/``.pt``/``.safetensors`` file holding the
torchvision model's ``state_dict()``, and the constructor's keyword arguments (``num_classes``...).
"""

from __future__ import annotations

from .convnext import ConvNeXt, convnext_base, convnext_large, convnext_small, convnext_tiny
from .densenet import DenseNet, densenet121, densenet161, densenet169, densenet201
from .efficientnet import EfficientNet, efficientnet_b0, efficientnet_b1, efficientnet_b2, efficientnet_b3
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
from .regnet import RegNet, regnet_x_400mf, regnet_y_400mf
from .squeezenet import SqueezeNet, squeezenet1_0, squeezenet1_1
from .swin import SwinTransformer, swin_b, swin_s, swin_t
from .transforms import imagenet_preprocess
from .vgg import VGG, vgg11, vgg11_bn, vgg13, vgg13_bn, vgg16, vgg16_bn, vgg19, vgg19_bn
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
    "EfficientNet",
    "efficientnet_b0",
    "efficientnet_b1",
    "efficientnet_b2",
    "efficientnet_b3",
    "VGG",
    "vgg11",
    "vgg11_bn",
    "vgg13",
    "vgg13_bn",
    "vgg16",
    "vgg16_bn",
    "vgg19",
    "vgg19_bn",
    "SqueezeNet",
    "squeezenet1_0",
    "squeezenet1_1",
    "DenseNet",
    "densenet121",
    "densenet161",
    "densenet169",
    "densenet201",
    "ConvNeXt",
    "convnext_tiny",
    "convnext_small",
    "convnext_base",
    "convnext_large",
    "RegNet",
    "regnet_y_400mf",
    "regnet_x_400mf",
    "SwinTransformer",
    "swin_t",
    "swin_s",
    "swin_b",
    "imagenet_preprocess",
]
