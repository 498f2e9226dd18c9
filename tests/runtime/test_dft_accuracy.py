"""DFT nodes give numpy's transforms on every executor: onnxnn's sessions run them as compiled nodes
(kernels/spectral.py), because onnxruntime's CPU DFT is eps * n accurate at lengths that are not
powers of two, scales float64 inverses by a float32 1/n, and misreads inverse one-sided spectra whose
length is not 2 (bins - 1) or one more. Expectations come from numpy's float64 transforms."""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.ops._common import int64_constant
from onnxnn.runtime.tensor import apply_op

EXECUTORS = ["onnxruntime", "kernels", "auto"]


def dft(signal: np.ndarray, length: int | None = None, axis: int = 1, **attrs) -> np.ndarray:
    x = onnxnn.tensor(signal)
    dft_length = None if length is None else int64_constant(length)
    return apply_op("DFT", (x, dft_length, int64_constant(axis)), attrs).numpy()


def complex_layout(spectrum: np.ndarray) -> np.ndarray:
    return np.stack([spectrum.real, spectrum.imag], axis=-1)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", [97, 1000, 4097])
@pytest.mark.parametrize("inverse", [0, 1])
def test_float32_transforms_of_any_length_are_accurate(n, inverse, executor):
    signal = np.random.default_rng(n).standard_normal((3, n, 2)).astype(np.float32)
    exact = (np.fft.ifft if inverse else np.fft.fft)(signal[..., 0].astype(np.float64) + 1j * signal[..., 1], axis=1)
    expected = complex_layout(exact)
    with onnxnn.set_executor(executor):
        for _ in range(2):  # 'auto' runs a graph's first call on the kernels, its later ones in a session
            actual = dft(signal, inverse=inverse)
            # A fast transform's error grows like eps * log2(n) relative to the values' size.
            bound = 8 * np.finfo(np.float32).eps * math.log2(n) * np.sqrt(np.mean(expected**2))
            assert np.max(np.abs(actual - expected)) <= bound


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("length", [4, 5, 7, 8, 9, 10, 20])
def test_inverse_onesided_reads_the_first_length_over_two_plus_one_bins(length, executor):
    spectrum = np.random.default_rng(length).standard_normal((4, 5, 2))
    expected = np.fft.irfft(spectrum[..., 0] + 1j * spectrum[..., 1], n=length, axis=1)[..., None]
    with onnxnn.set_executor(executor):
        for _ in range(2):
            actual = dft(spectrum, length, inverse=1, onesided=1)
            np.testing.assert_allclose(actual, expected, rtol=0, atol=16 * np.finfo(np.float64).eps)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n", [5, 7, 1000])
def test_float64_inverse_is_float64_accurate(n, executor):
    signal = np.random.default_rng(n).standard_normal((2, n, 2))
    expected = complex_layout(np.fft.ifft(signal[..., 0] + 1j * signal[..., 1], axis=1))
    with onnxnn.set_executor(executor):
        for _ in range(2):
            actual = dft(signal, inverse=1)
            bound = 8 * np.finfo(np.float64).eps * math.log2(n) * np.sqrt(np.mean(expected**2))
            assert np.max(np.abs(actual - expected)) <= bound
