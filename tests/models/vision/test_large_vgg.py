"""VGG's four plain configurations run on both executors; VGG-16 also exports and trains (issue 15's "for each model").

VGG is the zoo's largest: its 25088x4096 classifier alone is 0.4 GB of float32, so an export is
0.5 GB and building, exporting and training one takes 15-25 s. The four configurations differ only
in how many identical 3x3 convolution blocks ``features`` stacks (test_layouts.py checks each
against torchvision's layout), so every one is built and run on both executors, and the most used,
VGG-16, is also exported with a dynamic batch axis and trained one SGD step: deeper or shallower
stacks of the same block export and train through the same code. The batch-norm configurations
are in test_large_vgg_bn_and_vit.py, so the two halves run on two workers. The input is the
smallest VGG takes: its adaptive pooling gives the classifier the 7x7 map it expects from a 32x32
image.
"""

from __future__ import annotations

import pytest

import onnxnn

from .common import assert_kernels_match_onnxruntime, assert_runs_exports_and_trains, build, drop_caches


@pytest.mark.parametrize("name", ["vgg11", "vgg13", "vgg19"])
def test_vgg_runs_on_both_executors(name):
    onnxnn.manual_seed(0)
    model = build(name).eval()
    assert_kernels_match_onnxruntime(model, name)
    del model
    drop_caches()


def test_vgg16_runs_exports_and_trains():
    onnxnn.manual_seed(0)
    assert_runs_exports_and_trains("vgg16", build("vgg16"))
