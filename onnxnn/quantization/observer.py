"""Observers: modules that watch the values passing through and choose a scale and zero point.

Each observer keeps running ``min_val``/``max_val`` buffers (per tensor, or per channel along
``ch_axis``) and turns them into quantization parameters with PyTorch's formulas: an affine
scheme maps ``[min(min_val, 0), max(max_val, 0)]`` onto ``[quant_min, quant_max]``; a symmetric
one maps ``[-m, m]`` with ``m`` the larger magnitude, with zero point 0 (signed) or the middle of
the range (unsigned). The statistics are recorded ops on detached inputs, so watching costs no
synchronization: they are computed with the step that uses them.
"""

from __future__ import annotations

import numpy as np

from ..nn.modules.module import Module
from ..runtime.internal import constant_tensor
from ..runtime.ops.elementwise import where
from ..runtime.tensor import Tensor
from ._dtypes import (
    QuantizedDType,
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    quantized_dtype,
    quint8,
)

__all__ = [
    "ObserverBase",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver",
]

_PER_TENSOR = (per_tensor_affine, per_tensor_symmetric)
_PER_CHANNEL = (per_channel_affine, per_channel_symmetric)
_EPS = float(np.finfo(np.float32).eps)


def _scalar(value: float) -> Tensor:
    return constant_tensor(np.asarray(value, dtype=np.float32))


class ObserverBase(Module):
    """Base class of observers: the quantized type, scheme and integer range they choose parameters for.

    Args:
        dtype: the quantized type (``onnxnn.quint8`` or ``onnxnn.qint8``, or their names).
        qscheme: ``"per_tensor_affine"``, ``"per_tensor_symmetric"`` (or their per-channel forms
            for the per-channel observers).
        reduce_range: use one bit less than ``dtype`` holds (for kernels whose int8 products can
            saturate, as onnxruntime's on x86 CPUs without VNNI).
        quant_min, quant_max: a custom integer range inside ``dtype``'s; both or neither.
        eps: the smallest scale returned.
    """

    _schemes: tuple[str, ...] = _PER_TENSOR
    # The running extremes, buffers registered by each subclass (0-d, or 1-D per channel).
    min_val: Tensor
    max_val: Tensor
    eps: Tensor

    def __init__(
        self,
        dtype: QuantizedDType | str = quint8,
        qscheme: str = per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = _EPS,
    ) -> None:
        super().__init__()
        kind = quantized_dtype(dtype)
        if qscheme not in self._schemes:
            if self._schemes == _PER_TENSOR and qscheme in _PER_CHANNEL:  # PyTorch's MinMaxObserver raises so
                raise NotImplementedError(
                    f"{type(self).__name__}'s qscheme only supports per_tensor_symmetric and per_tensor_affine"
                )
            raise ValueError(f"{type(self).__name__}: unsupported qscheme {qscheme!r}, expected one of {self._schemes}")
        if (quant_min is None) != (quant_max is None):
            raise ValueError("quant_min and quant_max must be given together")
        if quant_min is not None and quant_max is not None:
            # PyTorch's _validate_qmin_qmax: assertions, raised whatever python -O says.
            if not quant_min <= 0 <= quant_max:
                raise AssertionError("Used-specified quantization range must include 0.")
            if quant_min >= quant_max:
                raise AssertionError("qmin must be strictly less than qmax for user-specified quantization range.")
            if quant_min < kind.quant_min or quant_max > kind.quant_max:
                raise ValueError(
                    f"the range [{quant_min}, {quant_max}] does not fit {kind!r} ([{kind.quant_min}, {kind.quant_max}])"
                )
            low, high = quant_min, quant_max
            if reduce_range:  # a given range is halved too, as PyTorch's calculate_qmin_qmax does
                low, high = low // 2, high // 2
        else:
            low, high = kind.quant_min, kind.quant_max
            if reduce_range:  # one bit less: halve the range, keeping its sign convention
                low, high = low // 2, (high - 1) // 2 if low < 0 else high // 2
        self.dtype = kind
        self.qscheme = qscheme
        self.reduce_range = reduce_range
        self.quant_min = int(low)
        self.quant_max = int(high)
        self.has_customized_qrange = quant_min is not None
        # A buffer of shape (1,), as PyTorch's, so that its state_dicts load strictly both ways.
        self.register_buffer("eps", constant_tensor(np.array([eps], dtype=np.float32)))

    def _parameters_from(self, min_val: Tensor, max_val: Tensor) -> tuple[Tensor, Tensor]:
        """Scale (float32) and zero point (int32) for the observed range ``[min_val, max_val]``."""
        low, high = float(self.quant_min), float(self.quant_max)
        eps = self.eps.float().reshape(())
        min_neg = min_val.clamp(max=0.0)
        max_pos = max_val.clamp(min=0.0)
        if self.qscheme in (per_tensor_symmetric, per_channel_symmetric):
            largest = (-min_neg).maximum(max_pos)
            scale = (largest / ((high - low) / 2)).maximum(eps)
            if self.dtype.quant_min < 0:
                middle = 0
            else:
                middle = (self.quant_min + self.quant_max) // 2 if self.has_customized_qrange else 128
            zero_point = scale * 0 + float(middle)
        else:
            scale = ((max_pos - min_neg) / (high - low)).maximum(eps)
            level = (min_neg / scale).round()
            # An infinite scale (an infinite input) or eps=0 with zeros makes the level NaN. PyTorch
            # casts it to int32 first (INT32_MIN), then computes quant_min - level in int32, which
            # wraps to quant_min when quant_min is 0 and clamps to quant_max when it is negative.
            undefined = float(self.quant_min) if self.quant_min >= 0 else float(self.quant_max)
            zero_point = where(level != level, undefined, (low - level).clamp(low, high))
        # Never observed (min_val = +inf): PyTorch's answer, scale 1 and zero point 0.
        observed = min_val <= max_val
        scale = where(observed, scale, 1.0)
        zero_point = where(observed, zero_point, 0.0)
        return scale.float(), zero_point.int()

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """The scale and zero point for what was observed so far."""
        return self._parameters_from(self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class MinMaxObserver(ObserverBase):
    """Watches the running minimum and maximum of every tensor it sees (PyTorch's ``MinMaxObserver``).

    Example::

        >>> observer = MinMaxObserver(dtype=onnxnn.quint8)
        >>> _ = observer(onnxnn.tensor([-1.0, 3.0]))
        >>> scale, zero_point = observer.calculate_qparams()   # 4 / 255, 64
    """

    def __init__(
        self,
        dtype=quint8,
        qscheme: str = per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = _EPS,
    ) -> None:
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.register_buffer("min_val", _scalar(np.inf))
        self.register_buffer("max_val", _scalar(-np.inf))

    def _update(self, new_min: Tensor, new_max: Tensor) -> None:
        self.min_val = self.min_val.minimum(new_min)
        self.max_val = self.max_val.maximum(new_max)

    def _extremes(self, x: Tensor) -> tuple[Tensor, Tensor]:
        return x.amin(), x.amax()

    def forward(self, x_orig: Tensor) -> Tensor:
        """Observes ``x_orig`` and returns it unchanged."""
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().float()
        self._update(*self._extremes(x))
        return x_orig

    def reset_min_max_vals(self) -> None:
        """Forgets what was observed."""
        self.min_val = _scalar(np.inf)
        self.max_val = _scalar(-np.inf)


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Like :class:`MinMaxObserver`, but ``min_val``/``max_val`` follow an exponential moving average of
    each batch's extremes (``averaging_constant`` the weight of the newest), so that outliers of
    early training fade."""

    def __init__(
        self,
        averaging_constant: float = 0.01,
        dtype=quint8,
        qscheme: str = per_tensor_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = _EPS,
    ) -> None:
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.averaging_constant = float(averaging_constant)

    def _update(self, new_min: Tensor, new_max: Tensor) -> None:
        # The first batch sets the range (the buffers still hold +-inf); later ones move it.
        weight = self.averaging_constant
        first = self.min_val > self.max_val
        self.min_val = where(first, new_min, self.min_val + weight * (new_min - self.min_val))
        self.max_val = where(first, new_max, self.max_val + weight * (new_max - self.max_val))


class PerChannelMinMaxObserver(MinMaxObserver):
    """Running minimum and maximum per slice along ``ch_axis`` (PyTorch's ``PerChannelMinMaxObserver``),
    for per-channel weight quantization."""

    _schemes = _PER_CHANNEL

    def __init__(
        self,
        ch_axis: int = 0,
        dtype=quint8,
        qscheme: str = per_channel_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = _EPS,
    ) -> None:
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.ch_axis = int(ch_axis)
        # Sized on the first observation, as PyTorch's (its channel count is not known before).
        self.register_buffer("min_val", constant_tensor(np.zeros(0, dtype=np.float32)))
        self.register_buffer("max_val", constant_tensor(np.zeros(0, dtype=np.float32)))

    def _extremes(self, x: Tensor) -> tuple[Tensor, Tensor]:
        axis = self.ch_axis % x.dim()
        others = tuple(dim for dim in range(x.dim()) if dim != axis)
        return x.amin(dim=others), x.amax(dim=others)

    def _update(self, new_min: Tensor, new_max: Tensor) -> None:
        if self.min_val.shape != new_min.shape:
            self.min_val, self.max_val = new_min, new_max
        else:
            self._merge(new_min, new_max)

    def _merge(self, new_min: Tensor, new_max: Tensor) -> None:
        self.min_val = self.min_val.minimum(new_min)
        self.max_val = self.max_val.maximum(new_max)

    def reset_min_max_vals(self) -> None:
        self.min_val = constant_tensor(np.zeros(0, dtype=np.float32))
        self.max_val = constant_tensor(np.zeros(0, dtype=np.float32))


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    """Per-channel extremes followed by an exponential moving average (``averaging_constant``)."""

    def __init__(
        self,
        averaging_constant: float = 0.01,
        ch_axis: int = 0,
        dtype=quint8,
        qscheme: str = per_channel_affine,
        reduce_range: bool = False,
        quant_min: int | None = None,
        quant_max: int | None = None,
        eps: float = _EPS,
    ) -> None:
        super().__init__(ch_axis, dtype, qscheme, reduce_range, quant_min, quant_max, eps)
        self.averaging_constant = float(averaging_constant)

    def _merge(self, new_min: Tensor, new_max: Tensor) -> None:
        weight = self.averaging_constant
        self.min_val = self.min_val + weight * (new_min - self.min_val)
        self.max_val = self.max_val + weight * (new_max - self.max_val)
