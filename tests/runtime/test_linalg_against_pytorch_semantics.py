"""torch.linalg's definitions where they go beyond "the value of the function, and the derivative of the
function the algorithm computes" (onnxnn.linalg, runtime/ops/linalg_*.py):

- ``lstsq``'s drivers: the minimum-norm solution of a rank-deficient system (all but ``'gels'``), the
  effective rank by ``rcond``, and which auxiliary outputs each driver fills;
- gradients PyTorch defines by closed forms: of singular values (``U diag(G) V^T``, finite where one
  is 0), of functions of a symmetric matrix (symmetric, though one triangle is read), of a Cholesky
  factor (``cholesky_solve``/``cholesky_inverse`` differentiate ``L L^T`` with all of L), of vector
  norms of order below 1 (0 at zero entries);
- ``hermitian=True`` (``pinv``, ``matrix_rank``) and ``cholesky(upper=True)`` reading one triangle;
- edge cases: ``matrix_power`` of exponent 0 (a zero gradient) or below 0 (through the inverse),
  ``slogdet``'s sign requiring grad, ``cond`` of a singular matrix, norms of empty matrices,
  ``matrix_rank``'s ``tol``.

Expected values come from numpy (its ``lstsq`` is LAPACK's gelsd; its ``pinv`` and ``matrix_rank`` define
the tolerance as PyTorch does), float64 central differences of numpy functions, and PyTorch's
derivative formulas (``tools/autograd/derivatives.yaml``) written in numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import central_differences, check_gradients
from tolerances import assert_within, gamma

import onnxnn

L = onnxnn.linalg
EXECUTORS = ("onnxruntime", "kernels")
DTYPES = (onnxnn.float32, onnxnn.float64)
rng = np.random.default_rng(31)
INF = float("inf")

# float64 central differences at eps = 1e-6: truncation ~ eps^2 |f'''| and rounding ~ u |f| / eps, both
# far inside these (tests/gradcheck.py derives them); a wrong gradient is off by O(1).
FD_RTOL, FD_ATOL = 1e-5, 1e-7


def _backward(function, *arrays, cotangent=None, wrt: int = 0):
    """``(output, gradient of input wrt)`` of ``function`` on float64 tensors, backward with ``cotangent``
    (ones when None)."""
    tensors = [onnxnn.tensor(a, dtype=onnxnn.float64, requires_grad=i == wrt) for i, a in enumerate(arrays)]
    output = function(*tensors)
    seed = np.ones(tuple(output.shape)) if cotangent is None else cotangent
    output.backward(onnxnn.tensor(seed, dtype=onnxnn.float64))
    return output, tensors[wrt].grad.numpy()


# ---------------------------------------------------------------- lstsq: minimum-norm solutions, rank


def _least_squares_bound(a: np.ndarray, b: np.ndarray, x: np.ndarray, rank: int, dtype) -> float:
    """How far a backward-stable least-squares solver's solution (Householder QR, with pivoting or not,
    or Jacobi's SVD) may be from the exact minimum-norm one of the rank-``rank`` problem.

    The solver solves a problem perturbed by ``gamma(3 m n) |A|`` and ``|B|`` (Higham, Theorem 19.4, and
    section 20.3 for the complete orthogonal factorization); a perturbation eps of relative size
    moves the solution by ``eps kappa (|x| + |b| / s_1) + eps kappa^2 |r| / s_1``, kappa = s_1 / s_rank
    (Wedin; Higham, Theorem 20.1). Twice that: numpy's reference errs as well.
    """
    m, n = a.shape
    singular = np.linalg.svd(a, compute_uv=False)
    kappa = singular[0] / singular[rank - 1]
    residual = np.linalg.norm(b - a @ x)
    eps = gamma(3 * m * n, dtype)
    scale = kappa * (np.linalg.norm(x) + np.linalg.norm(b) / singular[0]) + kappa**2 * residual / singular[0]
    return 2 * eps * scale


RANK_ONE = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
TALL_RANK_2 = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 3))
WIDE_RANK_2 = rng.standard_normal((3, 2)) @ rng.standard_normal((2, 5))
FULL_TALL = rng.standard_normal((5, 3))
# (id, A, B, rcond): rcond 1e-6 separates the rank of the products above in both dtypes (their s_3 is the
# rounding of their entries: ~1e-16 s_1 in float64, ~1e-7 s_1 in float32)
LSTSQ_CASES = [
    ("rank-1-default-rcond", RANK_ONE, np.array([[1.0], [2.0], [3.5]]), None),
    ("tall-rank-2", TALL_RANK_2, rng.standard_normal((5, 2)), 1e-6),
    ("wide-rank-2", WIDE_RANK_2, rng.standard_normal((3, 1)), 1e-6),
    ("rcond-drops-a-singular-value", np.array([[1.0, 0.0], [0.0, 1e-3], [0.0, 0.0]]), np.ones((3, 1)), 1e-2),
    ("zero-matrix", np.zeros((3, 2)), np.ones((3, 2)), None),
    ("full-rank-tall", FULL_TALL, rng.standard_normal((5, 2)), None),
    ("batch-of-ranks-1-and-2", np.stack([RANK_ONE, FULL_TALL[:3, :2]]), rng.standard_normal((2, 3, 1)), None),
]
MINIMUM_NORM_DRIVERS = (None, "gelsy", "gelsd", "gelss")


def _numpy_lstsq(a, b, rcond):
    """numpy's (LAPACK gelsd's) solution and rank, per matrix of a batch."""
    if a.ndim == 2:
        x, _, rank, _ = np.linalg.lstsq(a, b, rcond=rcond)
        return x, rank
    results = [_numpy_lstsq(a_i, b_i, rcond) for a_i, b_i in zip(a, b)]
    return np.stack([x for x, _ in results]), np.array([rank for _, rank in results])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("driver", MINIMUM_NORM_DRIVERS, ids=str)
@pytest.mark.parametrize("case_id,a,b,rcond", LSTSQ_CASES, ids=[c[0] for c in LSTSQ_CASES])
def test_lstsq_gives_the_minimum_norm_solution_of_the_effective_rank(case_id, a, b, rcond, driver, dtype, executor):
    np_dtype = dtype.numpy_dtype
    a, b = a.astype(np_dtype), b.astype(np_dtype)
    default = float(np.finfo(np_dtype).eps) * max(a.shape[-2:])
    expected, expected_rank = _numpy_lstsq(
        a.astype(np.float64), b.astype(np.float64), default if rcond is None else rcond
    )
    with onnxnn.set_executor(executor):
        result = L.lstsq(onnxnn.tensor(a), onnxnn.tensor(b), rcond, driver=driver)
        solution, rank = result.solution.numpy().astype(np.float64), result.rank.numpy()
    assert result.rank.dtype is onnxnn.int64
    np.testing.assert_array_equal(rank, expected_rank)
    n, k = a.shape[-1], b.shape[-1]
    matrices = zip(
        a.reshape(-1, *a.shape[-2:]).astype(np.float64),
        b.reshape(-1, *b.shape[-2:]).astype(np.float64),
        expected.reshape(-1, n, k),
        solution.reshape(-1, n, k),
        np.reshape(expected_rank, -1),
    )
    for a_i, b_i, expected_i, actual_i, rank_i in matrices:
        bound = _least_squares_bound(a_i, b_i, expected_i, int(rank_i), np_dtype) if rank_i else 0.0
        np.testing.assert_allclose(actual_i, expected_i, rtol=0, atol=bound)


# (driver, m, n, then the shapes PyTorch gives residuals, rank and singular_values): B of 2 columns, no batch
LSTSQ_OUTPUT_SHAPES = [
    (None, 5, 3, (0,), (), (0,)),
    ("gelsy", 5, 3, (0,), (), (0,)),
    ("gelsd", 5, 3, (2,), (), (3,)),
    ("gelss", 5, 3, (2,), (), (3,)),
    ("gels", 5, 3, (2,), (0,), (0,)),
    ("gelsd", 3, 5, (0,), (), (3,)),
    ("gels", 3, 5, (0,), (0,), (0,)),
    ("gelsd", 3, 3, (0,), (), (3,)),
]


@pytest.mark.parametrize("driver,m,n,residuals,rank,singular_values", LSTSQ_OUTPUT_SHAPES)
def test_lstsq_fills_the_auxiliary_outputs_of_each_driver(driver, m, n, residuals, rank, singular_values):
    a, b = rng.standard_normal((m, n)), rng.standard_normal((m, 2))
    result = L.lstsq(onnxnn.tensor(a), onnxnn.tensor(b), driver=driver)
    assert tuple(result.residuals.shape) == residuals
    assert tuple(result.rank.shape) == rank
    assert tuple(result.singular_values.shape) == singular_values
    x, numpy_residuals, numpy_rank, numpy_singular_values = np.linalg.lstsq(a, b, rcond=None)
    if residuals != (0,):
        # the residual r (Q^T b's rows n.., or b - U U^T b) is within gamma(3 m n) (|b| + |A| |x|) of the
        # exact one (Higham, Theorem 19.4), so |r|^2 within twice that times |r|; twice again for numpy's
        error = gamma(3 * m * n, np.float64) * (
            np.linalg.norm(b, axis=0) + np.linalg.norm(a, 2) * np.linalg.norm(x, axis=0)
        )
        bound = 4 * error * (np.sqrt(numpy_residuals) + error)
        assert_within(result.residuals.numpy(), numpy_residuals, bound)
    if rank == ():
        assert result.rank.item() == numpy_rank
    if singular_values != (0,):
        # Jacobi's singular values are as accurate as LAPACK's: within gamma(3 m n) s_1 of the exact ones
        bound = 2 * gamma(3 * m * n, np.float64) * numpy_singular_values[0]
        np.testing.assert_allclose(result.singular_values.numpy(), numpy_singular_values, rtol=0, atol=bound)


def test_lstsq_residuals_are_empty_for_a_rank_deficient_matrix_with_an_svd_driver():
    # PyTorch returns them only when every matrix has full rank (it reads the ranks); gels always
    a, b = onnxnn.tensor(RANK_ONE), onnxnn.tensor(np.ones((3, 1)))
    assert tuple(L.lstsq(a, b, driver="gelsd").residuals.shape) == (0,)
    assert tuple(L.lstsq(a, b, driver="gels").residuals.shape) == (1,)


# ---------------------------------------------------------------- singular values' gradients


def _usv_gradient(x: np.ndarray, cotangent_of_s) -> np.ndarray:
    """``U diag(G) V^T`` from onnxnn's own thin SVD: PyTorch's gradient of the singular values.

    For a zero singular value the pair (u, v) is any unit pair of the null spaces, the algorithm's
    choice (LAPACK's in PyTorch), so the algorithm's own U and V define the expected value.
    """
    U, S, Vh = L.svd(onnxnn.tensor(x), full_matrices=False)
    return (U.numpy() * cotangent_of_s(S.shape[-1])) @ Vh.numpy()


def _unit(index):
    return lambda k: np.eye(k)[index]


RANK_DEFICIENT = np.array([[1.0, 2.0], [2.0, 4.0], [0.0, 0.0]])  # singular values 5 and 0
# (id, function of the matrix that only reaches its singular values, the cotangent of S it sends)
SINGULAR_VALUE_FUNCTIONS = [
    ("svdvals-sum", lambda x: L.svdvals(x).sum(), lambda k: np.ones(k)),
    ("svd-S-first", lambda x: L.svd(x, full_matrices=False).S[0], _unit(0)),
    ("torch.svd-S-last", lambda x: onnxnn.svd(x)[1][-1], _unit(-1)),
    ("matrix_norm-2", lambda x: L.matrix_norm(x, 2), _unit(0)),
    ("matrix_norm--2", lambda x: L.matrix_norm(x, -2), _unit(-1)),
    ("matrix_norm-nuc", lambda x: L.matrix_norm(x, "nuc"), lambda k: np.ones(k)),
    ("norm-nuc", lambda x: L.norm(x, "nuc"), lambda k: np.ones(k)),
    ("nuclear_norm", onnxnn.nuclear_norm, lambda k: np.ones(k)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("matrix", [RANK_DEFICIENT, RANK_DEFICIENT.T.copy()], ids=["tall", "wide"])
@pytest.mark.parametrize(
    "case_id,function,cotangent", SINGULAR_VALUE_FUNCTIONS, ids=[c[0] for c in SINGULAR_VALUE_FUNCTIONS]
)
def test_singular_value_gradients_are_finite_where_one_is_zero(case_id, function, cotangent, matrix, executor):
    with onnxnn.set_executor(executor):
        _, gradient = _backward(function, matrix)
        expected = _usv_gradient(matrix, cotangent)
    assert np.isfinite(gradient).all()
    # U diag(G) V^T: products and sums of orthonormal columns, within a few gamma(n) of it
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=4 * gamma(8, np.float64))


def test_largest_singular_value_gradient_is_u1_v1t():
    # s_1 is simple here, so its gradient u_1 v_1^T is unique (sign-invariant): numpy's SVD gives it
    U, _, Vh = np.linalg.svd(RANK_DEFICIENT)
    _, gradient = _backward(lambda x: L.matrix_norm(x, 2), RANK_DEFICIENT)
    np.testing.assert_allclose(gradient, np.outer(U[:, 0], Vh[0]), rtol=0, atol=4 * gamma(8, np.float64))


def test_nuclear_norm_gradient_at_a_rank_deficient_matrix_is_a_subgradient():
    # G is in the subdifferential of the nuclear norm at A: <G, A> = |A|_* and |G|_2 <= 1
    _, gradient = _backward(lambda x: L.matrix_norm(x, "nuc"), RANK_DEFICIENT)
    tolerance = 4 * gamma(8, np.float64)
    assert abs(np.sum(gradient * RANK_DEFICIENT) - 5.0) <= tolerance * 5.0
    assert np.linalg.norm(gradient, 2) <= 1.0 + tolerance


# ---------------------------------------------------------------- functions of a symmetric matrix


def _symmetrized(reference):
    """The numpy reference as a function of X through (X + X^T) / 2: its gradient at a symmetric A is
    PyTorch's symmetric one."""
    return lambda x: reference((x + x.T) / 2)


def _first_eigenprojector(a):
    vector = np.linalg.eigh(a)[1][:, :1]
    return vector @ vector.T


S3 = (lambda a: a @ a.T + 3 * np.eye(3))(rng.standard_normal((3, 3)))
# (id, onnxnn function, numpy reference reading the symmetric matrix)
SYMMETRIC_INPUT_CASES = [
    ("eigvalsh", L.eigvalsh, np.linalg.eigvalsh),
    ("eigh-values-upper", lambda a: L.eigh(a, UPLO="U").eigenvalues, np.linalg.eigvalsh),
    ("eigh-vector-projector", lambda a: (lambda v: v @ v.mT)(L.eigh(a).eigenvectors[:, :1]), _first_eigenprojector),
    ("cholesky", L.cholesky, np.linalg.cholesky),
    ("cholesky-upper", lambda a: L.cholesky(a, upper=True), lambda a: np.linalg.cholesky(a).T),
    ("cholesky_ex", lambda a: L.cholesky_ex(a).L, np.linalg.cholesky),
    ("torch.cholesky-upper", lambda a: onnxnn.cholesky(a, True), lambda a: np.linalg.cholesky(a).T),
]


@pytest.mark.parametrize("case_id,function,reference", SYMMETRIC_INPUT_CASES, ids=[c[0] for c in SYMMETRIC_INPUT_CASES])
def test_functions_of_a_symmetric_matrix_have_the_symmetric_gradient(case_id, function, reference):
    cotangent = rng.standard_normal(np.shape(reference(S3)))
    _, gradient = _backward(function, S3, cotangent=cotangent)
    expected = central_differences(_symmetrized(reference), S3, cotangent)
    np.testing.assert_allclose(gradient, expected, rtol=FD_RTOL, atol=FD_ATOL)


NOT_SYMMETRIC = np.array([[4.0, 2.0, 1.0], [100.0, 3.0, 0.5], [-7.0, 9.0, 2.0]])
# (id, onnxnn function, numpy reference): only one triangle is read, as LAPACK's potrf/syevd/PyTorch's eigh path
ONE_TRIANGLE_CASES = [
    ("cholesky-upper-reads-upper", lambda a: L.cholesky(a, upper=True), lambda a: np.linalg.cholesky(_from_upper(a)).T),
    (
        "cholesky_ex-upper-reads-upper",
        lambda a: L.cholesky_ex(a, upper=True).L,
        lambda a: np.linalg.cholesky(_from_upper(a)).T,
    ),
    (
        "torch.cholesky-upper-reads-upper",
        lambda a: a.cholesky(upper=True),
        lambda a: np.linalg.cholesky(_from_upper(a)).T,
    ),
    (
        "pinv-hermitian-reads-lower",
        lambda a: L.pinv(a, hermitian=True),
        lambda a: np.linalg.pinv(_from_lower(a), hermitian=True),
    ),
]


def _from_upper(a):
    return np.triu(a) + np.triu(a, 1).T


def _from_lower(a):
    return np.tril(a) + np.tril(a, -1).T


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id,function,reference", ONE_TRIANGLE_CASES, ids=[c[0] for c in ONE_TRIANGLE_CASES])
def test_one_triangle_is_read(case_id, function, reference, executor):
    a = NOT_SYMMETRIC if "cholesky" not in case_id else np.triu(S3) + np.tril(NOT_SYMMETRIC, -1)
    expected = reference(a)
    with onnxnn.set_executor(executor):
        actual = function(onnxnn.tensor(a)).numpy()
    # Cholesky and the symmetric eigenproblem are backward stable (Higham, Theorems 10.3 and 8.x):
    # relative errors of gamma(3n) times the condition (below 1e3 here), twice for numpy's own
    condition = np.linalg.cond(_from_upper(a) if "upper" in case_id else _from_lower(a))
    bound = 2 * condition * gamma(9, np.float32) * max(np.max(np.abs(expected)), 1.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=bound)


def _pinv_backward(grad: np.ndarray, pinv: np.ndarray, a: np.ndarray) -> np.ndarray:
    """PyTorch's pinv_backward (FunctionsManual.cpp, its m <= n branch) in numpy: the Golub-Pereyra
    derivative of the pseudoinverse at A, with A^+ = ``pinv`` given."""
    k = grad.T @ pinv
    k_pinv_t = k @ pinv.T
    return -(pinv @ k).T + k_pinv_t - (a @ pinv) @ k_pinv_t + (pinv.T @ pinv) @ (grad.T - k @ a)


@pytest.mark.parametrize(
    "a",
    [S3, S3 + np.triu(rng.standard_normal((3, 3)), 1), np.array([[1.0, 1.0], [1.0, 1.0]])],
    ids=["symmetric", "other-triangle-set", "singular"],
)
def test_pinv_hermitian_gradient_is_pytorchs_pinv_backward(a):
    # PyTorch differentiates pinv, hermitian or not, by one formula of A (all of it) and its pseudoinverse:
    # not the symmetric gradient of eigh, which its hermitian values come from
    pinv = np.linalg.pinv(_from_lower(a), hermitian=True)
    cotangent = rng.standard_normal(a.shape)
    _, gradient = _backward(lambda t: L.pinv(t, hermitian=True), a, cotangent=cotangent)
    expected = _pinv_backward(cotangent, pinv, a)
    # products of a few matrices of condition below 50 (their values within gamma(3n) relative)
    bound = 50 * gamma(27, np.float64) * np.abs(expected).max()
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=bound)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_matrix_rank_hermitian_counts_the_eigenvalues_of_the_lower_triangle(executor):
    # PyTorch's tolerance is numpy's: eps * n * max |eigenvalue|
    matrices = np.stack([np.array([[0.0, 5.0], [0.0, 0.0]]), np.array([[2.0, 100.0], [1.0, 3.0]])])
    expected = [np.linalg.matrix_rank(_from_lower(m), hermitian=True) for m in matrices]
    with onnxnn.set_executor(executor):
        actual = L.matrix_rank(onnxnn.tensor(matrices), hermitian=True).numpy()
    np.testing.assert_array_equal(actual, expected)
    assert expected == [0, 2]


# ---------------------------------------------------------------- Cholesky factors' gradients

L3 = np.linalg.cholesky(S3)
B3 = rng.standard_normal((3, 2))


def _gradient_of_whole_factor(reference, factor, cotangent):
    """Central differences of the reference with every entry of the factor perturbed: PyTorch's gradient
    differentiates ``L L^T`` with all of L (derivatives.yaml: cholesky_solve_backward,
    cholesky_inverse_backward)."""
    return central_differences(reference, factor, cotangent)


# (id, onnxnn function of the factor, numpy reference of the whole factor, factor)
FACTOR_CASES = [
    (
        "cholesky_solve",
        lambda f: onnxnn.cholesky_solve(onnxnn.tensor(B3), f),
        lambda f: np.linalg.solve(f @ f.T, B3),
        L3,
    ),
    (
        "cholesky_solve-upper",
        lambda f: onnxnn.cholesky_solve(onnxnn.tensor(B3), f, upper=True),
        lambda f: np.linalg.solve(f.T @ f, B3),
        L3.T.copy(),
    ),
    ("cholesky_inverse", onnxnn.cholesky_inverse, lambda f: np.linalg.inv(f @ f.T), L3),
    ("cholesky_inverse-upper", lambda f: f.cholesky_inverse(upper=True), lambda f: np.linalg.inv(f.T @ f), L3.T.copy()),
]


@pytest.mark.parametrize("case_id,function,reference,factor", FACTOR_CASES, ids=[c[0] for c in FACTOR_CASES])
def test_cholesky_factor_gradient_is_pytorchs(case_id, function, reference, factor):
    cotangent = rng.standard_normal(np.shape(reference(factor)))
    _, gradient = _backward(function, factor, cotangent=cotangent)
    np.testing.assert_allclose(
        gradient, _gradient_of_whole_factor(reference, factor, cotangent), rtol=FD_RTOL, atol=FD_ATOL
    )


def test_cholesky_solve_factor_gradient_with_values_in_the_other_triangle():
    # PyTorch's formula: -(G_B X^T + X G_B^T) L with X and G_B from the triangle read, L whole
    factor = L3 + np.triu(rng.standard_normal((3, 3)), 1)
    cotangent = rng.standard_normal(B3.shape)
    triangle = np.tril(factor)
    product = triangle @ triangle.T
    x, grad_b = np.linalg.solve(product, B3), np.linalg.solve(product, cotangent)
    expected = -(grad_b @ x.T + x @ grad_b.T) @ factor
    solution, gradient = _backward(lambda f: onnxnn.cholesky_solve(onnxnn.tensor(B3), f), factor, cotangent=cotangent)
    np.testing.assert_allclose(solution.detach().numpy(), x, rtol=0, atol=1e-12 * np.abs(x).max())
    # both sides are a few solves and products of condition below 50: within 1e-12 relative
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=50 * gamma(27, np.float64) * np.abs(expected).max())


def test_cholesky_solve_gradient_for_b_is_a_solve():
    check_gradients(lambda b: onnxnn.cholesky_solve(b, onnxnn.tensor(L3)), [B3])


# ---------------------------------------------------------------- vector norms of order below 1


def _small_order_norm_gradient(x: np.ndarray, order: float) -> np.ndarray:
    """PyTorch's linalg_vector_norm_backward for order < 1: ``sgn(x) |x|^(p-1) |x|_p^(1-p)``, 0 where x is 0
    (where it is, |x|_p^(1-p) is 0 for p < 0, and |x|^(p-1) is infinite)."""
    nonzero = x != 0
    with np.errstate(divide="ignore"):
        norm = np.sum(np.abs(x[nonzero]) ** order) ** (1 / order) if nonzero.any() else 0.0
        if order < 0 and not nonzero.all():
            norm = 0.0
        scaled = np.where(nonzero, np.sign(x) * np.abs(np.where(nonzero, x, 1.0)) ** (order - 1), 0.0)
    return scaled * norm ** (1 - order)


VECTOR_NORM_CASES = [
    ([0.0, 3.0, -4.0], 0.5),
    ([0.0, 3.0, -4.0], 0.3),
    ([0.0, 3.0, -4.0], -0.5),
    ([0.0, 3.0, -4.0], -1),
    ([0.0, 3.0, -4.0], -2),
    ([1.0, 3.0, -4.0], 0.5),
    ([1.0, 3.0, -4.0], -1),
    ([0.0, 0.0, 0.0], 0.5),
    ([0.0, 0.0, 0.0], -1),
]


NORMS = {
    "linalg.vector_norm": lambda t, order: L.vector_norm(t, ord=order),
    "torch.norm": lambda t, order: onnxnn.norm(t, order),
    "Tensor.norm": lambda t, order: t.norm(order),
}


@pytest.mark.parametrize("norm", NORMS.values(), ids=NORMS.keys())
@pytest.mark.parametrize("values,order", VECTOR_NORM_CASES)
def test_vector_norm_gradient_is_zero_at_zero_entries(values, order, norm):
    x = np.array(values)
    output, gradient = _backward(lambda t: norm(t, order), x)
    expected_norm = np.sum(np.abs(x) ** order) ** (1 / order) if (x != 0).all() or order > 0 else 0.0
    # a sum of 3 powers and a root: a few roundings of the values
    np.testing.assert_allclose(output.item(), expected_norm, rtol=gamma(8, np.float64), atol=0)
    np.testing.assert_allclose(gradient, _small_order_norm_gradient(x, order), rtol=gamma(8, np.float64), atol=0)


# ---------------------------------------------------------------- edge cases


def test_matrix_power_zero_has_a_zero_gradient():
    x = onnxnn.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = L.matrix_power(x, 0)
    assert y.requires_grad
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), np.eye(2))
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 2)))


A_POWER = np.array([[2.0, 1.0], [0.5, 3.0]])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("exponent", [-1, -2, -3])
def test_matrix_power_of_negative_exponent_is_a_power_of_the_inverse(exponent, executor):
    expected = np.linalg.matrix_power(A_POWER, exponent)
    with onnxnn.set_executor(executor):
        actual = L.matrix_power(onnxnn.tensor(A_POWER), exponent).numpy()
    # an inverse (cond 2.3) and |exponent| - 1 products: within a few gamma(n) relative per factor
    bound = 2 * abs(exponent) * 3 * gamma(6, np.float32) * np.abs(expected).max()
    np.testing.assert_allclose(actual, expected, rtol=0, atol=bound)


def test_matrix_power_of_negative_exponent_is_differentiable():
    check_gradients(lambda a: L.matrix_power(a, -2), [A_POWER])


def test_the_top_level_and_method_matrix_power_take_negative_exponents():
    expected = np.linalg.matrix_power(A_POWER, -2)
    bound = 2 * 2 * 3 * gamma(6, np.float32) * np.abs(expected).max()
    for actual in (onnxnn.matrix_power(onnxnn.tensor(A_POWER), -2), onnxnn.tensor(A_POWER).matrix_power(-2)):
        np.testing.assert_allclose(actual.numpy(), expected, rtol=0, atol=bound)


def test_slogdet_sign_requires_grad():
    sign, logabsdet = L.slogdet(onnxnn.tensor([[2.0, 0.0], [0.0, 3.0]], requires_grad=True))
    assert sign.requires_grad and logabsdet.requires_grad


SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("p", ["fro", 1, -1, INF, -INF], ids=str)
def test_cond_of_a_singular_matrix_is_inf(p, executor):
    # PyTorch fills the inverse of a singular matrix with inf, and takes NaN products (0 * inf) as inf
    with onnxnn.set_executor(executor):
        values = L.cond(onnxnn.tensor(np.stack([SINGULAR, np.zeros((2, 2)), np.eye(2)])), p).numpy()
    assert values[0] == INF and values[1] == INF
    np.testing.assert_allclose(values[2], np.linalg.cond(np.eye(2), p), rtol=gamma(4, np.float32))


def test_cond_nuc_is_the_sums_of_the_singular_values_and_of_their_reciprocals():
    # PyTorch's 'nuc' condition number: sum(S) * sum(1 / S), inf for an exact zero singular value
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    s = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(
        L.cond(onnxnn.tensor(a), "nuc").item(), s.sum() * (1 / s).sum(), rtol=gamma(16, np.float32)
    )
    assert L.cond(onnxnn.tensor([[0.0, 0.0], [0.0, 1.0]]), "nuc").item() == INF


# (shape, ord, expected): the norms of empty matrices PyTorch returns
EMPTY_NORM_CASES = [
    ((0, 3), 2, 0.0),
    ((0, 3), INF, 0.0),
    ((3, 0), 1, 0.0),
    ((3, 0), INF, 0.0),
    ((0, 3), 1, 0.0),
    ((0, 0), "nuc", 0.0),
    ((2, 0, 3), 2, [0.0, 0.0]),
]


@pytest.mark.parametrize("shape,ord,expected", EMPTY_NORM_CASES, ids=[f"{c[0]}-{c[1]}" for c in EMPTY_NORM_CASES])
def test_norms_of_empty_matrices_are_zero(shape, ord, expected):
    np.testing.assert_array_equal(L.matrix_norm(onnxnn.zeros(*shape), ord).numpy(), expected)


@pytest.mark.parametrize("shape,ord", [((0, 3), -2), ((0, 3), -INF), ((3, 0), -1)])
def test_smallest_norms_of_empty_matrices_raise_pytorchs_index_error(shape, ord):
    with pytest.raises(IndexError, match="Expected reduction dim"):
        L.matrix_norm(onnxnn.zeros(*shape), ord)


def test_matrix_rank_tol_is_an_absolute_tolerance():
    a = np.array([[1.0, 0.0], [0.0, 0.1]])
    assert L.matrix_rank(onnxnn.tensor(a), tol=0.5).item() == np.linalg.matrix_rank(a, tol=0.5) == 1
    assert L.matrix_rank(onnxnn.tensor(a), 0.05).item() == 2
    with pytest.raises(TypeError):
        L.matrix_rank(onnxnn.tensor(a), tol=0.5, atol=0.1)
