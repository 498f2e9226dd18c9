"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

RNN, LSTM and GRU record one ONNX ``RNN``/``LSTM``/``GRU`` node per layer (``_rnn_fused.py``:
PyTorch's gate order converted, packed input as ``sequence_lens``), which onnxruntime runs as
fused kernels and which export as PyTorch exports them.

Two cases keep the recurrence unrolled, one group of standard ops per time step (MatMul, Add,
Sigmoid, Tanh, Mul, Slice, Concat), whose gradients come from the existing rules: an LSTM with
``proj_size > 0`` (ONNX's LSTM has no projection), and float64 while the "onnxruntime" executor is
selected (its recurrent kernels are float32 only). There the input projection of every step is one
MatMul over the whole sequence, and a PackedSequence runs as PyTorch runs it: at step ``t`` only
the first ``batch_sizes[t]`` (longest) sequences advance, the others keep their state, so each
final state is taken at its sequence's last step.

The cells stay single unrolled steps of standard ops: PyTorch's exporter writes ``RNNCell``,
``LSTMCell`` and ``GRUCell`` as plain Gemm/MatMul and activations too (no ONNX recurrent node).
"""

from __future__ import annotations

import math
import numbers
import warnings

from ...ir import dtypes
from ...ir.mode import MODE
from ...runtime.creation import empty, zeros
from ...runtime.grad_mode import is_grad_enabled
from ...runtime.ops.shape import cat, stack
from ...runtime.ops.recurrent_cells import fused_gru_cell, fused_lstm_cell, fuses_cell
from ...runtime.ops.splitting import split
from ...runtime.tensor import Tensor, autocast_arguments
from .. import functional as F
from ..functional._linear import mixed_dtypes_error
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from ._rnn_fused import fused_layers, pad_packed_steps, records_fused_nodes, repack_steps
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _step(mode: str, gates_x: Tensor, h: Tensor, c: Tensor | None, w_hh, b_hh, w_hr):
    """One step of the cell from the input's projection ``gates_x`` and the weights; returns the new (h, c).

    The products are ``F.linear``'s ``Gemm(x, W, b, transB=1)``: onnxruntime packs a fed ``W`` for it
    faster than the ``MatMul`` of a transposed copy (an LSTM(128, 256)'s 32 recurrent products at batch
    16, one thread: 3.2 ms against 4.3), and each step's weight gradient, ``Gemm(g, x, transA=1)``,
    is one that ``runtime/gradient_sums.py`` sums over the steps as one product."""
    gates_h = F.linear(h, w_hh, b_hh)
    # A cell that takes a fused node records one (runtime/ops/recurrent_cells.py): the same arithmetic.
    if mode == "LSTM" and c is not None and fuses_cell(mode, gates_x, gates_h, c):
        h, c = fused_lstm_cell(gates_x, gates_h, c)
        return (h if w_hr is None else F.linear(h, w_hr)), c
    if mode == "GRU" and fuses_cell(mode, gates_x, gates_h, h):
        return fused_gru_cell(gates_x, gates_h, h), None
    if mode == "GRU":
        x_r, x_z, x_n = gates_x.chunk(3, -1)
        h_r, h_z, h_n = gates_h.chunk(3, -1)
        reset, update = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
        candidate = (x_n + reset * h_n).tanh()
        return candidate + update * (h - candidate), None
    gates = gates_x + gates_h
    if mode == "RNN_TANH":
        return gates.tanh(), None
    if mode == "RNN_RELU":
        return gates.relu(), None
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, -1)
    c = forget_gate.sigmoid() * c + in_gate.sigmoid() * cell_gate.tanh()
    h = out_gate.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def run_layers(
    mode: str,
    rows: Tensor,
    batch_sizes: list,
    h0: Tensor,
    c0,
    weights_of,
    num_layers: int,
    directions: int,
    dropout: float,
):
    """Every layer over packed ``rows`` ``(N, I)``, ``batch_sizes[t]`` rows per step; returns (output rows,
    h_n, c_n). ``weights_of(index)``: the weights of layer ``index // directions``'s direction
    ``index % directions``; ``dropout`` between layers (0 outside training)."""
    final_h, final_c = [], []
    for layer in range(num_layers):
        if layer > 0 and dropout > 0:
            rows = F.dropout(rows, dropout, True)
        per_direction = []
        for direction in range(directions):
            index = layer * directions + direction
            c = None if c0 is None else c0[index]
            outputs, h, c = _run_direction(mode, rows, batch_sizes, h0[index], c, weights_of(index), direction == 1)
            per_direction.append(cat(outputs, 0))
            final_h.append(h)
            final_c.append(c)
        rows = per_direction[0] if directions == 1 else cat(per_direction, -1)
    return rows, stack(final_h, 0), None if c0 is None else stack(final_c, 0)


def _run_direction(mode, rows, batch_sizes, h, c, weights, reverse: bool):
    """Runs one direction of one layer over packed ``rows`` (``batch_sizes[t]`` rows per step); returns
    each step's output, and the final (h, c)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    # Every step's input projection in one product, taken apart in one Split (whose gradient is one
    # Concat; a slice per step had a Pad to the whole sequence each, summed: quadratic in the steps).
    projected = _rows_by_step(F.linear(rows, w_ih, b_ih), batch_sizes)
    steps = len(batch_sizes)
    outputs = [None] * steps
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    full = h.shape[0]
    for t in order:
        running = batch_sizes[t]
        gates_x = projected[t]
        if running == full:
            h, c = _step(mode, gates_x, h, c, w_hh, b_hh, w_hr)
            outputs[t] = h
            continue
        # Finished (or not yet started, in reverse) sequences keep their state below the running ones.
        new_h, new_c = _step(mode, gates_x, h[:running], None if c is None else c[:running], w_hh, b_hh, w_hr)
        outputs[t] = new_h
        h = cat([new_h, h[running:]], 0)
        c = None if c is None else cat([new_c, c[running:]], 0)
    return outputs, h, c


def _rows_by_step(rows: Tensor, lengths: list[int]) -> list:
    """``rows`` (one block of ``lengths[t]`` rows per step) as one tensor per step."""
    return list(split(rows, lengths, 0)) if lengths else []


def _check_product_dtypes(operand: Tensor, weight: Tensor) -> None:
    """PyTorch's error for a cell's matrix product of two dtypes (under autocast, after its casts)."""
    cast_operand, cast_weight = autocast_arguments("Gemm", (operand, weight))
    if cast_operand.dtype != cast_weight.dtype:
        raise mixed_dtypes_error(cast_operand.dtype, cast_weight.dtype)


def _states_in_dtype_of(data: Tensor, states: tuple) -> tuple:
    """The initial states in the input's dtype, or PyTorch's error.

    PyTorch's recurrence multiplies ``h`` by the weights, which needs one dtype, and only adds the
    LSTM's ``c`` into a cell state of the input's dtype: a narrower ``c`` is exact there, and the
    fused recurrent nodes need one dtype for all.
    """
    hidden, *rest = states
    if hidden.dtype != data.dtype:
        raise RuntimeError(
            f"mat1 and mat2 must have the same dtype, but got {dtypes.scalar_type_name(hidden.dtype)} and "
            f"{dtypes.scalar_type_name(data.dtype)}"
        )
    for index, cell in enumerate(rest):
        if cell.dtype != data.dtype:
            if dtypes.promote_types(cell.dtype, data.dtype) != data.dtype:
                raise RuntimeError(
                    f"hx[{index + 1}] has dtype {cell.dtype}, wider than the input's {data.dtype}: it cannot be "
                    "the cell state of this LSTM"
                )
            rest[index] = cell.to(data.dtype)
    return (hidden, *rest)


class RNNBase(Module):
    """The multi-layer recurrent network shared by RNN, LSTM and GRU (see those classes)."""

    __constants__ = [
        "mode",
        "input_size",
        "hidden_size",
        "num_layers",
        "bias",
        "batch_first",
        "dropout",
        "bidirectional",
        "proj_size",
    ]

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1:
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                f"expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=2,
            )
        value: int  # the flags checked first are bools, then the sizes ints
        for name, value in (("bias", bias), ("batch_first", batch_first)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int):
                raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
            if value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else real_hidden_size * directions
            for direction in range(directions):
                suffix = "_reverse" if direction == 1 else ""
                shapes: list[tuple[str, tuple[int, ...]]] = [
                    ("weight_ih", (gate_size, layer_input_size)),
                    ("weight_hh", (gate_size, real_hidden_size)),
                ]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for prefix, shape in shapes:
                    name = f"{prefix}_l{layer}{suffix}"
                    setattr(self, name, Parameter(empty(shape, **factory_kwargs)))
                    self._flat_weights_names.append(name)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draws every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def all_weights(self) -> list[list[Parameter]]:
        directions = 2 if self.bidirectional else 1
        return [
            [
                getattr(self, name)
                for name in self._flat_weights_names
                if name.endswith(f"_l{layer}" + ("_reverse" if direction else ""))
            ]
            for layer in range(self.num_layers)
            for direction in range(directions)
        ]

    def _layer_weights(self, layer: int, direction: int):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return tuple(
            getattr(self, prefix + suffix, None)
            for prefix in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
        )

    def flatten_parameters(self) -> None:
        """Kept for PyTorch compatibility; parameters are never fused here."""

    def check_input(self, input: Tensor, batch_sizes) -> None:
        weight = getattr(self, self._flat_weights_names[0])
        # Under autocast the input and the weights meet in the autocast dtype, as the cells' products do.
        cast_input, cast_weight = autocast_arguments("Gemm", (input, weight))
        if cast_input.dtype != cast_weight.dtype:
            weight_dtype = weight.dtype
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight_dtype}). "
                f"Convert input: input.to({weight_dtype}), or convert model: model.to({input.dtype})"
            )
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got {input.size(-1)}"
            )
        if batch_sizes is None and input.size(1 if self.batch_first else 0) == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes) -> tuple[int, int, int]:
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        directions = 2 if self.bidirectional else 1
        return (self.num_layers * directions, mini_batch, self.proj_size if self.proj_size > 0 else self.hidden_size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size, msg: str = "Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.size())))

    def _recur(self, input: Tensor, batch_sizes: list[int], hx: Tensor, cx: Tensor | None):
        """Runs every layer; ``input`` is packed data ``(N, I)`` split by ``batch_sizes``; returns
        (output data, h_n, c_n)."""
        directions = 2 if self.bidirectional else 1
        dropout = self.dropout if self.training else 0.0

        def weights_of(index: int):
            return self._layer_weights(index // directions, index % directions)

        return run_layers(self.mode, input, batch_sizes, hx, cx, weights_of, self.num_layers, directions, dropout)

    def _forward(self, input, hx, name: str):
        is_lstm = self.mode == "LSTM"
        directions = 2 if self.bidirectional else 1
        real_hidden_size = self.proj_size if self.proj_size > 0 else self.hidden_size
        packed = isinstance(input, PackedSequence)
        if packed:
            data, batch_sizes_tensor, sorted_indices, unsorted_indices = input
            batch_sizes = [int(b) for b in batch_sizes_tensor.numpy(force=True)]
            self.check_input(data, batch_sizes)
            is_batched, batch = True, batch_sizes[0]
        else:
            if input.dim() not in (2, 3):
                raise ValueError(
                    f"{name}: Expected input to be 2D or 3D, got {input.dim()}D "
                    + ("instead" if is_lstm else "tensor instead")
                )
            is_batched = input.dim() == 3
            batch_dim = 0 if self.batch_first else 1
            if not is_batched:
                input = input.unsqueeze(batch_dim)
            sorted_indices = unsorted_indices = None
            self.check_input(input, None)
            if self.batch_first:
                input = input.transpose(0, 1)
            length, batch = input.shape[0], input.shape[1]
            batch_sizes = [batch] * length
            data = input.reshape((length * batch, input.shape[2]))
        states = (hx,) if not is_lstm or hx is None else tuple(hx)
        if hx is not None:
            rank = 3 if is_batched else 2
            if any(state.dim() != rank for state in states):
                kind = "batched 3-D" if is_batched else "unbatched 2-D"
                if is_lstm:
                    raise RuntimeError(
                        f"For {kind} input, hx and cx should also be {rank}-D but got "
                        f"({states[0].dim()}-D, {states[1].dim()}-D) tensors"
                    )
                raise RuntimeError(f"For {kind} input, hx should also be {rank}-D but got {hx.dim()}-D tensor")
            if not is_batched:
                states = tuple(state.unsqueeze(1) for state in states)
        else:
            states = (_zero_state((self.num_layers * directions, batch, real_hidden_size), data),)
            if is_lstm:
                states += (_zero_state((self.num_layers * directions, batch, self.hidden_size), data),)
        expected = (self.num_layers * directions, batch, real_hidden_size)
        if is_lstm:
            self.check_hidden_size(states[0], expected, "Expected hidden[0] size {}, got {}")
            self.check_hidden_size(states[1], expected[:2] + (self.hidden_size,), "Expected hidden[1] size {}, got {}")
        else:
            self.check_hidden_size(states[0], expected)
        if sorted_indices is not None:
            # The caller's states are in the original batch order; the packed batch is sorted.
            states = tuple(state.index_select(1, sorted_indices) for state in states)
        # PyTorch's CPU autocast lists the LSTM and RNN kernels (mkldnn_rnn_layer), which then run in the
        # autocast dtype; GRU's is not listed, but its composite kernel's gate products (at::linear) are:
        # it runs unrolled, its products autocast one by one.
        # Its LSTM leaves that kernel for packed input, projections or an empty batch: the generic cell
        # then autocasts its products only, and the float32 cell state keeps c, and h unless projected,
        # in float32.
        in_autocast = MODE.autocast is not None
        generic_cell = self.mode == "GRU" or (is_lstm and (packed or self.proj_size > 0 or batch == 0))
        autocast = in_autocast and not (generic_cell and data.device.type == "cpu")
        if autocast:
            # The recurrence runs in the autocast dtype, unrolled (its cells' products are autocast;
            # the fused recurrent nodes would meet float32 weights).
            data, *cast_states = autocast_arguments("Gemm", (data, *states))
            states = tuple(cast_states)
        else:
            states = _states_in_dtype_of(data, states)
        cx = states[1] if is_lstm else None
        needs_grad = is_grad_enabled() and (
            data.requires_grad
            or any(state.requires_grad for state in states)
            or any(weight.requires_grad for weight in self.parameters(recurse=False))
        )
        # onnxruntime's CPU LSTM and GRU kernels abort the process on an empty batch.
        if in_autocast or batch == 0 or not records_fused_nodes(self.proj_size, data.dtype, needs_grad):
            output, h_n, c_n = self._recur(data, batch_sizes, states[0], cx)
        elif packed:
            padded, lengths = pad_packed_steps(data, batch_sizes)
            output, h_n, c_n = fused_layers(self, padded, lengths, states[0], cx)
            output = repack_steps(output, batch_sizes)
        else:
            output, h_n, c_n = fused_layers(self, input, None, states[0], cx)  # already (L, N, D * H_out)
        if unsorted_indices is not None:
            h_n = h_n.index_select(1, unsorted_indices)
            c_n = None if c_n is None else c_n.index_select(1, unsorted_indices)
        if packed:
            output = PackedSequence(output, batch_sizes_tensor, sorted_indices, unsorted_indices)
        else:
            if output.dim() == 2:  # the unrolled steps' rows
                output = output.reshape((len(batch_sizes), batch, output.shape[-1]))
            if self.batch_first:
                output = output.transpose(0, 1)
            if not is_batched:
                output = output.squeeze(0 if self.batch_first else 1)
                h_n = h_n.squeeze(1)
                c_n = None if c_n is None else c_n.squeeze(1)
        return output, ((h_n, c_n) if is_lstm else h_n)

    def extra_repr(self) -> str:
        text = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            text += ", proj_size={proj_size}"
        if self.num_layers != 1:
            text += ", num_layers={num_layers}"
        if self.bias is not True:
            text += ", bias={bias}"
        if self.batch_first is not False:
            text += ", batch_first={batch_first}"
        if self.dropout != 0:
            text += ", dropout={dropout}"
        if self.bidirectional is not False:
            text += ", bidirectional={bidirectional}"
        return text.format(**self.__dict__)


class RNN(RNNBase):
    """An Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ReLU), per layer.

    Args:
        input_size, hidden_size: features of the input and of the hidden state.
        num_layers: stacked layers. Default: 1.
        nonlinearity: ``'tanh'`` or ``'relu'``. Default: ``'tanh'``.
        bias: learn ``b_ih`` and ``b_hh``. Default: ``True``.
        batch_first: input and output are ``(N, L, H)`` instead of ``(L, N, H)``. Default: ``False``.
        dropout: dropout probability on the outputs of every layer but the last (training only).
        bidirectional: run a second, reversed direction per layer. Default: ``False``.

    Inputs: ``input`` ``(L, N, H_in)``, ``(L, H_in)`` or a PackedSequence; ``hx``
    ``(D * num_layers, N, H_out)`` (default zeros). Outputs: ``output`` and ``h_n``.
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)

    def forward(self, input, hx: Tensor | None = None):
        return self._forward(input, hx, "RNN")


class LSTM(RNNBase):
    """A long short-term memory network, PyTorch's gate order (input, forget, cell, output).

    Args: as :class:`RNN` (without ``nonlinearity``), plus ``proj_size``: if > 0, ``h_t`` is
    projected by ``weight_hr`` to ``proj_size`` features. Inputs: ``input`` and optionally
    ``(h_0, c_0)``; outputs: ``output`` and ``(h_n, c_n)``.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx: tuple[Tensor, Tensor] | None = None):
        return self._forward(input, hx, "LSTM")


class GRU(RNNBase):
    """A gated recurrent unit network, PyTorch's gate order (reset, update, new):
    ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``, ``h' = (1 - z) * n + z * h``.

    Args, inputs and outputs: as :class:`RNN` (without ``nonlinearity``).
    """

    def __init__(self, *args, **kwargs) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx: Tensor | None = None):
        return self._forward(input, hx, "GRU")


class RNNCellBase(Module):
    """The parameters shared by the single-step cells: weight_ih, weight_hh, bias_ih, bias_hh."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device=None, dtype=None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **factory_kwargs))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **factory_kwargs))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **factory_kwargs))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **factory_kwargs))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draws every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        text = "{input_size}, {hidden_size}"
        if self.bias is not True:
            text += ", bias={bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += ", nonlinearity={nonlinearity}"
        return text.format(**self.__dict__)

    def _cell(self, name: str, mode: str, input: Tensor, states):
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        for index, state in enumerate(states):
            if state is not None and state.dim() not in (1, 2):
                which = "hidden" if len(states) == 1 else f"hx[{index}]"
                raise ValueError(f"{name}: Expected {which} to be 1D or 2D, got {state.dim()}D instead")
        is_batched = input.dim() == 2
        if not is_batched:
            input = input.unsqueeze(0)
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        states = [
            _zero_state((input.size(0), self.hidden_size), input)
            if state is None
            else (state if is_batched else state.unsqueeze(0))
            for state in states
        ]
        for index, state in enumerate(states):
            if state.size(0) != input.size(0):
                raise RuntimeError(
                    f"Input batch size {input.size(0)} doesn't match hidden{index} batch size {state.size(0)}"
                )
            if state.size(1) != self.hidden_size:
                raise RuntimeError(
                    f"hidden{index} has inconsistent hidden_size: got {state.size(1)}, expected {self.hidden_size}"
                )
        # The products meet the weights: PyTorch refuses an input or hidden state of another dtype
        # (the LSTM's cell state is only added, so it is not checked).
        _check_product_dtypes(input, self.weight_ih)
        _check_product_dtypes(states[0], self.weight_hh)
        h, c = _step(
            mode,
            F.linear(input, self.weight_ih, self.bias_ih),
            states[0],
            states[1] if len(states) > 1 else None,
            self.weight_hh,
            self.bias_hh,
            None,
        )
        if not is_batched:
            h, c = h.squeeze(0), None if c is None else c.squeeze(0)
        return h if c is None else (h, c)


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ReLU)."""

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(
        self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh", device=None, dtype=None
    ) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._cell("RNNCell", "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", input, [hx])


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        if hx is not None and len(hx) != 2:
            raise RuntimeError("lstm_cell expects two hidden states")
        return self._cell("LSTMCell", "LSTM", input, [None, None] if hx is None else list(hx))


class GRUCell(RNNCellBase):
    """One GRU step; returns ``h'``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._cell("GRUCell", "GRU", input, [hx])


def _zero_state(shape: tuple, like: Tensor) -> Tensor:
    """A default initial state: a zero expanded to ``shape``, recorded as an ``Expand`` whose shape
    an export with a dynamic batch computes from the input (an array of zeros would be baked in)."""
    return zeros((), dtype=like.dtype, device=like.device).expand(shape)
