"""The fast path: every speed trick onnxnn plays, fenced in one package behind one switch.

- ``backward_replay``: a backward whose structure was seen before replays generated code that
  records the same nodes, instead of running the gradient rules again.
- ``forward_replay``: a call of onnxnn's own modules whose structure was seen before records the
  same nodes from generated code, without running the layers' Python; where gradients are recorded,
  with the backward functions its forward made (``replayed_functions``).
- ``known_plans``: a replayed forward's result is realized with the plan learned from its first
  realization, without walking its history again.
- ``compiled_calls``: a compiled module's inference call (``onnxnn.compile``) is traced whole,
  user code included, and later runs its settled runner directly, with no recording or planning.
- ``straight_line``: a kernels plan runs as one generated Python function, not a loop.
- ``plan_cache``: per structure, the runner the executor choice (a deterministic cost model)
  gave it, and specialized sessions for inference with unchanged weights.
- ``dynamic_shapes``: a structure seen at several sizes shares one graph with symbolic sizes.

``set_fast_path(False)`` (or ``ONNXNN_FAST_PATH=0`` in the environment) turns off the generated
code and identity-keyed reuse, so a user can rule them out when debugging; results are bitwise
the same either way (the tests check it), only slower. Plan caching and the executor choice
stay on: they decide what runs, and so may change the last bits of a value between runs of one
structure: under ``"auto"`` a structure's first run is on onnxnn's kernels and later ones on
onnxruntime (``plan_cache.FIRST_RUNS_ON_KERNELS``), which round differently. A pinned executor
(``set_executor("onnxruntime")``) gives the same bits at every run. ``clear_caches()`` drops every
cache onnxnn keeps.
"""

from __future__ import annotations

from ...ir.caches import clear_caches
from ...ir.mode import MODE, ModeSwitch

__all__ = ["set_fast_path", "is_fast_path_enabled", "clear_caches"]


class set_fast_path(ModeSwitch):
    """Turns the fast path on or off; takes effect at once and also works as a context manager.

    A plain call sets it for the process: every thread has it, except inside a block of its own. A
    ``with`` block sets it for the thread that runs the block only.

    Args:
        enabled: whether the fast path may run.

    Example::

        >>> with onnxnn.set_fast_path(False):
        ...     loss.backward()   # the general autograd driver, no generated code
    """

    def __init__(self, enabled: bool):
        super().__init__({"fast_path": bool(enabled)})


def is_fast_path_enabled() -> bool:
    """Whether the fast path may run in this thread (``set_fast_path``, ``ONNXNN_FAST_PATH``)."""
    return MODE.fast_path
