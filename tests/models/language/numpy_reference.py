"""The three architectures written once more in plain numpy float64, from a state_dict of arrays:
an independent statement of what transformers computes, for the tests to compare with where
transformers is not installed."""

from __future__ import annotations

import math

import numpy as np


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def _rms_norm(x, weight, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * weight


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _softmax(x):
    shifted = np.exp(x - x.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def _heads(x, heads):
    batch, length, width = x.shape
    return x.reshape(batch, length, heads, width // heads).transpose(0, 2, 1, 3)


def _merge(x):
    batch, heads, length, size = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * size)


def _masked_attention(q, k, v, visible):
    """``visible``: ``(batch or 1, 1, queries, keys)`` booleans; masked keys get exactly zero weight."""
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1])
    scores = np.where(visible, scores, -np.inf)
    # A query with no visible key (a padded one in a decoder) gets zeros, not NaN: its output is
    # arbitrary in any implementation, and must not poison the other rows through later layers.
    dead = ~visible.any(-1, keepdims=True)
    return np.where(dead, 0.0, _softmax(np.where(dead, 0.0, scores))) @ v


def bert(state, config, ids, mask):
    """BertModel's ``last_hidden_state`` and ``pooler_output``."""
    s, eps, heads = (
        state,
        config["layer_norm_eps"] if "layer_norm_eps" in config else 1e-12,
        config["num_attention_heads"],
    )
    length = ids.shape[1]
    x = (
        s["embeddings.word_embeddings.weight"][ids]
        + s["embeddings.position_embeddings.weight"][np.arange(length)]
        + s["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, s["embeddings.LayerNorm.weight"], s["embeddings.LayerNorm.bias"], eps)
    visible = mask[:, None, None, :].astype(bool)
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."

        def linear(name, h, p=p):
            return h @ s[p + name + ".weight"].T + s[p + name + ".bias"]

        q, k, v = (_heads(linear(f"attention.self.{n}", x), heads) for n in ("query", "key", "value"))
        attended = linear("attention.output.dense", _merge(_masked_attention(q, k, v, visible)))
        x = _layer_norm(
            attended + x, s[p + "attention.output.LayerNorm.weight"], s[p + "attention.output.LayerNorm.bias"], eps
        )
        inner = _gelu(linear("intermediate.dense", x))
        x = _layer_norm(
            linear("output.dense", inner) + x, s[p + "output.LayerNorm.weight"], s[p + "output.LayerNorm.bias"], eps
        )
    pooled = np.tanh(x[:, 0] @ s["pooler.dense.weight"].T + s["pooler.dense.bias"])
    return x, pooled


def _decoder_visible(mask, length):
    causal = np.tril(np.ones((length, length), dtype=bool))[None, None]
    return causal & mask[:, None, None, :].astype(bool)


def gpt2(state, config, ids, mask):
    """GPT2Model's ``last_hidden_state`` (positions 0..length-1)."""
    s, heads, eps = state, config["n_head"], 1e-5
    length = ids.shape[1]
    x = s["wte.weight"][ids] + s["wpe.weight"][np.arange(length)]
    visible = _decoder_visible(mask, length)
    for layer in range(config["n_layer"]):
        p = f"h.{layer}."
        h = _layer_norm(x, s[p + "ln_1.weight"], s[p + "ln_1.bias"], eps)
        qkv = h @ s[p + "attn.c_attn.weight"] + s[p + "attn.c_attn.bias"]  # Conv1D: (in, out) weight
        q, k, v = (_heads(part, heads) for part in np.split(qkv, 3, axis=-1))
        x = x + _merge(_masked_attention(q, k, v, visible)) @ s[p + "attn.c_proj.weight"] + s[p + "attn.c_proj.bias"]
        h = _layer_norm(x, s[p + "ln_2.weight"], s[p + "ln_2.bias"], eps)
        inner = _gelu_tanh(h @ s[p + "mlp.c_fc.weight"] + s[p + "mlp.c_fc.bias"])
        x = x + inner @ s[p + "mlp.c_proj.weight"] + s[p + "mlp.c_proj.bias"]
    return _layer_norm(x, s["ln_f.weight"], s["ln_f.bias"], eps)


def llama(state, config, ids, mask, theta=10000.0, eps=1e-6):
    """LlamaModel's ``last_hidden_state`` (positions 0..length-1)."""
    s = state
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    size = config["hidden_size"] // heads
    length = ids.shape[1]
    x = s["embed_tokens.weight"][ids]
    # transformers computes the rotary table in float32 whatever the model's dtype (then casts).
    inverse = (1.0 / theta ** (np.arange(0, size, 2, dtype=np.float32) / size)).astype(np.float32)
    angles = np.arange(length, dtype=np.float32)[:, None] * inverse[None, :]  # (length, size/2), float32
    cos, sin = np.cos(angles.astype(np.float64)), np.sin(angles.astype(np.float64))

    def rotate(t):  # pairs (i, i + size/2) rotated by their angle
        first, second = t[..., : size // 2], t[..., size // 2 :]
        return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)

    visible = _decoder_visible(mask, length)
    for layer in range(config["num_hidden_layers"]):
        p = f"layers.{layer}."
        h = _rms_norm(x, s[p + "input_layernorm.weight"], eps)
        q = rotate(_heads(h @ s[p + "self_attn.q_proj.weight"].T, heads))
        k = rotate(_heads(h @ s[p + "self_attn.k_proj.weight"].T, kv_heads))
        v = _heads(h @ s[p + "self_attn.v_proj.weight"].T, kv_heads)
        group = heads // kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)  # query head j uses kv head j // group
        x = x + _merge(_masked_attention(q, k, v, visible)) @ s[p + "self_attn.o_proj.weight"].T
        h = _rms_norm(x, s[p + "post_attention_layernorm.weight"], eps)
        gate, up = h @ s[p + "mlp.gate_proj.weight"].T, h @ s[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ s[p + "mlp.down_proj.weight"].T
    return _rms_norm(x, s["norm.weight"], eps)
