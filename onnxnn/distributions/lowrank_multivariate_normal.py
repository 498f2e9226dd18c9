"""``LowRankMultivariateNormal``: a Gaussian whose covariance is low rank plus diagonal, as
``torch.distributions.LowRankMultivariateNormal``.

With ``Sigma = W W^T + D`` (``W`` of shape ``n x m``, ``D`` diagonal) nothing of size ``n x n`` is
factored: the Woodbury identity gives ``Sigma^-1 = D^-1 - D^-1 W C^-1 W^T D^-1`` and the matrix
determinant lemma ``log |Sigma| = log |C| + log |D|``, for the ``m x m`` capacitance matrix
``C = I + W^T D^-1 W``, whose Cholesky factor is computed once.
"""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import eye
from ..runtime.ops.linalg_cholesky import linalg_cholesky
from ..runtime.ops.linalg_lu import solve_triangular
from ..runtime.tensor import Size, Tensor
from . import constraints
from .distribution import Distribution
from .multivariate_normal import _batch_mahalanobis, _batch_mv
from .utils import _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _batch_capacitance_tril(W: Tensor, D: Tensor) -> Tensor:
    """The lower Cholesky factor of ``I + W^T D^-1 W``, over broadcast batches."""
    rank = W.shape[-1]
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    K = _ops.matmul(Wt_Dinv, W) + eye(rank, dtype=W.dtype, device=W.device)
    return linalg_cholesky(K)


def _batch_lowrank_logdet(W: Tensor, D: Tensor, capacitance_tril: Tensor) -> Tensor:
    """``log |W W^T + D| = log |C| + log |D|`` (the matrix determinant lemma)."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W: Tensor, D: Tensor, x: Tensor, capacitance_tril: Tensor) -> Tensor:
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity: ``x^T D^-1 x - |L^-1 W^T D^-1 x|^2``, ``L L^T = C``."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal distribution with covariance ``cov_factor @ cov_factor.T + diag(cov_diag)``.

    Cheaper than :class:`MultivariateNormal` when the rank ``m = cov_factor.size(-1)`` is much
    smaller than the dimension ``n``: scores and entropies cost ``O(n m^2)``.

    Args:
        loc: mean, of shape ``batch_shape + (n,)``.
        cov_factor: the low-rank factor ``W``, of shape ``batch_shape + (n, m)``.
        cov_diag: the diagonal part ``D``, of shape ``batch_shape + (n,)``; positive.
        validate_args: whether to validate the arguments.

    Raises:
        ValueError: ``loc`` is 0-dimensional, ``cov_factor`` has fewer than two dimensions or the
            wrong number of rows, ``cov_diag`` the wrong length, or the batch shapes do not broadcast.

    Example::

        >>> m = LowRankMultivariateNormal(onnxnn.zeros(2), onnxnn.tensor([[1.0], [0.0]]), onnxnn.ones(2))
        >>> m.variance
        tensor([2., 1.])
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc: Tensor,
        cov_factor: Tensor,
        cov_diag: Tensor,
        validate_args: bool | None = None,
    ) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = Size(tuple(loc.shape)[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            shape = tuple(
                _ops.broadcast_shapes(tuple(loc.shape) + (1,), tuple(cov_factor.shape), tuple(cov_diag.shape) + (1,))
            )
        except (RuntimeError, ValueError) as error:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, cov_diag {cov_diag.shape}"
            ) from error
        self.cov_factor = cov_factor.expand(shape)
        self.loc = loc.expand(shape[:-1])
        self.cov_diag = cov_diag.expand(shape[:-1])
        batch_shape = Size(tuple(self.loc.shape)[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LowRankMultivariateNormal:
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(tuple(batch_shape))
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        super(LowRankMultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
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

    @lazy_property
    def variance(self) -> Tensor:  # type: ignore[override]
        """The diagonal of the covariance: the squared rows of ``W`` summed, plus ``D``."""
        variance = self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag
        return variance.expand(tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance: ``D^(1/2) chol(I + D^(-1/2) W W^T D^(-1/2))``."""
        n = self._event_shape[0]
        diag_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled_factor = self._unbroadcasted_cov_factor / diag_sqrt
        K = _ops.matmul(scaled_factor, scaled_factor.mT) + eye(
            n, dtype=scaled_factor.dtype, device=scaled_factor.device
        )
        return (diag_sqrt * linalg_cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """The covariance ``W W^T + D``."""
        W = self._unbroadcasted_cov_factor
        covariance = _ops.matmul(W, W.mT) + _ops.diag_embed(self._unbroadcasted_cov_diag)
        return covariance.expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """The inverse covariance, by the Woodbury identity: ``D^-1 - A^T A`` with ``A = L^-1 W^T D^-1``."""
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        precision = _ops.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - _ops.matmul(A.mT, A)
        return precision.expand(self._matrix_shape())

    def rsample(self, sample_shape=Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        W_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(W_shape, self.loc.dtype, self.loc.device)
        eps_D = _standard_normal(shape, self.loc.dtype, self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W) + self._unbroadcasted_cov_diag.sqrt() * eps_D

    def _log_det(self) -> Tensor:
        return _batch_lowrank_logdet(
            self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril
        )

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        M = _batch_lowrank_mahalanobis(
            self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, value - self.loc, self._capacitance_tril
        )
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self) -> Tensor:
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return H if len(self._batch_shape) == 0 else H.expand(tuple(self._batch_shape))
