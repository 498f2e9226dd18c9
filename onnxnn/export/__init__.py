"""Export: Module -> ONNX (``to_onnx``) and the checkpoint file formats (``save``/``load``)."""

from __future__ import annotations

from .checkpoint import load, save
from .onnx_export import max_opset_version, to_onnx
from .training_step import TrainingStepSignature, training_step_to_onnx

__all__ = ["save", "load", "to_onnx", "max_opset_version", "training_step_to_onnx", "TrainingStepSignature"]
