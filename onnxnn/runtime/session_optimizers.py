"""Which of onnxruntime's graph transformers onnxnn's sessions leave out, and why.

Each entry below names a transformer that is slower on onnxnn's graphs than without it, or that
onnxruntime 1.31 applies wrongly to a pattern onnxnn's graphs can hold (with the pattern that
triggers it); ``disabled_optimizers`` reads a model and lists those its session goes without.
"""

from __future__ import annotations

import onnx
from onnx import numpy_helper

from ..ir.attributes import attribute_subgraphs

__all__ = [
    "DISABLED_OPTIMIZERS",
    "CPU_DISABLED_OPTIMIZERS",
    "COMMON_SUBEXPRESSIONS_MOST_NODES",
    "NCHWC_REPAYING_OPS",
    "disabled_optimizers",
]


# onnxruntime graph transformers left out of onnxnn's sessions. MatMulAddFusion turns a 3-d MatMul +
# Add into Reshape + Gemm + Reshape, but only when the shapes are static, as onnxnn's graphs are:
# the exported graph, with a symbolic batch, keeps MatMul + Add and gets the bias-activation and
# FusedMatMul fusions instead, which run faster (BERT-base at batch 16: 1.058x the exported graph's
# session with the fusion, 1.032x without; benchmarks/bench_zoo.py --only bert).
# FuseReluClip: onnxruntime 1.31 refuses a float64 Clip whose bound is a constant once a Relu before
# it is fused in ("Unexpected data type for Clip 'min' input of 11"), and onnxnn writes a missing
# bound as a constant infinity (runtime/ops/clip_bounds.py): relu(x).clamp(max=6.0) in float64 failed.
DISABLED_OPTIMIZERS = ["MatMulAddFusion", "FuseReluClip"]

# Left out of sessions on the CPU only. SkipLayerNormFusion turns a residual Add + LayerNormalization
# over 3-d tensors (every transformer block, twice) into SkipLayerNormalization, whose CPU kernel in
# onnxruntime 1.31 runs 4 to 6.6 times slower than the two ops: Add + LayerNormalization over
# 1x128x768, one thread, 77 us against 509 us fused; 16x128x768 2.1 ms against 8.2 (two threads 2.5
# against 8.1). A 4-layer BERT (hidden 768, sequence 128, batch 1) took 84.3 ms a call with it, 79.9
# without, and its exported graph, whose symbolic batch the fusion skips, 80.8. The CUDA kernel was
# not measured: a GPU session keeps the fusion.
CPU_DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]

# onnxruntime's CommonSubexpressionElimination takes time superlinear in a graph's nodes, and a large
# model's training step is a large graph: one session of a training step (batch 2, 32x32, one thread,
# optimizers at their default level) took 1.9 s to build for resnet50 (4,900 nodes) and 1.0 s without
# it, 8.2 and 4.2 s for resnet101 (9,600 nodes), 22 and 9.3 s for resnet152 (13,400 nodes). onnxnn's
# recorded graphs repeat almost nothing it could merge (resnet152's step: 202 of 13,374 nodes, 155 of
# them Shape; none in an MLP's or a small ResNet's), so graphs above this many nodes leave it out.
COMMON_SUBEXPRESSIONS_MOST_NODES = 2000

# onnxruntime's NchwcTransformer (on CPUs with AVX2 or AVX-512) moves convolutions and 2-d pools into
# a blocked channel layout, with a reorder (a copy of the whole tensor) at each edge of it. Its
# convolution, AveragePool and GlobalMaxPool kernels repay the reorders; its MaxPool and
# GlobalAveragePool kernels do not: in a graph with none of the former, the transformer only adds
# the two copies. One thread, exported layers, the transformer's session against one without it:
# - MaxPool2d(3, 2, 1) on 8x64x112x112 2.6x slower, MaxPool2d(2) on 8x32x32x32 1.3x, BatchNorm +
#   ReLU + MaxPool 1.6x; AdaptiveAvgPool2d(1) on 8x512x14x14 1.1x slower with its input in cache,
#   1.6x with a new input each call;
# - against: AvgPool2d(2) on 8x64x112x112 1.8x faster, AvgPool2d(3, 1, 1) 14x, GlobalMaxPool 3x.
# A convolution moves only with a constant weight (the transformer reorders the filter when the
# session is built). A training graph feeds its weights: its convolutions stay as they are, and the
# transformer would only wrap its pools in reorders (Conv + MaxPool on 8x64x112x112 with the weight
# fed: 3.2 ms of 83 more). So a graph keeps the transformer only when it holds one of the ops whose
# kernels repay it, a convolution counting only with a constant weight.
NCHWC_REPAYING_OPS = frozenset({"Conv", "FusedConv", "AveragePool", "GlobalMaxPool"})
_NCHWC_NEEDS_CONSTANT_WEIGHT = frozenset({"Conv", "FusedConv"})


def _repays_nchwc(graph, constants: set | None) -> bool:
    """Whether ``graph`` (a GraphProto or FunctionProto), or a subgraph of one of its nodes, holds an
    op of ``NCHWC_REPAYING_OPS``; a convolution counts only when its weight is in ``constants`` (None:
    every convolution counts, since a subgraph's or function's weight may come from outside it)."""
    for node in graph.node:
        if node.op_type in NCHWC_REPAYING_OPS and (
            constants is None
            or node.op_type not in _NCHWC_NEEDS_CONSTANT_WEIGHT
            or (len(node.input) > 1 and node.input[1] in constants)
        ):
            return True
        for attribute in node.attribute:
            for subgraph in attribute_subgraphs(attribute):
                if _repays_nchwc(subgraph, None):
                    return True
    return False


# onnxruntime 1.31's LayerNormFusionL1 fuses a mean-centred normalization into LayerNormalization
# without reading the Pow's exponent: ``d / (d.pow(4).mean(-1, keepdim=True) + eps).sqrt()`` was
# computed as LayerNorm's ``pow(2)``. onnxnn feeds scalars, so a session cannot tell a Pow's exponent
# is 2: a graph with any Pow goes without the fusion (onnxnn records LayerNorm as one op anyway).
_POW_BREAKS_LAYER_NORM_FUSION = "LayerNormFusionL1"


def _gemm_reads_a_transposed_output(graph: onnx.GraphProto) -> bool:
    """Whether a Gemm reads a Transpose's output that is also a graph output: onnxruntime 1.31's
    GemmTransposeFusion folds that Transpose into the Gemm and deletes it, output and all, and the
    session cannot be built (the backward of ``addmm(C, x, W.t()).t()`` or ``F.linear(x, W, C).t()``
    with a full-size bias, whose gradient for C is that output)."""
    outputs = {output.name for output in graph.output}
    transposed = {node.output[0] for node in graph.node if node.op_type == "Transpose" and node.output[0] in outputs}
    return bool(transposed) and any(
        node.op_type == "Gemm" and transposed.intersection(node.input) for node in graph.node
    )


# onnxruntime 1.31's ExpandElimination removes an Expand of a size-1 tensor to a shape with a 0 as if
# the 0 were a 1: ``ones(1).expand(0) * 2`` held one element under an empty shape, and so did an
# empty tensor's gradient (``x.grad * 1``: the root gradient expanded to x's empty shape). A graph
# goes without it when an Expand's target shape may hold a 0 (a constant with one, or not a constant).
_EXPAND_ELIMINATION = "ExpandElimination"


def _expands_to_empty(graph: onnx.GraphProto, constants: dict) -> bool:
    """Whether an Expand of ``graph`` may target a shape with a 0 (``constants``: name -> TensorProto)."""
    for node in graph.node:
        if node.op_type == "Expand" and len(node.input) > 1:
            shape = constants.get(node.input[1])
            if shape is None or 0 in numpy_helper.to_array(shape).tolist():
                return True
    return False


# onnxruntime 1.31's MatmulTransposeFusion folds a Transpose into the MatMul it feeds (FusedMatMul),
# whose kernel mishandles a size of 0: with the transpose moving a 0 into the rows
# (``a.permute(1, 0, 2) @ b``, a of shape (0, 2, 4)) it divides by zero and the process dies of
# SIGFPE, and with an empty contracted dim (``a.transpose(1, 2) @ b`` over a length of 0) it returns
# the previous run's memory instead of zeros, once the session ran at other sizes. A graph goes
# without it when a Transpose feeds a MatMul and a 0 may reach the graph: an input, output or
# intermediate (``build_model`` keeps the shapes of the empty ones) with a dim of 0, or of a size known
# only at the run (symbolic sizes).
_MATMUL_TRANSPOSE_FUSION = "MatmulTransposeFusion"


def _transposes_into_a_matmul(graph: onnx.GraphProto) -> bool:
    transposed = {node.output[0] for node in graph.node if node.op_type == "Transpose"}
    return bool(transposed) and any(
        node.op_type == "MatMul" and transposed.intersection(node.input) for node in graph.node
    )


def _may_hold_an_empty_dim(graph: onnx.GraphProto) -> bool:
    """Whether an input, output or intermediate of ``graph`` (with a value info) has a dim of 0, or one
    whose size is not fixed."""
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        tensor_type = info.type.tensor_type
        if not tensor_type.HasField("shape"):
            return True
        for dim in tensor_type.shape.dim:
            if not dim.HasField("dim_value") or dim.dim_value == 0:
                return True
    return False


def disabled_optimizers(model: onnx.ModelProto | bytes, on_cpu: bool = True) -> list[str]:
    """The onnxruntime graph transformers that onnxnn's session of ``model`` leaves out.

    ``DISABLED_OPTIMIZERS`` always, and ``CPU_DISABLED_OPTIMIZERS`` ``on_cpu``; ``NchwcTransformer``
    too unless the model (its graph, subgraphs or functions) holds an op whose NCHWc kernel repays
    the layout's reorders (``NCHWC_REPAYING_OPS``; a convolution of the main graph only with a
    constant weight); ``CommonSubexpressionElimination`` in a graph of more than
    ``COMMON_SUBEXPRESSIONS_MOST_NODES`` nodes; ``LayerNormFusionL1`` in a graph with a Pow (see
    ``_POW_BREAKS_LAYER_NORM_FUSION``); ``GemmTransposeFusion``, ``MatmulTransposeFusion``, the
    transpose optimizer and ``ExpandElimination`` where the graph has the patterns they break. A
    serialized model keeps all but these.
    """
    always = DISABLED_OPTIMIZERS + CPU_DISABLED_OPTIMIZERS if on_cpu else DISABLED_OPTIMIZERS
    if isinstance(model, bytes):
        return always
    graph = model.graph
    disabled = list(always)
    if len(graph.node) > COMMON_SUBEXPRESSIONS_MOST_NODES:
        disabled.append("CommonSubexpressionElimination")
    if any(node.op_type == "Pow" for node in graph.node):
        disabled.append(_POW_BREAKS_LAYER_NORM_FUSION)
    if _gemm_reads_a_transposed_output(graph):
        disabled.append("GemmTransposeFusion")
    if _transposes_into_a_matmul(graph) and _may_hold_an_empty_dim(graph):
        disabled.append(_MATMUL_TRANSPOSE_FUSION)
    if any(node.op_type == "Pad" and len(node.input) > 3 and node.input[3] for node in graph.node):
        # onnxruntime 1.31's transpose optimizer moves a Transpose through a Pad as if its pads covered
        # every axis, ignoring an ``axes`` input (an imported model's Pad may have one): a wrong shape,
        # or a session that cannot run. Both of its passes do it.
        disabled += ["TransposeOptimizer", "TransposeOptimizer_CPUExecutionProvider"]
    constants = {initializer.name for initializer in graph.initializer}
    constants.update(output for node in graph.node if node.op_type == "Constant" for output in node.output)
    if any(node.op_type == "Expand" for node in graph.node):
        values = {initializer.name: initializer for initializer in graph.initializer}
        values.update(
            (node.output[0], attribute.t)
            for node in graph.node
            if node.op_type == "Constant"
            for attribute in node.attribute
            if attribute.name == "value"
        )
        if _expands_to_empty(graph, values):
            disabled.append(_EXPAND_ELIMINATION)
    if not (_repays_nchwc(graph, constants) or any(_repays_nchwc(function, None) for function in model.functions)):
        disabled.append("NchwcTransformer")
    return disabled
