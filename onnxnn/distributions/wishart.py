"""``Wishart``: distributions over positive-definite matrices, as ``torch.distributions.Wishart``.

As :class:`MultivariateNormal`, everything goes through the lower Cholesky factor ``L`` of the
scale matrix (``Sigma = L L^T``). Samples use the Bartlett decomposition (Sawyer, *Wishart
Distributions and Inverse-Wishart Sampling*, 2007): ``L A (L A)^T`` with ``A`` lower triangular,
``A_ii = sqrt(chi2(df - i))`` and standard normals below the diagonal; the chi-squared draws carry
the implicit reparameterization gradient in ``df`` (see ``_standard_gamma.py``).
"""

from __future__ import annotations

import math
import warnings

from ..runtime import ops as _ops
from ..runtime.creation import arange, tensor
from ..runtime.ops.linalg_cholesky import cholesky_solve
from ..runtime.ops.linalg_lu import slogdet
from ..runtime.random_creation import randn
from ..runtime.tensor import Size, Tensor
from . import constraints
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import CholeskyFactorMatrices, given_matrix
from .utils import _finfo

__all__ = ["Wishart"]

_LOG_2 = math.log(2)
_MAX_TRY_CORRECTION = 10  # PyTorch's default number of redraws of singular samples


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function ``sum_j psi(x - j / 2)``, ``j = 0 .. p - 1``, for ``x > (p - 1) / 2``."""
    if not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    halves = arange(p, dtype=x.dtype, device=x.device) / 2
    return (x.unsqueeze(-1) - halves).digamma().sum(-1)


class Wishart(CholeskyFactorMatrices, ExponentialFamily):
    """The Wishart distribution of ``df`` degrees of freedom and a positive-definite scale matrix
    ``Sigma``: the distribution of ``X^T X`` for ``df`` rows ``X_i ~ N(0, Sigma)`` (any real
    ``df > p - 1`` for ``p x p`` matrices).

    Give exactly one of ``covariance_matrix`` (``Sigma``), ``precision_matrix`` (its inverse) or
    ``scale_tril`` (its lower Cholesky factor: the cheapest, as every computation uses it).

    Args:
        df: degrees of freedom; greater than ``p - 1``.
        covariance_matrix: positive-definite scale matrix.
        precision_matrix: positive-definite inverse of the scale matrix.
        scale_tril: lower-triangular factor of the scale matrix, with a positive diagonal.
        validate_args: whether to validate the arguments.

    Raises:
        AssertionError: not exactly one matrix is given (PyTorch's type here).
        ValueError: the matrix has fewer than two dimensions, or ``df <= p - 1`` (always checked).

    Warns:
        UserWarning: ``df < p``, where singular samples are likely.

    Example::

        >>> m = Wishart(onnxnn.tensor(3.0), covariance_matrix=onnxnn.eye(2))
        >>> m.mean  # df * Sigma
        tensor([[3., 0.],
                [0., 3.]])
    """

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:  # type: ignore[override]
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(
        self,
        df: Tensor | float,
        covariance_matrix: Tensor | None = None,
        precision_matrix: Tensor | None = None,
        scale_tril: Tensor | None = None,
        validate_args: bool | None = None,
    ) -> None:
        given = (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None)
        if given != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        name, param = given_matrix(covariance_matrix, precision_matrix, scale_tril)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, Tensor):
            batch_shape = tuple(_ops.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            df_tensor = df
        else:
            batch_shape = tuple(param.shape[:-2])
            df_tensor = tensor(df, dtype=param.dtype, device=param.device)
        # Expanded to the batch shape in both cases (PyTorch keeps a number's 0-d tensor, which
        # `mean` and `variance` then cannot view as a batch of matrices).
        self.df = df_tensor.expand(batch_shape)
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        if bool(self.df.le(p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")

        self._keep_given(name, param, batch_shape)

        if bool(self.df.lt(p).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

        self._factor_given(name, param)
        self._dist_chi2 = self._bartlett_chi2(batch_shape)

    def _bartlett_chi2(self, batch_shape: tuple) -> Chi2:
        """The chi-squared distributions of the Bartlett factor's squared diagonal: ``df - i``, ``i = 0 .. p - 1``."""
        L = self._unbroadcasted_scale_tril
        steps = arange(self._event_shape[-1], dtype=L.dtype, device=L.device)
        # df - i > p - 1 - i >= 0: df was checked, so the Chi2 need not read it again.
        return Chi2(self.df.unsqueeze(-1) - steps.expand(tuple(batch_shape) + (-1,)), validate_args=False)

    def expand(self, batch_shape, _instance=None) -> Wishart:
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(tuple(batch_shape))
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        new._dist_chi2 = new._bartlett_chi2(tuple(batch_shape))
        return new

    def _matrix_shape(self) -> tuple:
        return tuple(self._batch_shape) + tuple(self._event_shape)

    def _df_matrix(self) -> Tensor:
        """``df`` with two unit dimensions, to scale a batch of matrices."""
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self) -> Tensor:
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self._event_shape[-1] - 1
        # No mode (NaN) for df <= p + 1, as PyTorch's.
        factor = _ops.where(factor <= 0, float("nan"), factor)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        V = self.covariance_matrix
        diagonal = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (V.pow(2) + diagonal.unsqueeze(-1) * diagonal.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape: Size) -> Tensor:
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        diagonal = chi.clamp(min=float(_finfo(chi.dtype).eps))
        below = randn(tuple(sample_shape) + self._matrix_shape(), dtype=chi.dtype, device=chi.device).tril(-1)
        factor = _ops.matmul(self._unbroadcasted_scale_tril, below + _ops.diag_embed(diagonal))
        return _ops.matmul(factor, factor.mT)

    def _is_singular(self, sample: Tensor) -> Tensor:
        return self.support.check(sample).logical_not()

    def rsample(self, sample_shape=Size(), max_try_correction: int | None = None) -> Tensor:
        """Reparameterized samples by the Bartlett decomposition.

        Rounding can make a sample singular (likely for ``df < p``): such samples are drawn again,
        up to ``max_try_correction`` times (default 10), with a warning; one still singular is
        returned as it is (its ``log_prob`` may be ``-inf``). PyTorch's check here is inverted (it
        warns and redraws every regular sample); this redraws the singular ones, as documented.

        Args:
            sample_shape: the leading shape of the samples.
            max_try_correction: how many times to redraw singular samples.
        """
        if max_try_correction is None:
            max_try_correction = _MAX_TRY_CORRECTION
        sample_shape = Size(tuple(sample_shape))
        sample = self._bartlett_sampling(sample_shape)
        is_singular = self._is_singular(sample)
        if bool(is_singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                fresh = self._bartlett_sampling(sample_shape)
                sample = _ops.where(is_singular.unsqueeze(-1).unsqueeze(-1), fresh, sample)
                is_singular = self._is_singular(sample)
                if not bool(is_singular.any()):
                    break
        return sample

    def _log_det_scale_half(self) -> Tensor:
        """``log det(Sigma) / 2 = sum log L_ii``."""
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        trace = cholesky_solve(value, self._unbroadcasted_scale_tril).diagonal(dim1=-2, dim2=-1).sum(-1)
        return (
            -nu * (p * _LOG_2 / 2 + self._log_det_scale_half())
            - _ops.mvlgamma(nu / 2, p)
            + (nu - p - 1) / 2 * slogdet(value).logabsdet
            - trace / 2
        )

    def entropy(self) -> Tensor:
        nu = self.df
        p = self._event_shape[-1]
        return (
            (p + 1) * (p * _LOG_2 / 2 + self._log_det_scale_half())
            + _ops.mvlgamma(nu / 2, p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
            + nu * p / 2
        )

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x).logabsdet + _LOG_2 * p) + _ops.mvlgamma(y + (p + 1) / 2, p)
