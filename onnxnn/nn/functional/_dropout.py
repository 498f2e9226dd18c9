"""Dropout: elementwise, channel-wise (dropout1d/2d/3d) and SELU's alpha dropout, masks from onnxnn's generator.

The masks enter the graph as data, so a changing mask never changes the compiled graph. While
``to_onnx`` traces a model (``depth.exporting()``), a mask drawn now would be written into
the file as a constant and every run of the file would drop the same elements; there dropout is
recorded as ONNX's ``Dropout`` node with ``training_mode`` true, which draws a new mask on each run,
as PyTorch's exporter writes it.

The alpha variants follow ATen's formula: with ``a = 1 / sqrt((alpha^2 p + 1)(1 - p))`` and SELU's
``alpha``, kept elements become ``a * x + alpha * a * p`` and dropped ones ``alpha * a * (p - 1)``,
which keeps a SELU network's zero mean and unit variance.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...ir import dtypes
from ...runtime import ops as _ops
from ...ir import random as _random
from ...runtime.internal import apply_in_place, constant_tensor, drawn_constant_tensor, exporting
from ...runtime.tensor import Tensor, apply_op

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"]

_SELU_NEGATIVE_SATURATION = 1.7580993408473766  # SELU's scale * alpha: its value at -infinity, negated


def _check_probability(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _data(input: Tensor, array: np.ndarray) -> Tensor:
    return constant_tensor(np.asarray(array, dtype=input.dtype.numpy_dtype, order="C"), input.dtype, input.device)


def _apply(input: Tensor, inplace: bool, function) -> Tensor:
    if inplace:
        return apply_in_place(input, function)
    return function(input)


def _dropout_node(input: Tensor, p: float, num_outputs: int):
    """ONNX ``Dropout(input, ratio=p, training_mode=True)``: ``(output,)`` or ``(output, mask)``.

    The ratio is float64 for a float64 input (scale ``1 / (1 - p)`` as eager dropout computes it) and
    float32 otherwise (onnxruntime's kernels take ``ratio`` in float32, float64 or float16 only).
    """
    ratio_dtype = np.float64 if input.dtype is dtypes.float64 else np.float32
    ratio = constant_tensor(np.asarray(p, dtype=ratio_dtype))
    training_mode = constant_tensor(np.asarray(True))
    outputs = apply_op("Dropout", (input, ratio, training_mode), num_outputs=num_outputs)
    return outputs if isinstance(outputs, tuple) else (outputs,)


def _exported(input: Tensor, p: float, feature: bool, alpha: bool) -> Tensor:
    """Dropout as a file draws it: the ``Dropout`` node's mask (kept out of autograd), drawn over one
    element per channel for the channel variants (a slice of the input, so a dynamic batch axis stays
    dynamic), scales the input. Even plain dropout reads the mask rather than the node's output:
    onnxruntime's optimizers remove a Dropout whose mask nothing reads, training mode or not, and
    the file would then drop nothing."""
    source = input.detach()
    if feature:
        source = source[(slice(None), slice(None)) + (slice(0, 1),) * (input.dim() - 2)]
    keep = _dropout_node(source, p, 2)[1].to(input.dtype)
    if not alpha:
        return input * keep * (1.0 / (1.0 - p))
    a = 1.0 / math.sqrt((_SELU_NEGATIVE_SATURATION**2 * p + 1) * (1 - p))
    shift = (keep - 1.0) * (_SELU_NEGATIVE_SATURATION * a) + _SELU_NEGATIVE_SATURATION * a * p
    return input * (keep * a) + shift


def _masked(input: Tensor, p: float, training: bool, inplace: bool, feature: bool, alpha: bool) -> Tensor:
    """ATen's _dropout_impl: the identity when not training, zeros at ``p == 1``, else the masked input."""
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if feature and input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    if p == 1.0:
        return _apply(input, inplace, lambda x: _ops.mul(x, _data(input, np.zeros(()))))
    if not input.dtype.is_floating_point:  # ATen multiplies by a float mask it cannot cast back
        raise RuntimeError(
            f"result type Float can't be cast to the desired output type {dtypes.scalar_type_name(input.dtype)}"
        )
    if exporting():
        return _apply(input, inplace, lambda x: _exported(x, p, feature, alpha))
    noise_shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2) if feature else tuple(input.shape)
    if not alpha:
        numpy_dtype = input.dtype.numpy_dtype

        def draw_mask() -> np.ndarray:
            # The kept elements' scale rounded once to the input's dtype, as the float64 mask
            # ``kept / (1 - p)`` rounds; made in that dtype, two passes over the mask instead of four.
            mask = _random.bernoulli(noise_shape, 1.0 - p).astype(numpy_dtype)
            mask *= numpy_dtype.type(1.0 / (1.0 - p))
            return mask

        # Drawn so that a forward replay draws it anew (a layer with dropout replays in training).
        mask = drawn_constant_tensor(draw_mask, input.dtype, input.device)
        return _apply(input, inplace, lambda x: _ops.mul(x, mask))
    a = 1.0 / math.sqrt((_SELU_NEGATIVE_SATURATION**2 * p + 1) * (1 - p))
    numpy_dtype = input.dtype.numpy_dtype

    def draw_scale_and_shift() -> np.ndarray:
        # One draw, two arrays: the scale and the shift, each computed in float64 and rounded once
        # to the input's dtype, stacked so that one drawn constant holds both.
        keep = _random.bernoulli(noise_shape, 1.0 - p).astype(np.float64)
        shift = (keep - 1.0) * (_SELU_NEGATIVE_SATURATION * a) + _SELU_NEGATIVE_SATURATION * a * p
        return np.stack([keep * a, shift]).astype(numpy_dtype)

    scale_and_shift = drawn_constant_tensor(draw_scale_and_shift, input.dtype, input.device)
    scale, shift = scale_and_shift[0], scale_and_shift[1]
    return _apply(input, inplace, lambda x: _ops.mul(x, scale) + shift)


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    The mask comes from onnxnn's generator (seeded by ``manual_seed``) and enters the graph as data,
    so a changing mask never changes the compiled graph. Not training, it is the identity.
    """
    _check_probability(p)
    return _masked(input, p, training, inplace, feature=False, alpha=False)


def _unbatched(input: Tensor, batched_rank: int, function) -> Tensor:
    """Runs ``function`` on ``input`` with a batch dim added when it has ``batched_rank - 1`` dims."""
    if input.dim() == batched_rank:
        return function(input)
    return function(input.unsqueeze(0)).squeeze(0)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``, scaling the rest by
    ``1 / (1 - p)``."""
    _check_probability(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
            "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
            "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs)."
        )
    if not training or p == 0.0:
        return input  # no batch dim to add and remove: nothing is recorded
    if input.dim() == 2 and inplace:
        return apply_in_place(input, dropout1d, p, training)
    return _unbatched(input, 3, lambda x: _masked(x, p, training, inplace, feature=True, alpha=False))


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of ``(N, C, H, W)`` with probability ``p``, scaling the rest by ``1 / (1 - p)``.

    As in PyTorch, a 3-D input is taken as ``(N, C, L)`` (with a warning), not as unbatched.
    """
    _check_probability(p)
    if input.dim() not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is deprecated and will result "
            "in an error in a future release. To retain the behavior and silence this warning, please use "
            "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
            "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
            "inputs).",
            stacklevel=2,
        )
    if input.dim() == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
            "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
            "will change in a future release to interpret the input as one without a batch dimension, i.e. "
            "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
            "dropout1d instead.",
            stacklevel=2,
        )
    return _masked(input, p, training, inplace, feature=True, alpha=False)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zeroes whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability ``p``, scaling the rest."""
    _check_probability(p)
    if input.dim() not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.dim()}-D input to dropout3d, which is deprecated and will result "
            "in an error in a future release. To retain the behavior and silence this warning, please use "
            "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
            "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
            "inputs).",
            stacklevel=2,
        )
    if not training or p == 0.0:
        return input  # no batch dim to add and remove: nothing is recorded
    if input.dim() != 5 and inplace:
        return apply_in_place(input, dropout3d, p, training)
    return _unbatched(input, 5, lambda x: _masked(x, p, training, inplace, feature=True, alpha=False))


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped elements take SELU's negative saturation, then an affine map
    restores the input's mean and variance."""
    _check_probability(p)
    return _masked(input, p, training, inplace, feature=False, alpha=True)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels (dim 1) of an input with at least 2 dims."""
    _check_probability(p)
    return _masked(input, p, training, inplace, feature=True, alpha=True)
