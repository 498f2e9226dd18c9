"""Error bounds derived from the arithmetic, so assertions hold on every BLAS and onnxruntime build.

A float sum of ``n`` products computed in any order is within ``gamma(n) * sum |a_i * b_i|`` of the
exact sum, where ``gamma(n) = n * u / (1 - n * u)`` and ``u`` is the unit roundoff of the dtype
(Higham, *Accuracy and Stability of Numerical Algorithms*, section 3.1). Two results computed in
different orders can therefore differ by twice that. These helpers turn that bound into the
``atol`` numpy's assertions take, elementwise.

What counts as a term:

- matmul, Gemm, Linear: the inner dimension ``k`` (plus one per added bias);
- convolution: a matmul over ``C / groups * kh * kw`` terms (``conv_bound``);
- reductions (sum, mean, variance, norms): the ``n`` elements reduced (``sum_bound``); a mean's
  division and a variance's square add a rounding each;
- elementwise transcendental ops (exp, tanh, erf, sigmoid): libm and onnxruntime's vectorized
  kernels are accurate to a few units in the last place (``ulps``), not correctly rounded;
- a chain of such steps: the bounds add, each propagated through the later steps' Lipschitz
  constants; the tests that need one say how in a comment.
"""

from __future__ import annotations

import math

import numpy as np

# Units in the last place that an elementwise transcendental kernel may be off by: glibc's libm
# documents at most 1-4 ulps for exp/log/tanh/erf in float32 and float64, and onnxruntime's MLAS
# vectorized exp/tanh/logistic approximations stay within a few ulps as well. Comparing two such
# kernels (numpy's and onnxruntime's) allows both errors.
TRANSCENDENTAL_ULPS = 8


def _finfo(dtype):
    try:
        return np.finfo(dtype)
    except ValueError:  # bfloat16 and friends: numpy does not know them, ml_dtypes does
        import ml_dtypes

        return ml_dtypes.finfo(dtype)


def unit_roundoff(dtype) -> float:
    """Half the distance from 1.0 to the next representable number of ``dtype``."""
    return float(_finfo(dtype).eps) / 2


def gamma(terms: int, dtype=np.float32) -> float:
    """Higham's gamma_n: the relative error bound of a sum of ``terms`` rounded operations."""
    nu = terms * unit_roundoff(dtype)
    return nu / (1 - nu)


def rtol_for(terms: int, dtype=np.float32) -> float:
    """Relative tolerance between two computations of ``terms`` rounded operations on one-signed data.

    Valid when the accumulated terms do not cancel (positive data, products of one sign), so that
    ``sum |terms| == |result|``; otherwise use the absolute bounds below.
    """
    return 2 * gamma(terms, dtype)


def accumulation_bound(magnitude, terms: int, dtype=np.float32) -> np.ndarray:
    """Bound on how far two computations of a sum of ``terms`` rounded operations may differ.

    ``magnitude`` is the sum of the absolute values of the terms (elementwise, or an upper bound).
    """
    return 2 * gamma(terms, dtype) * np.asarray(magnitude, np.float64)


def sum_bound(x, axis=None, *, keepdims: bool = False, extra: int = 0, dtype=np.float32) -> np.ndarray:
    """Elementwise bound for a sum (or a mean, with ``extra=1`` for the division) of ``x`` over ``axis``."""
    x64 = np.abs(np.asarray(x, np.float64))
    terms = x64.size if axis is None else math.prod(np.atleast_1d(x64.shape)[np.atleast_1d(axis)])
    magnitude = x64.sum(axis=axis, keepdims=keepdims)
    return accumulation_bound(magnitude, max(terms, 1) + extra, dtype)


def matmul_bound(a: np.ndarray, b: np.ndarray, *added: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Elementwise bound on how far two float computations of ``a @ b + added...`` may differ.

    Both results may err by ``gamma(k + len(added)) * (|a| @ |b| + sum |added|)`` from the exact
    value, ``k`` being the inner dimension; the bound is twice that.
    """
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    magnitude = a64 @ b64
    for term in added:
        magnitude = magnitude + np.abs(np.asarray(term, np.float64))
    return accumulation_bound(magnitude, a.shape[-1] + len(added), dtype)


def conv_bound(x, w, bias=None, *, groups: int = 1, dtype=np.float32) -> np.ndarray:
    """Bound for an N-d convolution ``conv(x, w) + bias``, broadcastable against its (N, O, ...) output.

    A convolution is a matmul over ``C / groups * kh * kw`` terms. Each output element's magnitude
    ``sum |x_i w_i|`` is at most ``max |x| * sum |w[o]|`` (padding only removes terms), which
    avoids a second convolution here at the price of a looser bound.
    """
    x64, w64 = np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(w, np.float64))
    spatial = w64.ndim - 2
    magnitude = (x64.max() if x64.size else 0.0) * w64.reshape(w64.shape[0], -1).sum(1)
    terms = math.prod(w64.shape[1:])
    if bias is not None:
        magnitude = magnitude + np.abs(np.asarray(bias, np.float64))
        terms += 1
    return accumulation_bound(magnitude.reshape((1, -1) + (1,) * spatial), terms, dtype)


def conv_transpose_bound(x, w, bias=None, *, groups: int = 1, dtype=np.float32) -> np.ndarray:
    """Bound for a transposed convolution (``w`` of shape (C_in, C_out / groups, k...)), broadcastable.

    Each output element sums at most ``C_in / groups * prod(k)`` products of its channel's weights
    with inputs; its magnitude is at most ``max |x|`` times the sum of that channel's ``|w|``.
    """
    x64, w64 = np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(w, np.float64))
    spatial = w64.ndim - 2
    per_group_in = w64.shape[0] // groups
    per_channel = w64.reshape(groups, per_group_in, w64.shape[1], -1).sum(axis=(1, 3)).reshape(-1)
    magnitude = (x64.max() if x64.size else 0.0) * per_channel
    terms = per_group_in * math.prod(w64.shape[2:])
    if bias is not None:
        magnitude = magnitude + np.abs(np.asarray(bias, np.float64))
        terms += 1
    return accumulation_bound(magnitude.reshape((1, -1) + (1,) * spatial), terms, dtype)


def normalization_bound(x, axes, eps: float, dtype=np.float32) -> np.ndarray:
    """Bound for ``(x - mean) / sqrt(var + eps)`` over ``axes`` (batch, layer, instance norm), elementwise.

    First-order propagation of each step's rounding, for a computation in ``dtype`` against an
    exact one: the mean errs by ``gamma(n + 1) * mean|x|``; the variance, whether computed centered or
    as ``E[x^2] - mean^2``, by ``gamma(n + 3) * (mean(x^2) + mean^2)``; the centered values by the
    mean's error plus a rounding; the reciprocal square root by half the variance's relative error
    plus a few ulps. The bound is twice the sum, so it also covers two float computations compared.
    """
    x64 = np.asarray(x, np.float64)
    axes = tuple(np.atleast_1d(axes))
    n = math.prod(x64.shape[a] for a in axes)
    u = unit_roundoff(dtype)
    mean = x64.mean(axis=axes, keepdims=True)
    centered = x64 - mean
    std = np.sqrt(x64.var(axis=axes, keepdims=True) + eps)
    mean_error = gamma(n + 1, dtype) * np.abs(x64).mean(axis=axes, keepdims=True)
    var_error = gamma(n + 3, dtype) * ((x64**2).mean(axis=axes, keepdims=True) + mean**2) + 2 * mean_error * (
        np.abs(centered).mean(axis=axes, keepdims=True)
    )
    centered_error = mean_error + 2 * u * (np.abs(x64) + np.abs(mean))
    normalized = np.abs(centered) / std
    rsqrt_relative = var_error / (2 * std**2) + TRANSCENDENTAL_ULPS * u
    return 2 * (centered_error / std + normalized * (rsqrt_relative + 2 * u))


def chain_bound(x, steps, dtype=np.float32) -> np.ndarray:
    """Bound on how far a float computation of a chain of layers may be from the exact result.

    ``steps`` are ``("affine", w, b)`` for ``h @ w + b`` (``b`` may be None), ``("scale", s, t)`` for
    a per-feature ``h * s + t`` whose ``s`` and ``t`` are themselves computed (an evaluated batch
    norm: a reciprocal square root and a few roundings), ``("apply", f, ulp_count)`` for an
    elementwise 1-Lipschitz ``f`` (relu: 0 ulps, tanh: a few) and ``("reshape", shape)``.

    Each step's own rounding is bounded as above, relative to the exact magnitudes ``|w| |h| +
    |b|``; errors already made are carried through the step's Lipschitz constant (``|w|``, ``|s|``,
    1). Two computations of the chain (onnxnn and onnxruntime, fused or not) differ by at most
    twice the returned bound.
    """
    value = np.asarray(x, np.float64)
    magnitude, error = np.abs(value), np.zeros(value.shape)
    u = unit_roundoff(dtype)
    for kind, *args in steps:
        if kind == "affine":
            w, b = np.asarray(args[0], np.float64), args[1]
            value, magnitude, error = value @ w, (magnitude + error) @ np.abs(w), error @ np.abs(w)
            terms = w.shape[0]
            if b is not None:
                b = np.asarray(b, np.float64)
                value, magnitude, terms = value + b, magnitude + np.abs(b), terms + 1
            error = error + gamma(terms, dtype) * magnitude
        elif kind == "scale":
            s, t = np.abs(np.asarray(args[0], np.float64)), np.asarray(args[1], np.float64)
            value = value * args[0] + t
            magnitude = (magnitude + error) * s + np.abs(t)
            error = error * s + gamma(4 + TRANSCENDENTAL_ULPS, dtype) * magnitude
        elif kind == "apply":
            function, count = args
            value = function(value)
            error = error + count * u * 2 * np.abs(value) + (count > 0) * np.spacing(np.asarray(0, dtype))
        elif kind == "reshape":
            value, magnitude, error = (np.reshape(a, args[0]) for a in (value, magnitude, error))
        else:
            raise ValueError(f"unknown step {kind!r}")
    return error


def ulps(reference, count: int = TRANSCENDENTAL_ULPS, dtype=np.float32) -> np.ndarray:
    """``count`` units in the last place of ``reference`` in ``dtype`` (ml_dtypes' too), elementwise, as float64."""
    magnitude = np.abs(np.asarray(reference, np.float64))
    info = _finfo(dtype)
    exponent = np.floor(np.log2(np.maximum(magnitude, float(info.tiny))))
    return count * float(info.eps) * np.exp2(exponent)


def assert_within(actual, expected, bound, err_msg: str = "") -> None:
    """Assert ``|actual - expected| <= bound`` elementwise (shapes broadcast), naming the worst element."""
    actual64, expected64 = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual64.shape == expected64.shape, f"shape {actual64.shape} != {expected64.shape} {err_msg}"
    error = np.abs(actual64 - expected64)
    bound = np.broadcast_to(np.asarray(bound, np.float64), error.shape)
    if error.size == 0 or np.all(error <= bound):
        return
    excess = np.where(np.isnan(error), np.inf, error - bound)
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(excess), error.shape))
    raise AssertionError(
        f"|actual - expected| exceeds the float rounding bound at {worst}: {error[worst]:.3g} > "
        f"{bound[worst]:.3g} (actual {float(actual64[worst])!r}, expected {float(expected64[worst])!r}) "
        f"{err_msg}".rstrip()
    )


def assert_close_to_matmul(actual, a, b, *added, dtype=np.float32, then=None) -> None:
    """Assert ``actual`` is ``then(a @ b + added...)`` up to the rounding either computation may do.

    ``then`` must be 1-Lipschitz (relu, identity) for the bound to carry through it.
    """
    exact = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    for term in added:
        exact = exact + np.asarray(term, np.float64)
    if then is not None:
        exact = then(exact)
    assert_within(actual, exact, matmul_bound(a, b, *added, dtype=dtype))
