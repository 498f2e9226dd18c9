"""Padding: F.pad (constant, reflect, replicate, circular; negative pads) and the Pad layers in 1, 2 and 3 d.

Expected values come from ``np.pad`` (constant, reflect, edge, wrap) after cropping the negative
pads, which is PyTorch's result for every mode except reflect and replicate padding that reads
elements the other side's crop removes (``test_padding_mixed_sign.py`` checks those against PyTorch's
index map). Padding copies values, so forward results are exact;
gradients (sums of copies) are checked against float64 finite differences on both executors.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS, exported_output

RNG = np.random.default_rng(41)
NUMPY_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def pad_reference(x: np.ndarray, pad, mode: str, value: float = 0.0) -> np.ndarray:
    """``np.pad`` of the trailing dimensions, negative pads cropping first."""
    widths = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        begin, end = pad[2 * i], pad[2 * i + 1]
        crop[axis] = slice(max(-begin, 0), x.shape[axis] - max(-end, 0))
        widths[axis] = (max(begin, 0), max(end, 0))
    cropped = x[tuple(crop)]
    if mode == "constant":
        return np.pad(cropped, widths, mode="constant", constant_values=value)
    return np.pad(cropped, widths, mode=NUMPY_MODES[mode])


# (id, input shape, pad, mode, value)
PAD_CASES = [
    ("constant-last", (2, 3), (1, 2), "constant", 0.0),
    ("constant-value-2d", (1, 2, 3, 4), (1, 0, 2, 3), "constant", -1.5),
    ("constant-negative", (2, 5, 4), (-1, 2, 0, -3), "constant", 0.0),
    ("constant-every-dim", (2, 3, 2), (1, 1, 0, 2, 1, 0), "constant", 2.0),
    ("constant-4d-pad", (2, 2, 2, 2, 3), (1, 1, 1, 1, 1, 1, 1, 1), "constant", 0.0),
    ("reflect-1d", (2, 3, 5), (2, 3), "reflect", None),
    ("reflect-2d-unbatched", (2, 4, 5), (1, 2, 3, 0), "reflect", None),
    ("reflect-3d", (1, 1, 3, 4, 3), (1, 2, 0, 1, 2, 1), "reflect", None),
    ("reflect-negative", (1, 2, 6), (-1, 2), "reflect", None),
    ("replicate-1d-unbatched", (3, 4), (3, 1), "replicate", None),
    ("replicate-2d", (1, 2, 3, 3), (2, 2, 1, 4), "replicate", None),
    ("replicate-3d", (1, 1, 2, 3, 2), (1, 1, 1, 1, 2, 0), "replicate", None),
    ("replicate-negative", (1, 2, 4, 5), (2, -1, -2, 1), "replicate", None),
    ("circular-1d", (1, 2, 5), (2, 3), "circular", None),
    ("circular-2d", (1, 2, 4, 3), (3, 1, 2, 4), "circular", None),
    ("circular-3d", (1, 1, 3, 2, 3), (1, 2, 2, 0, 1, 3), "circular", None),
    ("circular-negative", (1, 1, 6), (2, -1), "circular", None),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("case_id, shape, pad, mode, value", PAD_CASES, ids=[c[0] for c in PAD_CASES])
def test_pad_matches_numpy(case_id, shape, pad, mode, value, dtype, executor):
    x = RNG.standard_normal(shape)
    with onnxnn.set_executor(executor):
        out = F.pad(onnxnn.tensor(x, dtype=dtype), pad, mode, value)
        actual = out.numpy()
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    expected = pad_reference(x.astype(numpy_dtype), pad, mode, 0.0 if value is None else value)
    assert actual.dtype == numpy_dtype
    np.testing.assert_array_equal(actual, expected.astype(numpy_dtype))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, shape, pad, mode, value", PAD_CASES, ids=[c[0] for c in PAD_CASES])
def test_pad_gradients_match_finite_differences(case_id, shape, pad, mode, value, executor):
    with onnxnn.set_executor(executor):
        check_gradients(lambda x: F.pad(x, pad, mode, value), [RNG.standard_normal(shape)])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_zero_padding_returns_a_new_tensor(mode):
    x = onnxnn.randn(1, 2, 3)
    before = x.numpy().copy()
    out = F.pad(x, (0, 0), mode)
    out.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), before)


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_copies_half_precision_values_exactly(mode, dtype):
    x = RNG.standard_normal((1, 2, 3, 4))
    rounded = onnxnn.tensor(x).to(dtype)
    out = F.pad(rounded, (1, 2, 2, 1), mode)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.float().numpy(), pad_reference(rounded.float().numpy(), (1, 2, 2, 1), mode))


# (layer, its repr, mode, the pad F.pad gets, value, an input shape)
LAYER_CASES = [
    (nn.ConstantPad1d(2, 3.5), "ConstantPad1d(padding=(2, 2), value=3.5)", "constant", (2, 2), 3.5, (2, 3, 4)),
    (
        nn.ConstantPad2d((1, 0, 2, 1), -1.0),
        "ConstantPad2d(padding=(1, 0, 2, 1), value=-1.0)",
        "constant",
        (1, 0, 2, 1),
        -1.0,
        (1, 2, 3, 3),
    ),
    (
        nn.ConstantPad3d(1, 0.5),
        "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=0.5)",
        "constant",
        (1,) * 6,
        0.5,
        (1, 2, 2, 2),
    ),
    (nn.ZeroPad1d((1, 2)), "ZeroPad1d((1, 2))", "constant", (1, 2), 0.0, (2, 3)),
    (nn.ZeroPad2d(1), "ZeroPad2d((1, 1, 1, 1))", "constant", (1, 1, 1, 1), 0.0, (1, 2, 3, 3)),
    (
        nn.ZeroPad3d((1, 0, 0, 1, 2, 0)),
        "ZeroPad3d((1, 0, 0, 1, 2, 0))",
        "constant",
        (1, 0, 0, 1, 2, 0),
        0.0,
        (1, 1, 2, 2, 2),
    ),
    (nn.ReflectionPad1d(2), "ReflectionPad1d((2, 2))", "reflect", (2, 2), 0.0, (1, 2, 4)),
    (nn.ReflectionPad2d((1, 2, 0, 1)), "ReflectionPad2d((1, 2, 0, 1))", "reflect", (1, 2, 0, 1), 0.0, (1, 1, 3, 4)),
    (nn.ReflectionPad3d(1), "ReflectionPad3d((1, 1, 1, 1, 1, 1))", "reflect", (1,) * 6, 0.0, (1, 1, 2, 3, 2)),
    (nn.ReplicationPad1d((0, 3)), "ReplicationPad1d((0, 3))", "replicate", (0, 3), 0.0, (2, 3)),
    (nn.ReplicationPad2d(2), "ReplicationPad2d((2, 2, 2, 2))", "replicate", (2,) * 4, 0.0, (1, 1, 2, 3)),
    (
        nn.ReplicationPad3d((1, 0, 1, 0, 1, 0)),
        "ReplicationPad3d((1, 0, 1, 0, 1, 0))",
        "replicate",
        (1, 0, 1, 0, 1, 0),
        0.0,
        (1, 2, 2, 2, 2),
    ),
    (nn.CircularPad1d(1), "CircularPad1d((1, 1))", "circular", (1, 1), 0.0, (1, 2, 3)),
    (nn.CircularPad2d((1, 2, 2, 1)), "CircularPad2d((1, 2, 2, 1))", "circular", (1, 2, 2, 1), 0.0, (2, 3, 4)),
    (nn.CircularPad3d(1), "CircularPad3d((1, 1, 1, 1, 1, 1))", "circular", (1,) * 6, 0.0, (1, 1, 2, 2, 3)),
]


@pytest.mark.parametrize("layer, text, mode, pad, value, shape", LAYER_CASES, ids=[c[1] for c in LAYER_CASES])
def test_pad_layers_pad_as_documented_and_export(layer, text, mode, pad, value, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    expected = pad_reference(x, pad, mode, value)
    assert repr(layer) == text
    assert layer.state_dict() == {} or len(layer.state_dict()) == 0
    np.testing.assert_array_equal(layer(onnxnn.tensor(x)).numpy(), expected)
    np.testing.assert_array_equal(exported_output(layer, onnxnn.tensor(x)), expected)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda x: F.pad(x, (1, 2, 3)), RuntimeError, "Padding length must be divisible by 2"),
        (
            lambda x: F.pad(x, (1,) * 10),
            RuntimeError,
            "Padding length should be less than or equal to two times the input dimension "
            "but got padding length 10 and input of dimension 4",
        ),
        (lambda x: F.pad(x, (1, 1), "foo"), NotImplementedError, "Unrecognised padding mode foo"),
        (
            lambda x: F.pad(x, (3, 3, 0, 0), "reflect"),
            RuntimeError,
            "Padding size should be less than the corresponding input dimension",
        ),
        (lambda x: F.pad(x, (1, 1), "reflect", 2.0), RuntimeError, "doesn't take in value argument"),
        (
            lambda x: F.pad(x[0, 0, 0], (1, 1), "replicate"),
            NotImplementedError,
            "Padding size 2 is not supported for 1D input tensor",
        ),
        (lambda x: F.pad(x, (-2, -2)), RuntimeError, r"narrow\(\): length must be non-negative"),
        (lambda x: F.pad(x, (4, 4, 0, 0), "circular"), RuntimeError, "wrapping around more than once"),
        (lambda x: nn.CircularPad2d(1)(x[0, 0]), ValueError, r"expected 3D or 4D input \(got 2D input\)"),
        (lambda x: nn.ZeroPad2d((1, 2, 3)), ValueError, "padding must be an int or a tuple of 4 ints"),
    ],
)
def test_bad_padding_raises_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(onnxnn.randn(1, 2, 3, 3))


def test_pad_and_layers_match_torch():
    torch = pytest.importorskip("torch")
    for case_id, shape, pad, mode, value in PAD_CASES:
        x = RNG.standard_normal(shape)
        expected = torch.nn.functional.pad(torch.tensor(x), pad, mode, value).numpy()
        np.testing.assert_array_equal(
            F.pad(onnxnn.tensor(x, dtype=onnxnn.float64), pad, mode, value).numpy(), expected, err_msg=case_id
        )
    for layer, text, *_ in LAYER_CASES:
        twin = getattr(torch.nn, type(layer).__name__)(
            *([layer.padding, layer.value] if type(layer).__name__.startswith("ConstantPad") else [layer.padding])
        )
        assert repr(twin) == text
