"""Quantization-aware training: modules whose weights and outputs are fake-quantized, and the passes
that swap them in (``prepare_qat``) and freeze them for export (``convert``).

A prepared Linear or Conv2d fake-quantizes its weight (``weight_fake_quant``) and its output
(``activation_post_process``), and a ``QuantStub`` fake-quantizes the model's input, so the
exported graph has a QuantizeLinear -> DequantizeLinear pair in front of every input of every
quantized op: the QDQ form onnxruntime turns into integer kernels. The state_dict keys are
PyTorch's (``fc.weight_fake_quant.scale``, ``fc.activation_post_process.zero_point``, ...).
"""

from __future__ import annotations

import copy
from typing import Any

from .. import nn
from ..nn.modules.module import Module
from ..runtime.tensor import Tensor
from .fake_quantize import disable_observer
from .qconfig import QConfig, get_default_qat_qconfig

__all__ = ["Linear", "Conv2d", "QuantStub", "DeQuantStub", "prepare_qat", "convert", "propagate_qconfig_"]


def _check_qconfig(qconfig, name: str) -> QConfig:
    if not isinstance(qconfig, QConfig):
        raise TypeError(f"{name}: qconfig must be a QConfig, got {type(qconfig).__name__}")
    return qconfig


class Linear(nn.Linear):
    """A Linear layer whose weight and output are fake-quantized (PyTorch's ``nn.qat.Linear``).

    Args:
        in_features, out_features, bias, device, dtype: as for ``nn.Linear``.
        qconfig: the fake quantizers' constructors (default: :func:`get_default_qat_qconfig`).
    """

    _FLOAT_MODULE = nn.Linear

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        qconfig: QConfig | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.qconfig = _check_qconfig(qconfig or get_default_qat_qconfig(), "qat.Linear")
        self.weight_fake_quant = self.qconfig.weight()
        self.activation_post_process = self.qconfig.activation()

    def forward(self, input: Tensor) -> Tensor:
        output = nn.functional.linear(input, self.weight_fake_quant(self.weight), self.bias)
        return self.activation_post_process(output)

    @classmethod
    def from_float(cls, mod: nn.Linear, qconfig: QConfig | None = None) -> Linear:
        """A QAT Linear sharing ``mod``'s weight and bias."""
        qconfig = qconfig or getattr(mod, "qconfig", None)
        qat = cls(mod.in_features, mod.out_features, mod.bias is not None, qconfig=qconfig)
        qat.weight = mod.weight
        qat.bias = mod.bias
        qat.training = mod.training
        return qat


class Conv2d(nn.Conv2d):
    """A Conv2d layer whose weight and output are fake-quantized (PyTorch's ``nn.qat.Conv2d``).

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            padding_mode, device, dtype: as for ``nn.Conv2d``.
        qconfig: the fake quantizers' constructors (default: :func:`get_default_qat_qconfig`).
    """

    _FLOAT_MODULE = nn.Conv2d

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        qconfig: QConfig | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )
        self.qconfig = _check_qconfig(qconfig or get_default_qat_qconfig(), "qat.Conv2d")
        self.weight_fake_quant = self.qconfig.weight()
        self.activation_post_process = self.qconfig.activation()

    def forward(self, input: Tensor) -> Tensor:
        output = self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)
        return self.activation_post_process(output)

    @classmethod
    def from_float(cls, mod: nn.Conv2d, qconfig: QConfig | None = None) -> Conv2d:
        """A QAT Conv2d sharing ``mod``'s weight and bias."""
        qconfig = qconfig or getattr(mod, "qconfig", None)
        qat = cls(
            mod.in_channels,
            mod.out_channels,
            mod.kernel_size,
            mod.stride,
            mod.padding,
            mod.dilation,
            mod.groups,
            mod.bias is not None,
            mod.padding_mode,
            qconfig=qconfig,
        )
        qat.weight = mod.weight
        qat.bias = mod.bias
        qat.training = mod.training
        return qat


class QuantStub(Module):
    """Marks where float values enter the quantized part of a model (PyTorch's ``QuantStub``).

    An identity until :func:`prepare_qat` gives it an ``activation_post_process`` fake quantizer:
    then the model's input is fake-quantized, which the exported graph shows as a QuantizeLinear.
    """

    def __init__(self, qconfig: QConfig | None = None) -> None:
        super().__init__()
        if qconfig is not None:
            self.qconfig = _check_qconfig(qconfig, "QuantStub")

    def forward(self, x: Tensor) -> Tensor:
        process = self._modules.get("activation_post_process")
        return x if process is None else process(x)


class DeQuantStub(Module):
    """Marks where values leave the quantized part of a model (an identity: fake-quantized values are float)."""

    def __init__(self, qconfig: QConfig | None = None) -> None:
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x


_DEFAULT_QAT_MODULE_MAPPING: dict[type, type] = {nn.Linear: Linear, nn.Conv2d: Conv2d}
_UNSET = object()


def propagate_qconfig_(module: Module, qconfig_dict: dict | None = None) -> None:
    """Gives every submodule without a ``qconfig`` attribute its parent's (PyTorch's ``propagate_qconfig_``).

    A submodule whose ``qconfig`` is None is left out of quantization, with its children.
    """
    inherited = (qconfig_dict or {}).get("", getattr(module, "qconfig", None))

    def visit(parent: Module, qconfig) -> None:
        for child in parent.children():
            own = getattr(child, "qconfig", _UNSET)
            if own is _UNSET:
                child.qconfig = qconfig
                own = qconfig
            visit(child, own)

    module.qconfig = inherited
    visit(module, inherited)


def _swap(module: Module, mapping: dict[type, type]) -> None:
    for name, child in list(module.named_children()):
        qconfig = getattr(child, "qconfig", None)
        target: Any = mapping.get(type(child))  # a QAT class with from_float
        if qconfig is not None and target is not None:
            setattr(module, name, target.from_float(child, qconfig))
            continue
        if qconfig is not None and isinstance(child, QuantStub) and "activation_post_process" not in child._modules:
            child.activation_post_process = qconfig.activation()
        _swap(child, mapping)


def prepare_qat(
    model: Module, mapping: dict[type, type] | None = None, inplace: bool = False, *, qconfig: QConfig | None = None
) -> Module:
    """Swaps Linear and Conv2d layers for fake-quantized ones and arms the QuantStubs, for QAT.

    Which layers: every one whose ``qconfig`` (its own, or inherited from its parents as
    :func:`propagate_qconfig_` does) is not None. The root's qconfig is ``qconfig`` if given,
    else ``model.qconfig`` if set, else :func:`get_default_qat_qconfig`.

    Args:
        model: the float model, in training mode.
        mapping: float module type -> QAT module type (default: Linear and Conv2d).
        inplace: change ``model`` itself instead of a deep copy.
        qconfig: the QConfig of the whole model (keyword only; PyTorch reads ``model.qconfig``).

    Returns:
        The prepared model; train it as usual, then :func:`convert` it before export.

    Example::

        >>> model = nn.Sequential(QuantStub(), nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> prepared = prepare_qat(model.train())
        >>> prepared[1]
        Linear(in_features=4, out_features=8, bias=True ...)
    """
    if not isinstance(model, Module):
        raise TypeError(f"prepare_qat: expected an nn.Module, got {type(model).__name__}")
    if qconfig is not None:
        _check_qconfig(qconfig, "prepare_qat")
    root_qconfig = qconfig or getattr(model, "qconfig", None) or get_default_qat_qconfig()
    if not inplace:
        model = copy.deepcopy(model)
    model.qconfig = root_qconfig
    propagate_qconfig_(model)
    _swap(model, mapping if mapping is not None else _DEFAULT_QAT_MODULE_MAPPING)
    return model


def convert(module: Module, mapping: dict | None = None, inplace: bool = False) -> Module:
    """Freezes a QAT model for inference and export: observers off, scales and zero points fixed, eval mode.

    onnxnn has no integer modules of its own: the converted model still computes with
    fake-quantized floats, and ``export.to_onnx`` writes it as a QDQ model (a QuantizeLinear ->
    DequantizeLinear pair per quantized value, weights included, weights stored in float) that
    onnxruntime runs with int8 kernels.

    Args:
        module: a model prepared by :func:`prepare_qat` and trained.
        mapping: accepted for PyTorch compatibility; must be None.
        inplace: change ``module`` itself instead of a deep copy.

    Returns:
        The converted model, in eval mode.
    """
    if mapping is not None:
        raise ValueError("convert: a module mapping is not supported; the converted model keeps its QAT modules")
    if not inplace:
        module = copy.deepcopy(module)
    module.apply(disable_observer)
    return module.eval()
