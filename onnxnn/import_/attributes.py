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

__all__ = ["attribute_value", "node_attributes", "tensor_to_array", "sparse_to_dense"]


def tensor_to_array(tensor: onnx.TensorProto, base_dir: str | None = None) -> np.ndarray:
    """A ``TensorProto``'s data as a numpy array (external data read from ``base_dir``)."""
    return numpy_helper.to_array(tensor, base_dir or "")


def sparse_to_dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """A ``SparseTensorProto`` as a dense numpy array."""
    values = tensor_to_array(sparse.values)
    indices = tensor_to_array(sparse.indices).astype(np.int64)
    dims = tuple(sparse.dims)
    dense = np.zeros(int(np.prod(dims, dtype=np.int64)), dtype=values.dtype)
    if indices.ndim == 2:  # one row of coordinates per value
        indices = np.ravel_multi_index(tuple(indices.T), dims) if indices.size else indices.reshape(-1)
    dense[indices.reshape(-1)] = values.reshape(-1)
    return dense.reshape(dims)


def _decode(text: bytes) -> str | bytes:
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return text


def attribute_value(attribute: AttributeProto) -> Any:
    """Converts one ``AttributeProto`` to a Python value.

    Raises:
        NotImplementedError: the attribute refers to a function attribute (``ref_attr_name``)
            outside a function body, or has a type with no Python form here.
    """
    if attribute.ref_attr_name:
        raise NotImplementedError(f"attribute '{attribute.name}' refers to the function attribute "
                                  f"'{attribute.ref_attr_name}', which only a function body may do")
    kind = attribute.type
    if kind == AttributeProto.FLOAT:
        return float(attribute.f)
    if kind == AttributeProto.INT:
        return int(attribute.i)
    if kind == AttributeProto.STRING:
        return _decode(attribute.s)
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
        return [_decode(value) for value in attribute.strings]
    if kind == AttributeProto.TENSORS:
        return [tensor_to_array(value) for value in attribute.tensors]
    if kind == AttributeProto.SPARSE_TENSORS:
        return [sparse_to_dense(value) for value in attribute.sparse_tensors]
    if kind == AttributeProto.GRAPHS:
        return list(attribute.graphs)
    if kind == AttributeProto.TYPE_PROTOS:
        return list(attribute.type_protos)
    raise NotImplementedError(f"attribute '{attribute.name}' has type "
                              f"{AttributeProto.AttributeType.Name(kind)}, which onnxnn cannot read")


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """All attributes of ``node`` as ``{name: python value}``."""
    return {attribute.name: attribute_value(attribute) for attribute in node.attribute}
