"""The op tables: one registry per concern, each keyed by ``(domain, op_type)``.

Every per-op fact onnxnn has lives in exactly one of these tables, and adding an op means
adding entries through their decorators, never editing a dispatcher::

    @shape_rules.register("Relu")
    def _relu_shape(inputs, attrs):
        return [(inputs[0].shape, inputs[0].dtype)]

- ``shape_rules``: output shapes and dtypes of a node (``runtime/ops/``).
- ``gradient_rules``: the backward of a node (``runtime/ops/``).
- ``non_differentiable``: ops whose outputs carry no gradient (comparisons, indices, shapes).
- ``unmaterialized_gradients``: ops whose gradient rule takes None for outputs no gradient reached.
- ``decompositions``: how to write an op onnxruntime lacks as standard ONNX (``runtime/ops/``);
  ``value_blind_decompositions`` marks those that read no constant's value.
- ``session_lowerings``: the form of a standard op in onnxnn's own CPU sessions, where onnxruntime's
  kernel is slower (a convolution's GEMMs) or means something else than PyTorch's op (``runtime/ops/``).
- ``compiled_forms``: onnxnn's compiled code for a node its sessions run outside onnxruntime (``kernels/``).
- ``compiled_readers``: compiled code for a node and the chain of only readers of its first output (``kernels/``).
- ``kernels``: onnxnn's own array kernels (``kernels/``; see ``kernel_registry``).
- ``importers``: how an imported model's node becomes Tensor ops (``import_/``).

All share one shape: ``register`` (a decorator), ``get``, ``lookup`` (a clear
NotImplementedError), ``in``, ``op_types`` and the read-only mapping ``table``, which hot paths
bind once (``table.get``) instead of calling ``get`` per op.
"""

from __future__ import annotations

from typing import Callable

__all__ = [
    "Registry",
    "MarkRegistry",
    "shape_rules",
    "gradient_rules",
    "non_differentiable",
    "unmaterialized_gradients",
    "decompositions",
    "value_blind_decompositions",
    "session_lowerings",
    "size_blind_session_lowerings",
    "compiled_forms",
    "compiled_readers",
    "importers",
]


class Registry:
    """A table from ``(domain, op_type)`` to one entry, with a clear error for missing entries.

    Args:
        concern: what an entry is, for error messages ("shape rule", "kernel", ...).
    """

    def __init__(self, concern: str):
        self.concern = concern
        self.table: dict[tuple[str, str], Callable] = {}

    def register(self, *op_types: str, domain: str = "") -> Callable[[Callable], Callable]:
        """Decorator registering the function for each of ``op_types`` in ``domain``.

        Each op has one entry per concern: registering a second raises ValueError naming both, so
        two modules can never silently disagree on which rule runs (the last import would win).
        """

        def decorate(function: Callable) -> Callable:
            for op_type in op_types:
                self._claim(op_type, domain, function)
                self.table[(domain, op_type)] = function
            return function

        return decorate

    def _claim(self, op_type: str, domain: str, entry) -> None:
        existing = self.table.get((domain, op_type))
        if existing is not None and existing is not entry:
            raise ValueError(
                f"two {self.concern}s for op_type '{op_type}' (domain '{domain or 'ai.onnx'}'): "
                f"{_describe(existing)} and {_describe(entry)}"
            )

    def get(self, op_type: str, domain: str = "") -> Callable | None:
        return self.table.get((domain, op_type))

    def lookup(
        self, op_type: str, domain: str = "", *, opset: int | None = None, node_name: str | None = None
    ) -> Callable:
        """Returns the entry, raising NotImplementedError that names the op when there is none."""
        function = self.table.get((domain, op_type))
        if function is None:
            where = f"domain '{domain or 'ai.onnx'}'"
            if opset is not None:
                where += f", opset {opset}"
            if node_name:
                where += f", node '{node_name}'"
            raise NotImplementedError(f"onnxnn has no {self.concern} for op_type '{op_type}' ({where})")
        return function

    def wrap(self, op_type: str, wrapper: Callable[[Callable | None], Callable], domain: str = "") -> None:
        """Replaces ``op_type``'s entry (None where it has none) by ``wrapper(entry)``: one concern layered
        over another's entry for the same op (narrow integers widened around an op's own decomposition).
        The module wrapping imports the one registering first, so the order is explicit."""
        self.table[(domain, op_type)] = wrapper(self.table.get((domain, op_type)))

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self.table

    def op_types(self, domain: str = "") -> list[str]:
        return sorted(op for d, op in self.table if d == domain)


def _describe(entry) -> str:
    return f"{getattr(entry, '__module__', '?')}.{getattr(entry, '__qualname__', repr(entry))}"


class MarkRegistry(Registry):
    """A registry whose entries are a mark (``True``): ``mark("Shape")`` declares the op."""

    def mark(self, *op_types: str, domain: str = "") -> None:
        for op_type in op_types:
            # A mark stands where other registries hold a callable; readers only test membership.
            self.table[(domain, op_type)] = True  # type: ignore[assignment]


shape_rules = Registry("shape rule")
gradient_rules = Registry("gradient rule")
# Ops whose outputs carry no gradient (comparisons, index results, shapes): autograd records no
# backward node for them, as JAX's defjvp_zero does.
non_differentiable = MarkRegistry("non-differentiability mark")
# Ops whose gradient rule takes None for an output no gradient reached, as a PyTorch Function after
# ``ctx.set_materialize_grads(False)``; every other rule gets a zero tensor there (and pays for
# arithmetic on it: a multi-output op's unused statistics would cost full passes).
unmaterialized_gradients = MarkRegistry("unmaterialized-gradients mark")
# Ops onnxnn records as one node but onnxruntime lacks (the ai.onnx.preview.training optimizers, Solve,
# a Where of bools): ``expand(node, input_names, output_names, fresh_name) -> (onnx nodes,
# initializers)``, or None for a node onnxruntime runs as it is, writes the node as standard ONNX
# when a model is built. onnxnn's own kernels run such nodes directly. An expansion reads no input
# size but the rank (sizes come from attributes, or from Shape at run time): fastpath.dynamic_shapes
# may build it once for a structure seen at several sizes.
decompositions = Registry("decomposition")
# Ops whose decomposition reads only dtypes and ranks, never the value of a constant input, so
# structures differing in such constants may still share one built graph (fastpath.dynamic_shapes).
value_blind_decompositions = MarkRegistry("value-blind decomposition mark")
# Standard ops that onnxnn's own sessions write in another exact form where onnxruntime runs that
# faster (a Conv with a fed weight over small images as one GEMM): ``lower(node, input_names,
# output_names, fresh_name, embedded) -> (onnx nodes, initializers)``, or None to keep the node.
# ``embedded(position)`` tells whether the node's input there is a constant of the model rather
# than fed at run time. Only ``build_model(lower=True)`` consults it: exported graphs keep the op.
# The nodes must be exact for every size of a symbolic dim, though sessions shared across sizes
# (fastpath.dynamic_shapes) are built without the lowerings that choose by the plan's sizes.
session_lowerings = Registry("session lowering")
# What the sessions shared across sizes (``build_model(lower="size_blind")``) write for an op: a mark
# where its session lowering reads no size (dtypes and attributes only: those that give a node
# PyTorch's meaning where onnxruntime's kernel differs, a max pool's NaN), or a lowering of its own,
# called as a session lowering, whose nodes read the sizes at run time (long sums in blocks).
size_blind_session_lowerings = MarkRegistry("size-blind session lowering")
# Ops that onnxnn's own compiled code computes faster than onnxruntime for some nodes (a convolution's
# weight gradient over few channels, ``kernels/compiled_convolutions.py``): ``form(node, threads) ->
# run`` or None to leave the node to the session (``threads``: the intra-op threads the plan runs
# on), with ``run(input_arrays, threads) -> output arrays`` using up to ``threads`` threads. onnxnn's
# CPU sessions run such nodes outside onnxruntime, between two sessions (``runtime/split_sessions.py``).
compiled_forms = Registry("compiled form")
# Nodes onnxnn's compiled code computes together with the only reader of their first output, and
# maybe that reader's only reader (batch normalization's loop and the ReLU of its output, or a residual
# block's Add and ReLU), whether or not the node has a compiled form of its own: ``absorb(node,
# readers, threads) -> (run, taken)`` or None, ``readers`` that chain of only readers (at least one),
# ``taken`` how many of them the run computes. The run (as a compiled form's) reads the node's inputs,
# then each taken reader's inputs other than the value the chain passes it, and returns the last taken
# reader's output in place of the node's first output, which nothing else reads. The cut sessions
# then drop the taken readers (``runtime/split_sessions.py``).
compiled_readers = Registry("compiled reader")
# ``importer(call) -> tuple of outputs``: how a node of an imported model runs as Tensor ops.
importers = Registry("importer")
