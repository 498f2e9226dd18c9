"""F.grid_sample at the edges of its domain: non-finite pixels next to the padding, half-pixel points
with nearest + reflection, NaN, infinite and huge grid coordinates, empty and integer inputs.

Expected values come from the numpy sampler of ``test_grid_sample`` (PyTorch's documented
arithmetic: unnormalize, fold by the padding mode (reflect, then clip), then round or interpolate;
taps outside the input read zero and are never multiplied), with a non-finite coordinate replaced by
the point PyTorch's CPU kernels read for it: with zero padding the padding (NaN in 2-D bilinear and
bicubic, whose weights are NaN), with border or reflection padding the edge its clip gives (NaN to
the low edge in 2-D, to the high edge in 3-D). Gradients are central differences of that sampler.
"""

from __future__ import annotations

import numpy as np
import pytest
from nn.test_grid_sample import grid_sample_reference

import onnxnn
import onnxnn.nn.functional as F

EXECUTORS = ["kernels", "onnxruntime"]


def _sample(executor, x, grid, mode, padding_mode, align_corners, dtype=onnxnn.float32):
    with onnxnn.set_executor(executor):
        return F.grid_sample(
            onnxnn.tensor(x, dtype=dtype), onnxnn.tensor(grid, dtype=dtype), mode, padding_mode, align_corners
        ).numpy()


# ---------------------------------------------------------------- non-finite pixels


def _nan_pixel_case(spatial, value):
    rng = np.random.default_rng(5)
    sizes = (3, 4) if spatial == 2 else (2, 3, 4)
    x = rng.standard_normal((1, 2) + sizes)
    x[..., 0] = value  # the whole low-x face
    x[..., -1] = value  # and the high-x face
    # x from far outside (reading only padding) to inside; other axes inside, 0.1 pixel off a tap.
    xs = np.array([-2.6, -1.9, -1.3, -0.9, -0.37, 0.21, 0.9, 1.3, 1.9, 2.7])
    grid = np.zeros((1, 1, len(xs), spatial) if spatial == 2 else (1, 1, 1, len(xs), spatial))
    grid[..., 0] = xs
    grid[..., 1:] = 0.13
    return x, grid


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("value", [np.nan, np.inf])
@pytest.mark.parametrize(
    "mode, spatial", [("bilinear", 2), ("nearest", 2), ("bicubic", 2), ("bilinear", 3), ("nearest", 3)]
)
@pytest.mark.parametrize("align_corners", [False, True])
def test_non_finite_pixels_do_not_leak_into_the_zero_padding(executor, value, mode, spatial, align_corners):
    x, grid = _nan_pixel_case(spatial, value)
    actual = _sample(executor, x, grid, mode, "zeros", align_corners)
    expected, _ = grid_sample_reference(
        x.astype(np.float32).astype(np.float64),
        grid.astype(np.float32).astype(np.float64),
        mode,
        "zeros",
        align_corners,
    )
    assert not np.isfinite(expected).all() and (expected == 0).any()  # the case reads both
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
@pytest.mark.parametrize("mode, spatial", [("bilinear", 2), ("bilinear", 3)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_linear_tap_past_a_clipped_edge_is_dropped_on_the_kernels(padding_mode, mode, spatial, align_corners):
    # PyTorch clips the coordinate to the last pixel, whose right neighbour (weight 0) is outside the
    # input and read as 0, not as the clamped last pixel times 0. onnxruntime's GridSample reads the
    # latter (docs/differences.md), so this is the kernels executor's own check.
    x, grid = _nan_pixel_case(spatial, np.inf)
    x[..., 0] = 1.5  # only the high face is infinite
    actual = _sample("kernels", x, grid, mode, padding_mode, align_corners, onnxnn.float64)
    expected, _ = grid_sample_reference(x, grid, mode, padding_mode, align_corners)
    assert np.isinf(expected).any()
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


def _central_differences(f, grid, eps=1e-6):
    """d sum(f) / d grid for ``f`` giving (N, C, *points): a grid point moves only its own outputs, so
    a NaN output elsewhere stays out of its difference."""
    result = np.zeros_like(grid)
    for index in np.ndindex(*grid.shape):
        up, down = grid.copy(), grid.copy()
        up[index] += eps
        down[index] -= eps
        result[index] = (f(up) - f(down))[(index[0], slice(None)) + index[1:-1]].sum() / (2 * eps)
    return result


def _input_differences(f, x, eps=1e-6):
    result = np.zeros_like(x)
    for index in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[index] += eps
        down[index] -= eps
        result[index] = (f(up) - f(down)).sum() / (2 * eps)
    return result


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("mode, spatial", [("bilinear", 2), ("bicubic", 2), ("bilinear", 3)])
def test_grid_gradient_with_a_nan_pixel_next_to_the_zero_padding(executor, mode, spatial):
    x, grid = _nan_pixel_case(spatial, np.nan)
    weight = np.random.default_rng(3).standard_normal(grid.shape[:1] + (2,) + grid.shape[1:-1])
    dtype = onnxnn.float64 if executor == "kernels" else onnxnn.float32
    with onnxnn.set_executor(executor):
        source = onnxnn.tensor(x, dtype=dtype, requires_grad=True)
        points = onnxnn.tensor(grid, dtype=dtype, requires_grad=True)
        (F.grid_sample(source, points, mode, "zeros", False) * onnxnn.tensor(weight, dtype=dtype)).sum().backward()
    expected = _central_differences(lambda g: grid_sample_reference(x, g, mode, "zeros", False)[0] * weight, grid)
    assert not np.isfinite(expected).all() and (expected == 0).any()
    tolerance = 1e-6 if executor == "kernels" else 2e-3
    np.testing.assert_allclose(points.grad.numpy(), expected, rtol=tolerance, atol=tolerance, equal_nan=True)
    # The input's gradient is the sampling weights, whatever the pixels hold.
    expected_x = _input_differences(
        lambda v: grid_sample_reference(v, grid, mode, "zeros", False)[0] * weight, np.nan_to_num(x)
    )
    np.testing.assert_allclose(source.grad.numpy(), expected_x, rtol=tolerance, atol=tolerance)


# ---------------------------------------------------------------- nearest with reflection


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("spatial", [2, 3])
def test_nearest_reflection_reflects_before_rounding(executor, spatial):
    # Source coordinates -1.5, 4.5, -2.5, 5.5 (and half-pixels inside): reflected about the edges
    # -0.5 and 3.5 they are 0.5, 2.5, 1.5, 1.5, then rounded half to even: 0, 2, 2, 2.
    xs = np.array([-1.5, 1.5, -2.0, 2.0, -0.5, 0.5, -1.25, 1.75, -3.0, 3.0])
    x = np.arange(4.0).reshape((1, 1) + (1,) * (spatial - 2) + (1, 4))
    grid = np.zeros((1,) + (1,) * (spatial - 1) + (len(xs), spatial))
    grid[..., 0] = xs
    for align_corners in (False, True):
        actual = _sample(executor, x, grid, "nearest", "reflection", align_corners)
        expected, _ = grid_sample_reference(x, grid, "nearest", "reflection", align_corners)
        np.testing.assert_array_equal(actual, expected)
        if not align_corners:
            np.testing.assert_array_equal(expected.ravel()[:4], [0, 2, 2, 2])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_reflection_at_pixel_centres_edges_and_halves(executor, mode):
    # Points whose source coordinates are whole and half pixels, inside and up to three widths out.
    x = np.random.default_rng(9).standard_normal((1, 2, 3, 4))
    steps = np.arange(-28, 29) / 8.0
    grid = np.stack(np.meshgrid(steps, steps[::7], indexing="xy"), -1)[None]
    for align_corners in (False, True):
        actual = _sample(executor, x, grid, mode, "reflection", align_corners)
        expected, _ = grid_sample_reference(
            x.astype(np.float32).astype(np.float64), grid, mode, "reflection", align_corners
        )
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- non-finite and huge coordinates

NON_FINITE = [np.nan, np.inf, -np.inf, 1e20, -1e20, 3e9, -40.0]


def _expected_at(x, value, axis, mode, padding_mode, align_corners, spatial):
    """PyTorch's CPU result for a grid with ``value`` on ``axis`` (0 elsewhere), from the sampler."""
    finite = np.isfinite(value)
    if padding_mode == "zeros":
        if not finite and spatial == 2 and mode != "nearest":
            return np.nan  # NaN weights
        if not finite:
            return 0.0
        substitute = 100.0 * np.sign(value) if abs(value) > 100 else value
    elif mode == "bicubic" and not finite:
        return np.nan
    elif padding_mode == "border" or not finite:
        # clip: NaN to the low edge in 2-D (the kernel clamps NaN to 0), to the high edge in 3-D
        substitute = max(min(value, 100.0), -100.0) if not np.isnan(value) else (-1.0 if spatial == 2 else 1.0)
        if padding_mode == "reflection":  # reflect(inf) is NaN, then clipped the same way
            substitute = -1.0 if spatial == 2 else 1.0
    else:
        substitute = value
    grid = np.zeros((1,) * (spatial + 1) + (spatial,))
    grid[..., axis] = substitute
    return grid_sample_reference(x, grid, mode, padding_mode, align_corners)[0].item()


def _coordinate_cases():
    for spatial, modes in ((2, ["bilinear", "nearest", "bicubic"]), (3, ["bilinear", "nearest"])):
        for mode in modes:
            for padding_mode in ("zeros", "border", "reflection"):
                for value in NON_FINITE:
                    if padding_mode == "reflection" and np.isfinite(value) and abs(value) > 1e3:
                        continue  # PyTorch's reflection of 1e20 is float noise (docs/differences.md)
                    yield spatial, mode, padding_mode, value


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("spatial, mode, padding_mode, value", list(_coordinate_cases()))
def test_non_finite_and_huge_coordinates_read_what_pytorch_reads(
    spatial, mode, padding_mode, value, align_corners, executor
):
    sizes = (2, 3) if spatial == 2 else (2, 1, 3)
    x = np.arange(1.0, 1.0 + np.prod(sizes)).reshape((1, 1) + sizes)
    for axis in range(spatial):
        grid = np.zeros((1,) * (spatial + 1) + (spatial,))
        grid[..., axis] = value
        actual = _sample(executor, x, grid, mode, padding_mode, align_corners).item()
        expected = _expected_at(x, value, axis, mode, padding_mode, align_corners, spatial)
        np.testing.assert_allclose(actual, expected, rtol=1e-6, equal_nan=True, err_msg=f"axis {axis}")


@pytest.mark.parametrize("executor", EXECUTORS)
def test_nan_coordinate_on_a_unit_axis_with_align_corners_reads_zero(executor):
    # Every finite coordinate maps to pixel 0 of a unit axis with align_corners; NaN reads the padding.
    x = np.arange(1.0, 7.0).reshape(1, 1, 1, 2, 3)  # depth 1
    # (x, y, z): z NaN, z far (pixel 0 of the unit axis), z inf; x and y at pixel (1, 0)
    grid = np.array([0.0, -1.0, np.nan, 0.0, -1.0, 5.0, 0.0, -1.0, np.inf]).reshape(1, 1, 1, 3, 3)
    actual = _sample(executor, x, grid, "bilinear", "zeros", True)
    np.testing.assert_array_equal(actual.ravel(), [0.0, 2.0, 0.0])
    # 2-D nearest, height 1: (x, y) with y NaN, far, inf
    actual = _sample(executor, x[:, :, 0, :1], grid[:, 0, :, :, 1:], "nearest", "zeros", True)
    np.testing.assert_array_equal(actual.ravel(), [0.0, 1.0, 0.0])


def test_non_finite_coordinates_match_torch():
    torch = pytest.importorskip("torch")
    values = [np.nan, np.inf, -np.inf, 1e20, -1e20, 1e10, 17.0, -40.0, 0.3]
    for spatial, sizes_list in ((2, ([2, 3], [1, 3], [3, 1])), (3, ([1, 2, 3], [2, 1, 3]))):
        for sizes in sizes_list:
            x = np.arange(1.0, 1.0 + np.prod(sizes)).reshape([1, 1] + sizes)
            for align_corners in (False, True):
                for padding_mode in ("zeros", "border", "reflection"):
                    for mode in ("bilinear", "nearest", "bicubic") if spatial == 2 else ("bilinear", "nearest"):
                        for value in values:
                            if padding_mode == "reflection" and abs(value) > 1e9 and np.isfinite(value):
                                continue
                            for axis in range(spatial):
                                grid = np.zeros((1,) * (spatial + 1) + (spatial,), dtype=np.float32)
                                grid[..., axis] = value
                                expected = torch.nn.functional.grid_sample(
                                    torch.tensor(x, dtype=torch.float32),
                                    torch.tensor(grid),
                                    mode,
                                    padding_mode,
                                    align_corners,
                                ).item()
                                for executor in EXECUTORS:
                                    actual = _sample(executor, x, grid, mode, padding_mode, align_corners).item()
                                    np.testing.assert_allclose(
                                        actual,
                                        expected,
                                        rtol=1e-6,
                                        equal_nan=True,
                                        err_msg=f"{executor} {sizes} {mode} {padding_mode} {align_corners} {value}",
                                    )


# ---------------------------------------------------------------- empty and integer inputs


@pytest.mark.parametrize("executor", EXECUTORS)
def test_zero_channels_backward_gives_zero_gradients(executor):
    with onnxnn.set_executor(executor):
        x = onnxnn.zeros(2, 0, 3, 3, requires_grad=True)
        grid = onnxnn.tensor(np.random.default_rng(1).uniform(-1, 1, (2, 2, 2, 2)), dtype=onnxnn.float32)
        grid.requires_grad_(True)
        out = F.grid_sample(x, grid, align_corners=False)
        assert tuple(out.shape) == (2, 0, 2, 2)
        out.sum().backward()
        assert tuple(x.grad.shape) == (2, 0, 3, 3)
        np.testing.assert_array_equal(grid.grad.numpy(), np.zeros((2, 2, 2, 2)))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: F.grid_sample(onnxnn.zeros(2, 1, 0, 3), onnxnn.zeros(2, 2, 2, 2)),
            RuntimeError,
            r"expected input to have non-empty spatial dimensions, but input has sizes \[2, 1, 0, 3\] with "
            "dimension 2 being empty",
        ),
        (
            lambda: F.grid_sample(onnxnn.zeros(1, 1, 3, 0, 3), onnxnn.zeros(1, 1, 2, 2, 3)),
            RuntimeError,
            "dimension 3 being empty",
        ),
        (
            lambda: F.grid_sample(onnxnn.zeros(1, 1, 3, 3, dtype=onnxnn.int64), onnxnn.zeros(1, 2, 2, 2)),
            NotImplementedError,
            "not implemented for 'Long'",
        ),
        (lambda: F.affine_grid(onnxnn.zeros(2, 2, 3), [3, 1, 4, 4]), RuntimeError, "batch"),
    ],
)
def test_bad_inputs_raise_pytorchs_errors(executor, call, error, message):
    with onnxnn.set_executor(executor), pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("padding_mode", ["border", "reflection"])
def test_no_second_derivative_through_a_point_exactly_on_the_border(padding_mode):
    # PyTorch's coordinate gradient is 0 at the border itself (strictly inside only), to every order:
    # d/dgrid of sum(v * d out / d x) vanishes there (an identity affine_grid's edge points with
    # align_corners), while an interior point's is the central difference of that first derivative.
    rng = np.random.default_rng(7)
    x, v = rng.standard_normal((1, 1, 3, 3)), rng.standard_normal((1, 1, 3, 3))
    points = np.array([[[[1.0, -1.0], [-1.0, 1.0], [0.3, -0.4]]]])

    def input_gradient_dot(grid, create_graph):
        xx = onnxnn.tensor(x, requires_grad=True)
        out = F.grid_sample(xx, grid, "bilinear", padding_mode, align_corners=True)
        (gx,) = onnxnn.autograd.grad(out.sum(), xx, create_graph=create_graph)
        return (gx * onnxnn.tensor(v)).sum()

    grid = onnxnn.tensor(points, requires_grad=True)
    (second,) = onnxnn.autograd.grad(input_gradient_dot(grid, True), grid)
    np.testing.assert_array_equal(second.numpy()[0, 0, :2], 0.0)
    step = 1e-6
    for axis in range(2):
        shifted = [points.copy(), points.copy()]
        shifted[0][0, 0, 2, axis] += step
        shifted[1][0, 0, 2, axis] -= step
        ahead, behind = (input_gradient_dot(onnxnn.tensor(p), False).item() for p in shifted)
        # A bilinear weight is linear in each coordinate: the difference is exact but for rounding.
        np.testing.assert_allclose(second.numpy()[0, 0, 2, axis], (ahead - behind) / (2 * step), rtol=1e-6, atol=1e-8)
