"""Chains of optimizer updates straight through the kernels (onnxnn/kernels/training.py and
training_formulas.py): every optimizer and option, a few steps, each step fed the last one's results.

Shared by the tests of the kernels' block-wise path and of their compiled loops, which compare
chains run two ways bit for bit.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from onnxnn.ir.donation import donating
from onnxnn.kernels import compiled_updates, training
from onnxnn.kernels.training_formulas import KERNELS

SHAPES = [(7, 5), (13,), (), (3, 1, 2)]


def _scalar(value, dtype=np.float64):
    return None if value is None else np.array(value, dtype)


def _momentum_inputs(step, weight_decay=0.01, dampening=0.1):
    beta = None if dampening is None else _scalar(1 - dampening)
    return [_scalar(0.05), np.array(step, np.int64), _scalar(0.9), beta, _scalar(weight_decay)]


def _adam_inputs(step, weight_decay=0.01):
    return [_scalar(0.05), _scalar(step), _scalar(0.8), _scalar(0.95), _scalar(1e-6), _scalar(weight_decay)]


def _adagrad_inputs(step, weight_decay=0.01):
    return [_scalar(0.05), _scalar(step), _scalar(0.01), _scalar(1e-10), _scalar(weight_decay)]


def _rmsprop_inputs(step, weight_decay=0.01, momentum=0.5):
    return [_scalar(0.01), _scalar(0.9), _scalar(1e-8), _scalar(weight_decay), _scalar(momentum)]


def _adamax_inputs(step, weight_decay=0.01):
    return [_scalar(0.05 / (1 - 0.8**step)), _scalar(0.2), _scalar(0.95), _scalar(1e-6), _scalar(weight_decay)]


def _nadam_inputs(step, decay=0.01):
    coefficients = [0.2, 0.95, 0.05, 1 - 0.95**step, 1e-6, 0.05 * 0.1 / (1 - 0.9**step), 0.05 * 0.9 / (1 - 0.8**step)]
    return [*map(_scalar, coefficients), _scalar(decay)]


def _radam_inputs(step, decay=0.01):
    return [_scalar(0.2), _scalar(0.95), _scalar(0.05), _scalar(1e-6), _scalar(0.05 / (1 - 0.8**step)), _scalar(decay)]


def _adadelta_inputs(step, weight_decay=0.01):
    return [_scalar(1.0), _scalar(0.9), _scalar(0.1), _scalar(1e-6), _scalar(weight_decay)]


def _asgd_inputs(step, mu=0.5, weight_decay=0.01):
    return [_scalar(1 - 0.01 * 0.05), _scalar(0.05), _scalar(mu), _scalar(weight_decay)]


def _rprop_inputs(step):
    return [_scalar(0.5), _scalar(1.2), _scalar(1e-3), _scalar(0.8)]


# name: (kernel, attributes, how many state lists it carries, its hyperparameter inputs at a step).
# The tensors follow: parameters, gradients, then each state list.
CASES = {
    "momentum": (training.momentum, {"mode": "standard"}, 1, _momentum_inputs),
    "momentum-undamped-no-decay": (training.momentum, {}, 1, lambda step: _momentum_inputs(step, None, None)),
    "momentum-nesterov": (training.momentum, {"mode": "nesterov"}, 1, lambda step: _momentum_inputs(step, 0.0, 0.0)),
    "adam-l2": (training.adam, {}, 2, _adam_inputs),
    "adam-maximize-no-decay": (training.adam, {"maximize": 1}, 2, lambda step: _adam_inputs(step, None)),
    "adamw-amsgrad-maximize": (
        training.adam,
        {"amsgrad": 1, "decoupled_weight_decay": 1, "maximize": 1},
        3,
        _adam_inputs,
    ),
    "adagrad-maximize": (training.adagrad, {"maximize": 1}, 1, _adagrad_inputs),
    "adagrad-no-decay": (training.adagrad, {}, 1, lambda step: _adagrad_inputs(step, None)),
    "rmsprop-centered-momentum": (training.rmsprop, {"centered": 1}, 3, _rmsprop_inputs),
    "rmsprop-maximize": (training.rmsprop, {"maximize": 1}, 1, lambda step: _rmsprop_inputs(step, None, None)),
    "rmsprop-centered-maximize": (
        training.rmsprop,
        {"centered": 1, "maximize": 1},
        2,
        lambda step: _rmsprop_inputs(step, 0.01, None),
    ),
    "adamax-l2": (KERNELS["Adamax"], {}, 2, _adamax_inputs),
    "adamax-maximize-no-decay": (KERNELS["Adamax"], {"maximize": 1}, 2, lambda step: _adamax_inputs(step, None)),
    "nadam-l2-maximize": (KERNELS["NAdam"], {"maximize": 1}, 2, _nadam_inputs),
    "nadam-decoupled": (KERNELS["NAdam"], {"decoupled_weight_decay": 1}, 2, lambda step: _nadam_inputs(step, 0.9995)),
    "radam-rectified-l2": (KERNELS["RAdam"], {"rectified": 1}, 2, _radam_inputs),
    "radam-rectified-decoupled-maximize": (
        KERNELS["RAdam"],
        {"rectified": 1, "decoupled_weight_decay": 1, "maximize": 1},
        2,
        lambda step: _radam_inputs(step, 0.9995),
    ),
    "radam-unrectified-no-decay": (KERNELS["RAdam"], {"rectified": 0}, 2, lambda step: _radam_inputs(step, None)),
    "adadelta-l2-maximize": (KERNELS["Adadelta"], {"maximize": 1}, 2, _adadelta_inputs),
    "adadelta-no-decay": (KERNELS["Adadelta"], {}, 2, lambda step: _adadelta_inputs(step, None)),
    "asgd-averaged-l2": (KERNELS["ASGD"], {}, 1, _asgd_inputs),
    "asgd-maximize-not-averaged": (KERNELS["ASGD"], {"maximize": 1}, 1, lambda step: _asgd_inputs(step, None, None)),
    "sgd-l2-maximize": (KERNELS["SGD"], {"maximize": 1}, 0, lambda step: [_scalar(0.05), _scalar(0.01)]),
    "sgd-no-decay": (KERNELS["SGD"], {}, 0, lambda step: [_scalar(0.05), None]),
    "rprop": (KERNELS["Rprop"], {}, 2, _rprop_inputs),
    "rprop-maximize": (KERNELS["Rprop"], {"maximize": 1}, 2, _rprop_inputs),
}


def update_chain(case: str, steps: int = 3, dtype=np.float32, shapes=SHAPES, in_place: bool = False) -> list:
    """The results of each step of ``steps`` updates of ``case`` over random tensors of ``shapes`` (copies).

    ``in_place``: every array a step is fed is donated (``ir.donation``), and from the second step on,
    where the kernels may write the results over the first step's flat vectors, every result must lie
    where the array it replaces lay. Otherwise no input may be written.
    """
    kernel, attrs, state_lists, inputs_of = CASES[case]
    rng = np.random.default_rng(0)

    def random(shape):
        return np.asarray(rng.standard_normal(shape), dtype)

    xs = [random(shape) for shape in shapes]
    states = [[np.abs(random(shape)) for shape in shapes] for _ in range(state_lists)]
    if attrs.get("centered"):  # gradient averages well inside the squares' root: a real variance
        states[1] = [average * 0.01 for average in states[1]]
    history = []
    for step in range(1, steps + 1):
        gs = [random(shape) for shape in shapes]
        arrays = [xs, gs, *states]
        fed = [array.copy() for group in arrays for array in group]
        after = [array for group in arrays for array in group]
        # Where the arrays that the results replace lie (addresses: the arrays themselves, kept, would
        # share the memory the results are to be written over, which keeps them from being written there).
        replaced = [compiled_updates.address(array) for group in (xs, *states) for array in group]
        with donating(frozenset(map(id, after))) if in_place else nullcontext():
            results = kernel(np, inputs_of(step) + after, attrs)
        if not in_place:
            assert all(a.tobytes() == b.tobytes() for a, b in zip(fed, after)), "an input was written"
        elif step > 1:
            assert list(map(compiled_updates.address, results)) == replaced
        count = len(shapes)
        xs = list(results[:count])
        states = [list(results[count * (kind + 1) : count * (kind + 2)]) for kind in range(state_lists)]
        history.append([np.array(result) for result in results])
    return history


def counted_shared_runs(monkeypatch) -> list:
    """A list that each update shared among the loop threads' pool (loop_threads.c) appends its
    number of shares to."""
    pool = compiled_updates._THREADS
    assert pool.get() is not None, pool.reason
    runs: list = []
    run_shares = pool.run_shares
    monkeypatch.setattr(
        pool, "run_shares", lambda table, count, threads: runs.append(count) or run_shares(table, count, threads)
    )
    return runs
