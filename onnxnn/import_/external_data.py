"""External tensor data: every tensor of a model is found, checked and read the same way.

ONNX lets any ``TensorProto`` keep its bytes in a file named by ``external_data`` entries:
initializers, the values *and* indices of sparse initializers, tensors in node attributes, and all
of these inside subgraphs (``If``/``Loop``/``Scan`` bodies), model-local functions and training
graphs. One walk finds them all and one check applies to each before a byte is read: the location
is relative to the model's own folder (never the process's working directory), is not absolute,
does not escape that folder by ``..`` or by a symbolic link (the resolved path must stay inside the
resolved folder), names a regular file, and ``offset``/``length`` select exactly the bytes the
tensor's dims and element type need, inside the file. Only then are the bytes read into
``raw_data``, so nothing is read for a model that is refused.
"""

from __future__ import annotations

import math
import os
from typing import Iterator

import onnx
from onnx import TensorProto

from ..errors import ModelLoadError
from .attributes import attribute_subgraphs

__all__ = ["model_tensors", "has_external_data", "load_external_data"]

# Element types packed below one byte per element.
_PACKED_BITS: dict[int, int] = {TensorProto.UINT4: 4, TensorProto.INT4: 4, TensorProto.FLOAT4E2M1: 4}
for _name, _bits in (("UINT2", 2), ("INT2", 2), ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6)):
    if hasattr(TensorProto, _name):
        _PACKED_BITS[getattr(TensorProto, _name)] = _bits


def _attribute_tensors(node: onnx.NodeProto, where: str) -> Iterator[tuple[TensorProto, str]]:
    label = f"node '{node.name}' ({node.op_type})" if node.name else f"a {node.op_type} node"
    for attribute in node.attribute:
        here = f"attribute '{attribute.name}' of {label}{where}"
        if attribute.HasField("t"):
            yield attribute.t, here
        for tensor in attribute.tensors:
            yield tensor, here
        sparse = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
        for item in sparse + list(attribute.sparse_tensors):
            yield item.values, f"{here} (sparse values)"
            yield item.indices, f"{here} (sparse indices)"
        for subgraph in attribute_subgraphs(attribute):
            yield from _graph_tensors(subgraph, f" in the body '{subgraph.name}' of {label}{where}")


def _graph_tensors(graph: onnx.GraphProto, where: str = "") -> Iterator[tuple[TensorProto, str]]:
    for tensor in graph.initializer:
        yield tensor, f"initializer '{tensor.name}'{where}"
    for sparse in graph.sparse_initializer:
        yield sparse.values, f"sparse_initializer '{sparse.values.name}'{where} (values)"
        yield sparse.indices, f"sparse_initializer '{sparse.values.name}'{where} (indices)"
    for node in graph.node:
        yield from _attribute_tensors(node, where)


def model_tensors(model: onnx.ModelProto) -> Iterator[tuple[TensorProto, str]]:
    """Every ``TensorProto`` of the model with a phrase saying where it is (for messages)."""
    yield from _graph_tensors(model.graph)
    for function in model.functions:
        where = f" in function '{function.name}'"
        for node in function.node:
            yield from _attribute_tensors(node, where)
        for attribute in function.attribute_proto:
            if attribute.HasField("t"):
                yield attribute.t, f"default of attribute '{attribute.name}'{where}"
    for index, info in enumerate(model.training_info):
        yield from _graph_tensors(info.initialization, f" in training_info[{index}].initialization")
        yield from _graph_tensors(info.algorithm, f" in training_info[{index}].algorithm")


def _is_external(tensor: TensorProto) -> bool:
    return tensor.data_location == TensorProto.EXTERNAL


def has_external_data(model: onnx.ModelProto) -> bool:
    """Whether any tensor of the model keeps its bytes in an external file."""
    return any(_is_external(tensor) for tensor, _ in model_tensors(model))


def _nbytes(tensor: TensorProto, where: str, source: str) -> int:
    if any(size < 0 for size in tensor.dims):
        raise ModelLoadError(f"{source}: {where} has negative dims {list(tensor.dims)}")
    count = math.prod(tensor.dims)
    kind = tensor.data_type
    if kind in _PACKED_BITS:
        return (count * _PACKED_BITS[kind] + 7) // 8
    if kind in (TensorProto.UNDEFINED, TensorProto.STRING):
        raise ModelLoadError(
            f"{source}: {where} is stored externally with element type "
            f"{TensorProto.DataType.Name(kind)}, which has no fixed size"
        )
    try:
        return count * onnx.helper.tensor_dtype_to_np_dtype(kind).itemsize
    except (KeyError, ValueError, TypeError):
        raise ModelLoadError(f"{source}: {where} has the unknown element type {kind}") from None


def _entry_int(entries: dict, key: str, where: str, source: str) -> int | None:
    text = entries.get(key)
    if text is None:
        return None
    if not text.isdigit():  # no sign, no spaces, no '1e3': a byte count
        raise ModelLoadError(f"{source}: external data '{key}' of {where} is {text!r}, not a non-negative integer")
    return int(text)


def _resolve(location: str, root: str, where: str, source: str) -> str:
    if not location or "\0" in location:
        raise ModelLoadError(f"{source}: {where} is stored externally but names no valid location ({location!r})")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or os.path.splitdrive(location)[0]:
        raise ModelLoadError(
            f"{source}: external data location '{location}' of {where} is an absolute path; "
            "locations must be relative to the model's folder"
        )
    path = os.path.realpath(os.path.join(root, location))
    # Resolving first catches '..' and symbolic links alike: what counts is where the bytes are.
    if os.path.commonpath([root, path]) != root:
        raise ModelLoadError(
            f"{source}: external data location '{location}' of {where} points outside the model's folder '{root}'"
        )
    if not os.path.isfile(path):
        raise ModelLoadError(
            f"{source}: external data file '{location}' of {where} was not found in the "
            f"model's folder (looked for '{path}')"
        )
    return path


def load_external_data(model: onnx.ModelProto, base_dir: str | None, source: str) -> None:
    """Checks every external tensor of ``model``, then reads their bytes into ``raw_data``.

    Args:
        model: the model, changed in place only once every tensor has passed its check.
        base_dir: the model's folder; None when the model came as bytes or a proto without one.
        source: the file name or "the given bytes", for messages.

    Raises:
        ModelLoadError: naming the tensor and what is wrong with its external data.
    """
    external = [(tensor, where) for tensor, where in model_tensors(model) if _is_external(tensor)]
    if not external:
        return
    if base_dir is None:
        raise ModelLoadError(
            f"{source}: the model keeps tensor data in external files ({external[0][1]} in "
            f"'{_location(external[0][0])}'), but was not given as a file: pass "
            "base_dir= (the folder holding those files) to say where to read them"
        )
    root = os.path.realpath(base_dir)
    plan = []
    for tensor, where in external:
        entries = {}
        for entry in tensor.external_data:
            entries[entry.key] = entry.value
        path = _resolve(entries.get("location", ""), root, where, source)
        offset = _entry_int(entries, "offset", where, source) or 0
        length = _entry_int(entries, "length", where, source)
        needed = _nbytes(tensor, where, source)
        if length is not None and length != needed:
            raise ModelLoadError(
                f"{source}: external data of {where} has length {length}, but its dims "
                f"{list(tensor.dims)} and element type need {needed} bytes"
            )
        size = os.path.getsize(path)
        if offset + needed > size:
            raise ModelLoadError(
                f"{source}: external data of {where} asks for bytes {offset}..{offset + needed} "
                f"of '{entries['location']}', which holds only {size} bytes"
            )
        plan.append((tensor, path, offset, needed))
    for tensor, path, offset, needed in plan:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                data = handle.read(needed)
        except OSError as error:
            raise ModelLoadError(f"{source}: reading external data of tensor '{tensor.name}' failed: {error}") from None
        if len(data) != needed:
            raise ModelLoadError(f"{source}: external data file '{path}' changed while it was read")
        tensor.raw_data = data
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _location(tensor: TensorProto) -> str:
    return next((entry.value for entry in tensor.external_data if entry.key == "location"), "")
