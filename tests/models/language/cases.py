"""The language models' tiny test configurations, read from the reference JSON files that
tests/models/generate_language_reference.py wrote from transformers (hidden size 32, 2 layers)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import onnxnn
from onnxnn.models import language

REFERENCE = Path(__file__).resolve().parent.parent / "reference" / "language"
NAMES = [
    "bert_model",
    "bert_for_sequence_classification",
    "gpt2_model",
    "gpt2_lm_head_model",
    "llama_model",
    "llama_for_causal_lm",
]
DECODERS = ["gpt2_lm_head_model", "llama_for_causal_lm"]
VOCAB = 99


def reference(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.json").read_text())


def config_of(name: str, **overrides):
    document = reference(name)
    return getattr(language, document["config_class"])(**{**document["config"], **overrides})


def build(name: str, **overrides):
    """The onnxnn model of the reference file ``name``, in eval mode."""
    onnxnn.manual_seed(0)
    return getattr(language, reference(name)["class"])(config_of(name, **overrides)).eval()


def token_ids(batch: int, length: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, VOCAB, size=(batch, length)).astype(np.int64)


def main_output(name: str, output) -> onnxnn.Tensor:
    """The output the tests compare: logits for models with a head, the last hidden state otherwise."""
    return output.logits if "logits" in output else output.last_hidden_state
