"""``MixtureSameFamily``: a mixture of components of one family, as ``torch.distributions.MixtureSameFamily``."""

from __future__ import annotations

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size, Tensor
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .utils import _as_size

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    """A (batch of) mixture(s) of ``k`` components, all of one distribution type.

    A draw picks a component with ``mixture_distribution`` (a :class:`Categorical` over ``k``
    categories) and draws from it; the components are ``component_distribution``, whose rightmost
    batch dimension (of size ``k``) indexes them. The density is ``sum_i w_i p_i(x)``.

    Args:
        mixture_distribution: the :class:`Categorical` choosing the component; its batch shape is
            ``()`` or broadcasts with ``component_distribution.batch_shape[:-1]``.
        component_distribution: the components, of batch shape ``batch_shape + (k,)``.
        validate_args: whether to validate the arguments.

    Raises:
        ValueError: ``mixture_distribution`` is not a Categorical, ``component_distribution`` not a
            Distribution, their batch shapes do not broadcast, or their numbers of components differ.

    Example::

        >>> from onnxnn.distributions import Categorical, Normal
        >>> gmm = MixtureSameFamily(Categorical(onnxnn.ones(2)), Normal(onnxnn.tensor([-1.0, 1.0]), 1.0))
        >>> gmm.mean
        tensor(0.)
    """

    arg_constraints: dict[str, constraints.Constraint] = {}
    has_rsample = False

    def __init__(
        self,
        mixture_distribution: Categorical,
        component_distribution: Distribution,
        validate_args: bool | None = None,
    ) -> None:
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of torch.distributions.Distribution")
        mixture_batch = mixture_distribution.batch_shape
        component_batch = Size(tuple(component_distribution.batch_shape)[:-1])
        for size1, size2 in zip(reversed(tuple(mixture_batch)), reversed(tuple(component_batch))):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(
                    f"`mixture_distribution.batch_shape` ({mixture_batch}) is not "
                    f"compatible with `component_distribution.batch_shape`({component_batch})"
                )
        mixture_components = mixture_distribution.logits.shape[-1]
        component_components = component_distribution.batch_shape[-1] if component_distribution.batch_shape else None
        if mixture_components != component_components:
            raise ValueError(
                f"`mixture_distribution component` ({mixture_components}) does not equal "
                f"`component_distribution.batch_shape[-1]` ({component_components})"
            )
        self._num_component = mixture_components
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=component_batch, event_shape=event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None) -> MixtureSameFamily:
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        batch_shape = Size(tuple(batch_shape))
        new._component_distribution = self._component_distribution.expand(tuple(batch_shape) + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        event_shape = new._component_distribution.event_shape
        super(MixtureSameFamily, new).__init__(batch_shape=batch_shape, event_shape=event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self) -> Categorical:
        """The distribution choosing the component."""
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        """The components, indexed by the rightmost batch dimension."""
        return self._component_distribution

    def _weights(self) -> Tensor:
        """The mixture probabilities, with a dimension of 1 for each event dimension (to broadcast)."""
        probs = self.mixture_distribution.probs
        return probs.reshape(tuple(probs.shape) + (1,) * self._event_ndims)

    @property
    def mean(self) -> Tensor:
        return (self._weights() * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self) -> Tensor:
        # The law of total variance: the mean of the variances plus the variance of the means.
        weights = self._weights()
        component_mean = self.component_distribution.mean
        mean_of_variances = (weights * self.component_distribution.variance).sum(-1 - self._event_ndims)
        variance_of_means = (weights * (component_mean - self._pad(self.mean)).pow(2)).sum(-1 - self._event_ndims)
        return mean_of_variances + variance_of_means

    def cdf(self, x: Tensor) -> Tensor:
        cdf_x = self.component_distribution.cdf(self._pad(x))
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def log_prob(self, x: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self.component_distribution.log_prob(self._pad(x))
        log_mix_prob = self.mixture_distribution.logits.log_softmax(-1)
        return (log_prob_x + log_mix_prob).logsumexp(-1)

    def sample(self, sample_shape=Size()) -> Tensor:
        sample_shape = _as_size(sample_shape)
        with no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)
            mixture = self.mixture_distribution
            # One choice per batch element, also where the mixture weights are shared by the batch.
            if tuple(mixture.batch_shape) != tuple(self.batch_shape):
                mixture = mixture.expand(self.batch_shape)
            choices = mixture.sample(sample_shape)
            component_samples = self.component_distribution.sample(sample_shape)
            index = choices.reshape(tuple(choices.shape) + (1,) * (self._event_ndims + 1))
            index = index.expand(tuple(choices.shape) + (1,) + tuple(self.event_shape))
            return component_samples.gather(gather_dim, index).squeeze(gather_dim)

    def _pad(self, x: Tensor) -> Tensor:
        """``x`` with a dimension of 1 where the components' index goes."""
        return x.unsqueeze(-1 - self._event_ndims)

    def __repr__(self) -> str:
        return f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})"
