"""Loading local checkpoints: snapshot directories with model.safetensors or pytorch_model.bin
(sharded or not), base-model checkpoints into models with a head, tied weights a checkpoint
leaves out, legacy key names, and the errors for what cannot load."""

from __future__ import annotations

import json

import numpy as np
import pytest

import onnxnn
from onnxnn.models import language

from .cases import build, main_output, token_ids


def _same_outputs(name: str, first, second) -> None:
    ids = onnxnn.tensor(token_ids(2, 5))
    # A structure's first run may take the kernels (plan_cache.FIRST_RUNS_ON_KERNELS), which
    # round differently from its compiled session: both outputs compared are second runs.
    for model in (first, second):
        main_output(name, model(ids)).detach().numpy()
    expected = main_output(name, first(ids)).detach().numpy()
    np.testing.assert_array_equal(main_output(name, second(ids)).detach().numpy(), expected)


def _snapshot(model, directory, weights: str = "model.safetensors", drop=()):
    model.config.save_pretrained(directory)
    state = {key: value for key, value in model.state_dict().items() if key not in drop}
    onnxnn.save(state, directory / weights)


@pytest.mark.parametrize("weights", ["model.safetensors", "pytorch_model.bin"])
@pytest.mark.parametrize("name", ["bert_for_sequence_classification", "llama_for_causal_lm"])
def test_a_snapshot_directory_round_trips(name, weights, tmp_path):
    model = build(name)
    _snapshot(model, tmp_path, weights)
    loaded = type(model).from_pretrained(tmp_path)
    assert not loaded.training
    assert loaded.config == model.config
    _same_outputs(name, model, loaded)


def test_a_checkpoint_without_the_tied_lm_head_loads_tied(tmp_path):
    # save_pretrained leaves lm_head.weight out of GPT-2's model.safetensors: it is wte's.
    model = build("gpt2_lm_head_model")
    _snapshot(model, tmp_path, drop={"lm_head.weight"})
    loaded = language.GPT2LMHeadModel.from_pretrained(tmp_path)
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    _same_outputs("gpt2_lm_head_model", model, loaded)


def test_a_sharded_checkpoint_loads_every_shard(tmp_path):
    model = build("llama_for_causal_lm")
    state = model.state_dict()
    keys = list(state)
    shards = {"model-00001-of-00002.safetensors": keys[:7], "model-00002-of-00002.safetensors": keys[7:]}
    for file, shard_keys in shards.items():
        onnxnn.save({key: state[key] for key in shard_keys}, tmp_path / file)
    weight_map = {key: file for file, shard_keys in shards.items() for key in shard_keys}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    model.config.save_pretrained(tmp_path)
    assert sorted(language.find_weight_files(tmp_path)) == sorted(str(tmp_path / f) for f in shards)
    _same_outputs("llama_for_causal_lm", model, language.LlamaForCausalLM.from_pretrained(tmp_path))


def test_base_and_head_checkpoints_load_into_each_other(tmp_path):
    classifier = build("bert_for_sequence_classification")
    onnxnn.save(classifier.state_dict(), tmp_path / "with_head.safetensors")
    with pytest.warns(UserWarning, match="classifier.bias"):
        base = language.BertModel.from_pretrained(tmp_path / "with_head.safetensors", config=classifier.config)
    _same_outputs("bert_model", classifier.bert, base)  # "bert." stripped, classifier keys ignored
    onnxnn.save(base.state_dict(), tmp_path / "base.safetensors")
    with pytest.warns(UserWarning, match="newly initialized: \\['classifier.weight', 'classifier.bias'\\]"):
        head = language.BertForSequenceClassification.from_pretrained(tmp_path / "base.safetensors", config=base.config)
    _same_outputs("bert_model", base, head.bert)  # "bert." added


def test_a_pretraining_checkpoint_fine_tunes_into_the_classifier(tmp_path):
    # bert-base-uncased's own file: "bert."-prefixed encoder, the pre-training heads ("cls."),
    # and position_ids saved as a buffer (transformers before 4.31).
    base = build("bert_model")
    state = {f"bert.{key}": value for key, value in base.state_dict().items()}
    state["bert.embeddings.position_ids"] = onnxnn.arange(64)[None]
    state["cls.predictions.bias"] = onnxnn.zeros(99)
    state["cls.seq_relationship.weight"] = onnxnn.zeros(2, 32)
    onnxnn.save(state, tmp_path / "pytorch_model.bin")
    base.config.save_pretrained(tmp_path)
    with pytest.warns(UserWarning) as caught:
        model = language.BertForSequenceClassification.from_pretrained(tmp_path)
    messages = " ".join(str(w.message) for w in caught)
    assert "newly initialized: ['classifier.weight', 'classifier.bias']" in messages
    assert "not used: ['cls.predictions.bias', 'cls.seq_relationship.weight']" in messages
    _same_outputs("bert_model", base, model.bert)


def test_an_original_gpt2_checkpoint_loads(tmp_path):
    # openai-community/gpt2's pytorch_model.bin: no "transformer." prefix, no lm_head, and the
    # causal-mask buffers attn.bias / attn.masked_bias of transformers 2-4.
    model = build("gpt2_lm_head_model")
    state = dict(model.transformer.state_dict())
    for layer in range(2):
        state[f"h.{layer}.attn.bias"] = onnxnn.ones(1, 1, 64, 64)
        state[f"h.{layer}.attn.masked_bias"] = onnxnn.tensor(-1e4)
    onnxnn.save(state, tmp_path / "pytorch_model.bin")
    model.config.save_pretrained(tmp_path)
    loaded = language.GPT2LMHeadModel.from_pretrained(tmp_path)
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    _same_outputs("gpt2_lm_head_model", model, loaded)


def test_legacy_layernorm_gamma_beta_names_load(tmp_path):
    model = build("bert_model")
    legacy = {
        key.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): value
        for key, value in model.state_dict().items()
    }
    onnxnn.save(legacy, tmp_path / "legacy.safetensors")
    loaded = language.BertModel.from_pretrained(tmp_path / "legacy.safetensors", config=model.config)
    _same_outputs("bert_model", model, loaded)


def test_what_cannot_load_is_named(tmp_path):
    with pytest.raises(OSError, match="config.json"):
        language.GPT2Model.from_pretrained(tmp_path)
    build("gpt2_model").config.save_pretrained(tmp_path)
    with pytest.raises(OSError, match="no file named model.safetensors"):
        language.GPT2Model.from_pretrained(tmp_path)
    model = build("gpt2_model")
    state = model.state_dict()
    state["h.0.ln_1.weight"] = onnxnn.zeros(3)
    onnxnn.save(state, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match="size mismatch for h.0.ln_1.weight"):
        language.GPT2Model.from_pretrained(tmp_path)
    state = model.state_dict()
    state["h.0.extra"] = onnxnn.zeros(3)
    onnxnn.save(state, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "h.0.extra"'):
        language.GPT2Model.from_pretrained(tmp_path)
    # A base-model key missing means another architecture: refused, even under a model with a head.
    del state["h.0.extra"], state["ln_f.bias"]
    onnxnn.save(state, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "transformer.ln_f.bias"'):
        language.GPT2LMHeadModel.from_pretrained(tmp_path)
    loaded = language.GPT2LMHeadModel.from_pretrained(tmp_path, strict=False)
    assert loaded.transformer.ln_f.bias.shape == (32,)
