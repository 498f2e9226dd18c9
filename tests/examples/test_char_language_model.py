"""examples/char_language_model.py trains an LSTM and a causal transformer character model with a
falling loss, samples text from them, and exports them so that an ONNX runtime computes the logits
onnxnn computes.

The example's ``run`` is called with few steps and short samples (its script takes the step count as
an argument or ``ONNXNN_EXAMPLE_STEPS``), once per executor; it checks its float32 export itself,
printing the difference. The export check is redone here in float64: the trained model, cast with
``.double()``, is exported and run by plain onnxruntime (the transformer, with a dynamic batch axis,
on a batch of another size) or by onnx's reference implementation (the LSTM: onnxruntime's CPU
recurrent kernels are float32-only, should the LSTM be recorded as an ONNX ``LSTM`` node).

Tolerance of the export check, as in test_resnet_and_transformer.py: both sides evaluate the same
graph in possibly different summation orders, each within ``gamma(T) * K * scale`` of the exact
result, where ``T`` bounds the rounded operations along the longest path (counted below), ``scale``
is the logits' magnitude and ``K`` the network's amplification of relative errors. Run in float64,
the bound allows any ``K`` up to ``gamma_float32(T) / gamma_float64(T)`` (2**29): a wrong graph (a
dropped causal mask, a state not carried, a misplaced transpose) changes the logits by far more.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx.reference import ReferenceEvaluator
from tolerances import gamma

import onnxnn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "char_language_model.py"
STEPS = 12
SAMPLE_LENGTH = 20


@pytest.fixture(scope="module", params=["onnxruntime", "kernels"])
def trained(request):
    """The example's namespace and the results of its ``run`` with few steps, on one executor."""
    with onnxnn.set_executor(request.param):
        namespace = runpy.run_path(str(EXAMPLE), run_name="example")
        return namespace, namespace["run"](STEPS, sample_length=SAMPLE_LENGTH)


@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_loss_falls(trained, model):
    results = trained[1]
    losses = np.asarray(results[f"{model}_losses"])
    assert losses.shape == (STEPS,)
    assert np.isfinite(losses).all()
    # An untrained model guesses about uniformly: log(57) = 4.04 nats per character. A dozen Adam
    # steps learn the characters' frequencies (about 3.2 nats) and start on the bigrams.
    uniform = np.log(len(results["vocabulary"]))
    assert abs(losses[0] - uniform) < 0.5, losses
    assert losses[-3:].mean() < 0.8 * losses[:3].mean(), losses


@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_samples_are_seeded_text_of_the_vocabulary(trained, model):
    namespace, results = trained
    prompt = namespace["PROMPT"]
    characters = set(results["vocabulary"].characters)
    for when in ("before", "after"):
        sample = results[f"{model}_sample_{when}"]
        assert sample.startswith(prompt) and len(sample) == len(prompt) + SAMPLE_LENGTH
        assert set(sample) <= characters
    # Sampling is seeded: the same model and seed give the same text.
    sampler = namespace[f"sample_{model}"]
    again = sampler(results[model], results["vocabulary"], prompt, SAMPLE_LENGTH, 0.8, 0)
    assert again == results[f"{model}_sample_after"]


@pytest.mark.parametrize("model", ["lstm", "transformer"])
def test_float32_export_difference_is_printed_and_small(trained, model):
    # The example's own check, in float32: exact agreement is not promised (see the float64 test
    # below for the bound); a wrong graph would differ by the logits' own magnitude (several units).
    difference = trained[1][f"{model}_export_difference"]
    assert np.isfinite(difference) and difference < 1e-3


def _lstm_terms(model, length: int) -> int:
    # Per time step, along the recurrence: the input and recurrent projections (E + H products and
    # two biases), the gates' sigmoid/tanh, the cell update (two products and a sum) and h's tanh
    # and product; every step's rounding reaches the last. Then the classifier (H products, a bias).
    lstm = model.lstm
    per_step = lstm.input_size + lstm.hidden_size + 2 + 2 + 3 + 2
    return length * per_step + lstm.hidden_size + 1


def _transformer_terms(model, length: int) -> int:
    d_model = model.head.in_features
    layer = model.encoder.layers[0]
    head_dim = d_model // layer.self_attn.num_heads
    # Per layer: two LayerNorms (d each), the q/k/v and output projections (d each), the scores
    # (head_dim), softmax and its weighted sum (length each), the MLP (d, then dim_feedforward).
    per_layer = 2 * d_model + 2 * d_model + head_dim + 2 * length + d_model + layer.linear1.out_features
    return len(model.encoder.layers) * per_layer + d_model + d_model + 1


def _reference(path, tokens):
    return ReferenceEvaluator(path).run(None, {"tokens": tokens})


def _onnxruntime(path, tokens):
    return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"tokens": tokens})


@pytest.mark.parametrize(
    "model, length_name, batch, dynamic, terms, run_exported",
    [
        ("lstm", "LSTM_CHUNK", 3, False, _lstm_terms, _reference),
        ("transformer", "CONTEXT", 5, True, _transformer_terms, _onnxruntime),
    ],
)
def test_float64_export_matches_onnxnn(trained, model, length_name, batch, dynamic, terms, run_exported, tmp_path):
    namespace, results = trained
    module = results[model].double().eval()
    tokens = np.asarray(results["vocabulary"].encode(namespace["TEXT_PATH"].read_text(encoding="utf-8")))
    rng = np.random.default_rng(1)
    length = namespace[length_name]  # the length the model was trained on
    example = namespace["windows"](tokens, 2 if dynamic else batch, length, rng)[0]
    inputs = namespace["windows"](tokens, batch, length, rng)[0]
    path = tmp_path / f"{model}.onnx"
    onnxnn.export.to_onnx(
        module,
        onnxnn.from_numpy(example),
        str(path),
        input_names=["tokens"],
        dynamic_axes={"tokens": {0: "batch"}} if dynamic else None,
    )
    (served,) = run_exported(str(path), inputs)
    with onnxnn.no_grad():
        ours = module(onnxnn.from_numpy(inputs)).numpy()
    assert served.dtype == ours.dtype == np.float64
    assert served.shape == ours.shape == (batch, length, len(results["vocabulary"]))
    bound = 2 * gamma(terms(module, length), np.float32) * np.abs(served).max()
    np.testing.assert_allclose(ours, served, rtol=0, atol=bound)


def test_the_loss_curves_are_saved_as_png(trained, tmp_path):
    pytest.importorskip("matplotlib")
    namespace, results = trained
    path = tmp_path / "loss.png"
    namespace["save_loss_curves"]({label: results[f"{label}_losses"] for label in ("lstm", "transformer")}, str(path))
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
