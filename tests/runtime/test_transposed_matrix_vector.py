"""A transposed matrix times a vector: onnxruntime 1.31's MatmulTransposeFusion dropped the
transpose (``W.t() @ v`` gave ``W @ v``), in onnxnn's sessions, in gradients that take that form and
in exported models, also where its other passes bring a Transpose next to the MatMul; onnxnn writes
every matrix-vector product on a one-column matrix (``linalg.py``)."""

from __future__ import annotations

import io

import numpy as np
import onnxruntime
import pytest

import onnxnn

RNG = np.random.default_rng(0)
MATRIX = RNG.standard_normal((3, 4))
BATCH = RNG.standard_normal((2, 3, 4))
VECTOR_3, VECTOR_4 = RNG.standard_normal(3), RNG.standard_normal(4)

# (id, onnxnn function of the operands as tensors, numpy's, operands)
FORWARDS = [
    ("t-matmul", lambda m, v: m.t() @ v, lambda m, v: m.T @ v, (MATRIX, VECTOR_3)),
    ("mv-of-t", lambda m, v: m.t().mv(v), lambda m, v: m.T @ v, (MATRIX, VECTOR_3)),
    ("batched-transpose", lambda m, v: m.transpose(1, 2) @ v, lambda m, v: m.transpose(0, 2, 1) @ v, (BATCH, VECTOR_3)),
    ("addmv-of-mT", lambda m, v: onnxnn.addmv(v[:1], m.mT, v), lambda m, v: v[:1] + m.T @ v, (MATRIX, VECTOR_3)),
    ("untransposed", lambda m, v: m @ v, lambda m, v: m @ v, (MATRIX, VECTOR_4)),
    # onnxruntime's other passes bring the Transpose next to the MatMul.
    ("cloned", lambda m, v: m.t().clone() @ v, lambda m, v: m.T @ v, (MATRIX, VECTOR_3)),
    ("sliced", lambda m, v: m.t()[:, :3] @ v, lambda m, v: m.T[:, :3] @ v, (MATRIX, VECTOR_3)),
    ("sum-of-transposes", lambda m, v: (m.t() + m.t() * 2) @ v, lambda m, v: (3 * m.T) @ v, (MATRIX, VECTOR_3)),
    (
        "linear-of-clone",
        lambda m, v: onnxnn.nn.functional.linear(v, m.t().clone()),
        lambda m, v: m.T @ v,
        (MATRIX, VECTOR_3),
    ),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("name, function, expected, operands", FORWARDS, ids=[f[0] for f in FORWARDS])
def test_the_product_is_the_transposed_matrixs(executor, name, function, expected, operands):
    with onnxnn.set_executor(executor):
        result = function(*[onnxnn.tensor(operand, dtype=onnxnn.float32) for operand in operands]).numpy()
    want = expected(*[operand.astype(np.float32) for operand in operands])
    # A sum of 3 float32 products.
    np.testing.assert_allclose(result, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_vectors_gradient_through_a_transposed_matrix(executor):
    # d(v @ W.t())/dv is W.t()'s product with the output's gradient: the form the fusion broke.
    weights = RNG.standard_normal(3)
    with onnxnn.set_executor(executor):
        v = onnxnn.tensor(VECTOR_4, dtype=onnxnn.float64, requires_grad=True)
        w = onnxnn.tensor(MATRIX, dtype=onnxnn.float64, requires_grad=True)
        ((v @ w.t()) * onnxnn.tensor(weights)).sum().backward()
        v_grad, w_grad = v.grad.numpy(), w.grad.numpy()
    np.testing.assert_allclose(v_grad, MATRIX.T @ weights, rtol=1e-12)
    np.testing.assert_allclose(w_grad, np.outer(weights, VECTOR_4), rtol=1e-12)


def test_an_exported_model_serves_the_right_product():
    # The matrix is an input: a Transpose of a constant onnxruntime folds before any fusion.
    buffer = io.BytesIO()
    matrix, vector = onnxnn.tensor(MATRIX, dtype=onnxnn.float32), onnxnn.tensor(VECTOR_3, dtype=onnxnn.float32)
    onnxnn.export.to_onnx(lambda m, v: m.t() @ v, (matrix, vector), buffer, input_names=["m", "v"])
    session = onnxruntime.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {"m": matrix.numpy(), "v": vector.numpy()})
    want = MATRIX.astype(np.float32).T @ VECTOR_3.astype(np.float32)
    np.testing.assert_allclose(result, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
