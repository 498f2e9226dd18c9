"""Which of a plan's inputs nothing but the plan can read any more (onnxnn/ir/donation.py).

The specification: an input's array is dead, and may be donated to the plan's kernels, only when
nothing outside the plan holds its value (a Tensor, a pending node that reads it) and nothing
but its value holds the array (a ``.numpy()`` result, another tensor made over it). Inside a
``donating`` block its thread's kernels see the arrays it names, and outside it none.
"""

from __future__ import annotations

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
