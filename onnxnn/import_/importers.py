"""Importer functions: ONNX ops that replay as Python rather than as one recorded node.

Each function is named after its ONNX op and registered by op_type in ``ir.registry.importers``
(``@importers.register("Loop")``), the table every per-op fact of onnxnn shares. It is called as
``function(call, *inputs, **attributes)``: ``call`` is the :class:`NodeCall` of the node (its
name, how many outputs are wanted, the module's training flag, and ``run_graph`` for subgraphs),
``inputs`` are Tensors (None for omitted optional inputs, Python lists for ONNX sequences) and
attributes come as keyword arguments with ONNX's defaults in the signature. It returns a
sequence with one entry per node output.

Every other op records one node with ``apply_op`` (its shape rule, or ONNX shape inference).
Control flow is unrolled here: the condition or trip count is realized, as PyTorch would
synchronize, and the chosen body is replayed with ordinary ops, so gradients flow through it.
Ops added after opset 21 replay the function body ONNX defines them by (``program.FunctionBody``)
or, without one, run at their own opset in onnxruntime (:class:`EagerNode`).

This module imports nothing of the package's compiler (``program``): subgraphs are replayed through
``NodeCall.run_graph``, so the compiler imports the importers and never the other way round.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import onnx

from ..ir import dtypes
from ..ir.graph import constant, shared_attributes, static_constant
from ..ir.mode import MODE
from ..ir.plan import realize_alongside
from ..ir.random import Generator, bernoulli
from ..ir.registry import importers
from ..runtime.grad_mode import no_grad
from ..runtime.internal import exporting, tensor_of, value_of
from ..runtime.tensor import Tensor, apply_op
from .opsets import recorded_opset
from .single_node import single_node_session

__all__ = ["NodeCall", "EMPTY_OPTIONAL", "make_constant", "constant_tensor", "array_of", "EagerNode"]


class _EmptyOptional:
    """The value of an ONNX ``Optional`` without an element: distinct from an omitted input (None)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "EMPTY_OPTIONAL"


EMPTY_OPTIONAL = _EmptyOptional()

# Integer constants up to this many elements are structural (axes, shapes, pads): compiled
# graphs embed them by content, as onnxnn's own recording does.
_STATIC_CONSTANT_LIMIT = 64


class NodeCall:
    """What an importer function knows about the node it replays.

    Attributes:
        name: the node's name (for error messages).
        op_type: the node's op_type.
        num_outputs: how many outputs the node declares.
        training: whether the importing GraphModule is in training mode.
        run_graph: ``run_graph(program, inputs) -> list`` replays a subgraph attribute with its
            formal inputs bound to ``inputs``; names of the enclosing scopes stay visible.
        model_opset: the model's default-domain opset when the node is of the default domain and
            that opset is newer than onnxnn's (21), else None: an importer that records the
            node's own op records it at ``opsets.recorded_opset`` (a type that opset added).
    """

    __slots__ = ("name", "op_type", "num_outputs", "training", "run_graph", "model_opset")

    def __init__(
        self,
        name: str,
        op_type: str,
        num_outputs: int,
        training: bool,
        run_graph: Callable,
        model_opset: int | None = None,
    ):
        self.name = name
        self.op_type = op_type
        self.num_outputs = num_outputs
        self.training = training
        self.run_graph = run_graph
        self.model_opset = model_opset


def make_constant(array: np.ndarray) -> Tensor:
    """A constant Tensor holding ``array``; small integer arrays become structural constants.

    Raises:
        TypeError: the array's dtype is not one onnxnn tensors hold (strings, uint32, ...).
    """
    array = np.asarray(array)
    value_dtype = dtypes.as_dtype(array.dtype)
    if value_dtype.category == 1 and array.size <= _STATIC_CONSTANT_LIMIT:
        return tensor_of(static_constant(array, value_dtype))
    return constant_tensor(np.asarray(array, order="C"), value_dtype)


def constant_tensor(array: np.ndarray, dtype: dtypes.dtype | None = None) -> Tensor:
    """A Tensor holding ``array`` (computed, C-ordered) as ``dtype``, by default the array's own."""
    return tensor_of(constant(array, dtype or dtypes.as_dtype(array.dtype)))


def array_of(tensor: Tensor) -> np.ndarray:
    """The data of ``tensor``, computed first if pending (a data-dependent op, where PyTorch would sync)."""
    return np.asarray(tensor.numpy(force=True))


def _int64_scalar(value: int) -> Tensor:
    return tensor_of(static_constant(np.array(value, dtype=np.int64), dtypes.int64))


def _int64_vector(values) -> Tensor:
    return tensor_of(static_constant(np.array(values, dtype=np.int64).reshape(-1), dtypes.int64))


def _as_int(tensor: Tensor) -> int:
    return int(array_of(tensor).reshape(()))


def _as_bool(tensor: Tensor) -> bool:
    return bool(array_of(tensor).reshape(()))


def _unsqueeze(tensor: Tensor, axis: int) -> Tensor:
    return apply_op("Unsqueeze", (tensor, _int64_vector([axis])))


def _stack(tensors: list, axis: int) -> Tensor:
    rank = len(tensors[0].shape) + 1
    axis = axis + rank if axis < 0 else axis
    pieces = [_unsqueeze(tensor, axis) for tensor in tensors]
    return pieces[0] if len(pieces) == 1 else apply_op("Concat", tuple(pieces), {"axis": axis})


def _take(tensor: Tensor, axis: int, index: int) -> Tensor:
    """``tensor`` at ``index`` along ``axis``, that axis removed (a Gather with a scalar index)."""
    return apply_op("Gather", (tensor, _int64_scalar(index)), {"axis": axis})


# ----------------------------------------------------------------------------- constants, identity


@importers.register("Constant")
def Constant(
    call: NodeCall,
    *,
    value=None,
    sparse_value=None,
    value_float=None,
    value_floats=None,
    value_int=None,
    value_ints=None,
    value_string=None,
    value_strings=None,
):
    if value is not None:
        return (make_constant(value),)
    if sparse_value is not None:
        return (make_constant(sparse_value),)
    if value_float is not None:
        return (make_constant(np.array(value_float, dtype=np.float32)),)
    if value_floats is not None:
        return (make_constant(np.array(value_floats, dtype=np.float32)),)
    if value_int is not None:
        return (make_constant(np.array(value_int, dtype=np.int64)),)
    if value_ints is not None:
        return (make_constant(np.array(value_ints, dtype=np.int64)),)
    raise TypeError(f"Constant node '{call.name}': onnxnn tensors cannot hold strings")


@importers.register("Identity")
def Identity(call: NodeCall, input):
    # A pass-through records nothing: re-exporting an imported model adds no extra Identity nodes.
    return (input,)


@importers.register("Shape")
def Shape(call: NodeCall, data, *, start=0, end=None):
    # Shapes are known when recorded (principle 2): a structural constant, no node to run.
    return (_int64_vector(list(data.shape)[start:end]),)


@importers.register("Size")
def Size(call: NodeCall, data):
    return (_int64_scalar(data.numel()),)


@importers.register("Dropout")
def Dropout(call: NodeCall, data, ratio=None, training_mode=None, *, seed=None):
    """ONNX Dropout: active when ``training_mode`` says so, or (input omitted) in ``train()`` mode.

    Masks come from onnxnn's generator (a node's ``seed`` gives it its own seeded generator), so
    they are reproducible under ``manual_seed`` (DESIGN principle 7).
    """
    training = call.training if training_mode is None else _as_bool(training_mode)
    probability = 0.5 if ratio is None else float(array_of(ratio).reshape(()))
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"Dropout node '{call.name}': ratio must be in [0, 1], got {probability}")
    if not training or probability == 0.0:
        mask = None
        if call.num_outputs > 1:
            mask = constant_tensor(np.ones(tuple(data.shape), dtype=np.bool_))
        return (data, mask)
    if exporting() and probability < 1.0:
        # An export trace: a mask drawn now would be written into the file as a constant, the same on
        # every run; the node itself draws a new one on each (onnxruntime's ratio is below 1).
        return _exported_dropout(call, data, probability, seed)
    generator = None if seed is None else Generator().manual_seed(int(seed))
    keep = bernoulli(tuple(data.shape), 1.0 - probability, generator)
    scale = 1.0 / (1.0 - probability) if probability < 1.0 else 0.0
    numpy_dtype = data.dtype.numpy_dtype
    noise = constant_tensor(np.asarray(keep.astype(numpy_dtype) * numpy_dtype.type(scale), order="C"), data.dtype)
    mask = constant_tensor(np.asarray(keep, order="C")) if call.num_outputs > 1 else None
    return (apply_op("Mul", (data, noise)), mask)


def _exported_dropout(call: NodeCall, data, probability: float, seed) -> tuple:
    """The training-mode ``Dropout`` node as recorded while ``to_onnx`` traces, its seed kept."""
    ratio_dtype = np.float64 if data.dtype is dtypes.float64 else np.float32
    inputs = (data, constant_tensor(np.asarray(probability, ratio_dtype)), constant_tensor(np.asarray(True)))
    attrs = None if seed is None else {"seed": int(seed)}
    outputs = apply_op("Dropout", inputs, attrs, num_outputs=max(call.num_outputs, 1))
    return outputs if isinstance(outputs, tuple) else (outputs, None)


@importers.register("BatchNormalization")
def BatchNormalization(
    call: NodeCall, X, scale, B, input_mean, input_var, *, epsilon=1e-5, momentum=0.9, training_mode=0
):
    """Inference: the fused node. ``training_mode=1``: decomposed with ONNX's semantics.

    In training mode the batch statistics normalize ``X`` and the running statistics become
    ``input * momentum + batch * (1 - momentum)`` with the biased batch variance (ONNX's rule;
    PyTorch's layer uses the unbiased one). Decomposed ops give the node gradients too. The node
    means this in ``eval()`` as well (a model in eval computes what onnxruntime computes from the
    file: export a PyTorch model in eval mode for an inference graph); in ``train()``, running
    statistics that are the module's own (buffers: initializers only BatchNormalization reads) are
    also updated in place, as PyTorch's layer updates its buffers.
    """
    if not training_mode:
        return (
            apply_op(
                "BatchNormalization",
                (X, scale, B, input_mean, input_var),
                shared_attributes((("epsilon", epsilon),)),
                num_outputs=1,
            ),
        )
    rank = len(X.shape)
    axes = [0] + list(range(2, rank))
    stat_shape = (1, X.shape[1]) + (1,) * (rank - 2)
    mean = X.mean(axes, keepdim=True)
    centered = X - mean
    variance = (centered * centered).mean(axes, keepdim=True)
    normalized = centered * (variance + epsilon).rsqrt()
    output = normalized * scale.to(X.dtype).reshape(stat_shape) + B.to(X.dtype).reshape(stat_shape)
    outputs = [output]
    for position, (statistic, batch) in enumerate(((input_mean, mean), (input_var, variance)), start=1):
        update = call.training and _is_state(statistic)
        if position >= call.num_outputs and not update:
            continue
        with no_grad():
            running = statistic * momentum + batch.detach().reshape(-1).to(statistic.dtype) * (1.0 - momentum)
            if update:
                statistic.copy_(running)
                # Computed by the step's next run (plan.realize_alongside): pending, the new statistics
                # would hold the whole forward graph until something reads them.
                realize_alongside(value_of(statistic))
        if position < call.num_outputs:
            outputs.append(running)
    return outputs


def _is_state(tensor: Tensor) -> bool:
    """Whether ``tensor`` is a module's buffer (as far as the node can tell): a leaf without a gradient,
    whose value is not a constant of the graph."""
    return tensor.grad_fn is None and not tensor.requires_grad and value_of(tensor).static is None


@importers.register("Range")
def Range(call: NodeCall, start, limit, delta):
    # onnxruntime accepts one-element 1-D bounds where ONNX asks for scalars; so does onnxnn.
    bounds = [value.reshape(()) if value.shape == (1,) else value for value in (start, limit, delta)]
    # Opset 27 added float16 and bfloat16 bounds: such a node is recorded at its model's opset.
    opset = None if call.model_opset is None else recorded_opset("Range", call.model_opset, frozenset(), {}, bounds)
    return (apply_op("Range", tuple(bounds), opset=opset),)


class EagerNode:
    """Runs one node at once in onnxruntime, at the opsets it was written for.

    For ops the recorded opset-21 graphs cannot express: ops added after opset 21 without an
    ONNX function body (BitCast; CumProd and TensorScatter have importers in newer_ops.py) and
    ops of other domains at versions above 1 (``ai.onnx.ml`` TreeEnsemble). The inputs are
    realized, as for data-dependent ops; the outputs are constants, so no gradient flows through
    such a node.
    """

    def __init__(self, node: onnx.NodeProto, opsets: dict[str, int]):
        self.node = node
        self.opsets = opsets
        self.sessions: dict = {}

    def __getstate__(self) -> dict:
        # onnxruntime sessions neither copy nor pickle: they are rebuilt on the next call.
        return {"node": self.node, "opsets": self.opsets, "sessions": {}}

    def _session(self, inputs: tuple):
        types = [None if value is None else (value.dtype.onnx_type, value.shape) for value in inputs]
        return single_node_session(self.node, self.opsets, types)

    def __call__(self, call: NodeCall, *inputs):
        if MODE.grad.enabled and any(isinstance(value, Tensor) and value.requires_grad for value in inputs):
            warnings.warn(
                f"{call.op_type} node '{call.name}' runs eagerly in onnxruntime: no gradient flows through it",
                UserWarning,
                stacklevel=2,
            )
        key = tuple(None if value is None else (value.dtype, tuple(value.shape)) for value in inputs)
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = self._session(inputs)
        feeds = {f"input_{index}": array_of(value) for index, value in enumerate(inputs) if value is not None}
        results = iter(session.run(None, feeds))
        return [constant_tensor(np.asarray(next(results), order="C")) if name else None for name in self.node.output]


# ----------------------------------------------------------------------------- control flow


@importers.register("If")
def If(call: NodeCall, cond, *, then_branch, else_branch):
    if cond is None or cond.numel() != 1:
        raise RuntimeError(f"If node '{call.name}': the condition must hold one element")
    branch = then_branch if _as_bool(cond) else else_branch
    return call.run_graph(branch, [])


def _empty_scan_output(program, position: int) -> Tensor:
    """A scan output of a loop that ran zero times: empty along the stacked axis."""
    shape, element_type = program.output_types[position]
    if shape is None or any(size is None for size in shape):
        raise RuntimeError("a Loop/Scan that runs zero iterations needs static shapes for its scan outputs")
    value_dtype = dtypes.as_dtype(element_type)
    return constant_tensor(np.zeros((0,) + tuple(shape), dtype=value_dtype.numpy_dtype), value_dtype)


@importers.register("Loop")
def Loop(call: NodeCall, trip_count=None, cond=None, *initial_values, body):
    """Unrolls an ONNX Loop: the trip count and the condition are realized on each iteration."""
    max_trips = None if trip_count is None else _as_int(trip_count)
    keep_going = True if cond is None else _as_bool(cond)
    carried = list(initial_values)
    num_carried = len(carried)
    num_scan_outputs = len(body.output_names) - 1 - num_carried
    scans: list[list] = [[] for _ in range(num_scan_outputs)]
    condition = constant_tensor(np.array(keep_going))
    iteration = 0
    while keep_going and (max_trips is None or iteration < max_trips):
        outputs = call.run_graph(body, [_int64_scalar(iteration), condition, *carried])
        condition = outputs[0]
        carried = list(outputs[1 : 1 + num_carried])
        for collected, value in zip(scans, outputs[1 + num_carried :]):
            collected.append(value)
        keep_going = _as_bool(condition)
        iteration += 1
    stacked = []
    for position, collected in enumerate(scans):
        if collected:
            stacked.append(_stack(collected, 0))
        else:
            stacked.append(_empty_scan_output(body, 1 + num_carried + position))
    return carried + stacked


@importers.register("Scan")
def Scan(
    call: NodeCall,
    *inputs,
    body,
    num_scan_inputs,
    scan_input_axes=None,
    scan_input_directions=None,
    scan_output_axes=None,
    scan_output_directions=None,
):
    """Unrolls an ONNX Scan (opset 9 and later): the body runs once per slice of the scan inputs."""
    num_states = len(inputs) - num_scan_inputs
    states = list(inputs[:num_states])
    scan_inputs = inputs[num_states:]
    input_axes = list(scan_input_axes or [0] * num_scan_inputs)
    input_directions = list(scan_input_directions or [0] * num_scan_inputs)
    input_axes = [axis + len(x.shape) if axis < 0 else axis for axis, x in zip(input_axes, scan_inputs)]
    lengths = {x.shape[axis] for axis, x in zip(input_axes, scan_inputs)}
    if len(lengths) != 1:
        raise RuntimeError(f"Scan node '{call.name}': the scan inputs have different lengths {sorted(lengths)}")
    length = lengths.pop()
    num_scan_outputs = len(body.output_names) - num_states
    scans: list[list] = [[] for _ in range(num_scan_outputs)]
    for step in range(length):
        slices = [
            _take(x, axis, length - 1 - step if direction else step)
            for x, axis, direction in zip(scan_inputs, input_axes, input_directions)
        ]
        outputs = call.run_graph(body, [*states, *slices])
        states = list(outputs[:num_states])
        for collected, value in zip(scans, outputs[num_states:]):
            collected.append(value)
    output_axes = list(scan_output_axes or [0] * num_scan_outputs)
    output_directions = list(scan_output_directions or [0] * num_scan_outputs)
    stacked = []
    for position, (collected, axis, direction) in enumerate(zip(scans, output_axes, output_directions)):
        if not collected:
            stacked.append(_empty_scan_output(body, num_states + position))
            continue
        if direction:
            collected = collected[::-1]
        stacked.append(_stack(collected, axis))
    return states + stacked


# ----------------------------------------------------------------------------- sequences and optionals


def _position(position, length: int, inserting: bool = False) -> int:
    index = _as_int(position)
    bound = length + 1 if inserting else length
    if not -bound <= index < bound:
        raise IndexError(f"sequence position {index} is out of range for a sequence of length {length}")
    return index + bound if index < 0 else index


@importers.register("SequenceEmpty")
def SequenceEmpty(call: NodeCall, *, dtype=None):
    return ([],)


@importers.register("SequenceConstruct")
def SequenceConstruct(call: NodeCall, *inputs):
    return (list(inputs),)


@importers.register("SequenceInsert")
def SequenceInsert(call: NodeCall, sequence, tensor, position=None):
    result = list(sequence)
    index = len(result) if position is None else _position(position, len(result), inserting=True)
    result.insert(index, tensor)
    return (result,)


@importers.register("SequenceAt")
def SequenceAt(call: NodeCall, sequence, position):
    return (sequence[_position(position, len(sequence))],)


@importers.register("SequenceErase")
def SequenceErase(call: NodeCall, sequence, position=None):
    result = list(sequence)
    index = len(result) - 1 if position is None else _position(position, len(result))
    del result[index]
    return (result,)


@importers.register("SequenceLength")
def SequenceLength(call: NodeCall, sequence):
    return (constant_tensor(np.array(len(sequence), dtype=np.int64)),)


@importers.register("ConcatFromSequence")
def ConcatFromSequence(call: NodeCall, sequence, *, axis, new_axis=0):
    if new_axis:
        return (_stack(list(sequence), axis),)
    if len(sequence) == 1:
        return (sequence[0],)
    return (apply_op("Concat", tuple(sequence), {"axis": axis}),)


@importers.register("SplitToSequence")
def SplitToSequence(call: NodeCall, input, split=None, *, axis=0, keepdims=1):
    axis = axis + len(input.shape) if axis < 0 else axis
    length = input.shape[axis]
    if split is None:
        pieces = [
            _take(input, axis, index)
            if not keepdims
            else apply_op("Slice", (input, _int64_vector([index]), _int64_vector([index + 1]), _int64_vector([axis])))
            for index in range(length)
        ]
        return (pieces,)
    split_data = array_of(split)
    sizes = split_data.reshape(-1).tolist()
    if split_data.ndim == 0:
        chunk = int(sizes[0])
        sizes = [chunk] * (length // chunk) + ([length % chunk] if length % chunk else [])
    if len(sizes) == 1:
        return ([input],)
    pieces = apply_op("Split", (input, _int64_vector(sizes)), {"axis": axis}, num_outputs=len(sizes))
    return (list(pieces),)


@importers.register("SequenceMap")
def SequenceMap(call: NodeCall, sequence, *additional, body):
    outputs: list[list] = [[] for _ in body.output_names]
    for index in range(len(sequence)):
        arguments = [sequence[index]] + [extra[index] if isinstance(extra, list) else extra for extra in additional]
        for collected, value in zip(outputs, call.run_graph(body, arguments)):
            collected.append(value)
    return outputs


@importers.register("Optional")
def Optional(call: NodeCall, input=None, *, type=None):
    return (EMPTY_OPTIONAL if input is None else input,)


@importers.register("OptionalHasElement")
def OptionalHasElement(call: NodeCall, input=None):
    present = input is not None and input is not EMPTY_OPTIONAL
    return (constant_tensor(np.array(present)),)


@importers.register("OptionalGetElement")
def OptionalGetElement(call: NodeCall, input):
    if input is None or input is EMPTY_OPTIONAL:
        raise RuntimeError(f"OptionalGetElement node '{call.name}': the optional is empty")
    return (input,)
