"""Importers of onnxruntime's ``com.microsoft`` attention ops: Attention, MultiHeadAttention,
GroupQueryAttention and RotaryEmbedding, replayed as standard ops (see ``contrib``'s docstring).

Each follows onnxruntime's contrib op documentation and is checked against onnxruntime in
``tests/import_/test_contrib_ops_forward_gradients.py`` and ``tests/import_/test_contrib_attention.py``.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import dtypes
from ..ir.registry import importers
from ..runtime import creation, ops
from ..runtime.tensor import Tensor, apply_op
from .contrib import CONTRIB_DOMAIN, as_float32, unsupported
from .importers import NodeCall, array_of, constant_tensor

__all__: list[str] = []

# onnxruntime's default (contrib_defs.cc) for the value attention adds to the scores of masked keys.
_MASK_FILTER_VALUE = -10000.0

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
        raise unsupported(
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
    scores = ops.matmul(query, key.transpose(-1, -2)) * as_float32(scale)
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
        raise unsupported(call, "past_present_share_buffer=1 (a cache preallocated to its maximum length)")
    if do_rotary:
        raise unsupported(call, "do_rotary=1")
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
            call, key_mask, query.shape[0], query.shape[2], key.shape[2], as_float32(mask_filter_value), query.dtype
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
        filter_value=as_float32(mask_filter_value),
    )


def _unpacked(call: NodeCall, packed: Tensor, count: int, name: str) -> list[Tensor]:
    """The ``count`` tensors ``[B, L, N * H]`` packed in ``[B, L, N, count, H]``."""
    batch, length, heads, packed_count, size = packed.shape
    if packed_count != count:
        raise ValueError(
            f"{call.op_type} node '{call.name}' (domain '{CONTRIB_DOMAIN}'): a packed {name} of rank 5 must "
            f"have shape [batch, length, num_heads, {count}, head_size], got {list(packed.shape)}"
        )
    return [packed[:, :, :, position, :].reshape(batch, length, heads * size) for position in range(count)]


def _unpacked_query_key_value(call: NodeCall, query, key, value) -> tuple[Tensor, Tensor, Tensor]:
    """MultiHeadAttention's query, key and value, the packed layouts unpacked."""
    if len(query.shape) == 5:
        if key is not None or value is not None:
            raise unsupported(call, "key or value inputs beside a packed query/key/value (a query of rank 5)")
        query, key, value = _unpacked(call, query, 3, "query/key/value")
    elif key is not None and len(key.shape) == 5:
        if value is not None:
            raise unsupported(call, "a value input beside a packed key/value (a key of rank 5)")
        key, value = _unpacked(call, key, 2, "key/value")
    if key is None or value is None or len(query.shape) != 3:
        raise unsupported(call, "a query of rank 3 without both key and value")
    return query, key, value


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

    Packed layouts: a query of shape ``[B, L, N, 3, H]`` holds the query, key and value (key and
    value omitted), a key of shape ``[B, L, N, 2, H]`` the key and value (value omitted).
    ``past_key`` and ``past_value`` (``[B, N, P, H]``) are prepended to the keys and values, and
    ``present_key``/``present_value`` are the results.
    """
    if args and any(argument is not None for argument in args):
        raise unsupported(call, "the past_sequence_length, cache_indirection inputs (beam search)")
    if call.num_outputs > 3:
        raise unsupported(call, "the qk output (the attention scores)")
    query, key, value = _unpacked_query_key_value(call, query, key, value)
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
        raise unsupported(call, "is_packed_batching=1")
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


# ----------------------------------------------------------------------------- grouped-query attention


def _repeat_heads(tensor: Tensor, times: int) -> Tensor:
    """``[B, Nkv, T, H] -> [B, Nkv * times, T, H]``, each key/value head serving ``times`` query heads."""
    if times == 1:
        return tensor
    batch, heads, length, size = tensor.shape
    return tensor.unsqueeze(2).expand(batch, heads, times, length, size).reshape(batch, heads * times, length, size)


def _sequence_lengths(call: NodeCall, seqlens_k, total_sequence_length, length: int, capacity: int):
    """``(totals, pasts, total, first_prompt)``: each sequence's length with the new positions and
    before them (numpy ``[B]``), their maximum (``total_sequence_length``) and whether this is the
    first prompt (no past is read).

    As onnxruntime: the first prompt is a call whose ``length`` is ``total_sequence_length``;
    its sequences are right-padded (``seqlens_k[b] + 1`` real positions). Later calls append
    ``length`` positions after each sequence's past, ``seqlens_k[b] + 1 - length`` long.
    """
    if seqlens_k is None or total_sequence_length is None:
        raise ValueError(
            f"{call.op_type} node '{call.name}' (domain '{CONTRIB_DOMAIN}'): the seqlens_k and "
            "total_sequence_length inputs are required"
        )
    totals = array_of(seqlens_k).astype(np.int64).reshape(-1) + 1
    total = int(array_of(total_sequence_length).reshape(-1)[0])
    first_prompt = length == total
    pasts = np.zeros_like(totals) if first_prompt else totals - length
    if np.any(pasts < 0) or np.any(pasts > capacity) or np.any(totals > total):
        raise ValueError(
            f"{call.op_type} node '{call.name}' (domain '{CONTRIB_DOMAIN}'): seqlens_k {(totals - 1).tolist()} "
            f"does not fit {length} new positions after a past of {capacity} positions with "
            f"total_sequence_length {total}"
        )
    return totals, pasts, total, first_prompt


def _present(cache: Tensor | None, new: Tensor, pasts: np.ndarray, present_length: int) -> Tensor:
    """Each sequence's past (the first ``pasts[b]`` rows of the cache ``[B, Nkv, P, H]``) followed
    by its ``new`` positions ``[B, Nkv, S, H]``, then zeros (as onnxruntime writes the rows after
    a sequence's end): ``[B, Nkv, present_length, H]``."""
    batch, heads, length, size = new.shape
    capacity = 0 if cache is None else cache.shape[2]
    if np.all(pasts == capacity) and present_length == capacity + length:  # one past length: append
        return new if cache is None else ops.cat([cache, new], 2)
    # Rows of [cache, new, one zero row] that make up each sequence's present.
    zero = constant_tensor(np.zeros((batch, heads, 1, size), new.dtype.numpy_dtype))
    source = ops.cat(([] if cache is None else [cache]) + [new, zero], 2)
    position, past = np.arange(present_length)[None, :], pasts[:, None]
    rows = np.where(position < past, position, np.where(position < past + length, capacity + position - past, -1))
    rows[rows < 0] = capacity + length
    index = np.asarray(np.broadcast_to(rows[:, None, :, None], (batch, heads, present_length, size)), order="C")
    return apply_op("GatherElements", (source, constant_tensor(index)), {"axis": 2})


def _rotary_positions(position_ids, pasts: np.ndarray, length: int, first_prompt: bool) -> Tensor:
    """``[B or 1, S]`` positions of the new queries and keys. With ``position_ids`` onnxruntime
    reads only its first element in the first prompt (the positions follow it)."""
    offsets = np.arange(length, dtype=np.int64)[None, :]
    if position_ids is None:
        return constant_tensor(pasts[:, None] + offsets)
    position_ids = position_ids.to(dtypes.int64)
    if first_prompt:
        return position_ids[0:1, 0:1] + constant_tensor(offsets)
    return position_ids


def _allowed_keys(totals, pasts, length: int, total: int, causal: bool, local_window_size: int) -> np.ndarray:
    """``[B, 1, S, total]``: which keys each query attends: the sequence's own (before its total
    length), not after the query's position when causal, and within the window when one is set."""
    key = np.arange(total)[None, None, :]
    query = pasts[:, None, None] + np.arange(length)[None, :, None]
    allowed = np.broadcast_to(key < totals[:, None, None], (len(totals), length, total))
    if causal:
        allowed = allowed & (key <= query)
    if local_window_size >= 0:
        allowed = allowed & (key > query - local_window_size)
    return np.asarray(allowed[:, None], order="C")


def _softmax_with_sink(scores: Tensor, sink: Tensor | None) -> Tensor:
    """softmax over the last dim with ``exp(sink)`` (``[1, N, 1, 1]``; None: 0) added to its denominator."""
    batch, heads, length, _ = scores.shape
    if sink is None:
        sink = constant_tensor(np.zeros((1, 1, 1, 1), scores.dtype.numpy_dtype))
    column = sink.expand(batch, heads, length, 1)
    return ops.softmax(ops.cat([scores, column], -1), -1)[..., :-1]


# Inputs after attention_bias (head_sink excepted) and attributes with their values that onnxnn replays.
_GQA_UNREPLAYED_INPUTS = ("k_scale", "v_scale", "q_norm_weight", "k_norm_weight")
_GQA_REPLAYED_ATTRIBUTES = {"sliding_window_cache": 0, "qk_output": 0, "k_quant_type": "NONE", "v_quant_type": "NONE"}


def _check_group_query_attention(call: NodeCall, args: tuple, attributes: dict) -> None:
    for name, argument in zip(_GQA_UNREPLAYED_INPUTS, args):
        if argument is not None:
            raise unsupported(call, f"the {name} input (a quantized cache or Q/K normalization)")
    for name, replayed in _GQA_REPLAYED_ATTRIBUTES.items():
        value = attributes.get(name, replayed)
        if value != replayed:
            raise unsupported(call, f"{name}={value!r} (only {replayed!r})")
    if call.num_outputs > 3:
        raise unsupported(call, "the output_qk output")


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
    position_ids=None,
    attention_bias=None,
    head_sink=None,
    *args,
    num_heads,
    kv_num_heads,
    scale=0.0,
    do_rotary=0,
    rotary_interleaved=0,
    local_window_size=-1,
    softcap=0.0,
    smooth_softmax=0,
    causal=1,
    **attributes,
):
    """Attention of ``num_heads`` query heads over ``kv_num_heads`` key/value heads with a cache.

    Each sequence's new keys and values are written into ``past_key``/``past_value``
    (``[B, Nkv, P, H]``) after its past (``seqlens_k[b] + 1 - S`` positions; none in the first
    prompt, whose sequences may be right-padded) and its queries take the positions after it.
    Queries attend the keys of their own sequence: causally (``causal``), within a sliding window
    (each query sees the ``local_window_size`` keys ending at its own position) when
    ``local_window_size >= 0``. Rotary embedding of the new queries and keys at their positions
    (or ``position_ids``) when ``do_rotary``; a tanh soft cap when ``softcap > 0``;
    ``attention_bias`` (``[B or 1, N or 1, S, total_sequence_length]``) added to the scores; a
    sink in the softmax's denominator (``head_sink`` per head, or 0 with ``smooth_softmax``).
    Outputs the attention ``[B, S, N * H]`` and the present keys and values
    (``[B, Nkv, max(P, total_sequence_length), H]``).
    """
    _check_group_query_attention(call, args, attributes)
    if key is None:
        head_size = query.shape[-1] // (num_heads + 2 * kv_num_heads)
        query, key, value = query.split(
            [num_heads * head_size, kv_num_heads * head_size, kv_num_heads * head_size], dim=-1
        )
    heads_query, heads_key = _split_heads(query, num_heads), _split_heads(key, kv_num_heads)
    heads_value = _split_heads(value, kv_num_heads)
    length = query.shape[1]
    capacity = 0 if past_key is None else past_key.shape[2]
    totals, pasts, total, first_prompt = _sequence_lengths(call, seqlens_k, total_sequence_length, length, capacity)
    if do_rotary:
        positions = _rotary_positions(position_ids, pasts, length, first_prompt)
        cos = apply_op("Gather", (cos_cache, positions), {"axis": 0}).unsqueeze(1)  # [B or 1, 1, S, d/2]
        sin = apply_op("Gather", (sin_cache, positions), {"axis": 0}).unsqueeze(1)
        rotary_dim = 2 * cos_cache.shape[-1]

        def rotate(heads: Tensor) -> Tensor:
            rotated = _rotated(heads[..., :rotary_dim], cos, sin, bool(rotary_interleaved))
            return rotated if rotary_dim == heads.shape[-1] else ops.cat([rotated, heads[..., rotary_dim:]], -1)

        heads_query, heads_key = rotate(heads_query), rotate(heads_key)
    cache_pasts = np.zeros_like(pasts) if first_prompt else pasts
    present_length = max(capacity, total)
    present_key = _present(None if first_prompt else past_key, heads_key, cache_pasts, present_length)
    present_value = _present(None if first_prompt else past_value, heads_value, cache_pasts, present_length)
    keys, values = present_key, present_value
    if present_length > total:
        keys, values = keys[:, :, :total], values[:, :, :total]
    groups = num_heads // kv_num_heads
    scale = as_float32(scale or 1.0 / math.sqrt(heads_query.shape[-1]))
    scores = ops.matmul(heads_query, _repeat_heads(keys, groups).transpose(-1, -2)) * scale
    if softcap > 0:
        scores = ops.tanh(scores * (1.0 / as_float32(softcap))) * as_float32(softcap)
    if attention_bias is not None:
        scores = scores + attention_bias
    allowed = _allowed_keys(totals, pasts, length, total, bool(causal), local_window_size)
    scores = ops.where(
        constant_tensor(allowed),
        scores,
        constant_tensor(np.array(np.finfo(scores.dtype.numpy_dtype).min, scores.dtype.numpy_dtype)),
    )
    if head_sink is not None:
        probabilities = _softmax_with_sink(scores, head_sink.reshape(1, num_heads, 1, 1))
    elif smooth_softmax:
        probabilities = _softmax_with_sink(scores, None)
    else:
        probabilities = ops.softmax(scores, -1)
    attended = ops.matmul(probabilities, _repeat_heads(values, groups))
    return (_merge_heads(attended), present_key, present_value)[: call.num_outputs]
