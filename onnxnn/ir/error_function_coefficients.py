"""W. J. Cody's rational Chebyshev approximations of the error function (Math. Comp. 23, 1969; his
SPECFUN routine CALERF), the published coefficients: onnxnn's numpy kernels (kernels/special.py) and
its graph decompositions (runtime/ops/pointwise.py) evaluate the same approximations from this one
table.

- ``SMALL_*``: ``erf(x) = x P(x^2) / Q(x^2)`` for ``|x| <= 0.46875`` (degree 4 / 4, the last numerator
  coefficient leading);
- ``MIDDLE_*``: ``erfc(y) exp(y^2) = P(y) / Q(y)`` for ``0.46875 < y <= 4`` (degree 8 / 8);
- ``LARGE_*``: ``erfc(y) exp(y^2) y = 1/sqrt(pi) + P(1/y^2) / (y^2 Q(1/y^2))`` beyond 4 (degree 5 / 5).
"""

from __future__ import annotations

__all__ = [
    "SMALL_NUMERATOR",
    "SMALL_DENOMINATOR",
    "MIDDLE_NUMERATOR",
    "MIDDLE_DENOMINATOR",
    "LARGE_NUMERATOR",
    "LARGE_DENOMINATOR",
]

SMALL_NUMERATOR = (
    3.16112374387056560e00,
    1.13864154151050156e02,
    3.77485237685302021e02,
    3.20937758913846947e03,
    1.85777706184603153e-1,
)
SMALL_DENOMINATOR = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
MIDDLE_NUMERATOR = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
    2.15311535474403846e-8,
)
MIDDLE_DENOMINATOR = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
LARGE_NUMERATOR = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
    1.63153871373020978e-2,
)
LARGE_DENOMINATOR = (
    2.56852019228982242e00,
    1.87295284992346047e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)
