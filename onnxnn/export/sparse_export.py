"""Exporting a pruned model as a smaller ONNX file: ``to_onnx_pruned``.

Two savings, both exact (the exported graph computes the pruned module's outputs):

- Structured pruning: output channels of a Linear/Conv2d that pruning made useless are removed
  with the matching input channels of the next layer (``channel_pruning.remove_zero_channels``).
- Unstructured pruning: a weight with zeros is stored sparsely. ``sparse_format="bitmask"`` (the
  default) stores the nonzero values and one bit per entry, and a few standard ops (BitShift,
  BitwiseAnd, NonZero, ScatterND) rebuild the dense weight; onnxruntime folds them into a constant
  when the session loads. That costs ``nonzeros * itemsize + entries / 8`` bytes, so a weight half
  zeros takes about 53% of its dense size. ``sparse_format="coo"`` uses ONNX's own
  ``graph.sparse_initializer`` (values and int64 flat indices, densified by onnxruntime at load):
  12 bytes a nonzero float, smaller only beyond 2/3 zeros; its graphs pass ``onnx.checker`` but not
  ONNX's shape inference, which does not read sparse initializers.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..nn.modules.module import Module
from ..nn.utils.prune import BasePruningMethod, remove
from .channel_pruning import remove_zero_channels
from .onnx_export import to_onnx, write_model

__all__ = ["to_onnx_pruned", "SPARSE_FORMATS"]

SPARSE_FORMATS = ("bitmask", "coo", None)


def _remove_reparametrizations(model: Module) -> list[str]:
    """Makes every pruning of ``model`` permanent; returns the pruned tensors' ``state_dict`` keys."""
    keys = []
    for prefix, module in model.named_modules():
        for hook in list(module._forward_pre_hooks.values()):
            if isinstance(hook, BasePruningMethod) and hook._tensor_name is not None:
                remove(module, hook._tensor_name)
                keys.append(f"{prefix}.{hook._tensor_name}" if prefix else hook._tensor_name)
    return keys


def _copy_without_pruned_attributes(model: Module) -> Module:
    """A deep copy of ``model``; the pruned tensors its hooks computed are left out of the copy.

    Those are results of an op (``mask * orig``), which ``deepcopy`` refuses; the copy's
    ``prune.remove`` recomputes them.
    """
    stashed = []
    for module in model.modules():
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name in module.__dict__:
                stashed.append((module, hook._tensor_name, module.__dict__.pop(hook._tensor_name)))
    try:
        return copy.deepcopy(model)
    finally:
        for module, name, value in stashed:
            module.__dict__[name] = value


# The small constants every bitmask decoder reads, stored once per model.
_SHARED: dict[str, np.ndarray] = {
    # np.packbits puts the first entry in the highest bit: shift right by 7, 6, ..., 0.
    "onnxnn::sparse::bit_shifts": np.arange(7, -1, -1, dtype=np.uint8),
    "onnxnn::sparse::one": np.array([1], np.uint8),
    "onnxnn::sparse::axis_1": np.array([1], np.int64),
    "onnxnn::sparse::flat": np.array([-1], np.int64),
    "onnxnn::sparse::start": np.array([0], np.int64),
}


def _bitmask_decoder(name: str, values: np.ndarray) -> tuple[list, list]:
    """Initializers and nodes that rebuild the dense tensor ``name`` from its nonzero values and bits."""
    flat = values.reshape(-1)
    present = flat != 0
    stem = f"{name}::sparse"
    initializers = [
        numpy_helper.from_array(flat[present], f"{stem}::values"),
        numpy_helper.from_array(np.packbits(present), f"{stem}::bitmask"),
        numpy_helper.from_array(np.array([flat.size], np.int64), f"{stem}::numel"),
        numpy_helper.from_array(np.array(values.shape, np.int64), f"{stem}::shape"),
    ]
    shared = {key.rsplit("::", 1)[1]: key for key in _SHARED}
    zero = helper.make_tensor("zero", helper.np_dtype_to_tensor_dtype(values.dtype), [1], [0])
    # Short intermediate names (<name>::0 .. ::8): the decoder's own bytes count against the saving.
    nodes = [
        helper.make_node("Unsqueeze", [f"{stem}::bitmask", shared["axis_1"]], [f"{name}::0"]),
        helper.make_node("BitShift", [f"{name}::0", shared["bit_shifts"]], [f"{name}::1"], direction="RIGHT"),
        helper.make_node("BitwiseAnd", [f"{name}::1", shared["one"]], [f"{name}::2"]),
        helper.make_node("Reshape", [f"{name}::2", shared["flat"]], [f"{name}::3"]),
        helper.make_node("Slice", [f"{name}::3", shared["start"], f"{stem}::numel"], [f"{name}::4"]),
        helper.make_node("NonZero", [f"{name}::4"], [f"{name}::5"]),
        helper.make_node("Transpose", [f"{name}::5"], [f"{name}::6"], perm=[1, 0]),
        helper.make_node("ConstantOfShape", [f"{stem}::numel"], [f"{name}::7"], value=zero),
        helper.make_node("ScatterND", [f"{name}::7", f"{name}::6", f"{stem}::values"], [f"{name}::8"]),
        helper.make_node("Reshape", [f"{name}::8", f"{stem}::shape"], [name]),
    ]
    return initializers, nodes


def _coo_tensor(name: str, values: np.ndarray) -> onnx.SparseTensorProto:
    flat = values.reshape(-1)
    positions = np.flatnonzero(flat).astype(np.int64)
    return helper.make_sparse_tensor(
        numpy_helper.from_array(flat[positions], name),
        numpy_helper.from_array(positions, f"{name}::indices"),
        list(values.shape),
    )


def _store_sparsely(proto: onnx.ModelProto, keys: set[str] | None, sparse_format: str) -> list[str]:
    """Replaces each float initializer (of ``keys``, or any) whose sparse form is smaller.

    "Smaller" counts the serialized bytes of the sparse form (a bitmask decoder's nodes
    included) against the dense initializer's, so small weights stay dense.
    """
    graph = proto.graph
    kept, sparse_names, decoders = [], [], []
    for tensor in graph.initializer:
        values = numpy_helper.to_array(tensor)
        if (keys is not None and tensor.name not in keys) or values.dtype.kind != "f" or values.all():
            kept.append(tensor)
            continue
        if sparse_format == "coo":
            sparse = _coo_tensor(tensor.name, values)
            if sparse.ByteSize() < tensor.ByteSize():
                graph.sparse_initializer.append(sparse)
                sparse_names.append(tensor.name)
                continue
        else:
            initializers, nodes = _bitmask_decoder(tensor.name, values)
            cost = sum(item.ByteSize() for item in initializers) + sum(node.ByteSize() for node in nodes)
            if cost < tensor.ByteSize():
                kept.extend(initializers)
                decoders.extend(nodes)
                sparse_names.append(tensor.name)
                continue
        kept.append(tensor)
    if decoders:
        kept.extend(numpy_helper.from_array(array, key) for key, array in _SHARED.items())
    del graph.initializer[:]
    graph.initializer.extend(kept)
    # The decoders come first: every node reading a weight runs after it is rebuilt.
    recorded = list(graph.node)
    del graph.node[:]
    graph.node.extend(decoders + recorded)
    return sparse_names


def to_onnx_pruned(
    model: Module,
    args,
    f=None,
    *,
    remove_channels: bool = True,
    sparse_format: str | None = "bitmask",
    sparse_parameters: str = "pruned",
    **kwargs,
) -> onnx.ModelProto:
    """Exports a pruned module to a smaller ONNX model that computes the same outputs.

    The module itself is not changed: a copy has its prunings made permanent (``prune.remove``),
    loses the channels structured pruning emptied (``remove_channels``), and is exported with
    :func:`~onnxnn.export.to_onnx`; then the weights with zeros are stored sparsely.

    Args:
        model: the (pruned) module; exported in eval mode for channel removal.
        args: example inputs, as for ``to_onnx``.
        f: optional path or binary file to write the model to.
        remove_channels: remove the output channels of a Linear/Conv2d whose weights are all zero,
            with the matching input channels of the next Linear/Conv2d of the same ``Sequential``
            (BatchNorm and activations between them included); needs ``model.eval()``.
        sparse_format: ``"bitmask"`` (nonzero values and a bit per entry, rebuilt by standard
            ops), ``"coo"`` (ONNX ``sparse_initializer``) or ``None`` (dense weights).
        sparse_parameters: ``"pruned"`` (the tensors that carry a pruning) or ``"all"`` (every
            float weight with enough zeros, e.g. pruned earlier and made permanent).
        kwargs: the other arguments of ``to_onnx`` (``input_names``, ``dynamic_axes``, ...).

    Returns:
        The ``onnx.ModelProto``.

    Example::

        >>> net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
        >>> prune.ln_structured(net[0], "weight", amount=0.5, n=2, dim=0)
        >>> prune.l1_unstructured(net[2], "weight", amount=0.7)
        >>> proto = onnxnn.export.to_onnx_pruned(net, onnxnn.randn(1, 64), "net.onnx")
    """
    if sparse_format not in SPARSE_FORMATS:
        raise ValueError(f"to_onnx_pruned: sparse_format must be one of {SPARSE_FORMATS}, got {sparse_format!r}")
    if sparse_parameters not in ("pruned", "all"):
        raise ValueError(f"to_onnx_pruned: sparse_parameters must be 'pruned' or 'all', got {sparse_parameters!r}")
    if not isinstance(model, Module):
        raise TypeError(f"to_onnx_pruned: model must be an onnxnn.nn.Module, got {type(model).__name__}")
    copied = _copy_without_pruned_attributes(model)
    pruned_keys = _remove_reparametrizations(copied)
    if remove_channels:
        if copied.training:
            warnings.warn(
                "to_onnx_pruned: the model is in training mode, so no channel is removed (batch "
                "statistics would change). Call model.eval() first.",
                UserWarning,
                stacklevel=2,
            )
        else:
            remove_zero_channels(copied)
    proto = to_onnx(copied, args, **kwargs)
    if sparse_format is not None:
        keys = set(pruned_keys) if sparse_parameters == "pruned" else None
        _store_sparsely(proto, keys, sparse_format)
        # ONNX's shape inference does not read sparse initializers, so "coo" gets the basic check.
        onnx.checker.check_model(proto, full_check=sparse_format == "bitmask")
    if f is not None:
        write_model(proto, f, kwargs.get("external_data"))
    return proto
