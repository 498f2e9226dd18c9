"""ConstantLR, LinearLR, PolynomialLR, MultiplicativeLR against PyTorch's documented closed forms.

Each scheduler's chainable steps must give, epoch by epoch, the closed forms of PyTorch's docs:
ConstantLR: base * (factor if epoch < total_iters else 1);
LinearLR: base * (start + (end - start) * min(epoch, total_iters) / total_iters);
PolynomialLR: base * (1 - min(epoch, total_iters) / total_iters) ** power;
MultiplicativeLR: base * prod_{k=1..epoch} lambda(k).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import lr_scheduler as S

BASE = 0.05
EPOCHS = 9


def _optimizer():
    return onnxnn.optim.SGD([onnxnn.nn.Parameter(onnxnn.zeros(2))], lr=BASE)


def _lrs(scheduler, optimizer):
    lrs = [optimizer.param_groups[0]["lr"]]
    for _ in range(EPOCHS - 1):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    return np.array(lrs)


CASES = {
    "constant": (
        lambda opt: S.ConstantLR(opt, factor=0.5, total_iters=4),
        lambda e: BASE * (0.5 if e < 4 else 1.0),
    ),
    "linear": (
        lambda opt: S.LinearLR(opt, start_factor=0.25, end_factor=0.75, total_iters=5),
        lambda e: BASE * (0.25 + 0.5 * min(e, 5) / 5),
    ),
    "polynomial": (
        lambda opt: S.PolynomialLR(opt, total_iters=6, power=2.0),
        lambda e: BASE * (1 - min(e, 6) / 6) ** 2,
    ),
    "multiplicative": (
        lambda opt: S.MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.9 if epoch % 2 else 0.5),
        lambda e: BASE * math.prod(0.9 if k % 2 else 0.5 for k in range(1, e + 1)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_steps_follow_the_documented_closed_form(name):
    make, closed_form = CASES[name]
    optimizer = _optimizer()
    lrs = _lrs(make(optimizer), optimizer)
    expected = np.array([closed_form(epoch) for epoch in range(EPOCHS)])
    # Each step multiplies by a ratio: at most two roundings per epoch, relative to the lr.
    np.testing.assert_allclose(lrs, expected, rtol=4 * EPOCHS * 2.0**-53, atol=4 * EPOCHS * 2.0**-53 * BASE)


@pytest.mark.parametrize("name", ["constant", "linear", "polynomial"])
def test_closed_form_through_step_with_an_epoch(name):
    make, closed_form = CASES[name]
    optimizer = _optimizer()
    scheduler = make(optimizer)
    with pytest.warns(UserWarning):
        scheduler.step(3)
    np.testing.assert_allclose(optimizer.param_groups[0]["lr"], closed_form(3), rtol=1e-15)


@pytest.mark.parametrize("name", sorted(CASES))
def test_state_dict_round_trip_resumes_the_sequence(name):
    make, closed_form = CASES[name]
    optimizer = _optimizer()
    scheduler = make(optimizer)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    assert state["last_epoch"] == 3 and "optimizer" not in state
    resumed_optimizer = _optimizer()
    resumed_optimizer.param_groups[0]["lr"] = optimizer.param_groups[0]["lr"]
    resumed = make(resumed_optimizer)
    resumed.load_state_dict(state)
    resumed_optimizer.param_groups[0]["lr"] = optimizer.param_groups[0]["lr"]
    resumed_optimizer.step()
    resumed.step()
    np.testing.assert_allclose(resumed_optimizer.param_groups[0]["lr"], closed_form(4), rtol=1e-14, atol=1e-17)


def test_bad_factors_raise_pytorchs_errors():
    with pytest.raises(ValueError, match="Constant multiplicative factor expected to be between 0 and 1."):
        S.ConstantLR(_optimizer(), factor=1.5)
    with pytest.raises(ValueError, match="Starting multiplicative factor expected to be greater than 0"):
        S.LinearLR(_optimizer(), start_factor=0)
    with pytest.raises(ValueError, match="Ending multiplicative factor expected to be between 0 and 1."):
        S.LinearLR(_optimizer(), end_factor=-0.1)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas, but got 2"):
        S.MultiplicativeLR(_optimizer(), lr_lambda=[lambda e: 1.0, lambda e: 1.0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    torch = pytest.importorskip("torch")
    torch_classes = {
        "constant": lambda opt: torch.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=4),
        "linear": lambda opt: torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, end_factor=0.75, total_iters=5),
        "polynomial": lambda opt: torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=6, power=2.0),
        "multiplicative": lambda opt: torch.optim.lr_scheduler.MultiplicativeLR(
            opt, lr_lambda=lambda epoch: 0.9 if epoch % 2 else 0.5
        ),
    }
    torch_optimizer = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=BASE)
    expected = _lrs(torch_classes[name](torch_optimizer), torch_optimizer)
    optimizer = _optimizer()
    np.testing.assert_array_equal(_lrs(CASES[name][0](optimizer), optimizer), expected)


@pytest.mark.parametrize(
    "lr, start_factor, end_factor, total_iters",
    [(0.3, 0.2, 1.0, 6), (0.05, 0.2, 0.7, 13), (0.1, 0.25, 0.75, 5)],
)
def test_linear_closed_form_matches_torch_bit_for_bit(lr, start_factor, end_factor, total_iters):
    """``step(epoch)`` uses the closed form, ``(end - start) * min(total_iters, epoch) / total_iters``
    evaluated left to right as PyTorch writes it (dividing first is an ulp off at some epochs)."""
    torch = pytest.importorskip("torch")
    results = []
    for library in (onnxnn, torch):
        optimizer = library.optim.SGD([library.zeros(2, requires_grad=True)], lr=lr)
        scheduler = library.optim.lr_scheduler.LinearLR(optimizer, start_factor, end_factor, total_iters)
        lrs = []
        for epoch in range(total_iters + 3):
            optimizer.step()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the epoch argument is deprecated, in both libraries
                scheduler.step(epoch)
            lrs.append(scheduler.get_last_lr()[0])
        results.append(lrs)
    assert results[0] == results[1]
