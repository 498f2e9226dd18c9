"""Pooling layers: MaxPool, AvgPool, AdaptiveAvgPool, AdaptiveMaxPool, LPPool, MaxUnpool, FractionalMaxPool.

Constructor arguments, stored attributes and ``extra_repr`` follow PyTorch's
``torch.nn.modules.pooling`` (1-d layers store tuples where PyTorch does, the others what was
passed); ``forward`` is the matching function of :mod:`onnxnn.nn.functional`. None of them has
parameters; only FractionalMaxPool may hold a buffer (its fixed ``_random_samples``).
"""

from __future__ import annotations

from typing import Any, Callable

from ...runtime.tensor import Tensor
from .. import functional as F
from .module import Module

__all__ = [
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
]


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


# ---------------------------------------------------------------- max pooling


class _MaxPoolNd(Module):
    __constants__ = ["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"]
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False, ceil_mode: bool = False
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor):
        return type(self)._function(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            "kernel_size={kernel_size}, stride={stride}, padding={padding}, dilation={dilation}, "
            "ceil_mode={ceil_mode}".format(**self.__dict__)
        )


class MaxPool1d(_MaxPoolNd):
    """1D max pooling over ``(N, C, L)`` or ``(C, L)``.

    Args:
        kernel_size: the window size.
        stride: the window step. Default: ``kernel_size``.
        padding: implicit negative-infinity padding on both sides, at most half the kernel. Default: 0.
        dilation: spacing between window elements. Default: 1.
        return_indices: also return the argmax positions (for :class:`MaxUnpool1d`). Default: ``False``.
        ceil_mode: round the output size up instead of down. Default: ``False``.

    Example::

        >>> nn.MaxPool1d(3, stride=2)(onnxnn.randn(20, 16, 50)).shape
        onnxnn.Size([20, 16, 24])
    """

    _function = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """2D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``; arguments as :class:`MaxPool1d` (ints or pairs).

    Example::

        >>> nn.MaxPool2d((3, 2), stride=(2, 1))(onnxnn.randn(20, 16, 50, 32)).shape
        onnxnn.Size([20, 16, 24, 31])
    """

    _function = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """3D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments as :class:`MaxPool1d`."""

    _function = staticmethod(F.max_pool3d)


# ---------------------------------------------------------------- average pooling


class _AvgPoolNd(Module):
    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """1D average pooling over ``(N, C, L)`` or ``(C, L)``.

    Args:
        kernel_size: the window size.
        stride: the window step. Default: ``kernel_size``.
        padding: implicit zero padding on both sides, at most half the kernel. Default: 0.
        ceil_mode: round the output size up instead of down. Default: ``False``.
        count_include_pad: count the zero padding in the divisor. Default: ``True``.

    Example::

        >>> nn.AvgPool1d(3, stride=2)(onnxnn.tensor([[[1.0, 2, 3, 4, 5, 6, 7]]]))
        tensor([[[2., 4., 6.]]])
    """

    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True
    ) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class _AvgPoolWithDivisor(_AvgPoolNd):
    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"]
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class AvgPool2d(_AvgPoolWithDivisor):
    """2D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``.

    Arguments as :class:`AvgPool1d` (ints or pairs), plus ``divisor_override``: divide every window
    sum by this number instead of the window's size. Default: None.

    Example::

        >>> nn.AvgPool2d((3, 2), stride=(2, 1))(onnxnn.randn(20, 16, 50, 32)).shape
        onnxnn.Size([20, 16, 24, 31])
    """

    _function = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPoolWithDivisor):
    """3D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; arguments as :class:`AvgPool2d`."""

    _function = staticmethod(F.avg_pool3d)


# ---------------------------------------------------------------- adaptive pooling


class _AdaptiveAvgPoolNd(Module):
    __constants__ = ["output_size"]
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """1D average pooling of ``(N, C, L)`` or ``(C, L)`` to length ``output_size``, with PyTorch's windows
    ``[floor(i * L / out), ceil((i + 1) * L / out))``.

    Example::

        >>> nn.AdaptiveAvgPool1d(5)(onnxnn.randn(1, 64, 8)).shape
        onnxnn.Size([1, 64, 5])
    """

    _function = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """2D adaptive average pooling to ``output_size`` (an int, or a pair whose None entries keep the input's size).

    Example::

        >>> nn.AdaptiveAvgPool2d((5, None))(onnxnn.randn(1, 64, 10, 9)).shape
        onnxnn.Size([1, 64, 5, 9])
    """

    _function = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """3D adaptive average pooling to ``output_size``; see :class:`AdaptiveAvgPool2d`."""

    _function = staticmethod(F.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    __constants__ = ["output_size", "return_indices"]
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor):
        return type(self)._function(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """1D max pooling of ``(N, C, L)`` or ``(C, L)`` to length ``output_size`` with PyTorch's adaptive windows.

    Args:
        output_size: the target length.
        return_indices: also return the argmax positions (for :class:`MaxUnpool1d`). Default: ``False``.
    """

    _function = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """2D adaptive max pooling to ``output_size``; see :class:`AdaptiveMaxPool1d` and :class:`AdaptiveAvgPool2d`.

    Example::

        >>> nn.AdaptiveMaxPool2d(7)(onnxnn.randn(1, 64, 10, 9)).shape
        onnxnn.Size([1, 64, 7, 7])
    """

    _function = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """3D adaptive max pooling to ``output_size``; see :class:`AdaptiveMaxPool2d`."""

    _function = staticmethod(F.adaptive_max_pool3d)


# ---------------------------------------------------------------- power-average pooling


class _LPPoolNd(Module):
    __constants__ = ["norm_type", "kernel_size", "stride", "ceil_mode"]
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._function(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return "norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, ceil_mode={ceil_mode}".format(
            **self.__dict__
        )


class LPPool1d(_LPPoolNd):
    """1D power-average pooling: ``(sum over the window of x ** p) ** (1 / p)``.

    Args:
        norm_type: the power ``p`` (1 gives sum pooling, infinity max pooling).
        kernel_size: the window size.
        stride: the window step. Default: ``kernel_size``.
        ceil_mode: round the output size up instead of down. Default: ``False``.

    Example::

        >>> nn.LPPool1d(2, 3, stride=2)(onnxnn.randn(20, 16, 50)).shape
        onnxnn.Size([20, 16, 24])
    """

    _function = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """2D power-average pooling; arguments as :class:`LPPool1d` (ints or pairs)."""

    _function = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """3D power-average pooling; arguments as :class:`LPPool1d` (ints or triples)."""

    _function = staticmethod(F.lp_pool3d)


# ---------------------------------------------------------------- max unpooling


class _MaxUnpoolNd(Module):
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]
    _rank = 0

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._rank)
        self.stride = _ntuple(stride if (stride is not None) else kernel_size, self._rank)
        self.padding = _ntuple(padding, self._rank)

    def forward(self, input: Tensor, indices: Tensor, output_size: list[int] | None = None) -> Tensor:
        return type(self)._function(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool1d`: each value goes to its index, every other position is zero.

    Args:
        kernel_size, stride, padding: those of the max pooling (stride defaults to ``kernel_size``).

    ``forward(input, indices, output_size=None)``: ``output_size`` resolves the ambiguity of pooled sizes.

    Example::

        >>> pool, unpool = nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2)
        >>> output, indices = pool(onnxnn.tensor([[[1.0, 2, 3, 4, 5, 6, 7, 8]]]))
        >>> unpool(output, indices)
        tensor([[[0., 2., 0., 4., 0., 6., 0., 8.]]])
    """

    _rank = 1
    _function = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool2d`; see :class:`MaxUnpool1d` (ints or pairs)."""

    _rank = 2
    _function = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool3d`; see :class:`MaxUnpool1d` (ints or triples)."""

    _rank = 3
    _function = staticmethod(F.max_unpool3d)


# ---------------------------------------------------------------- fractional max pooling


class _FractionalMaxPoolNd(Module):
    _rank = 0
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(
        self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False, _random_samples=None
    ) -> None:
        super().__init__()
        n = self._rank
        self.kernel_size = _ntuple(kernel_size, n)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _ntuple(output_size, n) if output_size is not None else None
        self.output_ratio = _ntuple(output_ratio, n) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{type(self).__name__} requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < ratio < 1 for ratio in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        return type(self)._function(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """2D fractional max pooling: ``kH x kW`` windows at pseudo-random steps reaching a target size.

    Args:
        kernel_size: the window size (int or pair).
        output_size: the target output size ``(oH, oW)``, or
        output_ratio: the output size as a fraction of the input size, in (0, 1).
        return_indices: also return the argmax positions (for :class:`MaxUnpool2d`). Default: ``False``.
        _random_samples: fixed ``(N, C, 2)`` samples (a buffer); new ones are drawn per call otherwise.

    Example::

        >>> nn.FractionalMaxPool2d(3, output_ratio=(0.5, 0.5))(onnxnn.randn(20, 16, 50, 32)).shape
        onnxnn.Size([20, 16, 25, 16])
    """

    _rank = 2
    _function = staticmethod(F.fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3D fractional max pooling; see :class:`FractionalMaxPool2d` (triples, samples ``(N, C, 3)``)."""

    _rank = 3
    _function = staticmethod(F.fractional_max_pool3d)
