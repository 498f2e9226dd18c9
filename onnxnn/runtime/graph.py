"""The recording graph: values and the ONNX nodes that produce them.

Every Tensor op calls :func:`record`, which looks up the op's shape rule, creates one small
``Node`` and its output ``Value``s, and returns at once: nothing runs until a value is needed.
A ``Value`` is either realized (``data`` holds an array, ``node`` is None) or pending (``node``
and ``index`` say which node output computes it). Realizing drops the link to the producer, so
computed graphs are freed by reference counting.
"""
from __future__ import annotations

import numpy as np

from .device import CPU, device
from .dtypes import dtype
from .registry import shape_rules

__all__ = ["Value", "Node", "record", "constant", "static_constant", "pending_depth", "refresh_depth",
           "MAX_PENDING_DEPTH", "RecordingTrace", "trace_data_read"]

# A value whose pending history is deeper than this is realized when recorded: a buffer updated
# on every call (a running mean) must not grow one unbounded graph.
MAX_PENDING_DEPTH = 200


class Node:
    """One recorded ONNX node. Kept tiny: it is created for every op of every call."""

    __slots__ = ("op_type", "domain", "inputs", "attrs", "num_outputs", "depth", "_signature", "position",
                 "plan_mark")

    def __init__(self, op_type: str, domain: str, inputs: tuple, attrs: dict, num_outputs: int, depth: int = 1,
                 signature: tuple | None = None):
        self.op_type = op_type
        self.domain = domain
        self.inputs = inputs
        self.attrs = attrs
        self.num_outputs = num_outputs
        self.depth = depth  # longer than the depth of every pending input: sorting by it is topological
        self._signature = signature  # computed when first asked for, unless the caller knows it
        self.position = 0  # scratch of the planner: the node's index in the plan being built
        self.plan_mark = 0  # scratch of the planner: the number of the last plan that visited it

    @property
    def signature(self) -> tuple:
        """The node's part of a structural cache key: op, domain, attributes, output count."""
        if self._signature is None:
            attrs = self.attrs
            if attrs:
                frozen = tuple(sorted((k, _freeze(v)) for k, v in attrs.items()))
                self._signature = (self.domain, self.op_type, frozen, self.num_outputs)
            else:
                # Shared by every node of the op: cache keys then compare them by identity.
                short = (self.domain, self.op_type, self.num_outputs)
                signature = _PLAIN_SIGNATURES.get(short)
                if signature is None:
                    signature = _PLAIN_SIGNATURES[short] = (self.domain, self.op_type, (), self.num_outputs)
                self._signature = signature
        return self._signature

    def __repr__(self) -> str:
        return f"Node({self.domain + '.' if self.domain else ''}{self.op_type}, attrs={self.attrs})"


def _freeze(value):
    """A hashable form of an attribute value (lists become tuples, arrays their bytes)."""
    if type(value) in _PLAIN:
        return value
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
_PLAIN_SIGNATURES: dict = {}


class Value:
    """A value in the recorded graph: pending (produced by ``node``) or realized (``data``).

    ``static`` is set on small constants that describe structure rather than data (axes, shapes,
    slice bounds) and holds their cache-key form: they are embedded in compiled graphs and keyed
    by content, while ordinary realized values are fed as inputs and keyed by shape and dtype only.
    """

    __slots__ = ("node", "index", "shape", "dtype", "device", "data", "static", "plan_mark", "plan_count")

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

    @property
    def realized(self) -> bool:
        return self.data is not None

    def numpy(self) -> np.ndarray:
        """The value as a numpy array, realizing it (and its pending history) if needed."""
        if self.static is None:
            trace_data_read()
        if self.data is None:
            from .executor import realize
            realize((self,))
        return self.data

    def __repr__(self) -> str:
        state = "realized" if self.data is not None else f"pending {self.node.op_type}:{self.index}"
        return f"Value({state}, shape={self.shape}, dtype={self.dtype.name})"


def constant(array: np.ndarray, value_dtype: dtype, on: device = CPU) -> Value:
    """A realized value holding ``array`` (already of ``value_dtype``'s numpy dtype)."""
    return Value(None, 0, array.shape, value_dtype, on, array)


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


def record(op_type: str, inputs: tuple, attrs: dict | None = None, domain: str = "",
           num_outputs: int | None = None) -> tuple:
    """Records one ONNX node over ``inputs`` and returns its output values, shapes already known.

    Callers bound the pending depth (see ``MAX_PENDING_DEPTH`` and ``refresh_depth``) once they
    have kept what they need of the node; recording itself never runs anything.

    Raises:
        NotImplementedError: no shape rule is registered for the op.
        RuntimeError: the inputs live on different devices, or the shape rule rejects them.
    """
    where = None
    depth = 0
    for value in inputs:
        if value is None or value.static is not None:
            continue  # structural constants (axes, shapes) are embedded in the graph, on no device
        if where is None:
            where = value.device
        elif value.device is not where:
            raise different_devices(op_type, where, value.device)
        if value.data is None and value.node.depth > depth:
            depth = value.node.depth
    return record_scanned(op_type, inputs, attrs, domain, num_outputs, where, depth)


def different_devices(op_type: str, first, second) -> RuntimeError:
    return RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                        f"{first} and {second}! (when checking arguments for {op_type})")


def record_scanned(op_type: str, inputs: tuple, attrs: dict | None, domain: str, num_outputs: int | None,
                   where, depth: int) -> tuple:
    """``record`` once the caller has found the inputs' device and deepest pending node."""
    if attrs is None:
        attrs = _NO_ATTRIBUTES
    rule = _SHAPE_RULES.get((domain, op_type))
    if rule is None:
        return _record_without_rule(op_type, inputs, attrs, domain, num_outputs)
    metas = rule(inputs, attrs)
    if num_outputs is not None and num_outputs < len(metas):
        metas = metas[:num_outputs]  # optional outputs the caller does not want (MaxPool's Indices)
    node = Node(op_type, domain, inputs, attrs, len(metas), depth + 1)
    if where is None:
        where = CPU
    if len(metas) == 1:
        shape, out_dtype = metas[0]
        outputs = (Value(node, 0, shape, out_dtype, where),)
    else:
        outputs = tuple([Value(node, i, shape, out_dtype, where) for i, (shape, out_dtype) in enumerate(metas)])
    if TRACE is not None:
        TRACE.records.append((node, outputs))
    return outputs


_SHAPE_RULES = shape_rules._table  # read directly: record() runs for every op
_NO_ATTRIBUTES: dict = {}  # shared by every node without attributes; node attributes are never mutated


def _record_without_rule(op_type: str, inputs: tuple, attrs: dict, domain: str, num_outputs: int | None) -> tuple:
    """Ops with no registered shape rule: ONNX shape inference, or computing the node at once."""
    from .shape_inference import infer_node_outputs, run_node_eagerly
    where = next((value.device for value in inputs if value is not None), CPU)
    metas = infer_node_outputs(op_type, domain, inputs, attrs, num_outputs)
    if metas is None:
        from .dtypes import as_dtype
        trace_data_read()  # the node is computed now: what follows depends on its data
        arrays = run_node_eagerly(op_type, domain, inputs, attrs, num_outputs)
        node = Node(op_type, domain, inputs, attrs, len(arrays), 1)
        return tuple(Value(node, i, array.shape, as_dtype(array.dtype), where, array)
                     for i, array in enumerate(arrays))
    node = Node(op_type, domain, inputs, attrs, len(metas), 1 + max(map(pending_depth, inputs), default=0))
    outputs = tuple(Value(node, i, shape, out_dtype, where) for i, (shape, out_dtype) in enumerate(metas))
    if TRACE is not None:
        TRACE.records.append((node, outputs))
    return outputs


class RecordingTrace:
    """What a stretch of recording did, kept while ``TRACE`` holds it (see ``backward_replay``).

    ``records`` holds ``(node, outputs)`` for every node recorded, in order (a node's outputs may
    be realized later, which clears their link to it); ``saved_reads`` the ``(function, input
    index)`` of every saved input a gradient rule read; ``read_data`` whether anything read or
    computed data, after which what was recorded may depend on that data.
    """

    __slots__ = ("records", "saved_reads", "read_data")

    def __init__(self):
        self.records: list = []
        self.saved_reads: list = []
        self.read_data = False


TRACE: RecordingTrace | None = None  # set only while a backward pass is traced


def trace_data_read() -> None:
    """Notes, in the trace being recorded (if any), that data was read or computed."""
    if TRACE is not None:
        TRACE.read_data = True


def pending_depth(value) -> int:
    """How many pending nodes lie behind ``value`` at most (0 when realized or absent)."""
    if value is None or value.data is not None:
        return 0
    return value.node.depth


def refresh_depth(node: Node) -> int:
    """Recomputes ``node.depth`` (and that of its pending ancestors) from what is pending now.

    Depths are set when a node is recorded; values realized since then make them overestimates,
    which would otherwise grow step after step in a loop that records on top of a pending update.
    """
    order, stack, seen = [], [node], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        order.append(current)
        stack.extend(value.node for value in current.inputs if value is not None and value.data is None)
    # Recorded depths still order nodes topologically, so one pass in that order is enough.
    for current in sorted(order, key=_recorded_depth):
        current.depth = 1 + max(map(pending_depth, current.inputs), default=0)
    return node.depth


def _recorded_depth(node: Node) -> int:
    return node.depth
