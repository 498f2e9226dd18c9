"""Muon and Adafactor on float16/bfloat16 parameters, bit for bit against a numpy model of PyTorch's step.

PyTorch's CPU ops read half-precision operands into float32 ("opmath"), compute there and round
each result once to the parameter's dtype; a Python scalar that multiplies (``mul_(1 - lr * wd)``,
``lerp_``'s weight, ``div_(size)``) is read at float32, an ``add_``'s ``alpha`` is rounded to the
dtype. A hyperparameter made a constant of the parameter's dtype instead decays bfloat16 weights by
``1 - 0.002`` rounded to 0.99609375: twice the decay. The model below writes torch 2.13's
``_single_tensor_muon`` and ``_single_tensor_adafactor`` op by op in numpy float32; ``lerp_`` is
its vectorized kernel's fused multiply-add (``fma(w, end - start, start)`` below a weight of 0.5,
``fma(w - 1, end - start, end)`` from 0.5 on). On tensors of a multiple of its vector width (64x64)
torch 2.13 gives these values bit for bit; its scalar tail (the last few elements of other sizes)
may round once more.

Muon's Newton-Schulz iteration (bfloat16 matrix products, checked in test_adafactor_and_muon.py) is
taken from onnxnn in the model: everything around it is what is specified here.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn import optim
from onnxnn.optim.muon import zeropower_via_newtonschulz

STEPS = 30
DTYPES = [onnxnn.bfloat16, onnxnn.float16]
F32 = np.float32


def _round(values, dtype) -> np.ndarray:
    """A float32 result rounded to the parameter's dtype, held in float32: the end of one op."""
    return np.asarray(values, F32).astype(dtype.numpy_dtype).astype(F32)


def _fma(first, second, addend) -> np.ndarray:
    """``first * second + addend`` rounded once to float32 (the float64 product is exact)."""
    return (np.float64(first) * np.asarray(second, np.float64) + np.asarray(addend, np.float64)).astype(F32)


def _lerp(start, end, weight, dtype) -> np.ndarray:
    weight = F32(weight)
    if abs(weight) < 0.5:
        return _round(_fma(weight, end - start, start), dtype)
    return _round(_fma(weight - F32(1), end - start, end), dtype)


def _mul(values, scalar, dtype) -> np.ndarray:
    return _round(values * F32(scalar), dtype)


def _norm(values, dtype, axis=None) -> np.ndarray:
    """``torch.norm`` of a half tensor: accumulated in float32 or wider, rounded to the dtype."""
    return _round(np.sqrt(np.sum(np.square(np.float64(values)), axis=axis, keepdims=axis is not None)), dtype)


def _gradients(shape, zero: bool) -> list[np.ndarray]:
    generator = np.random.default_rng(1)
    return [np.zeros(shape, F32) if zero else generator.standard_normal(shape).astype(F32) for _ in range(STEPS)]


def _run(name: str, settings: dict, dtype, start: np.ndarray, gradients: list[np.ndarray]) -> np.ndarray:
    param = onnxnn.tensor(start).to(dtype).requires_grad_()
    optimizer = getattr(optim, name)([param], **settings)
    for gradient in gradients:
        param.grad = onnxnn.tensor(gradient).to(dtype)
        optimizer.step()
    return param.detach().float().numpy()


def _muon_model(settings: dict, dtype, start, gradients) -> np.ndarray:
    lr, weight_decay, momentum = settings["lr"], settings.get("weight_decay", 0.1), settings.get("momentum", 0.95)
    rows, columns = start.shape
    if settings.get("adjust_lr_fn") == "match_rms_adamw":
        adjusted_lr = lr * 0.2 * max(rows, columns) ** 0.5
    else:
        adjusted_lr = lr * max(1, rows / columns) ** 0.5
    weights, buffer = _round(start, dtype), np.zeros_like(start)
    for gradient in gradients:
        gradient = _round(gradient, dtype)
        buffer = _lerp(buffer, gradient, 1 - momentum, dtype)  # buf.lerp_(grad, 1 - momentum)
        update = _lerp(gradient, buffer, momentum, dtype) if settings.get("nesterov", True) else buffer
        half_update = onnxnn.tensor(update).to(dtype)
        coefficients = (3.4445, -4.7750, 2.0315)
        orthogonal = zeropower_via_newtonschulz(half_update, coefficients, 5, 1e-7).float().numpy()
        weights = _mul(weights, 1 - lr * weight_decay, dtype)  # param.mul_(1 - lr * weight_decay)
        if dtype is onnxnn.bfloat16:  # param.add_(update, alpha=-adjusted_lr): alpha rounded to bfloat16
            weights = _round(weights + _round(F32(-adjusted_lr), dtype) * orthogonal, dtype)
        else:  # float16 plus the bfloat16 update: computed in float32, alpha at float32
            weights = _round(_fma(F32(-adjusted_lr), orthogonal, weights), dtype)
    return weights


def _adafactor_model(settings: dict, dtype, start, gradients) -> np.ndarray:
    lr, weight_decay, d = settings["lr"], settings.get("weight_decay", 0.0), settings.get("d", 1.0)
    beta2_decay, maximize = settings.get("beta2_decay", -0.8), settings.get("maximize", False)
    eps1, eps2 = settings.get("eps", (None, 1e-3))
    eps1 = onnxnn.finfo(dtype).eps if eps1 is None else eps1
    weights = _round(start, dtype)
    factored = start.ndim > 1
    row_var = np.zeros((*start.shape[:-1], 1), F32) if factored else None
    col_var = np.zeros((*start.shape[:-2], 1, start.shape[-1]), F32) if factored else None
    variance = np.zeros_like(start)
    for count, gradient in enumerate(gradients, 1):
        gradient = _round(-gradient if maximize else gradient, dtype)
        moved = float(count) ** beta2_decay
        rho = min(lr, 1 / count**0.5)
        alpha = max(eps2, float(_norm(weights, dtype)) / weights.size**0.5) * rho  # Python floats
        weights = _mul(weights, 1 - lr * weight_decay, dtype) if weight_decay != 0 else weights
        if factored:
            row_mean = _round(_round(np.square(_norm(gradient, dtype, -1)), dtype) / F32(start.shape[-1]), dtype)
            col_mean = _round(_round(np.square(_norm(gradient, dtype, -2)), dtype) / F32(start.shape[-2]), dtype)
            row_var = _lerp(row_var, row_mean, moved, dtype)
            col_var = _lerp(col_var, col_mean, moved, dtype)
            row_scale = np.maximum(_round(np.mean(np.float64(row_var), axis=-2, keepdims=True), dtype), F32(eps1))
            estimate = _round(_round(row_var * col_var, dtype) / _round(row_scale, dtype), dtype)
        else:
            variance = _lerp(variance, _round(gradient * gradient, dtype), moved, dtype)
            estimate = variance
        update = _round(F32(1) / np.sqrt(_round(np.maximum(estimate, F32(eps1 * eps1)), dtype)), dtype)
        update = _round(update * gradient, dtype)
        denominator = max(1.0, float(_norm(update, dtype)) / (update.size**0.5 * d))
        step_size = _round(F32(-alpha / denominator), dtype)  # add_'s alpha, rounded to the dtype
        weights = _round(weights + step_size * update, dtype)
    return weights


MUON_CASES = [
    ({"lr": 0.02}, (8, 6), False),  # the default weight decay 0.1 and Nesterov momentum 0.95
    ({"lr": 0.02}, (8, 6), True),  # zero gradients: the decoupled decay alone
    ({"lr": 0.02, "nesterov": False, "momentum": 0.3, "weight_decay": 0.05}, (6, 8), False),
    ({"lr": 0.05, "adjust_lr_fn": "match_rms_adamw", "momentum": 0.5}, (6, 8), False),
    ({"lr": 0.02, "weight_decay": 0.0}, (16, 4), False),
]

ADAFACTOR_CASES = [
    ({"lr": 0.02, "weight_decay": 0.1}, (6, 8), False),
    ({"lr": 0.02, "weight_decay": 0.1}, (6, 8), True),  # zero gradients: the decoupled decay alone
    ({"lr": 0.5, "maximize": True, "eps": (1e-3, 1e-2)}, (2, 3, 4), False),  # rho = 1/sqrt(step) from step 5
    ({"lr": 0.01, "beta2_decay": -0.5, "d": 2.0, "weight_decay": 0.3}, (10,), False),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("settings, shape, zero_gradients", MUON_CASES)
def test_muon_steps_half_parameters_as_pytorch_op_for_op(settings, shape, zero_gradients, dtype):
    start = np.random.default_rng(0).standard_normal(shape).astype(F32)
    gradients = _gradients(shape, zero_gradients)
    expected = _muon_model(settings, dtype, start, gradients)
    np.testing.assert_array_equal(_run("Muon", settings, dtype, start, gradients), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("settings, shape, zero_gradients", ADAFACTOR_CASES)
def test_adafactor_steps_half_parameters_as_pytorch_op_for_op(settings, shape, zero_gradients, dtype):
    start = np.random.default_rng(0).standard_normal(shape).astype(F32)
    gradients = _gradients(shape, zero_gradients)
    expected = _adafactor_model(settings, dtype, start, gradients)
    actual = _run("Adafactor", settings, dtype, start, gradients)
    # A norm summed in another order may round to the neighbouring half value once in a while,
    # which moves the step size by a unit in the last place: one ulp of the dtype at most.
    ulp = np.spacing(np.abs(expected).astype(dtype.numpy_dtype)).astype(F32)
    assert np.all(np.abs(actual - expected) <= ulp), np.abs(actual - expected).max()
