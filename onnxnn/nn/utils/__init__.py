"""Utilities for modules: ``onnxnn.nn.utils`` (PyTorch's ``torch.nn.utils``)."""

from __future__ import annotations

from .init_utils import skip_init

# gradient clipping, flattening, conv-bn folding, functional calls
from . import stateless
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights

# parametrizations (nn.utils.parametrize, nn.utils.parametrizations)
from . import parametrizations, parametrize

# the older hook-based weight and spectral normalization (state_dict keys weight_g/_v, weight_orig/_u/_v)
from .spectral_norm import remove_spectral_norm, spectral_norm
from .weight_norm import remove_weight_norm, weight_norm

# pruning (nn.utils.prune)
from . import prune

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
    "stateless",
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "vector_to_parameters",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    # parametrizations
    "parametrize",
    "parametrizations",
    "weight_norm",
    "remove_weight_norm",
    "spectral_norm",
    "remove_spectral_norm",
    # pruning
    "prune",
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
