"""Resampling and padding of integer and bool dtypes, as PyTorch's CPU kernels treat them.

- ``F.interpolate`` of a uint8 image in ``bilinear`` or ``bicubic`` mode is two separable passes, the
  width first, each rounded to the nearest integer (halves up) and clamped to ``[0, 255]``: bicubic's
  overshoot past 0 or 255 is clipped between the passes, not only at the end. The reference below is
  that in numpy, with each axis's interpolation matrix written from PyTorch's formulas (half-pixel
  source ``(i + 0.5) * in / out - 0.5``; linear clamps it at 0, cubic is Keys' kernel with
  ``a = -0.75`` and taps clamped to the edges). At a factor of 2 every weight is a multiple of 1/256,
  so both executors must give it exactly.
- ``F.interpolate`` resamples no other integer dtype (nor bool), and uint8 only in ``nearest``,
  ``nearest-exact``, ``bilinear`` and ``bicubic``: NotImplementedError, as PyTorch's kernels.
- ``F.pad`` in ``reflect`` and ``replicate`` mode refuses bool (NotImplementedError); ``circular``
  pads it.
- ``F.unfold`` and ``F.fold`` (im2col, col2im) take floating and bool tensors; integers are refused
  with NotImplementedError. ``adaptive_avg_pool*d`` with an ``output_size`` of the wrong length raises
  RuntimeError, as the max pools do.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F

from .layer_checks import EXECUTORS


def keys(distance: np.ndarray, a: float = -0.75) -> np.ndarray:
    d = np.abs(distance)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def axis_matrix(size_in: int, size_out: int, mode: str) -> np.ndarray:
    """PyTorch's half-pixel ``(size_out, size_in)`` interpolation matrix of one axis."""
    matrix = np.zeros((size_out, size_in))
    for index in range(size_out):
        source = (index + 0.5) * size_in / size_out - 0.5
        if mode == "bilinear":
            source = max(source, 0.0)
            low = int(np.floor(source))
            fraction = source - low
            matrix[index, low] += 1 - fraction
            matrix[index, min(low + 1, size_in - 1)] += fraction
        else:
            low = int(np.floor(source))
            fraction = source - low
            for offset in (-1, 0, 1, 2):
                matrix[index, np.clip(low + offset, 0, size_in - 1)] += keys(offset - fraction)
    return matrix


def uint8_reference(x: np.ndarray, size_out: tuple[int, int], mode: str) -> np.ndarray:
    """Width pass, round and clamp, height pass, round and clamp."""

    def rounded(values: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(values + 0.5), 0, 255)

    columns = axis_matrix(x.shape[3], size_out[1], mode)
    rows = axis_matrix(x.shape[2], size_out[0], mode)
    wide = rounded(x.astype(np.float64) @ columns.T)
    return rounded(np.einsum("oh,nchw->ncow", rows, wide)).astype(np.uint8)


def checkerboard(height: int, width: int) -> np.ndarray:
    """0/255 stripes and blocks: bicubic overshoots both ends along both axes."""
    rng = np.random.default_rng(3)
    board = (np.add.outer(np.arange(height) // 2, np.arange(width)) % 2) * 255
    noisy = np.stack([board, 255 - board, rng.integers(0, 256, (height, width))])
    return noisy[None].astype(np.uint8)


# (id, mode, input (height, width), output (height, width))
UINT8_CASES = [
    ("bicubic-up-2", "bicubic", (5, 6), (10, 12)),
    ("bicubic-wide-only", "bicubic", (4, 7), (4, 14)),
    ("bicubic-tall-only", "bicubic", (6, 3), (12, 3)),
    ("bilinear-up-2", "bilinear", (5, 6), (10, 12)),
    ("bilinear-up-4", "bilinear", (3, 4), (12, 16)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, mode, size_in, size_out", UINT8_CASES, ids=[case[0] for case in UINT8_CASES])
def test_uint8_resampling_is_two_rounded_passes(executor, case_id, mode, size_in, size_out):
    x = checkerboard(*size_in)
    expected = uint8_reference(x, size_out, mode)
    with onnxnn.set_executor(executor):
        by_size = F.interpolate(onnxnn.tensor(x), size=size_out, mode=mode).numpy()
        factors = (size_out[0] / size_in[0], size_out[1] / size_in[1])
        by_factor = F.interpolate(onnxnn.tensor(x), scale_factor=factors, mode=mode).numpy()
    assert by_size.dtype == np.uint8 and by_factor.dtype == np.uint8
    np.testing.assert_array_equal(by_size, expected)
    np.testing.assert_array_equal(by_factor, expected)


# (id, dtype, mode, input shape)
REFUSED_DTYPE_CASES = [
    ("int64-nearest", np.int64, "nearest", (1, 2, 3, 3)),
    ("int32-nearest-exact", np.int32, "nearest-exact", (1, 2, 3, 3)),
    ("int16-bilinear", np.int16, "bilinear", (1, 2, 3, 3)),
    ("int8-bicubic", np.int8, "bicubic", (1, 2, 3, 3)),
    ("bool-nearest", np.bool_, "nearest", (1, 2, 3, 3)),
    ("int64-nearest-1d", np.int64, "nearest", (1, 2, 3)),
    ("uint8-linear", np.uint8, "linear", (1, 2, 3)),
    ("uint8-trilinear", np.uint8, "trilinear", (1, 1, 2, 3, 3)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "case_id, dtype, mode, shape", REFUSED_DTYPE_CASES, ids=[case[0] for case in REFUSED_DTYPE_CASES]
)
def test_interpolate_refuses_the_integer_dtypes_pytorch_refuses(executor, case_id, dtype, mode, shape):
    x = onnxnn.tensor(np.ones(shape, dtype=dtype))
    with onnxnn.set_executor(executor), pytest.raises(NotImplementedError, match="not implemented for"):
        F.interpolate(x, scale_factor=2, mode=mode).numpy()


# (id, input shape, pad, mode, kernel named)
BOOL_PAD_CASES = [
    ("reflect-1d", (1, 2, 5), (1, 2), "reflect", "reflection_pad1d"),
    ("reflect-2d", (1, 2, 4, 5), (1, 1, 2, 0), "reflect", "reflection_pad2d"),
    ("reflect-3d-unbatched", (2, 3, 4, 5), (1, 1, 1, 1, 1, 1), "reflect", "reflection_pad3d"),
    ("replicate-1d-unbatched", (2, 5), (3, 0), "replicate", "replication_pad1d"),
    ("replicate-2d", (1, 2, 4, 5), (0, 1, 1, 1), "replicate", "replication_pad2d"),
    ("replicate-3d", (1, 1, 2, 3, 4), (1, 0, 0, 1, 1, 0), "replicate", "replication_pad3d"),
]


@pytest.mark.parametrize("case_id, shape, pad, mode, kernel", BOOL_PAD_CASES, ids=[case[0] for case in BOOL_PAD_CASES])
def test_reflect_and_replicate_refuse_bool(case_id, shape, pad, mode, kernel):
    x = onnxnn.tensor(np.ones(shape, dtype=bool))
    with pytest.raises(NotImplementedError, match=f"\"{kernel}\" not implemented for 'Bool'"):
        F.pad(x, pad, mode)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_circular_pads_bool(executor):
    x = np.arange(10).reshape(1, 2, 5) % 3 == 0
    with onnxnn.set_executor(executor):
        padded = F.pad(onnxnn.tensor(x), (2, 1), "circular").numpy()
    np.testing.assert_array_equal(padded, np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="wrap"))


BLOCK_CASES = [
    # (function, argument shape, kernel name in the refusal)
    (lambda x: F.unfold(x, 2), (1, 1, 4, 4), "im2col_out_cpu"),
    (lambda x: F.fold(x, (3, 3), 2), (1, 4, 4), "col2im_out_cpu"),
]


@pytest.mark.parametrize("function, shape, kernel", BLOCK_CASES)
@pytest.mark.parametrize("dtype, name", [(onnxnn.int64, "Long"), (onnxnn.int8, "Char"), (onnxnn.uint8, "Byte")])
def test_blocks_refuse_integers(function, shape, kernel, dtype, name):
    with pytest.raises(NotImplementedError, match=f"^\"{kernel}\" not implemented for '{name}'$"):
        function(onnxnn.ones(*shape, dtype=dtype))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_unfold_takes_bool(executor):
    image = np.arange(16).reshape(1, 1, 4, 4) % 3 == 0
    with onnxnn.set_executor(executor):
        blocks = F.unfold(onnxnn.tensor(image), 2).numpy()
    # Column (i, j) of the blocks is the 2x2 patch at (i, j), read row-major: (kh, kw) down the rows.
    expected = np.stack([image[0, 0, i : i + 2, j : j + 2].reshape(-1) for i in range(3) for j in range(3)], 1)
    assert blocks.dtype == np.bool_
    np.testing.assert_array_equal(blocks[0], expected)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_adaptive_average_pools_refuse_an_output_size_of_another_length(rank):
    pool = getattr(F, f"adaptive_avg_pool{rank}d")
    with pytest.raises(RuntimeError, match="output_size must be"):
        pool(onnxnn.zeros((1, 1) + (4,) * rank), (2,) * (rank + 1))
