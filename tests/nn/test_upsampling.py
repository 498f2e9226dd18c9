"""Resampling: F.interpolate (every mode), Upsample, UpsamplingNearest2d, UpsamplingBilinear2d.

Expected values come from the separable numpy sampling below, written from PyTorch's documented
coordinate maps: ``nearest`` reads ``floor(dst * s)``, ``nearest-exact`` ``floor((dst + 0.5) * s)``
(``s`` = 1 / scale_factor when one is given and not recomputed, else in / out); the linear modes
interpolate at ``dst * (in - 1) / (out - 1)`` with align_corners, else at ``(dst + 0.5) * s - 0.5``
clamped below at 0; bicubic uses Keys' kernel with ``a = -0.75`` at the unclamped coordinate with
edge-replicated taps; ``area`` averages the adaptive pooling windows. Each output is a weighted sum
of at most 4 taps per axis (64 in 3-d), held to Higham's ``gamma(taps)`` times the sum of
``|weight * x|``. Gradients are checked against float64 finite differences on both executors.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from gradcheck import check_gradients
from runtime.conv_cases import check_gradients_float32
from .layer_checks import exported_output
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

RNG = np.random.default_rng(31)
# onnxruntime's CPU provider runs Resize in float32 (and integer types), not float64.
EXECUTOR_DTYPES = [
    ("onnxruntime", onnxnn.float32),
    ("kernels", onnxnn.float32),
    ("kernels", onnxnn.float64),
    ("onnxruntime", onnxnn.float64),  # no float64 Resize there: written as gathered taps
]


# ---------------------------------------------------------------- numpy reference


def _cubic(d, a=-0.75):
    d = np.abs(d)
    return np.where(
        d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1, np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0)
    )


def axis_matrix(size_in, size_out, mode, align_corners, scale_factor, support=False):
    """The (out, in) sampling matrix PyTorch's documentation describes for one axis; ``support``: 1
    at every tap each output reads instead (a bicubic tap of weight 0 too: its weight's slope is not)."""
    s = 1.0 / scale_factor if scale_factor is not None else size_in / size_out
    # The nearest modes' source indices as PyTorch's kernels compute them, in float32: the step
    # float32(1 / scale) (or in / out), times the index in float32 (nearest-exact: index + 0.5 times
    # it in float64, rounded to float32), floored.
    step = np.float32(1.0 / scale_factor) if scale_factor is not None else np.float32(size_in) / np.float32(size_out)
    matrix = np.zeros((size_out, size_in))
    for dst in range(size_out):
        if mode == "nearest":
            matrix[dst, min(int(np.floor(np.float32(dst) * step)), size_in - 1)] = 1
        elif mode == "nearest-exact":
            matrix[dst, min(int(np.floor(np.float32((dst + 0.5) * np.float64(step)))), size_in - 1)] = 1
        elif mode == "area":
            start, end = (dst * size_in) // size_out, -(-((dst + 1) * size_in) // size_out)
            matrix[dst, start:end] = 1 / (end - start)
        else:
            if align_corners:
                src = dst * (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
            else:
                src = (dst + 0.5) * s - 0.5
            if mode == "cubic":
                base = math.floor(src)
                for offset in range(-1, 3):
                    weight = 1.0 if support else _cubic(src - (base + offset))
                    matrix[dst, min(max(base + offset, 0), size_in - 1)] += weight
            else:
                src = max(src, 0.0)
                left = min(int(math.floor(src)), size_in - 1)
                right = min(left + 1, size_in - 1)
                fraction = src - left
                matrix[dst, left] += 1 - fraction
                matrix[dst, right] += fraction
    return matrix


def interpolate_reference(x, out_sizes, mode, align_corners=False, scale_factors=None):
    """(resampled, bound on |terms|, reach): the separable reference, the sum of |weight * x| per
    output, and the sum of |x| over every tap it reads (``axis_matrix``'s support)."""
    mode = {"linear": "linear", "bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    result, magnitude = x.astype(np.float64), np.abs(x.astype(np.float64))
    reach = magnitude
    for i, size_out in enumerate(out_sizes):
        axis = 2 + i
        factor = None if scale_factors is None else scale_factors[i]
        if size_out == x.shape[axis] and (mode == "linear" or (mode == "nearest" and len(out_sizes) == 2)):
            factor = 1.0  # an axis whose size stays is copied by these kernels, whatever the factor
        matrix = axis_matrix(x.shape[axis], size_out, mode, align_corners, factor)
        support = axis_matrix(x.shape[axis], size_out, mode, align_corners, factor, support=True) != 0
        result = np.moveaxis(np.tensordot(matrix, result, axes=([1], [axis])), 0, axis)
        magnitude = np.moveaxis(np.tensordot(np.abs(matrix), magnitude, axes=([1], [axis])), 0, axis)
        reach = np.moveaxis(np.tensordot(support, reach, axes=([1], [axis])), 0, axis)
    return result, magnitude, reach


# (id, input shape, interpolate kwargs, expected spatial output size, scale factors the coordinates use)
CASES = [
    ("nearest-up-1d", (2, 3, 5), dict(scale_factor=2), [10], [2.0]),
    ("nearest-fractional-2d", (1, 2, 5, 4), dict(scale_factor=1.7), [8, 6], [1.7, 1.7]),
    ("nearest-size-down-2d", (1, 2, 7, 5), dict(size=(3, 4)), [3, 4], None),
    ("nearest-3d", (1, 1, 3, 2, 4), dict(size=(5, 3, 2)), [5, 3, 2], None),
    ("nearest-exact-2d", (1, 2, 5, 4), dict(size=(7, 3), mode="nearest-exact"), [7, 3], None),
    ("nearest-recompute", (1, 1, 5), dict(scale_factor=1.7, recompute_scale_factor=True), [8], None),
    ("linear-1d", (2, 2, 5), dict(size=8, mode="linear"), [8], None),
    ("linear-1d-align", (2, 2, 5), dict(size=8, mode="linear", align_corners=True), [8], None),
    ("bilinear-scale", (1, 2, 4, 3), dict(scale_factor=(2.5, 1.5), mode="bilinear"), [10, 4], [2.5, 1.5]),
    ("bilinear-down", (1, 2, 7, 6), dict(size=(3, 4), mode="bilinear"), [3, 4], None),
    (
        "bilinear-align-fractional-scale",
        (1, 1, 5, 3),
        dict(scale_factor=1.7, mode="bilinear", align_corners=True),
        [8, 5],
        None,
    ),
    ("bilinear-align", (1, 2, 4, 3), dict(size=(7, 5), mode="bilinear", align_corners=True), [7, 5], None),
    ("bilinear-to-one", (1, 1, 4, 3), dict(size=(1, 1), mode="bilinear"), [1, 1], None),
    ("bicubic", (1, 2, 4, 5), dict(size=(7, 3), mode="bicubic"), [7, 3], None),
    ("bicubic-align", (1, 1, 4, 5), dict(scale_factor=2, mode="bicubic", align_corners=True), [8, 10], None),
    ("trilinear", (1, 1, 3, 4, 2), dict(size=(5, 3, 4), mode="trilinear"), [5, 3, 4], None),
    # Sizes are floor(size * factor) in float64 (5 * 1.4 is 7, 5 * float32(1.4) 6.99999988), and
    # the nearest modes' indices float32 products (8 at 0.6: output 3 reads row 5, not 4).
    ("nearest-float32-steps", (1, 1, 8, 5), dict(scale_factor=(0.6, 1.4)), [4, 7], [0.6, 1.4]),
    ("nearest-exact-float32-steps", (1, 1, 9), dict(scale_factor=1.7, mode="nearest-exact"), [15], [1.7]),
    ("nearest-1d-size-kept-by-factor", (1, 1, 3), dict(scale_factor=1.3), [3], [1.3]),
    ("nearest-2d-size-kept-is-copied", (1, 1, 3, 2), dict(scale_factor=(1.3, 2.0)), [3, 4], [1.3, 2.0]),
    ("linear-size-rounds-down-in-float64", (1, 1, 5), dict(scale_factor=1.4, mode="linear"), [7], [1.4]),
    ("bilinear-size-kept-is-copied", (1, 1, 2, 5), dict(scale_factor=(1.3, 1.4), mode="bilinear"), [2, 7], [1.3, 1.4]),
    ("bicubic-size-kept-is-scaled", (1, 1, 2, 3), dict(scale_factor=(1.3, 2.0), mode="bicubic"), [2, 6], [1.3, 2.0]),
    ("area-2d", (1, 2, 7, 6), dict(size=(3, 4), mode="area"), [3, 4], None),
    ("area-1d", (2, 1, 9), dict(scale_factor=0.5, mode="area"), [4], None),
]


def _coordinate_epsilon(kwargs, factors, numpy_dtype) -> float:
    """The relative error of the interpolating modes' source coordinates: the dtype's rounding, or
    Resize's float32 scales' (rounded, and a few ulps up where that keeps the output size) where a
    factor is not a float32; the nearest modes' indices are exact."""
    epsilon = np.finfo(numpy_dtype).eps / 2
    if factors and not kwargs.get("mode", "nearest").startswith("nearest"):
        if any(float(np.float32(factor)) != factor for factor in factors):
            epsilon = max(epsilon, 4 * np.finfo(np.float32).eps)
    return epsilon


def _run(executor, dtype, x, kwargs):
    with onnxnn.set_executor(executor):
        out = F.interpolate(onnxnn.tensor(x, dtype=dtype), **kwargs)
        return out.shape, np.asarray(out.numpy(), dtype=np.float64)


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=lambda v: str(v).replace("onnxnn.", ""))
@pytest.mark.parametrize("case_id, shape, kwargs, out_sizes, factors", CASES, ids=[c[0] for c in CASES])
def test_interpolate_matches_the_documented_sampling(case_id, shape, kwargs, out_sizes, factors, executor, dtype):
    # The case's own input, whatever ran before it in this process.
    x = np.random.default_rng(zlib.crc32(f"{case_id} {executor} {dtype}".encode())).standard_normal(shape)
    out_shape, actual = _run(executor, dtype, x, kwargs)
    assert tuple(out_shape) == shape[:2] + tuple(out_sizes)
    expected, magnitude, reach = interpolate_reference(
        x, out_sizes, kwargs.get("mode", "nearest"), kwargs.get("align_corners", False), factors
    )
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    # Rounding the input to the dtype and up to 4 taps per axis summed (the area windows are smaller):
    # gamma(taps) of the terms' magnitude. Source coordinates computed in the dtype, off by up to
    # (size * u): each weight moves by at most twice that (the kernels' slopes are at most 2 in
    # magnitude, the other axes' weights at most 1), a weight of 0 too, so per axis that times the
    # |x| of every tap read.
    taps = 4 ** len(out_sizes) + 1
    coordinate = 2 * max(max(shape[2:]), max(out_sizes)) * _coordinate_epsilon(kwargs, factors, numpy_dtype)
    bound = 2 * gamma(taps, numpy_dtype) * magnitude + len(out_sizes) * 2 * coordinate * reach + 1e-300
    assert np.all(np.abs(actual - expected) <= bound), f"max error {np.max(np.abs(actual - expected)):.3g}"


GRADIENT_CASES = [
    case
    for case in CASES
    if case[0]
    in (
        "nearest-fractional-2d",
        "nearest-exact-2d",
        "linear-1d",
        "bilinear-scale",
        "bilinear-down",
        "bilinear-align",
        "bicubic",
        "bicubic-align",
        "trilinear",
        "area-2d",
    )
]


@pytest.mark.parametrize(
    "case_id, shape, kwargs, out_sizes, factors", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES]
)
def test_interpolate_gradients_match_finite_differences(case_id, shape, kwargs, out_sizes, factors):
    with onnxnn.set_executor("kernels"):
        check_gradients(lambda x: F.interpolate(x, **kwargs), [RNG.standard_normal(shape)])


@pytest.mark.parametrize(
    "case_id, shape, kwargs, out_sizes, factors", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES]
)
def test_interpolate_gradients_in_float32_on_onnxruntime(case_id, shape, kwargs, out_sizes, factors):
    with onnxnn.set_executor("onnxruntime"):
        check_gradients_float32(lambda x: F.interpolate(x, **kwargs), [RNG.standard_normal(shape)])


def antialias_matrix(size_in, size_out, mode, scale_factor=None, align_corners=False):
    """PyTorch's antialiased (out, in) matrix: the kernel stretched by the downscale factor around
    ``scale * (dst + 0.5)``, cut to the input and renormalized (a = -0.5 for the cubic). With
    align_corners the scale is ``(in - 1) / (out - 1)`` (0 for one output), the centre the same."""
    if align_corners:
        scale = (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    else:
        scale = 1.0 / scale_factor if scale_factor is not None else size_in / size_out
    support = (1.0 if mode == "bilinear" else 2.0) * max(scale, 1.0)
    inverse = 1.0 / scale if scale >= 1.0 else 1.0
    matrix = np.zeros((size_out, size_in))
    for dst in range(size_out):
        center = scale * (dst + 0.5)
        low, high = max(int(center - support + 0.5), 0), min(int(center + support + 0.5), size_in)
        distance = (np.arange(low, high) - center + 0.5) * inverse
        weights = np.clip(1 - np.abs(distance), 0, None) if mode == "bilinear" else _cubic(distance, -0.5)
        matrix[dst, low:high] = weights / weights.sum()
    return matrix


ANTIALIAS_CASES = [
    ("bilinear", (9, 10), (4, 3)),
    ("bilinear", (9, 10), (12, 4)),
    ("bicubic", (9, 10), (4, 7)),
    ("bicubic", (6, 5), (2, 11)),
]
# With align_corners PyTorch's filter placement is not ONNX Resize's: recorded as two MatMuls.
ALIGNED_ANTIALIAS_CASES = [
    ("bilinear", (9, 10), (4, 3)),
    ("bilinear", (5, 6), (1, 8)),
    ("bicubic", (9, 10), (4, 7)),
    ("bicubic", (6, 5), (2, 11)),
]
ALL_ANTIALIAS_CASES = [case + (False,) for case in ANTIALIAS_CASES] + [
    case + (True,) for case in ALIGNED_ANTIALIAS_CASES
]
ANTIALIAS_IDS = [f"{m}-{i}-{o}-{'aligned' if a else 'edges'}" for m, i, o, a in ALL_ANTIALIAS_CASES]


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=lambda v: str(v).replace("onnxnn.", ""))
@pytest.mark.parametrize("mode, size_in, size_out, align_corners", ALL_ANTIALIAS_CASES, ids=ANTIALIAS_IDS)
def test_antialias_filters_as_pytorch_documents(mode, size_in, size_out, align_corners, executor, dtype):
    x = RNG.standard_normal((1, 2) + size_in)
    _, actual = _run(executor, dtype, x, dict(size=size_out, mode=mode, antialias=True, align_corners=align_corners))
    rows, cols = (antialias_matrix(i, o, mode, align_corners=align_corners) for i, o in zip(size_in, size_out))
    expected = np.einsum("ai,ncij,bj->ncab", rows, x, cols)
    magnitude = np.einsum("ai,ncij,bj->ncab", np.abs(rows), np.abs(x), np.abs(cols))
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    taps = int(rows.astype(bool).sum(1).max() * cols.astype(bool).sum(1).max()) + 1 + 2 * max(size_in + size_out)
    assert np.all(np.abs(actual - expected) <= 2 * gamma(taps, numpy_dtype) * magnitude)


@pytest.mark.parametrize("mode, size_in, size_out, align_corners", ALL_ANTIALIAS_CASES, ids=ANTIALIAS_IDS)
def test_antialias_gradients_match_finite_differences(mode, size_in, size_out, align_corners):
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x: F.interpolate(x, size=size_out, mode=mode, antialias=True, align_corners=align_corners),
            [RNG.standard_normal((1, 1) + size_in)],
        )


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_aligned_antialias_gradients_on_onnxruntime_and_export(mode):
    x = RNG.standard_normal((1, 2, 7, 6))
    with onnxnn.set_executor("onnxruntime"):
        check_gradients(lambda x: F.interpolate(x, size=(3, 4), mode=mode, antialias=True, align_corners=True), [x])

    class AlignedAntialias(nn.Module):
        def forward(self, input):
            return F.interpolate(input, size=(3, 4), mode=mode, antialias=True, align_corners=True)

    module = AlignedAntialias()
    rows, cols = antialias_matrix(7, 3, mode, align_corners=True), antialias_matrix(6, 4, mode, align_corners=True)
    x32 = x.astype(np.float32)
    expected = np.einsum("ai,ncij,bj->ncab", rows, x32, cols)
    magnitude = np.einsum("ai,ncij,bj->ncab", np.abs(rows), np.abs(x32), np.abs(cols))
    actual = exported_output(module, onnxnn.tensor(x32))
    assert np.all(np.abs(actual - expected) <= 2 * gamma(7 + 6 + 2, np.float32) * magnitude)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype, u", [(onnxnn.float16, 2.0**-11), (onnxnn.bfloat16, 2.0**-8)])
@pytest.mark.parametrize(
    "kwargs",
    [dict(scale_factor=2), dict(size=(5, 3), mode="bilinear"), dict(size=(5, 7), mode="bicubic", align_corners=True)],
    ids=str,
)
def test_interpolate_runs_in_half_precision(kwargs, dtype, u, executor):
    x = onnxnn.tensor(RNG.standard_normal((1, 2, 3, 4))).to(dtype)
    with onnxnn.set_executor(executor):
        out = F.interpolate(x, **kwargs)
        # Realized on ``executor`` (onnxnn is lazy: a graph run after the block would run on "auto").
        actual, rounded_input = out.float().numpy(), x.float().numpy()
    assert out.dtype == dtype
    expected, magnitude, reach = interpolate_reference(
        rounded_input,
        list(out.shape[2:]),
        kwargs.get("mode", "nearest"),
        kwargs.get("align_corners", False),
        [2.0, 2.0] if "scale_factor" in kwargs else None,
    )
    # 16 taps and the output's own rounding in the half type, plus coordinates computed in it: off by
    # up to size * u (size at most 7), moving each weight of the two axes by twice that.
    bound = (16 + 2) * u * magnitude + 2 * 2 * 7 * u * reach + u * np.abs(expected)
    assert np.all(np.abs(actual - expected) <= bound)


def test_resize_gradient_is_itself_differentiable():
    x = onnxnn.tensor(RNG.standard_normal((1, 1, 3, 4)), dtype=onnxnn.float64, requires_grad=True)
    with onnxnn.set_executor("kernels"):
        (grad,) = onnxnn.autograd.grad(
            F.interpolate(x, size=(5, 6), mode="bilinear").pow(2).sum(), [x], create_graph=True
        )
        check_gradients(lambda v: F.interpolate(v, size=(5, 6), mode="bilinear").pow(2).sum(), [x.detach().numpy()])
    assert grad.requires_grad


@pytest.mark.parametrize(
    "module, kwargs, shape",
    [
        (nn.Upsample(scale_factor=2, mode="nearest"), dict(scale_factor=2), (1, 2, 3, 4)),
        (
            nn.Upsample(size=(5, 7), mode="bilinear", align_corners=False),
            dict(size=(5, 7), mode="bilinear"),
            (1, 2, 3, 4),
        ),
        (nn.UpsamplingNearest2d(scale_factor=3), dict(scale_factor=3), (2, 1, 2, 3)),
        (nn.UpsamplingBilinear2d(size=(4, 5)), dict(size=(4, 5), mode="bilinear", align_corners=True), (1, 1, 3, 3)),
    ],
)
def test_upsampling_modules_are_interpolate_and_export(module, kwargs, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    expected, magnitude, _ = interpolate_reference(
        x,
        [
            int(v)
            for v in (
                kwargs["size"] if "size" in kwargs else [math.floor(s * kwargs["scale_factor"]) for s in shape[2:]]
            )
        ],
        kwargs.get("mode", "nearest"),
        kwargs.get("align_corners", False),
        None if "size" in kwargs else [kwargs["scale_factor"]] * 2,
    )
    bound = 2 * gamma(17, np.float32) * magnitude
    actual = module(onnxnn.tensor(x)).numpy()
    assert np.all(np.abs(actual - expected) <= bound)
    assert np.all(np.abs(exported_output(module, onnxnn.tensor(x)) - expected) <= bound)
    assert module.state_dict() == {} or len(module.state_dict()) == 0


@pytest.mark.parametrize(
    "module, text",
    [
        (nn.Upsample(scale_factor=2), "Upsample(scale_factor=2.0, mode='nearest')"),
        (nn.Upsample(size=(3, 4), mode="bilinear"), "Upsample(size=(3, 4), mode='bilinear')"),
        (nn.UpsamplingNearest2d(scale_factor=2), "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"),
        (nn.UpsamplingBilinear2d(size=4), "UpsamplingBilinear2d(size=4, mode='bilinear')"),
    ],
)
def test_repr_matches_pytorch(module, text):
    assert repr(module) == text


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: F.interpolate(x[0, 0], scale_factor=2), NotImplementedError, "Only 3D, 4D and 5D input"),
        (lambda x: F.interpolate(x, scale_factor=2, mode="lanczos2"), NotImplementedError, "(got lanczos2)"),
        (
            lambda x: F.interpolate(x[0], scale_factor=2, mode="bilinear"),
            NotImplementedError,
            "Got 3D input, but bilinear mode needs 4D input",
        ),
        (lambda x: F.interpolate(x, size=4, scale_factor=2), ValueError, "only one of size or scale_factor"),
        (lambda x: F.interpolate(x), ValueError, "either size or scale_factor should be defined"),
        (lambda x: F.interpolate(x, size=4, align_corners=True), ValueError, "align_corners option can only be set"),
        (lambda x: F.interpolate(x, size=(4, 5, 6)), ValueError, "same number of spatial dimensions"),
        # The sizes are checked before the mode's rank, as in PyTorch.
        (lambda x: F.interpolate(x[0], size=(4, 5), mode="bilinear"), ValueError, "same number of spatial dimensions"),
        (lambda x: F.interpolate(x, size=4, mode="linear", antialias=True), ValueError, "Anti-alias option"),
    ],
)
def test_bad_arguments_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(onnxnn.randn(1, 2, 3, 3))


def test_interpolate_matches_torch():
    torch = pytest.importorskip("torch")
    for case_id, shape, kwargs, out_sizes, factors in CASES:
        x = RNG.standard_normal(shape)
        expected = torch.nn.functional.interpolate(torch.tensor(x), **kwargs)
        with onnxnn.set_executor("kernels"):
            actual = F.interpolate(onnxnn.tensor(x, dtype=onnxnn.float64), **kwargs)
        # Each coordinate off by its size times the relative error, each weight by that (slopes <= 2),
        # on taps of |x|: float64's rounding, or float32 scales' where a factor is not a float32.
        size = max(max(shape[2:]), max(out_sizes))
        tolerance = 1e-12 + 2 * 2 * size * _coordinate_epsilon(kwargs, factors, np.float64) * np.abs(x).sum()
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=0, atol=tolerance, err_msg=case_id)
    for mode, size_in, size_out, align_corners in ALL_ANTIALIAS_CASES:
        x = RNG.standard_normal((1, 2) + size_in)
        expected = torch.nn.functional.interpolate(
            torch.tensor(x), size=size_out, mode=mode, antialias=True, align_corners=align_corners
        )
        with onnxnn.set_executor("kernels"):
            actual = F.interpolate(
                onnxnn.tensor(x, dtype=onnxnn.float64),
                size=size_out,
                mode=mode,
                antialias=True,
                align_corners=align_corners,
            )
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_resampling_and_padding_layers_train_together(executor):
    # Backward through PixelShuffle, ReflectionPad, Resize, ChannelShuffle and ReplicationPad, replayed
    # step after step: the loss of this fixed regression falls.
    with onnxnn.set_executor(executor):
        onnxnn.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.PixelShuffle(2),
            nn.ReflectionPad2d(1),
            nn.Conv2d(2, 4, 3),
            nn.Upsample(scale_factor=0.5, mode="bilinear"),
            nn.ChannelShuffle(2),
            nn.ReplicationPad2d((1, 0, 0, 1)),
            nn.Conv2d(4, 3, (2, 2)),
        )
        optimizer = onnxnn.optim.Adam(model.parameters(), lr=1e-2)
        x = onnxnn.randn(4, 3, 6, 6)
        target = x * 0.5 + onnxnn.randn(4, 3, 6, 6) * 0.1
        losses = []
        for _ in range(40):
            optimizer.zero_grad()
            loss = F.mse_loss(model(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    assert losses[-1] < 0.25 * losses[0]
