"""``MultivariateNormal``: the Gaussian over vectors, as ``torch.distributions.MultivariateNormal``.

Every computation goes through the lower Cholesky factor ``L`` of the covariance
(``Sigma = L L^T``): given directly (``scale_tril``), factored from ``covariance_matrix``, or from
``precision_matrix`` through the factor of its row-and-column reversal (whose inverse transposed
is ``L`` again, lower triangular).
"""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import eye
from ..runtime.ops.linalg_cholesky import cholesky_inverse, linalg_cholesky
from ..runtime.ops.linalg_lu import solve_triangular
from ..runtime.tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(bmat: Tensor, bvec: Tensor) -> Tensor:
    """Matrix-vector products over broadcast batch dimensions."""
    return _ops.matmul(bmat, bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL: Tensor, bx: Tensor) -> Tensor:
    """The squared Mahalanobis distances ``x^T (L L^T)^-1 x = |L^-1 x|^2``, over broadcast batches."""
    solved = solve_triangular(bL, bx.unsqueeze(-1), upper=False).squeeze(-1)
    return solved.pow(2).sum(-1)


def _precision_to_scale_tril(P: Tensor) -> Tensor:
    """The lower Cholesky factor of ``P^-1``, without inverting ``P``.

    With ``J`` the reversal permutation, ``J P J = Lf Lf^T`` gives ``P = U U^T`` for the upper
    triangular ``U = J Lf J``; then ``P^-1 = (U^-1)^T U^-1`` and ``(U^-1)^T`` is lower triangular.
    """
    Lf = linalg_cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    identity = eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return solve_triangular(L_inv, identity, upper=False)


# ``L`` from each matrix a distribution may be given (``CholeskyFactorMatrices._factor_given``).
_SCALE_TRIL_OF = {
    "scale_tril": lambda matrix: matrix,
    "covariance_matrix": linalg_cholesky,
    "precision_matrix": _precision_to_scale_tril,
}


def given_matrix(
    covariance_matrix: Tensor | None, precision_matrix: Tensor | None, scale_tril: Tensor | None
) -> tuple[str, Tensor]:
    """The name and value of the one matrix given (the caller checks that exactly one is)."""
    if scale_tril is not None:
        return "scale_tril", scale_tril
    if covariance_matrix is not None:
        return "covariance_matrix", covariance_matrix
    assert precision_matrix is not None
    return "precision_matrix", precision_matrix


class CholeskyFactorMatrices:
    """``scale_tril``, ``covariance_matrix`` and ``precision_matrix`` of a distribution parametrized by a
    lower Cholesky factor ``L`` (``_unbroadcasted_scale_tril``), expanded to its ``_matrix_shape()``:
    ``L``, ``L L^T`` and ``(L L^T)^-1`` (MultivariateNormal's covariance, Wishart's scale matrix)."""

    _unbroadcasted_scale_tril: Tensor

    def _matrix_shape(self) -> tuple:
        raise NotImplementedError

    def _keep_given(self, name: str, matrix: Tensor, batch_shape: tuple) -> None:
        """Keeps the matrix the distribution was given (``name``: one of the three), expanded to
        ``batch_shape``: the others are derived from ``L`` when read."""
        setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))

    def _factor_given(self, name: str, matrix: Tensor) -> None:
        """Sets ``L`` from the matrix given (unexpanded), once the arguments are validated."""
        self._unbroadcasted_scale_tril = _SCALE_TRIL_OF[name](matrix)

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor ``L``."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """``L L^T``."""
        L = self._unbroadcasted_scale_tril
        return _ops.matmul(L, L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """The inverse of ``L L^T``."""
        return cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())


class MultivariateNormal(CholeskyFactorMatrices, Distribution):
    """The multivariate normal distribution with mean vector ``loc`` and a positive-definite covariance.

    Give exactly one of ``covariance_matrix``, ``precision_matrix`` (its inverse) or ``scale_tril``
    (the lower-triangular ``L`` with positive diagonal such that the covariance is ``L L^T``; the
    cheapest, as every computation uses it). Leading dimensions of ``loc`` and the matrix broadcast
    into the batch shape.

    Args:
        loc: mean vector(s), at least one-dimensional.
        covariance_matrix: positive-definite covariance matrix.
        precision_matrix: positive-definite precision matrix.
        scale_tril: lower-triangular factor of the covariance.
        validate_args: whether to validate the arguments.

    Raises:
        ValueError: ``loc`` is 0-dimensional, not exactly one matrix is given, or a matrix has
            fewer than two dimensions.

    Example::

        >>> m = MultivariateNormal(onnxnn.zeros(2), onnxnn.eye(2))
        >>> m.log_prob(onnxnn.zeros(2))  # -log(2 pi)
        tensor(-1.8379)
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None)
        if given != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        name, matrix = given_matrix(covariance_matrix, precision_matrix, scale_tril)
        if matrix.dim() < 2:
            words = "scale_tril matrix" if name == "scale_tril" else name
            raise ValueError(f"{words} must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = tuple(_ops.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1])))
        self._keep_given(name, matrix, batch_shape)
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        self._factor_given(name, matrix)

    def expand(self, batch_shape, _instance=None) -> MultivariateNormal:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        shape = tuple(self._batch_shape) + tuple(self._event_shape)
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, self.loc.dtype, self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self) -> Tensor:
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return H if len(self._batch_shape) == 0 else H.expand(tuple(self._batch_shape))
