"""The bottom layer: what every other layer of onnxnn shares, importing nothing of onnxnn.

dtypes and devices, the recorded graph (``Node``, ``Value``), the planner (``plan``,
``build_model``), the per-op registries, the executor and cache registries, and the one mode
object. See ARCHITECTURE.md.

Example::

    >>> from onnxnn import ir
    >>> ir.lookup("gradient_rules", "Relu") is not None
    True
"""

from __future__ import annotations

from .caches import clear_caches, register_cache
from .executors import executor, executor_names, register_executor
from .graph import Node, Value
from .kernel_registry import kernels
from .mode import MODE
from .plan import GraphPlan, plan
from .model_building import build_model
from .registry import (
    Registry,
    decompositions,
    gradient_rules,
    importers,
    non_differentiable,
    session_lowerings,
    shape_rules,
    unmaterialized_gradients,
)

__all__ = [
    "Node",
    "Value",
    "GraphPlan",
    "plan",
    "build_model",
    "Registry",
    "REGISTRIES",
    "lookup",
    "shape_rules",
    "gradient_rules",
    "non_differentiable",
    "unmaterialized_gradients",
    "decompositions",
    "session_lowerings",
    "importers",
    "kernels",
    "executor",
    "executor_names",
    "register_executor",
    "clear_caches",
    "register_cache",
    "MODE",
]

# Every per-op_type table by the name of its concern.
REGISTRIES = {
    "shape_rules": shape_rules,
    "gradient_rules": gradient_rules,
    "non_differentiable": non_differentiable,
    "unmaterialized_gradients": unmaterialized_gradients,
    "decompositions": decompositions,
    "session_lowerings": session_lowerings,
    "importers": importers,
    "kernels": kernels,
}


def lookup(concern: str, op_type: str, domain: str = ""):
    """The entry ``op_type`` has in the registry named ``concern``, or None.

    Args:
        concern: one of ``REGISTRIES`` ("shape_rules", "gradient_rules", "kernels", "importers", ...).
        op_type: the ONNX op type.
        domain: its domain ("" for ai.onnx).

    Raises:
        ValueError: ``concern`` names no registry.
    """
    registry = REGISTRIES.get(concern)
    if registry is None:
        raise ValueError(f"unknown registry {concern!r}; choose one of {sorted(REGISTRIES)}")
    return registry.get(op_type, domain)
