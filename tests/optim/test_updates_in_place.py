"""A large optimizer step writes its new parameters and states over the old ones when nothing can read
those any more (onnxnn/ir/donation.py, realization.realize_step, kernels/update_driver.py).

The specification: in a plain training loop every parameter and state keeps its memory from step
to step, and the loop's results equal, bit for bit, those of the same loop whose updates always
write new arrays. Whatever can still read an old value sees what it would see then: an array of it
or a view of that array, a pending result computed from it, a state's array, a detached tensor or
a state dict taken before the step (those two follow the parameters, as PyTorch's do). Each
parameter group's update writes in place, yet a failure of one group's leaves the others applied
once, and a Ctrl-C during a step that writes in place stops the program only once the step's
results are the parameters': no update is lost after it overwrote its inputs, to be applied twice.
"""

from __future__ import annotations

import signal

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.kernels import compiled_updates, training
from onnxnn.runtime import realization
from onnxnn.runtime.fastpath import plan_cache

from .test_split_step import IN_FEATURES, HIDDEN, OPTIMIZERS, SPLIT_EVERY_STEP

pytestmark = pytest.mark.skipif(not compiled_updates.available(), reason=f"{compiled_updates.unavailable_reason()}")

STEPS = 6


@pytest.fixture(autouse=True)
def _split_steps_on_one_thread(monkeypatch):
    """Every step split (its updates alone on the kernels), one intra-op thread, and every run's
    gradients from onnxruntime, so that only how the updates are written could differ."""
    monkeypatch.setattr(realization, "SPLIT_STEP_MIN_ELEMENTS", SPLIT_EVERY_STEP)
    monkeypatch.setattr(onnxnn.ir.mode.MODE, "intra_op_threads", 1)
    monkeypatch.setattr(plan_cache, "FIRST_RUNS_ON_KERNELS", 0)
    realization.clear_cache()
    yield
    realization.clear_cache()


def _never_in_place(monkeypatch) -> None:
    monkeypatch.setattr(realization, "dead_input_arrays", lambda plan: frozenset())


def _address(tensor: onnxnn.Tensor) -> int:
    return compiled_updates.address(tensor.detach().numpy())


def _tensors(model: nn.Module, optimizer) -> list[onnxnn.Tensor]:
    """The model's parameters and the optimizer's states that are arrays (not step counts)."""
    states = [
        value
        for state in optimizer.state.values()
        for value in state.values()
        if isinstance(value, onnxnn.Tensor) and value.dim() > 0
    ]
    return [*model.parameters(), *states]


def _loop(optimizer_name: str, readers: dict | None = None) -> tuple[list, list, dict]:
    """``STEPS`` steps of a plain loop: the addresses of every parameter and state after each step,
    their final values, and what each of ``readers`` (made after the second step) read at the end."""
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 3))
    optimizer = OPTIMIZERS[optimizer_name](model.parameters())
    addresses, reads = [], {}
    for step in range(STEPS):
        x = onnxnn.from_numpy(np.random.default_rng(step).standard_normal((8, IN_FEATURES)).astype(np.float32))
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
        addresses.append([_address(tensor) for tensor in _tensors(model, optimizer)])
        if step == 1:
            reads = {name: make(model, optimizer) for name, make in (readers or {}).items()}
    values = [tensor.detach().numpy().copy() for tensor in _tensors(model, optimizer)]
    return addresses, values, {name: np.array(read()) for name, read in reads.items()}


@pytest.mark.usefixtures("fast_path_on")  # updates written over the last step's arrays are the fast path's
@pytest.mark.parametrize("optimizer_name", sorted(OPTIMIZERS))
def test_a_plain_loop_updates_every_parameter_and_state_in_place(optimizer_name, monkeypatch):
    addresses, values, _ = _loop(optimizer_name)
    # The first step writes new flat vectors (the parameters were the model's own arrays); every
    # later one writes over them.
    assert all(later == addresses[1] for later in addresses[2:])
    _never_in_place(monkeypatch)
    fresh_addresses, fresh_values, _ = _loop(optimizer_name)
    assert fresh_addresses[2] != fresh_addresses[3]  # written into other buffers, step after step
    for ours, expected in zip(values, fresh_values):
        assert ours.tobytes() == expected.tobytes()


def _first_weight(model: nn.Module) -> onnxnn.Tensor:
    return model[0].weight


def _first_state(model: nn.Module, optimizer) -> onnxnn.Tensor:
    return next(value for value in optimizer.state[_first_weight(model)].values() if value.dim() > 0)


def _array_reader(model, optimizer):
    array = _first_weight(model).detach().numpy()
    return lambda: array


def _view_reader(model, optimizer):
    view = _first_weight(model).detach().numpy()[3:5, 7:20]
    return lambda: view


def _state_array_reader(model, optimizer):
    array = _first_state(model, optimizer).numpy()
    return lambda: array


def _pending_weight_reader(model, optimizer):
    with onnxnn.no_grad():
        pending = _first_weight(model) * 2.0
    return pending.numpy


def _pending_state_reader(model, optimizer):
    pending = _first_state(model, optimizer) * 2.0
    return pending.numpy


def _detached_reader(model, optimizer):
    detached = _first_weight(model).detach()
    return detached.numpy


def _state_dict_reader(model, optimizer):
    state = model.state_dict()
    return lambda: np.concatenate([tensor.numpy().reshape(-1) for tensor in state.values()])


READERS = {
    "the weight's array": _array_reader,
    "a view of that array": _view_reader,
    "a state's array": _state_array_reader,
    "a pending result of the weight": _pending_weight_reader,
    "a pending result of a state": _pending_state_reader,
    "a detached tensor": _detached_reader,
    "a state dict": _state_dict_reader,
}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("optimizer_name", ["adam", "sgd_momentum"])
def test_what_can_still_read_an_old_value_sees_what_it_would_without_updates_in_place(
    optimizer_name, reader, monkeypatch
):
    # One reader a loop: each keeps only what it reads from being written over.
    _, values, reads = _loop(optimizer_name, {reader: READERS[reader]})
    _never_in_place(monkeypatch)
    _, fresh_values, fresh_reads = _loop(optimizer_name, {reader: READERS[reader]})
    assert reads[reader].tobytes() == fresh_reads[reader].tobytes()
    for ours, expected in zip(values, fresh_values):
        assert ours.tobytes() == expected.tobytes()


def _two_groups(model: nn.Module) -> list[dict]:
    return [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.001}]


@pytest.mark.usefixtures("fast_path_on")  # updates written over the last step's arrays are the fast path's
def test_each_parameter_group_is_updated_in_place():
    onnxnn.manual_seed(0)
    # Both groups large enough for the compiled loop and the recycled buffers.
    model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, HIDDEN))
    optimizer = onnxnn.optim.Adam(_two_groups(model), lr=0.01)
    addresses = []
    for _ in range(4):
        optimizer.zero_grad()
        model(onnxnn.randn(8, IN_FEATURES)).square().mean().backward()
        optimizer.step()
        addresses.append([_address(tensor) for tensor in _tensors(model, optimizer)])
    assert addresses[1] == addresses[2] == addresses[3]


def test_a_failed_update_of_one_group_leaves_every_other_update_applied_once(monkeypatch):
    run_update = training.run_update

    def trained(failing_step: int | None) -> list:
        onnxnn.manual_seed(0)
        model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 3))
        optimizer = onnxnn.optim.Adam(_two_groups(model), lr=0.01)
        for step in range(5):
            optimizer.zero_grad()
            model(onnxnn.randn(8, IN_FEATURES)).square().mean().backward()
            calls = []

            def update(*arguments, fails=step == failing_step):
                calls.append(None)
                if fails and len(calls) == 2:  # the second group's, after the first's wrote in place
                    raise MemoryError("no memory for the second group's update")
                return run_update(*arguments)

            monkeypatch.setattr(training, "run_update", update)
            if step == failing_step:
                with pytest.raises(MemoryError):
                    optimizer.step()
            else:
                optimizer.step()  # the failed update's values still pending: computed with this step's
        return [tensor.detach().numpy().copy() for tensor in _tensors(model, optimizer)]

    for ours, expected in zip(trained(2), trained(None)):
        assert ours.tobytes() == expected.tobytes()


@pytest.fixture
def interrupts_raise():
    """SIGINT raising KeyboardInterrupt, as in a plain Python program (a test worker may ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("interrupts_raise")
@pytest.mark.parametrize("optimizer_name", ["adam", "sgd_momentum"])
def test_ctrl_c_during_an_update_in_place_stops_the_program_after_the_step(optimizer_name, monkeypatch):
    run_update = training.run_update

    def interrupted_at(step_to_interrupt: int | None) -> list:
        onnxnn.manual_seed(0)
        model = nn.Linear(IN_FEATURES, HIDDEN)
        optimizer = OPTIMIZERS[optimizer_name](model.parameters())
        for step in range(4):
            optimizer.zero_grad()
            model(onnxnn.randn(8, IN_FEATURES)).square().mean().backward()

            def update(*arguments, interrupt=step == step_to_interrupt):
                results = run_update(*arguments)
                if interrupt:  # as though Ctrl-C came right after the loop had written its results
                    signal.raise_signal(signal.SIGINT)
                return results

            monkeypatch.setattr(training, "run_update", update)
            if step == step_to_interrupt:
                with pytest.raises(KeyboardInterrupt):
                    optimizer.step()
            else:
                optimizer.step()
        return [tensor.detach().numpy().copy() for tensor in _tensors(model, optimizer)]

    for ours, expected in zip(interrupted_at(2), interrupted_at(None)):
        assert ours.tobytes() == expected.tobytes()
