"""``onnxnn.random``: the default generator's seed and state, and ``fork_rng``, as ``torch.random``.

onnxnn draws every random value (``randn``, initializers, dropout masks) from one generator,
:data:`onnxnn.default_generator`, on the host, whatever the tensor's device: its values enter
graphs as data, so a seed gives the same numbers on every executor and device. So there are no
per-device generators to fork: :func:`fork_rng` saves and restores that one generator, and accepts
``devices`` and ``device_type`` for PyTorch's signature. The other functions are the top level's
(``onnxnn.manual_seed`` is ``onnxnn.random.manual_seed``).

Example::

    >>> onnxnn.manual_seed(0)
    >>> with onnxnn.random.fork_rng():
    ...     noise = onnxnn.randn(3)      # draws here leave the generator outside untouched
    >>> a = onnxnn.randn(3)
    >>> onnxnn.manual_seed(0)
    >>> onnxnn.equal(a, onnxnn.randn(3))
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from .ir.random import default_generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["set_rng_state", "get_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng", "default_generator"]


@contextlib.contextmanager
def fork_rng(
    devices: Iterable | None = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: str | None = None,
) -> Iterator[None]:
    """Forks the random number generator: on leaving the block it is as it was on entering.

    The default generator's state and its initial seed are saved on entry and restored on exit,
    also when the block raises, so draws and ``manual_seed`` calls inside leave no trace outside.

    Args:
        devices: device ids whose generators to fork, as in PyTorch. onnxnn draws on the host for
            every device, so its one generator is always forked; the ids are checked to be
            iterable and otherwise unused.
        enabled: if ``False``, the generator is not forked (the block runs as it is).
        device_type: the accelerator type, as in PyTorch; ``"meta"`` forks nothing (PyTorch's
            meta tensors draw nothing), any other type forks the one generator.

    Example::

        >>> with onnxnn.random.fork_rng(devices=[]):
        ...     onnxnn.manual_seed(3)
        ...     a = onnxnn.rand(2)
    """
    if device_type == "meta" or not enabled:
        yield
        return
    if devices is not None:
        list(devices)  # PyTorch traverses them; a non-iterable raises TypeError here too
    state = get_rng_state()
    seed_before = initial_seed()
    try:
        yield
    finally:
        # manual_seed first: it resets the state (set_rng_state restores it next) and is the one
        # public way to put the initial seed back, which torch's restored state carries too.
        default_generator.manual_seed(seed_before)
        set_rng_state(state)
