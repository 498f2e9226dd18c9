"""Tensor: a lazy handle to a value in the recorded ONNX graph, with PyTorch's autograd surface.

Ops record nodes at once (see ``apply_op``); values are computed when needed: ``.numpy()``,
``.item()``, ``print``, ``bool()``, ``backward()``. In-place methods rebind the handle to a new
value and bump a version counter (DESIGN principle 5).
"""

from __future__ import annotations

import copy
import threading
import weakref
from operator import attrgetter

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir.device import CPU
from ..ir.device import device as _Device  # aliased: parameters here are named device
from ..ir.graph import Value, constant, hold
from ..ir.memory_formats import contiguous_format
from ..ir.mode import MODE
from ..ir.registry import non_differentiable
from .aliases import leave_group
from .autocast_scope import autocast_arguments, outside_autocast  # noqa: F401  (imported from here across the package)
from .views import (
    VIEW_LINKS,
    detached_alias,
    forget_links,
    install_view_ops,
    is_contiguous,
    same_storage,
    share_storage,
    view_root,
)
from .autograd import AccumulateGrad, Function, RemovableHandle, VersionCounter, _HookDict, add_hook, shown
from .backward import run_backward
from .depth import MAX_PENDING_DEPTH, after_recording
from .printing import format_tensor
from .recording import different_devices, record_scanned
from .tensor_api import TensorAPI
from .tensor_conversions import TensorConversions
from .tensor_in_place import TensorInPlace
from .tensor_methods import TensorMethods

__all__ = ["Tensor", "Size", "apply_op", "autocast_arguments"]


class Size(tuple):
    """The shape of a tensor: a tuple that prints as ``onnxnn.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"onnxnn.Size({list(self)})"

    def numel(self) -> int:
        result = 1
        for size in self:
            result *= size
        return result


def _torch_name(op_type: str) -> str:
    return f"{op_type}Backward0"


def apply_op(
    op_type: str,
    inputs: tuple,
    attrs: dict | None = None,
    name: str | None = None,
    domain: str = "",
    num_outputs: int | None = None,
    opset: int | None = None,
):
    """Records ``op_type`` over tensors (or constant Values) and wraps the outputs as Tensors.

    When gradients are enabled and an input requires grad, the outputs get a ``grad_fn`` that
    keeps the node for backward. ``num_outputs`` limits the outputs to the first ones (ONNX
    optional outputs). ``opset`` records a default-domain op at a newer opset than onnxnn's
    (an imported node that means something only that opset defines). Returns one Tensor, or a
    tuple for multi-output ops.
    """
    autocast = MODE.autocast
    if autocast is not None:
        # onnxnn.amp's policy (the runtime never imports amp): the op's floating inputs cast to its
        # autocast dtype, as recorded Cast ops so that gradients and exported graphs keep them.
        inputs = autocast(op_type, inputs, domain, name)
    # One pass over the inputs finds their values, whether any requires grad, their device and the
    # deepest pending node (graph.record's scan, merged here because this runs for every op).
    values: list[Value | None] = []
    append = values.append
    requires_grad = False
    where = None
    depth = 0
    for item in inputs:
        if item is None:
            append(None)
            continue
        if type(item) is Value:
            value = item
        else:
            value = item._value
            if item._requires_grad:
                requires_grad = True
        append(value)
        if value.static is None:
            if where is None:
                where = value.device
            elif value.device is not where:
                raise different_devices(op_type, where, value.device)
            if value.data is None and value.node.depth > depth:
                depth = value.node.depth
    outputs = record_scanned(op_type, tuple(values), attrs, domain, num_outputs, where, depth, opset)
    function = None
    function_needed = requires_grad and MODE.grad.enabled and (domain, op_type) not in _NON_DIFFERENTIABLE
    if function_needed:
        edges: list[tuple | None] = []
        versions: list[tuple[VersionCounter, int] | None] = []
        for item in inputs:
            if item is None or type(item) is Value or not item._requires_grad:
                edges.append(None)
                versions.append(None)
                continue
            edges.append(
                (item._grad_fn, item._output_nr) if item._grad_fn is not None else (item._grad_accumulator(), 0)
            )
            counter = item._version_counter
            if counter is None:
                counter = item._version_counter = VersionCounter()
            versions.append((counter, counter.value))
    node = outputs[0].node
    if function_needed:
        function = Function(node, outputs, tuple(edges), tuple(versions), name or _torch_name(op_type))
        node.saved = True
    if MODE.eager or node.depth > MAX_PENDING_DEPTH:
        after_recording(node, outputs)
    if len(outputs) == 1:
        # Tensor._from_value, inlined: this line runs for every op.
        value = outputs[0]
        tensor = _new_object(Tensor)
        tensor._value = value
        tensor._grad_fn = grad_fn = function if value.dtype.differentiable else None
        tensor._output_nr = 0
        tensor._requires_grad = grad_fn is not None
        tensor._version_counter = None
        value.holder = _weak_reference(tensor)
        return tensor
    return tuple(
        [
            Tensor._from_value(value, function if value.dtype.differentiable else None, index)
            for index, value in enumerate(outputs)
        ]
    )


_new_object = object.__new__
_ACCUMULATOR_CREATION = threading.Lock()  # see Tensor._grad_accumulator
_weak_reference = weakref.ref
# What a tensor's __dict__ holds for autograd (see Tensor's class-level defaults): copies and pickles leave it behind.
_AUTOGRAD_STATE = frozenset(("_grad", "_accumulator", "_backward_hooks", "_post_accumulate_grad_hooks"))
_NON_DIFFERENTIABLE = non_differentiable.table  # bound once: apply_op runs for every op


class Tensor(TensorMethods, TensorAPI, TensorConversions, TensorInPlace):
    """A multi-dimensional array whose operations are recorded as ONNX nodes and run lazily.

    Create tensors with :func:`onnxnn.tensor`, :func:`onnxnn.zeros`, :func:`onnxnn.randn`, ...

    Example::

        >>> x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> x.grad
        tensor([2., 4.])
    """

    __slots__ = ("_value", "_grad_fn", "_output_nr", "_requires_grad", "_version_counter", "__dict__", "__weakref__")
    _value: Value
    _grad_fn: Function | None
    _output_nr: int
    _requires_grad: bool
    _version_counter: VersionCounter | None

    # Rarely set per tensor: class-level defaults, so creating a tensor (on every op) sets only the
    # slots above; an assignment stores the attribute in the instance's own dict. (The version
    # counter is a slot: every input saved for backward gets one, and a dict per tensor costs more.)
    # ``_grad`` is what the ``grad`` property reads and checks writes into; the engine writes it directly.
    _grad: Tensor | None = None
    _accumulator: weakref.ref[AccumulateGrad] | None = None
    _backward_hooks: _HookDict | None = None
    _post_accumulate_grad_hooks: _HookDict | None = None  # run after a backward accumulated into .grad

    # Makes numpy defer to Tensor's reflected operators (``np_array * tensor`` gives a Tensor).
    __array_priority__ = 1000

    def __init__(self, *args, **kwargs):
        raise TypeError("create tensors with onnxnn.tensor(...), onnxnn.zeros(...), onnxnn.empty(...) and friends")

    @classmethod
    def _from_value(
        cls, value: Value, grad_fn: Function | None = None, output_nr: int = 0, requires_grad: bool = False
    ) -> "Tensor":
        tensor = object.__new__(cls)
        tensor._value = value
        tensor._grad_fn = grad_fn
        tensor._output_nr = output_nr
        tensor._requires_grad = requires_grad or grad_fn is not None
        tensor._version_counter = None
        if value.data is None:
            hold(value, tensor, rebound=False)
        return tensor

    @classmethod
    def _from_array(cls, array: np.ndarray, dtype=None, device=CPU, requires_grad: bool = False) -> "Tensor":
        value_dtype = dtype or _dtypes.as_dtype(array.dtype)
        return cls._from_value(constant(array, value_dtype, device), requires_grad=requires_grad)

    @classmethod
    def _full(cls, shape: tuple, fill, dtype, device=CPU) -> "Tensor":
        if type(fill) is int and fill == 0:
            # calloc'd: a large zero array's pages are mapped when first written, not filled now
            # (an optimizer's zero states, a fresh process's first step: 3 ms for an MLP's Adam).
            return cls._from_array(np.zeros(shape, dtype.numpy_dtype), dtype, device)
        return cls._from_array(np.full(shape, fill, dtype.numpy_dtype), dtype, device)

    @classmethod
    def _zeros(cls, shape: tuple, dtype, device=CPU) -> "Tensor":
        return cls._full(shape, 0, dtype, device)

    # ----------------------------------------------------------------- metadata
    @property
    def shape(self) -> Size:
        return Size(self._value.shape)

    def size(self, dim: int | None = None):
        """The shape as a ``Size``, or the size of dimension ``dim``."""
        if dim is None:
            return Size(self._value.shape)
        return self._value.shape[self._normalize_dim(dim)]

    @property
    def dtype(self) -> _dtypes.dtype:
        return self._value.dtype

    @property
    def device(self) -> _Device:
        return self._value.device

    @property
    def is_cuda(self) -> bool:
        return self._value.device.type == "cuda"

    @property
    def ndim(self) -> int:
        return len(self._value.shape)

    def dim(self) -> int:
        return len(self._value.shape)

    def numel(self) -> int:
        result = 1
        for size in self._value.shape:
            result *= size
        return result

    nelement = numel

    def element_size(self) -> int:
        return self._value.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self._value.dtype.differentiable

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements are row-major consecutive in the storage: a view's may not be
        (``x.t()``, ``x[:, 0]``), as PyTorch's. (Every other format names the same layout here.)"""
        if memory_format is None or memory_format is contiguous_format:
            return is_contiguous(self)
        return True

    def _normalize_dim(self, dim: int, rank: int | None = None) -> int:
        rank = len(self._value.shape) if rank is None else rank
        bound = max(rank, 1)
        if not -bound <= dim < bound:
            raise IndexError(
                f"Dimension out of range (expected to be in range of [{-bound}, {bound - 1}], but got {dim})"
            )
        return dim % bound

    # ----------------------------------------------------------------- autograd
    @property
    def requires_grad(self) -> bool:
        if self._requires_grad:
            return True
        # A view follows its root's flag, as PyTorch's (``v = x[:2]; x.requires_grad_()``).
        root = view_root(self, differentiable=True) if VIEW_LINKS else None
        return root is not None and root._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if flag and self._grad_fn is not None:
            # ``requires_grad_()`` accepts a non-leaf (it requires grad already); assigning the
            # attribute does not, as in PyTorch.
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self.requires_grad_(flag)

    @property
    def _base(self) -> "Tensor | None":
        """The root tensor this view was made from (while it lives: onnxnn's links are weak), else None."""
        return view_root(self) if VIEW_LINKS else None

    def _is_view(self) -> bool:
        """Whether this tensor is a view of a live tensor (``_base`` is not None)."""
        return self._base is not None

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Sets whether autograd records operations on this (leaf) tensor; returns self."""
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to "
                    "use a computed variable in a subgraph that doesn't require differentiation "
                    "use var_no_grad = var.detach()."
                )
            return self
        if requires_grad and self._value.dtype.category != 2:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self._requires_grad = bool(requires_grad)
        return self

    def _set_grad(self, gradient: "Tensor | None") -> None:
        if gradient is not None:
            if not isinstance(gradient, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None but got grad of type {type(gradient).__name__}"
                )
            value, own = gradient._value, self._value
            # One comparison of each for the common case: optimizers and the backward replay assign here.
            if value.dtype is not own.dtype or value.shape != own.shape or value.device is not own.device:
                raise _grad_mismatch(own, value)
            if gradient is self:
                raise RuntimeError("can't assign Variable as its own grad")
        self._grad = gradient

    def _delete_grad(self) -> None:
        self._grad = None

    # The read is attrgetter's, in C: optimizers and the engine read ``.grad`` of every parameter
    # on every step, and a Python getter would cost each read a frame.
    grad = property(
        attrgetter("_grad"),
        _set_grad,
        _delete_grad,
        doc="""The gradient that ``backward()`` accumulated into this tensor, or None.

        None until a backward computes a gradient for it. It may be assigned a tensor of the same
        dtype, shape and device as this one, or None; ``del tensor.grad`` sets it to None.

        Raises:
            TypeError: the assigned value is neither a Tensor nor None.
            RuntimeError: the assigned tensor differs in dtype, shape or device.
        """,
    )

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self) -> Function | None:
        return shown(self._grad_fn)  # of the class named after it (MulBackward0), as PyTorch's

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        return 0 if self._version_counter is None else self._version_counter.value

    def _grad_accumulator(self) -> AccumulateGrad:
        accumulator = self._accumulator() if self._accumulator is not None else None
        if accumulator is None:
            # One accumulator per leaf at a time, even when threads record at once: a backward finds a
            # leaf's edges by its accumulator (``backward(inputs=...)`` asks for it), so two made at
            # once would leave one thread's gradients at an accumulator nobody accumulates.
            with _ACCUMULATOR_CREATION:
                accumulator = self._accumulator() if self._accumulator is not None else None
                if accumulator is None:
                    accumulator = AccumulateGrad(self)
                    self._accumulator = weakref.ref(accumulator)
        return accumulator

    def backward(
        self, gradient=None, retain_graph: bool | None = None, create_graph: bool = False, inputs=None
    ) -> None:
        """Computes the gradient of this tensor with respect to graph leaves, accumulating into ``.grad``.

        Args:
            gradient: the gradient of some scalar with respect to this tensor; required unless it
                has one element.
            retain_graph: keep the graph's saved values for another backward (default: create_graph).
            create_graph: record the backward pass itself, for higher-order derivatives.
            inputs: only accumulate into these tensors' ``.grad``; a non-leaf among them retains its
                gradient from then on (:meth:`retain_grad`).
        """
        run_backward([self], [gradient], retain_graph, create_graph, inputs)

    def register_hook(self, hook) -> RemovableHandle:
        """Registers ``hook(grad) -> Tensor | None`` called with this tensor's gradient during backward."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            return self._grad_fn._add_tensor_hook(self._output_nr, hook)
        if self._backward_hooks is None:
            self._backward_hooks = _HookDict()
        return add_hook(self._backward_hooks, hook)

    def register_post_accumulate_grad_hook(self, hook) -> RemovableHandle:
        """Registers ``hook(tensor)``, run each time a backward has accumulated into this leaf's ``.grad``.

        The hook sees the tensor with its new ``.grad`` (an optimizer step per parameter, run as
        the backward reaches it, is the usual use) and must return None. ``autograd.grad``, which
        accumulates nothing, does not run it.

        Returns:
            A handle whose ``remove()`` unregisters the hook.

        Example::

            >>> handle = weight.register_post_accumulate_grad_hook(lambda p: p.grad.clamp_(-1, 1))
        """
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_accumulate_grad_hooks is None:
            self._post_accumulate_grad_hooks = _HookDict()
        return add_hook(self._post_accumulate_grad_hooks, hook)

    def retain_grad(self) -> None:
        """Makes backward fill ``.grad`` of this non-leaf tensor too."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None:
            return
        function = self._grad_fn
        if function._retained is None:
            function._retained = {}
        function._retained[self._output_nr] = weakref.ref(self)

    @property
    def retains_grad(self) -> bool:
        function = self._grad_fn
        return bool(
            function is not None
            and function._retained
            and function._retained.get(self._output_nr) is not None
            and function._retained[self._output_nr]() is self
        )

    def detach(self) -> "Tensor":
        """A new tensor with the same value and no autograd history, sharing the value as PyTorch's
        shares the storage: an in-place write through either changes both (``aliases.py``; of a
        view, the view's base too: ``views.py``)."""
        return detached_alias(self)

    def _detached(self) -> "Tensor":
        """A new tensor of the same value without history, sharing nothing: a write changes it alone."""
        return Tensor._from_value(self._value)

    def detach_(self) -> "Tensor":
        self._grad_fn = None
        self._requires_grad = False
        return self

    @property
    def data(self) -> "Tensor":
        """The value as a tensor outside autograd, sharing it: an in-place write through either changes both.

        Example::

            >>> with onnxnn.no_grad():
            ...     layer.weight.data.normal_(0.0, 0.02)   # initializes layer.weight
        """
        return detached_alias(self)

    @data.setter
    def data(self, other: "Tensor") -> None:
        # Checked before anything changes: a refused assignment leaves the links to views as they were.
        if not isinstance(other, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(other).__name__}")
        if self._requires_grad and not other._value.dtype.is_floating_point:
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        if same_storage(self, other):  # ``p.data -= x`` is ``p.data = p.data.__isub__(x)``: nothing moves
            return
        leave_group(self)  # other's storage: the tensors that shared the old one keep it
        forget_links(self)
        self._value = other._value
        hold(self._value, self)
        share_storage(other, self)  # as PyTorch's: ``dec.weight.data = enc.weight.data`` ties them

    def _new_handle(self, backward_name: str) -> "Tensor":
        """A tensor of its own on this one's value, with an Identity (gradient function
        ``backward_name``) only where autograd needs a node for it: what a view that changes nothing
        returns (``x.view(x.shape)``, ``x.chunk(1)[0]``; ``views.py`` links it like any view), so that
        hooks, ``retain_grad`` and in-place shape changes act on it alone, and ``to(copy=True)``."""
        if self._requires_grad and MODE.grad.enabled:
            return apply_op("Identity", (self,), None, backward_name)
        return Tensor._from_value(self._value)

    # ----------------------------------------------------------------- sequences, printing, copies
    def __len__(self) -> int:
        if not self._value.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._value.shape[0]

    def __iter__(self):
        if not self._value.shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    # Hashed by identity, as PyTorch's tensors (``==`` compares elementwise). The C slot of
    # object is used because tensors key optimizer state, looked up on every step.
    __hash__ = object.__hash__

    def __repr__(self, *, tensor_contents=None) -> str:
        suffixes = []
        if self.device.type != "cpu":
            suffixes.append(f"device='{self.device}'")
        data = self._realized_data()
        value_dtype, default = self._value.dtype, _dtypes.get_default_dtype()
        if value_dtype not in (default, _dtypes.int64, _dtypes.bool) or (data.size == 0 and value_dtype is not default):
            suffixes.append(f"dtype={value_dtype!r}")
        if self._grad_fn is not None:
            suffixes.append(f"grad_fn=<{self._grad_fn.name()}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return format_tensor(data, suffixes=suffixes)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor, (np.array(self._realized_data()), self._value.dtype.name, self._requires_grad))

    def _own_attributes(self) -> dict:
        """The attributes in this tensor's ``__dict__`` that copies and pickles keep (a Buffer's
        ``persistent``, a user's own), without autograd's state (``.grad``, the gradient accumulator,
        tensor hooks), which PyTorch keeps outside the Python object."""
        return {name: item for name, item in self.__dict__.items() if name not in _AUTOGRAD_STATE}

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"
            )
        if id(self) in memo:
            return memo[id(self)]
        # As PyTorch's: a leaf of its own (no hooks, no link to this tensor's gradient accumulator,
        # through which a backward would reach this tensor's .grad), with a copy of .grad and of
        # the other attributes. (Parameter makes a bare new parameter instead, as PyTorch's.)
        copied = type(self)._from_value(self._value, requires_grad=self._requires_grad)
        memo[id(self)] = copied
        if self._grad is not None:
            copied._grad = self._grad.__deepcopy__(memo)
        if self.__dict__:
            copied.__dict__.update(copy.deepcopy(self._own_attributes(), memo))
        return copied


install_view_ops(Tensor)


def _grad_mismatch(own: Value, value: Value) -> RuntimeError:
    """PyTorch's error for a ``.grad`` assigned a tensor (of Value ``value``) unlike its own (``own``)."""
    if value.dtype is not own.dtype:
        return RuntimeError(
            f"attempting to assign a gradient with dtype {value.dtype!r} to a tensor with dtype {own.dtype!r}. "
            "Please ensure that the gradient and the tensor have the same dtype"
        )
    if value.device is not own.device:
        return RuntimeError(
            f"attempting to assign a gradient located on device '{value.device}' to a tensor located on "
            f"device '{own.device}'. Please ensure that the gradient and the tensor are on the same device"
        )
    return RuntimeError(
        f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
        f"'{list(own.shape)}'. Please ensure that the gradient and the tensor are the same size"
    )


def _rebuild_tensor(array: np.ndarray, dtype_name: str, requires_grad: bool) -> Tensor:
    return Tensor._from_array(np.asarray(array, order="C"), _dtypes.as_dtype(dtype_name), requires_grad=requires_grad)
