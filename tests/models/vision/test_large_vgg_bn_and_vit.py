"""VGG's batch-norm configurations and ViT-B/16 run, export and train as every zoo model does.

The plain VGG configurations are in test_large_vgg.py (its docstring says why each configuration
runs on both executors and VGG-16 also exports and trains). ViT-B/16 is built with
``image_size=32`` (its constructor's argument, as in torchvision): the twelve 768-wide encoder
layers of ViT-B/16 over four patches and the class token. Its 224x224 layout is checked against
torchvision's by test_layouts.py.
"""

from __future__ import annotations

import pytest

import onnxnn
from onnxnn.models import vision

from .common import assert_kernels_match_onnxruntime, assert_runs_exports_and_trains, build, drop_caches


@pytest.mark.parametrize("name", ["vgg11_bn", "vgg13_bn", "vgg19_bn"])
def test_vgg_with_batch_norm_runs_on_both_executors(name):
    onnxnn.manual_seed(0)
    model = build(name).eval()
    assert_kernels_match_onnxruntime(model, name)
    del model
    drop_caches()


def test_vgg16_bn_runs_exports_and_trains():
    onnxnn.manual_seed(0)
    assert_runs_exports_and_trains("vgg16_bn", build("vgg16_bn"))


def test_vit_b_16_runs_exports_and_trains():
    onnxnn.manual_seed(0)
    model = vision.vit_b_16(image_size=32)
    assert model.encoder.pos_embedding.shape == (1, 5, 768) and len(model.encoder.layers) == 12
    with onnxnn.no_grad():  # torchvision initializes the head to zeros: every output and gradient would be 0
        model.heads.head.weight.copy_(onnxnn.randn(*model.heads.head.weight.shape) * 0.1)
    assert_runs_exports_and_trains("vit_b_16", model, image_size=32)
