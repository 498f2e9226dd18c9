"""Lazy modules: parameters whose shape the first input decides (PyTorch's ``LazyModuleMixin``).

An :class:`UninitializedParameter` is a Parameter without a shape yet; :meth:`materialize` gives it
one (a fresh uninitialized tensor) and turns it into a plain :class:`~onnxnn.nn.Parameter` in
place (an :class:`UninitializedBuffer`, a buffer such as a lazy norm's running statistics, turns into
a plain Tensor), so references to it held elsewhere (an optimizer built before the first forward) stay
valid. :class:`LazyModuleMixin` calls ``initialize_parameters(*args, **kwargs)`` from a forward
pre-hook on the first call, or materializes from the shapes of a loaded ``state_dict``; once
everything is materialized the module becomes its ``cls_to_become`` (``LazyConv2d`` -> ``Conv2d``).
"""

from __future__ import annotations

import itertools

from collections import OrderedDict
from typing import TYPE_CHECKING, Callable, TypeGuard

from ...runtime.creation import empty
from ...runtime.internal import requires_grad_flag, tensor_of, value_of
from ...runtime.tensor import Tensor
from ..parameter import Parameter

if TYPE_CHECKING:
    from ...runtime.autograd import RemovableHandle

__all__ = ["LazyModuleMixin", "UninitializedBuffer", "UninitializedParameter"]


class UninitializedParameter(Parameter):
    """A parameter that is not initialized yet: no shape, no values, until :meth:`materialize`.

    Args:
        requires_grad: whether the materialized parameter requires gradient. Default: ``True``.
        device, dtype: of the materialized tensor.
    """

    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None) -> "UninitializedParameter":
        placeholder = empty(0, device=device, dtype=dtype)
        return tensor_of(value_of(placeholder), requires_grad=bool(requires_grad), tensor_type=cls)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None) -> None:
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Gives the parameter ``shape`` (uninitialized values) and makes it a plain Parameter, in place."""
        placeholder = empty(
            tuple(shape),
            device=device if device is not None else self.device,
            dtype=dtype if dtype is not None else self.dtype,
        )
        self.data = placeholder  # as PyTorch's materialize: no version bump, no autograd check
        # Materializing changes the class in place (to Parameter, or Tensor for a buffer), as PyTorch's.
        self.__class__ = self.cls_to_become  # type: ignore[assignment]

    def __repr__(self) -> str:  # type: ignore[override]  # no tensor_contents: nothing to show
        return "<UninitializedParameter>"

    __str__ = __repr__  # type: ignore[assignment]  # as __repr__

    def __reduce_ex__(self, protocol):
        return (UninitializedParameter, (requires_grad_flag(self), self.device, self.dtype))

    def __deepcopy__(self, memo):
        result = UninitializedParameter(requires_grad_flag(self), self.device, self.dtype)
        memo[id(self)] = result
        return result


class UninitializedBuffer(Tensor):
    """A buffer that is not initialized yet: no shape, no values, until :meth:`materialize`.

    Assigned to a module attribute that is a registered buffer, it stays a buffer; materialized, it
    becomes a plain Tensor in place. ``to``/``float``/``double``/... give another uninitialized
    buffer of the new dtype or device, so a module converted before its first forward stays lazy.

    Args:
        requires_grad: whether the materialized buffer requires gradient. Default: ``False``.
        device, dtype: of the materialized tensor.
        persistent: whether the buffer goes into the ``state_dict``. Default: ``True``.
    """

    __slots__ = ()
    cls_to_become = Tensor
    persistent: bool  # in __dict__, as Buffer's

    def __new__(
        cls, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True
    ) -> "UninitializedBuffer":
        placeholder = empty(0, device=device, dtype=dtype)
        buffer = tensor_of(value_of(placeholder), requires_grad=bool(requires_grad), tensor_type=cls)
        buffer.persistent = persistent
        return buffer

    def __init__(self, requires_grad: bool = False, device=None, dtype=None, persistent: bool = True) -> None:
        pass

    materialize: Callable[..., None] = UninitializedParameter.materialize  # shared: (shape, device, dtype)

    def to(self, *args, **kwargs) -> "UninitializedBuffer":
        placeholder = Tensor.to(empty(0, device=self.device, dtype=self.dtype), *args, **kwargs)
        return UninitializedBuffer(
            requires_grad_flag(self), placeholder.device, placeholder.dtype, self.__dict__.get("persistent", True)
        )

    def __repr__(self) -> str:  # type: ignore[override]  # no tensor_contents: nothing to show
        return "<UninitializedBuffer>"

    __str__ = __repr__  # type: ignore[assignment]  # as __repr__

    def __reduce_ex__(self, protocol):
        return (
            UninitializedBuffer,
            (requires_grad_flag(self), self.device, self.dtype, self.__dict__.get("persistent", True)),
        )

    def __deepcopy__(self, memo):
        result = UninitializedBuffer(
            requires_grad_flag(self), self.device, self.dtype, self.__dict__.get("persistent", True)
        )
        memo[id(self)] = result
        return result


def is_lazy(value) -> TypeGuard[UninitializedParameter | UninitializedBuffer]:
    return isinstance(value, (UninitializedParameter, UninitializedBuffer))


class LazyModuleMixin:
    """A mixin for modules whose parameters' shapes come from the first input.

    Subclasses implement ``initialize_parameters(*args, **kwargs)`` (materialize every
    :class:`UninitializedParameter` from the arguments of the first ``forward``) and may set
    ``cls_to_become``, the class the module turns into once fully initialized.

    Example::

        >>> layer = nn.LazyConv2d(8, 3)
        >>> layer(onnxnn.randn(1, 5, 10, 10)).shape
        onnxnn.Size([1, 8, 8, 8])
        >>> type(layer).__name__, layer.in_channels, layer.weight.shape
        ('Conv2d', 5, onnxnn.Size([8, 5, 3, 3]))
    """

    cls_to_become: type | None = None

    # Module's tables and methods that the methods below use (the mixin comes before Module in the bases).
    _parameters: OrderedDict[str, Parameter | None]
    _buffers: OrderedDict[str, Tensor | None]
    _non_persistent_buffers_set: set[str]
    if TYPE_CHECKING:

        def _register_load_state_dict_pre_hook(self, hook: Callable, with_module: bool = False) -> RemovableHandle: ...

        def register_forward_pre_hook(
            self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
        ) -> RemovableHandle: ...

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._load_hook = self._register_load_state_dict_pre_hook(self._lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters, with_kwargs=True)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # Uninitialized parameters are saved as themselves (they have no values to detach).
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars or is_lazy(param) else param.detach()
        for name, buffer in self._buffers.items():
            if buffer is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buffer if keep_vars or is_lazy(buffer) else buffer.detach()

    def _lazy_load_hook(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        """Materializes uninitialized parameters from the shapes of the tensors being loaded into them."""
        for name, param in itertools.chain(self._parameters.items(), self._buffers.items()):
            key = prefix + name
            if key in state_dict and param is not None and is_lazy(param) and not is_lazy(state_dict[key]):
                param.materialize(state_dict[key].shape)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materializes the uninitialized parameters from the first forward's arguments."""
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether any parameter or buffer is still an :class:`UninitializedParameter`."""
        return any(is_lazy(value) for value in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        module._load_hook.remove()
        delattr(module, "_initialize_hook")
        delattr(module, "_load_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
