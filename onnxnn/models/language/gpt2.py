"""GPT-2 (Radford et al., 2019) with Hugging Face transformers' module tree, so its checkpoints load.

``GPT2Model`` and ``GPT2LMHeadModel`` have transformers' keys (``wte.weight``,
``h.0.attn.c_attn.weight``, ...; ``transformer.`` in front and ``lm_head.weight`` for the LM head,
whose weight is the token embedding's). The projections are transformers' ``Conv1D``: a linear
layer whose weight is stored transposed, ``(in_features, out_features)``.

Both models take and return a key/value cache: ``past_key_values`` is a tuple with one
``(key, value)`` pair per layer, each ``(batch, heads, past_length, head_dim)``.
"""

from __future__ import annotations

import math

from ...nn import Dropout, Embedding, LayerNorm, Linear, Module, ModuleList, Parameter, init
from ...nn import functional as F
from ...runtime.creation import arange, empty
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor
from ._common import (
    ModelOutput,
    PreTrainedModel,
    activation,
    attend,
    causal_bias,
    init_normal_,
    merge_heads,
    padding_bias,
    split_heads,
)
from .config import GPT2Config
from .generation import GenerationMixin

__all__ = ["Conv1D", "GPT2Model", "GPT2LMHeadModel"]


class Conv1D(Module):
    """transformers' ``Conv1D``: ``x @ weight + bias`` with ``weight`` of shape ``(nx, nf)``.

    Args:
        nf: output features.
        nx: input features.
    """

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.nx = nx
        self.weight = Parameter(empty(nx, nf))
        self.bias = Parameter(empty(nf))
        init.normal_(self.weight, std=0.02)
        init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        return x @ self.weight + self.bias

    def extra_repr(self) -> str:
        return f"nf={self.nf}, nx={self.nx}"


class GPT2Attention(Module):
    """Causal self-attention with a fused query/key/value projection (``c_attn``)."""

    def __init__(self, config: GPT2Config, layer_idx: int = 0) -> None:
        super().__init__()
        self.embed_dim = config.n_embd
        self.num_heads = config.n_head
        self.head_dim = self.embed_dim // self.num_heads
        self.scaling = self.head_dim**-0.5 if config.scale_attn_weights else 1.0
        if config.scale_attn_by_inverse_layer_idx:
            self.scaling /= float(layer_idx + 1)
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = Dropout(config.attn_pdrop)
        self.resid_dropout = Dropout(config.resid_pdrop)

    def forward(
        self, hidden_states: Tensor, bias: Tensor | None, past: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        query, key, value = self.c_attn(hidden_states).split(self.embed_dim, dim=2)
        query = split_heads(query, self.num_heads, self.head_dim)
        key = split_heads(key, self.num_heads, self.head_dim)
        value = split_heads(value, self.num_heads, self.head_dim)
        if past is not None:
            key = cat([past[0], key], dim=-2)
            value = cat([past[1], value], dim=-2)
        context = merge_heads(attend(query, key, value, bias, self.scaling, self.attn_dropout))
        return self.resid_dropout(self.c_proj(context)), (key, value)


class GPT2MLP(Module):
    """The feed-forward block: ``c_proj(act(c_fc(x)))`` and dropout."""

    def __init__(self, intermediate_size: int, config: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.n_embd)
        self.c_proj = Conv1D(config.n_embd, intermediate_size)
        self.act = activation(config.activation_function)
        self.dropout = Dropout(config.resid_pdrop)

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class GPT2Block(Module):
    """One pre-norm decoder layer: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, config: GPT2Config, layer_idx: int = 0) -> None:
        super().__init__()
        inner = config.n_inner if config.n_inner is not None else 4 * config.n_embd
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config, layer_idx)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner, config)

    def forward(
        self, hidden_states: Tensor, bias: Tensor | None, past: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        attended, present = self.attn(self.ln_1(hidden_states), bias, past)
        hidden_states = hidden_states + attended
        return hidden_states + self.mlp(self.ln_2(hidden_states)), present


def check_cache(past_key_values, layers: int) -> int:
    """The cached length of a legacy ``((key, value), ...)`` cache (0 for ``None``)."""
    if past_key_values is None:
        return 0
    if not isinstance(past_key_values, (tuple, list)) or len(past_key_values) != layers:
        raise ValueError(
            f"past_key_values must be a tuple of {layers} (key, value) pairs, one per layer, got "
            f"{type(past_key_values).__name__}"
            + (f" of length {len(past_key_values)}" if isinstance(past_key_values, (tuple, list)) else "")
        )
    return past_key_values[0][0].shape[-2]


def decoder_bias(attention_mask: Tensor | None, queries: int, past: int, like: Tensor) -> Tensor:
    """The causal bias plus, when given, the padding bias of a ``(batch, past + queries)`` mask."""
    if attention_mask is not None and (attention_mask.dim() != 2 or attention_mask.shape[-1] != past + queries):
        raise ValueError(
            f"attention_mask must be (batch_size, past_length + sequence_length) = (*, {past + queries}) "
            f"to cover the cached and the new tokens, got shape {list(attention_mask.shape)}"
        )
    bias = causal_bias(queries, past, like)
    padding = padding_bias(attention_mask, like)
    return bias if padding is None else bias + padding


class GPT2Model(PreTrainedModel):
    """GPT-2's decoder stack: token and position embeddings, ``n_layer`` blocks, final LayerNorm.

    ``forward(input_ids, past_key_values=None, attention_mask=None, position_ids=None, use_cache=False)``
    returns a :class:`ModelOutput` with ``last_hidden_state`` ``(batch, length, n_embd)`` and, with
    ``use_cache``, ``past_key_values``. ``attention_mask`` is ``(batch, past + length)``, 1 for
    tokens to attend to; positions default to ``past, ..., past + length - 1``.

    Example::

        >>> config = GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=4, n_positions=64)
        >>> GPT2Model(config)(onnxnn.tensor([[1, 2, 3]])).last_hidden_state.shape
        onnxnn.Size([1, 3, 32])
    """

    config_class = GPT2Config
    base_model_prefix = "transformer"
    # The causal-mask buffers older transformers saved (the original gpt2 checkpoints carry them).
    _keys_to_ignore_on_load_unexpected = (r"\.attn\.bias$", r"\.attn\.masked_bias$")

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.embed_dim = config.n_embd
        self.wte = Embedding(config.vocab_size, self.embed_dim)
        self.wpe = Embedding(config.n_positions, self.embed_dim)
        self.drop = Dropout(config.embd_pdrop)
        self.h = ModuleList([GPT2Block(config, layer_idx=i) for i in range(config.n_layer)])
        self.ln_f = LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)
        init_normal_(self, config.initializer_range)
        # GPT-2's scaled init of the residual projections (transformers' _init_weights).
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                init.normal_(parameter, mean=0.0, std=config.initializer_range / math.sqrt(2 * config.n_layer))

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
        past = check_cache(past_key_values, len(self.h))
        length = input_ids.shape[1]
        if past + length > self.config.n_positions:
            raise ValueError(
                f"Sequence length {past + length} is longer than the model's n_positions ({self.config.n_positions})"
            )
        if position_ids is None:
            position_ids = arange(past, past + length, device=input_ids.device)[None, :]
        hidden_states = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        bias = decoder_bias(attention_mask, length, past, hidden_states)
        presents = []
        for index, block in enumerate(self.h):
            layer_past = past_key_values[index] if past_key_values is not None else None
            hidden_states, present = block(hidden_states, bias, layer_past)
            presents.append(present)
        hidden_states = self.ln_f(hidden_states)
        return ModelOutput(last_hidden_state=hidden_states, past_key_values=tuple(presents) if use_cache else None)


class GPT2LMHeadModel(PreTrainedModel, GenerationMixin):
    """GPT-2 with the language-modelling head ``lm_head``, whose weight is ``transformer.wte.weight``.

    ``forward(input_ids, past_key_values=None, attention_mask=None, position_ids=None, labels=None,
    use_cache=False)`` returns ``logits`` ``(batch, length, vocab_size)``, ``past_key_values`` with
    ``use_cache`` and, with ``labels``, the next-token cross-entropy ``loss`` (labels shifted left
    inside, ``-100`` ignored), as transformers. ``generate`` continues a prompt (see
    :mod:`onnxnn.models.language.generation`).
    """

    config_class = GPT2Config
    base_model_prefix = "transformer"
    _tied_weights_keys = ("lm_head.weight",)
    _keys_to_ignore_on_load_unexpected = GPT2Model._keys_to_ignore_on_load_unexpected

    def __init__(self, config: GPT2Config) -> None:
        super().__init__(config)
        self.transformer = GPT2Model(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        if self._ties():
            self.lm_head.weight = self.transformer.wte.weight

    def forward(
        self,
        input_ids: Tensor,
        past_key_values: tuple | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool = False,
    ) -> ModelOutput:
        out = self.transformer(input_ids, past_key_values, attention_mask, position_ids, use_cache)
        logits = self.lm_head(out.last_hidden_state)
        loss = causal_lm_loss(logits, labels) if labels is not None else None
        return ModelOutput(loss=loss, logits=logits, past_key_values=out.past_key_values)


def causal_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy of each position's logits against the next label (``-100`` ignored)."""
    vocab = logits.shape[-1]
    shifted = logits[:, :-1, :].reshape(-1, vocab)
    targets = labels[:, 1:].reshape(-1)
    return F.cross_entropy(shifted, targets, ignore_index=-100)
