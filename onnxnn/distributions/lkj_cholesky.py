"""``LKJCholesky``: the LKJ distribution over lower Cholesky factors of correlation matrices, as
``torch.distributions.LKJCholesky`` (which follows NumPyro's).

Reference: D. Lewandowski, D. Kurowicka and H. Joe, *Generating random correlation matrices based
on vines and extended onion method*, Journal of Multivariate Analysis 100 (2009).
"""

from __future__ import annotations

import math

from ..runtime import ops as _ops
from ..runtime.creation import arange
from ..runtime.grad_mode import no_grad
from ..runtime.random_creation import randn
from ..runtime.tensor import Size, Tensor
from . import constraints
from .beta import Beta
from .distribution import Distribution
from .utils import _finfo, broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """Lower Cholesky factors ``L`` of correlation matrices ``M = L L^T`` with density proportional to
    ``det(M)^(concentration - 1)``; ``concentration = 1`` is uniform over correlation matrices.

    Sampling is the onion method (Sec. 3.2 of the reference), vectorized over the rows and for
    heterogeneous concentrations: row ``i`` is ``sqrt(y_i)`` times a uniform direction in its first
    ``i`` coordinates, ``y_i`` a Beta draw, and the diagonal completes it to unit length. The Beta
    draws are the reference's (and NumPyro's); PyTorch's differ from row 2 on, so its samples do
    not follow its own density for ``dim >= 3``. Not reparameterized (no ``rsample``), as PyTorch's.

    Args:
        dim: the matrices' size; at least 2.
        concentration: the shape parameter (often eta); positive.
        validate_args: whether to validate the arguments.

    Raises:
        ValueError: ``dim`` is below 2.

    Example::

        >>> LKJCholesky(2, 1.0).log_prob(onnxnn.eye(2))  # uniform correlation in [-1, 1]: log(1/2)
        tensor(-0.6931)
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration: Tensor | float = 1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        # Row i >= 1 has squared length y_i ~ Beta(i / 2, beta - (i - 1) / 2) off the diagonal, with
        # beta = eta + (dim - 2) / 2 (the onion method's k = i); offsets 0, 0, 1, ..., dim - 2 give
        # (i - 1) / 2, and row 0 has no entry off the diagonal (its draw meets a zero row).
        # PyTorch's first concentration is offset + 1/2, not (offset + 1) / 2: right for row 1 only,
        # so its rows from 2 on are too correlated (for dim = 3, eta = 1, E r_31^2 is 0.30, not 1/4).
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = arange(dim - 1, dtype=self.concentration.dtype, device=self.concentration.device)
        offset = _ops.cat([offset.new_zeros((1,)), offset])
        # Validated here through concentration; the Beta's parameters are positive wherever it is.
        self._beta = Beta(0.5 * offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset, validate_args=False)
        super().__init__(batch_shape, Size((dim, dim)), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> LKJCholesky:
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(tuple(batch_shape))
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()) -> Tensor:
        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = tuple(self._extended_shape(sample_shape))
            normal = randn(shape, dtype=y.dtype, device=y.device).tril(-1)
            norm = normal.norm(dim=-1, keepdim=True)
            # Row 0 is all zeros (0 / 0): it stays zero; every other row has a nonzero entry.
            has_length = norm > 0
            direction = _ops.where(has_length, normal / _ops.where(has_length, norm, 1.0), 0.0)
            w = y.sqrt() * direction
            # The diagonal completes each row to unit length; clamped as rounding can leave nothing.
            diagonal = (1 - w.pow(2).sum(-1)).clamp(min=float(_finfo(w.dtype).tiny)).sqrt()
            return w + _ops.diag_embed(diagonal)

    def log_prob(self, value: Tensor) -> Tensor:
        # p(M) ~ det(M)^(eta - 1) = prod_i L_ii^(2 (eta - 1)), and the Jacobian from L to M is
        # prod_i L_ii^(dim - i) (i from 1): p(L) ~ prod_i L_ii^(2 eta - 2 + dim - i), rows 2 .. dim.
        if self._validate_args:
            self._validate_sample(value)
        diagonal = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        rows = arange(2, self.dim + 1, dtype=self.concentration.dtype, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - rows
        unnormalized = (order * diagonal.log()).sum(-1)
        # The normalization constant (p. 1999 of the reference), with its pi term
        # dm1 * (dm1 + 1) / 4 * log(pi) split as mvlgamma's dm1 * (dm1 - 1) / 4 plus dm1 / 2.
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalizer = 0.5 * dm1 * math.log(math.pi) + _ops.mvlgamma(alpha - 0.5, dm1) - alpha.lgamma() * dm1
        return unnormalized - normalizer
