"""dropout: random zeroing with the mask drawn from onnxnn's generator."""
from __future__ import annotations

import numpy as np

from ...runtime import ops as _ops
from ...runtime import random as _random
from ...runtime.tensor import Tensor

__all__ = ["dropout"]


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    The mask comes from onnxnn's generator (seeded by ``manual_seed``) and enters the graph as data,
    so a changing mask never changes the compiled graph. Not training, it is the identity.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    numpy_dtype = input.dtype.numpy_dtype
    if p == 1.0:
        noise = np.zeros((), dtype=numpy_dtype)
    else:
        keep = _random.bernoulli(tuple(input.shape), 1.0 - p)
        noise = keep.astype(numpy_dtype) * numpy_dtype.type(1.0 / (1.0 - p))
    noise_tensor = Tensor._from_array(np.asarray(noise, dtype=numpy_dtype), input.dtype, input.device)
    if inplace:
        return input._assign(_ops.mul(input._alias(), noise_tensor))
    return _ops.mul(input, noise_tensor)
