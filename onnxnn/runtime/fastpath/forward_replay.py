"""Forward passes replayed: a forward of onnxnn's own code records a structure's nodes once.

Serving a model calls the same forward on inputs of the same shapes again and again, and
recording it costs the same Python every time: module calls, argument checks, shape rules and a
Tensor per intermediate (4 us per op; 5% of an MLP's inference on one core). A forward that is
onnxnn's own code (its layers, an imported graph: ``nn.Module`` decides, see
``nn/modules/_forward_replay.py``) records nodes that depend only on the structure: the
arguments' shapes, dtypes and devices, the non-tensor arguments, and the shapes of the state it
reads. So the first call of a structure runs the forward under a trace (``MODE.trace``, as a
traced backward does), and later calls create the same nodes from the trace in generated code
(``recorded_steps``), reading the new arguments and the state's current values.

Which state tensors and arguments held one value is part of the structure too: layers that
``copy.deepcopy`` made share their values until an in-place update sets them apart, and a replay
that finds them apart traces again instead of reading one for the other.

Where gradients are recorded, which argument and state tensors require them is part of the
structure, and a replay makes the backward functions the traced forward made, so a backward finds
the graph a plain call leaves (``replayed_functions``).

Nothing is computed early: the replay leaves the same pending graph as recording would, node
for node (with new values for the tensors the forward makes, as its calls make them anew), so
plans, sessions and results are the same with and without it (``set_fast_path``).
A forward that rebinds its own state in place (a BatchNorm's running statistics in training) is
replayed with the same writes after its nodes (``state_writes``: the rebinding, version and views
of ``_assign``, and the ``realize_alongside`` requests); one that draws its constants through
``internal.drawn_constant_tensor`` (dropout's masks) draws them anew, in its order, each replay,
and one that checks its arguments' data through ``internal.check_known_data`` (a loss's target
indices) checks the replay's (``replay_source``). A trace is not kept when its forward read data
or drew otherwise (its nodes may depend on it), changed an argument, wrote anything but its state
or through a view, returned something other than new tensors (nested in the containers
``result_structures`` makes again: tuples, lists, dicts with string keys, namedtuples, model
outputs, with None), or read a pending value from outside its arguments and state.
Returned tensors that are one tensor twice or views of each other, of an argument or of the state
(``nn.Unflatten``'s of its argument) are returned so again: the tensor itself, or a view made
again with the ops that made it (``output_links``); a trace whose returned tensors share storage
otherwise (``(y, y.detach())``) is not kept.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

from ...ir.graph import is_negative_zero
from ...ir.mode import MODE, RecordingTrace, drawn_values, traced
from ..tensor import Tensor
from ..views import VIEW_LINKS, is_contiguous, made_again, overlapping_views, view_path, view_root
from .replay_source import ARGUMENT as _ARGUMENT
from .replay_source import OUTPUT as _OUTPUT
from .replay_source import STALE, Drawn, Fresh, replay_source
from .replay_source import STATE as _STATE
from .replayed_functions import backward_steps
from .result_structures import result_structure
from .state_writes import reads_written_state, state_effects
from .recorded_steps import REPLAY_NAMESPACE, produced_by, slot_values

__all__ = [
    "ForwardTemplates",
    "arguments_key",
    "call",
    "first_call",
    "note_first_call",
    "has_template",
    "output_links",
    "relinked",
    "replay_info",
    "reset_counts",
]

TEMPLATE_LIMIT = 64  # structures kept per forward: a server sees a few batch shapes
_UNREPLAYABLE = object()
_SCALARS = (bool, int, float, str, type(None))
_NEGATIVE_ZERO = (float, "-0.0")  # a scalar argument's key


class ForwardTemplates:
    """The traced structures of one forward (a module tree): argument key -> template.

    A ``strict`` owner's forward may be anyone's code (``compiled_calls``): its traces also refuse
    a realized tensor read from outside the arguments and state (a global, a closure), which may
    be changed in place between calls; values the forward made itself (a constant, a mask built
    from shapes) are the same at every call.
    """

    __slots__ = ("templates", "sightings")
    strict = False

    def __init__(self):
        self.templates: dict = {}
        self.sightings: set = set()  # keys called once, not traced yet


def call(owner: ForwardTemplates, forward: Callable, args: tuple, kwargs: dict, state: list) -> Any:
    """Returns ``forward(*args, **kwargs)``, replayed when this structure was traced before.

    Args:
        owner: the templates of this forward.
        forward: the forward; its nodes must depend only on the structure (see the module doc).
        args, kwargs: its arguments.
        state: every tensor the forward may read besides its arguments (parameters and buffers),
            in an order that is the same at every call.
    """
    keyed = arguments_key(args, kwargs, owner.strict)  # anyone's forward (strict) may branch on more
    if keyed is None:
        return forward(*args, **kwargs)
    key, tensors = keyed
    if MODE.grad.enabled:
        key = _with_gradients(key, _requiring(tensors), state)
    template = owner.templates.get(key)
    if template is _UNREPLAYABLE:
        return forward(*args, **kwargs)
    if template is not None:
        result = template.replay(tensors, state)
        if result is not STALE:
            _counts["replayed"] += 1
            return result
    elif key not in owner.sightings:
        # Tracing a structure costs about three plain forwards: one that never comes back (a
        # new length each call) is not worth it, so a structure is traced at its second call.
        _sighted(owner, key)
        return forward(*args, **kwargs)
    return _trace(owner, key, forward, args, kwargs, tensors, state)


def _requiring(tensors: list) -> tuple:
    return tuple([tensor._requires_grad for tensor in tensors])


def _with_gradients(key: tuple, arguments_requiring: tuple, state: list) -> tuple:
    """A structure key where gradients are recorded: which argument and state tensors require them
    decides which nodes get backward functions."""
    return (key, arguments_requiring, _requiring(state))


def _sighted(owner: ForwardTemplates, key: tuple) -> None:
    if len(owner.sightings) >= TEMPLATE_LIMIT:
        owner.sightings.clear()
    owner.sightings.add(key)


def first_call(args: tuple, kwargs: dict) -> tuple | None:
    """What a call's structure key holds before its owner's state is known (``note_first_call``), or
    None where the call is never replayed. It holds no tensor."""
    keyed = arguments_key(args, kwargs)
    if keyed is None:
        return None
    return keyed[0], _requiring(keyed[1]) if MODE.grad.enabled else None


def note_first_call(owner: ForwardTemplates, first: tuple | None, state: list) -> None:
    """Notes a call made before ``owner`` existed (``first_call``) as a sighting of its structure, so
    that its next call traces it, as a second call does."""
    if first is not None:
        key, arguments_requiring = first
        _sighted(owner, key if arguments_requiring is None else _with_gradients(key, arguments_requiring, state))


def has_template(owner: ForwardTemplates, key: tuple) -> bool:
    """Whether the structure ``key`` of ``owner``'s forward was traced and can be replayed."""
    return isinstance(owner.templates.get(key), _Template)


def replay_info() -> dict:
    """``{"traced", "replayed"}``: forwards traced and replayed since the counts were reset."""
    return dict(_counts)


def reset_counts() -> None:
    _counts.update(traced=0, replayed=0)


_counts = {"traced": 0, "replayed": 0}


def arguments_key(args: tuple, kwargs: dict, facts: bool = False) -> tuple[tuple, list] | None:
    """The structural key of a call's arguments and their tensors (in the order a replay reads
    them), or None when an argument is not a tensor, a scalar, or a tuple or list of those.

    A tensor is keyed by its shape, dtype and device; with ``facts`` (anyone's forward: compiled
    calls), where it is not a plain tensor, also by what else a forward may branch on
    (``_tensor_facts``), as ``torch.compile`` guards on them. (onnxnn's own layers branch on
    ``requires_grad`` only where gradients are recorded, and then never replay.)
    """
    if len(args) == 1 and not kwargs and isinstance(args[0], Tensor):
        tensor = args[0]  # one tensor: most layers' calls, keyed without the general walk
        value = tensor._value
        # ``_plain``, inlined: a compiled call's frames cost most right after onnxruntime's run.
        if value.static is None and (
            not facts
            or type(tensor) is Tensor
            and not tensor._requires_grad
            and tensor._grad is None
            and not (VIEW_LINKS and id(tensor) in VIEW_LINKS)
        ):
            return ((value.shape, value.dtype, value.device),), [tensor]
    tensors: list = []
    key = _arguments_key(args, kwargs, tensors, facts)
    if key is None:
        return None
    if len(tensors) > 1:
        key += (_aliasing(tensors),)
    return key, tensors


def _plain(tensor) -> bool:
    """Whether ``tensor`` is a ``Tensor`` (not a ``Parameter``) that needs no gradient, has none and is
    no view: what ``_tensor_facts`` says of a tensor made by an op under ``no_grad``."""
    return (
        type(tensor) is Tensor
        and not tensor._requires_grad
        and tensor._grad is None
        and not (VIEW_LINKS and id(tensor) in VIEW_LINKS)
    )


def _tensor_facts(tensor) -> tuple:
    """What a forward may branch on besides the shape, dtype and device: ``isinstance(x, Parameter)``,
    ``x.requires_grad``, ``x.grad is None``, ``x._base is None``, ``x.is_contiguous()``."""
    return (
        type(tensor),
        tensor.requires_grad,
        tensor._grad is not None,
        view_root(tensor) is not None,
        is_contiguous(tensor),
    )


def _aliasing(tensors: list) -> tuple:
    """Per tensor argument, the first position holding the same tensor and the first holding its
    value: part of the structure, as a forward may branch on ``query is key`` (MultiheadAttention's
    self-attention) and a trace reads one value once. ``mha(x, x, x)`` traced and then replayed for
    ``mha(q, k, v)`` computed ``mha(v, v, v)``."""
    by_tensor: dict = {}
    by_value: dict = {}
    return tuple(
        (by_tensor.setdefault(id(tensor), position), by_value.setdefault(id(tensor._value), position))
        for position, tensor in enumerate(tensors)
    )


def _arguments_key(args: tuple, kwargs: dict, tensors: list, facts: bool) -> tuple | None:
    key: list = []
    if not _add_arguments(args, key, tensors, facts):
        return None
    if kwargs:
        for name, item in kwargs.items():
            key.append(name)
            if not _add_arguments((item,), key, tensors, facts):
                return None
    return tuple(key)


def _add_arguments(items, key: list, tensors: list, facts: bool) -> bool:
    for item in items:
        if isinstance(item, Tensor):
            value = item._value
            if value.static is not None:
                key.append(("static", value.static))
            elif facts and not _plain(item):
                key.append((value.shape, value.dtype, value.device, _tensor_facts(item)))
                tensors.append(item)
            else:
                key.append((value.shape, value.dtype, value.device))
                tensors.append(item)
        elif type(item) in _SCALARS:
            if type(item) is float and is_negative_zero(item):
                key.append(_NEGATIVE_ZERO)  # -0.0 == 0.0 and their hashes agree: 1 / (x * s) tells them apart
            else:
                key.append((type(item), item))  # 1, 1.0 and True are equal keys otherwise
        elif type(item) in (tuple, list):
            key.append((type(item), len(item)))
            if not _add_arguments(item, key, tensors, facts):
                return False
        else:
            return False
    return True


def _trace(owner: ForwardTemplates, key: tuple, forward, args, kwargs, tensors: list, state: list) -> Any:
    """Runs ``forward`` under a trace and keeps its template for ``key`` (or that it has none)."""
    arguments_before = [tensor._value for tensor in tensors]
    state_before = [tensor._value for tensor in state]
    _counts["traced"] += 1
    with traced(RecordingTrace(keep_created=True)) as trace:  # this thread's recording only
        result = forward(*args, **kwargs)
    template = None
    if not trace.read_data and all(tensor._value is value for tensor, value in zip(tensors, arguments_before)):
        template = _Template.build(
            trace, result, tensors, state, owner.strict, gradients=MODE.grad.enabled, state_before=state_before
        )
    owner.sightings.discard(key)
    templates = owner.templates
    if len(templates) >= TEMPLATE_LIMIT:
        templates.clear()
    templates[key] = _UNREPLAYABLE if template is None else template
    return result


class _Template:
    """A traced forward: the values to gather, the nodes to record, the structure to return.

    ``replay(tensors, state)`` is written out as straight-line Python (``source``, ``replay_source``) at its first
    call: a structure traced but never called again pays for the trace only.
    """

    __slots__ = ("parts", "source", "replay", "links", "checks")

    @classmethod
    def build(
        cls,
        trace: RecordingTrace,
        result,
        tensors: list,
        state_tensors: list,
        strict: bool = False,
        gradients: bool = False,
        state_before: list | None = None,
    ) -> "_Template | None":
        """The template of a traced forward, or None where a replay could not do what it did.

        ``tensors``, ``state_tensors``: its argument and state tensors; the arguments unchanged by
        the forward. ``state_before``: the state's values before it (None: unchanged too); a state
        tensor it rebound in place (a BatchNorm's running statistics) is rebound so by a replay.
        ``strict``: the only realized values besides static constants that a replay may take as
        they were are those the forward made while traced (``trace.created``).
        ``gradients``: the forward recorded gradients (its backward functions are made again).
        """
        produced = produced_by(trace.records)
        state = [tensor._value for tensor in state_tensors] if state_before is None else state_before
        effects = state_effects(trace.effects, produced, state_tensors, state, strict)
        if effects is None:
            return None
        outputs: list = []
        returned: list = []
        structure = result_structure(result, outputs, produced, returned, gradients)
        if structure is None:
            return None
        links = output_links(returned, tensors, state_tensors)
        if links is None:
            return None
        arguments = [tensor._value for tensor in tensors]
        # Where a replay finds each value read: an argument as given (which arguments held one value
        # is keyed: ``_aliasing``), else the state. Positions that held one value when traced (layers
        # ``copy.deepcopy`` made, ``load_state_dict`` from a sibling, the weight passed as an argument)
        # are read from the first, and the replay checks that the others still hold that very value:
        # an in-place update rebinds one position alone (``replay_source``).
        where: dict = {}
        for index, value in enumerate(arguments):
            where.setdefault(value, (_ARGUMENT, index, None, []))
        for index, value in enumerate(state):
            found = where.get(value)
            if found is None:
                # The metadata only: the traced value itself would keep replaced weights alive.
                where[value] = (_STATE, index, (value.shape, value.dtype, value.device), [])
            else:
                found[3].append(index)

        affected = [effect[-1] for effect in effects]
        parts = slot_values(trace.records, produced, outputs + affected, where)
        if parts is None:
            return None
        constants, gathers, steps, slots = parts
        effects = [(*effect[:-1], slots[effect[-1]]) for effect in effects]
        backward = None
        if gradients:
            backward = backward_steps(trace.records, produced, slots, returned, tensors, state_tensors)
            if backward is None or reads_written_state(backward[0], effects):
                return None
        created = trace.created if trace.created is not None else set()
        if strict and any(value.static is None and value not in created for value in constants[1:]):
            return None
        # Draws and checks of data, made again in the forward's order before the nodes: every draw,
        # read or not, so that the generator's stream moves as the forward's; each check (target
        # indices in range) on the value the replay gathers, where the forward made it.
        drawn_and_checked = _drawn_and_checked(trace.effects, slots, len(constants), len(gathers))
        if drawn_and_checked is None:
            return None
        drawn = drawn_values(drawn_and_checked)
        # A plain call makes the values its forward makes anew each time, which a specialization
        # then never sees twice (plan_cache.watch_stable_inputs): a replay makes new ones as well,
        # or its specialization would embed them and round otherwise (principle 9: bitwise the same
        # with the fast path off); a drawn one is drawn anew. Scalars stay shared: equal ones may be
        # one value on a device in plain calls too (ops/_common.scalar_constant), and no
        # specialization embeds a scalar.
        constants = [
            Drawn(value)
            if index and value in drawn
            else Fresh(value)
            if index and value.static is None and value.shape and value in created
            else value
            for index, value in enumerate(constants)
        ]
        links = links if any(link is not None for link in links) else None
        output_slots = [slots[value] for value in outputs]
        parts = (constants, gathers, steps, output_slots, structure, links, backward, effects, drawn_and_checked)
        checks = [
            (gathers[slot - len(constants)][:2], check, force)
            for kind, slot, check, force in (effect for effect in drawn_and_checked if effect[0] == "check")
        ]
        return cls(parts, links, checks)

    def __init__(self, parts: tuple, links: list | None = None, checks: list | None = None):
        self.parts: tuple | None = parts  # replay_source's arguments, until the source is written
        self.source = ""
        self.replay: Callable = self._compile_then_replay
        self.links = links  # how the returned tensors alias each other and the inputs (``output_links``)
        # Its checks of data, in order: ((ARGUMENT or STATE, index), check, force), for a run that
        # skips the replay (``compiled_calls``' prepared runs) to make them too.
        self.checks = checks or []

    def _compile_then_replay(self, tensors: list, state: list):
        # Writing and compiling the code costs a few forwards: a structure pays it when it comes back.
        # Threads calling one model may all come here at once: one writes it, the others find it written.
        with _WRITING:
            if self.parts is not None:
                namespace: dict[str, Any] = dict(
                    REPLAY_NAMESPACE, wrap=Tensor._from_value, STALE=STALE, relinked=relinked
                )
                constants, gathers, steps, output_slots, structure, links, backward, effects, before = self.parts
                self.source = replay_source(
                    constants, gathers, steps, output_slots, structure, links, backward, effects, before, namespace
                )
                exec(compile(self.source, f"<onnxnn forward replay {next(_replay_numbers)}>", "exec"), namespace)
                self.replay = namespace["replay"]
                self.parts = None
        return self.replay(tensors, state)


def _drawn_and_checked(effects: list, slots: dict, first_gathered: int, gathered: int) -> list | None:
    """``("draw", value, draw)`` and ``("check", slot, check, force)`` for a trace's draws and checks of data,
    in its order; None where a replay could not make them so: a check of a value it does not gather
    (computed by the forward, or read by no node), or one after a state write (the replay writes
    after its nodes, so a check raising there would leave the state as the forward did not). A check
    of a constant the forward made (``x[onnxnn.tensor([0, 2])]``) passed when traced, and a replay
    makes that constant the same: it is not made again, unless the constant was drawn."""
    made: list = []
    written = False
    drawn = drawn_values(effects)
    for effect in effects:
        kind = effect[0]
        if kind == "draw":
            made.append(effect)
        elif kind == "check":
            slot = slots.get(effect[1])
            if slot is not None and slot < first_gathered and effect[1] not in drawn:
                continue
            if written or slot is None or not first_gathered <= slot < first_gathered + gathered:
                return None
            made.append(("check", slot, effect[2], effect[3]))
        else:
            written = True
    return made


def output_links(returned: list, tensors: list, state: list) -> list | None:
    """Per tensor a forward returned, how a replay returns it as the forward did (PyTorch's aliasing:
    ``(y, y)`` is one tensor twice, ``(y, y[0])`` a view of it, ``nn.Unflatten`` a view of its
    argument): None for a new tensor of its value, or ``(kind, index, steps)``, the view ``steps``
    (``views.view_path``) make of that argument, state tensor or returned tensor (``_OUTPUT``), or
    with ``steps`` None that returned tensor itself. None where they share storage otherwise (one
    is ``detach()`` of another, or two overlap as views of a tensor the forward dropped: ``y[0]``
    and ``y.view(-1)``): a replay could not make that again, so the forward is not replayed.

    A view of a tensor the forward made and dropped (``self.lin(x).t()``) shares storage with
    nothing else that lives: it is returned as a new tensor.
    """
    anchors: dict = {}
    for index, tensor in enumerate(state):
        anchors.setdefault(id(tensor), (_STATE, index))
    for index, tensor in enumerate(tensors):
        anchors[id(tensor)] = (_ARGUMENT, index)  # an argument is read as given, even where it is also state
    for position, tensor in enumerate(returned):
        anchors.setdefault(id(tensor), (_OUTPUT, position))  # all first: a view may come before its base
    links: list = []
    owners: dict = {}  # id(value) -> the returned tensor holding it, first found
    for position, tensor in enumerate(returned):
        found = anchors[id(tensor)]
        if found != (_OUTPUT, position):
            if found[0] != _OUTPUT:
                return None  # the very argument or state tensor returned (a trace refuses it before)
            links.append((_OUTPUT, found[1], None))  # the same tensor again
            continue
        path = view_path(tensor, anchors)
        if path is None:
            return None
        anchor, steps = path
        if anchor is None and owners.setdefault(id(tensor._value), tensor) is not tensor:
            return None  # one value held by two tensors that are no views: aliases (``y.detach()``)
        links.append(None if anchor is None else (*anchor, steps))
    if len(returned) > 1 and overlapping_views([tensor for tensor, link in zip(returned, links) if link is None]):
        return None
    return links


def relinked(made: list, links: list, tensors: list, state: list) -> list:
    """``made`` (a new tensor per returned value), its positions that ``links`` (``output_links``)
    names made again as the traced forward returned them: the same tensor, or a view."""
    done = [link is None for link in links]

    def made_at(position: int):
        if not done[position]:
            kind, index, steps = links[position]
            anchor = made_at(index) if kind == _OUTPUT else (tensors if kind == _ARGUMENT else state)[index]
            made[position] = anchor if steps is None else made_again(anchor, steps)
            done[position] = True
        return made[position]

    for position in range(len(links)):
        made_at(position)
    return made


_replay_numbers = itertools.count()
# Held while a template's code is written (a few milliseconds, once per template); replays never take it.
_WRITING = threading.Lock()
