"""Grid sampling: F.grid_sample (bilinear, nearest, bicubic; zeros, border, reflection; align_corners) and
F.affine_grid, in 2-D and 3-D.

Expected values come from a point-by-point numpy sampler written from PyTorch's documentation: a
normalized coordinate ``n`` maps to ``(n + 1) / 2 * (size - 1)`` with align_corners, else
``((n + 1) * size - 1) / 2``; ``border`` clips it to ``[0, size - 1]``; ``reflection`` reflects it
about the corner centres (align_corners) or edges and then clips; bilinear reads the
``2 ** spatial`` neighbours with weights ``1 - f``/``f``, nearest the neighbour rounded half to even,
bicubic the 4 x 4 neighbours with Keys' kernel (``a = -0.75``); taps outside the input read zero.
``affine_grid`` is ``theta @ (x, y[, z], 1)`` at the output's normalized pixel centres (or corners).
Each output sums at most 16 weighted taps (Higham's ``gamma``); the source coordinates are computed
in the dtype, off by up to ``size * u``. Gradients are checked against float64 finite differences on
the kernels executor (onnxruntime's CPU provider has no float64 GridSample) and in float32 on onnxruntime. Bicubic
with border padding clamps each tap, as PyTorch and onnxruntime do (onnx's reference clamps the coordinate first,
which differs within two pixels outside the edge).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from gradcheck import check_gradients
from runtime.conv_cases import check_gradients_float32
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F

RNG = np.random.default_rng(71)
EXECUTOR_DTYPES = [("onnxruntime", onnxnn.float32), ("kernels", onnxnn.float32), ("kernels", onnxnn.float64)]


def _cubic(d, a=-0.75):
    d = abs(d)
    if d <= 1:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a if d < 2 else 0.0


def _reflect(x, low2, high2):
    if low2 == high2:
        return 0.0
    low, span = low2 / 2, (high2 - low2) / 2
    x = abs(x - low)
    extra, flips = math.fmod(x, span), math.floor(x / span)
    return extra + low if flips % 2 == 0 else span - extra + low


def _fold(x, size, padding_mode, align_corners):
    if padding_mode == "border":
        return min(max(x, 0.0), size - 1.0)
    if padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (size - 1)) if align_corners else _reflect(x, -1, 2 * size - 1)
        return min(max(x, 0.0), size - 1.0)
    return x


def grid_sample_reference(x, grid, mode, padding_mode, align_corners):
    """(sampled, sum of |weight * value|) point by point."""
    batch, channels, *sizes = x.shape
    spatial = len(sizes)
    out_spatial = grid.shape[1:-1]
    out = np.zeros((batch, channels) + out_spatial)
    magnitude = np.zeros_like(out)
    for b in range(batch):
        for point in np.ndindex(*out_spatial):
            taps_per_axis = []
            for axis, size in enumerate(sizes):
                n = grid[(b,) + point + (spatial - 1 - axis,)]
                src = (n + 1) / 2 * (size - 1) if align_corners else ((n + 1) * size - 1) / 2
                if mode == "bicubic":  # each tap folded on its own, as PyTorch's bicubic does
                    base = math.floor(src)
                    taps_per_axis.append(
                        [
                            (_fold(base + k, size, padding_mode, align_corners), _cubic(src - (base + k)))
                            for k in range(-1, 3)
                        ]
                    )
                    continue
                src = _fold(src, size, padding_mode, align_corners)
                if mode == "nearest":
                    taps_per_axis.append([(float(np.round(src)), 1.0)])
                else:
                    left = math.floor(src)
                    taps_per_axis.append([(left, 1 - (src - left)), (left + 1, src - left)])
            for combination in itertools.product(*taps_per_axis):
                index = tuple(int(i) for i, _ in combination)
                if any(i < 0 or i >= size for i, size in zip(index, sizes)):
                    continue
                weight = np.prod([w for _, w in combination])
                value = x[(b, slice(None)) + index]
                out[(b, slice(None)) + point] += weight * value
                magnitude[(b, slice(None)) + point] += abs(weight * value)
    return out, magnitude


# (id, input shape, grid shape, mode)
SAMPLE_SHAPES = [
    ("2d-bilinear", (2, 3, 4, 5), (2, 3, 2, 2), "bilinear"),
    ("2d-nearest", (1, 2, 4, 5), (1, 3, 4, 2), "nearest"),
    ("3d-bilinear", (1, 2, 3, 4, 2), (1, 2, 2, 3, 3), "bilinear"),
    ("3d-nearest", (1, 1, 3, 2, 4), (1, 2, 3, 1, 3), "nearest"),
]
FORWARD_CASES = [(c, p, a) for c in SAMPLE_SHAPES for p in ("zeros", "border", "reflection") for a in (False, True)]
FORWARD_CASES += [(("2d-bicubic", (1, 2, 4, 5), (1, 3, 2, 2), "bicubic"), "zeros", a) for a in (False, True)]
FORWARD_CASES += [(("2d-bicubic", (1, 2, 4, 5), (1, 3, 2, 2), "bicubic"), "reflection", False)]
FORWARD_CASES += [(("2d-bicubic", (1, 2, 4, 5), (1, 3, 2, 2), "bicubic"), "border", a) for a in (False, True)]


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=lambda v: str(v).replace("onnxnn.", ""))
@pytest.mark.parametrize(
    "case, padding_mode, align_corners",
    FORWARD_CASES,
    ids=[f"{c[0]}-{p}-{'aligned' if a else 'edges'}" for c, p, a in FORWARD_CASES],
)
def test_grid_sample_matches_the_documented_sampling(case, padding_mode, align_corners, executor, dtype):
    _, shape, grid_shape, mode = case
    x = RNG.standard_normal(shape)
    grid = RNG.uniform(-1.3, 1.3, grid_shape)
    with onnxnn.set_executor(executor):
        actual = F.grid_sample(
            onnxnn.tensor(x, dtype=dtype), onnxnn.tensor(grid, dtype=dtype), mode, padding_mode, align_corners
        ).numpy()
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    # In float32 nearest may round a coordinate rounded near a half the other way: compare on the
    # grid as the dtype holds it, and skip points within the coordinate's rounding of a tie.
    grid = grid.astype(numpy_dtype).astype(np.float64)
    expected, magnitude = grid_sample_reference(x.astype(numpy_dtype), grid, mode, padding_mode, align_corners)
    taps = 16 + 2 * max(shape[2:]) + 1
    bound = 2 * gamma(taps, numpy_dtype) * (magnitude + np.max(np.abs(x)) * 4)
    error = np.abs(actual - expected)
    if mode == "nearest" and dtype == onnxnn.float32:
        sizes = np.array(shape[2:][::-1])
        src = ((grid + 1) / 2 * (sizes - 1)) if align_corners else ((grid + 1) * sizes - 1) / 2
        near_tie = np.any(np.abs(np.abs(src - np.floor(src)) - 0.5) < 1e-4, axis=-1)
        error = error * ~near_tie[:, None]
    assert actual.shape == expected.shape
    assert np.all(error <= bound), f"max error {np.max(error - bound):.3g} above the bound"


GRADIENT_CASES = [
    (c, p, a)
    for c in SAMPLE_SHAPES
    for p in ("zeros", "border", "reflection")
    for a in (False, True)
    if c[0].endswith("bilinear") or (p == "reflection")
]


@pytest.mark.parametrize(
    "case, padding_mode, align_corners",
    GRADIENT_CASES,
    ids=[f"{c[0]}-{p}-{'aligned' if a else 'edges'}" for c, p, a in GRADIENT_CASES],
)
def test_grid_sample_gradients_match_finite_differences(case, padding_mode, align_corners):
    _, shape, grid_shape, mode = case
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x, grid: F.grid_sample(x, grid, mode, padding_mode, align_corners),
            [RNG.standard_normal(shape), RNG.uniform(-1.3, 1.3, grid_shape)],
        )


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_gradients_in_float32_on_onnxruntime(padding_mode):
    # Grid points kept 0.1 pixel away from integer coordinates, where bilinear's slope jumps.
    grid = np.array([[[[-0.83, 0.41], [0.17, -0.62]], [[0.93, 1.21], [-1.17, 0.05]]]])
    with onnxnn.set_executor("onnxruntime"):
        check_gradients_float32(
            lambda x, g: F.grid_sample(x, g, "bilinear", padding_mode, False), [RNG.standard_normal((1, 2, 4, 5)), grid]
        )


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_grid_sample_gradients_match_finite_differences(padding_mode, align_corners):
    x = RNG.standard_normal((1, 2, 4, 5))
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x, grid: F.grid_sample(x, grid, "bicubic", padding_mode, align_corners),
            [x, RNG.uniform(-1.3, 1.3, (1, 2, 3, 2))],
        )
    # float32 differences need points away from integer coordinates, where the cubic's curvature jumps.
    grid = np.array([[[[-0.83, 0.41], [0.17, -0.62]], [[0.93, 1.21], [-1.17, 0.05]]]])
    # A grid step moves the sample (W - 1) / 2 ~ W / 2 pixels, so the cubic's third derivative reaches the
    # output scaled by (W / 2) ** 3 ~ 16: the truncation eps**2 / 6 * |f3| at eps = 1e-2 can pass the
    # 2e-3 atol. At 2.5e-3 it is 16x smaller, and the rounding term (~1e-6 / eps) stays far below.
    with onnxnn.set_executor("onnxruntime"):
        check_gradients_float32(
            lambda x, grid: F.grid_sample(x, grid, "bicubic", padding_mode, align_corners), [x, grid], eps=2.5e-3
        )


def test_bicubic_grid_sample_with_border_padding_matches_onnxruntime_on_the_kernels():
    # Points up to two pixels outside the edge, where clamping each tap and clamping the coordinate differ.
    x = RNG.standard_normal((1, 2, 4, 5))
    grid = RNG.uniform(-1.9, 1.9, (1, 4, 3, 2))
    results = {}
    for executor in ("kernels", "onnxruntime"):
        with onnxnn.set_executor(executor):
            results[executor] = F.grid_sample(
                onnxnn.tensor(x, dtype=onnxnn.float32), onnxnn.tensor(grid, dtype=onnxnn.float32), "bicubic", "border"
            ).numpy()
    expected, magnitude = grid_sample_reference(
        x.astype(np.float32).astype(np.float64), grid.astype(np.float32).astype(np.float64), "bicubic", "border", False
    )
    bound = 2 * gamma(16 + 2 * 5 + 1, np.float32) * (magnitude + np.max(np.abs(x)) * 4)
    for executor, actual in results.items():
        assert np.all(np.abs(actual - expected) <= bound), executor


def affine_grid_reference(theta, size, align_corners, absolute=False):
    sizes = size[2:]
    # PyTorch puts a unit-size axis at 0 with align_corners too.
    axes = [
        (np.linspace(-1, 1, s) if s > 1 else np.zeros(1)) if align_corners else (2 * np.arange(s) + 1) / s - 1
        for s in sizes
    ]
    out = np.zeros([size[0]] + sizes + [len(sizes)])
    for b in range(size[0]):
        for point in np.ndindex(*sizes):
            coordinates = [axes[axis][point[axis]] for axis in range(len(sizes))][::-1] + [1.0]
            coordinates = np.abs(coordinates) if absolute else np.array(coordinates)
            out[(b,) + point] = (np.abs(theta[b]) if absolute else theta[b]) @ coordinates
    return out


AFFINE_CASES = [([2, 3, 4, 5], False), ([2, 3, 4, 5], True), ([1, 2, 3, 2, 4], False), ([1, 1, 1, 3], True)]


@pytest.mark.parametrize("executor, dtype", EXECUTOR_DTYPES, ids=lambda v: str(v).replace("onnxnn.", ""))
@pytest.mark.parametrize("size, align_corners", AFFINE_CASES)
def test_affine_grid_maps_pixel_centres(size, align_corners, executor, dtype):
    spatial = len(size) - 2
    theta = RNG.standard_normal((size[0], spatial, spatial + 1))
    with onnxnn.set_executor(executor):
        actual = F.affine_grid(onnxnn.tensor(theta, dtype=dtype), size, align_corners).numpy()
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    expected = affine_grid_reference(theta, size, align_corners)
    bound = 2 * gamma(spatial + 3, numpy_dtype) * affine_grid_reference(theta, size, align_corners, True) * 2
    assert np.all(np.abs(actual - expected) <= bound + 1e-300)


@pytest.mark.parametrize("size, align_corners", AFFINE_CASES)
def test_affine_grid_gradients_match_finite_differences(size, align_corners):
    spatial = len(size) - 2
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda t: F.affine_grid(t, size, align_corners), [RNG.standard_normal((size[0], spatial, spatial + 1))]
        )


def test_spatial_transformer_exports_and_runs_on_onnxruntime():
    import onnx
    import onnxruntime
    from onnxnn.export import to_onnx

    class Transformer(onnxnn.nn.Module):
        def forward(self, x, theta):
            return F.grid_sample(x, F.affine_grid(theta, list(x.shape), False), "bilinear", "border", False)

    x, theta = onnxnn.randn(2, 3, 4, 5), onnxnn.randn(2, 2, 3)
    proto = to_onnx(Transformer().eval(), (x, theta))
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    actual = session.run(None, dict(zip(names, (x.numpy(), theta.numpy()))))[0]
    grid = affine_grid_reference(theta.numpy().astype(np.float64), [2, 3, 4, 5], False)
    expected, magnitude = grid_sample_reference(x.numpy().astype(np.float64), grid, "bilinear", "border", False)
    assert np.all(np.abs(actual - expected) <= 2 * gamma(30, np.float32) * (magnitude + np.abs(x.numpy()).max() * 4))


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: F.grid_sample(onnxnn.randn(1, 1, 3, 3), onnxnn.zeros(1, 2, 2, 2), "area"),
            ValueError,
            "expected mode to be 'bilinear', 'nearest' or 'bicubic', but got: 'area'",
        ),
        (
            lambda: F.grid_sample(onnxnn.randn(1, 1, 3, 3), onnxnn.zeros(1, 2, 2, 2), padding_mode="wrap"),
            ValueError,
            "expected padding_mode to be 'zeros', 'border', or 'reflection'",
        ),
        (lambda: F.grid_sample(onnxnn.randn(1, 1, 3, 3), onnxnn.zeros(2, 2, 2, 2)), RuntimeError, "same batch size"),
        (
            lambda: F.grid_sample(onnxnn.randn(1, 1, 3, 3), onnxnn.zeros(1, 2, 2, 3)),
            RuntimeError,
            "expected grid to have size 2 in last dimension",
        ),
        (
            lambda: F.grid_sample(onnxnn.randn(1, 1, 3, 3, 3), onnxnn.zeros(1, 2, 2, 2, 3), "bicubic"),
            RuntimeError,
            "bicubic interpolation only supports 4D input",
        ),
        (lambda: F.affine_grid(onnxnn.randn(1, 3, 4), [1, 1, 2, 2]), ValueError, "Nx2x3"),
        (lambda: F.affine_grid(onnxnn.randn(1, 2, 3), [1, 1, 2]), NotImplementedError, "only supports 4D and 5D sizes"),
    ],
)
def test_bad_arguments_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_grid_sample_and_affine_grid_match_torch():
    torch = pytest.importorskip("torch")
    for (case_id, shape, grid_shape, mode), padding_mode, align_corners in FORWARD_CASES:
        x, grid = RNG.standard_normal(shape), RNG.uniform(-1.3, 1.3, grid_shape)
        expected = torch.nn.functional.grid_sample(
            torch.tensor(x), torch.tensor(grid), mode, padding_mode, align_corners
        ).numpy()
        with onnxnn.set_executor("kernels"):
            actual = F.grid_sample(
                onnxnn.tensor(x, dtype=onnxnn.float64),
                onnxnn.tensor(grid, dtype=onnxnn.float64),
                mode,
                padding_mode,
                align_corners,
            ).numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12, err_msg=case_id)
    for size, align_corners in AFFINE_CASES:
        theta = RNG.standard_normal((size[0], len(size) - 2, len(size) - 1))
        expected = torch.nn.functional.affine_grid(torch.tensor(theta), size, align_corners).numpy()
        actual = F.affine_grid(onnxnn.tensor(theta, dtype=onnxnn.float64), size, align_corners).numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)
