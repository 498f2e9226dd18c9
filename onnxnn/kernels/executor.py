"""The kernels executor: runs recorded plans with onnxnn's own kernels, on numpy or CuPy arrays.

``compile_plan(plan)`` makes a ``CompiledKernelPlan`` (``compiled_plan.py``: every node's kernel
resolved once, the wiring laid out). Compiled plans are cached by the plan's structural key, the
same key the onnxruntime session cache uses, so a cache hit does no registry lookups and no
analysis: only the loop over the nodes. ``array_module`` picks numpy for the CPU and CuPy for
CUDA; the executor registers itself as "kernels" (``ir.executors``).

Example::

    >>> from onnxnn.ir.plan import plan as _plan
    >>> x = onnxnn.randn(3)
    >>> plan = _plan([(x * 2 + 1)._value])
    >>> run_plan(plan)[0].shape
    (3,)
"""

from __future__ import annotations

import numpy as np

from . import (  # noqa: F401  (registration)
    activation_gradients,
    conv,
    elementwise,
    indexing,
    linalg,
    loss,
    recurrent_cells,
    normalization,
    pooling,
    reduce,
    shape,
)
from . import binary_cross_entropy, crop, detection, quantize, recurrent, resize, spectral  # noqa: F401  (registration)
from . import compiled_updates, cuda_fusion
from .compiled_plan import CompiledKernelPlan
from ..ir.caches import WeightedCache, register_cache
from ..ir.executors import register_executor

__all__ = [
    "run_plan",
    "compile_plan",
    "compile_shared",
    "CompiledKernelPlan",
    "array_module",
    "cache_info",
    "clear_cache",
    "set_cache_size",
]


def array_module(where="cpu"):
    """The array module for a device: numpy for CPU, CuPy for CUDA.

    Args:
        where: an ``onnxnn.device``, a device string ("cpu", "cuda", "cuda:0") or an array module.

    Raises:
        RuntimeError: CUDA was asked for and CuPy is not installed or sees no usable GPU.
    """
    if hasattr(where, "asarray") and hasattr(where, "ndarray"):
        return where
    kind = getattr(where, "type", None) or str(where).partition(":")[0]
    if kind == "cpu":
        return np
    if kind != "cuda":
        raise RuntimeError(f"onnxnn kernels executor: unknown device {where!r} (expected cpu or cuda)")
    try:
        import cupy  # deferred: CuPy is optional and heavy; only CUDA runs need it
    except ImportError:
        raise RuntimeError(
            "onnxnn kernels executor: running on CUDA needs CuPy, which is not installed (pip install cupy-cuda12x)"
        ) from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy raises its own CUDARuntimeError when no driver is present
        raise RuntimeError(
            f"onnxnn kernels executor: CuPy is installed but found no usable CUDA GPU ({error})"
        ) from None
    if count == 0:
        raise RuntimeError("onnxnn kernels executor: CuPy is installed but found no CUDA GPU")
    return cupy


def compile_plan(plan, xp=np) -> CompiledKernelPlan:
    """Resolves a plan's kernels and wiring (uncached; ``run_plan`` caches by ``plan.key``).

    Raises:
        NotImplementedError: a node's op has no kernel.
        TypeError: a kernel does not take the dtype of a node's input.
    """
    return CompiledKernelPlan(plan, array_module(xp))


def compile_shared(plan, xp=np) -> CompiledKernelPlan:
    """Compiles a plan for every size of its inputs (the executor's symbolic-size graphs) and counts
    it as a miss of the plan cache, which holds it under ``plan.key`` like any other.

    The compiled plan does not check its results' shapes: its caller knows each run's.

    Raises:
        NotImplementedError: a node's op has no kernel.
        TypeError: a kernel does not take the dtype of a node's input.
    """
    module = array_module(xp)
    _cache.misses += 1
    compiled = CompiledKernelPlan(plan, module, dynamic_shapes=True)
    _cache.plans.put((plan.key, module.__name__), compiled, len(plan.nodes))
    return compiled


# Compiled plans are bounded by count and by their nodes together (``ir.caches.WeightedCache``),
# least recently used evicted first: a compiled plan keeps per node its kernel, wiring and the
# description its errors name (~1-2 KB), so structures that never repeat (an LSTM unrolled over
# each new length) filled 512 entries with hundreds of megabytes. Ordinary models' plans are a few
# hundred nodes (resnet18's training step 401, a 6-layer transformer's 702, see plan_cache.NODE_BUDGET).
CAPACITY = 512
NODE_BUDGET = 1 << 15


class _PlanCache:
    def __init__(self, capacity: int = CAPACITY, budget: int = NODE_BUDGET):
        self.plans = WeightedCache(capacity, budget)
        self.hits = 0
        self.misses = 0

    @property
    def capacity(self) -> int:
        return self.plans.capacity

    def get(self, plan, xp) -> CompiledKernelPlan:
        key = (plan.key, xp.__name__)
        compiled = self.plans.get(key)
        if compiled is not None:
            self.hits += 1
            self.plans.move_to_end(key)
            if isinstance(compiled, _Unsupported):
                raise compiled.error_type(compiled.message)
            return compiled
        self.misses += 1
        try:
            compiled = CompiledKernelPlan(plan, xp)
        except (NotImplementedError, TypeError) as error:
            # Remembered, so a caller that falls back to onnxruntime pays for the analysis once.
            self.plans.put(key, _Unsupported(type(error), str(error)), 1)
            raise
        if not compiled.cacheable:
            return compiled
        self.plans.put(key, compiled, len(plan.nodes))
        return compiled


class _Unsupported:
    """A cache entry for a structure the kernels cannot run (a missing kernel, an unsupported dtype)."""

    __slots__ = ("error_type", "message")

    def __init__(self, error_type: type, message: str):
        self.error_type = error_type
        self.message = message


_cache = _PlanCache()


def cached_plan(plan, xp=np) -> CompiledKernelPlan:
    """The compiled plan for ``plan`` from the structural cache, compiling it on a miss.

    Raises:
        NotImplementedError: a node's op has no kernel (remembered: later calls raise at once).
        TypeError: a kernel does not take the dtype of a node's input (remembered likewise).
    """
    return _cache.get(plan, array_module(xp))


def run_plan(plan, xp=None, *, debug: bool = False, trace=None) -> list:
    """Computes a plan's outputs with onnxnn's kernels.

    Args:
        plan: the runtime's ``GraphPlan`` (``onnxnn.ir.plan.plan(values)``).
        xp: numpy, cupy, or a device ("cpu", "cuda"); by default the plan's device.
        debug: run op by op, checking every node's result shapes against the recorded graph.
        trace: called as ``trace(description, input_arrays, output_arrays)`` after every node.

    Returns:
        numpy arrays for ``plan.outputs``, with their recorded shapes and dtypes.

    Raises:
        NotImplementedError: a node's op has no kernel.
        TypeError: a kernel does not take the dtype of a node's input.
        RuntimeError: CUDA was asked for without CuPy or a GPU.
    """
    module = array_module(plan.key[3] if xp is None else xp)
    compiled = _cache.get(plan, module)
    return compiled([value.data for value in plan.inputs], debug=debug, trace=trace)


def cache_info() -> dict:
    """Counters of the compiled-plan cache: ``{"plans", "hits", "misses", "capacity", "nodes", "node_budget"}``.

    ``plans`` counts cached structures, including those remembered as unsupported; ``nodes`` the
    nodes of the cached plans together, kept within ``node_budget``.
    """
    plans = _cache.plans
    return {
        "plans": len(plans),
        "hits": _cache.hits,
        "misses": _cache.misses,
        "capacity": plans.capacity,
        "nodes": plans.total,
        "node_budget": plans.budget,
    }


def clear_cache() -> None:
    """Drops every compiled plan and resets the counters."""
    _cache.plans.clear()
    _cache.hits = _cache.misses = 0


def set_cache_size(capacity: int | None = None, node_budget: int | None = None) -> None:
    """Bounds the number of compiled plans kept and/or their nodes together (least recently used are dropped first)."""
    _cache.plans.bound(capacity, node_budget)


class KernelsExecutor:
    """The "kernels" executor: plans run by onnxnn's own kernels on the plan's device."""

    def compile(self, plan) -> CompiledKernelPlan:
        return _cache.get(plan, array_module(plan.key[3]))

    def compile_uncached(self, plan, device) -> CompiledKernelPlan:
        return CompiledKernelPlan(plan, array_module(device))

    def compile_shared(self, plan, dims, device) -> CompiledKernelPlan:
        return compile_shared(plan, array_module(device))

    def cache_info(self) -> dict:
        return cache_info()

    def clear_cache(self) -> None:
        clear_cache()

    def set_cache_size(self, capacity: int | None = None, node_budget: int | None = None) -> None:
        set_cache_size(capacity, node_budget)

    def runs_fused(self, plan) -> bool:
        """Whether this executor runs every node of ``plan`` inside generated elementwise kernels
        (``cuda_fusion``): on a GPU with CuPy, each node fusible into a group. Compiles the plan
        into the cache when its ops all have expressions."""
        if plan.key[3].type == "cpu" or not all(
            (node.domain, node.op_type) in cuda_fusion.EXPRESSIONS for node in plan.nodes
        ):
            return False
        try:
            compiled = _cache.get(plan, array_module(plan.key[3]))
        except (RuntimeError, NotImplementedError, TypeError):
            return False  # no CuPy or no GPU for it, or a dtype the kernels lack
        return all(isinstance(step[0], cuda_fusion.FusedElementwise) for step in compiled.steps)

    @property
    def updates_share_threads(self) -> bool:
        """Whether its optimizer updates run on all the intra-op threads (the compiled loops share large
        ones out, ``compiled_updates.THREADED_MIN_ELEMENTS``; the numpy formulas run on one)."""
        return compiled_updates.available()


KERNELS = KernelsExecutor()
register_executor("kernels", KERNELS)
register_cache("kernel plans", clear_cache)
