"""The model zoo: reference architectures built with ``onnxnn.nn`` (layer 4, beside export and import_).

Models load state_dicts in torchvision's and Hugging Face's layouts. The package is empty for now;
the zoo issue fills it.
"""

from __future__ import annotations

__all__: list[str] = []
