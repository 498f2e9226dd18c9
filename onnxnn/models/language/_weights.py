"""Reading Hugging Face weight files without PyTorch: ``model.safetensors``, ``pytorch_model.bin``
and their sharded forms (``*.index.json``), from a file or a snapshot directory.

The files are read with onnxnn's own readers (:func:`onnxnn.export.load`): safetensors directly,
PyTorch zip checkpoints with the restricted unpickler, so loading never runs code from the file.
Only local paths are read; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import warnings

from ...export.checkpoint import load
from ...runtime.tensor import Tensor

__all__ = ["WEIGHT_FILE_NAMES", "find_weight_files", "read_state_dict", "adapt_keys"]

# In the order transformers prefers them: safetensors first (no pickle at all).
WEIGHT_FILE_NAMES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)

# Names of old BERT/TF-converted checkpoints that transformers renames on load.
_LEGACY_RENAMES = (
    (re.compile(r"LayerNorm\.gamma$"), "LayerNorm.weight"),
    (re.compile(r"LayerNorm\.beta$"), "LayerNorm.bias"),
)


def find_weight_files(path: str | os.PathLike) -> list[str]:
    """The weight file(s) of a snapshot directory or a single weight file (all shards of an index).

    Raises:
        OSError: nothing to read at ``path``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        for name in WEIGHT_FILE_NAMES:
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return find_weight_files(candidate)
        raise OSError(
            f"Error no file named {', '.join(WEIGHT_FILE_NAMES)} found in directory {path} "
            "(onnxnn reads local files only: download the snapshot first)"
        )
    if not os.path.isfile(path):
        raise OSError(f"{path!r} is neither a weight file nor a snapshot directory")
    if path.endswith(".index.json"):
        with open(path, encoding="utf-8") as handle:
            try:
                index = json.load(handle)
                shards = sorted(set(index["weight_map"].values()))
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
                raise OSError(f"{path!r} is not a sharded-checkpoint index (no 'weight_map' object)") from None
        directory = os.path.dirname(path)
        return [os.path.join(directory, shard) for shard in shards]
    return [path]


def read_state_dict(path: str | os.PathLike) -> dict[str, Tensor]:
    """All tensors of the weight file(s) at ``path`` (a file, an index or a snapshot directory), by name."""
    state: dict[str, Tensor] = {}
    for file in find_weight_files(path):
        loaded = load(file, map_location="cpu")
        if not isinstance(loaded, dict) or not all(isinstance(value, Tensor) for value in loaded.values()):
            raise OSError(f"{file!r} does not hold a state_dict (a dict of names to tensors)")
        state.update(loaded)
    return state


def adapt_keys(state: dict[str, Tensor], expected: set[str], prefix: str) -> dict[str, Tensor]:
    """Renames checkpoint keys to the model's, as transformers' ``from_pretrained`` does.

    Legacy ``LayerNorm.gamma``/``beta`` become ``weight``/``bias``; a base model's checkpoint
    (``embeddings...``) loads into a model with a head (``bert.embeddings...``) and the other way
    round (the head's keys then go unused, with a warning).
    """
    renamed = {}
    for key, value in state.items():
        for pattern, replacement in _LEGACY_RENAMES:
            key = pattern.sub(replacement, key)
        renamed[key] = value
    if not prefix:
        return renamed
    dotted = prefix + "."
    model_has_prefix = any(key.startswith(dotted) for key in expected)
    file_has_prefix = any(key.startswith(dotted) for key in renamed)
    if model_has_prefix and not file_has_prefix:
        return {(dotted + key if dotted + key in expected else key): value for key, value in renamed.items()}
    if file_has_prefix and not model_has_prefix:
        # A head model's checkpoint into its base model: the head's own keys are left unused, as in transformers.
        unused = sorted(key for key in renamed if not key.startswith(dotted))
        if unused:
            warnings.warn(
                f"Some weights of the checkpoint were not used (they belong to a head this model lacks): {unused}",
                UserWarning,
                stacklevel=4,
            )
        return {key[len(dotted) :]: value for key, value in renamed.items() if key.startswith(dotted)}
    return renamed
