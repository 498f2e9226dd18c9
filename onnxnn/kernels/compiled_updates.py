"""The optimizer updates as compiled loops: each element read once, every state written once.

numpy runs Adam's update as thirteen passes over the parameters (a ufunc per product, sum,
square root and quotient), and no block size makes that cheaper than PyTorch's fused ATen loops.
``update_loops.c`` has each update (training.py's ``_momentum_update``, ``_adam_update``, ...) as
one vectorized C loop instead, which this module calls through ctypes, once for every tensor of an
update node (update_driver.py): Adam for an MLP's 669,706 float32 parameters takes 0.3 ms instead of 1.1.

The loops compute what the numpy formulations compute, bit for bit: each sum and product is the
formulation's, in its order, in the tensors' dtype, compiled without fast-math and without fused
multiply-adds (update_loops.c says how). Only float32 and float64 are compiled.

The library is built when onnxnn is installed, where a C compiler is present (setup.py). Where it
is missing, and while ``ENABLED`` is False (``ONNXNN_COMPILED_UPDATES=0``), the numpy formulations
run: the same values, only slower. It is under 200 KB of machine code and loads in
well under a millisecond.
"""

from __future__ import annotations

import ctypes
from typing import Callable, Sequence

import numpy as np

from ..ir.mode import switched_on_in_environment
from .loop_libraries import LoopLibrary

__all__ = ["loop", "address", "available", "unavailable_reason"]

# False runs the numpy formulations only: set by ONNXNN_COMPILED_UPDATES=0 (to measure or debug
# them), and by the tests of those formulations.
ENABLED = switched_on_in_environment("ONNXNN_COMPILED_UPDATES")

# The smallest update (all its tensors' elements together) that runs its loop. Calling the
# library through ctypes costs ~5 µs and ~1 µs per array (reading its address), more than numpy's
# passes over fewer elements: Momentum's break even at ~30,000 elements, Adam's at ~10,000.
COMPILED_MIN_ELEMENTS = 1 << 15

# update_loops.c's UPDATE_LOOPS_VERSION, which changes with its functions' signatures.
_VERSION = 2
_LIBRARY = f"{__package__}._update_loops"
_SCALAR_TYPES: dict[np.dtype, type[ctypes.c_float] | type[ctypes.c_double]] = {
    np.dtype(np.float32): ctypes.c_float,
    np.dtype(np.float64): ctypes.c_double,
}


# Each update's option bits, in update_loops.c's order, from training.py's arguments of its update:
# its states (None for an absent one), factors (None for an absent one) and options.


def _momentum_options(states: tuple, factors: tuple, nesterov: bool) -> int:
    scaled, decayed = factors[2] is not None, factors[3] is not None  # dampening, weight decay
    return scaled | decayed << 1 | nesterov << 2


def _adam_options(states: tuple, factors: tuple, options: tuple) -> int:
    decoupled, maximize = options
    decayed, amsgrad = factors[6] is not None, states[2] is not None
    return (decayed and not decoupled) | (decayed and decoupled) << 1 | maximize << 2 | amsgrad << 3


def _adagrad_options(states: tuple, factors: tuple, maximize: bool) -> int:
    return (factors[2] is not None) | maximize << 1


def _rmsprop_options(states: tuple, factors: tuple, maximize: bool) -> int:
    centered, with_momentum = states[1] is not None, states[2] is not None
    return (factors[4] is not None) | maximize << 1 | centered << 2 | with_momentum << 3


# op type -> (update_loops.c's name for it, its option bits)
_UPDATES: dict[str, tuple[str, Callable[..., int]]] = {
    "Momentum": ("momentum", _momentum_options),
    "Adam": ("adam", _adam_options),
    "Adagrad": ("adagrad", _adagrad_options),
    "RMSprop": ("rmsprop", _rmsprop_options),
}


class _Library(LoopLibrary):
    """update_loops.c's functions by (op type, dtype), loaded on first use, or why there are none."""

    def __init__(self):
        super().__init__(_LIBRARY, "update_loops.c", _VERSION, "the optimizer updates run as numpy passes")
        self.functions: dict = {}

    def function(self, op_type: str, dtype: np.dtype):
        self.get()
        return self.functions.get((op_type, dtype))

    def bind(self, library) -> None:
        for op_type, (name, _) in _UPDATES.items():
            for dtype in _SCALAR_TYPES:
                function = getattr(library, f"onnxnn_{name}_{dtype.name}")
                # tensors, their counts' address, their arrays' addresses, the factors' address, the option bits
                function.argtypes = [ctypes.c_size_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
                function.restype = None
                self.functions[op_type, dtype] = function


_LIBRARY_FUNCTIONS = _Library()


def address(array: np.ndarray) -> int:
    """Where ``array``'s first element lies in memory, for a loop's list of addresses."""
    return array.__array_interface__["data"][0]


def loop(op_type: str, dtype: np.dtype, elements: int) -> Callable | None:
    """The compiled loop of an ``op_type`` node's update of ``elements`` elements of ``dtype``, or None.

    None for updates under ``COMPILED_MIN_ELEMENTS`` elements in all, for dtypes other than
    float32 and float64, where the library is missing, and while ``ENABLED`` is False.

    The loop is called as ``run(counts, addresses, factors, states, options)``: each tensor's
    element count; per tensor, the addresses of its arrays in training.py's order (X, G, each
    state), then of its new X and each new state (None for an absent state), all C-contiguous
    arrays of ``dtype`` with the tensor's elements, written arrays overlapping no other; then
    training.py's factors, one tensor's states (which are present) and the update's options.
    """
    if not ENABLED or elements < COMPILED_MIN_ELEMENTS:
        return None
    scalar_type = _SCALAR_TYPES.get(dtype)
    if scalar_type is None:
        return None
    function = _LIBRARY_FUNCTIONS.function(op_type, dtype)
    if function is None:
        return None
    option_bits = _UPDATES[op_type][1]

    def run(counts: Sequence[int], addresses: list, factors: tuple, states: tuple, options) -> None:
        function(
            len(counts),
            (ctypes.c_size_t * len(counts))(*counts),
            (ctypes.c_void_p * len(addresses))(*addresses),
            (scalar_type * len(factors))(*[0 if factor is None else factor for factor in factors]),
            option_bits(states, factors, options),
        )

    return run


def available() -> bool:
    """Whether the optimizer updates run as compiled loops in this process (False: as numpy passes)."""
    return ENABLED and _LIBRARY_FUNCTIONS.function("Adam", np.dtype(np.float32)) is not None


def unavailable_reason() -> str | None:
    """Why compiled loops are missing (the library not built, or not loading), or None."""
    _LIBRARY_FUNCTIONS.function("Adam", np.dtype(np.float32))  # loads the library on first use
    return _LIBRARY_FUNCTIONS.reason
