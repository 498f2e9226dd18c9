"""stft and istft: short-time Fourier transforms recorded as framing plus a matmul with the DFT basis.

onnxnn has no complex dtype, so a spectrum is its real view: a last dim of 2 holding the real and
imaginary parts (PyTorch's ``return_complex=False`` layout, ``torch.view_as_real`` of its complex
result). ``stft`` pads the signal (``center``), frames it with ``unfold`` (one Gather), multiplies by the window and by
the ``(n_fft, 2 * n_freq)`` matrix of cosines and negated sines; ``istft`` multiplies by the inverse
basis and overlap-adds the windowed frames with ``index_add``, dividing by the overlap-added squared
window. Every step has a gradient rule and runs on both executors, and the graph is standard ONNX
(Pad, Gather, MatMul, Mul, ScatterElements, Div), so it exports as it is. (ONNX's own STFT/DFT ops would
need complex handling and gradient rules that onnxnn does not have.)
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...ir import dtypes
from ._common import Tensor
from .arrange import index_add
from .padding import pad_constant, pad_mode
from .shape import cat

__all__ = ["istft", "stft"]

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _describe(name: str, input: Tensor, n_fft: int, hop_length: int, win_length: int, window) -> str:
    window_text = "None" if window is None else f"Tensor{list(window.shape)}"
    return (
        f"{name}(Tensor{list(input.shape)}, n_fft={n_fft}, hop_length={hop_length}, win_length={win_length}, "
        f"window={window_text})"
    )


def _pad_signal(signal: Tensor, pad: int, mode: str) -> Tensor:
    """Pads the last dim by ``pad`` on both sides, as ``F.pad(..., mode)`` does (one ONNX Pad node but for
    circular)."""
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Unsupported padding mode: {mode}. Expected one of {list(_PAD_MODES)}")
    if pad == 0:
        return signal
    length = signal.shape[-1]
    rank = signal.dim()
    pads = [0] * (rank - 1) + [pad] + [0] * (rank - 1) + [pad]
    if mode == "constant":
        return pad_constant(signal, pads)
    if mode == "reflect":
        if pad >= length:
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input dimension, "
                f"but got: padding ({pad}, {pad}) at dimension {rank - 1} of input "
                f"{list(signal.shape)}"
            )
        return pad_mode(signal, pads, "reflect")
    if mode == "replicate":
        return pad_mode(signal, pads, "edge")
    # circular: Slice/Concat (ONNX Pad's "wrap" needs opset 19, above the lowest one onnxnn exports to)
    if pad > length:
        raise RuntimeError("Padding value causes wrapping around more than once.")
    left, right = signal.narrow(-1, length - pad, pad), signal.narrow(-1, 0, pad)
    return cat([left, signal, right], -1)


def _full_window(window: Tensor | None, win_length: int, n_fft: int, input: Tensor) -> Tensor:
    """The window as ``n_fft`` values: ones by default, centered with zeros when shorter."""
    if window is None:
        window = Tensor._full((win_length,), 1.0, input.dtype, input.device)
    else:
        window = window.to(input.dtype)
    left = (n_fft - win_length) // 2
    if left == 0 and win_length == n_fft:
        return window
    return pad_constant(window, [left, n_fft - win_length - left])


def _result_dtype(input: Tensor, window: Tensor | None) -> dtypes.dtype:
    """The dtype both transforms compute and return in: the input's promoted with the window's, as
    PyTorch's (a float32 signal with a float64 window gives a float64 spectrum)."""
    if window is None:
        return input.dtype
    return dtypes.promote_types(input.dtype, window.dtype)


def _forward_basis(n_fft: int, frequencies: int, dtype, device) -> Tensor:
    """``(n_fft, 2 * frequencies)``: cos(2 pi k n / N) then -sin(2 pi k n / N), exact in float64."""
    phase = 2.0 * np.pi * np.outer(np.arange(n_fft), np.arange(frequencies)) / n_fft
    basis = np.concatenate([np.cos(phase), -np.sin(phase)], axis=1)
    return Tensor._from_array(basis.astype(dtype.numpy_dtype), dtype, device)


def _check_stft(input: Tensor, n_fft: int, hop_length: int, win_length: int, window, described: str) -> None:
    if input.dim() not in (1, 2):
        raise RuntimeError(f"{described} : expected a 1D or 2D tensor")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{described} : expected a tensor of floating point dtype, got {input.dtype}")
    length = input.shape[-1]
    if n_fft <= 0 or n_fft > length:
        raise RuntimeError(f"{described} : expected 0 < n_fft < {length}, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(f"{described} : expected hop_length > 0, but got hop_length={hop_length}")
    if win_length <= 0 or win_length > n_fft:
        raise RuntimeError(f"{described} : expected 0 < win_length <= n_fft, but got win_length={win_length}")
    if window is not None and (window.dim() != 1 or window.shape[0] != win_length):
        raise RuntimeError(
            f"{described} : expected a 1D window tensor of size equal to win_length={win_length}, "
            f"but got window with size {list(window.shape)}"
        )


def stft(
    input: Tensor,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    pad_mode: str = "reflect",
    normalized: bool = False,
    onesided: bool | None = None,
    return_complex: bool | None = None,
    align_to_window: bool | None = None,
) -> Tensor:
    """Short-time Fourier transform of ``input`` (``(L,)`` or ``(B, L)``), as PyTorch's ``return_complex=False``.

    ``X[..., k, t, :] = sum_n w[n] x[t * hop_length + n] exp(-2 pi i k n / n_fft)`` as ``(real, imag)``,
    of shape ``(B?, n_freq, n_frames, 2)`` with ``n_freq = n_fft // 2 + 1`` when ``onesided`` (the
    default) else ``n_fft``. ``center`` pads ``n_fft // 2`` on both sides with ``pad_mode``; ``window``
    (default: ones) of ``win_length`` is centered in ``n_fft`` (or, with ``align_to_window`` and
    ``center=False``, placed at each frame's start); ``normalized`` scales by ``1 / sqrt(n_fft)``.

    onnxnn has no complex dtype: ``return_complex`` must be ``False`` (``True`` raises, and ``None`` raises
    as PyTorch does for real input).

    Example::

        >>> onnxnn.stft(onnxnn.ones(16), 8, return_complex=False).shape
        onnxnn.Size([5, 5, 2])
    """
    if return_complex is None:
        raise RuntimeError(
            "stft requires the return_complex parameter be given for real inputs, and will further "
            "require that return_complex=True in a future PyTorch release."
        )
    if return_complex:
        raise RuntimeError(
            "stft(return_complex=True): onnxnn has no complex dtypes; pass return_complex=False for "
            "the real view, whose last dim of 2 holds the real and imaginary parts"
        )
    if center and align_to_window is not None:
        raise ValueError("stft align_to_window should only be set when center = false")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    if center:
        input = _pad_signal(input, n_fft // 2, pad_mode)
    described = _describe("stft", input, n_fft, hop_length, win_length, window)
    _check_stft(input, n_fft, hop_length, win_length, window, described)
    input = input.to(_result_dtype(input, window))
    full_window = _full_window(window, win_length, n_fft, input)
    if align_to_window and win_length < n_fft:
        # The window covers [t * hop, t * hop + win_length): frames start (n_fft - win_length) // 2 earlier.
        left = (n_fft - win_length) // 2
        rank = input.dim()
        input = pad_constant(input, [0] * (rank - 1) + [left] + [0] * (rank - 1) + [n_fft - win_length - left])
    onesided = True if onesided is None else onesided
    frequencies = n_fft // 2 + 1 if onesided else n_fft
    frames = input.unfold(-1, n_fft, hop_length) * full_window  # (B?, T, n_fft)
    spectrum = frames.matmul(_forward_basis(n_fft, frequencies, input.dtype, input.device))  # (B?, T, 2 * n_freq)
    if normalized:
        spectrum = spectrum * (1.0 / math.sqrt(n_fft))
    parts = spectrum.reshape(tuple(spectrum.shape[:-1]) + (2, frequencies))  # (B?, T, 2, n_freq)
    return parts.movedim(-1, -3)  # (B?, n_freq, T, 2)


def _inverse_basis(n_fft: int, frequencies: int, dtype, device) -> Tensor:
    """``(2 * frequencies, n_fft)``: irfft from the (real, imag) rows of the ``n_fft // 2 + 1`` one-sided
    bins. The bins strictly between 0 and n_fft / 2 count twice (their mirror images); the sines
    vanish at 0 and n_fft / 2, so those bins' imaginary parts are ignored as irfft ignores them."""
    phase = 2.0 * np.pi * np.outer(np.arange(frequencies), np.arange(n_fft)) / n_fft
    weight = np.ones(frequencies)
    weight[1 : (n_fft + 1) // 2] = 2.0
    basis = np.concatenate([np.cos(phase) * weight[:, None], -np.sin(phase) * weight[:, None]], axis=0) / n_fft
    return Tensor._from_array(basis.astype(dtype.numpy_dtype), dtype, device)


def _overlap_add(frames: Tensor, hop_length: int, length: int) -> Tensor:
    """Sums frames ``(B?, T, N)`` placed every ``hop_length`` into a signal of ``length`` (``index_add``)."""
    count, size = frames.shape[-2], frames.shape[-1]
    positions = (np.arange(count)[:, None] * hop_length + np.arange(size)[None, :]).reshape(-1)
    index = Tensor._from_array(positions.astype(np.int64), dtypes.int64, frames.device)
    flat = frames.reshape(tuple(frames.shape[:-2]) + (count * size,))
    zeros = Tensor._full(tuple(frames.shape[:-2]) + (length,), 0.0, frames.dtype, frames.device)
    return index_add(zeros, -1, index, flat)


def istft(
    input: Tensor,
    n_fft: int,
    hop_length: int | None = None,
    win_length: int | None = None,
    window: Tensor | None = None,
    center: bool = True,
    normalized: bool = False,
    onesided: bool | None = None,
    length: int | None = None,
    return_complex: bool = False,
) -> Tensor:
    """Inverse of :func:`stft`: a signal ``(B?, L)`` from its spectrum's real view ``(B?, n_freq, T, 2)``.

    Each frame is the real inverse DFT (irfft) of the first ``n_fft // 2 + 1`` bins, as PyTorch's
    real-output istft (with ``onesided=False`` the other bins are not read: the spectrum is taken as
    Hermitian), times the window; the frames are overlap-added and divided by the overlap-added
    squared window (the least-squares inverse, Griffin & Lim), then the ``center`` padding is trimmed
    and the result cut or zero-padded to ``length``. PyTorch takes a complex input here; onnxnn, which
    has no complex dtype, takes the real view that :func:`stft` returns (PyTorch's ``torch.view_as_real`` of its input).

    Example::

        >>> x = onnxnn.randn(32)
        >>> window = onnxnn.hann_window(8)
        >>> spectrum = onnxnn.stft(x, 8, window=window, return_complex=False)
        >>> onnxnn.allclose(onnxnn.istft(spectrum, 8, window=window, length=32), x, atol=1e-5)
        True
    """
    if return_complex:
        raise RuntimeError("istft(return_complex=True): onnxnn has no complex dtypes; the output is the real signal")
    hop_length = n_fft // 4 if hop_length is None else hop_length
    win_length = n_fft if win_length is None else win_length
    described = _describe("istft", input, n_fft, hop_length, win_length, window)
    if input.dim() not in (3, 4) or input.shape[-1] != 2:
        raise RuntimeError(
            f"{described} : expected the real view of a spectrum, (B?, n_freq, n_frames, 2), but got "
            f"a tensor of size {list(input.shape)} (onnxnn has no complex dtype)"
        )
    frequencies, count = input.shape[-3], input.shape[-2]
    onesided = frequencies != n_fft if onesided is None else onesided
    if onesided and frequencies != n_fft // 2 + 1:
        raise RuntimeError(
            f"{described} : expected the frequency dimension (3rd to the last) of the input tensor to "
            f"match n_fft / 2 + 1 when onesided=True, but got {frequencies}"
        )
    if not onesided and frequencies != n_fft:
        raise RuntimeError(
            f"{described} : expected the frequency dimension (3rd to the last) of the input tensor to "
            f"match n_fft when onesided=False, but got {frequencies}"
        )
    if hop_length <= 0 or hop_length > win_length:
        raise RuntimeError(f"{described} : expected 0 < hop_length <= win_length")
    if win_length <= 0 or win_length > n_fft:
        raise RuntimeError(f"{described} : expected 0 < win_length <= n_fft")
    if window is not None and (window.dim() != 1 or window.shape[0] != win_length):
        raise RuntimeError(f"{described} : Invalid window shape. window has to be 1D and length of `win_length`")
    if window is None:
        warnings.warn(
            "A window was not provided. A rectangular window will be applied.Please provide the same "
            "window used by stft to make the inversion lossless.To suppress this warning and use a "
            "rectangular window, explicitly set `window=torch.ones(n_fft, device=<device>)`.",
            stacklevel=2,
        )
    input = input.to(_result_dtype(input, window))
    if not onesided:
        # As PyTorch's real inverse (istft without return_complex narrows to n_fft // 2 + 1 bins and
        # runs irfft): the spectrum is taken as Hermitian and only its first half is read, rather
        # than the real part of the full inverse DFT, which differs once the spectrum is not Hermitian
        # (after a mask, say).
        frequencies = n_fft // 2 + 1
        input = input.narrow(-3, 0, frequencies)
    full_window = _full_window(window, win_length, n_fft, input)
    # (B?, n_freq, T, 2) -> (B?, T, 2 * n_freq): all real parts, then all imaginary parts, per frame.
    per_frame = input.movedim(-3, -1)
    per_frame = per_frame.reshape(tuple(per_frame.shape[:-2]) + (2 * frequencies,))
    if normalized:
        per_frame = per_frame * math.sqrt(n_fft)
    frames = per_frame.matmul(_inverse_basis(n_fft, frequencies, input.dtype, input.device)) * full_window
    expected_length = n_fft + hop_length * (count - 1)
    signal = _overlap_add(frames, hop_length, expected_length)
    envelope = _overlap_add((full_window * full_window).expand((count, n_fft)), hop_length, expected_length)
    start = n_fft // 2 if center else 0
    if length is not None:
        end = start + length
    else:
        end = expected_length - n_fft // 2 if center else expected_length
    kept = min(end, expected_length) - start
    signal, envelope = signal.narrow(-1, start, kept), envelope.narrow(-1, start, kept)
    smallest = float(np.abs(np.asarray(envelope.numpy(force=True))).min()) if kept > 0 else 1.0
    if smallest < 1e-11:
        raise RuntimeError(f"{described} window overlap add min: {smallest:g}")
    signal = signal / envelope
    if end > expected_length:
        warnings.warn(
            "The length of signal is shorter than the length parameter. Result is being padded with zeros "
            "in the tail. Please check your center and hop_length settings.",
            stacklevel=2,
        )
        rank = signal.dim()
        signal = pad_constant(signal, [0] * rank + [0] * (rank - 1) + [end - expected_length])
    return signal
