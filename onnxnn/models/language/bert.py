"""BERT (Devlin et al., 2018) with Hugging Face transformers' module tree, so its checkpoints load.

``BertModel`` and ``BertForSequenceClassification`` have transformers' ``state_dict`` keys
(``embeddings.word_embeddings.weight``, ``encoder.layer.0.attention.self.query.weight``, ...,
``bert.`` in front for the classifier) and compute what transformers' eager attention computes.
"""

from __future__ import annotations

import math

import numpy as np

from ...nn import Dropout, Embedding, LayerNorm, Linear, Module, ModuleList, Tanh
from ...nn import functional as F
from ...ir.dtypes import int64
from ...runtime.creation import tensor, zeros
from ...runtime.tensor import Tensor
from ._common import (
    ModelOutput,
    PreTrainedModel,
    activation,
    attend,
    init_normal_,
    merge_heads,
    padding_bias,
    split_heads,
)
from .config import BertConfig

__all__ = ["BertModel", "BertForSequenceClassification"]


class BertEmbeddings(Module):
    """Word, position and token-type embeddings, summed, then LayerNorm and dropout."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)
        # Not saved (persistent=False), as in transformers: checkpoints do not carry them.
        # Made whole rather than as transformers' ``arange(n).expand((1, -1))`` view: a model's
        # construction leaves nothing pending, so its first call records the graph of every later one.
        positions = np.arange(config.max_position_embeddings, dtype=np.int64)[None, :]
        self.register_buffer("position_ids", tensor(positions), persistent=False)
        self.register_buffer("token_type_ids", zeros(1, config.max_position_embeddings, dtype=int64), persistent=False)

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor | None = None, position_ids: Tensor | None = None
    ) -> Tensor:
        length = input_ids.shape[1]
        if length > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"Sequence length {length} is longer than max_position_embeddings "
                f"({self.position_embeddings.num_embeddings})"
            )
        if position_ids is None:
            position_ids = self.position_ids[:, :length]
        if token_type_ids is None:
            # One row, broadcast over the batch: no constant of the traced batch size in an export.
            token_type_ids = self.token_type_ids[:, :length]
        embeddings = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(Module):
    """Multi-head self-attention: ``query``, ``key``, ``value`` projections and scaled dot products."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = Linear(config.hidden_size, self.all_head_size)
        self.key = Linear(config.hidden_size, self.all_head_size)
        self.value = Linear(config.hidden_size, self.all_head_size)
        self.dropout = Dropout(config.attention_probs_dropout_prob)

    def forward(self, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
        heads, size = self.num_attention_heads, self.attention_head_size
        query = split_heads(self.query(hidden_states), heads, size)
        key = split_heads(self.key(hidden_states), heads, size)
        value = split_heads(self.value(hidden_states), heads, size)
        context = attend(query, key, value, bias, 1.0 / math.sqrt(size), self.dropout)
        return merge_heads(context)


class BertSelfOutput(Module):
    """The attention's output projection, dropout, residual and LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: Tensor, input_tensor: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(Module):
    """Self-attention followed by its output block."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
        return self.output(self.self(hidden_states, bias), hidden_states)


class BertIntermediate(Module):
    """The feed-forward block's expansion and activation."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = activation(config.hidden_act)

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(Module):
    """The feed-forward block's projection back, dropout, residual and LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: Tensor, input_tensor: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(Module):
    """One post-norm transformer encoder layer."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
        attention_output = self.attention(hidden_states, bias)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(Module):
    """The stack of ``num_hidden_layers`` layers."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.layer = ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])

    def forward(self, hidden_states: Tensor, bias: Tensor | None = None) -> Tensor:
        for layer in self.layer:
            hidden_states = layer(hidden_states, bias)
        return hidden_states


class BertPooler(Module):
    """``tanh(dense(h[:, 0]))``: the first ([CLS]) token's summary of the sequence."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.dense = Linear(config.hidden_size, config.hidden_size)
        self.activation = Tanh()

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.activation(self.dense(hidden_states[:, 0]))


class BertModel(PreTrainedModel):
    """BERT's encoder: embeddings, ``num_hidden_layers`` layers and the pooler.

    Args:
        config: a :class:`BertConfig`.
        add_pooling_layer: build the pooler (``pooler.dense``). Default: ``True``.

    Returns (from ``forward``):
        A :class:`ModelOutput` with ``last_hidden_state`` ``(batch, length, hidden_size)`` and
        ``pooler_output`` ``(batch, hidden_size)``.

    Example::

        >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
        ...                     num_attention_heads=4, intermediate_size=64)
        >>> model = BertModel(config).eval()
        >>> model(onnxnn.tensor([[1, 5, 7]])).last_hidden_state.shape
        onnxnn.Size([1, 3, 32])
    """

    config_class = BertConfig
    base_model_prefix = "bert"
    # Saved by transformers before 4.31 (when position_ids became a non-persistent buffer).
    _keys_to_ignore_on_load_unexpected = (r"position_ids$", r"token_type_ids$")

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        init_normal_(self, config.initializer_range)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
    ) -> ModelOutput:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch_size, sequence_length), got shape {list(input_ids.shape)}")
        hidden_states = self.embeddings(input_ids, token_type_ids, position_ids)
        hidden_states = self.encoder(hidden_states, padding_bias(attention_mask, hidden_states))
        pooled = self.pooler(hidden_states) if self.pooler is not None else None
        return ModelOutput(last_hidden_state=hidden_states, pooler_output=pooled)


class BertForSequenceClassification(PreTrainedModel):
    """BERT with a linear classifier on the pooled output (``config.num_labels`` classes).

    ``forward(input_ids, attention_mask=None, token_type_ids=None, position_ids=None, labels=None)``
    returns a :class:`ModelOutput` with ``logits`` ``(batch, num_labels)`` and, with ``labels``, the
    ``loss``: mean squared error for one label (regression), cross-entropy otherwise, as transformers.
    """

    config_class = BertConfig
    base_model_prefix = "bert"
    _keys_to_ignore_on_load_unexpected = BertModel._keys_to_ignore_on_load_unexpected

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertModel(config)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = Dropout(dropout)
        self.classifier = Linear(config.hidden_size, config.num_labels)
        init_normal_(self.classifier, config.initializer_range)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> ModelOutput:
        pooled = self.bert(input_ids, attention_mask, token_type_ids, position_ids).pooler_output
        logits = self.classifier(self.dropout(pooled))
        loss = None
        if labels is not None:
            if self.num_labels == 1 or self.config.problem_type == "regression":
                loss = F.mse_loss(logits.squeeze(-1) if self.num_labels == 1 else logits, labels.to(logits.dtype))
            else:
                loss = F.cross_entropy(logits.reshape(-1, self.num_labels), labels.reshape(-1))
        return ModelOutput(loss=loss, logits=logits)
