"""A large optimizer step (Adam, Adagrad, RMSprop, SGD with momentum) under "auto" runs in two
realizations: the gradients where the executor choice puts them, then the updates alone on onnxnn's
kernels (realization.realize_step), which write large tensors block by block into recycled buffers
(kernels/recycled_buffers.py). That holds on one intra-op thread, and on more where the compiled
loops share the updates out among them; a small step, or a step on more threads with the numpy
formulas only, stays one run.

The specification: the parameters and states equal the one-run step's bit for bit, whatever the
block size; the second run is the kernels'; and no array anyone can still read (an earlier
parameter's or state's data, a view of it, a detached tensor) is ever overwritten by a later step.
(The parameter and state Tensors themselves are rebound to each step's values, as PyTorch's
change in place.)
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.ir.mode import MODE
from onnxnn.kernels import compiled_updates, recycled_buffers, training, update_driver
from onnxnn.runtime import realization
from onnxnn.runtime.fastpath import plan_cache

OPTIMIZERS = {
    "adam": lambda params: onnxnn.optim.Adam(params, lr=0.01),
    "adamw_amsgrad": lambda params: onnxnn.optim.AdamW(params, lr=0.01, amsgrad=True, maximize=True),
    "adagrad": lambda params: onnxnn.optim.Adagrad(params, lr=0.05, weight_decay=0.01),
    "rmsprop_centered": lambda params: onnxnn.optim.RMSprop(params, lr=0.01, momentum=0.5, centered=True),
    "sgd_momentum": lambda params: onnxnn.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda params: onnxnn.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, maximize=True),
}
# Above realization.SPLIT_STEP_MIN_ELEMENTS of Adam, Adagrad and RMSprop (below Momentum's), and the
# first layer's weight above RECYCLE_MIN_ELEMENTS.
IN_FEATURES, HIDDEN = 300, 256
SPLIT_EVERY_STEP = dict.fromkeys(realization.SPLIT_STEP_MIN_ELEMENTS, 1 << 16)
SPLIT_NO_STEP = dict.fromkeys(realization.SPLIT_STEP_MIN_ELEMENTS, 1 << 62)


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """One intra-op thread, as ``set_num_threads(1)`` sets it (which also empties the caches:
    structures compiled for another count choose their executors again), unless a test says more."""
    monkeypatch.setattr(MODE, "intra_op_threads", 1)
    realization.clear_cache()
    yield
    realization.clear_cache()


def _trained(optimizer_name: str, steps: int, split: bool, monkeypatch) -> tuple[list, list]:
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 3))
    optimizer = OPTIMIZERS[optimizer_name](model.parameters())
    with monkeypatch.context() as patch:
        patch.setattr(realization, "SPLIT_STEP_MIN_ELEMENTS", SPLIT_EVERY_STEP if split else SPLIT_NO_STEP)
        # A new structure's first run is on the kernels, whose matrix products round differently
        # from onnxruntime's; the split's gradient plan is a structure of its own. Both runs' gradients
        # come from onnxruntime here, so that only the updates could differ.
        patch.setattr(plan_cache, "FIRST_RUNS_ON_KERNELS", 0)
        for step in range(steps):
            x = onnxnn.from_numpy(np.random.default_rng(step).standard_normal((8, IN_FEATURES)).astype(np.float32))
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()
    parameters = [p.detach().numpy().copy() for p in model.parameters()]
    states = [
        value.numpy().copy()
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, onnxnn.Tensor) and value.dim() > 0
    ]
    return parameters, states


# How the kernels apply the updates: one call of the compiled loops, or numpy passes tensor by
# tensor in blocks of any size.
UPDATE_PATHS = {
    "compiled loops": None,
    "numpy, default blocks": update_driver.BLOCK_ELEMENTS,
    "numpy, uneven blocks": 1000,
}


@pytest.mark.parametrize("update_path", list(UPDATE_PATHS))
@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
def test_a_split_step_equals_the_one_run_step_bitwise(optimizer_name, update_path, monkeypatch):
    block_elements = UPDATE_PATHS[update_path]
    if block_elements is None and not compiled_updates.available():
        pytest.skip(f"{compiled_updates.unavailable_reason()}")
    if block_elements is not None:
        monkeypatch.setattr(compiled_updates, "ENABLED", False)
        monkeypatch.setattr(update_driver, "BLOCK_ELEMENTS", block_elements)
    split = _trained(optimizer_name, 6, True, monkeypatch)
    whole = _trained(optimizer_name, 6, False, monkeypatch)
    for ours, expected in zip(split[0] + split[1], whole[0] + whole[1]):
        np.testing.assert_array_equal(ours, expected)


def test_the_updates_of_a_large_step_run_on_the_kernels_into_recycled_buffers(monkeypatch):
    recycled_buffers._clear()
    calls = _kernel_updates(monkeypatch)
    _trained("adam", 3, True, monkeypatch)
    assert IN_FEATURES * HIDDEN in [x.size for _, _, xs, *_ in calls for x in xs]  # the first weight
    assert recycled_buffers._pools or recycled_buffers._FREE_THREADED


def _kernel_updates(monkeypatch) -> list:
    """The tensors the kernels' update driver is asked to update (appended as they come)."""
    calls: list = []
    original = training.run_update
    monkeypatch.setattr(training, "run_update", lambda *args: calls.append(args) or original(*args))
    return calls


def test_a_step_under_the_onnxruntime_executor_stays_one_run(monkeypatch):
    calls = _kernel_updates(monkeypatch)
    with onnxnn.set_executor("onnxruntime"):
        _trained("adam", 2, True, monkeypatch)
    assert not calls


def _kernel_updates_in_later_steps(monkeypatch, make_optimizer, read_gradients: bool = False) -> list:
    """The kernels' updates in steps 4 and 5 of a large model (each new structure's first run is on
    the kernels, plan_cache.FIRST_RUNS_ON_KERNELS, so the first steps do not count). With
    ``read_gradients``, every gradient is read before the step, which leaves the step's plan made of
    its update node alone."""
    calls = _kernel_updates(monkeypatch)
    onnxnn.manual_seed(0)
    model = nn.Linear(IN_FEATURES, HIDDEN)
    optimizer = make_optimizer(model.parameters())
    for step in range(5):
        if step == 3:
            calls.clear()
        optimizer.zero_grad()
        model(onnxnn.randn(8, IN_FEATURES)).square().mean().backward()
        if read_gradients:
            for parameter in model.parameters():
                parameter.grad.numpy()
        optimizer.step()
    return calls


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled loops", "numpy formulas"])
def test_a_step_on_two_threads_splits_where_the_compiled_loops_share_them(compiled, monkeypatch):
    if compiled and not compiled_updates.available():
        pytest.skip(f"{compiled_updates.unavailable_reason()}")
    monkeypatch.setattr(compiled_updates, "ENABLED", compiled)
    monkeypatch.setattr(MODE, "intra_op_threads", 2)  # the numpy formulas would run on one of them
    realization.clear_cache()
    split = _kernel_updates_in_later_steps(monkeypatch, lambda params: onnxnn.optim.Adam(params, lr=0.01))
    assert bool(split) is compiled


@pytest.mark.parametrize("optimizer_name", ["adam", "sgd_nesterov"])
def test_a_split_step_on_three_threads_equals_the_one_run_step_bitwise(optimizer_name, monkeypatch):
    if not compiled_updates.available():
        pytest.skip(f"{compiled_updates.unavailable_reason()}")
    monkeypatch.setattr(MODE, "intra_op_threads", 3)
    monkeypatch.setattr(compiled_updates, "THREADED_MIN_ELEMENTS", 0)  # every update shared out
    realization.clear_cache()
    split = _trained(optimizer_name, 4, True, monkeypatch)
    whole = _trained(optimizer_name, 4, False, monkeypatch)
    for ours, expected in zip(split[0] + split[1], whole[0] + whole[1]):
        np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize(("bound", "split"), [(None, False), (1 << 16, True)], ids=["default bound", "lower bound"])
def test_an_sgd_step_splits_above_momentums_own_bound(bound, split, monkeypatch):
    # Below its bound (the model's 154,000 parameters and states), onnxruntime runs the Momentum update
    # inside the step's one session: its four passes gain too little from the kernels' blocks.
    if bound is not None:
        monkeypatch.setitem(realization.SPLIT_STEP_MIN_ELEMENTS, "Momentum", bound)
    make = lambda params: onnxnn.optim.SGD(params, lr=0.05, momentum=0.9)  # noqa: E731
    assert bool(_kernel_updates_in_later_steps(monkeypatch, make)) is split


@pytest.mark.parametrize(
    ("threads", "compiled", "on_kernels"),
    [(1, True, True), (1, False, True), (2, True, True), (2, False, False)],
    ids=["one thread", "one thread, numpy formulas", "two threads", "two threads, numpy formulas"],
)
def test_updates_alone_run_on_the_kernels_where_they_beat_the_sessions(threads, compiled, on_kernels, monkeypatch):
    if compiled and not compiled_updates.available():
        pytest.skip(f"{compiled_updates.unavailable_reason()}")
    monkeypatch.setattr(compiled_updates, "ENABLED", compiled)
    monkeypatch.setattr(MODE, "intra_op_threads", threads)
    realization.clear_cache()
    make = lambda params: onnxnn.optim.SGD(params, lr=0.05, momentum=0.9)  # noqa: E731
    assert bool(_kernel_updates_in_later_steps(monkeypatch, make, read_gradients=True)) is on_kernels


@pytest.mark.parametrize(("optimizer_name", "state_name"), [("adam", "exp_avg"), ("sgd_momentum", "momentum_buffer")])
def test_what_a_user_still_holds_is_never_overwritten_by_later_steps(optimizer_name, state_name, monkeypatch):
    monkeypatch.setattr(realization, "SPLIT_STEP_MIN_ELEMENTS", SPLIT_EVERY_STEP)
    onnxnn.manual_seed(0)
    model = nn.Linear(IN_FEATURES, HIDDEN)
    optimizer = OPTIMIZERS[optimizer_name](model.parameters())
    held = []
    for step in range(8):
        x = onnxnn.randn(4, IN_FEATURES)
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
        weight = model.weight
        state = optimizer.state[weight][state_name]
        if step % 2 == 0:  # kept: an array, a view of it, a tensor of its own and a state's array
            array = weight.detach().numpy()
            held.append((array, array.copy()))
            held.append((array[:5, :7], array[:5, :7].copy()))
            detached = weight.detach().clone()  # (a detached tensor itself follows the weight, as PyTorch's)
            held.append((detached, detached.numpy().copy()))
            held.append((state.numpy(), state.numpy().copy()))
    for kept, copy in held:
        np.testing.assert_array_equal(kept if isinstance(kept, np.ndarray) else kept.numpy(), copy)
