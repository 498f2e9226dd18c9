"""RNN, LSTM, GRU and their cells against a numpy recurrence: padded and packed forward, gradients,
cells, parameters and init, shapes, dropout, export, PyTorch's errors and dtypes.

The reference (rnn_cases.py) runs each sequence of the batch on its own, step by step, with numpy's
formulas of PyTorch's cells (gate orders i, f, g, o for LSTM and r, z, n for GRU), so padded steps
never reach it: packed inputs must give zeros there and final states taken at each sequence's last
step. Its tolerance bounds a step's rounding and its growth through the recurrence (rnn_cases.py);
the forward checks run in float64, where that worst case is still ~1e-9 while a wrong gate or a wrong
state gives errors of order 0.1. The ONNX RNN/LSTM/GRU nodes the layers record are in
test_rnn_modules_onnx_nodes.py.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import TRANSCENDENTAL_ULPS, gamma

import onnxnn
from onnxnn import nn
from onnxnn.nn.utils import rnn as rnn_utils

from .layer_checks import EXECUTORS, exported_output

from .rnn_cases import (
    LENGTHS,
    NETWORKS,
    RNG,
    cell_reference,
    initial_states,
    make,
    network_reference,
    recurrence_atol,
    split_states,
)


def call(module, input, h0, c0):
    if h0 is None:
        return module(input)
    return module(input, (onnxnn.tensor(h0), onnxnn.tensor(c0)) if c0 is not None else onnxnn.tensor(h0))


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
    assert repr(nn.RNN(2, 3, nonlinearity="relu")) == "RNN(2, 3)"  # as PyTorch's RNNBase, which omits it


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
