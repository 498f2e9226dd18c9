"""xlogy and xlog1py at their edges, and the vector norms over empty dims and with ``dtype=``.

- ``xlogy(x, y) = x log(y)`` and ``xlog1py(x, y) = x log1p(y)`` are a literal +0 where ``x == 0``
  (a ``-0`` x, a zero, negative or infinite y included), NaN where y is NaN.
- Their gradients are PyTorch's formulas (``derivatives.yaml``): ``d/dx = log(y)`` (``log1p(y)``)
  also at ``x == 0``, +inf at ``y = inf``, except 0 there where ``y <= 0`` (``y <= -1``);
  ``d/dy = x / y`` (``x / (1 + y)``), so NaN at ``x == 0, y == 0`` (``y == -1``) and a signed zero
  elsewhere at ``x == 0``. The second derivatives differentiate those formulas.
- ``norm``/``vector_norm`` with ``inf`` or a negative order over an empty reduced dim raise PyTorch's
  RuntimeError ("cannot compute the -1 norm on the dimension 0because ..."); order 0 and positive
  orders give 0 there.
- ``norm(x, dtype=d)`` converts x to the float dtype d first (which x's dtype must promote to) and
  computes there; PyTorch's RuntimeErrors otherwise.

Expectations are hand-derived from those formulas with Python's ``math``; values and first
derivatives are compared to 4 float64 ulps (one log, one product or quotient each).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
EPS64 = float(np.finfo(np.float64).eps)
INF, NAN = math.inf, math.nan

# (x, y, value, d/dx, d/dy), each derived from the formulas of the module docstring.
XLOGY_CASES = [
    (0.0, 0.0, 0.0, 0.0, NAN),  # d/dx: log(0) masked as y <= 0; d/dy: 0 / 0
    (-0.0, 0.0, 0.0, 0.0, NAN),
    (0.0, -1.0, 0.0, 0.0, -0.0),  # 0 / -1
    (0.0, -INF, 0.0, 0.0, -0.0),
    (0.0, INF, 0.0, INF, 0.0),  # log(inf) = inf
    (0.0, NAN, NAN, NAN, NAN),
    (0.0, 2.0, 0.0, math.log(2.0), 0.0),
    (-0.0, 2.0, 0.0, math.log(2.0), -0.0),
    (0.0, 1e-300, 0.0, math.log(1e-300), 0.0),
    (1.0, 0.0, -INF, -INF, INF),
    (-1.5, 0.5, -1.5 * math.log(0.5), math.log(0.5), -3.0),
    (2.0, INF, INF, INF, 0.0),
]
XLOG1PY_CASES = [
    (0.0, -1.0, 0.0, 0.0, NAN),  # d/dx: log1p(-1) masked as y <= -1; d/dy: 0 / 0
    (0.0, -2.0, 0.0, 0.0, -0.0),  # 0 / -1
    (0.0, -INF, 0.0, 0.0, -0.0),
    (0.0, INF, 0.0, INF, 0.0),
    (0.0, NAN, NAN, NAN, NAN),
    (-0.0, 0.0, 0.0, 0.0, -0.0),
    (-0.0, 2.0, 0.0, math.log(3.0), -0.0),
    (0.0, 1e-300, 0.0, 1e-300, 0.0),  # log1p(tiny) = tiny
    (1.0, -1.0, -INF, -INF, INF),
    (2.0, 3.0, 2.0 * math.log(4.0), math.log(4.0), 0.5),
]
FUNCTIONS = {"xlogy": onnxnn.xlogy, "xlog1py": onnxnn.special.xlog1py}
CASES = [("xlogy", *case) for case in XLOGY_CASES] + [("xlog1py", *case) for case in XLOG1PY_CASES]


def _assert_same(actual: float, expected: float, what: str) -> None:
    """Equal within 4 ulps, NaN for NaN, and the sign of every zero and infinity."""
    if math.isnan(expected):
        assert math.isnan(actual), f"{what}: {actual} != nan"
        return
    assert math.copysign(1.0, actual) == math.copysign(1.0, expected), f"{what}: {actual} != {expected}"
    if math.isinf(expected) or expected == 0:
        assert actual == expected, f"{what}: {actual} != {expected}"
        return
    assert abs(actual - expected) <= 4 * EPS64 * abs(expected), f"{what}: {actual} != {expected}"


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, x, y, value, x_gradient, y_gradient", CASES)
def test_x_log_values_and_gradients(executor, name, x, y, value, x_gradient, y_gradient):
    with onnxnn.set_executor(executor):
        xs = onnxnn.tensor([x], dtype=onnxnn.float64, requires_grad=True)
        ys = onnxnn.tensor([y], dtype=onnxnn.float64, requires_grad=True)
        result = FUNCTIONS[name](xs, ys)
        result.backward(onnxnn.ones_like(result))
        _assert_same(result.detach().numpy()[0].item(), value, f"{name}({x}, {y})")
        _assert_same(xs.grad.numpy()[0].item(), x_gradient, f"d{name}/dx at ({x}, {y})")
        _assert_same(ys.grad.numpy()[0].item(), y_gradient, f"d{name}/dy at ({x}, {y})")


# (x, y, d2/dx2, d2/dxdy, d2/dy2) of xlogy and xlog1py (shift 0 and 1): d/dx = log(y + shift) has
# d/dx 0 and d/dy 1 / (y + shift) (0 where masked); d/dy = x / (y + shift) has 1 / (y + shift) and
# -x / (y + shift)^2.
SECOND_CASES = [
    ("xlogy", 2.0, 4.0, 0.0, 0.25, -0.125),
    ("xlogy", 0.0, 2.0, 0.0, 0.5, -0.0),
    ("xlog1py", -3.0, 1.0, 0.0, 0.5, 0.75),
    ("xlog1py", 0.0, 1.0, 0.0, 0.5, -0.0),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, x, y, xx, xy, yy", SECOND_CASES)
def test_x_log_second_derivatives(executor, name, x, y, xx, xy, yy):
    with onnxnn.set_executor(executor):
        xs = onnxnn.tensor([x], dtype=onnxnn.float64, requires_grad=True)
        ys = onnxnn.tensor([y], dtype=onnxnn.float64, requires_grad=True)
        x_gradient, y_gradient = onnxnn.autograd.grad(FUNCTIONS[name](xs, ys).sum(), (xs, ys), create_graph=True)
        dxx, dxy = onnxnn.autograd.grad(x_gradient.sum(), (xs, ys), allow_unused=True)
        dyx, dyy = onnxnn.autograd.grad(y_gradient.sum(), (xs, ys))
        assert dxx is None or dxx.numpy()[0] == xx
        _assert_same(dxy.numpy()[0].item(), xy, "d2/dxdy")
        _assert_same(dyx.numpy()[0].item(), xy, "d2/dydx")
        _assert_same(dyy.numpy()[0].item(), yy, "d2/dy2")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, shift", [("xlogy", 0.0), ("xlog1py", 1.0)])
def test_x_log_broadcast_gradients(executor, name, shift):
    """A (2, 1) x against a (3,) y: each gradient summed over the other operand's broadcast dim."""
    x_values, y_values = np.array([[0.0], [1.5]]), np.array([1.0, 2.0, 4.0]) - shift
    with onnxnn.set_executor(executor):
        xs = onnxnn.tensor(x_values, requires_grad=True, dtype=onnxnn.float64)
        ys = onnxnn.tensor(y_values, requires_grad=True, dtype=onnxnn.float64)
        FUNCTIONS[name](xs, ys).sum().backward()
        logs = np.log(y_values + shift)  # log(1), log(2), log(4): d/dx at both rows
        np.testing.assert_allclose(xs.grad.numpy(), np.full((2, 1), logs.sum()), rtol=4 * EPS64)
        np.testing.assert_allclose(ys.grad.numpy(), 1.5 / (y_values + shift), rtol=4 * EPS64)


EMPTY_REFUSALS = [
    ((0, 3), float("inf"), 0, "the inf norm on the dimension 0because"),
    ((0, 3), -math.inf, None, "the -inf norm on an empty tensor because"),
    ((2, 0), -1, -1, "the -1 norm on the dimension -1because"),
    ((0, 0), -1.0, (1, 0), "the -1 norm on the dimension 1because"),
    ((0,), -0.5, None, "the -0.5 norm on an empty tensor because"),
    ((0, 3), -2, (), "the -2 norm on an empty tensor because"),
]


@pytest.mark.parametrize("function", ["norm", "vector_norm", "method"])
@pytest.mark.parametrize("shape, order, dim, message", EMPTY_REFUSALS)
def test_norms_without_identity_refuse_empty_dims(function, shape, order, dim, message):
    x = onnxnn.zeros(shape)
    call = {
        "norm": lambda: onnxnn.norm(x, order, dim),
        "vector_norm": lambda: onnxnn.linalg.vector_norm(x, order, dim),
        "method": lambda: x.norm(order, dim),
    }[function]
    with pytest.raises(RuntimeError, match=f"linalg.vector_norm cannot compute {message}"):
        call()


# An empty reduced dim has the identity 0 for these orders; a non-empty reduced dim of an empty
# tensor gives an empty result for every order.
EMPTY_RESULTS = [
    ((0, 3), 0, 0, np.zeros(3)),
    ((0, 3), 2, None, np.zeros(())),
    ((0, 3), 0.5, 0, np.zeros(3)),
    ((2, 0), 1, 1, np.zeros(2)),
    ((0, 3), -1, 1, np.zeros(0)),
    ((0, 3), float("inf"), 1, np.zeros(0)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("shape, order, dim, expected", EMPTY_RESULTS)
def test_norms_over_empty_dims(executor, shape, order, dim, expected):
    with onnxnn.set_executor(executor):
        result = onnxnn.norm(onnxnn.zeros(shape), order, dim)
        np.testing.assert_array_equal(result.numpy(), expected)


# p, dim, expected: of [[3, 4], [1, 2]] computed in float64 (the nuclear norm: the singular values'
# sum, sqrt of the trace of A^T A plus twice sqrt(det A^T A) = sqrt(30 + 2 * 2)).
NORM_DTYPE_CASES = [
    (2, None, math.sqrt(30.0)),
    ("fro", (0, 1), math.sqrt(30.0)),
    (1, None, 10.0),
    (float("inf"), None, 4.0),
    (0, 1, np.array([2.0, 2.0])),
    ("nuc", None, math.sqrt(34.0)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("p, dim, expected", NORM_DTYPE_CASES)
def test_norm_computes_in_dtype(executor, p, dim, expected):
    with onnxnn.set_executor(executor):
        result = onnxnn.norm(onnxnn.tensor([[3.0, 4.0], [1.0, 2.0]]), p, dim, dtype=onnxnn.float64)
        assert result.dtype is onnxnn.float64
        np.testing.assert_allclose(result.numpy(), expected, rtol=16 * EPS64)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_norm_dtype_keeps_digits_and_gradient(executor):
    """Squares of 1e-30 underflow in float32 (the float32 2-norm would be 0); in float64 they do not.
    The gradient x / norm comes back to float32."""
    values = np.array([3e-30, 4e-30], dtype=np.float32)
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor(values, requires_grad=True)
        result = onnxnn.norm(x, dtype=onnxnn.float64)
        result.backward()
        np.testing.assert_allclose(result.item(), math.hypot(*values.astype(np.float64)), rtol=4 * EPS64)
        assert x.grad.dtype is onnxnn.float32
        np.testing.assert_allclose(x.grad.numpy(), [0.6, 0.8], rtol=4 * float(np.finfo(np.float32).eps))


NORM_DTYPE_REFUSALS = [
    (onnxnn.float64, onnxnn.float32, 2, r"linalg.vector_norm: the dtype of the input \(Double\) should be convertible"),
    (onnxnn.float32, onnxnn.float16, 2, r"without narrowing to the specified dtype \(Half\)"),
    (
        onnxnn.int64,
        onnxnn.float32,
        2,
        "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long",
    ),
    (onnxnn.float32, onnxnn.int64, 1, "linalg.vector_norm: dtype should be floating point or complex, but got Long"),
    (onnxnn.float64, onnxnn.float32, "nuc", r"linalg.matrix_norm: the dtype of the input \(Double\)"),
]


@pytest.mark.parametrize("input_dtype, dtype, p, message", NORM_DTYPE_REFUSALS)
def test_norm_dtype_refusals(input_dtype, dtype, p, message):
    x = onnxnn.ones(2, 2, dtype=input_dtype)
    with pytest.raises(RuntimeError, match=message):
        onnxnn.norm(x, p, dtype=dtype)
