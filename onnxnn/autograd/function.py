"""Custom autograd operations: ``onnxnn.autograd.Function``, as ``torch.autograd.Function``.

A subclass defines ``forward`` (run under ``no_grad``, on Tensors, so it is recorded like any
other code) and ``backward`` (the vector-Jacobian product, in Tensor ops). ``apply`` runs forward
and gives its outputs a ``grad_fn``: an instance of the subclass's ``<Name>Backward`` node class,
which is also the ``ctx`` both methods receive. The engine asks that node for its input
gradients as it asks any node (``Function.input_gradients`` in ``runtime/autograd.py``), so the
user's backward takes part in ``retain_graph``, ``create_graph`` and ``autograd.grad`` like a
gradient rule. Its gradients are pending Tensors like a rule's. The fast path's backward replay
never replays it: it keys only recorded ops, and custom backward is Python that may do anything.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable

from ..ir.mode import MODE
from ..runtime.autograd import (
    FREED_MESSAGE,
    fit_gradients,
    gradient_edge,
    saved_version,
    modified_in_place_error,
    released_values,
)
from ..runtime.autograd import Function as _Node
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor
from ..runtime.views import VIEW_LINKS, after_write, check_view_write

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]

# What a saved tensor was to forward: how ``saved_tensors`` gives it back.
_SAVED_INPUT, _SAVED_OUTPUT, _SAVED_OTHER = range(3)


class FunctionCtx:
    """The methods ``forward`` and ``backward`` call on ``ctx`` (PyTorch's ``FunctionCtx``)."""

    __slots__ = ()
    # Instances are BackwardCFunction nodes, which keep these in their __dict__ (this mixin has no slots).
    _to_save: tuple
    _non_differentiable: set
    _dirty: tuple
    materialize_grads: bool

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Saves tensors (inputs, outputs, or None) for ``backward``, where ``ctx.saved_tensors`` returns them.

        Call it at most once, in ``forward`` (or ``setup_context``). An input or output changed
        in place after it was saved makes ``saved_tensors`` raise, as in PyTorch. A saved output
        keeps its history under ``create_graph``, so a backward written with it is differentiable.
        """
        # By position, not tensors.index(): that compares with ==, elementwise on the tensors before.
        for position, tensor in enumerate(tensors):
            if tensor is not None and not isinstance(tensor, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {position} "
                    f"is of type {type(tensor).__name__}"
                )
        self._to_save = tensors  # type: ignore[misc]  # a BackwardCFunction's __dict__ entry

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        """Marks outputs as not differentiable: they get no ``grad_fn`` and ``backward`` sees a zero
        (or None, see :meth:`set_materialize_grads`) gradient for them."""
        self._non_differentiable = {id(tensor) for tensor in tensors}  # type: ignore[misc]  # as _to_save

    def set_materialize_grads(self, value: bool) -> None:
        """Whether ``backward`` gets zeros (True, the default) or None for outputs no gradient reached."""
        self.materialize_grads = bool(value)  # type: ignore[misc]  # as _to_save

    def mark_dirty(self, *tensors: Tensor) -> None:
        """Marks inputs that ``forward`` modified in place; call it at most once, in ``forward``.

        ``forward`` must return each of them: ``apply`` returns that same tensor object, its
        autograd history now this Function's (``grad_fn``), as PyTorch's in-place ops do. A leaf
        that requires grad may not be modified so (RuntimeError, raised by ``apply`` once forward
        has run, as in PyTorch). The base of a modified view takes the view's new history too
        (PyTorch's ``CopySlices``), so gradients through the base reach this Function. Unlike
        PyTorch, the view's own ``grad_fn`` is this Function's node (PyTorch's is an
        ``AsStridedBackward0`` of the base's; the gradients are the same), and with nothing to
        record (no input requires grad, or under ``no_grad``) ``apply`` returns what forward did.

        Example::

            >>> class AddOne_(onnxnn.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x):
            ...         ctx.mark_dirty(x)
            ...         return x.add_(1)
            ...
            ...     @staticmethod
            ...     def backward(ctx, grad_output):
            ...         return grad_output
            >>> hidden = onnxnn.zeros(2, requires_grad=True) * 2
            >>> AddOne_.apply(hidden) is hidden
            True
        """
        for position, tensor in enumerate(tensors):
            if not isinstance(tensor, Tensor):
                raise RuntimeError(
                    f"mark_dirty can only accept variables, but argument {position} is of type {type(tensor).__name__}"
                )
        self._dirty = tensors  # type: ignore[misc]  # as _to_save


class BackwardCFunction(FunctionCtx, _Node):
    """The backward node of one ``Function.apply`` call (``tensor.grad_fn``), and its ``ctx``.

    Each ``Function`` subclass ``Name`` gets its own subclass ``NameBackward`` of this class,
    whose ``_forward_cls`` is ``Name``. Instances have a ``__dict__``, so ``forward`` can keep
    non-tensor state on ``ctx`` (``ctx.scale = 2``).
    """

    # The Function subclass; set on each generated <Name>Backward class, None only on this base.
    _forward_cls: type[Function] = None  # type: ignore[assignment]
    records_op = False  # its backward is the user's, never replayed
    # Set by ``release``: the saved tensors are freed, while what backward needs besides them
    # (the inputs' and outputs' shapes) is kept, so a backward that reads none still runs.
    _released = False

    def __init__(self):
        _Node.__init__(self, None, (), (), (), type(self).__name__)
        self.needs_input_grad: tuple = ()
        self._to_save: tuple = ()
        self._saved: tuple | None = None
        self._non_differentiable: set = set()
        self._dirty: tuple = ()  # the inputs forward modified in place (``mark_dirty``)
        self._input_values: tuple = ()  # the Values of the tensor inputs, one per edge
        self._tensor_positions: tuple = ()  # where the tensor inputs are among forward's arguments
        self._num_inputs = 0
        self._kept_nodes: list = []  # nodes whose outputs this node keeps saved (``_keep_for_backward``)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``, checked for in-place changes since."""
        if self._released:
            raise RuntimeError(FREED_MESSAGE)
        if self._saved is None:
            return tuple(self._to_save)  # read in forward, before apply resolved them
        tensors: list[Tensor | None] = []
        for entry in self._saved:
            if entry is None:
                tensors.append(None)
                continue
            kind, item, value, version = entry
            if version[0].value != version[1]:
                raise modified_in_place_error(value, version, self.name())
            if kind == _SAVED_OUTPUT:
                # A differentiable output has this node as its history while gradients are
                # recorded (create_graph), so a backward that uses it is differentiable.
                differentiable = item is not None and MODE.grad.enabled
                tensors.append(Tensor._from_value(value, self, item) if differentiable else Tensor._from_value(value))
            else:
                tensors.append(item)
        return tuple(tensors)

    def input_gradients(self, grad_outputs: list, create_graph: bool) -> list:
        """Calls the user's ``backward`` and checks what it returns: one gradient per forward argument."""
        results = self._forward_cls.backward(self, *grad_outputs)
        if not isinstance(results, tuple):
            results = (results,)
        expected = self._num_inputs
        if len(results) > expected and all(result is None for result in results[expected:]):
            results = results[:expected]  # trailing Nones (for defaulted arguments) are allowed
        if len(results) != expected:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients "
                f"(expected {expected}, got {len(results)})"
            )
        tensor_positions = set(self._tensor_positions)
        per_edge: list[Tensor | None] = []
        for position, gradient in enumerate(results):
            if position not in tensor_positions:
                if gradient is not None:
                    raise RuntimeError(
                        f"function {self.name()} returned a gradient different than None at "
                        f"position {position + 1}, but the corresponding forward input was not "
                        "a Variable"
                    )
                continue
            if gradient is not None:
                if not isinstance(gradient, Tensor):
                    raise TypeError(
                        f"function {self.name()} returned a gradient of type {type(gradient).__name__} "
                        f"at position {position + 1}; expected a Tensor or None"
                    )
                shape = self._input_values[len(per_edge)].shape
                if not _expandable_to(shape, gradient._value.shape):
                    raise RuntimeError(
                        f"Function {self.name()} returned an invalid gradient at index {position} - "
                        f"got {list(gradient._value.shape)} but expected shape compatible with "
                        f"{list(shape)}"
                    )
            per_edge.append(gradient)
        return fit_gradients(per_edge, self._input_values, self._edges)

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self.outputs = released_values(self.outputs)  # their shapes: zeros for outputs no gradient reached
        self._input_values = released_values(self._input_values)  # their shapes: checks and un-broadcasting
        self._saved = None
        self._to_save = ()
        for node in self._kept_nodes:
            node.saved = False
        self._kept_nodes = []

    # ------------------------------------------------------------------ what apply sets up
    def _connect(self, args: tuple) -> None:
        """Takes the edges and values of the tensor arguments (before forward, which may change them)."""
        positions: list[int] = []
        edges: list[tuple | None] = []
        values: list = []
        for position, arg in enumerate(args):
            if not isinstance(arg, Tensor):
                continue
            positions.append(position)
            values.append(arg._value)
            edges.append(gradient_edge(arg) if arg._requires_grad else None)
        self._tensor_positions = tuple(positions)
        self._input_values = tuple(values)
        self._edges = tuple(edges)
        self._num_inputs = len(args)

    def _wrap_outputs(self, args: tuple, output):
        """Gives forward's differentiable tensor outputs this node as ``grad_fn``; returns what apply returns."""
        is_tuple = isinstance(output, tuple)
        raw = output if is_tuple else (output,)
        input_ids = {id(arg) for arg in args if isinstance(arg, Tensor)}
        dirty = _checked_dirty(self._dirty, raw, input_ids)
        values: list = []  # a Value per output; None for a non-tensor output
        results: list = []
        for output_nr, item in enumerate(raw):
            if not isinstance(item, Tensor):
                values.append(None)  # a non-tensor output: backward gets None for it
                results.append(item)
                continue
            values.append(item._value)
            foreign = id(item) in input_ids or item._grad_fn is not None or item._requires_grad
            if id(item) in self._non_differentiable or not item._value.dtype.differentiable:
                results.append(Tensor._from_value(item._value) if foreign else item)
            elif id(item) in dirty:
                _rebase_history(item, self, output_nr, len(raw))
                results.append(item)
            elif foreign:
                # An input returned as it is (or a tensor with a history of its own): a new handle
                # on the same value, as PyTorch returns a view; the argument keeps its history.
                results.append(Tensor._from_value(item._value, self, output_nr))
            else:
                item._grad_fn = self
                item._output_nr = output_nr
                item._requires_grad = True
                results.append(item)
        self.outputs = tuple(values)
        self._resolve_saved(args, raw, results)
        return tuple(results) if is_tuple else results[0]

    def _resolve_saved(self, args: tuple, raw: tuple, results: list) -> None:
        """Notes what each saved tensor is (an input, an output, another tensor) and its version now."""
        inputs = {id(arg): arg for arg in args if isinstance(arg, Tensor)}
        outputs = {id(item): output_nr for output_nr, item in enumerate(raw) if isinstance(item, Tensor)}
        saved: list[tuple | None] = []
        dirty = {id(tensor) for tensor in self._dirty}
        for tensor in self._to_save:
            if tensor is None:
                saved.append(None)
                continue
            if id(tensor) in inputs and not (id(tensor) in dirty and id(tensor) in outputs):
                kind, item, holder = _SAVED_INPUT, tensor, tensor
            elif id(tensor) in outputs:
                # Kept as its Value and output number: the output's handle has this node as its
                # grad_fn, and the node keeping that handle would make a reference cycle. (A dirty
                # input is its output now, as PyTorch saves it.)
                output_nr = outputs[id(tensor)]
                holder = results[output_nr]
                differentiable = holder._grad_fn is self
                kind, item = _SAVED_OUTPUT, output_nr if differentiable else None
                _keep_for_backward(tensor._value, self)
            else:
                kind, item, holder = _SAVED_OTHER, tensor, tensor
            saved.append((kind, item, tensor._value, saved_version(holder)))
        self._saved = tuple(saved)
        self._to_save = ()


_DIRTY_NOT_RETURNED = (
    "Some elements marked as dirty during the forward method were not returned as output. "
    "The inputs that are modified inplace must all be outputs of the Function."
)
_DIRTY_VIEW_WITH_OTHER_OUTPUTS = (
    "If your Function modifies inplace an input that is a view of another Tensor, your Function cannot "
    "return more than one Tensor. This is not supported by the current autograd engine. You should "
    "either make sure the input is not a view (using .clone() for example) or make your Function only "
    "return one Tensor (potentially splitting it into two Functions: one doing the inplace that returns "
    "a single Tensor and a second one that does the other operations). You can ask on the forum "
    "https://discuss.pytorch.org/ if you need help to do this change."
)


def _checked_dirty(dirty: tuple, raw: tuple, input_ids: set) -> set:
    """The ids of the tensors ``mark_dirty`` was given, each checked to be returned, as PyTorch checks."""
    if not dirty:
        return set()
    returned = {id(item) for item in raw if isinstance(item, Tensor)}
    ids = set()
    for tensor in dirty:
        if id(tensor) not in returned:
            raise RuntimeError(_DIRTY_NOT_RETURNED)
        if id(tensor) not in input_ids:
            warnings.warn(
                "ctx.mark_dirty() received a tensor that was not an input. Only input Tensors that have "
                "been mutated should be passed to ctx.mark_dirty().",
                UserWarning,
                stacklevel=4,
            )
        ids.add(id(tensor))
    return ids


def _rebase_history(tensor: Tensor, function: BackwardCFunction, output_nr: int, num_outputs: int) -> None:
    """Makes ``function`` the history of ``tensor``, which its forward modified in place (``mark_dirty``),
    as an in-place op's write makes itself that of the tensor it writes (``TensorInPlace._assign``)."""
    if tensor._grad_fn is None and tensor._requires_grad:  # PyTorch's words for a custom Function's write
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
    link = VIEW_LINKS.get(id(tensor)) if VIEW_LINKS else None
    is_view = link is not None and link.live_base(tensor) is not None
    if is_view:
        if num_outputs > 1:
            raise RuntimeError(_DIRTY_VIEW_WITH_OTHER_OUTPUTS)
        check_view_write(tensor)  # a view of a leaf that requires grad, as an in-place op's
    old, retained = tensor._grad_fn, tensor.retains_grad
    if old is not None and old._retained and retained:
        del old._retained[tensor._output_nr]  # the retention moves to the new history, as PyTorch's
    tensor._grad = None
    tensor._grad_fn = function
    tensor._output_nr = output_nr
    tensor._requires_grad = True
    tensor._bump_version()  # PyTorch counts the marking too, after forward's own writes
    if retained:
        tensor.retain_grad()
    if VIEW_LINKS:
        # forward's write reached the base and the other views without gradients (it ran under
        # no_grad): written again, recorded, the base's history is the view's written into it
        # (PyTorch's CopySlices) and the other views are made again from that.
        with enable_grad():
            after_write(tensor)


def _keep_for_backward(value, function: BackwardCFunction) -> None:
    """Tells the planner a live backward node needs this pending value (``ir.graph.is_held``),
    so computing the output keeps it instead of computing it again in backward; ``release``
    takes the mark back."""
    node = value.node
    if value.data is None and node is not None and not node.saved:
        node.saved = True
        function._kept_nodes.append(node)


def _expandable_to(shape: tuple, desired: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``desired`` (so a gradient of ``desired`` sums back to it)."""
    if len(shape) > len(desired):
        return False
    return all(size == 1 or size == target for size, target in zip(reversed(shape), reversed(desired)))


class Function:
    """Base class for operations with a custom backward, as ``torch.autograd.Function``.

    Subclasses define static ``forward(ctx, *args, **kwargs)`` and ``backward(ctx, *grad_outputs)``
    and are called through :meth:`apply`. ``forward`` runs under ``no_grad``; its outputs get a
    ``grad_fn`` whose backward calls ``backward`` with one gradient per output (None for non-tensor
    outputs), which returns one gradient per argument of ``forward`` (None for non-tensors and
    inputs that need none). Alternatively define ``forward(*args)`` without ``ctx`` and a static
    ``setup_context(ctx, inputs, output)``.

    ``ctx`` offers :meth:`~FunctionCtx.save_for_backward` / ``ctx.saved_tensors``,
    ``ctx.needs_input_grad`` (a bool per argument), :meth:`~FunctionCtx.mark_non_differentiable` and
    :meth:`~FunctionCtx.set_materialize_grads`; other attributes can be set on it freely.

    Example::

        >>> class Exp(onnxnn.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         result = x.exp()
        ...         ctx.save_for_backward(result)
        ...         return result
        ...
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         (result,) = ctx.saved_tensors
        ...         return grad_output * result
        >>> x = onnxnn.tensor([0.0, 1.0], requires_grad=True)
        >>> Exp.apply(x).sum().backward()
        >>> x.grad
        tensor([1.0000, 2.7183])
    """

    _backward_cls: type[BackwardCFunction] = BackwardCFunction

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The node class of this Function: grad_fn.name() is "<Name>Backward", as in PyTorch.
        cls._backward_cls = type(
            f"{cls.__name__}Backward",
            (BackwardCFunction,),
            {"_forward_cls": cls, "__module__": cls.__module__, "__qualname__": f"{cls.__qualname__}Backward"},
        )

    def __call__(self, *args: Any, **kwargs: Any):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use "
            "new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
        )

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        """Computes the outputs from the arguments (under ``no_grad``); subclasses must define it."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> Any:
        """Optional: fills ``ctx`` from the inputs and output, for a ``forward`` that takes no ``ctx``."""
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """Computes the gradients of the arguments from those of the outputs; subclasses must define it."""
        raise NotImplementedError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Runs ``forward`` on the arguments and connects its outputs to autograd.

        Keyword arguments that name parameters of ``forward`` count as its arguments (backward
        returns gradients for them too); other keyword arguments are passed through and must not
        require grad.
        """
        uses_setup_context = cls.setup_context is not Function.setup_context
        if kwargs or uses_setup_context:
            args, kwargs = _bind_arguments(cls, args, kwargs, uses_setup_context)
        ctx = cls._backward_cls()
        recording = MODE.grad.enabled and any(isinstance(arg, Tensor) and arg._requires_grad for arg in args)
        if recording and any(isinstance(value, Tensor) and value._requires_grad for value in kwargs.values()):
            raise RuntimeError(
                f"{cls.__name__}.apply: a tensor that requires grad was passed as a keyword-only "
                "argument of forward; pass it positionally so that backward can return its gradient"
            )
        ctx.needs_input_grad = tuple(recording and isinstance(arg, Tensor) and arg._requires_grad for arg in args)
        if recording:
            ctx._connect(args)
        with no_grad():
            if uses_setup_context:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        if not recording:
            if ctx._dirty:  # checked even with nothing to record, as PyTorch checks
                input_ids = {id(arg) for arg in args if isinstance(arg, Tensor)}
                _checked_dirty(ctx._dirty, output if isinstance(output, tuple) else (output,), input_ids)
            return output
        return ctx._wrap_outputs(args, output)


def _bind_arguments(cls: type[Function], args: tuple, kwargs: dict, uses_setup_context: bool) -> tuple[tuple, dict]:
    """Moves keyword arguments that name ``forward``'s positional parameters into ``args``.

    With ``setup_context`` defaults are bound too, as PyTorch does (its ``inputs`` are complete).
    """
    signature = inspect.signature(cls.forward)
    if uses_setup_context:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return bound.args, bound.kwargs
    bound = signature.bind(None, *args, **kwargs)  # None stands for ctx
    return bound.args[1:], bound.kwargs


class _DelayedError(Function):
    """An identity whose backward raises: what ``once_differentiable`` puts on its results."""

    @staticmethod
    def forward(ctx, message: str, *tensors: Tensor):
        ctx.message = message
        return tensors

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise RuntimeError(ctx.message)


def once_differentiable(backward: Callable) -> Callable:
    """Decorates a ``backward`` that is not itself differentiable: it runs under ``no_grad``, and
    differentiating its results (double backward) raises instead of giving wrong gradients."""

    @functools.wraps(backward)
    def wrapper(ctx, *grad_outputs):
        with no_grad():
            results = backward(ctx, *grad_outputs)
        if not MODE.grad.enabled:
            return results
        if not any(isinstance(gradient, Tensor) and gradient._requires_grad for gradient in grad_outputs):
            return results
        single = not isinstance(results, tuple)
        results = (results,) if single else results
        # Leaves that require grad, so the error node gets recorded on them.
        marked = [
            Tensor._from_value(result._value, requires_grad=True) if isinstance(result, Tensor) else result
            for result in results
        ]
        wrapped = _DelayedError.apply(
            "trying to differentiate twice a function that was marked with @once_differentiable", *marked
        )
        return wrapped[0] if single else wrapped

    return wrapper
