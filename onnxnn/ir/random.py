"""onnxnn's own random number generator: seeded by ``manual_seed``, values enter graphs as data.

Random values are drawn here (numpy's PCG64) rather than by ONNX's RandomNormal ops, so a seed
gives the same numbers on every executor and every device.
"""

from __future__ import annotations

from typing import Any, cast

import ml_dtypes
import numpy as np

from .mode import trace_data_read

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"]


class Generator:
    """A random number generator, as ``torch.Generator``: ``manual_seed``, ``seed``, state get/set."""

    def __init__(self, device="cpu"):
        self.device = device
        self._seed = 67280421310721
        self._numpy = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._numpy = np.random.Generator(np.random.PCG64(self._seed & (2**128 - 1)))
        return self

    def seed(self) -> int:
        # A fresh SeedSequence draws its entropy from the OS: always an int, never None or a sequence.
        new_seed = int(cast(int, np.random.SeedSequence().entropy)) & (2**63 - 1)
        self.manual_seed(new_seed)
        return new_seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        return self._numpy.bit_generator.state

    def set_state(self, state: dict) -> "Generator":
        self._numpy.bit_generator.state = state
        return self

    @property
    def numpy(self) -> np.random.Generator:
        return self._numpy


default_generator = Generator()


def _generator(generator: Generator | None) -> np.random.Generator:
    # A draw is data computed now: a traced stretch of recording that drew values would replay them.
    trace_data_read()
    return (generator or default_generator).numpy


def manual_seed(seed: int) -> Generator:
    """Seeds the default generator, so random tensors, initializers and dropout masks repeat."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> dict:
    return default_generator.get_state()


def set_rng_state(state: dict) -> None:
    default_generator.set_state(state)


# numpy samples float32 and float64 directly; other float dtypes are sampled as float32 and cast.
# Any: numpy's overloads of standard_normal and random take float32 or float64, not their union.
_SAMPLED_AS: dict[np.dtype, Any] = {np.dtype(np.float64): np.float64, np.dtype(np.float32): np.float32}
# The draws of uniform() for float dtypes narrower than float32: 2**(the dtype's significand bits).
_UNIFORM_STEPS: dict[np.dtype, float] = {np.dtype(np.float16): 2.0**11, np.dtype(ml_dtypes.bfloat16): 2.0**8}


def _sampled_as(numpy_dtype):
    """The dtype numpy draws ``numpy_dtype``'s samples in (a dtype or a scalar type such as np.float64)."""
    return _SAMPLED_AS.get(np.dtype(numpy_dtype), np.float32)


def normal(shape: tuple, numpy_dtype, mean=0.0, std=1.0, generator: Generator | None = None) -> np.ndarray:
    values = _generator(generator).standard_normal(shape, dtype=_sampled_as(numpy_dtype))
    # In place: a large weight's temporaries (400 MB for VGG's first Linear) cost more than the sampling.
    if std != 1.0:
        values *= std
    if mean != 0.0:
        values += mean
    if values.dtype == numpy_dtype:
        return values  # standard_normal's arrays are already C-contiguous
    return np.asarray(values, dtype=numpy_dtype, order="C")


def uniform(shape: tuple, numpy_dtype, low=0.0, high=1.0, generator: Generator | None = None) -> np.ndarray:
    values = _generator(generator).random(shape, dtype=_sampled_as(numpy_dtype))
    steps = _UNIFORM_STEPS.get(np.dtype(numpy_dtype))
    if steps is not None:
        # As PyTorch's: a reduced float's draw is one of the 2**digits multiples of 2**-digits below
        # 1, which the dtype holds exactly. Rounding numpy's float32 draw would give 1.0 (bfloat16's
        # rand 1.0 in 1 of 512 draws; an index made from it lands past the end).
        values *= steps
        np.floor(values, out=values)
        values /= steps
    if low != 0.0 or high != 1.0:
        values *= high - low
        values += low
    result = np.asarray(values, dtype=numpy_dtype, order="C")
    if steps is not None and high > low:
        # A draw just below 1, scaled and rounded to the narrow dtype, can land on ``high``: the
        # range is [low, high), as PyTorch's.
        below = np.nextafter(np.asarray(high, dtype=numpy_dtype), np.asarray(low, dtype=numpy_dtype))
        result[result >= np.asarray(high, dtype=numpy_dtype)] = below
    return result


def integers(low: int, high: int, shape: tuple, numpy_dtype, generator: Generator | None = None) -> np.ndarray:
    return _generator(generator).integers(low, high, shape, dtype=np.int64).astype(numpy_dtype)


def permutation(n: int, generator: Generator | None = None) -> np.ndarray:
    return _generator(generator).permutation(n).astype(np.int64)


def bernoulli(shape: tuple, probability: float, generator: Generator | None = None) -> np.ndarray:
    return _generator(generator).random(shape, dtype=np.float32) < probability
