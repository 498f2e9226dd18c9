"""Shuffles: PixelShuffle, PixelUnshuffle, ChannelShuffle and their functional forms.

Expected values come from the index formulas of PyTorch's documentation, evaluated element by
element in numpy: ``pixel_shuffle`` puts input channel ``c r^2 + i r + j`` at ``(c, h r + i, w r + j)``,
``pixel_unshuffle`` is its inverse, and ``channel_shuffle`` sends channel ``g (C / G) + k`` to
``k G + g``. Shuffles move values, so results are exact; gradients are checked against float64
finite differences on both executors.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS, exported_output

RNG = np.random.default_rng(51)


def pixel_shuffle_reference(x: np.ndarray, r: int) -> np.ndarray:
    *batch, channels, height, width = x.shape
    out = np.empty((*batch, channels // (r * r), height * r, width * r), x.dtype)
    for c, h, w, i, j in itertools.product(range(channels // (r * r)), range(height), range(width), range(r), range(r)):
        out[..., c, h * r + i, w * r + j] = x[..., c * r * r + i * r + j, h, w]
    return out


def pixel_unshuffle_reference(x: np.ndarray, r: int) -> np.ndarray:
    *batch, channels, height, width = x.shape
    out = np.empty((*batch, channels * r * r, height // r, width // r), x.dtype)
    for c, h, w, i, j in itertools.product(range(channels), range(height // r), range(width // r), range(r), range(r)):
        out[..., c * r * r + i * r + j, h, w] = x[..., c, h * r + i, w * r + j]
    return out


def channel_shuffle_reference(x: np.ndarray, groups: int) -> np.ndarray:
    per_group = x.shape[1] // groups
    out = np.empty_like(x)
    for g, k in itertools.product(range(groups), range(per_group)):
        out[:, k * groups + g] = x[:, g * per_group + k]
    return out


# (id, function, reference, factor, input shape)
CASES = [
    ("pixel-shuffle-4d", F.pixel_shuffle, pixel_shuffle_reference, 2, (2, 8, 2, 3)),
    ("pixel-shuffle-3d", F.pixel_shuffle, pixel_shuffle_reference, 3, (9, 2, 1)),
    ("pixel-shuffle-5d", F.pixel_shuffle, pixel_shuffle_reference, 2, (2, 1, 4, 2, 2)),
    ("pixel-unshuffle-4d", F.pixel_unshuffle, pixel_unshuffle_reference, 2, (1, 2, 4, 6)),
    ("pixel-unshuffle-3d", F.pixel_unshuffle, pixel_unshuffle_reference, 3, (1, 3, 6)),
    ("channel-shuffle-3d", F.channel_shuffle, channel_shuffle_reference, 3, (2, 6, 2)),
    ("channel-shuffle-4d", F.channel_shuffle, channel_shuffle_reference, 2, (1, 4, 2, 3)),
    ("channel-shuffle-5d", F.native_channel_shuffle, channel_shuffle_reference, 4, (1, 8, 1, 2, 1)),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("case_id, function, reference, factor, shape", CASES, ids=[c[0] for c in CASES])
def test_shuffles_move_elements_as_documented(case_id, function, reference, factor, shape, dtype, executor):
    x = RNG.standard_normal(shape)
    with onnxnn.set_executor(executor):
        actual = function(onnxnn.tensor(x, dtype=dtype), factor).numpy()
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    np.testing.assert_array_equal(actual, reference(x.astype(numpy_dtype), factor))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, function, reference, factor, shape", CASES, ids=[c[0] for c in CASES])
def test_shuffle_gradients_match_finite_differences(case_id, function, reference, factor, shape, executor):
    with onnxnn.set_executor(executor):
        check_gradients(lambda x: function(x, factor), [RNG.standard_normal(shape)])


def test_pixel_unshuffle_inverts_pixel_shuffle():
    x = onnxnn.randn(2, 18, 3, 2)
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(x, 3), 3).numpy(), x.numpy())


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_shuffles_run_in_half_precision(dtype):
    x = onnxnn.tensor(RNG.standard_normal((1, 4, 2, 2))).to(dtype)
    assert F.pixel_shuffle(x, 2).dtype == dtype
    np.testing.assert_array_equal(
        F.channel_shuffle(x, 2).float().numpy(), channel_shuffle_reference(x.float().numpy(), 2)
    )


@pytest.mark.parametrize(
    "layer, text, reference, factor, shape",
    [
        (nn.PixelShuffle(2), "PixelShuffle(upscale_factor=2)", pixel_shuffle_reference, 2, (1, 4, 2, 3)),
        (nn.PixelUnshuffle(2), "PixelUnshuffle(downscale_factor=2)", pixel_unshuffle_reference, 2, (1, 1, 4, 2)),
        (nn.ChannelShuffle(3), "ChannelShuffle(groups=3)", channel_shuffle_reference, 3, (2, 6, 2, 2)),
    ],
)
def test_shuffle_layers_repr_and_export(layer, text, reference, factor, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    assert repr(layer) == text
    assert len(layer.state_dict()) == 0
    np.testing.assert_array_equal(layer(onnxnn.tensor(x)).numpy(), reference(x, factor))
    np.testing.assert_array_equal(exported_output(layer, onnxnn.tensor(x)), reference(x, factor))


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: F.pixel_shuffle(onnxnn.randn(2, 3), 2),
            "pixel_shuffle expects input to have at least 3 dimensions, but got input with 2 dimension",
        ),
        (lambda: F.pixel_shuffle(onnxnn.randn(1, 5, 2, 2), 2), r"input.size\(-3\)=5 is not divisible by 4"),
        (lambda: F.pixel_shuffle(onnxnn.randn(1, 4, 2, 2), 0), "expects a positive upscale_factor, but got 0"),
        (
            lambda: F.pixel_unshuffle(onnxnn.randn(1, 2, 3, 4), 2),
            r"height to be divisible by downscale_factor, but "
            r"input.size\(-2\)=3",
        ),
        (
            lambda: F.pixel_unshuffle(onnxnn.randn(1, 2, 4, 3), 2),
            r"width to be divisible by downscale_factor, but "
            r"input.size\(-1\)=3",
        ),
        (lambda: F.channel_shuffle(onnxnn.randn(1, 5, 2), 2), "Got 5 channels and 2 groups"),
        (
            lambda: F.channel_shuffle(onnxnn.randn(5, 2), 1),
            r"expects input with > 2 dims, but got input with sizes \[5, 2\]",
        ),
        (lambda: F.channel_shuffle(onnxnn.randn(1, 4, 2), 0), "must be positive. Value of groups:0"),
    ],
)
def test_bad_shuffles_raise_pytorchs_errors(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_shuffles_match_torch():
    torch = pytest.importorskip("torch")
    for case_id, function, _, factor, shape in CASES:
        x = RNG.standard_normal(shape)
        expected = getattr(torch.nn.functional, function.__name__)(torch.tensor(x), factor).numpy()
        np.testing.assert_array_equal(
            function(onnxnn.tensor(x, dtype=onnxnn.float64), factor).numpy(), expected, err_msg=case_id
        )
