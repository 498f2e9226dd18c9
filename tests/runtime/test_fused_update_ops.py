"""onnxnn's Adam, Adagrad and RMSprop ops: torch.optim's documented steps on both executors, bad input.

Its hyperparameters are 0-d inputs (float64 as the optimizer feeds them, or the tensors' own
dtype), an omitted weight_decay meaning none. onnxruntime runs it through onnxnn's decomposition
(standard Sub/Mul/Add/Div/Sqrt/Pow/Max nodes); the kernels executor runs its own kernel, as one
flat vector or one tensor at a time. Expected values are the PyTorch documentation's pseudo code
in float64.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.graph import constant
from onnxnn.kernels import update_driver
from onnxnn.runtime.ops.training import TRAINING_DOMAIN
from onnxnn.runtime.realization import data_of
from onnxnn.runtime.recording import record

from tolerances import assert_within, gamma

SHAPES = [(3, 2), (4,), ()]


def documented_adam(
    xs, gs, ms, vs, v_maxes, *, lr, step, beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize
):
    """The pseudo code of torch.optim.Adam's documentation (AdamW's for decoupled decay), in float64."""
    results = [[], [], [], []]
    for index, (x, g, m, v) in enumerate(zip(xs, gs, ms, vs)):
        g = -g if maximize else g
        if decoupled:
            x = x - lr * weight_decay * x
        else:
            g = g + weight_decay * x
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g**2
        v_max = np.maximum(v_maxes[index], v) if amsgrad else v
        x = x - lr * (m / (1 - beta1**step)) / (np.sqrt(v_max / (1 - beta2**step)) + eps)
        for kind, array in enumerate((x, m, v, v_max)):
            results[kind].append(array)
    return results if amsgrad else results[:3]


CASES = [
    dict(weight_decay=0.0, decoupled=False, amsgrad=False, maximize=False, step=1),
    dict(weight_decay=0.1, decoupled=False, amsgrad=False, maximize=False, step=3),
    dict(weight_decay=0.1, decoupled=True, amsgrad=False, maximize=True, step=2),
    dict(weight_decay=0.0, decoupled=False, amsgrad=True, maximize=False, step=5),
    dict(weight_decay=0.05, decoupled=True, amsgrad=True, maximize=True, step=10),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels", "kernels-one-by-one"])
@pytest.mark.parametrize(
    "dtype, hyperparameter_dtype",
    [(onnxnn.float32, onnxnn.float64), (onnxnn.float64, onnxnn.float64), (onnxnn.float32, onnxnn.float32)],
    ids=["float32", "float64", "float32-hyperparameters"],
)
@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(f"{k}={v}" for k, v in case.items()))
def test_adam_follows_the_documented_algorithm(case, dtype, hyperparameter_dtype, executor, monkeypatch):
    if executor == "kernels-one-by-one":  # the kernel's path for large models: no flat buffer
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        executor = "kernels"
    generator = np.random.default_rng(0)
    lists = 5 if case["amsgrad"] else 4
    arrays = [[generator.standard_normal(shape) for shape in SHAPES] for _ in range(lists)]
    for kind in range(3, lists):  # second moments are positive (their running maximum too)
        arrays[kind] = [np.abs(array) + 0.5 for array in arrays[kind]]
    # The inputs as the op sees them: the reference starts from the same rounded values.
    arrays = [[np.asarray(array, dtype.numpy_dtype).astype(np.float64) for array in group] for group in arrays]
    hyperparameters = dict(
        lr=0.05, step=case["step"], beta1=0.8, beta2=0.9, eps=1e-3, weight_decay=case["weight_decay"]
    )

    def scalar(name):
        value = np.array(hyperparameters[name], hyperparameter_dtype.numpy_dtype)
        hyperparameters[name] = float(value)  # the reference uses the fed (rounded) values too
        return constant(value, hyperparameter_dtype)

    inputs = [scalar(name) for name in ("lr", "step", "beta1", "beta2", "eps")]
    inputs.append(scalar("weight_decay") if case["weight_decay"] else None)
    inputs += [constant(np.asarray(array, dtype.numpy_dtype), dtype) for group in arrays for array in group]
    attributes = {
        "decoupled_weight_decay": int(case["decoupled"]),
        "amsgrad": int(case["amsgrad"]),
        "maximize": int(case["maximize"]),
    }
    outputs = record("Adam", inputs, attributes, TRAINING_DOMAIN)
    with onnxnn.set_executor(executor):
        results = [data_of(output) for output in outputs]
    expected = documented_adam(
        *arrays[:4],
        arrays[4] if case["amsgrad"] else None,
        **hyperparameters,
        decoupled=case["decoupled"],
        amsgrad=case["amsgrad"],
        maximize=case["maximize"],
    )
    expected = [array for group in expected for array in group]
    # Elementwise: at most 16 roundings per element, each relative to the largest quantity it
    # combines: for the moments the inputs (m) and their squares (v); for the parameters the
    # inputs and the step's quotient, at most lr / (1 - beta1**T) * |m| / min(denominator) with
    # |m| <= 2 * magnitude and the denominator at least sqrt(0.5 * beta2 / (1 - beta2**T))
    # (v >= 0.5 * beta2). The factor 2 covers the factors' own rounding to the tensors' dtype.
    magnitude = max(np.abs(array).max() for group in arrays for array in group)
    bias_correction1 = 1 - hyperparameters["beta1"] ** hyperparameters["step"]
    beta2, step = hyperparameters["beta2"], hyperparameters["step"]
    smallest_denominator = np.sqrt(0.5 * beta2 / (1 - beta2**step))
    quotient = hyperparameters["lr"] / bias_correction1 * 2 * magnitude / smallest_denominator
    scales = [magnitude + quotient, magnitude, magnitude**2 + magnitude, magnitude**2 + magnitude]
    count = len(SHAPES)
    for position, (result, reference) in enumerate(zip(results, expected)):
        assert result.dtype == dtype.numpy_dtype and result.shape == reference.shape
        scale = scales[position // count]
        assert_within(result, reference, 2 * gamma(16, dtype.numpy_dtype) * (np.abs(reference) + scale))


def _values(shapes, dtype=onnxnn.float32):
    return [constant(np.zeros(shape, dtype.numpy_dtype), dtype) for shape in shapes]


def _hyperparameters(dtype=onnxnn.float64):
    return (*_values([(), (), (), (), ()], dtype), None)


@pytest.mark.parametrize(
    "inputs, attributes, message",
    [
        (lambda: (*_hyperparameters(), *_values([(2,)] * 3)), {}, "and then X, G, M and V for each tensor, got 9"),
        (lambda: (*_hyperparameters(), *_values([(2,)] * 4)), {"amsgrad": 1}, "X, G, M, V and Vmax for each tensor"),
        (
            lambda: (*_hyperparameters(), *_values([(2,), (2,), (3,), (2,)])),
            {},
            "tensor 0 has X float32[2], G float32[2], M float32[3], V float32[2]",
        ),
        (lambda: (*_hyperparameters(), *_values([(2,)] * 3), *_values([(2,)], onnxnn.float64)), {}, "they must agree"),
        (
            lambda: (*_hyperparameters()[:4], None, None, *_values([(2,)] * 4)),
            {},
            "epsilon omitted; only weight_decay may be",
        ),
        (lambda: (*_values([(1,)]), *_hyperparameters()[1:], *_values([(2,)] * 4)), {}, "0-d tensors of one floating"),
        (
            lambda: (*_hyperparameters(onnxnn.float32)[:4], *_values([()], onnxnn.float64), None, *_values([(2,)] * 4)),
            {},
            "0-d tensors of one floating dtype",
        ),
    ],
    ids=["count", "amsgrad count", "shapes", "dtypes", "epsilon omitted", "1-d learning rate", "mixed dtypes"],
)
def test_adam_rejects_inconsistent_inputs(inputs, attributes, message):
    with pytest.raises(RuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        record("Adam", inputs(), attributes, TRAINING_DOMAIN)


# ---------------------------------------------------------------------- Adagrad


def documented_adagrad(xs, gs, sums, *, lr, step, lr_decay, eps, weight_decay, maximize):
    """The pseudo code of torch.optim.Adagrad's documentation, in float64."""
    new_xs, new_sums = [], []
    for x, g, state_sum in zip(xs, gs, sums):
        g = -g if maximize else g
        g = g + weight_decay * x
        decayed_lr = lr / (1 + (step - 1) * lr_decay)
        state_sum = state_sum + g**2
        new_xs.append(x - decayed_lr * g / (np.sqrt(state_sum) + eps))
        new_sums.append(state_sum)
    return new_xs + new_sums


ADAGRAD_CASES = [
    dict(weight_decay=0.0, maximize=False, step=1, lr_decay=0.0),
    dict(weight_decay=0.1, maximize=True, step=4, lr_decay=0.1),
    dict(weight_decay=0.0, maximize=True, step=2, lr_decay=0.5),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels", "kernels-one-by-one"])
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", ADAGRAD_CASES, ids=lambda case: "-".join(f"{k}={v}" for k, v in case.items()))
def test_adagrad_follows_the_documented_algorithm(case, dtype, executor, monkeypatch):
    if executor == "kernels-one-by-one":
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        executor = "kernels"
    generator = np.random.default_rng(0)
    arrays = [[generator.standard_normal(shape) for shape in SHAPES] for _ in range(3)]
    arrays[2] = [np.abs(array) + 0.5 for array in arrays[2]]  # accumulated squares
    arrays = [[np.asarray(array, dtype.numpy_dtype).astype(np.float64) for array in group] for group in arrays]
    hyperparameters = dict(
        lr=0.1, step=case["step"], lr_decay=case["lr_decay"], eps=1e-3, weight_decay=case["weight_decay"]
    )
    scalar = lambda name: constant(np.array(hyperparameters[name], np.float64), onnxnn.float64)  # noqa: E731
    inputs = [scalar(name) for name in ("lr", "step", "lr_decay", "eps")]
    inputs.append(scalar("weight_decay") if case["weight_decay"] else None)
    inputs += [constant(np.asarray(array, dtype.numpy_dtype), dtype) for group in arrays for array in group]
    outputs = record("Adagrad", inputs, {"maximize": int(case["maximize"])}, TRAINING_DOMAIN)
    with onnxnn.set_executor(executor):
        results = [data_of(output) for output in outputs]
    expected = documented_adagrad(*arrays, **hyperparameters, maximize=case["maximize"])
    # At most 9 roundings per element, relative to the inputs (and their squares, for the sum);
    # the step's quotient is at most |g'| / sqrt(0.5) times the decayed learning rate (S >= 0.5).
    # The factor 2 covers the factors' rounding to the tensors' dtype.
    magnitude = max(np.abs(array).max() for group in arrays for array in group)
    scales = [magnitude + 0.1 * 2 * magnitude / np.sqrt(0.5), magnitude**2 + magnitude]
    for position, (result, reference) in enumerate(zip(results, expected)):
        assert result.dtype == dtype.numpy_dtype and result.shape == reference.shape
        assert_within(
            result, reference, 2 * gamma(9, dtype.numpy_dtype) * (np.abs(reference) + scales[position // len(SHAPES)])
        )


@pytest.mark.parametrize(
    "inputs, message",
    [
        (
            lambda: (*_hyperparameters()[:4], *_values([(2,)] * 2)),
            "Adagrad takes R, T, lr_decay, epsilon, weight_decay and then X, G and S for each tensor, got 6",
        ),
        (lambda: (*_hyperparameters()[:3], None, None, *_values([(2,)] * 3)), "epsilon omitted"),
        (
            lambda: (*_hyperparameters()[:4], None, *_values([(2,), (2,), (1,)])),
            "tensor 0 has X float32[2], G float32[2], S float32[1]; they must agree",
        ),
    ],
    ids=["count", "epsilon omitted", "shapes"],
)
def test_adagrad_rejects_inconsistent_inputs(inputs, message):
    with pytest.raises(RuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        record("Adagrad", inputs(), {}, TRAINING_DOMAIN)


# ---------------------------------------------------------------------- RMSprop


def documented_rmsprop(
    xs, gs, square_avgs, grad_avgs, buffers, *, lr, alpha, eps, weight_decay, momentum, centered, maximize
):
    """The pseudo code of torch.optim.RMSprop's documentation, in float64: new X, SQ (, GA) (, B)."""
    results = [[], [], [], []]
    for index, (x, g, v) in enumerate(zip(xs, gs, square_avgs)):
        g = -g if maximize else g
        g = g + weight_decay * x
        v = alpha * v + (1 - alpha) * g**2
        v_tilde, grad_avg, buffer = v, None, None
        if centered:
            grad_avg = grad_avgs[index] * alpha + (1 - alpha) * g
            v_tilde = v_tilde - grad_avg**2
        if momentum > 0:
            buffer = momentum * buffers[index] + g / (np.sqrt(v_tilde) + eps)
            x = x - lr * buffer
        else:
            x = x - lr * g / (np.sqrt(v_tilde) + eps)
        for kind, array in enumerate((x, v, grad_avg, buffer)):
            results[kind].append(array)
    return [array for kind, group in enumerate(results) if group[0] is not None for array in group]


RMSPROP_CASES = [
    dict(weight_decay=0.0, momentum=0.0, centered=False, maximize=False),
    dict(weight_decay=0.1, momentum=0.5, centered=False, maximize=True),
    dict(weight_decay=0.0, momentum=0.0, centered=True, maximize=True),
    dict(weight_decay=0.05, momentum=0.3, centered=True, maximize=False),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels", "kernels-one-by-one"])
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", RMSPROP_CASES, ids=lambda case: "-".join(f"{k}={v}" for k, v in case.items()))
def test_rmsprop_follows_the_documented_algorithm(case, dtype, executor, monkeypatch):
    if executor == "kernels-one-by-one":
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
        executor = "kernels"
    generator = np.random.default_rng(0)
    xs, gs, grad_avgs, buffers = ([generator.standard_normal(shape) for shape in SHAPES] for _ in range(4))
    # The centered variance SQ - GA^2 stays >= 0.5: SQ is at least 0.5 plus every GA^2 it may meet.
    square_avgs = [
        np.abs(generator.standard_normal(shape)) + 0.5 + (np.abs(ga) + 5) ** 2 for shape, ga in zip(SHAPES, grad_avgs)
    ]
    groups = [xs, gs, square_avgs] + ([grad_avgs] if case["centered"] else []) + ([buffers] if case["momentum"] else [])
    groups = [[np.asarray(array, dtype.numpy_dtype).astype(np.float64) for array in group] for group in groups]
    hyperparameters = dict(lr=0.01, alpha=0.9, eps=1e-3, weight_decay=case["weight_decay"], momentum=case["momentum"])
    scalar = lambda name: constant(np.array(hyperparameters[name], np.float64), onnxnn.float64)  # noqa: E731
    inputs = [
        scalar("lr"),
        scalar("alpha"),
        scalar("eps"),
        scalar("weight_decay") if case["weight_decay"] else None,
        scalar("momentum") if case["momentum"] else None,
    ]
    inputs += [constant(np.asarray(array, dtype.numpy_dtype), dtype) for group in groups for array in group]
    outputs = record(
        "RMSprop", inputs, {"centered": int(case["centered"]), "maximize": int(case["maximize"])}, TRAINING_DOMAIN
    )
    with onnxnn.set_executor(executor):
        results = [data_of(output) for output in outputs]
    expected = documented_rmsprop(
        groups[0],
        groups[1],
        groups[2],
        groups[3] if case["centered"] else None,
        groups[-1] if case["momentum"] else None,
        **hyperparameters,
        centered=case["centered"],
        maximize=case["maximize"],
    )
    # At most 16 roundings per element, each relative to the largest quantity it combines: the
    # inputs, their squares (the averages) and the quotient G' / A <= |G'| / sqrt(0.5) (the
    # variance stays >= 0.5), times lr for the parameters. The factor 2 covers the factors'
    # rounding to the tensors' dtype.
    magnitude = max(np.abs(array).max() for group in groups for array in group)
    quotient = 2 * magnitude / np.sqrt(0.5)
    bound_scale = magnitude**2 + magnitude + quotient
    for result, reference in zip(results, expected):
        assert result.dtype == dtype.numpy_dtype and result.shape == reference.shape
        assert_within(result, reference, 2 * gamma(16, dtype.numpy_dtype) * (np.abs(reference) + bound_scale))


def test_rmsprop_takes_momentum_buffers_only_with_a_momentum():
    with pytest.raises(RuntimeError, match="and then X, G, SQ and B for each tensor, got 10"):
        record("RMSprop", (*_hyperparameters()[:5], *_values([(2,)] * 5)), {}, TRAINING_DOMAIN)
    without_momentum = (*_hyperparameters()[:4], None)
    outputs = record("RMSprop", (*without_momentum, *_values([(2,)] * 4)), {"centered": 1}, TRAINING_DOMAIN)
    assert len(outputs) == 3  # X, SQ, GA
