"""SequentialLR, ChainedScheduler and CyclicLR against PyTorch's documented formulas.

SequentialLR: scheduler i runs from milestone i-1 on, restarted at its own epoch 0 (so a decay
after a warm-up starts from the base lr); ChainedScheduler: the factors of its schedulers
multiply; CyclicLR (triangular): lr = base + (max - base) * max(0, 1 - |e / s - 2c + 1|) with
cycle c = floor(1 + e / 2s) for equal halves of s steps, the amplitude halved each cycle for
triangular2 and multiplied by gamma**e for exp_range; momentum moves inversely.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import lr_scheduler as S

BASE = 0.1


def _sgd(lr=BASE, momentum=0.9):
    return onnxnn.optim.SGD([onnxnn.nn.Parameter(onnxnn.zeros(2))], lr=lr, momentum=momentum)


def _run(scheduler, optimizer, steps, key="lr"):
    values = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SequentialLR's step(0) at a milestone warns, as in PyTorch
        for _ in range(steps):
            group = optimizer.param_groups[0]
            values.append(group[key] if key != "beta1" else group["betas"][0])
            optimizer.step()
            scheduler.step()
    return np.array(values)


def test_sequential_lr_warm_up_then_exponential_decay():
    optimizer = _sgd()
    warmup = S.ConstantLR(optimizer, factor=0.1, total_iters=2)
    decay = S.ExponentialLR(optimizer, gamma=0.9)
    scheduler = S.SequentialLR(optimizer, schedulers=[warmup, decay], milestones=[2])
    expected = [BASE * 0.1, BASE * 0.1] + [BASE * 0.9 ** (e - 2) for e in range(2, 8)]
    np.testing.assert_allclose(_run(scheduler, optimizer, 8), expected, rtol=1e-12)


def test_chained_scheduler_multiplies_the_factors():
    optimizer = _sgd()
    scheduler = S.ChainedScheduler(
        [S.ConstantLR(optimizer, factor=0.1, total_iters=2), S.ExponentialLR(optimizer, gamma=0.9)]
    )
    expected = [BASE * 0.9**e * (0.1 if e < 2 else 1.0) for e in range(8)]
    np.testing.assert_allclose(_run(scheduler, optimizer, 8), expected, rtol=1e-12)


def _triangle(e: int, s: int) -> tuple[float, int]:
    cycle = math.floor(1 + e / (2 * s))
    return max(0.0, 1 - abs(e / s - 2 * cycle + 1)), cycle


@pytest.mark.parametrize(
    "mode, amplitude",
    [
        ("triangular", lambda e, cycle: 1.0),
        ("triangular2", lambda e, cycle: 1 / 2 ** (cycle - 1)),
        ("exp_range", lambda e, cycle: 0.97**e),
    ],
)
def test_cyclic_lr_modes_and_inverse_momentum(mode, amplitude):
    optimizer = _sgd()
    scheduler = S.CyclicLR(optimizer, base_lr=0.01, max_lr=0.1, step_size_up=3, mode=mode, gamma=0.97)
    lrs = _run(scheduler, optimizer, 20)
    optimizer = _sgd()
    scheduler = S.CyclicLR(optimizer, base_lr=0.01, max_lr=0.1, step_size_up=3, mode=mode, gamma=0.97)
    momenta = _run(scheduler, optimizer, 20, key="momentum")
    for e in range(20):
        height, cycle = _triangle(e, 3)
        scale = amplitude(e, cycle)
        assert lrs[e] == pytest.approx(0.01 + 0.09 * height * scale, rel=1e-12)
        assert momenta[e] == pytest.approx(0.9 - 0.1 * height * scale, rel=1e-12)


def test_cyclic_lr_uneven_halves_custom_scale_and_adam_betas():
    optimizer = onnxnn.optim.Adam([onnxnn.nn.Parameter(onnxnn.zeros(2))], lr=0.5)
    scheduler = S.CyclicLR(
        optimizer,
        base_lr=0.0,
        max_lr=1.0,
        step_size_up=2,
        step_size_down=4,
        scale_fn=lambda x: 0.5,
        scale_mode="iterations",
    )
    assert _run(scheduler, optimizer, 7).tolist() == pytest.approx([0.0, 0.25, 0.5, 0.375, 0.25, 0.125, 0.0])
    # After the seventh step (epoch 7: half-way up the second cycle) beta1 = 0.9 - 0.1 * 0.5 * 0.5.
    assert optimizer.param_groups[0]["betas"][0] == pytest.approx(0.9 - 0.1 * 0.5 * 0.5)


def test_state_dicts_round_trip():
    optimizer = _sgd()
    scheduler = S.SequentialLR(
        optimizer,
        [S.ConstantLR(optimizer, factor=0.5, total_iters=2), S.StepLR(optimizer, step_size=2)],
        milestones=[3],
    )
    _run(scheduler, optimizer, 4)
    state = scheduler.state_dict()
    assert isinstance(state["_schedulers"][0], dict)
    restored_optimizer = _sgd()
    restored = S.SequentialLR(
        restored_optimizer,
        [S.ConstantLR(restored_optimizer, factor=0.5, total_iters=2), S.StepLR(restored_optimizer, step_size=2)],
        milestones=[3],
    )
    restored.load_state_dict(state)
    assert restored.last_epoch == scheduler.last_epoch
    assert restored._schedulers[1].last_epoch == scheduler._schedulers[1].last_epoch
    cyclic = S.CyclicLR(_sgd(), 0.01, 0.1, step_size_up=2, scale_fn=lambda x: 1.0)
    assert cyclic.state_dict()["_scale_fn_custom"] is None  # a function is not saved, as in PyTorch


@pytest.mark.parametrize(
    "build, error, message",
    [
        (lambda o: S.SequentialLR(o, [], []), ValueError, "expects at least one scheduler"),
        (
            lambda o: S.SequentialLR(o, [S.StepLR(o, 2), S.StepLR(o, 3)], []),
            ValueError,
            "one more than the number of milestone",
        ),
        (
            lambda o: S.SequentialLR(o, [S.StepLR(_sgd(), 2)], []),
            ValueError,
            "expects all schedulers to belong to the same optimizer",
        ),
        (lambda o: S.ChainedScheduler([S.ReduceLROnPlateau(o)]), ValueError, "does not support `ReduceLROnPlateau`"),
        (lambda o: S.ChainedScheduler([object()], o), TypeError, "should have `optimizer` as its attribute"),
        (lambda o: S.CyclicLR(o, 0.01, 0.1, mode="sawtooth"), ValueError, "mode is invalid and scale_fn is None"),
        (
            lambda o: S.CyclicLR(onnxnn.optim.Adagrad([onnxnn.nn.Parameter(onnxnn.zeros(1))]), 0.01, 0.1),
            ValueError,
            "optimizer must support momentum or beta1",
        ),
    ],
)
def test_bad_arguments(build, error, message):
    with pytest.raises(error, match=message):
        build(_sgd())


def test_matches_torch_when_installed():
    torch = pytest.importorskip("torch")

    def torch_lrs(make, steps):
        parameter = torch.nn.Parameter(torch.zeros(2))
        optimizer = torch.optim.SGD([parameter], lr=BASE, momentum=0.9)
        scheduler = make(torch.optim.lr_scheduler, optimizer)
        return _run(scheduler, optimizer, steps)

    def ours(make, steps):
        optimizer = _sgd()
        return _run(make(S, optimizer), optimizer, steps)

    makers = [
        lambda m, o: m.SequentialLR(
            o, [m.LinearLR(o, 0.2, total_iters=3), m.CosineAnnealingLR(o, T_max=5)], milestones=[3]
        ),
        lambda m, o: m.ChainedScheduler([m.StepLR(o, 2, gamma=0.5), m.ExponentialLR(o, gamma=0.95)]),
        lambda m, o: m.CyclicLR(o, 0.01, 0.2, step_size_up=3, step_size_down=5, mode="triangular2"),
    ]
    for make in makers:
        np.testing.assert_allclose(ours(make, 15), torch_lrs(make, 15), rtol=1e-12)


@pytest.mark.parametrize(
    "build",
    [
        lambda opt: S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9)], milestones=[2]),
        lambda opt: S.ChainedScheduler([S.ExponentialLR(opt, 0.9)]),
    ],
    ids=["SequentialLR", "ChainedScheduler"],
)
@pytest.mark.parametrize("epoch", [(10,), {"epoch": 10}], ids=["positional", "keyword"])
def test_schedulers_of_schedulers_take_no_epoch(build, epoch):
    # PyTorch's step() has no epoch: the deprecated step(epoch) is a TypeError, not a silent step.
    optimizer = _sgd()
    scheduler = build(optimizer)
    name = type(scheduler).__name__
    message = f"{name}.step() takes 1 positional argument but 2 were given" if isinstance(epoch, tuple) else "epoch"
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scheduler.step(*epoch) if isinstance(epoch, tuple) else scheduler.step(**epoch)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(BASE * (0.5 if name == "SequentialLR" else 1.0))
