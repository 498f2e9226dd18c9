"""RNN, LSTM and GRU layers recorded as ONNX ``RNN``/``LSTM``/``GRU`` nodes, one node per layer.

onnxruntime runs each node as one fused kernel, onnxnn's kernels executor runs it by
``ir.recurrence.unroll``, the nodes' gradient rules (``runtime/ops/recurrent.py``) differentiate
it, and an exported model holds the nodes PyTorch's exporter writes for the same module.

PyTorch's parameters become the nodes' inputs through recorded ops (Slice, Concat, Unsqueeze), so
gradients reach ``weight_ih_l0`` and the others directly:

- ``W``/``R`` ``[directions, gates * hidden, features]``: ``weight_ih``/``weight_hh`` with the gate
  blocks reordered from PyTorch's to ONNX's (LSTM i, f, g, o -> i, o, f, c; GRU r, z, n -> z, r, h);
- ``B`` ``[directions, 2 * gates * hidden]``: the reordered ``bias_ih`` then ``bias_hh`` (omitted
  without bias: ONNX reads a missing B as zeros);
- GRU takes ``linear_before_reset=1``: PyTorch applies the reset gate after ``W_hn h + b_hn``.

A PackedSequence runs padded, time-major, with ``sequence_lens``: ONNX's recurrences stop each batch
entry's state at its last valid step (and start a reverse direction there), which is exactly what
PyTorch's packed recurrences compute; the outputs are repacked with one Gather of constant rows.
Batch-first input is transposed around the nodes: onnxruntime's CPU recurrent kernels refuse
``layout=1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import dtypes
from ...ir.mode import MODE
from ...runtime.internal import constant_tensor
from ...runtime.ops.shape import cat
from ...runtime.tensor import Tensor, apply_op
from .. import functional as F

__all__ = ["records_fused_nodes", "pad_packed_steps", "repack_steps", "fused_layers"]

_OP_TYPES = {"RNN_TANH": "RNN", "RNN_RELU": "RNN", "LSTM": "LSTM", "GRU": "GRU"}
# PyTorch's gate blocks listed in ONNX's order.
_GATE_ORDER = {"RNN_TANH": (0,), "RNN_RELU": (0,), "LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2)}
_ACTIVATION = {"RNN_TANH": "Tanh", "RNN_RELU": "Relu"}


def records_fused_nodes(proj_size: int, dtype, needs_grad: bool) -> bool:
    """Whether a recurrent module's forward records ONNX recurrent nodes (else the unrolled steps).

    The nodes are recorded when no gradient is wanted: inference, ``no_grad`` and export (which
    traces under ``no_grad``), so served and exported models get onnxruntime's fused kernels and
    PyTorch's graph. A forward that will be differentiated stays unrolled: the nodes' gradient
    rule (``runtime/ops/recurrent.py``) records the same unrolled recurrence again inside the
    backward, which made a training step two to three times slower than differentiating the
    unrolled forward directly.

    Also unrolled: an LSTM with ``proj_size > 0`` (ONNX's LSTM has no projection), bfloat16 (ONNX's
    recurrent ops do not take it), and float64 while the "onnxruntime" executor is selected (its CPU
    recurrent kernels take float32 only; the "auto" executor sends float64 recurrent nodes to onnxnn's
    kernels instead). An export writes a float64 node as the float32 node between Casts
    (``runtime/ops/recurrent.py``), which onnxruntime runs; exported under
    ``set_executor("onnxruntime")``, the unrolled steps keep double precision at a fixed length.
    """
    if proj_size > 0 or needs_grad or dtype is dtypes.bfloat16:
        return False
    return not (dtype is dtypes.float64 and MODE.executor == "onnxruntime")


def _packed_rows(batch_sizes: list[int]) -> np.ndarray:
    """``[T, B]``: the packed row of each (step, batch entry), -1 where the sequence has ended."""
    rows = np.full((len(batch_sizes), batch_sizes[0]), -1, dtype=np.int64)
    start = 0
    for step, running in enumerate(batch_sizes):
        rows[step, :running] = np.arange(start, start + running)
        start += running
    return rows


def pad_packed_steps(data: Tensor, batch_sizes: list[int]) -> tuple[Tensor, np.ndarray]:
    """Packed ``data`` ``(N, F)`` as zero-padded ``(T, B, F)``, and each sorted entry's length."""
    rows = _packed_rows(batch_sizes)
    padding_row = data.shape[0]
    zeros = constant_tensor(np.zeros((1, data.shape[1]), dtype=data.dtype.numpy_dtype), data.dtype, data.device)
    extended = cat([data, zeros], 0)
    index = constant_tensor(np.where(rows < 0, padding_row, rows).reshape(-1), dtypes.int64, data.device)
    padded = extended.index_select(0, index).reshape((len(batch_sizes), batch_sizes[0], data.shape[1]))
    return padded, (rows >= 0).sum(0)


def repack_steps(padded: Tensor, batch_sizes: list[int]) -> Tensor:
    """The rows of ``padded`` ``(T, B, F)`` that a PackedSequence with ``batch_sizes`` holds, in its order."""
    steps, batch, features = padded.shape
    rows = _packed_rows(batch_sizes)
    flat_positions = np.nonzero(rows.reshape(-1) >= 0)[0].astype(np.int64)  # step-major, as packed
    index = constant_tensor(flat_positions, dtypes.int64, padded.device)
    return padded.reshape((steps * batch, features)).index_select(0, index)


def _onnx_gate_rows(weight: Tensor, mode: str, hidden: int) -> Tensor:
    order = _GATE_ORDER[mode]
    if len(order) == 1:
        return weight
    return cat([weight[k * hidden : (k + 1) * hidden] for k in order], 0)


def _layer_inputs(module, layer: int, directions: int) -> tuple:
    """W, R and B (or None) of one layer, both directions stacked on a leading axis."""
    mode, hidden = module.mode, module.hidden_size
    ws, rs, bs = [], [], []
    for direction in range(directions):
        w_ih, w_hh, b_ih, b_hh, _ = module._layer_weights(layer, direction)
        ws.append(_onnx_gate_rows(w_ih, mode, hidden).unsqueeze(0))
        rs.append(_onnx_gate_rows(w_hh, mode, hidden).unsqueeze(0))
        if b_ih is not None:
            bias = cat([_onnx_gate_rows(b_ih, mode, hidden), _onnx_gate_rows(b_hh, mode, hidden)], 0)
            bs.append(bias.unsqueeze(0))
    stacked = [tensors[0] if directions == 1 else cat(tensors, 0) for tensors in (ws, rs)]
    return stacked[0], stacked[1], (None if not bs else bs[0] if directions == 1 else cat(bs, 0))


def _attributes(mode: str, hidden: int, directions: int) -> dict:
    attrs: dict[str, Any] = {"hidden_size": hidden, "direction": "bidirectional" if directions == 2 else "forward"}
    if mode in _ACTIVATION:
        attrs["activations"] = [_ACTIVATION[mode]] * directions
    if mode == "GRU":
        attrs["linear_before_reset"] = 1
    return attrs


def fused_layers(module, steps: Tensor, lengths: np.ndarray | None, hx: Tensor, cx: Tensor | None):
    """Runs every layer of ``module`` as one ONNX node each over time-major ``steps`` ``(T, B, I)``.

    ``lengths`` (the batch entries' lengths, or None when all run every step) becomes the nodes'
    ``sequence_lens``; outputs past an entry's length are zero. Returns ``(output (T, B, D * H),
    h_n, c_n)`` with ``c_n`` None but for LSTM.
    """
    directions = 2 if module.bidirectional else 1
    op_type = _OP_TYPES[module.mode]
    attrs = _attributes(module.mode, module.hidden_size, directions)
    num_outputs = 3 if op_type == "LSTM" else 2
    sequence_lens = None
    if lengths is not None and np.any(lengths != steps.shape[0]):
        sequence_lens = constant_tensor(np.asarray(lengths, dtype=np.int32), dtypes.int32, steps.device)
    final_h, final_c = [], []
    for layer in range(module.num_layers):
        if layer > 0 and module.dropout > 0 and module.training:
            steps = F.dropout(steps, module.dropout, True)
        w, r, b = _layer_inputs(module, layer, directions)
        first, last = layer * directions, (layer + 1) * directions
        inputs = [steps, w, r, b, sequence_lens, hx[first:last]]
        if cx is not None:
            inputs.append(cx[first:last])
        outputs = apply_op(op_type, tuple(inputs), dict(attrs), num_outputs=num_outputs)
        y = outputs[0]  # [T, D, B, H] -> [T, B, D * H], the directions side by side as PyTorch has them
        length, batch = y.shape[0], y.shape[2]
        steps = y.permute(0, 2, 1, 3).reshape((length, batch, directions * module.hidden_size))
        final_h.append(outputs[1])
        if cx is not None:
            final_c.append(outputs[2])
    h_n = final_h[0] if len(final_h) == 1 else cat(final_h, 0)
    c_n = None if cx is None else (final_c[0] if len(final_c) == 1 else cat(final_c, 0))
    return steps, h_n, c_n
