"""Batch normalization layers: BatchNorm1d, BatchNorm2d, BatchNorm3d and their Lazy* forms."""

from __future__ import annotations

from ...ir import dtypes
from ...runtime.creation import empty, ones, tensor, zeros
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .lazy import LazyModuleMixin, UninitializedBuffer, UninitializedParameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]


class _NormBase(Module):
    """Parameters, running statistics and their reset, shared by the batch normalization layers."""

    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        # Registration order is PyTorch's, so state_dict keys come out in the same order.
        if self.affine:
            self.weight = Parameter(empty(num_features, **factory_kwargs))
            if bias:
                self.bias = Parameter(empty(num_features, **factory_kwargs))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, **factory_kwargs))
            self.register_buffer("running_var", ones(num_features, **factory_kwargs))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dtypes.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Resets running_mean to 0, running_var to 1 and num_batches_tracked to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Resets the running statistics, the weight to 1 and the bias to 0."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (
            "{num_features}, eps={eps}, momentum={momentum}, affine={affine}, bias={use_bias}, "
            "track_running_stats={track_running_stats}".format(**self.__dict__, use_bias=self.bias is not None)
        )

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        version = local_metadata.get("version", None) if local_metadata is not None else None
        if (version is None or version < 2) and self.track_running_stats:
            # Checkpoints from before num_batches_tracked existed load with a count of 0, as in PyTorch.
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (
                    self.num_batches_tracked if self.num_batches_tracked is not None else tensor(0, dtype=dtypes.long)
                )
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        exponential_average_factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                # Cumulative moving average: 1 / count, kept as a tensor so the step stays lazy
                # where PyTorch reads the count back with float().
                exponential_average_factor = 1.0 / self.num_batches_tracked.double()
        # In evaluation, batch statistics are used only when there are no running statistics.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if keep_running else None,
            self.running_var if keep_running else None,
            self.weight,
            self.bias,
            use_batch_stats,
            exponential_average_factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization over a 2-D ``(N, C)`` or 3-D ``(N, C, L)`` input.

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias`` per channel. In training the batch
    statistics are used (biased variance) and the running estimates are updated with ``momentum``
    (``None``: cumulative average) from the unbiased variance; in evaluation the running estimates
    are used.

    Args:
        num_features: C, the number of channels.
        eps: added to the variance for stability. Default: 1e-5.
        momentum: the running-statistics update factor, or None. Default: 0.1.
        affine: whether to learn ``weight`` and ``bias``. Default: ``True``.
        bias: whether to learn ``bias`` (only with ``affine``; keyword-only). Default: ``True``.
        track_running_stats: whether to keep running statistics. Default: ``True``.
        device, dtype: where and in which dtype to create parameters and buffers.

    Example::

        >>> m = nn.BatchNorm1d(100)
        >>> m(onnxnn.randn(20, 100)).shape
        onnxnn.Size([20, 100])
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over a 4-D ``(N, C, H, W)`` input; see :class:`BatchNorm1d` for the details.

    Example::

        >>> m = nn.BatchNorm2d(3, dtype=onnxnn.half)
        >>> m.running_mean
        tensor([0., 0., 0.], dtype=onnxnn.float16)
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over a 5-D ``(N, C, D, H, W)`` input; see :class:`BatchNorm1d` for the details.

    Example::

        >>> m = nn.BatchNorm3d(100)
        >>> m(onnxnn.randn(2, 100, 3, 4, 5)).shape
        onnxnn.Size([2, 100, 3, 4, 5])
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


# ---------------------------------------------------------------- lazy forms


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """``num_features`` from the first input's ``size(1)``: weight, bias, running_mean and running_var
    are uninitialized until then (PyTorch's ``_LazyNormBase``), ``num_batches_tracked`` exists at once."""

    def __init__(
        self,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        # affine, bias and track_running_stats False here: their tensors are registered uninitialized below.
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = UninitializedParameter(**factory_kwargs)
            if bias:
                self.bias = UninitializedParameter(**factory_kwargs)
        if self.track_running_stats:
            self.running_mean = UninitializedBuffer(**factory_kwargs)
            self.running_var = UninitializedBuffer(**factory_kwargs)
            self.num_batches_tracked = tensor(0, dtype=dtypes.long, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if self.has_uninitialized_params():
            self.num_features = input.shape[1]
            if self.affine:
                self.weight.materialize((self.num_features,))  # type: ignore[attr-defined]  # uninitialized until now
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))  # type: ignore[attr-defined]  # uninitialized until now
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    """A :class:`BatchNorm1d` whose ``num_features`` is taken from the first input's ``size(1)``.

    Arguments as :class:`BatchNorm1d` without ``num_features``. Until the first forward (or a loaded
    ``state_dict``) ``weight`` and ``bias`` are :class:`UninitializedParameter` and the running
    statistics :class:`UninitializedBuffer`; then the module becomes a :class:`BatchNorm1d`.

    Example::

        >>> m = nn.LazyBatchNorm1d()
        >>> m(onnxnn.randn(20, 100)).shape
        onnxnn.Size([20, 100])
        >>> type(m).__name__, m.num_features
        ('BatchNorm1d', 100)
    """

    cls_to_become = BatchNorm1d
    _check_input_dim = BatchNorm1d._check_input_dim


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    """A :class:`BatchNorm2d` whose ``num_features`` is taken from the first input; see :class:`LazyBatchNorm1d`."""

    cls_to_become = BatchNorm2d
    _check_input_dim = BatchNorm2d._check_input_dim


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    """A :class:`BatchNorm3d` whose ``num_features`` is taken from the first input; see :class:`LazyBatchNorm1d`."""

    cls_to_become = BatchNorm3d
    _check_input_dim = BatchNorm3d._check_input_dim
