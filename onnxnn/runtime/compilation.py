"""``torch.compile``'s arguments checked, and a plain function compiled (``onnxnn.compile``'s base).

Every onnxnn computation already runs as a compiled graph: ops are recorded, and each structure
is compiled once (an onnxruntime session, or onnxnn's kernels) and found again by its structural
key; inference with unchanged weights gets a specialized session with the weights embedded. So
a compiled function is the function itself, after its arguments are checked, and code written
for ``torch.compile`` runs unchanged. A compiled module goes further: its whole call is traced
and run as one graph (``onnxnn.compile`` wraps it; ``nn.Module.compile`` compiles in place; see
``runtime/fastpath/compiled_calls.py``).
"""

from __future__ import annotations

from typing import Callable

__all__ = ["compile"]

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(
    model: Callable | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable = "onnxnn",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
):
    """Returns the function ``model`` ready to run as compiled graphs (onnxnn always compiles).

    ``onnxnn.compile`` calls it for functions and for its arguments' checks; a module given to
    ``onnxnn.compile`` is wrapped in an ``OptimizedModule``.

    Args:
        model: a function; without it, returns a decorator.
        fullgraph, dynamic, options, disable: accepted as in ``torch.compile``.
        backend: "onnxnn" (or "inductor", accepted as a synonym, so ported scripts run).
        mode: one of torch.compile's modes.

    Example::

        >>> fast = onnxnn.compile(model)
        >>> fast(x)
    """
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(m for m in _MODES if m)}")
    if isinstance(backend, str) and backend not in ("onnxnn", "inductor", "eager", "aot_eager"):
        raise RuntimeError(f"invalid backend {backend!r}: onnxnn compiles to ONNX graphs itself ('onnxnn')")
    if model is None:
        return lambda function: compile(
            function, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if not callable(model):
        raise TypeError(f"onnxnn.compile expects a callable, got {type(model).__name__}")
    return model
