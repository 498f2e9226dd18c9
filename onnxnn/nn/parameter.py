"""Parameter and Buffer: tensors that a Module registers when they are assigned as attributes."""

from __future__ import annotations

from ..runtime.creation import empty
from ..runtime.internal import requires_grad_flag, tensor_of, value_of
from ..runtime.tensor import Tensor
from ..runtime.views import share_storage

__all__ = ["Parameter", "Buffer"]


def _check_data(data, kind: str) -> Tensor:
    if data is None:
        return empty(0)
    if not isinstance(data, Tensor):
        raise TypeError(f"{kind}(): argument 'data' must be Tensor, not {type(data).__name__}")
    return data


class Parameter(Tensor):
    """A Tensor that is a module parameter.

    Assigning a Parameter as a Module attribute registers it: it then appears in
    :meth:`~onnxnn.nn.Module.parameters` and in the module's ``state_dict``. A Parameter shares
    its value with ``data`` (no copy) and has no autograd history.

    Args:
        data: the parameter's value (default: an empty tensor).
        requires_grad: whether the parameter requires gradient. Default: ``True``.

    Example::

        >>> weight = nn.Parameter(onnxnn.ones(2))
        >>> weight
        Parameter containing:
        tensor([1., 1.], requires_grad=True)
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        data = _check_data(data, "Parameter")
        if requires_grad and not data.is_floating_point():
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        parameter = tensor_of(value_of(data), requires_grad=bool(requires_grad), tensor_type=cls)
        share_storage(data, parameter)  # over data's storage, as PyTorch's: a write to either changes both
        return parameter

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        # Tensor.__init__ refuses direct construction; __new__ has done all the work.
        pass

    def __repr__(self) -> str:  # type: ignore[override]  # no tensor_contents, as PyTorch's Parameter
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__  # type: ignore[assignment]  # as __repr__

    def __deepcopy__(self, memo):
        # As PyTorch's: a new parameter of the same value and requires_grad, and nothing else: no
        # .grad, no hooks, no other attribute, and a gradient accumulator of its own, so that a
        # backward through the copy (a target network's) fills the copy's .grad, never this one's.
        if id(self) in memo:
            return memo[id(self)]
        # A new tensor on the value, sharing nothing: a write changes one.
        result = tensor_of(value_of(self), requires_grad=requires_grad_flag(self), tensor_type=type(self))
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        # The value pickles as a plain tensor (Tensor's own format); the wrapper restores the type
        # and the attributes, but not .grad or hooks, as PyTorch's (nor the accumulator, a weak reference).
        return (_rebuild_parameter, (self.detach(), requires_grad_flag(self), self._own_attributes()))


def _rebuild_parameter(data: Tensor, requires_grad: bool, state: dict) -> Parameter:
    parameter = Parameter(data, requires_grad)
    parameter.__dict__.update(state)
    return parameter


class Buffer(Tensor):
    """A Tensor that is a module buffer: assigning it as a Module attribute registers a buffer.

    Args:
        data: the buffer's value (default: an empty tensor).
        persistent: whether the buffer is part of the module's ``state_dict``. Default: ``True``.

    Example::

        >>> module.running_count = nn.Buffer(onnxnn.zeros(()), persistent=False)
    """

    __slots__ = ()  # ``persistent`` lives in __dict__ so that copies made by Tensor.__deepcopy__ keep it
    persistent: bool

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> "Buffer":
        data = _check_data(data, "Buffer")
        buffer = tensor_of(value_of(data), requires_grad=data.requires_grad and data.is_leaf, tensor_type=cls)
        share_storage(data, buffer)
        buffer.persistent = persistent
        return buffer

    def __init__(self, data: Tensor | None = None, *, persistent: bool = True) -> None:
        pass

    def __reduce_ex__(self, protocol):
        return (_rebuild_buffer, (self.detach(), requires_grad_flag(self), self.persistent))


def _rebuild_buffer(data: Tensor, requires_grad: bool, persistent: bool) -> Buffer:
    buffer = Buffer(data, persistent=persistent)
    # requires_grad_ returns the buffer itself (typed as Tensor); a leaf: the data was detached when pickled.
    return buffer.requires_grad_(requires_grad)  # type: ignore[return-value]
