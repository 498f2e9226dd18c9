"""ONNX -> Module: ``from_onnx`` loads any ONNX model as a trainable :class:`GraphModule`.

Example::

    >>> from onnxnn.import_ import from_onnx
    >>> model = from_onnx("model.onnx")
    >>> output = model(onnxnn.randn(1, 4))
"""
from __future__ import annotations

import os

import onnx

from .graph_module import GraphModule, ModelMetadata
from .loading import load_model

__all__ = ["from_onnx", "GraphModule", "ModelMetadata"]


def from_onnx(path_or_model: str | os.PathLike | bytes | onnx.ModelProto) -> GraphModule:
    """Loads an ONNX model as a :class:`GraphModule` (an ``nn.Module`` that replays the graph).

    The model is checked with ``onnx.checker``, its external data is read from files next to it,
    and a default-domain opset other than 21 is converted with ``onnx.version_converter``.
    Floating-point initializers become Parameters and the rest buffers, named as in the file.

    Args:
        path_or_model: a file path, the serialized model bytes, or an ``onnx.ModelProto``
            (left unmodified).

    Returns:
        The GraphModule, in training mode like any new Module.

    Raises:
        FileNotFoundError: the file, or an external data file it refers to, does not exist.
        ValueError: not a valid ONNX model (truncated, corrupt, another format), a model that
            fails ``onnx.checker.check_model``, or an opset that cannot be converted.
        NotImplementedError: an op or domain onnxnn has no implementation for (naming op_type,
            domain, opset and node).
        TypeError: an initializer or constant with an element type onnxnn tensors cannot hold.

    Example::

        >>> proto = onnxnn.export.to_onnx(nn.Linear(4, 2), onnxnn.randn(1, 4))
        >>> model = from_onnx(proto)
        >>> list(model.state_dict())
        ['weight', 'bias']
    """
    model, original_opset = load_model(path_or_model)
    return GraphModule(model, original_opset_version=original_opset)
