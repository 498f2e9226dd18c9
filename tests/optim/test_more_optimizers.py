"""Adamax, NAdam, RAdam and Adadelta against float64 numpy re-implementations of PyTorch's documented algorithms.

Each reference follows the pseudocode at docs.pytorch.org/docs/stable/generated/torch.optim.<Name>.html.
"""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
from onnxnn.optim import ASGD, Adadelta, Adamax, NAdam, RAdam, Rprop

from tolerances import assert_within, gamma

SHAPES = [(3,), (2, 4), ()]
# Six steps: RAdam's rectification (rho_t > 5) starts at step 6 with the default beta2.
STEP_SCALES = [1.0, 0.3, 2.0, 0.1, 0.7, 1.5]
# Every optimizer below rounds at most this many times per element per step (square roots and
# divisions included, each IEEE-exact to half an ulp); errors of earlier steps carry over with
# factors <= 1 (decays), so over all steps they add up.
ROUNDINGS_PER_STEP = 24


def make_problem(seed: int = 0):
    """Initial parameter values and one gradient per parameter per step, as float32-representable float64."""
    generator = np.random.default_rng(seed)
    initial = [generator.standard_normal(shape).astype(np.float32).astype(np.float64) for shape in SHAPES]
    gradients = [
        [(generator.standard_normal(shape) * scale).astype(np.float32).astype(np.float64) for shape in SHAPES]
        for scale in STEP_SCALES
    ]
    return initial, gradients


# ---------------------------------------------------------------------- numpy references (PyTorch docs)
def reference_adamax(initial, gradients, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, maximize=False):
    beta1, beta2 = betas
    params = [theta.copy() for theta in initial]
    exp_avgs = [np.zeros_like(theta) for theta in initial]
    exp_infs = [np.zeros_like(theta) for theta in initial]
    for t, step_gradients in enumerate(gradients, start=1):
        for i, g in enumerate(step_gradients):
            g = -g if maximize else g
            if weight_decay:
                g = g + weight_decay * params[i]
            exp_avgs[i] = beta1 * exp_avgs[i] + (1 - beta1) * g
            exp_infs[i] = np.maximum(beta2 * exp_infs[i], np.abs(g) + eps)
            params[i] = params[i] - lr * exp_avgs[i] / ((1 - beta1**t) * exp_infs[i])
    return params, {"exp_avg": exp_avgs, "exp_inf": exp_infs}


def reference_nadam(
    initial,
    gradients,
    lr=2e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    momentum_decay=4e-3,
    decoupled_weight_decay=False,
    maximize=False,
):
    beta1, beta2 = betas
    params = [theta.copy() for theta in initial]
    exp_avgs = [np.zeros_like(theta) for theta in initial]
    exp_avg_sqs = [np.zeros_like(theta) for theta in initial]
    mu_product = 1.0
    for t, step_gradients in enumerate(gradients, start=1):
        mu = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_product *= mu
        for i, g in enumerate(step_gradients):
            g = -g if maximize else g
            if weight_decay:
                if decoupled_weight_decay:
                    params[i] = params[i] * (1 - lr * weight_decay)
                else:
                    g = g + weight_decay * params[i]
            exp_avgs[i] = beta1 * exp_avgs[i] + (1 - beta1) * g
            exp_avg_sqs[i] = beta2 * exp_avg_sqs[i] + (1 - beta2) * g * g
            denom = np.sqrt(exp_avg_sqs[i] / (1 - beta2**t)) + eps
            params[i] = params[i] - lr * (1 - mu) / (1 - mu_product) * g / denom
            params[i] = params[i] - lr * mu_next / (1 - mu_product * mu_next) * exp_avgs[i] / denom
    mu_products = [mu_product] * len(initial)
    return params, {"exp_avg": exp_avgs, "exp_avg_sq": exp_avg_sqs, "mu_product": mu_products}


def reference_radam(
    initial,
    gradients,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    decoupled_weight_decay=False,
    maximize=False,
):
    beta1, beta2 = betas
    rho_inf = 2 / (1 - beta2) - 1
    params = [theta.copy() for theta in initial]
    exp_avgs = [np.zeros_like(theta) for theta in initial]
    exp_avg_sqs = [np.zeros_like(theta) for theta in initial]
    for t, step_gradients in enumerate(gradients, start=1):
        for i, g in enumerate(step_gradients):
            g = -g if maximize else g
            if weight_decay:
                if decoupled_weight_decay:
                    params[i] = params[i] * (1 - lr * weight_decay)
                else:
                    g = g + weight_decay * params[i]
            exp_avgs[i] = beta1 * exp_avgs[i] + (1 - beta1) * g
            exp_avg_sqs[i] = beta2 * exp_avg_sqs[i] + (1 - beta2) * g * g
            corrected_avg = exp_avgs[i] / (1 - beta1**t)
            rho_t = rho_inf - 2 * t * beta2**t / (1 - beta2**t)
            if rho_t > 5:
                adaptive_lr = np.sqrt(1 - beta2**t) / (np.sqrt(exp_avg_sqs[i]) + eps)
                rect = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                params[i] = params[i] - lr * corrected_avg * adaptive_lr * rect
            else:
                params[i] = params[i] - lr * corrected_avg
    return params, {"exp_avg": exp_avgs, "exp_avg_sq": exp_avg_sqs}


def reference_adadelta(initial, gradients, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, maximize=False):
    params = [theta.copy() for theta in initial]
    square_avgs = [np.zeros_like(theta) for theta in initial]
    acc_deltas = [np.zeros_like(theta) for theta in initial]
    for step_gradients in gradients:
        for i, g in enumerate(step_gradients):
            g = -g if maximize else g
            if weight_decay:
                g = g + weight_decay * params[i]
            square_avgs[i] = rho * square_avgs[i] + (1 - rho) * g * g
            delta = np.sqrt(acc_deltas[i] + eps) / np.sqrt(square_avgs[i] + eps) * g
            acc_deltas[i] = rho * acc_deltas[i] + (1 - rho) * delta * delta
            params[i] = params[i] - lr * delta
    return params, {"square_avg": square_avgs, "acc_delta": acc_deltas}


def reference_rprop(initial, gradients, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
    etaminus, etaplus = etas
    params = [theta.copy() for theta in initial]
    prevs = [np.zeros_like(theta) for theta in initial]
    sizes = [np.full_like(theta, lr) for theta in initial]
    for step_gradients in gradients:
        for i, g in enumerate(step_gradients):
            g = -g if maximize else g
            agreement = g * prevs[i]
            factor = np.where(agreement > 0, etaplus, np.where(agreement < 0, etaminus, 1.0))
            sizes[i] = np.clip(sizes[i] * factor, step_sizes[0], step_sizes[1])
            g = np.where(agreement < 0, 0.0, g)
            params[i] = params[i] - np.sign(g) * sizes[i]
            prevs[i] = g
    return params, {"prev": prevs, "step_size": sizes}


def reference_asgd(initial, gradients, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, maximize=False):
    params = [theta.copy() for theta in initial]
    axs = [np.zeros_like(theta) for theta in initial]
    eta, mu = lr, 1.0
    for t, step_gradients in enumerate(gradients, start=1):
        for i, g in enumerate(step_gradients):
            g = -g if maximize else g
            if weight_decay:
                g = g + weight_decay * params[i]
            params[i] = params[i] * (1 - lambd * eta) - eta * g
            axs[i] = axs[i] + mu * (params[i] - axs[i]) if mu != 1 else params[i].copy()
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
    return params, {"ax": axs, "eta": [eta] * len(initial), "mu": [mu] * len(initial)}


REFERENCES = {
    Adamax: reference_adamax,
    NAdam: reference_nadam,
    RAdam: reference_radam,
    Adadelta: reference_adadelta,
    Rprop: reference_rprop,
    ASGD: reference_asgd,
}

OPTION_CASES = [
    (Adamax, {}),
    (Adamax, {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
    (NAdam, {}),
    (NAdam, {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "momentum_decay": 0.3, "maximize": True}),
    (NAdam, {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (RAdam, {}),
    # With beta2 = 0.99 too, rho_t first exceeds 5 at step 6, so both branches run.
    (RAdam, {"lr": 0.05, "betas": (0.8, 0.99), "weight_decay": 0.1, "maximize": True}),
    (RAdam, {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (Adadelta, {}),
    (Adadelta, {"lr": 0.5, "rho": 0.8, "eps": 1e-3, "weight_decay": 0.1, "maximize": True}),
    (Rprop, {}),
    # Bounds that both clamps reach within six steps.
    (Rprop, {"lr": 0.1, "etas": (0.3, 2.0), "step_sizes": (0.02, 0.15), "maximize": True}),
    (ASGD, {}),
    # t0 = 2: averaging starts within six steps.
    (ASGD, {"lr": 0.1, "lambd": 0.5, "alpha": 0.6, "t0": 2, "weight_decay": 0.1, "maximize": True}),
]


def case_id(case) -> str:
    optimizer_class, options = case
    return optimizer_class.__name__ + "-" + ("-".join(f"{k}={v}" for k, v in options.items()) or "defaults")


def magnitude_of(initial, gradients) -> float:
    """The largest value a parameter, buffer or update can hold before lr scales it down."""
    return max(np.abs(a).max() for a in initial) + sum(max(np.abs(g).max() for g in s) for s in gradients)


def assert_matches_reference(actual, expected, initial, gradients) -> None:
    """Within the float32 rounding of len(gradients) steps, relative to the element or the data's magnitude."""
    bound = (
        2
        * gamma(ROUNDINGS_PER_STEP * len(gradients), np.float32)
        * (np.abs(expected) + magnitude_of(initial, gradients))
    )
    assert_within(actual, expected, bound)


def run_steps(optimizer_class, options, initial, gradients, optimizer=None, params=None):
    if params is None:
        params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in initial]
    optimizer = optimizer or optimizer_class(params, **options)
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        optimizer.step()
    return params, optimizer


def value(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


@pytest.fixture(params=["onnxruntime", "kernels"])
def executor_name(request):
    with onnxnn.set_executor(request.param):
        yield request.param


@pytest.mark.parametrize("case", OPTION_CASES, ids=[case_id(case) for case in OPTION_CASES])
def test_parameters_and_state_match_the_documented_algorithm(case, executor_name):
    optimizer_class, options = case
    initial, gradients = make_problem()
    params, optimizer = run_steps(optimizer_class, options, initial, gradients)
    expected_params, expected_state = REFERENCES[optimizer_class](initial, gradients, **options)
    for index, (param, expected) in enumerate(zip(params, expected_params)):
        assert param.dtype == onnxnn.float32 and param.is_leaf
        assert_matches_reference(value(param), expected, initial, gradients)
        state = optimizer.state[param]
        assert float(state["step"].item()) == len(gradients)
        for key, expected_values in expected_state.items():
            expected_value = expected_values[index]
            if np.ndim(expected_value) == 0 and not isinstance(expected_value, np.ndarray):
                assert_within(value(state[key]), expected_value, 2 * gamma(ROUNDINGS_PER_STEP * len(gradients)))
            else:
                assert_matches_reference(value(state[key]), expected_value, initial, gradients)


@pytest.mark.parametrize("case", OPTION_CASES, ids=[case_id(case) for case in OPTION_CASES])
def test_matches_torch(case):
    torch = pytest.importorskip("torch")
    optimizer_class, options = case
    initial, gradients = make_problem()
    params, optimizer = run_steps(optimizer_class, options, initial, gradients)
    torch_params = [torch.tensor(theta, dtype=torch.float32, requires_grad=True) for theta in initial]
    torch_optimizer = getattr(torch.optim, optimizer_class.__name__)(torch_params, **options)
    for step_gradients in gradients:
        for param, gradient in zip(torch_params, step_gradients):
            param.grad = torch.tensor(gradient, dtype=torch.float32)
        torch_optimizer.step()
    # The same state entries, so checkpoints move between the two.
    assert set(optimizer.state_dict()["state"][0]) == set(torch_optimizer.state_dict()["state"][0])
    for param, torch_param in zip(params, torch_params):
        expected = torch_param.detach().numpy().astype(np.float64)
        # Both are float32 computations of one algorithm, each within the reference's bound of the exact result.
        assert_matches_reference(value(param), expected, initial, gradients)


@pytest.mark.parametrize("case", OPTION_CASES, ids=[case_id(case) for case in OPTION_CASES])
def test_state_dict_round_trip_continues_like_an_uninterrupted_run(case):
    optimizer_class, options = case
    initial, gradients = make_problem()
    uninterrupted, _ = run_steps(optimizer_class, options, initial, gradients)
    params, first = run_steps(optimizer_class, options, initial, gradients[:3])
    saved = first.state_dict()
    second = optimizer_class(params, **options)
    second.load_state_dict(saved)
    assert second.state_dict()["param_groups"] == saved["param_groups"]
    run_steps(optimizer_class, options, initial, gradients[3:], optimizer=second, params=params)
    for param, expected in zip(params, uninterrupted):
        np.testing.assert_array_equal(value(param), value(expected))


INVALID_HYPERPARAMETERS = [
    (Adamax, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (Adamax, {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    (Adamax, {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
    (Adamax, {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
    (Adamax, {"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
    (NAdam, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (NAdam, {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    (NAdam, {"betas": (0.9, 1.0)}, "Invalid beta parameter at index 1: 1.0"),
    (NAdam, {"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
    (NAdam, {"momentum_decay": -0.1}, "Invalid momentum_decay value: -0.1"),
    (RAdam, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (RAdam, {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    (RAdam, {"betas": (-0.1, 0.999)}, "Invalid beta parameter at index 0: -0.1"),
    (RAdam, {"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
    (Adadelta, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (Adadelta, {"rho": 1.5}, "Invalid rho value: 1.5"),
    (Adadelta, {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    (Adadelta, {"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
    (Rprop, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (Rprop, {"etas": (1.0, 1.2)}, "Invalid eta values: 1.0, 1.2"),
    (Rprop, {"etas": (0.5, 0.9)}, "Invalid eta values: 0.5, 0.9"),
    (ASGD, {"lr": -1.0}, "Invalid learning rate: -1.0"),
    (ASGD, {"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
]


@pytest.mark.parametrize("optimizer_class, options, message", INVALID_HYPERPARAMETERS)
def test_invalid_hyperparameters_raise_pytorchs_value_error(optimizer_class, options, message):
    param = onnxnn.tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        optimizer_class([param], **options)


DEFAULTS = {
    Adamax: {"lr": 2e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0, "maximize": False},
    NAdam: {
        "lr": 2e-3,
        "betas": (0.9, 0.999),
        "eps": 1e-8,
        "weight_decay": 0,
        "momentum_decay": 4e-3,
        "decoupled_weight_decay": False,
        "maximize": False,
    },
    RAdam: {
        "lr": 1e-3,
        "betas": (0.9, 0.999),
        "eps": 1e-8,
        "weight_decay": 0,
        "decoupled_weight_decay": False,
        "maximize": False,
    },
    Adadelta: {"lr": 1.0, "rho": 0.9, "eps": 1e-6, "weight_decay": 0, "maximize": False},
    Rprop: {"lr": 1e-2, "etas": (0.5, 1.2), "step_sizes": (1e-6, 50), "maximize": False},
    ASGD: {"lr": 1e-2, "lambd": 1e-4, "alpha": 0.75, "t0": 1e6, "weight_decay": 0, "maximize": False},
}


@pytest.mark.parametrize("optimizer_class", list(DEFAULTS), ids=lambda cls: cls.__name__)
def test_defaults_are_pytorchs(optimizer_class):
    param = onnxnn.tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    defaults = optimizer_class([param]).defaults
    for key, expected in DEFAULTS[optimizer_class].items():
        assert defaults[key] == expected, key
    torch = pytest.importorskip("torch")
    torch_defaults = getattr(torch.optim, optimizer_class.__name__)([torch.zeros(2, requires_grad=True)]).defaults
    assert set(defaults) == set(torch_defaults)
    for key in DEFAULTS[optimizer_class]:
        assert defaults[key] == torch_defaults[key], key


def test_differentiable_is_rejected():
    param = onnxnn.tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    for optimizer_class in DEFAULTS:
        with pytest.raises(NotImplementedError):
            optimizer_class([param], differentiable=True)
