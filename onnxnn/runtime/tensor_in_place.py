"""In-place writes: a tensor rebound to a new value (DESIGN principle 5), with PyTorch's checks.

Values are immutable, so ``x.add_(1)`` computes ``x + 1`` from an alias of ``x`` (``_alias``) and
rebinds ``x`` to it (``_assign``): its version counter bumps, the tensors sharing its value
(``.data``, ``detach()``; ``aliases.py``) and its views (``views.py``) follow, and its autograd
history becomes the write's. ``Tensor`` takes these methods from ``TensorInPlace``.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, cast

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir.graph import Value, hold
from ..ir.mode import MODE
from . import creation
from . import tensor as _tensor  # circular (Tensor subclasses TensorInPlace): attributes are read at call time
from .aliases import ALIAS_GROUPS, share_value
from .autograd import VersionCounter
from .views import VIEW_LINKS, after_write, check_view_write

if TYPE_CHECKING:
    from .autograd import Function
    from .tensor import Tensor

__all__ = ["TensorInPlace"]


class TensorInPlace:
    """The in-place writing methods of ``Tensor``."""

    if TYPE_CHECKING:  # Tensor's members these methods use (tensor.py defines them, as slots)
        _value: Value
        _requires_grad: bool
        _grad_fn: Function | None
        _output_nr: int
        _version_counter: VersionCounter | None

        @property
        def retains_grad(self) -> bool: ...

        def retain_grad(self) -> None: ...

        def expand(self, *sizes) -> Tensor: ...
    else:
        __slots__ = ()

        def expand(self, *sizes) -> Tensor: ...

    def _alias(self) -> "Tensor":
        """The input of an in-place op's math: same value and autograd edge, own version counter.

        Raises for a leaf that requires grad while gradients are recorded, as PyTorch does.
        """
        if self._grad_fn is None:
            if self._requires_grad and MODE.grad.enabled:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            return _tensor.Tensor._from_value(self._value)
        return _tensor.Tensor._from_value(self._value, self._grad_fn, self._output_nr)

    def _assign(self, result: "Tensor") -> "Tensor":
        """Rebinds this tensor to ``result`` (the in-place write), keeping its dtype and shape."""
        if self._grad_fn is None and self._requires_grad and MODE.grad.enabled:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if VIEW_LINKS and id(self) in VIEW_LINKS:
            check_view_write(self)  # before anything changes
        before = self._value
        if result._value.dtype is not self._value.dtype:
            result = result.to(self._value.dtype)
        if result._value.shape != self._value.shape:
            result = result._broadcast_for_assignment(self._value.shape)
        if result._grad_fn is None and MODE.grad.enabled:
            if result._requires_grad:
                # A leaf copied in (``y[:, 1].copy_(weight)``): a node of its own, through which the
                # leaf takes the gradient, as PyTorch's CopyBackwards.
                result = _tensor.apply_op("Identity", (result,), None, "CopyBackwards")
            elif self._grad_fn is not None:
                # A value without history over one with it (``y.zero_()``): the tensor stays in the
                # graph, passing zeros to the old history, as PyTorch's FillBackward0 does. (A write
                # under no_grad keeps the old history whole, as PyTorch's.)
                kept = _tensor.Tensor._full((), True, _dtypes.bool, self._value.device)
                result = _tensor.apply_op("Where", (kept, result, self), None, "FillBackward0")
        self._value = result._value
        hold(self._value, self)
        trace = MODE.trace
        if trace is not None:  # a forward replay makes the same write (``fastpath.forward_replay``)
            trace.effects.append(("write", self, self._value, result._grad_fn is None, before))
        if result._grad_fn is not None:
            # PyTorch's retained gradient is the written value's: the retention moves to it.
            old, retained = self._grad_fn, self.retains_grad
            if old is not None and old._retained and retained:
                del old._retained[self._output_nr]
            self._grad_fn = result._grad_fn
            self._output_nr = result._output_nr
            self._requires_grad = True
            if retained:
                self.retain_grad()
        self._bump_version()
        self._written()
        return cast("Tensor", self)

    def _assign_arithmetic(self, result: "Tensor") -> "Tensor":
        """``_assign`` for in-place arithmetic: refuses a result of a higher category (int += 2.5)."""
        self._check_in_place_result(result._value.dtype)
        return self._assign(result)

    def _check_in_place_result(self, result: _dtypes.dtype) -> None:
        if result.category > self._value.dtype.category:
            raise RuntimeError(
                f"result type {_dtypes.scalar_type_name(result)} can't be cast to the "
                f"desired output type {_dtypes.scalar_type_name(self._value.dtype)}"
            )

    def _check_in_place_operand(self, other) -> None:
        """``_assign_arithmetic``'s refusal, made before an integer-only op runs on ``other``.

        PyTorch checks the cast of the result to this tensor's dtype before the kernel's dtypes:
        ``int_tensor.bitwise_and_(1.5)`` is a refused cast (RuntimeError), not a missing float
        kernel (NotImplementedError). Operands of other types are left to the op to refuse.
        """
        own = (self._value.dtype, len(self._value.shape))
        if isinstance(other, _tensor.Tensor):
            result = _dtypes.result_type([own, (other._value.dtype, len(other._value.shape))])
        elif isinstance(other, (bool, int, float)):
            result = _dtypes.result_type([own], [other])
        else:
            return
        self._check_in_place_result(result)

    def _broadcast_for_assignment(self, shape: tuple) -> "Tensor":
        own = self._value.shape
        if len(own) > len(shape) or any(a != b and a != 1 for a, b in zip(reversed(own), reversed(shape))):
            raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape {list(own)}")
        return self.expand(shape)

    def _rebind(self, value: Value) -> None:
        """Replaces the value without autograd checks (gradient accumulation, optimizer updates)."""
        before = self._value
        self._value = value
        hold(value, self)
        trace = MODE.trace
        if trace is not None:
            trace.effects.append(("write", self, value, True, before))
        self._bump_version()
        self._written()

    def _written(self) -> None:
        """After a write rebound this tensor: the tensors sharing its value or viewing it follow."""
        if ALIAS_GROUPS and id(self) in ALIAS_GROUPS:
            for member in share_value(self):
                after_write(member)
        if VIEW_LINKS:
            after_write(self)

    def _bump_version(self) -> None:
        counter = self._version_counter
        if counter is None:
            counter = self._version_counter = VersionCounter()
        counter.value += 1

    def copy_(self, source, non_blocking: bool = False) -> "Tensor":
        """Copies ``source`` (broadcast, converted to this dtype and device) into this tensor."""
        if isinstance(source, numbers.Number | np.bool_):  # PyTorch wraps a number, not a list or an array
            source = creation.as_tensor(source)
        elif not isinstance(source, _tensor.Tensor):
            raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not {type(source).__name__}")
        return self._assign(source.to(self._value.device))

    def zero_(self) -> "Tensor":
        return self.fill_(0)

    def fill_(self, value) -> "Tensor":
        if not isinstance(value, _tensor.Tensor):
            # On the CPU a number fills an array of the full shape now, leaving no Expand pending: a
            # model's initialization (zeros_, ones_, BatchNorm's running statistics) would otherwise
            # run in its first training step, whose graph then differs from every later step's and
            # is compiled for that one step (resnet152's: 9 s). On a GPU the scalar is expanded
            # there, rather than a host array of the tensor's size copied over.
            value = creation.converted_number(value, self._value.dtype)
            device = self._value.device
            shape = self._value.shape if device.type == "cpu" else ()
            value = _tensor.Tensor._full(shape, value, self._value.dtype, device)
        elif value.dim() != 0:
            raise RuntimeError(
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions."
            )
        return self._assign(value)
