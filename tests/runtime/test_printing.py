"""format_tensor must reproduce PyTorch's ``repr(tensor)`` character for character.

Every expected string below is what ``repr`` of the torch tensor named in the case id
prints with default print options (torch 2.x).
"""

from __future__ import annotations

from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest

from onnxnn.runtime.printing import format_tensor, set_printoptions

f32, f64 = np.float32, np.float64
nan, inf = float("nan"), float("inf")


@pytest.fixture(autouse=True)
def _default_options() -> Iterator[None]:
    # Print options are module-global; never let one test leak them into another.
    set_printoptions(profile="default")
    yield
    set_printoptions(profile="default")


def _zeros_7x7x21_summary() -> str:
    row = "[0., 0., 0.,  ..., 0., 0., 0.]"
    block = "[" + ",\n         ".join([row] * 3 + ["..."] + [row] * 3) + "]"
    return "tensor([" + ",\n\n        ".join([block] * 3 + ["..."] + [block] * 3) + "])"


CASES = [
    # id, array, suffixes, expected
    ("float_ints", np.array([1.0, 2.0, 3.0], f32), [], "tensor([1., 2., 3.])"),
    ("zeros_2x3", np.zeros((2, 3), f32), [], "tensor([[0., 0., 0.],\n        [0., 0., 0.]])"),
    ("sci_small", np.array([1e-5, 1.0], f32), [], "tensor([1.0000e-05, 1.0000e+00])"),
    ("sci_negative", np.array([-1e-5, 1.0], f32), [], "tensor([-1.0000e-05,  1.0000e+00])"),
    ("sci_large", np.array([1e10], f32), [], "tensor([1.0000e+10])"),
    # Integer-valued floats whose range exceeds 1000x switch to scientific notation...
    ("int_mode_sci_ratio", np.array([1.0, 2000.0], f32), [], "tensor([1.0000e+00, 2.0000e+03])"),
    # ...but exactly 1000x does not, and every element is padded to the widest.
    ("int_mode_ratio_1000", np.array([1.0, 1000.0], f32), [], "tensor([   1., 1000.])"),
    ("fixed_padded", np.array([0.5, 123.456], f32), [], "tensor([  0.5000, 123.4560])"),
    (
        "grad_fn",
        np.array([-0.3037, -1.0413], f32),
        ["grad_fn=<AddBackward0>"],
        "tensor([-0.3037, -1.0413], grad_fn=<AddBackward0>)",
    ),
    (
        "fixed_2d",
        np.array([[1.5, -2.25], [3.0, 4.0]], f32),
        [],
        "tensor([[ 1.5000, -2.2500],\n        [ 3.0000,  4.0000]])",
    ),
    # Nonfinite values take no part in the width: they pad only up to the finite width.
    ("nonfinite_int_mode", np.array([nan, inf, -inf, 1.0], f32), [], "tensor([nan, inf, -inf, 1.])"),
    ("nan_fixed", np.array([nan, 1.5], f32), [], "tensor([   nan, 1.5000])"),
    ("negative_zero", np.array([-0.0, 0.0], f32), [], "tensor([-0., 0.])"),
    ("int64", np.array([1, 2, 3], np.int64), [], "tensor([1, 2, 3])"),
    ("int_padded", np.array([-1, 10, 100], np.int64), [], "tensor([ -1,  10, 100])"),
    ("int32_dtype", np.array([1, 2], np.int32), ["dtype=torch.int32"], "tensor([1, 2], dtype=torch.int32)"),
    ("bool", np.array([True, False]), [], "tensor([ True, False])"),
    ("bool_2d", np.array([[True], [False]]), [], "tensor([[ True],\n        [False]])"),
    ("scalar_int_mode", np.array(3.0, f32), [], "tensor(3.)"),
    ("scalar_fixed", np.array(0.5, f32), [], "tensor(0.5000)"),
    ("scalar_sci", np.array(1e-5, f32), [], "tensor(1.0000e-05)"),
    ("scalar_bool", np.array(True), [], "tensor(True)"),
    ("scalar_int", np.array(7, np.int64), [], "tensor(7)"),
    ("empty", np.zeros((0,), f32), [], "tensor([])"),
    ("empty_int_dtype", np.zeros((0,), np.int64), ["dtype=torch.int64"], "tensor([], dtype=torch.int64)"),
    ("empty_2d", np.zeros((0, 3), f32), [], "tensor([], size=(0, 3))"),
    ("empty_2d_dtype", np.zeros((0, 3), np.int64), ["dtype=torch.int64"], "tensor([], size=(0, 3), dtype=torch.int64)"),
    ("empty_device_first", np.zeros((2, 0), f32), ["device='cuda:0'"], "tensor([], device='cuda:0', size=(2, 0))"),
    ("float64", np.array([1.5, 2.0], f64), ["dtype=torch.float64"], "tensor([1.5000, 2.0000], dtype=torch.float64)"),
    ("float16", np.array([0.1], np.float16), ["dtype=torch.float16"], "tensor([0.1000], dtype=torch.float16)"),
    (
        "bfloat16",
        np.array([1.5, 3.0], ml_dtypes.bfloat16),
        ["dtype=torch.bfloat16"],
        "tensor([1.5000, 3.0000], dtype=torch.bfloat16)",
    ),
    ("complex", np.array([1 + 2j, 3 - 1j], np.complex64), [], "tensor([1.+2.j, 3.-1.j])"),
    (
        "blocks_2x2x2",
        np.arange(8, dtype=f32).reshape(2, 2, 2),
        [],
        "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])",
    ),
    # 14 elements of width 3 (+2 for ", ") fit in 80 - len("tensor(") columns.
    (
        "wrap_int_mode",
        np.arange(30, dtype=f32),
        [],
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.])",
    ),
    (
        "wrap_fixed",
        np.arange(10, dtype=f32) / f32(3),
        [],
        "tensor([0.0000, 0.3333, 0.6667, 1.0000, 1.3333, 1.6667, 2.0000, 2.3333, 2.6667,\n        3.0000])",
    ),
    (
        "suffix_wraps",
        np.ones(14, f32),
        ["requires_grad=True"],
        "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n       requires_grad=True)",
    ),
    (
        "suffix_fits",
        np.ones(12, f32),
        ["requires_grad=True"],
        "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.], requires_grad=True)",
    ),
    # Summary widths come from the shown elements only (1999 -> width 4).
    ("summary_1d", np.arange(2000), [], "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"),
    (
        "summary_2d",
        np.arange(10000).reshape(100, 100),
        [],
        "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
        "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
        "        ...,\n"
        "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
        "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
        "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])",
    ),
    ("summary_3d", np.zeros((7, 7, 21), f32), [], _zeros_7x7x21_summary()),
]


@pytest.mark.parametrize(("array", "suffixes", "expected"), [pytest.param(a, s, e, id=i) for i, a, s, e in CASES])
def test_matches_torch_repr(array: np.ndarray, suffixes: list[str], expected: str) -> None:
    assert format_tensor(array, suffixes=suffixes) == expected


OPTION_CASES = [
    # id, options, array, expected
    # A forced sci_mode decides the notation first; the width is that of the values written in it
    # (PyTorch 2.13; older releases kept the width measured for the automatic notation).
    ("sci_mode_off", {"sci_mode": False}, np.array([1e-5, 1.0], f32), "tensor([0.0000, 1.0000])"),
    (
        "sci_mode_off_wide",
        {"sci_mode": False},
        np.array([1.5, 2000.25, 0.001], f32),
        "tensor([   1.5000, 2000.2500,    0.0010])",
    ),
    (
        "sci_mode_off_huge",
        {"sci_mode": False},
        np.array([1e-8, 1e9], f32),
        "tensor([         0.0000, 1000000000.0000])",
    ),
    ("sci_mode_on", {"sci_mode": True}, np.array([0.5, 2.0], f32), "tensor([5.0000e-01, 2.0000e+00])"),
    ("sci_mode_on_integers", {"sci_mode": True}, np.array([3.0, 4.0], f32), "tensor([3.0000e+00, 4.0000e+00])"),
    ("precision_2", {"precision": 2}, np.array([0.123, 1.5], f32), "tensor([0.12, 1.50])"),
    ("threshold_edgeitems", {"threshold": 5, "edgeitems": 2}, np.arange(10), "tensor([0, 1,  ..., 8, 9])"),
    ("linewidth", {"linewidth": 20}, np.arange(6, dtype=f32), "tensor([0., 1., 2.,\n        3., 4., 5.])"),
    ("profile_short", {"profile": "short"}, np.array([0.125, 1.0], f32), "tensor([0.12, 1.00])"),
]


@pytest.mark.parametrize(("options", "array", "expected"), [pytest.param(o, a, e, id=i) for i, o, a, e in OPTION_CASES])
def test_printoptions(options: dict, array: np.ndarray, expected: str) -> None:
    set_printoptions(**options)
    assert format_tensor(array) == expected


def test_set_printoptions_resets_sci_mode() -> None:
    # Like torch, sci_mode is assigned on every call, so omitting it restores auto mode.
    set_printoptions(sci_mode=True)
    set_printoptions(precision=4)
    assert format_tensor(np.array([0.5], f32)) == "tensor([0.5000])"


def test_prefix_sets_suffix_indent() -> None:
    out = format_tensor(np.ones(14, f32), suffixes=["requires_grad=True"], prefix="Foo(")
    assert out == ("Foo([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n    requires_grad=True)")
