"""The pooling tests' numpy references, value generator and max-pool cases (test_pooling_windows.py,
test_pooling_dtypes_export_errors.py, test_fractional_max_pool.py).

The window-by-window numpy pooling is written from PyTorch's documentation: windows start at
``i * stride - padding`` and take every ``dilation``-th element; ceil_mode keeps a last partial window
unless it starts in the end padding; ``count_include_pad`` counts the padding (not ceil_mode's
overhang) in the divisor; adaptive windows are ``[floor(i * L / out), ceil((i + 1) * L / out))``; max
pooling picks the first maximum in row-major window order and reports its position flattened per
``(n, c)`` plane. Sums of ``k`` terms are held to Higham's ``2 * gamma(k) * sum |x|``.
"""

from __future__ import annotations

import numpy as np
from tolerances import gamma

import onnxnn
from onnxnn import nn

RNG = np.random.default_rng(21)


EXECUTOR_DTYPES = [("onnxruntime", onnxnn.float32), ("kernels", onnxnn.float32), ("kernels", onnxnn.float64)]


EXECUTOR_DTYPE_IDS = ["onnxruntime-float32", "kernels-float32", "kernels-float64"]


def distinct(*shape) -> np.ndarray:
    """Values without ties (a max pool's choice and its gradient are then unambiguous)."""
    return RNG.permutation(np.prod(shape)).reshape(shape) * 0.25 - np.prod(shape) * 0.125


def _values(out) -> np.ndarray:
    return np.asarray(
        out.detach().float().numpy() if out.dtype in (onnxnn.float16, onnxnn.bfloat16) else out.detach().numpy(),
        dtype=np.float64,
    )


def _triple(value, rank):
    return list(value) if isinstance(value, (tuple, list)) else [value] * rank


def window_pool(
    x,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    mode="max",
    count_include_pad=True,
    divisor_override=None,
):
    """Pools ``(N, C, *spatial)`` window by window; returns (pooled, per-plane argmax)."""
    rank = x.ndim - 2
    kernel = _triple(kernel_size, rank)
    stride = kernel if stride is None else _triple(stride, rank)
    padding, dilation = _triple(padding, rank), _triple(dilation, rank)
    spatial = x.shape[2:]
    out = []
    for size, k, s, p, d in zip(spatial, kernel, stride, padding, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        length = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (length - 1) * s >= size + p:
            length -= 1
        out.append(length)
    pooled = np.zeros(x.shape[:2] + tuple(out))
    argmax = np.zeros(x.shape[:2] + tuple(out), dtype=np.int64)
    for n, c in np.ndindex(*x.shape[:2]):
        for position in np.ndindex(*out):
            values, flat, padded_taps = [], [], 0
            for offset in np.ndindex(*kernel):
                coord = [position[i] * stride[i] + offset[i] * dilation[i] - padding[i] for i in range(rank)]
                if all(-padding[i] <= coord[i] < spatial[i] + padding[i] for i in range(rank)):
                    padded_taps += 1
                if all(0 <= coord[i] < spatial[i] for i in range(rank)):
                    values.append(x[(n, c) + tuple(coord)])
                    flat.append(int(np.ravel_multi_index(coord, spatial)))
            if mode == "max" and not values:  # a window wholly in the padding (possible with dilation)
                pooled[(n, c) + position], argmax[(n, c) + position] = -np.inf, -1
            elif mode == "max":
                best = int(np.argmax(values))
                pooled[(n, c) + position], argmax[(n, c) + position] = values[best], flat[best]
            else:
                divisor = divisor_override or (padded_taps if count_include_pad else len(values))
                pooled[(n, c) + position] = sum(values) / divisor
    return pooled, argmax


def adaptive_pool(x, output_size, mode):
    """PyTorch's adaptive windows [floor(i * L / out), ceil((i + 1) * L / out)) per axis."""
    rank = x.ndim - 2
    sizes = [x.shape[2 + i] if o is None else o for i, o in enumerate(_triple(output_size, rank))]
    pooled = np.zeros(x.shape[:2] + tuple(sizes))
    argmax = np.zeros(x.shape[:2] + tuple(sizes), dtype=np.int64)
    for position in np.ndindex(*sizes):
        bounds = [
            (position[i] * x.shape[2 + i] // sizes[i], -(-(position[i] + 1) * x.shape[2 + i] // sizes[i]))
            for i in range(rank)
        ]
        window = x[(slice(None), slice(None)) + tuple(slice(a, b) for a, b in bounds)]
        flat_window = window.reshape(x.shape[:2] + (-1,))
        if mode == "max":
            local = np.argmax(flat_window, axis=2)  # the first maximum in row-major order
            pooled[(slice(None), slice(None)) + position] = np.max(flat_window, axis=2)
            coords = np.unravel_index(local, window.shape[2:])
            argmax[(slice(None), slice(None)) + position] = np.ravel_multi_index(
                tuple(coords[i] + bounds[i][0] for i in range(rank)), x.shape[2:]
            )
        else:
            pooled[(slice(None), slice(None)) + position] = flat_window.mean(axis=2)
    return pooled, argmax


def assert_within_sum_rounding(actual, expected, magnitude, terms, dtype=np.float32):
    bound = 2 * gamma(terms + 1, dtype) * magnitude
    assert actual.shape == expected.shape
    assert np.all(np.abs(actual - expected) <= bound), np.abs(actual - expected).max()


MAX_CASES = [
    # id, class, constructor arguments, input shape
    ("1d", nn.MaxPool1d, {"kernel_size": 3}, (2, 3, 10)),
    (
        "1d_stride_pad_dilation_ceil",
        nn.MaxPool1d,
        {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True},
        (1, 2, 12),
    ),
    ("2d", nn.MaxPool2d, {"kernel_size": 2}, (2, 2, 6, 5)),
    (
        "2d_tuples_ceil",
        nn.MaxPool2d,
        {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0), "ceil_mode": True},
        (1, 2, 6, 5),
    ),
    ("2d_unbatched_dilated", nn.MaxPool2d, {"kernel_size": 2, "stride": 1, "dilation": (2, 1)}, (3, 5, 4)),
    ("3d", nn.MaxPool3d, {"kernel_size": 2, "stride": (1, 2, 2), "padding": (0, 1, 1)}, (1, 2, 3, 4, 5)),
]
