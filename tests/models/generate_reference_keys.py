"""Writes tests/models/reference/vision/<name>.json from torchvision: each model's state_dict layout.

Run once, when a model is added, with an interpreter that has torch and torchvision:

    /work/tvenv/bin/python tests/models/generate_reference_keys.py [NAME ...]

(names: only those models; by default all).

Each JSON holds ``{"builder": ..., "kwargs": ..., "torchvision": <version>, "state_dict": [[key, shape, dtype], ...]}``
in state_dict order, so the tests compare onnxnn's models with torchvision's without importing torch.
"""

from __future__ import annotations

import json
import pathlib
import sys

import torch
import torchvision
from torchvision import models

OUT = pathlib.Path(__file__).parent / "reference" / "vision"

# name -> (torchvision callable, kwargs). Small ViT configurations come from the constructor.
VISION_MODELS = {
    "resnet18": ("resnet18", {}),
    "resnet34": ("resnet34", {}),
    "resnet50": ("resnet50", {}),
    "resnet101": ("resnet101", {}),
    "resnet152": ("resnet152", {}),
    "resnext50_32x4d": ("resnext50_32x4d", {}),
    "wide_resnet50_2": ("wide_resnet50_2", {}),
    "mobilenet_v2": ("mobilenet_v2", {}),
    "mobilenet_v3_small": ("mobilenet_v3_small", {}),
    "mobilenet_v3_large": ("mobilenet_v3_large", {}),
    "vit_b_16": ("vit_b_16", {}),
    "vit_small": (
        "VisionTransformer",
        {"image_size": 32, "patch_size": 16, "num_layers": 2, "num_heads": 2, "hidden_dim": 32, "mlp_dim": 64},
    ),
    "resnet18_10_classes": ("resnet18", {"num_classes": 10}),
    "efficientnet_b0": ("efficientnet_b0", {}),
    "efficientnet_b1": ("efficientnet_b1", {}),
    "efficientnet_b2": ("efficientnet_b2", {}),
    "efficientnet_b3": ("efficientnet_b3", {}),
    "vgg11": ("vgg11", {}),
    "vgg11_bn": ("vgg11_bn", {}),
    "vgg13": ("vgg13", {}),
    "vgg13_bn": ("vgg13_bn", {}),
    "vgg16": ("vgg16", {}),
    "vgg16_bn": ("vgg16_bn", {}),
    "vgg19": ("vgg19", {}),
    "vgg19_bn": ("vgg19_bn", {}),
    "squeezenet1_0": ("squeezenet1_0", {}),
    "squeezenet1_1": ("squeezenet1_1", {}),
    "densenet121": ("densenet121", {}),
    "convnext_tiny": ("convnext_tiny", {}),
    "regnet_y_400mf": ("regnet_y_400mf", {}),
    "regnet_x_400mf": ("regnet_x_400mf", {}),
    "swin_t": ("swin_t", {}),
}


def state_dict_layout(model: torch.nn.Module) -> list:
    return [
        [key, list(value.shape), str(value.dtype).removeprefix("torch.")] for key, value in model.state_dict().items()
    ]


def main(names: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names or VISION_MODELS:
        builder, kwargs = VISION_MODELS[name]
        model = getattr(models, builder)(**kwargs)
        document = {
            "builder": builder,
            "kwargs": kwargs,
            "torchvision": torchvision.__version__,
            "state_dict": state_dict_layout(model),
        }
        (OUT / f"{name}.json").write_text(json.dumps(document, separators=(",", ":")) + "\n")
        print(name, len(document["state_dict"]))


if __name__ == "__main__":
    main(sys.argv[1:])
