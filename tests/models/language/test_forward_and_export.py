"""Forward on both executors, compiled calls, the properties attention masks promise, export to
ONNX run by onnxruntime at batch 1 and 8 through a dynamic batch axis, and one training step."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn.export import to_onnx
from onnxnn.runtime.fastpath import compiled_calls
from tests.tolerances import gamma

from .cases import DECODERS, NAMES, build, main_output, reference, token_ids

EXECUTORS = ("onnxruntime", "kernels")
LENGTH = 6


def _bound(name: str, expected: np.ndarray) -> float:
    """How far two float32 evaluations of the model may differ.

    Each layer is a chain of dot products over at most ``hidden + intermediate + length`` terms
    (projections, attention, MLP); the normalizations rescale by at most ``1 / (rms of the
    input)``, which the random initialization keeps within a factor of about 50; the bound adds up
    over the layers and scales with the output.
    """
    config = reference(name)["config"]
    hidden = config.get("hidden_size", config.get("n_embd"))
    inner = config.get("intermediate_size", 4 * hidden)
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    return 50 * layers * gamma(hidden + inner + LENGTH) * max(1.0, float(np.max(np.abs(expected))))


@pytest.mark.parametrize("name", NAMES)
def test_forward_agrees_on_both_executors(name):
    model = build(name)
    ids = token_ids(2, LENGTH)
    outputs = {}
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            outputs[executor] = main_output(name, model(onnxnn.tensor(ids))).detach().numpy()
    expected = outputs["onnxruntime"]
    assert np.all(np.isfinite(expected))
    np.testing.assert_allclose(outputs["kernels"], expected, rtol=0, atol=_bound(name, expected))


@pytest.mark.parametrize("name", NAMES)
def test_a_new_model_holds_every_parameter_and_buffer_computed(name):
    # BERT's padded word embeddings and its position_ids buffer (an expand view) once stayed pending.
    model = build(name)
    state = {**dict(model.named_buffers()), **model.state_dict(keep_vars=True)}
    assert [key for key, tensor in state.items() if tensor._value.data is None] == []


@pytest.mark.usefixtures("fast_path_on")  # compiled calls' prepared runs are the fast path's
@pytest.mark.parametrize("name", NAMES)
def test_a_compiled_model_runs_prepared_with_the_plain_calls_bits(name):
    # Their ModelOutput results and the position ids their embeddings check (made by the forward
    # or sliced from a buffer) once kept every compiled call running its Python forward.
    onnxnn.clear_caches()
    model = build(name)
    ids = onnxnn.tensor(token_ids(2, LENGTH))
    with onnxnn.no_grad():
        with onnxnn.set_fast_path(False):
            plain = [main_output(name, model(ids)).numpy() for _ in range(3)]
        compiled = onnxnn.compile(model)
        compiled_calls.reset_counts()
        results = [main_output(name, compiled(ids)).numpy() for _ in range(6)]
    assert compiled_calls.compiled_info()["prepared"] >= 2
    np.testing.assert_array_equal(results[-1], plain[-1])


@pytest.mark.parametrize("name", ["bert_model", "gpt2_model", "llama_model"])
def test_padding_masked_out_changes_nothing_else(name):
    # Masked tokens take no part in attention: replacing them leaves the other positions as they were.
    model = build(name)
    ids = token_ids(1, LENGTH)
    mask = np.ones_like(ids)
    mask[0, :2] = 0
    other = ids.copy()
    other[0, :2] = (other[0, :2] + 7) % 90 + 3
    first = model(onnxnn.tensor(ids), attention_mask=onnxnn.tensor(mask)).last_hidden_state.detach().numpy()
    second = model(onnxnn.tensor(other), attention_mask=onnxnn.tensor(mask)).last_hidden_state.detach().numpy()
    np.testing.assert_allclose(second[:, 2:], first[:, 2:], rtol=0, atol=_bound(name, first))


@pytest.mark.parametrize("name", ["gpt2_model", "llama_model"])
def test_decoders_are_causal(name):
    # Position t sees tokens up to t only: changing the last token leaves the earlier outputs alone.
    model = build(name)
    ids = token_ids(1, LENGTH)
    changed = ids.copy()
    changed[0, -1] = (changed[0, -1] + 5) % 90 + 3
    first = model(onnxnn.tensor(ids)).last_hidden_state.detach().numpy()
    second = model(onnxnn.tensor(changed)).last_hidden_state.detach().numpy()
    np.testing.assert_allclose(second[:, :-1], first[:, :-1], rtol=0, atol=_bound(name, first))
    assert not np.allclose(second[:, -1], first[:, -1])


@pytest.mark.parametrize("name", NAMES)
def test_export_runs_in_onnxruntime_at_batch_1_and_8(name):
    model = build(name)
    bert = name.startswith("bert")
    ids = token_ids(1, LENGTH)
    inputs = (onnxnn.tensor(ids), onnxnn.tensor(np.ones_like(ids))) if bert else (onnxnn.tensor(ids),)
    input_names = ["input_ids", "attention_mask"][: len(inputs)]
    proto = to_onnx(
        model,
        inputs,
        input_names=input_names,
        dynamic_axes={input_name: {0: "batch"} for input_name in input_names},
    )
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (1, 8):
        ids = token_ids(batch, LENGTH, seed=batch)
        mask = np.ones_like(ids)
        mask[batch // 2 :, :2] = 0  # some rows left-padded
        feeds = {"input_ids": ids, "attention_mask": mask} if bert else {"input_ids": ids}
        actual = session.run(None, feeds)[0]
        arguments = {"attention_mask": onnxnn.tensor(mask)} if bert else {}
        expected = main_output(name, model(onnxnn.tensor(ids), **arguments)).detach().numpy()
        assert actual.shape == expected.shape and actual.shape[0] == batch
        np.testing.assert_allclose(actual, expected, rtol=0, atol=_bound(name, expected))


@pytest.mark.parametrize("name", ["bert_for_sequence_classification", *DECODERS])
def test_one_training_step_lowers_the_loss(name):
    dropouts = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    if name.startswith("gpt2"):
        dropouts = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    elif name.startswith("llama"):
        dropouts = {}
    model = build(name, **dropouts).train()
    ids = onnxnn.tensor(token_ids(2, LENGTH))
    labels = onnxnn.tensor(np.array([0, 2])) if name.startswith("bert") else ids
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    loss = model(ids, labels=labels).loss
    optimizer.zero_grad()
    loss.backward()
    gradients = {key: p.grad for key, p in model.named_parameters()}
    assert all(g is not None and np.all(np.isfinite(g.numpy())) for g in gradients.values()), [
        key for key, g in gradients.items() if g is None
    ]
    optimizer.step()
    # A small enough gradient step lowers a smooth loss.
    assert model(ids, labels=labels).loss.item() < loss.item()
