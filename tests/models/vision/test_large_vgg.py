"""VGG's four plain configurations run, export and train as every zoo model does (issue 15's "for each model").

Each test builds its model once and checks it on both executors, exports it with a dynamic batch
axis that onnxruntime runs at batch 1 and 8, and trains it one SGD step. VGG is the zoo's largest:
its 25088x4096 classifier alone is 0.4 GB of float32, so each export is 0.5 GB and a test takes
about 10 s; the batch-norm configurations are in test_large_vgg_bn_and_vit.py, so the two halves
run on two workers. The input is the smallest VGG takes: its adaptive pooling gives the classifier
the 7x7 map it expects from a 32x32 image.
"""

from __future__ import annotations

import pytest

import onnxnn

from .common import assert_runs_exports_and_trains, build


@pytest.mark.parametrize("name", ["vgg11", "vgg13", "vgg16", "vgg19"])
def test_vgg_runs_exports_and_trains(name):
    onnxnn.manual_seed(0)
    assert_runs_exports_and_trains(name, build(name))
