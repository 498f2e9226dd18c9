"""Fake quantization: the round trip float -> integer grid -> float, for quantization-aware training.

``fake_quantize_per_tensor_affine`` records exactly a QuantizeLinear -> DequantizeLinear pair, so a
model trained with it exports as the QDQ graph onnxruntime runs in int8. Rounding has no useful
derivative, so the backward is the straight-through estimator PyTorch uses: the gradient passes
unchanged where the rounded level ``+ zero_point`` is inside ``[quant_min, quant_max]`` and is zero
where the value was clamped. ``FakeQuantize`` is the module that learns the scale and zero point from
an observer while training.

Arithmetic, against PyTorch's kernels:

- float32, float16 and bfloat16 inputs are quantized in float32 and the result cast back, as
  PyTorch does (its kernels compute in float for half inputs).
- float32 and half levels are ``round(x / scale)`` (QuantizeLinear's definition, kept so that the
  exported QDQ graph means what onnxruntime's int8 kernels compute). PyTorch rounds
  ``x * (1 / scale)``: the two differ by one level, value and gradient mask, where ``x / scale``
  lies within a float32 rounding of a half-integer tie.
- float64 inputs are computed in float64 with PyTorch's formula, ``round(x * float64(float32(1 /
  scale)))``, ties included; the per-channel output is ``(level - zero_point) * scale`` in float64,
  the per-tensor one in float32 (both as PyTorch). They record arithmetic, not a QDQ pair (ONNX's
  QuantizeLinear takes no float64).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..autograd import Function
from ..ir import dtypes
from ..nn.modules.module import Module
from ..runtime.internal import constant_tensor
from ..runtime.ops import where
from ..runtime.tensor import Tensor, apply_op
from ._dtypes import per_channel_affine, per_channel_symmetric, quantized_dtype
from .observer import MovingAverageMinMaxObserver, MovingAveragePerChannelMinMaxObserver

__all__ = [
    "fake_quantize_per_tensor_affine",
    "fake_quantize_per_channel_affine",
    "FakeQuantize",
    "enable_fake_quant",
    "disable_fake_quant",
    "enable_observer",
    "disable_observer",
    "default_fake_quant",
    "default_weight_fake_quant",
    "default_per_channel_weight_fake_quant",
]

# What QuantizeLinear stores a [quant_min, quant_max] grid in: the narrowest type holding it.
_STORAGE = ((dtypes.uint8, 0, 255), (dtypes.int8, -128, 127), (dtypes.uint16, 0, 65535), (dtypes.int16, -32768, 32767))


def _check_range(quant_min: int, quant_max: int) -> None:
    if quant_min > quant_max:  # PyTorch's check and message; quant_min == quant_max is a one-level grid
        raise RuntimeError("`quant_min` should be less than or equal to `quant_max`.")


def _storage_for(quant_min: int, quant_max: int) -> dtypes.dtype:
    for storage, low, high in _STORAGE:
        if low <= quant_min and quant_max <= high:
            return storage
    raise ValueError(
        f"the quantization range [{quant_min}, {quant_max}] fits no type QuantizeLinear stores (8 or 16 bits)"
    )


def _as_parameter(value, dtype: dtypes.dtype, name: str) -> Tensor:
    """A scale or zero point (Python number, array or Tensor) as a Tensor of ``dtype``."""
    if isinstance(value, Tensor):
        return value.detach().to(dtype)
    if isinstance(value, (bool, str)) or value is None:
        raise TypeError(f"fake_quantize: {name} must be a number or a Tensor, got {type(value).__name__}")
    return constant_tensor(np.asarray(value, dtype=dtype.numpy_dtype))


def _along(parameter: Tensor, rank: int, axis: int | None) -> Tensor:
    """``parameter`` shaped to broadcast against a tensor of ``rank`` (per tensor: a scalar)."""
    if axis is None:
        return parameter.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return parameter.reshape(shape)


class _FakeQuantizeFunction(Function):
    """QuantizeLinear -> DequantizeLinear forward, straight-through backward masked by the clamp."""

    @staticmethod
    def forward(ctx, input, scale, zero_point, quant_min, quant_max, axis):
        rank = input.dim()
        if input.dtype == dtypes.float64:
            return _FakeQuantizeFunction._float64(ctx, input, scale, zero_point, quant_min, quant_max, axis)
        # Half inputs are quantized in float32 and cast back, as PyTorch's kernels do.
        storage = _storage_for(quant_min, quant_max)
        scale = _as_parameter(scale, dtypes.float32, "scale")
        point = _as_parameter(zero_point, storage, "zero_point")
        if axis is not None:
            scale, point = scale.reshape(-1), point.reshape(-1)
        else:
            scale, point = scale.reshape(()), point.reshape(())
        x = input.to(dtypes.float32)
        low, high = next((lo, hi) for dtype, lo, hi in _STORAGE if dtype is storage)
        if quant_min > low or quant_max < high:
            # A grid narrower than its storage type (reduce_range, symmetric -127..127): clip the input
            # to the grid's float image first, as QuantizeLinear saturates only to the type's range.
            scale_along = _along(scale, rank, axis)
            point_along = _along(point, rank, axis).to(dtypes.float32)
            x = x.maximum((quant_min - point_along) * scale_along)
            x = x.minimum((quant_max - point_along) * scale_along)
        attrs = {} if axis is None else {"axis": axis}
        quantized = apply_op("QuantizeLinear", (x, scale, point), attrs)
        output = apply_op("DequantizeLinear", (quantized, scale, point), attrs).to(input.dtype)
        ctx.save_for_backward(input)
        ctx.grid = (_along(scale, rank, axis), _along(point, rank, axis), quant_min, quant_max)
        return output

    @staticmethod
    def _float64(ctx, input, scale, zero_point, quant_min, quant_max, axis):
        """PyTorch's double arithmetic: ``level = round(x * float64(float32(1 / scale))) + zero_point``."""
        rank = input.dim()
        scale = _along(_as_parameter(scale, dtypes.float32, "scale").reshape(-1), rank, axis)
        point = _along(_as_parameter(zero_point, dtypes.int32, "zero_point").reshape(-1), rank, axis)
        point = point.to(dtypes.float64)
        level = (input * (1.0 / scale).to(dtypes.float64)).round() + point
        steps = level.clamp(quant_min, quant_max) - point
        if axis is None:  # PyTorch's per-tensor kernel multiplies in float32, its per-channel one in float64
            output = (steps.to(dtypes.float32) * scale).to(dtypes.float64)
        else:
            output = steps * scale.to(dtypes.float64)
        ctx.save_for_backward((level >= quant_min) & (level <= quant_max))
        ctx.grid = None
        return output

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.grid is None:  # float64: the forward kept its mask
            (inside,) = ctx.saved_tensors
        else:
            (input,) = ctx.saved_tensors
            scale, point, quant_min, quant_max = ctx.grid
            # The integer the forward rounded to, before saturation: in range means "not clamped".
            level = (input.to(dtypes.float32) / scale).round() + point.to(dtypes.float32)
            inside = (level >= quant_min) & (level <= quant_max)
        return grad_output * inside.to(grad_output.dtype), None, None, None, None, None


def _check_input(input: Tensor, name: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise TypeError(f"{name}: input must be a floating point tensor, got {input.dtype}")


def _check_zero_point(zero_point, quant_min: int, quant_max: int) -> None:
    if isinstance(zero_point, (int, np.integer)) and not quant_min <= int(zero_point) <= quant_max:
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")


def fake_quantize_per_tensor_affine(
    input: Tensor, scale: float | Tensor, zero_point: int | Tensor, quant_min: int, quant_max: int
) -> Tensor:
    """Rounds ``input`` to the grid ``scale * (q - zero_point)``, ``q`` an integer in ``[quant_min, quant_max]``.

    ``output = (clamp(round(input / scale) + zero_point, quant_min, quant_max) - zero_point) * scale``,
    rounding half to even, recorded as one QuantizeLinear -> DequantizeLinear pair. The gradient is
    the straight-through estimator: ``grad_output`` where the value was not clamped, zero where it was.
    ``scale`` and ``zero_point`` take no gradient.

    Args:
        input: a floating point tensor.
        scale: the grid step (a float or a one-element tensor).
        zero_point: the integer that represents 0.0 (an int or a one-element tensor).
        quant_min, quant_max: the integer range, inside 8 or 16 bits.

    Returns:
        A tensor of ``input``'s shape and dtype.

    Example::

        >>> x = onnxnn.tensor([-1.0, 0.26, 0.4, 3.0])
        >>> fake_quantize_per_tensor_affine(x, 0.1, 0, -5, 5)
        tensor([-0.5000,  0.3000,  0.4000,  0.5000])
    """
    _check_input(input, "fake_quantize_per_tensor_affine")
    _check_range(quant_min, quant_max)
    _check_zero_point(zero_point, quant_min, quant_max)
    return _FakeQuantizeFunction.apply(input, scale, zero_point, int(quant_min), int(quant_max), None)


def fake_quantize_per_channel_affine(
    input: Tensor, scale: Tensor, zero_point: Tensor, axis: int, quant_min: int, quant_max: int
) -> Tensor:
    """:func:`fake_quantize_per_tensor_affine` with one scale and zero point per slice along ``axis``.

    Args:
        input: a floating point tensor.
        scale: a 1-D tensor of ``input.shape[axis]`` grid steps.
        zero_point: a 1-D tensor of as many integers.
        axis: the channel dimension.
        quant_min, quant_max: the integer range, inside 8 or 16 bits.

    Returns:
        A tensor of ``input``'s shape and dtype.

    Example::

        >>> w = onnxnn.randn(4, 3)
        >>> scale, zero_point = onnxnn.full((4,), 0.1), onnxnn.zeros(4, dtype=onnxnn.int32)
        >>> fake_quantize_per_channel_affine(w, scale, zero_point, 0, -128, 127)
    """
    _check_input(input, "fake_quantize_per_channel_affine")
    _check_range(quant_min, quant_max)
    if not -input.dim() <= axis < input.dim():
        raise IndexError(f"fake_quantize_per_channel_affine: axis {axis} is out of range for a {input.dim()}-d input")
    axis %= input.dim()
    channels = input.shape[axis]
    for name, value in (("scale", scale), ("zero_point", zero_point)):
        shape = tuple(value.shape) if isinstance(value, Tensor) else np.shape(value)
        if len(shape) != 1 or shape[0] != channels:
            raise RuntimeError(
                f"fake_quantize_per_channel_affine: {name} must be 1-D with {channels} entries "
                f"(input.shape[{axis}]), got shape {shape}"
            )
    if isinstance(zero_point, Tensor) and zero_point.dtype.is_floating_point:
        return _with_float_zero_point(input, scale, zero_point, axis, int(quant_min), int(quant_max))
    return _FakeQuantizeFunction.apply(input, scale, zero_point, int(quant_min), int(quant_max), axis)


def _with_float_zero_point(input: Tensor, scale, zero_point: Tensor, axis: int, quant_min: int, quant_max: int):
    """Per channel with floating zero points (embedding-bag style), which QuantizeLinear cannot take:
    ``(clamp(round(x * (1 / scale) + zero_point), quant_min, quant_max) - zero_point) * scale``, as
    PyTorch's kernel computes it, with the straight-through gradient where the level is in range."""
    rank = input.dim()
    scale_along = _along(_as_parameter(scale, input.dtype, "scale").reshape(-1), rank, axis)
    point_along = _along(zero_point.detach().to(input.dtype).reshape(-1), rank, axis)
    level = (input.detach() * (1.0 / scale_along) + point_along).round()
    output = (level.clamp(quant_min, quant_max) - point_along) * scale_along
    inside = (level >= quant_min) & (level <= quant_max)
    # In range: output plus input - input (exactly 0), which carries the input's gradient.
    return where(inside, output + (input - input.detach()), output)


class _PartialConstructor(functools.partial):
    """A constructor with some arguments bound (``FakeQuantize.with_args(...)``), called with the rest."""

    def __repr__(self) -> str:
        arguments = ", ".join(f"{key}={value!r}" for key, value in self.keywords.items())
        return f"{self.func.__name__}.with_args({arguments})"


class FakeQuantize(Module):
    """Fake-quantizes what passes through, with a scale and zero point an observer chooses while training.

    In each call, while the observer is enabled it watches the input and the module copies the
    observer's ``calculate_qparams()`` into its ``scale``/``zero_point`` buffers; while fake
    quantization is enabled the output is the input rounded to that grid (a QuantizeLinear ->
    DequantizeLinear pair in the recorded and exported graph), with the straight-through gradient.
    ``model.apply(disable_observer)`` freezes the parameters (do so before export).

    Args:
        observer: the observer class (or ``Observer.with_args(...)``) to build.
        quant_min, quant_max: the integer range (default: the observer's dtype's full range).
        is_dynamic: not supported (onnxruntime's dynamic quantization is :func:`quantize_dynamic`).
        **observer_kwargs: passed to ``observer`` (``dtype``, ``qscheme``, ``ch_axis``, ...).

    Example::

        >>> fake_quant = FakeQuantize(quant_min=0, quant_max=255, dtype=onnxnn.quint8)
        >>> y = fake_quant(onnxnn.randn(8, 4))      # observes, then rounds to 256 levels
        >>> scale, zero_point = fake_quant.calculate_qparams()
    """

    def __init__(
        self,
        observer: Callable[..., Module] = MovingAverageMinMaxObserver,
        quant_min: int | None = None,
        quant_max: int | None = None,
        is_dynamic: bool = False,
        **observer_kwargs: Any,
    ) -> None:
        super().__init__()
        if is_dynamic:
            raise ValueError("FakeQuantize: is_dynamic=True is not supported; use onnxnn.quantization.quantize_dynamic")
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:  # PyTorch's FakeQuantize asserts so
                raise AssertionError("quant_min must be less than or equal to quant_max")
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        elif (quant_min is None) != (quant_max is None):
            raise ValueError("quant_min and quant_max must be given together")
        if "dtype" in observer_kwargs:
            observer_kwargs["dtype"] = quantized_dtype(observer_kwargs["dtype"])
        self.activation_post_process = observer(**observer_kwargs)
        process = self.activation_post_process
        self.quant_min: int = process.quant_min
        self.quant_max: int = process.quant_max
        self.dtype = process.dtype
        self.qscheme = process.qscheme
        self.ch_axis: int = getattr(process, "ch_axis", -1)
        self.is_per_channel = self.qscheme in (per_channel_affine, per_channel_symmetric)
        self.is_dynamic = False
        self.register_buffer("fake_quant_enabled", constant_tensor(np.array([1], dtype=np.uint8)))
        self.register_buffer("observer_enabled", constant_tensor(np.array([1], dtype=np.uint8)))
        self.register_buffer("scale", constant_tensor(np.array([1.0], dtype=np.float32)))
        self.register_buffer("zero_point", constant_tensor(np.array([0], dtype=np.int32)))

    @classmethod
    def with_args(cls, **kwargs: Any) -> Callable[..., FakeQuantize]:
        """A constructor of this class with ``kwargs`` bound (PyTorch's ``with_args``), for QConfig."""
        return _PartialConstructor(cls, **kwargs)

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """The observer's scale and zero point."""
        return self.activation_post_process.calculate_qparams()

    def _flag(self, name: str) -> bool:
        # The flags are constant leaf buffers (set by the enable_/disable_ methods or a state_dict):
        # reading them computes nothing.
        return bool(getattr(self, name).numpy(force=True)[0])

    def _set_flag(self, name: str, enabled: bool) -> FakeQuantize:
        setattr(self, name, constant_tensor(np.array([int(enabled)], dtype=np.uint8)))
        return self

    def enable_fake_quant(self, enabled: bool = True) -> FakeQuantize:
        """Turns fake quantization on (or off with ``enabled=False``)."""
        return self._set_flag("fake_quant_enabled", enabled)

    def disable_fake_quant(self) -> FakeQuantize:
        """Turns fake quantization off: the module passes its input through."""
        return self._set_flag("fake_quant_enabled", False)

    def enable_observer(self, enabled: bool = True) -> FakeQuantize:
        """Turns observing on (or off with ``enabled=False``)."""
        return self._set_flag("observer_enabled", enabled)

    def disable_observer(self) -> FakeQuantize:
        """Freezes ``scale`` and ``zero_point`` at their current values."""
        return self._set_flag("observer_enabled", False)

    def forward(self, X: Tensor) -> Tensor:
        if self._flag("observer_enabled"):
            self.activation_post_process(X.detach())
            scale, zero_point = self.calculate_qparams()
            self.scale = scale.reshape(-1)
            self.zero_point = zero_point.reshape(-1)
        if not self._flag("fake_quant_enabled"):
            return X
        if self.is_per_channel:
            return fake_quantize_per_channel_affine(
                X, self.scale, self.zero_point, self.ch_axis, self.quant_min, self.quant_max
            )
        return fake_quantize_per_tensor_affine(X, self.scale, self.zero_point, self.quant_min, self.quant_max)

    def extra_repr(self) -> str:
        return (
            f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
            f"quant_min={self.quant_min}, quant_max={self.quant_max}, dtype={self.dtype}, "
            f"qscheme={self.qscheme}, ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}"
        )


def enable_fake_quant(mod: Module) -> None:
    """``model.apply(enable_fake_quant)``: turns fake quantization on in every FakeQuantize."""
    if isinstance(mod, FakeQuantize):
        mod.enable_fake_quant()


def disable_fake_quant(mod: Module) -> None:
    """``model.apply(disable_fake_quant)``: every FakeQuantize passes its input through."""
    if isinstance(mod, FakeQuantize):
        mod.disable_fake_quant()


def enable_observer(mod: Module) -> None:
    """``model.apply(enable_observer)``: every FakeQuantize observes again."""
    if isinstance(mod, FakeQuantize):
        mod.enable_observer()


def disable_observer(mod: Module) -> None:
    """``model.apply(disable_observer)``: freezes every FakeQuantize's scale and zero point."""
    if isinstance(mod, FakeQuantize):
        mod.disable_observer()


# PyTorch's default fake quantizers (get_default_qat_qconfig narrows the activations' range).
default_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255, dtype="quint8", qscheme="per_tensor_affine"
)
default_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver, quant_min=-128, quant_max=127, dtype="qint8", qscheme="per_tensor_symmetric"
)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(
    observer=MovingAveragePerChannelMinMaxObserver,
    quant_min=-128,
    quant_max=127,
    dtype="qint8",
    qscheme="per_channel_symmetric",
    ch_axis=0,
)
