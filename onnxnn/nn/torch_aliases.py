"""torch's top-level forms of nn.functional operations, with torch's own signatures.

``torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
cudnn_enabled)`` orders its arguments unlike ``F.batch_norm``, losses take ``reduction`` as ATen's
integer (0 none, 1 mean, 2 sum), ``torch.embedding`` takes the weight first, and the ``native_*``
forms also return the statistics autograd would save. Each function here maps torch's argument order
onto the functional that records the ops, so values and gradients are the functional's.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from ..ir import random as _random
from ..ir.dtypes import bool as _bool
from ..runtime import ops as _ops
from ..runtime.creation import empty, ones
from ..runtime.internal import apply_in_place, constant_tensor
from ..runtime.tensor import Tensor
from . import functional as F
from .functional._dropout import _check_probability, _masked
from .functional._embedding import _index_values, _renorm_rows

__all__ = [
    "adaptive_max_pool1d",
    "affine_grid_generator",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy_with_logits",
    "channel_shuffle",
    "constant_pad_nd",
    "conv_tbc",
    "convolution",
    "cosine_embedding_loss",
    "cosine_similarity",
    "ctc_loss",
    "embedding",
    "embedding_bag",
    "embedding_renorm_",
    "feature_dropout",
    "feature_dropout_",
    "grid_sampler",
    "grid_sampler_2d",
    "grid_sampler_3d",
    "hinge_embedding_loss",
    "kl_div",
    "margin_ranking_loss",
    "max_pool1d_with_indices",
    "native_batch_norm",
    "native_channel_shuffle",
    "native_dropout",
    "native_group_norm",
    "native_layer_norm",
    "norm_except_dim",
    "pixel_shuffle",
    "pixel_unshuffle",
    "poisson_nll_loss",
    "triplet_margin_loss",
]

# Same signature in torch and torch.nn.functional: re-exported as they are.
bilinear = F.bilinear
channel_shuffle = F.channel_shuffle
conv_tbc = F.conv_tbc
cosine_similarity = F.cosine_similarity
native_channel_shuffle = F.native_channel_shuffle
pixel_shuffle = F.pixel_shuffle
pixel_unshuffle = F.pixel_unshuffle

# ATen's at::Reduction enum, which torch's top-level losses take instead of F's strings.
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
# ATen's GridSampler enums (interpolation_mode, padding_mode).
_GRID_INTERPOLATIONS = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def _reduction(reduction: int) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


# --- normalization -------------------------------------------------------------------------------------------


def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
) -> Tensor:
    """torch.batch_norm: :func:`~onnxnn.nn.functional.batch_norm` with torch's argument order
    (``cudnn_enabled`` only picks a backend in PyTorch and is ignored)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def native_batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """torch.native_batch_norm: ``(output, save_mean, save_invstd)``.

    Training, ``save_mean`` and ``save_invstd`` are the batch's per-channel mean and
    ``1 / sqrt(biased variance + eps)`` (and the running statistics are updated as
    :func:`batch_norm` does); in evaluation both are empty, as in PyTorch.
    """
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
    output = F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if not training:
        return (
            output,
            empty(0, dtype=input.dtype, device=input.device),
            empty(0, dtype=input.dtype, device=input.device),
        )
    axes = [0] + list(range(2, input.dim()))
    mean = input.mean(axes)
    variance = input.var(axes, correction=0)
    return output, mean, (variance + eps).rsqrt()


def native_layer_norm(
    input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None, bias: Tensor | None, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """torch.native_layer_norm: ``(output, mean, rstd)``, the statistics over the last
    ``len(normalized_shape)`` dims kept as size-1 dims."""
    output = F.layer_norm(input, list(normalized_shape), weight, bias, eps)
    axes = list(range(input.dim() - len(normalized_shape), input.dim()))
    mean = input.mean(axes, keepdim=True)
    return output, mean, (input.var(axes, correction=0, keepdim=True) + eps).rsqrt()


def native_group_norm(
    input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int, C: int, HxW: int, group: int, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """torch.native_group_norm: ``(output, mean, rstd)`` with the statistics of shape ``(N, group)``."""
    if input.numel() != N * C * HxW:
        raise RuntimeError(f"Expected input to have {N * C * HxW} elements (N * C * HxW), but got {input.numel()}")
    output = F.group_norm(input, group, weight, bias, eps)
    grouped = input.reshape((N, group, -1))
    mean = grouped.mean(-1)
    return output, mean, (grouped.var(-1, correction=0) + eps).rsqrt()


def norm_except_dim(v: Tensor, pow: float = 2, dim: int = 0) -> Tensor:
    """torch.norm_except_dim: the ``pow``-norm over every dim but ``dim``, which keeps its size while the
    others become 1 (weight normalization's ``g``); ``dim=-1`` is the norm of everything, a 0-d tensor."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.dim()
    axes = [axis for axis in range(v.dim()) if axis != dim]
    if not axes:
        return v.abs()
    return v.norm(pow, axes, keepdim=True)


# --- losses --------------------------------------------------------------------------------------------------


def binary_cross_entropy_with_logits(
    input: Tensor, target: Tensor, weight: Tensor | None = None, pos_weight: Tensor | None = None, reduction: int = 1
) -> Tensor:
    """torch.binary_cross_entropy_with_logits: ``reduction`` as ATen's integer (0 none, 1 mean, 2 sum)."""
    return F.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_reduction(reduction), pos_weight=pos_weight
    )


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 1
) -> Tensor:
    """torch.cosine_embedding_loss: ``reduction`` as ATen's integer."""
    return F.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: int = 1,
    zero_infinity: bool = False,
) -> Tensor:
    """torch.ctc_loss: ``reduction`` as ATen's integer."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction), zero_infinity)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 1) -> Tensor:
    """torch.hinge_embedding_loss: ``reduction`` as ATen's integer."""
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def kl_div(input: Tensor, target: Tensor, reduction: int = 1, *, log_target: bool = False) -> Tensor:
    """torch.kl_div: ``reduction`` as ATen's integer; 1 is the mean over every element (F.kl_div's
    'mean', without its warning: 'batchmean' has no integer form)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return F.kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0, reduction: int = 1
) -> Tensor:
    """torch.margin_ranking_loss: ``reduction`` as ATen's integer."""
    return F.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float, reduction: int) -> Tensor:
    """torch.poisson_nll_loss: every argument required, ``reduction`` as ATen's integer."""
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    reduction: int = 1,
) -> Tensor:
    """torch.triplet_margin_loss: ``reduction`` as ATen's integer."""
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap, reduction=_reduction(reduction))


# --- convolution, padding, pooling, sampling -----------------------------------------------------------------

_CONVOLUTIONS = {1: _ops.conv1d, 2: _ops.conv2d, 3: _ops.conv3d}
_TRANSPOSED_CONVOLUTIONS = {1: _ops.conv_transpose1d, 2: _ops.conv_transpose2d, 3: _ops.conv_transpose3d}


def convolution(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Tensor:
    """torch.convolution: the 1-, 2- or 3-d (transposed) convolution that ``weight``'s rank names."""
    spatial = weight.dim() - 2
    if spatial not in _CONVOLUTIONS:
        raise RuntimeError(f"Expected 3D, 4D or 5D weight for convolution, but got weight of size {list(weight.shape)}")
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    if transposed:
        return _TRANSPOSED_CONVOLUTIONS[spatial](
            input, weight, bias, stride, padding, list(output_padding), groups, dilation
        )
    if any(output_padding):
        raise RuntimeError("output_padding is only supported for transposed convolutions")
    return _CONVOLUTIONS[spatial](input, weight, bias, stride, padding, dilation, groups)


def constant_pad_nd(input: Tensor, pad: Sequence[int], value: float = 0) -> Tensor:
    """torch.constant_pad_nd: ``F.pad(input, pad, 'constant', value)`` (negative pads crop)."""
    return F.pad(input, list(pad), "constant", value)


def adaptive_max_pool1d(input: Tensor, output_size) -> tuple[Tensor, Tensor]:
    """torch.adaptive_max_pool1d: ``(output, indices)``, as ATen returns both."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def max_pool1d_with_indices(
    input: Tensor, kernel_size, stride=(), padding=0, dilation=1, ceil_mode: bool = False
) -> tuple[Tensor, Tensor]:
    """torch.max_pool1d_with_indices: ``(output, indices)``; an empty ``stride`` means ``kernel_size``."""
    if isinstance(stride, Sequence) and len(stride) == 0:
        stride = None
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=True)


def affine_grid_generator(theta: Tensor, size: Sequence[int], align_corners: bool) -> Tensor:
    """torch.affine_grid_generator: :func:`~onnxnn.nn.functional.affine_grid` with ``align_corners`` required."""
    return F.affine_grid(theta, list(size), align_corners=align_corners)


def grid_sampler(
    input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Tensor:
    """torch.grid_sampler: :func:`~onnxnn.nn.functional.grid_sample` with ATen's integer modes
    (interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection)."""
    if interpolation_mode not in _GRID_INTERPOLATIONS:
        raise RuntimeError(f"grid_sampler(): unknown interpolation mode {interpolation_mode}")
    if padding_mode not in _GRID_PADDINGS:
        raise RuntimeError(f"grid_sampler(): unknown padding mode {padding_mode}")
    return F.grid_sample(
        input, grid, _GRID_INTERPOLATIONS[interpolation_mode], _GRID_PADDINGS[padding_mode], align_corners
    )


def _grid_sampler_of_rank(rank: int):
    def sampler(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int, align_corners: bool) -> Tensor:
        if input.dim() != rank:
            raise RuntimeError(
                f"grid_sampler(): expected {rank}D input and grid with same number of dimensions, "
                f"but got input with sizes {list(input.shape)} and grid with sizes "
                f"{list(grid.shape)}"
            )
        return grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)

    sampler.__name__ = sampler.__qualname__ = f"grid_sampler_{rank - 2}d"
    sampler.__doc__ = f"torch.grid_sampler_{rank - 2}d: :func:`grid_sampler` for {rank}-d input only."
    return sampler


grid_sampler_2d = _grid_sampler_of_rank(4)
grid_sampler_3d = _grid_sampler_of_rank(5)


# --- dropout -------------------------------------------------------------------------------------------------


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_dropout: zeroes whole channels (dim 1) with probability ``p``, any rank >= 2."""
    _check_probability(p)
    return _masked(input, p, train, False, feature=True, alpha=False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """In-place :func:`feature_dropout`: rebinds ``input`` to the result."""
    return apply_in_place(input, lambda x: feature_dropout(x, p, train))


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple[Tensor, Tensor]:
    """torch.native_dropout: ``(output, mask)`` with ``mask`` the boolean kept elements; ``train``
    False or None returns the input and an all-True mask."""
    if not train:
        return input.clone(), ones(tuple(input.shape), dtype=_bool, device=input.device)
    _check_probability(p)
    keep = (
        _random.bernoulli(tuple(input.shape), 1.0 - p).astype(bool)
        if p < 1.0
        else np.zeros(tuple(input.shape), dtype=bool)
    )
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    factor = constant_tensor(
        np.asarray(keep * scale, dtype=input.dtype.numpy_dtype, order="C"), input.dtype, input.device
    )
    return _ops.mul(input, factor), constant_tensor(keep)


# --- embeddings ----------------------------------------------------------------------------------------------


def embedding(
    weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False, sparse: bool = False
) -> Tensor:
    """torch.embedding: weight first; a negative ``padding_idx`` means none (torch's F.embedding has already
    made a user's negative index positive when it calls this)."""
    return F.embedding(
        indices, weight, padding_idx if padding_idx >= 0 else None, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse
    )


_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def embedding_bag(
    weight: Tensor,
    indices: Tensor,
    offsets: Tensor,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """torch.embedding_bag: ``(output, offset2bag, bag_size, max_indices)`` with ``mode`` 0 sum, 1 mean, 2 max.

    ``output`` is :func:`~onnxnn.nn.functional.embedding_bag`'s; the other three are the integer
    bookkeeping PyTorch's general CPU kernel returns for its backward: the bag of each index, each
    bag's size (zeros for sum), and for max the index chosen per bag and column (``bag_size`` for mean,
    zeros for sum). (PyTorch's float32 sum fast path returns an empty ``offset2bag`` instead.)
    """
    if mode not in _BAG_MODES:
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    output = F.embedding_bag(
        indices,
        weight,
        offsets,
        scale_grad_by_freq=scale_grad_by_freq,
        mode=_BAG_MODES[mode],
        sparse=sparse,
        per_sample_weights=per_sample_weights,
        include_last_offset=include_last_offset,
        padding_idx=padding_idx,
    )
    bags = output.shape[0]
    values = _index_values(indices, "embedding_bag").reshape(-1)
    starts = [int(start) for start in _index_values(offsets, "embedding_bag").reshape(-1)][:bags]
    ends = starts[1:] + [values.size]
    bag_of = np.zeros(values.size, dtype=np.int64)
    sizes = np.zeros(bags, dtype=np.int64)
    for bag, (start, end) in enumerate(zip(starts, ends)):
        bag_of[start:end] = bag
        members = values[start:end]
        sizes[bag] = members.size if padding_idx is None else int((members != padding_idx).sum())
    if mode == 0:
        zero_per_bag = np.zeros(bags, dtype=np.int64)
        return output, constant_tensor(bag_of), constant_tensor(zero_per_bag), constant_tensor(zero_per_bag.copy())
    if mode == 1:
        return output, constant_tensor(bag_of), constant_tensor(sizes), constant_tensor(sizes.copy())
    rows = weight.numpy(force=True)
    chosen = np.full((bags, rows.shape[1]), -1, dtype=np.int64)
    for bag, (start, end) in enumerate(zip(starts, ends)):
        kept = [int(index) for index in values[start:end] if padding_idx is None or index != padding_idx]
        if kept:
            chosen[bag] = np.asarray(kept, dtype=np.int64)[rows[kept].argmax(0)]
    return output, constant_tensor(bag_of), constant_tensor(sizes), constant_tensor(chosen)


def embedding_renorm_(weight: Tensor, indices: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """torch.embedding_renorm_: rescales, in place and outside autograd, each row of ``weight`` that
    ``indices`` names whose ``norm_type``-norm exceeds ``max_norm`` to norm ``max_norm``; returns ``weight``."""
    _renorm_rows(weight, _index_values(indices, "embedding_renorm_").reshape(-1), max_norm, norm_type)
    return weight
