"""The recorded graph's two objects: ``Node`` (one ONNX node) and ``Value`` (one of its outputs).

Recording (``runtime.recording``) creates them for every Tensor op; the planner (``ir.plan``)
walks them; nothing here runs anything. A ``Value`` is either realized (``data`` holds an array,
``node`` is None) or pending (``node`` and ``index`` say which node output computes it).
Realizing drops the link to the producer, so computed graphs are freed by reference counting.
"""

from __future__ import annotations

import math

import weakref

import numpy as np

from .caches import register_cache
from .device import CPU, device
from .dtypes import dtype
from .mode import MODE

__all__ = [
    "Value",
    "Node",
    "FrozenAttributes",
    "freeze_attributes",
    "shared_attributes",
    "VersionedNode",
    "OPSET_VERSION",
    "constant",
    "static_constant",
    "is_held",
    "hold",
]

# The default-domain opset onnxnn's own ops are recorded at (``ir.plan`` re-exports it). Every
# change to an op's schema from here to the newest opset onnx defines only added attributes whose
# defaults keep the old meaning, or allowed more types (tests/import_/test_newer_opsets.py checks
# it), so a node recorded at this opset means the same in a graph built at a newer one.
OPSET_VERSION = 21


class Node:
    """One recorded ONNX node. Kept tiny: it is created for every op of every call.

    ``opset`` is the default-domain opset whose meaning of the op the node has: onnxnn's opset for
    every node made here, a newer one for a :class:`VersionedNode`.
    """

    opset = OPSET_VERSION  # a class attribute, not a slot: nodes at onnxnn's opset store nothing

    __slots__ = (
        "op_type",
        "domain",
        "inputs",
        "attrs",
        "num_outputs",
        "depth",
        "_signature",
        "position",
        "plan_mark",
        "saved",
        "known_plan",
    )

    def __init__(
        self,
        op_type: str,
        domain: str,
        inputs: tuple,
        attrs: dict,
        num_outputs: int,
        depth: int = 1,
        signature: tuple | None = None,
    ):
        self.op_type = op_type
        self.domain = domain
        self.inputs = inputs
        self.attrs = attrs
        self.num_outputs = num_outputs
        self.depth = depth  # longer than the depth of every pending input: sorting by it is topological
        self._signature = signature  # computed when first asked for, unless the caller knows it
        self.position = 0  # scratch of the planner: the node's index in the plan being built
        self.plan_mark = 0  # scratch of the planner: the number of the last plan that visited it
        # Whether a backward function keeps this node (its inputs and outputs) for backward: set
        # when one is made, cleared when it is released. Its outputs are then needed again.
        self.saved = False
        # Set by code that recorded this node's whole pending history knowing its structure (a
        # forward replay): ``(plan, values)``, where ``plan.plan_of(output, values)`` gives the plan
        # of the node's output without walking the history, or None (``fastpath.known_plans``).
        self.known_plan = None

    @property
    def signature(self) -> tuple:
        """The node's part of a structural cache key: op, domain, attributes, output count."""
        if self._signature is None:
            attrs = self.attrs
            if attrs:
                frozen = attrs.frozen if type(attrs) is FrozenAttributes else freeze_attributes(attrs)
                self._signature = (self.domain, self.op_type, frozen, self.num_outputs)
            else:
                # Shared by every node of the op: cache keys then compare them by identity.
                short = (self.domain, self.op_type, self.num_outputs)
                signature = _PLAIN_SIGNATURES.get(short)
                if signature is None:
                    signature = _PLAIN_SIGNATURES[short] = (self.domain, self.op_type, (), self.num_outputs)
                self._signature = signature
        return self._signature

    def rewired(self, inputs: tuple) -> "Node":
        """A copy of the node reading ``inputs`` instead: the same op, attributes, signature and opset."""
        return Node(self.op_type, self.domain, inputs, self.attrs, self.num_outputs, self.depth, self._signature)

    def __repr__(self) -> str:
        return f"Node({self.domain + '.' if self.domain else ''}{self.op_type}, attrs={self.attrs})"


class VersionedNode(Node):
    """A node recorded at a default-domain opset newer than onnxnn's: an imported node that means
    something only that opset defines (a type it newly allows, an attribute it added).

    Its opset is part of its signature, so plans (and their compiled graphs) that differ only in it
    are cached apart, and ``build_model`` declares at least that opset.
    """

    __slots__ = ("opset",)

    def __init__(
        self,
        op_type: str,
        domain: str,
        inputs: tuple,
        attrs: dict,
        num_outputs: int,
        depth: int,
        opset: int,
        signature: tuple | None = None,
    ):
        super().__init__(op_type, domain, inputs, attrs, num_outputs, depth, signature)
        self.opset = opset

    def rewired(self, inputs: tuple) -> "VersionedNode":
        return VersionedNode(
            self.op_type, self.domain, inputs, self.attrs, self.num_outputs, self.depth, self.opset, self._signature
        )

    @property
    def signature(self) -> tuple:
        if self._signature is None:
            # mypy types a property read from the class as its getter function, not the property object.
            self._signature = Node.signature.fget(self) + (self.opset,)  # type: ignore[attr-defined]
        return self._signature

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, opset={self.opset})"


def freeze_attributes(attrs: dict) -> tuple:
    """The hashable, order-independent form of node attributes that cache keys compare."""
    if len(attrs) == 1:
        for name, value in attrs.items():
            return ((name, _freeze(value)),)
    return tuple(sorted([(name, _freeze(value)) for name, value in attrs.items()]))


class FrozenAttributes(dict):
    """Node attributes shared by every node one call site records, their key form computed once.

    Every node's attributes are immutable once recorded; a call site that records the same
    attributes call after call (a layer's convolution geometry, ``F.linear``'s ``transB``) builds
    them once as ``FrozenAttributes`` and spares each node's signature the freezing. A shape rule
    may keep what it derives from them per input shapes (``remembered``).
    """

    __slots__ = ("frozen", "memo")

    # Results kept per attributes: one per input size seen (layer shapes, batch and image sizes).
    MOST_REMEMBERED = 256

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.frozen = freeze_attributes(self)
        self.memo: dict = {}

    def remembered(self, key, compute, *arguments):
        """``compute(*arguments)``, computed once per ``key`` (what it reads besides these attributes)."""
        memo = self.memo
        result = memo.get(key)
        if result is None:
            if len(memo) >= self.MOST_REMEMBERED:
                memo.clear()
            result = memo[key] = compute(*arguments)
        return result

    def _immutable(self, *args, **kwargs):
        raise TypeError("node attributes are immutable: copy them with dict(attrs) to change one")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _immutable  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenAttributes, (dict(self),))


# FrozenAttributes by content, for call sites whose attributes vary over a few values (a
# Transpose's permutation, a Softmax's axis): one dict lookup instead of building and freezing a dict.
_SHARED_ATTRIBUTES: dict = {}
_MOST_SHARED_ATTRIBUTES = 4096


def shared_attributes(items: tuple) -> FrozenAttributes:
    """The one ``FrozenAttributes`` holding ``items``, ``((name, value), ...)`` with hashable values.

    Tuple values are stored as lists (ONNX's ints and floats attributes).
    """
    attrs = _SHARED_ATTRIBUTES.get(items)
    if attrs is None:
        attrs = FrozenAttributes((name, list(value) if type(value) is tuple else value) for name, value in items)
        # A table keyed by == must not hand -0.0's call 0.0's attributes: items holding a float
        # zero are never shared (so neither sign finds the other's entry).
        if not any(_holds_float_zero(value) for _, value in items):
            if len(_SHARED_ATTRIBUTES) >= _MOST_SHARED_ATTRIBUTES:
                _SHARED_ATTRIBUTES.clear()
            _SHARED_ATTRIBUTES[items] = attrs
    return attrs


def _holds_float_zero(value) -> bool:
    if type(value) is float:
        return value == 0.0
    return type(value) is tuple and any(type(item) is float and item == 0.0 for item in value)


register_cache("shared node attributes", _SHARED_ATTRIBUTES.clear)


def _freeze(value):
    """A hashable form of an attribute value (lists become tuples, arrays their bytes)."""
    kind = type(value)
    if kind in _PLAIN:
        if kind is float and is_negative_zero(value):
            return _NEGATIVE_ZERO  # -0.0 == 0.0 and their hashes agree, but they mean different ops
        return value
    if kind is list or kind is tuple:
        for item in value:
            if type(item) not in _PLAIN or item == 0.0:
                return tuple([_freeze(item) for item in value])
        return tuple(value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, dtype):
        return value.name
    return value


_PLAIN = {int, float, str, bool, bytes}
_NEGATIVE_ZERO = ("float", "-0.0")


def is_negative_zero(value: float) -> bool:
    """Whether a float is -0.0, which equals 0.0 and hashes alike: keys that must tell the two
    apart (attributes, scalar arguments) ask this."""
    return value == 0.0 and math.copysign(1.0, value) < 0.0


_PLAIN_SIGNATURES: dict = {}


class Value:
    """A value in the recorded graph: pending (produced by ``node``) or realized (``data``).

    ``static`` is set on small constants that describe structure rather than data (axes, shapes,
    slice bounds) and holds their cache-key form: they are embedded in compiled graphs and keyed
    by content, while ordinary realized values are fed as inputs and keyed by shape and dtype only.

    ``holder`` is a weak reference to the handle (a Tensor) that last took this value for its
    user, or None: liveness is explicit, never read from reference counts (see ``is_held``).
    """

    # __weakref__: a specialized session refers to the values it embedded weakly, so a dropped
    # model's weights are freed with it (runtime/fastpath/plan_cache.py).
    __slots__ = (
        "node",
        "index",
        "shape",
        "dtype",
        "device",
        "data",
        "static",
        "plan_mark",
        "plan_count",
        "holder",
        "__weakref__",
    )

    def __init__(self, node, index, shape, dtype, device, data=None, static=None):
        self.node = node
        self.index = index
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.data = data
        self.static = static
        # Scratch of the planner: the last plan that saw this value, and there its consumer count
        # (pending values) or input position (realized ones).
        self.plan_mark = 0
        self.plan_count = 0
        self.holder = None

    @property
    def realized(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        state = "realized" if self.data is not None else f"pending {self.node.op_type}:{self.index}"
        return f"Value({state}, shape={self.shape}, dtype={self.dtype.name})"


def is_held(value: Value) -> bool:
    """Whether something outside a plan still needs ``value``; a plan computes such intermediates
    among its outputs, so a later read or backward does not compute them again.

    A value is needed while a backward function keeps its node (``Node.saved``), or while its
    handle lives and either still holds it or was rebound in place to a pending value computed
    directly from it (``w -= lr * w.grad``: the new value's node reads the old one). The answer
    follows from what the program holds, never from reference counts, so a debugger or a stray
    local changes nothing.
    """
    holder = value.holder
    if holder is not None:
        handle = holder()
        if handle is not None:
            held = handle._value
            if held is value:
                return True
            if held.data is None and value in held.node.inputs:
                return True
    node = value.node
    return node is not None and node.saved


def hold(value: Value, handle, rebound: bool = True) -> None:
    """Records ``handle`` (a Tensor) as the holder of a pending ``value`` (see ``is_held``).

    A handle rebound to the value (an in-place op, an optimizer update) takes it over from the
    temporary result it was created with; a handle merely created over it (an in-place op's
    alias, a detached view) takes it only when no live handle holds it already.
    """
    if value.data is not None:
        return
    if not rebound:
        holder = value.holder
        if holder is not None and holder() is not None:
            return
    value.holder = _weak_reference(handle)


_weak_reference = weakref.ref


def constant(array: np.ndarray, value_dtype: dtype, on: device = CPU) -> Value:
    """A realized value holding ``array`` (already of ``value_dtype``'s numpy dtype)."""
    value = Value(None, 0, array.shape, value_dtype, on, array)
    trace = MODE.trace
    if trace is not None and trace.created is not None:
        trace.created.add(value)
    return value


def static_constant(values, value_dtype: dtype, on: device = CPU) -> Value:
    """A small structural constant (axes, shape, bounds) that compiled graphs embed by content.

    Static values are immutable and keyed by content, so equal ones are shared from a small cache.
    Ints and lists of ints (axes, shapes: one or more per recorded op) are found by their Python
    form first, without building an array.
    """
    python_key = _python_key(values)
    if python_key is not None:
        cached = _STATIC_BY_PYTHON_FORM.get((python_key, value_dtype, on))
        if cached is not None:
            return cached
    array = np.asarray(values, dtype=value_dtype.numpy_dtype)
    key = (value_dtype.name, array.shape, array.tobytes(), on)
    cached = _STATIC_CACHE.get(key)
    if cached is None:
        if len(_STATIC_CACHE) >= _STATIC_CACHE_LIMIT:
            _STATIC_CACHE.clear()
            _STATIC_BY_PYTHON_FORM.clear()
        array.flags.writeable = False
        cached = _STATIC_CACHE[key] = Value(None, 0, array.shape, value_dtype, on, array, ("c",) + key[:3])
    if python_key is not None:
        _STATIC_BY_PYTHON_FORM[(python_key, value_dtype, on)] = cached
    return cached


def _python_key(values):
    """A hashable form of an int or a (nested) list or tuple of ints, which determines its array.

    Anything else gives None. Floats are left out on purpose: 0.0 == -0.0 would share a key.
    """
    if type(values) is int:
        return values
    if type(values) is list or type(values) is tuple:
        key = []
        for item in values:
            item_key = item if type(item) is int else _python_key(item)
            if item_key is None:
                return None
            key.append(item_key)
        return tuple(key)
    return None


_STATIC_CACHE: dict = {}
_STATIC_BY_PYTHON_FORM: dict = {}
_STATIC_CACHE_LIMIT = 4096


def _clear_static_constants() -> None:
    _STATIC_CACHE.clear()
    _STATIC_BY_PYTHON_FORM.clear()


register_cache("static constants", _clear_static_constants)
