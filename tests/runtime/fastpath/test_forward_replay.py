"""Forward replay: inference through onnxnn's own modules records each structure's nodes once.

A replayed call must leave exactly the graph that running the forward would (the same plan key,
so the same session and bitwise the same results), and must never stand in for a forward that
would have done something else: user code (own classes, hooks), another mode (training, recorded
gradients: a structure of its own, test_training_forward_replay.py), changed modules or state,
and forwards that read data or change their arguments (a forward writing its own state replays
with the same writes: test_state_write_replay.py).
"""

from __future__ import annotations

import copy
import weakref

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.export import to_onnx
from onnxnn.import_ import from_onnx
from onnxnn.ir.plan import plan
from onnxnn.runtime.fastpath import forward_replay

from .forwards import EXPECTED, Misbehaving


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


def _counts() -> dict:
    return forward_replay.replay_info()


def _key(tensors) -> tuple:
    """The structural key of the pending graph behind ``tensors`` (what picks the session)."""
    return plan([tensor._value for tensor in tensors], include_shared=False).key


def _flat(result) -> list:
    if result is None:
        return []
    if isinstance(result, onnxnn.Tensor):
        return [result]
    items = result.values() if isinstance(result, dict) else result
    return [tensor for item in items for tensor in _flat(item)]


def _mlp():
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4))


def _cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1, groups=2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 5),
    )


class _NamedOutputs(nn.Module):
    """Stands for one of onnxnn's layers returning its outputs by name (its module name says onnxnn)."""

    __module__ = "onnxnn.nn.modules.test_only"

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(12, 6)

    def forward(self, x):
        hidden = self.linear(x)
        return {"hidden": hidden, "pair": (hidden.relu(), None)}


def _imported():
    onnxnn.manual_seed(1)
    source = _cnn().eval()
    return from_onnx(to_onnx(source, onnxnn.randn(2, 3, 8, 8)))


# (name, module factory, arguments factory): built-in layers, containers, kwargs, tuple outputs with None,
# nested tuple outputs, and an imported graph.
MODELS = [
    ("mlp", _mlp, lambda: (onnxnn.randn(6, 12),), {}),
    ("cnn", _cnn, lambda: (onnxnn.randn(2, 3, 8, 8),), {}),
    (
        "transformer layer",
        lambda: nn.TransformerEncoderLayer(16, 4, 32, batch_first=True),
        lambda: (onnxnn.randn(2, 5, 16),),
        {},
    ),
    (
        "attention with kwargs",
        lambda: nn.MultiheadAttention(16, 4, batch_first=True),
        lambda: (onnxnn.randn(2, 5, 16),) * 3,
        {"need_weights": False},
    ),
    ("lstm", lambda: nn.LSTM(6, 8, num_layers=2, batch_first=True), lambda: (onnxnn.randn(3, 4, 6),), {}),
    ("imported", _imported, lambda: (onnxnn.randn(2, 3, 8, 8),), {}),
    ("named outputs", _NamedOutputs, lambda: (onnxnn.randn(4, 12),), {}),
]


@pytest.mark.parametrize("name, build, arguments, kwargs", MODELS, ids=[case[0] for case in MODELS])
def test_a_replayed_call_records_the_same_graph_and_gives_bitwise_the_same_results(name, build, arguments, kwargs):
    onnxnn.manual_seed(0)
    module = build().eval()
    calls = [arguments() for _ in range(4)]
    with onnxnn.no_grad():
        replayed = [module(*args, **kwargs) for args in calls]  # run, traced, replayed twice
        assert _counts() == {"traced": 1, "replayed": 2}
        with onnxnn.set_fast_path(False):
            recorded = [module(*args, **kwargs) for args in calls]
        assert _counts() == {"traced": 1, "replayed": 2}
    for fast, plain in zip(replayed, recorded):
        assert type(fast) is type(plain)
        if isinstance(fast, dict):
            assert list(fast) == list(plain)
        fast_tensors, plain_tensors = _flat(fast), _flat(plain)
        assert len(fast_tensors) == len(plain_tensors)
        assert _key(fast_tensors) == _key(plain_tensors)
        for a, b in zip(fast_tensors, plain_tensors):
            assert a.numpy().tobytes() == b.numpy().tobytes()


def test_each_input_shape_and_non_tensor_argument_is_its_own_structure():
    module = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    with onnxnn.no_grad():
        for length in (3, 5, 3, 5, 3, 5):
            x = onnxnn.randn(2, length, 8)
            for need_weights in (True, False):
                output, weights = module(x, x, x, need_weights=need_weights)
                with onnxnn.set_fast_path(False):
                    expected, expected_weights = module(x, x, x, need_weights=need_weights)
                np.testing.assert_array_equal(output.numpy(), expected.numpy())
                assert (weights is None) == (expected_weights is None) == (not need_weights)
    assert _counts() == {"traced": 4, "replayed": 4}


@pytest.mark.parametrize(
    "traced, called",
    [
        ("qqq", "qkv"),  # self-attention traced, cross-attention called
        ("qmm", "qkv"),  # a shared key and value traced
        ("qkv", "qqq"),
    ],
)
def test_which_arguments_are_the_same_tensor_is_part_of_the_structure(traced, called):
    # MultiheadAttention takes a shortcut when query is key is value; a replay of a trace made with
    # one tensor in several places must not stand in for a call with distinct ones, or back.
    module = nn.MultiheadAttention(8, 2).eval()
    tensors = {name: onnxnn.randn(4, 3, 8) for name in "qkvm"}
    with onnxnn.no_grad():
        for _ in range(3):
            module(*[tensors[name] for name in traced])
        output, weights = module(*[tensors[name] for name in called])
        with onnxnn.set_fast_path(False):
            expected, expected_weights = module(*[tensors[name] for name in called])
    np.testing.assert_array_equal(output.numpy(), expected.numpy())
    np.testing.assert_array_equal(weights.numpy(), expected_weights.numpy())


def test_a_replay_reads_the_current_parameters():
    linear = nn.Linear(3, 2).eval()
    x = onnxnn.randn(4, 3)
    with onnxnn.no_grad():
        linear(x), linear(x), linear(x)
        linear.weight.add_(1.0)  # in place: the module itself is unchanged
        linear.bias.data = onnxnn.zeros(2)
        result = linear(x).numpy()
    weight = linear.weight.detach().numpy()
    np.testing.assert_allclose(result, x.numpy() @ weight.T, rtol=1e-6, atol=1e-6)
    assert _counts()["replayed"] == 2


def test_state_of_another_shape_is_traced_again():
    linear = nn.Linear(3, 2).eval()
    x = onnxnn.randn(4, 3)
    with onnxnn.no_grad():
        linear(x), linear(x)
        linear.weight.data = onnxnn.randn(5, 3)
        linear.bias.data = onnxnn.randn(5)
        result = linear(x)
    assert result.shape == (4, 5)
    expected = x.numpy() @ linear.weight.detach().numpy().T + linear.bias.detach().numpy()
    np.testing.assert_allclose(result.numpy(), expected, rtol=1e-6, atol=1e-6)
    assert _counts()["traced"] == 2


def test_a_changed_module_is_traced_again():
    module = nn.Sequential(nn.Linear(3, 3), nn.LeakyReLU(0.1)).eval()
    x = onnxnn.randn(8, 3) * 10
    with onnxnn.no_grad():
        module(x), module(x), module(x)
        module[1].negative_slope = 0.5
        results = [module(x).numpy() for _ in range(3)]
        module[1] = nn.Tanh()  # a submodule replaced
        replaced = [module(x).numpy() for _ in range(3)]
    hidden = x.numpy() @ module[0].weight.detach().numpy().T + module[0].bias.detach().numpy()
    for result in results:
        np.testing.assert_allclose(result, np.where(hidden > 0, hidden, 0.5 * hidden), rtol=1e-6, atol=1e-5)
    for result in replaced:
        np.testing.assert_allclose(result, np.tanh(hidden), rtol=1e-6, atol=1e-6)
    # The Sequential at first, after the change and after the replacement (a Tanh in training mode
    # replays too: its forward is the same in both modes); the Linear and the LeakyReLU alone at their
    # second plain calls (the first after the change, inside the Sequential's untraced run).
    assert _counts()["traced"] == 5


def test_hooks_run_on_every_call_even_after_a_trace():
    module = nn.Sequential(nn.Linear(3, 3), nn.ReLU()).eval()
    x = onnxnn.randn(2, 3)
    seen = []
    with onnxnn.no_grad():
        module(x), module(x), module(x)
        handle = module[1].register_forward_hook(lambda _module, _inputs, output: seen.append(output.shape))
        module(x), module(x), module(x)
        handle.remove()
        module(x)
    assert seen == [(2, 3)] * 3
    # The model once before the hook and once after its removal; while hooked, its Linear alone
    # twice (its first call came inside the model's first, untraced run).
    assert _counts()["replayed"] == 4


@pytest.mark.parametrize(
    "condition",
    ["training mode", "gradients enabled", "autocast", "another default dtype"],
)
def test_no_replay_where_the_forward_could_record_otherwise(condition):
    module = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.BatchNorm1d(4)).eval()
    x = onnxnn.randn(8, 4)
    with onnxnn.no_grad():
        module(x), module(x)
    before = _counts()
    if condition == "training mode":
        module.train()
        with onnxnn.no_grad():
            module(x)
    elif condition == "gradients enabled":
        assert module(x).requires_grad
    elif condition == "autocast":
        with onnxnn.no_grad(), onnxnn.autocast("cpu", dtype=onnxnn.bfloat16):
            assert module(x).dtype == onnxnn.bfloat16
    else:
        onnxnn.set_default_dtype(onnxnn.float64)
        try:
            with onnxnn.no_grad():
                module(x)
        finally:
            onnxnn.set_default_dtype(onnxnn.float32)
    after = _counts()
    assert after["replayed"] == before["replayed"]


def test_a_user_class_runs_its_forward_every_call_and_its_layers_replay():
    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
            self.calls = 0

        def forward(self, x):
            self.calls += 1  # user code: a replay would skip it
            return self.body(x) * 2

    module = Counting().eval()
    x = onnxnn.randn(2, 3)
    with onnxnn.no_grad():
        results = [module(x).numpy() for _ in range(3)]
    assert module.calls == 3
    assert _counts()["replayed"] == 1  # the Sequential inside it, at its third call
    expected = (
        np.maximum(x.numpy() @ module.body[0].weight.detach().numpy().T + module.body[0].bias.detach().numpy(), 0) * 2
    )
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=1e-6, atol=1e-6)


def test_a_user_activation_function_keeps_a_layer_from_replaying():
    calls = []

    def activation(x):
        calls.append(1)
        return x.relu()

    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=activation, batch_first=True).eval()
    x = onnxnn.randn(2, 3, 8)
    with onnxnn.no_grad():
        results = [layer(x).numpy() for _ in range(3)]
        with onnxnn.set_fast_path(False):
            expected = layer(x).numpy()
    assert len(calls) == 4
    for result in results:
        np.testing.assert_array_equal(result, expected)


# A class that claims to be onnxnn's (its module name) stands for a built-in layer that does what
# a replay cannot repeat; each must keep running its forward.
class _Misbehaving(Misbehaving):
    __module__ = "onnxnn.nn.modules.test_only"


@pytest.mark.parametrize(
    "behaviour, expected",
    [
        (behaviour, EXPECTED[behaviour])
        for behaviour in (
            "reads data",
            "changes its argument",
            "returns its argument",
            "changes itself",
            "changes a list it keeps",
            "changes a dict it keeps",
        )
    ],
)
def test_a_forward_a_replay_could_not_repeat_is_never_replayed(behaviour, expected):
    module = _Misbehaving(behaviour).eval()
    with onnxnn.no_grad():
        for call, sign in enumerate((1, -1, 1, -1)):
            data = np.full((2, 2), sign, np.float32)
            x = onnxnn.tensor(data)
            result = module(x)
            np.testing.assert_array_equal(result.numpy(), expected(data, call))
            if behaviour == "changes its argument":
                np.testing.assert_array_equal(x.numpy(), data * 2)
            if behaviour == "returns its argument":
                assert result is x
    assert _counts()["replayed"] == 0


def test_a_forward_that_draws_random_numbers_draws_at_every_call():
    module = _Misbehaving("draws random numbers").eval()
    with onnxnn.no_grad():
        draws = [module(onnxnn.zeros(2, 2)).numpy() for _ in range(4)]
    for first, second in zip(draws, draws[1:]):
        assert not np.array_equal(first, second)
    assert _counts()["replayed"] == 0


def test_export_after_replayed_calls_still_traces_the_graph():
    module = _mlp().eval()
    x = onnxnn.randn(3, 12)
    with onnxnn.no_grad():
        module(x), module(x)
    proto = to_onnx(module, x)
    other = np.random.default_rng(0).standard_normal((3, 12)).astype(np.float32)
    import onnxruntime

    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {session.get_inputs()[0].name: other})
    with onnxnn.no_grad():
        expected = module(onnxnn.from_numpy(other)).numpy()
    np.testing.assert_allclose(exported, expected, rtol=1e-5, atol=1e-6)


def test_replaced_weights_are_not_kept_alive_by_a_template():
    linear = nn.Linear(64, 64).eval()
    x = onnxnn.randn(2, 64)
    with onnxnn.no_grad():
        linear(x), linear(x), linear(x).numpy()
        old = weakref.ref(linear.weight._value)
        linear.weight.data = onnxnn.randn(64, 64)
        linear(x).numpy()
    assert old() is None


def test_a_dropped_module_leaves_nothing_behind():
    from onnxnn.nn.modules import _forward_replay

    module = _mlp().eval()
    with onnxnn.no_grad():
        module(onnxnn.randn(2, 12)), module(onnxnn.randn(2, 12))
    reference = weakref.ref(module)
    assert id(module) in _forward_replay._trees
    key = id(module)
    del module
    assert reference() is None
    assert key not in _forward_replay._trees


def test_a_replay_keeps_the_opset_of_nodes_imported_at_a_newer_one():
    # BitShift of int32 exists from opset 28 on: its node is a VersionedNode, and so is its replay's.
    from onnx import TensorProto, helper

    from onnxnn.ir.graph import VersionedNode

    nodes = [
        helper.make_node("BitShift", ["a", "b"], ["shifted"], direction="LEFT"),
        helper.make_node("Add", ["shifted", "a"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT32, [4]) for name in "ab"]
    outputs = [helper.make_tensor_value_info("y", TensorProto.INT32, [4])]
    graph = helper.make_graph(nodes, "newer_opset", inputs, outputs)
    module = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28)], ir_version=10)).eval()
    a, b = np.array([1, -2, 3, 70000], np.int32), np.array([0, 3, 30, 4], np.int32)
    with onnxnn.set_executor("kernels"), onnxnn.no_grad():
        results = [module(onnxnn.tensor(a), onnxnn.tensor(b)) for _ in range(3)]
    assert _counts() == {"traced": 1, "replayed": 1}
    shift = results[2]._value.node.inputs[0].node
    assert type(shift) is VersionedNode and shift.opset == 28
    expected = (a.astype(np.int64) << b).astype(np.int32) + a  # wraps as int32 arithmetic does
    for result in results:
        np.testing.assert_array_equal(result.numpy(), expected)


# ---------------------------------------------------------------- state that shared one value when traced


def _tanh_mlp(tie: str):
    """``Linear -> Tanh -> Linear`` whose two layers hold the very same values, tied by ``tie``."""
    onnxnn.manual_seed(0)
    first = nn.Linear(8, 8)
    if tie == "copy.deepcopy":  # as TransformerEncoder copies its layer
        return nn.Sequential(first, nn.Tanh(), copy.deepcopy(first)).eval()
    model = nn.Sequential(first, nn.Tanh(), nn.Linear(8, 8)).eval()
    with onnxnn.no_grad():
        if tie == "copy_":
            model[2].weight.copy_(first.weight)
            model[2].bias.copy_(first.bias)
        else:
            model[2].load_state_dict(first.state_dict())
    return model


def _sgd_step_on_the_second(model):
    optimizer = onnxnn.optim.SGD(model[2].parameters(), lr=0.5)
    for parameter in model[2].parameters():
        parameter.grad = onnxnn.ones(*parameter.shape)
    optimizer.step()


# An in-place change of one layer rebinds its tensors alone: the two no longer share their values.
IN_PLACE_CHANGES = {
    "add_": lambda model: model[2].weight.add_(0.5),
    "data.mul_": lambda model: model[0].weight.data.mul_(-2.0),
    "copy_": lambda model: model[2].bias.copy_(onnxnn.ones(8)),
    "load_state_dict": lambda model: model[0].load_state_dict({"weight": onnxnn.eye(8), "bias": onnxnn.zeros(8)}),
    "an optimizer step": _sgd_step_on_the_second,
}


@pytest.mark.parametrize("change", list(IN_PLACE_CHANGES))
@pytest.mark.parametrize("tie", ["copy.deepcopy", "copy_", "load_state_dict"])
def test_layers_that_shared_values_when_traced_are_read_apart_once_changed(tie, change):
    model = _tanh_mlp(tie)
    assert model[0].weight._value is model[2].weight._value  # what the trace sees: one value, read twice
    x = onnxnn.randn(5, 8)
    with onnxnn.no_grad():
        for _ in range(3):  # run, traced, replayed
            model(x).numpy()
        IN_PLACE_CHANGES[change](model)
        results = [model(x).numpy() for _ in range(3)]
    weights = [tensor.detach().numpy() for tensor in model.parameters()]
    hidden = np.tanh(x.numpy() @ weights[0].T + weights[1])
    expected = hidden @ weights[2].T + weights[3]
    for result in results:  # float32 sums of 8 terms of magnitude < 4: within 8 * 4 * eps
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    assert _counts()["replayed"] >= 2  # traced again after the change, then replayed


@pytest.mark.parametrize(
    "calls",
    [
        ("weight", "weight", "x", "x"),  # traced with the module's own weight as its argument
        ("x", "x", "weight", "weight"),  # traced apart: a replay reads the argument and the weight
        ("weight", "weight", "x", "weight", "x"),  # traced again once, then replayed for either
    ],
)
def test_an_argument_that_is_the_modules_own_weight_stands_for_neither(calls):
    linear = nn.Linear(4, 4).eval()
    x = onnxnn.randn(4, 4)
    weight, bias = linear.weight.detach().numpy(), linear.bias.detach().numpy()
    with onnxnn.no_grad():
        for name in calls:
            argument = linear.weight if name == "weight" else x
            expected = argument.detach().numpy() @ weight.T + bias
            np.testing.assert_allclose(linear(argument).numpy(), expected, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- lists a module keeps, changed in place


def _nearest(x: np.ndarray, size: tuple) -> np.ndarray:
    rows = np.arange(size[0]) * x.shape[2] // size[0]
    columns = np.arange(size[1]) * x.shape[3] // size[1]
    return x[:, :, rows][:, :, :, columns]


# (name, module, input shape, the in-place change, the attribute changed, the expected result after it)
# PyTorch keeps these lists as given (MaxPool2d's stride is its kernel_size list when not given).
LIST_ATTRIBUTES = [
    (
        "Upsample size",
        lambda: nn.Upsample(size=[8, 8]),
        (1, 2, 4, 4),
        lambda module: module.size.__setitem__(0, 16),
        "size",
        lambda x: _nearest(x, (16, 8)),
    ),
    (
        "MaxPool2d kernel_size",
        lambda: nn.MaxPool2d([2, 2]),
        (1, 1, 8, 8),
        lambda module: module.kernel_size.__setitem__(1, 4),
        "kernel_size",
        lambda x: x.reshape(1, 1, 4, 2, 2, 4).max(axis=(3, 5)),
    ),
    (
        "AdaptiveAvgPool2d output_size",
        lambda: nn.AdaptiveAvgPool2d([2, 2]),
        (1, 1, 4, 4),
        lambda module: module.output_size.__setitem__(0, 1),
        "output_size",
        lambda x: x.reshape(1, 1, 1, 4, 2, 2).mean(axis=(3, 5)),
    ),
    (
        "Unflatten unflattened_size",
        lambda: nn.Unflatten(1, [2, 6]),
        (3, 12),
        lambda module: module.unflattened_size.__setitem__(slice(None), [3, 4]),
        "unflattened_size",
        lambda x: x.reshape(3, 3, 4),
    ),
]


@pytest.mark.parametrize(
    "name, build, shape, change, attribute, expected", LIST_ATTRIBUTES, ids=[case[0] for case in LIST_ATTRIBUTES]
)
def test_a_list_attribute_changed_in_place_is_read_as_it_is_now(name, build, shape, change, attribute, expected):
    module = build().eval()
    x = onnxnn.randn(*shape)
    with onnxnn.no_grad():
        for _ in range(3):
            module(x).numpy()
        change(module)
        results = [module(x).numpy() for _ in range(3)]
    assert type(getattr(module, attribute)) is list  # kept as given, as PyTorch keeps it
    for result in results:  # nearest picks, maxima and reshapes are exact; a mean of 4 rounds once per add
        np.testing.assert_allclose(result, expected(x.numpy()), rtol=1e-6, atol=1e-6)
    assert _counts()["replayed"] >= 2


# ---------------------------------------------------------------- bitwise the same with the fast path off


def test_transformer_inference_gives_bitwise_the_same_results_with_the_fast_path_off():
    # Past the first runs, an inference specialization embeds the weights: a replay's constants (the
    # attention's scale) must be fed to it as the plain calls' new ones are, not embedded.
    onnxnn.manual_seed(0)
    module = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval()
    x = onnxnn.randn(8, 16, 64)
    runs = {}
    for fast in (True, False):
        onnxnn.clear_caches()
        with onnxnn.set_fast_path(fast), onnxnn.no_grad():
            runs[fast] = [module(x).numpy() for _ in range(6)]
    assert _counts()["replayed"] == 0  # cleared with the caches after the fast path's run
    for fast, plain in zip(runs[True], runs[False]):
        assert fast.tobytes() == plain.tobytes()
