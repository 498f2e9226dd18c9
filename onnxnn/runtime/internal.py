"""The runtime's internal API: what the layers above it (nn, optim, export, import_) may use of a Tensor's insides.

A user never needs these; upper layers do: the recorded ``Value`` behind a Tensor, a Tensor around
a Value, rebinding a Tensor to a new value (an optimizer update, a state_dict load), recording a
node on Values without autograd. These functions are the one way they do it, so Tensor's private
attributes and the runtime's liveness and depth bookkeeping stay in the runtime (DESIGN principle 10).

Example::

    >>> from onnxnn.runtime import internal
    >>> value = internal.value_of(param)
    >>> (new_value,) = internal.record_op("Sub", (value, internal.value_of(step)))
    >>> internal.record_update(param, new_value)   # param now holds the pending update
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence, TypeVar, overload

import numpy as np

from ..ir.device import CPU
from ..ir.graph import Value, hold
from ..ir.mode import MODE, trace_data_read
from .aliases import ALIAS_GROUPS
from .views import VIEW_LINKS
from .autograd import Function, VersionCounter
from .backward import accumulates_into_every_leaf
from .depth import after_recording, exporting
from .fastpath.derived_checks import derived_check
from .realization import data_of as _data_of_value, host_data as _host_data, realize, realize_step
from .recording import record
from .tensor import Tensor

_TensorT = TypeVar("_TensorT", bound=Tensor)  # tensor_of returns an instance of the tensor_type it is given

__all__ = [
    "value_of",
    "tensor_of",
    "constant_tensor",
    "drawn_constant_tensor",
    "full_tensor",
    "rebind",
    "record_op",
    "record_update",
    "apply_in_place",
    "grad_function",
    "requires_grad_flag",
    "accumulates_into_every_leaf",
    "realize_values",
    "realize_step_values",
    "data_of",
    "known_data",
    "check_known_data",
    "exporting",
    "TensorState",
    "save_state",
    "restore_state",
]


# ---------------------------------------------------------------------- values and tensors
def value_of(tensor: Tensor) -> Value:
    """The recorded :class:`~onnxnn.ir.graph.Value` a tensor currently holds (pending or computed)."""
    return tensor._value


@overload
def tensor_of(
    value: Value, grad_fn: Function | None = None, output_nr: int = 0, requires_grad: bool = False
) -> Tensor: ...


@overload
def tensor_of(
    value: Value,
    grad_fn: Function | None = None,
    output_nr: int = 0,
    requires_grad: bool = False,
    *,
    tensor_type: type[_TensorT],
) -> _TensorT: ...


def tensor_of(
    value: Value,
    grad_fn: Function | None = None,
    output_nr: int = 0,
    requires_grad: bool = False,
    *,
    tensor_type: type[Tensor] = Tensor,
) -> Tensor:
    """A new Tensor handle on ``value``.

    Args:
        value: the recorded value the tensor holds.
        grad_fn: the autograd function that produced it (its ``output_nr``-th output), if any.
        output_nr: which output of ``grad_fn`` the tensor is.
        requires_grad: whether a leaf (no ``grad_fn``) requires gradient; implied by ``grad_fn``.
        tensor_type: the Tensor subclass to create (``Parameter``, ``Buffer``, ...).
    """
    return tensor_type._from_value(value, grad_fn, output_nr, requires_grad)


def constant_tensor(array: np.ndarray, dtype=None, device=CPU, requires_grad: bool = False) -> Tensor:
    """A leaf tensor holding ``array`` (already computed), of ``dtype`` (default: the array's) on ``device``.

    The array is converted to ``dtype`` when it differs: a tensor whose data disagreed with its
    declared dtype would compute with the wrong type and fail later, far from here.
    """
    if dtype is not None and array.dtype != dtype.numpy_dtype:
        array = np.asarray(array, dtype.numpy_dtype)
    return Tensor._from_array(array, dtype, device, requires_grad)


def drawn_constant_tensor(draw: Callable[[], np.ndarray], dtype, device=CPU) -> Tensor:
    """A leaf tensor holding ``draw()``, an array of ``dtype`` made from random draws alone (a dropout mask).

    ``draw`` reads no tensor's data and draws from onnxnn's generators only, so that a forward
    replay may call it again for new draws at the same point of the generator's stream: a forward
    traced while it draws is replayed with ``draw`` called anew (``fastpath/forward_replay.py``)
    rather than never, as after other draws (which may have depended on data).
    """
    trace = MODE.trace
    if trace is None:
        return constant_tensor(draw(), dtype, device)
    read_data = trace.read_data
    array = draw()
    trace.read_data = read_data  # the draws, and nothing else, set it
    tensor = constant_tensor(array, dtype, device)
    trace.effects.append(("draw", tensor._value, draw))
    return tensor


def full_tensor(shape: tuple, fill, dtype, device=CPU) -> Tensor:
    """A leaf tensor of ``shape`` filled with ``fill`` (already computed): zeros, ones, a 0-d scalar."""
    return Tensor._full(tuple(shape), fill, dtype, device)


# ---------------------------------------------------------------------- writes
def rebind(tensor: Tensor, value: Value) -> None:
    """Replaces the value ``tensor`` holds, without autograd checks, and bumps its version.

    For writes autograd must not refuse (gradient accumulation, optimizer updates, restoring a
    state): the tensor keeps its ``grad_fn`` and flags. It becomes the handle that keeps a pending
    ``value`` needed, so realizations compute and keep it.
    """
    tensor._rebind(value)


def record_op(
    op_type: str,
    inputs: Sequence[Value | None],
    attrs: dict | None = None,
    domain: str = "",
    num_outputs: int | None = None,
) -> tuple[Value, ...]:
    """Records one ONNX node on Values, without autograd, and returns its output Values.

    The node is recorded as :func:`~onnxnn.runtime.tensor.apply_op` records one (eagerly computed
    in ``set_executor(..., eager=True)``, a history deeper than ``MAX_PENDING_DEPTH`` realized) but
    no Tensor, promotion or ``grad_fn`` is made: optimizer updates and other bookkeeping record
    dozens of nodes per step on values of one dtype.

    Raises:
        NotImplementedError: no shape rule is registered for the op.
        RuntimeError: the inputs live on different devices, or the shape rule rejects them.
    """
    outputs = record(op_type, tuple(inputs), attrs, domain, num_outputs)
    after_recording(outputs[0].node, outputs)
    return outputs


def record_update(tensor: Tensor, new: Tensor | Value) -> None:
    """The in-place write of an optimizer step: rebinds ``tensor`` to ``new``, cast to its dtype.

    Both ways a step computes its new values (nodes recorded on Values with :func:`record_op`, as
    SGD's fused Momentum node, or Tensor arithmetic under ``no_grad``, as Adam's) end here. No
    autograd checks: parameters are leaves that require grad. The version bumps, so a backward
    through a graph that saved the old value refuses to run.
    """
    # mypy narrows ``type(new) is Value`` only on the true branch: the other is a Tensor.
    value = new if type(new) is Value else new._value  # type: ignore[union-attr]
    if value.dtype is not tensor._value.dtype:
        (value,) = record_op("Cast", (value,), {"to": tensor._value.dtype})
    # Not ``Tensor._rebind``: a step realizes every value it writes before it returns, so the
    # value needs no holder for liveness, and a weak reference per parameter per step is its cost.
    tensor._value = value
    tensor._bump_version()
    if ALIAS_GROUPS or VIEW_LINKS:
        tensor._written()  # a parameter's ``.data`` or view taken earlier sees the step


def apply_in_place(tensor: Tensor, function: Callable, *args) -> Tensor:
    """Runs ``function(tensor, *args)`` and writes the result into ``tensor`` (an in-place op); returns it.

    The write goes through autograd as PyTorch's in-place ops do: the result's history becomes the
    tensor's, the version bumps, and a leaf that requires grad is refused while gradients are recorded.

    Raises:
        RuntimeError: ``tensor`` is a leaf that requires grad and gradients are enabled.
    """
    return tensor._assign(function(tensor._alias(), *args))


# ---------------------------------------------------------------------- autograd state
def grad_function(tensor: Tensor) -> Function | None:
    """The autograd function that produced ``tensor`` (its ``grad_fn``), None for a leaf."""
    return tensor._grad_fn


def requires_grad_flag(tensor: Tensor) -> bool:
    """Whether ``tensor`` requires gradient (the flag itself: no leaf or dtype checks)."""
    return tensor._requires_grad


class TensorState(NamedTuple):
    """What :func:`save_state` keeps of a tensor: its value, autograd history and version."""

    value: Value
    grad_fn: Function | None
    output_nr: int
    requires_grad: bool
    version: int | None  # None: nothing had written the tensor in place yet


def save_state(tensor: Tensor) -> TensorState:
    """Remembers ``tensor``'s value, autograd history and version, for :func:`restore_state`."""
    counter = tensor._version_counter
    return TensorState(
        tensor._value,
        tensor._grad_fn,
        tensor._output_nr,
        tensor._requires_grad,
        None if counter is None else counter.value,
    )


def restore_state(tensor: Tensor, state: TensorState, *, rewind_version: bool = False) -> None:
    """Puts back what :func:`save_state` remembered of ``tensor``.

    Args:
        tensor: the tensor ``state`` was saved from.
        state: from :func:`save_state`.
        rewind_version: also put the version counter back, as if the writes since never
            happened (they were only recorded, never read: an exported training step). By
            default the restore is one more write, and the version bumps.
    """
    tensor._grad_fn = state.grad_fn
    tensor._output_nr = state.output_nr
    tensor._requires_grad = state.requires_grad
    if not rewind_version:
        tensor._rebind(state.value)
        return
    tensor._value = state.value
    hold(state.value, tensor)
    tensor._written()
    if state.version is not None:
        counter = tensor._version_counter
        if counter is None:
            counter = tensor._version_counter = VersionCounter()
        counter.value = state.version


# ---------------------------------------------------------------------- data
def realize_values(tensors) -> None:
    """Computes the pending values of every tensor in ``tensors`` in one run."""
    realize([tensor._value for tensor in tensors])


def realize_step_values(tensors) -> None:
    """Computes an optimizer step's new parameters and states (``tensors``): ``realization.realize_step``."""
    realize_step([tensor._value for tensor in tensors])


def data_of(tensor: Tensor) -> np.ndarray:
    """The array of ``tensor``'s value, computing it (and its pending history) first if needed."""
    return _data_of_value(tensor._value)


def check_known_data(tensor: Tensor, check: Callable[[np.ndarray], None], force: bool = False) -> None:
    """Runs ``check`` on ``tensor``'s array if it is already computed (never runs anything but, with
    ``force``, ``tensor``'s own history: a check PyTorch makes on every call, embedding's indices;
    a short history is computed apart by onnxnn's kernels, leaving ``tensor`` pending).

    For PyTorch's checks on data that can only raise (target indices in range): what is recorded does
    not depend on the data, so a forward traced while it checks stays replayable, and each replay runs
    ``check`` on its own argument's array (``fastpath/forward_replay.py``). A check whose outcome
    changes what is recorded reads ``known_data`` instead.
    """
    value = tensor._value
    data = _host_data(value)
    trace = MODE.trace
    if data is None and force:
        # Computed apart where it can be, the value left pending: a trace then reads nothing, and
        # plain calls and replays leave the same graph (``fastpath/derived_checks.py``).
        derived = derived_check(value, check, trace)
        if derived is None:
            data = _data_of_value(value)  # computed (or copied from a device) now: a trace notes the read
        else:
            source, source_check = derived
            if source is None:
                source_check(None)  # made from constants alone, which a replay makes the same
                return
            value, check, data = source, source_check, source.data
    if data is not None:
        check(data)
    if trace is not None:
        trace.effects.append(("check", value, check, force))


def known_data(tensor: Tensor) -> np.ndarray | None:
    """The array of ``tensor``'s value if it is already computed, else None; never runs anything.

    For checks PyTorch makes on data (target indices in range) that would otherwise need a run, and
    for layouts decided by data (CTC's target lengths). A trace being recorded notes the read: a
    replay of its nodes would skip the check, or keep the layout of other data.
    """
    data = _host_data(tensor._value)
    if data is not None:
        trace_data_read()
    return data
