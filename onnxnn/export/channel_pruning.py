"""Removing the channels structured pruning zeroed: smaller layers that compute the same outputs.

In a ``Sequential`` chain ``Linear -> (channel-wise modules) -> Linear`` or
``Conv2d -> (BatchNorm2d, activations, MaxPool2d/AvgPool2d) -> Conv2d``, an output channel of the first layer can go,
together with the matching input channel of the second, when

- the second layer ignores it (its input column is all zero), or
- its weight row is all zero, so the channel is the constant ``c = after(bias)`` (``after``: the
  channel-wise modules between the layers), and the second layer sees that constant the same way
  everywhere: ``c == 0``, or the second layer is a Linear, or a Conv2d without padding. Then the
  constant's contribution is folded into the second layer's bias.

The modules are changed in place; :func:`onnxnn.export.to_onnx_pruned` calls this on a copy.
"""

from __future__ import annotations

import numpy as np

from ..nn.modules.activation import (
    CELU,
    ELU,
    GELU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    Mish,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Tanh,
)
from ..nn.modules.batchnorm import BatchNorm1d, BatchNorm2d
from ..nn.modules.container import Sequential
from ..nn.modules.conv import Conv2d
from ..nn.modules.dropout import Dropout, Dropout1d, Dropout2d
from ..nn.modules.linear import Identity, Linear
from ..nn.modules.module import Module
from ..nn.modules.pooling import AvgPool2d, MaxPool2d
from ..nn.parameter import Parameter
from ..runtime.grad_mode import no_grad
from ..runtime.internal import constant_tensor

__all__ = ["remove_zero_channels"]

# Modules that act on each channel alone (in eval mode), so a channel can be dropped through them.
_ELEMENTWISE = (
    ReLU,
    ReLU6,
    LeakyReLU,
    Sigmoid,
    Tanh,
    GELU,
    ELU,
    CELU,
    SELU,
    SiLU,
    Mish,
    Hardtanh,
    Hardsigmoid,
    Hardswish,
    Identity,
    Dropout,
    Dropout1d,
    Dropout2d,
)


def _array(tensor) -> np.ndarray:
    return np.array(tensor.numpy(force=True))


def _is_layer(module: Module) -> bool:
    return type(module) is Linear or (type(module) is Conv2d and module.groups == 1)


def _between_fits(first: Module, module: Module) -> bool:
    if isinstance(first, Linear):
        return isinstance(module, _ELEMENTWISE) or (type(module) is BatchNorm1d and module.track_running_stats)
    # Pooling acts on each channel alone; whether it keeps a constant map constant is checked.
    pooling = isinstance(module, (MaxPool2d, AvgPool2d))
    return isinstance(module, _ELEMENTWISE) or pooling or (type(module) is BatchNorm2d and module.track_running_stats)


def _chains(sequential: Sequential) -> list[tuple[Module, list[Module], Module]]:
    """The (first layer, channel-wise modules between, second layer) triples of a Sequential."""
    layers = list(sequential)
    found = []
    for start, first in enumerate(layers):
        if not _is_layer(first):
            continue
        position = start + 1
        while position < len(layers) and _between_fits(first, layers[position]):
            position += 1
        if position < len(layers) and type(layers[position]) is type(first) and _is_layer(layers[position]):
            found.append((first, layers[start + 1 : position], layers[position]))
    return found


# The side of the constant maps pushed through the modules between two convolutions.
_PROBE_SIZE = 16


def _dead_channel_values(first: Module, between: list[Module]) -> tuple[np.ndarray, np.ndarray]:
    """What each output channel of ``first`` becomes after ``between`` when its weights are all zero.

    Returns the value of each channel and whether it is the same at every position (a pooling
    with zero padding makes a constant map's border differ).
    """
    channels = first.weight.shape[0]
    bias = _array(first.bias) if first.bias is not None else np.zeros(channels, first.weight.dtype.numpy_dtype)
    if isinstance(first, Linear):
        probe = bias.reshape(1, channels)
    else:
        probe = np.broadcast_to(bias.reshape(1, channels, 1, 1), (1, channels, _PROBE_SIZE, _PROBE_SIZE))
    value = constant_tensor(np.asarray(probe, order="C"), first.weight.dtype, first.weight.device)
    with no_grad():
        for module in between:
            value = module(value)
    per_channel = _array(value).reshape(channels, -1)
    return per_channel[:, 0], (per_channel == per_channel[:, :1]).all(axis=1)


def _padding_free(layer: Module) -> bool:
    if isinstance(layer, Linear) or layer.padding == "valid":
        return True
    return not isinstance(layer.padding, str) and all(size == 0 for size in layer.padding)


def _set_parameter(module: Module, name: str, values: np.ndarray, like) -> None:
    data = constant_tensor(np.asarray(values, order="C"), like.dtype, like.device)
    setattr(module, name, Parameter(data, requires_grad=like.requires_grad))


def _shrink(first: Module, between: list[Module], second: Module) -> int:
    """Removes the channels between ``first`` and ``second`` that can go; returns how many went."""
    first_weight, second_weight = _array(first.weight), _array(second.weight)
    channels = first_weight.shape[0]
    zero_rows = ~first_weight.reshape(channels, -1).any(axis=1)
    second_columns = np.moveaxis(second_weight, 1, 0).reshape(channels, -1)
    zero_columns = ~second_columns.any(axis=1)
    constants, uniform = _dead_channel_values(first, between)
    foldable = zero_rows & uniform & ((constants == 0) | _padding_free(second))
    removable = zero_columns | foldable
    if removable.all():
        removable[0] = False  # a layer keeps one channel: zero-sized tensors would not export
    if not removable.any():
        return 0
    keep = ~removable
    # A folded channel adds constant * (sum of its weights over the kernel) to each output.
    folded = foldable & removable & ~zero_columns
    if folded.any():
        shift = (second_columns[folded].T.astype(np.float64) * constants[folded]).sum(axis=1)
        sum_per_output = shift.reshape(second_weight.shape[0], -1).sum(axis=1)
        if np.any(sum_per_output != 0):
            if second.bias is None:
                second.bias = Parameter(constant_tensor(np.zeros(second_weight.shape[0]), second.weight.dtype))
            bias = _array(second.bias).astype(np.float64) + sum_per_output
            _set_parameter(second, "bias", bias.astype(second_weight.dtype), second.bias)

    _set_parameter(first, "weight", first_weight[keep], first.weight)
    if first.bias is not None:
        _set_parameter(first, "bias", _array(first.bias)[keep], first.bias)
    for module in between:
        if isinstance(module, (BatchNorm1d, BatchNorm2d)):
            if module.affine:
                _set_parameter(module, "weight", _array(module.weight)[keep], module.weight)
                _set_parameter(module, "bias", _array(module.bias)[keep], module.bias)
            for name in ("running_mean", "running_var"):
                buffer = getattr(module, name)
                setattr(module, name, constant_tensor(_array(buffer)[keep], buffer.dtype, buffer.device))
            module.num_features = int(keep.sum())
    _set_parameter(second, "weight", second_weight[:, keep], second.weight)
    if isinstance(first, Linear):
        first.out_features = second.in_features = int(keep.sum())
    else:
        first.out_channels = second.in_channels = int(keep.sum())
    return int(removable.sum())


def remove_zero_channels(model: Module) -> int:
    """Removes, in every ``Sequential`` of ``model``, the channels structured pruning made useless.

    The model must be in eval mode (batch norms fold with their running statistics) and hold no
    pruning reparametrization (call ``prune.remove`` first). Outputs stay the same up to float
    rounding.

    Args:
        model: the module to shrink, in place.

    Returns:
        The number of channels removed.
    """
    removed = 0
    for module in list(model.modules()):
        if isinstance(module, Sequential):
            for first, between, second in _chains(module):
                removed += _shrink(first, between, second)
    return removed
