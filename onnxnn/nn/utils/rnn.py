"""Packing of variable-length sequences: ``onnxnn.nn.utils.rnn`` (PyTorch's ``torch.nn.utils.rnn``).

A ``PackedSequence`` holds the time steps of a batch of sequences, sorted by decreasing length, one
after the other: step ``t`` contributes the first ``batch_sizes[t]`` sequences' elements. The
lengths are read as numbers when packing (PyTorch requires them on the CPU for the same reason), so
the recorded graph gathers rows with constant indices: packing and unpacking are each one Gather
(plus a Concat for the padding row), and gradients flow through them by the existing rules.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

import numpy as np

from ...runtime.creation import full, tensor
from ...runtime.ops.shape import cat, stack
from ...runtime.tensor import Tensor

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "pack_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


def _int64(array, device=None) -> Tensor:
    return tensor(np.asarray(array, dtype=np.int64), device=device)


def _lengths_array(lengths) -> np.ndarray:
    if isinstance(lengths, Tensor):
        return np.asarray(lengths.numpy(force=True), dtype=np.int64).reshape(-1)
    return np.asarray(lengths, dtype=np.int64).reshape(-1)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes ``permutation`` (``None`` stays ``None``)."""
    if permutation is None:
        return None
    order = np.asarray(permutation.numpy(force=True), dtype=np.int64)
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size, dtype=np.int64)
    return _int64(inverse, permutation.device)


class PackedSequence(NamedTuple):
    """A batch of variable-length sequences packed time step after time step.

    Attributes:
        data: ``(sum(lengths), *)``, the elements of step 0 of every sequence, then of step 1, ...
        batch_sizes: int64 ``(max_length,)``, how many sequences are still running at each step.
        sorted_indices: the batch order used for packing (``None`` when the input was already sorted).
        unsorted_indices: the inverse of ``sorted_indices``, which restores the original order.

    Instances should come from :func:`pack_padded_sequence` or :func:`pack_sequence`.
    """

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None = None
    unsorted_indices: Tensor | None = None

    @classmethod
    def _make_packed(cls, data, batch_sizes, sorted_indices=None, unsorted_indices=None) -> "PackedSequence":
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return cls(data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor) -> "PackedSequence":
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """Moves or casts ``data`` (the indices stay int64 on the CPU)."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def float(self) -> "PackedSequence":
        return self._with_data(self.data.float())

    def double(self) -> "PackedSequence":
        return self._with_data(self.data.double())

    def half(self) -> "PackedSequence":
        return self._with_data(self.data.half())

    def long(self) -> "PackedSequence":
        return self._with_data(self.data.long())

    def int(self) -> "PackedSequence":
        return self._with_data(self.data.int())

    def short(self) -> "PackedSequence":
        return self._with_data(self.data.short())

    def char(self) -> "PackedSequence":
        return self._with_data(self.data.char())

    def byte(self) -> "PackedSequence":
        return self._with_data(self.data.byte())

    def cpu(self) -> "PackedSequence":
        return self

    def cuda(self, *args, **kwargs) -> "PackedSequence":
        """``data`` on a CUDA device (``Tensor.cuda``'s arguments; the indices stay on the CPU)."""
        return self._with_data(self.data.cuda(*args, **kwargs))

    def pin_memory(self) -> "PackedSequence":
        return self._with_data(self.data.pin_memory())

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda

    def is_pinned(self) -> bool:
        return False


def _batch_sizes_of(sorted_lengths: np.ndarray) -> np.ndarray:
    steps = np.arange(int(sorted_lengths[0]))
    return (sorted_lengths[None, :] > steps[:, None]).sum(axis=1).astype(np.int64)


def pack_padded_sequence(
    input: Tensor, lengths, batch_first: bool = False, enforce_sorted: bool = True
) -> PackedSequence:
    """Packs a padded batch ``(T, B, *)`` (``(B, T, *)`` with ``batch_first``) of sequences of ``lengths``.

    Args:
        input: padded sequences.
        lengths: list or 1-D int tensor of each sequence's length (read at the call).
        batch_first: whether ``input`` is ``(B, T, *)``.
        enforce_sorted: if ``True``, ``lengths`` must be in decreasing order; otherwise the batch is
            sorted here and the permutation kept in the result.
    """
    lengths = _lengths_array(lengths)
    batch_dim = 0 if batch_first else 1
    batch_size = input.shape[batch_dim]
    if lengths.size != batch_size:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.size} (batch_size={batch_size})"
        )
    if enforce_sorted:
        if np.any(lengths[1:] > lengths[:-1]):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. "
                "You can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence "
                "to sidestep this requirement if you do not need ONNX exportability."
            )
        order, sorted_indices = np.arange(batch_size), None
    else:
        order = np.argsort(-lengths, kind="stable")
        sorted_indices = _int64(order, input.device)  # on the data's device, as PyTorch's; batch_sizes stay on the CPU
    sorted_lengths = lengths[order]
    if batch_size and sorted_lengths[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0"
        )
    steps = input.shape[1 - batch_dim]
    if sorted_lengths[0] > steps:
        raise RuntimeError(
            f"Expected each length to be at most the sequence length {steps}, but got {int(sorted_lengths[0])}"
        )
    batch_sizes = _batch_sizes_of(sorted_lengths)
    # Rows of the input flattened to (T * B, *) or (B * T, *), step after step, running sequences first.
    rows = [
        (order[b] * steps + t) if batch_first else (t * batch_size + order[b])
        for t, running in enumerate(batch_sizes)
        for b in range(running)
    ]
    flat = input.reshape((-1,) + tuple(input.shape[2:]))
    data = flat.index_select(0, _int64(rows, flat.device))
    return PackedSequence._make_packed(data, _int64(batch_sizes), sorted_indices)


def pad_packed_sequence(
    sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Undoes :func:`pack_padded_sequence`: the padded batch and each sequence's length (int64).

    Args:
        sequence: the packed batch.
        batch_first: return ``(B, T, *)`` instead of ``(T, B, *)``.
        padding_value: value of the padding elements.
        total_length: pad to this many steps (at least the longest length).
    """
    batch_sizes = np.asarray(sequence.batch_sizes.numpy(force=True), dtype=np.int64)
    max_steps = batch_sizes.size
    if total_length is not None:
        if total_length < max_steps:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in input, "
                f"but got total_length={total_length} and max sequence length being {max_steps}"
            )
        max_steps = total_length
    batch_size = int(batch_sizes[0])
    sorted_lengths = (batch_sizes[None, :] > np.arange(batch_size)[:, None]).sum(axis=1)
    unsorted = (
        np.arange(batch_size)
        if sequence.unsorted_indices is None
        else np.asarray(sequence.unsorted_indices.numpy(force=True), dtype=np.int64)
    )
    offsets = np.concatenate([[0], np.cumsum(batch_sizes)])
    data = sequence.data
    padding_row = int(offsets[-1])
    # Every output position gathers its packed row, or the padding row appended after the data.
    rows = np.full((max_steps, batch_size), padding_row, dtype=np.int64)
    for b, original in enumerate(unsorted):
        # Output column b holds the sequence that sat at sorted position `original`.
        length = sorted_lengths[original]
        rows[:length, b] = offsets[:length] + original
    if batch_first:
        rows = rows.T
    padding = full((1,) + tuple(data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    gathered = cat([data, padding], 0).index_select(0, _int64(rows.reshape(-1), data.device))
    padded = gathered.reshape(rows.shape + tuple(data.shape[1:]))
    return padded, _int64(sorted_lengths[unsorted])


def pad_sequence(
    sequences, batch_first: bool = False, padding_value: float = 0.0, padding_side: str = "right"
) -> Tensor:
    """Stacks tensors ``(L_i, *)`` into ``(max L, B, *)`` (``(B, max L, *)`` with ``batch_first``), padded.

    Args:
        sequences: the sequences (their trailing dimensions must agree).
        batch_first: put the batch dimension first.
        padding_value: value of the padding elements.
        padding_side: ``'right'`` pads after each sequence, ``'left'`` before it.
    """
    if not isinstance(sequences, Iterable):
        raise RuntimeError(
            f"pad_sequence: Expected iterable for input sequences, but got arg of type: {type(sequences)}"
        )
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    trailing = tuple(sequences[0].shape[1:])
    longest = max(sequence.shape[0] for sequence in sequences)
    padded = []
    for sequence in sequences:
        if tuple(sequence.shape[1:]) != trailing:
            raise RuntimeError(
                f"The size of tensor a ({tuple(sequence.shape[1:])}) must match the size of "
                f"tensor b ({trailing}) beyond the first dimension"
            )
        missing = longest - sequence.shape[0]
        if missing:
            filler = full((missing,) + trailing, padding_value, dtype=sequence.dtype, device=sequence.device)
            sequence = cat([sequence, filler] if padding_side == "right" else [filler, sequence], 0)
        padded.append(sequence)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list[Tensor]:
    """Splits a right-padded batch back into its sequences of ``lengths``."""
    lengths = _lengths_array(lengths)
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[b, : int(length)] for b, length in enumerate(lengths)]


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Packs a list of tensors ``(L_i, *)`` (``enforce_sorted``: as in :func:`pack_padded_sequence`)."""
    lengths = [sequence.shape[0] for sequence in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of tensors ``(L_i, *)`` that :func:`pack_sequence` packed, in the original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
