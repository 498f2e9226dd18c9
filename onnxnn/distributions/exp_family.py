"""``ExponentialFamily``: distributions of the form ``p(x; theta) = exp(<t(x), theta> - F(theta) + k(x))``,
as ``torch.distributions.ExponentialFamily``.

A subclass gives its natural parameters ``theta`` (``_natural_params``), the log normalizer ``F``
(``_log_normalizer``) and the expected carrier measure ``E[k(x)]`` (``_mean_carrier_measure``); the
entropy (and the KL divergence between two members of one family, in ``kl.py``) then follow from
``F`` and its gradient, which onnxnn's autograd computes as a graph (Nielsen and Nock, *Entropies
and cross-entropies of exponential families*).
"""

from __future__ import annotations

from ..autograd import grad
from ..runtime.tensor import Tensor
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """Base class of exponential-family distributions.

    Example::

        >>> d = onnxnn.distributions.Exponential(onnxnn.tensor([2.0]))
        >>> ExponentialFamily.entropy(d)  # 1 - log(2), from the log normalizer
        tensor([0.3069])
    """

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        """The natural parameters ``theta``."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):  # unannotated: subclasses take their parameters by name
        """The log normalizer ``F(theta)``."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> float:
        """The expected carrier measure ``E[k(x)]``."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """``F(theta) - <theta, grad F(theta)> - E[k(x)]``, with ``grad F`` from autograd."""
        carrier = self._mean_carrier_measure  # first: a family without one fails before any work
        params = [param.detach().requires_grad_() for param in self._natural_params]
        log_normalizer = self._log_normalizer(*params)
        gradients = grad(log_normalizer.sum(), params, create_graph=True)
        result = log_normalizer - carrier
        for param, gradient in zip(params, gradients):
            result = result - (param * gradient).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
