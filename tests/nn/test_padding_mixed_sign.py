"""F.pad with pads of both signs, and the sizes PyTorch refuses.

PyTorch's reflect and replicate kernels index the original input: output position ``j`` of a padded
dimension reads ``reflect(j - pad_left)`` or ``clamp(j - pad_left, 0, W - 1)``, so a crop on one side
does not change which values the other side reflects or repeats. The reference below is that index
map in numpy (``np.take`` per dimension), independent of how onnxnn records the padding.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F

from .layer_checks import EXECUTORS

RNG = np.random.default_rng(7)


def source_positions(size: int, begin: int, end: int, mode: str) -> np.ndarray:
    """The input position each output position of a padded dimension reads, as PyTorch's kernels."""
    shifted = np.arange(size + begin + end) - begin
    if mode == "replicate":
        return np.clip(shifted, 0, size - 1)
    reflected = np.abs(shifted)  # before the start: mirrored about position 0
    return np.where(reflected > size - 1, 2 * (size - 1) - reflected, reflected)  # after the end: about W - 1


def index_map_reference(x: np.ndarray, pad, mode: str) -> np.ndarray:
    result = x
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        result = np.take(result, source_positions(x.shape[axis], pad[2 * i], pad[2 * i + 1], mode), axis=axis)
    return result


# (id, input shape, pad, mode)
MIXED_CASES = [
    ("reflect-pad-left-crop-right", (1, 1, 4), (2, -2), "reflect"),
    ("reflect-crop-left-pad-right", (1, 1, 4), (-1, 3), "reflect"),
    ("reflect-crop-all-but-reflection", (1, 1, 4), (-3, 3), "reflect"),
    ("reflect-unbatched", (2, 5), (3, -4), "reflect"),
    ("reflect-2d", (1, 2, 4, 5), (-3, 2, 3, -3), "reflect"),
    ("reflect-2d-one-side", (2, 3, 4), (0, 0, -2, 2), "reflect"),
    ("reflect-3d", (1, 1, 3, 4, 3), (2, -2, -3, 1, 1, -2), "reflect"),
    ("replicate-crop-more-than-pad", (1, 1, 4), (-4, 2), "replicate"),
    ("replicate-crop-past-the-input", (1, 1, 4), (-6, 4), "replicate"),
    ("replicate-pad-left-crop-right", (1, 1, 2), (3, -3), "replicate"),
    ("replicate-2d", (1, 2, 3, 3), (-3, 1, 2, -4), "replicate"),
    ("replicate-3d-unbatched", (2, 2, 3, 2), (-2, 3, 1, -3, 2, -3), "replicate"),
    ("replicate-empty-width", (1, 2, 3, 3), (-2, -1, 1, 0), "replicate"),
    ("reflect-empty-height", (1, 1, 4, 4), (1, 1, -2, -2), "reflect"),
    ("reflect-zero-batch", (0, 1, 4), (1, -2), "reflect"),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("case_id, shape, pad, mode", MIXED_CASES, ids=[c[0] for c in MIXED_CASES])
def test_mixed_sign_pads_read_the_original_input(case_id, shape, pad, mode, dtype, executor):
    x = RNG.standard_normal(shape)
    numpy_dtype = np.float32 if dtype == onnxnn.float32 else np.float64
    with onnxnn.set_executor(executor):
        actual = F.pad(onnxnn.tensor(x, dtype=dtype), pad, mode).numpy()
    assert actual.dtype == numpy_dtype
    np.testing.assert_array_equal(actual, index_map_reference(x.astype(numpy_dtype), pad, mode))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, shape, pad, mode", MIXED_CASES[:12], ids=[c[0] for c in MIXED_CASES[:12]])
def test_mixed_sign_pad_gradients_match_finite_differences(case_id, shape, pad, mode, executor):
    with onnxnn.set_executor(executor):
        check_gradients(lambda x: F.pad(x, pad, mode), [RNG.standard_normal(shape)])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "shape, pad, mode, message",
    [
        ((1, 1, 4), (0, -4), "reflect", r"^input \(W: 4\) is too small. Calculated output W: 0$"),
        ((1, 1, 4), (-2, -2), "replicate", r"^input \(W: 4\) is too small. Calculated output W: 0$"),
        ((0, 1, 4), (1, -5), "replicate", r"^input \(W: 4\) is too small. Calculated output W: 0$"),
        ((1, 4), (-4, -1), "reflect", r"^input \(W: 4\) is too small. Calculated output W: -1$"),
        (
            (1, 1, 4, 4),
            (-2, -2, -2, -2),
            "reflect",
            r"^input \(H: 4, W: 4\) is too small. Calculated output H: 0 W: 0$",
        ),
        (
            (1, 1, 4, 4),
            (-2, -3, -2, -3),
            "replicate",
            r"^input \(H: 4, W: 4 \) is too small. Calculated output H: -1 W: -1$",
        ),
        (
            (1, 1, 4, 4, 4),
            (-2, -2, -2, -2, -2, -2),
            "replicate",
            r"^input \(D: 4 H: 4, W: 4\) is too small. Calculated output D: 0 H: 0 W: 0$",
        ),
        ((1, 1, 4, 4), (-2, -3, 0, 0), "replicate", r"negative dimension -1: \[1, 1, 4, -1\]"),
        ((1, 1, 4, 4, 4), (0, 0, 0, 0, -2, -3), "reflect", r"negative dimension -1: \[1, 1, -1, 4, 4\]"),
        # The reflect bound is on the original size, whatever the other side crops.
        (
            (1, 1, 4),
            (4, -2),
            "reflect",
            r"Argument #4: .* but got: padding \(4, -2\) at dimension 2 of input \[1, 1, 4\]",
        ),
        ((1, 1, 4, 4), (0, 0, -1, 4), "reflect", r"Argument #6: .* padding \(-1, 4\) at dimension 2"),
        ((1, 1, 4, 4, 4), (0, 0, 0, 0, -1, 4), "reflect", r"Argument #8: .* padding \(-1, 4\) at dimension 2"),
        # Constant padding narrows each negative pad away first: a crop past what is left fails.
        ((1, 1, 4), (-5, 2), "constant", r"^narrow\(\): length must be non-negative. \(Padding \(-5, 2\) of dim"),
        ((1, 1, 4), (2, -5), "constant", r"^narrow\(\): length must be non-negative"),
        ((1, 1, 4), (-2, -3), "constant", r"^narrow\(\): length must be non-negative"),
        ((1, 1, 4, 3), (0, 0, -5, 5), "constant", r"crops more than its size 4"),
    ],
)
def test_sizes_pytorch_refuses_raise_its_errors(shape, pad, mode, message, executor):
    with onnxnn.set_executor(executor), pytest.raises(RuntimeError, match=message):
        F.pad(onnxnn.zeros(*shape), pad, mode).numpy()


def test_constant_crop_up_to_the_size_still_pads():
    x = onnxnn.arange(4.0).reshape(1, 1, 4)
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            assert F.pad(x, (-4, 2), value=7.0).tolist() == [[[7.0, 7.0]]]


def test_mixed_sign_pads_match_torch():
    torch = pytest.importorskip("torch")
    for case_id, shape, pad, mode in MIXED_CASES:
        x = RNG.standard_normal(shape)
        expected = torch.nn.functional.pad(torch.tensor(x), pad, mode).numpy()
        np.testing.assert_array_equal(F.pad(onnxnn.tensor(x), pad, mode).numpy(), expected, err_msg=case_id)
