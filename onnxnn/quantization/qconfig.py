"""QConfig: which fake quantizers a module's activations and weights get in quantization-aware training."""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..nn.modules.module import Module
from .fake_quantize import (
    FakeQuantize,
    default_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
)
from .observer import MovingAverageMinMaxObserver

__all__ = ["QConfig", "default_qat_qconfig", "get_default_qat_qconfig"]


class QConfig(NamedTuple):
    """Constructors of a module's activation and weight fake quantizers (PyTorch's ``QConfig``).

    Each field is a callable returning a new module, typically ``FakeQuantize.with_args(...)``, so
    that every layer gets its own observer.

    Example::

        >>> qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)
        >>> model.qconfig = qconfig
    """

    activation: Callable[[], Module]
    weight: Callable[[], Module]


default_qat_qconfig = QConfig(activation=default_fake_quant, weight=default_weight_fake_quant)

# 7-bit activations, as PyTorch's x86 QConfig: onnxruntime's x86 kernels without VNNI (AVX2) sum pairs
# of uint8 x int8 products in int16, which 255 * 128 * 2 overflows (a silently wrong result) and
# 127 * 128 * 2 does not. The weights keep their 8 bits.
_reduced_range_fake_quant = FakeQuantize.with_args(
    observer=MovingAverageMinMaxObserver,
    quant_min=0,
    quant_max=255,
    dtype="quint8",
    qscheme="per_tensor_affine",
    reduce_range=True,
)


def get_default_qat_qconfig(backend: str = "onnxruntime", version: int = 1) -> QConfig:
    """The default QConfig for quantization-aware training: 7-bit affine activations (quint8 in
    ``[0, 127]``) and per-channel symmetric int8 weights, what onnxruntime's QDQ kernels run best.

    The activations take one bit less, as in PyTorch's x86 QConfig, so that the int8 kernels
    onnxruntime fuses the exported QDQ pairs into cannot saturate on x86 CPUs without VNNI.

    Args:
        backend: ``"onnxruntime"``; PyTorch's ``"x86"``, ``"fbgemm"``, ``"qnnpack"`` and ``"onednn"``
            are accepted as synonyms, since the exported model runs on onnxruntime whatever the name.
        version: accepted for PyTorch compatibility (1 is the only configuration).

    Returns:
        A :class:`QConfig`.
    """
    if backend not in ("onnxruntime", "x86", "fbgemm", "qnnpack", "onednn"):
        raise ValueError(f"get_default_qat_qconfig: unknown backend {backend!r}, expected 'onnxruntime'")
    return QConfig(activation=_reduced_range_fake_quant, weight=default_per_channel_weight_fake_quant)
