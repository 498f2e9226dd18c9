"""Utilities for modules: ``onnxnn.nn.utils`` (PyTorch's ``torch.nn.utils``)."""

from __future__ import annotations

from .init_utils import skip_init

# sequence packing (nn.utils.rnn)
from . import rnn
from .rnn import (
    PackedSequence,
    pack_padded_sequence,
    pack_sequence,
    pad_packed_sequence,
    pad_sequence,
    unpack_sequence,
    unpad_sequence,
)

__all__ = [
    "skip_init",
    # sequence packing (nn.utils.rnn)
    "rnn",
    "PackedSequence",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]
