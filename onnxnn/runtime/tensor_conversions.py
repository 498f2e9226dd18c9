"""Tensor's conversions between dtypes and devices: ``to``, ``cpu``/``cuda``, ``type`` and the
``float()``/``long()``/... shorthands.

Kept apart from ``tensor.py`` (identity, autograd, materialization) so each file holds one idea.
``tensor`` is a module reference here (Tensor subclasses this class), read at call time.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, cast

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir.device import as_device, require_usable
from ..ir.graph import constant
from ..ir.mode import MODE
from . import tensor as _tensor  # circular (Tensor subclasses TensorConversions): attributes are read at call time
from .device_sessions import upload

if TYPE_CHECKING:
    from ..ir.graph import Value
    from .tensor import Tensor

__all__ = ["TensorConversions"]


class TensorConversions:
    __slots__ = ()

    if TYPE_CHECKING:  # Tensor's members these methods use (tensor.py defines them)
        _value: Value
        _requires_grad: bool

        def _realized_data(self) -> np.ndarray: ...

    def to(self, *args, **kwargs) -> Tensor:
        """Converts dtype and/or device: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(tensor)``."""
        target_dtype = kwargs.pop("dtype", None)
        target_device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("copy", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, _tensor.Tensor):
                target_dtype, target_device = arg.dtype, arg.device
            elif isinstance(arg, _dtypes.dtype) or (isinstance(arg, type) and issubclass(arg, np.generic)):
                target_dtype = arg
            elif arg is not None and not isinstance(arg, bool):
                target_device = arg
        result = cast("Tensor", self)
        if target_device is not None:
            result = result._to_device(as_device(target_device))
        if target_dtype is not None:
            target_dtype = _dtypes.as_dtype(target_dtype)
            if target_dtype is not result._value.dtype:
                result = _tensor.apply_op("Cast", (result,), {"to": target_dtype}, "ToCopyBackward0")
        return result

    def _to_device(self, target) -> Tensor:
        if target is self._value.device:
            return cast("Tensor", self)
        require_usable(target)
        copied = constant(self._realized_data(), self._value.dtype, target)
        upload(copied)  # copied now, as PyTorch copies: a later change of the source is not seen
        if not (self._requires_grad and MODE.grad.enabled):
            return _tensor.Tensor._from_value(copied)
        # The gradient path goes through an Identity node (its gradient is copied back), computed
        # here: no graph spans two devices, so every session reads and writes one device's arrays.
        moved = _tensor.apply_op("Identity", (self,), None, "ToCopyBackward0")
        value = moved._value
        value.device, value.data, value.node = target, copied.data, None
        return moved

    def cpu(self) -> Tensor:
        return self.to("cpu")

    def cuda(self, device=None) -> Tensor:
        return self.to("cuda" if device is None else as_device(device if not isinstance(device, int) else device))

    def type(self, dtype=None):
        """Without arguments, the type name (``"onnxnn.FloatTensor"``); otherwise a cast."""
        if dtype is None:
            return f"onnxnn.{_dtypes.scalar_type_name(self._value.dtype)}Tensor"
        return self.to(dtype)

    def float(self) -> Tensor:
        return self.to(_dtypes.float32)

    def double(self) -> Tensor:
        return self.to(_dtypes.float64)

    def half(self) -> Tensor:
        return self.to(_dtypes.float16)

    def bfloat16(self) -> Tensor:
        return self.to(_dtypes.bfloat16)

    def long(self) -> Tensor:
        return self.to(_dtypes.int64)

    def int(self) -> Tensor:
        return self.to(_dtypes.int32)

    def short(self) -> Tensor:
        return self.to(_dtypes.int16)

    def char(self) -> Tensor:
        return self.to(_dtypes.int8)

    def byte(self) -> Tensor:
        return self.to(_dtypes.uint8)

    def bool(self) -> Tensor:
        return self.to(_dtypes.bool)

    def share_memory_(self) -> Tensor:
        return cast("Tensor", self)

    def is_shared(self) -> builtins.bool:
        return False

    def pin_memory(self) -> Tensor:
        return cast("Tensor", self)
