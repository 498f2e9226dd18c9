"""``onnxnn.random``: the top level's seed and state functions, and ``fork_rng`` restoring the
generator (its state and its initial seed) on leaving the block, also on an exception."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn


def draw() -> np.ndarray:
    return onnxnn.rand(4).numpy()


def test_the_module_is_an_attribute_and_reuses_the_top_level_functions():
    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"):
        assert getattr(onnxnn.random, name) is getattr(onnxnn, name)
    assert onnxnn.random.default_generator is onnxnn.default_generator


def test_state_round_trip():
    onnxnn.manual_seed(11)
    state = onnxnn.random.get_rng_state()
    first = draw()
    onnxnn.random.set_rng_state(state)
    np.testing.assert_array_equal(draw(), first)


@pytest.mark.parametrize("kwargs", [{}, {"devices": []}, {"devices": [0]}, {"device_type": "cuda"}])
def test_fork_rng_leaves_the_generator_as_it_was(kwargs):
    onnxnn.manual_seed(5)
    expected = draw()
    onnxnn.manual_seed(5)
    with onnxnn.random.fork_rng(**kwargs):
        draw()
        onnxnn.manual_seed(99)
        draw()
    np.testing.assert_array_equal(draw(), expected)
    assert onnxnn.initial_seed() == 5


def test_fork_rng_restores_after_an_exception():
    onnxnn.manual_seed(6)
    expected = draw()
    onnxnn.manual_seed(6)
    with pytest.raises(KeyError), onnxnn.random.fork_rng():
        draw()
        raise KeyError("inside")
    np.testing.assert_array_equal(draw(), expected)


@pytest.mark.parametrize("kwargs", [{"enabled": False}, {"device_type": "meta"}])
def test_fork_rng_disabled_forks_nothing(kwargs):
    onnxnn.manual_seed(7)
    draw()
    expected = draw()  # the second draw after seeding
    onnxnn.manual_seed(7)
    with onnxnn.random.fork_rng(**kwargs):
        draw()
    np.testing.assert_array_equal(draw(), expected)


def test_fork_rng_refuses_devices_that_are_not_iterable():
    with pytest.raises(TypeError), onnxnn.random.fork_rng(devices=3):
        pass
