"""PyTorch's memory formats, accepted where PyTorch takes them (``contiguous``, ``clone``, ``to``,
``empty_like``...). onnxnn's values have no strides: every tensor is laid out one way, so each
format names the same layout and changes nothing."""

from __future__ import annotations

__all__ = [
    "memory_format",
    "contiguous_format",
    "channels_last",
    "channels_last_3d",
    "preserve_format",
    "check_memory_format",
]


class memory_format:
    """A memory format, as ``torch.memory_format`` (compared by identity, printed by name)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"onnxnn.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
_FORMATS = {value.name: value for value in (contiguous_format, channels_last, channels_last_3d, preserve_format)}


def _by_name(name: str) -> memory_format:
    return _FORMATS[name]


_REQUIRED_RANK = {"channels_last": 4, "channels_last_3d": 5}


def check_memory_format(rank: int, format) -> None:
    """PyTorch's check of a format against a tensor of ``rank`` dims: channels_last needs 4,
    channels_last_3d 5 (None, and the other formats, fit any)."""
    if format is None:
        return
    if not isinstance(format, memory_format):
        raise TypeError(f"memory_format must be an onnxnn.memory_format, not {type(format).__name__}")
    required = _REQUIRED_RANK.get(format.name)
    if required is not None and rank != required:
        raise RuntimeError(f"required rank {required} tensor to use {format.name} format")
