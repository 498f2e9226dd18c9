"""Normalization layers over features: LayerNorm, GroupNorm, RMSNorm, LocalResponseNorm, CrossMapLRN2d."""

from __future__ import annotations

import numbers

import numpy as np

from ...runtime.creation import empty
from ...runtime.internal import constant_tensor
from ...runtime.ops.normalization import _channel_window_sum
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["LocalResponseNorm", "CrossMapLRN2d", "LayerNorm", "GroupNorm", "RMSNorm"]


def _as_shape(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LocalResponseNorm(Module):
    """Normalizes each element by the energy of its neighbours across channels (AlexNet's LRN).

    ``b_c = a_c / (k + alpha / size * sum_{c'} a_{c'}^2)^beta``, the sum over the ``size`` channels
    around ``c``.

    Args:
        size: the number of neighbouring channels.
        alpha: the multiplicative factor. Default: 1e-4.
        beta: the exponent. Default: 0.75.
        k: the additive factor. Default: 1.

    Example::

        >>> lrn = nn.LocalResponseNorm(2)
        >>> lrn(onnxnn.randn(32, 5, 24, 24)).shape
        onnxnn.Size([32, 5, 24, 24])
    """

    __constants__ = ["size", "alpha", "beta", "k"]

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


class CrossMapLRN2d(LocalResponseNorm):
    """Lua Torch's cross-map LRN on ``(N, C, H, W)``: ``a_c * (k + alpha / size * window sum of a^2)^-beta``.

    The window is PyTorch's: channels ``c - p + 1 .. c + p - 1`` with ``p = (size - 1) // 2 + 1``
    (so an even ``size`` sums ``size - 1`` channels), plus channel 0 for every ``c >= p``: PyTorch's
    sliding update starts removing channels at ``c = p + 1``, with channel 1, so channel 0 is never
    removed. This is reproduced so that ported models compute the same values.

    Args:
        size, alpha, beta, k: as :class:`LocalResponseNorm` (``k`` defaults to 1).
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1) -> None:
        super().__init__(size, alpha, beta, k)

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        squares = input * input
        half = int((self.size - 1) / 2 + 1) - 1
        energy = _channel_window_sum(squares, half, half)
        channels = input.shape[1]
        if channels > half + 1:
            # Channel 0 stays in the running sums of channels p.. (see the class docstring), whose
            # symmetric windows start after it.
            first = squares.narrow(1, 0, 1)
            stuck = [0.0] * (half + 1) + [1.0] * (channels - half - 1)
            mask = constant_tensor(
                np.asarray(stuck, dtype=input.dtype.numpy_dtype).reshape(1, channels, 1, 1), input.dtype, input.device
            )
            energy = energy + first * mask
        return input * (energy * (self.alpha / self.size) + self.k).pow(-self.beta)


def _affine_parameters(module: Module, affine: bool, shape, bias: bool, factory_kwargs: dict) -> None:
    """Registers a norm's ``weight`` and ``bias`` of ``shape`` (None where ``affine``/``bias`` say so)."""
    module.register_parameter("weight", Parameter(empty(shape, **factory_kwargs)) if affine else None)
    module.register_parameter("bias", Parameter(empty(shape, **factory_kwargs)) if affine and bias else None)


def _reset_affine(module: Module) -> None:
    """Ones for a norm's ``weight``, zeros for its ``bias``, where it has them."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LayerNorm(Module):
    """Normalizes over the trailing ``normalized_shape`` dims: ``(x - E[x]) / sqrt(Var[x] + eps) * weight + bias``.

    The variance is the biased one. Recorded as one ONNX ``LayerNormalization`` node.

    Args:
        normalized_shape: the trailing shape to normalize over (int or sequence).
        eps: added to the variance. Default: 1e-5.
        elementwise_affine: whether to learn ``weight`` (ones) and ``bias`` (zeros) of shape
            ``normalized_shape``. Default: ``True``.
        bias: whether to learn ``bias`` (only with ``elementwise_affine``). Default: ``True``.
        device, dtype: where and in which dtype to create the parameters.

    Example::

        >>> m = nn.LayerNorm(10)
        >>> m(onnxnn.randn(20, 5, 10)).shape
        onnxnn.Size([20, 5, 10])
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.elementwise_affine, self.normalized_shape, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Sets ``weight`` to ones and ``bias`` to zeros."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None
        )


class GroupNorm(Module):
    """Normalizes ``num_groups`` groups of channels of ``(N, C, *)`` separately, then applies a per-channel affine map.

    Args:
        num_groups: the number of groups; must divide ``num_channels``.
        num_channels: C.
        eps: added to the variance. Default: 1e-5.
        affine: whether to learn per-channel ``weight`` (ones) and ``bias`` (zeros). Default: ``True``.
        bias: whether to learn ``bias`` (only with ``affine``). Default: ``True``.
        device, dtype: where and in which dtype to create the parameters.

    Example::

        >>> m = nn.GroupNorm(3, 6)
        >>> m(onnxnn.randn(20, 6, 10, 10)).shape
        onnxnn.Size([20, 6, 10, 10])
    """

    __constants__ = ["num_groups", "num_channels", "eps", "affine"]

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, self.affine, num_channels, bias, factory_kwargs)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Sets ``weight`` to ones and ``bias`` to zeros."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None
        )


class RMSNorm(Module):
    """Divides by the root mean square over the trailing ``normalized_shape`` dims, then scales by ``weight``.

    Args:
        normalized_shape: the trailing shape to normalize over (int or sequence).
        eps: added to the mean square; ``None`` uses the input dtype's machine epsilon. Default: ``None``.
        elementwise_affine: whether to learn ``weight`` (ones). Default: ``True``.
        device, dtype: where and in which dtype to create the weight.

    Example::

        >>> m = nn.RMSNorm([2, 3])
        >>> m(onnxnn.randn(2, 2, 3)).shape
        onnxnn.Size([2, 2, 3])
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]

    def __init__(
        self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Sets ``weight`` to ones."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)
