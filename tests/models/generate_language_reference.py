"""Writes tests/models/reference/language/*.json from Hugging Face transformers (run once, by hand).

Each ``<name>.json`` records, for one model class at a tiny configuration (hidden size 32, 2 layers), the
configuration and transformers' ``state_dict``: every key with its shape and dtype, in order. The
tests compare onnxnn's models against these files without needing torch; ``<name>.config.json``
is the ``config.json`` transformers writes for it. Regenerate with::

    /path/to/venv-with-torch-and-transformers/bin/python tests/models/generate_language_reference.py
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers

OUT = Path(__file__).resolve().parent / "reference" / "language"

BERT = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 37,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "num_labels": 3,
}
GPT2 = {
    "vocab_size": 99,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
    "bos_token_id": 98,
    "eos_token_id": 98,
}
LLAMA = {
    "vocab_size": 99,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

MODELS = {
    "bert_model": ("BertModel", "BertConfig", BERT),
    "bert_for_sequence_classification": ("BertForSequenceClassification", "BertConfig", BERT),
    "gpt2_model": ("GPT2Model", "GPT2Config", GPT2),
    "gpt2_lm_head_model": ("GPT2LMHeadModel", "GPT2Config", GPT2),
    "llama_model": ("LlamaModel", "LlamaConfig", LLAMA),
    "llama_for_causal_lm": ("LlamaForCausalLM", "LlamaConfig", LLAMA),
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, (model_class, config_class, config) in MODELS.items():
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
        state = model.state_dict()
        document = {
            "class": model_class,
            "config_class": config_class,
            "config": config,
            "transformers_version": transformers.__version__,
            "torch_version": torch.__version__.split("+")[0],
            "state_dict": [
                [key, list(value.shape), str(value.dtype).removeprefix("torch.")] for key, value in state.items()
            ],
        }
        (OUT / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
        # The config.json save_pretrained writes, to test that onnxnn reads transformers' own files.
        model.config.to_json_file(OUT / f"{name}.config.json")
        print(f"{name}: {len(state)} keys")


if __name__ == "__main__":
    main()
