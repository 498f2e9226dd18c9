"""``GroupNormalization`` written for onnxruntime with a two-pass variance.

onnxruntime runs the op through ONNX's function body, whose variance is ``E[x^2] - E[x]^2`` in the
stash precision (float32): where a group's mean is large against its spread, the difference cancels
(a group ``[10, 10.001]`` normalized to +-0.099 instead of +-0.156) or turns negative (NaN). PyTorch
centers first. onnxnn records the standard node, which its kernels compute stably, and writes it out
in sessions and exports as the same arithmetic with the variance of the centered values.
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
    centered = emit("Sub", groups, emit("ReduceMean", groups, axes, keepdims=1))
    variance = emit("ReduceMean", emit("Mul", centered, centered), axes, keepdims=1)
    normalized = emit("Div", centered, emit("Sqrt", emit("Add", variance, epsilon)))
    normalized = emit("Reshape", normalized, emit("Shape", x))
    per_channel = constant([-1] + [1] * (rank - 2))
    if stash is dtype:
        scaled = emit("Mul", normalized, emit("Reshape", scale, per_channel))
        emit("Add", scaled, emit("Reshape", bias, per_channel), output=output_names[0])
    else:
        # The affine step in the stash type too, rounded once, as PyTorch's kernel (opmath) does: a
        # half normalized value times a half scale plus a half bias rounds three times (hundreds of
        # ulps where the bias cancels the product).
        scaled = emit("Mul", normalized, emit("Reshape", in_stash(scale), per_channel))
        shifted = emit("Add", scaled, emit("Reshape", in_stash(bias), per_channel))
        emit("Cast", shifted, to=dtype.onnx_type, output=output_names[0])
    return nodes, initializers


value_blind_decompositions.mark("GroupNormalization")
