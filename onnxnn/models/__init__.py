"""The model zoo: reference architectures built with ``onnxnn.nn`` (layer 4, beside export and import_).

Models load state_dicts in torchvision's and Hugging Face's layouts: ``vision`` holds torchvision's
image classifiers (``resnet18(weights="resnet18.pth")``).
"""

from __future__ import annotations

from . import vision
from .vision import *  # noqa: F403  (the builders, re-exported as torchvision.models does)
from .vision import __all__ as _vision_all

__all__: list[str] = ["vision", *_vision_all]
