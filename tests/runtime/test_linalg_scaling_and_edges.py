"""Linear algebra at extreme magnitudes and on edge shapes (runtime/ops/linalg_jacobi.py, linalg_qr.py,
linalg_lu.py, onnxnn.linalg), against numpy.linalg.

Specifies that the SVD, eigh and QR families give the values of ordinary matrices for matrices whose
entries are very large or very small (float32 from 1e-30 to 1e20, float64 from 1e-150 to 1e150): the
factorizations run on the matrix scaled by a power of two, which adds only a few recorded nodes; and the
edge cases: batch dims of LU's permutation for empty matrices, 0x0 inputs of matrix_exp and cond,
per-batch tensor tolerances, zero gradients through empty solves, and result dtypes.

Tolerances: the factorizations are backward stable, so each result is off by about eps times the
number of operations on each entry, relative to the matrix's norm: ``64 * n * eps`` leaves a margin
over the ``n`` sweeps or steps of ``n`` operations each at these sizes (n <= 4).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.ops import linalg_qr

BASE = np.array(
    [[0.3456, 0.8216, 0.3304], [-1.3032, 0.9054, 0.4464], [-0.5370, 0.5811, 0.3646], [0.2718, -0.4142, 1.1180]]
)  # tall, full column rank, singular values spread over a factor 4
RIGHT = np.array([[1.0, -2.0], [0.5, 0.25], [-1.5, 3.0], [2.0, 1.0]])  # a right-hand side of lstsq
SCALES = [("float32", s) for s in (1e-30, 1e-12, 1.0, 1e10, 1e20)] + [
    ("float64", s) for s in (1e-150, 1.0, 1e100, 1e150)
]


def _matrix(array: np.ndarray, dtype: str, scale: float) -> np.ndarray:
    """``array * scale`` rounded to dtype, the exact input of both onnxnn and the float64 reference."""
    return (array * scale).astype(dtype)


def _tolerance(dtype: str) -> float:
    return 64 * 4 * float(np.finfo(dtype).eps)


def _close(actual, expected, dtype: str, reference_size: float) -> None:
    """``actual`` matches ``expected`` to the tolerance, relative to ``reference_size`` (a norm)."""
    actual = np.asarray(actual, np.float64)
    assert np.all(np.isfinite(actual)), actual
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_tolerance(dtype) * reference_size)


def _square(dtype: str, scale: float) -> np.ndarray:
    return _matrix(BASE[:3], dtype, scale)


def _symmetric(dtype: str, scale: float) -> np.ndarray:
    square = BASE[:3]
    return _matrix(square + square.T, dtype, scale)


# Each case: (name, onnxnn computation on the input, numpy reference on the float64 input, which input).
# Results are divided by the scale where they scale with the input, so that every comparison is of
# order 1 and the tolerance is relative.
SINGULAR_VALUE_CASES = [
    ("svdvals", lambda a, s: onnxnn.linalg.svdvals(a).numpy() / s, lambda m, s: np.linalg.svd(m)[1] / s),
    (
        "svd U S Vh",
        lambda a, s: (lambda U, S, Vh: (U * S.unsqueeze(-2)) @ Vh)(*onnxnn.linalg.svd(a, False)).numpy() / s,
        lambda m, s: m / s,
    ),
    (
        "torch.svd U S V^T",
        lambda a, s: (lambda U, S, V: (U * S.unsqueeze(-2)) @ V.mT)(*onnxnn.svd(a)).numpy() / s,
        lambda m, s: m / s,
    ),
    ("pinv", lambda a, s: onnxnn.linalg.pinv(a).numpy() * s, lambda m, s: np.linalg.pinv(m) * s),
    ("pinverse", lambda a, s: onnxnn.pinverse(a).numpy() * s, lambda m, s: np.linalg.pinv(m) * s),
    ("matrix_rank", lambda a, s: onnxnn.linalg.matrix_rank(a).numpy(), lambda m, s: 3),
    ("cond", lambda a, s: onnxnn.linalg.cond(a).numpy(), lambda m, s: np.linalg.cond(m)),
    ("cond -2", lambda a, s: onnxnn.linalg.cond(a, -2).numpy(), lambda m, s: np.linalg.cond(m, -2)),
    ("norm 2", lambda a, s: onnxnn.linalg.matrix_norm(a, 2).numpy() / s, lambda m, s: np.linalg.norm(m, 2) / s),
    ("norm -2", lambda a, s: onnxnn.linalg.matrix_norm(a, -2).numpy() / s, lambda m, s: np.linalg.norm(m, -2) / s),
    (
        "norm nuc",
        lambda a, s: onnxnn.linalg.matrix_norm(a, "nuc").numpy() / s,
        lambda m, s: np.linalg.norm(m, "nuc") / s,
    ),
    ("nuclear_norm", lambda a, s: onnxnn.nuclear_norm(a).numpy() / s, lambda m, s: np.linalg.norm(m, "nuc") / s),
]


def _r(m: np.ndarray) -> np.ndarray:
    """geqrf's R, (m, n) upper trapezoidal: numpy's complete-mode R."""
    return np.linalg.qr(m, mode="complete")[1]


QR_CASES = [
    ("qr R", lambda a, s: onnxnn.linalg.qr(a).R.numpy() / s, lambda m, s: np.linalg.qr(m)[1] / s),
    ("qr Q", lambda a, s: onnxnn.linalg.qr(a).Q.numpy(), lambda m, s: np.linalg.qr(m)[0]),
    ("geqrf R", lambda a, s: onnxnn.geqrf(a).a.triu().numpy() / s, lambda m, s: _r(m) / s),
    (
        "householder_product",
        lambda a, s: onnxnn.linalg.householder_product(*onnxnn.geqrf(a)).numpy(),
        lambda m, s: np.linalg.qr(m)[0],
    ),
]


@pytest.mark.parametrize("dtype, scale", SCALES)
@pytest.mark.parametrize("name, compute, reference", SINGULAR_VALUE_CASES + QR_CASES, ids=lambda v: v)
def test_singular_value_and_qr_functions_at_every_magnitude(name, compute, reference, dtype, scale):
    M = _matrix(BASE, dtype, scale)
    expected = reference(M.astype(np.float64), scale)
    size = max(1.0, float(np.abs(expected).max()))
    _close(compute(onnxnn.tensor(M), scale), expected, dtype, size)


@pytest.mark.parametrize("dtype, scale", SCALES)
@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
def test_lstsq_at_every_magnitude(driver, dtype, scale):
    # A X = B with A and B scaled alike: X is of order 1 at every scale
    M, B = _matrix(BASE, dtype, scale), _matrix(RIGHT, dtype, scale)
    expected = np.linalg.lstsq(M.astype(np.float64), B.astype(np.float64), rcond=None)[0]
    solution = onnxnn.linalg.lstsq(onnxnn.tensor(M), onnxnn.tensor(B), driver=driver).solution
    _close(solution.numpy(), expected, dtype, float(np.abs(expected).max()))


def _hermitian_rank(a, s):
    return onnxnn.linalg.matrix_rank(a, hermitian=True).numpy()


EIGEN_CASES = [
    ("eigvalsh", lambda a, s: onnxnn.linalg.eigvalsh(a).numpy() / s, lambda h, s: np.linalg.eigvalsh(h) / s),
    (
        "eigh V diag(w) V^T",
        lambda a, s: (lambda w, V: (V * w.unsqueeze(-2)) @ V.mT)(*onnxnn.linalg.eigh(a)).numpy() / s,
        lambda h, s: h / s,
    ),
    (
        "pinv hermitian",
        lambda a, s: onnxnn.linalg.pinv(a, hermitian=True).numpy() * s,
        lambda h, s: np.linalg.pinv(h) * s,
    ),
    ("matrix_rank hermitian", _hermitian_rank, lambda h, s: 3),
]


@pytest.mark.parametrize("dtype, scale", SCALES)
@pytest.mark.parametrize("name, compute, reference", EIGEN_CASES, ids=lambda v: v)
def test_symmetric_eigen_functions_at_every_magnitude(name, compute, reference, dtype, scale):
    H = _symmetric(dtype, scale)
    expected = reference(H.astype(np.float64), scale)
    size = max(1.0, float(np.abs(expected).max()))
    _close(compute(onnxnn.tensor(H), scale), expected, dtype, size)


@pytest.mark.parametrize("dtype, scale", [("float32", 1e20), ("float32", 1e-30), ("float64", 1e150)])
def test_a_batch_of_matrices_of_different_magnitudes_each_gets_its_own_scale(dtype, scale):
    stacked = np.stack([_square(dtype, scale), _square(dtype, 1.0), np.zeros((3, 3), dtype)])
    values = onnxnn.linalg.svdvals(onnxnn.tensor(stacked)).numpy()
    expected = np.linalg.svd(stacked.astype(np.float64), compute_uv=False)
    for row, size in zip(range(3), (scale, 1.0, 1.0)):
        _close(values[row] / size, expected[row] / size, dtype, float(expected[0].max() / scale))


@pytest.mark.parametrize("scale", [1e-150, 1.0, 1e150])
def test_gradients_through_the_scaling_are_those_of_the_unscaled_matrix(scale):
    # d(sum S)/dA = U V^T and d(sum w_i lambda_i)/dH = V diag(w) V^T: neither depends on the scale
    M = _square("float64", scale)
    A = onnxnn.tensor(M, requires_grad=True)
    onnxnn.linalg.svdvals(A).sum().backward()
    U, _, Vh = np.linalg.svd(M)
    _close(A.grad.numpy(), U @ Vh, "float64", 1.0)
    H = _symmetric("float64", scale)
    weights = np.array([1.0, 2.0, 3.0])
    X = onnxnn.tensor(H, requires_grad=True)
    (onnxnn.linalg.eigvalsh(X) * onnxnn.tensor(weights)).sum().backward()
    _, V = np.linalg.eigh(H)
    _close(X.grad.numpy(), (V * weights) @ V.T, "float64", 3.0)


@pytest.mark.parametrize(
    "values, exponent",
    [
        ([[3.0, -0.75], [0.5, 1.0]], -1),  # largest 3: 2^1 <= 3 < 2^2
        ([[0.0, np.inf], [np.nan, -1e-3]], 10),  # only finite magnitudes count: 2^-10 <= 1e-3 < 2^-9
        ([[0.0, 0.0], [0.0, 0.0]], 0),  # nothing to scale
        ([[np.nan, np.inf], [-np.inf, 0.0]], 0),
    ],
)
@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_the_scale_is_the_power_of_two_of_the_largest_finite_magnitude(values, exponent, executor):
    with onnxnn.set_executor(executor):
        scale = linalg_qr.power_of_two_scale(onnxnn.tensor(np.array(values, np.float64))).numpy()
    np.testing.assert_array_equal(scale, np.full((1, 1), 2.0**exponent))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_scale_stays_a_normal_number(dtype):
    info = np.finfo(dtype)
    extremes = np.array([[[info.max]], [[info.smallest_subnormal]]], dtype)
    scale = linalg_qr.power_of_two_scale(onnxnn.tensor(extremes)).numpy()
    assert np.all(np.isfinite(scale)) and np.all(scale >= info.smallest_normal)
    np.testing.assert_array_equal(np.frexp(scale)[0], 0.5)  # exact powers of two
    assert np.all(np.isfinite(extremes * scale))


def _recorded_nodes(tensor) -> int:
    """The number of nodes recorded for ``tensor``: every node it depends on, not yet computed."""
    seen, pending = set(), [tensor._value.node]
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        pending.extend(value.node for value in node.inputs if value is not None)
    return len(seen)


def test_the_scale_records_only_a_few_nodes():
    A = onnxnn.tensor(_square("float32", 1.0))
    assert _recorded_nodes(linalg_qr.power_of_two_scale(A)) <= 16


# ---------------------------------------------------------------- edge shapes, tolerances, dtypes, errors


@pytest.mark.parametrize("shape", [(4, 2, 0), (4, 0, 0), (2, 3, 0, 2), (0, 3)])
def test_lu_permutation_has_the_batch_dims_of_an_empty_matrix(shape):
    # min(m, n) == 0: no row swaps, P is an identity (m, m) per matrix
    batch, m = shape[:-2], shape[-2]
    A = onnxnn.ones(*shape)
    P, L, U = onnxnn.linalg.lu(A)
    unpacked = onnxnn.lu_unpack(*onnxnn.linalg.lu_factor(A)).P
    for permutation in (P, unpacked):
        np.testing.assert_array_equal(permutation.numpy(), np.broadcast_to(np.eye(m), batch + (m, m)))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_matrix_exp_of_empty_matrices_is_empty(shape):
    for result in (onnxnn.linalg.matrix_exp(onnxnn.ones(*shape)), onnxnn.matrix_exp(onnxnn.ones(*shape))):
        assert tuple(result.shape) == shape


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, float("inf"), -float("inf"), "fro", "nuc"])
@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0)])
def test_the_condition_number_of_an_empty_matrix_is_zero(p, shape):
    result = onnxnn.linalg.cond(onnxnn.ones(*shape), p)
    np.testing.assert_array_equal(result.numpy(), np.zeros(shape[:-2]))


@pytest.mark.parametrize("p", [3, "abc"])
def test_cond_refuses_an_unknown_order(p):
    with pytest.raises(RuntimeError, match="invalid norm type"):
        onnxnn.linalg.cond(onnxnn.ones(0, 0), p)


# Two matrices 1 * I and 0.01 * I: per-matrix tolerances count (rank) or invert (pinv) different parts.
PER_MATRIX = np.stack([np.eye(3), 0.01 * np.eye(3)])


@pytest.mark.parametrize(
    "tolerances, ranks",
    [
        ({"atol": [0.1, 0.001]}, [3, 3]),
        ({"atol": [2.0, 0.1]}, [0, 0]),
        ({"atol": [0.5, 0.001], "rtol": [0.0, 2.0]}, [3, 0]),
        ({"rtol": [0.5, 2.0]}, [3, 0]),
    ],
)
def test_matrix_rank_and_pinv_take_a_tolerance_per_matrix(tolerances, ranks):
    tensors = {name: onnxnn.tensor(np.array(value)) for name, value in tolerances.items()}
    A = onnxnn.tensor(PER_MATRIX)
    np.testing.assert_array_equal(onnxnn.linalg.matrix_rank(A, **tensors).numpy(), ranks)
    np.testing.assert_array_equal(onnxnn.linalg.matrix_rank(A, hermitian=True, **tensors).numpy(), ranks)
    # pinv: 1/s where kept, 0 elsewhere
    expected = np.stack([np.eye(3) / PER_MATRIX[i, 0, 0] * (ranks[i] == 3) for i in range(2)])
    np.testing.assert_allclose(onnxnn.linalg.pinv(A, **tensors).numpy(), expected, rtol=1e-12)


def _solve_triangular(A, B):
    return onnxnn.linalg.solve_triangular(A, B, upper=True)


def _lu_solve(A, B):
    return onnxnn.linalg.lu_solve(*onnxnn.linalg.lu_factor(A), B, adjoint=True)


def _torch_lu_solve(A, B):
    return onnxnn.lu_solve(B, *onnxnn.lu(A))


@pytest.mark.parametrize("solve", [_solve_triangular, _lu_solve, _torch_lu_solve])
def test_backward_through_an_empty_solve_gives_empty_gradients(solve):
    A = onnxnn.zeros(2, 0, 0, dtype=onnxnn.float64, requires_grad=True)
    solve(A, onnxnn.zeros(2, 0, 3, dtype=onnxnn.float64)).sum().backward()
    assert tuple(A.grad.shape) == (2, 0, 0)


@pytest.mark.parametrize("product", [onnxnn.linalg.householder_product, onnxnn.orgqr])
def test_backward_through_no_reflectors_gives_zero_gradients(product):
    A = onnxnn.ones(3, 2, dtype=onnxnn.float64, requires_grad=True)
    tau = onnxnn.zeros(0, dtype=onnxnn.float64, requires_grad=True)
    product(A, tau).sum().backward()
    np.testing.assert_array_equal(A.grad.numpy(), np.zeros((3, 2)))
    assert tuple(tau.grad.shape) == (0,)


@pytest.mark.parametrize("dtype", ["int32", "int16", "uint8", "int64"])
def test_vander_of_integers_is_int64(dtype):
    # 250^3 = 1.6e7 fits int32, 250^4 = 3.9e9 does not: the powers are int64, as PyTorch's
    x = np.array([1, 2, 3, 250])
    result = onnxnn.linalg.vander(onnxnn.tensor(x.astype(dtype)), N=5)
    assert result.dtype is onnxnn.int64
    np.testing.assert_array_equal(result.numpy(), np.vander(x, 5, increasing=True).astype(np.int64))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: onnxnn.linalg.vander(onnxnn.ones(3, dtype=onnxnn.bool)), RuntimeError, "but got Bool"),
        (lambda: onnxnn.linalg.vander(onnxnn.ones(3, dtype=onnxnn.float16)), RuntimeError, "but got Half"),
        (lambda: onnxnn.linalg.norm(onnxnn.ones(3, 4), 2, dim=()), RuntimeError, "length 1 or 2"),
        (lambda: onnxnn.linalg.matrix_norm(onnxnn.ones(2, 3), dim=(0, -2)), RuntimeError, "dims must be different"),
        (
            lambda: onnxnn.linalg.vector_norm(onnxnn.ones(3, dtype=onnxnn.float64), dtype=onnxnn.float32),
            RuntimeError,
            "without narrowing",
        ),
        (
            lambda: onnxnn.linalg.matrix_norm(onnxnn.ones(2, 2, dtype=onnxnn.float64), dtype=onnxnn.float32),
            RuntimeError,
            "without narrowing",
        ),
        (
            lambda: onnxnn.linalg.vector_norm(onnxnn.ones(3, dtype=onnxnn.int64), dtype=onnxnn.float32),
            RuntimeError,
            "Expected a floating point",
        ),
        (
            lambda: onnxnn.linalg.vector_norm(onnxnn.ones(3), dtype=onnxnn.int64),
            RuntimeError,
            "dtype should be floating",
        ),
        (
            lambda: onnxnn.linalg.vecdot(onnxnn.ones(3, dtype=onnxnn.int64), onnxnn.ones(3, dtype=onnxnn.int64)),
            RuntimeError,
            "Expected a floating point",
        ),
        (
            lambda: onnxnn.linalg.vecdot(onnxnn.ones(3), onnxnn.ones(3, dtype=onnxnn.float64)),
            RuntimeError,
            "same dtype",
        ),
        (lambda: onnxnn.linalg.svdvals(onnxnn.eye(2), driver="gesvd"), RuntimeError, "only supported on CUDA"),
        (lambda: onnxnn.linalg.svd(onnxnn.eye(2), driver="gesvd"), RuntimeError, "only supported on CUDA"),
        (
            lambda: onnxnn.ormqr(onnxnn.ones(4, 3), onnxnn.ones(1), onnxnn.ones(4, 3)),
            RuntimeError,
            r"tau.shape\[-1\] must be equal to min\(other.shape\[-2\]",
        ),
        (
            lambda: onnxnn.ormqr(onnxnn.ones(4, 3), onnxnn.ones(2), onnxnn.ones(2, 4), left=False),
            RuntimeError,
            r"min\(other.shape\[-1\]",
        ),
        (
            lambda: _solve_triangular(onnxnn.ones(2, 2, dtype=onnxnn.int64), onnxnn.ones(2, 2, dtype=onnxnn.int64)),
            NotImplementedError,
            "'Long'",
        ),
        (
            lambda: onnxnn.triangular_solve(
                onnxnn.ones(2, 2, dtype=onnxnn.int64), onnxnn.ones(2, 2, dtype=onnxnn.int64)
            ),
            NotImplementedError,
            "'Long'",
        ),
        (
            lambda: onnxnn.cholesky_solve(onnxnn.ones(2, 2, dtype=onnxnn.int64), onnxnn.ones(2, 2, dtype=onnxnn.int64)),
            NotImplementedError,
            "'Long'",
        ),
        (
            lambda: onnxnn.cholesky_solve(
                onnxnn.ones(2, 2, dtype=onnxnn.float16), onnxnn.ones(2, 2, dtype=onnxnn.float16)
            ),
            NotImplementedError,
            "'Half'",
        ),
        (
            lambda: onnxnn.cholesky_solve(onnxnn.ones(2, 2, dtype=onnxnn.int64), onnxnn.ones(2, 2)),
            RuntimeError,
            "same dtype",
        ),
    ],
)
def test_refusals_are_pytorchs(call, error, message):
    with pytest.raises(error, match=message):
        call()
