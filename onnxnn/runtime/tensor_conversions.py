"""Tensor's conversions: between dtypes and devices (``to``, ``cpu``/``cuda``, ``type`` and the
``float()``/``long()``/... shorthands), and out of onnxnn, to numpy arrays and Python numbers
(``numpy``, ``item``, ``tolist``, ``__array__``, ``__float__``...), which compute a pending value.

Kept apart from ``tensor.py`` (identity, autograd, in-place writes) so each file holds one idea.
``tensor`` is a module reference here (Tensor subclasses this class), read at call time.
"""

from __future__ import annotations

import builtins
import functools
import weakref
from typing import TYPE_CHECKING, cast

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir.device import as_device, require_usable
from ..ir.graph import constant
from ..ir.mode import MODE
from . import creation
from .aliases import ALIAS_GROUPS
from . import tensor as _tensor  # circular (Tensor subclasses TensorConversions): attributes are read at call time
from .device_sessions import upload
from .realization import data_of
from .views import view_root

if TYPE_CHECKING:
    from ..ir.graph import Value
    from .tensor import Tensor

__all__ = ["TensorConversions"]


class TensorConversions:
    __slots__ = ()

    if TYPE_CHECKING:  # Tensor's members these methods use (tensor.py defines them)
        _value: Value
        _requires_grad: bool

        def numel(self) -> int: ...

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The value as a read-only numpy array (computing it if it is still pending)."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        value = self._value
        if value.device.type != "cpu" and not force:
            raise TypeError(
                f"can't convert {value.device} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        return self._realized_data()

    def _realized_data(self) -> np.ndarray:
        data = data_of(self._value)
        if data is None:
            raise RuntimeError(
                "a value was read while a step is only being recorded (e.g. by "
                "training_step_to_onnx): the recorded step must not depend on computed data"
            )
        # Values are immutable: a write would corrupt shared history. ``setflags(False)`` (write, by
        # position: keywords take numpy's slow argument parsing) at every read costs less than reading
        # ``flags`` first, which builds a flags object: 3.3 against 4.3-9.6 us right after a large run.
        data.setflags(False)
        return data

    def __array__(self, dtype=None, copy=None):
        data = self._realized_data()
        if dtype is not None:
            return data.astype(dtype)
        return np.array(data) if copy else data

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        return self._realized_data().reshape(()).item()

    def tolist(self):
        """The value as nested Python lists (a number for a 0-d tensor)."""
        data = self._realized_data()
        if data.dtype == _dtypes.bfloat16.numpy_dtype:
            data = data.astype(np.float32)
        return data.tolist()

    def __bool__(self) -> bool:
        count = self.numel()
        if count != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {'no values' if count == 0 else 'more than one value'} is ambiguous"
            )
        return bool(self._realized_data().reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._value.dtype.category != 1 or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def to(self, *args, **kwargs) -> Tensor:
        """Converts dtype and/or device: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(tensor)``."""
        target_dtype = kwargs.pop("dtype", None)
        if target_dtype is not None:  # a number is refused, as by the factories (dtype=5 is no dtype)
            target_dtype = creation.dtype_argument(target_dtype, "to")
        target_device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for arg in args:
            if isinstance(arg, _tensor.Tensor):
                target_dtype, target_device = arg.dtype, arg.device
            elif (
                isinstance(arg, _dtypes.dtype)
                or arg in (bool, int, float)  # Python's types name dtypes, as in PyTorch: float is float64
                or (isinstance(arg, type) and issubclass(arg, np.generic))
            ):
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
        if copy and result is self:
            # A new tensor even when nothing changes: an in-place change of either must not reach the other.
            return result._new_handle("ToCopyBackward0")
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
        """Without arguments, the type name (``"onnxnn.FloatTensor"``); otherwise a cast to
        ``dtype``, a dtype, a legacy typed class (``onnxnn.FloatTensor``) or a type name
        (``"onnxnn.FloatTensor"``, or PyTorch's ``"torch.FloatTensor"``)."""
        if dtype is None:
            return f"onnxnn.{_dtypes.scalar_type_name(self._value.dtype)}Tensor"
        if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), _dtypes.dtype):
            dtype = dtype.dtype  # a legacy typed class, onnxnn.DoubleTensor (runtime/legacy_tensor_types.py)
        if isinstance(dtype, str) and dtype.endswith("Tensor") and "." in dtype:
            package, _, name = dtype.rpartition(".")
            found = _TYPE_NAMES.get(name[: -len("Tensor")]) if package in ("onnxnn", "torch") else None
            if found is None:
                raise RuntimeError(f"invalid type: '{dtype}'")
            dtype = found
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
        # Values are immutable and every process gets them by pickling, so there is nothing to move;
        # only the storage's mark is kept, for is_shared.
        if not _marked_shared(self):
            reference = weakref.ref(self, functools.partial(_forget_shared, id(self)))
            _SHARED[id(self)] = (reference, self._value.dtype, self._value.device)
        return cast("Tensor", self)

    def is_shared(self) -> builtins.bool:
        """Whether ``share_memory_()`` was called on this tensor's storage: on the tensor itself, on
        a tensor sharing its value (``.data``, ``detach()``) or on the root it is a view of."""
        if not _SHARED:
            return False
        if _marked_shared(self):
            return True
        root = view_root(self)
        return root is not None and _marked_shared(root)

    def pin_memory(self) -> Tensor:
        return cast("Tensor", self)


# id(tensor) -> (weak reference, dtype, device), for each tensor whose share_memory_() was called (by
# id, never an attribute: a copy or a pickle of the tensor is a new storage, not shared). A storage
# keeps its dtype and device: a marked tensor given another (``module.double()`` rebinds
# ``param.data``) has a new storage, not the shared one.
_SHARED: dict[int, tuple] = {}


def _forget_shared(key: int, _reference) -> None:
    _SHARED.pop(key, None)  # collected: its id may be reused by a new tensor


def _marked_shared(tensor) -> builtins.bool:
    """Whether ``tensor`` or a live tensor of its alias group (``aliases.py``) was marked shared."""
    if _marked(tensor):
        return True
    group = ALIAS_GROUPS.get(id(tensor)) if ALIAS_GROUPS else None
    for member_reference in () if group is None else group.values():
        member = member_reference()
        if member is not None and member is not tensor and _marked(member):
            return True
    return False


def _marked(tensor) -> builtins.bool:
    mark = _SHARED.get(id(tensor))
    return mark is not None and mark[0]() is tensor and mark[1:] == (tensor._value.dtype, tensor._value.device)


# ``Tensor.type``'s names: "Float" for onnxnn.float32, as scalar_type_name gives them.
_TYPE_NAMES = {
    _dtypes.scalar_type_name(each): each
    for each in (
        _dtypes.float32,
        _dtypes.float64,
        _dtypes.float16,
        _dtypes.bfloat16,
        _dtypes.int64,
        _dtypes.int32,
        _dtypes.int16,
        _dtypes.int8,
        _dtypes.uint8,
        _dtypes.bool,
    )
}
