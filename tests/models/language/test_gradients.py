"""The models' losses differentiate correctly: backward's gradients with respect to a few
parameters of each kind (embedding, attention projection, normalization, MLP) match float64 finite
differences (tests/gradcheck.py, along random directions)."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from tests.gradcheck import check_gradients

from .cases import build, token_ids

PARAMETERS = {
    "bert_for_sequence_classification": [
        "bert.embeddings.word_embeddings.weight",
        "bert.encoder.layer.0.attention.self.key.weight",
        "bert.encoder.layer.1.output.LayerNorm.weight",
        "bert.pooler.dense.weight",
    ],
    "gpt2_lm_head_model": [
        "transformer.wte.weight",
        "transformer.h.0.attn.c_attn.weight",
        "transformer.h.1.mlp.c_fc.bias",
        "transformer.ln_f.weight",
    ],
    "llama_for_causal_lm": [
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight",
        "model.layers.1.mlp.gate_proj.weight",
        "model.layers.0.input_layernorm.weight",
    ],
}
NO_DROPOUT = {
    "bert_for_sequence_classification": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
    "gpt2_lm_head_model": {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
    "llama_for_causal_lm": {},
}


def _owner(model, name: str):
    path, _, leaf = name.rpartition(".")
    return model.get_submodule(path), leaf


@pytest.mark.parametrize("name", list(PARAMETERS))
def test_loss_gradients_match_finite_differences(name):
    model = build(name, **NO_DROPOUT[name]).double()
    # The tiny init (std 0.02) leaves the loss nearly flat; larger weights make every path count.
    with onnxnn.no_grad():
        for parameter in model.parameters():
            parameter.add_(onnxnn.randn(*parameter.shape, dtype=onnxnn.float64) * 0.3)
    ids = onnxnn.tensor(token_ids(2, 5))
    mask = np.ones((2, 5), dtype=np.int64)
    mask[1, 0] = 0
    if name.startswith("bert"):
        labels = onnxnn.tensor(np.array([1, 2]))
    else:
        # The padded query (row 1, position 0) sees only masked keys: its scores are all the dtype's
        # lowest plus rounding-absorbed terms, so the loss is flat there while backward is not.
        # Its prediction (of token 1) is left out of the loss, as transformers' users do.
        next_tokens = token_ids(2, 5).copy()
        next_tokens[1, 1] = -100
        labels = onnxnn.tensor(next_tokens)
    names = PARAMETERS[name]
    owners = [_owner(model, key) for key in names]
    originals = [module._parameters[leaf] for module, leaf in owners]

    def loss(*weights):
        # The parameters replaced by the tensors being differentiated, for this call only.
        for (module, leaf), weight in zip(owners, weights):
            module._parameters[leaf] = weight
        try:
            return model(ids, attention_mask=onnxnn.tensor(mask), labels=labels).loss
        finally:
            for (module, leaf), original in zip(owners, originals):
                module._parameters[leaf] = original

    check_gradients(loss, [p.detach().numpy().copy() for p in originals])
