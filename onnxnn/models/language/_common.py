"""What the language models share: output records, activations, attention masks, and
``PreTrainedModel`` (building from a config, loading a local Hugging Face checkpoint, tied weights).
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from ...nn import GELU, Embedding, LayerNorm, Linear, Module, ReLU, SiLU, Tanh, init
from ...nn import functional as F
from ...runtime.internal import constant_tensor
from ...runtime.tensor import Tensor
from .config import PretrainedConfig
from ._weights import adapt_keys, read_state_dict

__all__ = ["ModelOutput", "PreTrainedModel", "activation", "attend", "padding_bias", "causal_bias"]


class ModelOutput(OrderedDict):
    """A model's results by name, readable as attributes or keys (``out.logits``, ``out["logits"]``)
    or by position (``out[0]``), as transformers' ``ModelOutput``; fields that are ``None`` are left out.
    """

    def __init__(self, **fields: Any) -> None:
        super().__init__((key, value) for key, value in fields.items() if value is not None)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.get(name)

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return self.to_tuple()[key]
        return super().__getitem__(key)

    def to_tuple(self) -> tuple:
        """The fields that are set, in order."""
        return tuple(self.values())


class NewGELUActivation(Module):
    """GPT-2's ``gelu_new``: the tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate="tanh")


_ACTIVATIONS: dict[str, Callable[[], Module]] = {
    "gelu": lambda: GELU(),
    "gelu_new": NewGELUActivation,
    "gelu_pytorch_tanh": lambda: GELU(approximate="tanh"),
    "gelu_fast": NewGELUActivation,
    "relu": lambda: ReLU(),
    "silu": lambda: SiLU(),
    "swish": lambda: SiLU(),
    "tanh": lambda: Tanh(),
}


def activation(name: str) -> Module:
    """The module for transformers' activation name (``ACT2FN``)."""
    factory = _ACTIVATIONS.get(name)
    if factory is None:
        raise KeyError(f"function {name} not found in ACT2FN mapping {list(_ACTIVATIONS)}")
    return factory()


# torch.finfo(dtype).min: transformers masks with it, not -inf, so a fully masked row stays finite
# (numpy's finfo does not know bfloat16).
_LOWEST = {"float16": -65504.0, "bfloat16": -3.3895313892515355e38, "float32": float(np.finfo(np.float32).min)}


def _lowest(like: Tensor) -> float:
    return _LOWEST.get(like.dtype.name, float(np.finfo(np.float64).min))


def padding_bias(attention_mask: Tensor | None, like: Tensor) -> Tensor | None:
    """``(batch, 1, 1, keys)`` additive bias from a 0/1 padding mask: 0 where 1, the dtype's lowest where 0."""
    if attention_mask is None:
        return None
    keep = attention_mask[:, None, None, :].to(like.dtype)
    return (1.0 - keep) * _lowest(like)


def causal_bias(queries: int, past: int, like: Tensor) -> Tensor:
    """``(queries, past + queries)`` additive bias: query ``i`` (at position ``past + i``) sees keys ``<= past + i``."""
    keys = past + queries
    visible = np.arange(keys)[None, :] <= (past + np.arange(queries))[:, None]
    bias = np.where(visible, 0.0, _lowest(like)).astype(like.dtype.numpy_dtype)
    return constant_tensor(bias, like.dtype, like.device)


def attend(
    query: Tensor, key: Tensor, value: Tensor, bias: Tensor | None, scale: float, dropout: Module | None = None
) -> Tensor:
    """``softmax(Q K^T * scale + bias) V`` over ``(batch, heads, length, head_dim)`` tensors."""
    scores = (query @ key.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias
    weights = scores.softmax(dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value


def split_heads(x: Tensor, heads: int, head_dim: int) -> Tensor:
    """``(batch, length, heads * head_dim)`` -> ``(batch, heads, length, head_dim)``."""
    batch, length = x.shape[0], x.shape[1]
    return x.reshape(batch, length, heads, head_dim).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """``(batch, heads, length, head_dim)`` -> ``(batch, length, heads * head_dim)``."""
    batch, heads, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * head_dim)


def init_normal_(module: Module, std: float) -> None:
    """transformers' ``_init_weights``: Linear and Embedding weights ~ N(0, std), biases 0, norms 1."""
    for sub in module.modules():
        if isinstance(sub, Linear):
            init.normal_(sub.weight, mean=0.0, std=std)
            if sub.bias is not None:
                init.zeros_(sub.bias)
        elif isinstance(sub, Embedding):
            init.normal_(sub.weight, mean=0.0, std=std)
            sub._fill_padding_idx_with_zero()
        elif isinstance(sub, LayerNorm):
            init.ones_(sub.weight)
            init.zeros_(sub.bias)


class PreTrainedModel(Module):
    """The base of the language models: a config, transformers' weight names, and ``from_pretrained``.

    Subclasses set ``config_class``, ``base_model_prefix`` (the attribute holding the base model in
    models with a head: ``"bert"``, ``"transformer"``, ``"model"``), ``_tied_weights_keys`` (keys a
    checkpoint may omit because they share another key's tensor) and
    ``_keys_to_ignore_on_load_unexpected`` (patterns of buffers old checkpoints carry).
    """

    config_class: type[PretrainedConfig] = PretrainedConfig
    base_model_prefix = ""
    _tied_weights_keys: tuple[str, ...] = ()
    _keys_to_ignore_on_load_unexpected: tuple[str, ...] = ()

    def __init__(self, config: PretrainedConfig) -> None:
        super().__init__()
        if not isinstance(config, self.config_class):
            raise TypeError(
                f"Parameter config in `{type(self).__name__}(config)` should be an instance of class "
                f"`{self.config_class.__name__}`, got {type(config).__name__}"
            )
        self.config = config

    def tie_weights(self) -> None:
        """Makes the output projection share the input embedding's weight, when the config says so."""

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike, config: PretrainedConfig | None = None, *, strict: bool = True
    ) -> PreTrainedModel:
        """Builds the model from a local Hugging Face snapshot directory (or a weight file plus ``config``).

        ``path`` is a directory holding ``config.json`` and ``model.safetensors`` /
        ``pytorch_model.bin`` (or their sharded ``*.index.json``), as ``save_pretrained`` writes and
        ``huggingface_hub.snapshot_download`` fetches, or a single weight file. The model is
        returned in eval mode, as transformers does.

        Args:
            path: the snapshot directory or a weight file.
            config: the configuration; read from ``path/config.json`` when omitted.
            strict: refuse checkpoints with missing or unexpected keys (other than tied weights and
                the buffers transformers ignores).

        Raises:
            OSError: no config or weight file at ``path``.
            RuntimeError: keys or shapes do not match (the message lists them).

        Example::

            >>> model = GPT2LMHeadModel.from_pretrained("/data/snapshots/gpt2")
        """
        if config is None:
            config = cls.config_class.from_pretrained(path)
        model = cls(config)
        model.load_pretrained_state_dict(read_state_dict(path), strict=strict)
        return model.eval()  # type: ignore[return-value]  # eval returns the model itself

    def load_pretrained_state_dict(self, state: dict[str, Tensor], strict: bool = True):
        """Loads a checkpoint's state_dict as transformers does: renaming legacy keys, adding or
        dropping the base-model prefix, ignoring known buffers and tying weights afterwards.

        Keys outside the base model are a head's: a head the checkpoint lacks keeps its fresh
        initialization and a head this model lacks is left unused, each with a warning (fine-tuning
        ``BertForSequenceClassification`` from a pre-training checkpoint is the usual case).
        Missing or unexpected keys of the base model itself mean another architecture or size:
        a ``RuntimeError`` when ``strict``.
        """
        expected = set(self.state_dict())
        state = adapt_keys(state, expected, self.base_model_prefix)
        ignored = [re.compile(pattern) for pattern in self._keys_to_ignore_on_load_unexpected]
        state = {key: value for key, value in state.items() if not any(p.search(key) for p in ignored)}
        result = self.load_state_dict(state, strict=False)
        tied = set(self._tied_weights_keys) if self._ties() else set()
        missing = [key for key in result.missing_keys if key not in tied]
        missing_base = [key for key in missing if self._in_base_model(key)]
        unexpected_base = [key for key in result.unexpected_keys if self._in_base_model(key)]
        if strict and (missing_base or unexpected_base):
            lines = []
            if missing_base:
                lines.append("Missing key(s) in state_dict: " + ", ".join(f'"{key}"' for key in missing_base) + ".")
            if unexpected_base:
                keys = ", ".join(f'"{key}"' for key in unexpected_base)
                lines.append(f"Unexpected key(s) in state_dict: {keys}.")
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(lines))
        new_head = [key for key in missing if not self._in_base_model(key)]
        if new_head:
            warnings.warn(
                f"Some weights of {type(self).__name__} were not in the checkpoint and are newly initialized: "
                f"{new_head}; train the model before using it for predictions",
                UserWarning,
                stacklevel=3,
            )
        unused = [key for key in result.unexpected_keys if not self._in_base_model(key)]
        if unused:
            warnings.warn(f"Some weights of the checkpoint were not used: {unused}", UserWarning, stacklevel=3)
        self.tie_weights()
        return result

    def _in_base_model(self, key: str) -> bool:
        """Whether ``key`` names the base model's state (a model with a head holds it under its prefix)."""
        prefix = self.base_model_prefix
        if not prefix or not isinstance(getattr(self, prefix, None), Module):
            return True  # this is the base model
        return key.startswith(prefix + ".")

    def _ties(self) -> bool:
        return bool(getattr(self.config, "tie_word_embeddings", True))

    def num_parameters(self) -> int:
        """The number of distinct parameter elements (tied weights counted once)."""
        return sum(math.prod(p.shape) for p in self.parameters())
