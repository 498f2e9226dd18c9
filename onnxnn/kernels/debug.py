"""Differential debugging: every intermediate of a recorded graph, computed by onnxruntime and by
onnxnn's kernels, compared node by node.

When a model's output differs between executors (or looks wrong on one of them), the first node
whose results disagree is where to look::

    >>> report = compare_with_onnxruntime([loss])
    >>> report.first_mismatch          # None when everything agrees
    >>> print(report)                  # one line per node output
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.executors import executor
from ..ir.plan import GraphPlan, plan as _plan
from .compiled_plan import CompiledKernelPlan

__all__ = ["compare_with_onnxruntime", "NodeComparison", "ComparisonReport"]

# Default tolerances per result dtype (relative, absolute).
_TOLERANCES = {"float64": (1e-9, 1e-12), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}


@dataclass
class NodeComparison:
    """One node output: where it comes from, its dtype and shape, and how far the executors differ."""

    description: str
    output_index: int
    dtype: str
    shape: tuple
    max_abs_error: float
    max_rel_error: float
    matches: bool

    def __str__(self) -> str:
        verdict = "ok" if self.matches else "MISMATCH"
        return (
            f"{verdict:8s} {self.description} output {self.output_index} {self.dtype}{list(self.shape)}: "
            f"max abs error {self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g}"
        )


@dataclass
class ComparisonReport:
    """Every compared node output, in execution order."""

    comparisons: list = field(default_factory=list)

    @property
    def first_mismatch(self) -> NodeComparison | None:
        return next((item for item in self.comparisons if not item.matches), None)

    @property
    def matches(self) -> bool:
        return self.first_mismatch is None

    def __str__(self) -> str:
        return "\n".join(str(item) for item in self.comparisons)


def compare_with_onnxruntime(tensors, rtol: float | None = None, atol: float | None = None) -> ComparisonReport:
    """Computes every intermediate behind ``tensors`` with both executors and compares them.

    Nothing is realized: the tensors stay pending, so the comparison can be repeated.

    Args:
        tensors: Tensors (or graph Values) whose pending history to compare.
        rtol: relative tolerance (default: per dtype, looser for float16/bfloat16).
        atol: absolute tolerance (default: per dtype).

    Returns:
        A ComparisonReport with one NodeComparison per node output that anything reads.
    """
    values = [getattr(tensor, "_value", tensor) for tensor in tensors]
    pending = [value for value in values if value.data is None]
    if not pending:
        return ComparisonReport()
    plan = _plan(pending)
    every_output: dict = {}
    for node in plan.nodes:
        for value in node.inputs:
            if value is not None and value.data is None:
                every_output.setdefault((value.node.position, value.index), value)
    for value in plan.outputs:
        every_output.setdefault((value.node.position, value.index), value)
    ordered = [every_output[key] for key in sorted(every_output)]
    full = GraphPlan(plan.nodes, plan.inputs, ordered, None)
    feeds = [value.data for value in plan.inputs]
    reference = executor("onnxruntime").compile_uncached(full, pending[0].device)(feeds)
    compiled = CompiledKernelPlan(full)
    ours = compiled(feeds)
    descriptions = compiled.descriptions
    report = ComparisonReport()
    for value, expected, actual in zip(ordered, reference, ours):
        report.comparisons.append(_compare(descriptions[value.node.position], value, expected, actual, rtol, atol))
    return report


def _compare(description, value, expected, actual, rtol, atol) -> NodeComparison:
    name = value.dtype.name
    if value.dtype.is_floating_point:
        default_rtol, default_atol = _TOLERANCES.get(name, (1e-4, 1e-5))
        rtol = default_rtol if rtol is None else rtol
        atol = default_atol if atol is None else atol
        wanted, got = expected.astype(np.float64), actual.astype(np.float64)
        difference = np.abs(got - wanted)
        finite = np.isfinite(difference)
        max_abs = float(difference[finite].max()) if finite.any() else 0.0
        relative = difference[finite] / np.maximum(np.abs(wanted[finite]), np.finfo(np.float64).tiny)
        max_rel = float(relative.max()) if relative.size else 0.0
        matches = bool(np.allclose(got, wanted, rtol=rtol, atol=atol, equal_nan=True))
    else:
        matches = bool(np.array_equal(expected, actual))
        max_abs = max_rel = 0.0 if matches else float("inf")
    return NodeComparison(description, value.index, name, tuple(value.shape), max_abs, max_rel, matches)
