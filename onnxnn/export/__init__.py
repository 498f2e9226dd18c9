"""Export: Module -> ONNX (``to_onnx``) and the checkpoint file formats (``save``/``load``)."""

from __future__ import annotations

from .checkpoint import load, save
from .onnx_export import TracerWarning, max_opset_version, to_onnx
from .sparse_export import to_onnx_pruned
from .training_step import TrainingStepSignature, training_step_to_onnx

__all__ = [
    "save",
    "load",
    "to_onnx",
    "to_onnx_pruned",
    "max_opset_version",
    "training_step_to_onnx",
    "TrainingStepSignature",
    "TracerWarning",
]
