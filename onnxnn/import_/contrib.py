"""Importers of onnxruntime's ``com.microsoft`` contrib ops, written in onnxnn's own Tensor ops.

Models optimized for onnxruntime (its transformer optimizer, Hugging Face optimum) replace
subgraphs by fused ``com.microsoft`` ops: FusedMatMul, the Gelu family, SkipLayerNormalization,
Attention... Each importer here replays one such node as the standard ops it fuses, following
onnxruntime's contrib op documentation (``docs/ContribOperators.md``) and checked against
onnxruntime itself in ``tests/import_/test_contrib_ops.py``. Replaying them as ordinary ops means
that recording stays lazy (every op has its shape rule), gradients come from the ordinary
gradient rules (an optimized model fine-tunes like its plain export), both executors run them,
and a re-exported module is standard ONNX that any runtime runs.

What a node asks for that onnxnn does not replay (a preallocated or beam-search attention
cache, a packed layout, a batch of sequences of different lengths in GroupQueryAttention) raises
NotImplementedError naming the node, its op and the input or attribute, when the module runs.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes
from ..ir.registry import importers
from ..nn import functional as F
from ..runtime import creation, ops
from ..runtime.tensor import Tensor, apply_op
from .importers import NodeCall, array_of, constant_tensor

__all__ = ["CONTRIB_DOMAIN"]

CONTRIB_DOMAIN = "com.microsoft"

# onnxruntime's defaults (contrib_defs.cc): SkipLayerNormalization's epsilon and the value
# attention adds to the scores of masked keys.
_SKIP_LAYER_NORM_EPSILON = 1e-12
_MASK_FILTER_VALUE = -10000.0


def _as_float32(value: float) -> float:
    # onnxruntime reads FLOAT attributes as float32, whatever the data's dtype.
    return float(np.float32(value))


def _unsupported(call: NodeCall, what: str) -> NotImplementedError:
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
    return (product if alpha == 1.0 else product * _as_float32(alpha),)


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
    return (X * ops.sigmoid(X * _as_float32(alpha)),)


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
    if total.dtype in (dtypes.float16, dtypes.bfloat16):
        results = _normalized(total.to(dtypes.float32), epsilon, centered, axis)
        return tuple(result.to(total.dtype) for result in results)  # type: ignore[return-value]  # three results
    rank = len(total.shape)
    dims = list(range(axis % rank, rank))
    mean = total.mean(dims, keepdim=True)
    centered_total = total - mean if centered else total
    variance = (centered_total * centered_total).mean(dims, keepdim=True)
    inv_std_var = (variance + _as_float32(epsilon)).rsqrt()
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


# ----------------------------------------------------------------------------- attention


def _split_heads(tensor: Tensor, num_heads: int) -> Tensor:
    """``[B, S, N * H] -> [B, N, S, H]``."""
    batch, length, hidden = tensor.shape
    return tensor.reshape(batch, length, num_heads, hidden // num_heads).transpose(1, 2)


def _merge_heads(tensor: Tensor) -> Tensor:
    """``[B, N, S, H] -> [B, S, N * H]``."""
    batch, heads, length, size = tensor.shape
    return tensor.transpose(1, 2).reshape(batch, length, heads * size)


def _key_mask_bias(
    call: NodeCall, mask: Tensor, batch: int, query_length: int, key_length: int, filter_value: float, dtype
) -> Tensor:
    """The additive score bias of a key mask, broadcast to ``[B, 1, S, T]``.

    A mask of shape ``[B, T]`` (or ``[B, S, T]``) holds 1 for keys to attend and 0 for masked ones;
    one of shape ``[B]`` holds each sequence's length (keys at and after it are masked).
    """
    shape = tuple(mask.shape)
    if shape == (batch,):
        positions = creation.arange(key_length, dtype=dtypes.int64)
        keep = positions.reshape(1, key_length) < mask.to(dtypes.int64).reshape(batch, 1)
        keep = keep.reshape(batch, 1, 1, key_length)
    elif shape == (batch, key_length):
        keep = (mask != 0).reshape(batch, 1, 1, key_length)
    elif shape == (batch, query_length, key_length):
        keep = (mask != 0).reshape(batch, 1, query_length, key_length)
    else:
        raise _unsupported(
            call,
            f"a mask of shape {list(shape)} (only [batch], [batch, total_sequence] and "
            f"[batch, sequence, total_sequence])",
        )
    return ops.where(
        keep,
        constant_tensor(np.zeros((), dtype.numpy_dtype)),
        constant_tensor(np.array(filter_value, dtype.numpy_dtype)),
    )


def _attend(
    call: NodeCall,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    scale: float,
    bias: Tensor | None,
    causal: bool,
    filter_value: float,
) -> Tensor:
    """softmax(q k^T * scale + bias) v over ``[B, N, S, H]`` heads, future keys masked when causal."""
    scale = scale or 1.0 / math.sqrt(query.shape[-1])
    scores = ops.matmul(query, key.transpose(-1, -2)) * _as_float32(scale)
    if bias is not None:
        scores = scores + bias
    if causal:
        query_length, key_length = scores.shape[-2], scores.shape[-1]
        # With a cache the queries are the last query_length of the keys' positions.
        allowed = np.tril(np.ones((query_length, key_length), dtype=bool), key_length - query_length)
        causal_bias = np.where(allowed, 0, filter_value).astype(scores.dtype.numpy_dtype)
        scores = scores + constant_tensor(causal_bias)
    return ops.matmul(ops.softmax(scores, -1), value)


@importers.register("Attention", domain=CONTRIB_DOMAIN)
def Attention(
    call: NodeCall,
    input,
    weights,
    bias=None,
    mask_index=None,
    past=None,
    attention_bias=None,
    past_sequence_length=None,
    *,
    num_heads,
    unidirectional=0,
    qkv_hidden_sizes=None,
    mask_filter_value=_MASK_FILTER_VALUE,
    scale=0.0,
    do_rotary=0,
    past_present_share_buffer=0,
    rotary_embedding_dim=0,
):
    """BERT's and GPT-2's self-attention with its input projection: ``[B, S, D] -> [B, S, Hv]``.

    With ``past`` (``[2, B, N, P, H]``: the keys and values of earlier steps) the new keys and
    values are appended to it, queries take the positions after the past's (causal masks and the
    ``[B, P + S]`` key mask cover all of them) and ``present`` is the appended cache.
    """
    if past_present_share_buffer or past_sequence_length is not None:
        raise _unsupported(call, "past_present_share_buffer=1 (a cache preallocated to its maximum length)")
    if do_rotary:
        raise _unsupported(call, "do_rotary=1")
    projected = ops.matmul(input, weights)
    if bias is not None:
        projected = projected + bias
    hidden = weights.shape[-1] // 3
    sizes = list(qkv_hidden_sizes) if qkv_hidden_sizes else [hidden] * 3
    query, key, value = (_split_heads(part, num_heads) for part in projected.split(sizes, dim=-1))
    if past is not None:
        key, value = ops.cat([past[0], key], 2), ops.cat([past[1], value], 2)
    attended = _masked_attention(
        call, query, key, value, mask_index, attention_bias, scale, unidirectional, mask_filter_value
    )
    outputs = [_merge_heads(attended)]
    if call.num_outputs > 1:
        outputs.append(ops.stack([key, value], 0))  # present: [2, B, N, T, H]
    return tuple(outputs)


def _masked_attention(
    call: NodeCall, query, key, value, key_mask, attention_bias, scale, unidirectional, mask_filter_value
):
    """``_attend`` over ``[B, N, S, H]`` heads with the attention bias plus the key mask's bias."""
    score_bias = attention_bias
    if key_mask is not None:
        mask_bias = _key_mask_bias(
            call, key_mask, query.shape[0], query.shape[2], key.shape[2], _as_float32(mask_filter_value), query.dtype
        )
        score_bias = mask_bias if score_bias is None else score_bias + mask_bias
    return _attend(
        call,
        query,
        key,
        value,
        scale=scale,
        bias=score_bias,
        causal=bool(unidirectional),
        filter_value=_as_float32(mask_filter_value),
    )


@importers.register("MultiHeadAttention", domain=CONTRIB_DOMAIN)
def MultiHeadAttention(
    call: NodeCall,
    query,
    key=None,
    value=None,
    bias=None,
    key_padding_mask=None,
    attention_bias=None,
    past_key=None,
    past_value=None,
    *args,
    num_heads,
    mask_filter_value=_MASK_FILTER_VALUE,
    scale=0.0,
    unidirectional=0,
):
    """Attention over projected query, key and value ``[B, S, D]`` (key/value also as ``[B, N, L, H]``).

    ``past_key`` and ``past_value`` (``[B, N, P, H]``) are prepended to the keys and values, and
    ``present_key``/``present_value`` are the results.
    """
    if args and any(argument is not None for argument in args):
        raise _unsupported(call, "the past_sequence_length, cache_indirection inputs (beam search)")
    if key is None or value is None or len(query.shape) != 3:
        raise _unsupported(call, "packed query/key/value layouts (key or value omitted)")
    if len(key.shape) == 5:
        raise _unsupported(call, "a packed key/value input of rank 5")
    hidden = query.shape[-1]
    if bias is not None:
        key_hidden = hidden if len(key.shape) == 3 else 0
        query_bias, key_bias, value_bias = bias.split([hidden, hidden, bias.shape[0] - 2 * hidden], dim=0)
        query = query + query_bias
        if key_hidden:
            key = key + key_bias
            value = value + value_bias
    heads_query = _split_heads(query, num_heads)
    heads_key = key if len(key.shape) == 4 else _split_heads(key, num_heads)
    heads_value = value if len(value.shape) == 4 else _split_heads(value, num_heads)
    if past_key is not None and past_value is not None:
        heads_key, heads_value = ops.cat([past_key, heads_key], 2), ops.cat([past_value, heads_value], 2)
    attended = _masked_attention(
        call,
        heads_query,
        heads_key,
        heads_value,
        key_padding_mask,
        attention_bias,
        scale,
        unidirectional,
        mask_filter_value,
    )
    return (_merge_heads(attended), heads_key, heads_value)[: call.num_outputs]


# ----------------------------------------------------------------------------- rotary embedding


def _rotated(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    """``x`` (last dim = rotary dim) rotated pairwise by the angles whose cos/sin are given (half size).

    Pairs are ``(x[i], x[i + d/2])``, or ``(x[2i], x[2i + 1])`` when interleaved.
    """
    if interleaved:
        pairs = x.unflatten(-1, (x.shape[-1] // 2, 2))
        even, odd = pairs[..., 0], pairs[..., 1]
        return ops.stack([even * cos - odd * sin, odd * cos + even * sin], -1).flatten(-2)
    first, second = x.chunk(2, dim=-1)
    return ops.cat([first * cos - second * sin, second * cos + first * sin], -1)


@importers.register("RotaryEmbedding", domain=CONTRIB_DOMAIN)
def RotaryEmbedding(
    call: NodeCall,
    input,
    position_ids,
    cos_cache,
    sin_cache,
    *,
    interleaved=0,
    is_packed_batching=0,
    num_heads=0,
    rotary_embedding_dim=0,
    scale=1.0,
):
    """RoPE on ``[B, S, N * H]`` or ``[B, N, S, H]``: the first ``rotary_embedding_dim`` of each head rotated.

    ``position_ids`` is ``[B, S]``, or ``[1]``: the first position, the others following it.
    """
    if is_packed_batching:
        raise _unsupported(call, "is_packed_batching=1")
    rotary_half = cos_cache.shape[-1]
    batch = input.shape[0]
    if len(input.shape) == 3:
        length = input.shape[1]
        head_size = input.shape[2] // num_heads if num_heads else 2 * rotary_half
        heads = input.reshape(batch, length, input.shape[2] // head_size, head_size).transpose(1, 2)
    else:
        heads, length = input, input.shape[2]
    if tuple(position_ids.shape) == (1,):
        offsets = creation.arange(length, dtype=dtypes.int64).reshape(1, length)
        position_ids = position_ids.to(dtypes.int64).reshape(1, 1) + offsets
    position_ids = position_ids.to(dtypes.int64)
    cos = apply_op("Gather", (cos_cache, position_ids), {"axis": 0}).unsqueeze(1)  # [B or 1, 1, S, d/2]
    sin = apply_op("Gather", (sin_cache, position_ids), {"axis": 0}).unsqueeze(1)
    rotary_dim = 2 * rotary_half
    rotated = _rotated(heads[..., :rotary_dim], cos, sin, bool(interleaved))
    if rotary_dim < heads.shape[-1]:
        rotated = ops.cat([rotated, heads[..., rotary_dim:]], -1)
    if len(input.shape) == 3:
        rotated = _merge_heads(rotated)
    return (rotated,)


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
    return ops.clamp(x, _as_float32(low), _as_float32(high))


def _hard_sigmoid(x: Tensor, params: list) -> Tensor:
    alpha, beta = (list(params) + [0.2, 0.5][len(params) :])[:2]
    return ops.clamp(x * _as_float32(alpha) + _as_float32(beta), 0.0, 1.0)


# FusedConv's activation by name, with its activation_params (onnxruntime's fusable activations).
_FUSED_ACTIVATIONS = {
    "Relu": lambda x, params: ops.relu(x),
    "Tanh": lambda x, params: ops.tanh(x),
    "Sigmoid": lambda x, params: ops.sigmoid(x),
    "LeakyRelu": lambda x, params: F.leaky_relu(x, _as_float32(params[0]) if params else 0.01),
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
        raise _unsupported(call, f"activation {activation!r} (known: {sorted(_FUSED_ACTIVATIONS)})")
    return (function(output, list(activation_params or [])),)


# ----------------------------------------------------------------------------- grouped-query attention


def _repeat_heads(tensor: Tensor, times: int) -> Tensor:
    """``[B, Nkv, T, H] -> [B, Nkv * times, T, H]``, each key/value head serving ``times`` query heads."""
    if times == 1:
        return tensor
    batch, heads, length, size = tensor.shape
    return tensor.unsqueeze(2).expand(batch, heads, times, length, size).reshape(batch, heads * times, length, size)


@importers.register("GroupQueryAttention", domain=CONTRIB_DOMAIN)
def GroupQueryAttention(
    call: NodeCall,
    query,
    key=None,
    value=None,
    past_key=None,
    past_value=None,
    seqlens_k=None,
    total_sequence_length=None,
    cos_cache=None,
    sin_cache=None,
    *args,
    num_heads,
    kv_num_heads,
    scale=0.0,
    do_rotary=0,
    rotary_interleaved=0,
    local_window_size=-1,
    softcap=0.0,
    smooth_softmax=0,
    **unused,
):
    """Causal attention of ``num_heads`` query heads over ``kv_num_heads`` key/value heads.

    The new keys and values are appended to ``past_key``/``past_value`` (``[B, Nkv, P, H]``, P may
    be 0) and the queries take the positions after the past's: rotary embedding of queries and
    keys at those positions when ``do_rotary``, a sliding window (each query sees the
    ``local_window_size`` keys ending at its own position) when ``local_window_size >= 0`` and a
    tanh soft cap when ``softcap > 0``. Every sequence of the batch must be ``P + S`` long
    (``seqlens_k`` all ``P + S - 1``; it is read to check). Outputs the attention
    ``[B, S, N * H]`` and the appended keys and values (present).
    """
    if args and any(argument is not None for argument in args):
        raise _unsupported(call, "position_ids, attention_bias or head_sink inputs")
    if smooth_softmax:
        raise _unsupported(call, "smooth_softmax=1")
    if key is None:
        head_size = query.shape[-1] // (num_heads + 2 * kv_num_heads)
        query, key, value = query.split(
            [num_heads * head_size, kv_num_heads * head_size, kv_num_heads * head_size], dim=-1
        )
    heads_query, heads_key = _split_heads(query, num_heads), _split_heads(key, kv_num_heads)
    heads_value = _split_heads(value, kv_num_heads)
    length = query.shape[1]
    past_length = 0 if past_key is None else past_key.shape[2]
    if seqlens_k is not None and np.any(array_of(seqlens_k) != past_length + length - 1):
        raise _unsupported(
            call,
            f"sequences of different lengths (seqlens_k {array_of(seqlens_k).tolist()} with "
            f"{past_length} past and {length} new positions; a preallocated cache)",
        )
    if do_rotary:
        positions = creation.arange(past_length, past_length + length, dtype=dtypes.int64).reshape(1, length)
        cos = apply_op("Gather", (cos_cache, positions), {"axis": 0}).unsqueeze(1)
        sin = apply_op("Gather", (sin_cache, positions), {"axis": 0}).unsqueeze(1)
        rotary_dim = 2 * cos_cache.shape[-1]

        def rotate(heads: Tensor) -> Tensor:
            rotated = _rotated(heads[..., :rotary_dim], cos, sin, bool(rotary_interleaved))
            return rotated if rotary_dim == heads.shape[-1] else ops.cat([rotated, heads[..., rotary_dim:]], -1)

        heads_query, heads_key = rotate(heads_query), rotate(heads_key)
    if past_length:
        heads_key, heads_value = ops.cat([past_key, heads_key], 2), ops.cat([past_value, heads_value], 2)
    groups = num_heads // kv_num_heads
    scale = _as_float32(scale or 1.0 / math.sqrt(heads_query.shape[-1]))
    scores = ops.matmul(heads_query, _repeat_heads(heads_key, groups).transpose(-1, -2)) * scale
    if softcap > 0:
        scores = ops.tanh(scores * (1.0 / _as_float32(softcap))) * _as_float32(softcap)
    query_position = past_length + np.arange(length)[:, None]
    key_position = np.arange(past_length + length)[None, :]
    allowed = key_position <= query_position
    if local_window_size >= 0:
        allowed &= key_position > query_position - local_window_size
    scores = ops.where(
        constant_tensor(allowed),
        scores,
        constant_tensor(np.array(np.finfo(scores.dtype.numpy_dtype).min, scores.dtype.numpy_dtype)),
    )
    attended = ops.matmul(ops.softmax(scores, -1), _repeat_heads(heads_value, groups))
    return (_merge_heads(attended), heads_key, heads_value)[: call.num_outputs]
