"""The optimizer updates' compiled loops (onnxnn/kernels/update_loops.c, run by compiled_updates.py).

The specification: wherever a C compiler was present when onnxnn was installed, the library of
loops is built and the optimizer kernels run it, and every chain of updates (every optimizer and
option, float32 and float64, a small model's flat vector and tensors updated one by one, a 0-d
parameter among them, results written plainly or streamed to memory, into new arrays or over the
arrays they replace) equals the numpy formulas' chain bit for bit (a NaN's sign aside), non-finite
values included. Without the library the numpy
formulas run, and the reason is on record.
"""

from __future__ import annotations

import math
import os
import select
import shutil
import signal
import sysconfig

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.mode import MODE
from onnxnn.kernels import compiled_updates, recycled_buffers, update_driver

from .update_chains import CASES, counted_shared_runs, update_chain

LAYOUTS = {
    "flat vector": [(7, 5), (13,), (), (3, 1, 2)],
    "tensor by tensor": [(300, 257), (257,), ()],  # 77,100 elements: past the flat bound, recycled results
}


@pytest.fixture(autouse=True)
def _every_update_runs_its_loop(monkeypatch):
    monkeypatch.setattr(compiled_updates, "COMPILED_MIN_ELEMENTS", 0)


needs_the_library = pytest.mark.skipif(
    not compiled_updates.available(), reason=f"{compiled_updates.unavailable_reason()}"
)


def test_the_library_is_built_wherever_a_c_compiler_is_present():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) built the library")
    assert compiled_updates.available(), compiled_updates.unavailable_reason()


def _stream_results(streamed: bool, monkeypatch) -> None:
    """Streamed: every update's results written with non-temporal stores (update_loops.c's
    STREAM_OPTION), block by block, whatever the alignment of the tensors' arrays."""
    monkeypatch.setattr(compiled_updates, "STREAM_MIN_ELEMENTS", 0 if streamed else 1 << 62)


@needs_the_library
@pytest.mark.parametrize("streamed", [False, True], ids=["stored", "streamed"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_chain_of_compiled_updates_equals_the_numpy_formulas_bitwise(case, dtype, layout, streamed, monkeypatch):
    _stream_results(streamed, monkeypatch)
    compiled = update_chain(case, dtype=dtype, shapes=LAYOUTS[layout])
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    formulas = update_chain(case, dtype=dtype, shapes=LAYOUTS[layout])
    for compiled_step, formula_step in zip(compiled, formulas):
        assert len(compiled_step) == len(formula_step)
        for result, expected in zip(compiled_step, formula_step):
            assert result.shape == expected.shape and result.dtype == expected.dtype
            _assert_same_bits(result, expected)


@pytest.mark.usefixtures("fast_path_on")  # updates written over the last step's arrays are the fast path's
@needs_the_library
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_chain_of_compiled_updates_written_in_place_equals_the_numpy_formulas_bitwise(
    case, dtype, layout, monkeypatch
):
    # Only flat vectors from the recycled buffers' pools are overwritten: every one here.
    monkeypatch.setattr(recycled_buffers, "RECYCLE_MIN_ELEMENTS", 0)
    compiled = update_chain(case, dtype=dtype, shapes=LAYOUTS[layout], in_place=True)
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    formulas = update_chain(case, dtype=dtype, shapes=LAYOUTS[layout])
    for compiled_step, formula_step in zip(compiled, formulas):
        for result, expected in zip(compiled_step, formula_step):
            _assert_same_bits(result, expected)


@needs_the_library
@pytest.mark.parametrize(
    "case",
    [
        "momentum",
        "adamw-amsgrad-maximize",
        "adagrad-maximize",
        "rmsprop-centered-momentum",
        "adamax-l2",
        "nadam-l2-maximize",
        "radam-rectified-decoupled-maximize",
        "adadelta-l2-maximize",
        "asgd-averaged-l2",
        "rprop-maximize",
    ],
)
def test_a_hundred_compiled_steps_equal_a_hundred_steps_of_the_numpy_formulas_bitwise(case, monkeypatch):
    shapes = LAYOUTS["tensor by tensor"]
    compiled = update_chain(case, steps=100, shapes=shapes)[-1]
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for result, expected in zip(compiled, update_chain(case, steps=100, shapes=shapes)[-1]):
        _assert_same_bits(result, expected)


@needs_the_library
@pytest.mark.parametrize("streamed", [False, True], ids=["stored", "streamed"])
@pytest.mark.parametrize("threads", [2, 3, 7])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "case", ["momentum-nesterov", "adamw-amsgrad-maximize", "rmsprop-centered-momentum", "nadam-decoupled"]
)
def test_updates_shared_among_threads_equal_the_numpy_formulas_bitwise(
    case, dtype, layout, threads, streamed, monkeypatch
):
    # Every update shared out, its ranges cut inside tensors (and a 0-d one among them).
    _stream_results(streamed, monkeypatch)
    monkeypatch.setattr(compiled_updates, "THREADED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(compiled_updates, "SHARE_MIN_ELEMENTS", 1)
    monkeypatch.setattr(MODE, "intra_op_threads", threads)
    shared = update_chain(case, dtype=dtype, steps=3, shapes=LAYOUTS[layout])
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    formulas = update_chain(case, dtype=dtype, steps=3, shapes=LAYOUTS[layout])
    for shared_step, formula_step in zip(shared, formulas):
        for result, expected in zip(shared_step, formula_step):
            _assert_same_bits(result, expected)


@pytest.mark.parametrize("threads", [1, 2, 3, 5, 64])
def test_the_threads_ranges_cover_every_element_once_in_aligned_pieces(threads):
    counts = [10, 100, 1, 37, 200]
    arrays_per_tensor = 3
    # Each array's address as if its tensor's arrays started at 10**6 * (tensor + 1) * (array + 1).
    bases = [10**6 * (tensor + 1) * (array + 1) for tensor in range(len(counts)) for array in range(arrays_per_tensor)]
    bases[4] = None  # an absent state stays absent in every piece
    shares = compiled_updates._shares(counts, bases, 4, threads)
    assert 1 <= len(shares) <= threads
    covered = []
    for share_counts, share_addresses in shares:
        assert len(share_addresses) == arrays_per_tensor * len(share_counts)
        for piece, count in enumerate(share_counts):
            addresses = share_addresses[piece * arrays_per_tensor : (piece + 1) * arrays_per_tensor]
            tensor = next(
                t
                for t in range(len(counts))
                if bases[t * arrays_per_tensor] <= addresses[0] < bases[t * arrays_per_tensor] + 4 * counts[t]
            )
            first = (addresses[0] - bases[tensor * arrays_per_tensor]) // 4
            for array, address in enumerate(addresses):
                base = bases[tensor * arrays_per_tensor + array]
                assert address == (None if base is None else base + 4 * first)
            covered.extend((tensor, element) for element in range(first, first + count))
    assert covered == [(tensor, element) for tensor, count in enumerate(counts) for element in range(count)]
    starts = np.cumsum([0, *[sum(share[0]) for share in shares]])[:-1]
    assert all(start % 16 == 0 for start in starts)


def _assert_same_bits(result: np.ndarray, expected: np.ndarray) -> None:
    """Bit for bit, except that a NaN's sign and payload are not values (the square root of a
    negative number is a NaN of either sign, depending on the instruction that computes it)."""
    is_nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(result), is_nan)
    assert result[~is_nan].tobytes() == expected[~is_nan].tobytes()


@needs_the_library
@pytest.mark.parametrize("case", sorted(CASES))
def test_non_finite_gradients_and_states_propagate_as_in_the_numpy_formulas(case, monkeypatch):
    kernel, attrs, state_lists, inputs_of = CASES[case]
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e38, -2.0], np.float32)
    arrays = [np.roll(special, shift) for shift in range(2 + state_lists)]
    arrays[2:] = [np.abs(state) for state in arrays[2:]]
    inputs = inputs_of(2) + arrays
    with np.errstate(all="ignore"):  # numpy warns of what the loops compute silently
        compiled = kernel(np, inputs, attrs)
        monkeypatch.setattr(compiled_updates, "ENABLED", False)
        expected_results = kernel(np, inputs, attrs)
    for result, expected in zip(compiled, expected_results):
        _assert_same_bits(result, expected)


def _counted_library_calls(monkeypatch) -> list:
    """A list that each call of the library's loops appends its option bits to."""
    calls: list = []

    def counting(loop):
        def run(*arguments):
            calls.append(arguments[-1])
            return loop(*arguments)

        return run

    compiled_updates.available()  # loads the library
    functions = {key: counting(function) for key, function in compiled_updates._LIBRARY_FUNCTIONS.functions.items()}
    monkeypatch.setattr(compiled_updates._LIBRARY_FUNCTIONS, "functions", functions)
    return calls


@needs_the_library
def test_updates_of_at_least_stream_min_elements_stream_their_results(monkeypatch):
    calls = _counted_library_calls(monkeypatch)
    shapes = LAYOUTS["tensor by tensor"]
    elements = sum(math.prod(shape) for shape in shapes)
    for bound in (elements, elements + 1):
        monkeypatch.setattr(compiled_updates, "STREAM_MIN_ELEMENTS", bound)
        update_chain("momentum", steps=1, shapes=shapes)
    assert [bool(options & compiled_updates._STREAM_OPTION) for options in calls] == [True, False]


@needs_the_library
def test_the_kernels_run_the_compiled_loops_with_or_without_the_fast_path_unless_switched_off(monkeypatch):
    calls = _counted_library_calls(monkeypatch)
    functions = compiled_updates._LIBRARY_FUNCTIONS.functions
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["tensor by tensor"])
    assert len(calls) == 4  # one call per step, for every tensor
    calls.clear()
    with onnxnn.set_fast_path(False):  # the profiler's setting: it must time the loops that run
        update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    assert len(calls) == 2
    calls.clear()
    monkeypatch.setattr(compiled_updates, "ENABLED", False)  # ONNXNN_COMPILED_UPDATES=0
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    assert calls == []
    monkeypatch.undo()  # the default bound: a small update's passes cost less than the call
    monkeypatch.setattr(compiled_updates._LIBRARY_FUNCTIONS, "functions", functions)
    update_chain("adam-l2", steps=2, shapes=LAYOUTS["flat vector"])
    update_chain("adam-l2", steps=2, shapes=[(compiled_updates.COMPILED_MIN_ELEMENTS - 1,)])
    assert calls == []
    update_chain("adam-l2", steps=2, shapes=[(compiled_updates.COMPILED_MIN_ELEMENTS,)])
    assert len(calls) == 2


@pytest.mark.usefixtures("fast_path_on")  # the last update's record is the fast path's
@needs_the_library
def test_a_record_found_by_a_reused_id_keeps_no_update_from_its_loop(monkeypatch):
    # An update finds its node's last one by the id of the first parameter view it wrote. Once that
    # view is gone, CPython gives its id to new objects: here a numpy update's record, left by a
    # chain run without the loops, comes under the id of the next chain's first parameter, as it
    # did by chance in the suite. It is another update's and must not keep this one from its loop.
    calls = _counted_library_calls(monkeypatch)
    monkeypatch.setattr(update_driver, "_recent", {})  # none of the earlier tests' records
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    update_chain("adam-l2", steps=1, shapes=LAYOUTS["flat vector"])
    monkeypatch.setattr(compiled_updates, "ENABLED", True)
    (stale,) = [record for record in update_driver._recent.values() if record.addresses is None]
    kernel, attrs, _, inputs_of = CASES["adam-l2"]
    rng = np.random.default_rng(1)
    xs, gs, averages, squares = [
        [np.abs(rng.standard_normal(shape)).astype(np.float32) for shape in LAYOUTS["flat vector"]] for _ in range(4)
    ]
    update_driver._recent[id(xs[0])] = stale
    tensors = xs + gs + averages + squares
    results = kernel(np, inputs_of(1) + tensors, attrs)
    assert len(calls) == 1
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    expected = kernel(np, inputs_of(1) + tensors, attrs)
    for result, formula in zip(results, expected):
        _assert_same_bits(result, formula)


def test_float16_updates_stay_numpy_formulas_rounded_op_by_op():
    assert compiled_updates.loop("Adam", np.dtype(np.float16), 1 << 20) is None


@needs_the_library
@pytest.mark.parametrize("case", ["momentum", "adamw-amsgrad-maximize", "rmsprop-centered-momentum"])
def test_transposed_gradients_and_numpy_scalars_are_updated_as_c_ordered_arrays(case, monkeypatch):
    kernel, attrs, state_lists, inputs_of = CASES[case]
    rng = np.random.default_rng(0)
    shapes = [(6, 4), (5,), ()]
    xs = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    gs = [np.asfortranarray(rng.standard_normal(shape).astype(np.float32)) for shape in shapes]
    states = [[np.abs(rng.standard_normal(shape)).astype(np.float32) for shape in shapes] for _ in range(state_lists)]
    states[0][2] = np.float32(0.5)  # a numpy scalar, as 0-d arithmetic makes them
    inputs = [*inputs_of(2), *xs, *gs, *[state for column in states for state in column]]
    compiled = kernel(np, inputs, attrs)
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for result, expected in zip(compiled, kernel(np, inputs, attrs)):
        assert result.flags.c_contiguous
        _assert_same_bits(np.asarray(result), np.asarray(expected))


@needs_the_library
def test_tensors_of_mixed_dtypes_get_the_numpy_formulas(monkeypatch):
    calls = _counted_library_calls(monkeypatch)
    kernel, attrs, _, inputs_of = CASES["adam-l2"]
    x = np.ones((4, 6), np.float32)
    results = kernel(np, [*inputs_of(1), x, x, x.astype(np.float64), x, x, x, x, x], attrs)
    assert calls == [] and [result.dtype for result in results[:2]] == [np.float32, np.float32]


@needs_the_library
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

    compiled = train()
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for result, expected in zip(compiled, train()):
        _assert_same_bits(result, expected)


def test_without_the_library_the_numpy_formulas_run_and_say_why(monkeypatch):
    monkeypatch.setattr(compiled_updates, "_LIBRARY", "onnxnn.kernels._no_such_library")
    monkeypatch.setattr(compiled_updates, "_LIBRARY_FUNCTIONS", compiled_updates._Library())
    chain = update_chain("adam-l2", shapes=LAYOUTS["tensor by tensor"])
    assert not compiled_updates.available()
    assert "_no_such_library was not built" in compiled_updates.unavailable_reason()
    monkeypatch.setattr(compiled_updates, "ENABLED", False)
    for step, expected_step in zip(chain, update_chain("adam-l2", shapes=LAYOUTS["tensor by tensor"])):
        for result, expected in zip(step, expected_step):
            assert result.tobytes() == expected.tobytes()


@pytest.mark.parametrize("version", [None, 1], ids=["before versions", "an older version"])
def test_a_library_built_from_an_older_source_is_not_used_and_says_so(version, monkeypatch):
    class OlderLibrary:  # its loops take other arguments
        onnxnn_momentum_float32 = onnxnn_momentum_float64 = staticmethod(lambda *arguments: None)
        if version is not None:
            onnxnn_update_loops_version = staticmethod(lambda: version)

    monkeypatch.setattr(compiled_updates.ctypes, "CDLL", lambda path: OlderLibrary())
    monkeypatch.setattr(compiled_updates, "_LIBRARY", "onnxnn.kernels.compiled_updates")  # any module found
    monkeypatch.setattr(compiled_updates, "_LIBRARY_FUNCTIONS", compiled_updates._Library())
    assert not compiled_updates.available()
    assert "was built from an older update_loops.c (reinstall onnxnn)" in compiled_updates.unavailable_reason()


@needs_the_library
def test_arrays_of_other_sizes_than_their_tensor_never_reach_the_loop(monkeypatch):
    """The loop reads each tensor's count of elements from every array: an array of another size
    gets numpy's broadcasting error instead of a read past its end."""
    calls = _counted_library_calls(monkeypatch)
    kernel, attrs, _, inputs_of = CASES["adam-l2"]
    x = np.ones(100, np.float32)
    with pytest.raises(ValueError, match="broadcast"):
        kernel(np, [*inputs_of(1), x, np.ones(50, np.float32), x, x], attrs)
    assert calls == []


@needs_the_library
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_forked_child_shares_its_updates_among_threads_of_its_own(monkeypatch):
    # The parent's pool has threads; a forked child has none of them and must start its own.
    monkeypatch.setattr(compiled_updates, "THREADED_MIN_ELEMENTS", 0)
    monkeypatch.setattr(compiled_updates, "SHARE_MIN_ELEMENTS", 1)
    monkeypatch.setattr(MODE, "intra_op_threads", 2)
    shared = counted_shared_runs(monkeypatch)
    update_chain("momentum", steps=1, shapes=LAYOUTS["tensor by tensor"])
    assert shared == [2]
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the child: one shared update, then its verdict through the pipe
        try:
            update_chain("momentum", steps=1, shapes=LAYOUTS["tensor by tensor"])
            os.write(write_end, b"ok")
        finally:
            os._exit(0)
    os.close(write_end)
    finished, _, _ = select.select([read_end], [], [], 60)  # a child waiting on missing threads never ends
    verdict = os.read(read_end, 2) if finished else b""
    if not verdict:
        os.kill(child, signal.SIGKILL)
    _, status = os.waitpid(child, 0)
    assert verdict == b"ok" and status == 0


@needs_the_library
@pytest.mark.parametrize(
    "elements, threads, shares",
    [(1 << 19, 64, 2), (3 << 19, 64, 6), (3 << 19, 2, 2), ((1 << 19) - 16, 64, 1), (1 << 19, 1, 1)],
)
def test_each_thread_gets_at_least_a_quarter_million_elements(elements, threads, shares, monkeypatch):
    # On many cores a half-million-element update is not cut into slivers costing more to hand out than to run.
    monkeypatch.setattr(MODE, "intra_op_threads", threads)
    asked: list = []
    original = compiled_updates._shares
    monkeypatch.setattr(
        compiled_updates, "_shares", lambda *arguments: asked.append(arguments[-1]) or original(*arguments)
    )
    x, g, velocity = (np.full(elements, value, np.float32) for value in (1.0, 2.0, 3.0))
    new_x, new_velocity = np.empty_like(x), np.empty_like(x)
    addresses = [compiled_updates.address(array) for array in (x, g, velocity, new_x, new_velocity)]
    run = compiled_updates.loop("Momentum", np.dtype(np.float32), elements)
    run([elements], addresses, (0.5, 0.9, None, None), (velocity,), False, False)
    assert (asked[0] if asked else 1) == shares
    np.testing.assert_array_equal(new_velocity, np.float32(0.9) * velocity + g)  # every element updated


@needs_the_library
def test_updates_with_the_fast_path_off_reuse_the_buffers_the_last_fast_path_update_wrote():
    # The last fast-path update's record holds its flat vectors (the parameters it wrote). With the
    # fast path off (the profiler's setting) it must be let go too: held, every later update would
    # write fresh, page-faulting buffers (resnet18's profiled update took 49 ms instead of 7).
    shape = (301, 263)  # a flat size no other test updates, and its pool emptied: counted from zero
    recycled_buffers._pools.pop(((math.prod(shape),), np.dtype(np.float32)), None)
    param = onnxnn.nn.Parameter(onnxnn.zeros(*shape))
    optimizer = onnxnn.optim.SGD([param], lr=0.1, momentum=0.9)

    def step() -> None:
        param.grad = onnxnn.ones(*shape)
        optimizer.step()
        param.detach().numpy()

    for _ in range(3):
        step()
    pool = recycled_buffers._pools[((math.prod(shape),), np.dtype(np.float32))]
    in_use = len(pool.buffers)  # the parameter and its velocity, and the step before's pair
    with onnxnn.set_fast_path(False):
        for _ in range(4):
            step()
    assert len(pool.buffers) == in_use
    # And the updates went on from where the fast path left them: seven steps of a gradient of ones.
    velocity = position = 0.0
    for _ in range(7):
        velocity = 0.9 * velocity + 1.0
        position -= 0.1 * velocity
    np.testing.assert_allclose(param.detach().numpy(), np.full(shape, position), rtol=1e-6)
