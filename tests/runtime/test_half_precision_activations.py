"""float16/bfloat16 activations, their gradients and losses are computed in float32 and rounded once.

PyTorch's CPU kernels compute half-precision elementwise ops in float32 ("opmath") and round the
result once. onnxnn's composites recorded as several half ops rounded every intermediate: GELU's
gradient cancelled in ``1 + erf`` and ``1 - tanh^2`` (15-23 ulps at x = -3), SiLU rounded its sigmoid
into the subnormals before the product (6 ulps), Mish's gradient cancelled in ``1 - t^2``, ELU's
gradient used the rounded output, and the losses' gradients rounded ``sigmoid(x)`` (bf16: thousands
of ulps) or subnormal intermediates.

The expected values are float64 numpy formulas (gradients: the analytic derivative) on the same
half-rounded inputs. One rounding of the half result is half an ulp; float32's own error is a small
fraction of a half ulp, so each bound is one ulp of the half dtype (subnormal spacing near zero), plus
for GELU's gradients the absolute error float32 itself makes where they cancel (PyTorch's too).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ["kernels", "onnxruntime"]
DTYPES = {"float16": (onnxnn.float16, 10, -14), "bfloat16": (onnxnn.bfloat16, 7, -126)}  # mantissa bits, min exponent
TOLERANCE_ULPS = 1.0

_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _gelu_tanh_grad(x):
    k = math.sqrt(2 / math.pi)
    inner = np.tanh(k * (x + 0.044715 * x**3))
    return 0.5 * (1 + inner) + 0.5 * x * (1 - inner**2) * k * (1 + 3 * 0.044715 * x**2)


def _mish_grad(x):
    t = np.tanh(np.logaddexp(0, x))
    return t + x * _sigmoid(x) * (1 - t * t)


# Absolute float32 error of the GELU gradients where they cancel (x < -4, the gradient near 0),
# which PyTorch's float32 opmath has too: float32 tanh and erf are within U = 4 float32 ulps of 1 on
# both executors (onnxruntime's tanh: 3.8), and tanh-GELU multiplies 1 - tanh^2 by
# x k (1 + 3 c x^2), up to 17 at x = -5.
U = 4 * 2.0**-24


def _gelu_tanh_float32_error(x):
    return U * (1 + 2 * np.abs(x) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x))


# name, forward, float64 reference of the forward (None: the forward is not changed), float64 derivative,
# the derivative's absolute float32 error, input range
ACTIVATIONS = [
    (
        "gelu",
        F.gelu,
        None,
        lambda x: 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi),
        lambda x: U,
        (-6, 6),
    ),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), None, _gelu_tanh_grad, _gelu_tanh_float32_error, (-6, 6)),
    ("silu", F.silu, lambda x: x * _sigmoid(x), lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))), None, (-12, 6)),
    ("mish", F.mish, None, _mish_grad, None, (-6, 6)),
    ("elu", lambda x: F.elu(x, alpha=1.5), None, lambda x: np.where(x <= 0, 1.5 * np.exp(x), 1.0), None, (-8, 2)),
]


def _ulps(got: np.ndarray, expected: np.ndarray, dtype: str, absolute=0.0) -> np.ndarray:
    """|got - expected|, less an ``absolute`` allowance, in ulps of the half dtype at ``expected``,
    subnormal-aware."""
    _, mantissa, min_exponent = DTYPES[dtype]
    magnitude = np.abs(expected)
    exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    ulp = np.exp2(np.maximum(np.where(magnitude > 0, exponent, min_exponent), min_exponent) - mantissa)
    return np.maximum(np.abs(got - expected) - absolute, 0.0) / ulp


def _half_inputs(low: float, high: float, dtype: str, n: int = 2048, seed: int = 0) -> onnxnn.Tensor:
    values = np.random.default_rng(seed).uniform(low, high, n).astype(np.float32)
    return onnxnn.tensor(values, dtype=DTYPES[dtype][0])


def _as_float64(tensor: onnxnn.Tensor) -> np.ndarray:
    return np.asarray(tensor.float().tolist(), dtype=np.float64)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(
    ("name", "forward", "reference", "derivative", "float32_error", "domain"),
    ACTIVATIONS,
    ids=[a[0] for a in ACTIVATIONS],
)
def test_half_activation_rounds_once(executor, dtype, name, forward, reference, derivative, float32_error, domain):
    with onnxnn.set_executor(executor):
        x = _half_inputs(*domain, dtype).requires_grad_()
        y = forward(x)
        y.sum().backward()
        x64 = _as_float64(x.detach())
        assert x.grad.dtype is DTYPES[dtype][0]
        absolute = 0.0 if float32_error is None else float32_error(x64)
        gradient_error = _ulps(_as_float64(x.grad), derivative(x64), dtype, absolute)
        assert gradient_error.max() <= TOLERANCE_ULPS, (name, x64[gradient_error.argmax()], gradient_error.max())
        if reference is not None:
            assert y.dtype is DTYPES[dtype][0]
            forward_error = _ulps(_as_float64(y.detach()), reference(x64), dtype)
            assert forward_error.max() <= TOLERANCE_ULPS, (name, x64[forward_error.argmax()], forward_error.max())


def _bce_logits(x, y):
    return np.mean(np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x))))


# name, loss, float64 loss, float64 gradient wrt input (mean reduction), input range, target range
LOSSES = [
    ("mse", F.mse_loss, lambda x, y: np.mean((x - y) ** 2), lambda x, y: 2 * (x - y) / x.size, (-2, 2), (-2, 2)),
    (
        "bce_with_logits",
        F.binary_cross_entropy_with_logits,
        _bce_logits,
        lambda x, y: (_sigmoid(x) - y) / x.size,
        (-8, 8),
        (0, 1),
    ),
    (
        "smooth_l1",
        F.smooth_l1_loss,
        lambda x, y: np.mean(np.where(np.abs(x - y) < 1, 0.5 * (x - y) ** 2, np.abs(x - y) - 0.5)),
        lambda x, y: np.clip(x - y, -1, 1) / x.size,
        (-2, 2),
        (-2, 2),
    ),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(
    ("name", "loss", "reference", "derivative", "domain", "targets"), LOSSES, ids=[a[0] for a in LOSSES]
)
def test_half_loss_rounds_once(executor, dtype, name, loss, reference, derivative, domain, targets):
    with onnxnn.set_executor(executor):
        x = _half_inputs(*domain, dtype, n=1000).requires_grad_()
        target = _half_inputs(*targets, dtype, n=1000, seed=1)
        result = loss(x, target)
        result.backward()
        x64, y64 = _as_float64(x.detach()), _as_float64(target)
        assert result.dtype is DTYPES[dtype][0] and x.grad.dtype is DTYPES[dtype][0]
        assert _ulps(np.float64(result.item()), reference(x64, y64), dtype) <= TOLERANCE_ULPS
        gradient_error = _ulps(_as_float64(x.grad), derivative(x64, y64), dtype)
        assert gradient_error.max() <= TOLERANCE_ULPS, (name, x64[gradient_error.argmax()], gradient_error.max())


def test_half_loss_keeps_its_grad_fn_and_promotes_with_float32_weight():
    x = onnxnn.tensor([-3.0, 2.5], dtype=onnxnn.bfloat16, requires_grad=True)
    y = onnxnn.tensor([1.0, 0.0], dtype=onnxnn.bfloat16)
    assert F.binary_cross_entropy_with_logits(x, y).grad_fn.name() == "BinaryCrossEntropyWithLogitsBackward0"
    assert F.mse_loss(x, y).grad_fn.name() == "MseLossBackward0"
    weighted = F.binary_cross_entropy_with_logits(x, y, weight=onnxnn.tensor([1.0, 2.0]))
    assert weighted.dtype is onnxnn.float32
