"""Loading a builder's ``weights=``: a local torchvision state_dict file, never a download."""

from __future__ import annotations

import os
from typing import TypeVar, Union

from ...export import load
from ...nn import Module

WeightsPath = Union[str, "os.PathLike[str]", None]
ModuleType = TypeVar("ModuleType", bound=Module)


def load_weights(model: ModuleType, weights: WeightsPath) -> ModuleType:
    """Loads the state_dict in ``weights`` (``.pth``/``.pt`` from ``torch.save``, or ``.safetensors``) into ``model``.

    The file is read with onnxnn's safe checkpoint reader (no pickle code runs). ``weights=None`` leaves
    the random initialization. A torchvision weights enum name (``"IMAGENET1K_V1"``) is refused:
    onnxnn never downloads, so the user saves the ``state_dict()`` once with torchvision.

    Raises:
        TypeError: ``weights`` is neither None nor a path.
        FileNotFoundError: no file at ``weights``.
        RuntimeError: the state_dict's keys or shapes differ from the model's (as ``load_state_dict``).
    """
    if weights is None:
        return model
    if not isinstance(weights, (str, os.PathLike)):
        raise TypeError(f"weights must be a path to a local state_dict file or None, got {type(weights).__name__}")
    path = os.fspath(weights)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"weights file {path!r} not found; onnxnn loads only local files: save torchvision's "
            "model.state_dict() once with torch.save and pass its path"
        )
    state = load(path, map_location="cpu")
    # Training checkpoints often wrap the weights; torchvision's reference scripts use "model".
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    model.load_state_dict(state)
    return model
