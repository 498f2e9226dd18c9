"""float16/bfloat16 products with an added term, and group_norm's affine step, round once.

PyTorch's CPU kernels compute ``linear`` with a bias, ``addmm``, ``baddbmm``, ``addbmm``, ``addmv``
and ``group_norm`` of half tensors in float32 ("opmath") and round the result once. Rounding the
product to half before the bias (or the scalings) is added loses exactly the digits that the sum
cancels: ``1.0029296875**2 - 1`` came out as 0.005859375 instead of 0.0058670 (2.25 ulps), and a
cancelling bias gives tens to hundreds of ulps.

The inputs are multiples of 1/32 in [-2, 2] (7 significant bits, which float16 and bfloat16 hold),
so every product and sum of them is exact in float32 and the expected value, computed in float64
from the same half inputs, is off by the final rounding only: one ulp of the half dtype at the
expected value covers it. Each added term cancels (most of) its product, so the double rounding
the fix removed shows as many ulps.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ["kernels", "onnxruntime"]
DTYPES = ["float16", "bfloat16"]
MANTISSA_BITS = {"float16": 11, "bfloat16": 8}
SMALLEST_SPACING = {"float16": 2.0**-24, "bfloat16": 2.0**-133}


def round_to(dtype_name: str, values) -> np.ndarray:
    """``values`` rounded to ``dtype_name`` (to nearest, ties to even), as float64."""
    values = np.asarray(values, np.float64).astype(np.float32)
    if dtype_name == "float16":
        return values.astype(np.float16).astype(np.float64)
    bits = values.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32).astype(np.float64)


def ulps(dtype_name: str, actual: np.ndarray, expected: np.ndarray) -> float:
    """The largest error in units of the last place of ``dtype_name`` at the expected values."""
    _, exponent = np.frexp(np.abs(expected))
    spacing = np.maximum(np.ldexp(1.0, exponent - MANTISSA_BITS[dtype_name]), SMALLEST_SPACING[dtype_name])
    return float(np.max(np.abs(actual.astype(np.float64) - expected) / spacing))


def short(rng, *shape) -> np.ndarray:
    """Multiples of 1/32 in [-2, 2]: exact in both half dtypes, with products exact in float32."""
    return rng.integers(-64, 65, shape) / 32.0


def half(dtype_name: str, values: np.ndarray, requires_grad: bool = False) -> onnxnn.Tensor:
    tensor = onnxnn.tensor(values.astype(np.float32)).to(getattr(onnxnn, dtype_name)).detach()
    return tensor.requires_grad_(requires_grad)


# Each case: (name, make(rng, dtype_name) -> (function, arrays, expected)).
def _linear_2d(rng, dtype_name):
    x, w = short(rng, 8, 16), short(rng, 16, 16)
    product = x @ w.T
    b = round_to(dtype_name, -product[0])  # row 0 cancels to the product's rounding residue
    return F.linear, (x, w, b), product + b


def _linear_3d(rng, dtype_name):
    x, w = short(rng, 2, 3, 16), short(rng, 5, 16)
    product = x @ w.T
    b = round_to(dtype_name, -product[0, 0])
    return F.linear, (x, w, b), product + b


def _linear_1d(rng, dtype_name):
    x, w = short(rng, 16), short(rng, 5, 16)
    product = w @ x
    b = round_to(dtype_name, -product)
    return F.linear, (x, w, b), product + b


def _addmm(rng, dtype_name, beta=1.0, alpha=1.0):
    m1, m2 = short(rng, 8, 16), short(rng, 16, 6)
    product = alpha * (m1 @ m2)
    c = round_to(dtype_name, -product / beta)
    return (lambda c, a, b: onnxnn.addmm(c, a, b, beta=beta, alpha=alpha)), (c, m1, m2), beta * c + product


def _baddbmm(rng, dtype_name):
    beta, alpha = 0.5, 1.5
    b1, b2 = short(rng, 3, 4, 16), short(rng, 3, 16, 5)
    product = alpha * (b1 @ b2)
    c = round_to(dtype_name, -product / beta)
    return (lambda c, a, b: onnxnn.baddbmm(c, a, b, beta=beta, alpha=alpha)), (c, b1, b2), beta * c + product


def _addbmm(rng, dtype_name):
    b1, b2 = short(rng, 2, 4, 16), short(rng, 2, 16, 5)
    product = (b1 @ b2).sum(0)
    c = round_to(dtype_name, -product)
    return onnxnn.addbmm, (c, b1, b2), c + product


def _addmv(rng, dtype_name):
    mat, vec = short(rng, 6, 16), short(rng, 16)
    product = mat @ vec
    c = round_to(dtype_name, -product)
    return onnxnn.addmv, (c, mat, vec), c + product


FORWARD_CASES = {
    "linear_2d": _linear_2d,
    "linear_3d": _linear_3d,
    "linear_1d": _linear_1d,
    "addmm": _addmm,
    "addmm_scaled": lambda rng, dtype_name: _addmm(rng, dtype_name, beta=0.5, alpha=1.5),
    "baddbmm_scaled": _baddbmm,
    "addbmm": _addbmm,
    "addmv": _addmv,
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("case", sorted(FORWARD_CASES))
def test_product_plus_term_rounds_once(case, dtype_name, executor):
    function, arrays, expected = FORWARD_CASES[case](np.random.default_rng(0), dtype_name)
    with onnxnn.set_executor(executor):
        result = function(*(half(dtype_name, array) for array in arrays))
        assert result.dtype is getattr(onnxnn, dtype_name)
        actual = result.float().numpy()
    assert ulps(dtype_name, actual, expected) <= 1.0


def test_the_reported_linear_and_addmm_values():
    x = onnxnn.tensor([[1.0029296875]], dtype=onnxnn.float16)
    b = onnxnn.tensor([-1.0], dtype=onnxnn.float16)
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            assert F.linear(x, x, b).item() == 0.00586700439453125  # PyTorch's; the exact value is 0.0058680
            assert onnxnn.addmm(b, x, x).item() == 0.00586700439453125


# Gradients: (name, function, shapes, alpha, expected gradients from float64 arrays and the output gradient g).
THIRD = 1.0 / 3.0
GRADIENT_CASES = {
    "linear": (
        F.linear,
        ((8, 16), (6, 16), (6,)),
        lambda g, x, w, b: (g @ w, g.T @ x, g.sum(0)),
    ),
    "addmm_scaled": (
        lambda c, a, b: onnxnn.addmm(c, a, b, beta=THIRD, alpha=THIRD),
        ((8, 6), (8, 16), (16, 6)),
        lambda g, c, a, b: (THIRD * g, THIRD * (g @ b.T), THIRD * (a.T @ g)),
    ),
    "baddbmm_scaled": (
        lambda c, a, b: onnxnn.baddbmm(c, a, b, beta=THIRD, alpha=THIRD),
        ((3, 4, 5), (3, 4, 16), (3, 16, 5)),
        lambda g, c, a, b: (THIRD * g, THIRD * (g @ b.transpose(0, 2, 1)), THIRD * (a.transpose(0, 2, 1) @ g)),
    ),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_gradients_round_once(case, dtype_name, executor):
    """Every input's gradient is computed in float32 and rounded once (alpha = 1/3 scales the
    output gradient: rounded to half first, the sums after it cancel its error into many ulps)."""
    function, shapes, reference = GRADIENT_CASES[case]
    rng = np.random.default_rng(1)
    arrays = [short(rng, *shape) for shape in shapes]
    with onnxnn.set_executor(executor):
        tensors = [half(dtype_name, array, requires_grad=True) for array in arrays]
        result = function(*tensors)
        g = short(rng, *result.shape)
        result.backward(half(dtype_name, g))
        gradients = [tensor.grad.float().numpy() for tensor in tensors]
    for actual, expected in zip(gradients, reference(g, *arrays)):
        assert actual.shape == expected.shape
        assert ulps(dtype_name, actual, expected) <= 1.0


def _group_norm_reference(x, groups, weight, bias, eps=1e-5):
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    centered = grouped - grouped.mean(-1, keepdims=True)
    normalized = (centered / np.sqrt((centered**2).mean(-1, keepdims=True) + eps)).reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)
    return normalized, weight.reshape(per_channel), bias.reshape(per_channel)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("shape, groups", [((2, 8, 6), 4), ((2, 6, 3, 4), 3)])
def test_group_norm_affine_step_rounds_once(shape, groups, dtype_name, executor):
    """Each channel's bias cancels its first element's scaled value but for 1/16: that element's
    result is 1/16 plus a residue that half-precision rounding of the normalized value, of its
    product with the weight and of the sum would miss by tens of ulps."""
    rng = np.random.default_rng(2)
    x = short(rng, *shape)
    weight = round_to(dtype_name, rng.uniform(4.0, 8.0, shape[1]) * rng.choice([-1.0, 1.0], shape[1]))
    normalized, scale, _ = _group_norm_reference(x, groups, weight, np.zeros(shape[1]))
    first = (normalized * scale)[0].reshape(shape[1], -1)[:, 0]
    bias = round_to(dtype_name, 1.0 / 16.0 - first)
    normalized, scale, shift = _group_norm_reference(x, groups, weight, bias)
    expected = normalized * scale + shift
    with onnxnn.set_executor(executor):
        tensors = [half(dtype_name, array) for array in (x, weight, bias)]
        result = F.group_norm(tensors[0], groups, tensors[1], tensors[2])
        assert result.dtype is getattr(onnxnn, dtype_name)
        actual = result.float().numpy()
    assert ulps(dtype_name, actual, expected) <= 1.0
