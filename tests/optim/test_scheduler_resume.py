"""Learning-rate schedulers resumed with ``last_epoch=N``, and their state dicts, as in PyTorch 2.13.

PyTorch 2.13 takes the step a scheduler makes at construction in "initial mode" (``_is_initial``):
the chainable forms of ExponentialLR, MultiplicativeLR, CosineAnnealingLR, LinearLR and
PolynomialLR leave the lr as the optimizer holds it, so a resumed schedule continues from the
checkpoint's lr instead of decaying it once more. The expected sequences are those chainable
formulas written out from that lr.
"""

from __future__ import annotations

import math
import warnings

import pytest

import onnxnn
from onnxnn.optim import SGD
from onnxnn.optim.lr_scheduler import (
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    ExponentialLR,
    LinearLR,
    MultiplicativeLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SequentialLR,
    StepLR,
)

RESUMED_AT = 5


def _resumable_optimizer(lr: float = 1.0) -> SGD:
    """An optimizer as a checkpoint restores it: its lr and the ``initial_lr`` its scheduler recorded."""
    return SGD([{"params": [onnxnn.zeros(2, requires_grad=True)], "lr": lr, "initial_lr": 1.0}])


def _lrs(scheduler, optimizer, steps: int) -> list[float]:
    """The lr after construction, then after each of ``steps`` steps."""
    lrs = [optimizer.param_groups[0]["lr"]]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    return lrs


def _cosine_step(lr: float, epoch: int, t_max: int, eta_min: float = 0.0) -> float:
    """CosineAnnealingLR's chainable form from ``epoch - 1`` to ``epoch``."""
    ratio = (1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1) / t_max))
    return ratio * (lr - eta_min) + eta_min


def _linear_step(lr: float, epoch: int, start: float, end: float, total: int) -> float:
    return lr * (1.0 + (end - start) / (total * start + (epoch - 1) * (end - start)))


def _polynomial_step(lr: float, epoch: int, total: int, power: float) -> float:
    return lr * ((1.0 - epoch / total) / (1.0 - (epoch - 1) / total)) ** power


# Resumed at epoch 5, construction moves last_epoch to 6 without touching the lr; steps reach 7, 8.
CHAINABLE = {
    "ExponentialLR": (lambda o: ExponentialLR(o, gamma=0.5, last_epoch=RESUMED_AT), [1.0, 0.5, 0.25]),
    "MultiplicativeLR": (
        lambda o: MultiplicativeLR(o, lambda epoch: 0.5, last_epoch=RESUMED_AT),
        [1.0, 0.5, 0.25],
    ),
    "CosineAnnealingLR": (
        lambda o: CosineAnnealingLR(o, T_max=10, last_epoch=RESUMED_AT),
        [1.0, _cosine_step(1.0, 7, 10), _cosine_step(_cosine_step(1.0, 7, 10), 8, 10)],
    ),
    "LinearLR": (
        lambda o: LinearLR(o, start_factor=1 / 3, total_iters=10, last_epoch=RESUMED_AT),
        [
            1.0,
            _linear_step(1.0, 7, 1 / 3, 1.0, 10),
            _linear_step(_linear_step(1.0, 7, 1 / 3, 1.0, 10), 8, 1 / 3, 1.0, 10),
        ],
    ),
    "PolynomialLR": (
        lambda o: PolynomialLR(o, total_iters=10, power=2.0, last_epoch=RESUMED_AT),
        [1.0, _polynomial_step(1.0, 7, 10, 2.0), _polynomial_step(_polynomial_step(1.0, 7, 10, 2.0), 8, 10, 2.0)],
    ),
}


@pytest.mark.parametrize("name", sorted(CHAINABLE))
def test_a_resumed_scheduler_keeps_the_lr_at_construction_then_continues(name):
    make, expected = CHAINABLE[name]
    optimizer = _resumable_optimizer()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scheduler = make(optimizer)
        lrs = _lrs(scheduler, optimizer, 2)
    assert scheduler.last_epoch == RESUMED_AT + 3
    assert lrs == pytest.approx(expected, rel=1e-12)


def test_a_resumed_step_lr_still_decays_at_construction_on_its_step_boundary():
    # StepLR has no initial mode in PyTorch: resumed at 5 with step_size 3, epoch 6 is a boundary.
    optimizer = _resumable_optimizer()
    StepLR(optimizer, step_size=3, gamma=0.1, last_epoch=RESUMED_AT)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1, rel=1e-15)


def test_a_fresh_schedule_starts_at_its_initial_values():
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=1.0)
    assert _lrs(ExponentialLR(optimizer, gamma=0.5), optimizer, 2) == [1.0, 0.5, 0.25]
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=1.0)
    assert _lrs(LinearLR(optimizer, start_factor=0.5, total_iters=2), optimizer, 2) == [0.5, 0.75, 1.0]


def test_warm_restarts_resumed_count_epochs_from_the_last_restart():
    # T_cur starts at last_epoch + 1 = 6 and wraps by the remainder: 6 % 3 = 0, the start of a period.
    optimizer = _resumable_optimizer(0.3)
    scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=3, eta_min=0.0, last_epoch=RESUMED_AT)
    assert scheduler.T_cur == 0
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1.0, rel=1e-15)
    assert scheduler.state_dict()["_step_count"] == 0  # PyTorch's warm restarts never count steps


def test_multiplicative_lr_refuses_a_factor_that_is_not_callable():
    with pytest.raises(TypeError, match="lr_lambda should be a function, but got float"):
        MultiplicativeLR(_resumable_optimizer(), 0.5)


def test_sequential_lr_hands_over_without_the_epoch_deprecation_warning():
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=1.0)
    scheduler = SequentialLR(
        optimizer, [ConstantLR(optimizer, factor=0.5, total_iters=2), ExponentialLR(optimizer, gamma=0.5)], [2]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lrs = _lrs(scheduler, optimizer, 3)
    assert lrs == [0.5, 0.5, 1.0, 0.5]  # the exponential decay starts at its own epoch 0 (closed form)


def test_sequential_lr_takes_back_the_construction_steps_of_nested_schedulers():
    # PyTorch's recursive_undo: the inner SequentialLR's own schedulers are set back one epoch too, so
    # the inner one restarts its ConstantLR (0.5 at epoch 0), hands over to the exponential decay at
    # its epoch 2 (closed form: 1.0, then 0.8, 0.64), and the StepLR takes over at epoch 4 (closed
    # form 1.0, halved every 2 of its epochs).
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the inner schedulers step before the optimizer, as in PyTorch
        inner = SequentialLR(
            optimizer, [ConstantLR(optimizer, factor=0.5, total_iters=2), ExponentialLR(optimizer, gamma=0.8)], [2]
        )
        scheduler = SequentialLR(optimizer, [inner, StepLR(optimizer, step_size=2, gamma=0.5)], [4])
    lrs = _lrs(scheduler, optimizer, 7)
    assert lrs == pytest.approx([0.5, 1.0, 0.8, 0.64, 1.0, 1.0, 0.5, 0.5], rel=1e-12)


def test_state_dicts_hold_pytorch_2_13s_keys():
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=0.1)
    state = StepLR(optimizer, step_size=3).state_dict()
    assert sorted(state) == [
        "_get_lr_called_within_step",
        "_is_initial",
        "_last_lr",
        "_step_count",
        "base_lrs",
        "gamma",
        "last_epoch",
        "step_size",
    ]
    assert state["_is_initial"] is False
    assert "verbose" not in ReduceLROnPlateau(optimizer).state_dict()
