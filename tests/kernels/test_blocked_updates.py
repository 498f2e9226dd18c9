"""The optimizer kernels' block-wise path (onnxnn/kernels/training.py ``_apply``): a large tensor is
updated block by block into recycled buffers. The specification: for every optimizer and option,
a chain of updates run block by block (blocks that do not divide the tensors, a 0-d parameter
among them) equals the same chain run whole, bit for bit; nothing fed in is written."""

from __future__ import annotations

import numpy as np
import pytest

from onnxnn.kernels import training

SHAPES = [(7, 5), (13,), (), (3, 1, 2)]


def _scalar(value, dtype=np.float64):
    return None if value is None else np.array(value, dtype)


def _momentum_inputs(arrays, step, weight_decay=0.01, dampening=0.1):
    xs, gs, vs = arrays
    hyperparameters = [_scalar(0.05), np.array(step, np.int64), _scalar(0.9), _scalar(1 - dampening)]
    return [*hyperparameters, _scalar(weight_decay), *xs, *gs, *vs]


def _adam_inputs(arrays, step, weight_decay=0.01):
    xs, gs, ms, vs, v_maxes = arrays
    hyperparameters = [_scalar(0.05), _scalar(step), _scalar(0.8), _scalar(0.95), _scalar(1e-6), _scalar(weight_decay)]
    return [*hyperparameters, *xs, *gs, *ms, *vs, *(v_maxes or [])]


def _adagrad_inputs(arrays, step):
    xs, gs, sums = arrays
    return [_scalar(0.05), _scalar(step), _scalar(0.01), _scalar(1e-10), _scalar(0.01), *xs, *gs, *sums]


def _rmsprop_inputs(arrays, step, centered=True):
    xs, gs, squares, averages, buffers = arrays
    states = [*squares, *(averages if centered else []), *buffers]
    return [_scalar(0.01), _scalar(0.9), _scalar(1e-8), _scalar(0.01), _scalar(0.5), *xs, *gs, *states]


# name: (kernel, attributes, how many state lists it carries, inputs from (arrays, step))
CASES = {
    "momentum": (training.momentum, {"mode": "standard"}, 1, _momentum_inputs),
    "momentum-nesterov": (training.momentum, {"mode": "nesterov"}, 1, lambda a, s: _momentum_inputs(a, s, 0.0, 0.0)),
    "adam-l2": (training.adam, {}, 2, lambda a, s: _adam_inputs(a[:4] + (None,), s)),
    "adamw-amsgrad-maximize": (
        training.adam,
        {"amsgrad": 1, "decoupled_weight_decay": 1, "maximize": 1},
        3,
        _adam_inputs,
    ),
    "adagrad-maximize": (training.adagrad, {"maximize": 1}, 1, _adagrad_inputs),
    "rmsprop-centered-momentum": (training.rmsprop, {"centered": 1}, 3, _rmsprop_inputs),
}


def _chain(case: str, steps: int = 3) -> list:
    kernel, attrs, state_lists, inputs_of = CASES[case]
    rng = np.random.default_rng(0)

    def random(shape):
        return np.asarray(rng.standard_normal(shape), np.float32)

    xs = [random(shape) for shape in SHAPES]
    states = [[np.abs(random(shape)) for shape in SHAPES] for _ in range(state_lists)]
    if case.startswith("rmsprop"):  # gradient averages well inside the squares' root: a real variance
        states[1] = [average * 0.01 for average in states[1]]
    history = []
    for step in range(1, steps + 1):
        gs = [random(shape) for shape in SHAPES]
        if case == "adam-l2":
            arrays = (xs, gs, *states, None)
        elif case in ("adamw-amsgrad-maximize", "rmsprop-centered-momentum"):
            arrays = (xs, gs, *states)
        else:
            arrays = (xs, gs, states[0])
        fed = [array.copy() for group in arrays if group is not None for array in group]
        results = kernel(np, inputs_of(arrays, step), attrs)
        after = [array for group in arrays if group is not None for array in group]
        assert all(a.tobytes() == b.tobytes() for a, b in zip(fed, after)), "an input was written"
        count = len(SHAPES)
        xs = list(results[:count])
        states = [list(results[count * (kind + 1) : count * (kind + 2)]) for kind in range(state_lists)]
        history.append([np.array(result) for result in results])
    return history


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_chain_of_block_wise_updates_equals_the_whole_updates_bitwise(case, monkeypatch):
    monkeypatch.setattr(training, "FLAT_UPDATE_MAX_ELEMENTS", 0)  # one tensor at a time, as large ones go
    whole = _chain(case)
    monkeypatch.setattr(training, "RECYCLE_MIN_ELEMENTS", 1)  # every tensor takes the block-wise path
    monkeypatch.setattr(training, "BLOCK_ELEMENTS", 4)  # blocks that divide none of the shapes
    blocked = _chain(case)
    for whole_step, blocked_step in zip(whole, blocked):
        assert len(whole_step) == len(blocked_step)
        for expected, result in zip(whole_step, blocked_step):
            assert result.shape == expected.shape and result.dtype == expected.dtype
            assert result.tobytes() == expected.tobytes()
