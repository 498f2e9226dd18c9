"""Finite-difference gradient checks in float64, shared by every gradient-rule test.

``check_gradients(function, inputs)`` compares the backward graph's vector-Jacobian product with
central differences: for small inputs element by element, for large ones along a random direction
(JAX's check_vjp: ``<J v, u>`` from differences against ``<v, J^T u>`` from backward). It then
runs backward again on other data, where the structure's first backward is replayed
(``runtime/fastpath/backward_replay.py``), and requires exactly the general driver's gradients.
"""

from __future__ import annotations

import numpy as np

import onnxnn


def central_differences(function, x: np.ndarray, cotangent: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The gradient of ``sum(function(x) * cotangent)`` by central differences, every element of x
    (``function`` maps a numpy array to one)."""
    gradient = np.zeros_like(x)
    for position in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[position] += eps
        down[position] -= eps
        gradient[position] = np.sum((function(up) - function(down)) * cotangent) / (2 * eps)
    return gradient


def _as_tensors(arrays, requires_grad):
    return [
        onnxnn.tensor(a, dtype=onnxnn.float64, requires_grad=r) if r else onnxnn.tensor(a)
        for a, r in zip(arrays, requires_grad)
    ]


def _gradients(function, arrays, requires_grad, cotangent) -> list:
    tensors = _as_tensors(arrays, requires_grad)
    output = function(*tensors)
    output.backward(onnxnn.tensor(cotangent, dtype=output.dtype))
    return [tensor.grad.numpy() if differentiated else None for tensor, differentiated in zip(tensors, requires_grad)]


def _check_replayed_backward(function, arrays, requires_grad, cotangent, rng) -> None:
    """Backward of a structure seen before (a replay) gives the general driver's gradients, on new data."""
    moved = [
        array + 0.01 * rng.standard_normal(array.shape) if differentiated else array
        for array, differentiated in zip(arrays, requires_grad)
    ]
    # Each way twice, the second run compared: a structure's first run may take the kernels
    # (plan_cache.FIRST_RUNS_ON_KERNELS), which round differently from its compiled session.
    _gradients(function, moved, requires_grad, cotangent)
    replayed = _gradients(function, moved, requires_grad, cotangent)
    with onnxnn.set_fast_path(False):
        _gradients(function, moved, requires_grad, cotangent)
        general = _gradients(function, moved, requires_grad, cotangent)
    for index, (replayed_gradient, general_gradient) in enumerate(zip(replayed, general)):
        np.testing.assert_array_equal(
            replayed_gradient, general_gradient, err_msg=f"replayed gradient of input {index}"
        )


def _evaluate(function, arrays, requires_grad, cotangent):
    with onnxnn.no_grad():
        output = function(*_as_tensors(arrays, [False] * len(arrays)))
    return float(np.sum(np.asarray(output.numpy(), dtype=np.float64) * cotangent))


def check_gradients(
    function,
    inputs,
    *,
    requires_grad=None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    seed: int = 0,
    exhaustive_limit: int = 16,
) -> None:
    """Asserts that backward through ``function`` matches finite differences of ``function``.

    Args:
        function: maps onnxnn tensors to one tensor.
        inputs: numpy arrays (float64 for differentiated inputs).
        requires_grad: which inputs to differentiate (default: every floating-point input).

    The default tolerances are those of float64 central differences at ``eps = 1e-6``: truncation
    ``eps**2 / 6 * |f3|`` (f3 the third derivative) ~ 2e-13 and rounding
    ``gamma(n) * sum |terms of f| / eps`` ~ 1e-10 n relative, both far inside rtol 1e-5 (atol 1e-7
    for gradients that vanish); a wrong rule is off by O(1).
    """
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(a) for a in inputs]
    if requires_grad is None:
        requires_grad = [a.dtype.kind == "f" for a in arrays]
    tensors = _as_tensors(arrays, requires_grad)
    output = function(*tensors)
    cotangent = rng.standard_normal(output.shape)
    output.backward(onnxnn.tensor(cotangent, dtype=output.dtype))
    for index, (array, differentiated) in enumerate(zip(arrays, requires_grad)):
        if not differentiated:
            continue
        analytic = tensors[index].grad
        assert analytic is not None, f"input {index} got no gradient"
        analytic = analytic.numpy()
        assert analytic.shape == array.shape, f"input {index}: gradient shape {analytic.shape} != {array.shape}"
        if array.size <= exhaustive_limit:
            numeric = np.zeros_like(array, dtype=np.float64)
            for position in np.ndindex(array.shape):
                shifted = [a.copy() for a in arrays]
                shifted[index][position] += eps
                up = _evaluate(function, shifted, requires_grad, cotangent)
                shifted[index][position] -= 2 * eps
                down = _evaluate(function, shifted, requires_grad, cotangent)
                numeric[position] = (up - down) / (2 * eps)
            np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of input {index}")
        else:
            direction = rng.standard_normal(array.shape)
            shifted = [a.copy() for a in arrays]
            shifted[index] = array + eps * direction
            up = _evaluate(function, shifted, requires_grad, cotangent)
            shifted[index] = array - eps * direction
            down = _evaluate(function, shifted, requires_grad, cotangent)
            numeric = (up - down) / (2 * eps)
            projected = float(np.sum(analytic * direction))
            np.testing.assert_allclose(
                projected, numeric, rtol=rtol * 10, atol=atol * 10, err_msg=f"directional gradient of input {index}"
            )
    _check_replayed_backward(function, arrays, requires_grad, cotangent, rng)
