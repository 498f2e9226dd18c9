"""``torch.special``: special functions under PyTorch's ``torch.special`` names.

Each is recorded as standard ONNX arithmetic (``runtime/ops/special_functions.py`` says how and how
accurately), so it exports, runs on both executors and differentiates like any other op.

Example::

    >>> import onnxnn
    >>> onnxnn.special.gammaln(onnxnn.tensor([4.0]))
    tensor([1.7918])
"""

from __future__ import annotations

import math as _math

from .ir import dtypes as _dtypes
from .runtime import ops as _ops
from .runtime.ops import (  # noqa: F401  (torch.special's names for functions of the top level)
    digamma,
    erf,
    erfc,
    erfcx,
    erfinv,
    exp2,
    expm1,
    i0,
    i0e,
    i1,
    i1e,
    log1p,
    logit,
    logsumexp,
    polygamma,
    round,
    sinc,
    spherical_bessel_j0,
    xlogy,
    zeta,
    chebyshev_polynomial_t,
    chebyshev_polynomial_u,
    chebyshev_polynomial_v,
    chebyshev_polynomial_w,
    shifted_chebyshev_polynomial_t,
    shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v,
    shifted_chebyshev_polynomial_w,
    hermite_polynomial_h,
    hermite_polynomial_he,
    laguerre_polynomial_l,
    legendre_polynomial_p,
    bessel_j0,
    bessel_j1,
    modified_bessel_k0,
    modified_bessel_k1,
    scaled_modified_bessel_k0,
    scaled_modified_bessel_k1,
)
from .runtime.ops import lgamma as gammaln  # noqa: F401
from .runtime.ops import mvlgamma as multigammaln  # noqa: F401
from .runtime.ops import igamma as gammainc  # noqa: F401
from .runtime.ops import igammac as gammaincc  # noqa: F401
from .runtime.ops.opmath import float_operands as _float_operands
from .runtime.ops.derivative_formulas import derivative_formula as _derivative_formula
from .runtime.ops.derivative_formulas import with_derivative_formula as _with_derivative_formula
from .runtime.ops.derivative_formulas import x_log_gradients as _x_log_gradients
from .runtime.tensor import Tensor

__all__ = [
    "digamma",
    "psi",
    "polygamma",
    "gammaln",
    "multigammaln",
    "gammainc",
    "gammaincc",
    "erf",
    "erfc",
    "erfinv",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "exp2",
    "expm1",
    "log1p",
    "logit",
    "logsumexp",
    "round",
    "sinc",
    "xlogy",
    "expit",
    "log_softmax",
    "softmax",
    "ndtr",
    "ndtri",
    "log_ndtr",
    "entr",
    "xlog1py",
    "erfcx",
    "spherical_bessel_j0",
    "zeta",
    "chebyshev_polynomial_t",
    "chebyshev_polynomial_u",
    "chebyshev_polynomial_v",
    "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t",
    "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
    "bessel_j0",
    "bessel_j1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
]

psi = digamma
modified_bessel_i0 = i0
modified_bessel_i1 = i1


def expit(input: Tensor) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return _ops.sigmoid(input)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    return _ops.softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    return _ops.log_softmax(input if dtype is None else input.to(dtype), dim)


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2``, relatively accurate in the lower tail.

    Written as ``h = erfc(|x| / sqrt 2) / 2 = erfcx(|x| / sqrt 2) exp(-x^2 / 2) / 2``: ``h`` below 0 and
    ``1 - h`` above. ``(1 + erf)`` would round the lower tail away (``ndtr(-5)`` 14 % off in float32,
    ``ndtr(-9)`` 0 in float64); erfcx computes in float64 (no Erf op, which onnxruntime lacks in
    float64) and the result is rounded once.
    """
    x = input if input.dtype.is_floating_point else input.float()
    below = x < 0
    # |x| through where, not abs: abs' is 0 at 0, which would make ndtr'(0) 0.
    t = _ops.where(below, x.neg(), x).to(_dtypes.float64) * 0.5**0.5
    half_tail = _ops.erfcx(t) * (t * t).neg().exp() * 0.5
    return _ops.where(below, half_tail, 1 - half_tail).to(x.dtype)


# Below this probability (and above 1 minus it) ndtri leaves ``sqrt(2) erfinv(2p - 1)``: 2p - 1
# rounds away the digits of a small p (to -1 below 1e-17 in float64, giving -inf for ndtri(1e-20)).
_NDTRI_TAIL = 0.02


def ndtri(input: Tensor) -> Tensor:
    """The inverse of ``ndtr``: the ``x`` with ``ndtr(x) = p``; -inf at 0, inf at 1, NaN outside [0, 1].

    ``sqrt(2) erfinv(2p - 1)`` in the middle. In the tails, Newton's method on
    ``log_ndtr(x) = log(q)`` (q = p, or 1 - p, which is exact there), from Abramowitz and Stegun's
    26.2.23 start (error below 4.5e-4; three steps reach float64's rounding). Computed in float64
    and rounded once.
    """
    p = input if input.dtype.is_floating_point else input.float()
    out = p.dtype
    p = p.to(_dtypes.float64)
    middle = _ops.erfinv(p * 2 - 1) * 2**0.5
    upper = p > 1 - _NDTRI_TAIL
    tail = (p < _NDTRI_TAIL) | upper
    q = _ops.where(upper, 1 - p, p)
    q = _ops.where(tail & (q > 0), q, _NDTRI_TAIL)  # a safe value where the tail is not used
    log_q = q.log()
    t = (log_q * -2).sqrt()
    x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) / (1 + t * (1.432788 + t * (0.189269 + t * 0.001308))))
    for _ in range(3):
        log_cdf = log_ndtr(x)
        x = x - (log_cdf - log_q) * (log_cdf + x * x * 0.5).exp() * (2 * _math.pi) ** 0.5
    result = _ops.where(tail, _ops.where(upper, -x, x), middle)
    result = _ops.where(p == 0, float("-inf"), _ops.where(p == 1, float("inf"), result))
    return _ops.where((p < 0) | (p > 1) | p.isnan(), float("nan"), result).to(out)


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``, accurate in both tails (as PyTorch's).

    With ``t = x / sqrt(2)`` and ``erfcx(t) = exp(t^2) erfc(t)``: ``log(erfcx(-t) / 2) - t^2`` below
    x = -1, where ndtr(x) underflows (log_ndtr(-50) is -1254.8), and ``log1p(-erfcx(t) exp(-t^2) / 2)``
    above, where ndtr(x) rounds to 1 (log_ndtr(10) is -7.6e-24, not 0).
    """
    x = input if input.dtype.is_floating_point else input.float()
    low = x < -1
    t_low = _ops.where(low, x, -1.0) * 0.5**0.5
    t_high = _ops.where(low, -1.0, x) * 0.5**0.5
    lower_tail = (_ops.erfcx(-t_low) * 0.5).log() - t_low * t_low
    upper = _ops.log1p(_ops.erfcx(t_high) * (-t_high * t_high).exp() * -0.5)
    return _ops.where(low, lower_tail, upper)


def entr(input: Tensor) -> Tensor:
    """``-x log x`` for ``x > 0``, 0 at 0, ``-inf`` for ``x < 0``, NaN for NaN."""
    x = input if input.dtype.is_floating_point else input.float()
    safe = _ops.where(x > 0, x, 1.0)
    result = _ops.where(x > 0, -safe * safe.log(), _ops.where(x == 0, 0.0, float("-inf")))
    return _ops.where(x.isnan(), x, result)


def xlog1py(input, other) -> Tensor:
    """``x log1p(y)``, 0 where ``x == 0`` (unless y is NaN); either operand may be a Python number.

    The gradient is PyTorch's formula: ``d/dx = log1p(y)``, also at ``x == 0`` (+inf at ``y = inf``)
    except 0 there where ``y <= -1``, and ``d/dy = x / (1 + y)``, NaN at ``(0, -1)``.
    """
    # Straight to the float dtype, as xlogy: each operand converts from its own dtype (a 0-d int64
    # 300 beside a uint8 tensor stays 300 rather than wrapping in the integer common dtype).
    operands, _ = _float_operands([input, other])
    x, y = (operand.detach() for operand in operands)
    # A literal +0 where x == 0 (0 * log1p(y) is -0, NaN or -0 * log1p(y) otherwise); y == y: not NaN.
    value = _ops.where((x == 0) & (y == y), 0.0, _ops.mul(x, _ops.log1p(y)))
    return _with_derivative_formula("Xlog1py", value, tuple(operands))


@_derivative_formula("Xlog1py", "SpecialXlog1PyBackward0")
def _xlog1py_gradient(ctx, g):
    return _x_log_gradients(ctx, g, xlog1py, 1)
