"""RNN, LSTM, GRU and their cells.

The reference runs each sequence of the batch on its own, step by step, with numpy's formulas of
PyTorch's cells (gate orders i, f, g, o for LSTM and r, z, n for GRU), so padded steps never reach
it: packed inputs must give zeros there and final states taken at each sequence's last step.

Tolerance: a step computes gate pre-activations as dot products of ``I + H`` terms plus two
biases, then a few transcendental ops (``TRANSCENDENTAL_ULPS`` each) and products; each step's
rounding is at most ``gamma(I + H + 2 + 3 * ulps) * M`` with ``M`` the largest absolute sum of the
terms. An error already in the state grows by at most the map's Lipschitz constant, bounded by
``1 + 2 * ||W_hh||_inf`` (sigmoid and tanh are 1-Lipschitz, LSTM's cell adds the previous cell),
so after ``n`` steps of all layers the bound is the step's error times ``sum_k (1 + 2 L)^k``. The
forward checks run in float64, where that worst case is still ~1e-9 while a wrong gate or a wrong
state gives errors of order 0.1.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import TRANSCENDENTAL_ULPS, gamma

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.ir.plan import plan as plan_of
from onnxnn.nn.utils import rnn as rnn_utils
from onnxnn.runtime.fastpath import plan_cache

from .layer_checks import EXECUTORS, exported_output

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


def call(module, input, h0, c0):
    if h0 is None:
        return module(input)
    return module(input, (onnxnn.tensor(h0), onnxnn.tensor(c0)) if c0 is not None else onnxnn.tensor(h0))


def split_states(module, hidden):
    return (hidden[0], hidden[1]) if module.mode == "LSTM" else (hidden, None)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("case_id, cls, kwargs, mode", NETWORKS, ids=[n[0] for n in NETWORKS])
def test_padded_forward_matches_numpy_recurrence(case_id, cls, kwargs, mode, batch_first, executor):
    module, state = make(cls, kwargs, batch_first=batch_first)
    x = RNG.standard_normal((4, 3, 2))
    h0, c0 = initial_states(module, 3)
    expected, h_expected, c_expected = network_reference(mode, state, x, [4, 4, 4], h0, c0, 2, 2)
    with onnxnn.set_executor(executor):
        output, hidden = call(module, onnxnn.tensor(np.swapaxes(x, 0, 1) if batch_first else x), h0, c0)
        h_n, c_n = split_states(module, hidden)
        # Realized on ``executor`` (onnxnn is lazy: a graph run after the block would run on "auto").
        actual, h_n, c_n = (None if t is None else t.detach().numpy() for t in (output, h_n, c_n))
    atol = recurrence_atol(state, x, 4, 2)
    np.testing.assert_allclose(np.swapaxes(actual, 0, 1) if batch_first else actual, expected, rtol=0, atol=atol)
    np.testing.assert_allclose(h_n, h_expected, rtol=0, atol=atol)
    if c_n is not None:
        np.testing.assert_allclose(c_n, c_expected, rtol=0, atol=atol)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, cls, kwargs, mode", NETWORKS, ids=[n[0] for n in NETWORKS])
def test_packed_forward_zeroes_padding_and_keeps_each_sequences_last_state(case_id, cls, kwargs, mode, executor):
    module, state = make(cls, kwargs)
    x = RNG.standard_normal((4, 3, 2))
    h0, c0 = initial_states(module, 3)
    expected, h_expected, c_expected = network_reference(mode, state, x, LENGTHS, h0, c0, 2, 2)
    with onnxnn.set_executor(executor):
        packed = rnn_utils.pack_padded_sequence(onnxnn.tensor(x), LENGTHS, enforce_sorted=False)
        output, hidden = call(module, packed, h0, c0)
        assert isinstance(output, rnn_utils.PackedSequence)
        padded, lengths = rnn_utils.pad_packed_sequence(output)
        h_n, c_n = split_states(module, hidden)
        # Realized on ``executor`` (onnxnn is lazy: a graph run after the block would run on "auto").
        lengths = lengths.numpy()
        padded, h_n, c_n = (None if t is None else t.detach().numpy() for t in (padded, h_n, c_n))
    atol = recurrence_atol(state, x, 4, 2)
    np.testing.assert_array_equal(lengths, LENGTHS)
    np.testing.assert_allclose(padded, expected, rtol=0, atol=atol)
    np.testing.assert_allclose(h_n, h_expected, rtol=0, atol=atol)
    if c_n is not None:
        np.testing.assert_allclose(c_n, c_expected, rtol=0, atol=atol)


# float64 records ONNX nodes on the kernels only (onnxruntime's recurrent kernels are float32):
# there LSTM and RNN check the nodes' gradients; on onnxruntime the unrolled steps' are checked.
@pytest.mark.parametrize(
    "executor, cls, kwargs",
    [
        ("onnxruntime", nn.LSTM, {"proj_size": 2}),
        ("kernels", nn.LSTM, {"proj_size": 2}),
        ("onnxruntime", nn.GRU, {}),
        ("kernels", nn.GRU, {}),
        ("kernels", nn.LSTM, {}),
        ("kernels", nn.RNN, {"nonlinearity": "relu"}),
    ],
    ids=[
        "onnxruntime-lstm-proj",
        "kernels-lstm-proj",
        "onnxruntime-gru",
        "kernels-gru",
        "kernels-lstm",
        "kernels-rnn-relu",
    ],
)
def test_packed_bidirectional_two_layer_gradients_match_finite_differences(executor, cls, kwargs):
    module, state = make(cls, kwargs)
    names = list(state)
    h0, c0 = initial_states(module, 3)

    def run(x, h, *weights):
        for name, weight in zip(names, weights):
            module._parameters[name] = weight  # differentiate with respect to each weight
        packed = rnn_utils.pack_padded_sequence(x, LENGTHS, enforce_sorted=False)
        hidden = (h, onnxnn.tensor(c0)) if module.mode == "LSTM" else h
        output, states = module(packed, hidden)
        final_h = states[0] if module.mode == "LSTM" else states
        return onnxnn.cat([output.data.reshape(-1), final_h.reshape(-1)], 0)

    with onnxnn.set_executor(executor):
        # One random direction per input (JAX's check_vjp) keeps this to two forward runs per input.
        check_gradients(run, [RNG.standard_normal((4, 3, 2)), h0, *state.values()], exhaustive_limit=0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("cls, mode", [(nn.RNNCell, "RNN_TANH"), (nn.LSTMCell, "LSTM"), (nn.GRUCell, "GRU")])
def test_cells_match_one_numpy_step_and_their_gradients(cls, mode, executor):
    cell = cls(3, 4).double()
    p = {
        "w_ih": cell.weight_ih.detach().numpy(),
        "w_hh": cell.weight_hh.detach().numpy(),
        "b_ih": cell.bias_ih.detach().numpy(),
        "b_hh": cell.bias_hh.detach().numpy(),
        "w_hr": None,
    }
    x, h, c = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4)), RNG.standard_normal((2, 4))
    with onnxnn.set_executor(executor):
        hx = (onnxnn.tensor(h), onnxnn.tensor(c)) if mode == "LSTM" else onnxnn.tensor(h)
        result = cell(onnxnn.tensor(x), hx)
        unbatched = cell(onnxnn.tensor(x[0]))
        actual = (result[0] if mode == "LSTM" else result).detach().numpy()
        expected = np.stack([cell_reference(mode, x[b], h[b], c[b], p)[0] for b in range(2)])
        np.testing.assert_allclose(
            actual, expected, rtol=0, atol=gamma(3 + 4 + 2 + 3 * TRANSCENDENTAL_ULPS, np.float64) * 20
        )
        first = unbatched[0] if mode == "LSTM" else unbatched
        assert tuple(first.shape) == (4,)
        if mode == "LSTM":
            check_gradients(lambda x, h, c: cell(x, (h, c))[1], [x, h, c])
        else:
            check_gradients(lambda x, h: cell(x, h), [x, h])


def test_parameter_names_shapes_and_init_follow_pytorch():
    lstm = nn.LSTM(5, 4, num_layers=2, bidirectional=True, proj_size=2)
    shapes = {name: tuple(value.shape) for name, value in lstm.state_dict().items()}
    assert list(shapes)[:5] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_hr_l0"]
    assert shapes["weight_ih_l0"] == (16, 5) and shapes["weight_hh_l0"] == (16, 2)
    assert shapes["weight_ih_l1_reverse"] == (16, 4) and shapes["weight_hr_l1_reverse"] == (2, 4)
    assert len(shapes) == 20
    gru = nn.GRU(3, 6, bias=False)
    assert {name: tuple(v.shape) for name, v in gru.state_dict().items()} == {
        "weight_ih_l0": (18, 3),
        "weight_hh_l0": (18, 6),
    }
    bound = 1 / np.sqrt(6)
    values = np.concatenate([p.detach().numpy().ravel() for p in nn.RNN(6, 6).parameters()])
    assert np.all(np.abs(values) <= bound)
    assert (
        repr(nn.LSTM(4, 5, num_layers=2, proj_size=2, bidirectional=True))
        == "LSTM(4, 5, proj_size=2, num_layers=2, bidirectional=True)"
    )
    assert repr(nn.RNN(2, 3, nonlinearity="relu")) == "RNN(2, 3, nonlinearity=relu)"


@pytest.mark.parametrize("executor", EXECUTORS)
def test_unbatched_input_and_batch_first_shapes(executor):
    lstm = nn.LSTM(2, 3, batch_first=True, bidirectional=True)
    with onnxnn.set_executor(executor):
        output, (h, c) = lstm(onnxnn.randn(5, 2))
        assert tuple(output.shape) == (5, 6) and tuple(h.shape) == (2, 3) and tuple(c.shape) == (2, 3)
        output, h = nn.GRU(2, 3, batch_first=True)(onnxnn.randn(4, 5, 2))
        assert tuple(output.shape) == (4, 5, 3) and tuple(h.shape) == (1, 4, 3)


def test_dropout_between_layers_applies_in_training_only():
    module, state = make(nn.GRU, {}, dropout=1.0)
    x = RNG.standard_normal((3, 2, 2))
    h0, _ = initial_states(module, 2)
    atol = recurrence_atol(state, x, 3, 2)
    for training, dropped in ((False, False), (True, True)):
        module.train(training)
        output, _ = module(onnxnn.tensor(x), onnxnn.tensor(h0))
        expected, _, _ = network_reference("GRU", state, x, [3, 3], h0, None, 2, 2, drop_between=dropped)
        np.testing.assert_allclose(output.detach().numpy(), expected, rtol=0, atol=atol)


@pytest.mark.parametrize("case_id, cls, kwargs, mode", NETWORKS[::2], ids=[n[0] for n in NETWORKS[::2]])
def test_export_runs_in_onnxruntime(case_id, cls, kwargs, mode):
    # float64 end to end: the worst-case float32 bound of the recurrence is too loose to test anything.
    # onnxruntime has no float64 recurrent kernels: traced with its executor selected, the module
    # records the unrolled steps, which it runs.
    module, state = make(cls, kwargs)
    x = onnxnn.randn(4, 3, 2, dtype=onnxnn.float64)
    expected, _, _ = network_reference(
        mode, state, x.numpy(), [4, 4, 4], np.zeros((4, 3, 3)), np.zeros((4, 3, 3)) if mode == "LSTM" else None, 2, 2
    )
    with onnxnn.set_executor("onnxruntime"):
        actual = exported_output(module, x)
    assert actual.dtype == np.float64
    np.testing.assert_allclose(actual, expected, rtol=0, atol=recurrence_atol(state, x.numpy(), 4, 2))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: nn.LSTM(3, 4)(onnxnn.randn(5, 2, 2)),
            RuntimeError,
            "input.size\\(-1\\) must be equal to input_size. Expected 3, got 2",
        ),
        (
            lambda: nn.GRU(3, 4)(onnxnn.randn(5, 2, 3), onnxnn.randn(1, 3, 4)),
            RuntimeError,
            r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]",
        ),
        (
            lambda: nn.LSTM(3, 4)(onnxnn.randn(5, 2, 3), (onnxnn.randn(1, 2, 4), onnxnn.randn(1, 2, 5))),
            RuntimeError,
            r"Expected hidden\[1\] size \(1, 2, 4\), got \[1, 2, 5\]",
        ),
        (
            lambda: nn.RNN(3, 4)(onnxnn.randn(5, 2, 3), onnxnn.randn(2, 4)),
            RuntimeError,
            "For batched 3-D input, hx should also be 3-D but got 2-D tensor",
        ),
        (lambda: nn.RNN(3, 4)(onnxnn.randn(1, 5, 2, 3)), ValueError, "RNN: Expected input to be 2D or 3D, got 4D"),
        (lambda: nn.GRU(3, 4, proj_size=2), ValueError, "proj_size argument is only supported for LSTM"),
        (lambda: nn.LSTM(3, 4, proj_size=4), ValueError, "proj_size has to be smaller than hidden_size"),
        (lambda: nn.RNN(3, 4, nonlinearity="gelu"), ValueError, "Unknown nonlinearity 'gelu'"),
        (lambda: nn.RNN(3, 4, dropout=1.5), ValueError, "dropout should be a number in range"),
        (
            lambda: nn.GRUCell(3, 4)(onnxnn.randn(2, 5)),
            RuntimeError,
            "input has inconsistent input_size: got 5 expected 3",
        ),
        (
            lambda: nn.LSTMCell(3, 4)(onnxnn.randn(2, 3), (onnxnn.randn(2, 5), onnxnn.randn(2, 4))),
            RuntimeError,
            "hidden0 has inconsistent hidden_size: got 5, expected 4",
        ),
        (lambda: nn.RNNCell(3, 4)(onnxnn.randn(1, 2, 3)), ValueError, "RNNCell: Expected input to be 1D or 2D, got 3D"),
        (
            lambda: nn.LSTMCell(3, 4)(onnxnn.randn(2, 3), (onnxnn.randn(2, 4),)),
            RuntimeError,
            "expects two hidden states",
        ),
    ],
)
def test_bad_inputs_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("grad_enabled", [True, False], ids=["unrolled steps", "fused nodes"])
def test_a_narrower_lstm_cell_state_is_taken_in_the_inputs_dtype(grad_enabled):
    lstm = nn.LSTM(3, 4).double()
    x, h, c = RNG.standard_normal((5, 2, 3)), RNG.standard_normal((1, 2, 4)), RNG.standard_normal((1, 2, 4))
    c32 = c.astype(np.float32)
    with onnxnn.set_grad_enabled(grad_enabled):
        output, (h_n, c_n) = lstm(onnxnn.tensor(x), (onnxnn.tensor(h), onnxnn.tensor(c32)))
        expected, (expected_h, expected_c) = lstm(
            onnxnn.tensor(x), (onnxnn.tensor(h), onnxnn.tensor(c32.astype(float)))
        )
    assert output.dtype is c_n.dtype is onnxnn.float64
    for actual, reference in [(output, expected), (h_n, expected_h), (c_n, expected_c)]:
        np.testing.assert_array_equal(actual.detach().numpy(), reference.detach().numpy())


@pytest.mark.parametrize("grad_enabled", [True, False], ids=["unrolled steps", "fused nodes"])
@pytest.mark.parametrize("cls", [nn.RNN, nn.GRU, nn.LSTM])
def test_a_hidden_state_of_another_dtype_is_refused_as_pytorch(cls, grad_enabled):
    module = cls(3, 4).double()
    h = onnxnn.zeros(1, 2, 4)  # float32 beside float64 weights: PyTorch's matmul refuses the pair
    state = (h, onnxnn.zeros(1, 2, 4, dtype=onnxnn.float64)) if cls is nn.LSTM else h
    with onnxnn.set_grad_enabled(grad_enabled), pytest.raises(RuntimeError, match="must have the same dtype"):
        module(onnxnn.zeros(5, 2, 3, dtype=onnxnn.float64), state)


def test_dropout_on_a_single_layer_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.LSTM(3, 4, dropout=0.5)
    assert any("non-zero dropout expects num_layers greater than 1" in str(w.message) for w in caught)


@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_matches_torch_with_the_same_state_dict(name):
    torch = pytest.importorskip("torch")
    ours = getattr(nn, name)(2, 3, num_layers=2, bidirectional=True).double()
    theirs = getattr(torch.nn, name)(2, 3, num_layers=2, bidirectional=True).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    x = RNG.standard_normal((4, 3, 2))
    packed = rnn_utils.pack_padded_sequence(onnxnn.tensor(x), LENGTHS, enforce_sorted=False)
    torch_packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), torch.tensor(LENGTHS), enforce_sorted=False)
    output, hidden = ours(packed)
    torch_output, torch_hidden = theirs(torch_packed)
    state = {k: v.detach().numpy() for k, v in ours.state_dict().items()}
    # Two float64 evaluations, each within the bound of the exact result.
    atol = 2 * recurrence_atol(state, x, 4, 2)
    np.testing.assert_allclose(output.data.detach().numpy(), torch_output.data.detach().numpy(), rtol=0, atol=atol)
    h, torch_h = (hidden[0], torch_hidden[0]) if name == "LSTM" else (hidden, torch_hidden)
    np.testing.assert_allclose(h.detach().numpy(), torch_h.detach().numpy(), rtol=0, atol=atol)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float32_smoke_keeps_the_dtype(executor):
    # Only a smoke test: the float32 worst-case bound of a 2-layer recurrence is too loose to compare values.
    with onnxnn.set_executor(executor):
        output, (h, c) = nn.LSTM(2, 3, num_layers=2, bidirectional=True)(onnxnn.randn(4, 3, 2))
        output_values, h_values = output.detach().numpy(), h.detach().numpy()  # realized on ``executor``
    assert output.dtype == h.dtype == c.dtype == onnxnn.float32
    assert np.all(np.isfinite(output_values)) and np.all(np.abs(h_values) <= 1)


# ---------------------------------------------------------------- ONNX recurrent nodes
#
# RNN, LSTM (without projection) and GRU record one ONNX RNN/LSTM/GRU node per layer. In float32,
# which onnxruntime's fused kernels take, the recurrence's worst-case bound (module docstring) is
# only useful with a small recurrent Lipschitz constant: the modules below keep weight_ih and the
# biases at PyTorch's scale (so a wrong gate order or bias half changes outputs by ~0.1) and scale
# weight_hh by 0.2, which brings the float32 bound of 2 layers x 4 steps to ~4e-3.

FUSED = [case for case in NETWORKS if case[0] != "lstm-proj"]
FUSED_OP_TYPE = {"RNN_TANH": "RNN", "RNN_RELU": "RNN", "LSTM": "LSTM", "GRU": "GRU"}


def recorded_op_types(*tensors) -> list[str]:
    return [node.op_type for node in plan_of([tensor._value for tensor in tensors]).nodes]


def make_float32(cls, kwargs, **extra):
    """A 2-layer bidirectional module in float32 with weight_hh scaled by 0.2, and its exact float64 state."""
    module, state = make(cls, kwargs, **extra)
    scaled = {name: value * 0.2 if name.startswith("weight_hh") else value for name, value in state.items()}
    module.load_state_dict({name: onnxnn.tensor(value) for name, value in scaled.items()})
    module.float()
    return module, {name: value.detach().numpy().astype(np.float64) for name, value in module.state_dict().items()}


@pytest.mark.parametrize("case_id, cls, kwargs, mode", FUSED, ids=[n[0] for n in FUSED])
def test_each_layer_records_one_onnx_recurrent_node_and_no_per_step_matmuls(case_id, cls, kwargs, mode):
    module, _ = make_float32(cls, kwargs, dropout=0.5)
    packed = rnn_utils.pack_padded_sequence(onnxnn.randn(4, 3, 2), LENGTHS, enforce_sorted=False)
    module.eval()
    with onnxnn.no_grad():  # inference: no gradient wanted (a differentiated forward stays unrolled)
        output, hidden = module(packed)
    states = hidden if mode == "LSTM" else (hidden,)
    op_types = recorded_op_types(output.data, *states)
    assert op_types.count(FUSED_OP_TYPE[mode]) == 2, op_types
    assert "MatMul" not in op_types and "Gemm" not in op_types, op_types
    nodes = [node for node in plan_of([output.data._value]).nodes if node.op_type == FUSED_OP_TYPE[mode]]
    assert all(node.attrs["direction"] == "bidirectional" and node.attrs["hidden_size"] == 3 for node in nodes)
    assert all(node.inputs[4] is not None for node in nodes)  # mixed lengths: sequence_lens
    if mode == "GRU":
        assert all(node.attrs["linear_before_reset"] == 1 for node in nodes)
    assert "Mul" not in op_types
    # Training, the second layer reads the first one's output times F.dropout's mask (a Mul by
    # data drawn from onnxnn's generator, so a new mask does not change the graph).
    module.train()
    with onnxnn.no_grad():
        nodes = [
            node
            for node in plan_of([module(onnxnn.randn(4, 3, 2))[0]._value]).nodes
            if node.op_type == FUSED_OP_TYPE[mode]
        ]
    assert len(nodes) == 2 and nodes[1].inputs[0].node.op_type == "Mul"
    assert nodes[0].inputs[4] is None  # every sequence full: no sequence_lens


@pytest.mark.parametrize("case_id, cls, kwargs, mode", FUSED[:1] + FUSED[-1:], ids=[FUSED[0][0], FUSED[-1][0]])
def test_a_forward_that_will_be_differentiated_records_the_unrolled_steps(case_id, cls, kwargs, mode):
    # The nodes' gradient rule re-records the unrolled recurrence inside the backward: training
    # differentiates the unrolled forward directly instead.
    module, _ = make_float32(cls, kwargs)
    x = onnxnn.randn(4, 3, 2)
    trained = recorded_op_types(module(x)[0])
    assert FUSED_OP_TYPE[mode] not in trained and "MatMul" in trained
    with onnxnn.no_grad():
        assert recorded_op_types(module(x)[0]).count(FUSED_OP_TYPE[mode]) == 2
    module.requires_grad_(False)
    assert recorded_op_types(module(x)[0]).count(FUSED_OP_TYPE[mode]) == 2  # nothing requires grad
    assert FUSED_OP_TYPE[mode] not in recorded_op_types(module(x.requires_grad_())[0])


def test_projection_and_float64_on_onnxruntime_keep_the_unrolled_steps():
    # ONNX's LSTM has no projection; onnxruntime's recurrent kernels have no float64.
    op_types = recorded_op_types(nn.LSTM(2, 3, proj_size=2)(onnxnn.randn(4, 1, 2))[0])
    assert "LSTM" not in op_types and "MatMul" in op_types
    lstm = nn.LSTM(2, 3).double()
    with onnxnn.no_grad():
        with onnxnn.set_executor("onnxruntime"):
            assert "LSTM" not in recorded_op_types(lstm(onnxnn.randn(4, 1, 2, dtype=onnxnn.float64))[0])
        assert recorded_op_types(lstm(onnxnn.randn(4, 1, 2, dtype=onnxnn.float64))[0]).count("LSTM") == 1


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, cls, kwargs, mode", FUSED, ids=[n[0] for n in FUSED])
def test_float32_packed_onnx_nodes_match_numpy_and_torch(case_id, cls, kwargs, mode, executor):
    module, state = make_float32(cls, kwargs)
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32).astype(np.float64)
    h0, c0 = (None if s is None else s.astype(np.float32).astype(np.float64) for s in initial_states(module, 3))
    expected, h_expected, c_expected = network_reference(mode, state, x, LENGTHS, h0, c0, 2, 2)
    with onnxnn.set_executor(executor):
        packed = rnn_utils.pack_padded_sequence(onnxnn.tensor(x, dtype=onnxnn.float32), LENGTHS, enforce_sorted=False)
        hidden = onnxnn.tensor(h0, dtype=onnxnn.float32)
        if c0 is not None:
            hidden = (hidden, onnxnn.tensor(c0, dtype=onnxnn.float32))
        output, hidden = module(packed, hidden)
        padded, _ = rnn_utils.pad_packed_sequence(output)
        h_n, c_n = split_states(module, hidden)
        assert padded.dtype == onnxnn.float32
        # Realized on ``executor`` (onnxnn is lazy: a graph run after the block would run on "auto").
        output_data = output.data.detach().numpy()
        padded, h_n, c_n = (None if t is None else t.detach().numpy() for t in (padded, h_n, c_n))
    scale = np.abs(np.concatenate([x.ravel(), h0.ravel()] + ([] if c0 is None else [c0.ravel()]))).max()
    atol = recurrence_atol(state, x * 0 + scale, 4, 2, np.float32)
    np.testing.assert_allclose(padded, expected, rtol=0, atol=atol)
    np.testing.assert_allclose(h_n, h_expected, rtol=0, atol=atol)
    if c_n is not None:
        np.testing.assert_allclose(c_n, c_expected, rtol=0, atol=atol)
    torch = pytest.importorskip("torch")
    theirs = getattr(torch.nn, cls.__name__)(2, 3, num_layers=2, bidirectional=True, **kwargs)
    theirs.load_state_dict({name: torch.tensor(value, dtype=torch.float32) for name, value in state.items()})
    torch_packed = torch.nn.utils.rnn.pack_padded_sequence(
        torch.tensor(x, dtype=torch.float32), torch.tensor(LENGTHS), enforce_sorted=False
    )
    torch_hidden = torch.tensor(h0, dtype=torch.float32)
    if c0 is not None:
        torch_hidden = (torch_hidden, torch.tensor(c0, dtype=torch.float32))
    with torch.no_grad():
        torch_output, torch_hidden = theirs(torch_packed, torch_hidden)
    # Two float32 evaluations, each within the bound of the exact result.
    np.testing.assert_allclose(output_data, torch_output.data.numpy(), rtol=0, atol=2 * atol)
    torch_h = torch_hidden[0] if mode == "LSTM" else torch_hidden
    np.testing.assert_allclose(h_n, torch_h.numpy(), rtol=0, atol=2 * atol)


@pytest.mark.parametrize("case_id, cls, kwargs, mode", FUSED[::2], ids=[n[0] for n in FUSED[::2]])
def test_float32_export_writes_onnx_recurrent_nodes_that_onnxruntime_runs(case_id, cls, kwargs, mode):
    module, state = make_float32(cls, kwargs, batch_first=True)
    x = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    proto = to_onnx(module.eval(), (onnxnn.tensor(x),))
    op_types = [node.op_type for node in proto.graph.node]
    assert op_types.count(FUSED_OP_TYPE[mode]) == 2 and "MatMul" not in op_types, op_types
    assert {init.name for init in proto.graph.initializer} >= {"weight_ih_l0", "weight_hh_l1_reverse"}
    actual = exported_output(module, onnxnn.tensor(x))
    zeros = np.zeros((4, 3, 3))
    expected, _, _ = network_reference(
        mode, state, np.swapaxes(x, 0, 1).astype(np.float64), [4, 4, 4], zeros, zeros if mode == "LSTM" else None, 2, 2
    )
    atol = recurrence_atol(state, np.abs(x).max() + 0 * x, 4, 2, np.float32)
    np.testing.assert_allclose(np.swapaxes(actual, 0, 1), expected, rtol=0, atol=atol)
    # The session onnxnn runs is onnxruntime's own kernel on the same graph.
    with onnxnn.set_executor("onnxruntime"):
        ours = module(onnxnn.tensor(x))[0].detach().numpy()
    np.testing.assert_allclose(ours, actual, rtol=0, atol=atol)


def test_float64_recurrent_plans_run_on_the_kernels_under_auto():
    lstm = nn.LSTM(8, 16).requires_grad_(False)  # inference: one LSTM node
    # Large enough that the cost model alone would pick onnxruntime, which lacks float64 LSTM.
    output = lstm(onnxnn.randn(40, 16, 8))[0]
    assert plan_cache.choose(plan_of([output._value])) == "onnxruntime"
    output = lstm.double()(onnxnn.randn(40, 16, 8, dtype=onnxnn.float64))[0]
    assert plan_cache.choose(plan_of([output._value])) == "kernels"
    assert np.all(np.isfinite(output.detach().numpy()))


@pytest.mark.parametrize("cls, kwargs", [(nn.LSTM, {})], ids=["lstm"])  # GRU's is the same path (~10 s)
def test_float32_gradients_on_onnxruntime_match_the_checked_float64_gradients(cls, kwargs):
    # A float32 training step on onnxruntime must match the float64 gradients on the kernels
    # (checked by finite differences above). The backward is the same recurrence
    # linearized (same weights, same Lipschitz growth), so each output's contribution errs by at
    # most the forward's float32 bound per unit of cotangent; the cotangent (all ones) sums every
    # output entry into each gradient.
    module32, state = make_float32(cls, kwargs)
    module64 = cls(2, 3, num_layers=2, bidirectional=True, **kwargs).double()
    module64.load_state_dict({name: onnxnn.tensor(value) for name, value in state.items()})
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32).astype(np.float64)
    gradients = {}
    for executor, module, dtype in (("onnxruntime", module32, onnxnn.float32), ("kernels", module64, onnxnn.float64)):
        with onnxnn.set_executor(executor):
            packed = rnn_utils.pack_padded_sequence(onnxnn.tensor(x, dtype=dtype), LENGTHS, enforce_sorted=False)
            output, hidden = module(packed)
            final_h = hidden[0] if module.mode == "LSTM" else hidden
            (output.data.sum() + final_h.sum()).backward()
            gradients[executor] = {name: p.grad.numpy().astype(np.float64) for name, p in module.named_parameters()}
    outputs = sum(LENGTHS) * 6 + 4 * 3 * 3
    atol = recurrence_atol(state, np.abs(x).max() + 0 * x, 4, 2, np.float32) * outputs
    for name in state:
        assert np.abs(gradients["onnxruntime"][name]).max() > 0, name  # the gradient reached every weight
        np.testing.assert_allclose(
            gradients["onnxruntime"][name], gradients["kernels"][name], rtol=0, atol=atol, err_msg=name
        )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_float32_dropout_between_onnx_nodes_applies_in_training_only(executor):
    module, state = make_float32(nn.LSTM, {}, dropout=1.0)
    x = RNG.standard_normal((3, 2, 2)).astype(np.float32).astype(np.float64)
    atol = recurrence_atol(state, np.abs(x).max() + 0 * x, 3, 2, np.float32)
    zeros = np.zeros((4, 2, 3))
    for training in (False, True):
        module.train(training)
        with onnxnn.set_executor(executor):
            output, _ = module(onnxnn.tensor(x, dtype=onnxnn.float32))
            actual = output.detach().numpy()  # realized on ``executor`` (onnxnn is lazy)
        expected, _, _ = network_reference("LSTM", state, x, [3, 3], zeros, zeros, 2, 2, drop_between=training)
        np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_an_empty_batch_gives_empty_results(mode, batch_first, executor):
    # onnxruntime's CPU LSTM and GRU kernels abort the process on an empty batch: it runs unrolled.
    module = getattr(nn, mode)(8, 16, num_layers=2, bidirectional=True, batch_first=batch_first)
    x = onnxnn.zeros((0, 4, 8) if batch_first else (4, 0, 8))
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        output, state = module(x)
        states = state if mode == "LSTM" else (state,)
        assert output.numpy().shape == ((0, 4, 32) if batch_first else (4, 0, 32))
        assert [tuple(s.numpy().shape) for s in states] == [(4, 0, 16)] * len(states)
