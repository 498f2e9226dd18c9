"""Attention: scaled_dot_product_attention and multi_head_attention_forward, as standard ONNX ops.

Both are recorded as their decomposition (MatMul, Mul, Add, Softmax, Where), so the existing
gradient rules differentiate them. Boolean masks become additive ``-inf`` biases, as in PyTorch;
scaled_dot_product_attention gives zeros (not NaN) on rows whose every key is masked, like
PyTorch's math backend (its ``_safe_softmax``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...ir import dtypes
from ...runtime.internal import constant_tensor
from ...runtime.ops.opmath import rounded, widened
from ...runtime.ops.shape import cat as _cat
from ...runtime.tensor import Tensor, outside_autocast
from ._dropout import dropout
from ._linear import linear
from ._padding import pad

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward", "packed_self_attention"]


# C++ type names, as PyTorch's SDPA mask-dtype error prints them.
_CPP_TYPE_NAMES = {
    "float32": "float",
    "float64": "double",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
    "int64": "long int",
    "int32": "int",
    "int16": "short int",
    "int8": "signed char",
    "uint8": "unsigned char",
}


def _cpp_type_name(dtype) -> str:
    name = np.dtype(dtype.numpy_dtype).name if dtype.numpy_dtype is not None else str(dtype)
    return _CPP_TYPE_NAMES.get(name, name)


def _constant(like: Tensor, array) -> Tensor:
    return constant_tensor(np.asarray(array, dtype=like.dtype.numpy_dtype, order="C"), like.dtype, like.device)


def _is_bool(tensor: Tensor) -> bool:
    return tensor.dtype.numpy_dtype == np.bool_


def _as_bias(mask: Tensor, like: Tensor) -> Tensor:
    """A boolean mask (True = attend) as an additive bias of 0 and -inf."""
    return _constant(like, np.zeros(())).masked_fill(mask.logical_not(), float("-inf"))


# Autocast lists scaled_dot_product_attention itself (with the matrix products): its floating arguments
# are cast to the autocast dtype, and its kernel computes as it does for that dtype.
@outside_autocast(listed_as="MatMul")
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """Computes ``softmax(Q K^T * scale + mask) V`` over the last two dimensions.

    Args:
        query: ``(N, ..., Hq, L, E)``.
        key: ``(N, ..., H, S, E)``.
        value: ``(N, ..., H, S, Ev)``.
        attn_mask: broadcastable to ``(N, ..., Hq, L, S)``; boolean (True = take part in attention)
            or floating (added to the scores) in the query's dtype or float32.
        dropout_p: dropout probability applied to the attention weights.
        is_causal: mask out keys after each query (the upper-left aligned lower triangle).
        scale: the factor on ``Q K^T``; default ``1 / sqrt(E)``.
        enable_gqa: let ``H`` divide ``Hq`` (grouped-query attention): keys and values are repeated.

    Returns:
        ``(N, ..., Hq, L, Ev)``.
    """
    if min(query.dim(), key.dim(), value.dim()) < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
            f"{query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} instead."
        )
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Float but found {dtypes.scalar_type_name(query.dtype)}")
    if key.dtype is not query.dtype or value.dtype is not query.dtype:
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{_cpp_type_name(query.dtype)} key.dtype: {_cpp_type_name(key.dtype)} and value.dtype: "
            f"{_cpp_type_name(value.dtype)} instead."
        )
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if attn_mask is not None and attn_mask.dtype is dtypes.float32 and query.dtype is not dtypes.float32:
        attn_mask = attn_mask.to(query.dtype)  # "float" (float32) goes with any query, as PyTorch's
    if attn_mask is not None and not _is_bool(attn_mask) and attn_mask.dtype is not query.dtype:
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {_cpp_type_name(attn_mask.dtype)} and  query.dtype: "
            f"{_cpp_type_name(query.dtype)} instead."
        )
    if key.shape[-1] != query.shape[-1]:
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to be: "
            f"[{query.shape[-3] if query.dim() > 2 else 1}, {query.shape[-1]}] but got: "
            f"[{key.shape[-3] if key.dim() > 2 else 1}, {key.shape[-1]}]."
        )
    length, source = query.shape[-2], key.shape[-2]
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    if enable_gqa and query.dim() >= 3:
        # Keys and values are repeated each by its own head count (PyTorch's allow them to differ).
        heads = query.shape[-3]
        if any(tensor.shape[-3] == 0 or heads % tensor.shape[-3] for tensor in (key, value)):
            raise RuntimeError("Number of heads in key and value must divide the number of heads in query")
        if key.shape[-3] != heads:
            key = key.repeat_interleave(heads // key.shape[-3], dim=-3)
        if value.shape[-3] != heads:
            value = value.repeat_interleave(heads // value.shape[-3], dim=-3)
    # Half-precision scores are computed and normalized in float32 (opmath), as PyTorch's CPU kernel does:
    # Q K^T of float16 rows overflows (inf - inf: NaN weights) before the scaling would bring it back.
    scores = (widened(query) @ widened(key).transpose(-2, -1)) * factor
    bias = None
    if is_causal:
        bias = _constant(query, np.where(np.tril(np.ones((length, source), dtype=bool)), 0.0, -np.inf))
    if attn_mask is not None:
        mask_bias = _as_bias(attn_mask, query) if _is_bool(attn_mask) else attn_mask
        bias = mask_bias if bias is None else bias + mask_bias
    if bias is not None:
        scores = scores + bias
    if bias is not None:
        # Rows with every key masked: PyTorch's safe softmax gives zeros where Softmax gives NaN; the
        # row is neutralized before Softmax too, so its backward sees no NaN either.
        dead = (scores == float("-inf")).all(dim=-1, keepdim=True)
        weights = scores.masked_fill(dead, 0.0).softmax(dim=-1).masked_fill(dead, 0.0)
    else:
        weights = scores.softmax(dim=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=True)
    return rounded(weights, value.dtype) @ value


def _canonical_mask(
    mask: Tensor | None, name: str, like: Tensor, other: Tensor | None = None, other_name: str = ""
) -> Tensor | None:
    """PyTorch's _canonical_mask: boolean masks (True = masked out) become -inf biases, float ones stay."""
    if mask is None:
        return None
    if not _is_bool(mask) and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    if other is not None and other.dtype is not mask.dtype:
        warnings.warn(
            f"Support for mismatched {name} and {other_name} is deprecated. Use same type for both instead.",
            stacklevel=3,
        )
    if _is_bool(mask):
        return _constant(like, np.zeros(())).masked_fill(mask, float("-inf")).expand(*mask.shape)
    return mask


def _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads) -> bool:
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                f"{key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                f"found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                f"found {attn_mask.dim()}-D tensor instead"
            )
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                f"{key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D "
                f"but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                    f"but found {attn_mask.dim()}-D tensor instead"
                )
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D query tensor")


def _check_projections(weights: tuple, biases: tuple, inputs: tuple, embed_dim: int) -> None:
    """PyTorch's checks of separate query, key and value projections (its AssertionErrors, with its
    messages), which otherwise surface as a matrix product's shape error naming none of them."""
    for name, weight, bias, input in zip(("query", "key", "value"), weights, biases, inputs):
        if weight is None:
            raise AssertionError(f"use_separate_proj_weight is True but {name[0]}_proj_weight is None")
        expected = (embed_dim, input.shape[-1])
        if tuple(weight.shape) != expected:
            raise AssertionError(f"expecting {name} weights shape of {expected}, but got {weight.shape}")
        if bias is not None and tuple(bias.shape) != (embed_dim,):
            raise AssertionError(f"expecting {name} bias shape of {(embed_dim,)}, but got {bias.shape}")


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Multi-head attention over sequence-first inputs; see :class:`onnxnn.nn.MultiheadAttention`.

    Args:
        query: ``(L, N, E)`` or unbatched ``(L, E)``; key, value: ``(S, N, Ek)``, ``(S, N, Ev)``.
        key_padding_mask: ``(N, S)``; True (or -inf) marks keys to ignore.
        attn_mask: ``(L, S)`` or ``(N * num_heads, L, S)``; True (or -inf) marks pairs to ignore.
        is_causal: a hint that ``attn_mask`` is the causal mask (it must still be given).

    Returns:
        ``(output, weights)``: output ``(L, N, E)``; weights ``(N, L, S)`` averaged over heads (or
        ``(N, num_heads, L, S)``) when ``need_weights``, else None.
    """
    batched = _shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query, attn_mask, "attn_mask")
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
            "method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's {value.shape[:2]}"
            )
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias.chunk(3)
        _check_projections(
            (q_proj_weight, k_proj_weight, v_proj_weight), (b_q, b_k, b_v), (query, key, value), embed_dim
        )
        q = linear(query, q_proj_weight, b_q)  # type: ignore[arg-type]
        k = linear(key, k_proj_weight, b_k)  # type: ignore[arg-type]
        v = linear(value, v_proj_weight, b_v)  # type: ignore[arg-type]
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        w_q, w_k, w_v = in_proj_weight.chunk(3)  # type: ignore[union-attr]  # given without separate weights
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias.chunk(3)
        q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be {(tgt_len, src_len)}."
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                    f"{(bsz * num_heads, tgt_len, src_len)}."
                )
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        k = _cat([k, bias_k.repeat(1, bsz, 1)], 0)
        v = _cat([v, bias_v.repeat(1, bsz, 1)], 0)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    elif bias_k is not None or bias_v is not None:
        raise AssertionError(
            "bias_k is set but bias_v is None" if bias_k is not None else "bias_v is set but bias_k is None"
        )
    for name, static in (("static_k", static_k), ("static_v", static_v)):
        if static is not None:
            for dim, expected in ((0, bsz * num_heads), (2, head_dim)):
                if static.shape[dim] != expected:
                    raise AssertionError(f"expecting {name}.size({dim}) of {expected}, but got {static.shape[dim]}")
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    if add_zero_attn:
        zeros = _constant(k, np.zeros((bsz * num_heads, 1, head_dim)))
        k = _cat([k, zeros], 1)
        v = _cat([v, _constant(v, np.zeros((bsz * num_heads, 1, head_dim)))], 1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(
                f"expecting key_padding_mask shape of {(bsz, src_len)}, but got {key_padding_mask.shape}"
            )
        padding = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        padding = padding.reshape(bsz * num_heads, 1, src_len)
        attn_mask = padding if attn_mask is None else attn_mask + padding
    if not training:
        dropout_p = 0.0
    if need_weights:
        scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = scores.softmax(dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        output = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        output = linear(output, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, output.shape[1])
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            output, weights = output.squeeze(1), weights.squeeze(0)
        return output, weights
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    output = output.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    output = linear(output, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, output.shape[1])
    if not batched:
        output = output.squeeze(1)
    return output, None


def packed_self_attention(
    x: Tensor,
    num_heads: int,
    in_proj_weight: Tensor,
    in_proj_bias: Tensor | None,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    dropout_p: float = 0.0,
    training: bool = True,
    need_weights: bool = True,
    average_attn_weights: bool = True,
    batch_first: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Unmasked self-attention with a packed input projection: ``multi_head_attention_forward(x, x, x, ...)``.

    The same formula in about half the recorded ops (14 rather than 33 for a batch-first layer):
    one Gemm projects queries, keys and values together, one Transpose puts the heads of all
    three first, and the heads' outputs reach the output projection through one Transpose.
    Recording, planning and backward bookkeeping are paid per op, and an inference call of a
    transformer layer is dominated by them.

    Args:
        x: ``(N, L, E)`` when ``batch_first``, else ``(L, N, E)``.
        in_proj_weight: ``(3 * E, E)``; in_proj_bias: ``(3 * E)`` or None.
        out_proj_weight: ``(E, E)``; out_proj_bias: ``(E)`` or None.

    Returns:
        ``(output, weights)`` as :func:`multi_head_attention_forward` returns them, in ``x``'s layout.
    """
    first, second, embed_dim = x.shape  # (N, L) when batch_first, else (L, N)
    if batch_first:
        heads_first = (0, 2, 1, 3)  # (N, L, 3H, D) -> (N, 3H, L, D)
        heads_last = (0, 2, 1, 3)  # (N, H, L, D) -> (N, L, H, D)
    else:
        heads_first = (1, 2, 0, 3)  # (L, N, 3H, D) -> (N, 3H, L, D)
        heads_last = (2, 0, 1, 3)  # (N, H, L, D) -> (L, N, H, D)
    head_dim = embed_dim // num_heads
    projected = linear(x.reshape(first * second, embed_dim), in_proj_weight, in_proj_bias)
    projected = projected.reshape(first, second, 3 * num_heads, head_dim).permute(*heads_first)
    q, k, v = projected.split(num_heads, dim=1)
    scores = (q @ k.transpose(-2, -1)) * math.sqrt(1.0 / head_dim)
    weights = scores.softmax(dim=-1)
    if training and dropout_p > 0.0:
        weights = dropout(weights, p=dropout_p)
    output = (weights @ v).permute(*heads_last).reshape(first * second, embed_dim)
    output = linear(output, out_proj_weight, out_proj_bias).reshape(first, second, embed_dim)
    if not need_weights:
        return output, None
    return output, weights.mean(dim=1) if average_attn_weights else weights
