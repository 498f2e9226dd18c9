"""onnxnn.optim optimizers against numpy implementations of PyTorch's documented algorithms.

Each reference below transcribes the pseudo-code of the PyTorch documentation page of its
optimizer, in float64; the optimizers run on float32 (and float64) tensors with fixed gradients.
"""

from __future__ import annotations

import math
import pickle
import re

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


@pytest.mark.parametrize("group_value", [0.7, 0.0, None], ids=["0.7", "0.0", "group-default"])
@pytest.mark.parametrize("constructor_value", [0.2, 0.0])
def test_adagrad_group_added_later_starts_from_the_constructors_initial_value(constructor_value, group_value):
    # PyTorch 2.13 creates the state of a later group's params at their first step, from defaults.
    first = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    later = onnxnn.tensor([3.0, -1.0], requires_grad=True)
    optimizer = Adagrad([first], lr=0.1, initial_accumulator_value=constructor_value)
    group = (
        {"params": [later]} if group_value is None else {"params": [later], "initial_accumulator_value": group_value}
    )
    optimizer.add_param_group(group)
    gradients = [np.array([0.5, -2.0]), np.array([1.0, 0.25])]
    expected, _ = reference_adagrad(
        [np.array([3.0, -1.0])], [[g] for g in gradients], lr=0.1, initial_accumulator_value=constructor_value
    )
    for gradient in gradients:
        first.grad, later.grad = onnxnn.tensor([1.0, 1.0]), onnxnn.tensor(gradient, dtype=onnxnn.float32)
        optimizer.step()
    expected_sum = constructor_value + sum(g**2 for g in gradients)
    np.testing.assert_allclose(value(optimizer.state[later]["sum"]), expected_sum, rtol=1e-6)
    np.testing.assert_allclose(value(later), expected[0], rtol=1e-6)
    assert optimizer.state[later]["step"].item() == 2.0


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


FUSED_AND_FOREACH = "`fused` and `foreach` cannot be `True` together."
TENSOR_LR_FOREACH = "lr as a Tensor is not supported for capturable=False and foreach=True"
BETAS_TYPES = "betas must be either both floats or both Tensors"


@pytest.mark.parametrize(
    "optimizer_class, options, error, message",
    [
        (SGD, lambda: {"lr": 0.1, "fused": True, "foreach": True}, RuntimeError, FUSED_AND_FOREACH),
        (Adagrad, lambda: {"fused": True, "foreach": True}, RuntimeError, FUSED_AND_FOREACH),
        (Adam, lambda: {"fused": True, "foreach": True}, RuntimeError, FUSED_AND_FOREACH),
        (Adam, lambda: {"lr": onnxnn.tensor(0.1), "foreach": True}, ValueError, TENSOR_LR_FOREACH),
        (AdamW, lambda: {"lr": onnxnn.tensor(0.1), "foreach": True}, ValueError, TENSOR_LR_FOREACH),
        (Adam, lambda: {"betas": (0, 0.99)}, ValueError, BETAS_TYPES),
        (AdamW, lambda: {"betas": (onnxnn.tensor(0.9), 0.999)}, ValueError, BETAS_TYPES),
        (
            Adam,
            lambda: {"betas": (onnxnn.tensor(0.9), onnxnn.tensor(0.99)), "foreach": True},
            ValueError,
            "betas[0] as a Tensor is not supported for capturable=False and foreach=True",
        ),
        (
            Adam,
            lambda: {"betas": (onnxnn.tensor(0.9), onnxnn.tensor([0.99, 0.9]))},
            RuntimeError,  # from the range check, as in PyTorch
            "Boolean value of Tensor with more than one value is ambiguous",
        ),
    ],
)
def test_constructors_refuse_what_pytorch_refuses(optimizer_class, options, error, message):
    with pytest.raises(error, match=re.escape(message)):
        optimizer_class([onnxnn.tensor([1.0], requires_grad=True)], **options())


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"betas": [0.8, 0.9]}, (0.8, 0.9)),
        ({"lr": 0.1, "foreach": True, "capturable": True}, (0.9, 0.999)),  # a tensor lr then is fine
        ({"betas": ("tensor", "tensor")}, (0.8, 0.9)),
    ],
)
def test_adam_keeps_betas_as_a_tuple_of_scalars(options, expected):
    options = dict(options)
    if options.get("betas") == ("tensor", "tensor"):
        options["betas"] = [onnxnn.tensor([0.8]), onnxnn.tensor([[0.9]])]
    if options.get("capturable"):
        options["lr"] = onnxnn.tensor(0.1)
    optimizer = Adam([onnxnn.tensor([1.0], requires_grad=True)], **options)
    betas = optimizer.param_groups[0]["betas"]
    assert isinstance(betas, tuple) and optimizer.state_dict()["param_groups"][0]["betas"] == betas
    assert [getattr(beta, "shape", ()) for beta in betas] == [(), ()]
    np.testing.assert_allclose([float(beta) for beta in betas], expected, rtol=1e-6)


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


@pytest.mark.parametrize("decoupled_key", [False, None, True], ids=["adam-state", "no-flag", "adamw-state"])
@pytest.mark.parametrize("load", ["load_state_dict", "pickle"])
def test_adamw_keeps_decoupled_weight_decay_after_loading_any_state(decoupled_key, load):
    # PyTorch's AdamW.__setstate__ sets the flag on every group, whatever the loaded groups say.
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float64, requires_grad=True) for theta in initial]
    optimizer = AdamW(params, lr=0.1)
    if load == "load_state_dict":
        state_dict = Adam(params, lr=0.1, weight_decay=0.3).state_dict()
    else:  # an unpickled AdamW whose group (from an older onnxnn, or edited) says otherwise
        optimizer.param_groups[0]["weight_decay"] = 0.3
        state_dict = {"param_groups": optimizer.param_groups}
    group = state_dict["param_groups"][0]
    if decoupled_key is None:
        del group["decoupled_weight_decay"]
    else:
        group["decoupled_weight_decay"] = decoupled_key
    if load == "load_state_dict":
        optimizer.load_state_dict(state_dict)
    else:
        optimizer = pickle.loads(pickle.dumps(optimizer))
        params = optimizer.param_groups[0]["params"]
    assert optimizer.param_groups[0]["decoupled_weight_decay"] is True
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float64)
        optimizer.step()
    expected, _ = reference_adamw(initial, gradients, lr=0.1, weight_decay=0.3)
    for param, reference in zip(params, expected):
        assert_matches_reference(value(param), reference, initial, gradients, onnxnn.float64)


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


def reference_duplicated_sgd(initial, gradients, occurrences, lr, momentum, weight_decay=0, nesterov=False):
    """SGD over the parameters ``[initial[i] for i in occurrences]`` as PyTorch steps a list with a
    parameter listed twice: each occurrence in turn, in place. A parameter's first step starts a
    buffer from the gradient at every occurrence (PyTorch reads the buffers before stepping) and
    keeps the last; later steps update its one buffer at each occurrence."""
    params = [theta.copy() for theta in initial]
    buffers: list = [None] * len(params)
    for step_gradients in gradients:
        first_step = [buffer is None for buffer in buffers]
        for index in occurrences:
            g = step_gradients[index] + weight_decay * params[index]
            if first_step[index]:
                buffers[index] = g
            else:
                buffers[index] = momentum * buffers[index] + g
            params[index] = params[index] - lr * (g + momentum * buffers[index] if nesterov else buffers[index])
    return params, buffers


def reference_duplicated_rmsprop(
    initial, gradients, occurrences, lr, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False
):
    """RMSprop over ``[initial[i] for i in occurrences]`` as PyTorch steps it: each occurrence in
    turn, on the parameter's one state."""
    params = [theta.copy() for theta in initial]
    square_avgs = [np.zeros_like(theta) for theta in params]
    grad_avgs = [np.zeros_like(theta) for theta in params]
    buffers = [np.zeros_like(theta) for theta in params]
    for step_gradients in gradients:
        for index in occurrences:
            g = step_gradients[index] + weight_decay * params[index]
            square_avgs[index] = alpha * square_avgs[index] + (1 - alpha) * g**2
            average = square_avgs[index]
            if centered:
                grad_avgs[index] = alpha * grad_avgs[index] + (1 - alpha) * g
                average = average - grad_avgs[index] ** 2
            quotient = g / (np.sqrt(average) + eps)
            if momentum > 0:
                buffers[index] = momentum * buffers[index] + quotient
                quotient = buffers[index]
            params[index] = params[index] - lr * quotient
    return params, square_avgs


DUPLICATE_CASES = [
    (SGD, {"lr": 0.1, "momentum": 0.9}, reference_duplicated_sgd),
    (SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}, reference_duplicated_sgd),
    (RMSprop, {"lr": 0.01}, reference_duplicated_rmsprop),
    (
        RMSprop,
        {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.1},
        reference_duplicated_rmsprop,
    ),
]


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "optimizer_class, options, reference",
    DUPLICATE_CASES,
    ids=[case_id(case[:2]) for case in DUPLICATE_CASES],
)
def test_a_parameter_listed_twice_is_stepped_once_per_occurrence(optimizer_class, options, reference, executor_name):
    initial, gradients = make_problem()
    params = [onnxnn.tensor(theta, dtype=onnxnn.float64, requires_grad=True) for theta in initial]
    occurrences = [0, 1, 0, 2, 1]
    with pytest.warns(UserWarning, match="optimizer contains a parameter group with duplicate parameters"):
        optimizer = optimizer_class([params[i] for i in occurrences], **options)
    with onnxnn.set_executor(executor_name):
        for step_gradients in gradients:
            for param, gradient in zip(params, step_gradients):
                param.grad = onnxnn.tensor(gradient, dtype=onnxnn.float64)
            optimizer.step()
    expected_params, expected_states = reference(initial, gradients, occurrences, **options)
    key = "momentum_buffer" if optimizer_class is SGD else "square_avg"
    for param, expected, expected_state in zip(params, expected_params, expected_states):
        assert_matches_reference(value(param), expected, initial, gradients, onnxnn.float64)
        assert_matches_reference(value(optimizer.state[param][key]), expected_state, initial, gradients, onnxnn.float64)


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


@pytest.mark.parametrize("with_closure", [False, True])
def test_step_hooks_see_the_optimizer_as_the_first_argument(with_closure):
    param = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    seen = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(("pre", args)))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: seen.append(("post", args)))
    param.grad = onnxnn.tensor([1.0])

    def closure():
        return 3.0

    loss = optimizer.step(closure) if with_closure else optimizer.step()
    expected_args = (optimizer, closure) if with_closure else (optimizer,)
    assert seen == [("pre", expected_args), ("post", expected_args)]
    assert loss == (3.0 if with_closure else None)


def test_a_step_pre_hook_replaces_the_arguments_keeping_the_optimizer_first():
    param = onnxnn.tensor([1.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: ((args[0], lambda: 7.0), kwargs))
    param.grad = onnxnn.tensor([1.0])
    assert optimizer.step(None) == 7.0
    handle.remove()
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: "bad")
    with pytest.raises(RuntimeError, match="must return None or a tuple of \\(new_args, new_kwargs\\)"):
        optimizer.step()


# (register method, what triggers its hooks, the arguments after the optimizer they are called with)
STATE_DICT_HOOKS = [
    ("register_state_dict_pre_hook", "save", 0),
    ("register_state_dict_post_hook", "save", 1),
    ("register_load_state_dict_pre_hook", "load", 1),
    ("register_load_state_dict_post_hook", "load", 0),
]


def _save_or_load(optimizer, trigger):
    state_dict = optimizer.state_dict()
    if trigger == "load":
        optimizer.load_state_dict(state_dict)
    return state_dict


@pytest.mark.parametrize("register, trigger, extra_arguments", STATE_DICT_HOOKS, ids=[c[0] for c in STATE_DICT_HOOKS])
def test_state_dict_hooks_run_in_order_with_prepend_and_can_be_removed(register, trigger, extra_arguments):
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = Adam([param], lr=0.1)
    calls = []

    def hook(name):
        def record(opt, *arguments):
            assert opt is optimizer and len(arguments) == extra_arguments
            calls.append(name)

        return record

    first = getattr(optimizer, register)(hook("first"))
    getattr(optimizer, register)(hook("second"))
    getattr(optimizer, register)(hook("prepended"), prepend=True)
    _save_or_load(optimizer, trigger)
    assert calls == ["prepended", "first", "second"]
    calls.clear()
    first.remove()
    _save_or_load(optimizer, trigger)
    assert calls == ["prepended", "second"]
    calls.clear()
    unpickled = pickle.loads(pickle.dumps(optimizer))  # hooks are not pickled
    _save_or_load(unpickled, trigger)
    assert calls == []


def test_state_dict_post_hooks_edit_or_replace_the_dict():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    optimizer.register_state_dict_post_hook(lambda opt, state_dict: state_dict.update(extra=1))
    optimizer.register_state_dict_post_hook(lambda opt, state_dict: {**state_dict, "replaced": state_dict["extra"]})
    state_dict = optimizer.state_dict()
    assert state_dict["extra"] == 1 and state_dict["replaced"] == 1 and state_dict["param_groups"][0]["lr"] == 0.1


def test_load_state_dict_pre_hooks_get_a_copy_and_may_return_the_dict_to_load():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    optimizer = SGD([param], lr=0.1)
    saved = SGD([onnxnn.tensor([0.0, 0.0], requires_grad=True)], lr=0.5).state_dict()
    seen = []

    def edit(opt, state_dict):
        seen.append(state_dict is saved)
        state_dict["edited"] = True  # on the copy

    def replace(opt, state_dict):
        groups = [{**group, "lr": 0.25} for group in state_dict["param_groups"]]
        return {"state": state_dict["state"], "param_groups": groups}

    optimizer.register_load_state_dict_pre_hook(edit)
    optimizer.register_load_state_dict_pre_hook(replace)
    optimizer.register_load_state_dict_post_hook(lambda opt: seen.append(opt.param_groups[0]["lr"]))
    optimizer.load_state_dict(saved)
    assert seen == [False, 0.25] and "edited" not in saved and saved["param_groups"][0]["lr"] == 0.5


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
