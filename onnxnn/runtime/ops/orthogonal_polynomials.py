"""The classical orthogonal polynomials of ``torch.special``: Chebyshev (T, U, V, W and their shifted
forms), Hermite (H, He), Laguerre (L) and Legendre (P), evaluated by their three-term recurrences.

Every degree from 0 to the largest ``n`` is built with elementwise ops and each element picks its
own degree with Where, so a tensor ``n`` works elementwise as in PyTorch (its largest value is read
from the data: it is the number of recurrence steps recorded). Negative degrees give 0; a float ``n``
is truncated, as PyTorch's integer conversion does.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ._common import Tensor, promote_operands
from . import elementwise as _e

__all__ = [
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
]


def _operands(input, n) -> tuple[Tensor, Tensor | int]:
    if isinstance(n, Tensor):
        (x, degrees), result = promote_operands([input, n])
        x = x if isinstance(x, Tensor) else Tensor._from_value(x)
        target = result if result.is_floating_point else dtypes.get_default_dtype()
        return x.to(target), degrees.detach()
    x = input if isinstance(input, Tensor) else Tensor._full((), input, dtypes.get_default_dtype())
    return _e._floating(x), int(math.trunc(n))


def _recurrence(first, step):
    """A polynomial family from ``P_1 = first(x)`` and ``P_(k+1) = step(k, x, P_k, P_(k-1))``."""

    def evaluate(input, n) -> Tensor:
        x, degrees = _operands(input, n)
        if isinstance(degrees, int):
            largest = degrees
        else:
            data = np.trunc(np.asarray(degrees._realized_data(), dtype=np.float64))
            largest = int(data.max()) if data.size else -1
        values = [x * 0.0 + 1.0]
        if largest >= 1:
            values.append(first(x))
        for k in range(1, largest):
            values.append(step(k, x, values[k], values[k - 1]))
        if isinstance(degrees, int):
            return values[degrees] if degrees >= 0 else x * 0.0
        if degrees.dtype.is_floating_point:
            degrees = degrees.trunc()
        degrees = degrees.to(dtypes.int64)
        result = x * 0.0  # negative degrees
        for k, value in enumerate(values):
            result = _e.where(degrees == k, value, result)
        return result

    return evaluate


def _chebyshev(first):
    return _recurrence(first, lambda k, x, p, previous: x * 2.0 * p - previous)


def _shifted(function):
    def evaluate(input, n) -> Tensor:
        x, degrees = _operands(input, n)
        return function(x * 2.0 - 1.0, degrees if isinstance(degrees, int) else degrees)

    return evaluate


def _named(function, name: str, doc: str):
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc + "\n\n    ``n`` is an int or a tensor of degrees (elementwise); see the module docstring."
    return function


chebyshev_polynomial_t = _named(
    _chebyshev(lambda x: x), "chebyshev_polynomial_t", "Chebyshev polynomials of the first kind ``T_n(x)``."
)
chebyshev_polynomial_u = _named(
    _chebyshev(lambda x: x * 2.0), "chebyshev_polynomial_u", "Chebyshev polynomials of the second kind ``U_n(x)``."
)
chebyshev_polynomial_v = _named(
    _chebyshev(lambda x: x * 2.0 - 1.0), "chebyshev_polynomial_v", "Chebyshev polynomials of the third kind ``V_n(x)``."
)
chebyshev_polynomial_w = _named(
    _chebyshev(lambda x: x * 2.0 + 1.0),
    "chebyshev_polynomial_w",
    "Chebyshev polynomials of the fourth kind ``W_n(x)``.",
)
shifted_chebyshev_polynomial_t = _named(
    _shifted(chebyshev_polynomial_t), "shifted_chebyshev_polynomial_t", "``T_n(2x - 1)``."
)
shifted_chebyshev_polynomial_u = _named(
    _shifted(chebyshev_polynomial_u), "shifted_chebyshev_polynomial_u", "``U_n(2x - 1)``."
)
shifted_chebyshev_polynomial_v = _named(
    _shifted(chebyshev_polynomial_v), "shifted_chebyshev_polynomial_v", "``V_n(2x - 1)``."
)
shifted_chebyshev_polynomial_w = _named(
    _shifted(chebyshev_polynomial_w), "shifted_chebyshev_polynomial_w", "``W_n(2x - 1)``."
)
hermite_polynomial_h = _named(
    _recurrence(lambda x: x * 2.0, lambda k, x, p, previous: x * 2.0 * p - previous * float(2 * k)),
    "hermite_polynomial_h",
    "Physicists' Hermite polynomials ``H_n(x)``.",
)
hermite_polynomial_he = _named(
    _recurrence(lambda x: x, lambda k, x, p, previous: x * p - previous * float(k)),
    "hermite_polynomial_he",
    "Probabilists' Hermite polynomials ``He_n(x)``.",
)
laguerre_polynomial_l = _named(
    _recurrence(
        lambda x: 1.0 - x, lambda k, x, p, previous: ((float(2 * k + 1) - x) * p - previous * float(k)) / float(k + 1)
    ),
    "laguerre_polynomial_l",
    "Laguerre polynomials ``L_n(x)``.",
)
legendre_polynomial_p = _named(
    _recurrence(lambda x: x, lambda k, x, p, previous: (x * p * float(2 * k + 1) - previous * float(k)) / float(k + 1)),
    "legendre_polynomial_p",
    "Legendre polynomials ``P_n(x)``.",
)
