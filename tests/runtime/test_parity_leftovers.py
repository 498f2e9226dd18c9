"""PyTorch behaviours earlier sweeps found onnxnn without: one table row per behaviour, on both executors.

- ``where`` takes a bool condition (uint8 with a deprecation warning); other dtypes are RuntimeErrors.
- ``index_copy`` takes an int64 index only, ``index_add`` int32 or int64 (``index_select`` int32 too).
- ``tensor_split`` takes a tensor of split points only as int64, 0-d or 1-d.
- ``soft_margin_loss`` at ``x * y = -inf``: the loss is inf as PyTorch's; its gradient is the limit
  ``-y`` where PyTorch's ``-y e^z / (1 + e^z)`` makes ``inf / inf``, NaN (a deliberate difference).
- ``nanmean``'s gradient over an all-NaN slice is NaN (``G / 0`` times ``x is not NaN``).
- ``prelu`` does not promote: an input and weight of two dtypes (or integers) are refused.
- ``fractional_max_pool2d/3d`` take ``_random_samples`` only in the input's dtype.
- The adaptive pools give an empty result for an output size of 0, whose backward PyTorch refuses.

The expected messages are PyTorch 2.13's, copied from it; values come from numpy formulas.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

EXECUTORS = ["onnxruntime", "kernels"]
T = onnxnn.tensor


def _index(dtype):
    return T([0, 2], dtype=dtype)


def _refused_index_dtypes(method: str, message: str, cases: list) -> list:
    """``ERROR_CASES`` entries: ``zeros(4, 3).<method>(0, index, ones(2, 3))`` refusing each index dtype."""
    return [
        (
            f"{method}_{name}_index",
            lambda dtype=dtype: getattr(onnxnn.zeros(4, 3), method)(0, _index(dtype), onnxnn.ones(2, 3)),
            RuntimeError,
            message.format(word=word),
        )
        for name, dtype, word in cases
    ]


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    # where: the condition's dtype
    *[
        (
            f"where_{name}_condition",
            lambda dtype=dtype: onnxnn.where(T([1, 0]).to(dtype), T([1.0, 2.0]), T([3.0, 4.0])),
            RuntimeError,
            f"where expected condition to be a boolean tensor, but got a tensor with dtype {word}",
        )
        for name, dtype, word in [
            ("int64", onnxnn.int64, "Long"),
            ("int32", onnxnn.int32, "Int"),
            ("float32", onnxnn.float32, "Float"),
        ]
    ],
    (
        "where_method_int64_condition",
        lambda: T([1.0, 2.0]).where(T([1, 0]), T([3.0, 4.0])),
        RuntimeError,
        "where expected condition to be a boolean tensor, but got a tensor with dtype Long",
    ),
    (
        "where_scalars_float_condition",
        lambda: onnxnn.where(T([1.0, 0.0]), 1.0, 0.0),
        RuntimeError,
        "where expected condition to be a boolean tensor, but got a tensor with dtype Float",
    ),
    # index_copy: int64 only
    *_refused_index_dtypes(
        "index_copy",
        "index_copy_(): Expected a long tensor for index, but got {word}",
        [
            ("int32", onnxnn.int32, "Int"),
            ("int16", onnxnn.int16, "Short"),
            ("uint8", onnxnn.uint8, "Byte"),
            ("float32", onnxnn.float32, "Float"),
        ],
    ),
    (
        "index_copy__int32_index",
        lambda: onnxnn.zeros(4, 3).index_copy_(0, _index(onnxnn.int32), onnxnn.ones(2, 3)),
        RuntimeError,
        "index_copy_(): Expected a long tensor for index, but got Int",
    ),
    (
        "torch_index_copy_int32_index",
        lambda: onnxnn.index_copy(onnxnn.zeros(4, 3), 0, _index(onnxnn.int32), onnxnn.ones(2, 3)),
        RuntimeError,
        "index_copy_(): Expected a long tensor for index, but got Int",
    ),
    # index_add: int32 or int64
    *_refused_index_dtypes(
        "index_add",
        "index_add_(): Expected dtype int32/int64 for index but got: {word}",
        [
            ("int16", onnxnn.int16, "Short"),
            ("uint8", onnxnn.uint8, "Byte"),
            ("float32", onnxnn.float32, "Float"),
            ("bool", onnxnn.bool, "Bool"),
        ],
    ),
    (
        "index_add__int16_index",
        lambda: onnxnn.zeros(4, 3).index_add_(0, _index(onnxnn.int16), onnxnn.ones(2, 3)),
        RuntimeError,
        "index_add_(): Expected dtype int32/int64 for index but got: Short",
    ),
    (
        "index_fill_int32_index",
        lambda: onnxnn.zeros(4, 3).index_fill(0, _index(onnxnn.int32), 1.0),
        IndexError,
        "index_fill_(): Expected dtype int64 for index.",
    ),
    # tensor_split: an int64 tensor of at most one dim
    *[
        (
            f"tensor_split_{name}",
            lambda points=points: onnxnn.tensor_split(onnxnn.arange(10.0), points()),
            RuntimeError,
            f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got {word}",
        )
        for name, points, word in [
            ("int32_sections", lambda: T(3, dtype=onnxnn.int32), "Int"),
            ("int32_indices", lambda: T([2, 5], dtype=onnxnn.int32), "Int"),
            ("float_sections", lambda: T(3.0), "Float"),
            ("float_indices", lambda: T([2.0, 5.0]), "Float"),
            ("empty_float_indices", lambda: T([]), "Float"),
            ("bool_indices", lambda: T([True]), "Bool"),
            ("uint8_indices", lambda: T([2], dtype=onnxnn.uint8), "Byte"),
        ]
    ],
    # tensor_split: an int of sections or ints of indices (PyTorch's overloads refuse floats and bools)
    *[
        (
            f"tensor_split_python_{name}",
            lambda points=points: onnxnn.tensor_split(onnxnn.arange(10.0), points),
            TypeError,
            "tensor_split(): argument 'indices_or_sections' must be an int, a tuple of ints or a Tensor",
        )
        for name, points in [
            ("float_sections", 2.0),
            ("bool_sections", True),
            ("float_index", [2.0]),
            ("float_among_ints", (1, 2.5)),
            ("bool_index", [True]),
            ("string", "a"),
        ]
    ],
    (
        "tensor_split_method_int32",
        lambda: onnxnn.arange(10.0).tensor_split(T([2], dtype=onnxnn.int32)),
        RuntimeError,
        "tensor_split expected tensor_indices_or_sections to have dtype of long, but got Int",
    ),
    (
        "tensor_split_2d_indices",
        lambda: onnxnn.tensor_split(onnxnn.arange(10.0), T([[2, 5]])),
        RuntimeError,
        "tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor, "
        "but got a tensor with 2 dims",
    ),
    (
        "tensor_split_points_checked_before_dim",  # PyTorch's order: the points, then dim's range
        lambda: onnxnn.tensor_split(onnxnn.arange(10.0), T([[2]]), dim=3),
        RuntimeError,
        "but got a tensor with 2 dims",
    ),
    (
        "tensor_split_input_checked_before_points",
        lambda: onnxnn.tensor_split(T(1.0), T([1], dtype=onnxnn.int32)),
        RuntimeError,
        "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims",
    ),
    # prelu: no promotion, no integers
    *[
        (
            f"prelu_{name}",
            lambda x=x, w=w: F.prelu(T([[-1.0, 2.0]], dtype=x), T([0.25]).to(w)),
            RuntimeError,
            f"prelu: Type promoting not supported. Got {words}",
        )
        for name, x, w, words in [
            ("float32_float64", onnxnn.float32, onnxnn.float64, "Float and Double"),
            ("float64_float32", onnxnn.float64, onnxnn.float32, "Double and Float"),
            ("float16_float32", onnxnn.float16, onnxnn.float32, "Half and Float"),
            ("float32_bfloat16", onnxnn.float32, onnxnn.bfloat16, "Float and BFloat16"),
            ("float32_int64", onnxnn.float32, onnxnn.int64, "Float and Long"),
        ]
    ],
    (
        "prelu_dtypes_checked_before_shapes",
        lambda: F.prelu(onnxnn.ones(2, 3), onnxnn.ones(1, 1, dtype=onnxnn.float64)),
        RuntimeError,
        "prelu: Type promoting not supported. Got Float and Double",
    ),
    (
        "prelu_module_double_input",
        lambda: nn.PReLU()(onnxnn.ones(2, 3, dtype=onnxnn.float64)),
        RuntimeError,
        "prelu: Type promoting not supported. Got Double and Float",
    ),
    (
        "prelu_method",
        lambda: T([[-1.0, 2.0]]).prelu(T([0.25], dtype=onnxnn.float64)),
        RuntimeError,
        "prelu: Type promoting not supported. Got Float and Double",
    ),
    (
        "prelu_int64",
        lambda: F.prelu(T([[-1, 2]]), T([1])),
        NotImplementedError,
        "\"prelu_cpu\" not implemented for 'Long'",
    ),
    (
        "prelu_int32",
        lambda: F.prelu(T([[-1, 2]], dtype=onnxnn.int32), T([1], dtype=onnxnn.int32)),
        NotImplementedError,
        "\"prelu_cpu\" not implemented for 'Int'",
    ),
    (
        "prelu_number_weight",
        lambda: F.prelu(onnxnn.ones(2, 3), 0.25),
        TypeError,
        "prelu(): argument 'weight' must be Tensor, not float",
    ),
    # fractional_max_pool: samples in the input's dtype
    *[
        (
            f"fractional_max_pool{rank}d_{name}",
            lambda rank=rank, x=x, s=s: getattr(F, f"fractional_max_pool{rank}d")(
                onnxnn.ones((1, 2) + (8,) * rank, dtype=x),
                2,
                output_size=4,
                _random_samples=onnxnn.full((1, 2, rank), 0.5, dtype=s),
            ),
            RuntimeError,
            "Expect _random_samples to have the same dtype as input",
        )
        for rank in (2, 3)
        for name, x, s in [
            ("float32_float64", onnxnn.float32, onnxnn.float64),
            ("float64_float32", onnxnn.float64, onnxnn.float32),
            ("float16_float32", onnxnn.float16, onnxnn.float32),
            ("float32_int64", onnxnn.float32, onnxnn.int64),
        ]
    ],
    (
        "fractional_max_pool3d_unbatched_float32_float64",
        lambda: F.fractional_max_pool3d(
            onnxnn.ones(2, 8, 8, 8), 2, output_size=4, _random_samples=onnxnn.full((1, 2, 3), 0.5, dtype=onnxnn.float64)
        ),
        RuntimeError,
        "Expect _random_samples to have the same dtype as input",
    ),
    (
        "fractional_max_pool2d_module_float64_samples",
        lambda: nn.FractionalMaxPool2d(
            2, output_size=4, _random_samples=onnxnn.full((1, 2, 2), 0.5, dtype=onnxnn.float64)
        )(onnxnn.ones(1, 2, 8, 8)),
        RuntimeError,
        "Expect _random_samples to have the same dtype as input",
    ),
    (
        "fractional_max_pool2d_samples_dtype_before_their_shape",
        lambda: F.fractional_max_pool2d(
            onnxnn.ones(2, 3, 8, 8), 2, output_size=4, _random_samples=onnxnn.full((1, 3, 2), 0.5, dtype=onnxnn.float64)
        ),
        RuntimeError,
        "Expect _random_samples to have the same dtype as input",
    ),
    # adaptive pools: a negative output size
    (
        "adaptive_avg_pool2d_negative_size",
        lambda: F.adaptive_avg_pool2d(onnxnn.ones(2, 3, 4, 4), (-1, 2)),
        RuntimeError,
        "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {-1, 2}",
    ),
    (
        "adaptive_max_pool2d_negative_size",
        lambda: F.adaptive_max_pool2d(onnxnn.ones(2, 3, 4, 4), (-1, 2)),
        RuntimeError,
        "Trying to create tensor with negative dimension -1: [2, 3, -1, 2]",
    ),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[case[0] for case in ERROR_CASES])
def test_refused_as_pytorch_refuses(case_id, call, error, message, executor):
    with onnxnn.set_executor(executor):
        with pytest.raises(error) as info:
            call()
    assert message in str(info.value)


# ---------------------------------------------------------------- what PyTorch accepts


@pytest.mark.parametrize("executor", EXECUTORS)
def test_where_takes_a_uint8_condition_with_pytorchs_deprecation_warning(executor):
    condition = np.array([1, 0, 3], np.uint8)
    a, b = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    with onnxnn.set_executor(executor):
        with pytest.warns(UserWarning, match="where received a uint8 condition tensor. This behavior is deprecated"):
            result = onnxnn.where(T(condition), T(a), T(b))
        np.testing.assert_array_equal(result.numpy(), np.where(condition != 0, a, b))
        with pytest.warns(UserWarning, match="uint8 condition"):
            scalars = onnxnn.where(T(condition), 1.0, 0.0)
        np.testing.assert_array_equal(scalars.numpy(), (condition != 0).astype(np.float32))


INDEX_PROGRAMS = {
    # name -> (program of (input, index, source), numpy reference)
    "index_add": (lambda x, i, s: x.index_add(0, i, s), lambda x, i, s: _np_index_add(x, i, s)),
    "index_select": (lambda x, i, s: x.index_select(0, i), lambda x, i, s: x[i]),
    "index_copy": (lambda x, i, s: x.index_copy(0, i, s), lambda x, i, s: _np_index_copy(x, i, s)),
}
ACCEPTED_INDEX_DTYPES = [
    ("index_add", onnxnn.int32),
    ("index_add", onnxnn.int64),
    ("index_select", onnxnn.int32),
    ("index_copy", onnxnn.int64),
]


def _np_index_add(x, i, s):
    out = x.copy()
    np.add.at(out, i, s)
    return out


def _np_index_copy(x, i, s):
    out = x.copy()
    out[i] = s
    return out


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, dtype", ACCEPTED_INDEX_DTYPES, ids=[f"{n}-{d}" for n, d in ACCEPTED_INDEX_DTYPES])
def test_index_dtypes_pytorch_accepts(name, dtype, executor):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    i = np.array([3, 1])
    s = np.full((2, 3), 10.0, np.float32)
    program, reference = INDEX_PROGRAMS[name]
    with onnxnn.set_executor(executor):
        result = program(T(x), T(i, dtype=dtype), T(s))
        np.testing.assert_array_equal(result.numpy(), reference(x, i, s))


TENSOR_SPLIT_POINTS = [
    ("sections_0d", T(3), [4, 3, 3]),
    ("indices_1d", T([2, 5]), [2, 3, 5]),
    ("one_index_1d", T([3]), [3, 7]),
    ("no_indices", T([], dtype=onnxnn.int64), [10]),
    # Python and numpy integers, as PyTorch's int and int-list overloads take them
    ("python_sections", 3, [4, 3, 3]),
    ("numpy_sections", np.int32(3), [4, 3, 3]),
    ("numpy_indices", [np.int64(2), 5], [2, 3, 5]),
    ("negative_index", (-3,), [7, 3]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, points, lengths", TENSOR_SPLIT_POINTS, ids=[c[0] for c in TENSOR_SPLIT_POINTS])
def test_tensor_split_takes_int64_tensors_and_integers(case_id, points, lengths, executor):
    with onnxnn.set_executor(executor):
        parts = onnxnn.tensor_split(onnxnn.arange(10.0), points)
        assert [part.numel() for part in parts] == lengths
        np.testing.assert_array_equal(np.concatenate([part.numpy() for part in parts]), np.arange(10.0))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float16], ids=str)
def test_prelu_of_one_dtype_and_under_autocast(dtype, executor):
    x = np.array([[-2.0, 3.0], [0.5, -1.0]], np.float32)
    with onnxnn.set_executor(executor):
        result = F.prelu(T(x, dtype=dtype), T([0.25], dtype=dtype))
        assert result.dtype == dtype
        np.testing.assert_array_equal(result.numpy().astype(np.float32), np.where(x > 0, x, 0.25 * x))
        # Autocast casts both to bfloat16 first, as PyTorch's dispatcher does: nothing to refuse.
        with onnxnn.autocast("cpu"):
            mixed = F.prelu(T(x).to(onnxnn.bfloat16), T([0.25]))
            assert mixed.dtype == onnxnn.bfloat16
            with pytest.raises(RuntimeError, match="Got Double and BFloat16"):  # float64 is never cast
                F.prelu(T(x, dtype=onnxnn.float64), T([0.25]))
        np.testing.assert_array_equal(mixed.float().numpy(), np.where(x > 0, x, 0.25 * x))


# ---------------------------------------------------------------- soft_margin_loss at infinities

INF = math.inf
# x = 100, y = -1: PyTorch's float32 e^100 overflows (loss inf, gradient NaN); the loss is 100.
SOFT_MARGIN_X = np.array([INF, -INF, INF, -INF, 0.5, 40.0, -40.0, -100.0, 100.0, 1e30, -1e30])
SOFT_MARGIN_Y = np.array([1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0, -1.0, -1.0, 1.0, -1.0])


def _soft_margin_reference(x, y):
    """``log(1 + e^(-yx))`` and its derivative ``-y / (1 + e^(yx))``, evaluated stably in float64; at
    ``yx = -inf`` the derivative is its limit ``-y`` (PyTorch's formula gives NaN there, inf / inf)."""
    z = -y * x
    with np.errstate(over="ignore"):
        return np.logaddexp(0.0, z), -y / (1.0 + np.exp(-z))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_soft_margin_loss_at_infinite_margins(reduction, dtype, executor):
    loss, gradient = _soft_margin_reference(SOFT_MARGIN_X, SOFT_MARGIN_Y)
    scale = 1.0 / SOFT_MARGIN_X.size if reduction == "mean" else 1.0
    expected = {"none": loss, "mean": loss.mean(), "sum": loss.sum()}[reduction]
    with onnxnn.set_executor(executor):
        x = T(SOFT_MARGIN_X, dtype=dtype, requires_grad=True)
        result = F.soft_margin_loss(x, T(SOFT_MARGIN_Y, dtype=dtype), reduction=reduction)
        result.sum().backward()
        got, grad = result.detach().numpy().astype(np.float64), x.grad.numpy().astype(np.float64)
    # float32 rounds the finite ones; a denormal derivative (e^-100) may flush to 0.
    tolerance = dict(rtol=1e-6, atol=1e-30) if dtype is onnxnn.float32 else dict(rtol=1e-14, atol=0)
    np.testing.assert_allclose(got, expected, **tolerance)
    np.testing.assert_allclose(grad, gradient * scale, **tolerance)
    assert np.isinf(loss[[1, 2]]).all() and np.isfinite(grad).all()


# ---------------------------------------------------------------- nanmean / nansum gradients

NAN = math.nan
NAN_INPUT = np.array([[NAN, NAN, NAN], [1.0, NAN, 3.0], [NAN, 2.0, NAN]])
NANMEAN_DIMS = [None, 1, 0, (0, 1), -1]


def _nanmean_gradient(x, dim, weights):
    """PyTorch's: ``G / count`` where x is not NaN, times 0 where it is; count 0 makes the slice NaN."""
    present = ~np.isnan(x)
    axes = tuple(range(x.ndim)) if dim is None else (dim,) if isinstance(dim, int) else dim
    count = present.sum(axis=axes, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (weights / count) * present


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=str)
@pytest.mark.parametrize("dim", NANMEAN_DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_nanmean_gradient_is_nan_over_an_all_nan_slice(keepdim, dim, dtype, executor):
    with onnxnn.set_executor(executor):
        x = T(NAN_INPUT, dtype=dtype, requires_grad=True)
        result = onnxnn.nanmean(x, dim, keepdim) if dim is not None else onnxnn.nanmean(x)
        weights = np.arange(1.0, result.numel() + 1).reshape(result.shape)
        result.backward(T(weights, dtype=dtype))
        grad = x.grad.numpy()
    kept = weights if keepdim or dim is None else np.expand_dims(weights, dim if isinstance(dim, int) else tuple(dim))
    np.testing.assert_allclose(grad, _nanmean_gradient(NAN_INPUT, dim, kept), rtol=1e-7)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("upstream", [INF, NAN, 2.0], ids=str)
def test_nansum_gradient_is_pytorchs_product(upstream, executor):
    # ``G * (x is not NaN)``: a non-finite G makes NaN where x is NaN (inf * 0), as PyTorch's.
    x_values = np.array([NAN, 1.0, 2.0])
    with onnxnn.set_executor(executor):
        x = T(x_values, requires_grad=True)
        (onnxnn.nansum(x) * upstream).backward()
        grad = x.grad.numpy()
    with np.errstate(invalid="ignore"):
        expected = np.float32(upstream) * (~np.isnan(x_values)).astype(np.float32)
    np.testing.assert_array_equal(grad, expected)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_nansum_gradient_of_finite_inputs_keeps_dtype_and_matches_differences(executor):
    with onnxnn.set_executor(executor):
        check_gradients(lambda x: onnxnn.nansum(x, 1, keepdim=True), [np.array([[NAN, 1.0, 2.0], [3.0, 4.0, NAN]])])
        x = T([NAN, 1.0, 2.0], requires_grad=True)
        onnxnn.nansum(x, dtype=onnxnn.float64).backward()
        assert x.grad.dtype == onnxnn.float32
        np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 1.0])


# ---------------------------------------------------------------- adaptive pools to a size of 0

ADAPTIVE_ZERO_CASES = [
    # function, input shape, output_size, PyTorch's grad_output sizes in its backward's refusal, empty dim
    ("adaptive_avg_pool1d", (2, 3, 4), 0, [2, 3, 1, 0], 3),
    ("adaptive_max_pool1d", (3, 4), 0, [3, 1, 0], 2),
    ("adaptive_avg_pool2d", (2, 3, 4, 4), (0, 3), [2, 3, 0, 3], 2),
    ("adaptive_max_pool2d", (2, 3, 4, 4), (3, 0), [2, 3, 3, 0], 3),
    ("adaptive_avg_pool2d", (3, 4, 4), (None, 0), [3, 4, 0], 2),
    ("adaptive_max_pool2d", (0, 3, 4, 4), (0, 2), [0, 3, 0, 2], 2),
    ("adaptive_avg_pool3d", (2, 3, 4, 4, 4), (0, 0, 0), [2, 3, 0, 0, 0], 2),
    ("adaptive_max_pool3d", (3, 4, 4, 4), (3, 3, 0), [3, 3, 3, 0], 3),
    ("adaptive_avg_pool2d", (2, 0, 4, 4), (2, 2), [2, 0, 2, 2], 1),  # empty channels: the same refusal
]


def _adaptive_shape(function, input_shape, output_size):
    rank = int(function[-2])
    sizes = [output_size] * rank if isinstance(output_size, int) else list(output_size)
    spatial = input_shape[-rank:]
    return tuple(input_shape[:-rank]) + tuple(size if out is None else out for size, out in zip(spatial, sizes))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "function, input_shape, output_size, grad_sizes, empty_dim",
    ADAPTIVE_ZERO_CASES,
    ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in ADAPTIVE_ZERO_CASES],
)
def test_adaptive_pool_to_size_zero_is_empty_and_its_backward_refused(
    function, input_shape, output_size, grad_sizes, empty_dim, executor
):
    pool = getattr(F, function)
    shape = _adaptive_shape(function, input_shape, output_size)
    with onnxnn.set_executor(executor):
        x = onnxnn.ones(input_shape, requires_grad=True)
        result = pool(x, output_size)
        assert tuple(result.shape) == shape and result.dtype == onnxnn.float32 and result.requires_grad
        assert result.detach().numpy().shape == shape
        if "max" in function:
            values, indices = pool(x.detach(), output_size, return_indices=True)
            assert tuple(values.shape) == shape and tuple(indices.shape) == shape
            assert indices.dtype == onnxnn.int64 and indices.numpy().shape == shape
        backward_name = function.replace("1d", "2d")
        with pytest.raises(RuntimeError) as info:
            result.sum().backward()
        assert str(info.value) == (
            f"{backward_name}_backward(): Expected grad_output to have non-zero size for non-batch dimensions, "
            f"but grad_output has sizes {grad_sizes} with dimension {empty_dim} being empty"
        )
        # A later backward is not disturbed by the refused one.
        y = onnxnn.ones(2, requires_grad=True)
        (y * 3).sum().backward()
        np.testing.assert_array_equal(y.grad.numpy(), [3.0, 3.0])


ZERO_SIZE_POOLS = {
    "avg_function": lambda x: F.adaptive_avg_pool2d(x, (0, 3)),
    "max_function": lambda x: F.adaptive_max_pool2d(x, (0, 3)),
    "avg_module": nn.AdaptiveAvgPool2d((0, 3)),
    "max_module": nn.AdaptiveMaxPool2d((0, 3)),
}


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float64, onnxnn.float16], ids=str)
@pytest.mark.parametrize("name", ZERO_SIZE_POOLS)
def test_adaptive_pool_to_size_zero_without_gradient(name, dtype, executor):
    with onnxnn.set_executor(executor):
        result = ZERO_SIZE_POOLS[name](onnxnn.ones(2, 3, 4, 4, dtype=dtype))
        assert tuple(result.shape) == (2, 3, 0, 3) and result.dtype == dtype and not result.requires_grad
        assert result.numpy().shape == (2, 3, 0, 3)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "function, input_shape",
    [("adaptive_avg_pool2d", (0, 3, 4, 4)), ("adaptive_max_pool2d", (0, 3, 4, 4)), ("adaptive_avg_pool2d", (0, 4, 4))],
)
def test_adaptive_pool_of_an_empty_batch_still_has_a_zero_gradient(function, input_shape, executor):
    # PyTorch refuses only an empty dim past the first: an empty batch (or unbatched channels) pools and
    # differentiates to an empty gradient.
    with onnxnn.set_executor(executor):
        x = onnxnn.ones(input_shape, requires_grad=True)
        getattr(F, function)(x, (2, 2)).sum().backward()
        assert tuple(x.grad.shape) == input_shape
