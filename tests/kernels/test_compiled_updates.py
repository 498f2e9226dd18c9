"""The optimizer updates' compiled loops (onnxnn/kernels/compiled_updates.py).

The specification: numba is a dependency, so every loop an update asks for compiles (in the
background, the numpy formulas running meanwhile). Once it has, the optimizer kernels run it,
and every chain of updates (every optimizer and option, float32 and float64, a small model's
flat vector and tensors updated one by one, a 0-d parameter among them) equals the numpy
formulas' chain bit for bit (a NaN's sign aside), non-finite values included. Without numba
the numpy formulas run, and the reason is on record.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import onnxnn
from onnxnn.kernels import compiled_updates

from .update_chains import CASES, update_chain

LAYOUTS = {
    "flat vector": [(7, 5), (13,), (), (3, 1, 2)],
    "tensor by tensor": [(300, 257), (257,), ()],  # 77,100 elements: past the flat bound, recycled results
}


@pytest.fixture(autouse=True)
def _compile_at_the_first_large_update(monkeypatch):
    monkeypatch.setattr(compiled_updates, "COMPILE_AFTER_UPDATES", 1)


def _compiled_chain(case: str, dtype=np.float32, shapes=LAYOUTS["flat vector"]) -> list:
    """The chain of updates of ``case`` on the compiled loops: a first run of large tensors asks
    for them, numpy computing meanwhile; once they have compiled, the chain runs on them."""
    update_chain(case, steps=1, dtype=dtype, shapes=LAYOUTS["tensor by tensor"])
    assert compiled_updates.wait(timeout=120), compiled_updates.unavailable_reason()
    return update_chain(case, dtype=dtype, shapes=shapes)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_chain_of_compiled_updates_equals_the_numpy_formulas_bitwise(case, dtype, layout, monkeypatch):
    compiled = _compiled_chain(case, dtype=dtype, shapes=LAYOUTS[layout])
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    formulas = update_chain(case, dtype=dtype, shapes=LAYOUTS[layout])
    for compiled_step, formula_step in zip(compiled, formulas):
        assert len(compiled_step) == len(formula_step)
        for result, expected in zip(compiled_step, formula_step):
            assert result.shape == expected.shape and result.dtype == expected.dtype
            _assert_same_bits(result, expected)


@pytest.mark.parametrize(
    "case", ["momentum", "adamw-amsgrad-maximize", "adagrad-maximize", "rmsprop-centered-momentum"]
)
def test_a_hundred_compiled_steps_equal_a_hundred_steps_of_the_numpy_formulas_bitwise(case, monkeypatch):
    shapes = LAYOUTS["tensor by tensor"]
    update_chain(case, steps=1, shapes=shapes)
    assert compiled_updates.wait(timeout=120), compiled_updates.unavailable_reason()
    compiled = update_chain(case, steps=100, shapes=shapes)[-1]
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for result, expected in zip(compiled, update_chain(case, steps=100, shapes=shapes)[-1]):
        _assert_same_bits(result, expected)


def _assert_same_bits(result: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit, except that a NaN's sign and payload are not values (the square root of a
    negative number is a NaN of either sign, depending on the instruction that computes it)."""
    is_nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(result), is_nan)
    assert result[~is_nan].tobytes() == expected[~is_nan].tobytes()


@pytest.mark.parametrize("case", sorted(CASES))
def test_non_finite_gradients_and_states_propagate_as_in_the_numpy_formulas(case, monkeypatch):
    kernel, attrs, state_lists, inputs_of = CASES[case]
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e38, -2.0], np.float32)
    arrays = [np.roll(special, shift) for shift in range(2 + state_lists)]
    arrays[2:] = [np.abs(state) for state in arrays[2:]]
    inputs = inputs_of(2) + arrays
    _compiled_chain(case)
    with np.errstate(all="ignore"):  # numpy warns of what the loops compute silently
        compiled = kernel(np, inputs, attrs)
        monkeypatch.setattr(compiled_updates, "ENABLED", False)
        expected_results = kernel(np, inputs, attrs)
    for result, expected in zip(compiled, expected_results):
        _assert_same_bits(result, expected)


def test_the_kernels_run_the_compiled_loops_with_or_without_the_fast_path_unless_switched_off(monkeypatch):
    _compiled_chain("adam-l2", shapes=LAYOUTS["flat vector"])
    _compiled_chain("adam-l2", shapes=LAYOUTS["tensor by tensor"])
    calls = []

    def counting(loop):
        def run(*arguments):
            calls.append(1)
            return loop(*arguments)

        return run

    ready = {key: counting(loop) for key, loop in compiled_updates._COMPILER.ready.items()}
    monkeypatch.setattr(compiled_updates._COMPILER, "ready", ready)
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["tensor by tensor"])
    assert len(calls) == 2 + 2 * len(LAYOUTS["tensor by tensor"])
    calls.clear()
    with onnxnn.set_fast_path(False):  # the profiler's setting: it must time the loops that run
        update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    assert len(calls) == 2
    calls.clear()
    monkeypatch.setattr(compiled_updates, "ENABLED", False)  # ONNXNN_COMPILED_UPDATES=0
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    assert calls == []


def test_float16_updates_stay_numpy_formulas_rounded_op_by_op():
    arrays = (np.ones(4, np.float16),) * 4 + (None,)
    assert compiled_updates.loop("Adam", arrays, (np.float16(0.1),) * 6 + (None,), (False, False)) is None
    assert all(key[1] != np.float16 for key in compiled_updates._COMPILER.requested)


def test_an_optimizer_trains_the_same_with_and_without_the_compiled_loops(monkeypatch):
    def train() -> list:  # on the kernels executor: onnxruntime's Gemm would round differently from numpy's
        onnxnn.manual_seed(0)
        model = onnxnn.nn.Sequential(onnxnn.nn.Linear(300, 257), onnxnn.nn.Tanh(), onnxnn.nn.Linear(257, 3))
        optimizer = onnxnn.optim.AdamW(model.parameters(), lr=1e-2, amsgrad=True)
        data = onnxnn.randn(8, 300)
        with onnxnn.set_executor("kernels"):
            for _ in range(3):
                optimizer.zero_grad()
                model(data).square().mean().backward()
                optimizer.step()
        return [parameter.detach().numpy().copy() for parameter in model.parameters()]

    train()
    assert compiled_updates.wait(timeout=120), compiled_updates.unavailable_reason()
    compiled = train()
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for result, expected in zip(compiled, train()):
        _assert_same_bits(result, expected)


def test_small_updates_never_load_numba(monkeypatch):
    monkeypatch.setattr(compiled_updates, "_COMPILER", compiled_updates._Compiler())
    for case in CASES:
        update_chain(case, shapes=LAYOUTS["flat vector"])
        update_chain(case, shapes=[(compiled_updates.COMPILE_MIN_ELEMENTS - 1,)])
    assert compiled_updates._COMPILER.requested == set() and compiled_updates._COMPILER.thread is None


def test_a_large_update_asks_for_its_loop_once_it_has_run_often_enough(monkeypatch):
    monkeypatch.setattr(compiled_updates, "COMPILE_AFTER_UPDATES", 4)
    monkeypatch.setattr(compiled_updates, "_COMPILER", compiled_updates._Compiler())
    update_chain("adam-l2", steps=3, shapes=[(compiled_updates.COMPILE_MIN_ELEMENTS,)])
    assert compiled_updates._COMPILER.requested == set()
    update_chain("adam-l2", steps=1, shapes=[(compiled_updates.COMPILE_MIN_ELEMENTS,)])
    assert len(compiled_updates._COMPILER.requested) == 1
    assert compiled_updates.wait(timeout=120), compiled_updates.unavailable_reason()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX's")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_keeps_the_compiled_loops_and_compiles_in_its_own_thread():
    _compiled_chain("adam-l2")
    ready = dict(compiled_updates._COMPILER.ready)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child reports whether it kept the loops and has no parent's thread
        kept = compiled_updates._COMPILER.ready == ready and compiled_updates._COMPILER.thread is None
        os.write(write, b"1" if kept else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(child, 0)


def test_without_a_writable_cache_directory_the_loops_compile_in_each_process(monkeypatch):
    import numba

    uncached = numba.njit

    def njit_without_cache(function, cache=False, **options):
        if cache:
            raise RuntimeError(f"cannot cache function {function.__name__!r}: no locator available")
        return uncached(function, **options)

    monkeypatch.setattr(numba, "njit", njit_without_cache)
    monkeypatch.setattr(compiled_updates, "_COMPILER", compiled_updates._Compiler())
    _compiled_chain("adagrad-no-decay")
    assert compiled_updates.unavailable_reason() is None and compiled_updates.ready_count() == 1


def test_without_numba_the_numpy_formulas_run_and_say_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `import numba` raise ImportError
    monkeypatch.setattr(compiled_updates, "_COMPILER", compiled_updates._Compiler())
    chain = update_chain("adam-l2", shapes=LAYOUTS["tensor by tensor"])
    assert compiled_updates.wait(timeout=60) is False
    assert "numba is not importable" in compiled_updates.unavailable_reason()
    assert compiled_updates._COMPILER.ready == {}
    counted = dict(compiled_updates._COMPILER.updates)
    update_chain("adam-l2", shapes=LAYOUTS["tensor by tensor"])
    assert compiled_updates._COMPILER.updates == counted  # once numba is known missing, nothing is asked
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for step, expected_step in zip(chain, update_chain("adam-l2", shapes=LAYOUTS["tensor by tensor"])):
        for result, expected in zip(step, expected_step):
            assert result.tobytes() == expected.tobytes()
