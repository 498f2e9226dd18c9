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
"""

from __future__ import annotations

from ...ir.plan import GraphPlan, plan, values_waiting_to_join
from . import plan_cache

__all__ = ["KnownPlan"]


class KnownPlan:
    """The plan of one traced forward's result, learned from its first realization.

    A replay sets ``node.known_plan = (known, values)`` on its result's node, ``values`` being the
    realized values it read (the constants it holds, then its arguments' and the state's), and
    ``realization.realize`` asks ``known.plan_of(result, values)``.
    """

    __slots__ = ("node_count", "key", "input_positions", "learnable")

    def __init__(self, node_count: int):
        self.node_count = node_count  # the nodes a replay records: a walk finding more went outside
        self.key: tuple | None = None  # the learned plan's, once learned
        self.input_positions: list = []  # where each of its inputs is in ``values``
        self.learnable = True  # False once a walk found another structure than the replay's

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
