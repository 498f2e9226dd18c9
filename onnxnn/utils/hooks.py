"""``torch.utils.hooks``: the handle that every ``register_*_hook`` returns.

``from torch.utils.hooks import RemovableHandle`` is common in type hints of hook-registering code;
it is the very class onnxnn's registrations return (``runtime/autograd.py``).
"""

from __future__ import annotations

from ..runtime.autograd import RemovableHandle

__all__ = ["RemovableHandle"]
