"""Symbolic sizes: one compiled graph serves a structure at every size it is seen with.

The structural key holds input shapes, so a training loop whose batch size changes every step
would compile a session per size. Structures are therefore also grouped into *families*: keys
that agree once every input shape is reduced to its rank and every structural constant (a
Reshape target, an Expand shape) to its dtype and shape. The first key of a family is compiled
as it is (a static graph: the best onnxruntime can optimize). When another key of the family
arrives whose input shapes differ, the family records

- the input dimensions that differed as symbolic (``dim_param`` names in the session's inputs),
- the structural constants that differed (``x.view(batch, -1)`` records the batch in its target)
  as *fed*: the compiled graph takes them as inputs instead of embedding them,

and compiles one graph with that signature. Every later key of the family whose differences lie
within those dims and constants runs it, fed its own constants: the graph computes exactly the
nodes the key's own static graph would, so nothing about the results relies on guessing how a
constant depends on the batch (only the compiler's choices may differ, with unknown sizes, in the
last bits). A key that differs somewhere new widens the family's signature once more; differences
only ever grow, so a family compiles at most once per dimension and constant.

A family keeps up to VARIANT_LIMIT first keys (anchors), each with its own signature: a loop's first
step may differ from the later ones in a constant that must not be fed (Momentum's update count),
and becomes an anchor of its own. A constant is never fed to an op that onnxnn expands into other
nodes when it builds the graph (its expansion may read the constant); keys differing there, and
keys whose shared graph fails to compile, take the static path.

Backward passes are not shared across sizes (``backward_replay`` says why): a size other than a
structure's first takes the general backward driver until it has come back a few times.

``ENABLED = False`` turns this off (every shape then compiles its own graph, as before).
"""

from __future__ import annotations

from ...ir.device_arrays import shape_of
from ...ir.graph import Value
from ...ir.plan import GraphPlan, computed_values
from ...ir.registry import decompositions, value_blind_decompositions
from ...ir.caches import register_cache
from ...ir.executors import executor
from ...ir.mode import MODE
from .straight_line import accelerate_when_run_again

__all__ = ["ENABLED", "has_shared_graph", "shared_runner", "dynamic_info", "clear"]

ENABLED = True  # False: every input shape is its own structure, compiled on its own

FAMILY_LIMIT = 1024  # families are few in a program; more means keys that never repeat
_families: dict = {}
_counts = {"generalized": 0, "shared_runs": 0}


def _is_static(item) -> bool:
    """Whether a part of the flat key is a structural constant's content: ``("c", dtype, shape, bytes)``."""
    return type(item) is tuple and len(item) == 4 and item[0] == "c" and type(item[3]) is bytes


def _split_key(key: tuple) -> tuple:
    """The family key of a structural key, and the key's structural constants in key order."""
    nodes, inputs, outputs, device = key
    parts, statics = [], []
    for item in nodes:
        if _is_static(item):
            statics.append(item)
            parts.append(item[:3])
        else:
            parts.append(item)
    family_key = (
        tuple(parts),
        tuple([(len(shape), dtype) for shape, dtype in inputs]),
        tuple([None if output is None else (output[0], output[1], len(output[2])) for output in outputs]),
        device,
    )
    return family_key, statics


class _Variant:
    """One anchor key of a family, the signature its shared graph generalizes, and that graph per executor."""

    __slots__ = ("shapes", "statics", "dims", "fed", "runners", "refused")

    def __init__(self, key: tuple, statics: list):
        self.shapes = [shape for shape, _ in key[1]]
        self.statics = statics
        self.dims: frozenset[tuple[int, int]] = frozenset()  # (input position, axis) pairs with symbolic sizes
        # Positions (in key order) of the constants the shared graph takes as inputs.
        self.fed: frozenset[int] = frozenset()
        self.runners: dict = {}  # "session" / "kernels" -> the compiled shared graph for (dims, fed)
        self.refused: set[str] = set()  # kinds that could not compile it: those keys take the static path

    def differences(self, key: tuple, statics: list) -> tuple:
        """The input dims and constants in which ``key`` differs from the anchor."""
        dims: set[tuple[int, int]] = set()
        for position, ((shape, _), first) in enumerate(zip(key[1], self.shapes)):
            if shape != first:
                dims.update((position, axis) for axis, (size, was) in enumerate(zip(shape, first)) if size != was)
        fed = {index for index, (static, first) in enumerate(zip(statics, self.statics)) if static != first}
        return dims, fed


class _Family:
    """The keys that differ only in sizes and constants: a few anchors (variants), where constants are read."""

    __slots__ = ("variants", "static_positions", "unfeedable")

    def __init__(self, graph: GraphPlan, statics: list):
        self.variants = [_Variant(graph.key, statics)]
        positions = _static_positions(graph)
        self.static_positions = positions
        # Constants read by an op onnxnn expands into other nodes when it builds a graph (its
        # expansion may read them, e.g. Momentum's update count): keys differing there never share.
        self.unfeedable = frozenset(
            index
            for index, (node, _) in enumerate(positions)
            if decompositions.get(graph.nodes[node].op_type, graph.nodes[node].domain)
            and not value_blind_decompositions.get(graph.nodes[node].op_type, graph.nodes[node].domain)
        )

    def variant_for(self, key: tuple, statics: list):
        """The variant whose shared graph can run ``key`` (widened if needed), or None."""
        candidates = []
        for variant in self.variants:
            dims, fed = variant.differences(key, statics)
            if not dims:
                continue  # the anchor's sizes with other constants: another structure, not another size
            if fed & self.unfeedable:
                continue
            if dims <= variant.dims and fed <= variant.fed:
                return variant
            candidates.append((variant, dims, fed))
        if candidates:
            variant, dims, fed = candidates[0]
            variant.dims = variant.dims | dims
            variant.fed = variant.fed | fed
            variant.runners = {}  # compiled again for the wider signature; keys holding the old one keep it
            _counts["generalized"] += 1
            return variant
        return None


VARIANT_LIMIT = 8  # anchors per family: a loop's first steps may differ in constants (an update count)


def _static_positions(graph: GraphPlan) -> list:
    """Where each structural constant of the plan is read: (node index, input index), in key order."""
    positions = []
    for node_index, node in enumerate(graph.nodes):
        for input_index, value in enumerate(node.inputs):
            if value is not None and value.static is not None:  # (static values are realized, and stay so)
                positions.append((node_index, input_index))
    return positions


class _SharedRunner:
    """One key's view of its family's shared graph: feeds the key's own constants, checks result shapes."""

    __slots__ = ("runner", "constants", "shapes")

    def __init__(self, runner, constants: list, shapes: list):
        self.runner = runner
        self.constants = constants
        self.shapes = shapes

    def __call__(self, inputs: list) -> list:
        results = self.runner(list(inputs) + self.constants)
        for position, (result, shape) in enumerate(zip(results, self.shapes)):
            if result.shape != shape and shape_of(result) != shape:  # (a GPU's OrtValue: shape())
                raise RuntimeError(
                    f"onnxnn: output {position} of a graph with symbolic sizes has shape "
                    f"{list(shape_of(result))}, but the recorded graph expects {list(shape)}"
                )
        return results


def has_shared_graph(graph: GraphPlan) -> bool:
    """Whether ``graph``'s family has a shared graph compiled already (a new size then runs there at
    no compilation cost). Reads only: nothing is registered or compiled."""
    if not ENABLED:
        return False
    family = _families.get(_split_key(graph.key)[0])
    return family is not None and any(variant.runners for variant in family.variants)


def shared_runner(graph: GraphPlan, kind: str):
    """The family's shared runner for ``graph`` on executor ``kind`` ("onnxruntime" or "kernels"), or None.

    None means ``graph`` takes the static path: the feature is off, its family is new (this key
    becomes its first anchor), no anchor differs from it in sizes only, or the shared graph
    cannot be compiled. Compiling the shared graph counts as a miss of the executor's cache, which
    holds it.
    """
    if not ENABLED:
        return None
    family_key, statics = _split_key(graph.key)
    family = _families.get(family_key)
    if family is None:
        if len(_families) >= FAMILY_LIMIT:
            _families.clear()
        _families[family_key] = _Family(graph, statics)
        return None
    variant = family.variant_for(graph.key, statics)
    if variant is None:
        if len(family.variants) < VARIANT_LIMIT:
            family.variants.append(_Variant(graph.key, statics))
        return None
    if kind in variant.refused:
        return None
    fed = sorted(variant.fed)
    runner = variant.runners.get(kind)
    if runner is None:
        try:
            runner = variant.runners[kind] = _compile(family, variant, fed, graph, kind, family_key)
        except (RuntimeError, NotImplementedError, TypeError):
            variant.refused.add(kind)
            return None
    _counts["shared_runs"] += 1
    constants = [
        graph.nodes[node].inputs[index].data for node, index in (family.static_positions[position] for position in fed)
    ]
    return _SharedRunner(runner, constants, [value.shape for value in graph.outputs])


def _fed_plan(family: _Family, fed: list, graph: GraphPlan, key) -> GraphPlan:
    """``graph`` with the constants at positions ``fed`` turned into inputs, after the plan's own inputs."""
    nodes = list(graph.nodes)
    rewired: dict = {}
    fed_values = []
    device = graph.key[3]
    for position in fed:
        node_index, input_index = family.static_positions[position]
        inputs = rewired.setdefault(node_index, list(nodes[node_index].inputs))
        static = inputs[input_index]
        inputs[input_index] = Value(None, 0, static.shape, static.dtype, device, static.data)
        fed_values.append(inputs[input_index])
    for node_index, inputs in rewired.items():
        nodes[node_index] = nodes[node_index].rewired(tuple(inputs))
    # The copies compute what the nodes they stand for did, at the same positions.
    return GraphPlan(nodes, list(graph.inputs) + fed_values, graph.outputs, key, computed=computed_values(graph))


def _compile(family: _Family, variant: _Variant, fed: list, graph: GraphPlan, kind: str, family_key: tuple):
    """The shared graph of ``variant`` on executor ``kind``, compiled from ``graph`` (one of its keys)."""
    key = ("symbolic sizes", family_key, variant.dims, tuple(fed), tuple(variant.shapes))
    runner = executor(kind).compile_shared(_fed_plan(family, fed, graph, key), variant.dims, graph.key[3])
    if kind == "kernels" and MODE.fast_path:
        accelerate_when_run_again(runner)
    return runner


def dynamic_info() -> dict:
    """``{"families", "generalized", "shared_runs"}``: structure families seen, signatures widened
    (each compiles a shared graph), and keys that took a shared graph instead of their own."""
    return {"families": len(_families), **_counts}


def clear() -> None:
    """Forgets every family and resets the counters (compiled graphs live in the executors' caches)."""
    _families.clear()
    _counts.update(generalized=0, shared_runs=0)


register_cache("symbolic-size families", clear)
