"""Quantization, PyTorch's ``torch.ao.quantization`` on ONNX.

- Post-training quantization runs onnxruntime's quantization tools on the exported graph:
  :func:`quantize_dynamic` (int8 weights, activations quantized on the fly) and
  :func:`quantize_static` (activations calibrated on sample data; QDQ or QOperator format). Both
  return a Module running the quantized graph, which exports as the quantized ONNX model.
- Quantization-aware training fake-quantizes weights and activations while training:
  :func:`fake_quantize_per_tensor_affine`, :class:`FakeQuantize`, observers, :func:`prepare_qat`
  and :func:`convert`; the trained model exports as a QDQ graph that onnxruntime runs in int8.
"""

from __future__ import annotations

from ._dtypes import (
    QuantizedDType,
    per_channel_affine,
    per_channel_symmetric,
    per_tensor_affine,
    per_tensor_symmetric,
    qint8,
    qint32,
    quint8,
)
from .fake_quantize import (
    FakeQuantize,
    default_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
    disable_fake_quant,
    disable_observer,
    enable_fake_quant,
    enable_observer,
    fake_quantize_per_channel_affine,
    fake_quantize_per_tensor_affine,
)
from .post_training import quantize_dynamic, quantize_static
from .qat import DeQuantStub, QuantStub, convert, prepare_qat, propagate_qconfig_
from .qconfig import QConfig, default_qat_qconfig, get_default_qat_qconfig
from . import qat
from .observer import (
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    ObserverBase,
    PerChannelMinMaxObserver,
)

__all__ = [
    "quantize_dynamic",
    "quantize_static",
    "prepare_qat",
    "convert",
    "propagate_qconfig_",
    "QuantStub",
    "DeQuantStub",
    "QConfig",
    "default_qat_qconfig",
    "get_default_qat_qconfig",
    "qat",
    "QuantizedDType",
    "qint8",
    "quint8",
    "qint32",
    "per_tensor_affine",
    "per_tensor_symmetric",
    "per_channel_affine",
    "per_channel_symmetric",
    "FakeQuantize",
    "fake_quantize_per_tensor_affine",
    "fake_quantize_per_channel_affine",
    "default_fake_quant",
    "default_weight_fake_quant",
    "default_per_channel_weight_fake_quant",
    "enable_fake_quant",
    "disable_fake_quant",
    "enable_observer",
    "disable_observer",
    "ObserverBase",
    "MinMaxObserver",
    "MovingAverageMinMaxObserver",
    "PerChannelMinMaxObserver",
    "MovingAveragePerChannelMinMaxObserver",
]
