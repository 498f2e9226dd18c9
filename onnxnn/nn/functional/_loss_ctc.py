"""Connectionist temporal classification loss (Graves et al., 2006), by its forward recursion.

The recursion over time is recorded step by step (a few nodes per frame), on the extended label
sequence ``blank, l1, blank, l2, ..., blank``. Impossible states hold a large finite negative value
instead of -inf: logsumexp over them stays finite, so no ``0 * inf`` reaches the gradient, and a loss
at that scale (no alignment fits in the input) is reported as inf, as PyTorch does.

Lengths stay tensors in the graph (an exported loss takes new lengths); only 1-D concatenated
targets need their lengths on the host, to lay the targets out as a padded matrix.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...ir.graph import static_constant
from ...runtime.internal import known_data, tensor_of
from ...runtime.ops.reduce import recorded_mean
from ...runtime.tensor import Tensor, apply_op
from ...ir.dtypes import scalar_type_name
from ._common import loss_inputs_in_float32

__all__ = ["ctc_loss"]

# Far below any log-likelihood of a real alignment, far above the dtype's overflow.
_IMPOSSIBLE = -1e30
_REPORTED_INFINITE = -0.5 * _IMPOSSIBLE


def _constant(array, dtype, device) -> Tensor:
    return tensor_of(static_constant(np.asarray(array), dtype, device))


def _as_lengths(lengths, device) -> Tensor:
    if isinstance(lengths, Tensor):
        return lengths.to(dtypes.int64)
    return _constant(np.asarray(lengths, np.int64).reshape(-1), dtypes.int64, device)


def _known(lengths):
    """The lengths' values when they are already in memory (a sequence, or a computed tensor), else None."""
    if isinstance(lengths, Tensor):
        return known_data(lengths)
    return np.asarray(lengths, np.int64)


def _logsumexp(*terms: Tensor) -> Tensor:
    peak = terms[0]
    for term in terms[1:]:
        peak = _ops.maximum(peak, term)
    peak = peak.detach()
    total = _ops.exp(terms[0] - peak)
    for term in terms[1:]:
        total = total + _ops.exp(term - peak)
    return _ops.log(total) + peak


def _padded_targets(targets: Tensor, lengths, batch: int) -> Tensor:
    """1-D concatenated targets as an ``(N, S_max)`` matrix (padding repeats an existing label).

    ``lengths`` are the target lengths on the host.
    """
    lengths = np.asarray(lengths, np.int64).reshape(-1)
    total = int(lengths.sum())
    if targets.shape[0] != total:  # fewer labels would be made up, more silently dropped
        raise RuntimeError(
            f"Expected tensor to have size {total} at dimension 0, but got size {targets.shape[0]} for "
            "argument #2 'targets' (while checking arguments for ctc_loss_allocate_outputs)"
        )
    width = max(int(lengths.max()), 1) if lengths.size else 1
    if targets.shape[0] == 0:  # every length 0: no label to repeat, and none is read
        return _constant(np.zeros((batch, width), np.int64), dtypes.int64, targets.device)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    index = np.minimum(starts[:, None] + np.arange(width)[None, :], max(targets.shape[0] - 1, 0))
    flat = targets.index_select(0, _constant(index.reshape(-1), dtypes.int64, targets.device))
    return flat.reshape(batch, width)


def _check_lengths(values, name: str, bound: int, batch: int) -> None:
    if values is None:
        return
    values = np.asarray(values).reshape(-1)
    if values.size != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    if (values < 0).any():
        raise RuntimeError(
            f"Expected {name} to have value at least 0, but got value {int(values[values < 0][0])} "
            "(while checking arguments for ctc_loss_allocate_outputs)"
        )
    if name == "input_lengths" and (values > bound).any():
        raise RuntimeError(
            f"Expected input_lengths to have value at most {bound}, but got value "
            f"{int(values[values > bound][0])} (while checking arguments for ctc_loss_allocate_outputs)"
        )
    if name == "target_lengths" and (values > bound).any():
        raise RuntimeError(
            f"Expected tensor to have size at least {int(values.max())} at dimension 1, but got size "
            f"{bound} for argument #2 'targets' "
            "(while checking arguments for ctc_loss_allocate_outputs)"
        )


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths,
    target_lengths,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The negative log likelihood of ``targets`` summed over every CTC alignment to ``log_probs``.

    Args:
        log_probs: ``(T, N, C)`` or unbatched ``(T, C)`` log-probabilities (e.g. ``log_softmax`` output).
        targets: ``(N, S)`` padded class indices, or the ``(sum(target_lengths))`` concatenation.
        input_lengths: ``(N)`` frames used per sample (a tensor or a sequence of ints).
        target_lengths: ``(N)`` labels per sample.
        blank: the blank class. Default: ``0``.
        reduction: ``'none'``; ``'mean'`` divides each loss by its target length, then averages;
            ``'sum'``. Default: ``'mean'``.
        zero_infinity: report impossible alignments as 0 (with zero gradient) instead of inf.

    Unlike PyTorch's kernel, the gradient is the exact one with respect to ``log_probs``; through a
    ``log_softmax`` both give the same gradient for the logits.
    """
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    # On PyTorch's autocast float32 lists: low-precision log-probabilities are cast before the check.
    (log_probs,) = loss_inputs_in_float32("CtcLossBackward0", log_probs)
    if log_probs.dtype not in (dtypes.float32, dtypes.float64):
        raise NotImplementedError(f"\"ctc_loss\" not implemented for '{scalar_type_name(log_probs.dtype)}'")
    unbatched = log_probs.dim() == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0)
    if log_probs.dim() != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of shape (T, N, C) or (T, C), got {list(log_probs.shape)}")
    frames, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    device = log_probs.device
    for lengths, name in ((input_lengths, "input_lengths"), (target_lengths, "target_lengths")):
        if isinstance(lengths, Tensor) and (lengths.dtype.is_floating_point or lengths.dtype is dtypes.bool):
            raise RuntimeError(f"{name} must be integral")
    _check_lengths(_known(input_lengths), "input_lengths", frames, batch)
    known_target_lengths = _known(target_lengths)
    input_lengths = _as_lengths(input_lengths, device).reshape(-1)
    target_lengths = _as_lengths(target_lengths, device).reshape(-1)
    targets = targets.to(dtypes.int64)
    if targets.dim() == 1:
        if known_target_lengths is None:  # read, as PyTorch's kernel reads them, to lay the targets out
            known_target_lengths = target_lengths.numpy(force=True)
        _check_lengths(known_target_lengths, "target_lengths", targets.shape[0], batch)
        targets = _padded_targets(targets, known_target_lengths, batch)
    else:
        _check_lengths(known_target_lengths, "target_lengths", targets.shape[1], batch)
    width = targets.shape[1]
    states = 2 * width + 1

    # Extended labels: odd states hold target (s - 1) / 2, even states the blank.
    position = np.arange(states)
    odd = position % 2 == 1
    label_index = _constant(np.clip((position - 1) // 2, 0, max(width - 1, 0)), dtypes.int64, device)
    if width:
        labels = _ops.where(_constant(odd, dtypes.bool, device), targets.index_select(1, label_index), blank)
    else:
        labels = _constant(np.full((batch, states), blank), dtypes.int64, device)  # (N, L)
    shifted = _constant(np.maximum(position - 2, 0), dtypes.int64, device)
    can_skip = _ops.logical_and(
        _constant(odd & (position >= 2), dtypes.bool, device), _ops.ne(labels, labels.index_select(1, shifted))
    )
    emissions = log_probs.gather(2, labels.unsqueeze(0).expand(frames, batch, states))  # (T, N, L)

    impossible = _constant(np.full((batch, 1), _IMPOSSIBLE), log_probs.dtype, device)
    start = _constant(np.where(position < 2, 0.0, _IMPOSSIBLE), log_probs.dtype, device)
    alpha = emissions[0] + start
    for frame in range(1, frames):
        stay = alpha
        advance = _ops.cat([impossible, alpha[:, :-1]], 1)
        skip = _ops.where(can_skip, _ops.cat([impossible, impossible, alpha[:, :-2]], 1), _IMPOSSIBLE)
        step = _logsumexp(stay, advance, skip) + emissions[frame]
        alpha = _ops.where(_ops.gt(input_lengths, frame).unsqueeze(1), step, alpha)
    # A sample ends in its last label or the blank after it: states 2S - 1 and 2S.
    last = (target_lengths * 2).unsqueeze(1)
    states_row = _constant(position.reshape(1, -1), dtypes.int64, device)
    ends = _ops.logical_or(_ops.eq(states_row, last), _ops.eq(states_row, last - 1))
    ends = _ops.logical_and(ends, _ops.gt(input_lengths, 0).unsqueeze(1))
    # No frames: only the empty target has an alignment, the empty one, of log-likelihood 0.
    empty = _ops.logical_and(_ops.eq(input_lengths, 0), _ops.eq(target_lengths, 0)).unsqueeze(1)
    empty = _ops.logical_and(empty, _ops.eq(states_row, 0))
    final = _ops.where(ends, alpha, _ops.where(empty, 0.0, _IMPOSSIBLE))
    peak = final.amax(1, keepdim=True).detach()
    loss = -(_ops.exp(final - peak).sum(1, keepdim=True).log() + peak).squeeze(1)
    infinite = _ops.ge(loss, _REPORTED_INFINITE)
    loss = _ops.where(infinite, 0.0 if zero_infinity else float("inf"), loss)
    if unbatched:
        loss = loss.reshape(())
        target_lengths = target_lengths.reshape(())
    if reduction == "none":
        return loss
    if reduction == "sum":
        return apply_op("ReduceSum", (loss,), {"keepdims": 0}, "CtcLossBackward0")
    divisor = _ops.clamp(target_lengths, min=1).to(loss.dtype)
    return recorded_mean(loss / divisor, None, False, "CtcLossBackward0")
