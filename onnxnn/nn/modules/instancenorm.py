"""Instance normalization layers: InstanceNorm1d, InstanceNorm2d, InstanceNorm3d and their Lazy* forms."""

from __future__ import annotations

import warnings

from ...runtime.tensor import Tensor
from .. import functional as F
from .batchnorm import _LazyNormBase, _NormBase

__all__ = [
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LazyInstanceNorm1d",
    "LazyInstanceNorm2d",
    "LazyInstanceNorm3d",
]


class _InstanceNorm(_NormBase):
    """Normalizes each ``(n, c)`` plane over its spatial dims; unbatched inputs are accepted too."""

    _no_batch_dim = 0  # the rank of an unbatched input: (C, *spatial)

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in (self._no_batch_dim, self._no_batch_dim + 1):
            raise ValueError(
                f"expected {self._no_batch_dim}D or {self._no_batch_dim + 1}D input (got {input.dim()}D input)"
            )

    def _apply_instance_norm(self, input: Tensor) -> Tensor:
        if self.running_mean is not None and input.shape[1] != self.running_mean.shape[0]:
            # PyTorch's words: it normalizes (1, N * C, ...) with the running statistics repeated N times.
            batch = input.shape[0]
            raise RuntimeError(
                f"running_mean should contain {batch * input.shape[1]} elements not "
                f"{batch * self.running_mean.shape[0]}"
            )
        return F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        feature_dim = input.dim() - self._no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(
                    f"expected input's size at dim={feature_dim} to match num_features "
                    f"({self.num_features}), but got: {input.shape[feature_dim]}."
                )
            warnings.warn(
                f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                "warning by not passing in num_features, which is not used because affine=False",
                stacklevel=2,
            )
        if input.dim() == self._no_batch_dim:
            return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._apply_instance_norm(input)

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        version = local_metadata.get("version", None) if local_metadata is not None else None
        # Checkpoints from before running statistics became optional carry them for layers that no
        # longer track them: PyTorch reports them and drops them, and so does this.
        if version is None and not self.track_running_stats:
            keys = [prefix + name for name in ("running_mean", "running_var") if prefix + name in state_dict]
            if keys:
                klass = type(self).__name__
                names = " and ".join(f'"{k}"' for k in keys)
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. If "
                    f"state_dict is a checkpoint saved before 0.4.0, this may be expected because {klass} does not "
                    f"track running stats by default since 0.4.0. Please remove these keys from state_dict. If the "
                    f"running stats are actually needed, instead set track_running_stats=True in {klass} to enable "
                    f"them. See the documentation of {klass} for details."
                )
                for key in keys:
                    state_dict.pop(key)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over a ``(N, C, L)`` or unbatched ``(C, L)`` input.

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``, the statistics of each ``(n, c)`` over
    ``L`` (biased variance). With ``track_running_stats`` the running estimates are updated in
    training and used in evaluation.

    Args:
        num_features: C.
        eps: added to the variance. Default: 1e-5.
        momentum: the running-statistics update factor. Default: 0.1.
        affine: whether to learn per-channel ``weight`` and ``bias``. Default: ``False``.
        track_running_stats: whether to keep running statistics. Default: ``False``.
        device, dtype: where and in which dtype to create parameters and buffers.
        bias: whether to learn ``bias`` (only with ``affine``; keyword-only). Default: ``True``.

    Example::

        >>> m = nn.InstanceNorm1d(100, affine=True)
        >>> m(onnxnn.randn(20, 100, 40)).shape
        onnxnn.Size([20, 100, 40])
    """

    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over ``(N, C, H, W)`` or ``(C, H, W)``; see :class:`InstanceNorm1d`."""

    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization over ``(N, C, D, H, W)`` or ``(C, D, H, W)``; see :class:`InstanceNorm1d`."""

    _no_batch_dim = 4


# ---------------------------------------------------------------- lazy forms
# As in PyTorch, the lazy forms take _LazyNormBase's defaults (affine=True, track_running_stats=True,
# unlike InstanceNorm's False) and read num_features from input.size(1), batched or not.


class LazyInstanceNorm1d(_LazyNormBase, _InstanceNorm):
    """An :class:`InstanceNorm1d` whose ``num_features`` is taken from the first input's ``size(1)``.

    Arguments as :class:`InstanceNorm1d` without ``num_features``, with PyTorch's lazy defaults
    ``affine=True`` and ``track_running_stats=True``; the module becomes an :class:`InstanceNorm1d`
    after its first forward.

    Example::

        >>> m = nn.LazyInstanceNorm1d()
        >>> m(onnxnn.randn(2, 3, 8)).shape
        onnxnn.Size([2, 3, 8])
    """

    cls_to_become = InstanceNorm1d
    _no_batch_dim = 2


class LazyInstanceNorm2d(_LazyNormBase, _InstanceNorm):
    """An :class:`InstanceNorm2d` whose ``num_features`` is taken from the first input; see
    :class:`LazyInstanceNorm1d`."""

    cls_to_become = InstanceNorm2d
    _no_batch_dim = 3


class LazyInstanceNorm3d(_LazyNormBase, _InstanceNorm):
    """An :class:`InstanceNorm3d` whose ``num_features`` is taken from the first input; see
    :class:`LazyInstanceNorm1d`."""

    cls_to_become = InstanceNorm3d
    _no_batch_dim = 4
