"""Matrix products and softmax-family ops: MatMul, Gemm, Softmax, LogSoftmax; Det's gradient (Einsum: einsum.py)."""

from __future__ import annotations


import numpy as np
from onnx import helper, numpy_helper

from ...ir import dtypes
from ...ir.graph import FrozenAttributes, constant, shared_attributes
from ...ir.registry import (
    decompositions,
    gradient_rules,
    session_lowerings,
    shape_rules,
    size_blind_session_lowerings,
    value_blind_decompositions,
)
from ._common import Tensor, apply_op, broadcast_shapes, int64_constant, normalize_axes, promote_operands
from ..tensor import outside_autocast


@shape_rules.register("MatMul")
def _matmul_shape(inputs, attrs):
    a, b = inputs[0].shape, inputs[1].shape
    if not a or not b:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {len(a)}D and {len(b)}D")
    left = (1,) + a if len(a) == 1 else a
    right = b + (1,) if len(b) == 1 else b
    if left[-1] != right[-2]:
        if len(a) == 2 and len(b) == 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and {b[0]}x{b[1]})")
        raise RuntimeError(
            f"Expected size for first two dimensions of batch2 tensor to match: matmul of shapes "
            f"{list(a)} and {list(b)} has inner dimensions {left[-1]} and {right[-2]}"
        )
    batch = broadcast_shapes(left[:-2], right[:-2])
    shape = batch + (left[-2], right[-1])
    if len(a) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(b) == 1:
        shape = shape[:-1]
    return [(shape, inputs[0].dtype)]


def _matrix_transpose(x: Tensor) -> Tensor:
    perm = list(range(x.dim()))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return apply_op("Transpose", (x,), {"perm": perm})


_TRANSPOSE_A, _TRANSPOSE_B = FrozenAttributes(transA=1), FrozenAttributes(transB=1)


@gradient_rules.register("MatMul")
def _matmul_grad(ctx, g):
    # The common layer shapes in as few nodes as possible (one Gemm per gradient); other ranks
    # take the general path below. Each operand is read only for the other's gradient, as PyTorch
    # saves it: a weight changed in place after the forward is no error when the input needs no gradient.
    need_a, need_b = ctx.needs_input_grad(0), ctx.needs_input_grad(1)
    a_rank, b_rank = len(ctx.input_shape(0)), len(ctx.input_shape(1))
    if a_rank == 2 and b_rank == 2:
        return (
            apply_op("Gemm", (g, ctx.input(1)), _TRANSPOSE_B, "MmBackward0") if need_a else None,
            apply_op("Gemm", (ctx.input(0), g), _TRANSPOSE_A, "MmBackward0") if need_b else None,
        )
    a, b = ctx.input(0), ctx.input(1)
    if a_rank >= 3 and b_rank == 2:
        # A batch of matrices times one (F.linear on a sequence): the one matrix's gradient sums a^T g
        # over every row of every matrix, one Gemm of the rows flattened, as PyTorch's linear folds
        # the batch into one addmm. Per matrix, it was a batch of GEMMs over few rows each (a
        # TransformerEncoderLayer's 8 x 64 tokens: eight of 64) and a ReduceSum of their results.
        grad_b = None
        if need_b:
            inner, outer = ctx.input_shape(1)
            rows = (a.reshape(-1, inner), g.reshape(-1, outer))
            grad_b = apply_op("Gemm", rows, _TRANSPOSE_A, "MmBackward0")
        return (matmul(g, _matrix_transpose(b)) if need_a else None), grad_b
    if a_rank == 1 and b_rank == 2:
        # The outer product a g^T as a broadcast Mul: one node fewer than a Gemm of two unsqueezed vectors.
        column = apply_op("Unsqueeze", (a, int64_constant([1])), None, "UnsqueezeBackward0") if need_b else None
        outer = apply_op("Mul", (column, g), None, "MulBackward0") if need_b else None
        return (apply_op("MatMul", (b, g), None, "MvBackward0") if need_a else None), outer
    if a_rank == 2 and b_rank == 1:
        # F.linear's W x on a vector: dW is the outer product g x^T (a broadcast Mul), dx = g W.
        column = apply_op("Unsqueeze", (g, int64_constant([1])), None, "UnsqueezeBackward0") if need_a else None
        outer = apply_op("Mul", (column, b), None, "MulBackward0") if need_a else None
        return outer, (apply_op("MatMul", (g, a), None, "MvBackward0") if need_b else None)
    # Vectors are lifted to matrices so one formula serves every rank; the driver un-broadcasts batches.
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(-1) if b.dim() == 1 else b
    g2 = g
    if b.dim() == 1:
        g2 = g2.unsqueeze(-1)
    if a.dim() == 1:
        g2 = g2.unsqueeze(-2)
    grad_a = matmul(g2, _matrix_transpose(b2))
    grad_b = matmul(_matrix_transpose(a2), g2)
    if a.dim() == 1:
        grad_a = grad_a.reshape(grad_a.shape[:-2] + grad_a.shape[-1:])
    if b.dim() == 1:
        grad_b = grad_b.reshape(grad_b.shape[:-1])
    return grad_a, grad_b


@shape_rules.register("Gemm")
def _gemm_shape(inputs, attrs):
    if type(attrs) is not FrozenAttributes:
        return _checked_gemm_shape(inputs, attrs)
    # F.linear's Gemm: its shared attributes keep the result per input shapes.
    bias = inputs[2] if len(inputs) > 2 else None
    key = (inputs[0].shape, inputs[0].dtype, inputs[1].shape, None if bias is None else bias.shape)
    return attrs.remembered(key, _checked_gemm_shape, inputs, attrs)


def _checked_gemm_shape(inputs, attrs):
    a, b = inputs[0].shape, inputs[1].shape
    rows = a[1] if attrs.get("transA", 0) else a[0]
    inner_a = a[0] if attrs.get("transA", 0) else a[1]
    inner_b = b[1] if attrs.get("transB", 0) else b[0]
    cols = b[0] if attrs.get("transB", 0) else b[1]
    if inner_a != inner_b:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{inner_a} and {inner_b}x{cols})")
    if len(inputs) > 2 and inputs[2] is not None and broadcast_shapes(inputs[2].shape, (rows, cols)) != (rows, cols):
        # ONNX's C broadcasts one way, to the product's shape (an imported model may say otherwise).
        raise RuntimeError(
            f"Gemm: C of shape {list(inputs[2].shape)} does not broadcast to the product's shape {[rows, cols]}"
        )
    return [((rows, cols), inputs[0].dtype)]


@gradient_rules.register("Gemm")
def _gemm_grad(ctx, g):
    alpha, beta = ctx.attrs.get("alpha", 1.0), ctx.attrs.get("beta", 1.0)
    trans_a, trans_b = ctx.attrs.get("transA", 0), ctx.attrs.get("transB", 0)
    grad_c = None
    if ctx.num_inputs > 2 and ctx.input_value(2) is not None:
        grad_c = g * beta if beta != 1.0 else g
    if alpha == 1.0 and not trans_a and trans_b:
        # F.linear's x W^T (+ b): dx = g W and dW = g^T x, one Gemm each and no Transpose node. Each
        # operand is read only for the other's gradient (PyTorch's addmm saves it only then).
        return (
            apply_op("Gemm", (g, ctx.input(1)), None, "MmBackward0") if ctx.needs_input_grad(0) else None,
            apply_op("Gemm", (g, ctx.input(0)), _TRANSPOSE_A, "MmBackward0") if ctx.needs_input_grad(1) else None,
            grad_c,
        )
    a, b = ctx.input(0), ctx.input(1)
    a_matrix = a.t() if trans_a else a
    b_matrix = b.t() if trans_b else b
    grad_a_matrix = matmul(g, b_matrix.t())
    grad_b_matrix = matmul(a_matrix.t(), g)
    grad_a = grad_a_matrix.t() if trans_a else grad_a_matrix
    grad_b = grad_b_matrix.t() if trans_b else grad_b_matrix
    if alpha != 1.0:
        grad_a, grad_b = grad_a * alpha, grad_b * alpha
    return grad_a, grad_b, grad_c


@shape_rules.register("Softmax", "LogSoftmax", "Hardmax")
def _softmax_shape(inputs, attrs):
    normalize_axes([attrs.get("axis", -1)], len(inputs[0].shape))
    return [(inputs[0].shape, inputs[0].dtype)]


@gradient_rules.register("Softmax")
def _softmax_grad(ctx, g):
    out = ctx.output()
    axis = ctx.attrs.get("axis", -1)
    return (out * (g - (g * out).sum(dim=axis, keepdim=True)),)


@gradient_rules.register("LogSoftmax")
def _log_softmax_grad(ctx, g):
    axis = ctx.attrs.get("axis", -1)
    return (g - ctx.output().exp() * g.sum(dim=axis, keepdim=True),)


# ---------------------------------------------------------------- Det (imported models)


def _minor_indices(n: int) -> np.ndarray:
    """For each (i, j), the flat positions of the (n-1) x (n-1) minor without row i and column j."""
    indices = np.empty((n, n, (n - 1) * (n - 1)), dtype=np.int64)
    for i in range(n):
        for j in range(n):
            indices[i, j] = [r * n + c for r in range(n) if r != i for c in range(n) if c != j]
    return indices


@gradient_rules.register("Det")
def _det_grad(ctx, g):
    # d det(A) / dA = cof(A), the cofactor matrix: defined for singular A too, where the textbook
    # det(A) A^-T is not. Each cofactor is a signed determinant of a minor (n^2 of them, gathered).
    shape = ctx.input_shape(0)
    batch, n = tuple(shape[:-2]), shape[-1]
    x = ctx.input(0)
    if n == 1:
        return (g.reshape(batch + (1, 1)).expand(shape),)
    indices = constant(_minor_indices(n), dtypes.int64, x.device)
    minors = apply_op("Gather", (x.reshape(batch + (n * n,)), indices), {"axis": len(batch)})
    cofactors = apply_op("Det", (minors.reshape(batch + (n, n, n - 1, n - 1)),))
    signs = np.array([[(-1.0) ** (i + j) for j in range(n)] for i in range(n)], dtype=x.dtype.numpy_dtype)
    signs = Tensor._from_value(constant(signs, x.dtype, x.device))
    return (g.reshape(batch + (1, 1)) * signs * cofactors,)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with numpy's rules for 1-D operands and broadcast batch dims."""
    (input, other), _ = promote_operands([input, other])
    input_rank, other_rank = len(input._value.shape), len(other._value.shape)
    if input_rank <= 2 and other_rank <= 2:
        return apply_op("MatMul", (input, other), None, "MmBackward0")
    return apply_op(
        "MatMul", (input, other), None, "BmmBackward0" if input_rank == other_rank == 3 else "MatmulBackward0"
    )


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError("self must be a matrix")
    return matmul(input, mat2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    if input.dim() != 3 or mat2.dim() != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    return matmul(input, mat2)


@outside_autocast()
def dot(input: Tensor, other: Tensor) -> Tensor:
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    return matmul(input, other)


def _softmax_input(input: Tensor, dtype) -> Tensor:
    if dtype is not None:
        return input.to(dtype)
    if not input.dtype.is_floating_point:
        return input.to(dtypes.get_default_dtype())
    return input


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    input = _softmax_input(input, dtype)
    axis = normalize_axes([-1 if dim is None else dim], input.dim())[0]  # a 0-d input's dim is 0 or -1
    if input.dim() == 0:
        return apply_op("Softmax", (input.reshape(1),), {"axis": 0}, "SoftmaxBackward0").reshape(())
    return apply_op("Softmax", (input,), shared_attributes((("axis", axis),)), "SoftmaxBackward0")


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    input = _softmax_input(input, dtype)
    axis = normalize_axes([-1 if dim is None else dim], input.dim())[0]  # a 0-d input's dim is 0 or -1
    if input.dim() == 0:
        return apply_op("LogSoftmax", (input.reshape(1),), {"axis": 0}, "LogSoftmaxBackward0").reshape(())
    return apply_op("LogSoftmax", (input,), {"axis": axis}, "LogSoftmaxBackward0")


@session_lowerings.register("LogSoftmax")
def _float64_log_softmax(node, input_names: list, output_names: list, fresh_name, embedded=None):
    """A float64 LogSoftmax as ``x - max - log(sum(exp(x - max)))``, PyTorch's (and onnxnn's kernels') form.

    onnxruntime 1.31's float64 LogSoftmax mishandles an infinite input: beside a ``+inf`` the
    finite elements came out ``-inf`` (PyTorch: NaN, as ``inf - inf`` is), and with a NaN in the row
    too, 46.05. Its float32 kernel is right and keeps the node. Exports keep the node as well.
    """
    if node.inputs[0].dtype is not dtypes.float64:
        return None
    axis = node.attrs.get("axis", -1) if node.attrs else -1
    axes = fresh_name("axes")
    names = {part: fresh_name(part) for part in ("largest", "shifted", "exponentials", "total", "logarithm")}
    nodes = [
        helper.make_node(
            "ReduceMax", [input_names[0], axes], [names["largest"]], keepdims=1, name=fresh_name("ReduceMax")
        ),
        helper.make_node("Sub", [input_names[0], names["largest"]], [names["shifted"]], name=fresh_name("Sub")),
        helper.make_node("Exp", [names["shifted"]], [names["exponentials"]], name=fresh_name("Exp")),
        helper.make_node(
            "ReduceSum", [names["exponentials"], axes], [names["total"]], keepdims=1, name=fresh_name("ReduceSum")
        ),
        helper.make_node("Log", [names["total"]], [names["logarithm"]], name=fresh_name("Log")),
        helper.make_node("Sub", [names["shifted"], names["logarithm"]], output_names, name=fresh_name("Sub")),
    ]
    return nodes, [numpy_helper.from_array(np.array([axis], np.int64), axes)]


size_blind_session_lowerings.mark("LogSoftmax")


@decompositions.register("MatMul")
def _matrix_times_vector(node, input_names: list, output_names: list, fresh_name):
    """``A @ v`` for a 1-D ``v`` and a matrix (or batch of them) ``A``, as ``Squeeze(A @ Unsqueeze(v))``.

    onnxruntime 1.31's MatmulTransposeFusion folds a Transpose of the last two axes into a MatMul's
    first input, and with a 1-D second input it drops the transpose: ``W.t() @ v`` gave ``W @ v``'s
    values (and a vector's gradient through ``v @ W.t()`` was wrong). Its other passes move
    Transposes next to a MatMul of their own accord (``W.t().clone() @ v``, ``(A.t() + B.t()) @ v``),
    so every such product, in sessions and exports alike, is written on a one-column matrix, which
    it computes right.
    """
    if len(node.inputs[1].shape) != 1 or len(node.inputs[0].shape) < 2:
        return None
    last_axis, column, product = fresh_name("last_axis"), fresh_name("column"), fresh_name("product")
    nodes = [
        helper.make_node("Unsqueeze", [input_names[1], last_axis], [column], name=fresh_name("Unsqueeze")),
        helper.make_node("MatMul", [input_names[0], column], [product], name=fresh_name("MatMul")),
        helper.make_node("Squeeze", [product, last_axis], output_names, name=fresh_name("Squeeze")),
    ]
    return nodes, [numpy_helper.from_array(np.array([-1], np.int64), last_axis)]


value_blind_decompositions.mark("MatMul")


# onnxruntime 1.31's CPU MatMul mishandles a contracted length of 0 (the result is then zeros) when
# the second operand has batch dims the first's do not cover (a lower rank, a 1-D first operand,
# or a batch dim of 1 against a larger one): it takes the first operand's batch for the result's
# (``ones(1, 3, 0) @ ones(2, 0, 5)`` came out of shape (1, 3, 5)) or zeroes only part of the result
# and leaves the rest as the buffer held it (``ones(0) @ ones(4, 0, 2)``, ``ones(3, 0) @ ones(2, 0,
# 5)``: the previous run's values). It computes the product right with the first operand expanded
# to the result's batch, which a lowering writes: ``Expand(a, Shape(b)[:-2] + [1, 1]) @ b`` (a 1-D
# ``a`` as a one-row matrix, its row squeezed after). Reproduced on a bare model of one MatMul with
# every graph optimization off (``b @ v`` for a 1-D ``v`` errs too: the decomposition above writes
# that as a product with one column, which it computes right).
def _batch_past_the_first(a_shape: tuple, b_shape: tuple) -> bool:
    """Whether ``b`` (rank 3 or more) has batch dims that ``a``'s do not cover."""
    if len(b_shape) < 3:
        return False
    if len(a_shape) < len(b_shape):
        return True
    return tuple(a_shape[:-2]) != broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))


def _first_operand_expanded(node, input_names: list, output_names: list, fresh_name):
    names = {part: fresh_name(part) for part in ("batch", "target", "expanded", "row_axis", "ones", "row")}
    nodes = []
    first = input_names[0]
    vector = len(node.inputs[0].shape) == 1
    if vector:
        nodes.append(
            helper.make_node("Unsqueeze", [first, names["row_axis"]], [names["row"]], name=fresh_name("Unsqueeze"))
        )
        first = names["row"]
    product = fresh_name("product") if vector else output_names[0]
    nodes += [
        helper.make_node("Shape", [input_names[1]], [names["batch"]], end=-2, name=fresh_name("Shape")),
        helper.make_node(
            "Concat", [names["batch"], names["ones"]], [names["target"]], axis=0, name=fresh_name("Concat")
        ),
        helper.make_node("Expand", [first, names["target"]], [names["expanded"]], name=fresh_name("Expand")),
        helper.make_node("MatMul", [names["expanded"], input_names[1]], [product], name=fresh_name("MatMul")),
    ]
    if vector:
        nodes.append(
            helper.make_node("Squeeze", [product, names["row_axis"]], output_names, name=fresh_name("Squeeze"))
        )
    initializers = [
        numpy_helper.from_array(np.array([1, 1], np.int64), names["ones"]),
        numpy_helper.from_array(np.array([-2], np.int64), names["row_axis"]),
    ]
    return nodes, initializers


@session_lowerings.register("MatMul")
def _matmul_over_an_empty_length(node, input_names: list, output_names: list, fresh_name, embedded=None):
    """A MatMul whose contracted length is 0, with ``_batch_past_the_first``: the note above."""
    a_shape, b_shape = node.inputs[0].shape, node.inputs[1].shape
    if a_shape[-1] != 0 or not _batch_past_the_first(a_shape, b_shape):
        return None
    return _first_operand_expanded(node, input_names, output_names, fresh_name)


@size_blind_session_lowerings.register("MatMul")
def _matmul_at_any_length(node, input_names: list, output_names: list, fresh_name, embedded=None):
    """``_matmul_over_an_empty_length`` in a graph shared across sizes, where the length may be 0 at
    any run: every product with ``_batch_past_the_first`` (a copy of the first operand's elements
    per batch, against a product's ``n`` multiply-adds per element of it)."""
    if not _batch_past_the_first(node.inputs[0].shape, node.inputs[1].shape):
        return None
    return _first_operand_expanded(node, input_names, output_names, fresh_name)


# onnxruntime 1.31's CPU Gemm with a contracted length of 0 returns C, not ``beta * C``
# (``Gemm(ones(3, 0), ones(0, 2), C, beta=0.5)`` gave C; reproduced on a bare model of one Gemm with
# every graph optimization off). onnxnn records Gemm with beta 1 only, but an imported model's may
# have another: its sessions add ``beta * C`` with beta 1, the same arithmetic onnxruntime does with
# a nonzero length (C scaled once, the product accumulated onto it).
def _gemm_with_c_scaled(node, input_names: list, output_names: list, fresh_name, any_length: bool):
    attributes = dict(node.attrs.items()) if node.attrs else {}
    beta = attributes.get("beta", 1.0)
    if len(input_names) < 3 or not input_names[2] or beta == 1.0:
        return None
    a_shape = node.inputs[0].shape
    if not any_length and a_shape[0 if attributes.get("transA", 0) else 1] != 0:
        return None
    scale, scaled = fresh_name("beta"), fresh_name("scaled")
    attributes["beta"] = 1.0
    nodes = [
        helper.make_node("Mul", [input_names[2], scale], [scaled], name=fresh_name("Mul")),
        helper.make_node(
            "Gemm", [input_names[0], input_names[1], scaled], output_names, name=fresh_name("Gemm"), **attributes
        ),
    ]
    return nodes, [numpy_helper.from_array(np.array(beta, node.inputs[2].dtype.numpy_dtype), scale)]


@session_lowerings.register("Gemm")
def _gemm_over_an_empty_length(node, input_names: list, output_names: list, fresh_name, embedded=None):
    return _gemm_with_c_scaled(node, input_names, output_names, fresh_name, any_length=False)


@size_blind_session_lowerings.register("Gemm")
def _gemm_at_any_length(node, input_names: list, output_names: list, fresh_name, embedded=None):
    return _gemm_with_c_scaled(node, input_names, output_names, fresh_name, any_length=True)
