"""Linear algebra and normalized-exponential kernels: MatMul, Gemm, Einsum, Det, Softmax,
LogSoftmax, Hardmax, and onnxnn's Solve (domain ``ai.onnxnn``).

Matrix products go to BLAS through ``xp.matmul`` (float16 and bfloat16 arrive widened to float32,
numpy has no fast half-precision GEMM). Softmax subtracts the row maximum before exponentiating.
"""

from __future__ import annotations

import numpy as np

from ..ir.domains import ONNXNN_DOMAIN
from ..ir.kernel_registry import FLOATING, NUMERIC, kernels
from ._common import normalize_axis, reduce_max, reduce_sum

__all__: list[str] = []

# numpy multiplies integers in their own dtype, wrapping as PyTorch's integer products do (int16 too).
_MATMUL_TYPES = FLOATING | {"int32", "int64", "uint8", "int8", "int16"}


@kernels.register("MatMul", types=_MATMUL_TYPES, direct=np.matmul)
def matmul(xp, inputs, attrs):
    return [xp.matmul(inputs[0], inputs[1])]


# OpenBLAS (numpy's wheels) multiplies a few rows by a transposed matrix, nn.Linear's x @ W.T on a
# small batch, up to 2x slower than it computes the transposed product W @ x.T: one thread, float32,
# 16x784 @ (512x784).T 0.31 -> 0.17 ms, 64 rows 0.68 -> 0.54 ms, equal from ~256 rows.
FEW_ROWS = 128


def _product(xp, a, b, transpose_a, transpose_b):
    """Gemm's ``op(a) @ op(b)``; a few rows times a transposed ``b`` as the transposed product, C-ordered."""
    if transpose_b and not transpose_a and xp is np and a.shape[0] < min(FEW_ROWS, b.shape[0]):
        return np.asarray(np.matmul(b, a.T).T, order="C")
    return xp.matmul(a.T if transpose_a else a, b.T if transpose_b else b)


@kernels.register("Gemm", types=_MATMUL_TYPES)
def gemm(xp, inputs, attrs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    result = _product(xp, a, b, attrs.get("transA", 0), attrs.get("transB", 0))
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    floating = result.dtype.kind == "f"
    if alpha != 1.0:
        result = result * (result.dtype.type(alpha) if floating else alpha)
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = c * (c.dtype.type(beta) if floating else beta)
        result = result + c
    return [result]


def _plain_gemm(transpose_a: int, transpose_b: int):
    """Gemm with alpha = beta = 1 (what autograd and nn.Linear record) as a function of (a, b, c)."""

    def gemm(a, b, c=None):
        result = _product(np, a, b, transpose_a, transpose_b)
        return result if c is None else result + c

    gemm.__name__ = "gemm" + "_transposed_a" * transpose_a + "_transposed_b" * transpose_b
    return gemm


_GEMM_DEFAULTS = {"transA": 0, "transB": 0, "alpha": 1.0, "beta": 1.0}
for _transpose_a in (0, 1):
    for _transpose_b in (0, 1):
        kernels.register_direct(
            "Gemm",
            _plain_gemm(_transpose_a, _transpose_b),
            defaults=_GEMM_DEFAULTS,
            when={"transA": _transpose_a, "transB": _transpose_b},
        )


@kernels.register("Einsum", types=NUMERIC)
def einsum(xp, inputs, attrs):
    equation = attrs["equation"]
    if isinstance(equation, bytes):
        equation = equation.decode()
    return [xp.einsum(equation.replace(" ", ""), *inputs, optimize=len(inputs) > 1)]


@kernels.register("Det", types=FLOATING)
def det(xp, inputs, attrs):
    return [xp.linalg.det(inputs[0])]


def _shifted(xp, x, axis):
    """x minus its maximum along ``axis``: exponentials of it never overflow."""
    return x - reduce_max(xp, x, axis, True)


@kernels.register("Softmax", types=FLOATING)
def softmax(xp, inputs, attrs):
    x = inputs[0]
    if x.size == 0:
        return [x]
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    exponentials = _shifted(xp, x, axis)
    xp.exp(exponentials, out=exponentials)
    exponentials /= reduce_sum(xp, exponentials, axis, True)
    return [exponentials]


@kernels.register("LogSoftmax", types=FLOATING)
def log_softmax(xp, inputs, attrs):
    x = inputs[0]
    if x.size == 0:
        return [x]
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    shifted = _shifted(xp, x, axis)
    shifted -= xp.log(reduce_sum(xp, xp.exp(shifted), axis, True))
    return [shifted]


@kernels.register("Hardmax", types=FLOATING)
def hardmax(xp, inputs, attrs):
    x = inputs[0]
    axis = normalize_axis(attrs.get("axis", -1), x.ndim)
    winner = xp.expand_dims(xp.argmax(x, axis=axis), axis)
    positions = xp.arange(x.shape[axis]).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    return [(positions == winner).astype(x.dtype)]


@kernels.register("Solve", domain=ONNXNN_DOMAIN, types=FLOATING)
def solve(xp, inputs, attrs):
    """onnxnn's Solve (``runtime/ops/linalg_solve.py``): LAPACK's gesv; a singular matrix gives NaN
    (the decomposition onnxruntime runs gives inf/NaN there too, and PyTorch would raise)."""
    a, b = inputs[0], inputs[1]
    try:
        return [xp.linalg.solve(a, b)]
    except np.linalg.LinAlgError:
        result = xp.empty(b.shape, dtype=b.dtype)
        for index in np.ndindex(a.shape[:-2]):
            try:
                result[index] = xp.linalg.solve(a[index], b[index])
            except np.linalg.LinAlgError:
                result[index] = np.nan
        return [result]
