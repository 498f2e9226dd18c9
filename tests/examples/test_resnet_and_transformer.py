"""examples/resnet_and_transformer.py trains both models with a falling loss and exports them so that
plain onnxruntime serves the outputs onnxnn computes, for any batch size.

The example's ``run`` is called with few steps (its script takes the count as an argument or
``ONNXNN_EXAMPLE_STEPS``), once per executor; it also checks its float32 export itself, printing it. The export check is
redone here in float64: the trained model, cast with ``.double()``, is exported and run by plain
onnxruntime (the encoder) or onnx's reference implementation (the ResNet: onnxruntime has no float64
Conv kernel on CPU) on a batch of another size than the example input's.

Tolerance of the export check: onnxnn and onnxruntime evaluate the same graph, in possibly different
summation orders (onnxruntime also fuses Conv with BatchNorm). Each differs from the exact result by
at most ``gamma(T) * K * scale``, where ``T`` bounds the rounded operations along the longest path
(the sum of every layer's accumulation length, below), ``scale`` is the outputs' magnitude and ``K``
the network's amplification of relative errors. We run in float64 and allow any ``K`` up to
``gamma_float32(T) / gamma_float64(T)`` (2**29): a wrong graph (a dropped mask, a misplaced
transpose, training-mode BatchNorm) changes the logits by orders of magnitude more.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx.reference import ReferenceEvaluator

import onnxnn
from tolerances import gamma

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet_and_transformer.py"
STEPS = 40


@pytest.fixture(scope="module", params=["onnxruntime", "kernels"])
def trained(request, tmp_path_factory):
    """The example's namespace and the results of its ``run`` with few steps, on one executor."""
    with onnxnn.set_executor(request.param):
        namespace = runpy.run_path(str(EXAMPLE), run_name="example")
        return namespace, namespace["run"](STEPS)


@pytest.mark.parametrize("model", ["resnet", "encoder"])
def test_loss_falls(trained, model):
    losses = np.asarray(trained[1][f"{model}_losses"])
    assert losses.shape == (STEPS,)
    assert np.isfinite(losses).all()
    # Four balanced classes: cross entropy starts near log(4); a learning model more than halves it.
    assert losses[-5:].mean() < 0.5 * losses[:5].mean(), losses


def _resnet_terms(model) -> int:
    convs = [m for m in model.modules() if isinstance(m, onnxnn.nn.Conv2d)]
    # Every convolution on the path (the shortcuts over-count), the average pool (at most the 8x8
    # input's area) and the classifier.
    return sum(m.in_channels * m.kernel_size[0] * m.kernel_size[1] for m in convs) + 64 + model.fc.in_features


def _encoder_terms(model) -> int:
    d_model = model.head.in_features
    # Per layer: two LayerNorms (d), qkv and out projections (d), scores (head_dim), softmax and its
    # weighted sum (length), MLP (d and 2d); then the final norm, the pooled mean (length) and the head.
    length = model.positions.num_embeddings
    per_layer = 2 * d_model + 2 * d_model + d_model + 2 * length + 3 * d_model
    return len(model.layers) * per_layer + d_model + length + d_model


def _onnxruntime(path, batch):
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": batch})


def _reference(path, batch):
    return ReferenceEvaluator(path).run(None, {"input": batch})


@pytest.mark.parametrize(
    "model, other_batch, terms, run_exported",
    [
        # onnxruntime has no float64 Conv on CPU: the ResNet's float64 graph runs on onnx's reference
        # implementation (its float32 graph on onnxruntime is what the example itself checks).
        ("resnet", lambda ns, rng: ns["quadrant_images"](5, rng)[0], _resnet_terms, _reference),
        # The float64 encoder's trace is deeper than graph.MAX_PENDING_DEPTH: it must stay one graph.
        ("encoder", lambda ns, rng: ns["token_sequences"](5, rng)[0], _encoder_terms, _onnxruntime),
    ],
)
def test_float64_export_with_dynamic_batch_matches_onnxnn(trained, model, other_batch, terms, run_exported, tmp_path):
    namespace, results = trained
    module = results[model].double().eval()
    rng = np.random.default_rng(1)
    example = other_batch(namespace, rng)[:2]
    batch = other_batch(namespace, rng)
    if batch.dtype == np.float32:
        example, batch = example.astype(np.float64), batch.astype(np.float64)
    path = tmp_path / f"{model}.onnx"
    onnxnn.export.to_onnx(
        module, onnxnn.from_numpy(example), str(path), input_names=["input"], dynamic_axes={"input": {0: "batch"}}
    )
    (served,) = run_exported(str(path), batch)
    with onnxnn.no_grad():
        ours = module(onnxnn.from_numpy(batch)).numpy()
    assert served.shape == ours.shape == (len(batch), 4)
    count = terms(module)
    bound = 2 * gamma(count, np.float32) * np.abs(served).max()
    np.testing.assert_allclose(ours, served, rtol=0, atol=bound)


def test_the_loss_curves_are_saved_as_png(trained, tmp_path):
    pytest.importorskip("matplotlib")
    namespace, results = trained
    path = tmp_path / "loss.png"
    namespace["save_loss_curves"]({label: results[f"{label}_losses"] for label in ("resnet", "encoder")}, str(path))
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
