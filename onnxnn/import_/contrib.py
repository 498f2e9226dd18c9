"""Importers of onnxruntime's ``com.microsoft`` contrib ops, written in onnxnn's own Tensor ops.

Models optimized for onnxruntime (its transformer optimizer, Hugging Face optimum) replace
subgraphs by fused ``com.microsoft`` ops: FusedMatMul, the Gelu family, SkipLayerNormalization,
Attention... Each importer here replays one such node as the standard ops it fuses, following
onnxruntime's contrib op documentation (``docs/ContribOperators.md``) and checked against
onnxruntime itself in ``tests/import_/test_contrib_ops_forward_gradients.py``. Replaying them as ordinary ops means
that recording stays lazy (every op has its shape rule), gradients come from the ordinary
gradient rules (an optimized model fine-tunes like its plain export), both executors run them,
and a re-exported module is standard ONNX that any runtime runs.

The attention family (Attention, MultiHeadAttention, GroupQueryAttention, RotaryEmbedding) lives
in ``contrib_attention``, the quantized ops in ``contrib_quantized``. What a node asks for that
onnxnn does not replay (a preallocated or beam-search attention cache, an activation FusedConv
does not know) raises NotImplementedError naming the node, its op and the input or attribute,
when the module runs.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes
from ..ir.registry import importers
from ..nn import functional as F
from ..runtime import creation, ops
from ..runtime.ops.opmath import REDUCED_FLOATS
from ..runtime.tensor import Tensor, apply_op
from .importers import NodeCall

__all__ = ["CONTRIB_DOMAIN"]

CONTRIB_DOMAIN = "com.microsoft"

# onnxruntime's default (contrib_defs.cc) for SkipLayerNormalization's epsilon.
_SKIP_LAYER_NORM_EPSILON = 1e-12


def as_float32(value: float) -> float:
    # onnxruntime reads FLOAT attributes as float32, whatever the data's dtype.
    return float(np.float32(value))


def unsupported(call: NodeCall, what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{call.op_type} node '{call.name}' (domain '{CONTRIB_DOMAIN}'): onnxnn does not replay {what}"
    )


# ----------------------------------------------------------------------------- matrix products


def _transposed_operand(tensor: Tensor, trans: int, trans_batch: int) -> Tensor:
    """FusedMatMul's operand as MatMul sees it: transBatch moves dim 0 before the matrix's last
    dim (``[M, b..., K] -> [b..., M, K]``), then trans swaps the last two dims."""
    rank = len(tensor.shape)
    if rank < 2:
        return tensor
    if trans_batch and rank > 2:
        tensor = tensor.permute(*range(1, rank - 1), 0, rank - 1)
    if trans:
        tensor = tensor.transpose(-1, -2)
    return tensor


@importers.register("FusedMatMul", domain=CONTRIB_DOMAIN)
def FusedMatMul(call: NodeCall, A, B, *, alpha=1.0, transA=0, transB=0, transBatchA=0, transBatchB=0):
    product = ops.matmul(_transposed_operand(A, transA, transBatchA), _transposed_operand(B, transB, transBatchB))
    return (product if alpha == 1.0 else product * as_float32(alpha),)


# ----------------------------------------------------------------------------- the Gelu family


@importers.register("Gelu", domain=CONTRIB_DOMAIN)
def Gelu(call: NodeCall, X):
    return (F.gelu(X),)


@importers.register("BiasGelu", domain=CONTRIB_DOMAIN)
def BiasGelu(call: NodeCall, A, B):
    return (F.gelu(A + B),)


@importers.register("FastGelu", domain=CONTRIB_DOMAIN)
def FastGelu(call: NodeCall, X, bias=None):
    # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): Gelu's tanh approximation.
    return (F.gelu(X if bias is None else X + bias, approximate="tanh"),)


@importers.register("QuickGelu", domain=CONTRIB_DOMAIN)
def QuickGelu(call: NodeCall, X, *, alpha=1.702):
    return (X * ops.sigmoid(X * as_float32(alpha)),)


@importers.register("BiasSplitGelu", domain=CONTRIB_DOMAIN)
def BiasSplitGelu(call: NodeCall, X, bias):
    # Stable Diffusion's GEGLU: the biased input's first half gated by the Gelu of its second half.
    left, right = (X + bias).chunk(2, dim=-1)
    return (left * F.gelu(right),)


@importers.register("BiasAdd", domain=CONTRIB_DOMAIN)
def BiasAdd(call: NodeCall, X, bias, skip):
    return (X + bias + skip,)


# ----------------------------------------------------------------------------- layer normalizations


def _skip_sum(input: Tensor, skip: Tensor, bias: Tensor | None) -> Tensor:
    total = input + skip
    return total if bias is None else total + bias


def _normalized(total: Tensor, epsilon: float, centered: bool, axis: int = -1) -> tuple[Tensor, Tensor, Tensor]:
    """``(normalized, mean, inv_std_var)`` over the dims from ``axis`` on, statistics kept as size-1 dims.

    float16 and bfloat16 are normalized in float32 and rounded once, as onnxruntime's kernels do.
    """
    if total.dtype in REDUCED_FLOATS:
        results = _normalized(total.to(dtypes.float32), epsilon, centered, axis)
        return tuple(result.to(total.dtype) for result in results)  # type: ignore[return-value]  # three results
    rank = len(total.shape)
    dims = list(range(axis % rank, rank))
    mean = total.mean(dims, keepdim=True)
    centered_total = total - mean if centered else total
    variance = (centered_total * centered_total).mean(dims, keepdim=True)
    inv_std_var = (variance + as_float32(epsilon)).rsqrt()
    return centered_total * inv_std_var, mean, inv_std_var


@importers.register("SkipLayerNormalization", domain=CONTRIB_DOMAIN)
def SkipLayerNormalization(
    call: NodeCall, input, skip, gamma, beta=None, bias=None, *, epsilon=_SKIP_LAYER_NORM_EPSILON
):
    """LayerNorm(input + skip + bias) * gamma + beta; also the mean, 1/std and the sum."""
    total = _skip_sum(input, skip, bias)
    normalized, mean, inv_std_var = _normalized(total, epsilon, centered=True)
    output = normalized * gamma
    if beta is not None:
        output = output + beta
    return (output, mean, inv_std_var, total)[: call.num_outputs]


@importers.register("SkipSimplifiedLayerNormalization", domain=CONTRIB_DOMAIN)
def SkipSimplifiedLayerNormalization(
    call: NodeCall, input, skip, gamma, bias=None, *, epsilon=_SKIP_LAYER_NORM_EPSILON
):
    """RMSNorm(input + skip + bias) * gamma; outputs as SkipLayerNormalization's.

    The mean output is zeros, as onnxruntime writes it: RMSNorm subtracts no mean.
    """
    total = _skip_sum(input, skip, bias)
    normalized, mean, inv_std_var = _normalized(total, epsilon, centered=False)
    return (normalized * gamma, creation.zeros_like(mean), inv_std_var, total)[: call.num_outputs]


@importers.register("LayerNormalization", domain=CONTRIB_DOMAIN)
def LayerNormalization(call: NodeCall, X, Scale, B=None, *, axis=-1, epsilon=1e-5, stash_type=1):
    """onnxruntime's LayerNormalization (before ONNX had one, opset 17): also the mean and 1/std.

    Models write it in the default domain; loading reads it as this op (``validation``).
    """
    normalized, mean, inv_std_var = _normalized(X, epsilon, centered=True, axis=axis)
    output = normalized * Scale
    return (output if B is None else output + B, mean, inv_std_var)[: call.num_outputs]


@importers.register("SimplifiedLayerNormalization", domain=CONTRIB_DOMAIN)
def SimplifiedLayerNormalization(call: NodeCall, X, scale, *, axis=-1, epsilon=1e-5, stash_type=1):
    """onnxruntime's RMSNorm, ``X / sqrt(mean(X^2) + epsilon) * scale``; also 1/rms.

    Models write it in the default domain; loading reads it as this op (``validation``).
    """
    normalized, _, inv_std_var = _normalized(X, epsilon, centered=False, axis=axis)
    return (normalized * scale, inv_std_var)[: call.num_outputs]


# ----------------------------------------------------------------------------- embeddings


@importers.register("EmbedLayerNormalization", domain=CONTRIB_DOMAIN)
def EmbedLayerNormalization(
    call: NodeCall,
    input_ids,
    segment_ids,
    word_embedding,
    position_embedding,
    segment_embedding=None,
    gamma=None,
    beta=None,
    mask=None,
    position_ids=None,
    *,
    epsilon=_SKIP_LAYER_NORM_EPSILON,
    mask_index_type=1,
):
    """BERT's embeddings: LayerNorm(word + position + segment embeddings); also the mask's lengths.

    Outputs: the normalized embeddings ``[B, S, H]``, ``mask_index`` ``[B]`` (int32: the number
    of ones in each mask row, zeros without a mask) and the sum before normalization.
    """
    batch, length = input_ids.shape
    if position_ids is None:
        position_ids = creation.arange(length, dtype=dtypes.int64).reshape(1, length)
    total = apply_op("Gather", (word_embedding, input_ids), {"axis": 0}) + apply_op(
        "Gather", (position_embedding, position_ids), {"axis": 0}
    )
    if segment_embedding is not None and segment_ids is not None:
        total = total + apply_op("Gather", (segment_embedding, segment_ids), {"axis": 0})
    normalized, _, _ = _normalized(total, epsilon, centered=True)
    output = normalized * gamma + beta
    if mask is None:
        mask_index = creation.zeros(batch, dtype=dtypes.int32)
    else:
        mask_index = (mask != 0).to(dtypes.int32).sum(1).to(dtypes.int32)
    return (output, mask_index, total)[: call.num_outputs]


# ----------------------------------------------------------------------------- convolution


def _clip(x: Tensor, params: list) -> Tensor:
    low, high = (list(params) + [-math.inf, math.inf][len(params) :])[:2]
    return ops.clamp(x, as_float32(low), as_float32(high))


def _hard_sigmoid(x: Tensor, params: list) -> Tensor:
    alpha, beta = (list(params) + [0.2, 0.5][len(params) :])[:2]
    return ops.clamp(x * as_float32(alpha) + as_float32(beta), 0.0, 1.0)


# FusedConv's activation by name, with its activation_params (onnxruntime's fusable activations).
_FUSED_ACTIVATIONS = {
    "Relu": lambda x, params: ops.relu(x),
    "Tanh": lambda x, params: ops.tanh(x),
    "Sigmoid": lambda x, params: ops.sigmoid(x),
    "LeakyRelu": lambda x, params: F.leaky_relu(x, as_float32(params[0]) if params else 0.01),
    "Clip": _clip,
    "HardSigmoid": _hard_sigmoid,
}


@importers.register("FusedConv", domain=CONTRIB_DOMAIN)
def FusedConv(call: NodeCall, X, W, B=None, Z=None, *, activation=None, activation_params=None, **conv_attributes):
    """``activation(Conv(X, W, B) + Z)``: a Conv with ONNX's attributes, a residual, an activation."""
    output = apply_op("Conv", (X, W) if B is None else (X, W, B), conv_attributes)
    if Z is not None:
        output = output + Z
    if activation is None:
        return (output,)
    function = _FUSED_ACTIVATIONS.get(activation)
    if function is None:
        raise unsupported(call, f"activation {activation!r} (known: {sorted(_FUSED_ACTIVATIONS)})")
    return (function(output, list(activation_params or [])),)


def to_channels_first(tensor: Tensor) -> Tensor:
    """``[N, D1, ..., Dn, C] -> [N, C, D1, ..., Dn]``."""
    rank = len(tensor.shape)
    return tensor.permute(0, rank - 1, *range(1, rank - 1))


def to_channels_last(tensor: Tensor) -> Tensor:
    """``[N, C, D1, ..., Dn] -> [N, D1, ..., Dn, C]``."""
    rank = len(tensor.shape)
    return tensor.permute(0, *range(2, rank), 1)


@importers.register("NhwcConv", domain=CONTRIB_DOMAIN)
def NhwcConv(call: NodeCall, X, W, B=None, **conv_attributes):
    """ONNX's Conv (its attributes) on channels-last data: ``X`` is ``[N, D1, ..., Dn, C]`` and
    ``W`` is ``[M, k1, ..., kn, C / group]`` (onnxruntime's transformer optimizer writes the
    weights transposed so, ``fusion_nhwc_conv.py``); ``Y`` is ``[N, O1, ..., On, M]``.
    """
    if len(X.shape) < 3 or len(W.shape) != len(X.shape):
        raise ValueError(
            f"NhwcConv node '{call.name}' (domain '{CONTRIB_DOMAIN}'): X of shape {list(X.shape)} and W of "
            f"shape {list(W.shape)} must have the same rank, at least 3"
        )
    inputs = (to_channels_first(X), to_channels_first(W))
    output = apply_op("Conv", inputs if B is None else (*inputs, B), conv_attributes)
    return (to_channels_last(output),)
