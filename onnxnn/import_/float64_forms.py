"""Importers of the ops onnxruntime has no float64 kernel for: imported nodes take onnxnn's own forms.

onnxruntime's CPU provider (1.31) runs ``RNN``, ``GRU``, ``LSTM``, ``InstanceNormalization`` and
``Resize`` in float32 only. onnxnn's own layers write around that in float64, and an imported node
of these types replays through the same code, so a float64 model imported from a file runs on the
"onnxruntime" executor and exports to a file onnxruntime loads (float64 ``HardSigmoid`` and
``HardSwish`` nodes are written as standard ops when a graph is built: ``runtime/ops/activation_accuracy.py``):

- ``InstanceNormalization`` and ``Resize``: ``instance_normalization`` and ``resize`` of
  ``runtime.ops`` (reductions; gathered and weighted taps).
- ``RNN``, ``GRU`` and ``LSTM``: unrolled into standard ops while the "onnxruntime" executor is
  selected, as ``nn.LSTM`` does (``nn/modules/_rnn_fused.py``); otherwise the node is recorded (the
  kernels executor runs it in float64; sessions and exports write it as the float32 node between
  Casts, ``runtime/ops/recurrent.py``'s decomposition, which plain onnxruntime runs).

Other dtypes record the node as ops without an importer are recorded.
"""

from __future__ import annotations

from ..ir import dtypes
from ..ir.mode import MODE
from ..ir.registry import importers
from ..runtime.ops.normalization import instance_normalization
from ..runtime.ops.recurrent import unrolled_recurrence
from ..runtime.ops.resample import onnxruntime_scales, resize
from ..runtime.tensor import apply_op
from .importers import NodeCall
from .opsets import recorded_opset

__all__: list[str] = []


def _float64(tensor) -> bool:
    return tensor is not None and tensor.dtype is dtypes.float64


def _as_recorded(call: NodeCall, op_type: str, inputs: tuple, attrs: dict) -> tuple:
    """The node as an op without an importer is recorded (at the model's opset where that is newer)."""
    opset = None
    if call.model_opset is not None:
        opset = recorded_opset(op_type, call.model_opset, frozenset(attrs), attrs, list(inputs))
    outputs = apply_op(op_type, inputs, attrs, num_outputs=call.num_outputs, opset=opset)
    return outputs if isinstance(outputs, tuple) else (outputs,)


@importers.register("InstanceNormalization")
def InstanceNormalization(call: NodeCall, input, scale, B, **attrs):
    if not _float64(input):
        return _as_recorded(call, "InstanceNormalization", (input, scale, B), attrs)
    # epsilon is the file's float32 attribute: onnxruntime and the kernels add that value.
    return (instance_normalization(input, scale, B, float(attrs.get("epsilon", 1e-5))),)


@importers.register("Resize")
def Resize(call: NodeCall, X, *inputs, **attrs):
    # Sizes from float32 scales as onnxruntime computes them (a float32 product), not in double.
    inputs = onnxruntime_scales(tuple(X.shape), inputs, attrs)
    if not _float64(X):
        return _as_recorded(call, "Resize", (X, *inputs), attrs)
    return (resize(X, inputs, attrs),)


def _recurrent(op_type: str):
    def importer(call: NodeCall, X, *inputs, **attrs):
        if _float64(X) and MODE.executor == "onnxruntime":
            return tuple(unrolled_recurrence(op_type, [X, *inputs], attrs, call.num_outputs))
        return _as_recorded(call, op_type, (X, *inputs), attrs)

    importer.__name__ = importer.__qualname__ = op_type
    return importer


for _op_type in ("RNN", "GRU", "LSTM"):
    importers.register(_op_type)(_recurrent(_op_type))
