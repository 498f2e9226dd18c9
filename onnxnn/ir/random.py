"""onnxnn's own random number generator: seeded by ``manual_seed``, values enter graphs as data.

Random values are drawn here (numpy's PCG64) rather than by ONNX's RandomNormal ops, so a seed
gives the same numbers on every executor and every device.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, cast

import ml_dtypes
import numpy as np

from .mode import MODE, trace_data_read

__all__ = [
    "Generator",
    "DrawWatcher",
    "check_standard_deviation",
    "default_generator",
    "manual_seed",
    "seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
]


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


class DrawWatcher:
    """A ``RecordingTrace`` told of each random draw made while it records (``random_drawn``): an export's
    trace, which holds the drawn values as constants, so the file would repeat them on every run."""

    __slots__ = ()

    def random_drawn(self) -> None:
        raise NotImplementedError


def _generator(generator: Generator | None) -> np.random.Generator:
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"argument 'generator' must be torch.Generator, not {type(generator).__name__}")
    # A draw is data computed now: a traced stretch of recording that drew values would replay them.
    trace_data_read()
    trace = MODE.trace
    if isinstance(trace, DrawWatcher):
        trace.random_drawn()
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


def check_standard_deviation(std: float) -> None:
    """PyTorch's check of a number ``std`` given to ``normal``/``normal_`` (NaN fails it too)."""
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


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


# C++'s names of the element types, as PyTorch's range errors and warnings print them.
_CPP_TYPE_NAMES: dict[np.dtype, str] = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int8): "signed char",
    np.dtype(np.int16): "short int",
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long int",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.uint64): "unsigned long",
    np.dtype(np.float16): "c10::Half",
    np.dtype(ml_dtypes.bfloat16): "c10::BFloat16",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}


def _is_float(numpy_dtype: np.dtype) -> bool:
    return numpy_dtype.kind == "f" or numpy_dtype == ml_dtypes.bfloat16


def _through_dtype(value: int, numpy_dtype: np.dtype) -> int | None:
    """``static_cast<int64_t>(static_cast<scalar_t>(value))``: ``value`` rounded to the float dtype (through
    float for the narrow ones, as c10::Half and c10::BFloat16 are built), None where that overflows."""
    wide = np.float64 if numpy_dtype == np.float64 else np.float32
    with np.errstate(over="ignore"):
        cast = np.asarray(wide(value)).astype(numpy_dtype)
    return int(cast) if np.isfinite(cast) else None


def _updated_bounds(low: int, high: int, numpy_dtype: np.dtype, digits: int) -> tuple[int, int]:
    """PyTorch's ``update_from``/``update_to``: a float dtype rounds the drawn integer to nearest, so where
    ``high - 1`` would round up to ``high`` (above ``2**digits``) the range ends lower, and where
    ``low + 1`` would round below ``low`` it starts higher; the range stays ``[low, high)`` after rounding."""
    low_plus_one = _through_dtype(low + 1, numpy_dtype)
    if low_plus_one is not None and low_plus_one < low:
        low = low_plus_one + (1 << (abs(low + 1).bit_length() - 1 - digits + 1))
    high_minus_one = _through_dtype(high - 1, numpy_dtype)
    if high_minus_one is not None and high_minus_one >= high:
        high = high_minus_one - (1 << (abs(high - 1).bit_length() - 1 - digits + 1))
    return low, high


def _check_in_range(low: int, highest: int, numpy_dtype: np.dtype) -> None:
    """PyTorch's ``check_from_to_in_range``: both ends within the dtype, and a warning where a float dtype
    cannot hold every integer between them."""
    name = _CPP_TYPE_NAMES[numpy_dtype]
    if _is_float(numpy_dtype):
        information = ml_dtypes.finfo(numpy_dtype)
        smallest, largest = float(information.min), float(information.max)
    elif numpy_dtype == np.bool_:
        smallest, largest = 0, 1
    else:
        smallest, largest = int(np.iinfo(numpy_dtype).min), int(np.iinfo(numpy_dtype).max)
    for value, label in ((low, "from"), (highest, "to - 1")):
        if not smallest <= value <= largest:
            raise RuntimeError(f"{label} is out of bounds for {name}")
    if not _is_float(numpy_dtype):
        return
    digits = ml_dtypes.finfo(numpy_dtype).nmant + 1
    for value, label in ((low, "from"), (highest, "to - 1")):
        if not -(1 << digits) <= value <= 1 << digits:
            warnings.warn(
                f"{label} is out of bounds [-(2^{digits}), 2^{digits}]. Due to precision limitations {name} can "
                "support discrete uniform distribution only within this range. This warning will become an "
                "error in version 1.7 release, please fix the code in advance",
                UserWarning,
                stacklevel=4,
            )


def integers(low: int, high: int, shape: tuple, numpy_dtype, generator: Generator | None = None) -> np.ndarray:
    """Integers drawn uniformly from ``[low, high)`` in ``numpy_dtype``, as PyTorch's ``random_(from, to)``:
    the same errors, and for a float dtype the same bounds moved so that rounding never reaches ``high``."""
    numpy_dtype = np.dtype(numpy_dtype)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if _is_float(numpy_dtype):
        low, high = _updated_bounds(low, high, numpy_dtype, ml_dtypes.finfo(numpy_dtype).nmant + 1)
        if low >= high:
            raise RuntimeError(
                "random_ expects 'from' casted to dtype to be less than 'to' casted to dtype, but got "
                f"from={low} >= to={high}"
            )
    _check_in_range(low, high - 1, numpy_dtype)
    return _generator(generator).integers(low, high, shape, dtype=np.int64).astype(numpy_dtype)


def permutation(n: int, generator: Generator | None = None) -> np.ndarray:
    return _generator(generator).permutation(n).astype(np.int64)


def bernoulli(shape: tuple, probability: float, generator: Generator | None = None) -> np.ndarray:
    """True with ``probability`` per element: where a float32 uniform draw is below it.

    The uniform is ``k * 2**-24``, ``k`` the top 24 bits of a 32-bit draw (numpy's float32
    ``random``); ``k * 2**-24 < float32(p)`` exactly when the draw is below ``ceil(float32(p) * 2**24)
    * 2**8``, so the draws are compared as integers, two to each 64-bit output of the generator,
    without making the floats: half the time of a dropout mask's draw.
    """
    bits = _generator(generator).bit_generator
    count = math.prod(shape)
    # Drawn whatever p is: every call moves the stream by its count, as the float comparison did.
    draws = bits.random_raw((count + 1) // 2).view(np.uint32)[:count]
    if not probability > 0:  # NaN too, as the float comparison
        return np.zeros(shape, dtype=bool)
    threshold = math.ceil(float(np.float32(probability)) * 2**24) if probability < 1 else 2**24
    if threshold >= 2**24:  # every uniform is below it (p rounds to 1 in float32, or p >= 1)
        return np.ones(shape, dtype=bool)
    return (draws < np.uint32(threshold << 8)).reshape(shape)
