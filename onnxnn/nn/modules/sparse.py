"""Embedding tables: Embedding and EmbeddingBag."""

from __future__ import annotations

from ...runtime.creation import empty
from ...runtime.grad_mode import no_grad
from ...runtime.internal import constant_tensor, known_data
from ...runtime.tensor import Tensor
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Embedding", "EmbeddingBag"]


def _zero_row(weight: Tensor, row: int | None) -> None:
    """Zeroes ``weight[row]`` (None: nothing) outside autograd; a computed weight at once, as the
    ``nn.init`` fills do, so that a new model's first call records the graph of its later ones."""
    if row is None:
        return
    with no_grad():
        rows = known_data(weight)
        if rows is None:
            weight[row] = 0.0  # pending, or on a device: recorded
            return
        rows = rows.copy()
        rows[row] = 0
        weight.copy_(constant_tensor(rows, weight.dtype, weight.device))


def _check_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None:
        return None
    if padding_idx > 0:
        if padding_idx >= num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
    elif padding_idx < 0:
        if padding_idx < -num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = num_embeddings + padding_idx
    return padding_idx


def _refuse_sparse(name: str, sparse: bool) -> None:
    if sparse:
        raise NotImplementedError(
            f"{name}(sparse=True): onnxnn has no sparse gradients; use sparse=False, which "
            "gives the same gradient values as a dense tensor"
        )


def _make_weight(num_embeddings: int, embedding_dim: int, _weight: Tensor | None, _freeze: bool, factory_kwargs):
    if _weight is None:
        return Parameter(empty((num_embeddings, embedding_dim), **factory_kwargs), requires_grad=not _freeze), True
    if list(_weight.shape) != [num_embeddings, embedding_dim]:
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
    return Parameter(_weight, requires_grad=not _freeze), False


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, indexed by integer tensors.

    Args:
        num_embeddings: the number of rows.
        embedding_dim: the size of each row.
        padding_idx: a row initialized to zeros that receives no gradient (negative counts from the end).
        max_norm: rows looked up with a larger ``norm_type``-norm are renormalized in place.
        norm_type: the p of the p-norm for ``max_norm``. Default: 2.
        scale_grad_by_freq: divide each row's gradient by the frequency of its index in the mini-batch.
        sparse: not supported (onnxnn's gradients are dense); ``True`` raises NotImplementedError.
        device, dtype: where and in which dtype to create the weight.

    The weight is initialized from ``N(0, 1)``.

    Example::

        >>> embedding = nn.Embedding(10, 3, padding_idx=0)
        >>> embedding(onnxnn.tensor([[0, 2, 0, 5]])).shape
        onnxnn.Size([1, 4, 3])
    """

    __constants__ = [
        "num_embeddings",
        "embedding_dim",
        "padding_idx",
        "max_norm",
        "norm_type",
        "scale_grad_by_freq",
        "sparse",
    ]

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Tensor | None = None,
        _freeze: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        _refuse_sparse("Embedding", sparse)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.weight, fresh = _make_weight(
            num_embeddings, embedding_dim, _weight, _freeze, {"device": device, "dtype": dtype}
        )
        if fresh:
            self.reset_parameters()
        self.sparse = sparse

    def reset_parameters(self) -> None:
        """Draws the weight from ``N(0, 1)`` and zeroes the padding row."""
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        _zero_row(self.weight, self.padding_idx)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(
            input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse
        )

    def extra_repr(self) -> str:
        s = "{num_embeddings}, {embedding_dim}"
        if self.padding_idx is not None:
            s += ", padding_idx={padding_idx}"
        if self.max_norm is not None:
            s += ", max_norm={max_norm}"
        if self.norm_type != 2:
            s += ", norm_type={norm_type}"
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq={scale_grad_by_freq}"
        if self.sparse is not False:
            s += ", sparse=True"
        return s.format(**self.__dict__)

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
    ) -> "Embedding":
        """An Embedding whose weight is ``embeddings`` (2-D), frozen unless ``freeze=False``.

        Example::

            >>> weight = onnxnn.tensor([[1.0, 2.3, 3.0], [4.0, 5.1, 6.3]])
            >>> nn.Embedding.from_pretrained(weight)(onnxnn.tensor([1]))
            tensor([[4.0000, 5.1000, 6.3000]])
        """
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            _freeze=freeze,
            padding_idx=padding_idx,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            sparse=sparse,
        )


class EmbeddingBag(Module):
    """Sums, averages or takes the max of bags of embeddings (see :func:`~onnxnn.nn.functional.embedding_bag`).

    Args:
        num_embeddings, embedding_dim, max_norm, norm_type, scale_grad_by_freq, padding_idx: as :class:`Embedding`
            (``padding_idx`` entries are left out of their bag).
        mode: ``'sum'``, ``'mean'`` (default) or ``'max'``.
        sparse: not supported; ``True`` raises NotImplementedError.
        include_last_offset: ``offsets`` has one more entry, the end of the last bag.
        device, dtype: where and in which dtype to create the weight.

    Example::

        >>> bag = nn.EmbeddingBag(10, 3, mode="sum")
        >>> bag(onnxnn.tensor([1, 2, 4, 5, 4, 3, 2, 9]), onnxnn.tensor([0, 4])).shape
        onnxnn.Size([2, 3])
    """

    __constants__ = [
        "num_embeddings",
        "embedding_dim",
        "max_norm",
        "norm_type",
        "scale_grad_by_freq",
        "mode",
        "sparse",
        "include_last_offset",
        "padding_idx",
    ]

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Tensor | None = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        _refuse_sparse("EmbeddingBag", sparse)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        self.weight, fresh = _make_weight(
            num_embeddings, embedding_dim, _weight, False, {"device": device, "dtype": dtype}
        )
        if fresh:
            self.reset_parameters()
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def reset_parameters(self) -> None:
        """Draws the weight from ``N(0, 1)`` and zeroes the padding row."""
        init.normal_(self.weight)
        _zero_row(self.weight, self.padding_idx)

    def forward(self, input: Tensor, offsets: Tensor | None = None, per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(
            input,
            self.weight,
            offsets,
            self.max_norm,
            self.norm_type,
            self.scale_grad_by_freq,
            self.mode,
            self.sparse,
            per_sample_weights,
            self.include_last_offset,
            self.padding_idx,
        )

    def extra_repr(self) -> str:
        s = "{num_embeddings}, {embedding_dim}"
        if self.max_norm is not None:
            s += ", max_norm={max_norm}"
        if self.norm_type != 2:
            s += ", norm_type={norm_type}"
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq={scale_grad_by_freq}"
        s += ", mode={mode}"
        if self.padding_idx is not None:
            s += ", padding_idx={padding_idx}"
        return s.format(**{k: repr(v) for k, v in self.__dict__.items()})

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Tensor,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> "EmbeddingBag":
        """An EmbeddingBag whose weight is ``embeddings`` (2-D), frozen unless ``freeze=False``."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(
            num_embeddings=rows,
            embedding_dim=cols,
            _weight=embeddings,
            max_norm=max_norm,
            norm_type=norm_type,
            scale_grad_by_freq=scale_grad_by_freq,
            mode=mode,
            sparse=sparse,
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
        )
        bag.weight.requires_grad = not freeze
        return bag
