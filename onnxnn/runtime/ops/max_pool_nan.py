"""A floating ``MaxPool`` or ``GlobalMaxPool`` in onnxnn's sessions: NaN wins a window, as in PyTorch.

PyTorch's max pooling returns NaN for a window holding one (and, with indices, the position of the
window's last NaN in row-major order); onnxruntime's kernels (1.31) skip NaN, and a window of NaN
alone gives the dtype's lowest value. A diverging network's NaN activations then came out of a pool
as finite numbers and its loss stayed finite. onnxnn records the standard op (its kernels, and the
compiled loop of kernels/pooling_loops.c, propagate NaN themselves) and its CPU sessions run it as
the pool of ``x`` with a pool of the NaN flags beside it, the flags selecting NaN where a window had one:

- values only: ``Where(MaxPool(Cast(IsNaN(x), uint8)) != 0, NaN, MaxPool(x))``; the flags' pool has
  the node's own attributes (kernel, strides, pads, dilations, ceil_mode), so it sees every window;
- with indices: the flags are numbered, ``IsNaN(x) * (1 + position in the plane)``, and their pool's
  Indices output names the window's last NaN, which replaces onnxruntime's index where the window had one;
- ``GlobalMaxPool``: the flags' maximum over the spatial axes (``ReduceMax``).

The flags cost about three passes over a pool's input (a ResNet's one 3x3 pool, next to its
convolutions, is noise); integer pools hold no NaN and run as recorded. Exports keep the plain node,
as ``torch.onnx.export`` writes it: a standard ONNX MaxPool, read back by ``from_onnx`` as one op
(onnxruntime serving either file skips NaN alike).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...ir.model_building import onnx_attribute_value
from ...ir.registry import session_lowerings

__all__: list[str] = []

# Flag positions stay exact in float32 up to 2**24; larger planes number them in float64.
_FLOAT32_EXACT_POSITIONS = 1 << 24


def _propagated(values: str, had_nan: str, output: str, fresh_name) -> tuple[list, list]:
    """``output = Where(had_nan, NaN, values)``, NaN in ``values``' dtype."""
    nan = fresh_name("nan")
    nan_like = fresh_name("nan_like")
    return [
        helper.make_node("CastLike", [nan, values], [nan_like], name=fresh_name("CastLike")),
        helper.make_node("Where", [had_nan, nan_like, values], [output], name=fresh_name("Where")),
    ], [numpy_helper.from_array(np.array(np.nan, np.float32), nan)]


@session_lowerings.register("MaxPool")
def _max_pool(node, input_names: list, output_names: list, fresh_name, embedded=None):
    x = node.inputs[0]
    if not x.dtype.is_floating_point:
        return None
    attributes = {key: onnx_attribute_value(value) for key, value in node.attrs.items()}
    with_indices = len(output_names) > 1 and bool(output_names[1])
    pooled = fresh_name("pooled")
    nodes = [
        helper.make_node(
            "MaxPool",
            input_names[:1],
            [pooled, fresh_name("indices")] if with_indices else [pooled],
            name=fresh_name("MaxPool"),
            **attributes,
        ),
        helper.make_node("IsNaN", input_names[:1], [is_nan := fresh_name("is_nan")], name=fresh_name("IsNaN")),
    ]
    initializers = []
    had_nan = fresh_name("had_nan")
    if with_indices:
        plane = x.shape[2:]
        size = int(np.prod(plane))
        dtype = np.float32 if size < _FLOAT32_EXACT_POSITIONS else np.float64
        positions = fresh_name("positions")
        initializers.append(numpy_helper.from_array(np.arange(1, size + 1, dtype=dtype).reshape(plane), positions))
        flags, numbered, last, last_index = (fresh_name(stem) for stem in ("flags", "numbered", "last", "last_index"))
        zero = fresh_name("zero")
        initializers.append(numpy_helper.from_array(np.array(0, dtype), zero))
        nodes += [
            helper.make_node(
                "Cast", [is_nan], [flags], name=fresh_name("Cast"), to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
            ),
            helper.make_node("Mul", [flags, positions], [numbered], name=fresh_name("Mul")),
            helper.make_node("MaxPool", [numbered], [last, last_index], name=fresh_name("MaxPool"), **attributes),
            helper.make_node("Greater", [last, zero], [had_nan], name=fresh_name("Greater")),
            helper.make_node(
                "Where", [had_nan, last_index, nodes[0].output[1]], [output_names[1]], name=fresh_name("Where")
            ),
        ]
    else:
        flags, any_flag = fresh_name("flags"), fresh_name("any_flag")
        nodes += [
            helper.make_node("Cast", [is_nan], [flags], name=fresh_name("Cast"), to=TensorProto.UINT8),
            helper.make_node("MaxPool", [flags], [any_flag], name=fresh_name("MaxPool"), **attributes),
            helper.make_node("Cast", [any_flag], [had_nan], name=fresh_name("Cast"), to=TensorProto.BOOL),
        ]
    tail, tail_initializers = _propagated(pooled, had_nan, output_names[0], fresh_name)
    return nodes + tail, initializers + tail_initializers


@session_lowerings.register("GlobalMaxPool")
def _global_max_pool(node, input_names: list, output_names: list, fresh_name, embedded=None):
    x = node.inputs[0]
    if not x.dtype.is_floating_point:
        return None
    pooled, is_nan, had_nan, axes = (fresh_name(stem) for stem in ("pooled", "is_nan", "had_nan", "axes"))
    nodes = [
        helper.make_node("GlobalMaxPool", input_names[:1], [pooled], name=fresh_name("GlobalMaxPool")),
        helper.make_node("IsNaN", input_names[:1], [is_nan], name=fresh_name("IsNaN")),
        helper.make_node(
            "Cast", [is_nan], [flags := fresh_name("flags")], name=fresh_name("Cast"), to=TensorProto.UINT8
        ),
        helper.make_node(
            "ReduceMax", [flags, axes], [any_flag := fresh_name("any_flag")], name=fresh_name("ReduceMax"), keepdims=1
        ),
        helper.make_node("Cast", [any_flag], [had_nan], name=fresh_name("Cast"), to=TensorProto.BOOL),
    ]
    spatial = numpy_helper.from_array(np.arange(2, len(x.shape), dtype=np.int64), axes)
    tail, tail_initializers = _propagated(pooled, had_nan, output_names[0], fresh_name)
    return nodes + tail, [spatial] + tail_initializers
