"""The backward pass: reverse-mode autodiff as a walk over the backward graph (``runtime/autograd.py``).

``run_backward`` and ``grad`` walk the functions reachable from their roots in reverse
topological order and ask each for the gradients of its inputs. The gradients stay pending: the
backward graph runs when a gradient is read or, in a training loop, together with the optimizer's
update, so a whole step is typically one or two runs. The driver, not the rules, sums broadcast
gradients back to input shapes, accumulates gradients of shared inputs and fills symbolic zeros.
Hooks and what ends in ``.grad`` are ``backward_ends.py``'s.
A backward whose structure repeats is replayed by the fast path (``fastpath/backward_replay.py``).
"""

from __future__ import annotations

import threading
import warnings
from itertools import zip_longest

import numpy as np

from ..ir.graph import static_constant
from ..ir.mode import MODE
from ..ir.plan import realize_together, together_with
from ..ir.registry import unmaterialized_gradients
from . import tensor as _tensor  # circular (tensor imports backward): attributes are read at call time
from .anomaly import run_checked
from .autograd import FREED_MESSAGE, AccumulateGrad, Function, ReleasedNode, gradient_edge
from .backward_ends import accumulate, apply_hooks, node_hook_result, output_gradient_hooks
from .fastpath import backward_replay
from .grad_mode import set_grad_enabled
from .gradient_sums import summed

__all__ = ["run_backward", "grad", "ENGINE"]


def _collect(roots: list) -> tuple[dict, list]:
    """Dependency counts of every function reachable from ``roots`` (a list of functions).

    The engine's tables are keyed by the function objects themselves: they hash by identity, in C.
    """
    dependencies: dict = {}
    order: list = []
    seen = set()
    stack = list(roots)
    while stack:
        function = stack.pop()
        if function in seen:
            continue
        seen.add(function)
        order.append(function)
        for edge in function._edges:
            if edge is None or edge[0] is None:
                continue
            dependencies[edge[0]] = dependencies.get(edge[0], 0) + 1
            stack.append(edge[0])
    return dependencies, order


def _needed(order: list, targets: set) -> set:
    """The functions whose backward must run: those from which some target lies further back (the path
    to prune to). A target itself runs only when another lies behind it, as in PyTorch's engine."""
    needed = set()
    changed = True
    while changed:
        changed = False
        for function in order:
            if function in needed:
                continue
            if any(
                edge is not None and edge[0] is not None and (edge[0] in needed or edge[0] in targets)
                for edge in function._edges
            ):
                needed.add(function)
                changed = True
    return needed


def _execute(
    roots: list,
    root_grads: list,
    *,
    retain_graph: bool,
    create_graph: bool,
    capture: list | None = None,
    accumulate_only: set | None = None,
) -> list:
    """The backward engine shared by ``Tensor.backward`` and ``autograd.grad``.

    Args:
        roots: (function, output_nr) edges the gradients start from.
        root_grads: the gradient tensor for each root.
        capture: edges whose incoming gradient is returned instead of accumulated (autograd.grad).
        accumulate_only: the leaf accumulators to update and the grad_fn of non-leaf tensors whose
            retained gradient to update (backward(inputs=...)); None means every leaf.

    Returns:
        The captured gradients (None where nothing flowed), in the order of ``capture``.
    """
    MODE.grad.in_backward += 1
    _RUNNING.kinds.append(capture is None and accumulate_only is None)
    profiler = MODE.profiler
    if profiler is not None:
        profiler.begin_range("onnxnn::backward")
    try:
        return _drive(
            roots,
            root_grads,
            retain_graph=retain_graph,
            create_graph=create_graph,
            capture=capture,
            accumulate_only=accumulate_only,
        )
    finally:
        MODE.grad.in_backward -= 1
        _RUNNING.kinds.pop()
        if profiler is not None:
            profiler.end_range()


class _RunningBackwards(threading.local):
    """Per thread, the backwards running, innermost last: whether each accumulates into every leaf
    it reaches (``backward()``), rather than returning gradients (``autograd.grad``) or
    accumulating into some leaves only (``backward(inputs=...)``)."""

    def __init__(self):
        self.kinds: list = []


_RUNNING = _RunningBackwards()


def accumulates_into_every_leaf() -> bool:
    """Whether the innermost running backward accumulates into every leaf it reaches (True outside
    any backward). A node whose backward runs a backward of its own (a reentrant checkpoint) can
    only hand gradients on through ``.grad`` when it does."""
    return not _RUNNING.kinds or _RUNNING.kinds[-1]


def _drive(
    roots: list,
    root_grads: list,
    *,
    retain_graph: bool,
    create_graph: bool,
    capture: list | None,
    accumulate_only: set | None,
) -> list:
    """``_execute``'s body, run while ``MODE.grad.in_backward`` counts it."""
    # Incoming gradients per function, by output number. This loop runs for every backward of a
    # training step, so its tables are keyed by the functions (identity hashes) and it merges the
    # passes over each node's edges.
    buffers: dict = {}
    for (function, output_nr), gradient in zip(roots, root_grads):
        _deposit(buffers, function, output_nr, gradient)
    root_functions = list(dict.fromkeys(function for function, _ in roots))
    dependencies, order = _collect(root_functions)

    targets = None
    if capture is not None:
        targets = {edge[0] for edge in capture if edge is not None}
    elif accumulate_only is not None:
        targets = set(accumulate_only)
    needed = _needed(order, targets) if targets is not None else None
    if accumulate_only is not None and needed is not None:
        # A non-leaf input's node runs, as in PyTorch's engine: its retained gradient (``.grad``)
        # is then the one its tensor hooks give, and its node hooks run.
        needed.update(function for function in accumulate_only if type(function) is not AccumulateGrad)
    captured: dict = {}
    capture_keys = {(e[0], e[1]) for e in capture if e is not None} if capture is not None else None

    ready = [f for f in root_functions if dependencies.get(f, 0) == 0]
    accumulated: list = []  # the values left in leaves' .grad
    with set_grad_enabled(bool(create_graph)):  # it takes a bool only, as PyTorch's; create_graph may be truthy
        while ready:
            function = ready.pop()
            slots = buffers.pop(function, _NOTHING)
            for output_nr, gradient in slots.items():
                if type(gradient) is list:  # several uses' gradients, summed now that all arrived
                    slots[output_nr] = summed(gradient)
            if capture_keys:
                # A captured gradient is the one its tensor's hooks give, as .grad would be; except a
                # non-leaf's whose backward runs on (another input lies behind it): its hooks run once,
                # there, and the gradient is captured as it arrived, as PyTorch's engine does.
                is_leaf = type(function) is AccumulateGrad
                for output_nr, gradient in slots.items():
                    if (function, output_nr) in capture_keys:
                        if is_leaf and function.variable._backward_hooks:
                            gradient = apply_hooks(function.variable._backward_hooks, gradient)
                        elif (
                            not is_leaf
                            and function not in (needed or ())  # set whenever gradients are captured
                            and function._tensor_hooks
                            and output_nr in function._tensor_hooks
                        ):
                            gradient = apply_hooks(function._tensor_hooks[output_nr], gradient)
                        captured[(function, output_nr)] = gradient
            if type(function) is AccumulateGrad:
                gradient = slots.get(0)
                if (
                    gradient is not None
                    and capture is None
                    and (accumulate_only is None or function in accumulate_only)
                ):
                    accumulate(function, gradient, create_graph)
                    stored = function.variable._grad
                    if stored is not None:  # (a post-accumulate hook may have taken it)
                        accumulated.append(stored._value)
                continue
            if needed is not None and function not in needed:
                input_grads: tuple | list = ()  # no target lies behind it; still release its dependents below
            elif MODE.anomaly:
                input_grads = run_checked(_run_function, function, slots, create_graph)
            else:
                input_grads = _run_function(function, slots, create_graph)
            for edge, gradient in zip_longest(function._edges, input_grads):
                if edge is None:
                    continue
                next_function, output_nr = edge
                if next_function is None:
                    continue
                if gradient is not None:
                    _deposit(buffers, next_function, output_nr, gradient)
                remaining = dependencies[next_function] - 1
                dependencies[next_function] = remaining
                if remaining == 0:
                    ready.append(next_function)
            if not retain_graph:
                function.release()
    realize_together(accumulated)
    results = []
    if capture is not None:
        for edge in capture:
            gradient = None if edge is None else captured.get((edge[0], edge[1]))
            if gradient is not None and not create_graph:
                gradient = gradient.detach()
            results.append(gradient)
    return results


_NOTHING: dict = {}  # the slots of a function no gradient reached (read only)


def _deposit(buffers: dict, function, output_nr: int, gradient) -> None:
    """Adds ``gradient`` to what has reached output ``output_nr`` of ``function`` so far: the second and
    later make a list, summed when the function runs (``gradient_sums.summed``: all at once, so that
    products over rows can become one)."""
    slots = buffers.get(function)
    if slots is None:
        buffers[function] = {output_nr: gradient}
    elif output_nr in slots:
        arrived = slots[output_nr]
        if type(arrived) is list:
            arrived.append(gradient)
        else:
            slots[output_nr] = [arrived, gradient]
    else:
        slots[output_nr] = gradient


def _run_function(function: Function, slots: dict, create_graph: bool) -> list:
    """Runs tensor hooks, node pre-hooks, the node's backward and node hooks of one function."""
    outputs = function.outputs
    if outputs is None:
        raise RuntimeError(FREED_MESSAGE)
    gradient = slots.get(0)
    if len(outputs) == 1 and gradient is not None and not (function._tensor_hooks or function._retained):
        grad_outputs = [gradient]  # the common case: one output, its gradient arrived, no hooks
        complete = True
    else:
        grad_outputs = []
        for output_nr in range(len(outputs)):
            gradient = slots.get(output_nr)
            if gradient is not None and (function._tensor_hooks or function._retained):
                gradient = output_gradient_hooks(function, output_nr, gradient, create_graph)
            grad_outputs.append(gradient)
        complete = False
    if function._pre_hooks:
        for hook in list(function._pre_hooks.values()):
            result = hook(tuple(grad_outputs))
            if result is not None:
                grad_outputs = node_hook_result(hook, result, grad_outputs)
        complete = False
        if all(gradient is None for gradient in grad_outputs):  # the hooks dropped every gradient
            return [None] * len(function._edges)
    if not complete and function.node is not None and all(gradient is None for gradient in grad_outputs):
        # No gradient reached this recorded op (hooks before it dropped them): PyTorch's built-in nodes
        # compute none, so the leaves behind keep .grad None (an optimizer then skips them). A custom
        # Function's backward still runs, on zeros (its materialize_grads).
        fitted: list = [None] * len(function._edges)
    else:
        # Hooks see None for an output no gradient reached, as PyTorch's; the node's backward sees zeros.
        arguments = grad_outputs if complete else _materialized(function, outputs, grad_outputs)
        fitted = function.input_gradients(arguments, create_graph)
    if function._hooks:
        for hook in list(function._hooks.values()):
            result = hook(tuple(fitted), tuple(grad_outputs))
            if result is not None:
                fitted = node_hook_result(hook, result, fitted)
    return fitted


def _materialized(function: Function, outputs: tuple, grad_outputs: list) -> list:
    """``grad_outputs`` with zeros for the ``outputs`` no gradient reached, where the node's backward wants them."""
    if not function.materialize_grads:
        return grad_outputs
    node = function.node  # None for a custom Function, whose own flag decides
    if node is not None and (node.domain, node.op_type) in _UNMATERIALIZED:
        return grad_outputs
    materialized = grad_outputs
    for output_nr, (gradient, value) in enumerate(zip(grad_outputs, outputs)):
        if gradient is None and value is not None:
            if materialized is grad_outputs:
                materialized = list(grad_outputs)  # the hooks' list stays as they saw it
            materialized[output_nr] = _tensor.Tensor._zeros(value.shape, value.dtype, value.device)
    return materialized


_UNMATERIALIZED = unmaterialized_gradients.table


def _root_gradients(tensors: list, grad_tensors: list) -> list:
    if len(grad_tensors) < len(tensors):
        # zip would drop the outputs without a gradient: PyTorch refuses the call (and, as zip,
        # ignores gradients beyond the outputs).
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grad_tensors)} gradients")
    result = []
    for index, (tensor, gradient) in enumerate(zip(tensors, grad_tensors)):
        if not tensor.requires_grad:
            raise RuntimeError(f"element {index} of tensors does not require grad and does not have a grad_fn")
        if gradient is None:
            if tensor.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            # A structural constant: embedded in the compiled graph (where it folds away), not fed.
            value = tensor._value
            ones: int | list = 1
            for _ in value.shape:  # a one-element shape: [[1]] for (1, 1)
                ones = [ones]
            gradient = _tensor.Tensor._from_value(static_constant(ones, value.dtype, value.device))
        elif not isinstance(gradient, _tensor.Tensor):
            gradient = _tensor.Tensor._from_array(
                np.asarray(gradient, dtype=tensor.dtype.numpy_dtype), tensor.dtype, tensor.device
            )
        if gradient._value.shape != tensor._value.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{index}] has a shape of {gradient.shape} "
                f"and output[{index}] has a shape of {tensor.shape}."
            )
        result.append(gradient)
    return result


def run_backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False, inputs=None) -> None:
    """Computes gradients of ``tensors`` and accumulates them into the ``.grad`` of graph leaves."""
    tensors = [tensors] if isinstance(tensors, _tensor.Tensor) else list(tensors)
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, _tensor.Tensor):
        grad_tensors = [grad_tensors]
    if retain_graph is None:
        retain_graph = create_graph
    root_grads = _root_gradients(tensors, list(grad_tensors))
    roots: list = [gradient_edge(t) for t in tensors]  # none is None: _root_gradients refused those
    accumulate_only: set | None = None  # the nodes that keep what reaches them: accumulators, inputs' grad_fn
    if inputs is not None:
        inputs = [inputs] if isinstance(inputs, _tensor.Tensor) else list(inputs)
        if not inputs:
            raise RuntimeError("'inputs' argument to backward() cannot be empty.")
        accumulate_only = set()
        for tensor in inputs:
            if not isinstance(tensor, _tensor.Tensor):
                raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(tensor).__name__}")
            if not tensor._requires_grad:  # PyTorch's words: it retains the grad of each input
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            if tensor._grad_fn is None:
                accumulate_only.add(tensor._grad_accumulator())
            else:
                # As PyTorch: a non-leaf input retains its gradient (for later backwards too), and
                # gradients flow to its node, whose output's .grad then accumulates it.
                tensor.retain_grad()
                accumulate_only.add(tensor._grad_fn)
    # The loss joins its gradients' group: read after the optimizer's step, it is computed with the
    # gradients' graph, which runs the forward pass anyway; read before it, it computes them too.
    with together_with([tensor._value for tensor in tensors]):
        if (
            MODE.fast_path
            and accumulate_only is None
            and not create_graph
            and len(roots) == 1
            and not MODE.eager
            and not MODE.anomaly  # whose checks run in the general driver
            and backward_replay.backward(roots[0], root_grads[0], retain_graph, ENGINE)
        ):
            return  # a structure seen before: its traced backward was replayed
        _execute(
            roots, root_grads, retain_graph=retain_graph, create_graph=create_graph, accumulate_only=accumulate_only
        )


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused=None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple:
    """Computes and returns the gradients of ``outputs`` with respect to ``inputs`` (without touching ``.grad``).

    ``only_inputs`` is PyTorch's deprecated argument, ignored as there (with its warning when False).

    With ``is_grads_batched``, the first dimension of every ``grad_outputs`` tensor is a batch of
    vectors, and each input's gradient gets that dimension first: the vector-Jacobian product of
    each row (a backward per row, where PyTorch vectorizes with vmap; the values are the same). As
    PyTorch's, the zeros of ``materialize_grads`` are shaped as the input even then (no batch dimension),
    and require grad under ``create_graph``.

    Example::

        >>> x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
        >>> (g,) = onnxnn.autograd.grad((x * x).sum(), x)
        >>> g
        tensor([2., 4.])
    """
    if not only_inputs:
        warnings.warn(
            "only_inputs argument is deprecated and is ignored now (defaults to True). To accumulate gradient "
            "for other parts of the graph, please use torch.autograd.backward.",
            FutureWarning,
            stacklevel=2,
        )
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, but got: allow_unused=False."
        )
    outputs = [outputs] if isinstance(outputs, _tensor.Tensor) else list(outputs)
    single = isinstance(inputs, _tensor.Tensor)
    inputs = [inputs] if single else list(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, _tensor.Tensor):
        grad_outputs = [grad_outputs]
    if retain_graph is None:
        retain_graph = create_graph
    if is_grads_batched:
        return _batched_grad(
            outputs, inputs, list(grad_outputs), retain_graph, create_graph, allow_unused, materialize_grads
        )
    for tensor in inputs:
        if not isinstance(tensor, _tensor.Tensor):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got {type(tensor).__name__}")
        if not tensor.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    root_grads = _root_gradients(outputs, list(grad_outputs))
    roots = [gradient_edge(t) for t in outputs]
    capture = [gradient_edge(t) for t in inputs]
    results = _execute(roots, root_grads, retain_graph=retain_graph, create_graph=create_graph, capture=capture)
    for index, gradient in enumerate(results):
        if gradient is None and not (allow_unused or materialize_grads):
            raise RuntimeError(
                f"The differentiated Tensor at index {index} appears to not have been used in the "
                "graph. Set allow_unused=True if this is the desired behavior."
            )
    return _with_zeros(results, inputs, create_graph) if materialize_grads else tuple(results)


def _with_zeros(gradients, inputs, create_graph: bool) -> tuple:
    """Zeros shaped as the input for each missing gradient, as PyTorch: leaves that require grad under
    ``create_graph`` (so a further backward accepts them), and shaped as the input even for batched
    gradients (PyTorch fills them in after its vmap)."""
    return tuple(
        gradient
        if gradient is not None
        else _tensor.Tensor._zeros(tensor.shape, tensor.dtype, tensor.device).requires_grad_(create_graph)
        for gradient, tensor in zip(gradients, inputs)
    )


def _batched_grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, materialize_grads) -> tuple:
    """``grad`` of each row of the batched ``grad_outputs``, the rows' gradients stacked per input."""
    if any(not isinstance(vector, _tensor.Tensor) or vector.dim() == 0 for vector in grad_outputs):
        raise RuntimeError("If `is_grads_batched=True`, every grad_output must be a Tensor with a batch dimension")
    sizes = {vector.shape[0] for vector in grad_outputs}
    if len(sizes) != 1:
        raise RuntimeError(
            f"If `is_grads_batched=True`, the grad_outputs' first dimensions must agree, got {sorted(sizes)}"
        )
    (rows,) = sizes
    per_row = [
        grad(
            outputs,
            inputs,
            [vector[row] for vector in grad_outputs],
            retain_graph=retain_graph or row < rows - 1,
            create_graph=create_graph,
            allow_unused=allow_unused or materialize_grads,
        )
        for row in range(rows)
    ]
    stacked: list = []
    for position, tensor in enumerate(inputs):
        gradients = [row[position] for row in per_row]
        if rows == 0:
            stacked.append(_tensor.Tensor._zeros((0,) + tuple(tensor.shape), tensor.dtype, tensor.device))
        elif any(gradient is None for gradient in gradients):
            stacked.append(None)  # allow_unused: unused in every row alike
        else:
            rows_first = tuple(gradient.unsqueeze(0) for gradient in gradients)
            stacked.append(_tensor.apply_op("Concat", rows_first, {"axis": 0}, "StackBackward0"))
    return _with_zeros(stacked, inputs, create_graph) if materialize_grads else tuple(stacked)


class _Engine:
    """What the fast path's backward replay drives: handed to it, so the fast path imports no autograd."""

    Function = Function
    AccumulateGrad = AccumulateGrad
    ReleasedNode = ReleasedNode
    execute = staticmethod(_execute)

    @property
    def Tensor(self) -> type:
        return _tensor.Tensor


ENGINE = _Engine()
