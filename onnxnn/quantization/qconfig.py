"""QConfig: which fake quantizers a module's activations and weights get in quantization-aware training."""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..nn.modules.module import Module
from .fake_quantize import default_fake_quant, default_per_channel_weight_fake_quant, default_weight_fake_quant

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


def get_default_qat_qconfig(backend: str = "onnxruntime", version: int = 1) -> QConfig:
    """The default QConfig for quantization-aware training: 8-bit affine activations (quint8) and
    per-channel symmetric int8 weights, what onnxruntime's QDQ kernels run best.

    Args:
        backend: ``"onnxruntime"``; PyTorch's ``"x86"``, ``"fbgemm"`` and ``"qnnpack"`` are accepted
            as synonyms, since the exported model runs on onnxruntime whatever the name.
        version: accepted for PyTorch compatibility (1 is the only configuration).

    Returns:
        A :class:`QConfig`.
    """
    if backend not in ("onnxruntime", "x86", "fbgemm", "qnnpack", "onednn"):
        raise ValueError(f"get_default_qat_qconfig: unknown backend {backend!r}, expected 'onnxruntime'")
    return QConfig(activation=default_fake_quant, weight=default_per_channel_weight_fake_quant)
