"""Compiled calls: a compiled module's whole call is traced once per structure and run as one graph.

A compiled call must give bitwise what the plain call gives (the same graph, so the same runner),
be computed when it returns, and never stand in for a call that would do something else: one
that reads data, draws random numbers, changes its arguments, state or modules, reads a tensor
from outside its arguments and modules, trains, records gradients or runs hooks.
"""

from __future__ import annotations

import re

import copy

import numpy as np
import pytest

import onnxnn
import onnxnn.nn as nn
from onnxnn.nn.modules import _forward_replay
from onnxnn.runtime.fastpath import compiled_calls
from onnxnn.runtime.realization import realize

from .forwards import EXPECTED, GLOBAL_OFFSET, Misbehaving


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


def _flat(result) -> list:
    if result is None:
        return []
    if isinstance(result, onnxnn.Tensor):
        return [result]
    items = result.values() if isinstance(result, dict) else result
    return [tensor for item in items for tensor in _flat(item)]


def _computed_together(result) -> list:
    """The arrays of a plain call's outputs, computed by one realization (as a compiled call computes them)."""
    outputs = _flat(result)
    realize([tensor._value for tensor in outputs])
    return [tensor.numpy() for tensor in outputs]


class _Residual(nn.Module):
    """A user's block: Python between onnxnn's layers, which only a compiled call skips."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels)

    def forward(self, x):
        return onnxnn.relu(self.norm(self.conv(x)) + x)


class _TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(96, 96)
        self.left, self.right = nn.Linear(96, 80), nn.Linear(96, 3)

    def forward(self, x, scale: float = 1.0, *, extra=None):
        hidden = onnxnn.tanh(self.body(x)) * scale
        if extra is not None:
            hidden = hidden + extra
        return self.left(hidden), (self.right(hidden), None)


class _Named(nn.Module):
    """Returns its outputs by name, as Hugging Face's models do."""

    def __init__(self):
        super().__init__()
        self.body, self.head = nn.Linear(96, 96), nn.Linear(96, 7)

    def forward(self, x):
        hidden = onnxnn.relu(self.body(x))
        return {"logits": self.head(hidden), "hidden": (hidden, None)}


class _InPlaceResidual(_Residual):
    """torchvision's BasicBlock habit: in-place activations and sums on the block's own intermediates."""

    def __init__(self, channels: int):
        super().__init__(channels)
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.activation(self.norm(self.conv(x)))
        out += x
        return self.activation(out)


class _TokensAndPlaces(nn.Module):
    """Token and position embeddings, the positions made by the forward (GPT-2) or sliced from a
    buffer (BERT): pending indices, which the embedding checks on every call."""

    def __init__(self, from_buffer: bool):
        super().__init__()
        self.from_buffer = from_buffer
        self.tokens, self.places = nn.Embedding(50, 96), nn.Embedding(16, 96)
        self.register_buffer("position_ids", onnxnn.tensor(np.arange(16)[None, :]))

    def forward(self, ids):
        length = ids.shape[1]
        places = self.position_ids[:, :length] if self.from_buffer else onnxnn.arange(length)[None, :]
        return self.tokens(ids) + self.places(places)


def _residual_network():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), _Residual(16), _Residual(16), nn.AdaptiveAvgPool2d(1))


# (name, module factory, arguments factory, keyword arguments): user blocks around onnxnn's layers
# (large enough for an inference specialization), onnxnn's own layers, nested outputs with None
# and keyword arguments, small weights that are never specialized.
MODELS = [
    ("user blocks", _residual_network, lambda: (onnxnn.randn(2, 3, 12, 12),), {}),
    (
        "in-place blocks",
        lambda: nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), _InPlaceResidual(16), nn.AdaptiveAvgPool2d(1)),
        lambda: (onnxnn.randn(2, 3, 12, 12),),
        {},
    ),
    (
        "mlp",
        lambda: nn.Sequential(nn.Linear(96, 128), nn.ReLU(), nn.Linear(128, 10)),
        lambda: (onnxnn.randn(4, 96),),
        {},
    ),
    ("nested outputs", _TwoHeads, lambda: (onnxnn.randn(5, 96), 0.5), {"extra": onnxnn.randn(5, 96)}),
    ("small weights", lambda: nn.Sequential(nn.Linear(6, 5), nn.Sigmoid()), lambda: (onnxnn.randn(3, 6),), {}),
    ("named outputs", _Named, lambda: (onnxnn.randn(5, 96),), {}),
    # Checks of data (the embedding's indices in range) are made again by each prepared run.
    (
        "embedding",
        lambda: nn.Sequential(nn.Embedding(50, 96), nn.Linear(96, 10)),
        lambda: (onnxnn.randint(0, 50, (4, 7)),),
        {},
    ),
    ("made positions", lambda: _TokensAndPlaces(False), lambda: (onnxnn.randint(0, 50, (4, 7)),), {}),
    ("buffer positions", lambda: _TokensAndPlaces(True), lambda: (onnxnn.randint(0, 50, (4, 7)),), {}),
    (
        "transformer layer",
        lambda: nn.TransformerEncoderLayer(32, 4, 64, batch_first=True),
        lambda: (onnxnn.randn(2, 7, 32),),
        {},
    ),
]


@pytest.mark.parametrize("name, build, arguments, kwargs", MODELS, ids=[case[0] for case in MODELS])
def test_a_compiled_call_gives_bitwise_the_plain_calls_results(name, build, arguments, kwargs):
    onnxnn.manual_seed(0)
    model = build().eval()
    inputs = [(arguments(), {key: onnxnn.randn(*value.shape) for key, value in kwargs.items()}) for _ in range(4)]
    with onnxnn.no_grad():
        for args, keywords in inputs:  # the plain calls settle their runner first (kernels, then a session)
            _computed_together(model(*args, **keywords))
        expected = [_computed_together(model(*args, **keywords)) for args, keywords in inputs]
        model.compile()
        compiled_calls.reset_counts()
        for round in range(3):
            for (args, keywords), wanted in zip(inputs, expected):
                result = model(*args, **keywords)
                outputs = _flat(result)
                if round:  # traced at its second call, computed when it returns from then on
                    assert all(tensor._value.data is not None for tensor in outputs)
                for array, wanted_array in zip(_computed_together(result), wanted, strict=True):
                    np.testing.assert_array_equal(array, wanted_array)
    counts = compiled_calls.compiled_info()
    assert counts["prepared"] >= 8, counts  # the later calls ran their prepared runs
    if name == "nested outputs":
        assert isinstance(result, tuple) and isinstance(result[1], tuple) and result[1][1] is None
    if name == "named outputs":
        assert list(result) == ["logits", "hidden"] and result["hidden"][1] is None


class _IndexedTable(nn.Module):
    """Swin's relative position bias: a table indexed by the module's own index buffer."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(onnxnn.randn(6, 96))
        self.register_buffer("index", onnxnn.tensor([[0, 5], [2, -1]]))

    def forward(self, x):
        return x + self.table[self.index].sum((0, 1))


@pytest.mark.parametrize(
    "build, call, break_it, raised",
    [
        (
            lambda: nn.Sequential(nn.Embedding(5, 96), nn.Linear(96, 3)),
            lambda model, bad: model(onnxnn.tensor([[0, 7]] if bad else [[0, 4]])),
            None,
            "index out of range in self: index 7",
        ),
        (
            _IndexedTable,
            lambda model, bad: model(onnxnn.ones(2, 96)),
            lambda model: model._orig_mod.index.__setitem__((0, 1), 9),
            "index 9 is out of bounds for dimension 0 with size 6",
        ),
        (
            lambda: _TokensAndPlaces(True),
            lambda model, bad: model(onnxnn.tensor([[1, 2, 3]])),
            lambda model: model._orig_mod.position_ids.__setitem__((0, 2), 16),
            "index out of range in self: index 16",
        ),
    ],
    ids=["embedding argument", "index buffer", "position buffer"],
)
def test_a_prepared_run_makes_the_forwards_checks_of_data(build, call, break_it, raised):
    onnxnn.manual_seed(0)
    model = onnxnn.compile(build().eval())
    with onnxnn.no_grad():
        for _ in range(6):
            call(model, False).numpy()
        assert compiled_calls.compiled_info()["prepared"] >= 2
        if break_it is not None:
            break_it(model)
            for buffer in model.buffers():
                buffer.numpy()  # computed: checked before the call runs anything
        with pytest.raises(IndexError, match=re.escape(raised)):
            call(model, True)
        with onnxnn.set_fast_path(False), pytest.raises(IndexError, match=re.escape(raised)):
            call(model, True)


def test_the_same_bits_with_the_fast_path_off():
    onnxnn.manual_seed(0)
    model = _residual_network().eval()
    x = onnxnn.randn(2, 3, 12, 12)
    model.compile()
    with onnxnn.no_grad():
        fast = [model(x).numpy() for _ in range(5)]
        with onnxnn.set_fast_path(False):
            plain = [model(x).numpy() for _ in range(5)]
    np.testing.assert_array_equal(fast[-1], plain[-1])
    assert compiled_calls.compiled_info()["prepared"] > 0


def test_each_argument_structure_is_traced_and_prepared_on_its_own():
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(96, 64), nn.ReLU()).eval()
    model.compile()
    batches = {size: onnxnn.randn(size, 96) for size in (2, 5)}
    with onnxnn.no_grad():
        for _ in range(6):
            for size, x in batches.items():
                expected = np.maximum(
                    x.numpy() @ model[0].weight.detach().numpy().T + model[0].bias.detach().numpy(), 0
                )
                np.testing.assert_allclose(model(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    tree = _forward_replay._compiled_trees[id(model)]
    assert len(tree.templates.prepared) == 2


def test_new_weights_and_a_pending_argument_take_the_replay_and_stay_right():
    onnxnn.manual_seed(0)
    linear = nn.Linear(80, 80).eval()
    linear.compile()
    x = onnxnn.randn(4, 80)
    with onnxnn.no_grad():
        for _ in range(6):
            linear(x).numpy()
        linear.weight.data = onnxnn.randn(80, 80)  # not what the specialization embedded
        np.testing.assert_allclose(
            linear(x).numpy(),
            x.numpy() @ linear.weight.detach().numpy().T + linear.bias.detach().numpy(),
            rtol=1e-5,
            atol=1e-5,
        )
        pending = x * 2  # recorded, not computed: the call joins its history
        np.testing.assert_allclose(
            linear(pending).numpy(),
            2 * x.numpy() @ linear.weight.detach().numpy().T + linear.bias.detach().numpy(),
            rtol=1e-5,
            atol=1e-5,
        )


class _ReadsAttribute(nn.Module):
    """Keeps a tensor in a plain attribute (not a buffer): a compiled call reads it at every call."""

    def __init__(self):
        super().__init__()
        self.scale = onnxnn.ones(80)
        self.linear = nn.Linear(80, 80)

    def forward(self, x):
        return self.linear(x) * self.scale


def test_a_tensor_attribute_changed_in_place_or_rebound_is_read_as_it_is_now():
    onnxnn.manual_seed(0)
    module = _ReadsAttribute().eval()
    module.compile()
    x = onnxnn.randn(3, 80)
    plain = x.numpy() @ module.linear.weight.detach().numpy().T + module.linear.bias.detach().numpy()
    with onnxnn.no_grad():
        for _ in range(6):
            np.testing.assert_allclose(module(x).numpy(), plain, rtol=1e-5, atol=1e-5)
        assert compiled_calls.compiled_info()["prepared"] >= 1
        module.scale.mul_(3)
        for _ in range(6):
            np.testing.assert_allclose(module(x).numpy(), 3 * plain, rtol=1e-5, atol=1e-5)
        module.scale = onnxnn.full((80,), -1.0)
        for _ in range(6):
            np.testing.assert_allclose(module(x).numpy(), -plain, rtol=1e-5, atol=1e-5)
    assert compiled_calls.compiled_info()["prepared"] >= 5


@pytest.mark.parametrize(
    "behaviour, expected",
    [
        (behaviour, EXPECTED[behaviour])
        for behaviour in (
            "reads data",
            "reads a global tensor",
            "changes its argument",
            "changes its state",
            "changes itself",
            "changes a list it keeps",
            "changes a dict it keeps",
        )
    ],
)
def test_a_forward_a_replay_could_not_repeat_runs_every_call(behaviour, expected):
    module = Misbehaving(behaviour).eval()
    module.compile()
    with onnxnn.no_grad():
        for call, sign in enumerate((1, -1, 1, -1, 1)):
            GLOBAL_OFFSET.fill_(float(call)).numpy()  # realized: read as it is, not a pending history
            data = np.full((4,), sign, np.float32)
            np.testing.assert_array_equal(module(onnxnn.tensor(data)).numpy(), expected(data, call))
    assert compiled_calls.compiled_info() == {"computed": 0, "prepared": 0}


def test_random_draws_are_drawn_at_every_call():
    module = Misbehaving("draws random numbers").eval()
    module.compile()
    x = onnxnn.zeros(64)
    with onnxnn.no_grad():
        onnxnn.manual_seed(3)
        draws = [module(x).numpy() for _ in range(5)]
        onnxnn.manual_seed(3)
        again = [module(x).numpy() for _ in range(5)]
    for first, second in zip(draws, draws[1:]):
        assert not np.array_equal(first, second)
    for first, second in zip(draws, again):
        np.testing.assert_array_equal(first, second)


def _hooked(model):
    seen = []
    model.register_forward_hook(lambda module, args, output: seen.append(output.shape))
    return seen


@pytest.mark.parametrize(
    "condition", ["recording gradients", "training", "a hook", "a submodule's hook", "a global hook"]
)
def test_calls_a_compiled_module_takes_plainly(condition):
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8)).eval()
    model.compile()
    seen: list = []
    handle = None
    if condition == "training":
        model.train()
    if condition == "a hook":
        seen = _hooked(model)
    if condition == "a submodule's hook":
        seen = _hooked(model[0])
    if condition == "a global hook":
        handle = nn.modules.module.register_module_forward_hook(lambda module, args, output: seen.append(1))
    x = onnxnn.randn(4, 8)
    try:
        for _ in range(4):
            if condition == "recording gradients":
                output = model(x)
                assert output.grad_fn is not None
            else:
                with onnxnn.no_grad():
                    model(x).numpy()
    finally:
        if handle is not None:
            handle.remove()
    if condition == "training":
        assert not np.array_equal(model[1].running_mean.numpy(), np.zeros(8, np.float32))
    if condition in ("a hook", "a submodule's hook"):
        assert len(seen) == 4
    if condition == "a global hook":
        assert len(seen) == 4 * 3  # the Sequential and its two layers, at every call
    assert compiled_calls.compiled_info() == {"computed": 0, "prepared": 0}


def _compiled_linear_called(times: int) -> tuple:
    """A compiled one-layer model in evaluation mode and its input, called ``times`` times under ``no_grad``."""
    model = nn.Sequential(nn.Linear(96, 96)).eval()
    model.compile()
    x = onnxnn.randn(2, 96)
    with onnxnn.no_grad():
        for _ in range(times):
            model(x)
    return model, x


def test_clearing_the_caches_drops_the_prepared_runs():
    model, x = _compiled_linear_called(5)
    with onnxnn.no_grad():
        assert _forward_replay._compiled_trees[id(model)].templates.prepared
        onnxnn.clear_caches()
        assert id(model) not in _forward_replay._compiled_trees
        expected = x.numpy() @ model[0].weight.detach().numpy().T + model[0].bias.detach().numpy()
        np.testing.assert_allclose(model(x).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_an_evicted_entry_is_compiled_again_and_let_go():
    from onnxnn.runtime import realization

    model = nn.Sequential(nn.Linear(96, 128), nn.Tanh(), nn.Linear(128, 10)).eval()
    model.compile()
    x = onnxnn.randn(4, 96)
    with onnxnn.no_grad(), onnxnn.set_executor("onnxruntime"):
        for _ in range(6):
            expected = model(x).numpy()
        templates = _forward_replay._compiled_trees[id(model)].templates
        (evicted,) = [prepared.entry for prepared in templates.prepared.values()]
        info = realization.cache_info()
        realization.set_cache_size(0)  # evicts every entry: the prepared run must let its entry go
        realization.set_cache_size(info["capacity"])
        assert evicted.dropped
        prepared_before = compiled_calls.compiled_info()["prepared"]
        result = model(x).numpy()
        assert compiled_calls.compiled_info()["prepared"] == prepared_before  # not run by the evicted entry
        assert realization.cache_info()["misses"] > info["misses"]
        assert all(prepared.entry is not evicted for prepared in templates.prepared.values())
        # The new entry runs its general session until specialized again: the same bits either way.
        assert result.tobytes() == expected.tobytes()
        for _ in range(6):
            assert model(x).numpy().tobytes() == expected.tobytes()
        assert compiled_calls.compiled_info()["prepared"] > prepared_before  # prepared again


def test_a_prepared_run_marks_its_entry_used_so_evictions_keep_it():
    model, x = _compiled_linear_called(6)
    with onnxnn.no_grad():
        (prepared,) = _forward_replay._compiled_trees[id(model)].templates.prepared.values()
        prepared.entry.recently_used = False  # as the table's evictions leave it when they come round
        before = compiled_calls.compiled_info()["prepared"]
        model(x)
        assert compiled_calls.compiled_info()["prepared"] == before + 1
        assert prepared.entry.recently_used


def test_compiled_models_of_one_structure_taking_turns_each_run_their_own_session():
    from onnxnn.runtime.fastpath import plan_cache

    models = []
    for seed in (1, 2):
        onnxnn.manual_seed(seed)
        models.append(onnxnn.compile(nn.Sequential(nn.Linear(96, 128), nn.Tanh(), nn.Linear(128, 10)).eval()))
    x = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    rounds = 10
    with onnxnn.no_grad():
        for _ in range(rounds):
            for model in models:
                first, second = model._orig_mod[0], model._orig_mod[2]
                hidden = np.tanh(x @ first.weight.detach().numpy().T + first.bias.detach().numpy())
                expected = hidden @ second.weight.detach().numpy().T + second.bias.detach().numpy()
                np.testing.assert_allclose(model(onnxnn.from_numpy(x)).numpy(), expected, rtol=1e-5, atol=1e-5)
    # Each model is traced and computed until its own specialization exists, then runs it directly.
    settling = plan_cache.SPECIALIZE_AFTER_RUNS + 3
    assert compiled_calls.compiled_info()["prepared"] >= len(models) * (rounds - settling)


class _CopiedBlocks(nn.Module):
    """A user's model of blocks ``copy.deepcopy`` made: their parameters share values until changed."""

    def __init__(self, features: int):
        super().__init__()
        block = nn.Linear(features, features)
        self.blocks = nn.ModuleList([copy.deepcopy(block) for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = onnxnn.relu(block(x))
        return x


# Each rebinds some blocks' tensors alone, so the blocks no longer share their values.
BLOCK_CHANGES = {
    "mul_ per block": lambda model: [block.weight.mul_(float(i + 2)) for i, block in enumerate(model.blocks)],
    "add_ to one": lambda model: model.blocks[1].bias.add_(1.0),
    "load_state_dict into one": lambda model: model.blocks[2].load_state_dict(
        {"weight": -model.blocks[2].weight.detach(), "bias": model.blocks[2].bias.detach() + 1}
    ),
}


@pytest.mark.parametrize("change", list(BLOCK_CHANGES))
@pytest.mark.parametrize("features", [96, 6])  # weights a specialization embeds; small ones fed to the session
def test_blocks_that_shared_values_when_prepared_are_read_apart_once_changed(features, change):
    onnxnn.manual_seed(0)
    model = _CopiedBlocks(features).eval()
    model.compile()
    x = onnxnn.randn(4, features)
    with onnxnn.no_grad():
        for _ in range(6):  # run, traced and computed, and (past the specialization) prepared runs
            model(x).numpy()
        BLOCK_CHANGES[change](model)
        results = [model(x).numpy() for _ in range(3)]
    expected = x.numpy()
    for block in model.blocks:
        expected = np.maximum(expected @ block.weight.detach().numpy().T + block.bias.detach().numpy(), 0)
    for result in results:  # three float32 layers of 96-term sums: a few hundred eps of the magnitudes
        np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("features", [96, 6])
def test_a_compiled_call_on_the_modules_own_weight_stands_for_neither(features):
    onnxnn.manual_seed(0)
    linear = nn.Linear(features, features).eval()
    linear.compile()
    x = onnxnn.randn(features, features)
    weight, bias = linear.weight.detach().numpy(), linear.bias.detach().numpy()
    with onnxnn.no_grad():
        for argument in [linear.weight] * 6 + [x] * 3 + [linear.weight] * 2:
            expected = argument.detach().numpy() @ weight.T + bias
            np.testing.assert_allclose(linear(argument).numpy(), expected, rtol=1e-5, atol=1e-4)


class _Scale(nn.Module):
    def forward(self, x, scale: float):
        return 1.0 / (x * scale)


@pytest.mark.parametrize("first, then", [(0.0, -0.0), (-0.0, 0.0)])
def test_a_scalar_argument_of_the_other_sign_of_zero_is_its_own_structure(first, then):
    module = _Scale().eval()
    module.compile()
    x = onnxnn.tensor([1.0, -2.0])
    with onnxnn.no_grad(), np.errstate(divide="ignore"):
        for scale in [first] * 3 + [then] * 2:
            expected = 1.0 / (x.numpy() * np.float32(scale))  # +-inf, by the signs of x and of the zero
            np.testing.assert_array_equal(module(x, scale).numpy(), expected)


class _MakesConstants(nn.Module):
    """A user's forward that makes tensors of its own (a scale, a shift) at every call."""

    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(256, 256), nn.Linear(256, 256)

    def forward(self, x):
        scale = onnxnn.tensor(np.linspace(0.1, 2.0, 256, dtype=np.float32))
        return self.second(onnxnn.tanh(self.first(x) * scale + onnxnn.full((256,), 0.1)))


def test_tensors_a_compiled_forward_makes_give_bitwise_the_plain_calls_results():
    # A plain call makes them anew each time, so a specialization never embeds them; a compiled
    # call's replay must not let it either (past the first runs the two would round otherwise).
    onnxnn.manual_seed(0)
    model = _MakesConstants().eval()
    model.compile()
    x = onnxnn.randn(64, 256)
    runs = {}
    for fast in (True, False):
        onnxnn.clear_caches()
        with onnxnn.set_fast_path(fast), onnxnn.no_grad():
            runs[fast] = [model(x).numpy() for _ in range(8)]
    for compiled, plain in zip(runs[True], runs[False]):
        assert compiled.tobytes() == plain.tobytes()
