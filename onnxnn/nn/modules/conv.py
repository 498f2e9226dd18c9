"""Convolution layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d and their Lazy* forms.

Parameters, defaults, initialization, ``extra_repr`` and error messages follow PyTorch's
``torch.nn.modules.conv``; the computation is :mod:`onnxnn.nn.functional`'s ``conv*d`` (one ONNX
``Conv``/``ConvTranspose`` node), preceded for ``padding_mode`` reflect/replicate/circular by the
explicit padding of ``F.pad_for_conv``.
"""

from __future__ import annotations

from typing import Any, Callable

from collections.abc import Iterable

from ...runtime.creation import empty
from ...runtime.tensor import Tensor
from .. import functional as F
from ..functional._conv import pad_for_conv
from ..parameter import Parameter
from .lazy import LazyModuleMixin, UninitializedParameter
from .linear import reset_weight_and_bias
from .module import Module

__all__ = [
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyConvTranspose1d",
    "LazyConvTranspose2d",
    "LazyConvTranspose3d",
]


def _ntuple(value, n: int) -> tuple:
    """PyTorch's ``_single``/``_pair``/``_triple``: an iterable as a tuple, anything else repeated ``n`` times."""
    if isinstance(value, Iterable) and not isinstance(value, str):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """Parameters, their initialization and the repr shared by the convolution layers."""

    __constants__ = [
        "stride",
        "padding",
        "dilation",
        "groups",
        "padding_mode",
        "output_padding",
        "in_channels",
        "out_channels",
        "kernel_size",
    ]
    _spatial_rank = 0
    weight: Parameter
    bias: Parameter | None

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: tuple,
        stride: tuple,
        padding,
        dilation: tuple,
        transposed: bool,
        output_padding: tuple,
        groups: int,
        bias: bool,
        padding_mode: str,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(
                f"padding_mode must be one of {valid_padding_modes}, but got padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's order: last axis first, (begin, end) per axis. 'same' puts the odd element at the end.
        # A list for string padding, else a tuple, as PyTorch keeps it (a list a module keeps is
        # compared at every replayed call: _forward_replay).
        self._reversed_padding_repeated_twice: list[int] | tuple[int, ...]
        if isinstance(padding, str):
            same = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    same[2 * i] = total // 2
                    same[2 * i + 1] = total - total // 2
            self._reversed_padding_repeated_twice = same
        else:
            self._reversed_padding_repeated_twice = tuple(p for p in reversed(padding) for _ in range(2))
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        self.weight = Parameter(empty(shape, **factory_kwargs))
        if bias:
            self.bias = Parameter(empty(out_channels, **factory_kwargs))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draws the weight from kaiming_uniform_(a=sqrt(5)) and the bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        # fan_in is weight.size(1) * prod(kernel_size): in_channels / groups for Conv,
        # out_channels / groups for ConvTranspose (PyTorch's choice, kept for identical statistics).
        reset_weight_and_bias(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


class _Conv(_ConvNd):
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        n = self._spatial_rank
        super().__init__(
            in_channels,
            out_channels,
            _ntuple(kernel_size, n),
            _ntuple(stride, n),
            padding if isinstance(padding, str) else _ntuple(padding, n),
            _ntuple(dilation, n),
            False,
            _ntuple(0, n),
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        function = type(self)._function
        if self.padding_mode != "zeros":
            n = self._spatial_rank
            if not n + 1 <= input.dim() <= n + 2:
                # PyTorch pads with F.pad before the convolution sees the input: F.pad's error.
                raise NotImplementedError(
                    f"Padding size {2 * n} is not supported for {input.dim()}D input tensor.\n"
                    "Supported combinations for non-constant padding:\n"
                    "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                    "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                    "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)"
                )
            padded = pad_for_conv(input, list(self._reversed_padding_repeated_twice), self.padding_mode)
            return function(padded, weight, bias, self.stride, (0,) * self._spatial_rank, self.dilation, self.groups)
        return function(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """Applies a 1D convolution (cross-correlation) over an input of shape ``(N, C_in, L)`` or ``(C_in, L)``.

    Args:
        in_channels: channels of the input.
        out_channels: channels produced by the convolution.
        kernel_size: size of the convolving kernel (int or tuple).
        stride: stride of the convolution. Default: 1.
        padding: padding added to both sides (int, tuple, ``'valid'`` or ``'same'``). Default: 0.
        dilation: spacing between kernel elements. Default: 1.
        groups: number of blocked connections from input to output channels. Default: 1.
        bias: whether to add a learnable bias. Default: ``True``.
        padding_mode: ``'zeros'``, ``'reflect'``, ``'replicate'`` or ``'circular'``. Default: ``'zeros'``.
        device, dtype: where and in which dtype to create the parameters.

    Attributes:
        weight: ``(out_channels, in_channels / groups, kernel_size)``, from U(-sqrt(k), sqrt(k)),
            ``k = groups / (in_channels * kernel_size)``.
        bias: ``(out_channels)``, from the same distribution.

    Example::

        >>> m = nn.Conv1d(16, 33, 3, stride=2)
        >>> m(onnxnn.randn(20, 16, 50)).shape
        onnxnn.Size([20, 33, 24])
    """

    _spatial_rank = 1
    _function = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """Applies a 2D convolution over an input of shape ``(N, C_in, H, W)`` or ``(C_in, H, W)``.

    Arguments as :class:`Conv1d`, with an int or a pair for ``kernel_size``, ``stride``, ``padding``
    and ``dilation``. ``weight`` has shape ``(out_channels, in_channels / groups, kH, kW)``.

    Example::

        >>> m = nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1))
        >>> m(onnxnn.randn(20, 16, 50, 100)).shape
        onnxnn.Size([20, 33, 26, 100])
    """

    _spatial_rank = 2
    _function = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """Applies a 3D convolution over an input of shape ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``.

    Arguments as :class:`Conv1d`, with an int or a triple for ``kernel_size``, ``stride``,
    ``padding`` and ``dilation``. ``weight`` has shape ``(out_channels, in_channels / groups, kD, kH, kW)``.

    Example::

        >>> m = nn.Conv3d(4, 6, 3, stride=2)
        >>> m(onnxnn.randn(2, 4, 9, 9, 9)).shape
        onnxnn.Size([2, 6, 4, 4, 4])
    """

    _spatial_rank = 3
    _function = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    # The functional form each subclass sets (staticmethod(F....)); None only on this base.
    _function: Callable[..., Any] = None  # type: ignore[assignment]

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        n = self._spatial_rank
        super().__init__(
            in_channels,
            out_channels,
            _ntuple(kernel_size, n),
            _ntuple(stride, n),
            _ntuple(padding, n),
            _ntuple(dilation, n),
            True,
            _ntuple(output_padding, n),
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )

    def _output_padding(
        self, input: Tensor, output_size, stride, padding, kernel_size, num_spatial_dims: int, dilation=None
    ) -> list[int]:
        """The ``output_padding`` that makes the output ``output_size`` (PyTorch's checks and message)."""
        if output_size is None:
            return list(_ntuple(self.output_padding, 1))
        has_batch_dim = input.dim() == num_spatial_dims + 2
        num_non_spatial_dims = 2 if has_batch_dim else 1
        output_size = list(output_size)
        if len(output_size) == num_non_spatial_dims + num_spatial_dims:
            output_size = output_size[num_non_spatial_dims:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(
                f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must have "
                f"{num_spatial_dims} or {num_non_spatial_dims + num_spatial_dims} elements (got "
                f"{len(output_size)})"
            )
        min_sizes, max_sizes = [], []
        for d in range(num_spatial_dims):
            size = (
                (input.shape[d + num_non_spatial_dims] - 1) * stride[d]
                - 2 * padding[d]
                + (dilation[d] if dilation is not None else 1) * (kernel_size[d] - 1)
                + 1
            )
            min_sizes.append(size)
            max_sizes.append(size + stride[d] - 1)
        for size, low, high in zip(output_size, min_sizes, max_sizes):
            if size < low or size > high:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range from {min_sizes} "
                    f"to {max_sizes} (for an input of {input.shape[num_non_spatial_dims:]})"
                )
        return [int(size) - low for size, low in zip(output_size, min_sizes)]

    def forward(self, input: Tensor, output_size: list[int] | None = None) -> Tensor:
        if not isinstance(self.padding, tuple):
            raise ValueError(f"{self.__class__.__name__}: padding must be a tuple of ints, got {self.padding!r}")
        n = self._spatial_rank
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, n, self.dilation
        )
        return type(self)._function(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class ConvTranspose1d(_ConvTransposeNd):
    """Applies a 1D transposed convolution (the gradient of :class:`Conv1d` w.r.t. its input).

    Args:
        in_channels: channels of the input.
        out_channels: channels produced.
        kernel_size: size of the convolving kernel.
        stride: stride of the convolution. Default: 1.
        padding: ``dilation * (kernel_size - 1) - padding`` zeros are added to both sides of the input.
            Default: 0.
        output_padding: size added to one side of the output. Default: 0.
        groups: number of blocked connections from input to output channels. Default: 1.
        bias: whether to add a learnable bias. Default: ``True``.
        dilation: spacing between kernel elements. Default: 1.
        padding_mode: only ``'zeros'``.

    ``forward(input, output_size=None)`` picks ``output_padding`` so the output has ``output_size``.

    Attributes:
        weight: ``(in_channels, out_channels / groups, kernel_size)``, from U(-sqrt(k), sqrt(k)),
            ``k = groups / (out_channels * kernel_size)``.
        bias: ``(out_channels)``.

    Example::

        >>> m = nn.ConvTranspose1d(4, 2, 3, stride=2)
        >>> m(onnxnn.randn(1, 4, 5)).shape
        onnxnn.Size([1, 2, 11])
    """

    _spatial_rank = 1
    _function = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """Applies a 2D transposed convolution; arguments as :class:`ConvTranspose1d` with ints or pairs.

    Example::

        >>> upsample = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1)
        >>> x = onnxnn.randn(1, 16, 6, 6)
        >>> upsample(x, output_size=[1, 16, 12, 12]).shape
        onnxnn.Size([1, 16, 12, 12])
    """

    _spatial_rank = 2
    _function = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """Applies a 3D transposed convolution; arguments as :class:`ConvTranspose1d` with ints or triples."""

    _spatial_rank = 3
    _function = staticmethod(F.conv_transpose3d)


# ---------------------------------------------------------------- lazy forms


class _LazyConvXdMixin(LazyModuleMixin):
    """``in_channels`` from the first input; the weight (and bias) materialize then, and are initialized."""

    # What the convolution class this mixin is combined with defines (see _ConvNd).
    _spatial_rank: int
    in_channels: int
    out_channels: int
    groups: int
    transposed: bool
    kernel_size: tuple
    weight: Parameter  # an UninitializedParameter until initialize_parameters
    bias: Parameter | None

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()  # type: ignore[misc]  # defined by the convolution class after this mixin

    def _get_in_channels(self, input: Tensor) -> int:
        no_batch = self._spatial_rank + 1
        if input.dim() not in (no_batch, no_batch + 1):
            raise RuntimeError(
                f"Expected {no_batch}D (unbatched) or {no_batch + 1}D (batch mode) input to "
                f"{self.__class__.__name__}, but got input of size: {input.shape}"
            )
        return input.shape[1] if input.dim() == no_batch + 1 else input.shape[0]

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            self.in_channels = self._get_in_channels(input)
            if self.in_channels % self.groups != 0:
                raise ValueError("in_channels must be divisible by groups")
            if self.transposed:
                self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))  # type: ignore[attr-defined]  # still uninitialized
            else:
                self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))  # type: ignore[attr-defined]  # still uninitialized
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))  # type: ignore[attr-defined]  # still uninitialized
            self.reset_parameters()


class _LazyConv(_LazyConvXdMixin):
    def __init__(
        self,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        # bias=False here: the bias is an UninitializedParameter too, registered below.
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, **factory_kwargs)
        self.weight = UninitializedParameter(**factory_kwargs)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(**factory_kwargs)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(
        self,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__(
            0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode, **factory_kwargs
        )
        self.weight = UninitializedParameter(**factory_kwargs)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(**factory_kwargs)


class LazyConv1d(_LazyConv, Conv1d):
    """A :class:`Conv1d` whose ``in_channels`` is taken from the first input (``input.size(1)``).

    Arguments as :class:`Conv1d` without ``in_channels``; the module becomes a :class:`Conv1d` after
    its first forward (or after loading a state_dict and one forward).
    """

    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A :class:`Conv2d` whose ``in_channels`` is taken from the first input; see :class:`LazyConv1d`.

    Example::

        >>> layer = nn.LazyConv2d(8, 3)
        >>> layer(onnxnn.randn(1, 5, 10, 10)).shape
        onnxnn.Size([1, 8, 8, 8])
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A :class:`Conv3d` whose ``in_channels`` is taken from the first input; see :class:`LazyConv1d`."""

    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A :class:`ConvTranspose1d` whose ``in_channels`` is taken from the first input; see :class:`LazyConv1d`."""

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A :class:`ConvTranspose2d` whose ``in_channels`` is taken from the first input; see :class:`LazyConv1d`."""

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A :class:`ConvTranspose3d` whose ``in_channels`` is taken from the first input; see :class:`LazyConv1d`."""

    cls_to_become = ConvTranspose3d
