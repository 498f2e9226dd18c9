"""Folding an eval-mode batch norm into the preceding convolution or linear layer (PyTorch's
``torch.nn.utils.fusion``)."""

from __future__ import annotations

import copy
from typing import Optional

from ...runtime.creation import ones_like, zeros_like
from ...runtime.grad_mode import no_grad
from ...runtime.ops import rsqrt
from ...runtime.tensor import Tensor
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


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
        conv_b, bn_w, bn_b = _identity_where_absent(conv_b, bn_rm, bn_w, bn_b)
        var_rsqrt = rsqrt(bn_rv + bn_eps)
        # The per-channel scale broadcasts over the weight's output-channel dimension.
        if transpose:
            shape = [1, -1] + [1] * (len(conv_w.shape) - 2)
        else:
            shape = [-1, 1] + [1] * (len(conv_w.shape) - 2)
        fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(dtype=weight_dtype)
        fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, bias_requires_grad)


def _identity_where_absent(bias, bn_rm, bn_w, bn_b) -> tuple:
    """A fusion's layer bias and BatchNorm affine parameters, each absent one (None) as the value
    that changes nothing: zeros for the biases, ones for the BatchNorm weight."""
    return (
        zeros_like(bn_rm) if bias is None else bias,
        ones_like(bn_rm) if bn_w is None else bn_w,
        zeros_like(bn_rm) if bn_b is None else bn_b,
    )


def fuse_linear_bn_eval(linear, bn):
    r"""Returns a new ``Linear`` whose output equals ``bn(linear(x))`` for eval-mode modules.

    The batch norm normalizes the linear layer's output features, so its ``num_features`` must be
    ``linear.out_features`` (or 1, one statistic for every feature).

    Args:
        linear: a ``Linear`` module.
        bn: a batch norm module with running statistics.

    Returns:
        A copy of ``linear`` with the batch norm folded into its weight and bias.

    Raises:
        AssertionError: a module in training mode, ``bn.num_features`` neither
            ``linear.out_features`` nor 1, or no running statistics.

    Example::

        >>> fused = nn.utils.fuse_linear_bn_eval(linear.eval(), bn.eval())
    """
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused_linear = copy.deepcopy(linear)
    # The folded scale must broadcast over the weight's rows without changing the layer's shapes.
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
            f"got linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused_linear.weight, fused_linear.bias = fuse_linear_bn_weights(
        fused_linear.weight, fused_linear.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused_linear


def fuse_linear_bn_weights(
    linear_w: Tensor,
    linear_b: Optional[Tensor],
    bn_rm: Tensor,
    bn_rv: Tensor,
    bn_eps: float,
    bn_w: Optional[Tensor],
    bn_b: Optional[Tensor],
) -> tuple[Parameter, Parameter]:
    r"""Folds batch norm statistics and affine parameters into a linear layer's weight and bias.

    ``W' = W * (gamma / sqrt(var + eps))`` per output feature (row) and
    ``b' = (b - mean) * gamma / sqrt(var + eps) + beta``.

    Args:
        linear_w: linear weight (out_features, in_features).
        linear_b: linear bias, or ``None`` (treated as zeros).
        bn_rm: batch norm running mean.
        bn_rv: batch norm running variance.
        bn_eps: batch norm epsilon.
        bn_w: batch norm weight (``None`` means ones).
        bn_b: batch norm bias (``None`` means zeros).

    Returns:
        The fused weight and bias as parameters.

    Example::

        >>> w, b = nn.utils.fuse_linear_bn_weights(linear.weight, linear.bias, bn.running_mean,
        ...                                        bn.running_var, bn.eps, bn.weight, bn.bias)
    """
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    bias_requires_grad = linear_b.requires_grad if linear_b is not None else False
    with no_grad():
        linear_b, bn_w, bn_b = _identity_where_absent(linear_b, bn_rm, bn_w, bn_b)
        bn_scale = bn_w * rsqrt(bn_rv + bn_eps)
        fused_w = linear_w * bn_scale.unsqueeze(-1).to(dtype=weight_dtype)
        fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(dtype=bias_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, bias_requires_grad)
