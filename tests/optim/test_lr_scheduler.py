"""onnxnn.optim.lr_scheduler: learning-rate sequences against closed forms, state dicts, and recompilation."""

from __future__ import annotations

import math
import pickle
import warnings
from bisect import bisect_right

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import SGD, Adagrad, Adam, AdamW, RMSprop
from onnxnn.optim import lr_scheduler
from onnxnn.optim.lr_scheduler import (
    CosineAnnealingLR,
    ExponentialLR,
    LambdaLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    ReduceLROnPlateau,
    StepLR,
)
from onnxnn.runtime import realization as executor


def make_optimizer(lrs=(0.1,), optimizer_class=SGD, **options):
    """An optimizer with one param group per lr (parameters have no gradient: steps are no-ops)."""
    groups = [{"params": [onnxnn.zeros(2, requires_grad=True)], "lr": lr} for lr in lrs]
    return optimizer_class(groups, **options)


def lr_sequence(scheduler, optimizer, epochs):
    """The lrs of every group at epochs 0..epochs-1 (optimizer.step() before scheduler.step(), as documented)."""
    sequence = []
    for _ in range(epochs):
        sequence.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    return np.array(sequence)


def closed_form_cosine(base_lr, eta_min, T_max, epoch):
    return eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * epoch / T_max)) / 2


def closed_form_one_cycle(
    step,
    total_steps,
    max_lr,
    pct_start=0.3,
    anneal_strategy="cos",
    div_factor=25.0,
    final_div_factor=1e4,
    three_phase=False,
    base_momentum=0.85,
    max_momentum=0.95,
):
    """The 1cycle schedule (lr, momentum) at ``step``, as PyTorch's documentation lays out its phases."""
    initial_lr = max_lr / div_factor
    min_lr = initial_lr / final_div_factor
    if anneal_strategy == "cos":

        def anneal(start, end, pct):
            return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)
    else:

        def anneal(start, end, pct):
            return start + (end - start) * pct

    warmup_end = pct_start * total_steps - 1
    if three_phase:
        phases = [
            (warmup_end, initial_lr, max_lr, max_momentum, base_momentum),
            (2 * pct_start * total_steps - 2, max_lr, initial_lr, base_momentum, max_momentum),
            (total_steps - 1, initial_lr, min_lr, max_momentum, max_momentum),
        ]
    else:
        phases = [
            (warmup_end, initial_lr, max_lr, max_momentum, base_momentum),
            (total_steps - 1, max_lr, min_lr, base_momentum, max_momentum),
        ]
    start = 0.0
    for index, (end, lr_start, lr_end, momentum_start, momentum_end) in enumerate(phases):
        if step <= end or index == len(phases) - 1:
            pct = (step - start) / (end - start)
            return anneal(lr_start, lr_end, pct), anneal(momentum_start, momentum_end, pct)
        start = end


CLOSED_FORM_CASES = [
    ("StepLR", lambda opt: StepLR(opt, step_size=3, gamma=0.5), lambda base, epoch: base * 0.5 ** (epoch // 3)),
    (
        "MultiStepLR",
        lambda opt: MultiStepLR(opt, milestones=[2, 5, 5, 9], gamma=0.1),
        lambda base, epoch: base * 0.1 ** bisect_right([2, 5, 5, 9], epoch),
    ),
    ("ExponentialLR", lambda opt: ExponentialLR(opt, gamma=0.9), lambda base, epoch: base * 0.9**epoch),
    (
        "CosineAnnealingLR",
        lambda opt: CosineAnnealingLR(opt, T_max=5, eta_min=0.001),
        lambda base, epoch: closed_form_cosine(base, 0.001, 5, epoch),
    ),
    (
        "CosineAnnealingLR-eta_min=0",
        lambda opt: CosineAnnealingLR(opt, T_max=4),
        lambda base, epoch: closed_form_cosine(base, 0.0, 4, epoch),
    ),
    (
        "LambdaLR",
        lambda opt: LambdaLR(opt, lr_lambda=lambda epoch: 1 / (1 + epoch)),
        lambda base, epoch: base / (1 + epoch),
    ),
]


@pytest.mark.parametrize("name, make_scheduler, closed_form", CLOSED_FORM_CASES, ids=[c[0] for c in CLOSED_FORM_CASES])
def test_chainable_lrs_follow_the_closed_form(name, make_scheduler, closed_form):
    base_lrs = (0.1, 0.02)
    optimizer = make_optimizer(base_lrs)
    scheduler = make_scheduler(optimizer)
    sequence = lr_sequence(scheduler, optimizer, 16)
    expected = np.array([[closed_form(base, epoch) for base in base_lrs] for epoch in range(16)])
    np.testing.assert_allclose(sequence, expected, rtol=1e-9, atol=1e-12)
    assert scheduler.get_last_lr() == [group["lr"] for group in optimizer.param_groups]
    assert scheduler.last_epoch == 16
    assert [group["initial_lr"] for group in optimizer.param_groups] == list(base_lrs)
    assert scheduler.base_lrs == list(base_lrs)


@pytest.mark.parametrize(
    "name, make_scheduler, closed_form", CLOSED_FORM_CASES[:4], ids=[c[0] for c in CLOSED_FORM_CASES[:4]]
)
def test_step_with_an_epoch_uses_the_closed_form_and_warns(name, make_scheduler, closed_form):
    optimizer = make_optimizer((0.1,))
    scheduler = make_scheduler(optimizer)
    optimizer.step()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        scheduler.step(7)
    assert math.isclose(optimizer.param_groups[0]["lr"], closed_form(0.1, 7), rel_tol=1e-12)


def test_lambda_lr_takes_one_function_per_group():
    optimizer = make_optimizer((1.0, 2.0))
    scheduler = LambdaLR(optimizer, [lambda epoch: 0.5**epoch, lambda epoch: epoch + 1])
    sequence = lr_sequence(scheduler, optimizer, 4)
    np.testing.assert_allclose(sequence, [[1.0, 2.0], [0.5, 4.0], [0.25, 6.0], [0.125, 8.0]])
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        LambdaLR(optimizer, [lambda epoch: 1.0])


def test_lambda_lr_state_dict_saves_callable_objects_but_not_functions():
    class Decay:
        def __init__(self, factor):
            self.factor = factor

        def __call__(self, epoch):
            return self.factor**epoch

    optimizer = make_optimizer((1.0, 1.0))
    scheduler = LambdaLR(optimizer, [Decay(0.5), lambda epoch: 1.0])
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [{"factor": 0.5}, None] and "optimizer" not in state
    other = LambdaLR(make_optimizer((1.0, 1.0)), [Decay(0.9), lambda epoch: 1.0])
    other.load_state_dict(state)
    assert other.lr_lambdas[0].factor == 0.5


def test_cosine_annealing_resumed_from_an_epoch_keeps_the_lr_it_had():
    # PyTorch 2.13: the step a resumed scheduler takes when constructed leaves the lr as it is.
    optimizer = make_optimizer((0.1,))
    scheduler = CosineAnnealingLR(optimizer, T_max=10)
    lr_sequence(scheduler, optimizer, 3)
    resumed = CosineAnnealingLR(optimizer, T_max=10, last_epoch=3)
    assert math.isclose(optimizer.param_groups[0]["lr"], closed_form_cosine(0.1, 0.0, 10, 3), rel_tol=1e-12)
    assert resumed.last_epoch == 4


def test_resuming_without_initial_lr_raises_key_error():
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\] when resuming"):
        StepLR(make_optimizer((0.1,)), step_size=2, last_epoch=4)


def test_scheduler_requires_an_optimizer():
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        StepLR([], step_size=2)


# PyTorch 2.13 removed the schedulers' deprecated ``verbose`` argument: passing it is a TypeError.
VERBOSE_REFUSERS = [
    ("StepLR", lambda opt, **kw: StepLR(opt, 2, **kw)),
    ("MultiStepLR", lambda opt, **kw: MultiStepLR(opt, [2], **kw)),
    ("ExponentialLR", lambda opt, **kw: ExponentialLR(opt, 0.9, **kw)),
    ("CosineAnnealingLR", lambda opt, **kw: CosineAnnealingLR(opt, 10, **kw)),
    ("LambdaLR", lambda opt, **kw: LambdaLR(opt, lambda epoch: 1.0, **kw)),
    ("MultiplicativeLR", lambda opt, **kw: lr_scheduler.MultiplicativeLR(opt, lambda epoch: 1.0, **kw)),
    ("ConstantLR", lambda opt, **kw: lr_scheduler.ConstantLR(opt, **kw)),
    ("LinearLR", lambda opt, **kw: lr_scheduler.LinearLR(opt, **kw)),
    ("PolynomialLR", lambda opt, **kw: lr_scheduler.PolynomialLR(opt, **kw)),
    ("OneCycleLR", lambda opt, **kw: OneCycleLR(opt, 1.0, total_steps=10, **kw)),
    ("CyclicLR", lambda opt, **kw: lr_scheduler.CyclicLR(opt, 0.01, 0.1, **kw)),
    ("CosineAnnealingWarmRestarts", lambda opt, **kw: lr_scheduler.CosineAnnealingWarmRestarts(opt, 5, **kw)),
    ("SequentialLR", lambda opt, **kw: lr_scheduler.SequentialLR(opt, [StepLR(opt, 2)], [], **kw)),
    ("ReduceLROnPlateau", lambda opt, **kw: ReduceLROnPlateau(opt, **kw)),
]


@pytest.mark.parametrize("verbose", [True, False, "deprecated"])
@pytest.mark.parametrize("name, make_scheduler", VERBOSE_REFUSERS, ids=[case[0] for case in VERBOSE_REFUSERS])
def test_schedulers_refuse_the_removed_verbose_argument(name, make_scheduler, verbose):
    with pytest.raises(TypeError, match="unexpected keyword argument 'verbose'"):
        make_scheduler(make_optimizer(), verbose=verbose)
    make_scheduler(make_optimizer())  # the same call without it builds the scheduler


@pytest.mark.parametrize(
    "options",
    [
        dict(total_steps=20),
        dict(epochs=4, steps_per_epoch=5, pct_start=0.25, anneal_strategy="linear"),
        dict(total_steps=20, three_phase=True, div_factor=10.0, final_div_factor=100.0),
        dict(total_steps=20, base_momentum=0.8, max_momentum=0.9, pct_start=0.4),
    ],
)
def test_one_cycle_lr_and_momentum_follow_the_schedule(options):
    optimizer = make_optimizer((0.1,), momentum=0.9)
    scheduler = OneCycleLR(optimizer, max_lr=1.0, **options)
    total = options.get("total_steps") or options["epochs"] * options["steps_per_epoch"]
    reference_options = {k: v for k, v in options.items() if k not in ("total_steps", "epochs", "steps_per_epoch")}
    for step in range(total):
        expected_lr, expected_momentum = closed_form_one_cycle(step, total, 1.0, **reference_options)
        group = optimizer.param_groups[0]
        assert math.isclose(group["lr"], expected_lr, rel_tol=1e-12, abs_tol=1e-15), step
        assert math.isclose(group["momentum"], expected_momentum, rel_tol=1e-12), step
        optimizer.step()
        scheduler.step()
    with pytest.raises(
        ValueError, match=f"Tried to step {total + 1} times. The specified number of total steps is {total}"
    ):
        scheduler.step()


def test_one_cycle_anchors_and_adam_betas():
    optimizer = make_optimizer((0.1,), optimizer_class=Adam, betas=(0.9, 0.99))
    scheduler = OneCycleLR(optimizer, max_lr=0.5, total_steps=10)
    group = optimizer.param_groups[0]
    assert math.isclose(group["lr"], 0.5 / 25) and group["betas"] == (0.95, 0.99)
    assert group["max_lr"] == 0.5 and math.isclose(group["min_lr"], 0.5 / 25 / 1e4)
    lrs, beta1s = [], []
    for _ in range(10):
        lrs.append(group["lr"])
        beta1s.append(group["betas"][0])
        optimizer.step()
        scheduler.step()
    assert math.isclose(lrs[2], 0.5)  # the peak at pct_start * total_steps - 1
    assert math.isclose(beta1s[2], 0.85)
    assert math.isclose(lrs[-1], 0.5 / 25 / 1e4, rel_tol=1e-9) and math.isclose(beta1s[-1], 0.95)
    assert group["betas"][1] == 0.99


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(), "You must define either total_steps OR \\(epochs AND steps_per_epoch\\)"),
        (dict(total_steps=0), "Expected positive integer total_steps, but got 0"),
        (dict(epochs=0, steps_per_epoch=3), "Expected positive integer epochs, but got 0"),
        (dict(total_steps=10, pct_start=1.5), "Expected float between 0 and 1 pct_start, but got 1.5"),
        (
            dict(total_steps=10, anneal_strategy="exp"),
            "anneal_strategy must be one of 'cos' or 'linear', instead got exp",
        ),
        (dict(total_steps=10, max_lr=[1.0, 2.0]), "max_lr must have the same length as optimizer.param_groups"),
    ],
)
def test_one_cycle_rejects_bad_arguments_without_touching_the_optimizer(options, message):
    optimizer = make_optimizer((0.1,), momentum=0.9)
    options = {"max_lr": 1.0, **options}
    with pytest.raises(ValueError, match=message):
        OneCycleLR(optimizer, **options)
    assert optimizer.param_groups[0]["momentum"] == 0.9 and "initial_lr" not in optimizer.param_groups[0]


def test_one_cycle_momentum_needs_an_optimizer_with_momentum():
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        OneCycleLR(make_optimizer((0.1,), optimizer_class=Adagrad), max_lr=1.0, total_steps=10)
    OneCycleLR(make_optimizer((0.1,), optimizer_class=Adagrad), max_lr=1.0, total_steps=10, cycle_momentum=False)


PLATEAU_CASES = [
    # (options, metrics, expected lr after each step), traced by hand from the documented rules.
    (
        dict(mode="min", factor=0.5, patience=2),
        [10, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8],
        [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25],
    ),
    (
        dict(mode="min", factor=0.5, patience=2, cooldown=2),
        [10, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8],
        [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25],
    ),
    (
        dict(mode="min", factor=0.5, patience=0, threshold=0.5, threshold_mode="abs"),
        [10, 9.6, 9.4, 9.0, 8.5],
        [1, 0.5, 0.5, 0.25, 0.25],
    ),
    (
        dict(mode="max", factor=0.1, patience=1, threshold=0.1, threshold_mode="rel", min_lr=0.05),
        [0.5, 0.54, 0.56, 0.7, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75],
        [1, 1, 1, 1, 1, 0.1, 0.1, 0.05, 0.05, 0.05],
    ),
    (
        dict(mode="max", factor=0.5, patience=1, threshold=0.05, threshold_mode="abs"),
        [1.0, 1.04, 1.06, 1.08, 1.2],
        [1, 1, 1, 1, 1],
    ),
]


@pytest.mark.parametrize("options, metrics, expected", PLATEAU_CASES)
def test_reduce_lr_on_plateau_follows_the_metric(options, metrics, expected):
    optimizer = make_optimizer((1.0,))
    scheduler = ReduceLROnPlateau(optimizer, **options)
    lrs = []
    for metric in metrics:
        optimizer.step()
        scheduler.step(metric)
        lrs.append(optimizer.param_groups[0]["lr"])
    np.testing.assert_allclose(lrs, expected, rtol=1e-12)
    assert scheduler.get_last_lr() == [lrs[-1]] and scheduler.last_epoch == len(metrics)


def test_reduce_lr_on_plateau_accepts_a_tensor_metric_and_per_group_min_lrs():
    optimizer = make_optimizer((1.0, 1.0))
    scheduler = ReduceLROnPlateau(optimizer, patience=0, factor=0.5, min_lr=[0.0, 0.8])
    for metric in [onnxnn.tensor(1.0), onnxnn.tensor(1.0)]:
        scheduler.step(metric)
    assert [group["lr"] for group in optimizer.param_groups] == [0.5, 0.8]
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        ReduceLROnPlateau(optimizer, min_lr=[0.1])


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(factor=1.0), "Factor should be < 1.0."),
        (dict(mode="middle"), "mode middle is unknown!"),
        (dict(threshold_mode="ratio"), "threshold mode ratio is unknown!"),
    ],
)
def test_reduce_lr_on_plateau_rejects_bad_arguments(options, message):
    with pytest.raises(ValueError, match=message):
        ReduceLROnPlateau(make_optimizer((1.0,)), **options)


def test_reduce_lr_on_plateau_state_dict_round_trip():
    optimizer = make_optimizer((1.0,))
    scheduler = ReduceLROnPlateau(optimizer, patience=2, factor=0.5)
    for metric in [5, 4, 4]:
        scheduler.step(metric)
    state = pickle.loads(pickle.dumps(scheduler.state_dict()))
    assert "optimizer" not in state and state["best"] == 4 and state["num_bad_epochs"] == 1
    resumed = ReduceLROnPlateau(make_optimizer((1.0,)))
    resumed.load_state_dict(state)
    assert resumed.patience == 2 and resumed.best == 4 and resumed.num_bad_epochs == 1


def test_scheduler_state_dict_round_trip_continues_the_schedule():
    optimizer = make_optimizer((0.1,))
    scheduler = StepLR(optimizer, step_size=2, gamma=0.5)
    reference = lr_sequence(scheduler, optimizer, 10)

    optimizer = make_optimizer((0.1,))
    scheduler = StepLR(optimizer, step_size=2, gamma=0.5)
    first_half = lr_sequence(scheduler, optimizer, 5)
    saved_optimizer = optimizer.state_dict()
    saved_scheduler = pickle.loads(pickle.dumps(scheduler.state_dict()))
    assert "optimizer" not in saved_scheduler and saved_scheduler["last_epoch"] == 5

    resumed_optimizer = make_optimizer((0.1,))
    resumed_optimizer.load_state_dict(saved_optimizer)
    resumed = StepLR(resumed_optimizer, step_size=7, gamma=0.9)  # loading restores the arguments too
    resumed.load_state_dict(saved_scheduler)
    second_half = lr_sequence(resumed, resumed_optimizer, 5)
    np.testing.assert_allclose(np.concatenate([first_half, second_half]), reference, rtol=1e-12)
    assert resumed.step_size == 2 and resumed.gamma == 0.5


def test_stepping_the_scheduler_before_the_optimizer_warns():
    optimizer = make_optimizer((0.1,))
    scheduler = StepLR(optimizer, step_size=1)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        scheduler.step()
    optimizer = make_optimizer((0.1,))
    scheduler = StepLR(optimizer, step_size=1)
    optimizer.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scheduler.step()


def test_get_lr_outside_step_warns_to_use_get_last_lr():
    optimizer = make_optimizer((0.1,))
    scheduler = ExponentialLR(optimizer, gamma=0.5)
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        scheduler.get_lr()
    assert scheduler.get_last_lr() == [0.1]


def test_custom_scheduler_subclass():
    class Halving(LRScheduler):
        def get_lr(self):
            return [base_lr / 2**self.last_epoch for base_lr in self.base_lrs]

    optimizer = make_optimizer((0.8,))
    scheduler = Halving(optimizer)
    np.testing.assert_allclose(lr_sequence(scheduler, optimizer, 4)[:, 0], [0.8, 0.4, 0.2, 0.1])


def test_scheduled_lr_drives_the_update():
    param = onnxnn.tensor([0.0], requires_grad=True)
    optimizer = SGD([param], lr=1.0)
    scheduler = LambdaLR(optimizer, lambda epoch: 0.5**epoch)
    positions = []
    for _ in range(4):
        param.grad = onnxnn.tensor([1.0])
        optimizer.step()
        scheduler.step()
        positions.append(param.detach().numpy()[0])
    np.testing.assert_allclose(positions, [-1.0, -1.5, -1.75, -1.875], rtol=1e-6)


SESSION_CASES = [
    (SGD, dict(lr=0.1, momentum=0.9), lambda opt: StepLR(opt, step_size=1, gamma=0.7)),
    (SGD, dict(lr=0.1, momentum=0.9, nesterov=True), lambda opt: OneCycleLR(opt, max_lr=0.5, total_steps=12)),
    (Adam, dict(lr=0.1, amsgrad=True), lambda opt: OneCycleLR(opt, max_lr=0.5, total_steps=12)),
    (AdamW, dict(lr=0.1), lambda opt: ExponentialLR(opt, gamma=0.8)),
    (RMSprop, dict(lr=0.1, momentum=0.5, centered=True), lambda opt: CosineAnnealingLR(opt, T_max=4)),
    (Adagrad, dict(lr=0.1, lr_decay=0.3), lambda opt: LambdaLR(opt, lambda epoch: 1 / (1 + epoch))),
]


@pytest.mark.parametrize(
    "optimizer_class, options, make_scheduler",
    SESSION_CASES,
    ids=[f"{case[0].__name__}-{i}" for i, case in enumerate(SESSION_CASES)],
)
def test_changing_hyperparameters_do_not_recompile_the_step(optimizer_class, options, make_scheduler):
    params = [onnxnn.randn(3, requires_grad=True), onnxnn.randn(2, 2, requires_grad=True)]
    optimizer = optimizer_class(params, **options)
    scheduler = make_scheduler(optimizer)
    sessions, lrs = [], []
    for step in range(11):
        for param in params:
            param.grad = onnxnn.full(tuple(param.shape), 0.1 * (step + 1))
        with onnxnn.set_executor("onnxruntime"):  # every step compiles or reuses a session (auto may time one later)
            optimizer.step()
        scheduler.step()
        sessions.append(executor.cache_info()["sessions"])
        lrs.append(optimizer.param_groups[0]["lr"])
    assert len(set(lrs)) > 5  # the lr really changed on most steps
    assert sessions[2:] == [sessions[2]] * (len(sessions) - 2)


def _cyclic_lr(epoch, base=0.01, high=0.1, half=2):
    cycle = math.floor(1 + epoch / (2 * half))
    return base + (high - base) * max(0.0, 1 - abs(epoch / half - 2 * cycle + 1))


# (name, scheduler of an optimizer whose lr is 0.1, the lr at each epoch). The schedulers are
# stepped with a constant metric where they take one (ReduceLROnPlateau, patience 0: halves from
# the second step on).
TENSOR_LR_CASES = [
    ("StepLR", lambda opt: StepLR(opt, step_size=2, gamma=0.5), lambda e: 0.1 * 0.5 ** (e // 2)),
    ("ExponentialLR", lambda opt: ExponentialLR(opt, gamma=0.5), lambda e: 0.1 * 0.5**e),
    ("LambdaLR", lambda opt: LambdaLR(opt, lambda e: 1 / (e + 1)), lambda e: 0.1 / (e + 1)),
    ("MultiplicativeLR", lambda opt: lr_scheduler.MultiplicativeLR(opt, lambda e: 0.9), lambda e: 0.1 * 0.9**e),
    ("CosineAnnealingLR", lambda opt: CosineAnnealingLR(opt, T_max=4), lambda e: closed_form_cosine(0.1, 0, 4, e)),
    ("ConstantLR", lambda opt: lr_scheduler.ConstantLR(opt, 0.5, 2), lambda e: 0.05 if e < 2 else 0.1),
    ("LinearLR", lambda opt: lr_scheduler.LinearLR(opt, 0.5, total_iters=4), lambda e: 0.1 * (0.5 + min(e, 4) / 8)),
    ("PolynomialLR", lambda opt: lr_scheduler.PolynomialLR(opt, 4, 2.0), lambda e: 0.1 * (1 - min(e, 4) / 4) ** 2),
    (
        "ReduceLROnPlateau",
        lambda opt: ReduceLROnPlateau(opt, factor=0.5, patience=0),
        lambda e: 0.1 * 0.5 ** max(e - 1, 0),
    ),
    (
        "OneCycleLR",
        lambda opt: OneCycleLR(opt, max_lr=0.5, total_steps=10),
        lambda e: closed_form_one_cycle(e, 10, 0.5)[0],
    ),
    ("CyclicLR", lambda opt: lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=2), _cyclic_lr),
    (
        "CosineAnnealingWarmRestarts",
        lambda opt: lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3),
        lambda e: closed_form_cosine(0.1, 0, 3, e % 3),
    ),
    (
        "SequentialLR",
        lambda opt: lr_scheduler.SequentialLR(
            opt, [lr_scheduler.ConstantLR(opt, 0.5, 2), ExponentialLR(opt, 0.9)], milestones=[3]
        ),
        lambda e: (0.05 if e < 2 else 0.1) if e < 3 else 0.1 * 0.9 ** (e - 3),
    ),
    (
        "ChainedScheduler",
        lambda opt: lr_scheduler.ChainedScheduler([lr_scheduler.ConstantLR(opt, 0.5, 2), ExponentialLR(opt, 0.9)]),
        lambda e: 0.1 * 0.9**e * (0.5 if e < 2 else 1),
    ),
    (
        "SWALR",
        lambda opt: onnxnn.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="linear"),
        lambda e: 0.05 * min(1, e / 2) + 0.1 * (1 - min(1, e / 2)),
    ),
]


@pytest.mark.parametrize("name, make_scheduler, lr_at", TENSOR_LR_CASES, ids=[case[0] for case in TENSOR_LR_CASES])
def test_a_tensor_lr_is_filled_in_place_and_never_aliased(name, make_scheduler, lr_at):
    # PyTorch: group["lr"] stays the caller's tensor, filled each step; get_last_lr(), base_lrs and
    # initial_lr are copies of it.
    lr = onnxnn.tensor(0.1)
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=lr, momentum=0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scheduler = make_scheduler(optimizer)
        for epoch in range(8):
            group = optimizer.param_groups[0]
            assert group["lr"] is lr
            np.testing.assert_allclose(lr.item(), lr_at(epoch), rtol=1e-6)
            last = scheduler.get_last_lr()[0]
            assert isinstance(last, onnxnn.Tensor) and last is not lr and last.item() == lr.item()
            copies = [group.get("initial_lr"), *getattr(scheduler, "base_lrs", [])]
            assert all(copy is not lr for copy in copies)
            optimizer.step()
            scheduler.step(1.0) if isinstance(scheduler, ReduceLROnPlateau) else scheduler.step()
    assert isinstance(optimizer.state_dict()["param_groups"][0]["lr"], onnxnn.Tensor)


def test_changing_the_callers_lr_tensor_leaves_base_lrs_as_they_were():
    lr = onnxnn.tensor(0.1)
    optimizer = SGD([onnxnn.zeros(2, requires_grad=True)], lr=lr)
    scheduler = LambdaLR(optimizer, lambda epoch: 0.5**epoch)
    optimizer.step()
    scheduler.step()
    lr.fill_(1.0)  # the live lr: the next step sets it from base_lrs again
    optimizer.step()
    scheduler.step()
    np.testing.assert_allclose([base.item() for base in scheduler.base_lrs], [0.1], rtol=1e-6)
    np.testing.assert_allclose(lr.item(), 0.025, rtol=1e-6)
    assert optimizer.param_groups[0]["lr"] is lr


def test_the_deprecated_lr_scheduler_base_is_a_subclass_to_derive_from():
    class Halving(lr_scheduler._LRScheduler):
        def get_lr(self):
            return [base_lr * 0.5**self.last_epoch for base_lr in self.base_lrs]

    optimizer = make_optimizer((0.1,))
    scheduler = Halving(optimizer)
    assert issubclass(lr_scheduler._LRScheduler, LRScheduler) and lr_scheduler._LRScheduler.__name__ == "_LRScheduler"
    assert "_LRScheduler" not in lr_scheduler.__all__
    np.testing.assert_allclose(lr_sequence(scheduler, optimizer, 3)[:, 0], [0.1, 0.05, 0.025])


# (scheduler, the error PyTorch raises when given something that is not an optimizer): those
# that read its param_groups before the base class checks its type raise AttributeError.
NOT_AN_OPTIMIZER = [
    ("StepLR", lambda opt: StepLR(opt, 2), TypeError),
    ("ExponentialLR", lambda opt: ExponentialLR(opt, 0.9), TypeError),
    ("LambdaLR", lambda opt: LambdaLR(opt, lambda epoch: 1.0), AttributeError),
    ("MultiplicativeLR", lambda opt: lr_scheduler.MultiplicativeLR(opt, lambda epoch: 1.0), AttributeError),
    ("OneCycleLR", lambda opt: OneCycleLR(opt, 1.0, total_steps=10), TypeError),
    ("CyclicLR", lambda opt: lr_scheduler.CyclicLR(opt, 0.01, 0.1), TypeError),
    ("CosineAnnealingWarmRestarts", lambda opt: lr_scheduler.CosineAnnealingWarmRestarts(opt, 3), TypeError),
    ("ReduceLROnPlateau", lambda opt: ReduceLROnPlateau(opt), TypeError),
    ("SWALR", lambda opt: onnxnn.optim.swa_utils.SWALR(opt, 0.1), AttributeError),
]


@pytest.mark.parametrize("name, make_scheduler, error", NOT_AN_OPTIMIZER, ids=[case[0] for case in NOT_AN_OPTIMIZER])
def test_something_else_than_an_optimizer_raises_pytorchs_error(name, make_scheduler, error):
    message = "object is not an Optimizer" if error is TypeError else "'object' object has no attribute 'param_groups'"
    with pytest.raises(error, match=message):
        make_scheduler(object())
