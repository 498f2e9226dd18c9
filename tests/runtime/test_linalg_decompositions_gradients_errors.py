"""Linear algebra (runtime/ops/linalg_lu.py, linalg_qr.py, onnxnn.linalg): gradients against float64
finite differences (first and second order, closed-form backward nodes), export run by plain
onnxruntime, batch sizes sharing one graph, Tensor methods, and PyTorch's errors.

The matrices, references and tolerance are in linalg_cases.py; the forward values against
numpy.linalg are in test_linalg_decompositions_forward.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

from .linalg_cases import (
    A3,
    A4B,
    A_NEG,
    B3V,
    B4,
    C4,
    DTYPES,
    EXECUTORS,
    L,
    L3,
    S3,
    T4,
    W3,
    _bound,
    _well_conditioned,
    rng,
)

# ---------------------------------------------------------------- gradients (float64 finite differences)


def _symmetric(f):
    """f of the symmetric matrix (x + x^T) / 2: Cholesky's domain, on which PyTorch's gradient is defined."""
    return lambda x, *rest: f((x + x.mT) / 2, *rest)


GRADIENT_CASES = [
    ("det", onnxnn.det, [A_NEG]),
    ("det-batch", L.det, [A4B[:, :3, :3]]),
    ("slogdet", lambda a: onnxnn.slogdet(a).logabsdet, [A_NEG]),
    ("logdet", onnxnn.logdet, [S3]),
    ("inverse", onnxnn.inverse, [A_NEG]),
    ("solve", L.solve, [A_NEG, B4[0, :3]]),
    ("solve-right", lambda a, b: L.solve(a, b, left=False), [A3, B4[0, :3].T.copy()]),
    ("solve_triangular", lambda a, b: L.solve_triangular(a, b, upper=True), [A3, B4[0, :3]]),
    ("triangular_solve-unit", lambda b, a: onnxnn.triangular_solve(b, a, False, True, True)[0], [B4[0, :3], A3]),
    ("cholesky", _symmetric(L.cholesky), [S3]),
    ("cholesky-upper", _symmetric(lambda a: onnxnn.cholesky(a, upper=True)), [S3]),
    # the factor's gradient is PyTorch's closed form, not the derivative of a function of its triangle:
    # test_linalg_against_pytorch_semantics.py checks it
    ("cholesky_solve", lambda b: onnxnn.cholesky_solve(b, onnxnn.tensor(L3)), [C4[:3]]),
    ("lu-packed", lambda a: onnxnn.lu(a)[0], [A_NEG]),
    ("lu_unpack-L", lambda a: onnxnn.lu_unpack(*onnxnn.lu(a))[1], [T4]),
    ("lu_solve", lambda a, b: onnxnn.lu_solve(b, *onnxnn.lu(a)), [A_NEG, B4[0, :3]]),
    ("qr-Q", lambda a: L.qr(a).Q, [T4]),
    ("qr-R-wide", lambda a: onnxnn.qr(a).R, [W3]),
    ("geqrf", lambda a: onnxnn.geqrf(a)[0], [T4]),
    ("orgqr", lambda a: onnxnn.orgqr(*onnxnn.geqrf(a)), [T4]),
    ("ormqr", lambda a, c: onnxnn.ormqr(*onnxnn.geqrf(a), c, transpose=True), [T4, C4]),
    ("lstsq", lambda a, b: L.lstsq(a, b).solution, [T4, C4]),
    ("matrix_exp", onnxnn.matrix_exp, [rng.standard_normal((3, 3))]),
    ("matrix_exp-squared", L.matrix_exp, [3 * rng.standard_normal((2, 2))]),
    ("matrix_norm-inf", lambda a: L.matrix_norm(a, float("inf")), [T4]),
    ("svdvals-wide", L.svdvals, [W3[:2, :4]]),
    ("svd-U", lambda a: L.svd(a, full_matrices=False).U, [T4[:, :2]]),
    ("pinverse", onnxnn.pinverse, [T4[:, :2]]),
    ("eigh-values", _symmetric(lambda a: L.eigh(a).eigenvalues), [S3[:2, :2]]),
    ("eigh-vectors", _symmetric(lambda a: L.eigh(a).eigenvectors), [S3]),
]
# Jacobi graphs are long (sweeps x rounds of rotations): their gradients are checked along a random
# direction (two evaluations) instead of element by element.
DIRECTIONAL = {"svdvals-wide", "svd-U", "pinverse", "eigh-values", "eigh-vectors"}


# The backward graphs are made of the same standard ops as the forward ones (checked on both executors
# above), so every rule is checked on the kernels executor and one case per family on onnxruntime too.
ON_BOTH = {"det", "inverse", "cholesky", "qr-Q", "matrix_exp", "lu_solve", "svd-U"}
GRADIENT_PARAMS = [pytest.param(*case, "kernels", id=f"{case[0]}-kernels") for case in GRADIENT_CASES] + [
    pytest.param(*case, "onnxruntime", id=f"{case[0]}-onnxruntime") for case in GRADIENT_CASES if case[0] in ON_BOTH
]


@pytest.mark.parametrize("case_id,function,inputs,executor", GRADIENT_PARAMS)
def test_gradients_match_finite_differences(case_id, function, inputs, executor):
    with onnxnn.set_executor(executor):
        check_gradients(
            function, [np.asarray(a, np.float64) for a in inputs], exhaustive_limit=0 if case_id in DIRECTIONAL else 64
        )


def test_solve_and_inverse_have_closed_form_backward_nodes():
    x = onnxnn.tensor(A3, requires_grad=True)
    assert L.inv(x).grad_fn.name() == "LinalgInvExBackward0"
    assert L.solve(x, onnxnn.tensor(B3V)).grad_fn is not None


SECOND_ORDER_CASES = [
    ("inverse", L.inv, A3),  # the unrolled elimination
    # Singular values' gradient is the closed form U diag(G) V^T: its derivative goes through U and V.
    ("svdvals-cubed", lambda a: L.svdvals(a) ** 3, T4),
    ("svdvals-wide", L.svdvals, W3[:2, :4]),
    ("nuclear-norm", lambda a: L.matrix_norm(a, "nuc"), T4),
    ("spectral-norm", lambda a: L.matrix_norm(a, 2), T4[:3]),
    ("pinverse", onnxnn.pinverse, T4[:, :2]),
    ("pinv-hermitian", _symmetric(lambda a: L.pinv(a, hermitian=True)), S3),  # PyTorch's pinv_backward
]


@pytest.mark.parametrize(
    "function,matrix", [case[1:] for case in SECOND_ORDER_CASES], ids=[c[0] for c in SECOND_ORDER_CASES]
)
def test_second_order_gradients_match_finite_differences(function, matrix):
    # d/dA <gradient of sum(f(A)), W> by finite differences of the first-order gradient.
    direction = rng.standard_normal(matrix.shape)

    def first_order(a):
        with onnxnn.enable_grad():  # the finite differences evaluate under no_grad
            x = a if a.requires_grad else a.detach().requires_grad_(True)
            (gradient,) = onnxnn.autograd.grad(function(x).sum(), x, create_graph=True)
            value = (gradient * onnxnn.tensor(direction)).sum()
        return value if a.requires_grad else value.detach()

    check_gradients(first_order, [np.asarray(matrix, np.float64)], exhaustive_limit=0)


def test_singular_values_have_a_closed_form_backward_node():
    assert L.svdvals(onnxnn.tensor(T4, requires_grad=True)).grad_fn.name() == "LinalgSvdBackward0"


# ---------------------------------------------------------------- export, batch sizes, methods, errors


class _Solver(nn.Module):
    def forward(self, a, b):
        x = onnxnn.linalg.solve(a, b)
        q, r = onnxnn.linalg.qr(a)
        lower = onnxnn.linalg.cholesky(a @ a.mT + 4 * onnxnn.eye(4))
        return (
            x.sum()
            + onnxnn.det(a)
            + onnxnn.slogdet(a)[1]
            + q.sum()
            + r.sum()
            + lower.sum()
            + onnxnn.matrix_exp(a * 0.1).sum()
            + onnxnn.inverse(a).sum()
        )


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
def test_exported_model_runs_in_plain_onnxruntime_like_onnxnn(dtype):
    a, b = onnxnn.tensor(A4B[0], dtype=dtype), onnxnn.tensor(B4[0], dtype=dtype)
    module = _Solver()
    expected = module(a, b).numpy()
    proto = to_onnx(module.eval(), (a, b))
    onnx.checker.check_model(proto, full_check=True)
    assert {node.domain for node in proto.graph.node} <= {"", "ai.onnx"}
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: t.numpy() for graph_input, t in zip(session.get_inputs(), (a, b))}
    actual = session.run(None, feeds)[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_bound(expected, 4, dtype.numpy_dtype) * 8)


class _Spectral(nn.Module):
    def forward(self, a):
        U, S, _ = onnxnn.linalg.svd(a, full_matrices=False)
        return U.abs().sum() + S.sum() + onnxnn.linalg.eigvalsh(a.mT @ a).sum() + onnxnn.pinverse(a).sum()


def test_exported_jacobi_decompositions_run_in_plain_onnxruntime():
    a = onnxnn.tensor(T4[:, :2])
    module = _Spectral()
    expected = module(a).numpy()
    proto = to_onnx(module.eval(), (a,))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    actual = session.run(None, {session.get_inputs()[0].name: a.numpy()})[0]
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_bound(expected, 3, np.float64) * 8)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_batch_sizes_share_a_structure_and_stay_right(executor):
    # The onnxruntime executor compiles one graph with a symbolic batch for the later sizes.
    with onnxnn.set_executor(executor):
        for batch in (2, 3, 5, 4):
            a, b = _well_conditioned(batch, 3, 3), rng.standard_normal((batch, 3, 2))
            actual = L.solve(onnxnn.tensor(a), onnxnn.tensor(b)).numpy()
            np.testing.assert_allclose(actual, np.linalg.solve(a, b), rtol=0, atol=_bound(actual, 3, np.float64))
            inverse = L.inv(onnxnn.tensor(a)).numpy()
            np.testing.assert_allclose(inverse, np.linalg.inv(a), rtol=0, atol=_bound(inverse, 3, np.float64))


def test_tensor_methods_and_top_level_functions_exist():
    x = onnxnn.tensor(A3)
    for name in (
        "det",
        "slogdet",
        "logdet",
        "inverse",
        "cholesky",
        "cholesky_inverse",
        "lu",
        "matrix_exp",
        "qr",
        "geqrf",
    ):
        method, function = getattr(x, name)(), getattr(onnxnn, name)(x)
        first = method[0] if isinstance(method, tuple) else method
        second = function[0] if isinstance(function, tuple) else function
        np.testing.assert_array_equal(first.numpy(), second.numpy(), err_msg=name)
    assert type(onnxnn.qr(x)).__name__ == "qr" and onnxnn.slogdet(x)._fields == ("sign", "logabsdet")


ERROR_CASES = [
    (
        lambda: onnxnn.det(onnxnn.ones(2, 3)),
        RuntimeError,
        "linalg.det: A must be batches of square matrices, but they are 2 by 3 matrices",
    ),
    (
        lambda: onnxnn.inverse(onnxnn.ones(3)),
        RuntimeError,
        "linalg.inv: The input tensor A must have at least 2 dimensions.",
    ),
    (
        lambda: onnxnn.logdet(onnxnn.ones(2, 2, dtype=onnxnn.int64)),
        RuntimeError,
        "logdet: Expected a floating point or complex tensor as input. Got Long",
    ),
    (
        lambda: L.slogdet(onnxnn.ones(2, 2, dtype=onnxnn.float16)),
        RuntimeError,
        "linalg.slogdet: Low precision dtypes not supported. Got Half",
    ),
    (
        lambda: onnxnn.det(onnxnn.ones(2, 2, dtype=onnxnn.float16)),
        NotImplementedError,
        "\"lu_cpu\" not implemented for 'Half'",
    ),
    (
        lambda: onnxnn.cholesky(onnxnn.ones(2, 2, dtype=onnxnn.int64)),
        NotImplementedError,
        "\"cholesky_cpu\" not implemented for 'Long'",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(4, 2)),
        RuntimeError,
        "linalg.solve: Incompatible shapes of A and B for the equation AX = B (3x3 and 4x2)",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(3), left=False),
        RuntimeError,
        "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x1)",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(3, 2), left=False),
        RuntimeError,
        "linalg.solve: Incompatible shapes of A and B for the equation XA = B (3x3 and 3x2)",
    ),
    (
        lambda: L.solve(onnxnn.eye(1), onnxnn.ones(1), left=False),
        RuntimeError,
        "linalg.solve: Vector broadcasting of the left hand side is not supported for left=False.",
    ),
    (
        lambda: L.solve(onnxnn.eye(3), onnxnn.ones(3, 2, dtype=onnxnn.float64)),
        RuntimeError,
        "linalg.solve: Expected A and B to have the same dtype, but found A of type Float and B of type Double instead",
    ),
    (
        lambda: onnxnn.triangular_solve(onnxnn.ones(3), onnxnn.eye(3)),
        RuntimeError,
        "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has 1 dimensions instead",
    ),
    (
        lambda: onnxnn.cholesky_solve(onnxnn.ones(4, 2), onnxnn.eye(3)),
        RuntimeError,
        "Incompatible matrix sizes for cholesky_solve: each A matrix is 3 by 3 but each b matrix is 4 by 2",
    ),
    (
        lambda: onnxnn.lu_unpack(onnxnn.eye(2), onnxnn.tensor([1, 2])),
        RuntimeError,
        "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.",
    ),
    (
        lambda: L.lu_factor(onnxnn.ones(3)),
        RuntimeError,
        "torch.lu_factor: Expected tensor with 2 or more dimensions. Got size: [3] instead",
    ),
    (
        lambda: L.qr(onnxnn.eye(2), mode="x"),
        RuntimeError,
        "qr received unrecognized mode 'x' but expected one of 'reduced' (default), 'r', or 'complete'",
    ),
    (
        lambda: L.householder_product(onnxnn.ones(2, 3), onnxnn.ones(2)),
        RuntimeError,
        "torch.linalg.householder_product: input.shape[-2] must be greater than or equal to input.shape[-1]",
    ),
    (
        lambda: onnxnn.ormqr(onnxnn.eye(3), onnxnn.ones(3), onnxnn.ones(4, 2)),
        RuntimeError,
        "torch.ormqr: other.shape[-2] must be equal to input.shape[-2]",
    ),
    (
        lambda: L.lstsq(onnxnn.ones(3, 2), onnxnn.ones(2, 1)),
        RuntimeError,
        "torch.linalg.lstsq: input.size(-2) should match other.size(-2)",
    ),
    (
        lambda: L.matrix_exp(onnxnn.ones(2, 3)),
        RuntimeError,
        "linalg.matrix_exp: A must be batches of square matrices, but they are 2 by 3 matrices",
    ),
    (
        lambda: L.multi_dot([onnxnn.eye(2), onnxnn.ones(2, 2, 2)]),
        RuntimeError,
        "multi_dot(): the last tensor must be 1D or 2D but got 3D",
    ),
    (
        lambda: onnxnn.svd(onnxnn.ones(3)),
        RuntimeError,
        "linalg.svd: input should have at least 2 dimensions, but has 1 dimensions instead",
    ),
    (
        lambda: L.eigh(onnxnn.ones(3, 2)),
        RuntimeError,
        "linalg.eigh: A must be batches of square matrices, but they are 3 by 2 matrices",
    ),
    (lambda: L.eigh(onnxnn.eye(3), "X"), RuntimeError, "Expected UPLO argument to be 'L' or 'U', but got X"),
    (
        lambda: onnxnn.pinverse(onnxnn.ones(3, 3, dtype=onnxnn.int64)),
        RuntimeError,
        (
            "linalg.pinv(Long{[3, 3]}): expected a tensor with 2 or more dimensions of float, double, cfloat or "
            "cdouble types"
        ),
    ),
    (
        lambda: L.cond(onnxnn.ones(3, 2), 1),
        RuntimeError,
        "linalg.cond(ord=1): A must be batches of square matrices, but they are 3 by 2 matrices",
    ),
]


@pytest.mark.parametrize("call,error,message", ERROR_CASES, ids=[c[2][:40] for c in ERROR_CASES])
def test_bad_input_gets_pytorchs_error(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


def test_error_messages_are_pytorchs():
    torch = pytest.importorskip("torch")
    calls = [
        lambda lib: lib.det(lib.ones(2, 3)),
        lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(4, 2)),
        lambda lib: lib.cholesky_solve(lib.ones(4, 2), lib.eye(3)),
        lambda lib: lib.linalg.lu_factor(lib.ones(3)),
        lambda lib: lib.triangular_solve(lib.ones(3), lib.eye(3)),
        lambda lib: lib.linalg.qr(lib.eye(2), "x"),
        lambda lib: lib.linalg.solve(lib.eye(3), lib.ones(3), left=False),
    ]
    for call in calls:
        messages = []
        for lib in (torch, onnxnn):
            with pytest.raises(Exception) as raised:
                call(lib)
            messages.append((type(raised.value).__name__, str(raised.value).splitlines()[0]))
        assert messages[0] == messages[1]
