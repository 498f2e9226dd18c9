"""The float64 Acos, Acosh, Asin, Asinh, Atan, Atanh, Cosh, Erf, Sinh and Tan that onnxnn writes as
standard arithmetic for onnxruntime (which has no float64 kernel for them): values against numpy
over the whole domain and at the special values, gradients, and exported models that plain
onnxruntime serves."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

# Each form is within 3 ulps of the exact values (the module's docstring) and numpy's functions
# (glibc's; math.erf for erf) within 1, so a form as accurate as claimed is within 4 ulps of numpy.
# The bound is relative everywhere, with no absolute term at the zeros of the functions, where a
# relative error usually means nothing: these forms keep their relative accuracy there (an odd
# function is its value at |x| times a sign, tan reduces its argument with compensated differences,
# acos and acosh take exact differences near 1), and the grids probe those zeros (tan's at the
# doubles nearest k pi/2). The one exception is tan beyond 2^20 pi/2, where onnxruntime's own Sin
# and Cos serve (within 4 ulps each there, measured): their quotient gets 8.
ULPS = 4
FAR_TAN_ULPS = 8
FAR_TAN = 2.0**20 * math.pi / 2

_erf = np.vectorize(math.erf, otypes=[np.float64])
_HUGE = np.finfo(np.float64).max
_TINY = np.finfo(np.float64).tiny
SPECIAL = np.array(
    [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, -5e-324, _TINY, -_TINY, _HUGE, -_HUGE]
    + [np.nextafter(1.0, 0.0), np.nextafter(-1.0, 0.0), np.nextafter(1.0, 2.0), np.nextafter(-1.0, -2.0)]
)


def _both_signs(values) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return np.concatenate([values, -values])


def _common() -> np.ndarray:
    """The special values, a dense grid over [-10, 10] and magnitudes from the subnormals to the largest."""
    magnitudes = 10.0 ** np.linspace(-323, 308, 2000)
    return np.concatenate([SPECIAL, np.linspace(-10.0, 10.0, 4001), _both_signs(magnitudes)])


def _near_one() -> np.ndarray:
    """Both sides of +-1: ``1 -+ 2^-k`` to the last ulp, and the inside of (-1, 1)."""
    steps = 2.0 ** -np.arange(1, 54)
    return np.concatenate([_both_signs(1.0 - steps), _both_signs(1.0 + steps), np.linspace(-1.0, 1.0, 4001)])


# The doubles below 2^20 pi/2 closest to a multiple of pi/2 relative to their ulp (a search over
# every multiple with 300-bit arithmetic): 29 pi/2 (6.2e-19 off, 9e-5 ulp) and its doublings, and
# 204551 pi/2 (7.6e-7 ulp off).
CLOSEST_TO_MULTIPLES_OF_HALF_PI = np.concatenate([45.553093477052 * 2.0 ** np.arange(16), [321307.9594422229]])


def _tan_grid() -> np.ndarray:
    # Around the doubles nearest k pi/2, where tan is tiny or huge: for k near 0, up to 2^20 and in
    # between; then beyond, where onnxruntime's Sin and Cos take over.
    k = np.unique(np.concatenate([np.arange(-300, 301), np.round(np.geomspace(300, 2**20 - 1, 2000))]))
    nearest = np.concatenate([k * (math.pi / 2), _both_signs(CLOSEST_TO_MULTIPLES_OF_HALF_PI)])
    far = np.geomspace(FAR_TAN, 1e300, 2000)
    return np.concatenate(
        [_both_signs(nearest), np.nextafter(nearest, np.inf), np.nextafter(nearest, -np.inf), _both_signs(far)]
    )


def _hyperbolic_grid() -> np.ndarray:
    # The branches meet at 1 (sinh), ln(2)/2 and 700; e^x overflows from 709.78, the results from 710.48.
    return _both_signs(np.concatenate([np.linspace(0.9, 1.1, 401), np.linspace(690.0, 711.0, 2101)]))


def _atan_grid() -> np.ndarray:
    return _both_signs(np.concatenate([np.linspace(0.6, 0.7, 401), np.linspace(2.3, 2.5, 401)]))  # reductions


def _far_logarithm_grid() -> np.ndarray:
    return _both_signs(2.0 ** np.linspace(55.0, 65.0, 401))  # log(2x) takes over at 2^60


def _acosh_grid() -> np.ndarray:
    return np.concatenate(
        [1.0 + 2.0 ** -np.arange(0, 53), np.linspace(1.0, 3.0, 2001), 2.0 ** np.linspace(55, 65, 401)]
    )


def _erf_grid() -> np.ndarray:
    return np.linspace(-7.0, 7.0, 2801)  # the branches meet at 1; erf saturates from 6


# op name -> (numpy reference, extra grid, derivative, points inside the domain for the gradient)
CASES = {
    "acos": (np.arccos, _near_one, lambda x: -1 / np.sqrt(1 - x * x), [-0.9, -0.3, 0.0, 0.5, 0.9]),
    "acosh": (np.arccosh, _acosh_grid, lambda x: 1 / np.sqrt(x * x - 1), [1.1, 1.5, 3.0, 40.0]),
    "asin": (np.arcsin, _near_one, lambda x: 1 / np.sqrt(1 - x * x), [-0.9, -0.3, 0.0, 0.5, 0.9]),
    "asinh": (np.arcsinh, _far_logarithm_grid, lambda x: 1 / np.sqrt(x * x + 1), [-30.0, -0.5, 0.0, 0.7, 3.0]),
    "atan": (np.arctan, _atan_grid, lambda x: 1 / (1 + x * x), [-30.0, -0.5, 0.0, 0.7, 1.5, 3.0]),
    "atanh": (np.arctanh, _near_one, lambda x: 1 / (1 - x * x), [-0.9, -0.3, 0.0, 0.5, 0.9]),
    "cosh": (np.cosh, _hyperbolic_grid, np.sinh, [-3.0, -0.5, 0.0, 0.3, 1.5, 20.0]),
    "erf": (_erf, _erf_grid, lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), [-2.5, -0.5, 0.0, 0.8, 1.2, 3.0]),
    "sinh": (np.sinh, _hyperbolic_grid, np.cosh, [-3.0, -0.5, 0.0, 0.3, 1.5, 20.0]),
    "tan": (np.tan, _tan_grid, lambda x: 1 / np.cos(x) ** 2, [-1.2, -0.5, 0.0, 0.3, 1.5, 4.0]),
}


def _assert_within_ulps(actual: np.ndarray, expected: np.ndarray, x: np.ndarray, ulps) -> None:
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan, err_msg="NaN where numpy has NaN, and only there")
    infinite = np.isinf(expected)
    np.testing.assert_array_equal(actual[infinite], expected[infinite], err_msg="the infinities")
    zero = expected == 0
    np.testing.assert_array_equal(np.signbit(actual[zero]), np.signbit(expected[zero]), err_msg="signed zeros")
    finite = ~nan & ~infinite
    error = np.abs(actual[finite] - expected[finite]) / np.spacing(np.abs(expected[finite]))
    bound = np.broadcast_to(ulps, x.shape)[finite]
    worst = np.argmax(error - bound)
    assert error[worst] <= bound[worst], (
        f"{error[worst]} ulps at x = {x[finite][worst]!r}: {actual[finite][worst]!r}, numpy {expected[finite][worst]!r}"
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_values_on_onnxruntime_match_numpy(name):
    reference, extra, _, _ = CASES[name]
    x = np.concatenate([_common(), extra()])
    with onnxnn.set_executor("onnxruntime"):
        actual = getattr(onnxnn, name)(onnxnn.tensor(x, dtype=onnxnn.float64)).numpy()
    with np.errstate(all="ignore"):
        expected = reference(x)
    ulps = np.where(np.abs(x) >= FAR_TAN, FAR_TAN_ULPS, ULPS) if name == "tan" else ULPS
    _assert_within_ulps(actual, expected, x, ulps)


# The rules evaluate a few rounded operations on x, or on the op's output (tan's 1 + tan^2), and
# 1 - x^2 at |x| = 0.9 magnifies a rounding by 4.3: 50 eps bounds them with room.
GRADIENT_RTOL = 50 * np.finfo(np.float64).eps


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_gradients_on_onnxruntime_match_the_derivative(name):
    _, _, derivative, points = CASES[name]
    x = onnxnn.tensor(np.array(points), dtype=onnxnn.float64, requires_grad=True)
    with onnxnn.set_executor("onnxruntime"):
        getattr(onnxnn, name)(x).sum().backward()
        gradient = x.grad.numpy()
    np.testing.assert_allclose(gradient, derivative(np.array(points)), rtol=GRADIENT_RTOL, atol=0)


class _AllTen(nn.Module):
    def forward(self, x, y):  # x in [-1, 1], y >= 1
        unit_interval = [onnxnn.tan, onnxnn.atan, onnxnn.asin, onnxnn.acos, onnxnn.sinh, onnxnn.cosh]
        unit_interval += [onnxnn.asinh, onnxnn.atanh, onnxnn.erf]
        return tuple(function(x) for function in unit_interval) + (onnxnn.acosh(y),)


NAMES = ["tan", "atan", "asin", "acos", "sinh", "cosh", "asinh", "atanh", "erf", "acosh"]
OP_TYPES = {"Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Atanh", "Erf", "Acosh"}
X = np.array([-1.0, -0.75, -0.0, 0.0, 1e-300, 0.3, 0.999, 1.0])
Y = np.array([1.0, 1.0 + 1e-12, 1.5, 2.0, 1e3, 1e10, 1e200, np.inf])


def _export(dtype) -> onnx.ModelProto:
    x, y = onnxnn.tensor(X, dtype=dtype), onnxnn.tensor(Y, dtype=dtype)
    return to_onnx(_AllTen().eval(), (x, y), input_names=["x", "y"], output_names=NAMES)


def test_exported_float64_model_runs_in_plain_onnxruntime():
    proto = _export(onnxnn.float64)
    onnx.checker.check_model(proto, full_check=True)
    assert not OP_TYPES & {node.op_type for node in proto.graph.node}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    results = session.run(None, {"x": X, "y": Y})
    for name, actual in zip(NAMES, results):
        argument = Y if name == "acosh" else X
        _assert_within_ulps(actual, CASES[name][0](argument), argument, ULPS)


def test_float32_keeps_onnxruntimes_own_kernels():
    proto = _export(onnxnn.float32)
    assert OP_TYPES <= {node.op_type for node in proto.graph.node}
