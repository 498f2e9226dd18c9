"""The backward graph: its nodes (``Function``, ``AccumulateGrad``), what a gradient rule sees of its
forward node (``GradContext``), hooks and the version counters of in-place changes.

Each op recorded on tensors that require grad gets a ``Function`` (its ``grad_fn``) that keeps
the forward ``Node``, its output values and the edges to the functions of its inputs. A recorded
op's function runs the gradient rule of its op_type, a custom ``autograd.Function``'s (a
subclass) runs the user's backward. Rules emit ordinary tensor ops, so the whole backward pass is
recorded lazily as ONNX nodes (with ``create_graph=True`` it is itself differentiable).
``runtime/backward.py`` walks these nodes.
"""

from __future__ import annotations

import traceback
import weakref
from collections import OrderedDict

from ..ir import dtypes as _dtypes
from ..ir.mode import MODE
from ..ir.registry import gradient_rules
from . import tensor as _tensor  # circular (tensor imports autograd): attributes are read at call time

__all__ = [
    "Function",
    "AccumulateGrad",
    "ClosureFunction",
    "GradContext",
    "VersionCounter",
    "gradient_edge",
    "saved_version",
    "RemovableHandle",
    "add_hook",
    "fit_gradients",
    "sum_to_shape",
    "modified_in_place_error",
    "FREED_MESSAGE",
    "ReleasedNode",
    "ReleasedValue",
    "shown",
]


class VersionCounter:
    """Counts in-place changes of a tensor, so backward can refuse stale saved values."""

    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


def saved_version(tensor) -> tuple:
    """``(counter, version)`` of ``tensor`` as a backward function saves it, its counter made on first
    use (``tensor.apply_op`` inlines it: it runs for every op)."""
    counter = tensor._version_counter
    if counter is None:
        counter = tensor._version_counter = VersionCounter()
    return counter, counter.value


def gradient_edge(tensor) -> tuple | None:
    """The ``(function, output_nr)`` edge that gradients for ``tensor`` flow into: its ``grad_fn``'s, its
    accumulator's where it is a leaf that requires grad, else None (``tensor.apply_op`` inlines it)."""
    if tensor._grad_fn is not None:
        return tensor._grad_fn, tensor._output_nr
    if tensor._requires_grad:
        return tensor._grad_accumulator(), 0
    return None


class RemovableHandle:
    """Removes a hook from the dict it was registered in (``handle.remove()``), like PyTorch's."""

    _next_id = 0

    def __init__(self, *hooks_dicts: dict, extra_dict: dict | list | None = None):
        # PyTorch's form is (hooks_dict, extra_dict=dict or list of dicts); onnxnn's own callers
        # pass every dict positionally. Removing takes the id out of all of them.
        extra = [extra_dict] if isinstance(extra_dict, dict) else list(extra_dict or ())
        self._refer_to([*hooks_dicts, *extra])
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def hooks_dict_ref(self) -> dict | None:
        """The dict the hook was registered in, or None once it is gone (PyTorch's weak reference)."""
        return self.hooks_dicts[0]() if self.hooks_dicts else None

    def _refer_to(self, hooks_dicts) -> None:
        self.hooks_dicts = [weakref.ref(d) if _weakrefable(d) else (lambda d=d: d) for d in hooks_dicts]

    # Pickled with the dicts themselves (a module's pickle holds them anyway), as PyTorch's handle is,
    # so a module holding handles (a lazy module's initialization hook) pickles; a dead one stays dead.
    def __getstate__(self):
        return tuple(reference() for reference in self.hooks_dicts), self.id

    def __setstate__(self, state) -> None:
        hooks_dicts, self.id = state
        self._refer_to([_HookDict() if hooks is None else hooks for hooks in hooks_dicts])
        RemovableHandle._next_id = max(RemovableHandle._next_id, self.id + 1)

    def remove(self) -> None:
        for reference in self.hooks_dicts:
            hooks = reference()
            if hooks is not None and self.id in hooks:
                del hooks[self.id]

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc_info) -> None:
        self.remove()


def add_hook(hooks: dict, hook) -> RemovableHandle:
    """Adds ``hook`` to the ordered dict ``hooks`` under a new handle's id and returns the handle."""
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
        return True
    except TypeError:
        return False


class _HookDict(OrderedDict):
    """An OrderedDict that weak references can point to (plain dicts cannot be weakly referenced)."""


# In anomaly mode (``onnxnn.autograd.detect_anomaly``), the stack of the forward call that made
# each backward node, which a failing backward shows. Weakly keyed: a released graph forgets them.
FORWARD_STACKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Function:
    """The backward node of one recorded op (what ``tensor.grad_fn`` returns).

    The engine asks each node for its input gradients (``input_gradients``) and frees it
    (``release``) through methods, so other kinds of node (``onnxnn.autograd.Function``'s, whose
    backward is user Python) subclass this one and need no special case in the engine.
    """

    __slots__ = (
        "node",
        "outputs",
        "_edges",
        "_saved_versions",
        "_name",
        "_hooks",
        "_pre_hooks",
        "_tensor_hooks",
        "_retained",
        "_metadata",
        "__weakref__",
    )

    # Whether the engine passes zeros (True) or None (False) for outputs no gradient reached.
    # Recorded ops' rules expect tensors; a custom Function may ask for None instead.
    materialize_grads = True

    def __init__(self, node, outputs: tuple, next_functions: tuple, saved_versions: tuple, name: str):
        self.node = node
        self.outputs: tuple | None = outputs
        self._edges = next_functions  # per input: (function, output_nr), or None (no gradient)
        self._saved_versions = saved_versions
        self._name = name
        self._hooks: _HookDict | None = None
        self._pre_hooks: _HookDict | None = None
        self._tensor_hooks: dict[int, _HookDict] | None = None
        self._retained: dict[int, weakref.ref] | None = None
        if MODE.anomaly:
            FORWARD_STACKS[self] = traceback.format_stack()[:-1]

    # Whether the node is a recorded op's, whose backward is its gradient rule (the fast path
    # replays only those); False on the subclasses for other kinds of node.
    records_op = True

    def name(self) -> str:
        return self._name

    @property
    def metadata(self) -> dict:
        """A dict for the user's own data about this node, as PyTorch's ``Node.metadata``."""
        try:
            return self._metadata
        except AttributeError:  # made on first use: nodes are made for every recorded op
            self._metadata: dict = {}
            return self._metadata

    @property
    def next_functions(self) -> tuple:
        """PyTorch's edges to the nodes behind, one ``(function, output_nr)`` per input: ``(None, 0)``
        where the input takes no gradient (``for function, index in node.next_functions`` works)."""
        return tuple(_NO_EDGE if edge is None else (shown(edge[0]), edge[1]) for edge in self._edges)

    def __repr__(self) -> str:
        return f"<{self._name} object at {hex(id(self))}>"

    def register_hook(self, hook) -> RemovableHandle:
        """Registers ``hook(grad_inputs, grad_outputs)`` run after this node's gradient; may return new grad_inputs."""
        if self._hooks is None:
            self._hooks = _HookDict()
        return add_hook(self._hooks, hook)

    def register_prehook(self, hook) -> RemovableHandle:
        """Registers ``hook(grad_outputs)`` run before this node's gradient; may return new grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = _HookDict()
        return add_hook(self._pre_hooks, hook)

    def _add_tensor_hook(self, output_nr: int, hook) -> RemovableHandle:
        if self._tensor_hooks is None:
            self._tensor_hooks = {}
        hooks = self._tensor_hooks.setdefault(output_nr, _HookDict())
        return add_hook(hooks, hook)

    def input_gradients(self, grad_outputs: list, create_graph: bool) -> list:
        """The gradients of this node's inputs from those of its outputs, one per edge.

        Runs the gradient rule of the node's op; what it returns is fitted to the inputs (see
        :func:`fit_gradients`).
        """
        node = self.node
        rule = _GRADIENT_RULES.get((node.domain, node.op_type)) or gradient_rules.lookup(node.op_type, node.domain)
        context = GradContext(self, create_graph)
        input_grads = rule(context, *grad_outputs)
        if not isinstance(input_grads, tuple):
            input_grads = tuple(input_grads) if isinstance(input_grads, list) else (input_grads,)
        if create_graph and context.read is not None:
            input_grads = tuple(_linked(g, context.read) for g in input_grads)
        return fit_gradients(input_grads, node.inputs, self._edges)

    def release(self) -> None:
        """Frees the values backward saved (after a backward without ``retain_graph``).

        The node keeps what its op is and the shapes, dtypes and devices of its inputs and outputs
        (a ``ReleasedNode``), so a later backward through it still works where its gradient rule
        reads none of the freed values, as PyTorch's nodes that saved no tensors do; a rule that
        reads one (``ctx.input(i)``, ``ctx.output(i)``) raises PyTorch's error.
        """
        node = self.node
        if node is None:
            self.outputs = None  # a node whose backward needs all it kept (ClosureFunction)
        elif type(node) is not ReleasedNode:
            node.saved = False
            released = ReleasedNode(node, self.outputs or ())
            self.node = released
            self.outputs = released.outputs


def shown(function):
    """``function`` (a node or None) as the user sees it (``grad_fn``, ``next_functions``): a
    recorded op's node of the class named after it, as PyTorch's (``MulBackward0``), since tools
    print ``type(grad_fn).__name__``.

    Nodes are made as plain ``Function``s and take their named class when first shown: the
    engine's and the fast path's loops read the attributes of every node, which Python's inline
    caches serve fastest while the nodes they see are of one class.
    """
    kind = type(function)
    if kind is Function:
        function.__class__ = _RECORDED_OP_CLASSES[function._name]
    elif kind is ClosureFunction:
        function.__class__ = _CLOSURE_CLASSES[function._name]
    return function


class _NamedClasses(dict):
    """A subclass of ``base`` per node name (``MulBackward0``), made on first use."""

    def __init__(self, base: type):
        super().__init__()
        self.base = base

    def __missing__(self, name: str) -> type:
        kind = type(name, (self.base,), {"__slots__": (), "__module__": self.base.__module__})
        self[name] = kind
        return kind


_RECORDED_OP_CLASSES = _NamedClasses(Function)


class ReleasedValue:
    """What a released node keeps of a non-constant input or output: its shape, dtype and device.

    Its contents are gone: reading them (a gradient rule using the value as data) raises
    PyTorch's error for a backward through a freed graph.
    """

    __slots__ = ("shape", "dtype", "device")
    static = None

    def __init__(self, value):
        self.shape = value.shape
        self.dtype = value.dtype
        self.device = value.device

    @property
    def data(self):
        raise RuntimeError(FREED_MESSAGE)

    node = _value = data

    def __repr__(self) -> str:
        return f"ReleasedValue(shape={self.shape}, dtype={self.dtype.name})"


class ReleasedNode:
    """What a released ``Function`` keeps of its forward node: the op, its attributes, its static
    constants (axes, shapes: structure, not data) and ``ReleasedValue``s for the other values."""

    __slots__ = ("op_type", "domain", "attrs", "num_outputs", "opset", "inputs", "outputs", "saved")

    def __init__(self, node, outputs: tuple):
        self.op_type = node.op_type
        self.domain = node.domain
        self.attrs = node.attrs
        self.num_outputs = node.num_outputs
        self.opset = node.opset
        self.inputs = released_values(node.inputs)
        self.outputs = released_values(outputs)
        self.saved = False

    def __repr__(self) -> str:
        return f"ReleasedNode({self.domain + '.' if self.domain else ''}{self.op_type})"


def released_values(values) -> tuple:
    """``values`` as a released node keeps them: static constants and None as they are."""
    return tuple(value if value is None or value.static is not None else ReleasedValue(value) for value in values)


class ClosureFunction(Function):
    """A backward node whose input gradients a Python function of the output's gradient computes.

    For an op whose derivative PyTorch defines in closed form over tensors the forward already has
    (a singular value's ``u v^T``): those tensors keep their own history, so under ``create_graph``
    the gradient is differentiable through them, as PyTorch's backward formulas are. The fast
    path's backward replay never replays it (its key holds recorded ops only).
    """

    __slots__ = ("_gradients", "_input_values")
    records_op = False

    def __init__(self, output, inputs: tuple, gradients, name: str):
        edges = tuple(gradient_edge(tensor) if tensor._requires_grad else None for tensor in inputs)
        super().__init__(None, (output,), edges, (), name)
        self._gradients = gradients
        self._input_values = tuple(tensor._value for tensor in inputs)

    def input_gradients(self, grad_outputs: list, create_graph: bool) -> list:
        return fit_gradients(self._gradients(*grad_outputs), self._input_values, self._edges)

    def release(self) -> None:
        Function.release(self)
        self._gradients = None


_CLOSURE_CLASSES = _NamedClasses(ClosureFunction)
_NO_EDGE = (None, 0)  # PyTorch's edge for an input that takes no gradient


class AccumulateGrad:
    """The backward node of a leaf tensor: adds the incoming gradient to ``variable.grad``.

    As PyTorch's, it takes node hooks: ``register_prehook(hook(grad_outputs))`` runs before the
    gradient is accumulated (after the tensor's own hooks) and may replace it;
    ``register_hook(hook(grad_inputs, grad_outputs))`` runs once it has been, with ``grad_inputs``
    empty: what code that acts when a parameter's gradient is ready hooks (DDP-style bucketing)::

        >>> accumulator = weight.view_as(weight).grad_fn.next_functions[0][0]
        >>> handle = accumulator.register_hook(lambda grad_inputs, grad_outputs: print(weight.grad))

    The tensor holds its node weakly, as PyTorch's: keep a reference to it while its hooks matter.
    Only a backward that accumulates into ``.grad`` runs them (not ``autograd.grad``).
    """

    __slots__ = ("variable", "_hooks", "_pre_hooks", "_metadata", "__weakref__")
    next_functions = _edges = ()
    records_op = False

    def __init__(self, variable):
        self.variable = variable
        self._hooks: _HookDict | None = None
        self._pre_hooks: _HookDict | None = None

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    metadata = Function.metadata
    register_hook = Function.register_hook
    register_prehook = Function.register_prehook

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {hex(id(self))}>"


class GradContext:
    """What a gradient rule sees of its forward node: attributes, inputs, outputs, shapes.

    ``input(i)`` and ``output(i)`` are tensors; with ``create_graph`` they keep their autograd
    history so the gradient is itself differentiable. Reading a value that was changed in place
    after it was saved raises, as PyTorch's saved-variable check does.
    """

    __slots__ = ("function", "create_graph", "read")

    def __init__(self, function: Function, create_graph: bool):
        self.function = function
        self.create_graph = create_graph
        self.read: _tensor.Tensor | None = None  # a differentiable saved tensor the rule read (create_graph)

    @property
    def attrs(self) -> dict:
        return self.function.node.attrs

    @property
    def node(self):
        return self.function.node

    @property
    def num_inputs(self) -> int:
        return len(self.function.node.inputs)

    def needs_input_grad(self, index: int) -> bool:
        """Whether input ``index`` takes a gradient (rules may skip work for the others)."""
        edge = self.function._edges[index]
        return edge is not None and edge[0] is not None

    def input_shape(self, index: int) -> tuple:
        return self.function.node.inputs[index].shape

    def input_value(self, index: int):
        """The raw input Value (for constant attributes-as-inputs such as axes)."""
        return self.function.node.inputs[index]

    def input(self, index: int):
        if type(self.function.node) is ReleasedNode:
            # Every input a rule reads is a saved value, a constant too (PyTorch saves ``x * 2``'s 2).
            raise RuntimeError(FREED_MESSAGE)
        saved = self.function._saved_versions[index]
        if saved is not None and saved[0].value != saved[1]:
            raise modified_in_place_error(self.function.node.inputs[index], saved, self.function.name())
        trace = MODE.trace
        if trace is not None:
            trace.saved_reads.append((self.function, index))
        value = self.function.node.inputs[index]
        if not self.create_graph:
            return _tensor.Tensor._from_value(value)
        edge = self.function._edges[index]
        if edge is None or edge[0] is None:
            return _tensor.Tensor._from_value(value)
        if isinstance(edge[0], AccumulateGrad):
            self.read = edge[0].variable
            return edge[0].variable
        self.read = _tensor.Tensor._from_value(value, edge[0], edge[1])
        return self.read

    def output(self, index: int = 0):
        if type(self.function.node) is ReleasedNode:
            raise RuntimeError(FREED_MESSAGE)
        value = self.function.outputs[index]  # type: ignore[index]  # not None: not released
        written = written_output(value)
        if written is not None:
            raise modified_output_error(value, written, index, self.function.name())
        trace = MODE.trace
        if trace is not None:
            trace.saved_reads.append((self.function, ~index))  # an output's read: a negative index
        if not self.create_graph:
            return _tensor.Tensor._from_value(value)
        self.read = _tensor.Tensor._from_value(value, self.function, index)
        return self.read


def _linked(gradient, read):
    """``gradient``, made to depend (with derivative 0) on ``read`` where it does not require grad: PyTorch's
    backward nodes take their saved tensors as inputs, so their outputs require grad under create_graph."""
    if gradient is None or not isinstance(gradient, _tensor.Tensor) or gradient.requires_grad:
        return gradient
    if not read.requires_grad or not read.dtype.is_floating_point or not gradient.dtype.is_floating_point:
        return gradient
    nowhere = _tensor.Tensor._full((), False, _dtypes.bool, gradient.device)
    return _tensor.apply_op("Where", (nowhere, read.sum().to(gradient.dtype), gradient), None, None)


def written_output(value):
    """The tensor holding the saved output ``value`` if a write changed it in place since, else None.

    Outputs keep no version of their own (a version per output would cost every recorded op): the
    op's result tensor is the value's holder, and a write rebinds that tensor to a new value, bumping
    its version from 0. A holder rebound without a write (``y.data = z``) keeps version 0 and passes,
    as PyTorch's ``set_data`` does; so does a write through ``.data`` or ``detach()``, whose tensor
    (the holder then, without history) shares the value, not the version.
    """
    holder = value.holder
    tensor = None if holder is None else holder()
    if tensor is None or tensor._value is value or tensor._grad_fn is None:
        return None
    counter = tensor._version_counter
    return None if counter is None or counter.value == 0 else tensor


def modified_output_error(value, tensor, index: int, saved_by: str) -> RuntimeError:
    """PyTorch's error for the saved output ``value`` of ``saved_by`` that ``tensor`` wrote in place."""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{value.dtype.name} {list(value.shape)}], which is output {index} of "
        f"{saved_by.removesuffix('Backward0')}, is at version {tensor._version_counter.value}; expected an "
        "earlier version instead. Hint: enable anomaly detection to find the operation that failed to compute "
        "its gradient, with onnxnn.autograd.set_detect_anomaly(True)."
    )


def modified_in_place_error(value, saved: tuple, saved_by: str) -> RuntimeError:
    """PyTorch's error for a saved ``value`` whose ``(VersionCounter, version)`` shows an in-place change."""
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{value.dtype.name} {list(value.shape)}] is at version {saved[0].value}; "
        f"expected version {saved[1]} instead. (saved by {saved_by})"
    )


FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


def sum_to_shape(gradient, shape: tuple):
    """Sums a broadcast gradient back to ``shape`` (the driver's job, never a rule's)."""
    if gradient.shape == shape:
        return gradient
    extra = len(gradient.shape) - len(shape)
    axes = list(range(extra))
    for axis, size in enumerate(shape):
        if size == 1 and gradient.shape[axis + extra] != 1:
            axes.append(axis + extra)
    if axes and len(axes) == extra:
        # Only leading dims added by broadcasting (a bias's gradient): summed away, no Reshape after.
        return gradient.sum(dim=axes, keepdim=False)
    if axes:
        gradient = gradient.sum(dim=axes, keepdim=True)
    return gradient.reshape(shape)


def fit_gradients(input_grads, inputs: tuple, next_functions: tuple) -> list:
    """Fits a node's input gradients to its inputs: one per edge, in the input's dtype and shape.

    Nothing flows to a constant or an input without an edge (None); a broadcast gradient is
    summed back to its input's shape (the driver's job, never a rule's).
    """
    fitted: list = []
    for value, gradient, edge in zip(inputs, input_grads, next_functions):
        if gradient is None or value is None or edge is None:
            fitted.append(None)
            continue
        if gradient._value.dtype is not value.dtype:
            gradient = gradient.to(value.dtype)
        if gradient._value.shape != value.shape:
            gradient = sum_to_shape(gradient, value.shape)
        fitted.append(gradient)
    fitted.extend([None] * (len(inputs) - len(fitted)))
    return fitted


_GRADIENT_RULES = gradient_rules.table  # bound once: one lookup per backward node
