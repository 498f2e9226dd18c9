"""numpy references of PyTorch's documented optimizer algorithms, and the problems and option cases the
optimizer tests run them on (test_optimizers_algorithms.py, test_optimizers_groups_and_state.py).

Each reference transcribes the pseudo-code of the PyTorch documentation page of its optimizer, in
float64; the optimizers run on float32 (and float64) tensors with fixed gradients.
"""

from __future__ import annotations


import numpy as np

import onnxnn
from onnxnn.optim import SGD, Adagrad, Adam, AdamW, RMSprop

from tolerances import assert_within, gamma


SHAPES = [(3,), (2, 4), ()]


NUM_STEPS = 4


# Gradient scales vary between steps so running maxima (amsgrad) and averages really move.
STEP_SCALES = [1.0, 0.3, 2.0, 0.1]


def make_problem(seed: int = 0):
    """Initial parameter values and one gradient per parameter per step (float64 numpy)."""
    generator = np.random.default_rng(seed)
    initial = [generator.standard_normal(shape) for shape in SHAPES]
    gradients = [[generator.standard_normal(shape) * scale for shape in SHAPES] for scale in STEP_SCALES]
    return initial, gradients


# ---------------------------------------------------------------------- numpy references (PyTorch docs)
def reference_sgd(initial, gradients, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False):
    params = [theta.copy() for theta in initial]
    buffers = [None] * len(params)
    for step_gradients in gradients:
        for index, gradient in enumerate(step_gradients):
            theta = params[index]
            g = -gradient if maximize else gradient
            if weight_decay != 0:
                g = g + weight_decay * theta
            if momentum != 0:
                if buffers[index] is not None:
                    buffers[index] = momentum * buffers[index] + (1 - dampening) * g
                else:
                    buffers[index] = g
                g = g + momentum * buffers[index] if nesterov else buffers[index]
            params[index] = theta - lr * g
    states = [{"momentum_buffer": buffer} if momentum != 0 else {} for buffer in buffers]
    return params, states


def reference_adam(
    initial,
    gradients,
    lr=1e-3,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    amsgrad=False,
    maximize=False,
    decoupled_weight_decay=False,
):
    beta1, beta2 = betas
    params = [theta.copy() for theta in initial]
    m = [np.zeros_like(theta) for theta in params]
    v = [np.zeros_like(theta) for theta in params]
    v_max = [np.zeros_like(theta) for theta in params]
    for t, step_gradients in enumerate(gradients, start=1):
        for index, gradient in enumerate(step_gradients):
            theta = params[index]
            g = -gradient if maximize else gradient
            if weight_decay != 0:
                if decoupled_weight_decay:
                    theta = theta - lr * weight_decay * theta
                else:
                    g = g + weight_decay * params[index]
            m[index] = beta1 * m[index] + (1 - beta1) * g
            v[index] = beta2 * v[index] + (1 - beta2) * g**2
            m_hat = m[index] / (1 - beta1**t)
            if amsgrad:
                v_max[index] = np.maximum(v_max[index], v[index])
                v_hat = v_max[index] / (1 - beta2**t)
            else:
                v_hat = v[index] / (1 - beta2**t)
            params[index] = theta - lr * m_hat / (np.sqrt(v_hat) + eps)
    states = []
    for index in range(len(params)):
        state = {"step": float(len(gradients)), "exp_avg": m[index], "exp_avg_sq": v[index]}
        if amsgrad:
            state["max_exp_avg_sq"] = v_max[index]
        states.append(state)
    return params, states


def reference_adamw(initial, gradients, weight_decay=1e-2, **options):
    return reference_adam(initial, gradients, weight_decay=weight_decay, decoupled_weight_decay=True, **options)


def reference_rmsprop(
    initial, gradients, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, maximize=False
):
    params = [theta.copy() for theta in initial]
    v = [np.zeros_like(theta) for theta in params]
    buffers = [np.zeros_like(theta) for theta in params]
    g_ave = [np.zeros_like(theta) for theta in params]
    for step_gradients in gradients:
        for index, gradient in enumerate(step_gradients):
            theta = params[index]
            g = -gradient if maximize else gradient
            if weight_decay != 0:
                g = g + weight_decay * theta
            v[index] = alpha * v[index] + (1 - alpha) * g**2
            v_tilde = v[index]
            if centered:
                g_ave[index] = g_ave[index] * alpha + (1 - alpha) * g
                v_tilde = v_tilde - g_ave[index] ** 2
            if momentum > 0:
                buffers[index] = momentum * buffers[index] + g / (np.sqrt(v_tilde) + eps)
                params[index] = theta - lr * buffers[index]
            else:
                params[index] = theta - lr * g / (np.sqrt(v_tilde) + eps)
    states = []
    for index in range(len(params)):
        state = {"step": float(len(gradients)), "square_avg": v[index]}
        if momentum > 0:
            state["momentum_buffer"] = buffers[index]
        if centered:
            state["grad_avg"] = g_ave[index]
        states.append(state)
    return params, states


def reference_adagrad(
    initial, gradients, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, maximize=False
):
    params = [theta.copy() for theta in initial]
    sums = [np.full_like(theta, initial_accumulator_value) for theta in params]
    for t, step_gradients in enumerate(gradients, start=1):
        for index, gradient in enumerate(step_gradients):
            theta = params[index]
            g = -gradient if maximize else gradient
            decayed_lr = lr / (1 + (t - 1) * lr_decay)
            if weight_decay != 0:
                g = g + weight_decay * theta
            sums[index] = sums[index] + g**2
            params[index] = theta - decayed_lr * g / (np.sqrt(sums[index]) + eps)
    states = [{"step": float(len(gradients)), "sum": state_sum} for state_sum in sums]
    return params, states


REFERENCES = {
    SGD: reference_sgd,
    Adam: reference_adam,
    AdamW: reference_adamw,
    RMSprop: reference_rmsprop,
    Adagrad: reference_adagrad,
}


OPTION_CASES = [
    (SGD, {"lr": 0.1}),
    (SGD, {"lr": 0.1, "momentum": 0.9}),
    (SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.5}),
    (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    (SGD, {"lr": 0.1, "weight_decay": 0.1}),
    (SGD, {"lr": 0.1, "maximize": True}),
    (SGD, {"lr": 0.05, "momentum": 0.5, "weight_decay": 0.2, "nesterov": True, "maximize": True}),
    (SGD, {}),
    (Adam, {}),
    (Adam, {"lr": 0.1}),
    (Adam, {"lr": 0.1, "weight_decay": 0.1}),
    (Adam, {"lr": 0.1, "amsgrad": True}),
    (Adam, {"lr": 0.1, "maximize": True}),
    (Adam, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-3, "weight_decay": 0.05, "amsgrad": True, "maximize": True}),
    (Adam, {"lr": 0.1, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (AdamW, {}),
    (AdamW, {"lr": 0.1, "weight_decay": 0.3}),
    (AdamW, {"lr": 0.1, "amsgrad": True, "maximize": True}),
    (RMSprop, {}),
    (RMSprop, {"momentum": 0.9}),
    (RMSprop, {"centered": True}),
    (RMSprop, {"centered": True, "momentum": 0.5}),
    (RMSprop, {"weight_decay": 0.1}),
    (RMSprop, {"maximize": True}),
    (
        RMSprop,
        {
            "lr": 0.05,
            "alpha": 0.9,
            "eps": 1e-4,
            "weight_decay": 0.05,
            "momentum": 0.3,
            "centered": True,
            "maximize": True,
        },
    ),
    (Adagrad, {}),
    (Adagrad, {"lr": 0.1, "lr_decay": 0.5}),
    (Adagrad, {"lr": 0.1, "weight_decay": 0.1}),
    (Adagrad, {"lr": 0.1, "initial_accumulator_value": 0.5}),
    (Adagrad, {"lr": 0.1, "maximize": True}),
    (Adagrad, {"lr": 0.1, "eps": 1e-3, "lr_decay": 0.1, "weight_decay": 0.05, "initial_accumulator_value": 0.1}),
]


# The longest update here (RMSprop, centered, with momentum and weight decay; Adam with amsgrad
# and bias corrections) rounds at most this many times per element per step, square roots and
# divisions included (IEEE-exact to half an ulp). Errors of earlier steps carry over with
# factors <= 1 (decays, 1 - lr * weight_decay), so over all steps they add up.
ROUNDINGS_PER_STEP = 16


def assert_matches_reference(actual, expected, initial, gradients, dtype) -> None:
    """Within the rounding of len(gradients) optimizer steps computed in ``dtype`` from the same inputs.

    Each rounding errs relative to the magnitude of the quantities it combines: the element
    itself, or at most the largest initial value plus every step's largest gradient (what a
    buffer or an update can hold before lr scales it down).
    """
    magnitude = max(np.abs(a).max() for a in initial) + sum(max(np.abs(g).max() for g in s) for s in gradients)
    steps = len(gradients)
    numpy_dtype = np.float32 if dtype is onnxnn.float32 else np.float64
    assert_within(actual, expected, 2 * gamma(ROUNDINGS_PER_STEP * steps, numpy_dtype) * (np.abs(expected) + magnitude))


def rounded_problem(initial, gradients, dtype):
    """The inputs as the optimizer sees them in ``dtype``: the reference starts from the same values."""
    numpy_dtype = np.float32 if dtype is onnxnn.float32 else np.float64
    return (
        [a.astype(numpy_dtype).astype(np.float64) for a in initial],
        [[g.astype(numpy_dtype).astype(np.float64) for g in step] for step in gradients],
    )


def case_id(case) -> str:
    optimizer_class, options = case
    return optimizer_class.__name__ + "-" + ("-".join(f"{k}={v}" for k, v in options.items()) or "defaults")


def run_steps(optimizer_class, options, initial, gradients, dtype=onnxnn.float32):
    params = [onnxnn.tensor(theta, dtype=dtype, requires_grad=True) for theta in initial]
    optimizer = optimizer_class(params, **options)
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=dtype)
        optimizer.step()
    return params, optimizer


def value(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)
