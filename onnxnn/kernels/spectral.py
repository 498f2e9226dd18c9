"""Spectral kernels: DFT (opset 20's, axis and dft_length as inputs; opset 17's axis attribute too).

Signals are real (last dim 1) or complex (last dim 2, real and imaginary parts); the result is
complex in that layout, except for an inverse one-sided transform (a real signal, last dim 1).
"""

from __future__ import annotations

import numpy as np

from ._common import to_scalar
from ..ir.kernel_registry import FLOATING, kernels
from ..ir.registry import compiled_forms

__all__: list[str] = []


@kernels.register("DFT", types=FLOATING)
def dft(xp, inputs, attrs):
    x = inputs[0]
    rank = x.ndim
    length = int(to_scalar(inputs[1])) if len(inputs) > 1 and inputs[1] is not None else None
    if len(inputs) > 2 and inputs[2] is not None:
        axis = int(to_scalar(inputs[2]))
    else:
        axis = attrs.get("axis", -2)
    axis %= rank  # the signal keeps every dim but the last, so the position is the same there
    inverse, onesided = attrs.get("inverse", 0), attrs.get("onesided", 0)
    signal = x[..., 0].astype(_WORKING[x.dtype.name])
    if x.shape[-1] == 2:
        signal = signal + 1j * x[..., 1].astype(signal.dtype)
    if inverse and onesided:
        # A one-sided (Hermitian) spectrum back to a real signal, of even length by default.
        length = 2 * (x.shape[axis] - 1) if length is None else length
        return [np.asarray(np.fft.irfft(signal, n=length, axis=axis)[..., None].astype(x.dtype), order="C")]
    spectrum = (np.fft.ifft if inverse else np.fft.fft)(signal, n=length, axis=axis)
    if onesided:
        spectrum = np.take(spectrum, np.arange(spectrum.shape[axis] // 2 + 1), axis=axis)
    return [np.asarray(np.stack([spectrum.real, spectrum.imag], axis=-1).astype(x.dtype), order="C")]


# numpy transforms float32 in single precision, as onnx's reference does; half types widen to it.
_WORKING = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32, "float64": np.float64}


@compiled_forms.register("DFT")
def _compiled_dft(node, threads: int):
    """onnxnn's sessions run every DFT with numpy's transforms, outside onnxruntime. onnxruntime 1.31's
    CPU DFT is not accurate enough to stand in for PyTorch's: at lengths that are not powers of two
    its float32 error grows like eps * n (8e3 eps at 1000, 8.5% at 65537, where pocketfft stays
    within 2 eps), its float64 inverse scales by a float32 1/n (1.5e-8 relative), and an inverse
    one-sided transform whose length is not 2 (bins - 1) or one more reads the wrong bins."""
    attrs = node.attrs
    return lambda arrays, threads: dft(np, arrays, attrs)
