"""ONNX RNN, LSTM and GRU: the kernels executor's forward, and gradients on both executors.

Forward: the kernels executor against onnxruntime's fused kernels on the single node (the
official node tests check the kernels too: tests/kernels/test_node_tests_on_kernels.py).
Gradients: float64 central differences (tests/gradcheck.py) of the node run by each executor,
for every attribute the node tests and PyTorch's exporter use: directions, ``sequence_lens``,
initial states, peepholes, ``clip``, ``linear_before_reset``, activations with alpha/beta, layout.
Last, an LSTM graph written the way PyTorch's exporter writes ``nn.LSTM`` trains through
``from_onnx`` with falling loss.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn.import_ import from_onnx
from onnxnn.runtime.ops._common import apply_op

from gradcheck import check_gradients
from tolerances import gamma

STEPS, BATCH, INPUT, HIDDEN = 3, 2, 3, 2
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]

# (id, op_type, attrs, inputs given beyond X, W, R)
CASES = [
    ("rnn_defaults", "RNN", {}, ()),
    ("rnn_bidirectional_lengths_initial", "RNN", {"direction": "bidirectional"}, ("B", "sequence_lens", "initial_h")),
    ("rnn_softsign_batch_first", "RNN", {"activations": ["Softsign"], "layout": 1}, ("B", "initial_h")),
    ("gru_defaults", "GRU", {}, ("B",)),
    (
        "gru_linear_before_reset_bidirectional_lengths",
        "GRU",
        {"direction": "bidirectional", "linear_before_reset": 1},
        ("B", "sequence_lens", "initial_h"),
    ),
    ("gru_reverse_clip", "GRU", {"direction": "reverse", "clip": 1.5}, ("B", "initial_h")),
    ("lstm_defaults", "LSTM", {}, ("B",)),
    (
        "lstm_peepholes_bidirectional_lengths_initial",
        "LSTM",
        {"direction": "bidirectional"},
        ("B", "sequence_lens", "initial_h", "initial_c", "P"),
    ),
    ("lstm_reverse_batch_first", "LSTM", {"direction": "reverse", "layout": 1}, ("B", "initial_h", "initial_c")),
    (
        "lstm_scaled_tanh",
        "LSTM",
        {"activations": ["Sigmoid", "ScaledTanh", "Tanh"], "activation_alpha": [0.8], "activation_beta": [1.3]},
        ("B",),
    ),
]
IDS = [case[0] for case in CASES]


def _arrays(op_type, attrs, given, seed=0):
    rng = np.random.default_rng(seed)
    directions = 2 if attrs.get("direction") == "bidirectional" else 1
    gates = GATES[op_type]
    batch_first = attrs.get("layout", 0) == 1
    state = (BATCH, directions, HIDDEN) if batch_first else (directions, BATCH, HIDDEN)
    shapes = {
        "X": (BATCH, STEPS, INPUT) if batch_first else (STEPS, BATCH, INPUT),
        "W": (directions, gates * HIDDEN, INPUT),
        "R": (directions, gates * HIDDEN, HIDDEN),
        "B": (directions, 2 * gates * HIDDEN),
        "initial_h": state,
        "initial_c": state,
        "P": (directions, 3 * HIDDEN),
    }
    arrays = {}
    for name in NAMES:
        if name in ("X", "W", "R") or name in given:
            if name == "sequence_lens":
                arrays[name] = np.array([STEPS, 1], dtype=np.int32)  # one full, one short
            else:
                arrays[name] = rng.uniform(-1, 1, shapes[name])
    return arrays


def _full_attrs(op_type, attrs):
    return {"hidden_size": HIDDEN, **attrs}


def _node_outputs(op_type, attrs, names, tensors):
    by_name = dict(zip(names, tensors))
    inputs = [by_name.get(name) for name in NAMES[: 8 if op_type == "LSTM" else 6]]
    while inputs[-1] is None:
        inputs.pop()
    count = 3 if op_type == "LSTM" else 2
    return apply_op(op_type, tuple(inputs), _full_attrs(op_type, attrs), num_outputs=count)


def _onnxruntime(op_type, attrs, arrays):
    if attrs.get("layout", 0) == 1:
        # onnxruntime has no batch-first kernels: the same problem with the batch and sequence
        # axes swapped back, and the outputs swapped again.
        swapped = {n: (a.swapaxes(0, 1) if n in ("X", "initial_h", "initial_c") else a) for n, a in arrays.items()}
        results = _onnxruntime(op_type, {k: v for k, v in attrs.items() if k != "layout"}, swapped)
        return [results[0].transpose(2, 0, 1, 3)] + [r.swapaxes(0, 1) for r in results[1:]]
    names = [name for name in NAMES if name in arrays]
    inputs = [name if name in arrays else "" for name in NAMES[: 8 if op_type == "LSTM" else 6]]
    while inputs[-1] == "":
        inputs.pop()
    outputs = ["Y", "Y_h", "Y_c"][: 3 if op_type == "LSTM" else 2]
    node = helper.make_node(op_type, inputs, outputs, **_full_attrs(op_type, attrs))
    graph = helper.make_graph(
        [node],
        "recurrent",
        [
            helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else TensorProto.FLOAT, None)
            for n in names
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: a if n == "sequence_lens" else a.astype(np.float32) for n, a in arrays.items()}
    return session.run(None, feeds)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_kernels_forward_matches_onnxruntime(case):
    _, op_type, attrs, given = case
    arrays = _arrays(op_type, attrs, given)
    expected = _onnxruntime(op_type, attrs, arrays)
    names = list(arrays)
    with onnxnn.set_executor("kernels"):
        tensors = [onnxnn.tensor(a if n == "sequence_lens" else a.astype(np.float32)) for n, a in arrays.items()]
        results = [t.numpy() for t in _node_outputs(op_type, attrs, names, tensors)]
    # Each step: a gate's dot product of INPUT + HIDDEN terms plus two biases and a peephole (all
    # |.| <= 1, states <= 1 in magnitude), then a few rounded elementwise operations and
    # transcendentals; the two implementations' errors compound at most once per step.
    per_step = gamma(INPUT + HIDDEN + 3, np.float32) * (INPUT + HIDDEN + 3) + 16 * np.finfo(np.float32).eps
    bound = 2 * STEPS * per_step * 4
    for result, wanted in zip(results, expected):
        assert result.shape == wanted.shape and result.dtype == np.float32
        np.testing.assert_allclose(result, wanted, rtol=0, atol=bound)


def _concatenated(op_type, attrs, names):
    def function(*tensors):
        outputs = _node_outputs(op_type, attrs, names, tensors)
        return onnxnn.cat([output.reshape(-1) for output in outputs])

    return function


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_match_finite_differences_on_the_kernels(case):
    _, op_type, attrs, given = case
    arrays = _arrays(op_type, attrs, given, seed=1)
    with onnxnn.set_executor("kernels"):
        check_gradients(_concatenated(op_type, attrs, list(arrays)), list(arrays.values()))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_on_onnxruntime_match_the_checked_float64_gradients(case):
    # onnxruntime's RNN/LSTM/GRU kernels take float32 only (and layout 0 only), so finite
    # differences in float64 cannot run there: its float32 gradients must match the float64 ones
    # the test above checks against finite differences, within float32 rounding.
    _, op_type, attrs, given = case
    if attrs.get("layout", 0) == 1:
        pytest.skip("onnxruntime has no batch-first (layout=1) recurrent kernels")
    arrays = _arrays(op_type, attrs, given, seed=2)
    names = list(arrays)
    function = _concatenated(op_type, attrs, names)
    cotangent = np.random.default_rng(3).standard_normal(
        sum(
            int(np.prod(o.shape))
            for o in _node_outputs(op_type, attrs, names, [onnxnn.tensor(a) for a in arrays.values()])
        )
    )
    gradients = {}
    for executor, dtype in (("kernels", onnxnn.float64), ("onnxruntime", onnxnn.float32)):
        with onnxnn.set_executor(executor):
            tensors = [
                onnxnn.tensor(a) if n == "sequence_lens" else onnxnn.tensor(a, dtype=dtype, requires_grad=True)
                for n, a in arrays.items()
            ]
            function(*tensors).backward(onnxnn.tensor(cotangent, dtype=dtype))
            gradients[executor] = [t.grad.numpy() for n, t in zip(names, tensors) if n != "sequence_lens"]
    # Backward through STEPS steps of products of INPUT + HIDDEN + 3 terms (all inputs in [-1, 1],
    # gates and states bounded by 1), each step's error at most a few gamma's, times the cotangent
    # entries summed into each gradient (at most STEPS * 2 * BATCH * HIDDEN * 3 of them, |.| < 5).
    terms = INPUT + HIDDEN + 3
    bound = 4 * STEPS * gamma(terms, np.float32) * terms * 5 * STEPS * 2 * BATCH * HIDDEN * 3
    for name, single, double in zip(
        [n for n in names if n != "sequence_lens"], gradients["onnxruntime"], gradients["kernels"]
    ):
        assert single.dtype == np.float32
        np.testing.assert_allclose(single, double, rtol=0, atol=bound, err_msg=name)


def test_sequence_lengths_take_no_gradient_and_omitted_outputs_still_differentiate():
    arrays = _arrays("LSTM", {}, ("B", "sequence_lens"))
    x = onnxnn.tensor(arrays["X"], requires_grad=True)
    w, r, b = (onnxnn.tensor(arrays[n]) for n in ("W", "R", "B"))
    lengths = onnxnn.tensor(arrays["sequence_lens"])
    _, y_h, _ = apply_op("LSTM", (x, w, r, b, lengths), {"hidden_size": HIDDEN}, num_outputs=3)
    y_h.sum().backward()
    # Entry 1 has length 1: steps past it never reach its final state.
    assert np.all(x.grad.numpy()[1:, 1] == 0)
    assert np.all(np.abs(x.grad.numpy()[0]) > 0)


def _exported_lstm_model(steps, batch, features, hidden, seed=0) -> "onnx.ModelProto":
    """The graph ``torch.onnx.export`` writes for ``nn.LSTM`` + ``nn.Linear`` on the last state.

    PyTorch's gate blocks (input, forget, cell, output) are reordered to ONNX's (input, output,
    forget, cell) in W, R and the two bias halves of B; the zero initial states are constants;
    a Squeeze drops the single direction axis of Y_h.
    """
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(hidden)
    i, f, g, o = rng.uniform(-bound, bound, (4, hidden, features)).astype(np.float32)
    ri, rf, rg, ro = rng.uniform(-bound, bound, (4, hidden, hidden)).astype(np.float32)
    bias_ih = rng.uniform(-bound, bound, (4, hidden)).astype(np.float32)
    bias_hh = rng.uniform(-bound, bound, (4, hidden)).astype(np.float32)
    order = [0, 3, 1, 2]  # ifco -> iofc
    w = np.concatenate([i, o, f, g])[None]
    r = np.concatenate([ri, ro, rf, rg])[None]
    b = np.concatenate([bias_ih[order].reshape(-1), bias_hh[order].reshape(-1)])[None]
    zeros = np.zeros((1, batch, hidden), np.float32)
    initializers = [
        numpy_helper.from_array(w, "onnx::LSTM_W"),
        numpy_helper.from_array(r, "onnx::LSTM_R"),
        numpy_helper.from_array(b, "onnx::LSTM_B"),
        numpy_helper.from_array(rng.uniform(-bound, bound, (hidden, 1)).astype(np.float32), "fc.weight_t"),
        numpy_helper.from_array(np.zeros(1, np.float32), "fc.bias"),
        numpy_helper.from_array(np.array([0], np.int64), "axes0"),
    ]
    nodes = [
        helper.make_node("Constant", [], ["h0"], value=numpy_helper.from_array(zeros)),
        helper.make_node("Constant", [], ["c0"], value=numpy_helper.from_array(zeros)),
        helper.make_node(
            "LSTM",
            ["input", "onnx::LSTM_W", "onnx::LSTM_R", "onnx::LSTM_B", "", "h0", "c0"],
            ["Y", "Y_h", "Y_c"],
            hidden_size=hidden,
            name="/lstm/LSTM",
        ),
        helper.make_node("Squeeze", ["Y_h", "axes0"], ["last"]),
        helper.make_node("MatMul", ["last", "fc.weight_t"], ["projected"]),
        helper.make_node("Add", ["projected", "fc.bias"], ["output"]),
    ]
    graph = helper.make_graph(
        nodes,
        "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [steps, batch, features])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, 1])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_an_imported_pytorch_style_lstm_trains_with_falling_loss(executor):
    steps, batch, features, hidden = 5, 8, 2, 6
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (steps, batch, features)).astype(np.float32)
    target = x[:, :, 0].sum(0, keepdims=True).T * 0.5  # a running sum the recurrence must carry
    with onnxnn.set_executor(executor):
        model = from_onnx(_exported_lstm_model(steps, batch, features, hidden))
        names = {name for name, _ in model.named_parameters()}
        assert {"onnx::LSTM_W", "onnx::LSTM_R", "onnx::LSTM_B"} <= {n.replace("_", ":", 0) for n in names} or len(
            names
        ) >= 5, names
        optimizer = onnxnn.optim.Adam(model.parameters(), lr=0.05)
        inputs, wanted = onnxnn.tensor(x), onnxnn.tensor(target)
        losses = []
        for _ in range(40):
            optimizer.zero_grad()
            loss = ((model(inputs) - wanted) ** 2).mean()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.item()))
    assert losses[-1] < 0.2 * losses[0], losses
    recurrent = dict(model.named_parameters())["onnx__LSTM_R"]
    assert np.abs(recurrent.grad.numpy()).sum() > 0  # the gradient reached through time


def test_second_derivatives_match_finite_differences_of_the_gradient():
    # With create_graph the rule's recomputation hangs off the inputs' history: the gradient is
    # itself differentiable (float64, so on the kernels: onnxruntime's LSTM takes float32 only).
    arrays = _arrays("LSTM", {}, ("B",), seed=4)
    rng = np.random.default_rng(5)
    v, u = rng.standard_normal(arrays["X"].shape), rng.standard_normal(arrays["X"].shape)

    def gradient(x_array, create_graph):
        x = onnxnn.tensor(x_array, dtype=onnxnn.float64, requires_grad=True)
        w, r, b = (onnxnn.tensor(arrays[n], requires_grad=True) for n in ("W", "R", "B"))
        _, y_h, _ = apply_op("LSTM", (x, w, r, b), {"hidden_size": HIDDEN}, num_outputs=3)
        (g,) = onnxnn.autograd.grad((y_h**2).sum(), x, create_graph=create_graph)
        return x, g

    eps = 1e-6
    with onnxnn.set_executor("kernels"):
        x, g = gradient(arrays["X"], True)
        (second,) = onnxnn.autograd.grad((g * onnxnn.tensor(v)).sum(), x)
        analytic = float((second.numpy() * u).sum())
        numeric = float(
            (
                (
                    (
                        gradient(arrays["X"] + eps * u, False)[1].numpy()
                        - gradient(arrays["X"] - eps * u, False)[1].numpy()
                    )
                    / (2 * eps)
                )
                * v
            ).sum()
        )
    # Central differences in float64 at eps 1e-6 (see gradcheck.py): ~1e-9 relative.
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric))
