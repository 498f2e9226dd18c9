"""The vision zoo runs forward on both executors, exports to ONNX that onnxruntime runs at batch 1 and 8, and trains."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

from .common import (
    assert_exports_with_a_dynamic_batch,
    assert_kernels_match_onnxruntime,
    assert_one_training_step_moves_every_parameter,
    build,
    smallest_input,
)

# One model per block kind, on both executors (the deeper and wider variants: test_variants.py).
ALL_MODELS = [
    "resnet18",
    "resnet50",
    "resnext50_32x4d",
    "mobilenet_v2",
    "mobilenet_v3_small",
    "mobilenet_v3_large",
    "vit_small",
    "efficientnet_b0",
    "squeezenet1_1",
    "densenet121",
    "convnext_tiny",
    "regnet_y_400mf",
    "swin_t",
]
KERNELS_MODELS = ALL_MODELS
EXPORTED_MODELS = [
    "resnet18",
    "mobilenet_v3_small",
    "vit_small",
    "efficientnet_b0",
    "convnext_tiny",
    "swin_t",
    # The other block kinds (issue 15's "for each model"): bottleneck, grouped bottleneck, inverted
    # residual without squeeze-excitation, fire modules, dense blocks, RegNet's Y blocks.
    "resnet50",
    "resnext50_32x4d",
    "mobilenet_v2",
    "squeezenet1_1",
    "densenet121",
    "regnet_y_400mf",
]
# One SGD step (finite gradients for every parameter, every parameter moved) for every model that
# test_training_steps_lower_the_loss does not train (it trains resnet18 and vit_small).
TRAINED_ONCE_MODELS = [name for name in ALL_MODELS if name not in ("resnet18", "vit_small")]


@pytest.fixture(scope="module")
def models():
    """Each model built once, in eval mode, with random weights (ViT's zero-initialized head made non-zero).

    Every test asks for its model first thing, right after the seed is reset, so a model is built from
    seed 0 whichever test builds it. ``models.take(name)`` is for the test that trains the model (the
    last to use it): it hands over the cached model and drops it from the cache, so no test sees a
    trained model; the tests before only run it in eval mode and export it, which writes no parameter
    or buffer, so it is still the model as built.
    """
    cache = {}

    def get(name):
        if name not in cache:
            model = build(name)
            if name.startswith("vit"):
                with onnxnn.no_grad():
                    model.heads.head.weight.copy_(onnxnn.randn(*model.heads.head.weight.shape) * 0.1)
            cache[name] = model.eval()
        return cache[name]

    def take(name):
        model = get(name)
        del cache[name]
        return model

    get.take = take
    return get


@pytest.mark.parametrize("name", ALL_MODELS)
def test_a_new_model_holds_every_parameter_and_buffer_computed(name):
    # As the nn.init fills do: a pending initial value (ConvNeXt's layer scale once) would make a
    # model's first call record another graph than its later calls, and keep a compiled model from
    # preparing its runs while it stays pending.
    onnxnn.manual_seed(0)
    model = build(name)
    pending = [key for key, tensor in model.state_dict(keep_vars=True).items() if tensor._value.data is None]
    assert pending == []


@pytest.mark.parametrize("name", ALL_MODELS)
def test_forward_onnxruntime_executor(models, name):
    model = models(name)
    with onnxnn.set_executor("onnxruntime"), onnxnn.no_grad():
        output = model(smallest_input(name)).numpy()
    assert output.shape == (1, 1000)
    assert np.isfinite(output).all()
    assert np.abs(output).max() > 0


@pytest.mark.parametrize("name", KERNELS_MODELS)
def test_forward_kernels_executor_matches_onnxruntime(models, name):
    assert_kernels_match_onnxruntime(models(name), name)


@pytest.mark.parametrize("name", EXPORTED_MODELS)
def test_export_runs_in_onnxruntime_at_batch_1_and_8(models, name):
    assert_exports_with_a_dynamic_batch(models(name), name)


@pytest.mark.parametrize(
    "name, executor",
    [
        ("resnet18_10_classes", "onnxruntime"),
        ("vit_small", "onnxruntime"),
        ("vit_small", "kernels"),
    ],
)
def test_training_steps_lower_the_loss(name, executor):
    onnxnn.manual_seed(0)
    model = build(name).train()
    rng = np.random.default_rng(2)
    x = smallest_input(name, batch=2)  # two samples: BatchNorm's batch statistics need more than one value
    num_classes = [module for module in model.modules() if isinstance(module, onnxnn.nn.Linear)][-1].out_features
    target = onnxnn.from_numpy(rng.integers(0, num_classes, size=2))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    with onnxnn.set_executor(executor):
        for _ in range(2):
            optimizer.zero_grad()
            loss = onnxnn.nn.functional.cross_entropy(model(x), target)
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("name", TRAINED_ONCE_MODELS)
def test_one_training_step_runs(models, name):
    assert_one_training_step_moves_every_parameter(name, models.take(name))
