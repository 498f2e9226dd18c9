"""``SyncBatchNorm``: batch normalization whose statistics are computed over the batches of every rank.

The batch statistics are reductions over all ranks' samples: the per-channel sum is all-reduced, then
the sum of squared deviations from the global mean (two passes, as numerically stable as one
process's variance). Both all-reduces are a differentiable :class:`_AllReduceSum` whose backward
all-reduces the incoming gradient, so autograd of the ordinary Tensor ops gives every rank the
gradient of the sum of all ranks' losses with respect to its own inputs, as PyTorch's SyncBatchNorm.
"""

from __future__ import annotations

from ..autograd.function import Function
from ..ir.plan import realize_alongside
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.module import Module
from ..runtime.grad_mode import no_grad
from ..runtime.tensor import Tensor
from .collectives import all_reduce
from .process_group import ProcessGroup, get_world_size, is_initialized

__all__ = ["SyncBatchNorm"]


class _AllReduceSum(Function):
    """``y = sum over ranks of x``; its backward is the same all-reduce of the gradient."""

    @staticmethod
    def forward(ctx, tensor: Tensor, group) -> Tensor:
        ctx.group = group
        result = tensor.clone()
        all_reduce(result, group=group)
        return result

    @staticmethod
    def backward(ctx, grad: Tensor):
        result = grad.clone()
        all_reduce(result, group=ctx.group)
        return result, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over the N (and spatial) dimensions of every rank's batch together.

    Args:
        num_features: C, the channels of an ``(N, C, ...)`` input.
        eps, momentum, affine, track_running_stats: as :class:`~onnxnn.nn.BatchNorm1d`.
        process_group: the ranks whose batches are normalized together (default: all).

    In evaluation, or outside a process group of more than one rank, it is a plain batch norm.
    Build it from an existing model with :meth:`convert_sync_batchnorm`.
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group: ProcessGroup | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        synchronize = self.training and is_initialized() and get_world_size(self.process_group) > 1
        if not synchronize:
            return super().forward(input)
        dims = [0] + list(range(2, input.dim()))
        shape = [1, -1] + [1] * (input.dim() - 2)
        local_count = input.numel() // input.shape[1]
        count = _AllReduceSum.apply(input.new_full((1,), float(local_count)).detach(), self.process_group)
        mean = _AllReduceSum.apply(input.sum(dims), self.process_group) / count
        centered = input - mean.reshape(shape)
        var = _AllReduceSum.apply((centered * centered).sum(dims), self.process_group) / count
        output = centered / (var + self.eps).sqrt().reshape(shape)
        if self.weight is not None:
            output = output * self.weight.reshape(shape)
        if self.bias is not None:
            output = output + self.bias.reshape(shape)
        if self.track_running_stats and self.running_mean is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
                factor = self.momentum if self.momentum is not None else 1.0 / self.num_batches_tracked.double()
                total = float(count.item())
                unbiased = var.detach() * (total / max(total - 1, 1))
                self.running_mean.copy_(self.running_mean * (1 - factor) + mean.detach() * factor)
                self.running_var.copy_(self.running_var * (1 - factor) + unbiased * factor)
                # Computed with the step (as BatchNorm's): pending, they would hold its whole graph.
                realize_alongside(self.running_mean._value)
                realize_alongside(self.running_var._value)
        return output

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group: ProcessGroup | None = None) -> Module:
        """Returns ``module`` with every ``BatchNorm*D`` layer replaced by a :class:`SyncBatchNorm`.

        The new layers share the old ones' parameters and buffers (the same tensors) and training mode.
        """
        converted = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            converted = cls(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            if module.affine:
                converted.weight = module.weight
                converted.bias = module.bias
            converted.running_mean = module.running_mean
            converted.running_var = module.running_var
            converted.num_batches_tracked = module.num_batches_tracked
            converted.training = module.training
        for name, child in module.named_children():
            converted.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return converted
