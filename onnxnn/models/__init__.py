"""The model zoo: reference architectures built with ``onnxnn.nn`` (layer 4, beside export and import_).

Models load state_dicts in torchvision's and Hugging Face's layouts. ``onnxnn.models.language``
holds BERT, GPT-2 and LLaMA with transformers' module names.
"""

from __future__ import annotations

from . import language
from .language import (
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaModel,
)

__all__ = [
    "language",
    "BertConfig",
    "BertModel",
    "BertForSequenceClassification",
    "GPT2Config",
    "GPT2Model",
    "GPT2LMHeadModel",
    "LlamaConfig",
    "LlamaModel",
    "LlamaForCausalLM",
]
