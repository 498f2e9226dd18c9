"""onnxnn.optim.lr_scheduler's call-order warnings, as PyTorch's: a scheduler wraps its optimizer's ``step``.

- A scheduler's first ``step()`` warns "Detected call of `lr_scheduler.step()` before
  `optimizer.step()`" unless the optimizer's ``step`` was called after the scheduler was made: a
  step the optimizer took before the scheduler existed does not count.
- When the optimizer's ``step`` is replaced after the scheduler was made (so the scheduler's wrapper
  is gone), the first ``step()`` warns that ``optimizer.step()`` "has been overridden" instead.
- A ``step`` the caller replaced before the scheduler was made is wrapped as the original is:
  calling it counts, whether or not it calls the original (a step skipped on purpose).
- Every scheduler that steps through ``LRScheduler`` behaves so (ReduceLROnPlateau and
  CosineAnnealingWarmRestarts check nothing, as PyTorch's).
- The wrapper changes nothing else: the update, the closure's loss, step hooks running once per
  step, and no reference cycle (the optimizer is freed without the garbage collector).
"""

from __future__ import annotations

import gc
import re
import types
import warnings
import weakref

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import SGD, Adam
from onnxnn.optim import lr_scheduler
from onnxnn.optim.swa_utils import SWALR

EXECUTORS = ("onnxruntime", "kernels")

BEFORE = "Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"
OVERRIDDEN = "Seems like `optimizer.step\\(\\)` has been overridden after learning rate scheduler initialization"

SCHEDULERS = {
    "StepLR": lambda optimizer: lr_scheduler.StepLR(optimizer, step_size=1),
    "ExponentialLR": lambda optimizer: lr_scheduler.ExponentialLR(optimizer, gamma=0.5),
    "CosineAnnealingLR": lambda optimizer: lr_scheduler.CosineAnnealingLR(optimizer, T_max=4),
    "LinearLR": lambda optimizer: lr_scheduler.LinearLR(optimizer),
    "OneCycleLR": lambda optimizer: lr_scheduler.OneCycleLR(optimizer, max_lr=1.0, total_steps=10),
    "CyclicLR": lambda optimizer: lr_scheduler.CyclicLR(optimizer, 0.01, 0.1),
    "SWALR": lambda optimizer: SWALR(optimizer, swa_lr=0.01),
    "SequentialLR": lambda optimizer: lr_scheduler.SequentialLR(
        optimizer,
        [lr_scheduler.ConstantLR(optimizer, factor=0.5, total_iters=2), lr_scheduler.ExponentialLR(optimizer, 0.9)],
        milestones=[2],
    ),
    "ChainedScheduler": lambda optimizer: lr_scheduler.ChainedScheduler(
        [lr_scheduler.ConstantLR(optimizer, factor=0.5, total_iters=2), lr_scheduler.ExponentialLR(optimizer, 0.9)]
    ),
}

# Schedulers without the check, as PyTorch's: no order warning in any scenario.
UNCHECKED = {
    "ReduceLROnPlateau": lambda optimizer: lr_scheduler.ReduceLROnPlateau(optimizer),
    "CosineAnnealingWarmRestarts": lambda optimizer: lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=3),
}


def _skipping_step(self, closure=None):
    """A replacement step that updates nothing (as a gradient-accumulation wrapper between boundaries)."""
    return None


def _optimizer():
    return SGD([onnxnn.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)


def stepped_before_the_scheduler(make_scheduler):
    optimizer = _optimizer()
    optimizer.step()
    return make_scheduler(optimizer), optimizer


def scheduler_first(make_scheduler):
    optimizer = _optimizer()
    return make_scheduler(optimizer), optimizer


def replaced_after_the_scheduler(make_scheduler):
    optimizer = _optimizer()
    scheduler = make_scheduler(optimizer)
    optimizer.step = types.MethodType(_skipping_step, optimizer)
    optimizer.step()
    return scheduler, optimizer


def replaced_before_the_scheduler(make_scheduler):
    optimizer = _optimizer()
    optimizer.step = types.MethodType(_skipping_step, optimizer)
    scheduler = make_scheduler(optimizer)
    optimizer.step()
    return scheduler, optimizer


def replaced_by_a_function_before_the_scheduler(make_scheduler):
    optimizer = _optimizer()
    original = optimizer.step
    optimizer.step = lambda closure=None: original(closure)
    scheduler = make_scheduler(optimizer)
    optimizer.step()
    return scheduler, optimizer


def in_order(make_scheduler):
    optimizer = _optimizer()
    scheduler = make_scheduler(optimizer)
    optimizer.step()
    return scheduler, optimizer


# (scenario, the warning of the scheduler's first step(), None: none)
SCENARIOS = [
    (stepped_before_the_scheduler, BEFORE),
    (scheduler_first, BEFORE),
    (replaced_after_the_scheduler, OVERRIDDEN),
    (replaced_before_the_scheduler, None),
    (replaced_by_a_function_before_the_scheduler, None),
    (in_order, None),
]


def _first_step_warnings(scenario, make_scheduler, metric=False):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler, _ = scenario(make_scheduler)
        scheduler.step(1.0) if metric else scheduler.step()
    return [str(warning.message) for warning in caught if issubclass(warning.category, UserWarning)]


@pytest.mark.parametrize("name", list(SCHEDULERS))
@pytest.mark.parametrize("scenario, expected", SCENARIOS, ids=[scenario.__name__ for scenario, _ in SCENARIOS])
def test_the_first_scheduler_step_warns_as_pytorch_does(name, scenario, expected):
    messages = _first_step_warnings(scenario, SCHEDULERS[name])
    order_warnings = [message for message in messages if "optimizer.step()" in message]
    if expected is None:
        assert order_warnings == []
    else:  # one per scheduler stepped: ChainedScheduler steps both of its own
        assert len(order_warnings) == (2 if name == "ChainedScheduler" else 1)
        assert all(re.match(expected, message) for message in order_warnings)


@pytest.mark.parametrize("name", list(UNCHECKED))
@pytest.mark.parametrize("scenario", [scenario for scenario, _ in SCENARIOS], ids=lambda scenario: scenario.__name__)
def test_schedulers_without_the_check_never_warn(name, scenario):
    messages = _first_step_warnings(scenario, UNCHECKED[name], metric=name == "ReduceLROnPlateau")
    assert [message for message in messages if "optimizer.step()" in message] == []


@pytest.mark.parametrize("executor", EXECUTORS)
def test_the_wrapped_step_updates_runs_hooks_once_and_returns_the_loss(executor):
    with onnxnn.set_executor(executor):
        start = np.array([1.0, -2.0, 0.5], dtype=np.float32)
        gradients = [np.array([0.5, 0.25, -1.0], dtype=np.float32), np.array([-0.5, 1.0, 2.0], dtype=np.float32)]
        parameter = onnxnn.tensor(start.copy(), requires_grad=True)
        optimizer = Adam([parameter], lr=0.1)
        scheduler = lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
        calls = []
        optimizer.register_step_pre_hook(lambda *_: calls.append("pre"))
        optimizer.register_step_post_hook(lambda *_: calls.append("post"))
        expected = start.astype(np.float64)
        first_moment = np.zeros(3)
        second_moment = np.zeros(3)
        lr = 0.1
        for step, gradient in enumerate(gradients, start=1):
            parameter.grad = onnxnn.tensor(gradient)
            assert optimizer.step(lambda: 2.5) == 2.5
            scheduler.step()
            first_moment = 0.9 * first_moment + 0.1 * gradient
            second_moment = 0.999 * second_moment + 0.001 * gradient.astype(np.float64) ** 2
            denominator = np.sqrt(second_moment) / np.sqrt(1 - 0.999**step) + 1e-8
            expected = expected - lr / (1 - 0.9**step) * first_moment / denominator
            lr *= 0.5
        assert calls == ["pre", "post", "pre", "post"]
        np.testing.assert_allclose(parameter.detach().numpy(), expected, rtol=1e-6, atol=1e-6)
        assert optimizer.param_groups[0]["lr"] == pytest.approx(0.025)


def test_the_wrapper_makes_no_reference_cycle():
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        optimizer = _optimizer()
        scheduler = lr_scheduler.StepLR(optimizer, step_size=1)
        optimizer.step()
        scheduler.step()
        reference = weakref.ref(optimizer)
        del optimizer, scheduler
        assert reference() is None
    finally:
        if gc_was_enabled:
            gc.enable()


def test_a_second_scheduler_keeps_one_wrapper():
    optimizer = _optimizer()
    lr_scheduler.StepLR(optimizer, step_size=1)
    wrapped = optimizer.step
    second = lr_scheduler.ExponentialLR(optimizer, gamma=0.5)
    assert optimizer.step is wrapped
    optimizer.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.05)
