"""``cosine_similarity``, ``pdist`` and ``bilinear``: layers that reduce over features.

``cosine_similarity`` divides each input by its 2-norm clamped below at ``eps`` and sums the
product, as PyTorch's kernel does (not ``x1 . x2 / max(|x1| |x2|, eps)``, which differs when one
norm is tiny). PyTorch clamps the norms in place under ``NoGradGuard``, so its gradient treats a
clamped norm as the norm itself: ``_clamped_keeping_gradient`` does the same.

``bilinear`` is one ``MatMul`` of ``x1`` against the weight laid out ``(in1, out * in2)`` followed by
a product with ``x2`` summed over ``in2``.
"""

from __future__ import annotations

from ...runtime import ops as _ops
from ...runtime.ops._common import broadcast_shapes
from ...runtime.tensor import Tensor

__all__ = ["cosine_similarity", "pdist", "bilinear"]

# torch.nn.functional.pdist is torch.pdist: the p-norm distance between every pair of rows.
pdist = _ops.pdist


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """The cosine of the angle between ``x1`` and ``x2`` along ``dim`` (inputs broadcast).

    Example::

        >>> F.cosine_similarity(onnxnn.tensor([[1.0, 0.0]]), onnxnn.tensor([[1.0, 1.0]])).tolist()
        [0.7071067690849304]
    """
    shape = broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    x1_norm = _clamped_keeping_gradient(_ops.norm(x1, 2, dim, True), eps)
    x2_norm = _clamped_keeping_gradient(_ops.norm(x2, 2, dim, True), eps)
    return ((x1 / x1_norm) * (x2 / x2_norm)).sum(dim)


def _clamped_keeping_gradient(norm: Tensor, eps: float) -> Tensor:
    """``max(norm, eps)`` in value, with the gradient of ``norm`` itself even where ``eps`` is taken.

    ATen's cosine_similarity runs ``clamp_min_(eps)`` on the norms under ``NoGradGuard``: the backward
    still differentiates the unclamped norm. Where the clamp applies, ``eps + (norm - norm)`` (the
    second term an exact 0 there, as the norm is finite and small) carries that gradient; elsewhere
    the norm passes through, so an infinite norm never meets ``inf - inf``.
    """
    fixed = norm.detach()
    return _ops.where(fixed < eps, (norm - fixed) + eps, norm)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y = x1^T A x2 + b`` for ``x1`` of shape ``(*, in1)``, ``x2`` ``(*, in2)`` and ``A`` ``(out, in1, in2)``.

    Example::

        >>> F.bilinear(onnxnn.randn(8, 3), onnxnn.randn(8, 4), onnxnn.randn(5, 3, 4)).shape
        onnxnn.Size([8, 5])
    """
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {weight.dim()} dimensions")
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}")
    for axis in range(input1.dim() - 1):
        if input1.shape[axis] != input2.shape[axis]:
            raise RuntimeError(
                f"bilinear(): input batch dimensions do not match at dim {axis}: got "
                f"{input1.shape[axis]} and {input2.shape[axis]}"
            )
    out_features, in1, in2 = weight.shape
    if input1.shape[-1] != in1:
        raise RuntimeError(
            f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but expected {in1}"
        )
    if input2.shape[-1] != in2:
        raise RuntimeError(
            f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but expected {in2}"
        )
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out_features):
        raise RuntimeError(
            f"bilinear(): bias size does not match weight size: got {bias.shape[-1]} but expected {out_features}"
        )
    batch = input1.shape[:-1]
    left = input1 @ weight.permute(1, 0, 2).reshape(in1, out_features * in2)
    result = (left.reshape(*batch, out_features, in2) * input2.unsqueeze(-2)).sum(-1)
    return result if bias is None else result + bias
