"""Adafactor and Muon follow their documented updates (numpy references written from the
formulas in their docstrings, PyTorch's), save and resume exactly, and refuse what PyTorch refuses."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import onnxnn

STEPS = 12


def _gradients(shapes, steps, seed):
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(shape) for shape in shapes] for _ in range(steps)]


def _run(make, starts, gradients, dtype=onnxnn.float64):
    params = [onnxnn.tensor(start, dtype=dtype, requires_grad=True) for start in starts]
    optimizer = make(params)
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = onnxnn.tensor(gradient, dtype=dtype)
        optimizer.step()
    return [param.detach().numpy() for param in params], optimizer


# ------------------------------------------------------------------------------------ Adafactor
def _adafactor_reference(starts, gradients, lr, beta2_decay, eps, d, weight_decay, maximize):
    """Adafactor in float64, as its docstring writes it (the factors of the last two dimensions)."""
    eps1 = np.finfo(np.float64).eps if eps[0] is None else eps[0]
    params = [np.array(start, np.float64) for start in starts]
    factors = [
        (np.zeros((*p.shape[:-1], 1)), np.zeros((*p.shape[:-2], 1, p.shape[-1]))) if p.ndim > 1 else np.zeros(p.shape)
        for p in params
    ]
    for t, step_gradients in enumerate(gradients, start=1):
        moved, rho = t**beta2_decay, min(lr, 1 / math.sqrt(t))
        for i, (param, gradient) in enumerate(zip(params, step_gradients)):
            g = -gradient if maximize else gradient
            alpha = max(eps[1], math.sqrt(np.mean(param**2))) * rho
            param = param * (1 - lr * weight_decay)
            if param.ndim > 1:
                row, column = factors[i]
                row = row + moved * ((g**2).mean(axis=-1, keepdims=True) - row)
                column = column + moved * ((g**2).mean(axis=-2, keepdims=True) - column)
                factors[i] = (row, column)
                estimate = row * column / np.maximum(row.mean(axis=-2, keepdims=True), eps1)
            else:
                factors[i] = estimate = factors[i] + moved * (g**2 - factors[i])
            update = g / np.sqrt(np.maximum(estimate, eps1 * eps1))
            params[i] = param - alpha * update / max(1.0, math.sqrt(np.mean(update**2)) / d)
    return params


ADAFACTOR_SETTINGS = [
    pytest.param(dict(), id="defaults"),
    pytest.param(dict(lr=0.05, weight_decay=0.1), id="weight-decay"),
    # A small d clips every update; eps1 set and maximize flip the signs.
    pytest.param(dict(lr=0.5, eps=(1e-4, 1e-2), d=1.0, beta2_decay=-0.5, maximize=True), id="clipped-maximize"),
]
ADAFACTOR_SHAPES = [(6, 4), (2, 3, 5), (7,), ()]


@pytest.mark.parametrize("settings", ADAFACTOR_SETTINGS)
def test_adafactor_follows_its_formula(settings):
    rng = np.random.default_rng(1)
    starts = [rng.standard_normal(shape) for shape in ADAFACTOR_SHAPES]
    gradients = _gradients(ADAFACTOR_SHAPES, STEPS, seed=2)
    actual, optimizer = _run(lambda ps: onnxnn.optim.Adafactor(ps, **settings), starts, gradients)
    full = dict(lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, maximize=False) | settings
    expected = _adafactor_reference(starts, gradients, **full)
    for got, want in zip(actual, expected):
        # float64, a dozen steps of O(10)-term means and norms.
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    state = optimizer.state_dict()["state"]
    assert sorted(state[0]) == ["col_var", "row_var", "step"] and sorted(state[2]) == ["step", "variance"]
    assert state[0]["row_var"].shape == (6, 1) and state[1]["col_var"].shape == (2, 1, 5)
    assert float(state[0]["step"]) == STEPS


# ------------------------------------------------------------------------------------ Muon
def _bfloat16(array):
    return np.asarray(array, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def _newton_schulz_reference(matrix, coefficients, steps, eps):
    """Muon's iteration in bfloat16 as torch computes it: each matmul and addmm summed in float32, rounded once."""
    a, b, c = coefficients
    x = _bfloat16(matrix)
    tall = x.shape[0] > x.shape[1]
    x = x.T if tall else x
    x = _bfloat16(x / _bfloat16(max(_bfloat16(np.sqrt((x**2).sum())), eps)))
    for _ in range(steps):
        gram = _bfloat16(x.astype(np.float32) @ x.T.astype(np.float32))
        # torch.addmm: the product and the scaled input summed at float32, rounded once.
        polynomial = _bfloat16(gram * b + (gram.astype(np.float32) @ gram.astype(np.float32)) * c)
        x = _bfloat16(x * a + polynomial.astype(np.float32) @ x.astype(np.float32))
    return x.T if tall else x


def _muon_reference(starts, gradients, lr, weight_decay, momentum, nesterov, adjust_lr_fn):
    coefficients = (3.4445, -4.7750, 2.0315)
    params = [np.array(start, np.float64) for start in starts]
    buffers = [np.zeros(p.shape) for p in params]
    for step_gradients in gradients:
        for i, (param, gradient) in enumerate(zip(params, step_gradients)):
            buffers[i] = buffers[i] + (1 - momentum) * (gradient - buffers[i])
            update = gradient + momentum * (buffers[i] - gradient) if nesterov else buffers[i]
            orthogonal = _newton_schulz_reference(update, coefficients, 5, 1e-7)
            rows, columns = param.shape
            scale = (
                0.2 * math.sqrt(max(rows, columns))
                if adjust_lr_fn == "match_rms_adamw"
                else math.sqrt(max(1, rows / columns))
            )
            params[i] = param * (1 - lr * weight_decay) - lr * scale * orthogonal
    return params


MUON_SETTINGS = [
    pytest.param(dict(lr=0.02), id="defaults"),
    pytest.param(
        dict(lr=0.02, nesterov=False, weight_decay=0.01, adjust_lr_fn="match_rms_adamw"), id="plain-adamw-rms"
    ),
]
MUON_SHAPES = [(6, 4), (3, 7)]  # tall (iterated on its transpose) and wide


@pytest.mark.parametrize("settings", MUON_SETTINGS)
def test_muon_follows_its_formula(settings):
    rng = np.random.default_rng(3)
    starts = [rng.standard_normal(shape) for shape in MUON_SHAPES]
    gradients = _gradients(MUON_SHAPES, STEPS, seed=4)
    actual, optimizer = _run(lambda ps: onnxnn.optim.Muon(ps, **settings), starts, gradients)
    full = dict(weight_decay=0.1, momentum=0.95, nesterov=True, adjust_lr_fn=None) | settings
    expected = _muon_reference(starts, gradients, **full)
    for got, want in zip(actual, expected):
        # The iteration is bfloat16: a product summed in another order may round one unit of its
        # last place (2**-8 of entries below 1.5) apart, which the next step carries on. Each step
        # moves a parameter by at most lr * 0.2 * sqrt(7) * 1.5.
        np.testing.assert_allclose(got, want, rtol=0, atol=STEPS * 0.02 * 0.6 * 1.5 * 2.0**-6)
    assert sorted(optimizer.state_dict()["state"][0]) == ["momentum_buffer"]


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (16, 16)])
def test_newton_schulz_drives_the_singular_values_towards_one(shape):
    matrix = onnxnn.tensor(np.random.default_rng(5).standard_normal(shape) * 10, dtype=onnxnn.float32)
    result = onnxnn.optim.muon.zeropower_via_newtonschulz(matrix, (3.4445, -4.7750, 2.0315), 5, 1e-7)
    assert result.dtype is onnxnn.bfloat16 and result.shape == shape
    singular_values = np.linalg.svd(result.float().numpy(), compute_uv=False)
    assert 0.5 < singular_values.min() and singular_values.max() < 1.5  # the quintic's documented band


# ------------------------------------------------------------------------------------ both
# (optimizer name in onnxnn.optim and torch.optim, its arguments, parameter shapes, a tolerance
# against PyTorch's float32 run: Adafactor's rounding of a few dozen float32 ops; Muon's bfloat16
# iteration may round each op differently, PyTorch fusing addmm's sum into one rounding)
OPTIMIZERS = [
    pytest.param("Adafactor", dict(lr=0.05, weight_decay=0.1), ADAFACTOR_SHAPES, 1e-5, id="adafactor"),
    pytest.param("Muon", dict(lr=0.02), MUON_SHAPES, STEPS * 0.02 * 1.5 * 2.0**-6, id="muon"),
]


def _maker(library, name, arguments):
    return lambda params: getattr(library.optim, name)(params, **arguments)


@pytest.mark.parametrize("name, arguments, shapes, tolerance", OPTIMIZERS)
def test_a_resumed_run_equals_an_uninterrupted_one(name, arguments, shapes, tolerance):
    make = _maker(onnxnn, name, arguments)
    rng = np.random.default_rng(6)
    starts = [rng.standard_normal(shape) for shape in shapes]
    gradients = _gradients(shapes, 8, seed=7)
    uninterrupted, _ = _run(make, starts, gradients, dtype=onnxnn.float32)
    halfway, first = _run(make, starts, gradients[:4], dtype=onnxnn.float32)
    saved = first.state_dict()
    resumed, _ = _run(lambda ps: _loaded(make(ps), saved), halfway, gradients[4:], dtype=onnxnn.float32)
    for got, want in zip(resumed, uninterrupted):
        np.testing.assert_array_equal(got, want)


def _loaded(optimizer, state_dict):
    optimizer.load_state_dict(state_dict)
    return optimizer


@pytest.mark.parametrize("name, arguments, shapes, tolerance", OPTIMIZERS)
def test_matches_pytorch(name, arguments, shapes, tolerance):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    starts = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    gradients = _gradients(shapes, STEPS, seed=9)
    actual, _ = _run(_maker(onnxnn, name, arguments), starts, gradients, dtype=onnxnn.float32)
    params = [torch.tensor(start, requires_grad=True) for start in starts]
    optimizer = _maker(torch, name, arguments)(params)
    for step_gradients in gradients:
        for param, gradient in zip(params, step_gradients):
            param.grad = torch.tensor(gradient, dtype=torch.float32)
        optimizer.step()
    for got, param in zip(actual, params):
        want = param.detach().numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda ps: onnxnn.optim.Adafactor(ps, lr=-1.0), ValueError, "Learning rate should be >= 0"),
        (lambda ps: onnxnn.optim.Adafactor(ps, beta2_decay=0.5), ValueError, "beta2_decay should be <= 0"),
        (lambda ps: onnxnn.optim.Adafactor(ps, eps=(-1.0, 1e-3)), ValueError, "epsilon1 should be >= 0"),
        (lambda ps: onnxnn.optim.Adafactor(ps, eps=(None, -1.0)), ValueError, "epsilon2 should be >= 0"),
        (lambda ps: onnxnn.optim.Adafactor(ps, d=0.5), ValueError, "Clipping threshold d should be >= 1"),
        (lambda ps: onnxnn.optim.Adafactor(ps, weight_decay=-1.0), ValueError, "weight_decay should be >= 0"),
        (lambda ps: onnxnn.optim.Muon(ps, momentum=-0.1), ValueError, "momentum should be >= 0"),
        (lambda ps: onnxnn.optim.Muon(ps, adjust_lr_fn="other"), ValueError, "other is not supported"),
        (
            lambda ps: onnxnn.optim.Muon([onnxnn.zeros(3, requires_grad=True)]),
            ValueError,
            "only supports 2D parameters",
        ),
    ],
)
def test_bad_arguments_are_refused(make, error, message):
    with pytest.raises(error, match=message):
        make([onnxnn.zeros(2, 2, requires_grad=True)])


def test_muon_refuses_too_many_iterations():
    param = onnxnn.zeros(2, 2, requires_grad=True)
    optimizer = onnxnn.optim.Muon([param], ns_steps=100)
    param.grad = onnxnn.ones(2, 2)
    with pytest.raises(ValueError, match="less than 100"):
        optimizer.step()
