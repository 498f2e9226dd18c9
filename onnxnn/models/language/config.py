"""Configuration objects of the language models, with Hugging Face transformers' field names.

A config is built from keyword arguments (``BertConfig(hidden_size=32, ...)``) or read from a
``config.json`` (``LlamaConfig.from_json_file(path)``, ``from_pretrained(snapshot_dir)``), so a Hugging
Face snapshot directory describes the model onnxnn builds. Unknown keys of a ``config.json``
(``architectures``, ``torch_dtype``, ``transformers_version``...) are kept as attributes, as
transformers does, and ignored by the models.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

__all__ = ["PretrainedConfig", "BertConfig", "GPT2Config", "LlamaConfig"]

CONFIG_NAME = "config.json"


class PretrainedConfig:
    """The base of the configs: defaults from the class, overrides from keyword arguments.

    Subclasses list their fields and defaults in ``_defaults``; ``attribute_map`` gives aliases
    (GPT-2's ``hidden_size`` is its ``n_embd``), as in transformers.
    """

    model_type: str = ""
    _defaults: dict[str, Any] = {}
    attribute_map: dict[str, str] = {}

    def __init__(self, **kwargs: Any) -> None:
        values = copy.deepcopy(self._defaults)
        for key, value in kwargs.items():
            values[self.attribute_map.get(key, key)] = value
        for key, value in values.items():
            object.__setattr__(self, key, value)
        self._post_init()

    def _post_init(self) -> None:
        """Fills fields whose default depends on others."""

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: resolve aliases such as GPT-2's hidden_size.
        target = type(self).attribute_map.get(name)
        if target is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return getattr(self, target)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, type(self).attribute_map.get(name, name), value)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (what ``config.json`` holds), with ``model_type``."""
        values = {key: copy.deepcopy(value) for key, value in vars(self).items()}
        values["model_type"] = self.model_type
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PretrainedConfig:
        """A config from a dict such as a parsed ``config.json``."""
        if not isinstance(values, dict):
            raise TypeError(f"{cls.__name__}.from_dict expected a dict, got {type(values).__name__}")
        values = dict(values)
        model_type = values.pop("model_type", None)
        if model_type is not None and cls.model_type and model_type != cls.model_type:
            raise ValueError(
                f"{cls.__name__} reads model_type '{cls.model_type}', but the configuration is for '{model_type}'"
            )
        return cls(**values)

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> PretrainedConfig:
        """A config from a ``config.json`` file."""
        with open(path, encoding="utf-8") as handle:
            try:
                values = json.load(handle)
            except json.JSONDecodeError as error:
                raise ValueError(f"{os.fspath(path)!r} is not valid JSON: {error}") from None
        return cls.from_dict(values)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike) -> PretrainedConfig:
        """A config from a snapshot directory (its ``config.json``) or a ``config.json`` path.

        Only local files are read: onnxnn never downloads.
        """
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, CONFIG_NAME)
        if not os.path.isfile(path):
            raise OSError(
                f"{path!r} is not a config.json file or a directory holding one (onnxnn reads local files only: "
                "download the snapshot first, e.g. with huggingface_hub.snapshot_download)"
            )
        return cls.from_json_file(path)

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Writes ``config.json`` into ``directory`` (created if missing)."""
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, CONFIG_NAME), "w", encoding="utf-8") as handle:
            json.dump(self.to_dict(), handle, indent=2, sort_keys=True)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in sorted(vars(self).items()))
        return f"{type(self).__name__}({fields})"


class BertConfig(PretrainedConfig):
    """BERT's configuration (transformers' ``BertConfig`` fields and defaults: bert-base-uncased).

    Example::

        >>> config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
        ...                     num_attention_heads=4, intermediate_size=64)
    """

    model_type = "bert"
    # Fields _post_init fills in (declared for type checkers; values live in the instance, see _defaults).
    num_labels: int
    _defaults = {
        "vocab_size": 30522,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "classifier_dropout": None,
        "num_labels": None,
        "id2label": None,
        "problem_type": None,
    }

    def _post_init(self) -> None:
        if self.num_labels is None:
            self.num_labels = len(self.id2label) if self.id2label else 2
        if self.position_embedding_type != "absolute":
            raise NotImplementedError(
                f"BertConfig: position_embedding_type '{self.position_embedding_type}' is not supported "
                "(only 'absolute')"
            )
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"The hidden size ({self.hidden_size}) is not a multiple of the number of attention "
                f"heads ({self.num_attention_heads})"
            )


class GPT2Config(PretrainedConfig):
    """GPT-2's configuration (transformers' ``GPT2Config`` fields and defaults: gpt2 small).

    ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads`` and ``max_position_embeddings`` are
    aliases of ``n_embd``, ``n_layer``, ``n_head`` and ``n_positions``.
    """

    model_type = "gpt2"
    attribute_map = {
        "hidden_size": "n_embd",
        "max_position_embeddings": "n_positions",
        "num_attention_heads": "n_head",
        "num_hidden_layers": "n_layer",
    }
    _defaults = {
        "vocab_size": 50257,
        "n_positions": 1024,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_inner": None,
        "activation_function": "gelu_new",
        "resid_pdrop": 0.1,
        "embd_pdrop": 0.1,
        "attn_pdrop": 0.1,
        "layer_norm_epsilon": 1e-5,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False,
        "bos_token_id": 50256,
        "eos_token_id": 50256,
        "pad_token_id": None,
        "tie_word_embeddings": True,
    }

    def _post_init(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(
                f"`embed_dim` must be divisible by num_heads (got `embed_dim`: {self.n_embd} and "
                f"`num_heads`: {self.n_head})."
            )


class LlamaConfig(PretrainedConfig):
    """LLaMA's configuration (transformers' ``LlamaConfig`` fields and defaults: Llama-2-7b).

    ``num_key_value_heads`` below ``num_attention_heads`` gives grouped-query attention;
    ``head_dim`` defaults to ``hidden_size // num_attention_heads``. The rotary base is
    ``rope_theta`` (or ``rope_parameters["rope_theta"]`` in newer config files); ``rope_scaling``
    may be ``None``, ``{"rope_type": "linear", "factor": f}`` or Llama 3's ``{"rope_type": "llama3", ...}``.
    """

    model_type = "llama"
    # Fields _post_init fills in (declared for type checkers; values live in the instance, see _defaults).
    num_key_value_heads: int
    head_dim: int
    rope_theta: float
    _defaults = {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": None,
        "head_dim": None,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "pad_token_id": None,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "tie_word_embeddings": False,
        "rope_theta": 10000.0,
        "rope_scaling": None,
        "rope_parameters": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
    }

    def _post_init(self) -> None:
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of num_key_value_heads "
                f"({self.num_key_value_heads})"
            )
        # transformers 5 writes the rotary settings as one rope_parameters dict.
        parameters = self.rope_parameters
        if isinstance(parameters, dict):
            self.rope_theta = float(parameters.get("rope_theta", self.rope_theta))
            if parameters.get("rope_type", parameters.get("type", "default")) != "default":
                self.rope_scaling = dict(parameters)
