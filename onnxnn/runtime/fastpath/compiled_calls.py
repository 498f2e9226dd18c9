"""Compiled calls: a compiled module's whole call traced once per structure and run as one graph.

A plain call runs the module's Python forward every time (DESIGN principle 2); only onnxnn's own
layers replay their recorded nodes (``forward_replay``), so a model of user-defined blocks pays
Python per module per call, and every call then plans its pending graph and looks up its entry.
Each is a few microseconds while the interpreter's data is in cache, five to ten times that right
after onnxruntime's run has filled the core's cache with weights and activations: 0.1 ms an MLP
call, 0.4 ms a small ResNet's, where onnxruntime's own run takes 0.65 and 5 ms.

``onnxnn.compile`` (``Module.compile``) opts a module into this instead. Under ``no_grad`` (the
caller checks the modes and the module tree, ``nn/modules/_forward_replay.py``) a compiled call

- replays the trace of its whole forward, user code included. Its templates are ``strict``: a
  forward that read data, drew random numbers, changed its arguments or state, or read a
  realized tensor from outside its arguments and state (a global, a closure) is never replayed.
  The checks PyTorch makes on data (an embedding's indices in range) are no read: every call,
  prepared runs included, makes them again on its own arrays;
- computes its outputs at once, as one graph, where its arguments are realized;
- and once that graph's runner is settled (an inference specialization with the weights
  embedded, or a structure that is never specialized: ``plan_cache``), keeps a prepared run for
  the structure: where each of the graph's inputs comes from (an argument, the state, a constant
  the trace made) and the runner. A later call of the structure gathers those values, checks
  that a specialization embedded the very state it finds (and that positions which held one
  value when prepared still do), and runs it: no node recorded, no plan walked, no entry looked
  up; the same runner as the plain call's realization, so the same bits.

Anything else (a pending argument, other weights, layers an in-place update set apart, another
executor, a cleared cache) takes the replay and realization again, which prepares anew. A state
tensor left pending (changed through an alias: ``w.data.clamp_(-c, c)``) is not prepared for: its
pending history would enter the graph as a constant of the value it was made from. Returned
tensors that alias each other or the inputs are made again so from the run's results
(``forward_replay.output_links``). The key also holds what a forward may branch on besides
shapes (``arguments_key(facts=True)``: an argument's type, ``requires_grad``, ``.grad``, view and
contiguity), and the state's ``requires_grad`` flags are compared at each call.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable

import numpy as np

from ...ir.graph import Value
from ...ir.mode import MODE
from ...ir.plan import GraphPlan, plan
from ..realization import run_plan
from ..tensor import Tensor
from ..internal import check_known_data
from . import forward_replay, plan_cache, replay_source
from .forward_replay import ForwardTemplates, arguments_key, relinked
from .result_structures import rebuilt, result_structure
from .plan_cache import Entry

__all__ = ["CompiledTemplates", "call", "compiled_info", "reset_counts"]

_MISSED = object()  # what a prepared run returns when the call must take the replay
_UNSET = np.empty(0)  # a made result's data until its run returns (never seen outside ``run``)
_ARGUMENT, _STATE, _FIXED = range(3)
_SOURCE_OF = {replay_source.ARGUMENT: _ARGUMENT, replay_source.STATE: _STATE}  # a template's kinds
_REQUIRES_GRAD = attrgetter("_requires_grad")


class CompiledTemplates(ForwardTemplates):
    """The strict templates of one compiled forward, and per structure its prepared run.

    ``requires_grad``: the state's ``requires_grad`` flags its templates were traced with (a
    forward may branch on ``self.weight.requires_grad``; ``requires_grad_`` counts no change).
    """

    __slots__ = ("prepared", "requires_grad")
    strict = True

    def __init__(self):
        super().__init__()
        self.prepared: dict = {}
        self.requires_grad: list | None = None


def call(owner: CompiledTemplates, forward: Callable, args: tuple, kwargs: dict, state: list) -> Any:
    """Returns ``forward(*args, **kwargs)``: by its prepared run, else replayed and computed at once.

    Args:
        owner: the compiled forward's templates and prepared runs.
        forward: the forward (anyone's code: its templates are strict).
        args, kwargs: its arguments.
        state: every tensor the forward may read besides its arguments (parameters, buffers and
            the modules' other tensor attributes), in an order that is the same at every call.
    """
    keyed = arguments_key(args, kwargs, facts=True)  # as forward_replay.call keys a strict owner's
    if keyed is None:
        return forward(*args, **kwargs)
    key, tensors = keyed
    flags = list(map(_REQUIRES_GRAD, state))  # one comparison below, no Python loop
    if flags != owner.requires_grad:
        owner.templates.clear()  # traced with other flags: trace again
        owner.sightings.clear()
        owner.prepared.clear()
        owner.requires_grad = flags
    prepared = owner.prepared.get(key)
    if prepared is not None:
        result = prepared.run(tensors, state)
        if result is not _MISSED:
            _counts["prepared"] += 1
            return result
    result = forward_replay.call(owner, forward, args, kwargs, state)
    if forward_replay.has_template(owner, key):
        _compute_now(owner, key, result, tensors, state)
    return result


def compiled_info() -> dict:
    """``{"computed", "prepared"}``: compiled calls computed at once, and run by a prepared run."""
    return dict(_counts)


def reset_counts() -> None:
    _counts.update(computed=0, prepared=0)


_counts = {"computed": 0, "prepared": 0}


def _compute_now(owner: CompiledTemplates, key: tuple, result, tensors: list, state: list) -> None:
    """Computes a replayable call's outputs as one graph, and prepares its next runs if it can."""
    owner.prepared.pop(key, None)
    outputs: list = []
    structure = result_structure(result, outputs)
    if structure is None or any(tensor._value.data is None for tensor in tensors):
        return  # a pending argument: its history joins the outputs' when they are read
    pending = list({id(value): value for value in outputs if value.data is None}.values())
    if not pending:
        return
    graph = plan(pending)
    entry = run_plan(graph)
    _counts["computed"] += 1
    for tensor in state:
        if tensor._value.data is None:
            # Changed through an alias and not computed yet (``w.data.clamp_(-c, c)``): the graph
            # reads the value it was made from, which the weight's next change leaves behind. A
            # prepared run reads the state as it finds it, so it waits for the state to be realized
            # (a call of an unchanged model finds it so); until then each call replays, as the
            # plain call would record the same history (realizing it apart could round otherwise).
            return
    template = owner.templates[key]  # how the returned tensors alias (``output_links``), its checks
    prepared = _PreparedRun.build(graph, entry, outputs, structure, template.links, tensors, state, template.checks)
    if prepared is not None:
        owner.prepared[key] = prepared


class _PreparedRun:
    """How a structure's call runs its graph's runner directly.

    ``checks``: the source of each input a specialization embedded and a weak reference to the
    value it embedded; ``feeds``: the source of each input the runner is fed. A source is
    ``(_ARGUMENT, index)``, ``(_STATE, index)`` or ``(_FIXED, value)``. ``shared``: per position of
    the state that held the value of another source when prepared, ``(index, source)``.
    ``data_checks``: the forward's checks of data (an embedding's indices in range), made again on
    each run's arrays: ``(source, check, force)``.
    """

    __slots__ = (
        "entry",
        "specialization",
        "executor",
        "checks",
        "feeds",
        "shared",
        "runner",
        "outputs",
        "structure",
        "links",
        "data_checks",
    )

    @classmethod
    def build(
        cls,
        graph: GraphPlan,
        entry: Entry,
        outputs: list,
        structure,
        links,
        tensors: list,
        state: list,
        data_checks: list,
    ) -> "_PreparedRun | None":
        """The prepared run of a call whose graph just ran, or None where a direct run could differ."""
        specialization = entry.specialization
        if specialization is None:
            if entry.runs_before_compiling or entry.watches_inputs:
                return None  # a realization would still count this run: realize as usual
        elif not specialization.matches(graph.inputs):
            return None
        position_of = {id(value): index for index, value in enumerate(graph.outputs)}
        if position_of.keys() != {id(value) for value in outputs}:
            return None  # the plan also computed held intermediates: only a realization returns them
        # An argument is read as given, even where it is also state. Positions that hold one value
        # now (layers ``copy.deepcopy`` made, the weight passed as an argument) are read from the
        # first, and a run checks that the others still hold it (``shared``): an in-place update
        # rebinds one position alone.
        where: dict = {}
        for index, tensor in enumerate(tensors):
            where.setdefault(id(tensor._value), (_ARGUMENT, index))
        read = {id(value) for value in graph.inputs}
        shared: list = []
        for index, tensor in enumerate(state):
            found = where.setdefault(id(tensor._value), (_STATE, index))
            if found != (_STATE, index) and id(tensor._value) in read:
                shared.append((index, found))
        # Any other input is a constant of the (strict) trace: the template holds that very value.
        sources = [where.get(id(value), (_FIXED, value)) for value in graph.inputs]
        if specialization is None:
            checks, feeds, runner = [], sources, entry.runner
        else:
            checks = [
                (sources[i], reference) for i, reference in zip(specialization.positions, specialization.references)
            ]
            feeds, runner = [sources[i] for i in specialization.rest], specialization.session
        metadata = [(position_of[id(value)], value.shape, value.dtype, value.device) for value in outputs]
        data_checks = [((_SOURCE_OF[kind], index), check, force) for (kind, index), check, force in data_checks]
        return cls(entry, specialization, checks, feeds, shared, runner, metadata, structure, links, data_checks)

    def __init__(
        self,
        entry: Entry,
        specialization,
        checks: list,
        feeds: list,
        shared: list,
        runner,
        outputs: list,
        structure,
        links: list | None,
        data_checks: list,
    ):
        self.entry = entry
        self.specialization = specialization
        self.executor = MODE.executor
        self.checks = checks
        self.feeds = feeds
        self.shared = shared
        self.runner = runner
        self.outputs = outputs  # (position among the runner's results, shape, dtype, device) per output
        self.structure = structure
        self.links = links  # None, or how the returned tensors alias each other and the inputs
        self.data_checks = data_checks

    def run(self, tensors: list, state: list):
        """The call's result from the runner, or ``_MISSED`` where it cannot run it."""
        entry = self.entry
        specialization = self.specialization
        if MODE.executor != self.executor or not plan_cache.prepared_run_holds(entry, specialization):
            return _MISSED  # another executor, the entry evicted, its specialization forgotten or another made
        for (kind, where), reference in self.checks:
            value = where if kind == _FIXED else (tensors[where] if kind == _ARGUMENT else state[where])._value
            if value is not reference():
                return _MISSED  # other weights than the specialization embedded
        for index, (kind, where) in self.shared:
            if state[index]._value is not (tensors[where] if kind == _ARGUMENT else state[where])._value:
                return _MISSED  # one of them was updated in place since: they are two inputs now
        arrays = []
        for kind, where in self.feeds:
            data = (where if kind == _FIXED else (tensors[where] if kind == _ARGUMENT else state[where])._value).data
            if data is None:
                return _MISSED
            arrays.append(data)
        for (kind, where), check, force in self.data_checks:  # each raises as the plain call's would
            check_known_data(tensors[where] if kind == _ARGUMENT else state[where], check, force)
        entry.hit()
        # The result's tensors are made before the run, while the code that makes them is still in
        # the core's caches (the caller made its argument's just now); the run evicts it.
        made = [
            Tensor._from_value(Value(None, 0, shape, dtype, device, _UNSET)) for _, shape, dtype, device in self.outputs
        ]
        results = self.runner(arrays)
        for tensor, (position, _, _, _) in zip(made, self.outputs):
            tensor._value.data = results[position]
        if self.links is not None:
            made = relinked(made, self.links, tensors, state)
        structure = self.structure
        return made[0] if structure == 0 else rebuilt(structure, made)
