"""The Adam, Adagrad and RMSprop kernels' fast paths (onnxnn/kernels/training.py) and their finished results.

As Momentum's, a small group of parameters is updated as one flat vector, returned as views of the
new flat vectors, and an update fed exactly the views of the last one reads the remembered flat
vectors (parameters, both moments, the running maximum, Adagrad's sums, RMSprop's averages and
buffers) instead of concatenating them. The specification: every result equals onnxnn's unfused
formulas (tests/unfused_updates.py) bit for bit whichever path ran, no input or earlier result is
ever written, and the results are C-contiguous arrays of the inputs' dtypes and shapes.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.kernels import training, update_driver

from unfused_updates import unfused_adagrad_step, unfused_adam_step, unfused_rmsprop_step

SHAPES = [(4, 3), (3,), (3, 1), (1,)]
OPTIONS = [
    dict(weight_decay=0.01, decoupled_weight_decay=False, amsgrad=False, maximize=False),
    dict(weight_decay=0.0, decoupled_weight_decay=False, amsgrad=True, maximize=False),
    dict(weight_decay=0.1, decoupled_weight_decay=True, amsgrad=True, maximize=True),
]
HYPERPARAMETERS = dict(lr=0.05, betas=(0.8, 0.95), eps=1e-6)


class _CountingNumpy:
    """numpy for the kernel, counting the arrays it concatenates."""

    def __init__(self):
        self.concatenate_calls = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def concatenate(self, arrays, axis=None):
        self.concatenate_calls += 1
        return np.concatenate(arrays, axis=axis)


def _run(options, step, xs, gs, ms, vs, v_maxes, xp=np):
    scalar = lambda value: np.array(value, np.float64)  # noqa: E731  (as the optimizer feeds them)
    beta1, beta2 = HYPERPARAMETERS["betas"]
    inputs = [
        scalar(HYPERPARAMETERS["lr"]),
        scalar(step),
        scalar(beta1),
        scalar(beta2),
        scalar(HYPERPARAMETERS["eps"]),
        scalar(options["weight_decay"]) if options["weight_decay"] else None,
        *xs,
        *gs,
        *ms,
        *vs,
    ]
    if options["amsgrad"]:
        inputs += v_maxes
    attrs = {
        "decoupled_weight_decay": int(options["decoupled_weight_decay"]),
        "amsgrad": int(options["amsgrad"]),
        "maximize": int(options["maximize"]),
    }
    return training.adam(xp, inputs, attrs)


def _expected(options, step, xs, gs, ms, vs, v_maxes) -> list:
    updates = [
        unfused_adam_step(*arrays, float(step), **HYPERPARAMETERS, **options) for arrays in zip(xs, gs, ms, vs, v_maxes)
    ]
    kinds = 4 if options["amsgrad"] else 3
    return [update[kind] for kind in range(kinds) for update in updates]


def _split(results, options) -> tuple:
    count = len(results) // (4 if options["amsgrad"] else 3)
    xs, ms, vs = results[:count], results[count : 2 * count], results[2 * count : 3 * count]
    return xs, ms, vs, results[3 * count :] if options["amsgrad"] else [None] * count


def _arrays(shapes, dtype=np.float32, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(rng.standard_normal(shape), dtype) for shape in shapes]
    return [np.abs(array) for array in arrays] if positive else arrays


def _assert_equal_bitwise(results, expected):
    assert len(results) == len(expected)
    for result, reference in zip(results, expected):
        assert type(result) is np.ndarray and result.flags.c_contiguous
        assert result.dtype == reference.dtype and result.shape == reference.shape
        assert result.tobytes() == reference.tobytes()


@pytest.fixture(autouse=True)
def _forget_earlier_updates():
    update_driver._recent.clear()
    yield
    update_driver._recent.clear()


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast path", "no fast path"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("options", OPTIONS, ids=["l2", "amsgrad", "decoupled-amsgrad-maximize"])
def test_a_chain_of_updates_equals_the_unfused_formulas(options, dtype, fast_path):
    xs, ms = _arrays(SHAPES, dtype, seed=1), _arrays(SHAPES, dtype, seed=2)
    vs = _arrays(SHAPES, dtype, seed=3, positive=True)
    v_maxes = vs if options["amsgrad"] else [None] * len(SHAPES)
    counting = _CountingNumpy()
    carried = 4 if options["amsgrad"] else 3
    with onnxnn.set_fast_path(fast_path):
        for step in range(1, 5):
            gs = _arrays(SHAPES, dtype, seed=10 + step)
            expected = _expected(options, step, xs, gs, ms, vs, v_maxes)
            before = counting.concatenate_calls
            results = _run(options, step, xs, gs, ms, vs, v_maxes, counting)
            _assert_equal_bitwise(results, expected)
            # Every carried list and the gradients on the first step (and always without the fast
            # path's memory); from then on only the gradients.
            reads_memory = fast_path and step > 1
            assert counting.concatenate_calls - before == (1 if reads_memory else carried + 1)
            xs, ms, vs, v_maxes = _split(results, options)


@pytest.mark.usefixtures("fast_path_on")  # reads the flat-update memory, a fast-path trick
def test_replaced_states_are_concatenated_and_inputs_never_written():
    options = OPTIONS[2]
    xs, ms, vs = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2), _arrays(SHAPES, seed=3, positive=True)
    v_maxes = vs
    kept = []
    for step in range(1, 4):
        gs = _arrays(SHAPES, seed=10 + step)
        if step == 3:
            ms = [m.copy() for m in ms]  # equal values, other objects: read from the arrays themselves
        kept.extend((array, array.copy()) for array in (*xs, *gs, *ms, *vs, *v_maxes))
        counting = _CountingNumpy()
        results = _run(options, step, xs, gs, ms, vs, v_maxes, counting)
        _assert_equal_bitwise(results, _expected(options, step, xs, gs, ms, vs, v_maxes))
        assert counting.concatenate_calls == {1: 5, 2: 1, 3: 2}[step]
        xs, ms, vs, v_maxes = _split(results, options)
    for array, copy in kept:
        assert array.tobytes() == copy.tobytes()


@pytest.mark.parametrize("shapes", [[(3, 2), ()], [(5, 2)]], ids=["0-d parameter", "one parameter"])
def test_one_by_one_updates_return_contiguous_arrays(shapes, monkeypatch):
    """Large groups (here: every group) and single parameters are updated one by one; transposed
    inputs give transposed numpy results, and 0-d ones numpy scalars, which the kernel converts."""
    if len(shapes) > 1:
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
    options = OPTIONS[2]
    xs, gs, ms = ([np.asfortranarray(a) if a.ndim else a for a in _arrays(shapes, seed=seed)] for seed in (1, 2, 3))
    vs = [np.asfortranarray(a) if a.ndim else a for a in _arrays(shapes, seed=4, positive=True)]
    results = _run(options, 3, xs, gs, ms, vs, vs)
    _assert_equal_bitwise(results, _expected(options, 3, xs, gs, ms, vs, vs))


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast path", "no fast path"])
@pytest.mark.parametrize("maximize, weight_decay", [(False, 0.0), (True, 0.1), (True, 0.0)])
def test_a_chain_of_adagrad_updates_equals_the_unfused_formulas(maximize, weight_decay, fast_path):
    options = dict(lr=0.1, lr_decay=0.05, eps=1e-6, weight_decay=weight_decay, maximize=maximize)
    scalar = lambda value: np.array(value, np.float64)  # noqa: E731
    xs, sums = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2, positive=True)
    counting = _CountingNumpy()
    with onnxnn.set_fast_path(fast_path):
        for step in range(1, 5):
            gs = _arrays(SHAPES, seed=10 + step)
            updates = [unfused_adagrad_step(x, g, s, float(step), **options) for x, g, s in zip(xs, gs, sums)]
            expected = [update[0] for update in updates] + [update[1] for update in updates]
            inputs = [
                scalar(0.1),
                scalar(step),
                scalar(0.05),
                scalar(1e-6),
                scalar(weight_decay) if weight_decay else None,
                *xs,
                *gs,
                *sums,
            ]
            before = counting.concatenate_calls
            results = training.adagrad(counting, inputs, {"maximize": int(maximize)})
            _assert_equal_bitwise(results, expected)
            assert counting.concatenate_calls - before == (1 if fast_path and step > 1 else 3)
            xs, sums = results[: len(SHAPES)], results[len(SHAPES) :]


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast path", "no fast path"])
@pytest.mark.parametrize(
    "centered, momentum, maximize, weight_decay",
    [(False, 0.0, False, 0.0), (True, 0.5, True, 0.1), (True, 0.0, True, 0.0), (False, 0.3, False, 0.05)],
)
def test_a_chain_of_rmsprop_updates_equals_the_unfused_formulas(centered, momentum, maximize, weight_decay, fast_path):
    options = dict(
        lr=0.01, alpha=0.9, eps=1e-6, weight_decay=weight_decay, momentum=momentum, centered=centered, maximize=maximize
    )
    scalar = lambda value: np.array(value, np.float64)  # noqa: E731
    xs, grad_avgs, buffers = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2), _arrays(SHAPES, seed=3)
    square_avgs = [a + 10 for a in _arrays(SHAPES, seed=4, positive=True)]
    counting = _CountingNumpy()
    carried = 2 + centered + (momentum > 0)
    with onnxnn.set_fast_path(fast_path):
        for step in range(1, 5):
            gs = _arrays(SHAPES, seed=10 + step)
            updates = [
                unfused_rmsprop_step(*arrays, float(step), **options)
                for arrays in zip(xs, gs, square_avgs, grad_avgs, buffers)
            ]
            kinds = [0, 1] + ([2] if centered else []) + ([3] if momentum else [])
            expected = [update[kind] for kind in kinds for update in updates]
            inputs = [
                scalar(0.01),
                scalar(0.9),
                scalar(1e-6),
                scalar(weight_decay) if weight_decay else None,
                scalar(momentum) if momentum else None,
                *xs,
                *gs,
                *square_avgs,
            ]
            inputs += (grad_avgs if centered else []) + (buffers if momentum else [])
            before = counting.concatenate_calls
            results = training.rmsprop(counting, inputs, {"centered": int(centered), "maximize": int(maximize)})
            _assert_equal_bitwise(results, expected)
            assert counting.concatenate_calls - before == (1 if fast_path and step > 1 else carried + 1)
            count = len(SHAPES)
            xs, square_avgs = results[:count], results[count : 2 * count]
            grad_avgs = results[2 * count : 3 * count] if centered else grad_avgs
            buffers = results[-count:] if momentum else buffers
