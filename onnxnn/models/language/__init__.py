"""Language models with Hugging Face transformers' module names: BERT, GPT-2 and LLaMA.

Their ``state_dict`` keys, shapes and numerics are transformers', so a local
``model.safetensors`` / ``pytorch_model.bin`` (or a whole snapshot directory, with its
``config.json``) loads with ``from_pretrained`` and gives transformers' outputs, without PyTorch.
"""

from __future__ import annotations

from ._common import ModelOutput, PreTrainedModel
from ._weights import find_weight_files, read_state_dict
from .bert import BertForSequenceClassification, BertModel
from .config import BertConfig, GPT2Config, LlamaConfig, PretrainedConfig
from .generation import GenerationMixin, generate
from .gpt2 import GPT2LMHeadModel, GPT2Model
from .llama import LlamaForCausalLM, LlamaModel

__all__ = [
    "PretrainedConfig",
    "BertConfig",
    "GPT2Config",
    "LlamaConfig",
    "PreTrainedModel",
    "ModelOutput",
    "BertModel",
    "BertForSequenceClassification",
    "GPT2Model",
    "GPT2LMHeadModel",
    "LlamaModel",
    "LlamaForCausalLM",
    "GenerationMixin",
    "generate",
    "find_weight_files",
    "read_state_dict",
]
