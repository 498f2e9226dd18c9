"""Parameter initialization: ``onnxnn.nn.init`` (PyTorch's ``torch.nn.init``).

Every function fills its tensor under ``no_grad`` by rebinding it to new values drawn from onnxnn's
generator (seeded by ``manual_seed``), and returns the tensor. Inside
:func:`onnxnn.nn.utils.skip_init` the filling functions do nothing, which is how a module is built
without running its default initialization.

Example::

    >>> w = onnxnn.empty(3, 5)
    >>> nn.init.kaiming_uniform_(w, a=math.sqrt(5))
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Callable, ParamSpec, TypeVar

import ml_dtypes
import numpy as np

from ..ir import dtypes
from ..ir import random as _random
from ..runtime.grad_mode import no_grad
from ..runtime.internal import constant_tensor
from ..runtime.ops._common import check_floating as _check_floating
from ..runtime.tensor import Tensor

__all__ = [
    "calculate_gain",
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
    # deprecated aliases, as PyTorch keeps them
    "uniform",
    "normal",
    "constant",
    "eye",
    "dirac",
    "xavier_uniform",
    "xavier_normal",
    "kaiming_uniform",
    "kaiming_normal",
    "orthogonal",
    "sparse",
]

# How many skip_init constructions are under way: while positive, filling is a no-op.
_skip_depth = 0


@contextlib.contextmanager
def _skipping_initialization():
    """Makes every filling function of this module a no-op inside the block (used by ``skip_init``)."""
    global _skip_depth
    _skip_depth += 1
    try:
        yield
    finally:
        _skip_depth -= 1


def _fill(tensor: Tensor, array: np.ndarray) -> Tensor:
    """Rebinds ``tensor`` to ``array`` (converted to its dtype and device), outside autograd."""
    data = np.asarray(np.asarray(array).reshape(tuple(tensor.shape)), dtype=tensor.dtype.numpy_dtype)
    with no_grad():
        tensor.copy_(constant_tensor(data, tensor.dtype, tensor.device))
    return tensor


# PyTorch's C++ names of the dtypes, which its range errors quote.
_CPP_TYPE_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "int64": "int64_t",
    "int32": "int",
    "int16": "int16_t",
    "int8": "int8_t",
    "uint8": "uint8_t",
}


def _check_uniform_bounds(tensor: Tensor, low: float, high: float) -> None:
    """PyTorch's ``check_uniform_bounds``: finite bounds within the dtype, ``low <= high``, and a range
    ``high - low`` the dtype can hold (else the samples would be inf or NaN)."""
    _check_floating(tensor, "check_uniform_bounds")
    largest = float(ml_dtypes.finfo(tensor.dtype.numpy_dtype).max)  # numpy's finfo has no bfloat16
    name = _CPP_TYPE_NAMES.get(tensor.dtype.name, tensor.dtype.name)
    for label, bound in (("from", low), ("to", high)):
        if not -largest <= bound <= largest:  # also NaN
            raise RuntimeError(f"{label} is out of bounds for {name}")
    if low > high:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={low:g} > to={high:g}")
    if high - low > largest:
        raise RuntimeError(
            f"uniform_ expects to-from <= std::numeric_limits<{dtypes.scalar_type_name(tensor.dtype)}>::max(), "
            f"but found to={high:g} and from={low:g} which result in to-from to exceed the limit"
        )


def _check_normal(tensor: Tensor, std: float) -> None:
    _check_floating(tensor, "normal_kernel_cpu")
    if not std >= 0.0:  # also NaN
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")


def _sample_uniform(tensor: Tensor, low: float, high: float, generator) -> Tensor:
    if _skip_depth:
        return tensor
    _check_uniform_bounds(tensor, low, high)
    # Drawn in the tensor's dtype: float32 outright (a large weight spared two copies), float64 with
    # all its digits, half types on their own grid (never ``high``).
    return _fill(tensor, _random.uniform(tuple(tensor.shape), tensor.dtype.numpy_dtype, low, high, generator))


def _sample_normal(tensor: Tensor, mean: float, std: float, generator) -> Tensor:
    if _skip_depth:
        return tensor
    _check_normal(tensor, std)
    return _fill(tensor, _random.normal(tuple(tensor.shape), tensor.dtype.numpy_dtype, mean, std, generator))


# ---------------------------------------------------------------- gains and fans


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity, as PyTorch's table gives it.

    ===================  ====================================================
    nonlinearity         gain
    ===================  ====================================================
    Linear / Identity    1
    Conv{1,2,3}D         1
    Sigmoid              1
    Tanh                 5/3
    ReLU                 sqrt(2)
    Leaky Relu           sqrt(2 / (1 + negative_slope^2))
    SELU                 3/4
    ===================  ====================================================

    Args:
        nonlinearity: the function's name (``"relu"``, ``"leaky_relu"``, ...).
        param: the negative slope of ``"leaky_relu"`` (default 0.01).
    """
    linear_functions = [
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ]
    if nonlinearity in linear_functions or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        # The value that keeps the variance of SELU networks stable in practice (see PyTorch's docs).
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)``: dim 1 and dim 0 times the receptive field (the product of dims 2+)."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive_field_size = 1
    for size in tensor.shape[2:]:
        receptive_field_size *= size
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


# ---------------------------------------------------------------- simple fills


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fills ``tensor`` with samples of U(a, b)."""
    return _sample_uniform(tensor, a, b, generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fills ``tensor`` with samples of N(mean, std^2)."""
    return _sample_normal(tensor, mean, std, generator)


# Above this probability mass of [a, b], trunc_normal_ redraws normal samples that fall outside;
# below it, uniform candidates on [a, b] accepted by the density (PyTorch 2.13's split).
_TRUNC_NORMAL_DIRECT_MASS = 0.3


def trunc_normal_(
    tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0, generator=None
) -> Tensor:
    """Fills ``tensor`` with samples of N(mean, std^2) truncated to ``[a, b]``.

    By rejection, as PyTorch 2.13: when [a, b] holds more than 0.3 of the normal's mass, normal
    samples outside it are redrawn; otherwise uniform candidates on [a, b] are kept with probability
    ``pdf(x) / pdf(mode)``, the mode being the point of [a, b] nearest the mean. Either way the
    samples follow the truncated normal exactly, however far [a, b] lies in the tail (an inverse-CDF
    method loses it there: both CDF values round to 1).
    """
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values "
            "may be incorrect.",
            stacklevel=2,
        )
    if _skip_depth:
        return tensor

    def normal_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    mass = normal_cdf((b - mean) / std) - normal_cdf((a - mean) / std)
    shape, count = tuple(tensor.shape), tensor.numel()
    if mass > _TRUNC_NORMAL_DIRECT_MASS:
        _check_floating(tensor, "normal_kernel_cpu")
        # The bounds as the tensor holds them, so that rounding a kept sample cannot leave [a, b].
        low, high = (float(np.asarray(bound, dtype=tensor.dtype.numpy_dtype)) for bound in (a, b))
        values = _random.normal((count,), np.float64, mean, std, generator)
        pending = np.flatnonzero((values < low) | (values > high))
        while pending.size:
            values[pending] = _random.normal((pending.size,), np.float64, mean, std, generator)
            pending = pending[(values[pending] < low) | (values[pending] > high)]
    else:
        _check_uniform_bounds(tensor, a, b)
        mode = max(a, min(mean, b))
        log_peak = -0.5 * ((mode - mean) / std) ** 2
        values = np.empty(count)
        pending = np.arange(count)
        while pending.size:
            candidates = _random.uniform((pending.size,), np.float64, a, b, generator)
            log_density = -0.5 * ((candidates - mean) / std) ** 2 - log_peak
            accepted = np.log(_random.uniform((pending.size,), np.float64, generator=generator)) <= log_density
            values[pending[accepted]] = candidates[accepted]
            pending = pending[~accepted]
    return _fill(tensor, values.reshape(shape))


def _check_representable(tensor: Tensor, value) -> None:
    """PyTorch's overflow check of a fill value: a finite value beyond the dtype's largest magnitude,
    or NaN, inf or an out-of-range value for an integer dtype, raises (uint8 wraps negative values
    down to -255, as C++'s conversion does; bool takes anything)."""
    target = tensor.dtype
    if target == dtypes.bool or isinstance(value, complex):
        return
    name = _CPP_TYPE_NAMES.get(target.name, target.name)
    if target.is_floating_point:
        overflows = math.isfinite(value) and abs(value) > float(ml_dtypes.finfo(target.numpy_dtype).max)
    else:
        limits = np.iinfo(target.numpy_dtype)
        # Compared as the value's own type: a float against the float nearest each limit, as C++ does.
        kind = float if isinstance(value, float) else int
        lowest = -kind(limits.max) if target == dtypes.uint8 else kind(limits.min)
        overflows = not math.isfinite(value) or not lowest <= value <= kind(limits.max)
    if overflows:
        raise RuntimeError(f"value cannot be converted to type {name} without overflow")


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fills ``tensor`` with ``val``; a value the dtype cannot hold raises RuntimeError, as PyTorch's."""
    if _skip_depth:
        return tensor
    if isinstance(val, Tensor):
        val = val.item()
    if not isinstance(val, (bool, int, float, complex, np.number)):  # None would fill NaN, 'a' fail in numpy
        raise TypeError(
            f"fill_() received an invalid combination of arguments - got ({type(val).__name__}), but expected "
            "one of:\n * (Tensor value)\n * (Number value)"
        )
    if isinstance(val, (bool, int, float, np.number)):
        _check_representable(tensor, val.item() if isinstance(val, np.number) else val)
    return _fill(tensor, np.full(tuple(tensor.shape), val))


def ones_(tensor: Tensor) -> Tensor:
    """Fills ``tensor`` with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fills ``tensor`` with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fills a 2-D ``tensor`` with the identity matrix (ones on the main diagonal)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if _skip_depth:
        return tensor
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fills a 3-, 4- or 5-D convolution weight with the Dirac delta, preserving the input channels.

    Args:
        groups: the output channels split into this many groups, each an identity on its inputs.
    """
    dimensions = tensor.dim()
    if dimensions not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    if _skip_depth:
        return tensor
    out_channels_per_group = sizes[0] // groups
    min_dim = min(out_channels_per_group, sizes[1])
    values = np.zeros(sizes)
    centre = tuple(size // 2 for size in sizes[2:])
    for group in range(groups):
        for channel in range(min_dim):
            values[(group * out_channels_per_group + channel, channel) + centre] = 1
    return _fill(tensor, values)


# ---------------------------------------------------------------- scaled random fills


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return _sample_uniform(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _sample_normal(tensor, 0.0, std, generator)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan_mode)``.

    Args:
        a: the negative slope of the rectifier after this layer (``"leaky_relu"`` only).
        mode: ``"fan_in"`` keeps the forward variance, ``"fan_out"`` the backward one.
        nonlinearity: the name given to :func:`calculate_gain`.
    """
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan)
    return _sample_uniform(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu", generator=None
) -> Tensor:
    """He normal: N(0, std^2) with ``std = gain / sqrt(fan_mode)``."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return _sample_normal(tensor, 0.0, gain / math.sqrt(fan), generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """Fills ``tensor`` with a (semi-)orthogonal matrix, dims 1+ flattened into columns.

    The QR decomposition of a normal sample, with the signs fixed so that R's diagonal is positive
    (which makes the result uniformly distributed), as in PyTorch.
    """
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or _skip_depth:
        return tensor
    _check_floating(tensor, "normal_kernel_cpu")
    rows = tensor.shape[0]
    columns = tensor.numel() // rows
    flattened = _random.normal((rows, columns), np.float64, generator=generator)
    if rows < columns:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.sign(np.diag(r))
    if rows < columns:
        q = q.T
    return _fill(tensor, q * gain)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fills a 2-D ``tensor`` with N(0, std^2) samples, then zeroes ``ceil(sparsity * rows)`` per column."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    if _skip_depth:
        return tensor
    _check_normal(tensor, std)
    rows, columns = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    values = _random.normal((rows, columns), np.float64, 0.0, std, generator)
    for column in range(columns):
        zero_rows = _random.permutation(rows, generator)[:num_zeros]
        values[zero_rows, column] = 0
    return _fill(tensor, values)


# ---------------------------------------------------------------- deprecated aliases

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _make_deprecate(meth: Callable[_P, _R]) -> Callable[_P, _R]:
    """The name without the trailing underscore, kept by PyTorch for old code: warns, then fills."""
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        warnings.warn(
            f"`nn.init.{old_name}` is now deprecated in favor of `nn.init.{new_name}`.",
            FutureWarning,
            stacklevel=2,
        )
        return meth(*args, **kwargs)

    deprecated_init.__doc__ = f"""Deprecated alias of :func:`{new_name}`: emits a ``FutureWarning``, then calls it.

    See :func:`{new_name}` for the arguments."""
    deprecated_init.__name__ = old_name
    deprecated_init.__qualname__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)
