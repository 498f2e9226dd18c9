"""Post-training quantization through onnxruntime's quantization tools, on the exported graph.

The module is exported (``export.to_onnx``, in eval mode), onnxruntime's ``quantize_dynamic`` or
``quantize_static`` rewrites the ONNX file (int8 weights; integer ops such as MatMulInteger and
ConvInteger, or QuantizeLinear/DequantizeLinear pairs around float ops), and the result is
imported back (``import_.from_onnx``) as a Module that runs the quantized graph on either
executor and exports as that quantized model. The original module is never changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import onnx

from .. import nn
from ..export import to_onnx
from ..import_ import GraphModule, from_onnx
from ..nn.modules.module import Module
from ..runtime.tensor import Tensor
from ._dtypes import QuantizedDType, qint8, quantized_dtype, quint8

__all__ = ["quantize_dynamic", "quantize_static", "QUANT_FORMATS", "CALIBRATE_METHODS"]

# The ONNX op types a PyTorch module type exports as: qconfig_spec's module types select these.
_OP_TYPES_OF_MODULE: dict[type, tuple[str, ...]] = {
    nn.Linear: ("MatMul", "Gemm"),
    nn.Bilinear: ("MatMul",),
    nn.Conv1d: ("Conv",),
    nn.Conv2d: ("Conv",),
    nn.Conv3d: ("Conv",),
    nn.ConvTranspose1d: ("ConvTranspose",),
    nn.ConvTranspose2d: ("ConvTranspose",),
    nn.ConvTranspose3d: ("ConvTranspose",),
    nn.Embedding: ("Gather",),
    nn.LSTM: ("LSTM",),
}
# Op types onnxruntime quantizes, accepted as they are in qconfig_spec.
_KNOWN_OP_TYPES = frozenset(
    {"MatMul", "Gemm", "Conv", "ConvTranspose", "Gather", "LSTM", "Attention", "Add", "Mul", "Relu", "Clip"}
    | {"MaxPool", "AveragePool", "GlobalAveragePool", "Concat", "Softmax", "Sigmoid", "Transpose", "Reshape"}
    | {"Resize", "Squeeze", "Unsqueeze", "Split", "Where", "LeakyRelu", "Pad", "ArgMax", "Flatten"}
)
# PyTorch's default dynamic qconfig_spec quantizes Linear (and the recurrent layers, which onnxnn
# exports as unrolled MatMuls, already covered).
_DEFAULT_DYNAMIC = ("MatMul", "Gemm")

QUANT_FORMATS = ("QDQ", "QOperator")
CALIBRATE_METHODS = ("MinMax", "Entropy", "Percentile", "Distribution")


def _op_types(qconfig_spec, default: tuple[str, ...] | None) -> list[str] | None:
    """The ONNX op types ``qconfig_spec`` (module types, op type names, or a dict keyed by them) selects."""
    if qconfig_spec is None:
        return list(default) if default is not None else None
    entries = qconfig_spec.keys() if isinstance(qconfig_spec, dict) else qconfig_spec
    if isinstance(entries, (str, type)):
        entries = [entries]
    selected: list[str] = []
    for entry in entries:
        if isinstance(entry, type) and issubclass(entry, Module):
            found = next((ops for kind, ops in _OP_TYPES_OF_MODULE.items() if issubclass(entry, kind)), None)
            if found is None:
                supported = ", ".join(f"nn.{kind.__name__}" for kind in _OP_TYPES_OF_MODULE)
                raise ValueError(f"qconfig_spec: no quantized form for {entry.__name__} (supported: {supported})")
        elif isinstance(entry, str) and entry in _KNOWN_OP_TYPES:
            found = (entry,)
        else:
            raise ValueError(
                f"qconfig_spec: unknown entry {entry!r}; give module types (nn.Linear, nn.Conv2d, ...) "
                f"or ONNX op types ({', '.join(sorted(_KNOWN_OP_TYPES))})"
            )
        selected.extend(op for op in found if op not in selected)
    if not selected:
        raise ValueError("qconfig_spec selects nothing to quantize")
    return selected


def _quant_type(dtype, name: str):
    # onnxruntime.quantization is deferred: importing it loads its calibrators and onnx helpers.
    from onnxruntime.quantization import QuantType

    try:
        kind = quantized_dtype(dtype)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    return QuantType.QInt8 if kind is qint8 else QuantType.QUInt8


def _reduce_range(reduce_range: bool | None, weight_type) -> bool:
    """Whether the weights get 7 bits: by default where onnxruntime's x86 kernels could saturate.

    On x86 CPUs without VNNI (AVX2, AVX-512 before VNNI) onnxruntime multiplies uint8 activations
    by int8 weights with an instruction that sums each pair of products in int16: 255 * 128 * 2
    does not fit, and the saturated sums make the result silently wrong (tens of percent, not a
    rounding). With 7-bit weights, 255 * 64 * 2 does. uint8 weights take another kernel that does
    not saturate. The exported model may be served on any CPU, so the default does not depend on
    this one.
    """
    from onnxruntime.quantization import QuantType

    if reduce_range is None:
        return weight_type == QuantType.QInt8
    return bool(reduce_range)


@contextlib.contextmanager
def _eval_mode(module: Module) -> Iterator[None]:
    """``module`` in eval mode for the export, every submodule's own flag restored after."""
    flags = [(child, child.training) for child in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for child, training in flags:
            child.training = training


class _QuietPreprocessingAdvice(logging.Filter):
    """Drops onnxruntime's advice to run its pre-processing: the exported graph is already shape-inferred."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _quiet_advice() -> Iterator[None]:
    advice = _QuietPreprocessingAdvice()
    root = logging.getLogger()
    root.addFilter(advice)
    try:
        yield
    finally:
        root.removeFilter(advice)


def _export(model: Module, example_inputs, directory: str, dynamic_axes, opset_version) -> tuple[str, list[str]]:
    if not isinstance(model, Module):
        raise TypeError(f"expected an nn.Module to quantize, got {type(model).__name__}")
    arguments = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
    path = os.path.join(directory, "float.onnx")
    with _eval_mode(model):
        proto = to_onnx(model, arguments, path, dynamic_axes=dynamic_axes, opset_version=opset_version)
    return path, [value.name for value in proto.graph.input]


def _import(path: str) -> GraphModule:
    quantized = from_onnx(onnx.load(path))
    # A quantized model is for inference, as PyTorch's quantized modules: nothing asks for gradients.
    quantized.requires_grad_(False)
    quantized.eval()
    return quantized


def _check_inplace(inplace: bool) -> None:
    if inplace:
        raise ValueError(
            "inplace=True is not supported: the quantized model is a new Module built from the quantized "
            "ONNX graph; the original module is left unchanged"
        )


def quantize_dynamic(
    model: Module,
    example_inputs: Any,
    qconfig_spec: Any = None,
    dtype: QuantizedDType | str = qint8,
    inplace: bool = False,
    *,
    per_channel: bool = False,
    reduce_range: bool | None = None,
    dynamic_axes: dict | None = None,
    opset_version: int | None = None,
    extra_options: dict | None = None,
) -> GraphModule:
    """Quantizes ``model``'s weights to 8 bits; activations are quantized on the fly at each call.

    The model is exported with ``example_inputs`` and quantized by onnxruntime's
    ``quantize_dynamic``: each selected op reads int8 weights and a DynamicQuantizeLinear of its
    input (MatMulInteger, ConvInteger), then scales the integer result back to float.

    Args:
        model: the float module; it is not modified.
        example_inputs: a tensor or tuple of tensors to export the model with.
        qconfig_spec: what to quantize: a set of module types (``{nn.Linear}``, the default, and
            ``nn.Conv2d``, ``nn.Embedding``, ...), ONNX op types (``{"MatMul", "Conv"}``), or a dict
            keyed by either (its values are ignored).
        dtype: the weights' type: ``onnxnn.qint8`` (default) or ``onnxnn.quint8``.
        inplace: must be False (the result is a new Module).
        per_channel: one scale per output channel of each weight.
        reduce_range: 7-bit weights. The default (None) turns it on for int8 weights, whose products
            with uint8 activations saturate in onnxruntime's kernels on x86 CPUs without VNNI
            (AVX2); ``False`` keeps all 8 bits for models served only where that cannot happen
            (VNNI, ARM).
        dynamic_axes: as for ``export.to_onnx`` (e.g. ``{"input_0": [0]}`` for any batch size).
        opset_version: the exported opset (default: onnxnn's).
        extra_options: passed to onnxruntime's ``quantize_dynamic`` unchanged.

    Returns:
        A :class:`~onnxnn.import_.GraphModule` in eval mode running the quantized graph;
        ``export.to_onnx`` writes it as the quantized ONNX model.

    Example::

        >>> model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
        >>> quantized = quantize_dynamic(model, onnxnn.randn(8, 64), {nn.Linear}, dtype=onnxnn.qint8)
        >>> quantized(onnxnn.randn(8, 64)).shape
        onnxnn.Size([8, 10])
    """
    # Deferred: onnxruntime.quantization is heavy and only these entry points need it.
    from onnxruntime.quantization import quantize_dynamic as onnxruntime_quantize_dynamic

    _check_inplace(inplace)
    weight_type = _quant_type(dtype, "quantize_dynamic")
    op_types = _op_types(qconfig_spec, _DEFAULT_DYNAMIC)
    with tempfile.TemporaryDirectory(prefix="onnxnn-quantize-") as directory:
        float_path, _ = _export(model, example_inputs, directory, dynamic_axes, opset_version)
        quantized_path = os.path.join(directory, "quantized.onnx")
        with _quiet_advice():
            onnxruntime_quantize_dynamic(
                float_path,
                quantized_path,
                op_types_to_quantize=op_types,
                per_channel=per_channel,
                reduce_range=_reduce_range(reduce_range, weight_type),
                weight_type=weight_type,
                extra_options=extra_options,
            )
        return _import(quantized_path)


def _arrays(item, names: list[str]) -> dict[str, np.ndarray]:
    """One calibration sample (a tensor, array, tuple of them, or dict by input name) as onnxruntime's feed."""
    if isinstance(item, dict):
        values = dict(item)
        if set(values) != set(names):
            raise ValueError(f"calibration_data: a sample's names {sorted(values)} are not the model's inputs {names}")
    else:
        items = tuple(item) if isinstance(item, (tuple, list)) else (item,)
        if len(items) != len(names):
            raise ValueError(f"calibration_data: a sample has {len(items)} inputs, the model takes {len(names)}")
        values = dict(zip(names, items))
    return {
        name: value.numpy(force=True) if isinstance(value, Tensor) else np.asarray(value)
        for name, value in values.items()
    }


def _calibration_reader(feeds: list[dict[str, np.ndarray]]):
    # Deferred with the rest of onnxruntime.quantization.
    from onnxruntime.quantization import CalibrationDataReader

    class _Samples(CalibrationDataReader):
        """onnxruntime's calibration reader over the user's samples."""

        def __init__(self) -> None:
            self._feeds = iter(feeds)

        def get_next(self) -> dict | None:
            return next(self._feeds, None)

    return _Samples()


def quantize_static(
    model: Module,
    example_inputs: Any,
    calibration_data: Iterable,
    qconfig_spec: Any = None,
    inplace: bool = False,
    *,
    quant_format: str = "QDQ",
    activation_type: QuantizedDType | str = quint8,
    weight_type: QuantizedDType | str = qint8,
    per_channel: bool = False,
    reduce_range: bool | None = None,
    calibrate_method: str = "MinMax",
    dynamic_axes: dict | None = None,
    opset_version: int | None = None,
    extra_options: dict | None = None,
) -> GraphModule:
    """Quantizes weights and activations to 8 bits, with activation ranges calibrated on sample data.

    The model is exported with ``example_inputs``; onnxruntime runs it on every sample of
    ``calibration_data`` to find each activation's range (``calibrate_method``) and writes the
    quantized model: in the ``"QDQ"`` format, QuantizeLinear/DequantizeLinear pairs around the
    float ops (which onnxruntime fuses into integer kernels when it loads the model); in
    ``"QOperator"``, integer ops such as QLinearConv and QLinearMatMul.

    Args:
        model: the float module; it is not modified.
        example_inputs: a tensor or tuple of tensors to export the model with.
        calibration_data: an iterable of samples, each a tensor or array (one input), a tuple of
            them (one per input) or a dict by input name; representative of real inputs.
        qconfig_spec: what to quantize, as for :func:`quantize_dynamic` (default: every op type
            onnxruntime quantizes).
        inplace: must be False (the result is a new Module).
        quant_format: ``"QDQ"`` (default) or ``"QOperator"``.
        activation_type: ``onnxnn.quint8`` (default) or ``onnxnn.qint8``.
        weight_type: ``onnxnn.qint8`` (default) or ``onnxnn.quint8``.
        per_channel: one weight scale per output channel.
        reduce_range: 7-bit weights; by default (None) for int8 weights, as in :func:`quantize_dynamic`.
        calibrate_method: ``"MinMax"`` (default), ``"Entropy"``, ``"Percentile"`` or ``"Distribution"``.
        dynamic_axes, opset_version: as for ``export.to_onnx``.
        extra_options: passed to onnxruntime's ``quantize_static`` unchanged.

    Returns:
        A :class:`~onnxnn.import_.GraphModule` in eval mode running the quantized graph.

    Example::

        >>> model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
        >>> samples = [onnxnn.randn(4, 3, 16, 16) for _ in range(8)]
        >>> quantized = quantize_static(model, samples[0], samples, per_channel=True)
    """
    # Deferred: onnxruntime.quantization is heavy and only these entry points need it.
    from onnxruntime.quantization import CalibrationMethod, QuantFormat
    from onnxruntime.quantization import quantize_static as onnxruntime_quantize_static

    _check_inplace(inplace)
    if quant_format not in QUANT_FORMATS:
        raise ValueError(f"quantize_static: unsupported quant_format {quant_format!r}, expected one of {QUANT_FORMATS}")
    if calibrate_method not in CALIBRATE_METHODS:
        raise ValueError(
            f"quantize_static: unsupported calibrate_method {calibrate_method!r}, expected one of {CALIBRATE_METHODS}"
        )
    activations = _quant_type(activation_type, "quantize_static: activation_type")
    weights = _quant_type(weight_type, "quantize_static: weight_type")
    op_types = _op_types(qconfig_spec, None)
    samples = list(calibration_data)
    if not samples:
        raise ValueError("quantize_static: calibration_data is empty; give at least one sample input")
    with tempfile.TemporaryDirectory(prefix="onnxnn-quantize-") as directory:
        float_path, names = _export(model, example_inputs, directory, dynamic_axes, opset_version)
        # Checked before onnxruntime runs anything, so a malformed sample fails with its own message.
        reader = _calibration_reader([_arrays(item, names) for item in samples])
        quantized_path = os.path.join(directory, "quantized.onnx")
        with _quiet_advice():
            onnxruntime_quantize_static(
                float_path,
                quantized_path,
                reader,
                quant_format=QuantFormat.QDQ if quant_format == "QDQ" else QuantFormat.QOperator,
                op_types_to_quantize=op_types,
                per_channel=per_channel,
                reduce_range=_reduce_range(reduce_range, weights),
                activation_type=activations,
                weight_type=weights,
                calibrate_method=getattr(CalibrationMethod, calibrate_method),
                extra_options=extra_options,
            )
        return _import(quantized_path)
