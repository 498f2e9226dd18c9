"""The Momentum kernel's fast paths (onnxnn/kernels/training.py) and its finished results.

A small group of parameters is updated as one flat vector, and the kernel returns views of the new
flat vectors. When the arrays it is given are exactly the views it returned last time, it reads
the remembered flat vector instead of concatenating them. The specification: every result equals
the decomposition's formula op for op (bitwise, in the tensors' dtype) whichever path ran, no
input or earlier result is ever written, and the results are C-contiguous arrays of the recorded
dtypes and shapes (the generated code checks nothing after the call).
"""

from __future__ import annotations


import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.fastpath.straight_line import accelerate
from onnxnn.kernels import compile_plan, kernels, training, update_driver
from onnxnn.ir import dtypes
from onnxnn.ir.graph import constant, static_constant
from onnxnn.runtime.realization import data_of
from onnxnn.runtime.recording import record
from onnxnn.runtime.ops.training import TRAINING_DOMAIN
from onnxnn.ir.plan import plan as _plan

SHAPES = [(4, 3), (3,), (3, 1), (1,)]  # the Modules note's Net
MODES = [  # (norm_coefficient, beta, nesterov, update count)
    (0.01, None, False, 1),
    (None, None, False, 1),
    (0.1, 0.25, False, 2),
    (0.1, 0.25, False, 0),  # the first update ignores beta
    (0.2, 0.5, True, 3),
]


def formula(hyperparameters, xs, gs, vs, nesterov):
    """The decomposition's arithmetic per tensor, in the tensors' dtype (bitwise reference)."""
    learning_rate, update_count, alpha, beta, norm_coefficient = hyperparameters
    new_xs, new_vs = [], []
    for x, g, v in zip(xs, gs, vs):
        dtype = x.dtype
        gradient = g if norm_coefficient is None else x * norm_coefficient.astype(dtype) + g
        scaled = gradient if beta is None or int(update_count) == 0 else gradient * beta.astype(dtype)
        velocity = v * alpha.astype(dtype) + scaled
        direction = gradient + velocity * alpha.astype(dtype) if nesterov else velocity
        new_xs.append(np.asarray(x - learning_rate.astype(dtype) * direction))
        new_vs.append(np.asarray(velocity))
    return new_xs + new_vs


def _hyperparameters(mode, dtype=np.float32):
    norm_coefficient, beta, _, update_count = mode
    scalar = lambda value: None if value is None else np.array(value, dtype)  # noqa: E731
    return [scalar(0.05), np.array(update_count, np.int64), scalar(0.9), scalar(beta), scalar(norm_coefficient)]


def _arrays(shapes, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


class _CountingNumpy:
    """numpy for the kernel, counting the arrays it concatenates."""

    def __init__(self):
        self.concatenate_calls = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def concatenate(self, arrays, axis=None):
        self.concatenate_calls += 1
        return np.concatenate(arrays, axis=axis)


def _run(hyperparameters, xs, gs, vs, nesterov, xp=np):
    attrs = {"mode": "nesterov" if nesterov else "standard"}
    return training.momentum(xp, [*hyperparameters, *xs, *gs, *vs], attrs)


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


@pytest.mark.usefixtures("fast_path_on")  # reads the flat-update memory, a fast-path trick
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", MODES)
def test_a_chain_of_updates_reads_its_flat_vectors_and_equals_the_formula(mode, dtype):
    hyperparameters, nesterov = _hyperparameters(mode, dtype), mode[2]
    xs, vs = _arrays(SHAPES, dtype, seed=1), [np.zeros(shape, dtype) for shape in SHAPES]
    counting = _CountingNumpy()
    for step in range(4):
        gs = _arrays(SHAPES, dtype, seed=10 + step)
        expected = formula(hyperparameters, xs, gs, vs, nesterov)
        before = counting.concatenate_calls
        results = _run(hyperparameters, xs, gs, vs, nesterov, counting)
        _assert_equal_bitwise(results, expected)
        # X, G and V on the first step; from then on only the gradients are concatenated.
        assert counting.concatenate_calls - before == (3 if step == 0 else 1)
        xs, vs = results[:4], results[4:]


@pytest.mark.usefixtures("fast_path_on")  # reads the flat-update memory, a fast-path trick
@pytest.mark.parametrize(
    "replaced,concatenated",
    [
        ("velocities", 2),
        ("one parameter", 2),
        ("one parameter, equal values", 2),
        ("parameters", 3),
        ("parameters swapped", 3),  # the update is found by its first parameter
    ],
)
def test_arrays_that_are_not_all_the_previous_views_are_concatenated(replaced, concatenated):
    shapes = [(3,), (3,), (2, 2)]  # two parameters of one shape, so a swap keeps the layout
    hyperparameters = _hyperparameters(MODES[0])
    xs, vs = _arrays(shapes, seed=1), _arrays(shapes, seed=2)
    results = _run(hyperparameters, xs, _arrays(shapes, seed=3), vs, False)
    xs, vs = results[:3], results[3:]
    if replaced == "velocities":
        vs = [v.copy() for v in vs]
    elif replaced == "parameters":
        xs = [x * 2 for x in xs]
    elif replaced == "one parameter":
        xs = [xs[0], xs[1] + 1, xs[2]]
    elif replaced == "one parameter, equal values":
        xs = [xs[0], xs[1], -xs[2] * -1]  # equal values (a -0.0 would differ in bits), another object
    else:
        xs = [xs[1], xs[0], xs[2]]
    gs = _arrays(shapes, seed=4)
    counting = _CountingNumpy()
    _assert_equal_bitwise(
        _run(hyperparameters, xs, gs, vs, False, counting), formula(hyperparameters, xs, gs, vs, False)
    )
    assert counting.concatenate_calls == concatenated  # the gradients and what was not reused


@pytest.mark.parametrize("change", ["dtype", "shapes", "count"])
def test_a_remembered_layout_never_serves_other_shapes_or_dtypes(change):
    hyperparameters = _hyperparameters(MODES[2])
    results = _run(hyperparameters, _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2), _arrays(SHAPES, seed=3), False)
    if change == "dtype":
        xs = [x.astype(np.float64) for x in results[:4]]
        vs = [v.astype(np.float64) for v in results[4:]]
        gs = _arrays(SHAPES, np.float64, seed=4)
    elif change == "shapes":
        shapes = [(4, 3), (5,), (2, 2), (1,)]  # the first parameter is the remembered view
        xs, vs = [results[0], *_arrays(shapes[1:], seed=5)], [results[4], *_arrays(shapes[1:], seed=6)]
        gs = _arrays(shapes, seed=4)
    else:
        xs, vs, gs = results[:3], results[4:7], _arrays(SHAPES[:3], seed=4)
    _assert_equal_bitwise(_run(hyperparameters, xs, gs, vs, False), formula(hyperparameters, xs, gs, vs, False))


def test_inputs_and_earlier_results_are_never_written():
    hyperparameters = _hyperparameters(MODES[4])
    xs, vs = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2)
    kept = []
    for step in range(3):
        gs = _arrays(SHAPES, seed=10 + step)
        arrays = hyperparameters[:1] + hyperparameters[2:] + xs + gs + vs
        kept.extend((array, array.copy()) for array in arrays if array is not None)
        results = _run(hyperparameters, xs, gs, vs, True)
        xs, vs = results[:4], results[4:]
    for array, copy in kept:
        assert array.tobytes() == copy.tobytes()


@pytest.mark.parametrize("shapes", [[(3, 2), ()], [(5, 2)]], ids=["0-d parameter", "one parameter"])
def test_one_by_one_updates_return_contiguous_arrays(shapes, monkeypatch):
    """Large groups (here: every group) and single parameters are updated one by one; transposed
    inputs give transposed numpy results, and 0-d ones numpy scalars, which the kernel converts."""
    if len(shapes) > 1:
        monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
    hyperparameters = _hyperparameters(MODES[1])
    xs, gs, vs = ([np.asfortranarray(a) if a.ndim else a for a in _arrays(shapes, seed=seed)] for seed in (1, 2, 3))
    results = _run(hyperparameters, xs, gs, vs, False)
    _assert_equal_bitwise(results, formula(hyperparameters, xs, gs, vs, False))


def test_flat_updates_stop_when_the_size_limit_is_lowered(monkeypatch):
    hyperparameters = _hyperparameters(MODES[0])
    results = _run(hyperparameters, _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2), _arrays(SHAPES, seed=3), False)
    monkeypatch.setattr(update_driver, "FLAT_UPDATE_MAX_ELEMENTS", 0)
    xs, gs, vs = results[:4], _arrays(SHAPES, seed=4), results[4:]
    counting = _CountingNumpy()
    _assert_equal_bitwise(
        _run(hyperparameters, xs, gs, vs, False, counting), formula(hyperparameters, xs, gs, vs, False)
    )
    assert counting.concatenate_calls == 0


# ---------------------------------------------------------------- through compiled plans


def _momentum_plan(xs, vs, gs, mode, dtype=onnxnn.float32):
    """A recorded Momentum node over constants holding these very arrays; its outputs' Values."""
    norm_coefficient, beta, nesterov, update_count = mode
    scalar = lambda value: None if value is None else constant(np.array(value, dtype.numpy_dtype), dtype)  # noqa: E731
    hyperparameters = (
        scalar(0.05),
        static_constant(update_count, dtypes.int64),
        scalar(0.9),
        scalar(beta),
        scalar(norm_coefficient),
    )
    values = [constant(array, dtype) for array in (*xs, *gs, *vs)]
    return record(
        "Momentum", (*hyperparameters, *values), {"mode": "nesterov" if nesterov else "standard"}, TRAINING_DOMAIN
    )


@pytest.mark.usefixtures("fast_path_on")  # reads the flat-update memory, a fast-path trick
def test_views_of_one_plan_fed_to_another_plan_equal_the_formula():
    first_mode, second_mode = MODES[0], MODES[4]  # different structures: two compiled plans
    xs, vs = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2)
    with onnxnn.set_executor("kernels"):
        for step, mode in enumerate([first_mode, second_mode, first_mode, second_mode]):
            gs = _arrays(SHAPES, seed=10 + step)
            expected = formula(_hyperparameters(mode), xs, gs, vs, mode[2])
            results = [data_of(value) for value in _momentum_plan(xs, vs, gs, mode)]
            _assert_equal_bitwise(results, expected)
            xs, vs = results[:4], results[4:]
    assert update_driver._recent  # the flat update ran (and was remembered) in both plans


def test_the_generated_code_checks_nothing_after_a_finished_kernel():
    xs, vs, gs = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2), _arrays(SHAPES, seed=3)
    compiled = accelerated_plan(_plan(_momentum_plan(xs, vs, gs, MODES[0])))
    source = compiled.straight_line.source
    assert "momentum_kernel(" in source
    assert "asarray(" not in source and "astype(" not in source and "finish(" not in source.split(":", 1)[1]
    inputs = [value.data for value in _plan(_momentum_plan(xs, vs, gs, MODES[0])).inputs]
    _assert_equal_bitwise(compiled(inputs), compiled(inputs, debug=True))


def test_a_replaced_momentum_kernel_is_checked(monkeypatch):
    def careless(xp, inputs, attrs):  # float64, transposed, scalars: everything the checks repair
        results = training.momentum(xp, inputs, attrs)
        return [
            np.asfortranarray(result.astype(np.float64)) if result.ndim > 1 else result.astype(np.float64)
            for result in results
        ]

    monkeypatch.setitem(kernels.table, (TRAINING_DOMAIN, "Momentum"), careless)
    xs, vs, gs = _arrays(SHAPES, seed=1), _arrays(SHAPES, seed=2), _arrays(SHAPES, seed=3)
    graph = _plan(_momentum_plan(xs, vs, gs, MODES[0]))
    compiled = accelerated_plan(graph)
    results = compiled([value.data for value in graph.inputs])
    _assert_equal_bitwise(
        results, [r.astype(np.float32) for r in formula(_hyperparameters(MODES[0]), xs, gs, vs, False)]
    )


def test_float16_updates_run_natively_with_finished_results():
    # Not widened to float32 by the executor: the kernel rounds each of PyTorch's ops to float16 itself.
    shapes = [(2, 3), (3,)]
    xs, vs, gs = (_arrays(shapes, np.float16, seed=seed) for seed in (1, 2, 3))
    graph = _plan(_momentum_plan(xs, vs, gs, MODES[0], onnxnn.float16))
    compiled = accelerated_plan(graph)
    assert "astype(" not in compiled.straight_line.source
    inputs = [value.data for value in graph.inputs]
    results = compiled(inputs)
    assert [result.dtype for result in results] == [np.float16] * 4
    _assert_equal_bitwise(results, compiled(inputs, debug=True))


def accelerated_plan(plan):
    """The kernels' compiled plan with the fast path's straight-line code attached."""
    compiled = compile_plan(plan)
    accelerate(compiled)
    return compiled
