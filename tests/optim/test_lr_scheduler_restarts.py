"""CosineAnnealingWarmRestarts against SGDR's formula: eta_min + (base - eta_min)(1 + cos(pi T_cur / T_i)) / 2."""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn.optim.lr_scheduler import CosineAnnealingWarmRestarts

BASE, ETA_MIN = 0.1, 0.01


def _optimizer():
    return onnxnn.optim.SGD([onnxnn.nn.Parameter(onnxnn.zeros(2))], lr=BASE)


def _sgdr(epoch, T_0, T_mult):
    # Periods T_0, T_0 * T_mult, ...: find the one containing ``epoch``.
    start, period = 0, T_0
    while epoch >= start + period:
        start, period = start + period, period * T_mult
    return ETA_MIN + (BASE - ETA_MIN) * (1 + math.cos(math.pi * (epoch - start) / period)) / 2


@pytest.mark.parametrize("T_mult", [1, 2])
def test_steps_follow_sgdr(T_mult):
    optimizer = _optimizer()
    scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=3, T_mult=T_mult, eta_min=ETA_MIN)
    lrs = [optimizer.param_groups[0]["lr"]]
    for _ in range(15):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    expected = [_sgdr(epoch, 3, T_mult) for epoch in range(16)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-14)


def test_fractional_epochs_and_state_dict():
    optimizer = _optimizer()
    scheduler = CosineAnnealingWarmRestarts(optimizer, T_0=2, T_mult=2, eta_min=ETA_MIN)
    scheduler.step(7.5)  # periods [0, 2), [2, 6), [6, 14): T_cur = 1.5 of 8
    np.testing.assert_allclose(optimizer.param_groups[0]["lr"], _sgdr(7.5, 2, 2), rtol=1e-14)
    state = scheduler.state_dict()
    assert state["T_i"] == 8 and state["T_cur"] == 1.5 and state["last_epoch"] == 7
    restored = CosineAnnealingWarmRestarts(_optimizer(), T_0=2)
    restored.load_state_dict(state)
    assert (restored.T_i, restored.T_mult, restored.T_cur) == (8, 2, 1.5)


def test_bad_arguments_raise_pytorchs_errors():
    with pytest.raises(ValueError, match="Expected positive integer T_0, but got 0"):
        CosineAnnealingWarmRestarts(_optimizer(), T_0=0)
    with pytest.raises(ValueError, match="Expected integer T_mult >= 1, but got 0.5"):
        CosineAnnealingWarmRestarts(_optimizer(), T_0=2, T_mult=0.5)
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        CosineAnnealingWarmRestarts(_optimizer(), T_0=2).step(-1)


def test_matches_torch():
    torch = pytest.importorskip("torch")
    torch_optimizer = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=BASE)
    torch_scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(torch_optimizer, 3, 2, ETA_MIN)
    optimizer = _optimizer()
    scheduler = CosineAnnealingWarmRestarts(optimizer, 3, 2, ETA_MIN)
    for _ in range(12):
        torch_optimizer.step()
        torch_scheduler.step()
        optimizer.step()
        scheduler.step()
        assert optimizer.param_groups[0]["lr"] == torch_optimizer.param_groups[0]["lr"]
