"""Folding an eval-mode batch norm into the preceding convolution (PyTorch's ``torch.nn.utils.fusion``)."""

from __future__ import annotations

import copy
from typing import Optional

from ...runtime.creation import ones_like, zeros_like
from ...runtime.grad_mode import no_grad
from ...runtime.ops import rsqrt
from ...runtime.tensor import Tensor
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights"]


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    r"""Returns a new convolution whose output equals ``bn(conv(x))`` for eval-mode modules.

    Args:
        conv: a convolution module (``Conv1d/2d/3d`` or, with ``transpose=True``, ``ConvTranspose*``).
        bn: a batch norm module with running statistics.
        transpose: whether ``conv`` is a transposed convolution (output channels on dimension 1).

    Returns:
        A copy of ``conv`` with the batch norm folded into its weight and bias.

    Example::

        >>> fused = nn.utils.fuse_conv_bn_eval(conv.eval(), bn.eval())
    """
    assert not (conv.training or bn.training), "Fusion only for eval!"
    fused_conv = copy.deepcopy(conv)
    assert bn.running_mean is not None and bn.running_var is not None
    fused_conv.weight, fused_conv.bias = fuse_conv_bn_weights(
        fused_conv.weight, fused_conv.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias, transpose
    )
    return fused_conv


def fuse_conv_bn_weights(
    conv_w: Tensor,
    conv_b: Optional[Tensor],
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Optional[Tensor],
    bn_b: Optional[Tensor],
    transpose: bool = False,
) -> tuple[Parameter, Parameter]:
    r"""Folds batch norm statistics and affine parameters into convolution weight and bias.

    ``W' = W * (gamma / sqrt(var + eps))`` per output channel and
    ``b' = (b - mean) * gamma / sqrt(var + eps) + beta``.

    Args:
        conv_w: convolution weight.
        conv_b: convolution bias, or ``None`` (treated as zeros).
        bn_rm: batch norm running mean.
        bn_rv: batch norm running variance.
        bn_eps: batch norm epsilon.
        bn_w: batch norm weight (``None`` means ones).
        bn_b: batch norm bias (``None`` means zeros).
        transpose: whether the weight is a transposed convolution's (output channels on dim 1).

    Returns:
        The fused weight and bias as parameters.

    Example::

        >>> w, b = nn.utils.fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean,
        ...                                      bn.running_var, bn.eps, bn.weight, bn.bias)
    """
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    bias_requires_grad = conv_b.requires_grad if conv_b is not None else False
    with no_grad():
        if conv_b is None:
            conv_b = zeros_like(bn_rm)
        if bn_w is None:
            bn_w = ones_like(bn_rm)
        if bn_b is None:
            bn_b = zeros_like(bn_rm)
        var_rsqrt = rsqrt(bn_rv + bn_eps)
        # The per-channel scale broadcasts over the weight's output-channel dimension.
        if transpose:
            shape = [1, -1] + [1] * (len(conv_w.shape) - 2)
        else:
            shape = [-1, 1] + [1] * (len(conv_w.shape) - 2)
        fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(dtype=weight_dtype)
        fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, bias_requires_grad)
