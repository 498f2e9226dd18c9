"""Symbolic sizes: a structure seen at many sizes compiles O(1) graphs, and computes what it did before.

The shared graph of a structure runs the very nodes each size's own static graph would, with the
sizes left symbolic and the size-dependent structural constants (Reshape and Expand targets) fed
as inputs. So results are compared with the same program run with the feature off
(``dynamic_shapes.ENABLED = False``, one graph per size) *bitwise*: onnxnn's kernels execute the
same numpy calls in the same order, and onnxruntime's CPU kernels pick their blocking from the
sizes they are run with, not from the declared ones. Should a future onnxruntime optimize a graph
with unknown sizes differently (fusing other nodes), these tests are where that shows.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import kernels, nn
from onnxnn.runtime.fastpath import dynamic_shapes
from onnxnn.ir.executors import executor as executor_named
from onnxnn.runtime import realization as executor
from tolerances import matmul_bound

EXECUTORS = ["onnxruntime", "kernels"]
# A shared graph is compiled at a structure's second size and again whenever a later size differs in
# another place; the training step's first update also records another structure (Momentum's count).
# So a loop compiles a handful of graphs, whatever the number of sizes: this bound says "O(1)".
MAX_COMPILATIONS = 8


@pytest.fixture(autouse=True)
def _fresh_caches():
    onnxnn.clear_caches()
    yield
    onnxnn.clear_caches()


def _compilations(name: str) -> int:
    return executor.cache_info()["misses"] if name == "onnxruntime" else kernels.cache_info()["misses"]


def _distinct_sizes(count: int, seed: int = 0) -> list[int]:
    return [int(size) for size in np.random.default_rng(seed).permutation(np.arange(1, count + 1))]


class _SmallCNN(nn.Module):
    """Conv, ReLU, MaxPool, then ``view(batch, -1)``: a Reshape target that records the batch size."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(onnxnn.randn(4, 1, 3, 3) * 0.3)
        self.bias = nn.Parameter(onnxnn.zeros(4))
        self.fc = nn.Linear(4 * 3 * 3, 1)

    def forward(self, x):
        hidden = F.max_pool2d(F.conv2d(x, self.weight, self.bias).relu(), 2)
        return self.fc(hidden.view(hidden.shape[0], -1))


def _mlp():
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))


def _train(make_model, sample_shape: tuple, sizes: list[int], executor_name: str, enabled: bool, monkeypatch) -> tuple:
    """SGD with momentum over one batch per size; returns (losses, parameters, compilations)."""
    monkeypatch.setattr(dynamic_shapes, "ENABLED", enabled)
    onnxnn.clear_caches()  # each run compiles from nothing: its compilations are counted
    with onnxnn.set_executor(executor_name):
        onnxnn.manual_seed(0)
        model = make_model()
        optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        losses = []
        for size in sizes:
            x, y = onnxnn.randn(size, *sample_shape), onnxnn.randn(size, 1)
            loss = F.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        compilations = _compilations(executor_name)
        losses = np.array([loss.item() for loss in losses])
        parameters = [parameter.detach().numpy().copy() for parameter in model.parameters()]
    return losses, parameters, compilations


@pytest.mark.parametrize("executor_name", EXECUTORS)
@pytest.mark.parametrize(
    "make_model, sample_shape, distinct_sizes",
    [
        pytest.param(_mlp, (4,), 200, id="mlp"),
        pytest.param(_SmallCNN, (1, 8, 8), 40, id="cnn"),
    ],
)
def test_a_training_loop_over_many_batch_sizes_compiles_o1_graphs_and_matches_the_static_path(
    make_model, sample_shape, distinct_sizes, executor_name, monkeypatch
):
    sizes = _distinct_sizes(distinct_sizes)
    losses, parameters, compilations = _train(make_model, sample_shape, sizes, executor_name, True, monkeypatch)
    assert compilations <= MAX_COMPILATIONS, f"{compilations} graphs compiled for {len(sizes)} batch sizes"
    static_losses, static_parameters, static_compilations = _train(
        make_model, sample_shape, sizes, executor_name, False, monkeypatch
    )
    assert static_compilations >= len(sizes)  # the switch works: without it every size compiles
    np.testing.assert_array_equal(losses, static_losses)
    for parameter, static_parameter in zip(parameters, static_parameters):
        np.testing.assert_array_equal(parameter, static_parameter)


@pytest.mark.parametrize("executor_name", EXECUTORS)
def test_a_reshape_target_that_holds_the_batch_size_is_right_at_every_size(executor_name):
    with onnxnn.set_executor(executor_name):
        for size in [3, 5, 8, 2, 13]:
            data = np.arange(size * 6, dtype=np.float32).reshape(size, 2, 3)
            x = onnxnn.tensor(data)
            # view(size, -1) records [size, 6]; expand records [2, size, 6]: both must follow the size.
            result = (x.view(size, -1) * 2).expand(2, size, 6) + 1
            np.testing.assert_array_equal(result.numpy(), np.broadcast_to(data.reshape(size, 6) * 2 + 1, (2, size, 6)))
        assert _compilations(executor_name) <= 3


def test_the_shared_session_declares_the_varying_dims_symbolic():
    with onnxnn.set_executor("onnxruntime"):
        for size in [3, 5, 7]:
            (onnxnn.randn(size, 4) * 2).numpy()
    assert executor.cache_info()["misses"] == 2  # the first size's static graph, then the shared one
    shapes = [
        compiled.session.get_inputs()[0].shape for compiled in executor_named("onnxruntime").cache.sessions.values()
    ]
    assert [3, 4] in shapes and ["input_0_dim_0", 4] in shapes
    assert executor.dynamic_info()["shared_runs"] == 2


def test_inference_over_many_batch_sizes_compiles_o1_sessions():
    onnxnn.manual_seed(0)
    model = _mlp().eval()
    weight, bias = model[0].weight.detach().numpy(), model[0].bias.detach().numpy()
    weight2, bias2 = model[2].weight.detach().numpy(), model[2].bias.detach().numpy()
    with onnxnn.set_executor("onnxruntime"), onnxnn.no_grad():
        for size in _distinct_sizes(100, seed=1):
            data = np.random.default_rng(size).standard_normal((size, 4)).astype(np.float32)
            output = model(onnxnn.tensor(data)).numpy()
            hidden = np.maximum(data.astype(np.float64) @ weight.T + bias, 0)
            expected = hidden @ weight2.T + bias2
            # The hidden layer's rounding (ReLU is 1-Lipschitz) carried through the second layer,
            # plus the second layer's own.
            bound = matmul_bound(data, weight.T, np.broadcast_to(bias, hidden.shape)) @ np.abs(
                weight2.T
            ) + matmul_bound(hidden, weight2.T, np.broadcast_to(bias2, expected.shape))
            assert np.all(np.abs(output - expected) <= bound)
    assert executor.cache_info()["misses"] <= MAX_COMPILATIONS


def test_constants_that_differ_at_the_same_sizes_are_another_structure():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    with onnxnn.set_executor("onnxruntime"):
        np.testing.assert_array_equal(onnxnn.tensor(data).sum(0).numpy(), data.sum(0))
        misses = executor.cache_info()["misses"]
        np.testing.assert_array_equal(onnxnn.tensor(data).sum(1).numpy(), data.sum(1))
    assert executor.cache_info()["misses"] == misses + 1  # its own static graph, not a fed axis
    assert executor.dynamic_info()["shared_runs"] == 0


def test_without_the_feature_every_size_compiles_its_own_graph(monkeypatch):
    monkeypatch.setattr(dynamic_shapes, "ENABLED", False)
    with onnxnn.set_executor("onnxruntime"):
        for size in range(1, 6):
            (onnxnn.randn(size, 4) * 2).numpy()
    assert executor.cache_info()["misses"] == 5


def test_a_size_served_by_the_shared_graph_that_comes_back_gets_its_own_specialization():
    # A model served at one batch size and then another: the second size runs on the shared graph
    # at once, and, coming back with the same weights, gets its static session with the weights
    # embedded (onnxruntime optimizes that better than a graph with symbolic sizes and fed weights).
    from onnxnn.runtime.fastpath import plan_cache

    weight, bias = onnxnn.randn(128, 64), onnxnn.randn(64)

    def serve(batch):
        return (onnxnn.from_numpy(batch) @ weight + bias).relu().numpy()

    rng = np.random.default_rng(0)
    with onnxnn.set_executor("onnxruntime"):
        serve(rng.standard_normal((8, 128)).astype(np.float32))
        batches = [
            rng.standard_normal((5, 128)).astype(np.float32) for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 2)
        ]
        outputs = [serve(batch) for batch in batches]
    assert executor.dynamic_info()["shared_runs"] >= 1
    shared_sized = [entry for key, entry in plan_cache._entries["onnxruntime"].items() if key[1][0][0] == (5, 128)]
    assert shared_sized and shared_sized[0].specialization is not None
    for batch, output in zip(batches, outputs):
        expected = np.maximum(batch.astype(np.float64) @ weight.numpy() + bias.numpy(), 0)
        bound = matmul_bound(batch, weight.numpy(), np.broadcast_to(bias.numpy(), expected.shape))
        assert np.all(np.abs(output - expected) <= bound)


def test_under_auto_a_new_size_runs_on_the_compiled_shared_graph_from_its_first_run():
    # A structure's first run goes to the kernels (plan_cache.FIRST_RUNS_ON_KERNELS) only while it
    # would cost a compilation: once its family has a shared graph, a new size runs there at once.
    def run(size):
        x = onnxnn.randn(size, 1024)
        return ((x * 2).tanh() + 1).sum(1).numpy()

    run(3)
    run(3)  # the first size comes back: its own session
    run(5)
    run(5)  # the second size comes back: the family's shared graph
    shared_runs = executor.dynamic_info()["shared_runs"]
    assert shared_runs >= 1
    run(7)  # new, and its family has a compiled shared graph
    assert executor.dynamic_info()["shared_runs"] == shared_runs + 1


# Layers of one structure whose channel counts differ, trained one after another: their weight
# gradients share one graph with symbolic channels, which the compiled weight-gradient loop and the
# op's written-out forms must serve at every count. (builder of the layer at a step, its input shape)
CHANNEL_SWEEPS = [
    pytest.param(
        [
            (lambda cin=cin, cout=cout: nn.ConvTranspose2d(cin, cout, 2, groups=2), (8, cin, 16, 16))
            for cin, cout in [(2, 8), (4, 2), (8, 8)]
        ],
        id="grouped-conv-transpose",
    ),
    pytest.param(
        [
            (lambda cout=cout: nn.ConvTranspose2d(24, cout, 3, groups=24, padding=1, bias=False), shape)
            for cout, shape in [(48, (3, 24, 13, 13)), (24, (1, 24, 5, 5)), (48, (1, 24, 9, 9))]
        ],
        id="depthwise-conv-transpose",
    ),
    pytest.param(
        [
            (lambda width=width: nn.Conv2d(width, width, 3, padding=1, groups=2), (2, width, 8, 8))
            for width in (16, 32, 64, 128)
        ],
        id="grouped-conv-widths",
    ),
]


@pytest.mark.parametrize("steps", CHANNEL_SWEEPS)
def test_weight_gradients_of_layers_differing_in_channels_are_right(steps):
    for step, (build, shape) in enumerate(steps):
        onnxnn.manual_seed(step)
        layer = build()
        x = onnxnn.from_numpy(np.random.default_rng(step).standard_normal(shape).astype(np.float32))
        gradients = {}
        for name in ("kernels", "onnxruntime"):
            layer.zero_grad()
            with onnxnn.set_executor(name):
                layer(x).square().sum().backward()
                gradients[name] = layer.weight.grad.numpy()
        expected = gradients["kernels"]
        # float32 sums of a few thousand products, computed in another order.
        np.testing.assert_allclose(gradients["onnxruntime"], expected, rtol=0, atol=1e-4 * np.abs(expected).max())
