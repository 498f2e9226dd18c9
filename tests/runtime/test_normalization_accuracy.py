"""Training-mode batch, instance and group normalization keep float32 accuracy where the mean is large.

Inputs ``OFFSET + N(0, 1)`` (a mean 1e6 times the spread): any float32 rounding of the mean costs up to
``ulp(mean) / 2``, 3.1e-2 here, in the normalized output, which is what onnxruntime's nodes and
``X * k + (B - mean * k)`` lost (2e-3 at a mean of 1e4 where PyTorch's error is 3e-4). onnxnn
normalizes ``c = X - shift`` (``shift`` a float mean, or an instance's first element: ``c`` is exact,
X lying within a factor 2 of it) with the statistics of ``c`` (the corrected two-pass algorithm), so
the output's error no longer depends on the mean. Its bound, for ``n`` elements per statistic, ``M``
the largest ``|x̂|`` and ``u`` float32's unit roundoff:

- the mean ``r`` of ``c`` errs by at most ``gamma(n)`` times the mean of ``|c|``, which is at most
  ``(1 + M) std`` (``|c| <= |x - mean| + |mean - shift|``, the shift an element or a mean within
  ``M std``; onnxruntime's float32 mean of group normalization's 32768 values here is 30 std off, and
  its decomposition centers the centered values once more): ``gamma(n) (1 + M)`` in ``x̂``;
- the variance by ``2 gamma(n)`` of itself (its sums of squares and ``r^2``): ``gamma(n) M`` in ``x̂``;
- the subtraction, products and sums writing ``x̂``, the scale and the bias: ``4 u (1 + M)``;

with ``gamma(n) = lambda sqrt(n) u``, the probabilistic bound of a sum of ``n`` terms (Higham and Mary,
SIAM J. Sci. Comput. 41(5), 2019; ``lambda = 6``, as tests/runtime/test_batch_norm_training_precision.py),
so ``|y - y_ref| <= max|w| (2 gamma(n) + 4 u)(1 + M) + 2 u max|y|``: 2e-4 at n = 1600, 1.5e-3 at
65536, where any rounded mean may err by 3.1e-2 (PyTorch 2.13 errs by 6e-2 to 1e-1 here).

Instance normalization's input gradient, of the loss ``sum(G * y)``: with ``ĝ = G w`` and ``m`` and
``ḡ`` the means of ``ĝ x̂`` and ``ĝ``, ``dx std = ĝ - ḡ - x̂ m``. Its rule recomputes ``x̂`` as the
forward does, within ``e_i = gamma(n) (1 + M) + gamma(n) |x̂_i| + 4 u (1 + |x̂_i|)`` (above), and ``m``
then errs by ``gamma(n) ((1 + M) |ḡ| + |m| + mean|ĝ x̂|) + 4 u mean(|ĝ| (1 + |x̂|))``, ``ḡ`` by
``gamma(n) mean|ĝ|``; ``|dx_i - dx_ref| std <= gamma(n) mean|ĝ| + e_i |m| + |x̂_i| err(m) + gamma(n)
|dx_i std| + 3 u (|ĝ_i| + |ḡ| + |x̂_i m|)``: 2e-5 to 1e-3 here, where a rounded mean costs ``ulp(mean)
/ (2 std)`` times ``|m| + |x̂_i ḡ|``, 1e-3 to 5e-3 (batch and group normalization's rules, and
PyTorch's, start from the rounded mean, as their forward passes return it).

The shapes reach the compiled loop of batch normalization (``kernels/compiled_normalization.py``: at
least 65536 elements, on the kernels or on one thread) and do not; float64 numpy is the reference.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.mode import MODE
from onnxnn.runtime.realization import clear_cache

F = onnxnn.nn.functional
OFFSET = 1e6
GROUPS = 2
U32 = float(np.finfo(np.float32).eps) / 2
LAMBDA = 6.0

# (executor, intra-op threads): batch normalization's compiled loop runs on the kernels and on onnxruntime's
# sessions on one thread (for shapes it takes); on two, onnxruntime runs the node's decomposition.
PATHS = [("kernels", 1), ("onnxruntime", 1), ("onnxruntime", 2)]
SHAPES = {"small": (2, 4, 40, 40), "compiled_loop": (4, 4, 128, 128)}


def _reference_batch_norm(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    return x, (0, 2, 3)


def _reference_instance_norm(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    return x, (2, 3)


def _reference_group_norm(x: np.ndarray) -> tuple[np.ndarray, tuple]:
    return x.reshape(x.shape[0], GROUPS, -1), (2,)


# name: (onnxnn's call, the float64 input grouped as its statistics take it and the axes they reduce)
OPS = {
    "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), _reference_batch_norm),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b), _reference_instance_norm),
    "group_norm": (lambda x, w, b: F.group_norm(x, GROUPS, w, b), _reference_group_norm),
}


@pytest.fixture
def threads(request, monkeypatch):
    monkeypatch.setattr(MODE, "intra_op_threads", request.param)
    clear_cache()
    yield request.param
    clear_cache()


def _gamma(count: int) -> float:
    return LAMBDA * math.sqrt(count) * U32


def _case(shape: tuple, seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    x = (OFFSET + rng.standard_normal(shape)).astype(np.float32)
    weight = rng.uniform(0.5, 1.5, shape[1]).astype(np.float32)
    bias = rng.uniform(-1.0, 1.0, shape[1]).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    return x, weight, bias, g


def _reference(op: str, x, weight, bias, g) -> tuple:
    """float64 ``(y, dx, dx bound, x̂, n)``: the normalization of the float32 input, the gradient of
    ``sum(g * y)`` and the bound on its error (the module docstring)."""
    grouped, axes = OPS[op][1](x.astype(np.float64))
    count = math.prod(grouped.shape[axis] for axis in axes)
    mean = grouped.mean(axes, keepdims=True)
    std = np.sqrt(((grouped - mean) ** 2).mean(axes, keepdims=True) + 1e-5)
    x_hat = (grouped - mean) / std
    channel = (1, -1, 1, 1)
    w, b = weight.astype(np.float64).reshape(channel), bias.astype(np.float64).reshape(channel)
    g_hat = (g.astype(np.float64) * w).reshape(grouped.shape)
    g_mean, m = g_hat.mean(axes, keepdims=True), (g_hat * x_hat).mean(axes, keepdims=True)
    dx_std = g_hat - g_mean - x_hat * m
    gamma, largest = _gamma(count), np.abs(x_hat).max(axes, keepdims=True)
    x_hat_error = gamma * (1 + largest) + gamma * np.abs(x_hat) + 4 * U32 * (1 + np.abs(x_hat))
    m_error = gamma * ((1 + largest) * np.abs(g_mean) + np.abs(m) + np.abs(g_hat * x_hat).mean(axes, keepdims=True))
    m_error += 4 * U32 * (np.abs(g_hat) * (1 + np.abs(x_hat))).mean(axes, keepdims=True)
    bound = gamma * np.abs(g_hat).mean(axes, keepdims=True) + x_hat_error * np.abs(m) + np.abs(x_hat) * m_error
    bound += gamma * np.abs(dx_std) + 3 * U32 * (np.abs(g_hat) + np.abs(g_mean) + np.abs(x_hat * m))
    y = x_hat.reshape(x.shape) * w + b
    return y, (dx_std / std).reshape(x.shape), (bound / std).reshape(x.shape), x_hat, count


def _run(op: str, executor: str, x, weight, bias, g) -> tuple:
    with onnxnn.set_executor(executor):
        xt = onnxnn.tensor(x, requires_grad=True)
        y = OPS[op][0](xt, onnxnn.tensor(weight), onnxnn.tensor(bias))
        (y * onnxnn.tensor(g)).sum().backward()
        assert xt.grad is not None
        return y.detach().numpy().astype(np.float64), xt.grad.numpy().astype(np.float64)


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("executor, threads", PATHS, indirect=["threads"])
@pytest.mark.parametrize("op", OPS)
def test_the_output_error_does_not_grow_with_the_mean(op, executor, threads, shape):
    x, weight, bias, g = _case(shape)
    expected, _, _, x_hat, count = _reference(op, x, weight, bias, g)
    actual, _ = _run(op, executor, x, weight, bias, g)
    largest = float(np.abs(x_hat).max())
    bound = float(weight.max()) * (2 * _gamma(count) + 4 * U32) * (1 + largest) + 2 * U32 * float(
        np.abs(expected).max()
    )
    error = float(np.abs(actual - expected).max())
    assert error <= bound, (
        f"{op} on {executor}: max error {error:.3g} > {bound:.3g} (a rounded mean: {U32 * OFFSET:.3g})"
    )


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("executor, threads", PATHS, indirect=["threads"])
def test_the_instance_norm_input_gradient_error_does_not_grow_with_the_mean(executor, threads, shape):
    x, weight, bias, g = _case(shape, seed=1)
    _, expected, bound, _, _ = _reference("instance_norm", x, weight, bias, g)
    _, actual = _run("instance_norm", executor, x, weight, bias, g)
    excess = np.abs(actual - expected) / bound
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    assert excess.max() <= 1, (
        f"on {executor}: error {abs(actual - expected)[worst]:.3g} > bound {bound[worst]:.3g} at {worst}"
    )
