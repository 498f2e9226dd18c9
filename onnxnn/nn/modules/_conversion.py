"""Module dtype/device conversion: one ``_apply(fn)`` serves ``to``, ``cpu``, ``cuda``, ``float``, ``half``...

Parameters keep their identity (an optimizer built before ``to()`` still holds them): their value
is rebound to the converted one, and so is their ``.grad``. Buffers are replaced by the
converted tensors, as in PyTorch.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np

from ...ir import dtypes as _dtypes
from ...runtime.creation import empty, empty_like
from ...ir.device import as_device, device as _device_type, require_usable
from ...runtime.grad_mode import no_grad
from ...runtime.tensor import Tensor

if TYPE_CHECKING:
    from ..parameter import Parameter
    from .module import Module

__all__ = ["ConversionMixin"]


_TO_SIGNATURES = (
    " * (onnxnn.device device = None, onnxnn.dtype dtype = None, bool non_blocking = False, bool copy = False, "
    "*, memory_format memory_format = None)\n"
    " * (onnxnn.dtype dtype, bool non_blocking = False, bool copy = False, *, memory_format memory_format = None)\n"
    " * (Tensor tensor, bool non_blocking = False, bool copy = False, *, memory_format memory_format = None)"
)


def _argument_type(value) -> str:
    if isinstance(value, Tensor):
        return "Tensor"
    return "onnxnn.dtype" if isinstance(value, _dtypes.dtype) else type(value).__name__


def _check_to_arity(args: tuple, kwargs: dict) -> None:
    """PyTorch's signatures of ``Module.to``: at most (device, dtype, non_blocking), or (dtype or
    tensor, non_blocking), and no ``copy``. Checked before a device is looked at: ``to("cpu",
    float64, True, 5)`` is a TypeError, not an attempt at a device."""
    first = args[0] if args else None
    by_value = isinstance(first, (Tensor, _dtypes.dtype)) or (isinstance(first, type) and issubclass(first, np.generic))
    allowed = 2 if by_value else 3
    # One more is PyTorch's ``copy`` only where it is a bool; anything else matches no signature.
    if len(args) > allowed + 1 or (len(args) == allowed + 1 and not isinstance(args[-1], bool)):
        got = ", ".join([_argument_type(arg) for arg in args] + [f"{k}={_argument_type(v)}" for k, v in kwargs.items()])
        raise TypeError(
            f"to() received an invalid combination of arguments - got ({got}), but expected one of:\n{_TO_SIGNATURES}"
        )
    if len(args) > allowed or "copy" in kwargs:
        raise RuntimeError(".to() does not accept copy argument")


def _parse_to(*args, **kwargs) -> tuple:
    """Splits ``to()``'s arguments into (device, dtype, non_blocking), like ``torch._C._nn._parse_to``."""
    _check_to_arity(args, kwargs)
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(
            f"to() received an invalid combination of arguments - got unexpected keyword "
            f"argument '{next(iter(kwargs))}'"
        )
    for position, arg in enumerate(args):
        if isinstance(arg, Tensor):
            device, dtype = arg.device, arg.dtype
        elif isinstance(arg, _dtypes.dtype) or (isinstance(arg, type) and issubclass(arg, np.generic)):
            dtype = _dtypes.as_dtype(arg)
        elif isinstance(arg, bool):
            non_blocking = arg
        elif isinstance(arg, (str, int, _device_type)):
            device = arg
        elif arg is not None:
            raise TypeError(
                f"to() received an invalid combination of arguments - got argument {position} "
                f"of type {type(arg).__name__}"
            )
    if device is not None:
        device = as_device(device)
    if dtype is not None:
        dtype = _dtypes.as_dtype(dtype)
    return device, dtype, non_blocking


def _check_device_available(device) -> None:
    # Checked before converting anything, so that a missing GPU leaves the module as it was.
    if device is not None:
        require_usable(device)


class ConversionMixin:
    """The conversion methods of :class:`~onnxnn.nn.Module`."""

    # Module's tables and traversal, used by the methods below.
    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, Tensor | None]
    if TYPE_CHECKING:

        def children(self) -> Iterator[Module]: ...

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True):
        """Applies ``fn`` to every parameter (rebinding it), its ``.grad`` and every buffer.

        Children first, as PyTorch does; ``to``/``cpu``/``float``/... are all this with another ``fn``.
        """
        if recurse:
            for module in self.children():
                module._apply(fn)
        for key, param in self._parameters.items():
            if param is None:
                continue
            with no_grad():
                applied = fn(param)
            if applied is not param:
                param.data = applied
            grad = param.grad
            if grad is not None:
                with no_grad():
                    grad_applied = fn(grad)
                if grad_applied is not grad:
                    grad.data = grad_applied
        for key, buffer in self._buffers.items():
            if buffer is not None:
                self._buffers[key] = fn(buffer)
        return self

    def to(self, *args, **kwargs):
        """Moves and/or casts the parameters and buffers, in place.

        Called as ``to(device=None, dtype=None, non_blocking=False)``, ``to(dtype)`` or
        ``to(tensor)``. Only floating-point parameters and buffers change dtype; integer ones
        only move to ``device``.

        Returns:
            self

        Example::

            >>> linear.to(onnxnn.double)
            >>> linear.weight.dtype
            onnxnn.float64
        """
        device, dtype, non_blocking = _parse_to(*args, **kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                f"nn.Module.to only accepts floating point or complex dtypes, but got desired dtype={dtype}"
            )
        _check_device_available(device)

        def convert(tensor: Tensor) -> Tensor:
            return tensor.to(device, dtype if tensor.is_floating_point() else None, non_blocking=non_blocking)

        return self._apply(convert)

    def cpu(self):
        """Moves all parameters and buffers to the CPU (in place); returns self."""
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None):
        """Moves all parameters and buffers to the GPU (in place); returns self."""
        target = as_device("cuda" if device is None else device)
        _check_device_available(target)
        return self._apply(lambda t: t.to(target))

    def ipu(self, device=None):
        """Moves all parameters and buffers to the IPU: not available in onnxnn (raises RuntimeError)."""
        return self._apply(lambda t: t.to(as_device("ipu" if device is None else f"ipu:{device}")))

    def xpu(self, device=None):
        """Moves all parameters and buffers to the XPU: not available in onnxnn (raises RuntimeError)."""
        return self._apply(lambda t: t.to(as_device("xpu" if device is None else f"xpu:{device}")))

    def type(self, dst_type):
        """Casts all parameters and buffers to ``dst_type`` (in place); returns self.

        Raises:
            RuntimeError: ``dst_type`` is not a floating-point type and a parameter requires
                grad (PyTorch's error); checked before anything is converted.
        """
        # What a cast to dst_type gives (an invalid dst_type raises here, before any change).
        target = empty(0).type(dst_type).dtype
        if not target.is_floating_point and any(param.requires_grad for param in self.parameters()):
            # PyTorch raises this from the first such parameter's ``.data =``, after converting
            # the parameters visited before it; checked first, the module is never half-converted.
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        return self._apply(lambda t: t.type(dst_type))

    def float(self):
        """Casts all floating-point parameters and buffers to ``float32``; returns self."""
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        """Casts all floating-point parameters and buffers to ``float64``; returns self."""
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        """Casts all floating-point parameters and buffers to ``float16``; returns self."""
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    def bfloat16(self):
        """Casts all floating-point parameters and buffers to ``bfloat16``; returns self."""
        return self._apply(lambda t: t.bfloat16() if t.is_floating_point() else t)

    def to_empty(self, *, device, recurse: bool = True):
        """Moves parameters and buffers to ``device`` without keeping their values; returns self."""
        target = as_device(device) if device is not None else None
        _check_device_available(target)
        return self._apply(lambda t: empty_like(t, device=target), recurse=recurse)

    def share_memory(self):
        """See ``Tensor.share_memory_()``; values in onnxnn are immutable, so this is a no-op. Returns self."""
        return self._apply(lambda t: t.share_memory_())
