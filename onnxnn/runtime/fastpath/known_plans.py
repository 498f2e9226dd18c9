"""Plans known in advance: a forward replay's result is realized without walking its history.

Realizing a value plans its pending history first (``ir.plan``: a walk that orders the nodes and
builds the structural key). Right after a long onnxruntime run has evicted the interpreter's
caches, that walk costs 20-30 us even for an MLP's five nodes: 5% of its inference at batch 64.
A forward replay (``forward_replay``) records the same nodes every time, so the plan of its result
is the same every time but for the values it read: its inputs and the model's state. A
``KnownPlan`` learns that plan from the first realization that walks it, and later ones of a
replay's result are planned by picking the replay's values into the learned order.

The learned plan holds only while the walk would find the same thing, which the checks here make
sure of: every value the replay read is realized (a pending argument puts more history in the
plan) and not a static constant (whose content is part of the key); no pending value waits to
join the next realization (``plan.values_waiting_to_join``); the result is the only output (the
replay's intermediates have no tensors, so nothing else holds them); and the run reads nothing
but the inputs (``plan_cache.entry_needing_no_nodes``: a plan without nodes cannot compile a
session or a specialization). Otherwise the walk runs, as always.

Once a plan known so has run its entry's specialization (or its runner, for a structure never
specialized), ``KnownPlan.prepared`` keeps how to run it straight from the replay's values: which
of them the specialization embedded (checked by identity), and which it is fed. A realization then
skips the plan, the entry's lookup and the specialization's second check, as a compiled call's
prepared run does (``compiled_calls._PreparedRun``, whose conditions it keeps). An MLP's inference
(784-512-512-10, batch 64, one thread) took 50 us beyond the raw session's run before, 33 after:
right after the run, each step of that Python fetches its code and data again.
"""

from __future__ import annotations

from ...ir.device import CPU
from ...ir.mode import MODE
from ...ir.plan import GraphPlan, assign_results, plan, values_waiting_to_join
from . import plan_cache

__all__ = ["KnownPlan"]


class KnownPlan:
    """The plan of one traced forward's result, learned from its first realization.

    A replay sets ``node.known_plan = (known, values)`` on its result's node, ``values`` being the
    realized values it read (the constants it holds, then its arguments' and the state's), and
    ``realization.realize`` asks ``known.realize(result, values)`` (the prepared run), else
    ``known.plan_of(result, values)``.
    """

    __slots__ = ("node_count", "key", "input_positions", "learnable", "prepared")

    def __init__(self, node_count: int):
        self.node_count = node_count  # the nodes a replay records: a walk finding more went outside
        self.key: tuple | None = None  # the learned plan's, once learned
        self.input_positions: list = []  # where each of its inputs is in ``values``
        self.learnable = True  # False once a walk found another structure than the replay's
        self.prepared: _PreparedRealization | None = None  # once a known plan's entry has run

    def realize(self, result, values: tuple) -> bool:
        """Computes ``result`` by the prepared run, if there is one and it may run; False otherwise."""
        prepared = self.prepared
        return prepared is not None and prepared.run(result, values)

    def plan_of(self, result, values: tuple) -> tuple[GraphPlan, plan_cache.Entry | None]:
        """The plan realizing ``result`` and, when it was known without a walk, its kept entry."""
        key = self.key
        if key is not None and not values_waiting_to_join():
            inputs = [values[position] for position in self.input_positions]
            for value in inputs:
                if value.data is None or value.static is not None:
                    break
            else:
                found = plan_cache.entry_needing_no_nodes(key, inputs)
                if found is not None:
                    # (A device's inputs are uploaded first: ``realization.run_plan`` runs those.)
                    if key[3] is CPU:
                        self.prepared = _PreparedRealization.build(found, inputs, self.input_positions)
                    return GraphPlan(None, inputs, [result], key), found
        graph = plan([result])
        if key is None and self.learnable:
            self._learn(graph, result, values)
        return graph, None

    def _learn(self, graph: GraphPlan, result, values: tuple) -> None:
        positions = {id(value): position for position, value in enumerate(values)}
        if len(positions) < len(values) or values_waiting_to_join() or any(value.data is None for value in values):
            return  # this call's circumstances (a value given twice, a pending one), not the structure's
        if (
            graph.outputs == [result]
            and len(graph.nodes) == self.node_count
            and len(graph.inputs) == len(values)  # each value read (none static)
            and all(id(value) in positions for value in graph.inputs)
        ):
            self.input_positions = [positions[id(value)] for value in graph.inputs]
            self.key = graph.key
        else:
            self.learnable = False


class _PreparedRealization:
    """How a known plan runs its entry from the replay's values (see the module's docstring).

    ``checks``: per value the specialization embedded, its position among the replay's values and a
    weak reference to it; ``feeds``: the positions of the values the runner is fed, in its order.
    """

    __slots__ = ("entry", "specialization", "executor", "checks", "feeds", "runner")

    @classmethod
    def build(cls, entry: plan_cache.Entry, inputs: list, positions: list) -> "_PreparedRealization | None":
        """The prepared run of a plan reading ``inputs`` (the replay's values at ``positions``) with ``entry``,
        or None where its run would be another one (``realization._results``)."""
        specialization = entry.specialization
        if specialization is None:
            if entry.watches_inputs or entry.former:
                return None
            return cls(entry, None, [], positions, entry.runner)
        if not specialization.matches(inputs):
            return None
        checks = [
            (positions[i], reference) for i, reference in zip(specialization.positions, specialization.references)
        ]
        return cls(entry, specialization, checks, [positions[i] for i in specialization.rest], specialization.session)

    def __init__(self, entry: plan_cache.Entry, specialization, checks: list, feeds: list, runner):
        self.entry = entry
        self.specialization = specialization
        self.executor = MODE.executor
        self.checks = checks
        self.feeds = feeds
        self.runner = runner

    def run(self, result, values: tuple) -> bool:
        """Computes ``result`` from ``values`` and returns True, or False where the plan must be walked."""
        entry = self.entry
        specialization = self.specialization
        if (
            MODE.executor != self.executor
            or not plan_cache.prepared_run_holds(entry, specialization)
            or values_waiting_to_join()
        ):
            return False
        for position, reference in self.checks:
            if values[position] is not reference():
                return False  # other weights than the specialization embedded
        arrays = []
        for position in self.feeds:
            value = values[position]
            if value.data is None or value.static is not None:
                return False
            arrays.append(value.data)
        entry.hit()
        assign_results([result], self.runner(arrays))
        return True
