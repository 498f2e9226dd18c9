"""Shared helpers of the vision zoo tests: the reference layouts and the models' builders."""

from __future__ import annotations

import gc
import io
import json
import pathlib

import numpy as np
import onnxruntime

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.models import vision
from onnxnn.models.vision import _layers as vision_layers
from tests.tolerances import rtol_for

REFERENCE = pathlib.Path(__file__).parent.parent / "reference" / "vision"


def reference(name: str) -> dict:
    """The JSON tests/models/generate_reference_keys.py wrote from torchvision for ``name``."""
    return json.loads((REFERENCE / f"{name}.json").read_text())


def build(name: str) -> onnxnn.nn.Module:
    """Builds onnxnn's model with the builder and kwargs torchvision's layout was generated with."""
    document = reference(name)
    return getattr(vision, document["builder"])(**document["kwargs"])


def smallest_input(name: str, batch: int = 1, image_size: int | None = None) -> onnxnn.Tensor:
    """A random input at the smallest size the model takes: 32x32 (five stride-2 stages), ViT its
    image size (224, unless the model was built with another ``image_size``)."""
    size = image_size or (224 if name.startswith("vit_b") else 32)
    rng = np.random.default_rng(0)
    return onnxnn.from_numpy(rng.standard_normal((batch, 3, size, size)).astype(np.float32))


def forward_rtol(model: onnxnn.nn.Module) -> float:
    """Relative tolerance between two float32 evaluations of ``model``.

    Every Conv2d/Linear output is a sum of fan-in products; their rounding errors add along the
    network's depth, so the bound counts the fan-ins of all weighted layers (an overestimate: it sums
    the layers of parallel branches too).
    """
    terms = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if isinstance(module, (onnxnn.nn.Conv2d, onnxnn.nn.Linear)) and weight is not None:
            terms += int(np.prod(weight.shape[1:]))
        elif isinstance(module, onnxnn.nn.MultiheadAttention):
            terms += 4 * module.embed_dim
    return rtol_for(terms)


def assert_one_training_step_moves_every_parameter(
    name: str, model: onnxnn.nn.Module | None = None, image_size: int | None = None
) -> None:
    """One SGD step of ``name`` (built here unless ``model`` is given) in training mode: a finite loss,
    a finite gradient for every parameter, and every parameter moved (with random weights and inputs
    none has a zero gradient)."""
    onnxnn.manual_seed(0)
    model = (model or build(name)).train()
    _every_parameter_reachable(model)
    x = smallest_input(name, 2, image_size)  # two samples: BatchNorm's batch statistics need more than one value
    target = onnxnn.from_numpy(np.array([3, 7]))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.01)
    before = {key: np.array(p.detach().numpy()) for key, p in model.named_parameters()}
    with onnxnn.set_executor("onnxruntime"):
        optimizer.zero_grad()
        loss = onnxnn.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        optimizer.step()
        assert np.isfinite(float(loss))
        missing = [key for key, p in model.named_parameters() if p.grad is None]
        assert not missing, missing
        not_finite = [key for key, p in model.named_parameters() if not np.isfinite(p.grad.numpy()).all()]
        assert not not_finite, not_finite
        unchanged = [
            key
            for key, p in model.named_parameters()
            if np.array_equal(p.detach().numpy(), before[key]) and not _shifts_only_normalized_values(model, key, p)
        ]
    assert not unchanged, unchanged


def _shifts_only_normalized_values(model: onnxnn.nn.Module, key: str, parameter) -> bool:
    """A BatchNorm bias with an exactly zero gradient: one whose output reaches the loss only through
    1x1 convolutions, residual sums and further BatchNorms (mobilenet_v2's projections). Each
    BatchNorm's input gradient sums to zero per channel, and 1x1 convolutions keep that sum, so the
    bias's gradient, that sum, is zero: computed, it is rounding noise or exactly zero, and then the
    bias does not move."""
    owner = model.get_submodule(key.rpartition(".")[0])
    return (
        isinstance(owner, onnxnn.nn.modules.batchnorm._BatchNorm)
        and key.endswith(".bias")
        and not parameter.grad.numpy().any()
    )


def _every_parameter_reachable(model: onnxnn.nn.Module) -> None:
    """Stochastic depth off and ConvNeXt's layer scales at 1, for a check that every parameter moves.

    In training mode stochastic depth drops a whole residual branch for every sample of a small batch
    at random, leaving its parameters without a gradient; ConvNeXt's layer scale starts at 1e-6, so
    its blocks' updates are below float32's resolution of their weights. Neither is what the check is
    about (that the backward reaches every parameter), so both are neutralized first.
    """
    for module in model.modules():
        if isinstance(module, vision_layers.StochasticDepth):
            module.p = 0.0
        scale = getattr(module, "layer_scale", None)
        if isinstance(scale, onnxnn.nn.Parameter):
            with onnxnn.no_grad():
                scale.fill_(1.0)


def assert_exports_with_a_dynamic_batch(model: onnxnn.nn.Module, name: str, image_size: int | None = None) -> None:
    """``model`` exported with a dynamic batch axis runs in onnxruntime at batch 1 and 8, giving the
    model's own outputs within the fan-in rounding bound."""
    buffer = io.BytesIO()
    # Traced at batch 2: at batch 1 an expand to the same shape records no node, so the second trace at
    # another batch size (which records the Expand) would differ in structure and to_onnx refuses.
    to_onnx(
        model,
        smallest_input(name, 2, image_size),
        buffer,
        input_names=["images"],
        output_names=["logits"],
        dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
    )
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    del buffer  # a VGG's export is 0.5 GB
    for batch in (1, 8):
        x = smallest_input(name, batch, image_size)
        with onnxnn.set_executor("onnxruntime"), onnxnn.no_grad():
            expected = model(x).numpy()
        (actual,) = session.run(None, {"images": x.numpy()})
        assert actual.shape == (batch, 1000)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=forward_rtol(model) * np.abs(expected).max())


def assert_kernels_match_onnxruntime(model: onnxnn.nn.Module, name: str, image_size: int | None = None) -> None:
    """``model``'s outputs at batch 2 on onnxnn's kernels equal onnxruntime's within the fan-in
    rounding bound, and are not all zero."""
    x = smallest_input(name, 2, image_size)
    with onnxnn.no_grad():
        with onnxnn.set_executor("onnxruntime"):
            expected = model(x).numpy()
        with onnxnn.set_executor("kernels"):
            actual = model(x).numpy()
    assert expected.shape == (2, 1000) and np.abs(expected).max() > 0
    np.testing.assert_allclose(actual, expected, rtol=0, atol=forward_rtol(model) * np.abs(expected).max())


def assert_runs_exports_and_trains(name: str, model: onnxnn.nn.Module, image_size: int | None = None) -> None:
    """The zoo's checks on one built model: both executors, the export at batch 1 and 8, one SGD step."""
    model.eval()
    assert_kernels_match_onnxruntime(model, name, image_size)
    assert_exports_with_a_dynamic_batch(model, name, image_size)
    assert_one_training_step_moves_every_parameter(name, model, image_size)
    del model
    drop_caches()


def drop_caches() -> None:
    """Drops the sessions cached for the structures of the model just tested.

    They keep onnxruntime's arenas (about 1 GB for a VGG step): the largest models drop them, so
    the next test does not start 1-2 GB higher.
    """
    onnxnn.clear_caches()
    gc.collect()
