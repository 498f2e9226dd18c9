"""The zoo's deeper and wider variants run as their base models do (issue 15's "for each model").

test_forward_export.py tests one model per block kind; these variants repeat or widen those blocks
(resnet34/101/152, wide_resnet50_2, efficientnet_b1-b3, mobilenet_v3_large, squeezenet1_0,
regnet_x_400mf). Each is built once per test and checked on both executors, exported with a dynamic
batch axis that onnxruntime runs at batch 1 and 8, and trained for one step. VGG and
vit_b_16, the largest, have files of their own (test_large_vgg.py, test_large_vgg_bn_and_vit.py).
"""

from __future__ import annotations


import pytest

import onnxnn

from .common import (
    assert_exports_with_a_dynamic_batch,
    assert_kernels_match_onnxruntime,
    assert_one_training_step_moves_every_parameter,
    build,
)

VARIANTS = [
    "resnet34",
    "resnet101",
    "resnet152",
    "wide_resnet50_2",
    "efficientnet_b1",
    "efficientnet_b2",
    "efficientnet_b3",
    "mobilenet_v3_large",
    "squeezenet1_0",
    "regnet_x_400mf",
]
# One SGD step each: a finite loss, a finite gradient for every parameter, every parameter moved.
TRAINED = VARIANTS


@pytest.mark.parametrize("name", VARIANTS)
def test_variant_runs_on_both_executors_and_exports_with_a_dynamic_batch(name):
    onnxnn.manual_seed(0)
    model = build(name).eval()
    assert_kernels_match_onnxruntime(model, name)
    assert_exports_with_a_dynamic_batch(model, name)


@pytest.mark.parametrize("name", TRAINED)
def test_one_training_step_moves_every_parameter(name):
    assert_one_training_step_moves_every_parameter(name)
