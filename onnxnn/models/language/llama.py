"""A LLaMA-family decoder (Touvron et al., 2023) with Hugging Face transformers' module tree.

``LlamaForCausalLM`` has transformers' keys (``model.embed_tokens.weight``,
``model.layers.0.self_attn.q_proj.weight``, ..., ``lm_head.weight``): RMSNorm before attention and
MLP, rotary position embeddings on queries and keys, grouped-query attention
(``num_key_value_heads`` key/value heads shared by groups of query heads), and the SwiGLU MLP
``down_proj(silu(gate_proj(x)) * up_proj(x))``. The key/value cache is a tuple of one
``(key, value)`` pair per layer, each ``(batch, num_key_value_heads, past_length, head_dim)``.
"""

from __future__ import annotations

import math

import numpy as np

from ...nn import Dropout, Embedding, Linear, Module, ModuleList, Parameter, init
from ...nn import functional as F
from ...runtime.creation import arange, from_numpy, ones
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ._common import ModelOutput, PreTrainedModel, activation, attend, init_normal_, merge_heads, split_heads
from .config import LlamaConfig
from .generation import GenerationMixin
from .gpt2 import causal_lm_loss, check_cache, decoder_bias

__all__ = ["LlamaModel", "LlamaForCausalLM", "rotary_inverse_frequencies"]


class LlamaRMSNorm(Module):
    """``weight * x / sqrt(mean(x^2) + eps)`` over the last dimension, computed in float32."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = Parameter(ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: Tensor) -> Tensor:
        return F.rms_norm(hidden_states, (hidden_states.shape[-1],), self.weight, self.variance_epsilon)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"


def rotary_inverse_frequencies(config: LlamaConfig) -> np.ndarray:
    """The rotary embedding's ``1 / theta^(2i / head_dim)`` in float32, with ``rope_scaling`` applied.

    ``"linear"`` divides them by ``factor``; ``"llama3"`` divides only the low frequencies by
    ``factor`` and blends the middle band, as Llama 3.1 does.
    """
    dim = config.head_dim
    inverse = (1.0 / (config.rope_theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))).astype(np.float32)
    scaling = config.rope_scaling
    if not scaling:
        return inverse
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inverse
    if kind == "linear":
        return (inverse / np.float32(scaling["factor"])).astype(np.float32)
    if kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        original = scaling["original_max_position_embeddings"]
        wavelength = 2 * math.pi / inverse
        scaled = np.where(wavelength > original / low, inverse / factor, inverse)
        smooth = (original / wavelength - low) / (high - low)
        blended = (1 - smooth) * scaled / factor + smooth * scaled
        middle = ~(wavelength < original / high) & ~(wavelength > original / low)
        return np.where(middle, blended, scaled).astype(np.float32)
    raise NotImplementedError(f"rope_scaling type '{kind}' is not supported (default, linear, llama3 are)")


class LlamaRotaryEmbedding(Module):
    """``cos`` and ``sin`` of ``position * inverse_frequency``, each ``(batch, length, head_dim)``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        inverse = rotary_inverse_frequencies(config)
        # Not saved (persistent=False), as in transformers: it follows from the config.
        self.register_buffer("inv_freq", from_numpy(inverse), persistent=False)

    def forward(self, like: Tensor, position_ids: Tensor) -> tuple[Tensor, Tensor]:
        freqs = position_ids[..., None].to(self.inv_freq.dtype) * self.inv_freq
        angles = cat([freqs, freqs], dim=-1)
        return angles.cos().to(like.dtype), angles.sin().to(like.dtype)


def rotate_half(x: Tensor) -> Tensor:
    """``(x1, x2) -> (-x2, x1)`` over the two halves of the last dimension."""
    half = x.shape[-1] // 2
    return cat([-x[..., half:], x[..., :half]], dim=-1)


class LlamaAttention(Module):
    """Grouped-query self-attention with rotary embeddings on queries and keys."""

    def __init__(self, config: LlamaConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        bias = config.attention_bias
        self.q_proj = Linear(config.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=bias)
        self.v_proj = Linear(config.hidden_size, self.num_key_value_heads * self.head_dim, bias=bias)
        self.o_proj = Linear(self.num_heads * self.head_dim, config.hidden_size, bias=bias)
        self.attention_dropout = Dropout(config.attention_dropout)

    def forward(
        self,
        hidden_states: Tensor,
        rotary: tuple[Tensor, Tensor],
        bias: Tensor | None,
        past: tuple[Tensor, Tensor] | None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        query = split_heads(self.q_proj(hidden_states), self.num_heads, self.head_dim)
        key = split_heads(self.k_proj(hidden_states), self.num_key_value_heads, self.head_dim)
        value = split_heads(self.v_proj(hidden_states), self.num_key_value_heads, self.head_dim)
        cos, sin = rotary[0][:, None], rotary[1][:, None]  # broadcast over heads
        query = query * cos + rotate_half(query) * sin
        key = key * cos + rotate_half(key) * sin
        if past is not None:
            key = cat([past[0], key], dim=-2)
            value = cat([past[1], value], dim=-2)
        present = (key, value)  # cached before repetition: num_key_value_heads heads only
        if self.num_key_value_groups > 1:
            key = key.repeat_interleave(self.num_key_value_groups, dim=1)
            value = value.repeat_interleave(self.num_key_value_groups, dim=1)
        context = attend(query, key, value, bias, self.scaling, self.attention_dropout)
        return self.o_proj(merge_heads(context)), present


class LlamaMLP(Module):
    """SwiGLU: ``down_proj(act(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        bias = config.mlp_bias
        self.gate_proj = Linear(config.hidden_size, config.intermediate_size, bias=bias)
        self.up_proj = Linear(config.hidden_size, config.intermediate_size, bias=bias)
        self.down_proj = Linear(config.intermediate_size, config.hidden_size, bias=bias)
        self.act_fn = activation(config.hidden_act)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(Module):
    """``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: LlamaConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_idx)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, rotary, bias, past) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        attended, present = self.self_attn(self.input_layernorm(hidden_states), rotary, bias, past)
        hidden_states = hidden_states + attended
        return hidden_states + self.mlp(self.post_attention_layernorm(hidden_states)), present


class LlamaModel(PreTrainedModel):
    """The LLaMA decoder stack: token embeddings, ``num_hidden_layers`` layers, final RMSNorm.

    ``forward(input_ids, past_key_values=None, attention_mask=None, position_ids=None, use_cache=False)``
    returns ``last_hidden_state`` and, with ``use_cache``, ``past_key_values``.
    """

    config_class = LlamaConfig
    base_model_prefix = "model"
    # Older transformers saved each layer's rotary inverse frequencies.
    _keys_to_ignore_on_load_unexpected = (r"rotary_emb\.inv_freq$",)

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size, padding_idx=self.padding_idx)
        self.layers = ModuleList([LlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config)
        init_normal_(self, config.initializer_range)

    def forward(
        self,
        input_ids: Tensor,
        past_key_values: tuple | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        use_cache: bool = False,
    ) -> ModelOutput:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch_size, sequence_length), got shape {list(input_ids.shape)}")
        past = check_cache(past_key_values, len(self.layers))
        length = input_ids.shape[1]
        if position_ids is None:
            position_ids = arange(past, past + length, device=input_ids.device)[None, :]
        hidden_states = self.embed_tokens(input_ids)
        rotary = self.rotary_emb(hidden_states, position_ids)
        bias = decoder_bias(attention_mask, length, past, hidden_states)
        presents = []
        for index, layer in enumerate(self.layers):
            layer_past = past_key_values[index] if past_key_values is not None else None
            hidden_states, present = layer(hidden_states, rotary, bias, layer_past)
            presents.append(present)
        hidden_states = self.norm(hidden_states)
        return ModelOutput(last_hidden_state=hidden_states, past_key_values=tuple(presents) if use_cache else None)


class LlamaForCausalLM(PreTrainedModel, GenerationMixin):
    """LLaMA with the language-modelling head ``lm_head`` (tied to ``model.embed_tokens`` only when
    ``config.tie_word_embeddings``).

    ``forward(input_ids, past_key_values=None, attention_mask=None, position_ids=None, labels=None,
    use_cache=False)`` returns ``logits``, ``past_key_values`` with ``use_cache`` and, with
    ``labels``, the next-token cross-entropy ``loss``.

    Example::

        >>> config = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        ...                      num_attention_heads=4, num_key_value_heads=2)
        >>> model = LlamaForCausalLM(config).eval()
        >>> model.generate(onnxnn.tensor([[1, 2, 3]]), max_new_tokens=4).shape
        onnxnn.Size([1, 7])
    """

    config_class = LlamaConfig
    base_model_prefix = "model"
    _tied_weights_keys = ("lm_head.weight",)
    _keys_to_ignore_on_load_unexpected = LlamaModel._keys_to_ignore_on_load_unexpected

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.model = LlamaModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False)
        init.normal_(self.lm_head.weight, mean=0.0, std=config.initializer_range)
        self.tie_weights()

    def tie_weights(self) -> None:
        if self._ties():
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self,
        input_ids: Tensor,
        past_key_values: tuple | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool = False,
    ) -> ModelOutput:
        out = self.model(input_ids, past_key_values, attention_mask, position_ids, use_cache)
        logits = self.lm_head(out.last_hidden_state)
        loss = causal_lm_loss(logits, labels) if labels is not None else None
        return ModelOutput(loss=loss, logits=logits, past_key_values=out.past_key_values)
