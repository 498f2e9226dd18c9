"""Window functions of PyTorch's top level (hann_window, hamming_window, ...): constants computed in
float64 with numpy and rounded once to the requested dtype.

``periodic=True`` (PyTorch's default) gives the first ``window_length`` points of a symmetric
window of ``window_length + 1`` points, the form spectral analysis wants.
"""

from __future__ import annotations

import numpy as np

from .creation import _float_dtype, _make

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]


def _window(function: str, values_of, window_length: int, periodic: bool, dtype, device, requires_grad: bool):
    if window_length < 0:
        raise RuntimeError(f"window_length must be non-negative, got {window_length}")
    target = _float_dtype(dtype, function)
    if not target.is_floating_point:
        raise RuntimeError(f"{function} expects floating point dtypes, got: {target}")
    if window_length <= 1:
        values = np.ones(window_length, dtype=np.float64)
    else:
        points = window_length + 1 if periodic else window_length
        values = values_of(np.arange(points, dtype=np.float64), points)[:window_length]
    return _make(values.astype(target.numpy_dtype), target, device, requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False):
    """``0.5 - 0.5 cos(2 pi n / (N - 1))``."""
    return _window(
        "hann_window",
        lambda n, size: 0.5 - 0.5 * np.cos(2 * np.pi * n / (size - 1)),
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
    )


def hamming_window(
    window_length: int,
    periodic: bool = True,
    alpha: float = 0.54,
    beta: float = 0.46,
    *,
    dtype=None,
    device=None,
    requires_grad: bool = False,
):
    """``alpha - beta cos(2 pi n / (N - 1))``."""
    return _window(
        "hamming_window",
        lambda n, size: alpha - beta * np.cos(2 * np.pi * n / (size - 1)),
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
    )


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False):
    """``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    return _window(
        "blackman_window",
        lambda n, size: 0.42 - 0.5 * np.cos(2 * np.pi * n / (size - 1)) + 0.08 * np.cos(4 * np.pi * n / (size - 1)),
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
    )


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, device=None, requires_grad: bool = False):
    """``1 - |2 n / (N - 1) - 1|``."""
    return _window(
        "bartlett_window",
        lambda n, size: 1 - np.abs(2 * n / (size - 1) - 1),
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
    )


def kaiser_window(
    window_length: int,
    periodic: bool = True,
    beta: float = 12.0,
    *,
    dtype=None,
    device=None,
    requires_grad: bool = False,
):
    """``I0(beta sqrt(1 - (2 n / (N - 1) - 1)^2)) / I0(beta)``."""
    return _window(
        "kaiser_window",
        lambda n, size: np.i0(beta * np.sqrt(np.clip(1 - (2 * n / (size - 1) - 1) ** 2, 0, None))) / np.i0(beta),
        window_length,
        periodic,
        dtype,
        device,
        requires_grad,
    )
