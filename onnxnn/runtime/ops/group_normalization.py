"""``GroupNormalization`` written for onnxruntime with a two-pass variance.

onnxruntime runs the op through ONNX's function body, whose variance is ``E[x^2] - E[x]^2`` in the
stash precision (float32): where a group's mean is large against its spread, the difference cancels
(a group ``[10, 10.001]`` normalized to +-0.099 instead of +-0.156) or turns negative (NaN). PyTorch
centers first. onnxnn records the standard node, which its kernels compute stably, and writes it out
in sessions and exports as the same arithmetic with the statistics of the centered values, centered
twice (below: a float32 mean of 1e4 over a spread of 1 no longer costs its rounding, 1e-3, in the
output).
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ...ir import dtypes
from ...ir.registry import decompositions, value_blind_decompositions
from .training import int64_initializers, node_emitter

__all__: list[str] = []


@decompositions.register("GroupNormalization")
def _decomposition(node, input_names: list, output_names: list, fresh_name):
    nodes: list = []
    initializers: list = []
    emit = node_emitter(nodes, fresh_name)
    constant = int64_initializers(initializers, fresh_name)
    x, scale, bias = input_names
    dtype = node.inputs[0].dtype
    rank = len(node.inputs[0].shape)
    stash = dtypes.as_dtype(node.attrs.get("stash_type", dtypes.float32.onnx_type))  # an ONNX element type
    epsilon = fresh_name("epsilon")
    initializers.append(numpy_helper.from_array(np.array(node.attrs.get("epsilon", 1e-5), stash.numpy_dtype), epsilon))

    def in_stash(name: str) -> str:
        return name if stash is dtype else emit("Cast", name, to=stash.onnx_type)

    groups = emit("Reshape", in_stash(x), constant([0, int(node.attrs["num_groups"]), -1]))
    axes = constant([2])
    # The statistics of the centered values, then of those less their mean ``residual``: onnxruntime's
    # float32 ReduceMean errs by many ulps of a large mean (30 spreads for 32768 values of 1e6 + N(0, 1)),
    # which centering once leaves in the output (ulp(mean) / (2 std) at best: 1e-3 for a mean of 1e4)
    # and ``mean(c^2) - residual^2`` would square. One read more than centering once, and the group's
    # inverse deviation and the scale fold into one per-channel product (no Div pass).
    centered = emit("Sub", groups, emit("ReduceMean", groups, axes, keepdims=1))
    deviations = emit("Sub", centered, emit("ReduceMean", centered, axes, keepdims=1))
    variance = emit("ReduceMean", emit("Mul", deviations, deviations), axes, keepdims=1)
    inverse_std = emit("Reciprocal", emit("Sqrt", emit("Add", variance, epsilon)))
    # Per (sample, channel), (N, G, C / G) as (N, C, 1, ...): each channel's group factor and scale.
    factor = emit(
        "Mul", inverse_std, emit("Reshape", in_stash(scale), constant([1, int(node.attrs["num_groups"]), -1]))
    )
    factor = emit("Reshape", factor, constant([0, -1] + [1] * (rank - 2)))
    normalized = emit("Mul", emit("Reshape", deviations, emit("Shape", x)), factor)
    # The affine step in the stash type, rounded once at the end, as PyTorch's kernel (opmath) does: a
    # half normalized value times a half scale plus a half bias rounds three times (hundreds of ulps
    # where the bias cancels the product).
    per_channel = emit("Reshape", in_stash(bias), constant([-1] + [1] * (rank - 2)))
    if stash is dtype:
        emit("Add", normalized, per_channel, output=output_names[0])
    else:
        emit("Cast", emit("Add", normalized, per_channel), to=dtype.onnx_type, output=output_names[0])
    return nodes, initializers


value_blind_decompositions.mark("GroupNormalization")
