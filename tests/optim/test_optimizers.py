"""onnxnn.optim optimizers against numpy implementations of PyTorch's documented algorithms.

Each reference below transcribes the pseudo-code of the PyTorch documentation page of its
optimizer, in float64; the optimizers run on float32 (and float64) tensors with fixed gradients.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop
from onnxnn.runtime import realization as executor

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


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", OPTION_CASES, ids=[case_id(case) for case in OPTION_CASES])
def test_parameters_and_state_match_the_documented_algorithm(case, dtype):
    optimizer_class, options = case
    initial, gradients = make_problem()
    params, optimizer = run_steps(optimizer_class, options, initial, gradients, dtype)
    initial, gradients = rounded_problem(initial, gradients, dtype)
    expected_params, expected_states = REFERENCES[optimizer_class](initial, gradients, **options)
    for param, expected, expected_state in zip(params, expected_params, expected_states):
        assert param.dtype is dtype and param.shape == expected.shape
        assert param.requires_grad and param.is_leaf
        assert_matches_reference(value(param), expected, initial, gradients, dtype)
        state = optimizer.state[param]
        assert list(state) == list(expected_state)  # PyTorch's key names, in PyTorch's order
        for key, expected_value in expected_state.items():
            if key == "step":
                assert state["step"].dtype is onnxnn.float32 and state["step"].shape == ()
                assert state["step"].item() == expected_value
            else:
                assert state[key].dtype is dtype
                assert_matches_reference(value(state[key]), expected_value, initial, gradients, dtype)


@pytest.mark.parametrize(
    "optimizer_class, options",
    [
        (SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.1}),
        (Adam, {"amsgrad": True}),
        (AdamW, {}),
        (RMSprop, {"centered": True, "momentum": 0.9}),
        (Adagrad, {"lr_decay": 0.1}),
    ],
)
def test_one_step_is_one_session_run(optimizer_class, options):
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in initial]
    optimizer = optimizer_class([{"params": params[:2]}, {"params": params[2:], "lr": 0.5}], **options)
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        before = executor.cache_info()
        with onnxnn.set_executor("onnxruntime"):  # counted by the session cache (auto may pick kernels)
            optimizer.step()
        after = executor.cache_info()
        assert (after["hits"] + after["misses"]) - (before["hits"] + before["misses"]) == 1
        # Everything the step produced is computed: reading it runs nothing more.
        for param in params:
            value(param)
            for state_value in optimizer.state[param].values():
                value(state_value)
        assert executor.cache_info()["hits"] + executor.cache_info()["misses"] == after["hits"] + after["misses"]


def test_parameters_without_gradient_are_skipped():
    first = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    second = onnxnn.tensor([3.0, 4.0], requires_grad=True)
    optimizer = Adam([first, second], lr=0.1)
    first.grad = onnxnn.tensor([1.0, -1.0])
    optimizer.step()
    assert value(second).tolist() == [3.0, 4.0]
    assert second not in optimizer.state
    assert optimizer.state[first]["step"].item() == 1.0
    np.testing.assert_allclose(value(first), [0.9, 2.1], rtol=1e-6)


def test_step_bumps_the_version_counter_and_keeps_parameters_leaves():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    param.grad = onnxnn.tensor([1.0, 1.0])
    version = param._version
    optimizer.step()
    assert param._version > version
    assert param.is_leaf and param.requires_grad and param.grad_fn is None


def test_param_groups_use_their_own_hyperparameters():
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in initial]
    optimizer = SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.01, "momentum": 0.5}], lr=0.1, momentum=0.9)
    assert [group["lr"] for group in optimizer.param_groups] == [0.1, 0.01]
    assert [group["momentum"] for group in optimizer.param_groups] == [0.9, 0.5]
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        optimizer.step()
    initial, gradients = rounded_problem(initial, gradients, onnxnn.float32)
    first, _ = reference_sgd(initial[:1], [g[:1] for g in gradients], lr=0.1, momentum=0.9)
    rest, _ = reference_sgd(initial[1:], [g[1:] for g in gradients], lr=0.01, momentum=0.5)
    for param, expected in zip(params, first + rest):
        assert_matches_reference(value(param), expected, initial, gradients, onnxnn.float32)


def test_adagrad_fills_every_groups_sums_with_the_constructors_initial_value():
    # PyTorch's constructor fills the sums of every group with its own argument; a group's
    # initial_accumulator_value is kept in the group but does not change them.
    first, second = onnxnn.ones(2, requires_grad=True), onnxnn.ones(3, requires_grad=True)
    optimizer = Adagrad([{"params": [first]}, {"params": [second], "initial_accumulator_value": 0.5}], lr=0.1)
    assert optimizer.param_groups[1]["initial_accumulator_value"] == 0.5
    for param in (first, second):
        np.testing.assert_array_equal(optimizer.state[param]["sum"].numpy(), np.zeros(param.shape, np.float32))


def test_add_param_group_fills_defaults_and_is_optimized():
    first = onnxnn.tensor([1.0], requires_grad=True)
    second = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([first], lr=0.1, momentum=0.9)
    group = {"params": second, "lr": 0.5}
    optimizer.add_param_group(group)
    assert optimizer.param_groups[1] is group  # the caller's dict, as in PyTorch
    assert len(group["params"]) == 1 and group["params"][0] is second
    assert group["lr"] == 0.5 and group["momentum"] == 0.9 and group["nesterov"] is False
    first.grad = onnxnn.tensor([1.0])
    second.grad = onnxnn.tensor([1.0, 1.0])
    optimizer.step()
    np.testing.assert_allclose(value(first), [0.9], rtol=1e-6)
    np.testing.assert_allclose(value(second), [0.5, 1.5], rtol=1e-6)


@pytest.mark.parametrize(
    "make_group, error, message",
    [
        (lambda p: [p], TypeError, "param_group must be a dict, but got list"),
        (lambda p: {"params": {p}}, TypeError, "ordering of tensors in sets will change"),
        (lambda p: {"params": [p, 3]}, TypeError, "optimizer can only optimize Tensors, but one of the params is int"),
        (lambda p: {"params": [p * 2]}, ValueError, "can't optimize a non-leaf Tensor"),
    ],
)
def test_add_param_group_rejects_bad_groups_without_modifying(make_group, error, message):
    existing = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([existing], lr=0.1)
    new = onnxnn.tensor([2.0], requires_grad=True)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        optimizer.add_param_group(make_group(new))
    assert len(optimizer.param_groups) == 1


def test_parameters_in_two_groups_are_rejected():
    shared = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([shared], lr=0.1)
    group = {"params": [onnxnn.tensor([2.0], requires_grad=True), shared]}
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        optimizer.add_param_group(group)
    assert len(optimizer.param_groups) == 1 and "lr" not in group
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        SGD([{"params": [shared]}, {"params": [shared]}])


@pytest.mark.parametrize(
    "params, error, message",
    [
        ([], ValueError, "optimizer got an empty parameter list"),
        (
            "tensor",
            TypeError,
            "params argument given to the optimizer should be an iterable of Tensors or dicts, "
            "but got onnxnn.FloatTensor",
        ),
        ([1.0], TypeError, "optimizer can only optimize Tensors, but one of the params is float"),
    ],
)
def test_constructor_rejects_bad_params(params, error, message):
    if params == "tensor":
        params = onnxnn.tensor([1.0], requires_grad=True)
    with pytest.raises(error, match=message):
        SGD(params)


@pytest.mark.parametrize(
    "optimizer_class, options, message",
    [
        (SGD, {"lr": -1}, "Invalid learning rate: -1"),
        (SGD, {"momentum": -0.5}, "Invalid momentum value: -0.5"),
        (SGD, {"weight_decay": -1e-3}, "Invalid weight_decay value: -0.001"),
        (SGD, {"nesterov": True}, "Nesterov momentum requires a momentum and zero dampening"),
        (SGD, {"nesterov": True, "momentum": 0.9, "dampening": 0.1}, "Nesterov momentum requires a momentum and zero"),
        (Adam, {"lr": -0.1}, "Invalid learning rate: -0.1"),
        (Adam, {"eps": -1e-8}, "Invalid epsilon value: -1e-08"),
        (Adam, {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
        (Adam, {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
        (AdamW, {"weight_decay": -1}, "Invalid weight_decay value: -1"),
        (RMSprop, {"alpha": -0.5}, "Invalid alpha value: -0.5"),
        (RMSprop, {"momentum": -1}, "Invalid momentum value: -1"),
        (RMSprop, {"eps": -1}, "Invalid epsilon value: -1"),
        (Adagrad, {"lr_decay": -1}, "Invalid lr_decay value: -1"),
        (Adagrad, {"initial_accumulator_value": -1}, "Invalid initial_accumulator_value value: -1"),
    ],
)
def test_invalid_hyperparameters_raise_value_error(optimizer_class, options, message):
    with pytest.raises(ValueError, match=message):
        optimizer_class([onnxnn.tensor([1.0], requires_grad=True)], **options)


@pytest.mark.parametrize(
    "optimizer_class, defaults",
    [
        (SGD, dict(lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False)),
        (Adam, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, maximize=False)),
        (AdamW, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, maximize=False)),
        (RMSprop, dict(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, maximize=False)),
        (Adagrad, dict(lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10, maximize=False)),
    ],
)
def test_defaults_are_pytorchs(optimizer_class, defaults):
    optimizer = optimizer_class([onnxnn.tensor([1.0], requires_grad=True)])
    for name, expected in defaults.items():
        assert optimizer.defaults[name] == expected
        assert optimizer.param_groups[0][name] == expected


def test_repr_lists_each_group_with_sorted_keys():
    optimizer = SGD([onnxnn.tensor([1.0], requires_grad=True)], lr=0.1, momentum=0.9)
    assert repr(optimizer) == (
        "SGD (\n"
        "Parameter Group 0\n"
        "    dampening: 0\n"
        "    differentiable: False\n"
        "    foreach: None\n"
        "    fused: None\n"
        "    lr: 0.1\n"
        "    maximize: False\n"
        "    momentum: 0.9\n"
        "    nesterov: False\n"
        "    weight_decay: 0\n"
        ")"
    )


def test_state_dict_has_pytorchs_format():
    first = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    second = onnxnn.tensor([3.0], requires_grad=True)
    third = onnxnn.tensor([4.0], requires_grad=True)
    optimizer = Adam([{"params": [first, second]}, {"params": [third], "lr": 0.5}])
    first.grad = onnxnn.tensor([1.0, 1.0])
    third.grad = onnxnn.tensor([1.0])
    optimizer.step()
    state_dict = optimizer.state_dict()
    assert list(state_dict) == ["state", "param_groups"]
    assert list(state_dict["state"]) == [0, 2]
    assert list(state_dict["state"][0]) == ["step", "exp_avg", "exp_avg_sq"]
    assert [group["params"] for group in state_dict["param_groups"]] == [[0, 1], [2]]
    assert list(state_dict["param_groups"][0])[-1] == "params"
    assert state_dict["param_groups"][1]["lr"] == 0.5
    assert state_dict["param_groups"][0]["betas"] == (0.9, 0.999)


@pytest.mark.parametrize(
    "optimizer_class, options",
    [
        (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
        (Adam, {"lr": 0.1, "amsgrad": True}),
        (AdamW, {"lr": 0.1}),
        (RMSprop, {"centered": True, "momentum": 0.5}),
        (Adagrad, {"lr": 0.1, "lr_decay": 0.1}),
    ],
)
def test_state_dict_round_trip_continues_like_an_uninterrupted_run(optimizer_class, options):
    initial, gradients = make_problem()
    uninterrupted, _ = run_steps(optimizer_class, options, initial, gradients)

    params, optimizer = run_steps(optimizer_class, options, initial, gradients[:2])
    saved = pickle.loads(pickle.dumps(optimizer.state_dict()))  # as through onnxnn.save / torch.save
    checkpoint = [value(param) for param in params]
    resumed_params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in checkpoint]
    resumed = optimizer_class(resumed_params, **options)
    resumed.load_state_dict(saved)
    for step_gradients in gradients[2:]:
        for param, gradient in zip(resumed_params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        resumed.step()
    for param, expected in zip(resumed_params, uninterrupted):
        np.testing.assert_allclose(value(param), value(expected), rtol=1e-6, atol=1e-7)
    # (The loaded dict's state tensors are the optimizer's from then on, as PyTorch's load_state_dict
    # keeps them when their dtype and device already fit: its steps show there too.)


def test_load_state_dict_casts_state_to_the_parameter_dtype_but_keeps_step():
    source = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = Adam([source], lr=0.1)
    source.grad = onnxnn.tensor([1.0, -1.0])
    optimizer.step()
    target = onnxnn.tensor([1.0, 2.0], dtype=onnxnn.float64, requires_grad=True)
    loaded = Adam([target], lr=0.1)
    loaded.load_state_dict(optimizer.state_dict())
    state = loaded.state[target]
    assert state["exp_avg"].dtype is onnxnn.float64 and state["exp_avg_sq"].dtype is onnxnn.float64
    assert state["step"].dtype is onnxnn.float32 and state["step"].item() == 1.0
    np.testing.assert_allclose(value(state["exp_avg"]), [0.1, -0.1], rtol=1e-6)


def test_load_state_dict_restores_hyperparameters_but_keeps_params():
    param = onnxnn.tensor([1.0], requires_grad=True)
    source = SGD([param], lr=0.5, momentum=0.9)
    other = onnxnn.tensor([2.0], requires_grad=True)
    target = SGD([other], lr=0.1)
    target.load_state_dict(source.state_dict())
    assert target.param_groups[0]["lr"] == 0.5 and target.param_groups[0]["momentum"] == 0.9
    assert target.param_groups[0]["params"][0] is other


@pytest.mark.parametrize(
    "groups, message",
    [
        (
            lambda a, b: [{"params": [a]}, {"params": [b]}],
            "loaded state dict has a different number of parameter groups",
        ),
        (
            lambda a, b: [a],
            "loaded state dict contains a parameter group that doesn't match the size of optimizer's group",
        ),
    ],
)
def test_load_state_dict_rejects_mismatched_groups_without_modifying(groups, message):
    a = onnxnn.tensor([1.0], requires_grad=True)
    b = onnxnn.tensor([2.0], requires_grad=True)
    source = SGD([a, b], lr=0.5, momentum=0.9)
    a.grad = b.grad = onnxnn.tensor([1.0])
    source.step()
    target = SGD(groups(onnxnn.tensor([1.0], requires_grad=True), onnxnn.tensor([1.0], requires_grad=True)), lr=0.1)
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(source.state_dict())
    assert all(group["lr"] == 0.1 for group in target.param_groups) and len(target.state) == 0


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none):
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    untouched = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param, untouched], lr=0.1)
    (param * param).sum().backward()
    optimizer.zero_grad(set_to_none=set_to_none)
    assert untouched.grad is None
    if set_to_none:
        assert param.grad is None
    else:
        assert param.grad.tolist() == [0.0, 0.0] and not param.grad.requires_grad
        (param * 3).sum().backward()  # accumulates into the zeroed gradient
        assert param.grad.tolist() == [3.0, 3.0]


def test_step_runs_the_closure_with_gradients_enabled_and_returns_its_loss():
    param = onnxnn.tensor([1.0, -2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    calls = []

    def closure():
        optimizer.zero_grad()
        loss = (param * param).sum()
        calls.append(onnxnn.is_grad_enabled())
        loss.backward()
        return loss

    with onnxnn.no_grad():
        loss = optimizer.step(closure)
    assert calls == [True]
    assert loss.item() == 5.0
    np.testing.assert_allclose(value(param), [0.8, -1.6], rtol=1e-6)


def test_step_hooks_run_around_step_and_can_be_removed():
    param = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    events = []
    pre = optimizer.register_step_pre_hook(lambda opt, args, kwargs: events.append(("pre", opt is optimizer)))
    post = optimizer.register_step_post_hook(lambda opt, args, kwargs: events.append(("post", value(param)[0])))
    param.grad = onnxnn.tensor([1.0])
    optimizer.step()
    assert events[0] == ("pre", True) and events[1][0] == "post" and math.isclose(events[1][1], 0.9, rel_tol=1e-6)
    pre.remove()
    post.remove()
    optimizer.step()
    assert len(events) == 2


def test_functional_sgd_records_lazily_on_lists_of_tensors():
    from onnxnn.optim.sgd import sgd

    params = [onnxnn.tensor([1.0, 2.0], requires_grad=True)]
    buffers = [None]
    sgd(
        params,
        [onnxnn.tensor([1.0, 1.0])],
        buffers,
        weight_decay=0,
        momentum=0.9,
        lr=0.1,
        dampening=0,
        nesterov=False,
        maximize=False,
    )
    assert isinstance(buffers[0], onnxnn.Tensor)
    np.testing.assert_allclose(value(params[0]), [0.9, 1.9], rtol=1e-6)


def test_optimizer_subclass_with_custom_step():
    class SignSGD(Optimizer):
        def __init__(self, params, lr=0.01):
            super().__init__(params, dict(lr=lr))

        def step(self, closure=None):
            with onnxnn.no_grad():
                for group in self.param_groups:
                    for param in group["params"]:
                        if param.grad is not None:
                            param.sub_(param.grad.sign() * group["lr"])

    param = onnxnn.tensor([1.0, 1.0], requires_grad=True)
    optimizer = SignSGD([param], lr=0.5)
    calls = []
    optimizer.register_step_post_hook(lambda *args: calls.append(1))
    param.grad = onnxnn.tensor([3.0, -0.2])
    optimizer.step()
    assert value(param).tolist() == [0.5, 1.5] and calls == [1]


def test_sgd_with_momentum_fits_a_line():
    onnxnn.manual_seed(0)
    x = onnxnn.linspace(-1, 1, 32).reshape(32, 1)
    y = 3 * x + 2
    weight = onnxnn.zeros(1, 1, requires_grad=True)
    bias = onnxnn.zeros(1, requires_grad=True)
    optimizer = SGD([weight, bias], lr=0.1, momentum=0.9)
    for _ in range(150):
        optimizer.zero_grad()
        loss = ((x @ weight + bias - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    assert loss.item() < 1e-6
    np.testing.assert_allclose(value(weight).item(), 3.0, atol=1e-3)
    np.testing.assert_allclose(value(bias).item(), 2.0, atol=1e-3)


SGD_MOMENTUM_CASES = [case for case in OPTION_CASES if case[0] is SGD and case[1].get("momentum")]


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case", SGD_MOMENTUM_CASES, ids=[case_id(case) for case in SGD_MOMENTUM_CASES])
def test_sgd_with_momentum_matches_the_algorithm_on_each_executor(case, executor_name):
    # onnxruntime runs the fused Momentum node through its decomposition, the kernels directly.
    optimizer_class, options = case
    initial, gradients = make_problem()
    with onnxnn.set_executor(executor_name):
        params, _ = run_steps(optimizer_class, options, initial, gradients, onnxnn.float64)
        expected_params, _ = reference_sgd(initial, gradients, **options)
        for param, expected in zip(params, expected_params):
            assert_matches_reference(value(param), expected, initial, gradients, onnxnn.float64)


def test_sgd_with_momentum_records_one_fused_node_per_step():
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float32, requires_grad=True) for theta in initial]
    optimizer = SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01)
    for step_gradients in gradients[:2]:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float32)
        with executor.recording_only():
            optimizer.step()
        nodes = {id(param._value.node) for param in params}
        nodes |= {id(optimizer.state[param]["momentum_buffer"]._value.node) for param in params}
        assert len(nodes) == 1 and params[0]._value.node.op_type == "Momentum"
        for param in params:
            value(param)
