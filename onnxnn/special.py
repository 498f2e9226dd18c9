"""``torch.special``: special functions under PyTorch's ``torch.special`` names.

Each is recorded as standard ONNX arithmetic (``runtime/ops/special_functions.py`` says how and how
accurately), so it exports, runs on both executors and differentiates like any other op.

Example::

    >>> import onnxnn
    >>> onnxnn.special.gammaln(onnxnn.tensor([4.0]))
    tensor([1.7918])
"""

from __future__ import annotations

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
    """The standard normal CDF ``(1 + erf(x / sqrt 2)) / 2``."""
    return (_ops.erf(_ops.mul(input, 0.5**0.5)) + 1) * 0.5


def ndtri(input: Tensor) -> Tensor:
    """The inverse of ``ndtr``: ``sqrt(2) erfinv(2p - 1)``."""
    return _ops.erfinv(_ops.sub(_ops.mul(input, 2), 1)) * 2**0.5


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``."""
    return _ops.log(ndtr(input))


def entr(input: Tensor) -> Tensor:
    """``-x log x`` for ``x > 0``, 0 at 0, ``-inf`` for ``x < 0``."""
    x = input if input.dtype.is_floating_point else input.float()
    safe = _ops.where(x > 0, x, 1.0)
    return _ops.where(x > 0, -safe * safe.log(), _ops.where(x == 0, 0.0, float("-inf")))


def xlog1py(input, other) -> Tensor:
    """``x log1p(y)``, 0 where ``x == 0`` (unless y is NaN)."""
    product = _ops.mul(input, _ops.log1p(other))
    zero = _ops.eq(input, 0) & ~_ops.isnan(other if isinstance(other, Tensor) else _ops.mul(input, 0) + other)
    return _ops.where(zero, 0.0, product)
