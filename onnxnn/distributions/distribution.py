"""``Distribution``: the base class of probability distributions, as ``torch.distributions.Distribution``.

A distribution has a ``batch_shape`` (independent parameter sets) and an ``event_shape`` (the
shape of one draw); ``sample(sample_shape)`` returns ``sample_shape + batch_shape + event_shape``
values and ``log_prob`` scores them. Parameters are onnxnn tensors, so everything is recorded
like any other computation: scores and reparameterized samples are differentiable, and random
draws come from onnxnn's generator (``manual_seed`` repeats them).

Validation (on by default, as PyTorch's under ``__debug__``) checks parameters against
``arg_constraints`` on construction and values against ``support`` in ``log_prob``/``cdf``; it reads
the data, so it computes the pending values involved, as PyTorch synchronizes with the device.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Size, Tensor
from . import constraints
from .utils import _as_size, lazy_property

__all__ = ["Distribution"]


class Distribution:
    """Abstract base class for probability distributions.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of a single sample (without batching).
        validate_args: whether to validate arguments (default: the class-wide setting, see
            :meth:`set_default_validate_args`).

    Example::

        >>> d = onnxnn.distributions.Normal(onnxnn.zeros(2), 1.0)
        >>> d.batch_shape, d.event_shape
        (onnxnn.Size([2]), onnxnn.Size([]))
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turns argument validation on or off for every distribution that does not say otherwise.

        On by default unless Python runs optimized (``python -O``), like ``assert``.

        Args:
            value: whether to validate.

        Raises:
            ValueError: ``value`` is not a bool.
        """
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(
        self,
        batch_shape: Size | tuple = Size(),
        event_shape: Size | tuple = Size(),
        validate_args: bool | None = None,
    ) -> None:
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            self._check_arguments()
        super().__init__()

    def _check_arguments(self) -> None:
        try:
            arg_constraints = self.arg_constraints
        except NotImplementedError:
            arg_constraints = {}
            warnings.warn(
                f"{self.__class__} does not define `arg_constraints`. "
                "Please set `arg_constraints = {}` or initialize the distribution "
                "with `validate_args=False` to turn off validation.",
                stacklevel=3,
            )
        for param, constraint in arg_constraints.items():
            if constraints.is_dependent(constraint):
                continue  # cannot be checked
            if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                continue  # the other parameterization (logits for probs): not computed, not checked
            value = getattr(self, param)
            if not bool(constraint.check(value).all()):
                raise ValueError(
                    f"Expected parameter {param} "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {self!r} "
                    f"to satisfy the constraint {constraint!r}, "
                    f"but found invalid values:\n{value}"
                )

    def expand(self, batch_shape: Size | tuple, _instance: Any = None) -> Distribution:
        """A new distribution whose parameters are expanded (not copied) to ``batch_shape``.

        Arguments are not validated again.

        Args:
            batch_shape: the new batch shape.
            _instance: an instance a subclass made, to fill in.
        """
        raise NotImplementedError

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """The constraint each tensor parameter must satisfy, by name."""
        raise NotImplementedError

    @property
    def support(self) -> Any:
        """The :class:`~onnxnn.distributions.constraints.Constraint` of the values this distribution takes."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    def sample(self, sample_shape: Size | tuple = Size()) -> Tensor:
        """Draws ``sample_shape + batch_shape + event_shape`` values, outside autograd."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Size | tuple = Size()) -> Tensor:
        """Draws reparameterized values: differentiable with respect to the parameters."""
        raise NotImplementedError

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the probability density (or mass) function at ``value``."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse cumulative distribution function at ``value``."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution, along a new dimension 0.

        The result has shape ``(cardinality,) + batch_shape + event_shape`` (with ``expand=False``,
        the batch dimensions are ones).

        Args:
            expand: whether to expand the values over the batch dimensions.
        """
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, of shape ``batch_shape``."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """``exp(entropy)``, of shape ``batch_shape``."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape: Size | tuple = Size()) -> Size:
        """``sample_shape + batch_shape + event_shape``: the shape of a sample."""
        return Size(tuple(_as_size(sample_shape)) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value: Tensor) -> None:
        """Checks that ``value`` broadcasts with the distribution's shapes and lies in its support.

        Raises:
            ValueError: ``value`` is not a tensor, its shape does not fit, or a value lies outside
                the support.
        """
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = value.dim() - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(
                f"The right-most size of value must match event_shape: {value.size()} vs {self._event_shape}."
            )
        actual_shape = tuple(value.shape)
        expected_shape = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: "
                    f"{Size(actual_shape)} vs {Size(expected_shape)}."
                )
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(
                f"{self.__class__} does not define `support` to enable "
                "sample validation. Please initialize the distribution with "
                "`validate_args=False` to turn off validation.",
                stacklevel=3,
            )
            return
        if not bool(support.check(value).all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) "
                f"of the distribution {self!r}, "
                f"but found invalid values:\n{value}"
            )

    def _get_checked_instance(self, cls: type, _instance: Any = None) -> Any:
        """The instance ``expand`` fills: ``_instance``, or a bare one of this class."""
        if _instance is None and getattr(type(self), "__init__") is not getattr(cls, "__init__"):
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a custom __init__ method "
                "must also define a custom .expand() method."
            )
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        names = [name for name in self.arg_constraints if name in self.__dict__]
        shown = []
        for name in names:
            value = self.__dict__[name]
            shown.append(f"{name}: {value if value.numel() == 1 else value.size()}")
        return f"{self.__class__.__name__}({', '.join(shown)})"
