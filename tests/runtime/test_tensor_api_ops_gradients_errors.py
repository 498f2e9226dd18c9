"""The Tensor and top-level functions added for PyTorch parity (issue #12): gradients against float64
finite differences, export to ONNX run by plain onnxruntime, methods and in-place variants, and
PyTorch's errors.

The forward values against numpy are in test_tensor_api_ops_forward.py; the inputs in
tensor_api_cases.py.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

from .tensor_api_cases import B1, B2, C, EXECUTORS, I2, I_COPY, M, MASK, N, P, T, V3, V4, V5, Z, rng

# ---------------------------------------------------------------- gradients


def _zero_free(shape, seed):
    values = np.random.default_rng(seed).uniform(0.5, 1.5, shape)
    return values * np.where(np.random.default_rng(seed + 1).random(shape) < 0.5, -1, 1)


DISTINCT = np.random.default_rng(3).permutation(20).reshape(4, 5) * 0.37 - 3  # no ties: max/sort differentiable

GRADIENT_CASES = [
    ("roll", lambda x: onnxnn.roll(x, (1, -2), (0, 1)), [M]),
    ("rot90", lambda x: onnxnn.rot90(x, 3), [M]),
    ("tril", lambda x: onnxnn.tril(x, -1), [T]),
    ("triu", lambda x: x.triu(1), [T]),
    ("diagonal", lambda x: onnxnn.diagonal(x, 1, 0, 2), [T]),
    ("diag_embed", lambda x: onnxnn.diag_embed(x, -1), [M]),
    ("trace", onnxnn.trace, [M]),
    ("einsum_matmul", lambda a, b: onnxnn.einsum("ij,jk->ik", a, b), [M, N]),
    ("einsum_summed_letter", lambda a, b: onnxnn.einsum("bij,k->bk", a, b), [T, V5]),
    (
        "einsum_ellipsis_broadcast",
        lambda a, b: onnxnn.einsum("...ij,...jk->...ik", a, b),
        [B1, rng.standard_normal((1, 4, 5))],
    ),
    ("einsum_three", lambda a, b, c: onnxnn.einsum("ij,jk,ik->i", a, b, c), [M, N, C]),
    ("topk", lambda x: onnxnn.topk(x, 2, dim=0).values, [DISTINCT]),
    ("sort", lambda x: onnxnn.sort(x, 1, descending=True).values, [DISTINCT]),
    ("kthvalue", lambda x: onnxnn.kthvalue(x, 2, 1).values, [DISTINCT]),
    ("median_dim", lambda x: onnxnn.median(x, 0).values, [DISTINCT]),
    ("cumsum", lambda x: onnxnn.cumsum(x, 1), [M]),
    ("cumprod_with_zeros", lambda x: onnxnn.cumprod(x, 1), [Z]),
    ("logcumsumexp", lambda x: onnxnn.logcumsumexp(x, 1), [M]),
    ("cummax_values", lambda x: onnxnn.cummax(x, 1).values, [DISTINCT]),
    ("addmm", lambda c, a, b: onnxnn.addmm(c, a, b, beta=0.5, alpha=2.0), [C, M, N]),
    ("baddbmm", lambda c, a, b: onnxnn.baddbmm(c, a, b), [C, B1, B2]),
    ("addbmm", lambda c, a, b: onnxnn.addbmm(c, a, b), [C, B1, B2]),
    ("addmv", lambda c, a, v: onnxnn.addmv(c, a, v), [V3, M, V4]),
    ("addr", lambda c, a, b: onnxnn.addr(c, a, b), [M, V3, V4]),
    ("inner", onnxnn.inner, [M, T]),
    ("kron", onnxnn.kron, [M[:2, :2], V3.reshape(1, 3)]),
    ("cross", lambda a, b: onnxnn.cross(a, b, dim=1), [M[:, :3], C[:, :3]]),
    ("lerp", lambda a, b: onnxnn.lerp(a, b, 0.3), [M, P]),
    ("addcdiv", lambda a, b, c: onnxnn.addcdiv(a, b, c, value=2), [M, M, P]),
    ("index_add", lambda x, s: onnxnn.index_add(x, 0, onnxnn.tensor(I2), s), [M, M * 0.5]),
    ("index_copy", lambda x, s: onnxnn.index_copy(x, 0, onnxnn.tensor(I_COPY), s), [M, M[:2]]),
    ("index_fill", lambda x: onnxnn.index_fill(x, 1, onnxnn.tensor([3, 0]), 1.0), [M]),
    ("masked_scatter", lambda x, s: onnxnn.masked_scatter(x, onnxnn.tensor(MASK), s), [M, N]),
    ("repeat_interleave", lambda x: onnxnn.repeat_interleave(x, onnxnn.tensor([2, 0, 1]), 0), [M]),
    ("unfold", lambda x: x.unfold(2, 3, 1), [T]),
    ("hstack", lambda a, b: onnxnn.hstack([a, b]), [M, C]),
    ("diff", lambda x: onnxnn.diff(x, 2, 1), [M]),
    ("logaddexp", onnxnn.logaddexp, [M, C[:, :4]]),
    ("xlogy", onnxnn.xlogy, [M, P]),
    ("log1p", onnxnn.log1p, [P]),
    ("hypot", onnxnn.hypot, [M, P]),
    ("nan_to_num", lambda x: onnxnn.nan_to_num(x), [M]),
]


# The ONNX ops whose gradient rules these functions introduce (listed in test_gradients_first_order.COVERED_ELSEWHERE).
RULE_CASES = [
    ("CumSum", "cumsum"),
    ("Einsum", "einsum_matmul"),
    ("Einsum", "einsum_summed_letter"),
    ("Trilu", "tril"),
    ("Trilu", "triu"),
]


@pytest.mark.parametrize("op_type,case_id", RULE_CASES)
def test_gradient_cases_record_the_ops_whose_rules_they_check(op_type, case_id):
    _, function, inputs = next(case for case in GRADIENT_CASES if case[0] == case_id)
    tensors = [onnxnn.tensor(a, requires_grad=True) for a in inputs]
    assert function(*tensors).grad_fn.node.op_type == op_type


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=[case[0] for case in GRADIENT_CASES])
def test_gradient_matches_finite_differences(case):
    _, function, inputs = case
    check_gradients(function, [np.asarray(a, np.float64) for a in inputs])


# ---------------------------------------------------------------- export, methods, in place, errors


class _Mixed(nn.Module):
    def forward(self, x, y):
        top = onnxnn.topk(x, 2).values
        scan = onnxnn.cumsum(onnxnn.tril(x @ y.transpose(0, 1)), 0)
        mixed = onnxnn.einsum("ij,kj->ik", x, y) + onnxnn.roll(scan, 1, 1)
        return onnxnn.cat([mixed.reshape(-1), onnxnn.diagonal(mixed), top.reshape(-1)])


def test_exported_model_runs_in_plain_onnxruntime_like_onnxnn():
    x, y = onnxnn.tensor(M, dtype=onnxnn.float32), onnxnn.tensor(C[:, :4], dtype=onnxnn.float32)
    module = _Mixed()
    expected = module(x, y).numpy()
    proto = to_onnx(module.eval(), (x, y))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {graph_input.name: t.numpy() for graph_input, t in zip(session.get_inputs(), (x, y))}
    actual = session.run(None, feeds)[0]
    np.testing.assert_allclose(actual, expected, rtol=gamma(8), atol=gamma(8) * np.abs(expected).max())


METHOD_CASES = [
    ("tril_", lambda t: t.tril_(1), lambda a: np.tril(a, 1)),
    (
        "index_fill_",
        lambda t: t.index_fill_(0, onnxnn.tensor([1]), 0.0),
        lambda a: np.where(np.arange(3)[:, None] == 1, 0.0, a),
    ),
    ("clamp_min_", lambda t: t.clamp_min_(0.1), lambda a: np.maximum(a, 0.1)),
    ("cumsum_", lambda t: t.cumsum_(1), lambda a: np.cumsum(a, 1)),
    ("fliplr", lambda t: t.fliplr(), np.fliplr),
    ("new_full", lambda t: t.new_full((2, 2), 3.0), lambda a: np.full((2, 2), 3.0)),
    ("new_zeros", lambda t: t.new_zeros(2, 3), lambda a: np.zeros((2, 3))),
    ("type_as", lambda t: onnxnn.tensor([1, 2]).type_as(t), lambda a: np.array([1.0, 2.0])),
    ("sum_to_size", lambda t: t.sum_to_size(1, 4), lambda a: a.sum(0, keepdims=True)),
]


@pytest.mark.parametrize("case", METHOD_CASES, ids=[case[0] for case in METHOD_CASES])
def test_tensor_methods_and_in_place_variants(case):
    _, method, reference = case
    array = np.round(M * 4) / 4  # exactly representable sums
    t = onnxnn.tensor(array, dtype=onnxnn.float64)
    result = method(t)
    expected = reference(array)
    assert result.dtype is onnxnn.float64
    np.testing.assert_array_equal(result.numpy(), expected)
    if case[0].endswith("_"):
        assert result is t  # in place: the same handle, rebound


def test_in_place_float_result_into_integer_tensor_is_refused():
    t = onnxnn.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        t.log1p_()


ERROR_CASES = [
    ("topk_k_too_large", lambda: onnxnn.topk(onnxnn.zeros(3), 4), RuntimeError, "selected index k out of range"),
    ("kthvalue_k_zero", lambda: onnxnn.kthvalue(onnxnn.zeros(3), 0), RuntimeError, "selected number k out of range"),
    (
        "einsum_operand_count",
        lambda: onnxnn.einsum("ij,jk", onnxnn.zeros(2, 2)),
        RuntimeError,
        "fewer operands were provided than specified in the equation",
    ),
    (
        "einsum_rank",
        lambda: onnxnn.einsum("ijk", onnxnn.zeros(2, 2)),
        RuntimeError,
        r"the number of subscripts in the equation \(3\) does not match",
    ),
    ("unary_plus_of_bools", lambda: +onnxnn.tensor([True]), RuntimeError, "The `\\+` operator, on a bool tensor"),
    (
        "einsum_diagonal_sizes",  # a repeated subscript's axes are a diagonal: equal sizes, not broadcast
        lambda: onnxnn.einsum("ii->i", onnxnn.zeros(1, 3)),
        RuntimeError,
        "subscript i is repeated for operand 0 but the sizes don't match, 3 != 1",
    ),
    (
        "addmm_rank",
        lambda: onnxnn.addmm(onnxnn.zeros(2), onnxnn.zeros(2), onnxnn.zeros(2, 2)),
        RuntimeError,
        "mat1 must be a matrix",
    ),
    (
        "diagonal_same_dims",
        lambda: onnxnn.diagonal(onnxnn.zeros(2, 2), 0, 1, 1),
        RuntimeError,
        "diagonal dimensions cannot be identical 1, 1",
    ),
    (
        "rot90_same_dims",
        lambda: onnxnn.rot90(onnxnn.zeros(2, 2), 1, (0, 0)),
        RuntimeError,
        "expected rotation dims to be different",
    ),
    (
        "roll_misaligned",
        lambda: onnxnn.roll(onnxnn.zeros(2, 2), (1, 1), 0),
        RuntimeError,
        "shifts and dimensions must align",
    ),
    ("tril_vector", lambda: onnxnn.tril(onnxnn.zeros(3)), RuntimeError, "at least 2 dimensions"),
    (
        "index_add_out_of_bounds",
        lambda: onnxnn.index_add(onnxnn.zeros(3), 0, onnxnn.tensor([3]), onnxnn.ones(1)),
        RuntimeError,  # PyTorch's index_add raises RuntimeError here, its index_copy IndexError
        "index 3 is out of bounds for dimension 0 with size 3",
    ),
    (
        "index_copy_source_shape",
        lambda: onnxnn.index_copy(onnxnn.zeros(3, 2), 0, onnxnn.tensor([0]), onnxnn.ones(1, 3)),
        RuntimeError,
        "same slice shapes",
    ),
    (
        "masked_scatter_short_source",
        lambda: onnxnn.masked_scatter(onnxnn.zeros(3), onnxnn.tensor([True] * 3), onnxnn.ones(2)),
        RuntimeError,
        "at least as many",
    ),
    (
        "bucketize_boundaries_rank",
        lambda: onnxnn.bucketize(onnxnn.zeros(2), onnxnn.zeros(2, 2)),
        RuntimeError,
        "boundaries tensor must be 1 dimension",
    ),
    (
        "tensor_split_zero_sections",
        lambda: onnxnn.tensor_split(onnxnn.zeros(3), 0),
        RuntimeError,
        "number of sections must be larger than 0",
    ),
    ("hsplit_uneven", lambda: onnxnn.hsplit(onnxnn.zeros(2, 5), 2), RuntimeError, "not divisible by the split_size 2"),
    (
        "bitwise_float",
        lambda: onnxnn.bitwise_and(onnxnn.zeros(2), onnxnn.zeros(2)),
        RuntimeError,
        "not implemented for 'Float'",
    ),
    (
        "cross_no_size_3",
        lambda: onnxnn.cross(onnxnn.zeros(2, 2), onnxnn.zeros(2, 2)),
        RuntimeError,
        "no dimension of size 3",
    ),
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[case[0] for case in ERROR_CASES])
def test_bad_arguments_raise_pytorchs_errors(case):
    _, call, error, message = case
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_bitwise_ops_on_integers_and_bools(executor):
    a, b = np.array([12, -7, 5, 0], np.int64), np.array([10, 3, -1, 9], np.int64)
    with onnxnn.set_executor(executor):
        ta, tb = onnxnn.tensor(a), onnxnn.tensor(b)
        np.testing.assert_array_equal(onnxnn.bitwise_and(ta, tb).numpy(), a & b)
        np.testing.assert_array_equal(onnxnn.bitwise_or(ta, tb).numpy(), a | b)
        np.testing.assert_array_equal(onnxnn.bitwise_xor(ta, 6).numpy(), a ^ 6)
        np.testing.assert_array_equal(onnxnn.bitwise_not(ta).numpy(), ~a)
        p, q = np.array([True, False, True]), np.array([True, True, False])
        np.testing.assert_array_equal(onnxnn.bitwise_xor(onnxnn.tensor(p), onnxnn.tensor(q)).numpy(), p ^ q)


def test_tensor_split_matches_numpy_array_split():
    # Indices are slice bounds, as Python's: [2, 1] gives x[:2], x[2:1] (empty) and x[1:].
    cases = [
        (3, np.array_split(T, 3, 2)),
        ([1, 3], np.split(T, [1, 3], 2)),
        ([-1], [T[..., :-1], T[..., -1:]]),
        ([2, 1], [T[..., :2], T[..., 2:1], T[..., 1:]]),
    ]
    for sections, expected in cases:
        parts = onnxnn.tensor_split(onnxnn.tensor(T), sections, 2)
        assert len(parts) == len(expected)
        for part, reference in zip(parts, expected):
            np.testing.assert_array_equal(part.numpy(), reference)


def test_logspace_and_low_precision_smoke():
    np.testing.assert_allclose(onnxnn.logspace(0, 3, 4, base=2).numpy(), [1, 2, 4, 8])
    for dtype in (onnxnn.float16, onnxnn.bfloat16):
        x = onnxnn.tensor(M, dtype=dtype)
        assert onnxnn.cumsum(x, 1).dtype is dtype
        assert onnxnn.topk(x, 2).values.dtype is dtype
        assert onnxnn.tril(x).dtype is dtype
        np.testing.assert_array_equal(onnxnn.roll(x, 1, 0).float().numpy(), np.roll(x.float().numpy(), 1, 0))
