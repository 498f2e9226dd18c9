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
run: the same values, only slower. It is about 750 KB of machine code and loads in
well under a millisecond.
"""

from __future__ import annotations

import ctypes
from typing import Callable, Sequence

import numpy as np

from ..ir.mode import intra_op_thread_count, switched_on_in_environment
from .loop_libraries import LoopLibrary

__all__ = ["loop", "address", "available", "unavailable_reason"]

# False runs the numpy formulations only: set by ONNXNN_COMPILED_UPDATES=0 (to measure or debug
# them), and by the tests of those formulations.
ENABLED = switched_on_in_environment("ONNXNN_COMPILED_UPDATES")

# The smallest update (all its tensors' elements together) that runs its loop. Calling the
# library through ctypes costs ~5 µs and ~1 µs per array (reading its address), more than numpy's
# passes over fewer elements: Momentum's break even at ~30,000 elements, Adam's at ~10,000.
COMPILED_MIN_ELEMENTS = 1 << 15

# The smallest update that the intra-op threads share (``onnxnn.set_num_threads``): each takes a
# contiguous range of the elements, cut inside a tensor where needed, so the results are the same
# bits whatever their number. The ranges go to the layer loops' pool of parked workers
# (loop_threads.c), and handing them out costs some 30 us. Two threads against one, float32, fresh
# result arrays (2026-12-05, 2 cores): Adam 131,072 elements 87 / 77 us, 262,144 125 / 144, 669,706
# (the MLP's, in cache) 250 / 578, 11.7 million 11.6 / 14.1 ms; Momentum 262,144 100 / 84 us, 669,706
# 181 / 263, 1 million 284 / 745, 11.7 million (resnet18's) 7.7 / 11.3 ms.
THREADED_MIN_ELEMENTS = 1 << 19
# The fewest elements a thread is given: on a machine of many cores a half-million-element update is
# not cut into slivers that cost more to hand out than to compute.
SHARE_MIN_ELEMENTS = 1 << 18
# Ranges start at multiples of this many elements (a 64-byte line of float32), so that no two
# threads write one cache line.
_RANGE_ALIGNMENT = 16

# The smallest update whose new arrays are streamed to memory (update_loops.c's STREAM_OPTION: non-
# temporal stores, which skip reading each line they write). Larger updates' results leave the caches
# before the next step reads them, and a loop's ordinary stores first read every line: resnet18's
# Momentum update (11.7 million parameters) inside its training step, 15.0 -> 13.3 ms on one thread,
# 8.3 -> 7.0 on two. Smaller updates' results may still be cached when the next forward reads them:
# streamed, an MLP's Adam update (670,000 parameters, batch 64) took 1.13-1.17 ms instead of
# 0.78-0.81 and its step 3.5-3.6 instead of 2.8-3.0; at 2.8 million parameters the steps were even
# (13.1-14.6 ms both ways), hence the bound above that. Results written over the arrays they replace
# (in place) are never streamed: the loop has just read those lines into the cache, and streaming
# them out costs more than storing there (resnet18's Momentum update alone: 5.7 ms against 4.1).
STREAM_MIN_ELEMENTS = 1 << 22
_STREAM_OPTION = 1 << 8  # update_loops.c's STREAM_OPTION

# update_loops.c's UPDATE_LOOPS_VERSION, which changes with its functions (a signature, a new update).
_VERSION = 5
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


# The updates of ir/update_formulas.py: their factors are the node's hyperparameters, their options its attributes.


def _decay_options(factors: tuple, attrs: dict) -> int:
    """Weight decay as L2 (bit 0) or decoupled (bit 1), then maximize (bit 2): NAdam's and RAdam's first bits."""
    decayed, decoupled = factors[-1] is not None, bool(attrs.get("decoupled_weight_decay", 0))
    return (decayed and not decoupled) | (decayed and decoupled) << 1 | bool(attrs.get("maximize", 0)) << 2


def _weight_decay_options(states: tuple, factors: tuple, attrs: dict) -> int:
    return (factors[-1] is not None) | bool(attrs.get("maximize", 0)) << 1  # SGD's, Adamax's, Adadelta's


def _nadam_options(states: tuple, factors: tuple, attrs: dict) -> int:
    return _decay_options(factors, attrs)


def _radam_options(states: tuple, factors: tuple, attrs: dict) -> int:
    return _decay_options(factors, attrs) | bool(attrs.get("rectified", 0)) << 3


def _asgd_options(states: tuple, factors: tuple, attrs: dict) -> int:
    return _weight_decay_options(states, factors, attrs) | (factors[2] is not None) << 2  # mu: averaged


def _rprop_options(states: tuple, factors: tuple, attrs: dict) -> int:
    return int(bool(attrs.get("maximize", 0)))


# op type -> (update_loops.c's name for it, its option bits)
_UPDATES: dict[str, tuple[str, Callable[..., int]]] = {
    "Momentum": ("momentum", _momentum_options),
    "Adam": ("adam", _adam_options),
    "Adagrad": ("adagrad", _adagrad_options),
    "RMSprop": ("rmsprop", _rmsprop_options),
    "SGD": ("sgd", _weight_decay_options),
    "Adamax": ("adamax", _weight_decay_options),
    "NAdam": ("nadam", _nadam_options),
    "RAdam": ("radam", _radam_options),
    "Adadelta": ("adadelta", _weight_decay_options),
    "ASGD": ("asgd", _asgd_options),
    "Rprop": ("rprop", _rprop_options),
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

    The loop is called as ``run(counts, addresses, factors, states, options, in_place)``: each tensor's
    element count; per tensor, the addresses of its arrays in training.py's order (X, G, each
    state), then of its new X and each new state (None for an absent state), all C-contiguous
    arrays of ``dtype`` with the tensor's elements. A written array overlaps no other array, or is
    the very array it replaces (an update in place); then training.py's factors, one tensor's
    states (which are present), the update's options, and whether any result is written in place.
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
    itemsize = dtype.itemsize

    def run(counts: Sequence[int], addresses: list, factors: tuple, states: tuple, options, in_place: bool) -> None:
        factor_array = (scalar_type * len(factors))(*[0 if factor is None else factor for factor in factors])
        streamed = elements >= STREAM_MIN_ELEMENTS and not in_place
        bits = option_bits(states, factors, options) | (_STREAM_OPTION if streamed else 0)
        threads = 1
        if elements >= THREADED_MIN_ELEMENTS:
            threads = min(intra_op_thread_count(), max(1, elements // SHARE_MIN_ELEMENTS))
        if threads > 1 and _THREADS.get() is not None:
            _THREADS.run(function, _shares(counts, addresses, itemsize, threads), factor_array, bits, threads)
            return
        # ctypes releases the GIL for the call, as for the shared one: other Python threads go on.
        function(
            len(counts),
            (ctypes.c_size_t * len(counts))(*counts),
            (ctypes.c_void_p * len(addresses))(*addresses),
            factor_array,
            bits,
        )

    return run


def _shares(counts: Sequence[int], addresses: list, itemsize: int, threads: int) -> list:
    """``(counts, addresses)`` of ``threads`` contiguous ranges of the update's elements, about equal
    and aligned (``_RANGE_ALIGNMENT``); a tensor cut between two ranges is a tensor in each, its
    arrays' addresses moved to where the range starts (absent arrays stay None)."""
    per_tensor = len(addresses) // len(counts)
    total = sum(counts)
    step = -(-total // threads // _RANGE_ALIGNMENT) * _RANGE_ALIGNMENT
    shares: list = [([], []) for _ in range(threads)]
    start = 0  # of the tensor, among all the update's elements
    for tensor, count in enumerate(counts):
        arrays = addresses[tensor * per_tensor : (tensor + 1) * per_tensor]
        offset = 0
        while offset < count:
            share = min((start + offset) // step, threads - 1)
            end = count if share == threads - 1 else min(count, (share + 1) * step - start)
            share_counts, share_addresses = shares[share]
            share_counts.append(end - offset)
            share_addresses.extend(None if address is None else address + offset * itemsize for address in arrays)
            offset = end
        start += count
    return [share for share in shares if share[0]]


class _UpdateShare(ctypes.Structure):
    """loop_threads.c's ``UpdateShare``: one update function's call on a range of an update's elements."""

    _fields_ = [
        ("update", ctypes.c_void_p),
        ("tensors", ctypes.c_size_t),
        ("counts", ctypes.c_void_p),
        ("arrays", ctypes.c_void_p),
        ("factors", ctypes.c_void_p),
        ("options", ctypes.c_int),
    ]


class _Threads(LoopLibrary):
    """The layer loops' pool of threads (loop_threads.c), which the updates share: its workers are parked
    between calls and take the caller's floating-point mode (``set_flush_denormal``) for each call, so
    that every share rounds alike. A forked child starts workers of its own. Where that library is
    missing (no C compiler with POSIX threads: MSVC), updates run on the calling thread."""

    def __init__(self):
        super().__init__(f"{__package__}._layer_loops", "loop_threads.c", 1, "the updates run on one thread")
        self.run_shares = None

    def bind(self, library) -> None:
        self.run_shares = library.onnxnn_run_update_shares
        self.run_shares.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]  # the shares, their count, threads
        self.run_shares.restype = None

    def run(self, function, shares: list, factor_array, bits: int, threads: int) -> None:
        """Runs ``function`` (an update loop) on each of ``shares`` (``_shares``), ``threads`` at once."""
        table = (_UpdateShare * len(shares))()
        function_address = ctypes.cast(function, ctypes.c_void_p).value
        arrays: list = []  # the ctypes arrays the table points into, alive until the call returns
        for share, (share_counts, share_addresses) in zip(table, shares):
            counts = (ctypes.c_size_t * len(share_counts))(*share_counts)
            addresses = (ctypes.c_void_p * len(share_addresses))(*share_addresses)
            arrays += (counts, addresses)
            share.update = function_address
            share.tensors = len(share_counts)
            share.counts = ctypes.addressof(counts)
            share.arrays = ctypes.addressof(addresses)
            share.factors = ctypes.addressof(factor_array)
            share.options = bits
        self.run_shares(table, len(shares), threads)  # ctypes releases the GIL for the call


_THREADS = _Threads()


def available() -> bool:
    """Whether the optimizer updates run as compiled loops in this process (False: as numpy passes)."""
    return ENABLED and _LIBRARY_FUNCTIONS.function("Adam", np.dtype(np.float32)) is not None


def unavailable_reason() -> str | None:
    """Why compiled loops are missing (the library not built, or not loading), or None."""
    _LIBRARY_FUNCTIONS.function("Adam", np.dtype(np.float32))  # loads the library on first use
    return _LIBRARY_FUNCTIONS.reason
