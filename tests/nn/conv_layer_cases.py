"""The convolution layer tests' cases and tolerance (test_conv_against_numpy.py,
test_conv_lazy_export_errors.py): the Conv*d and ConvTranspose*d cases, and Higham's bound for
sums of ``terms`` products, ``2 * gamma(terms) * (|x| conv |w| + |b|)``.
"""

from __future__ import annotations


import numpy as np
from tolerances import gamma

import onnxnn
from onnxnn import nn


def _values(tensor) -> np.ndarray:
    return np.asarray(
        tensor.detach().float().numpy()
        if tensor.dtype in (onnxnn.float16, onnxnn.bfloat16)
        else tensor.detach().numpy(),
        dtype=np.float64,
    )


def assert_within_conv_rounding(actual, expected, magnitude, terms, dtype) -> None:
    bound = 2 * gamma(terms + 1, dtype) * magnitude
    error = np.abs(np.asarray(actual, np.float64) - expected)
    assert actual.shape == expected.shape
    worst = np.argmax(error - bound)
    assert np.all(error <= bound), f"error {error.flat[worst]:.3g} exceeds the bound {bound.flat[worst]:.3g}"


CONV_CASES = [
    # id, class, positional arguments, keyword arguments, input shape
    ("1d", nn.Conv1d, (3, 4, 3), {}, (2, 3, 7)),
    (
        "1d_stride_dilation_groups",
        nn.Conv1d,
        (4, 6, 3),
        {"stride": 2, "dilation": 2, "groups": 2, "padding": 1},
        (2, 4, 11),
    ),
    ("1d_unbatched_same_even_kernel", nn.Conv1d, (2, 3, 4), {"padding": "same"}, (2, 9)),
    ("1d_circular", nn.Conv1d, (2, 2, 3), {"padding": 2, "padding_mode": "circular"}, (1, 2, 5)),
    (
        "2d_tuples_no_bias",
        nn.Conv2d,
        (3, 4, (2, 3)),
        {"stride": (2, 1), "padding": (1, 2), "bias": False},
        (2, 3, 6, 5),
    ),
    ("2d_valid_depthwise", nn.Conv2d, (4, 4, 3), {"padding": "valid", "groups": 4}, (1, 4, 5, 5)),
    ("2d_same_dilated", nn.Conv2d, (2, 3, (3, 4)), {"padding": "same", "dilation": (2, 1)}, (1, 2, 7, 6)),
    ("2d_reflect", nn.Conv2d, (2, 3, 3), {"padding": (1, 2), "padding_mode": "reflect"}, (1, 2, 5, 6)),
    (
        "2d_replicate_strided",
        nn.Conv2d,
        (2, 3, 3),
        {"padding": 2, "stride": 2, "padding_mode": "replicate"},
        (2, 2, 5, 4),
    ),
    ("2d_circular_same", nn.Conv2d, (2, 2, (2, 4)), {"padding": "same", "padding_mode": "circular"}, (1, 2, 4, 5)),
    ("2d_unbatched_reflect", nn.Conv2d, (2, 2, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 4, 4)),
    ("3d", nn.Conv3d, (2, 4, (2, 3, 2)), {"stride": (1, 2, 1), "padding": 1}, (1, 2, 4, 5, 3)),
    (
        "3d_reflect_groups",
        nn.Conv3d,
        (2, 4, 3),
        {"padding": 1, "padding_mode": "reflect", "groups": 2},
        (1, 2, 3, 4, 4),
    ),
]


TRANSPOSE_CASES = [
    # id, class, positional arguments, keyword arguments, input shape, forward's output_size
    ("1d_strided", nn.ConvTranspose1d, (3, 2, 3), {"stride": 2}, (2, 3, 4), None),
    (
        "1d_output_padding_dilation",
        nn.ConvTranspose1d,
        (2, 4, 3),
        {"stride": 3, "padding": 1, "output_padding": 2, "dilation": 2},
        (1, 2, 4),
        None,
    ),
    (
        "2d_groups_no_bias",
        nn.ConvTranspose2d,
        (4, 6, (3, 2)),
        {"stride": (2, 1), "padding": (1, 0), "groups": 2, "bias": False},
        (2, 4, 3, 4),
        None,
    ),
    ("2d_output_size", nn.ConvTranspose2d, (3, 2, 3), {"stride": 2, "padding": 1}, (1, 3, 4, 4), [8, 7]),
    ("2d_unbatched_output_size_with_channels", nn.ConvTranspose2d, (3, 2, 3), {"stride": 2}, (3, 4, 4), [2, 10, 9]),
    ("3d", nn.ConvTranspose3d, (2, 3, 2), {"stride": 2}, (1, 2, 2, 3, 2), None),
]
