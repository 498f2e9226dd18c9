"""transformers' own models, randomly initialized at the tiny reference configurations, saved the
ways people have them (``save_pretrained``'s snapshot directory with ``model.safetensors`` and
``config.json``; ``torch.save`` of the state_dict as ``pytorch_model.bin``), load into onnxnn's models
and give transformers' outputs to 1e-4 relative.

Runs only where torch and transformers are installed (a venv beside the project's; onnxnn itself
never needs them).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.models import language

from .cases import DECODERS, NAMES, reference, token_ids

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# The bar: outputs equal to 1e-4 relative to their scale (float32 both sides, summed in
# different orders, so not bitwise).
RELATIVE = 1e-4


def _hf_model(name: str, **overrides):
    document = reference(name)
    torch.manual_seed(0)
    config = getattr(transformers, document["config_class"])(**{**document["config"], **overrides})
    model = getattr(transformers, document["class"])(config).eval()
    with torch.no_grad():  # LayerNorm/RMSNorm init to ones and zeros: make them matter too
        for key, value in model.named_parameters():
            if "LayerNorm" in key or "ln_" in key or "norm" in key:
                value.add_(torch.randn_like(value) * 0.1)
    return model


def _inputs(name: str):
    ids = token_ids(2, 7, seed=1)
    mask = np.ones_like(ids)
    mask[1, :2] = 0  # left padding in the second row
    return ids, mask


def _assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    scale = float(np.max(np.abs(expected)))
    np.testing.assert_allclose(actual, expected, rtol=RELATIVE, atol=RELATIVE * scale)


def _compare(name: str, hf_model, model) -> None:
    ids, mask = _inputs(name)
    with torch.no_grad():
        expected = hf_model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    out = model(onnxnn.tensor(ids), attention_mask=onnxnn.tensor(mask))
    if "logits" in expected:
        keep = mask.astype(bool)  # padded positions' outputs are arbitrary in both
        actual_logits = out.logits.detach().numpy()
        if actual_logits.ndim == 3:
            _assert_close(actual_logits[keep], expected.logits.numpy()[keep])
        else:
            _assert_close(actual_logits, expected.logits.numpy())
    else:
        keep = mask.astype(bool)
        _assert_close(out.last_hidden_state.detach().numpy()[keep], expected.last_hidden_state.numpy()[keep])
        if "pooler_output" in expected:
            _assert_close(out.pooler_output.detach().numpy(), expected.pooler_output.numpy())


@pytest.mark.parametrize("name", NAMES)
def test_a_save_pretrained_snapshot_gives_transformers_outputs(name, tmp_path):
    hf_model = _hf_model(name)
    hf_model.save_pretrained(tmp_path)  # config.json + model.safetensors (tied lm_head left out)
    model = getattr(language, reference(name)["class"]).from_pretrained(tmp_path)
    _compare(name, hf_model, model)


@pytest.mark.parametrize("name", NAMES)
def test_a_torch_save_state_dict_gives_transformers_outputs(name, tmp_path):
    hf_model = _hf_model(name)
    torch.save(hf_model.state_dict(), tmp_path / "pytorch_model.bin")
    hf_model.config.to_json_file(tmp_path / "config.json")
    model = getattr(language, reference(name)["class"]).from_pretrained(tmp_path)
    _compare(name, hf_model, model)


def test_a_base_model_checkpoint_loads_into_the_model_with_a_head(tmp_path):
    hf_base = _hf_model("gpt2_model")
    hf_base.save_pretrained(tmp_path)
    model = language.GPT2LMHeadModel.from_pretrained(tmp_path)
    ids = token_ids(1, 5)
    with torch.no_grad():
        expected = hf_base(torch.from_numpy(ids)).last_hidden_state.numpy()
    _assert_close(model.transformer(onnxnn.tensor(ids)).last_hidden_state.detach().numpy(), expected)


@pytest.mark.parametrize("name", DECODERS)
def test_greedy_generation_equals_transformers(name, tmp_path):
    hf_model = _hf_model(name)
    hf_model.save_pretrained(tmp_path)
    model = getattr(language, reference(name)["class"]).from_pretrained(tmp_path)
    ids = token_ids(1, 4, seed=2)
    with torch.no_grad():
        expected = hf_model.generate(
            torch.from_numpy(ids), max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=0
        ).numpy()
    actual = model.generate(onnxnn.tensor(ids), max_new_tokens=6).numpy()
    np.testing.assert_array_equal(actual, expected)


def test_grouped_query_llama_with_llama3_rope_scaling_matches(tmp_path):
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
        "rope_theta": 500000.0,
    }
    hf_model = _hf_model("llama_for_causal_lm", rope_parameters=scaling, num_key_value_heads=1)
    hf_model.save_pretrained(tmp_path)
    model = language.LlamaForCausalLM.from_pretrained(tmp_path)
    _compare("llama_for_causal_lm", hf_model, model)
