"""Executors by name: what turns a plan into a runner. Each registers itself here at import.

The runtime looks executors up by name ("onnxruntime", "kernels") and never imports one; the
kernels package never imports the runtime. An executor provides:

- ``compile(plan) -> runner``: a runner for the plan's structure, cached by ``plan.key``;
  ``runner(input_arrays) -> output_arrays``. Raises NotImplementedError or TypeError when it
  cannot run an op or dtype of the plan, RuntimeError when it fails to compile it.
- ``compile_uncached(plan) -> runner``: the same for a one-off plan (a debug comparison).
- ``compile_shared(plan, dims, device) -> runner``: a runner on ``device`` for every size of the
  inputs' ``dims`` (``(input position, axis)`` pairs; see ``runtime/fastpath/dynamic_shapes.py``).
- ``cache_info() -> dict`` and ``clear_cache()``.

The kernels executor also answers ``updates_share_threads`` and ``runs_fused(plan)``, which the
"auto" choice weighs (``runtime/fastpath/plan_cache.choose``).
"""

from __future__ import annotations

__all__ = ["register_executor", "executor", "executor_names"]

_EXECUTORS: dict = {}


def register_executor(name: str, implementation) -> None:
    """Registers ``implementation`` under ``name``; a second, different one raises ValueError."""
    existing = _EXECUTORS.get(name)
    if existing is not None and existing is not implementation:
        raise ValueError(f"two executors named {name!r}: {existing!r} and {implementation!r}")
    _EXECUTORS[name] = implementation


def executor(name: str):
    """The executor registered under ``name``.

    Raises:
        RuntimeError: nothing registered it (its package was not imported: ``import onnxnn`` does).
    """
    implementation = _EXECUTORS.get(name)
    if implementation is None:
        raise RuntimeError(
            f"no executor named {name!r} is registered (registered: {sorted(_EXECUTORS)}); "
            f"importing onnxnn registers 'onnxruntime' and 'kernels'"
        )
    return implementation


def executor_names() -> list[str]:
    return sorted(_EXECUTORS)
