"""Activation checkpointing: ``checkpoint`` and ``checkpoint_sequential``, as ``torch.utils.checkpoint``.

``checkpoint(function, *args)`` runs ``function`` so that backward keeps nothing of what happens
inside it: only its inputs are kept, and during backward the function is called again (with the
random state of the first call, so dropout draws the same masks, and its autocast state, so the
same ops are cast) to record the graph whose gradients are then taken. Both of PyTorch's
variants are here, with its rules for each:

- ``use_reentrant=True`` (what an unspecified ``use_reentrant`` means, with PyTorch's warning):
  the first call runs under ``no_grad``; backward calls ``function`` again on detached inputs and
  runs ``autograd.backward`` on what it returns, which accumulates the ``.grad`` of the parameters
  used inside and hands the inputs' gradients on. Keyword arguments are refused; outputs require
  grad only when some tensor argument does.
- ``use_reentrant=False`` (PyTorch's recommendation): gradients reach everything ``function`` uses
  that requires grad (tensors nested in arguments, keyword arguments, parameters it closes over)
  through the checkpoint's own backward node, so ``autograd.grad`` and ``backward(inputs=...)`` work,
  and an input that needs no gradient is fine. The first call records the graph once, to find those
  tensors, and then drops it. ``context_fn``, ``determinism_check`` and ``debug`` apply here.

What it saves in onnxnn. A tensor is a handle on a value of a lazily recorded graph. Each backward
node keeps the forward node it differentiates, and a realization computes, besides the values asked
for, every pending value such a node keeps (``ir.graph.is_held``), so that backward reads it instead
of computing the forward again. Without checkpointing, once the forward pass is computed (the loss
read before ``backward``, a history deeper than ``runtime.depth.MAX_PENDING_DEPTH`` realized midway,
eager mode), every activation inside ``function`` that a gradient needs is computed and stays in
memory until backward releases its node, as in PyTorch. With checkpointing no backward node keeps
anything recorded inside ``function``: that realization keeps its inputs and outputs only, its
intermediates are freed when the run ends, and the backward graph reads the recomputation's values,
computed from the inputs in the run that computes the gradients. (Measured on four blocks
``Linear(256, 2048), Tanh, Linear(2048, 256), Tanh`` at batch 512 in float32: after ``loss.item()``
the backward graph held 53 MB of computed values without checkpointing, 16 MB of them parameters;
3 MB checkpointing each block with ``use_reentrant=True``, 17 MB with ``False``, whose node also
reaches the parameters.) The checkpoint's node itself keeps the inputs and the random state (a few
hundred bytes).

When nothing is read between forward and backward (``loss.backward(); optimizer.step()``), the
forward and backward passes are computed together, by one run of one graph, which frees each value
after its last use there: the forward's intermediates inside ``function`` die in the forward part
and a second copy of those nodes runs before their gradients. onnxruntime's common-subexpression
elimination (on for graphs of up to ``runtime.session_optimizers.COMMON_SUBEXPRESSIONS_MOST_NODES`` nodes)
merges that copy back into the forward's nodes, so such a run has the memory and time of the graph
without checkpointing, except after a dropout, whose recomputed mask is a new value (two such blocks
of 64 and 256 features: 51 recorded nodes, 36 after onnxruntime's optimizations, as without
checkpointing). To have the saving there, read the loss (``loss.item()``) before ``backward()``: the
forward pass then runs alone and keeps the checkpoints' inputs only.

Example::

    >>> layer = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    >>> x = onnxnn.randn(4, 8, requires_grad=True)
    >>> y = checkpoint(layer, x, use_reentrant=False)
    >>> y.sum().backward()     # layer runs again here; its weights' .grad are filled
"""

from __future__ import annotations

import collections
import contextlib
import warnings
from typing import Any, Callable, ContextManager, Iterable, Iterator, Tuple

from ..ir import random as _random
from ..ir.mode import observing
from ..nn.modules.container import Sequential
from ..runtime.autograd import FREED_MESSAGE, AccumulateGrad
from ..runtime.backward import grad, run_backward
from ..runtime.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..runtime.internal import accumulates_into_every_leaf, tensor_of
from ..runtime.recomputation import capture_recomputation_state, recomputation_state
from ..runtime.tensor import Tensor
from ..autograd.function import Function

__all__ = [
    "checkpoint",
    "checkpoint_sequential",
    "CheckpointError",
    "CheckpointFunction",
    "check_backward_validity",
    "detach_variable",
    "noop_context_fn",
]


class CheckpointError(RuntimeError):
    """The recomputation of a checkpointed function differs from its first call (``determinism_check``)."""


def noop_context_fn() -> Tuple[ContextManager, ContextManager]:
    """The default ``context_fn``: no context for either the first call or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs: Tuple[Any, ...]) -> Tuple[Any, ...]:
    """The tensors of ``inputs`` detached, each requiring grad as it did; other items as they are."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    return tuple(_detached(item) if isinstance(item, Tensor) else item for item in inputs)


def check_backward_validity(inputs: Iterable[Any]) -> None:
    """Warns, as PyTorch's reentrant checkpoint does, when no tensor among ``inputs`` requires grad."""
    if not any(item.requires_grad for item in inputs if isinstance(item, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


def _detached(tensor: Tensor) -> Tensor:
    return tensor.detach().requires_grad_(tensor.requires_grad)


@contextlib.contextmanager
def _random_state(state: dict | None) -> Iterator[None]:
    """Runs the block from the random ``state`` saved by the first call (if any), then restores the
    generator as it was, so the recomputation draws the first call's values and changes nothing."""
    if state is None:
        yield
        return
    outside, seed = _random.get_rng_state(), _random.initial_seed()
    _random.set_rng_state(state)
    try:
        yield
    finally:
        _random.default_generator.manual_seed(seed)
        _random.set_rng_state(outside)


# ------------------------------------------------------------------------------ use_reentrant=True
class CheckpointFunction(Function):
    """The reentrant checkpoint: forward under ``no_grad``; backward calls the function again and runs
    ``autograd.backward`` on its outputs (PyTorch's ``CheckpointFunction``)."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.rng_state = _random.get_rng_state() if preserve_rng_state else None
        ctx.switches = capture_recomputation_state()  # autocast's, re-entered by the recomputation
        # Non-tensors are kept as they are; tensors through save_for_backward (checked for in-place changes).
        ctx.inputs = [None if isinstance(item, Tensor) else item for item in args]
        ctx.tensor_indices = [index for index, item in enumerate(args) if isinstance(item, Tensor)]
        ctx.save_for_backward(*[item for item in args if isinstance(item, Tensor)])
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if not accumulates_into_every_leaf():
            # Its backward hands the gradients of the parameters used inside on through their
            # .grad: under autograd.grad or backward(inputs=...) that would write .grad that the
            # caller never asked for.
            raise RuntimeError(
                "When use_reentrant=True, onnxnn.utils.checkpoint is incompatible with .grad() or passing an "
                "`inputs` parameter to .backward(). To resolve this error, you can either set use_reentrant=False, "
                "or call .backward() without passing the `inputs` argument."
            )
        inputs = list(ctx.inputs)
        for index, tensor in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[index] = tensor
        with _random_state(ctx.rng_state), recomputation_state(ctx.switches):
            detached = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached)
        outputs = (outputs,) if isinstance(outputs, Tensor) else outputs
        pairs = [
            (output, gradient)
            for output, gradient in zip(outputs, grad_outputs)
            if isinstance(output, Tensor) and output.requires_grad
        ]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        run_backward([output for output, _ in pairs], [gradient for _, gradient in pairs])
        return (None, None) + tuple(item.grad if isinstance(item, Tensor) else None for item in detached)


# ------------------------------------------------------------------------------ use_reentrant=False
def _flatten(tree: Any, leaves: list) -> Any:
    """Appends the tensors of ``tree`` (nested tuples, lists and dicts) to ``leaves``; returns its
    structure, where each tensor is replaced by its index in ``leaves``."""
    if isinstance(tree, Tensor):
        leaves.append(tree)
        return _Leaf(len(leaves) - 1)
    if isinstance(tree, (tuple, list)):
        return _Branch(type(tree), [_flatten(item, leaves) for item in tree])
    if isinstance(tree, dict):
        kind = type(tree) if type(tree) in (dict, collections.OrderedDict) else dict
        return _Branch(kind, [(key, _flatten(item, leaves)) for key, item in tree.items()])
    return tree


def _unflatten(structure: Any, leaves: list) -> Any:
    """The tree of ``structure`` with ``leaves`` in place of the tensors ``_flatten`` took out."""
    if isinstance(structure, _Leaf):
        return leaves[structure.index]
    if not isinstance(structure, _Branch):
        return structure
    kind: Any = structure.kind
    if issubclass(kind, dict):
        return kind((key, _unflatten(item, leaves)) for key, item in structure.items)
    values = [_unflatten(item, leaves) for item in structure.items]
    if kind is list:
        return values
    return kind(*values) if hasattr(kind, "_fields") else kind(values)  # a namedtuple takes its fields


class _Leaf:
    """Where a tensor stood in a flattened tree."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class _Branch:
    """A tuple, list or dict of a flattened tree: its type and its flattened items (key-item pairs for a dict)."""

    __slots__ = ("kind", "items")

    def __init__(self, kind: type, items: list):
        self.kind = kind
        self.items = items


class _Recorder:
    """Collects what the calling thread records while it is active: the output values of every node
    (to tell the backward functions made inside a checkpoint from those outside), and the op types
    and ``(shape, dtype, device)`` of those values in order (for the determinism check).

    Its observer is the thread's own (``ir.mode.observing``): checkpoints in several threads open
    and close in any order, and each sees its own thread's recording only.
    """

    def __init__(self):
        self.values: set = set()
        self.metadata: list = []
        self.ops: list = []
        self._block = observing(self._observe)

    def __enter__(self) -> "_Recorder":
        self._block.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self._block.__exit__(*exc_info)

    def _observe(self, node, outputs) -> None:
        self._block.beneath(node, outputs)  # a profiler or an enclosing checkpoint watches too
        self.ops.append(node.op_type)
        for value in outputs:
            self.values.add(value)
            self.metadata.append((tuple(value.shape), value.dtype, value.device))


def _segment(outputs: list, recorded: set, inputs: list) -> tuple[list, list]:
    """The backward functions recorded inside the checkpoint (reached from ``outputs`` through
    functions whose outputs were ``recorded``) and the edges leaving it that are not ``inputs``:
    ``(function, output_nr)`` of tensors from outside (a parameter's accumulator, a closed-over
    tensor's function), in the order first met."""
    input_ids = {id(tensor) for tensor in inputs}
    inside: list = []
    seen: set = set()
    leaving: dict = {}
    stack = [tensor.grad_fn for tensor in outputs if tensor.grad_fn is not None]
    for tensor in outputs:  # an output that is a leaf from outside (a parameter returned as it is)
        if tensor.grad_fn is None and tensor.requires_grad and id(tensor) not in input_ids:
            leaving[(id(tensor), 0)] = tensor
    while stack:
        function = stack.pop()
        if function in seen:
            continue
        seen.add(function)
        inside.append(function)
        for edge in function._edges:
            if edge is None or edge[0] is None:
                continue
            target, output_nr = edge
            if isinstance(target, AccumulateGrad):
                if id(target.variable) not in input_ids:
                    leaving.setdefault((id(target.variable), 0), target.variable)
            elif target.outputs is None:
                raise RuntimeError(FREED_MESSAGE)  # a closed-over tensor whose graph backward freed
            elif any(value in recorded for value in target.outputs if value is not None):
                stack.append(target)
            else:
                key = (id(target), output_nr)
                if key not in leaving:
                    leaving[key] = tensor_of(target.outputs[output_nr], target, output_nr)
    return inside, list(leaving.values())


def _release(functions: list) -> None:
    """Frees what the given backward functions keep, so no realization keeps their values."""
    for function in functions:
        function.release()


class _State:
    """What the non-reentrant checkpoint's backward needs besides the saved inputs."""

    def __init__(self, function, structure, rng_state, recompute_context, determinism_check, debug, recorder):
        self.function = function
        self.structure = structure
        self.rng_state = rng_state
        self.switches = capture_recomputation_state()  # autocast's, re-entered by the recomputation
        self.recompute_context = recompute_context
        self.determinism_check = determinism_check
        self.debug = debug
        self.metadata = recorder.metadata
        self.ops = recorder.ops if debug else None
        self.input_count = 0
        self.outputs: list = []
        self.non_differentiable: list = []


class _CheckpointWithoutReentrant(Function):
    """The checkpoint's backward node: its edges are the inputs and the tensors from outside the
    function; its forward returns the values of the first call, its backward calls again."""

    @staticmethod
    def forward(ctx, state: _State, *tensors):
        ctx.state = state
        ctx.set_materialize_grads(False)  # an output no gradient reaches needs no backward of its own
        ctx.save_for_backward(*tensors[: state.input_count])
        ctx.outside = tensors[state.input_count :]
        outputs = tuple(output.detach() for output in state.outputs)
        ctx.mark_non_differentiable(*[outputs[index] for index in state.non_differentiable])
        return outputs

    @staticmethod
    def backward(ctx, *grad_outputs):
        state = ctx.state
        # The engine records backward (grad enabled) exactly when asked to create a graph. Then the
        # function runs again on the inputs themselves, so the gradients depend on their history (and
        # double backward reaches it); otherwise on detached copies, where the recomputation stops.
        create_graph = is_grad_enabled()
        saved = ctx.saved_tensors
        inputs = list(saved) if create_graph else [_detached(tensor) for tensor in saved]
        recorder = _Recorder()
        with (
            _random_state(state.rng_state),
            recomputation_state(state.switches),
            state.recompute_context,
            enable_grad(),
            recorder,
        ):
            args, kwargs = _unflatten(state.structure, inputs)
            leaves: list = []
            _flatten(state.function(*args, **kwargs), leaves)
        if state.determinism_check == "default":
            _check_determinism(state, recorder)
        wanted = [
            tensor
            for tensor, needed in zip(inputs + list(ctx.outside), ctx.needs_input_grad[1:])
            if needed and tensor.requires_grad
        ]
        pairs = [
            (output, gradient)
            for output, gradient in zip(leaves, grad_outputs)
            if gradient is not None and output.requires_grad
        ]
        found: dict = {}
        if pairs and wanted:
            # retain_graph: a tensor from outside is captured where its function starts, and that
            # function (the caller's graph) must survive; the recomputed graph is released below.
            gradients = grad(
                [output for output, _ in pairs],
                wanted,
                [gradient for _, gradient in pairs],
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
            )
            found = {id(tensor): gradient for tensor, gradient in zip(wanted, gradients)}
            if not create_graph:
                _release(_segment([output for output, _ in pairs], recorder.values, inputs)[0])
        # A tensor given twice (an argument also closed over, with create_graph) got its whole
        # gradient each time: it goes to the first of its edges only.
        results: list = [None]
        for tensor in inputs + list(ctx.outside):
            results.append(found.pop(id(tensor), None))
        return tuple(results)


def _check_determinism(state: _State, recorder: _Recorder) -> None:
    """The recomputation recorded values of the first call's shapes, dtypes and devices, as many."""
    tip = (
        "\nTip: pass `debug=True` to `onnxnn.utils.checkpoint.checkpoint(...)` to see the operations "
        "recorded by both calls."
    )
    debug = ""
    if state.ops is not None:
        debug = (
            f"\nOperations recorded in the forward pass: {state.ops}"
            f"\nOperations recorded in the recomputation: {recorder.ops}"
        )
    if len(recorder.metadata) != len(state.metadata):
        raise CheckpointError(
            "onnxnn.utils.checkpoint: A different number of tensors was recorded during the original "
            "forward and recomputation.\n"
            f"Number of tensors recorded during forward: {len(state.metadata)}\n"
            f"Number of tensors recorded during recomputation: {len(recorder.metadata)}." + (debug or tip)
        )
    different = [
        f"tensor at position {index}:\nsaved metadata: {_described(first)}\nrecomputed metadata: {_described(again)}\n"
        for index, (first, again) in enumerate(zip(state.metadata, recorder.metadata))
        if first != again
    ]
    if different:
        raise CheckpointError(
            "onnxnn.utils.checkpoint: Recomputed values for the following tensors have different metadata "
            "than during the forward pass.\n" + "".join(different) + (debug or tip)
        )


def _described(metadata: tuple) -> dict:
    shape, dtype, device = metadata
    return {"shape": shape, "dtype": dtype, "device": device}


def _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check, debug, args, kwargs):
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    if not is_grad_enabled():
        with forward_context:  # nothing would be saved: a plain call, as in PyTorch
            return function(*args, **kwargs)
    tensors: list = []
    structure = _flatten((args, kwargs), tensors)
    rng_state = _random.get_rng_state() if preserve else None
    inputs = [_detached(tensor) for tensor in tensors]
    recorder = _Recorder()
    with forward_context, recorder:
        call_args, call_kwargs = _unflatten(structure, inputs)
        output = function(*call_args, **call_kwargs)
    outputs: list = []
    output_structure = _flatten(output, outputs)
    inside, outside = _segment(outputs, recorder.values, inputs)
    _release(inside)  # nothing recorded inside is kept now: backward records it again
    state = _State(function, structure, rng_state, recompute_context, determinism_check, debug, recorder)
    state.input_count = len(tensors)
    state.outputs = outputs
    state.non_differentiable = [index for index, tensor in enumerate(outputs) if not tensor.requires_grad]
    results = _CheckpointWithoutReentrant.apply(state, *tensors, *outside)
    state.outputs = []  # the node keeps no output handles (their values are its outputs' own)
    return _unflatten(output_structure, list(results) if isinstance(results, tuple) else [results])


# ------------------------------------------------------------------------------ public functions
_REENTRANT_WARNING = (
    "onnxnn.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Without it "
    "use_reentrant=True is used, as PyTorch (2.13 included) does with this warning. use_reentrant=False is "
    "recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True. "
    "See the documentation of onnxnn.utils.checkpoint for the differences between the two variants."
)


def checkpoint(
    function: Callable,
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], Tuple[ContextManager, ContextManager]] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    **kwargs: Any,
) -> Any:
    """Runs ``function(*args, **kwargs)`` without keeping its intermediate values for backward; backward
    calls it again to compute them.

    Args:
        function: what to run (a module or any callable of the arguments).
        args: its arguments.
        use_reentrant: which variant (see the module's documentation); None warns, as PyTorch does,
            and means True.
        context_fn: a callable returning two context managers: the first call runs under the first,
            the recomputation under the second (``use_reentrant=False`` only).
        determinism_check: ``"default"`` checks that the recomputation records as many values as the
            first call, of the same shapes, dtypes and devices (raising :class:`CheckpointError`);
            ``"none"`` skips it (``use_reentrant=False`` only).
        debug: a failed determinism check lists the ops both calls recorded (``use_reentrant=False`` only).
        early_stop: accepted for PyTorch's signature; the recomputation always runs the whole function.
        preserve_rng_state: keyword, default True: the recomputation draws the random values of the
            first call (dropout masks) and leaves the generator as it found it.
        kwargs: keyword arguments of ``function`` (``use_reentrant=False`` only).

    Returns:
        What ``function`` returns.

    Raises:
        ValueError: keyword arguments, ``context_fn`` or ``debug`` with ``use_reentrant=True``; an
            unknown ``determinism_check``.

    Example::

        >>> x = onnxnn.randn(3, requires_grad=True)
        >>> y = checkpoint(lambda t: t.sin() * 2, x, use_reentrant=False)
        >>> y.sum().backward()
        >>> onnxnn.allclose(x.grad, 2 * x.cos())
        True
    """
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check, debug, args, kwargs)


def checkpoint_sequential(functions, segments: int, input: Tensor, use_reentrant: bool | None = None, **kwargs: Any):
    """Runs a sequence of modules or functions in ``segments`` chunks, checkpointing all but the last.

    Each checkpointed chunk keeps only its input for backward; the last chunk runs as usual.

    Args:
        functions: an ``nn.Sequential`` or a list of modules or functions, applied in order.
        segments: the number of chunks.
        input: the tensor given to the first function.
        use_reentrant: as in :func:`checkpoint` (None warns and means True).
        preserve_rng_state: keyword, default True, as in :func:`checkpoint`.

    Returns:
        The output of the last function.

    Example::

        >>> model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.ReLU())
        >>> out = checkpoint_sequential(model, 2, onnxnn.randn(2, 4, requires_grad=True), use_reentrant=False)
    """
    if use_reentrant is None:
        warnings.warn(
            "onnxnn.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
            "explicitly. Without it use_reentrant=True is used, as in PyTorch. use_reentrant=False is "
            "recommended, but if you need to preserve the current default behavior, you can pass use_reentrant=True.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if isinstance(functions, Sequential):
        functions = list(functions.children())

    def run(start: int, end: int) -> Callable:
        def forward(value):
            for index in range(start, end + 1):
                value = functions[index](value)
            return value

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
