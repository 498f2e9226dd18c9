"""The language models' state_dicts equal transformers': keys in order, shapes and dtypes, from the
reference files generated with transformers (no torch needed here)."""

from __future__ import annotations

import pytest

from onnxnn.models import language

from .cases import NAMES, REFERENCE, build, reference


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_keys_shapes_and_dtypes_equal_transformers(name):
    model = build(name)
    actual = [[key, list(value.shape), value.dtype.name] for key, value in model.state_dict().items()]
    assert actual == reference(name)["state_dict"]


@pytest.mark.parametrize("name", ["gpt2_lm_head_model"])
def test_the_lm_head_shares_the_token_embedding(name):
    model = build(name)
    assert model.lm_head.weight is model.transformer.wte.weight
    # Counted once, as transformers' num_parameters does.
    assert model.num_parameters() == sum(p.numel() for p in model.transformer.parameters())


def test_llama_does_not_tie_unless_configured():
    model = build("llama_for_causal_lm")
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    tied = build("llama_for_causal_lm", tie_word_embeddings=True)
    assert tied.lm_head.weight is tied.model.embed_tokens.weight


@pytest.mark.parametrize("name", NAMES)
def test_transformers_config_json_builds_the_same_model(name):
    document = reference(name)
    config_class = getattr(language, document["config_class"])
    from_file = config_class.from_json_file(REFERENCE / f"{name}.config.json")
    from_kwargs = config_class(**document["config"])
    for key in document["config"]:
        assert getattr(from_file, key) == getattr(from_kwargs, key), key
    model = getattr(language, document["class"])(from_file)
    assert [[k, list(v.shape), v.dtype.name] for k, v in model.state_dict().items()] == document["state_dict"]


def test_llama_reads_rope_parameters_of_transformers_5():
    config = language.LlamaConfig.from_json_file(REFERENCE / "llama_for_causal_lm.config.json")
    assert config.rope_theta == 10000.0 and config.num_key_value_heads == 2 and config.head_dim == 8
    scaled = language.LlamaConfig(
        hidden_size=32,
        num_attention_heads=4,
        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0},
    )
    assert scaled.rope_theta == 500.0 and scaled.rope_scaling["factor"] == 2.0


def test_config_errors_name_the_problem():
    with pytest.raises(ValueError, match="not a multiple of the number of attention heads"):
        language.BertConfig(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="multiple of num_key_value_heads"):
        language.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=3)
    with pytest.raises(ValueError, match="model_type 'gpt2'"):
        language.GPT2Config.from_dict({"model_type": "llama"})
    with pytest.raises(TypeError, match="should be an instance of class `GPT2Config`"):
        language.GPT2Model(language.LlamaConfig())


@pytest.mark.parametrize("name", ["bert_model", "llama_model"])
def test_the_padding_token_embedding_starts_at_zero(name):
    # transformers zeroes the padding_idx row at init (BERT pads with 0; LLaMA when pad_token_id is set).
    model = build(name, pad_token_id=0)
    embedding = model.embeddings.word_embeddings if name == "bert_model" else model.embed_tokens
    assert embedding.padding_idx == 0
    weight = embedding.weight.detach().numpy()
    assert not weight[0].any() and weight[1:].all()
