"""torch's low-level recurrent functions: the single-step cells and the flat-weight multi-layer forms.

``torch.lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)``
is what ``nn.LSTM.forward`` calls: ``params`` lists every layer's and direction's weights in the
module's order (``w_ih, w_hh[, b_ih, b_hh][, w_hr]``). The ``.data`` overload takes packed data and
its ``batch_sizes`` instead: ``torch.lstm(data, batch_sizes, hx, params, has_biases, num_layers,
dropout, train, bidirectional)``. Both run the same unrolled recurrence as the modules
(:mod:`onnxnn.nn.modules.rnn`), so gradients and both executors come with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..runtime.tensor import Tensor
from . import functional as F
from .modules.rnn import _step, run_layers

__all__ = ["gru", "gru_cell", "lstm", "lstm_cell", "rnn_relu", "rnn_relu_cell", "rnn_tanh", "rnn_tanh_cell"]


# --- single steps --------------------------------------------------------------------------------------------


def _cell(
    mode: str,
    input: Tensor,
    hx: Tensor,
    c: Tensor | None,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
):
    return _step(mode, F.linear(input, w_ih, b_ih), hx, c, w_hh, b_hh, None)


def rnn_tanh_cell(
    input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> Tensor:
    """torch.rnn_tanh_cell: ``tanh(input w_ih^T + b_ih + hx w_hh^T + b_hh)``."""
    return _cell("RNN_TANH", input, hx, None, w_ih, w_hh, b_ih, b_hh)[0]


def rnn_relu_cell(
    input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> Tensor:
    """torch.rnn_relu_cell: ``relu(input w_ih^T + b_ih + hx w_hh^T + b_hh)``."""
    return _cell("RNN_RELU", input, hx, None, w_ih, w_hh, b_ih, b_hh)[0]


def gru_cell(
    input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None = None, b_hh: Tensor | None = None
) -> Tensor:
    """torch.gru_cell: one GRU step (gates r, z, n in that order), returns the new hidden state."""
    return _cell("GRU", input, hx, None, w_ih, w_hh, b_ih, b_hh)[0]


def lstm_cell(
    input: Tensor,
    hx: Sequence[Tensor],
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """torch.lstm_cell: one LSTM step (gates i, f, g, o); ``hx`` is ``[h, c]``; returns ``(h', c')``."""
    if len(hx) != 2:
        raise RuntimeError(f"lstm_cell: Expected hx to have 2 tensors, got {len(hx)}")
    return _cell("LSTM", input, hx[0], hx[1], w_ih, w_hh, b_ih, b_hh)


# --- flat-weight multi-layer forms ---------------------------------------------------------------------------


def _layer_weights(params: Sequence[Tensor], has_biases: bool, num_layers: int, directions: int):
    """Splits ``params`` into ``(w_ih, w_hh, b_ih, b_hh, w_hr)`` per layer and direction."""
    per_direction = len(params) // (num_layers * directions) if num_layers * directions else 0
    expected = (4, 5) if has_biases else (2, 3)
    if per_direction not in expected or per_direction * num_layers * directions != len(params):
        raise RuntimeError(
            f"got an incorrect number of RNN parameters: {len(params)} for {num_layers} layer(s)"
            f"{' bidirectional' if directions == 2 else ''} with has_biases={has_biases}"
        )
    weights = []
    for start in range(0, len(params), per_direction):
        group = list(params[start : start + per_direction])
        w_ih, w_hh = group[0], group[1]
        b_ih, b_hh = (group[2], group[3]) if has_biases else (None, None)
        w_hr = group[-1] if per_direction in (3, 5) else None
        weights.append((w_ih, w_hh, b_ih, b_hh, w_hr))
    return weights


def _recurrence(
    mode: str,
    data: Tensor,
    batch_sizes: list[int],
    h0: Tensor,
    c0: Tensor | None,
    params: Sequence[Tensor],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
):
    """Every layer over packed ``data`` split by ``batch_sizes``; returns (output data, h_n, c_n)."""
    directions = 2 if bidirectional else 1
    weights = _layer_weights(params, has_biases, num_layers, directions)
    if h0.dim() != 3 or h0.shape[0] != num_layers * directions:
        raise RuntimeError(
            f"Expected hidden size {(num_layers * directions, batch_sizes[0] if batch_sizes else 0)}"
            f" + (hidden_size,), got {list(h0.shape)}"
        )
    dropout_between = dropout if train else 0.0
    return run_layers(mode, data, batch_sizes, h0, c0, weights.__getitem__, num_layers, directions, dropout_between)


def _flat(mode: str, args: tuple):
    """Runs either overload of torch.{rnn_tanh, rnn_relu, gru, lstm}; returns (output, h_n, c_n)."""
    # The .data overload has the params list fourth, where the .input overload has has_biases.
    packed = len(args) > 3 and isinstance(args[3], (list, tuple))
    if packed:
        data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional = args
        batch_sizes = [int(size) for size in batch_sizes.numpy(force=True)]
        batch_first = False
    else:
        input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
        if input.dim() != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.dim()}")
        if batch_first:
            input = input.transpose(0, 1)
        length, batch = input.shape[0], input.shape[1]
        batch_sizes = [batch] * length
        data = input.reshape((length * batch, input.shape[2]))
    h0, c0 = (hx[0], hx[1]) if mode == "LSTM" else (hx, None)
    output, h_n, c_n = _recurrence(
        mode,
        data,
        batch_sizes,
        h0,
        c0,
        params,
        bool(has_biases),
        int(num_layers),
        float(dropout),
        bool(train),
        bool(bidirectional),
    )
    if not packed:
        output = output.reshape((len(batch_sizes), batch_sizes[0], output.shape[-1]))
        if batch_first:
            output = output.transpose(0, 1)
    return output, h_n, c_n


def rnn_tanh(*args) -> tuple[Tensor, Tensor]:
    """torch.rnn_tanh: ``(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first)`` or ``(data, batch_sizes, hx, params, ...)``; returns ``(output, h_n)``."""
    output, h_n, _ = _flat("RNN_TANH", args)
    return output, h_n


def rnn_relu(*args) -> tuple[Tensor, Tensor]:
    """torch.rnn_relu: :func:`rnn_tanh` with ReLU; returns ``(output, h_n)``."""
    output, h_n, _ = _flat("RNN_RELU", args)
    return output, h_n


def gru(*args) -> tuple[Tensor, Tensor]:
    """torch.gru: the arguments of :func:`rnn_tanh`; returns ``(output, h_n)``."""
    output, h_n, _ = _flat("GRU", args)
    return output, h_n


def lstm(*args) -> tuple[Tensor, Tensor, Tensor]:
    """torch.lstm: the arguments of :func:`rnn_tanh` with ``hx = [h0, c0]``; returns ``(output, h_n, c_n)``."""
    return _flat("LSTM", args)
