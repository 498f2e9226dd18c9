"""FractionalMaxPool2d/3d: PyTorch's pseudo-random windows, values and indices, gradients, errors.

Expected values come from Graham's fractional max pooling written below with PyTorch's interval
formula; given the same ``_random_samples`` the result must equal PyTorch's exactly (max pooling
selects, so there is no rounding). Gradients are checked against float64 finite differences on
both executors.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .pooling_cases import EXECUTOR_DTYPE_IDS, EXECUTOR_DTYPES, RNG, _triple, distinct

# ---------------------------------------------------------------- fractional max pooling


def fractional_reference(x, kernel, sizes, samples, dtype):
    """Graham's fractional max pooling with PyTorch's intervals: along an axis of length L with
    output length n, window i starts at int((i + u) * alpha) - int(u * alpha), alpha = (L - k) / (n - 1),
    in the input's float type, and the last window ends at L. PyTorch's samples per plane are
    (width, height) in 2-d and (time, height, width) in 3-d."""
    rank = len(kernel)
    order = [1, 0] if rank == 2 else [0, 1, 2]
    pooled = np.zeros(x.shape[:2] + tuple(sizes))
    argmax = np.zeros(x.shape[:2] + tuple(sizes), dtype=np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        starts = []
        for axis in range(rank):
            size, out, k, u = x.shape[2 + axis], sizes[axis], kernel[axis], dtype(samples[n, c, order[axis]])
            alpha = dtype(size - k) / dtype(out - 1) if out > 1 else dtype(0)
            starts.append([int((dtype(i) + u) * alpha) - int(u * alpha) for i in range(out - 1)] + [size - k])
        for position in np.ndindex(*sizes):
            corner = [starts[a][position[a]] for a in range(rank)]
            window = x[(n, c) + tuple(slice(b, b + k) for b, k in zip(corner, kernel))]
            local = np.unravel_index(np.argmax(window), window.shape)  # the first maximum
            pooled[(n, c) + position] = window[local]
            argmax[(n, c) + position] = np.ravel_multi_index(tuple(b + i for b, i in zip(corner, local)), x.shape[2:])
    return pooled, argmax


FRACTIONAL_CASES = [
    # id, class, kernel, output_size, output_ratio, input shape
    ("2d_size", nn.FractionalMaxPool2d, 3, (5, 4), None, (2, 3, 10, 9)),
    ("2d_ratio_rect_kernel", nn.FractionalMaxPool2d, (2, 3), None, (0.5, 0.7), (1, 2, 8, 9)),
    ("2d_unbatched_one_output_row", nn.FractionalMaxPool2d, 2, (1, 6), None, (2, 5, 7)),
    ("3d_size", nn.FractionalMaxPool3d, 2, (3, 4, 2), None, (1, 2, 6, 7, 5)),
]


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=EXECUTOR_DTYPE_IDS)
@pytest.mark.parametrize(
    "case_id, cls, kernel, output_size, output_ratio, input_shape",
    FRACTIONAL_CASES,
    ids=[c[0] for c in FRACTIONAL_CASES],
)
def test_fractional_max_pool_follows_pytorchs_intervals(
    case_id, cls, kernel, output_size, output_ratio, input_shape, executor, dtype
):
    rank = 2 if cls is nn.FractionalMaxPool2d else 3
    unbatched = len(input_shape) == rank + 1
    x = distinct(*input_shape)
    batch = 1 if unbatched else input_shape[0]
    samples = RNG.uniform(size=(batch, input_shape[-rank - 1], rank))
    layer = cls(
        kernel, output_size, output_ratio, return_indices=True, _random_samples=onnxnn.tensor(samples, dtype=dtype)
    )
    with onnxnn.set_executor(executor):
        values, indices = layer(onnxnn.tensor(x, dtype=dtype))
        values, indices = values.numpy(), indices.numpy()
    kernel = _triple(kernel, rank)
    sizes = list(output_size) if output_size else [int(size * r) for size, r in zip(input_shape[-rank:], output_ratio)]
    expected, expected_indices = fractional_reference(
        x[None] if unbatched else x, kernel, sizes, samples.astype(dtype.numpy_dtype), dtype.numpy_dtype.type
    )
    if unbatched:
        expected, expected_indices = expected[0], expected_indices[0]
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(indices, expected_indices)


def test_fractional_max_pool_draws_samples_per_call_and_picks_window_maxima():
    x = distinct(2, 3, 9, 9)
    values, indices = F.fractional_max_pool2d(onnxnn.tensor(x), 2, output_size=5, return_indices=True)
    again = F.fractional_max_pool2d(onnxnn.tensor(x), 2, output_size=5, return_indices=True)[1]
    assert values.shape == (2, 3, 5, 5)
    picked = np.take_along_axis(x.reshape(2, 3, -1), indices.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(values.numpy(), picked.reshape(values.shape))
    # 12 fresh samples per call; equal windows for all six planes would be a coincidence.
    assert not np.array_equal(indices.numpy(), again.numpy())


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_fractional_max_pool_gradients_match_finite_differences(executor):
    samples = onnxnn.tensor(RNG.uniform(size=(1, 2, 3)), dtype=onnxnn.float64)
    with onnxnn.set_executor(executor):
        check_gradients(nn.FractionalMaxPool2d(2, (3, 4), _random_samples=samples[:, :, :2]), [distinct(1, 2, 6, 7)])
        check_gradients(nn.FractionalMaxPool3d(2, (2, 2, 3), _random_samples=samples), [distinct(1, 2, 4, 4, 5)])


def test_fractional_max_pool_keeps_given_samples_as_a_buffer():
    samples = onnxnn.rand(1, 2, 2)
    assert list(nn.FractionalMaxPool2d(2, 3, _random_samples=samples).state_dict()) == ["_random_samples"]
    assert list(nn.FractionalMaxPool2d(2, 3).state_dict()) == []
    assert repr(nn.FractionalMaxPool3d(2, output_ratio=0.5)) == "FractionalMaxPool3d()"


def test_samples_for_a_larger_batch_serve_the_first_images():
    # As PyTorch: a module's fixed samples, drawn for its largest batch, serve smaller ones.
    x = onnxnn.tensor(distinct(2, 2, 6, 6))
    samples = onnxnn.rand(5, 2, 2, dtype=onnxnn.float64)  # in the input's dtype, as PyTorch requires
    pooled = F.fractional_max_pool2d(x, 2, 3, _random_samples=samples)
    np.testing.assert_array_equal(pooled.numpy(), F.fractional_max_pool2d(x, 2, 3, _random_samples=samples[:2]).numpy())


ERROR_CASES = [
    (
        "fractional_no_size",
        lambda: nn.FractionalMaxPool2d(2),
        ValueError,
        "FractionalMaxPool2d requires specifying either an output size, or a pooling ratio",
    ),
    (
        "fractional_both",
        lambda: nn.FractionalMaxPool2d(2, 3, 0.5),
        ValueError,
        "only one of output_size and output_ratio may be specified",
    ),
    (
        "fractional_ratio",
        lambda: nn.FractionalMaxPool3d(2, output_ratio=1.5),
        ValueError,
        "output_ratio must be between 0 and 1 (got 1.5)",
    ),
    (
        "fractional_pool_too_large",
        lambda: F.fractional_max_pool2d(onnxnn.randn(1, 1, 5, 5), 3, (4, 3)),
        RuntimeError,
        "fractional_max_pool2d_out(): pool height 3 too large relative to input height 5",
    ),
    (
        "fractional_samples_batch",
        lambda: F.fractional_max_pool2d(onnxnn.randn(3, 2, 6, 6), 2, 3, _random_samples=onnxnn.rand(2, 2, 2)),
        RuntimeError,
        "Expect _random_samples.size(0) no less then input batch size.",
    ),
    (
        "fractional_samples_channels",
        lambda: F.fractional_max_pool2d(onnxnn.randn(1, 2, 6, 6), 2, 3, _random_samples=onnxnn.rand(1, 3, 2)),
        RuntimeError,
        "Expect _random_samples.size(1) equals to input channel size.",
    ),
    (
        "fractional_3d_strict",
        lambda: F.fractional_max_pool3d(onnxnn.randn(1, 1, 5, 5, 5), 2, (4, 3, 3)),
        RuntimeError,
        "fractional_max_pool3d_out(): pool time 2 too large relative to input time 5",
    ),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


# ---------------------------------------------------------------- against PyTorch, where installed


@pytest.mark.parametrize(
    "rank, kernel, output_size, input_shape",
    [
        (2, 3, (5, 4), (2, 3, 10, 9)),
        (2, (2, 3), (6, 3), (1, 2, 7, 8)),
        (3, 2, (3, 4, 5), (1, 2, 6, 7, 8)),
    ],
)
def test_fractional_max_pool_agrees_with_pytorch(rank, kernel, output_size, input_shape):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(input_shape)
    samples = RNG.uniform(size=(input_shape[0], input_shape[1], rank))
    function = getattr(torch.nn.functional, f"fractional_max_pool{rank}d")
    for dtype, torch_dtype in ((np.float32, torch.float32), (np.float64, torch.float64)):
        expected, expected_indices = function(
            torch.tensor(x.astype(dtype)),
            kernel,
            output_size,
            return_indices=True,
            _random_samples=torch.tensor(samples.astype(dtype)),
        )
        values, indices = getattr(F, f"fractional_max_pool{rank}d")(
            onnxnn.tensor(x.astype(dtype)),
            kernel,
            output_size,
            return_indices=True,
            _random_samples=onnxnn.tensor(samples.astype(dtype)),
        )
        np.testing.assert_array_equal(values.numpy(), expected.numpy())
        np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())


@pytest.mark.parametrize("rank", [2, 3])
def test_with_indices_form_returns_values_and_indices(rank):
    x = onnxnn.tensor(distinct(*((1, 2) + (6,) * rank)))
    samples = onnxnn.rand(1, 2, rank, dtype=onnxnn.float64)  # in the input's dtype, as PyTorch requires
    function = getattr(F, f"fractional_max_pool{rank}d")
    values, indices = getattr(F, f"fractional_max_pool{rank}d_with_indices")(x, 2, 3, _random_samples=samples)
    expected_values, expected_indices = function(x, 2, 3, return_indices=True, _random_samples=samples)
    np.testing.assert_array_equal(values.numpy(), expected_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
