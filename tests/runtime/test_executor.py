"""The executor: structural session cache, shared intermediates, bounded graphs, no leaks."""

from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.fastpath import dynamic_shapes
from onnxnn.runtime import realization as executor
from onnxnn.ir.plan import IR_VERSION
from onnxnn.ir.model_building import build_model
from onnxnn.runtime import depth
from onnxnn.runtime.fastpath import plan_cache
from onnxnn.ir.graph import Node

from tolerances import TRANSCENDENTAL_ULPS, assert_close_to_matmul, assert_within, gamma, rtol_for, ulps


def relu(x):
    return np.maximum(x, 0)


def _training_step(weight, bias, x, y, learning_rate=0.05):
    loss = ((x @ weight + bias - y) ** 2).mean()
    loss.backward()
    with onnxnn.no_grad():
        weight -= learning_rate * weight.grad
        bias -= learning_rate * bias.grad
    weight.grad = None
    bias.grad = None
    return loss.item()


@pytest.fixture
def on_onnxruntime():
    """Session-cache tests pin the onnxruntime executor ("auto" runs tiny graphs on kernels)."""
    with onnxnn.set_executor("onnxruntime"):
        yield


def _live_nodes() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is Node)


def test_repeated_training_loop_hits_the_session_cache(on_onnxruntime):
    weight = onnxnn.randn(4, 1, requires_grad=True)
    bias = onnxnn.zeros(1, requires_grad=True)
    x, y = onnxnn.randn(32, 4), onnxnn.randn(32, 1)
    for _ in range(3):
        _training_step(weight, bias, x, y)
    sessions = executor.cache_info()["sessions"]
    misses = executor.cache_info()["misses"]
    for step in range(100):
        # A changing learning rate is data, not structure: it must not recompile anything.
        _training_step(weight, bias, x, y, learning_rate=0.05 / (1 + step))
    assert executor.cache_info()["sessions"] == sessions
    assert executor.cache_info()["misses"] == misses


def test_a_long_training_loop_keeps_nodes_sessions_and_memory_bounded(on_onnxruntime):
    weight = onnxnn.randn(4, 1, requires_grad=True)
    bias = onnxnn.zeros(1, requires_grad=True)
    x, y = onnxnn.randn(32, 4), onnxnn.randn(32, 1)
    for _ in range(100):
        _training_step(weight, bias, x, y)
    nodes, sessions = _live_nodes(), executor.cache_info()["sessions"]
    misses = executor.cache_info()["misses"]
    for _ in range(400):
        _training_step(weight, bias, x, y)
    # Memory Python and numpy allocate stays flat (tracemalloc counts both; the process's resident size
    # also moves with the allocator's arenas and with what earlier tests left, so it is no measure here).
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1_000):
            _training_step(weight, bias, x, y)
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert _live_nodes() <= nodes
    assert executor.cache_info()["sessions"] == sessions
    assert executor.cache_info()["misses"] == misses, "no new graph structure appeared"
    # 1,000 steps leaking even 100 bytes each would be 100 KB.
    assert growth < 64 * 2**10, f"{growth} bytes more after 1,000 steps"


def test_a_buffer_updated_every_call_never_grows_an_unbounded_graph():
    running_mean = onnxnn.zeros(8)
    batch = onnxnn.randn(8)
    for _ in range(5 * depth.MAX_PENDING_DEPTH):
        running_mean.mul_(0.9).add_(batch * 0.1)
        assert depth.pending_depth(running_mean._value) <= depth.MAX_PENDING_DEPTH
    # Each update rounds three times (two products, a sum) relative to |batch|, and 0.9 damps
    # earlier errors: at most 3u|b| / (1 - 0.9) = 30u|b|. 0.9 and 0.1 are not float32 numbers: the
    # fixed point 0.1f / (1 - 0.9f) is 1 within 10u. Together gamma(40) |batch|.
    assert_within(
        running_mean.numpy(),
        batch.numpy() * (1 - 0.9 ** (5 * depth.MAX_PENDING_DEPTH)),
        gamma(40) * np.abs(batch.numpy()),
    )


def test_a_history_deeper_than_pythons_recursion_limit_is_planned_in_one_graph():
    # An export keeps a whole model pending (``unbounded_depth``): planning walks its history
    # recursively, deeper than Python's default limit for a model of a few thousand layers.
    import sys

    steps = sys.getrecursionlimit() + 100
    x = onnxnn.tensor([0.5])
    with depth.unbounded_depth(), onnxnn.set_executor("kernels"):
        y = x
        for _ in range(steps):
            y = y + 1.0
        assert depth.pending_depth(y._value) == steps
        assert y.item() == 0.5 + steps  # exact: integers and halves below 2**24


def test_a_deep_recurrence_is_bounded_in_a_few_runs_not_one_per_step(on_onnxruntime):
    # A 64-step LSTM's training step is ~1,300 nodes deep (forward and backward). Bounding the
    # depth realizes the deep half of the history at once: about one run per MAX_PENDING_DEPTH / 2
    # levels. Realizing only the node that passed the bound left its siblings (the other gates,
    # the other gradient paths) just below it, and the step ran as ~250 small runs.
    onnxnn.manual_seed(0)
    lstm = onnxnn.nn.LSTM(8, 8)
    optimizer = onnxnn.optim.SGD(lstm.parameters(), lr=0.01)
    x, target = onnxnn.randn(64, 2, 8), onnxnn.randn(64, 2, 8)
    runs = []
    for _ in range(4):
        before = executor.cache_info()
        loss = onnxnn.nn.functional.mse_loss(lstm(x)[0], target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        after = executor.cache_info()
        runs.append(after["hits"] + after["misses"] - before["hits"] - before["misses"])
    assert runs[-1] <= 2 * 1300 // depth.MAX_PENDING_DEPTH + 4, runs


def test_values_still_referenced_are_computed_in_the_same_run(on_onnxruntime):
    x = onnxnn.randn(5)
    hidden = x.exp()
    out = (hidden * 2).sum()
    runs = executor.cache_info()["hits"] + executor.cache_info()["misses"]
    out.numpy()
    assert hidden._value.realized, "a live intermediate is returned by the run that computed it"
    hidden.numpy()
    assert executor.cache_info()["hits"] + executor.cache_info()["misses"] == runs + 1
    assert_within(hidden.numpy(), np.exp(x.numpy().astype(np.float64)), ulps(np.exp(x.numpy())))


def test_dropped_intermediates_are_not_returned():
    x = onnxnn.randn(5)
    out = (x.exp() * 2).sum()
    plan = executor.plan([out._value])
    assert plan.outputs == [out._value]


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
def test_a_training_step_computes_the_held_loss_with_the_update(executor_name, monkeypatch):
    # The optimizer's step realizes the parameters; the loss's last nodes are not needed for them,
    # but the loss that backward() started from is still held, so the same run computes it.
    model = onnxnn.nn.Sequential(onnxnn.nn.Linear(6, 8), onnxnn.nn.ReLU(), onnxnn.nn.Linear(8, 3))
    optimizer = onnxnn.optim.Adam(model.parameters(), lr=1e-2)
    x, target = onnxnn.randn(5, 6), onnxnn.tensor([0, 2, 1, 1, 0])
    plans = []
    planner = executor.plan
    monkeypatch.setattr(executor, "plan", lambda *arguments: plans.append(1) or planner(*arguments))
    _runs = plans.__len__
    with onnxnn.set_executor(executor_name):
        for _ in range(3):
            optimizer.zero_grad()
            logits = model(x)
            loss = onnxnn.nn.functional.cross_entropy(logits, target)
            loss.backward()
            runs = _runs()
            optimizer.step()
            assert _runs() == runs + 1
            assert loss._value.realized, "the held loss is computed by the step's run"
            value = loss.item()
            assert _runs() == runs + 1, "reading the loss runs nothing more"
            logits64 = logits.detach().numpy().astype(np.float64)
            probabilities = np.exp(logits64) / np.exp(logits64).sum(1, keepdims=True)
            expected = -np.log(probabilities)[range(5), target.numpy()].mean()
            assert abs(value - expected) <= 1e-5 * abs(expected) + 1e-6


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("fast_path", [True, False])
def test_gradients_read_after_the_step_were_computed_by_its_run(momentum, fast_path, monkeypatch):
    # .grad holds its value: the step's run computes the gradients among its outputs, on the first
    # (traced) backward as on replayed ones, so reading them runs nothing more.
    model = onnxnn.nn.Sequential(onnxnn.nn.Linear(6, 8), onnxnn.nn.ReLU(), onnxnn.nn.Linear(8, 3))
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    x, target = onnxnn.randn(5, 6), onnxnn.tensor([0, 2, 1, 1, 0])
    plans = []
    planner = executor.plan
    monkeypatch.setattr(executor, "plan", lambda *arguments: plans.append(1) or planner(*arguments))
    with onnxnn.set_fast_path(fast_path):
        for _ in range(2):
            optimizer.zero_grad()
            onnxnn.nn.functional.cross_entropy(model(x), target).backward()
            optimizer.step()
            runs = len(plans)
            gradients = [parameter.grad.numpy() for parameter in model.parameters()]
            assert len(plans) == runs, "reading the gradients ran the backward again"
            assert all(np.isfinite(gradient).all() for gradient in gradients)


def test_a_dropped_loss_is_not_computed_with_the_update(on_onnxruntime):
    weight = onnxnn.randn(4, 3, requires_grad=True)
    x = onnxnn.randn(2, 4)
    loss = (x @ weight).square().sum()
    value = loss._value
    loss.backward()
    del loss
    weight.grad.numpy()
    assert not value.realized, "nothing holds the loss any more: the run leaves it out"


def test_a_held_loss_is_not_pulled_into_an_unrelated_run(on_onnxruntime):
    weight = onnxnn.randn(4, 3, requires_grad=True)
    loss = (onnxnn.randn(2, 4) @ weight).square().sum()
    loss.backward()
    (onnxnn.randn(3) * 2).numpy()  # shares nothing with the loss's history
    assert not loss._value.realized
    weight.grad.numpy()  # the gradient's graph runs the loss's history: the loss comes along
    assert loss._value.realized


def test_same_structure_different_data_shares_one_session(on_onnxruntime):
    first = onnxnn.randn(3, 3) @ onnxnn.randn(3, 3)
    first.numpy()
    misses = executor.cache_info()["misses"]
    second = onnxnn.randn(3, 3) @ onnxnn.randn(3, 3)
    second.numpy()
    assert executor.cache_info()["misses"] == misses


def test_different_shapes_compile_separately_without_symbolic_sizes(on_onnxruntime, monkeypatch):
    # With symbolic sizes (the default) a second size may share a graph: tests/runtime/test_dynamic_shapes.py.
    monkeypatch.setattr(dynamic_shapes, "ENABLED", False)
    (onnxnn.randn(13, 7) + 1).numpy()
    misses = executor.cache_info()["misses"]
    (onnxnn.randn(14, 7) + 1).numpy()
    assert executor.cache_info()["misses"] == misses + 1


def test_built_models_load_in_the_installed_onnxruntime():
    import onnx
    import onnxruntime

    x = onnxnn.randn(2, 3)
    y = (x.softmax(1) * 2).sum(0)
    plan = executor.plan([y._value])
    model = build_model(plan)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == IR_VERSION
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: value.data for graph_input, value in zip(session.get_inputs(), plan.inputs)}
    (result,) = session.run(None, feeds)
    # Softmax of 3 values: exps (a few ulps: 2u each), a 3-term sum of positive terms and a
    # division, then a 2-term sum of positive terms: no cancellation, so a relative bound.
    np.testing.assert_allclose(result, y.numpy(), rtol=rtol_for(2 * TRANSCENDENTAL_ULPS + 3 + 1 + 1), atol=0)


def test_built_models_hold_only_the_constants_their_nodes_read(on_onnxruntime, monkeypatch):
    # SGD's Momentum update is written out as standard ops that read neither its step count nor
    # its unused factors; onnxruntime would warn about (and drop) each constant left unread.
    import onnx

    from onnxnn.runtime import sessions

    built = []
    create = sessions.create_session
    monkeypatch.setattr(
        sessions, "create_session", lambda model, *a, **k: built.append(model) or create(model, *a, **k)
    )
    layer = onnxnn.nn.Linear(3, 2)
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        optimizer.zero_grad()
        layer(onnxnn.randn(4, 3)).sum().backward()
        optimizer.step()
    layer.weight.detach().numpy()
    assert built
    for model in built:
        model = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)
        read = {name for node in model.graph.node for name in node.input}
        assert [initializer.name for initializer in model.graph.initializer if initializer.name not in read] == []


def test_cache_capacity_bounds_the_number_of_sessions(on_onnxruntime):
    previous = executor.cache_info()["capacity"]
    try:
        executor.set_cache_size(4)
        for size in range(1, 10):
            (onnxnn.randn(size) * 2).numpy()
        assert executor.cache_info()["sessions"] <= 4
    finally:
        executor.set_cache_size(previous)


def test_cuda_without_a_gpu_is_a_clear_runtime_error():
    if onnxnn.cuda.is_available():
        pytest.skip("this machine has a working CUDA provider")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        onnxnn.randn(2).to("cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        onnxnn.zeros(2, device="cuda")


@pytest.mark.skipif(not onnxnn.cuda.is_available(), reason="needs onnxruntime's CUDA provider and a GPU")
def test_cuda_tensors_compute_on_the_gpu_and_match_cpu():
    x = onnxnn.randn(64, 64)
    on_gpu = (x.to("cuda") @ x.to("cuda")).relu()
    assert on_gpu.device == onnxnn.device("cuda", 0)
    np.testing.assert_allclose(on_gpu.cpu().numpy(), (x @ x).relu().numpy(), rtol=1e-4, atol=1e-4)


def test_inference_with_unchanged_weights_gets_a_specialized_session_and_stays_correct(on_onnxruntime):
    weight = onnxnn.randn(128, 64)
    bias = onnxnn.randn(64)

    def serve(batch):
        return (onnxnn.from_numpy(batch) @ weight + bias).relu().numpy()

    batches = [np.random.default_rng(i).standard_normal((8, 128)).astype(np.float32) for i in range(6)]
    for batch in batches[: plan_cache.SPECIALIZE_AFTER_RUNS]:
        serve(batch)
    assert any(entry.specialization is not None for entry in plan_cache._entries["onnxruntime"].values())
    for batch in batches:
        # Relu is 1-Lipschitz, so the matmul's rounding bound carries through it.
        assert_close_to_matmul(serve(batch), batch, weight.numpy(), bias.numpy(), then=relu)
    # A weight update (a new value) falls back to the general session at once, with the new weights.
    with onnxnn.no_grad():
        weight.mul_(-1)
    assert_close_to_matmul(serve(batches[0]), batches[0], weight.numpy(), bias.numpy(), then=relu)


@pytest.mark.parametrize("models", [2, plan_cache.SPECIALIZATIONS_PER_STRUCTURE + 1])
def test_models_of_one_structure_taking_turns_are_each_specialized(on_onnxruntime, models):
    # An ensemble, or fine-tuned variants of one architecture: one structure, several weight sets.
    # Each is specialized once and kept, up to SPECIALIZATIONS_PER_STRUCTURE; later ones run the
    # general session rather than replacing one another (which would compile one at every turn).
    onnxnn.clear_caches()
    weights = [(onnxnn.randn(128, 64), onnxnn.randn(64)) for _ in range(models)]
    batch = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)

    def serve(weight, bias):
        return (onnxnn.from_numpy(batch) @ weight + bias).relu().numpy()

    made = set()
    for turn in range(4 * plan_cache.SPECIALIZE_AFTER_RUNS):
        for weight, bias in weights:
            assert_close_to_matmul(serve(weight, bias), batch, weight.numpy(), bias.numpy(), then=relu)
        (entry,) = plan_cache._entries["onnxruntime"].values()
        specializations = [entry.specialization, *entry.former]
        if turn >= plan_cache.SPECIALIZE_AFTER_RUNS:
            kept = min(models, plan_cache.SPECIALIZATIONS_PER_STRUCTURE)
            assert len({id(each) for each in specializations if each is not None}) == kept
        made.update(id(each) for each in specializations if each is not None)
    assert len(made) == min(models, plan_cache.SPECIALIZATIONS_PER_STRUCTURE), "each made once, none replaced"
    assert all(not each.retired for each in specializations)


def test_a_dropped_models_specialization_is_forgotten_with_its_weights(on_onnxruntime):
    # A specialized session holds a copy of the weights it embedded; it refers to their values
    # weakly, so dropping the model frees both (a process building many models does not keep them).
    onnxnn.clear_caches()
    weight, bias = onnxnn.randn(128, 64), onnxnn.randn(64)
    batch = np.ones((8, 128), np.float32)
    for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 1):
        (onnxnn.from_numpy(batch) @ weight + bias).relu().numpy()
    (entry,) = plan_cache._entries["onnxruntime"].values()
    assert entry.specialization is not None and entry.stable_inputs is None
    alive = weakref.ref(weight._value)
    del weight
    gc.collect()
    assert alive() is None, "nothing but the model kept its weight's value"
    assert entry.specialization is None, "the session embedding it went with it"


@pytest.mark.parametrize("optimizer", ["Adam", "SGD"])
def test_an_optimizer_step_on_a_reused_batch_is_not_specialized(on_onnxruntime, optimizer):
    # The parameters change every step; a loop that reuses one batch would otherwise get a second
    # session with the batch embedded, and that session's arena (a training step only ever feeds
    # new parameters, so it would never serve a real loop).
    onnxnn.clear_caches()
    model = onnxnn.nn.Sequential(onnxnn.nn.Linear(256, 256), onnxnn.nn.ReLU(), onnxnn.nn.Linear(256, 10))
    kwargs = {"momentum": 0.9} if optimizer == "SGD" else {}
    step = getattr(onnxnn.optim, optimizer)(model.parameters(), lr=1e-3, **kwargs)
    x, target = onnxnn.randn(300, 256), onnxnn.randint(0, 10, (300,))
    for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 3):
        step.zero_grad()
        onnxnn.nn.functional.cross_entropy(model(x), target).backward()
        step.step()
    assert all(entry.specialization is None for entry in plan_cache._entries["onnxruntime"].values())


def test_a_graph_of_one_input_is_never_specialized_even_when_fed_the_same_array(on_onnxruntime):
    # Embedding its only input would embed the whole computation: a cache of one result. Its
    # runs are not even watched for unchanged inputs (a weightless layer's call saves that time).
    plan_cache.clear()
    batch = onnxnn.from_numpy(np.random.default_rng(0).standard_normal((8, 64, 16, 16)).astype(np.float32))
    for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 2):
        with onnxnn.no_grad():
            onnxnn.nn.functional.adaptive_avg_pool2d(batch, 1).numpy()
    (entry,) = plan_cache._entries["onnxruntime"].values()
    assert entry.specialization is None and entry.stable_inputs is None and entry.stable_runs < 0


@pytest.mark.parametrize(
    "batch_shape, specialized",
    [
        ((8, 16, 32, 32), True),  # 131,072 elements a call: folding the statistics pays
        ((2, 16, 4, 4), False),  # a short run: not worth a second compilation
    ],
)
def test_small_unchanged_inputs_are_embedded_when_the_run_is_long(on_onnxruntime, batch_shape, specialized):
    # An eval BatchNorm2d's statistics and affine parameters are 16 elements each, far below
    # SPECIALIZE_MIN_ELEMENTS; beside a large batch they still fold into one scale and shift.
    layer = onnxnn.nn.BatchNorm2d(16).eval()
    with onnxnn.no_grad():
        layer.running_mean.copy_(onnxnn.randn(16))
        layer.running_var.copy_(onnxnn.rand(16) + 0.5)
        layer.weight.copy_(onnxnn.randn(16))
    mean, var = layer.running_mean.numpy(), layer.running_var.numpy()
    scale, shift = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    rng = np.random.default_rng(0)
    plan_cache.clear()
    for _ in range(plan_cache.SPECIALIZE_AFTER_RUNS + 2):
        batch = rng.standard_normal(batch_shape).astype(np.float32)
        with onnxnn.no_grad():
            output = layer(onnxnn.from_numpy(batch)).numpy()
        factor = (scale / np.sqrt(var.astype(np.float64) + layer.eps))[:, None, None]
        expected = (batch - mean[:, None, None]) * factor + shift[:, None, None]
        # Folded or not, a handful of roundings per element, each relative to one of the terms
        # x * factor, mean * factor and shift.
        terms = np.abs(batch * factor) + np.abs(mean[:, None, None] * factor) + np.abs(shift[:, None, None])
        assert_within(output, expected, gamma(8) * terms)
    has_specialization = any(entry.specialization is not None for entry in plan_cache._entries["onnxruntime"].values())
    assert has_specialization is specialized
