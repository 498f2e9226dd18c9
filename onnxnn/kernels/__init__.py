"""onnxnn's own kernels: one array function per ONNX op (numpy on CPU, CuPy on CUDA) and the
executor that runs recorded plans with them instead of onnxruntime.

Use it where an onnxruntime session call costs more than the arithmetic (tiny graphs), for ops
or dtypes onnxruntime lacks (bfloat16 compute), to debug a graph op by op, and to check
onnxruntime's results against an independent implementation.

Example::

    >>> from onnxnn.ir.plan import plan as _plan
    >>> from onnxnn.kernels import run_plan
    >>> x = onnxnn.tensor([1.0, -2.0])
    >>> run_plan(_plan([x.relu()._value]))
    [array([1., 0.], dtype=float32)]
"""

from __future__ import annotations

from .debug import ComparisonReport, NodeComparison, compare_with_onnxruntime
from .executor import (
    CompiledKernelPlan,
    array_module,
    cache_info,
    cached_plan,
    clear_cache,
    compile_plan,
    run_plan,
    set_cache_size,
)
from ..ir.kernel_registry import kernels
from . import training  # noqa: F401,E402  (registers the optimizer kernels)
from . import training_formulas  # noqa: F401,E402  (SGD, Adamax, ..., Rprop: update_formulas.py)

__all__ = [
    "kernels",
    "run_plan",
    "compile_plan",
    "cached_plan",
    "CompiledKernelPlan",
    "array_module",
    "cache_info",
    "clear_cache",
    "set_cache_size",
    "compare_with_onnxruntime",
    "ComparisonReport",
    "NodeComparison",
]
