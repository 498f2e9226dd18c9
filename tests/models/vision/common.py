"""Shared helpers of the vision zoo tests: the reference layouts and the models' builders."""

from __future__ import annotations

import json
import pathlib

import numpy as np

import onnxnn
from onnxnn.models import vision
from tests.tolerances import rtol_for

REFERENCE = pathlib.Path(__file__).parent.parent / "reference" / "vision"


def reference(name: str) -> dict:
    """The JSON tests/models/generate_reference_keys.py wrote from torchvision for ``name``."""
    return json.loads((REFERENCE / f"{name}.json").read_text())


def build(name: str) -> onnxnn.nn.Module:
    """Builds onnxnn's model with the builder and kwargs torchvision's layout was generated with."""
    document = reference(name)
    return getattr(vision, document["builder"])(**document["kwargs"])


def smallest_input(name: str, batch: int = 1) -> onnxnn.Tensor:
    """A random input at the smallest size the model takes: 32x32 (five stride-2 stages), ViT its image size."""
    size = 224 if name.startswith("vit_b") else 32
    rng = np.random.default_rng(0)
    return onnxnn.from_numpy(rng.standard_normal((batch, 3, size, size)).astype(np.float32))


def forward_rtol(model: onnxnn.nn.Module) -> float:
    """Relative tolerance between two float32 evaluations of ``model``.

    Every Conv2d/Linear output is a sum of fan-in products; their rounding errors add along the
    network's depth, so the bound counts the fan-ins of all weighted layers (an overestimate: it sums
    the layers of parallel branches too).
    """
    terms = 0
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if isinstance(module, (onnxnn.nn.Conv2d, onnxnn.nn.Linear)) and weight is not None:
            terms += int(np.prod(weight.shape[1:]))
        elif isinstance(module, onnxnn.nn.MultiheadAttention):
            terms += 4 * module.embed_dim
    return rtol_for(terms)
