"""Helpers shared by the op families: broadcasting, promotion, constants, reduction axes."""

from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...ir.caches import register_cache
from ...ir.device import CPU
from ...ir.graph import Value, constant, static_constant
from ...ir.mode import MODE
from ..tensor import Tensor, apply_op  # first: tensor and autograd import each other
from ..autograd import ClosureFunction
from ..grad_mode import is_grad_enabled

__all__ = [
    "broadcast_shapes",
    "broadcast_values",
    "promote_pair",
    "promote_operands",
    "as_tensor_operand",
    "axes_constant",
    "int64_constant",
    "static_scalar",
    "same_shape",
    "normalize_axes",
    "Tensor",
    "apply_op",
]


def broadcast_shapes(*shapes: tuple) -> tuple:
    """numpy/PyTorch broadcasting of shapes; RuntimeError in PyTorch's words when they disagree."""
    first = shapes[0]
    if len(shapes) == 2:
        second = shapes[1]
        if second == first:  # the hot case: same-shaped binary op
            return first
        if len(first) >= len(second):
            longer, shorter = first, second
        else:
            longer, shorter = second, first
        offset = len(longer) - len(shorter)
        result = list(longer)
        for axis, size in enumerate(shorter):
            current = longer[offset + axis]
            if size != current:
                if current == 1:
                    result[offset + axis] = size
                elif size != 1:
                    break  # incompatible: the general walk below raises with the full message
        else:
            return tuple(result)
    if all(shape == first for shape in shapes):
        return first
    rank = max(len(shape) for shape in shapes)
    result = [1] * rank
    for shape in shapes:
        offset = rank - len(shape)
        for axis, size in enumerate(shape):
            current = result[offset + axis]
            if size == current or size == 1:
                continue
            if current == 1:
                result[offset + axis] = size
                continue
            raise RuntimeError(
                f"The size of tensor a ({current}) must match the size of tensor b ({size}) at "
                f"non-singleton dimension {offset + axis}: shapes {[list(s) for s in shapes]} do not broadcast"
            )
    return tuple(result)


def broadcast_values(values) -> tuple:
    """The broadcast shape of the input values of an elementwise node (fast for the common pairs)."""
    if len(values) == 2:
        a, b = values[0].shape, values[1].shape
        if a == b or not b:
            return a
        if not a:
            return b
        return broadcast_shapes(a, b)
    if len(values) == 3:  # Where
        return broadcast_shapes(broadcast_shapes(values[0].shape, values[1].shape), values[2].shape)
    return broadcast_shapes(*(value.shape for value in values))


def check_floating(tensor: Tensor, kernel: str) -> None:
    """Refuses an integer or bool ``tensor`` with PyTorch's NotImplementedError for a kernel built for
    floating types only (``kernel``: the name its message gives)."""
    if not tensor.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_type_name(tensor.dtype)}'")


def distinct_dims(axes: list[int]) -> list[int]:
    """``axes`` (normalized), with PyTorch's refusal of a dim named twice (``(0, -2)`` of a matrix too):
    onnxruntime would refuse some only when the graph runs, and onnxnn's kernels not at all."""
    for position, axis in enumerate(axes):
        if axis in axes[:position]:
            raise RuntimeError(f"dim {axis} appears multiple times in the list of dims")
    return axes


def normalize_axes(axes, rank: int) -> list[int]:
    """Wraps negative dims into [0, rank), with PyTorch's IndexError for out-of-range ones."""
    bound = max(rank, 1)
    result = []
    for axis in axes:
        if not -bound <= axis < bound:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], but got {axis})"
            )
        result.append(axis % bound)
    return result


def int64_constant(values) -> Value:
    """A structural int64 constant (axes, shapes, bounds), embedded in compiled graphs."""
    return static_constant(values, dtypes.int64)


def static_scalar(value: int, value_dtype: dtypes.dtype) -> Value:
    """A fixed 0-d constant of a gradient rule (a zero, a one): embedded in the graph, not fed.

    Unlike the Python scalars of user code (fed as data, so a changing learning rate reuses the
    compiled graph), a rule's constants never change, and onnxruntime can fold them.
    """
    return static_constant(value, value_dtype)


axes_constant = int64_constant


def same_shape(inputs, attrs):
    """The shape rule of every elementwise unary op: the output is like the first input."""
    first = inputs[0]
    return [(first.shape, first.dtype)]


def same_shape_pair(op_type: str, names: str, inputs) -> list:
    """The shape rule of an elementwise op of two inputs that must agree in shape and dtype (onnxnn's
    own ops, which never broadcast): the output is like them. ``names``: the two inputs' names, for
    the error ("G and Y")."""
    first, second = inputs
    if first.shape != second.shape or first.dtype is not second.dtype:
        raise RuntimeError(
            f"{op_type}: {names} must have one shape and dtype, got {first.dtype.name} of shape "
            f"{list(first.shape)} and {second.dtype.name} of shape {list(second.shape)}"
        )
    return [(first.shape, first.dtype)]


def scalar_constant(value, value_dtype: dtypes.dtype, device) -> Value:
    """A Python scalar of user code as a 0-d value fed to the graph (data, not structure)."""
    if device is CPU:
        return constant(_scalar_array(value, value_dtype), value_dtype, device)
    # On a GPU each new value would be copied there at its first run, a synchronous copy per scalar
    # and step (a batch norm's momentum factors: 60 a step in a small ResNet); equal scalars share one.
    sign = math.copysign(1.0, value) if type(value) is float else None  # -0.0 is not 0.0
    key = (value, sign, type(value), value_dtype, device)
    shared = _DEVICE_SCALARS.get(key)
    if shared is None:
        if len(_DEVICE_SCALARS) >= 1024:  # a schedule's values: new ones every step
            _DEVICE_SCALARS.clear()
        shared = _DEVICE_SCALARS[key] = constant(_scalar_array(value, value_dtype), value_dtype, device)
    else:
        trace = MODE.trace
        if trace is not None and trace.created is not None:
            trace.created.add(shared)  # made by this trace, as constant() notes every value it makes
    return shared


def _scalar_array(value, value_dtype: dtypes.dtype) -> np.ndarray:
    try:
        with np.errstate(over="ignore"):  # a float past the dtype's range is inf, as PyTorch makes it
            return np.array(value, dtype=value_dtype.numpy_dtype)
    except OverflowError:
        # An int outside a small integer dtype's range wraps around, as PyTorch casts it (a uint8
        # tensor + -2 subtracts 2); past int64's range numpy's OverflowError stands, as PyTorch's.
        return np.array(value, dtype=np.int64).astype(value_dtype.numpy_dtype)


_DEVICE_SCALARS: dict = {}
register_cache("scalar constants on devices", _DEVICE_SCALARS.clear)


def promote_operands(operands: list):
    """Converts a mix of tensors and Python scalars to tensors/constants of PyTorch's result dtype.

    Returns:
        (converted operands, result dtype). Scalars become constant values fed to the graph, so a
        changing scalar (a learning rate) never changes the compiled graph.
    """
    if len(operands) == 2:
        fast = promote_pair(operands[0], operands[1])
        if fast is not None:
            return fast
    tensors = [(op._value.dtype, len(op._value.shape)) for op in operands if isinstance(op, Tensor)]
    scalars = [op for op in operands if not isinstance(op, Tensor)]
    for scalar in scalars:
        if not isinstance(scalar, (bool, int, float, np.number, np.bool_)):
            raise TypeError(f"unsupported operand type {type(scalar).__name__!r} for a tensor operation")
    result_dtype = dtypes.result_type(tensors, scalars)
    device = next(op._value.device for op in operands if isinstance(op, Tensor))
    converted: list[Tensor | Value] = []
    for op in operands:
        if isinstance(op, Tensor):
            converted.append(op if op._value.dtype is result_dtype else op.to(result_dtype))
        else:
            converted.append(scalar_constant(op, result_dtype, device))
    return converted, result_dtype


_SCALAR_CATEGORY = {float: 2, int: 1, bool: 0}


def promote_pair(a, b):
    """The common cases of binary promotion without the general three-tier walk (record-time hot path).

    Returns ``([a, b], result dtype)`` like ``promote_operands``, or None when the general rules are needed.
    """
    a_is_tensor, b_is_tensor = type(a) is Tensor or isinstance(a, Tensor), type(b) is Tensor or isinstance(b, Tensor)
    if a_is_tensor and b_is_tensor:
        if a._value.dtype is b._value.dtype:
            return [a, b], a._value.dtype
        return None
    tensor, scalar = (a, b) if a_is_tensor else (b, a)
    category = _SCALAR_CATEGORY.get(type(scalar))
    value_dtype = tensor._value.dtype
    if category is None or category > value_dtype.category:
        return None
    constant_value = scalar_constant(scalar, value_dtype, tensor._value.device)
    return ([a, constant_value] if a_is_tensor else [constant_value, b]), value_dtype


def as_tensor_operand(value, like: "Tensor"):
    """``value`` as something an op takes: a Tensor stays, a scalar becomes a constant of ``like``'s dtype."""
    if isinstance(value, Tensor):
        return value
    return scalar_constant(value, like._value.dtype, like._value.device)


def check_tensor_operands(name: str, **operands) -> None:
    """PyTorch's TypeError where its function ``name`` takes tensors only and got something else (a
    Python number): ``operands`` by argument name, in position order."""
    for position, (argument, value) in enumerate(operands.items(), start=1):
        if not isinstance(value, Tensor):
            raise TypeError(
                f"{name}(): argument '{argument}' (position {position}) must be Tensor, not {type(value).__name__}"
            )


def with_closed_form_gradient(value: Tensor, inputs: tuple, saved: tuple, gradients, name: str) -> Tensor:
    """``value``'s values, whose inputs' gradients are ``gradients(G, *saved)`` (one per input, from the
    gradient G of ``value``): tensor ops over what the forward computed, whose history is kept, so the
    gradient is itself differentiable (``create_graph``) where a gradient through held constants would not be.

    ``saved`` are read as they are now: a later in-place change of a caller's handle does not reach them.
    """
    kept = tuple(
        tensor if tensor._grad_fn is None else Tensor._from_value(tensor._value, tensor._grad_fn, tensor._output_nr)
        for tensor in saved
    )
    output = value.detach()._value
    node = ClosureFunction(output, inputs, lambda G: gradients(G, *kept), name)
    return Tensor._from_value(output, node, 0)


def expanded_zeros(shape, dtype, device) -> Tensor:
    """Zeros of ``shape``: one zero expanded, not a tensor of them. A gradient rule's zero gradient
    (an input reached only through a sign, a mask or a comparison, whose gradient PyTorch gives as
    zeros) is this, never ``g * 0``, which an infinite ``g`` would make NaN."""
    return Tensor._zeros((), dtype, device).expand(tuple(shape))


def with_zero_gradients(result: Tensor, others: tuple, name: str) -> Tensor:
    """``result``, its gradient passed on as it is, and zeros for ``others``: inputs the value depends on
    only through signs or positions (copysign's ``other``, a masked_scatter source nothing is taken
    from), whose gradient PyTorch gives as zeros, not None, so an optimizer still steps them."""
    wanted = tuple(other for other in others if isinstance(other, Tensor) and other._requires_grad)
    if not wanted or not is_grad_enabled():
        return result
    return with_closed_form_gradient(
        result,
        (result, *wanted),
        (),
        lambda G: (G, *(Tensor._zeros(tuple(other.shape), other.dtype, other.device) for other in wanted)),
        name,
    )
