"""A floating ``MaxPool`` or ``GlobalMaxPool`` in onnxnn's sessions: NaN wins a window, as in PyTorch.

PyTorch's max pooling returns NaN for a window holding one (and, with indices, the position of the
window's last NaN in row-major order); onnxruntime's kernels (1.31) skip NaN, and a window of NaN
alone gives the dtype's lowest value. A diverging network's NaN activations then came out of a pool
as finite numbers and its loss stayed finite. onnxnn records the standard op (its kernels, and the
compiled loop of kernels/pooling_loops.c, propagate NaN themselves) and its CPU sessions run it as
the pool of ``x`` beside a second pool that finds the windows holding NaN:

- values only, float32: the average of ``x * x`` over the same windows (the node's own kernel,
  strides, pads, dilations, ceil_mode) is NaN exactly where a window holds NaN: the squares are never
  negative, so infinities add up to infinity, never to NaN; ``Where(IsNaN(that), that, MaxPool(x))``.
  Squares and an average pool stay in onnxruntime's blocked channel layout around a convolution,
  where IsNaN flags would be reordered out of it and back: resnet18's first convolution, ReLU and
  3x3 pool, one thread, 2.1 ms with the plain pool, 3.0 ms so, 3.7 with float flags and 7.5 with
  uint8 flags (onnxruntime's uint8 MaxPool is a generic loop). A pool of a ReLU's output (most pools)
  averages ``x`` itself: values never negative hold no infinities of both signs either, and the
  squares' pass is saved (resnet18's first convolution, ReLU, pool and next convolution, one thread,
  1.75 ms plain, 2.19 with the squares, 2.02 without). Other dtypes (onnxruntime's average
  pools are float32 only) pool float32 flags, ``Cast(IsNaN(x), float)``;
- with indices (a pool too small or too rare for the compiled loop): numbered flags,
  ``IsNaN(x) * (1 + position in the plane)`` in float64, whose pool's Indices output names the
  window's last NaN, which replaces onnxruntime's index where the window had one;
- ``GlobalMaxPool``: the same over the whole plane (GlobalAveragePool, GlobalMaxPool).

Every form reads dtypes and attributes only, never a size, so sessions shared across input sizes
(``fastpath/dynamic_shapes.py``) take it too (``size_blind_session_lowerings``). Integer pools hold
no NaN and run as recorded. Exports keep the plain node, as ``torch.onnx.export``
writes it: a standard ONNX MaxPool, read back by ``from_onnx`` as one op (onnxruntime serving either
file skips NaN alike).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...ir import dtypes
from ...ir.model_building import onnx_attribute_value
from ...ir.registry import session_lowerings, size_blind_session_lowerings

__all__: list[str] = []


@session_lowerings.register("MaxPool")
def _max_pool(node, input_names: list, output_names: list, fresh_name, embedded=None):
    x = node.inputs[0]
    if not x.dtype.is_floating_point:
        return None
    attributes = {key: onnx_attribute_value(value) for key, value in node.attrs.items()}
    if len(output_names) > 1 and output_names[1]:
        return _max_pool_with_indices(x, input_names[0], output_names, fresh_name, attributes)
    window = {key: value for key, value in attributes.items() if key != "storage_order"}
    pooled = fresh_name("pooled")
    nodes = [helper.make_node("MaxPool", input_names[:1], [pooled], name=fresh_name("MaxPool"), **attributes)]
    nodes_after, initializers = _with_nan_where_held(x, input_names[0], pooled, output_names[0], fresh_name, "", window)
    return nodes + nodes_after, initializers


@session_lowerings.register("GlobalMaxPool")
def _global_max_pool(node, input_names: list, output_names: list, fresh_name, embedded=None):
    x = node.inputs[0]
    if not x.dtype.is_floating_point:
        return None
    pooled = fresh_name("pooled")
    nodes = [helper.make_node("GlobalMaxPool", input_names[:1], [pooled], name=fresh_name("GlobalMaxPool"))]
    nodes_after, initializers = _with_nan_where_held(
        x, input_names[0], pooled, output_names[0], fresh_name, "Global", {}
    )
    return nodes + nodes_after, initializers


def _with_nan_where_held(x, input_name: str, pooled: str, output: str, fresh_name, scope: str, window: dict):
    """The nodes giving ``output``: ``pooled`` (the max pool of ``x``), NaN where a window holds NaN.

    ``scope``: "" for the node's windows (``window``: its attributes), "Global" for the whole plane.
    """
    if x.dtype is dtypes.float32:  # onnxruntime's average pools are float32 only
        average, held = fresh_name("nan_where_held"), fresh_name("held")
        nodes = []
        averaged = input_name
        if not _never_negative(x):  # +inf and -inf in one window would average to NaN
            averaged = fresh_name("squares")
            nodes.append(helper.make_node("Mul", [input_name, input_name], [averaged], name=fresh_name("Mul")))
        return nodes + [
            helper.make_node(f"{scope}AveragePool", [averaged], [average], name=fresh_name("AveragePool"), **window),
            helper.make_node("IsNaN", [average], [held], name=fresh_name("IsNaN")),
            helper.make_node("Where", [held, average, pooled], [output], name=fresh_name("Where")),
        ], []
    is_nan, flags, any_flag, held = (fresh_name(stem) for stem in ("is_nan", "flags", "any_flag", "held"))
    nan, nan_like = fresh_name("nan"), fresh_name("nan_like")
    return [
        helper.make_node("IsNaN", [input_name], [is_nan], name=fresh_name("IsNaN")),
        helper.make_node("Cast", [is_nan], [flags], name=fresh_name("Cast"), to=TensorProto.FLOAT),
        helper.make_node(f"{scope}MaxPool", [flags], [any_flag], name=fresh_name("MaxPool"), **window),
        helper.make_node("Cast", [any_flag], [held], name=fresh_name("Cast"), to=TensorProto.BOOL),
        helper.make_node("CastLike", [nan, pooled], [nan_like], name=fresh_name("CastLike")),
        helper.make_node("Where", [held, nan_like, pooled], [output], name=fresh_name("Where")),
    ], [numpy_helper.from_array(np.array(np.nan, np.float32), nan)]


def _never_negative(x) -> bool:
    """Whether ``x`` is a ReLU's output in the plan (pending, so the plan's structure says so)."""
    producer = x.node if x.data is None else None
    return producer is not None and producer.op_type == "Relu" and producer.domain in ("", "ai.onnx")


def _max_pool_with_indices(x, input_name: str, output_names: list, fresh_name, attributes: dict):
    """Numbered flags: ``IsNaN(x) * (1 + position in the plane)`` pooled with indices, in float64 (exact
    positions for any plane), the positions computed from ``x``'s shape so that the form reads no size."""
    names = {
        stem: fresh_name(stem)
        for stem in (
            "pooled", "indices", "is_nan", "flags", "numbered", "last", "last_index", "had_nan",
            "plane", "count", "limit", "counting", "positions_int", "positions_float", "positions",
            "one", "zero", "nan", "nan_like",
        )
    }  # fmt: skip
    initializers = [
        numpy_helper.from_array(np.array(1, np.int64), names["one"]),
        numpy_helper.from_array(np.array(0.0, np.float64), names["zero"]),
        numpy_helper.from_array(np.array(np.nan, np.float32), names["nan"]),
    ]

    def node(op_type: str, inputs: list, outputs: list, **attributes):
        return helper.make_node(op_type, inputs, outputs, name=fresh_name(op_type), **attributes)

    nodes = [
        node("MaxPool", [input_name], [names["pooled"], names["indices"]], **attributes),
        # 1 .. (number of positions in a plane), shaped like the plane.
        node("Shape", [input_name], [names["plane"]], start=2),
        node("ReduceProd", [names["plane"]], [names["count"]], keepdims=0),
        node("Add", [names["count"], names["one"]], [names["limit"]]),
        node("Range", [names["one"], names["limit"], names["one"]], [names["counting"]]),
        node("Reshape", [names["counting"], names["plane"]], [names["positions_int"]]),
        node("Cast", [names["positions_int"]], [names["positions"]], to=TensorProto.DOUBLE),
        node("IsNaN", [input_name], [names["is_nan"]]),
        node("Cast", [names["is_nan"]], [names["flags"]], to=TensorProto.DOUBLE),
        node("Mul", [names["flags"], names["positions"]], [names["numbered"]]),
        node("MaxPool", [names["numbered"]], [names["last"], names["last_index"]], **attributes),
        node("Greater", [names["last"], names["zero"]], [names["had_nan"]]),
        node("Where", [names["had_nan"], names["last_index"], names["indices"]], [output_names[1]]),
        node("CastLike", [names["nan"], names["pooled"]], [names["nan_like"]]),
        node("Where", [names["had_nan"], names["nan_like"], names["pooled"]], [output_names[0]]),
    ]
    return nodes, initializers


size_blind_session_lowerings.mark("MaxPool")
size_blind_session_lowerings.mark("GlobalMaxPool")
