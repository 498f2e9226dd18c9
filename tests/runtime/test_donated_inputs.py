"""Which of a plan's inputs nothing but the plan can read any more (onnxnn/ir/donation.py).

The specification: an input's array is dead, and may be donated to the plan's kernels, only when
nothing outside the plan holds its value (a Tensor, a pending node that reads it) and nothing
but its value holds the array (a ``.numpy()`` result, another tensor made over it), and only in a
plan of one node. Inside a ``donating`` block its thread's kernels see the arrays it names, and
outside it none; on the main thread, Ctrl-C (SIGINT) during a block that donates is delivered
when the block ends.
"""

from __future__ import annotations

import signal
import threading

import pytest

import onnxnn
from onnxnn.ir.donation import dead_input_arrays, donated, donating
from onnxnn.ir.plan import plan
from onnxnn.runtime.internal import value_of

# What the program keeps of a realized input ``x`` while a plan reading it is made: (keep, dead).
HOLDERS = {
    "nothing": (lambda x: None, True),
    "the tensor": (lambda x: x, False),
    "its array": (lambda x: x.numpy(), False),
    "a pending result of it": (lambda x: x + 1, False),
    "a tensor made over its array": (lambda x: onnxnn.from_numpy(x.numpy()), False),
}


@pytest.mark.parametrize("holder", list(HOLDERS))
def test_an_input_is_dead_only_when_nothing_outside_the_plan_can_read_it(holder):
    keep, dead = HOLDERS[holder]
    x = onnxnn.randn(64)
    x.numpy()  # realized
    kept = keep(x)
    array = id(value_of(x).data)
    y = x * 2
    del x
    found = dead_input_arrays(plan([value_of(y)]))
    assert (array in found) is dead
    del kept


def test_a_plan_of_more_than_one_node_donates_nothing():
    x = onnxnn.randn(64)
    x.numpy()
    y = x * 2 + 1
    del x
    assert dead_input_arrays(plan([value_of(y)])) == frozenset()


@pytest.fixture
def interrupts_raise():
    """SIGINT raising KeyboardInterrupt, as in a plain Python program (a test worker may ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("interrupts_raise")
def test_a_keyboard_interrupt_during_a_block_that_donates_comes_when_it_ends():
    reached_the_end = False
    with pytest.raises(KeyboardInterrupt):
        with donating(frozenset({1})):
            signal.raise_signal(signal.SIGINT)
            reached_the_end = True
    assert reached_the_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.usefixtures("interrupts_raise")
def test_a_block_that_donates_nothing_leaves_keyboard_interrupts_alone():
    with pytest.raises(KeyboardInterrupt):
        with donating(frozenset()):
            signal.raise_signal(signal.SIGINT)
            pytest.fail("the interrupt waited")


def test_donated_arrays_are_those_of_the_innermost_block_of_this_thread():
    seen_elsewhere = []
    assert donated() == frozenset()
    with donating(frozenset({1, 2})):
        with donating(frozenset({3})):
            assert donated() == frozenset({3})
            thread = threading.Thread(target=lambda: seen_elsewhere.append(donated()))
            thread.start()
            thread.join()
        assert donated() == frozenset({1, 2})
    assert donated() == frozenset()
    assert seen_elsewhere == [frozenset()]
