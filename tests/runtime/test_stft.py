"""stft / istft (onnxnn/runtime/ops/spectral.py): forward against numpy.fft on numpy's framing,
istft as stft's inverse and against torch, gradients against float64 finite differences, both
executors, export run by onnxruntime, and PyTorch's errors.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn.export import to_onnx
from tests.gradcheck import check_gradients

EXECUTORS = ("onnxruntime", "kernels")
RNG = np.random.default_rng(0)
NUMPY_PAD_MODES = {"reflect": "reflect", "constant": "constant", "replicate": "edge", "circular": "wrap"}


def numpy_stft(
    x,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=True,
    align_to_window=False,
):
    """The STFT by its definition: numpy pads and frames, numpy.fft transforms each windowed frame."""
    hop_length = hop_length or n_fft // 4
    win_length = win_length or n_fft
    window = np.ones(win_length) if window is None else window
    left = (n_fft - win_length) // 2
    full_window = np.zeros(n_fft)
    full_window[left : left + win_length] = window
    if center:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(n_fft // 2, n_fft // 2)], mode=NUMPY_PAD_MODES[pad_mode])
    if align_to_window:
        x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(left, n_fft - win_length - left)])
    count = 1 + (x.shape[-1] - n_fft) // hop_length
    frames = np.stack([x[..., t * hop_length : t * hop_length + n_fft] * full_window for t in range(count)], -2)
    spectrum = np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)
    if normalized:
        spectrum = spectrum / np.sqrt(n_fft)
    return np.stack([spectrum.real, spectrum.imag], -1).swapaxes(-2, -3)  # (..., n_freq, T, 2)


HANN7 = np.hanning(9)[1:8]
# (id, signal shape, n_fft, keyword arguments; a numpy window is passed as a tensor)
CASES = [
    ("defaults-1d", (20,), 8, {}),
    ("batched-hop-window", (2, 24), 8, {"hop_length": 3, "win_length": 7, "window": HANN7}),
    ("two-sided-no-center", (2, 19), 6, {"center": False, "onesided": False}),
    ("normalized-constant", (17,), 8, {"normalized": True, "pad_mode": "constant"}),
    ("replicate", (2, 16), 4, {"pad_mode": "replicate", "hop_length": 2}),
    ("circular-odd-fft", (15,), 5, {"pad_mode": "circular", "hop_length": 2}),
    (
        "align-to-window",
        (20,),
        8,
        {"center": False, "win_length": 5, "window": HANN7[:5], "hop_length": 2, "align_to_window": True},
    ),
]


def _kwargs(kwargs, module):
    return {key: module(value) if isinstance(value, np.ndarray) else value for key, value in kwargs.items()}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, shape, n_fft, kwargs", CASES, ids=[c[0] for c in CASES])
def test_stft_matches_numpy_fft(case_id, shape, n_fft, kwargs, executor):
    x = RNG.standard_normal(shape)
    with onnxnn.set_executor(executor):
        actual = onnxnn.stft(
            onnxnn.tensor(x, dtype=onnxnn.float32),
            n_fft,
            return_complex=False,
            **_kwargs(kwargs, lambda a: onnxnn.tensor(a, dtype=onnxnn.float32)),
        ).numpy()
    expected = numpy_stft(x, n_fft, **kwargs)
    assert actual.shape == expected.shape
    # a float32 sum of n_fft products of magnitude <= max|x| (windows and the basis are <= 1)
    bound = 4 * n_fft * np.finfo(np.float32).eps * np.abs(x).max() * n_fft
    np.testing.assert_allclose(actual, expected, rtol=0, atol=bound)


@pytest.mark.parametrize("case_id, shape, n_fft, kwargs", CASES, ids=[c[0] for c in CASES])
def test_stft_and_istft_match_torch(case_id, shape, n_fft, kwargs):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(shape)
    ours = onnxnn.stft(onnxnn.tensor(x), n_fft, return_complex=False, **_kwargs(kwargs, onnxnn.tensor))
    theirs = torch.stft(torch.from_numpy(x), n_fft, return_complex=True, **_kwargs(kwargs, torch.from_numpy))
    np.testing.assert_allclose(ours.numpy(), torch.view_as_real(theirs).numpy(), rtol=1e-12, atol=1e-12)
    if kwargs.get("align_to_window"):
        return  # istft has no align_to_window
    inverse = {key: value for key, value in kwargs.items() if key != "pad_mode"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rectangular-window warning, both sides
        ours_signal = onnxnn.istft(ours, n_fft, length=shape[-1], **_kwargs(inverse, onnxnn.tensor))
        theirs_signal = torch.istft(theirs, n_fft, length=shape[-1], **_kwargs(inverse, torch.from_numpy))
    np.testing.assert_allclose(ours_signal.numpy(), theirs_signal.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id", ["defaults-1d", "batched-hop-window", "two-sided-no-center", "normalized-constant"])
def test_istft_inverts_stft(case_id, executor):
    _, shape, n_fft, kwargs = next(case for case in CASES if case[0] == case_id)
    x = RNG.standard_normal(shape)
    inverse = {key: value for key, value in kwargs.items() if key != "pad_mode"}
    with onnxnn.set_executor(executor), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spectrum = onnxnn.stft(
            onnxnn.tensor(x, dtype=onnxnn.float32),
            n_fft,
            return_complex=False,
            **_kwargs(kwargs, lambda a: onnxnn.tensor(a, dtype=onnxnn.float32)),
        )
        signal = onnxnn.istft(
            spectrum, n_fft, length=shape[-1], **_kwargs(inverse, lambda a: onnxnn.tensor(a, dtype=onnxnn.float32))
        ).numpy()
    if kwargs.get("center") is False:  # the tail past the last full frame is not covered
        covered = n_fft + kwargs.get("hop_length", n_fft // 4) * (
            (shape[-1] - n_fft) // kwargs.get("hop_length", n_fft // 4)
        )
        signal, x = signal[..., :covered], x[..., :covered]
    np.testing.assert_allclose(signal, x, rtol=0, atol=1e-4 * np.abs(x).max())


def test_stft_gradients_match_finite_differences():
    window = HANN7[:6]
    check_gradients(
        lambda x, w: onnxnn.stft(x, 8, 3, 6, w, return_complex=False, pad_mode="reflect"),
        [RNG.standard_normal(12), window],
    )


def test_istft_gradients_match_finite_differences():
    spectrum = numpy_stft(RNG.standard_normal(12), 6, 2, window=np.hanning(8)[1:7])
    check_gradients(lambda s, w: onnxnn.istft(s, 6, 2, window=w, length=12), [spectrum, np.hanning(8)[1:7]])


def test_stft_is_a_tensor_method_and_exports_to_onnxruntime():
    onnxruntime = pytest.importorskip("onnxruntime")

    class Spectrogram(onnxnn.nn.Module):
        def __init__(self):
            super().__init__()
            self.window = onnxnn.hann_window(8)

        def forward(self, x):
            spectrum = x.stft(8, 2, window=self.window, return_complex=False)
            return spectrum.pow(2).sum(-1)

    x = onnxnn.tensor(RNG.standard_normal((2, 20)), dtype=onnxnn.float32)
    module = Spectrogram()
    expected = module(x).numpy()
    proto = to_onnx(module, (x,))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
    power = (numpy_stft(x.numpy().astype(np.float64), 8, 2, window=module.window.numpy()) ** 2).sum(-1)
    np.testing.assert_allclose(actual, power, rtol=1e-4, atol=1e-4)


def test_istft_exports_to_onnxruntime():
    onnxruntime = pytest.importorskip("onnxruntime")

    class Inverse(onnxnn.nn.Module):
        def forward(self, spectrum):
            return spectrum.istft(8, 2, window=onnxnn.hann_window(8), length=20)

    spectrum = onnxnn.stft(onnxnn.randn(20), 8, 2, window=onnxnn.hann_window(8), return_complex=False)
    module = Inverse()
    expected = module(spectrum).numpy()
    proto = to_onnx(module, (spectrum,))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {session.get_inputs()[0].name: spectrum.numpy()})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: onnxnn.stft(x, 8), RuntimeError, "stft requires the return_complex parameter be given"),
        (lambda x: onnxnn.stft(x, 8, return_complex=True), RuntimeError, "onnxnn has no complex dtypes"),
        (
            lambda x: onnxnn.stft(x, 8, win_length=10, return_complex=False),
            RuntimeError,
            "expected 0 < win_length <= n_fft, but got win_length=10",
        ),
        (
            lambda x: onnxnn.stft(x, 8, window=onnxnn.ones(5), return_complex=False),
            RuntimeError,
            "expected a 1D window tensor of size equal to win_length=8, but got window with size [5]",
        ),
        (
            lambda x: onnxnn.stft(x, 8, hop_length=0, return_complex=False),
            RuntimeError,
            "expected hop_length > 0, but got hop_length=0",
        ),
        (
            lambda x: onnxnn.stft(x.reshape((2, 2, 5)), 4, return_complex=False),
            RuntimeError,
            "expected a 1D or 2D tensor",
        ),
        (
            lambda x: onnxnn.stft(x[:5], 8, center=False, return_complex=False),
            RuntimeError,
            "expected 0 < n_fft < 5, but got n_fft=8",
        ),
        (
            lambda x: onnxnn.stft(x, 8, align_to_window=True, return_complex=False),
            ValueError,
            "stft align_to_window should only be set when center = false",
        ),
        (
            lambda x: onnxnn.istft(onnxnn.stft(x, 8, return_complex=False), 8, window=onnxnn.zeros(8)),
            RuntimeError,
            "window overlap add min: 0",
        ),
        (
            lambda x: onnxnn.istft(onnxnn.stft(x, 8, return_complex=False), 8, onesided=False),
            RuntimeError,
            "to match n_fft when onesided=False, but got 5",
        ),
        (
            lambda x: onnxnn.istft(onnxnn.stft(x, 8, return_complex=False), 8, return_complex=True),
            RuntimeError,
            "onnxnn has no complex dtypes",
        ),
    ],
)
def test_stft_errors_in_pytorch_words(call, error, message):
    with pytest.raises(error) as info:
        call(onnxnn.randn(20))
    assert message in str(info.value)


def numpy_istft(spectrum, n_fft, hop_length, window, center=True):
    """PyTorch's real-output istft by its definition: irfft of each frame's first n_fft // 2 + 1 bins
    (the rest are not read), windowed, overlap-added and divided by the overlap-added squared window."""
    bins = spectrum[..., : n_fft // 2 + 1, :, 0] + 1j * spectrum[..., : n_fft // 2 + 1, :, 1]
    frames = np.fft.irfft(bins, n=n_fft, axis=-2).swapaxes(-1, -2) * window  # (..., T, n_fft)
    count = frames.shape[-2]
    length = n_fft + hop_length * (count - 1)
    signal = np.zeros(frames.shape[:-2] + (length,))
    envelope = np.zeros(length)
    for t in range(count):
        signal[..., t * hop_length : t * hop_length + n_fft] += frames[..., t, :]
        envelope[t * hop_length : t * hop_length + n_fft] += window**2
    start, end = (n_fft // 2, length - n_fft // 2) if center else (0, length)
    return signal[..., start:end] / envelope[start:end]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("n_fft, shape", [(8, (8, 5, 2)), (7, (2, 7, 6, 2))])
def test_two_sided_istft_reads_the_first_half_of_a_non_hermitian_spectrum(executor, n_fft, shape):
    # A two-sided spectrum that is not Hermitian (a masked or generated one): PyTorch narrows it to
    # n_fft // 2 + 1 bins and inverts with irfft; taking the real part of the full inverse DFT, as
    # onnxnn did, averages each bin with its mirror instead.
    spectrum = np.random.default_rng(1).standard_normal(shape)
    window = np.hanning(n_fft + 2)[1:-1]
    with onnxnn.set_executor(executor):
        signal = onnxnn.istft(
            onnxnn.tensor(spectrum), n_fft, hop_length=2, window=onnxnn.tensor(window), onesided=False
        ).numpy()
    expected = numpy_istft(spectrum, n_fft, 2, window)
    # n_fft-term sums, then a division by the envelope (at least the smallest squared window sum).
    np.testing.assert_allclose(
        signal, expected, rtol=0, atol=50 * n_fft * np.finfo(np.float64).eps * np.abs(expected).max()
    )


@pytest.mark.parametrize(
    "signal_dtype, window_dtype, result",
    [
        (onnxnn.float32, onnxnn.float64, onnxnn.float64),
        (onnxnn.float64, onnxnn.float32, onnxnn.float64),
        (onnxnn.float16, onnxnn.float32, onnxnn.float32),
        (onnxnn.float32, onnxnn.float32, onnxnn.float32),
    ],
)
def test_stft_and_istft_compute_in_the_promoted_dtype_of_signal_and_window(signal_dtype, window_dtype, result):
    # As PyTorch's: a float32 signal with a float64 window gives a float64 (complex128) spectrum.
    x = onnxnn.tensor(np.random.default_rng(2).standard_normal(32), dtype=signal_dtype)
    window = onnxnn.hann_window(8, dtype=window_dtype)
    spectrum = onnxnn.stft(x, 8, window=window, return_complex=False)
    assert spectrum.dtype is result
    assert onnxnn.istft(spectrum.to(signal_dtype), 8, window=window, length=32).dtype is result


@pytest.mark.parametrize(
    "name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"]
)
@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_windows_refuse_a_dtype_that_is_not_floating(name, dtype):
    with pytest.raises(RuntimeError, match=f"{name} expects floating point dtypes"):
        getattr(onnxnn, name)(4, dtype=getattr(onnxnn, dtype))
