"""The optimizer updates as compiled loops: each element read once, every state written once.

numpy runs Adam's update as thirteen passes over the parameters (a ufunc per product, sum,
square root and quotient), and no block size makes that cheaper than PyTorch's fused ATen loops.
numba compiles each update (training.py's ``_momentum_update``, ``_adam_update``, ...) into one
vectorized loop instead: Adam for an MLP's 669,706 float32 parameters takes 0.5 ms instead of
1.33, and Momentum for resnet18's 11.7 million 9.6 ms instead of 13.7.

The loops compute what the numpy formulations compute, bit for bit. Each sum and product is the
formulation's, in its order, in the tensors' dtype; numba compiles without fast-math, so nothing
is reassociated or contracted into a fused multiply-add. An update's options (weight decay or
not, maximize, amsgrad, ...) are constants of its loop, one loop per combination, because a
loop that tests them per element is not vectorized and runs slower than numpy.

numba is optional (``pip install onnxnn[numba]``): it and LLVM add about 120 MB to the resident
memory of a process that loads them (``ONNXNN_COMPILED_UPDATES=0`` keeps an installed numba
out). Its import and a loop's compilation take 0.15 to 0.3 s (a few ms once numba has cached
the loop on disk), and while they hold the interpreter the training loop beside them runs at a
fraction of its speed: the first 40 steps of an MLP take 0.4 s longer. So a loop is asked for
only by an update of at least ``COMPILE_MIN_ELEMENTS`` elements that has run
``COMPILE_AFTER_UPDATES`` times: a short program (a script's first steps, a test) never loads
numba, and a long one, which repays the cost in a few hundred steps, compiles in a background
thread while it goes on. Until a loop is ready, and wherever numba is missing, the numpy
formulation runs: the same values, only slower. Only float32 and float64 are compiled.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Callable, NamedTuple

import numpy as np

from ..ir.mode import switched_on_in_environment

__all__ = ["loop", "wait", "unavailable_reason", "ready_count"]

# False runs the numpy formulations only: set by ONNXNN_COMPILED_UPDATES=0 (a process that must not
# take numba's memory), and by the tests of those formulations.
ENABLED = switched_on_in_environment("ONNXNN_COMPILED_UPDATES")

_DTYPES = frozenset([np.dtype(np.float32), np.dtype(np.float64)])
# The smallest update that loads numba and compiles its loop (an update under it can run a loop
# compiled for a larger one): where numpy's passes cost ~0.1 ms, 1,000 steps repay the compilation.
COMPILE_MIN_ELEMENTS = 1 << 16
# How many times such an update runs as numpy passes before it asks for its loop.
COMPILE_AFTER_UPDATES = 16


# Each factory returns an update's loop with its options as constants. A loop takes the update's
# arrays (an absent state's slot holds X, never read), the new X, the new states (an absent one's
# slot holds X, never written), then the update's factors in training.py's order.


def _momentum(scaled: bool, decayed: bool, nesterov: bool):
    def momentum(x, g, v, new_x, new_v, learning_rate, alpha, beta, norm_coefficient):
        for i in range(x.size):
            gradient = x[i] * norm_coefficient + g[i] if decayed else g[i]
            velocity = v[i] * alpha + (gradient * beta if scaled else gradient)
            new_v[i] = velocity
            direction = velocity * alpha + gradient if nesterov else velocity
            new_x[i] = x[i] - learning_rate * direction

    return momentum


def _adam(l2_decay: bool, decoupled_decay: bool, maximize: bool, amsgrad: bool):
    negated = maximize and not l2_decay  # G' is -G, applied by the signs below (as training.py's)

    def adam(
        x, g, m, v, v_max, new_x, new_m, new_v, new_v_max,
        one_minus_beta1, beta2, one_minus_beta2, epsilon, step_size, bias_correction2_sqrt, decay,
    ):  # fmt: skip
        for i in range(x.size):
            gradient = g[i]
            if l2_decay:
                gradient = x[i] * decay - gradient if maximize else x[i] * decay + gradient
            moment = -(gradient + m[i]) if negated else gradient - m[i]
            moment = moment * one_minus_beta1 + m[i]
            new_m[i] = moment
            square = v[i] * beta2 + (gradient * gradient) * one_minus_beta2
            new_v[i] = square
            if amsgrad:
                kept = v_max[i]
                square = kept if kept >= square or kept != kept else square  # numpy's maximum: NaN wins
                new_v_max[i] = square
            step = moment / (np.sqrt(square) / bias_correction2_sqrt + epsilon) * step_size
            new_x[i] = x[i] * decay - step if decoupled_decay else x[i] - step

    return adam


def _adagrad(decayed: bool, maximize: bool):
    negated = maximize and not decayed

    def adagrad(x, g, state_sum, new_x, new_sum, epsilon, decayed_lr, weight_decay):
        for i in range(x.size):
            gradient = g[i]
            if decayed:
                gradient = x[i] * weight_decay - gradient if maximize else x[i] * weight_decay + gradient
            total = gradient * gradient + state_sum[i]
            new_sum[i] = total
            step = gradient / (np.sqrt(total) + epsilon) * decayed_lr
            new_x[i] = x[i] + step if negated else x[i] - step

    return adagrad


def _rmsprop(decayed: bool, maximize: bool, centered: bool, with_momentum: bool):
    negated = maximize and not decayed

    def rmsprop(
        x, g, square_avg, grad_avg, buffer, new_x, new_square_avg, new_grad_avg, new_buffer,
        learning_rate, alpha, one_minus_alpha, epsilon, weight_decay, momentum,
    ):  # fmt: skip
        for i in range(x.size):
            gradient = g[i]
            if decayed:
                gradient = x[i] * weight_decay - gradient if maximize else x[i] * weight_decay + gradient
            square = square_avg[i] * alpha + (gradient * gradient) * one_minus_alpha
            new_square_avg[i] = square
            if centered:
                average = -(gradient + grad_avg[i]) if negated else gradient - grad_avg[i]
                average = average * one_minus_alpha + grad_avg[i]
                new_grad_avg[i] = average
                root = np.sqrt(square - average * average)
            else:
                root = np.sqrt(square)
            quotient = gradient / (root + epsilon)  # G' / A, or -(G' / A) while negated
            if with_momentum:
                velocity = buffer[i] * momentum - quotient if negated else buffer[i] * momentum + quotient
                new_buffer[i] = velocity
                new_x[i] = x[i] - velocity * learning_rate
            else:
                step = quotient * learning_rate
                new_x[i] = x[i] + step if negated else x[i] - step

    return rmsprop


def _momentum_options(arrays, factors, nesterov: bool) -> tuple:
    return factors[2] is not None, factors[3] is not None, nesterov  # beta (dampening), weight decay


def _adam_options(arrays, factors, options) -> tuple:
    decoupled, maximize = options
    decayed = factors[6] is not None
    return decayed and not decoupled, decayed and decoupled, maximize, arrays[4] is not None  # amsgrad


def _adagrad_options(arrays, factors, maximize: bool) -> tuple:
    return factors[2] is not None, maximize


def _rmsprop_options(arrays, factors, maximize: bool) -> tuple:
    return factors[4] is not None, maximize, arrays[3] is not None, arrays[4] is not None  # centered, momentum


class _Kind(NamedTuple):
    factory: Callable  # options -> the loop, as a plain Python function for numba to compile
    options: Callable  # (arrays, factors, options) of training.py's update -> the factory's options


_KINDS = {
    "Momentum": _Kind(_momentum, _momentum_options),
    "Adam": _Kind(_adam, _adam_options),
    "Adagrad": _Kind(_adagrad, _adagrad_options),
    "RMSprop": _Kind(_rmsprop, _rmsprop_options),
}


class _Compiler:
    """Compiles loops in a background thread, in the order they are asked for, and hands them out."""

    def __init__(self):
        self.ready: dict = {}  # (op type, dtype, options) -> the compiled loop
        self.requested: set = set()
        self.updates: dict = {}  # key -> how many large updates have run without its loop
        self.reason: str | None = None  # why loops are missing, once known
        self.missing = False  # numba is not importable: no loop will ever compile
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.done = threading.Condition()
        self.thread: threading.Thread | None = None

    def request(self, key: tuple, vectors: int, scalars: int) -> None:
        """Asks for the loop of ``key`` (op type, dtype, options), taking that many vectors and scalars."""
        with self.done:
            if key in self.requested:
                return
            self.requested.add(key)
            self.requests.put((key, vectors, scalars))
            if self.thread is None:
                self.thread = threading.Thread(target=self._work, name="onnxnn-compile-updates", daemon=True)
                self.thread.start()

    def _work(self) -> None:
        try:
            import numba  # deferred: ~0.15 s, paid in this thread by programs that update parameters
        except ImportError as error:
            self.missing = True
            self._finish(None, f"numba is not importable ({error}); the optimizer updates run as numpy passes")
            return
        while True:
            key, vectors, scalars = self.requests.get()
            op_type, dtype, options = key
            try:
                compiled = _jit(numba, _KINDS[op_type].factory(*options))
                vector, scalar = numba.from_dtype(dtype)[::1], numba.from_dtype(dtype)
                compiled.compile(numba.void(*[vector] * vectors, *[scalar] * scalars))
            except Exception as error:  # a numba that cannot compile leaves the numpy formulation in place
                self._finish(None, f"numba could not compile {op_type}'s loop: {type(error).__name__}: {error}")
            else:
                self._finish((key, compiled), None)

    def _finish(self, compiled, reason: str | None) -> None:
        with self.done:
            if compiled is not None:
                self.ready[compiled[0]] = compiled[1]
            if reason is not None:
                self.reason = reason
            self.done.notify_all()

    def wait(self, timeout: float | None) -> bool:
        with self.done:
            self.done.wait_for(lambda: self.reason is not None or self.requested <= self.ready.keys(), timeout)
            return self.requested <= self.ready.keys()


def _jit(numba, function):
    """numba's dispatcher of ``function``, cached on disk where numba finds a writable directory."""
    options = dict(error_model="numpy", nogil=True)  # numpy's error model: 1/0 is inf, not an exception
    try:
        return numba.njit(function, cache=True, **options)
    except RuntimeError:  # "cannot cache function ...: no locator available": compile in each process
        return numba.njit(function, **options)


_COMPILER = _Compiler()


def _forget_the_compiler_thread() -> None:
    # A forked child has no compiler thread, and its locks may have been held by the parent's.
    # The loops compiled already are machine code in the child's copy of memory: they stay.
    global _COMPILER
    parent = _COMPILER
    _COMPILER = _Compiler()
    _COMPILER.ready.update(parent.ready)
    _COMPILER.requested.update(parent.ready)
    _COMPILER.missing, _COMPILER.reason = parent.missing, parent.reason


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_the_compiler_thread)


def loop(op_type: str, arrays: tuple, factors: tuple, options) -> Callable | None:
    """The compiled loop of this update (training.py's arguments of an ``op_type`` node's update), or None.

    None until an update of at least ``COMPILE_MIN_ELEMENTS`` elements has asked
    ``COMPILE_AFTER_UPDATES`` times and the loop has compiled, where numba is missing, for dtypes
    other than float32 and float64, and while ``ENABLED`` is False. The loop is called as
    ``run(results)`` and returns them: ``results`` preallocated like ``arrays``, every array
    C-contiguous, of any shape.
    """
    x = arrays[0]
    compiler = _COMPILER
    # Every update asks, so the common answers come first: none compiled and none to ask for (a
    # small model's), or numba missing.
    if not ENABLED or compiler.missing or (not compiler.ready and x.size < COMPILE_MIN_ELEMENTS):
        return None
    dtype = x.dtype
    if dtype not in _DTYPES or any(array is not None and array.dtype != dtype for array in arrays):
        return None  # a loop is compiled for one dtype; another would be compiled here, on the spot
    key = (op_type, dtype, _KINDS[op_type].options(arrays, factors, options))
    compiled = compiler.ready.get(key)
    if compiled is None:
        if x.size >= COMPILE_MIN_ELEMENTS:
            count = compiler.updates[key] = compiler.updates.get(key, 0) + 1
            if count >= COMPILE_AFTER_UPDATES:  # the loop takes the arrays, the new X and new states
                compiler.request(key, 2 * len(arrays) - 1, len(factors))
        return None
    vector = x.reshape(-1)
    inputs = [vector if array is None else array.reshape(-1) for array in arrays]
    scalars = [dtype.type(0) if factor is None else dtype.type(factor) for factor in factors]

    def run(results: tuple) -> tuple:
        new_states = iter(results[1:])
        outputs = [results[0], *[vector if state is None else next(new_states) for state in arrays[2:]]]
        compiled(*inputs, *[output.reshape(-1) for output in outputs], *scalars)
        return results

    return run


def wait(timeout: float | None = None) -> bool:
    """Waits until every loop asked for has compiled; True when they all have (False where one failed)."""
    return _COMPILER.wait(timeout)


def unavailable_reason() -> str | None:
    """Why compiled loops are missing (numba not importable, or failing), or None."""
    return _COMPILER.reason


def ready_count() -> int:
    """How many loops have compiled in this process (0: every update has run as numpy passes)."""
    return len(_COMPILER.ready)
