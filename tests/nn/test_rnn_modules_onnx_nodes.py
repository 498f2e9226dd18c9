"""RNN, LSTM and GRU as ONNX recurrent nodes: one node per layer, unrolled steps where they will be
differentiated, float32 nodes against the numpy recurrence (rnn_cases.py) and PyTorch, export that
onnxruntime runs, plans on the kernels, gradients, dropout between nodes, and empty batches.

The modules against the numpy recurrence in float64 are in test_rnn_modules_recurrence.py.
"""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.ir.plan import plan as plan_of
from onnxnn.nn.utils import rnn as rnn_utils
from onnxnn.runtime.fastpath import plan_cache

from .layer_checks import EXECUTORS, exported_output

from .rnn_cases import (
    LENGTHS,
    NETWORKS,
    RNG,
    initial_states,
    make,
    network_reference,
    recurrence_atol,
    split_states,
)

# ---------------------------------------------------------------- ONNX recurrent nodes
#
# RNN, LSTM (without projection) and GRU record one ONNX RNN/LSTM/GRU node per layer. In float32,
# which onnxruntime's fused kernels take, the recurrence's worst-case bound (rnn_cases.py's docstring) is
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
    assert FUSED_OP_TYPE[mode] not in trained and "Gemm" in trained
    with onnxnn.no_grad():
        assert recorded_op_types(module(x)[0]).count(FUSED_OP_TYPE[mode]) == 2
    module.requires_grad_(False)
    assert recorded_op_types(module(x)[0]).count(FUSED_OP_TYPE[mode]) == 2  # nothing requires grad
    assert FUSED_OP_TYPE[mode] not in recorded_op_types(module(x.requires_grad_())[0])


def test_projection_and_float64_on_onnxruntime_keep_the_unrolled_steps():
    # ONNX's LSTM has no projection; onnxruntime's recurrent kernels have no float64.
    op_types = recorded_op_types(nn.LSTM(2, 3, proj_size=2)(onnxnn.randn(4, 1, 2))[0])
    assert "LSTM" not in op_types and "Gemm" in op_types
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
