"""AdaptiveLogSoftmaxWithLoss: the efficient softmax approximation of Grave et al. (2016).

PyTorch runs each tail cluster on the rows whose targets fall in it (a data-dependent subset). Here
every cluster runs on the whole batch and a mask keeps each row's own cluster: the same values and
gradients (rows outside a cluster get a zero gradient from it), with a graph that does not depend on
the targets, so it records once and exports with the targets as an input.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Sequence

from ...ir import dtypes
from ...runtime import ops as _ops
from ...runtime.internal import exporting, known_data
from ...runtime.tensor import Tensor
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Log-probabilities over ``n_classes`` from a head (frequent classes plus one entry per cluster)
    and smaller per-cluster tails.

    Args:
        in_features: features of each input sample.
        n_classes: number of classes.
        cutoffs: increasing class boundaries between clusters, each in ``[1, n_classes - 1]``.
        div_value: each cluster's hidden size divides ``in_features`` by a further factor. Default: ``4.0``.
        head_bias: give the head a bias. Default: ``False``.
        device, dtype: where and in which dtype to create the parameters.

    ``forward(input, target)`` returns ``(output, loss)``: each sample's target log-probability and
    the mean negative log-likelihood.

    Example::

        >>> asm = nn.AdaptiveLogSoftmaxWithLoss(16, 10, cutoffs=[4, 8])
        >>> output, loss = asm(onnxnn.randn(5, 16), onnxnn.tensor([0, 3, 5, 8, 9]))
    """

    in_features: int
    n_classes: int
    cutoffs: list
    div_value: float
    head_bias: bool

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > (n_classes - 1)
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                "order, where each value is between 1 and n_classes-1"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(self.in_features, self.head_size, bias=self.head_bias, **factory_kwargs)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(self.in_features // (self.div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(self.in_features, hidden, bias=False, **factory_kwargs),
                    Linear(hidden, size, bias=False, **factory_kwargs),
                )
            )

    def reset_parameters(self) -> None:
        """Re-draws every parameter as the constructor did."""
        self.head.reset_parameters()
        for input_to_hidden, hidden_to_output in self.tail:  # type: ignore[attr-defined]  # two-module Sequentials
            input_to_hidden.reset_parameters()
            hidden_to_output.reset_parameters()

    def _check(self, input: Tensor, target: Tensor) -> None:
        if target.dim() == 1:
            if input.size(0) != target.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input.dim() != 2:
                raise RuntimeError(
                    f"1D target tensor expects 2D input tensors, but found inputs with size {input.size()}"
                )
        elif target.dim() == 0:
            if input.dim() != 1:
                raise RuntimeError(
                    f"0D target tensor expects 1D input tensors, but found inputs with size {input.size()}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        data = known_data(target)
        if data is not None and data.size and (data.min() < 0 or data.max() >= self.n_classes):
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{int(data.min())}, {int(data.max())}] were found. "
            )

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        self._check(input_, target_)
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = (target_ if batched else target_.unsqueeze(0)).to(dtypes.int64)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        # The head's entry for each row: the class itself in the shortlist, else its cluster's entry.
        head_index = _ops.where(_ops.lt(target, self.shortlist_size), target, 0)
        # (Not in an export's trace, whose graph must serve every target.)
        known_target = None if exporting() else known_data(target)
        output = None
        for i, (low, high) in enumerate(zip(self.cutoffs[:-1], self.cutoffs[1:])):
            if known_target is not None and not ((known_target >= low) & (known_target < high)).any():
                # PyTorch runs a cluster on its rows only: one without any leaves its weights' .grad
                # None, which optimizers skip (zeros would still decay them, or move their momentum).
                continue
            in_cluster = _ops.logical_and(_ops.ge(target, low), _ops.lt(target, high))
            head_index = _ops.where(in_cluster, self.shortlist_size + i, head_index)
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            relative = _ops.clamp(target - low, 0, high - low - 1)
            local = cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1)
            term = _ops.where(in_cluster, local, 0.0)
            output = term if output is None else output + term
        head = head_logprob.gather(1, head_index.unsqueeze(1)).squeeze(1)
        output = head if output is None else output + head
        loss = (-output).mean()
        if not batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        pieces = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            pieces.append(cluster_logprob + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return _ops.cat(pieces, 1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Log-probabilities of every class: ``(N, in_features) -> (N, n_classes)``."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The most likely class of each row; only rows whose head favours a cluster need the full distribution."""
        head_output = self.head(input)
        head_choice = head_output.argmax(1)
        full_choice = self._get_full_log_prob(input, head_output).argmax(1)
        return _ops.where(_ops.lt(head_choice, self.shortlist_size), head_choice, full_choice)
