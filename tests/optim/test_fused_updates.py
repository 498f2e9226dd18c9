"""Adam, AdamW, Adagrad, RMSprop, Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop and SGD (without momentum)
record one fused node per group of parameters, and it changes no bit.

The same small model is trained twice for 100 steps: once with the onnxnn optimizer, once with
the elementwise formulas onnxnn used before the fused nodes (tests/unfused_updates.py, in numpy,
fed the same gradients). Every op of both is a correctly rounded IEEE operation (add, subtract,
multiply, divide, square root, maximum) on the same operands in the same order, and the
hyperparameter factors are computed in float64 and rounded to float32 once in both, so the
parameters must agree bit for bit on either executor. Against ``torch.optim`` (when torch is
installed), which fuses differently (``lerp``, ``addcmul``, ``addcdiv``), the bound is the
rounding of the steps.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.kernels import update_driver
from onnxnn.optim import ASGD, SGD, Adadelta, Adagrad, Adam, Adamax, AdamW, NAdam, RAdam, RMSprop, Rprop
from onnxnn.runtime import realization as executor

from tolerances import assert_within, gamma
from unfused_updates import (
    unfused_adadelta_step,
    unfused_adagrad_step,
    unfused_adam_step,
    unfused_adamax_step,
    unfused_asgd_step,
    unfused_nadam_step,
    unfused_radam_step,
    unfused_rmsprop_step,
    unfused_rprop_step,
    unfused_sgd_step,
)

STEPS = 100
CASES = [
    (Adam, {"lr": 0.01}),
    (Adam, {"lr": 0.01, "weight_decay": 0.1}),
    (AdamW, {"lr": 0.01, "weight_decay": 0.1}),
    (Adam, {"lr": 0.05, "betas": (0.8, 0.9), "eps": 1e-3, "weight_decay": 0.05, "amsgrad": True, "maximize": True}),
    (AdamW, {"lr": 0.02, "amsgrad": True}),
    (Adagrad, {"lr": 0.1}),
    (
        Adagrad,
        {
            "lr": 0.1,
            "lr_decay": 0.01,
            "weight_decay": 0.1,
            "eps": 1e-3,
            "initial_accumulator_value": 0.1,
            "maximize": True,
        },
    ),
    (RMSprop, {"lr": 0.01}),
    (RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True}),
    (
        RMSprop,
        {
            "lr": 0.01,
            "alpha": 0.9,
            "eps": 1e-4,
            "weight_decay": 0.05,
            "momentum": 0.3,
            "centered": True,
            "maximize": True,
        },
    ),
    (Adamax, {"lr": 0.01}),
    (Adamax, {"lr": 0.02, "betas": (0.8, 0.9), "eps": 1e-3, "weight_decay": 0.1, "maximize": True}),
    (NAdam, {"lr": 0.01}),
    (NAdam, {"lr": 0.01, "weight_decay": 0.1, "momentum_decay": 0.01, "maximize": True}),
    (NAdam, {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (RAdam, {"lr": 0.01}),  # unrectified for its first 5 steps, then rectified
    (RAdam, {"lr": 0.01, "weight_decay": 0.1, "maximize": True}),
    (RAdam, {"lr": 0.02, "betas": (0.8, 0.9), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    (Adadelta, {"lr": 1.0}),
    (Adadelta, {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1, "maximize": True}),
    (ASGD, {"lr": 0.01}),
    (ASGD, {"lr": 0.05, "lambd": 0.01, "alpha": 0.5, "t0": 40, "weight_decay": 0.1, "maximize": True}),
    (Rprop, {"lr": 0.01}),
    (Rprop, {"lr": 0.02, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.05), "maximize": True}),
    (SGD, {"lr": 0.05}),
    (SGD, {"lr": 0.05, "weight_decay": 0.1, "maximize": True}),
]


def case_id(case) -> str:
    optimizer_class, options = case
    return optimizer_class.__name__ + "-" + "-".join(f"{k}={v}" for k, v in options.items())


def _model_and_data():
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1))
    generator = np.random.default_rng(0)
    inputs = onnxnn.tensor(generator.standard_normal((8, 4)), dtype=onnxnn.float32)
    targets = onnxnn.tensor(generator.standard_normal((8, 1)), dtype=onnxnn.float32)
    return model, inputs, targets


def _backward(model, inputs, targets) -> None:
    for param in model.parameters():
        param.grad = None
    ((model(inputs) - targets) ** 2).mean().backward()


def train_fused(optimizer_class, options) -> list:
    model, inputs, targets = _model_and_data()
    optimizer = optimizer_class(model.parameters(), **options)
    for _ in range(STEPS):
        _backward(model, inputs, targets)
        optimizer.step()
    return [param.detach().numpy() for param in model.parameters()]


# optimizer -> (its unfused step, how many zero-filled states it starts with, other states' first values)
UNFUSED = {
    RMSprop: (unfused_rmsprop_step, 3, ()),
    Adamax: (unfused_adamax_step, 2, ()),
    NAdam: (unfused_nadam_step, 2, (1.0,)),  # and the product of the momentum coefficients
    RAdam: (unfused_radam_step, 2, ()),
    Adadelta: (unfused_adadelta_step, 2, ()),
    ASGD: (unfused_asgd_step, 1, (None, 1.0)),  # and eta (the learning rate at first) and mu
    Rprop: (unfused_rprop_step, 1, (None,)),  # and the step sizes (the learning rate at first)
    SGD: (unfused_sgd_step, 0, ()),  # without momentum
}


def train_unfused(optimizer_class, options) -> list:
    model, inputs, targets = _model_and_data()
    params = list(model.parameters())
    if optimizer_class is Adagrad:
        options = dict(options)
        initial_sum = options.pop("initial_accumulator_value", 0)
        states = [[np.full(param.shape, initial_sum, np.float32)] for param in params]
        update = unfused_adagrad_step
    elif optimizer_class in UNFUSED:
        update, zero_filled, others = UNFUSED[optimizer_class]
        others = tuple(options["lr"] if other is None else other for other in others)
        states = [[*(np.zeros(param.shape, np.float32) for _ in range(zero_filled)), *others] for param in params]
    else:
        decoupled = optimizer_class is AdamW
        options = {"weight_decay": 1e-2 if decoupled else 0, **options, "decoupled_weight_decay": decoupled}
        states = [[np.zeros(param.shape, np.float32) for _ in range(3)] for param in params]
        update = unfused_adam_step
    for step in range(1, STEPS + 1):
        _backward(model, inputs, targets)
        for param, state in zip(params, states):
            new_param, *state[:] = update(param.detach().numpy(), param.grad.numpy(), *state, float(step), **options)
            with onnxnn.no_grad():
                param.copy_(onnxnn.tensor(new_param))
    return [param.detach().numpy() for param in params]


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels", "kernels-one-by-one"])
@pytest.mark.parametrize("case", CASES, ids=[case_id(case) for case in CASES])
def test_fused_updates_equal_the_unfused_formulas_bitwise_over_100_steps(case, executor_name, monkeypatch):
    if executor_name == "kernels-one-by-one":  # the kernel's path for large models: no flat buffer
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        executor_name = "kernels"
    with onnxnn.set_executor(executor_name):
        fused = train_fused(*case)
        unfused = train_unfused(*case)
    for result, expected in zip(fused, unfused):
        assert result.dtype == np.float32 and result.tobytes() == expected.tobytes()


def test_adam_records_one_node_per_dtype_and_step_count():
    first = onnxnn.ones(3, requires_grad=True)
    late = onnxnn.ones(2, requires_grad=True)  # no gradient on the first step: one step behind
    wide = onnxnn.ones(2, dtype=onnxnn.float64, requires_grad=True)
    optimizer = Adam([first, late, wide], lr=0.1, amsgrad=True)
    for step, expected_nodes in enumerate([2, 3]):  # float32 and float64; then float32 at steps 2 and 1
        first.grad, wide.grad = onnxnn.full((3,), 0.5), onnxnn.full((2,), 0.5, dtype=onnxnn.float64)
        late.grad = onnxnn.full((2,), 0.5) if step == 1 else None
        with executor.recording_only():
            optimizer.step()
        updated = [param for param in (first, late, wide) if param.grad is not None]
        assert len({id(param._value.node) for param in updated}) == expected_nodes
        for param in updated:  # the parameter and its state are written by one node
            node = param._value.node
            assert node.op_type == "Adam"
            assert all(
                optimizer.state[param][key]._value.node is node for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
            )
        for param in updated:
            param.detach().numpy()
    assert [optimizer.state[param]["step"].item() for param in (first, late, wide)] == [2.0, 1.0, 2.0]
    # A parameter's first step moves it by lr against the gradient's sign (m / sqrt(v) = 1 after
    # the bias corrections; eps shifts it by 2e-8 relatively).
    np.testing.assert_allclose(late.detach().numpy(), 0.9, rtol=1e-6)


def test_capturable_adam_keeps_its_step_counts_in_the_graph():
    param = onnxnn.ones(3, requires_grad=True)
    optimizer = Adam([param], lr=0.1, capturable=True)
    param.grad = onnxnn.full((3,), 0.5)
    with executor.recording_only():
        optimizer.step()
    assert param._value.node.op_type != "Adam"
    assert optimizer.state[param]["step"]._value.node is not None  # counted in the graph, not on the host
    np.testing.assert_allclose(param.detach().numpy(), 0.9, rtol=1e-6)
    assert optimizer.state[param]["step"].item() == 1.0


@pytest.mark.parametrize("case", CASES, ids=[case_id(case) for case in CASES])
def test_fused_updates_match_torch_over_100_steps(case):
    torch = pytest.importorskip("torch")
    optimizer_class, options = case
    generator = np.random.default_rng(1)
    shapes = [(3, 2), (4,), ()]
    initial = [generator.standard_normal(shape).astype(np.float32) for shape in shapes]
    gradients = [
        [(generator.standard_normal(shape) * scale).astype(np.float32) for shape in shapes]
        for scale in np.linspace(0.1, 2.0, STEPS)
    ]
    params = [onnxnn.tensor(array, requires_grad=True) for array in initial]
    torch_params = [torch.tensor(array, requires_grad=True) for array in initial]
    optimizer = optimizer_class(params, **options)
    torch_optimizer = getattr(torch.optim, optimizer_class.__name__)(torch_params, **options)
    moved = 0.0  # the sum over steps of the largest change of a parameter
    for step_gradients in gradients:
        before = [torch_param.detach().numpy().copy() for torch_param in torch_params]
        for param, torch_param, gradient in zip(params, torch_params, step_gradients):
            param.grad = onnxnn.tensor(gradient)
            torch_param.grad = torch.tensor(gradient)
        optimizer.step()
        torch_optimizer.step()
        moved += max(np.abs(p.detach().numpy() - b).max() for p, b in zip(torch_params, before))
    # 16 roundings per element per step at most (optimizer_cases.py's ROUNDINGS_PER_STEP), each
    # relative to the parameter or to the step's change (state errors enter the change through its
    # quotient, relatively); errors carry over with factors <= 1 (the decays), so they add up.
    magnitude = max(np.abs(a).max() for a in initial) + moved
    for param, torch_param in zip(params, torch_params):
        expected = torch_param.detach().numpy().astype(np.float64)
        assert_within(
            param.detach().numpy().astype(np.float64),
            expected,
            2 * gamma(16 * STEPS, np.float32) * (np.abs(expected) + magnitude),
        )


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("optimizer_class", [Adagrad])
def test_low_precision_parameters_round_per_op_as_the_unfused_update(optimizer_class, dtype, executor_name):
    """float16/bfloat16 ops compute in float32 and round each result, the fused updates' too.

    (Adam's, RMSprop's and SGD's Momentum round as PyTorch's ops: see
    test_low_precision_updates_round_as_torch.)
    """
    if optimizer_class is Adam:
        options, update, state_count = {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True}, unfused_adam_step, 3
    else:
        options, update, state_count = {"lr": 0.05, "weight_decay": 0.1, "lr_decay": 0.1}, unfused_adagrad_step, 1
    generator = np.random.default_rng(2)
    shapes = [(3, 2), (4,), ()]
    initial = [np.asarray(generator.standard_normal(shape), dtype.numpy_dtype) for shape in shapes]
    params = [onnxnn.tensor(array, dtype=dtype, requires_grad=True) for array in initial]
    optimizer = optimizer_class(params, **options)
    expected = [[array, *(np.zeros(array.shape, dtype.numpy_dtype) for _ in range(state_count))] for array in initial]
    with onnxnn.set_executor(executor_name):
        for step in range(1, 11):
            gradients = [np.asarray(generator.standard_normal(shape), dtype.numpy_dtype) for shape in shapes]
            for param, state, gradient in zip(params, expected, gradients):
                param.grad = onnxnn.tensor(gradient, dtype=dtype)
                state[:] = update(state[0], gradient, *state[1:], float(step), **options)
            optimizer.step()
    for param, state in zip(params, expected):
        assert param.detach().numpy().tobytes() == state[0].tobytes()
        key, position = {Adam: ("exp_avg_sq", 2), Adagrad: ("sum", 1)}[optimizer_class]
        assert optimizer.state[param][key].numpy().tobytes() == state[position].tobytes()


@pytest.mark.parametrize(
    "optimizer_class, options, state_keys",
    [
        (Adagrad, {"lr": 0.1}, ["sum"]),
        (RMSprop, {"lr": 0.1, "centered": True, "momentum": 0.5}, ["square_avg", "momentum_buffer", "grad_avg"]),
        (Adamax, {"lr": 0.1, "weight_decay": 0.1}, ["exp_avg", "exp_inf"]),
        (NAdam, {"lr": 0.1, "decoupled_weight_decay": True, "weight_decay": 0.1}, ["exp_avg", "exp_avg_sq"]),
        (RAdam, {"lr": 0.1}, ["exp_avg", "exp_avg_sq"]),
        (Adadelta, {"lr": 0.1, "maximize": True}, ["square_avg", "acc_delta"]),
        (ASGD, {"lr": 0.1, "t0": 0}, ["ax"]),
        (Rprop, {"lr": 0.1}, ["prev", "step_size"]),
        (SGD, {"lr": 0.1, "weight_decay": 0.1}, []),
    ],
    ids=lambda case: case.__name__ if isinstance(case, type) else "",
)
def test_fused_optimizers_record_one_node_per_group(optimizer_class, options, state_keys):
    params = [onnxnn.ones(3, requires_grad=True), onnxnn.ones(2, requires_grad=True)]
    optimizer = optimizer_class(params, **options)
    for param in params:
        param.grad = onnxnn.full(param.shape, 0.5)
    with executor.recording_only():
        optimizer.step()
    node = params[0]._value.node
    assert node.op_type == optimizer_class.__name__ and params[1]._value.node is node
    assert all(optimizer.state[param][key]._value.node is node for param in params for key in state_keys)
    if optimizer_class is Adagrad:
        # The first step moves each parameter by lr (g / sqrt(g^2)), and adds g^2 to the sum.
        np.testing.assert_allclose(params[0].detach().numpy(), 0.9, rtol=1e-6)
        np.testing.assert_allclose(optimizer.state[params[1]]["sum"].numpy(), 0.25, rtol=0)
    if optimizer_class is SGD:  # no state: 1 - lr * (0.5 + 0.1 * 1)
        np.testing.assert_allclose(params[0].detach().numpy(), 0.94, rtol=1e-6)
    else:
        assert [optimizer.state[param]["step"].item() for param in params] == [1.0, 1.0]


def _rounding(dtype):
    """``rounded(array)``: float32 values rounded to ``dtype`` and back; ``scalar(value)``: a Python
    float as the scalar of PyTorch's ``add(alpha=)`` on ``dtype`` tensors: to float32, then to ``dtype``."""
    float32 = np.float32

    def rounded(array):
        return np.asarray(array, float32).astype(dtype).astype(float32)

    def scalar(value):
        return rounded(float32(value))

    return rounded, scalar


def _fused_multiply_add(first, second, addend):
    """``first * second + addend`` of float32 values rounded once to float32 (computed in float64, where
    the product of two float32 values is exact), as torch's vectorized ``lerp_`` and ``addcmul_``."""
    return (np.float64(first) * np.asarray(second, np.float64) + addend).astype(np.float32)


def _lerp(start, end, weight):
    """torch's ``start.lerp_(end, weight)`` on float32 values: ``fma(weight, end - start, start)``, or
    ``fma(weight - 1, end - start, end)`` where ``|weight| >= 0.5``."""
    weight = np.float32(weight)
    if abs(weight) < 0.5:
        return _fused_multiply_add(weight, end - start, start)
    return _fused_multiply_add(weight - np.float32(1), end - start, end)


def reference_low_precision_sgd(
    initial, gradients, dtype, *, lr, momentum, dampening=0, weight_decay=0, nesterov=False
):
    """``torch.optim.SGD``'s for-loop step on float16/bfloat16 tensors on the CPU, in numpy.

    Each of its ops computes in float32 and rounds its result to ``dtype``; ``buf.mul_(momentum)``
    takes the momentum in float32, while ``add(..., alpha=s)`` rounds ``s`` to ``dtype`` first.
    Returns the final parameters and their states.
    """
    rounded, scalar = _rounding(dtype)
    params = [rounded(array) for array in initial]
    buffers: list = [None] * len(params)
    for step_gradients in gradients:
        for index, gradient in enumerate(step_gradients):
            x, g = params[index], rounded(gradient)
            if weight_decay != 0:
                g = rounded(g + scalar(weight_decay) * x)
            if buffers[index] is None:
                buffers[index] = g
            else:
                buffers[index] = rounded(rounded(buffers[index] * np.float32(momentum)) + scalar(1 - dampening) * g)
            direction = rounded(g + scalar(momentum) * buffers[index]) if nesterov else buffers[index]
            params[index] = rounded(x - scalar(lr) * direction)
    return params, {"momentum_buffer": buffers}


def reference_low_precision_rmsprop(
    initial, gradients, dtype, *, lr, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False, maximize=False
):
    """``torch.optim.RMSprop``'s for-loop step on float16/bfloat16 tensors on the CPU, in numpy, as
    :func:`reference_low_precision_sgd`: ``mul_``, ``addcmul_``, ``lerp_`` and ``addcdiv_`` take
    their scalars in float32, ``add`` rounds its own (weight_decay, eps, lr with momentum);
    ``addcmul_`` and ``lerp_`` are fused multiply-adds, ``addcdiv_`` is ``x + (value * g) / d``."""
    rounded, scalar = _rounding(dtype)
    wide = np.float32
    params = [rounded(array) for array in initial]
    square_avgs = [np.zeros_like(x) for x in params]
    grad_avgs = [np.zeros_like(x) for x in params]
    buffers = [np.zeros_like(x) for x in params]
    for step_gradients in gradients:
        for index, gradient in enumerate(step_gradients):
            x, g = params[index], rounded(gradient)
            g = -g if maximize else g
            if weight_decay != 0:
                g = rounded(g + scalar(weight_decay) * x)
            square_avg = rounded(square_avgs[index] * wide(alpha))
            square_avgs[index] = square_avg = rounded(_fused_multiply_add(wide(1 - alpha) * g, g, square_avg))
            if centered:
                grad_avgs[index] = grad_avg = rounded(_lerp(grad_avgs[index], g, 1 - alpha))
                average = rounded(np.sqrt(rounded(_fused_multiply_add(-grad_avg, grad_avg, square_avg))))
            else:
                average = rounded(np.sqrt(square_avg))
            average = rounded(average + scalar(eps))
            if momentum > 0:
                buffers[index] = rounded(rounded(buffers[index] * wide(momentum)) + g / average)
                params[index] = rounded(x - scalar(lr) * buffers[index])
            else:
                params[index] = rounded(x + (wide(-lr) * g) / average)
    states = {"square_avg": square_avgs}
    if centered:
        states["grad_avg"] = grad_avgs
    if momentum > 0:
        states["momentum_buffer"] = buffers
    return params, states


def reference_low_precision_adam(
    initial,
    gradients,
    dtype,
    *,
    lr,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0,
    amsgrad=False,
    maximize=False,
    decoupled=False,
):
    """``torch.optim.Adam``'s (``AdamW``'s with ``decoupled``) for-loop step on float16/bfloat16
    tensors on the CPU, in numpy, as :func:`reference_low_precision_sgd`: ``lerp_``, ``mul_``,
    ``addcmul_``, ``/`` and ``addcdiv_`` take their scalars in float32, ``add`` rounds its own (eps,
    weight_decay); the bias corrections and step size are Python floats. ``lerp_`` and ``addcmul_`` are
    fused multiply-adds, ``addcdiv_`` is ``x + (value * m) / d``."""
    rounded, scalar = _rounding(dtype)
    wide = np.float32
    beta1, beta2 = betas
    params = [rounded(array) for array in initial]
    exp_avgs = [np.zeros_like(x) for x in params]
    exp_avg_sqs = [np.zeros_like(x) for x in params]
    maxima = [np.zeros_like(x) for x in params]
    for step, step_gradients in enumerate(gradients, start=1):
        for index, gradient in enumerate(step_gradients):
            x, g = params[index], rounded(gradient)
            g = -g if maximize else g
            if weight_decay and decoupled:
                x = rounded(x * wide(1 - lr * weight_decay))
            elif weight_decay:
                g = rounded(g + scalar(weight_decay) * x)
            m = exp_avgs[index] = rounded(_lerp(exp_avgs[index], g, 1 - beta1))
            v = rounded(_fused_multiply_add(wide(1 - beta2) * g, g, rounded(exp_avg_sqs[index] * wide(beta2))))
            exp_avg_sqs[index] = v
            if amsgrad:
                v = maxima[index] = np.maximum(maxima[index], v)
            step_size = lr / (1 - beta1**step)
            denominator = rounded(rounded(rounded(np.sqrt(v)) / wide((1 - beta2**step) ** 0.5)) + scalar(eps))
            params[index] = rounded(x + (wide(-step_size) * m) / denominator)
    states = {"exp_avg": exp_avgs, "exp_avg_sq": exp_avg_sqs}
    if amsgrad:
        states["max_exp_avg_sq"] = maxima
    return params, states


def reference_low_precision_adamw(initial, gradients, dtype, *, weight_decay=1e-2, **options):
    return reference_low_precision_adam(initial, gradients, dtype, weight_decay=weight_decay, decoupled=True, **options)


LOW_PRECISION_CASES = [
    (Adam, {"lr": 0.01, "betas": (0.9, 0.99)}, reference_low_precision_adam),
    (Adam, {"lr": 0.05, "weight_decay": 0.1, "amsgrad": True, "maximize": True}, reference_low_precision_adam),
    (AdamW, {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-3}, reference_low_precision_adamw),
    (SGD, {"lr": 0.01, "momentum": 0.99}, reference_low_precision_sgd),
    (SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}, reference_low_precision_sgd),
    (SGD, {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.1, "nesterov": True}, reference_low_precision_sgd),
    (RMSprop, {"lr": 0.01}, reference_low_precision_rmsprop),
    (RMSprop, {"lr": 0.01, "alpha": 0.9, "momentum": 0.5, "maximize": True}, reference_low_precision_rmsprop),
    (
        RMSprop,
        {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1},
        reference_low_precision_rmsprop,
    ),
]
LOW_PRECISION_IDS = [case_id(case[:2]) for case in LOW_PRECISION_CASES]


def _low_precision_run(optimizer_class, dtype, options, shapes, steps, executor_name):
    """``steps`` steps on ``dtype`` parameters of ``shapes`` with gradients of mean 0.5 (so that the
    averages settle): the initial values and gradients (float32), the parameters and their states."""
    generator = np.random.default_rng(3)
    initial = [generator.standard_normal(shape).astype(np.float32) for shape in shapes]
    gradients = [
        [(generator.standard_normal(shape) + 0.5).astype(np.float32) for shape in shapes] for _ in range(steps)
    ]
    params = [onnxnn.tensor(array).to(dtype).requires_grad_() for array in initial]
    optimizer = optimizer_class(params, **options)
    with onnxnn.set_executor(executor_name):
        for step_gradients in gradients:
            for param, gradient in zip(params, step_gradients):
                param.grad = onnxnn.tensor(gradient).to(dtype)
            optimizer.step()
    states = {
        key: [optimizer.state[param][key].numpy() for param in params]
        for key in optimizer.state[params[0]]
        if key != "step"
    }
    return initial, gradients, [param.detach().numpy() for param in params], states


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels", "kernels-one-by-one"])
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("optimizer_class, options, reference", LOW_PRECISION_CASES, ids=LOW_PRECISION_IDS)
def test_low_precision_updates_round_as_torch(optimizer_class, options, reference, dtype, executor_name, monkeypatch):
    """Their decays multiply in float32 (0.99 is 0.98828125 in bfloat16: SGD's buffer would settle
    15% low), the other scalars are rounded where torch's ``add(alpha=)`` rounds them."""
    if executor_name == "kernels-one-by-one":  # a large model's path: one tensor at a time, in blocks
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        monkeypatch.setattr(update_driver, "RECYCLE_MIN_ELEMENTS", 8)
        monkeypatch.setattr(update_driver, "BLOCK_ELEMENTS", 4)
        executor_name = "kernels"
    shapes = [(3, 5), (7,), ()]
    initial, gradients, params, states = _low_precision_run(optimizer_class, dtype, options, shapes, 30, executor_name)
    expected_params, expected_states = reference(initial, gradients, dtype.numpy_dtype, **options)
    assert sorted(states) == sorted(expected_states)
    results = params + [array for key in sorted(states) for array in states[key]]
    expected = expected_params + [array for key in sorted(states) for array in expected_states[key]]
    for result, reference_value in zip(results, expected):
        assert result.dtype == dtype.numpy_dtype
        assert result.tobytes() == reference_value.astype(dtype.numpy_dtype).tobytes()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("optimizer_class, options, reference", LOW_PRECISION_CASES, ids=LOW_PRECISION_IDS)
def test_low_precision_updates_match_torch_over_100_steps(optimizer_class, options, reference, dtype):
    torch = pytest.importorskip("torch")
    # 1024 elements: torch's CPU kernels take their vectorized path for all of them (their scalar
    # tail rounds ``alpha * b`` to the dtype before adding, one more rounding).
    initial, gradients, params, states = _low_precision_run(
        optimizer_class, getattr(onnxnn, dtype), options, [(1024,)], 100, "kernels"
    )
    torch_param = torch.tensor(initial[0]).to(getattr(torch, dtype)).requires_grad_()
    torch_optimizer = getattr(torch.optim, optimizer_class.__name__)([torch_param], foreach=False, **options)
    for step_gradients in gradients:
        torch_param.grad = torch.tensor(step_gradients[0]).to(torch_param.dtype)
        torch_optimizer.step()
    results = [params[0]] + [states[key][0] for key in sorted(states)]
    expected = [torch_param.detach()] + [torch_optimizer.state[torch_param][key] for key in sorted(states)]
    for result, reference_value in zip(results, expected):
        result, reference_value = result.astype(np.float32), reference_value.float().numpy()
        # Bit for bit, NaN where torch's is (a centered RMSprop's rounded variance can be negative).
        np.testing.assert_array_equal(result, reference_value)


@pytest.mark.parametrize("optimizer_class", [Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop])
def test_formula_updates_share_a_node_only_where_their_factors_agree(optimizer_class):
    """Parameters at different step counts have different factors (Adadelta's and Rprop's read none),
    and a float16 parameter keeps PyTorch's op-by-op rounding instead of a fused node."""
    early, late = onnxnn.ones(3, requires_grad=True), onnxnn.ones(2, requires_grad=True)
    half = onnxnn.ones(2, dtype=onnxnn.float16, requires_grad=True)
    optimizer = optimizer_class([early, late, half], lr=0.1)
    for step in range(2):
        early.grad, half.grad = onnxnn.full((3,), 0.5), onnxnn.full((2,), 0.5, dtype=onnxnn.float16)
        late.grad = onnxnn.full((2,), 0.5) if step == 1 else None  # one step behind
        with executor.recording_only():
            optimizer.step()
        nodes = {param._value.node.op_type for param in (early, late, half) if param.grad is not None}
        assert optimizer_class.__name__ in nodes
        assert half._value.node.op_type != optimizer_class.__name__
        shared = early._value.node is late._value.node
        for param in (early, late, half):
            param.detach().numpy()
    assert shared == (optimizer_class in (Adadelta, Rprop))


@pytest.mark.parametrize("executor_name", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "optimizer_class, options",
    [
        (Adamax, {}),
        (NAdam, {"weight_decay": 0.1, "decoupled_weight_decay": True}),
        (RAdam, {}),  # plain for 5 steps, then rectified
        (ASGD, {"t0": 3, "lambd": 0.05}),
        (RMSprop, {"momentum": 0.5}),
        (Adadelta, {}),
        (Rprop, {}),
    ],
    ids=lambda case: case.__name__ if isinstance(case, type) else "",
)
def test_capturable_steps_count_in_the_graph_and_give_the_same_bits(optimizer_class, options, executor_name):
    """``capturable``: step counts, eta, mu and momentum products computed in the graph (as an exported
    training step needs) in float64, as the host computes them in Python floats."""

    def train(capturable: bool) -> tuple:
        generator = np.random.default_rng(3)
        params = [
            onnxnn.tensor(generator.standard_normal(s), dtype=onnxnn.float32, requires_grad=True)
            for s in [(3, 4), (5,), ()]
        ]
        optimizer = optimizer_class(params, lr=0.01, capturable=capturable, **options)
        with onnxnn.set_executor(executor_name):
            for step in range(12):
                for param in params:
                    param.grad = onnxnn.tensor(
                        generator.standard_normal(param.shape) * (step + 1) * 0.3, dtype=onnxnn.float32
                    )
                optimizer.step()
        state = {
            key: value.numpy() for key, value in optimizer.state[params[0]].items() if isinstance(value, onnxnn.Tensor)
        }
        return [param.detach().numpy() for param in params], state, optimizer.state[params[0]]["step"]

    host, host_state, _ = train(False)
    graph, graph_state, step = train(True)
    assert step.item() == 12.0
    for result, expected in zip(graph, host):
        assert result.tobytes() == expected.tobytes()
    for key, value in host_state.items():
        assert graph_state[key].tobytes() == value.tobytes(), key


@pytest.mark.parametrize("optimizer_class", [SGD, Adamax, NAdam, RAdam, Adadelta, ASGD, Rprop])
def test_a_learning_rate_given_as_a_tensor_steps_as_the_number_it_holds(optimizer_class):
    def train(lr) -> list:
        generator = np.random.default_rng(4)
        params = [
            onnxnn.tensor(generator.standard_normal(s), dtype=onnxnn.float32, requires_grad=True)
            for s in [(3, 4), (5,)]
        ]
        optimizer = optimizer_class(params, lr=lr)
        for _ in range(7):
            for param in params:
                param.grad = onnxnn.tensor(generator.standard_normal(param.shape), dtype=onnxnn.float32)
            optimizer.step()
        return [param.detach().numpy() for param in params]

    # The tensor holds float32's 0.01, which the host then computes with.
    for result, expected in zip(train(onnxnn.tensor(0.01)), train(float(np.float32(0.01)))):
        assert result.tobytes() == expected.tobytes()
