"""Matrix helpers of PyTorch's API: addmm and friends, outer products, diagonals, triangles, cross.

All are compositions of MatMul, Mul, Add, Gather and Where, except tril/triu, which record ONNX
Trilu (shape and gradient rules here: the gradient of keeping a triangle is keeping it of ``g``).
Diagonals are gathered with index tables fixed at record time, so their gradients are exact
scatters (no multiplication by a 0/1 mask, which would turn an infinite entry into NaN).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ...ir import dtypes
from ...ir.device import as_device, default_device
from ...ir.registry import gradient_rules, shape_rules
from ..tensor import Size, autocast_arguments
from ._common import Tensor, apply_op, int64_constant, normalize_axes, promote_operands, with_zero_gradients
from ._common import broadcast_shapes as _broadcast_shapes
from .alpha_scaling import factor_in
from .arrange import meshgrid
from .linalg import bmm, dot, matmul, mm
from .opmath import REDUCED_FLOATS, rounds_half_products_once, widened
from .shape import cat, stack
from ..tensor import outside_autocast

__all__ = [
    "addmm",
    "addbmm",
    "baddbmm",
    "addmv",
    "addr",
    "mv",
    "outer",
    "ger",
    "inner",
    "kron",
    "tril",
    "triu",
    "diagonal",
    "diag",
    "diag_embed",
    "diagflat",
    "trace",
    "cross",
    "vdot",
]


@shape_rules.register("Trilu")
def _trilu_shape(inputs, attrs):
    if len(inputs[0].shape) < 2:
        raise ValueError(f"Trilu: the input must have rank >= 2, got shape {list(inputs[0].shape)}")
    return [(inputs[0].shape, inputs[0].dtype)]


@gradient_rules.register("Trilu")
def _trilu_grad(ctx, g):
    k = ctx.input_value(1) if ctx.num_inputs > 1 else None
    return apply_op("Trilu", (g, k), dict(ctx.attrs), "TriluBackward0"), None


def _scaled_sum(input, multiply, operands: tuple, beta, alpha, name: str | None) -> Tensor:
    """``beta * input + alpha * multiply(*operands)``; with beta == 0 the input is ignored (NaN
    included), as PyTorch.

    float16/bfloat16 are computed in float32 and rounded once, as PyTorch's kernels (opmath) do,
    when anything is added to or scales the product: rounding the product, its scaling and the sum
    each to half loses the digits a sum cancels (tens of ulps). ``name``: the grad_fn of that
    rounding, or None for an op PyTorch computes in the half dtype itself (addr). A plain product
    stays in its dtype (half MatMul accumulates in float32 already).
    """
    first = operands[0]
    if (
        name is not None
        and rounds_half_products_once()
        and isinstance(first, Tensor)
        and (dtype := first._value.dtype) in REDUCED_FLOATS
        and (alpha != 1 or beta != 0)
        and all(isinstance(operand, Tensor) and operand._value.dtype is dtype for operand in operands)
        and (beta == 0 or (isinstance(input, Tensor) and input._value.dtype is dtype))
    ):
        return _scaled_sum_in_float32(input, multiply, operands, beta, alpha, name)
    product = multiply(*operands)
    dtype = product._value.dtype
    if beta != 0 and input._value.dtype is not dtype:  # addr promotes (the others check dtypes first)
        dtype = dtypes.result_type([(input._value.dtype, input.dim()), (dtype, product.dim())])
    # The factors convert to the result dtype, as PyTorch's: int64 addmm's alpha=0.5 is 0, not a
    # float result; addr (``name`` None) refuses float factors of integer results as add does.
    if alpha != 1 or type(alpha) is not int:
        product = product.to(dtype) * factor_in(alpha, dtype, "alpha", checked=name is None)
    if beta != 1 or type(beta) is not int:
        beta = factor_in(beta, dtype, "beta", checked=name is None)
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


@outside_autocast()  # under autocast too: its operands are the half values autocast cast, widened exactly
def _scaled_sum_in_float32(input, multiply, operands: tuple, beta, alpha, name: str) -> Tensor:
    dtype = operands[0]._value.dtype
    result = _scaled_sum(
        input if beta == 0 else widened(input), multiply, tuple(map(widened, operands)), beta, alpha, name
    )
    return apply_op("Cast", (result,), {"to": dtype}, name)


def _same_dtype(first_name: str, first: Tensor, second_name: str, second: Tensor) -> None:
    """PyTorch's addmm/addbmm check: no promotion between the operands of a scaled product."""
    if first._value.dtype is not second._value.dtype:
        a, b = (dtypes.scalar_type_name(t._value.dtype) for t in (first, second))
        raise RuntimeError(f"{first_name} and {second_name} must have the same dtype, but got {a} and {b}")


def _need_rank(tensor: Tensor, rank: int, what: str) -> None:
    if tensor.dim() != rank:
        kinds = {1: "a vector", 2: "a matrix", 3: "a 3D tensor"}
        raise RuntimeError(f"{what} must be {kinds[rank]}, got {tensor.dim()}-D tensor")


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``."""
    # Autocast casts the added input too (the whole op runs in its dtype), as PyTorch does.
    input, mat1, mat2 = autocast_arguments("MatMul", (input, mat1, mat2))
    _need_rank(mat1, 2, "mat1")
    _need_rank(mat2, 2, "mat2")
    _same_dtype("mat1", mat1, "mat2", mat2)
    _same_dtype("self", input, "mat2", mat2)
    return _scaled_sum(input, mm, (mat1, mat2), beta, alpha, "AddmmBackward0")


def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``."""
    # Autocast casts the added input too (the whole op runs in its dtype), as PyTorch does.
    input, batch1, batch2 = autocast_arguments("MatMul", (input, batch1, batch2))
    _need_rank(batch1, 3, "batch1")
    _need_rank(batch2, 3, "batch2")
    if not input._value.dtype is batch1._value.dtype is batch2._value.dtype:
        names = ", ".join(
            f"{n}: {dtypes.scalar_type_name(t._value.dtype)}"
            for n, t in (("input", input), ("batch1", batch1), ("batch2", batch2))
        )
        raise RuntimeError(f"Input dtypes must be the same, got: {names}")
    return _scaled_sum(input, bmm, (batch1, batch2), beta, alpha, "BaddbmmBackward0")


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * sum_b batch1[b] @ batch2[b]``."""
    # Autocast casts the added input too (the whole op runs in its dtype), as PyTorch does.
    input, batch1, batch2 = autocast_arguments("MatMul", (input, batch1, batch2))
    _need_rank(batch1, 3, "batch1")
    _need_rank(batch2, 3, "batch2")
    _same_dtype("mat1", batch1, "mat2", batch2)
    _same_dtype("self", input, "mat2", batch2)
    return _scaled_sum(input, _bmm_sum, (batch1, batch2), beta, alpha, "AddbmmBackward0")


def _bmm_sum(batch1: Tensor, batch2: Tensor) -> Tensor:
    return bmm(batch1, batch2).sum(0)


@outside_autocast()
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product."""
    _need_rank(input, 2, "input")
    _need_rank(vec, 1, "vec")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}x{input.shape[1]}), vec ({vec.shape[0]})")
    return matmul(input, vec)


@outside_autocast()
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``."""
    # Autocast casts the added input too (the whole op runs in its dtype), as PyTorch does.
    input, mat, vec = autocast_arguments("MatMul", (input, mat, vec))
    if not input._value.dtype is mat._value.dtype is vec._value.dtype:
        a, b, c = (dtypes.scalar_type_name(t._value.dtype) for t in (input, mat, vec))
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {a}, {b}, and {c}")
    return _scaled_sum(input, mv, (mat, vec), beta, alpha, "AddmvBackward0")


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """``input[i] * vec2[j]``."""
    _need_rank(input, 1, "outer: input")
    _need_rank(vec2, 1, "outer: vec2")
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``."""
    # PyTorch's addr kernel computes in the tensors' dtype (each half op rounds): no float32 path.
    return _scaled_sum(input, outer, (vec1, vec2), beta, alpha, None)


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum over the last dims: shape ``input.shape[:-1] + other.shape[:-1]`` (a product for 0-d inputs)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(
            f"inner() the last dimension must match on both input tensors but got shapes "
            f"{list(input.shape)} and {list(other.shape)}"
        )
    size = input.shape[-1]
    # Explicit row counts, not -1: with size 0 a reshape cannot infer them.
    rows, columns = math.prod(input.shape[:-1]), math.prod(other.shape[:-1])
    product = matmul(input.reshape(rows, size), other.reshape(columns, size).transpose(0, 1))
    return product.reshape(tuple(input.shape[:-1]) + tuple(other.shape[:-1]))


@outside_autocast()
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors (real dtypes: no conjugation)."""
    _need_rank(input, 1, "1D tensors expected, but got input")
    return dot(input, other)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """Kronecker product: blocks ``input[i...] * other``."""
    rank = max(input.dim(), other.dim())
    a = input.reshape((1,) * (rank - input.dim()) + tuple(input.shape))
    b = other.reshape((1,) * (rank - other.dim()) + tuple(other.shape))
    a_shape, b_shape = [], []
    for size_a, size_b in zip(a.shape, b.shape):
        a_shape += [size_a, 1]
        b_shape += [1, size_b]
    product = a.reshape(a_shape) * b.reshape(b_shape)
    return product.reshape(tuple(size_a * size_b for size_a, size_b in zip(a.shape, b.shape)))


def _triangle(input: Tensor, diagonal: int, upper: bool) -> Tensor:
    name = "triu" if upper else "tril"
    # PyTorch's argument check comes first (a 1-D tensor with diagonal 'x' is a TypeError), and
    # takes ints (numpy's too, and 0-d integer tensors) but no bool, float or string.
    if (
        isinstance(diagonal, (bool, np.bool_))
        or not isinstance(diagonal, (int, np.integer, Tensor))
        or (isinstance(diagonal, Tensor) and (diagonal.dim() or diagonal.dtype.category != 1))
    ):
        raise TypeError(f"{name}(): argument 'diagonal' must be int, not {type(diagonal).__name__}")
    if input.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    return apply_op(
        "Trilu",
        (input, int64_constant(int(diagonal))),
        {"upper": int(upper)},
        "TriuBackward0" if upper else "TrilBackward0",
    )


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (elements with ``j - i <= diagonal``), zeros elsewhere."""
    return _triangle(input, diagonal, False)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (elements with ``j - i >= diagonal``), zeros elsewhere."""
    return _triangle(input, diagonal, True)


def _diagonal_positions(rows: int, cols: int, offset: int) -> np.ndarray:
    start_row, start_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(rows - start_row, cols - start_col))
    return np.array([(start_row + i) * cols + start_col + i for i in range(length)], dtype=np.int64)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the (dim1, dim2) planes as the last dim of the result (a copy, not a view)."""
    axis1, axis2 = normalize_axes([dim1, dim2], input.dim())
    if axis1 == axis2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rest = [axis for axis in range(input.dim()) if axis not in (axis1, axis2)]
    moved = input.permute(rest + [axis1, axis2])
    rows, cols = input.shape[axis1], input.shape[axis2]
    flat = moved.reshape(tuple(moved.shape[:-2]) + (rows * cols,))
    positions = Tensor._from_array(_diagonal_positions(rows, cols, offset), dtypes.int64, input.device)
    return apply_op("Gather", (flat, positions), {"axis": flat.dim() - 1}, "DiagonalBackward0")


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices whose ``offset`` diagonal (in dims dim1, dim2 of the result) holds the last dim of ``input``."""
    length = input.shape[-1]
    size = length + abs(offset)
    rank = input.dim() + 1
    axis1, axis2 = normalize_axes([dim1, dim2], rank)
    if axis1 == axis2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    # Gather from the input with one zero appended: off-diagonal positions read the zero.
    padded = apply_op(
        "Concat",
        (input, Tensor._zeros(tuple(input.shape[:-1]) + (1,), input.dtype, input.device)),
        {"axis": input.dim() - 1},
        "CatBackward0",
    )
    table = np.full(size * size, length, dtype=np.int64)
    table[_diagonal_positions(size, size, offset)] = np.arange(length)
    positions = Tensor._from_array(table, dtypes.int64, input.device)
    flat = apply_op("Gather", (padded, positions), {"axis": input.dim() - 1}, "DiagEmbedBackward0")
    result = flat.reshape(tuple(input.shape[:-1]) + (size, size))
    # The two new dims are last; move them to (axis1, axis2).
    others = iter(range(rank - 2))
    order = [rank - 2 if axis == axis1 else rank - 1 if axis == axis2 else next(others) for axis in range(rank)]
    return result.permute(order)


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D input becomes a matrix with it on the ``diagonal``; a matrix gives that diagonal."""
    if input.dim() == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.dim() == 2:
        return globals()["diagonal"](input, diagonal, 0, 1)
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.dim()}D")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    return diag_embed(input.reshape(-1), offset, 0, 1)


@outside_autocast("trace")
def trace(input: Tensor) -> Tensor:
    """Sum of the main diagonal of a matrix."""
    if input.dim() != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(input.dim()))
    result = diagonal(input).sum()
    return result if input.dtype.is_floating_point else result.to(dtypes.int64)


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """Cross product of 3-vectors along ``dim`` (default: the first dim of size 3 of ``input``), broadcasting
    the other dims. As PyTorch's ``linalg_cross``: inputs of one rank, both of length 3 along ``dim``
    before broadcasting, and of one dtype (no promotion); bool is refused."""
    if dim is None:
        dim = next((axis for axis, size in enumerate(input.shape) if size == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dim() == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    axis = normalize_axes([dim], input.dim())[0]
    if input.shape[axis] != 3 or other.shape[axis] != 3:
        raise RuntimeError(
            f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[axis]} and {other.shape[axis]}"
        )
    shape = _broadcast_shapes(tuple(input.shape), tuple(other.shape))
    # PyTorch's kernel dispatches on input's dtype, then reads other's data as that dtype.
    if input.dtype is dtypes.bool:
        raise NotImplementedError("\"cross\" not implemented for 'Bool'")
    if other.dtype is not input.dtype:
        raise RuntimeError(
            f"expected scalar type {dtypes.scalar_type_name(input.dtype)} but found "
            f"{dtypes.scalar_type_name(other.dtype)}"
        )
    a, b = input.expand(shape), other.expand(shape)
    first = Tensor._from_array(np.array([1, 2, 0], dtype=np.int64), dtypes.int64, input.device)
    second = Tensor._from_array(np.array([2, 0, 1], dtype=np.int64), dtypes.int64, input.device)
    return a.index_select(axis, first) * b.index_select(axis, second) - a.index_select(axis, second) * b.index_select(
        axis, first
    )


def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contracts the last ``dims`` dims of ``a`` with the first ``dims`` of ``b`` (or the listed pairs).

    ``dims`` is an int, a pair of lists of dims, or a tensor: one element (an int) or two rows (the
    pair). A contracted dim of size 1 on one side is summed over on the other (PyTorch's broadcast).
    """
    if not isinstance(dims, (tuple, list, Tensor, int)):
        raise RuntimeError(
            "tensordot expects dims to be int or tuple[list[int], list[int]] or list[list[int]] containing two "
            f"lists, but got dims={dims}"
        )
    if isinstance(dims, Tensor):
        if dims.numel() > 1:
            if dims.shape[0] != 2:
                raise AssertionError(f"dims tensor must have size 2 in first dimension, got {dims.shape[0]}")
            dims = (dims[0].tolist(), dims[1].tolist())
        else:
            dims = int(dims.item())
            if dims < 0:
                raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a.dim(), b.dim()):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        given_a, given_b = list(range(a.dim() - dims, a.dim())), list(range(dims))
    else:
        given_a, given_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(given_a) != len(given_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dims_a: list[int] = []
    dims_b: list[int] = []
    for given_da, given_db in zip(given_a, given_b):
        da, db = normalize_axes([given_da], a.dim())[0], normalize_axes([given_db], b.dim())[0]
        if a.shape[da] != b.shape[db] and 1 not in (a.shape[da], b.shape[db]):
            raise RuntimeError(
                f"contracted dimensions need to match, but first has size {a.shape[da]} in dim {given_da} "
                f"and second has size {b.shape[db]} in dim {given_db}"
            )
        for axis, taken in ((da, dims_a), (db, dims_b)):
            if axis in taken:
                raise RuntimeError(f"dim {axis} appears multiple times in the list of dims")
        # A size-1 side broadcasts: the other side's dim is summed over first, leaving 1 by 1.
        if b.shape[db] == 1:
            a = a.sum(da, keepdim=True)
        elif a.shape[da] == 1:
            b = b.sum(db, keepdim=True)
        dims_a.append(da)
        dims_b.append(db)
    free_a = [d for d in range(a.dim()) if d not in dims_a]
    free_b = [d for d in range(b.dim()) if d not in dims_b]
    size = int(np.prod([a.shape[d] for d in dims_a])) if dims_a else 1
    # Explicit free sizes, not -1: a contracted size 0 leaves a reshape nothing to infer them from.
    left = a.permute(free_a + dims_a).reshape(math.prod(a.shape[d] for d in free_a), size)
    right = b.permute(dims_b + free_b).reshape(size, math.prod(b.shape[d] for d in free_b))
    return matmul(left, right).reshape(tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


def chain_matmul(*matrices) -> Tensor:
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    result = matrices[0]
    for matrix in matrices[1:]:
        result = mm(result, matrix)
    return result


def matrix_power(input: Tensor, n: int) -> Tensor:
    """``input`` multiplied by itself ``n`` times (square matrices, batched); n >= 0. The public
    ``matrix_power`` (``linalg_lu.matrix_power``) adds negative powers and A^0's gradient."""
    if input.dim() < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError(
            "linalg.matrix_power: A must be batches of square matrices, but they are "
            f"{input.shape[-2] if input.dim() >= 2 else 1} by {input.shape[-1] if input.dim() else 1} "
            "matrices"
        )
    if n < 0:
        raise NotImplementedError("matrix_power with a negative exponent needs a matrix inverse, which onnxnn lacks")
    if n == 0:
        identity = Tensor._from_array(np.eye(input.shape[-1], dtype=input.dtype.numpy_dtype), input.dtype, input.device)
        return identity.expand(input.shape)
    result, square = None, input
    while n:
        if n & 1:
            result = square if result is None else matmul(result, square)
        n >>= 1
        if n:
            square = matmul(square, square)
    return result  # type: ignore[return-value]  # not None: n > 0 has a set bit


def broadcast_shapes(*shapes):
    """The shape that tensors of ``shapes`` broadcast to."""
    return Size(_broadcast(*[(shape,) if isinstance(shape, int) else tuple(shape) for shape in shapes]))


def broadcast_tensors(*tensors) -> tuple:
    """The tensors expanded to their common broadcast shape."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = _broadcast(*[tuple(t.shape) for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


def cartesian_prod(*tensors) -> Tensor:
    """All tuples of one element from each 1-D tensor, as rows (itertools.product order)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([grid.reshape(-1) for grid in grids], 1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of the elements of a 1-D tensor, as rows (itertools order)."""
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    if r == 0:
        return Tensor._zeros((0,), input.dtype, input.device)  # PyTorch's, where itertools has one empty row
    table = np.array(list(choose(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
    if table.shape[0] == 0:
        # No combinations (r > n): PyTorch's result is still a stack of the input, its gradient zeros.
        return with_zero_gradients(Tensor._zeros((0, r), input.dtype, input.device), (input,), "StackBackward0")
    picked = input.index_select(0, Tensor._from_array(table.reshape(-1), dtypes.int64, input.device))
    return picked.reshape(table.shape)


def block_diag(*tensors) -> Tensor:
    """A block-diagonal matrix of the given (0-, 1- or 2-D) tensors, zeros elsewhere."""
    if not tensors:
        # PyTorch's: one row of no columns, of the default dtype.
        return Tensor._zeros((1, 0), dtypes.get_default_dtype(), default_device())
    blocks = [t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t for t in tensors]
    for index, block in enumerate(blocks):
        if block.dim() != 2:
            raise RuntimeError(
                f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {index} has "
                f"{block.dim()} dimensions"
            )
    if len(blocks) > 1:
        blocks, _ = promote_operands(blocks)
    width = sum(block.shape[1] for block in blocks)
    rows, offset = [], 0
    for block in blocks:
        parts = []
        if offset:
            parts.append(Tensor._zeros((block.shape[0], offset), block.dtype, block.device))
        parts.append(block)
        after = width - offset - block.shape[1]
        if after:
            parts.append(Tensor._zeros((block.shape[0], after), block.dtype, block.device))
        rows.append(cat(parts, 1) if len(parts) > 1 else block)
        offset += block.shape[1]
    return cat(rows, 0)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The (2, N) row and column indices of the lower triangle of a ``row x col`` matrix, row by row."""
    rows, cols = np.tril_indices(row, offset, col)
    target = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    return Tensor._from_array(
        np.stack([rows, cols]).astype(target.numpy_dtype),
        target,
        as_device(default_device() if device is None else device),
    )


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The (2, N) row and column indices of the upper triangle of a ``row x col`` matrix, row by row."""
    rows, cols = np.triu_indices(row, offset, col)
    target = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    return Tensor._from_array(
        np.stack([rows, cols]).astype(target.numpy_dtype),
        target,
        as_device(default_device() if device is None else device),
    )


def _broadcast(*shapes):
    return _broadcast_shapes(*shapes) if shapes else ()


__all__ += [
    "tensordot",
    "chain_matmul",
    "broadcast_shapes",
    "broadcast_tensors",
    "cartesian_prod",
    "combinations",
    "block_diag",
    "tril_indices",
    "triu_indices",
]
