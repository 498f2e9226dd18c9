"""``ShapeProp``: runs a GraphModule on example inputs and records each node's shape and dtype."""

from __future__ import annotations

from typing import Any, NamedTuple

from ...ir.dtypes import dtype as _dtype
from ...runtime.tensor import Size, Tensor
from ..interpreter import Interpreter
from ..node import Node, map_aggregate

__all__ = ["ShapeProp", "TensorMetadata"]


class TensorMetadata(NamedTuple):
    """What ``ShapeProp`` records of a tensor result: its shape, dtype and whether it needs grad."""

    shape: Size
    dtype: _dtype
    requires_grad: bool


def _extract(value: Any) -> Any:
    if isinstance(value, Tensor):
        return TensorMetadata(value.shape, value.dtype, value.requires_grad)
    return value


def _leaves(value: Any) -> list[Any]:
    found: list[Any] = []
    map_aggregate(value, found.append)
    return found


class ShapeProp(Interpreter):
    """Sets ``node.meta["tensor_meta"]`` (and ``meta["type"]``) for every node of a GraphModule.

    Shapes come from onnxnn's shape rules when each op is recorded, so propagation computes no values.

    Example::

        >>> ShapeProp(gm).propagate(onnxnn.randn(2, 3))
        >>> [node.meta["tensor_meta"].shape for node in gm.graph.nodes if node.op != "output"]
    """

    def run_node(self, n: Node) -> Any:
        result = super().run_node(n)
        holds_tensor = any(isinstance(leaf, Tensor) for leaf in _leaves(result))
        if holds_tensor:
            n.meta["tensor_meta"] = map_aggregate(result, _extract)
        n.meta["type"] = type(result)
        return result

    def propagate(self, *args: Any) -> Any:
        """Runs the module on ``args`` (example inputs), annotating each node; returns the output."""
        return self.run(*args)
