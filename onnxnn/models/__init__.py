"""The model zoo: reference architectures built with ``onnxnn.nn`` (layer 4, beside export and import_).

Models load state_dicts in torchvision's and Hugging Face's layouts: ``vision`` holds torchvision's
image classifiers (``resnet18(weights="resnet18.pth")``), ``language`` BERT, GPT-2 and LLaMA with
transformers' module names.
"""

from __future__ import annotations

from . import language, vision
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
from .vision import *  # noqa: F403  (the builders, re-exported as torchvision.models does)
from .vision import __all__ as _vision_all

__all__: list[str] = [
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
    "vision",
    *_vision_all,
]
