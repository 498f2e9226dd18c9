"""ONNX node attributes (``AttributeProto``) as the Python values ``apply_op`` and importers take.

Ints, floats and strings become Python scalars, their repeated forms lists, tensors numpy arrays,
sparse tensors dense numpy arrays; graph attributes (the bodies of ``If``, ``Loop``, ``Scan``) are
returned as ``GraphProto`` and compiled by the caller.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, numpy_helper

from ..errors import ModelLoadError
from ..ir.attributes import attribute_subgraphs  # re-exported: the importer's walkers use it from here
from .limits import allocation_limit, nbytes

__all__ = ["attribute_value", "attribute_subgraphs", "node_attributes", "tensor_to_array", "sparse_to_dense"]


def tensor_to_array(tensor: onnx.TensorProto) -> np.ndarray:
    """A ``TensorProto``'s data as a numpy array.

    External data must have been read already (``external_data.load_external_data`` checks
    where it comes from): reading it here would resolve the location against the working
    directory.

    Raises:
        ModelLoadError: the tensor's data is still external.
    """
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise ModelLoadError(
            f"tensor '{tensor.name}' keeps its data in an external file that was not read through the model's folder"
        )
    return numpy_helper.to_array(tensor)


def sparse_to_dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A ``SparseTensorProto`` as a dense numpy array.

    Raises:
        ModelLoadError: naming the tensor, when its values, indices and dims disagree, an index is
            out of range, or the dense tensor would exceed what this process may allocate.
    """
    name = sparse.values.name
    try:
        values = tensor_to_array(sparse.values).reshape(-1)
        indices = tensor_to_array(sparse.indices)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as error:
        raise ModelLoadError(f"sparse tensor '{name}' cannot be read: {type(error).__name__}: {error}") from None
    dims = tuple(int(size) for size in sparse.dims)
    count = 1
    for size in dims:
        count *= size
    problem = None
    if any(size < 0 for size in dims):
        problem = f"negative dims {list(dims)}"
    elif indices.dtype.kind not in "iu":
        problem = f"indices of type {indices.dtype}, not integers"
    elif not (
        indices.ndim == 1
        and len(indices) == len(values)
        or indices.ndim == 2
        and indices.shape == (len(values), len(dims))
    ):
        problem = (
            f"indices of shape {list(indices.shape)} for {len(values)} values in {len(dims)} dims "
            f"(ONNX asks for [{len(values)}] or [{len(values)}, {len(dims)}])"
        )
    elif indices.size and (
        indices.min() < 0
        or (indices.ndim == 1 and indices.max() >= count)
        or (indices.ndim == 2 and np.any(indices >= np.asarray(dims)))
    ):
        problem = f"an index out of range for dims {list(dims)}"
    elif nbytes(dims, values.dtype.itemsize) > allocation_limit():
        problem = (
            f"dims {list(dims)}, whose dense form ({nbytes(dims, values.dtype.itemsize):,} bytes) is more "
            "than this process may allocate"
        )
    if problem is not None:
        raise ModelLoadError(f"sparse tensor '{name}' has {problem}")
    dense = np.zeros(count, dtype=values.dtype)
    indices = indices.astype(np.int64)
    if indices.ndim == 2:  # one row of coordinates per value
        indices = np.ravel_multi_index(tuple(indices.T), dims) if indices.size else indices.reshape(-1)
    dense[indices.reshape(-1)] = values
    return dense.reshape(dims)


def _decode(text: bytes, name: str) -> str:
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ModelLoadError(f"string attribute '{name}' is not valid UTF-8 ({error})") from None


def attribute_value(attribute: AttributeProto) -> Any:
    """Converts one ``AttributeProto`` to a Python value.

    Raises:
        NotImplementedError: the attribute refers to a function attribute (``ref_attr_name``)
            outside a function body, or has a type with no Python form here.
    """
    if attribute.ref_attr_name:
        raise NotImplementedError(
            f"attribute '{attribute.name}' refers to the function attribute "
            f"'{attribute.ref_attr_name}', which only a function body may do"
        )
    kind = attribute.type
    if kind == AttributeProto.FLOAT:
        return float(attribute.f)
    if kind == AttributeProto.INT:
        return int(attribute.i)
    if kind == AttributeProto.STRING:
        return _decode(attribute.s, attribute.name)
    if kind == AttributeProto.TENSOR:
        return tensor_to_array(attribute.t)
    if kind == AttributeProto.SPARSE_TENSOR:
        return sparse_to_dense(attribute.sparse_tensor)
    if kind == AttributeProto.GRAPH:
        return attribute.g
    if kind == AttributeProto.TYPE_PROTO:
        return attribute.tp
    if kind == AttributeProto.FLOATS:
        return [float(value) for value in attribute.floats]
    if kind == AttributeProto.INTS:
        return [int(value) for value in attribute.ints]
    if kind == AttributeProto.STRINGS:
        return [_decode(value, attribute.name) for value in attribute.strings]
    if kind == AttributeProto.TENSORS:
        return [tensor_to_array(value) for value in attribute.tensors]
    if kind == AttributeProto.SPARSE_TENSORS:
        return [sparse_to_dense(value) for value in attribute.sparse_tensors]
    if kind == AttributeProto.GRAPHS:
        return list(attribute.graphs)
    if kind == AttributeProto.TYPE_PROTOS:
        return list(attribute.type_protos)
    raise NotImplementedError(
        f"attribute '{attribute.name}' has type {AttributeProto.AttributeType.Name(kind)}, which onnxnn cannot read"
    )


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """All attributes of ``node`` as ``{name: python value}``."""
    return {attribute.name: attribute_value(attribute) for attribute in node.attribute}
