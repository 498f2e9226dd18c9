"""The zoo's deeper and wider variants run as their base models do (issue 15's "for each model").

test_forward_export.py tests one model per block kind; these variants repeat or widen those blocks
(resnet34/101/152, wide_resnet50_2, efficientnet_b1-b3, mobilenet_v3_large, squeezenet1_0,
regnet_x_400mf). Each is built once for its two tests (pytest runs a variant's tests one after the
other, then drops the model): checked on both executors and exported with a dynamic batch axis that
onnxruntime runs at batch 1 and 8, which leave the model as it was built (eval mode, no parameter or
buffer written), then trained for one step. VGG and vit_b_16, the largest, have files of their own
(test_large_vgg.py, test_large_vgg_bn_and_vit.py).
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
# Left out: the variants that only stack more of their base model's blocks, which
# test_forward_export.py trains (resnet50's bottleneck, efficientnet_b0's MBConv; b2 and b3 are b1
# wider and deeper): their step costs 5-18 s and checks the same blocks' gradients.
TRAINED = [name for name in VARIANTS if name not in ("resnet101", "resnet152", "efficientnet_b2", "efficientnet_b3")]


@pytest.fixture(scope="module")
def name(request):
    """The variant (module-scoped, so pytest groups each variant's tests and builds it once)."""
    return request.param


@pytest.fixture(scope="module")
def model(name):
    """``name`` built from seed 0, shared by its two tests."""
    onnxnn.manual_seed(0)
    return build(name)


@pytest.mark.parametrize("name", VARIANTS, indirect=True)
def test_variant_runs_on_both_executors_and_exports_with_a_dynamic_batch(name, model):
    model.eval()
    assert_kernels_match_onnxruntime(model, name)
    assert_exports_with_a_dynamic_batch(model, name)


@pytest.mark.parametrize("name", TRAINED, indirect=True)
def test_one_training_step_moves_every_parameter(name, model):
    assert_one_training_step_moves_every_parameter(name, model)
