"""embedding and embedding_bag: table lookups recorded as Gather, bags reduced with ScatterElements or ReduceMax.

The graph computes from the index and offset tensors themselves (bag numbers by comparing positions
with the offsets), so exported models take new indices and offsets as inputs. Index values are
also read, as PyTorch reads them: to check bounds (the error names the bound) and the offsets,
for ``max_norm`` (which renormalizes the looked-up rows of the weight in place, under no_grad) and
for ``scale_grad_by_freq`` (a gradient factor only). Gradients flow through Gather's and
ScatterElements' rules to the weight (dense: onnxnn has no sparse gradients) and to
``per_sample_weights``.
"""

from __future__ import annotations

import functools

import numpy as np

from ...ir import dtypes
from ...ir.graph import shared_attributes
from ...runtime import ops as _ops
from ...runtime.grad_mode import is_grad_enabled, no_grad
from ...runtime.internal import check_known_data, constant_tensor, exporting, full_tensor
from ...runtime.tensor import Tensor, apply_op

__all__ = ["embedding", "embedding_bag"]

_ROWS = shared_attributes((("axis", 0),))  # Gather along the weight's rows


def _index_values(input: Tensor, function: str) -> np.ndarray:
    _check_index_dtype(input, function)
    return np.asarray(input.numpy(force=True), dtype=np.int64)


def _check_index_dtype(input: Tensor, function: str) -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{function}(): argument 'indices' must be Tensor, not {type(input).__name__}")
    if input.dtype.category != 1:
        raise RuntimeError(
            f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            f"Long, Int; but got {input.dtype} instead (while checking arguments for {function})"
        )


def _first_outside(values: np.ndarray, rows: int) -> int | None:
    """The flat position of the first index outside ``[0, rows)``, or None."""
    outside = (values < 0) | (values >= rows)
    return int(np.argmax(outside)) if outside.any() else None  # argmax: the first True, flat


def _check_index_range(rows: int, values: np.ndarray) -> None:
    position = _first_outside(values, rows)
    if position is not None:
        raise IndexError(
            f"index out of range in self: index {int(values.flat[position])} is not in [0, {rows}) "
            f"(the weight has {rows} rows)"
        )


def _check_bag_index_range(rows: int, values: np.ndarray) -> None:
    """embedding_bag's range check: a RuntimeError naming the first index outside ``[0, rows)`` (PyTorch's;
    embedding's is an IndexError)."""
    position = _first_outside(values, rows)
    if position is not None:
        raise RuntimeError(
            f"Index {position} of input takes value {int(values.flat[position])} which is not in the valid "
            f"range [0, {rows})"
        )


def _padding_index(padding_idx: int | None, rows: int) -> int | None:
    if padding_idx is None:
        return None
    if padding_idx > 0 and padding_idx >= rows:
        raise AssertionError("Padding_idx must be within num_embeddings")
    if padding_idx < 0:
        if padding_idx < -rows:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx += rows
    return padding_idx


def _renorm_rows(weight: Tensor, values: np.ndarray, max_norm: float, norm_type: float) -> None:
    """PyTorch's embedding_renorm_: rows looked up whose ``norm_type``-norm exceeds ``max_norm`` are scaled
    in place by ``max_norm / (norm + 1e-7)``.

    As ATen's loop: the norm (``torch.norm``'s, so ``norm_type=0`` counts the nonzero entries) in the
    weight's dtype, the factor in double, then ``row *= scale``: the factor rounded to the weight's
    dtype, the product in its opmath (float32 for the half types) and rounded back.
    """
    unique = np.unique(values)
    if unique.size == 0:
        return
    with no_grad():
        index = constant_tensor(unique)
        rows = weight.index_select(0, index)
        factors, opmath = _renorm_factors(rows, max_norm, norm_type, weight.dtype)
        weight[index] = (rows.to(opmath) * factors.to(opmath)).to(weight.dtype)


def _renorm_factors(rows: Tensor, max_norm: float, norm_type: float, dtype) -> tuple[Tensor, dtypes.dtype]:
    """Each row's factor (in the weight's dtype) and the opmath dtype that scales by it, as ATen's loop."""
    norms = _ops.norm(rows, norm_type, -1, keepdim=True).to(dtypes.float64)
    scale = _ops.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
    return scale.to(dtype), dtypes.float64 if dtype == dtypes.float64 else dtypes.float32


def _renormed(rows: Tensor, max_norm: float, norm_type: float) -> Tensor:
    """Looked-up ``rows`` as ``embedding_renorm_`` leaves them, computed from the rows themselves: what
    an exported graph does, since which rows are renormalized depends on the indices fed to it (the
    weight's in-place update is the eager call's; an export restores the weight anyway)."""
    with no_grad():
        factors, opmath = _renorm_factors(rows, max_norm, norm_type, rows.dtype)
        return (rows.to(opmath) * factors.to(opmath)).to(rows.dtype)


def _gradient_scaled(rows: Tensor, factor: Tensor) -> Tensor:
    """``rows`` unchanged in value, with each row's gradient multiplied by ``factor`` (one per row).

    ``rows.detach() + (rows - rows.detach()) * factor`` adds an exact zero in the forward pass, so
    the value is bit-for-bit ``rows``.
    """
    detached = rows.detach()
    return detached + (rows - detached) * factor.reshape((-1, 1))


def _lookup(
    values: np.ndarray | None, input: Tensor, weight: Tensor, padding_idx: int | None, scale_grad_by_freq: bool
) -> Tensor:
    """The rows of ``weight`` at ``input``, of shape ``(*input.shape, D)``."""
    if (padding_idx is None and not scale_grad_by_freq) or not (is_grad_enabled() and weight.requires_grad):
        # No gradient to shape (evaluation, export): one Gather, whose indices may have any rank.
        return apply_op("Gather", (weight, input), _ROWS, "EmbeddingBackward0")
    flat_input = input.reshape(-1)
    rows = weight.index_select(0, flat_input)
    factor = None
    if padding_idx is not None:
        # From the indices in the graph, so the padding positions follow whatever indices are fed.
        factor = (flat_input != padding_idx).to(weight.dtype)
    if scale_grad_by_freq and values is not None and values.size:
        flat = values.reshape(-1)
        _, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
        frequency = constant_tensor(
            (1.0 / counts[inverse]).astype(weight.dtype.numpy_dtype), weight.dtype, weight.device
        )
        factor = frequency if factor is None else factor * frequency
    scaled = rows if factor is None else _gradient_scaled(rows, factor)  # None: an empty input, no padding
    return scaled.reshape(tuple(input.shape) + (weight.shape[1],))


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Looks up the rows of ``weight`` at the integer ``input``: the result has shape ``(*input.shape, D)``.

    Args:
        input: integer indices into the rows of ``weight``.
        weight: ``(num_embeddings, D)``.
        padding_idx: a row that receives no gradient.
        max_norm: rows looked up with a larger ``norm_type``-norm are renormalized in place first.
        norm_type: the p of the p-norm for ``max_norm``. Default: 2.
        scale_grad_by_freq: divide each row's gradient by how often its index occurs in ``input``.
        sparse: not supported (onnxnn's gradients are dense); raises NotImplementedError.

    Example::

        >>> weight = onnxnn.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> F.embedding(onnxnn.tensor([[0, 2]]), weight)
        tensor([[[1., 2.],
                 [5., 6.]]])
    """
    if sparse:
        raise NotImplementedError(
            "embedding(sparse=True): onnxnn has no sparse gradients; use sparse=False, which "
            "gives the same gradient values as a dense tensor"
        )
    if weight.dim() != 2:
        raise RuntimeError(f"'weight' must be 2-D, got a {weight.dim()}-D weight of shape {list(weight.shape)}")
    rows = weight.shape[0]
    padding_idx = _padding_index(padding_idx, rows)
    if max_norm is None and not scale_grad_by_freq:
        # The lookup's graph does not depend on the indices: only their range is checked, on every
        # call (a replayed one too), pending indices computed first as PyTorch's kernel reads them.
        _check_index_dtype(input, "embedding")
        check_known_data(input, functools.partial(_check_index_range, rows), force=True)
        return _lookup(None, input, weight, padding_idx, False)
    values = _index_values(input, "embedding")
    _check_index_range(rows, values)
    if max_norm is not None:
        if exporting():  # the rows to renormalize depend on the indices: computed in the graph
            return _renormed(apply_op("Gather", (weight, input), _ROWS, "EmbeddingBackward0"), max_norm, norm_type)
        _renorm_rows(weight, values, max_norm, norm_type)
    return _lookup(values, input, weight, padding_idx, scale_grad_by_freq)


def _check_bags(input: Tensor, offsets, include_last_offset: bool) -> int:
    """Checks PyTorch's two input forms (2-D fixed-length bags, or 1-D with offsets); returns the bag count.

    The offsets' values are checked on every call (a replayed one too: ``check_known_data``), pending
    ones computed first; the bags are laid out from them in the graph.
    """
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError(
                "if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                f"fixed length sequences. However, found offsets of type {type(offsets).__name__}"
            )
        return input.shape[0]
    if input.dim() != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    _check_index_dtype(offsets, "embedding_bag")
    if offsets.dim() != 1:
        raise ValueError("offsets has to be a 1D Tensor")
    check_known_data(offsets, functools.partial(_check_offsets, input.numel()), force=True)
    # With include_last_offset the extra last offset only counts the bags: as in PyTorch, the last
    # bag runs to the end of the input.
    return offsets.numel() - 1 if include_last_offset else offsets.numel()


def _check_offsets(length: int, starts: np.ndarray) -> None:
    if starts.size and starts[0] != 0:
        raise RuntimeError(
            f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
            f"position 0. However, got {int(starts[0])}"
        )
    if starts.size and (np.any(np.diff(starts) < 0) or starts[-1] > length):
        raise RuntimeError(
            f"offsets must be non-decreasing and at most the input's length {length}, got {starts.tolist()}"
        )


def _bag_ids(input: Tensor, offsets: Tensor | None, bags: int, include_last_offset: bool) -> Tensor:
    """Each index's bag number, computed in the graph from ``offsets`` (a graph input when exported):
    the number of bag starts at or before the position, minus one."""
    if input.dim() == 2:
        return constant_tensor(np.repeat(np.arange(input.shape[0], dtype=np.int64), input.shape[1]))
    # Not None: 1-D input comes with offsets (checked by embedding_bag).
    starts = offsets.narrow(0, 0, bags) if include_last_offset else offsets  # type: ignore[union-attr]
    positions = constant_tensor(np.arange(input.shape[0], dtype=np.int64)).reshape((-1, 1))
    started = _ops.ge(positions, starts.to(dtypes.int64).reshape((1, -1)))  # type: ignore[union-attr]
    return started.to(dtypes.int64).sum(1) - 1


def embedding_bag(
    input: Tensor,
    weight: Tensor,
    offsets: Tensor | None = None,
    max_norm: float | None = None,
    norm_type: float = 2,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Tensor:
    """Sums, averages or takes the max of bags of embeddings, without materializing ``embedding``'s output per bag.

    The bags are laid out in the graph from ``input`` and ``offsets``, so an exported model takes
    other indices and offsets (of the example's lengths) as inputs.

    Args:
        input: a 2-D ``(B, N)`` tensor of indices (B bags of N), or a 1-D one split into bags by ``offsets``.
        weight: ``(num_embeddings, D)``.
        offsets: for 1-D ``input``, where each bag starts (``offsets[0] == 0``).
        max_norm, norm_type, scale_grad_by_freq: as :func:`embedding`.
        mode: ``'sum'``, ``'mean'`` (default) or ``'max'``.
        sparse: not supported; raises NotImplementedError.
        per_sample_weights: weights of ``input``'s shape multiplying each embedding (``mode='sum'`` only).
        include_last_offset: ``offsets`` has one more entry, which only counts the bags.
        padding_idx: entries with this index are left out of their bag (and of its count for ``'mean'``).

    Returns:
        ``(B, D)``; empty bags give zeros.

    Example::

        >>> weight = onnxnn.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> F.embedding_bag(onnxnn.tensor([0, 2, 1]), weight, onnxnn.tensor([0, 2]), mode="sum")
        tensor([[6., 8.],
                [3., 4.]])
    """
    if sparse:
        raise NotImplementedError(
            "embedding_bag(sparse=True): onnxnn has no sparse gradients; use sparse=False, "
            "which gives the same gradient values as a dense tensor"
        )
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.dim()}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(
                f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                f"on GitHub."
            )
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ValueError(
                f"embedding_bag: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, "
                f"then it must have the same shape as the input ({list(input.shape)})"
            )
        if per_sample_weights.dtype != weight.dtype:  # PyTorch's check: no silent rounding to weight's dtype
            raise RuntimeError(
                f"Expected tensor for argument #1 'weight' to have the same type as tensor for argument #1 "
                f"'per_sample_weights'; but type {weight.dtype} does not equal {per_sample_weights.dtype} "
                f"(while checking arguments for embedding_bag)"
            )
    rows, width = weight.shape
    padding_idx = _padding_index(padding_idx, rows)
    _check_index_dtype(input, "embedding_bag")
    bags = _check_bags(input, offsets, include_last_offset)
    check_known_data(input, functools.partial(_check_bag_index_range, rows), force=True)
    renorm_in_graph = max_norm is not None and exporting()  # as embedding's
    # The index values themselves, only where they change what is recorded (as embedding's).
    values = None
    if (max_norm is not None and not renorm_in_graph) or scale_grad_by_freq:
        values = _index_values(input, "embedding_bag")
    if max_norm is not None and values is not None and not renorm_in_graph:
        _renorm_rows(weight, values, max_norm, norm_type)
    count = input.numel()
    if count == 0 or bags == 0:
        if weight.requires_grad and rows:
            # Zeros that stay in the graph, selected over weight's first row (exactly 0 for any row,
            # NaN included): weight gets a zero gradient, as in PyTorch, where a constant would leave
            # the result without a grad_fn.
            nothing = full_tensor((1, 1), False, dtypes.bool, weight.device)
            zero = full_tensor((), 0, weight.dtype, weight.device)
            return _ops.where(nothing, weight.narrow(0, 0, 1), zero).expand((bags, width))
        return full_tensor((bags, width), 0, weight.dtype, weight.device)
    flat = input.reshape(-1)
    gathered = _lookup(values, flat, weight, None, scale_grad_by_freq)
    if renorm_in_graph and max_norm is not None:
        gathered = _renormed(gathered, max_norm, norm_type)
    bag = _bag_ids(input, offsets, bags, include_last_offset)
    member = None if padding_idx is None else (flat != padding_idx)
    if mode == "max":
        return _bag_max(gathered, bag, member, bags)
    if per_sample_weights is not None:
        gathered = gathered * per_sample_weights.reshape((-1, 1)).to(weight.dtype)
    if member is not None:
        gathered = gathered * member.to(weight.dtype).reshape((-1, 1))  # padding entries add zero, get zero gradient
    index = bag.reshape((-1, 1)).expand((count, width))
    zeros = full_tensor((bags, width), 0, weight.dtype, weight.device)
    totals = _ops.scatter_add(zeros, 0, index, gathered)
    if mode == "sum":
        return totals
    ones = full_tensor((count,), 1.0, weight.dtype, weight.device)
    counted = ones if member is None else member.to(weight.dtype)
    counts = _ops.scatter_add(full_tensor((bags,), 0, weight.dtype, weight.device), 0, bag, counted)
    return totals / _ops.clamp(counts, min=1.0).reshape((-1, 1))


def _bag_max(gathered: Tensor, bag: Tensor, member: Tensor | None, bags: int) -> Tensor:
    """The elementwise max over each bag's rows, from a ``(bags, L)`` membership mask (empty bags: 0)."""
    bag_numbers = constant_tensor(np.arange(bags, dtype=np.int64)).reshape((-1, 1))
    inside = _ops.eq(bag.reshape((1, -1)), bag_numbers)
    if member is not None:
        inside = inside & member.reshape((1, -1))
    lowest = full_tensor((), -np.inf, gathered.dtype, gathered.device)
    candidates = _ops.where(inside.unsqueeze(-1), gathered.unsqueeze(0), lowest)
    # max's values, not amax: on ties PyTorch's gradient goes to the bag's first row holding the
    # maximum (max's index), where amax would split it between them.
    maxima = candidates.max(1).values
    empty = inside.to(dtypes.int64).sum(1, keepdim=True) == 0
    return _ops.where(empty, full_tensor((), 0.0, gathered.dtype, gathered.device), maxima)
