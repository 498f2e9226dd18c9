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
from . import newer_ops  # noqa: F401  (registers the CumProd and TensorScatter importers)
from . import contrib  # noqa: F401  (registers onnxruntime's com.microsoft ops: FusedMatMul, Gelu, ...)
from . import contrib_attention  # noqa: F401  (registers Attention, MultiHeadAttention, GroupQueryAttention, ...)
from . import contrib_quantized  # noqa: F401  (registers QLinear*, DynamicQuantizeMatMul, MatMulNBits)
from . import spectral  # noqa: F401  (registers the STFT importer)
from . import float64_forms  # noqa: F401  (registers float64 forms of LSTM, GRU, Resize, InstanceNormalization, ...)
from ..errors import ModelLoadError
from .loading import load_model, model_source

__all__ = ["from_onnx", "GraphModule", "ModelMetadata"]


def from_onnx(
    path_or_model: str | os.PathLike | bytes | onnx.ModelProto, *, base_dir: str | os.PathLike | None = None
) -> GraphModule:
    """Loads an ONNX model as a :class:`GraphModule` (an ``nn.Module`` that replays the graph).

    The model is checked with ``onnx.checker`` and onnx's strict shape inference, its external
    data is read from files in the model's folder, and a default-domain opset older than 21 is
    converted up to it with ``onnx.version_converter``. A newer opset (up to the newest the
    installed onnx defines) is kept: each node is recorded at the oldest opset that means the same,
    so most run in onnxruntime beside onnxnn's own ops; a node that needs an opset newer than
    onnxruntime runs is computed by onnxnn's kernels, or raises a RuntimeError naming that opset
    when it runs. Floating-point initializers become Parameters and the rest buffers, named as in
    the file; initializers read only as a BatchNormalization's mean or variance are buffers too,
    as PyTorch's BatchNorm keeps its running statistics. ``ai.onnx.ml`` nodes (scikit-learn
    pipelines) run in onnxruntime, without gradients.

    Every tensor stored externally (initializers, sparse initializers, attribute tensors, in
    subgraphs and functions too) is read only from inside the model's folder: its location must
    be relative, may not leave the folder by ``..`` or a symbolic link, and its offset and length
    must lie within the file. Nothing is read relative to the working directory.

    Args:
        path_or_model: a file path, the serialized model bytes, or an ``onnx.ModelProto``
            (left unmodified).
        base_dir: the folder external data files are read from. Defaults to the folder of the
            model file; required when a model given as bytes or a ModelProto stores tensors
            externally.

    Returns:
        The GraphModule, in training mode like any new Module.

    Raises:
        FileNotFoundError: the model file does not exist.
        ModelLoadError: (a ``ValueError``) anything wrong with the model, naming the file and
            the problem: not an ONNX model (truncated, corrupt, another format), a string that is
            not UTF-8, a model failing ``onnx.checker`` or strict shape inference, external data
            that is missing, outside the model's folder or out of range, an op or domain onnxnn
            cannot run (naming op_type, domain and node), an attribute or constant it cannot
            read, or an opset older than 21 that cannot be converted.
        TypeError: ``path_or_model`` is none of the accepted kinds.

    Calling the module raises :class:`ModelLoadError` naming the node and op_type when a node
    turns out invalid for the given inputs (an attribute out of range for their rank; the
    original exception is its ``__cause__``), and ``RuntimeError`` when a computation fails
    (onnxruntime's errors, a tensor larger than the process may allocate, a backward through an
    ``ai.onnx.ml`` op).

    Example::

        >>> proto = onnxnn.export.to_onnx(nn.Linear(4, 2), onnxnn.randn(1, 4))
        >>> model = from_onnx(proto)
        >>> list(model.state_dict())
        ['weight', 'bias']
    """
    model, original_opset = load_model(path_or_model, base_dir)
    try:
        return GraphModule(model, original_opset_version=original_opset)
    except ModelLoadError as error:  # building the module reads the initializers and compiles the graph
        raise ModelLoadError(f"{model_source(path_or_model)}: {error}") from error
