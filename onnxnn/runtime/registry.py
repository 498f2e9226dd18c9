"""Registries keyed by ONNX op: one table per concern (shape rules, gradient rules; kernels live in kernels/).

Adding an op means adding entries here through the decorators, never editing a dispatcher::

    @shape_rules.register("Relu")
    def _relu_shape(inputs, attrs):
        return [(inputs[0].shape, inputs[0].dtype)]
"""
from __future__ import annotations

from typing import Callable

__all__ = ["Registry", "shape_rules", "gradient_rules", "decompositions", "NON_DIFFERENTIABLE"]


class Registry:
    """A table from ``(domain, op_type)`` to one function, with a clear error for missing entries."""

    def __init__(self, concern: str):
        self.concern = concern
        self._table: dict[tuple[str, str], Callable] = {}

    def register(self, *op_types: str, domain: str = "") -> Callable[[Callable], Callable]:
        """Decorator registering the function for each of ``op_types`` in ``domain``.

        Each op has one entry per concern: registering a second raises ValueError naming both, so
        two modules can never silently disagree on which rule runs (the last import would win).
        """
        def decorate(function: Callable) -> Callable:
            for op_type in op_types:
                existing = self._table.get((domain, op_type))
                if existing is not None and existing is not function:
                    raise ValueError(
                        f"two {self.concern}s for op_type '{op_type}' (domain '{domain or 'ai.onnx'}'): "
                        f"{existing.__module__}.{existing.__qualname__} and {function.__module__}.{function.__qualname__}")
                self._table[(domain, op_type)] = function
            return function
        return decorate

    def get(self, op_type: str, domain: str = "") -> Callable | None:
        return self._table.get((domain, op_type))

    def lookup(self, op_type: str, domain: str = "", *, opset: int | None = None,
               node_name: str | None = None) -> Callable:
        """Returns the entry, raising NotImplementedError that names the op when there is none."""
        function = self._table.get((domain, op_type))
        if function is None:
            where = f"domain '{domain or 'ai.onnx'}'"
            if opset is not None:
                where += f", opset {opset}"
            if node_name:
                where += f", node '{node_name}'"
            raise NotImplementedError(f"onnxnn has no {self.concern} for op_type '{op_type}' ({where})")
        return function

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._table

    def op_types(self, domain: str = "") -> list[str]:
        return sorted(op for d, op in self._table if d == domain)


shape_rules = Registry("shape rule")
gradient_rules = Registry("gradient rule")
# Ops onnxnn records as one node but onnxruntime lacks (the ai.onnx.preview.training optimizers):
# ``expand(node, input_names, output_names, fresh_name) -> (onnx nodes, initializers)`` writes the
# node as standard ONNX when a model is built. onnxnn's own kernels run such nodes directly.
decompositions = Registry("decomposition")

# Ops whose outputs carry no gradient (comparisons, index results, shapes): autograd records no
# backward node for them, as JAX's defjvp_zero does.
NON_DIFFERENTIABLE: set[tuple[str, str]] = set()


def non_differentiable(*op_types: str, domain: str = "") -> None:
    for op_type in op_types:
        NON_DIFFERENTIABLE.add((domain, op_type))
