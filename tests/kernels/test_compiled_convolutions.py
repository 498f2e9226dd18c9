"""The compiled weight-gradient loop (kernels/compiled_convolutions.py): the formula for every geometry,
which layers it takes, and what happens where it is missing.

The bound on each entry is Higham's for a sum of the entry's N * OH * OW products in any order, so it
holds for every CPU the loop may be built for (AVX-512, AVX2 with FMA, the baseline).
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxnn.ir.conv_weight_gradient import end_pads, weight_gradient_geometry
from onnxnn.kernels import compiled_convolutions

from tolerances import assert_within, gamma

pytestmark = pytest.mark.skipif(
    not compiled_convolutions.available(), reason=f"{compiled_convolutions.unavailable_reason()}"
)


def _geometry(x_shape, out_spatial, kernel, strides, dilations, pads_begin):
    pads = list(pads_begin) + end_pads(x_shape[2:], out_spatial, kernel, strides, dilations, pads_begin)
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "dilations": list(dilations), "pads": pads}
    return attrs


def _formula(x, g, kernel, strides, dilations, pads_begin):
    """dW[m, c, taps] = sum over n and output positions of G times the tap's window of the zero-padded X,
    in float64 (any spatial rank)."""
    rank = len(kernel)
    out = g.shape[2:]
    reach = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out, strides, kernel, dilations)]
    widths = [(0, 0), (0, 0)] + [(b, max(0, r - size - b)) for b, r, size in zip(pads_begin, reach, x.shape[2:])]
    padded = np.pad(x.astype(np.float64), widths)
    result = np.zeros((g.shape[1], x.shape[1], *kernel))
    letters = "hwd"[:rank]
    for tap in np.ndindex(*kernel):
        window = padded[
            (slice(None), slice(None))
            + tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilations, out, strides))
        ]
        result[(slice(None), slice(None)) + tap] = np.einsum(
            f"nm{letters},nc{letters}->mc", g.astype(np.float64), window
        )
    return result


# (id, X shape, output channels, kernel, strides, dilations, begin pads): vectors over X's channels
# where it has at least as many as G (rows of output channels), over G's where it has more (an RGB
# stem); channel counts that fill no whole vector or block of rows; strides, dilations and uneven
# pads; a single sample; one spatial axis. Kernel rows of 3 or 6 taps take AVX-512's loop over three
# neighbouring taps at once (dilated too, in both roles of the operands).
CASES = [
    ("16_to_16_3x3", (4, 16, 9, 9), 16, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("rgb_stem", (3, 3, 8, 7), 16, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("rgb_7x7_stride_2", (2, 3, 12, 12), 8, (7, 7), (2, 2), (1, 1), (3, 3)),
    ("strided_16_to_32", (2, 16, 10, 10), 32, (3, 3), (2, 2), (1, 1), (1, 1)),
    ("1x1_stride_2", (3, 16, 8, 8), 32, (1, 1), (2, 2), (1, 1), (0, 0)),
    ("odd_channels", (2, 17, 6, 5), 33, (3, 2), (1, 3), (1, 2), (1, 0)),
    ("more_input_channels", (2, 40, 5, 5), 7, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("dilated_unpadded", (2, 5, 9, 11), 7, (2, 3), (2, 1), (2, 1), (0, 2)),
    ("one_sample_64_channels", (1, 64, 6, 6), 64, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("one_spatial_axis", (3, 8, 20), 12, (5,), (2,), (1,), (2,)),
    ("two_tap_groups_dilated", (2, 16, 9, 14), 16, (1, 6), (1, 1), (1, 2), (0, 3)),
    ("rgb_dilated_3x3", (2, 3, 11, 11), 16, (3, 3), (1, 1), (2, 2), (2, 2)),
    # Rows of 16 columns and a few more: copied channels-last 16 x 16 (AVX-512) or 8 x 8 (AVX2) at a time,
    # then one by one.
    ("32_channels_long_rows", (2, 32, 5, 37), 32, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("rgb_stem_long_rows", (2, 3, 6, 37), 16, (3, 3), (1, 1), (1, 1), (1, 1)),
    # Fewer broadcast channels than a build's accumulator rows: the loop takes 1, 2 or 4 rows.
    ("three_input_channels", (3, 3, 9, 9), 40, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("one_output_channel", (2, 16, 7, 7), 1, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("two_output_channels", (2, 5, 7, 7), 2, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("four_output_channels", (2, 24, 7, 7), 4, (3, 3), (2, 2), (1, 1), (1, 1)),
]


@pytest.mark.parametrize(
    "case_id, x_shape, out_channels, kernel, strides, dilations, pads", CASES, ids=[c[0] for c in CASES]
)
def test_the_loop_is_the_weight_gradients_formula(
    case_id, x_shape, out_channels, kernel, strides, dilations, pads, build
):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(x_shape).astype(np.float32)
    out = [
        (size + 2 * pad - d * (k - 1) - 1) // s + 1
        for size, pad, k, s, d in zip(x_shape[2:], pads, kernel, strides, dilations)
    ]
    g = rng.standard_normal((x_shape[0], out_channels, *out)).astype(np.float32)
    geometry = weight_gradient_geometry(x.shape, g.shape, _geometry(x.shape, out, kernel, strides, dilations, pads))
    assert compiled_convolutions.eligible(x.shape, g.shape, x.dtype)
    result = compiled_convolutions.weight_gradient(x, g, geometry)
    assert result.dtype == np.float32 and result.shape == (out_channels, x_shape[1], *kernel)
    terms = x_shape[0] * int(np.prod(out))
    bound = gamma(terms) * _formula(np.abs(x), np.abs(g), kernel, strides, dilations, pads)
    assert_within(result, _formula(x, g, kernel, strides, dilations, pads), bound)


@pytest.mark.parametrize("threads", [2, 3, 64, 1000])
def test_threads_each_sum_a_range_of_samples(threads, build):
    # Large enough that four threads start (a thread for every 4 million products); at most one a sample.
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 16, 32, 32)).astype(np.float32)
    g = rng.standard_normal((5, 32, 32, 32)).astype(np.float32)
    geometry = weight_gradient_geometry(x.shape, g.shape, _geometry(x.shape, [32, 32], (3, 3), (1, 1), (1, 1), (1, 1)))
    result = compiled_convolutions.weight_gradient(x, g, geometry, threads)
    bound = gamma(x.shape[0] * 32 * 32) * _formula(np.abs(x), np.abs(g), (3, 3), (1, 1), (1, 1), (1, 1))
    assert_within(result, _formula(x, g, (3, 3), (1, 1), (1, 1), (1, 1)), bound)


def test_arrays_that_are_views_are_read_as_their_values():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 9, 9, 16)).astype(np.float32).transpose(0, 3, 1, 2)  # not C-contiguous
    g = rng.standard_normal((4, 8, 9, 9)).astype(np.float32)[:, ::-1]
    geometry = weight_gradient_geometry(x.shape, g.shape, _geometry(x.shape, [9, 9], (3, 3), (1, 1), (1, 1), (1, 1)))
    expected = compiled_convolutions.weight_gradient(np.ascontiguousarray(x), np.ascontiguousarray(g), geometry)
    np.testing.assert_array_equal(compiled_convolutions.weight_gradient(x, g, geometry), expected)


def _depthwise_formula(x, g, kernel, strides, dilations, pads_begin):
    """dW (M, 1, *kernel) of a depthwise convolution: output channel m reads input channel m // (M / C)."""
    multiplier = g.shape[1] // x.shape[1]
    return np.concatenate(
        [
            _formula(
                x[:, m // multiplier : m // multiplier + 1], g[:, m : m + 1], kernel, strides, dilations, pads_begin
            )
            for m in range(g.shape[1])
        ]
    )


def _depthwise_case(rng, x_shape, multiplier, kernel, strides, dilations, pads):
    x = rng.standard_normal(x_shape).astype(np.float32)
    out = [
        (size + 2 * pad - d * (k - 1) - 1) // s + 1
        for size, pad, k, s, d in zip(x_shape[2:], pads, kernel, strides, dilations)
    ]
    g = rng.standard_normal((x_shape[0], x_shape[1] * multiplier, *out)).astype(np.float32)
    attrs = {**_geometry(x.shape, out, kernel, strides, dilations, pads), "group": x_shape[1]}
    return x, g, weight_gradient_geometry(x.shape, g.shape, attrs)


# (id, X shape, output channels per input channel, kernel, strides, dilations, begin pads): MobileNet's
# 3x3 layers, stride 2 (rows long enough for the vector copies and their scalar ends) and dilated ones,
# 5x5 and 7x7 kernels (more taps than a block holds), output rows that fill no whole vector or span
# several, a channel multiplier, one spatial axis, an empty batch.
DEPTHWISE_CASES = [
    ("3x3", (2, 8, 9, 9), 1, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("3x3_stride_2_wide_rows", (2, 6, 9, 75), 1, (3, 3), (2, 2), (1, 1), (1, 1)),
    ("3x3_stride_2", (2, 6, 17, 40), 1, (3, 3), (2, 2), (1, 1), (1, 1)),
    ("5x5_stride_2", (2, 5, 12, 13), 1, (5, 5), (2, 2), (1, 1), (2, 2)),
    ("7x7_wide_rows", (3, 3, 7, 40), 1, (7, 7), (1, 1), (1, 1), (3, 3)),
    ("dilated_unpadded", (1, 4, 17, 17), 1, (3, 3), (2, 1), (2, 3), (0, 1)),
    ("uneven_kernel", (2, 16, 6, 6), 1, (3, 2), (1, 3), (1, 2), (1, 0)),
    ("channel_multiplier_3", (2, 4, 10, 10), 3, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("one_spatial_axis", (2, 6, 20), 2, (5,), (2,), (1,), (2,)),
    ("empty_batch", (0, 4, 5, 5), 1, (3, 3), (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize(
    "case_id, x_shape, multiplier, kernel, strides, dilations, pads",
    DEPTHWISE_CASES,
    ids=[c[0] for c in DEPTHWISE_CASES],
)
def test_the_depthwise_loop_is_the_weight_gradients_formula(
    case_id, x_shape, multiplier, kernel, strides, dilations, pads, build
):
    rng = np.random.default_rng(11)
    x, g, geometry = _depthwise_case(rng, x_shape, multiplier, kernel, strides, dilations, pads)
    assert compiled_convolutions.eligible(x.shape, g.shape, x.dtype, group=x_shape[1])
    result = compiled_convolutions.weight_gradient(x, g, geometry)
    assert result.dtype == np.float32 and result.shape == (g.shape[1], 1, *kernel)
    terms = max(x_shape[0] * int(np.prod(g.shape[2:])), 1)
    bound = gamma(terms) * _depthwise_formula(np.abs(x), np.abs(g), kernel, strides, dilations, pads)
    assert_within(result, _depthwise_formula(x, g, kernel, strides, dilations, pads), bound)


def test_depthwise_threads_take_whole_channels_so_the_result_does_not_depend_on_their_number(build):
    rng = np.random.default_rng(4)
    x, g, geometry = _depthwise_case(rng, (4, 24, 40, 40), 1, (3, 3), (1, 1), (1, 1), (1, 1))
    one = compiled_convolutions.weight_gradient(x, g, geometry, 1)
    for threads in (2, 5, 1000):
        np.testing.assert_array_equal(compiled_convolutions.weight_gradient(x, g, geometry, threads), one)


def test_depthwise_vector_padding_adds_nothing_even_where_the_input_is_infinite(build):
    # The loop multiplies whole vectors; the lanes past an output row must not pair G with input
    # columns that the tap does not read. Column 0 of a 3x3 kernel (pad 1) never reads the input's last
    # column, which holds inf: its sums stay finite, as the formula's.
    rng = np.random.default_rng(6)
    x, g, geometry = _depthwise_case(rng, (2, 4, 6, 11), 1, (3, 3), (1, 1), (1, 1), (1, 1))
    x[:, :, :, -1] = np.inf
    result = compiled_convolutions.weight_gradient(x, g, geometry)
    expected = _depthwise_formula(x, g, (3, 3), (1, 1), (1, 1), (1, 1))
    assert np.isfinite(result[..., 0]).all()
    np.testing.assert_array_equal(np.isfinite(result), np.isfinite(expected))
    finite = np.isfinite(expected)
    bound = gamma(2 * 6 * 11) * _depthwise_formula(
        np.abs(np.where(np.isinf(x), 0, x)), np.abs(g), (3, 3), (1, 1), (1, 1), (1, 1)
    )
    assert_within(result[finite], expected[finite], bound[finite])


def test_the_loop_is_the_formula_for_layers_wider_than_its_usual_bound(build):
    # More channels than COMPILED_MAX_CHANNELS in both operands (the AVX-512 build takes such layers).
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 80, 7, 7)).astype(np.float32)
    g = rng.standard_normal((2, 72, 7, 7)).astype(np.float32)
    kernel, strides, dilations, pads = (3, 3), (1, 1), (1, 1), (1, 1)
    geometry = weight_gradient_geometry(x.shape, g.shape, _geometry(x.shape, [7, 7], kernel, strides, dilations, pads))
    result = compiled_convolutions.weight_gradient(x, g, geometry)
    bound = gamma(2 * 49) * _formula(np.abs(x), np.abs(g), kernel, strides, dilations, pads)
    assert_within(result, _formula(x, g, kernel, strides, dilations, pads), bound)


def test_eligibility_reads_the_build_that_runs(build):
    assert compiled_convolutions.running_build() == build


# (id, X shape, G shape, taken on the AVX-512 build): layers wider than COMPILED_MAX_CHANNELS, taken
# only by that build and over G's planes of at least WIDE_MIN_OUTPUT_POSITIONS positions.
WIDE = [
    ("128_channels_7x7", (2, 128, 7, 7), (2, 128, 7, 7), True),
    ("128_channels_6x6", (2, 128, 6, 6), (2, 128, 6, 6), False),
    ("many_output_channels_7x7", (2, 8, 7, 7), (2, 512, 7, 7), True),
    ("one_spatial_axis_of_49", (2, 128, 60), (2, 128, 49), True),
    ("one_spatial_axis_of_48", (2, 128, 60), (2, 128, 48), False),
    ("grayscale", (2, 1, 7, 7), (2, 128, 7, 7), False),
]


@pytest.mark.parametrize("build_name", ["avx512", "avx2"])
@pytest.mark.parametrize("case_id, x_shape, g_shape, taken", WIDE, ids=[c[0] for c in WIDE])
def test_wider_layers_are_taken_by_the_avx512_build_over_large_planes(
    case_id, x_shape, g_shape, taken, build_name, monkeypatch
):
    monkeypatch.setattr(compiled_convolutions, "running_build", lambda: build_name)  # what eligibility reads
    assert compiled_convolutions.eligible(x_shape, g_shape, np.float32) == (taken and build_name == "avx512")


# (id, X shape, G shape, dtype, groups): what stays with onnxruntime's GEMMs or numpy's matmuls.
NOT_ELIGIBLE = [
    ("float64", (2, 8, 5, 5), (2, 8, 5, 5), np.float64, 1),
    ("float16", (2, 8, 5, 5), (2, 8, 5, 5), np.float16, 1),
    ("grayscale", (2, 1, 5, 5), (2, 8, 5, 5), np.float32, 1),
    ("many_input_channels", (2, compiled_convolutions.COMPILED_MAX_CHANNELS + 1, 5, 5), (2, 8, 5, 5), np.float32, 1),
    ("many_output_channels", (2, 8, 5, 5), (2, compiled_convolutions.COMPILED_MAX_CHANNELS + 1, 5, 5), np.float32, 1),
    ("three_spatial_axes", (2, 4, 5, 5, 5), (2, 4, 5, 5, 5), np.float32, 1),
    ("grouped_not_depthwise", (2, 8, 5, 5), (2, 8, 5, 5), np.float32, 4),
    ("depthwise_float64", (2, 8, 5, 5), (2, 8, 5, 5), np.float64, 8),
    ("depthwise_three_spatial_axes", (2, 4, 5, 5, 5), (2, 4, 5, 5, 5), np.float32, 4),
]


@pytest.mark.parametrize("case_id, x_shape, g_shape, dtype, group", NOT_ELIGIBLE, ids=[c[0] for c in NOT_ELIGIBLE])
def test_other_layers_are_not_taken(case_id, x_shape, g_shape, dtype, group):
    assert not compiled_convolutions.eligible(x_shape, g_shape, dtype, group)


def test_switched_off_it_takes_nothing(monkeypatch):
    monkeypatch.setattr(compiled_convolutions, "ENABLED", False)
    assert not compiled_convolutions.eligible((2, 8, 5, 5), (2, 8, 5, 5), np.float32)
    assert not compiled_convolutions.available()


@pytest.mark.parametrize(
    "library, version, reason",
    [
        ("onnxnn.kernels._no_such_library", 1, "was not built"),
        (compiled_convolutions._LIBRARY, 0, "older convolution_loops.c"),
    ],
)
def test_a_missing_or_older_library_says_why_and_takes_nothing(library, version, reason, monkeypatch):
    monkeypatch.setattr(compiled_convolutions, "_LIBRARY", library)
    monkeypatch.setattr(compiled_convolutions, "_VERSION", version)
    monkeypatch.setattr(compiled_convolutions, "_LOOP", compiled_convolutions._Library())
    assert not compiled_convolutions.eligible((2, 8, 5, 5), (2, 8, 5, 5), np.float32)
    assert reason in compiled_convolutions.unavailable_reason()


def test_a_cpu_with_only_the_baseline_build_keeps_the_gemms(monkeypatch):
    # Without AVX2 the loop's 4-wide vectors are slower than onnxruntime's GEMMs: it is not used.
    loop = compiled_convolutions._Library()
    assert loop.get() is not None
    monkeypatch.setattr(loop, "baseline_only", True)
    monkeypatch.setattr(compiled_convolutions, "_LOOP", loop)
    assert not compiled_convolutions.eligible((2, 8, 5, 5), (2, 8, 5, 5), np.float32)
    assert not compiled_convolutions.available()
