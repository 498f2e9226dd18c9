"""The recurrent module tests' numpy reference, tolerance and networks (test_rnn_modules_recurrence.py,
test_rnn_modules_onnx_nodes.py).

The reference runs each sequence of the batch on its own, step by step, with numpy's formulas of
PyTorch's cells (gate orders i, f, g, o for LSTM and r, z, n for GRU), so padded steps never reach
it: packed inputs must give zeros there and final states taken at each sequence's last step.

Tolerance: a step computes gate pre-activations as dot products of ``I + H`` terms plus two
biases, then a few transcendental ops (``TRANSCENDENTAL_ULPS`` each) and products; each step's
rounding is at most ``gamma(I + H + 2 + 3 * ulps) * M`` with ``M`` the largest absolute sum of the
terms. An error already in the state grows by at most the map's Lipschitz constant, bounded by
``1 + 2 * ||W_hh||_inf`` (sigmoid and tanh are 1-Lipschitz, LSTM's cell adds the previous cell),
so after ``n`` steps of all layers the bound is the step's error times ``sum_k (1 + 2 L)^k``.

``RNG`` is the one generator of both test modules, as it was of the module they were split from.
"""

from __future__ import annotations


import numpy as np
from tolerances import TRANSCENDENTAL_ULPS, gamma

from onnxnn import nn


RNG = np.random.default_rng(1302)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def cell_reference(mode, x, h, c, p):
    """One step of PyTorch's cell ``mode`` in numpy; ``p`` holds w_ih, w_hh, b_ih, b_hh, w_hr (or None)."""
    gx = p["w_ih"] @ x + (p["b_ih"] if p["b_ih"] is not None else 0)
    gh = p["w_hh"] @ h + (p["b_hh"] if p["b_hh"] is not None else 0)
    if mode == "RNN_TANH":
        return np.tanh(gx + gh), None
    if mode == "RNN_RELU":
        return np.maximum(gx + gh, 0), None
    if mode == "GRU":
        size = h.shape[0]
        r = sigmoid(gx[:size] + gh[:size])
        z = sigmoid(gx[size : 2 * size] + gh[size : 2 * size])
        n = np.tanh(gx[2 * size :] + r * gh[2 * size :])
        return (1 - z) * n + z * h, None
    i, f, g, o = np.split(gx + gh, 4)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    return (h if p["w_hr"] is None else p["w_hr"] @ h), c


def layer_params(state, layer, direction):
    suffix = f"_l{layer}" + ("_reverse" if direction else "")
    return {
        key: state.get(name + suffix)
        for key, name in [
            ("w_ih", "weight_ih"),
            ("w_hh", "weight_hh"),
            ("b_ih", "bias_ih"),
            ("b_hh", "bias_hh"),
            ("w_hr", "weight_hr"),
        ]
    }


def network_reference(mode, state, x, lengths, h0, c0, num_layers, directions, drop_between=False):
    """Output (T, B, D * H_out) padded with zeros, h_n and c_n, one sequence at a time (time-major ``x``)."""
    steps, batch = x.shape[:2]
    out_size = h0.shape[-1] * directions
    output = np.zeros((steps, batch, out_size))
    h_n, c_n = np.zeros_like(h0), None if c0 is None else np.zeros_like(c0)
    for b in range(batch):
        sequence = x[: lengths[b], b]
        for layer in range(num_layers):
            if layer and drop_between:
                sequence = np.zeros_like(sequence)
            outputs = []
            for direction in range(directions):
                p, index = layer_params(state, layer, direction), layer * directions + direction
                h, c = h0[index, b], None if c0 is None else c0[index, b]
                results = [None] * len(sequence)
                order = range(len(sequence) - 1, -1, -1) if direction else range(len(sequence))
                for t in order:
                    h, c = cell_reference(mode, sequence[t], h, c, p)
                    results[t] = h
                outputs.append(np.stack(results))
                h_n[index, b] = h
                if c is not None:
                    c_n[index, b] = c
            sequence = np.concatenate(outputs, -1)
        output[: lengths[b], b] = sequence
    return output, h_n, c_n


def recurrence_atol(state, x, steps, num_layers, dtype=np.float64):
    """The worst-case bound of the module docstring, for inputs ``x`` and states bounded by max(1, |x|)."""
    weights = {name: np.abs(value) for name, value in state.items()}
    scale = max(1.0, float(np.max(np.abs(x))))
    m = sum(float(np.max(w.sum(axis=-1))) * scale for name, w in weights.items() if name.startswith("weight"))
    m += sum(float(np.max(w)) for name, w in weights.items() if name.startswith("bias"))
    lipschitz = max(float(np.max(w.sum(axis=-1))) for name, w in weights.items() if name.startswith("weight_hh"))
    terms = max(w.shape[-1] for name, w in weights.items() if name.startswith("weight")) * 2 + 2
    growth = sum((1 + 2 * lipschitz) ** k for k in range(steps * num_layers))
    return gamma(terms + 3 * TRANSCENDENTAL_ULPS, dtype) * m * growth


# (id, class, constructor kwargs, mode)
NETWORKS = [
    ("rnn-tanh", nn.RNN, {}, "RNN_TANH"),
    ("rnn-relu", nn.RNN, {"nonlinearity": "relu"}, "RNN_RELU"),
    ("lstm", nn.LSTM, {}, "LSTM"),
    ("lstm-proj", nn.LSTM, {"proj_size": 2}, "LSTM"),
    ("gru", nn.GRU, {}, "GRU"),
    ("gru-no-bias", nn.GRU, {"bias": False}, "GRU"),
]


LENGTHS = [3, 4, 1]  # mixed and unsorted: packing must sort and unsort


def make(cls, kwargs, **extra):
    module = cls(2, 3, num_layers=2, bidirectional=True, **kwargs, **extra).double()
    state = {name: value.detach().numpy() for name, value in module.state_dict().items()}
    return module, state


def initial_states(module, batch):
    out_size = module.proj_size or module.hidden_size
    h0 = RNG.standard_normal((4, batch, out_size))
    c0 = RNG.standard_normal((4, batch, module.hidden_size)) if module.mode == "LSTM" else None
    return h0, c0


def split_states(module, hidden):
    return (hidden[0], hidden[1]) if module.mode == "LSTM" else (hidden, None)
