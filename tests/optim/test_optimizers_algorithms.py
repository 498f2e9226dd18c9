"""onnxnn.optim optimizers against numpy implementations of PyTorch's documented algorithms.

The references (optimizer_cases.py) transcribe the pseudo-code of the PyTorch documentation page of
each optimizer, in float64; the optimizers run on float32 (and float64) tensors with fixed gradients.
Here: parameters and state match the algorithm for every option case, one step is one session run,
a parameter listed twice is stepped once per occurrence, functional and subclassed optimizers, and
SGD with momentum on each executor. Param groups, construction, state_dict and hooks are in
test_optimizers_groups_and_state.py.
"""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
from onnxnn.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop
from onnxnn.runtime import realization as executor


from .optimizer_cases import (
    OPTION_CASES,
    REFERENCES,
    assert_matches_reference,
    case_id,
    make_problem,
    reference_sgd,
    rounded_problem,
    run_steps,
    value,
)


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
