"""cosine_similarity below ``eps``, distances with ``p=0`` and on empty inputs, cdist's argument checks.

PyTorch's cosine_similarity clamps the norms under ``NoGradGuard``: the value divides by
``max(|x|, eps)``, the gradient still differentiates ``|x|``. The expected gradient below is that
formula in numpy: for ``c = sum(x * u) / n_c`` with ``u = y / max(|y|, eps)``, ``n_c = max(|x|, eps)``
and ``dn_c/dx = x / |x|``, ``dc/dx = u / n_c - sum(x * u) * x / (|x| n_c^2)``.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

from .layer_checks import EXECUTORS


def cosine_gradient(x: np.ndarray, y: np.ndarray, eps: float) -> np.ndarray:
    """d cosine_similarity(x, y) / dx for 1-D vectors, with PyTorch's clamp outside the gradient."""
    norm_x, norm_y = np.linalg.norm(x), np.linalg.norm(y)
    clamped_x, unit_y = max(norm_x, eps), y / max(norm_y, eps)
    return unit_y / clamped_x - np.dot(x, unit_y) * x / (norm_x * clamped_x**2)


# (id, x, y, eps)
COSINE_CASES = [
    ("x-below-eps", [3e-9, 4e-9], [1.0, 2.0], 1e-8),
    ("both-below-eps", [3e-4, -4e-4, 1e-4], [2e-4, 1e-4, -5e-4], 1e-3),
    ("x-below-large-eps", [0.3, 0.4], [-1.0, 2.0], 1.0),
    ("above-eps", [0.3, 0.4, -2.0], [1.0, 2.0, 0.5], 1e-8),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, x, y, eps", COSINE_CASES, ids=[c[0] for c in COSINE_CASES])
def test_cosine_similarity_gradient_differentiates_the_unclamped_norm(case_id, x, y, eps, executor):
    x, y = np.asarray(x), np.asarray(y)
    with onnxnn.set_executor(executor):
        tx = onnxnn.tensor(x[None], dtype=onnxnn.float64, requires_grad=True)
        ty = onnxnn.tensor(y[None], dtype=onnxnn.float64, requires_grad=True)
        value = F.cosine_similarity(tx, ty, eps=eps)
        value.sum().backward()
        expected_value = np.dot(x / max(np.linalg.norm(x), eps), y / max(np.linalg.norm(y), eps))
        np.testing.assert_allclose(value.detach().numpy(), [expected_value], rtol=1e-12)
        np.testing.assert_allclose(tx.grad.numpy()[0], cosine_gradient(x, y, eps), rtol=1e-9)
        np.testing.assert_allclose(ty.grad.numpy()[0], cosine_gradient(y, x, eps), rtol=1e-9)


def test_cosine_similarity_of_an_infinite_norm_stays_finite_where_pytorch_is():
    x = onnxnn.tensor([[1e200, 1e200]], dtype=onnxnn.float64)  # the norm overflows to inf
    np.testing.assert_array_equal(F.cosine_similarity(x, onnxnn.ones(1, 2, dtype=onnxnn.float64)).numpy(), [0.0])


# (id, function of two float64 tensors with requires_grad, shapes)
ZERO_P_CASES = [
    ("cdist", lambda a, b: onnxnn.cdist(a, b, p=0), ((2, 3), (4, 3))),
    ("cdist-batched", lambda a, b: onnxnn.cdist(a, b, p=0.0), ((2, 2, 3), (1, 4, 3))),
    ("pdist", lambda a, b: F.pdist(a, 0) + 0 * b.sum(), ((4, 3), (1,))),
    ("pairwise_distance", lambda a, b: F.pairwise_distance(a, b, p=0), ((3, 4), (3, 4))),
    ("PairwiseDistance", lambda a, b: onnxnn.nn.PairwiseDistance(p=0)(a, b), ((3, 4), (1, 4))),
    ("norm", lambda a, b: onnxnn.norm(a, 0, dim=1) + 0 * b.sum(), ((3, 4), (1,))),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, function, shapes", ZERO_P_CASES, ids=[c[0] for c in ZERO_P_CASES])
def test_zero_p_distances_require_grad_with_zero_gradients(case_id, function, shapes, executor):
    rng = np.random.default_rng(3)
    arrays = [np.round(rng.standard_normal(shape), 0) for shape in shapes]  # some coordinates equal
    with onnxnn.set_executor(executor):
        a, b = (onnxnn.tensor(array, requires_grad=True) for array in arrays)
        result = function(a, b)
        assert result.requires_grad
        result.sum().backward()
        assert not a.grad.numpy().any()
        assert a.grad.shape == a.shape
    if case_id == "cdist":
        counts = (arrays[0][:, None, :] != arrays[1][None, :, :]).sum(-1)
        np.testing.assert_array_equal(result.detach().numpy(), counts)


# (id, function, input shapes)
EMPTY_CASES = [
    ("cdist-no-columns", lambda a, b, p: onnxnn.cdist(a, b, p=p), ((2, 0), (3, 0))),
    ("cdist-no-columns-batched", lambda a, b, p: onnxnn.cdist(a, b, p=p), ((1, 2, 0), (1, 3, 0))),
    ("cdist-no-rows", lambda a, b, p: onnxnn.cdist(a, b, p=p), ((0, 3), (2, 3))),
    ("cdist-empty-batch", lambda a, b, p: onnxnn.cdist(a, b, p=p), ((0, 2, 3), (0, 3, 3))),
    ("pdist-no-columns", lambda a, b, p: F.pdist(a, p), ((3, 0),)),
    ("pdist-one-row", lambda a, b, p: F.pdist(a, p), ((1, 3),)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("case_id, function, shapes", EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_empty_distances_are_zeros_with_zero_gradients(case_id, function, shapes, p, executor):
    rng = np.random.default_rng(4)
    with onnxnn.set_executor(executor):
        tensors = [onnxnn.tensor(rng.standard_normal(shape), requires_grad=True) for shape in shapes]
        result = function(*tensors, None, p) if len(tensors) == 1 else function(*tensors, p)
        weights = onnxnn.tensor(rng.standard_normal(tuple(result.shape)))
        (result * weights).sum().backward()
        assert not result.detach().numpy().any()
        for tensor, shape in zip(tensors, shapes):
            gradient = tensor.grad.numpy()  # realized: onnxruntime ran the gradient graph
            assert gradient.shape == shape and not gradient.any()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda a, b: onnxnn.cdist(a, b, p=-1.0), RuntimeError, "^cdist only supports non-negative p values$"),
        (lambda a, b: onnxnn.cdist(a, b, p=float("nan")), RuntimeError, "only supports non-negative p values"),
        (
            lambda a, b: onnxnn.cdist(a, b, compute_mode="foo"),
            ValueError,
            "^foo is not a valid value for compute_mode$",
        ),
        (lambda a, b: onnxnn.cdist(a, b, compute_mode=None), ValueError, "^None is not a valid value"),
        (
            lambda a, b: onnxnn.cdist(a.long(), b.long()),
            RuntimeError,
            "^cdist only supports floating-point dtypes, X1 got: Long$",
        ),
        (
            lambda a, b: onnxnn.cdist(a, b.int()),
            RuntimeError,
            "^cdist only supports floating-point dtypes, X2 got: Int$",
        ),
        (
            lambda a, b: onnxnn.cdist(a, b.double()),
            RuntimeError,
            "^expected scalar type Float but found Double$",
        ),
        (lambda a, b: onnxnn.cdist(a, b[0]), RuntimeError, "^cdist only supports at least 2D tensors, X2 got: 1D$"),
        (lambda a, b: F.pdist(a, -2.0), RuntimeError, "^pdist only supports non-negative p values$"),
        (lambda a, b: F.pdist(a.long()), RuntimeError, "^pdist only supports floating-point dtypes$"),
    ],
)
def test_bad_distance_arguments_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(onnxnn.randn(2, 3), onnxnn.randn(4, 3))


@pytest.mark.parametrize(
    "mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"]
)
def test_every_compute_mode_computes_from_differences(mode):
    a = onnxnn.tensor([[0.0, 0.0], [1e8, 1.0]], dtype=onnxnn.float64)
    b = onnxnn.tensor([[3.0, 4.0], [1e8, 2.0]], dtype=onnxnn.float64)
    expected = [[5.0, 1e8], [np.hypot(1e8 - 3.0, 3.0), 1.0]]
    np.testing.assert_allclose(onnxnn.cdist(a, b, compute_mode=mode).numpy(), expected, rtol=1e-15)


def test_distances_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for case_id, x, y, eps in COSINE_CASES:
        tx, ty = (torch.tensor([v], dtype=torch.float64, requires_grad=True) for v in (x, y))
        torch.nn.functional.cosine_similarity(tx, ty, eps=eps).sum().backward()
        ox, oy = (onnxnn.tensor([v], dtype=onnxnn.float64, requires_grad=True) for v in (x, y))
        F.cosine_similarity(ox, oy, eps=eps).sum().backward()
        np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-9, err_msg=case_id)
        np.testing.assert_allclose(oy.grad.numpy(), ty.grad.numpy(), rtol=1e-9, err_msg=case_id)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    ta = torch.tensor(a, requires_grad=True)
    torch.cdist(ta, torch.tensor(b), p=0).sum().backward()
    oa = onnxnn.tensor(a, requires_grad=True)
    onnxnn.cdist(oa, onnxnn.tensor(b), p=0).sum().backward()
    np.testing.assert_array_equal(oa.grad.numpy(), ta.grad.numpy())
