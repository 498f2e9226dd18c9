"""Pooling layers beyond their float values: reprs, low precision, export to plain onnxruntime, errors
in PyTorch's words, integer dtypes (exact max pools, truncating int64 averages, refused dtypes), empty
dims (only the batch may be empty), and agreement with PyTorch where it is installed.

Expected values come from the window-by-window numpy pooling of pooling_cases.py. The pools' values
and gradients in float dtypes are in test_pooling_windows.py.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx

from .pooling_cases import MAX_CASES, RNG, _values, distinct, window_pool

# ---------------------------------------------------------------- reprs and state


@pytest.mark.parametrize(
    "layer, text",
    [
        (nn.MaxPool2d(3, stride=2), "MaxPool2d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)"),
        (
            nn.MaxPool1d(2, padding=1, dilation=2, ceil_mode=True, return_indices=True),
            "MaxPool1d(kernel_size=2, stride=2, padding=1, dilation=2, ceil_mode=True)",
        ),
        (
            nn.MaxPool3d((1, 2, 2)),
            "MaxPool3d(kernel_size=(1, 2, 2), stride=(1, 2, 2), padding=0, dilation=1, ceil_mode=False)",
        ),
        (nn.AvgPool1d(3), "AvgPool1d(kernel_size=(3,), stride=(3,), padding=(0,))"),
        (nn.AvgPool2d(3, stride=2, divisor_override=2), "AvgPool2d(kernel_size=3, stride=2, padding=0)"),
        (nn.AvgPool3d((2, 2, 1), padding=1), "AvgPool3d(kernel_size=(2, 2, 1), stride=(2, 2, 1), padding=1)"),
        (nn.AdaptiveAvgPool2d((5, None)), "AdaptiveAvgPool2d(output_size=(5, None))"),
        (nn.AdaptiveMaxPool1d(3, return_indices=True), "AdaptiveMaxPool1d(output_size=3)"),
        (nn.LPPool2d(2, 3, stride=2), "LPPool2d(norm_type=2, kernel_size=3, stride=2, ceil_mode=False)"),
        (nn.LPPool1d(1.5, 2), "LPPool1d(norm_type=1.5, kernel_size=2, stride=None, ceil_mode=False)"),
        (nn.MaxUnpool2d(2), "MaxUnpool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))"),
        (
            nn.MaxUnpool3d(2, stride=1, padding=1),
            "MaxUnpool3d(kernel_size=(2, 2, 2), stride=(1, 1, 1), padding=(1, 1, 1))",
        ),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, nn.Module) else None,
)
def test_repr_matches_pytorch(layer, text):
    assert repr(layer) == text
    assert layer.state_dict() == {} or len(layer.state_dict()) == 0
    assert list(layer.parameters()) == []


# ---------------------------------------------------------------- low precision


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize(
    "layer",
    [nn.MaxPool2d(2), nn.AdaptiveMaxPool2d((2, 3)), nn.AvgPool2d(2), nn.AdaptiveAvgPool2d(2)],
    ids=lambda layer: type(layer).__name__,
)
def test_low_precision_pooling_forward_and_backward(layer, dtype, executor):
    x = distinct(1, 2, 4, 5) / 8  # small multiples of 1/32: exact in float16 and bfloat16
    xt = onnxnn.tensor(x, dtype=dtype, requires_grad=True)
    with onnxnn.set_executor(executor):
        out = layer(xt)
        out.float().sum().backward()
        actual, grad = _values(out), _values(xt.grad)
    assert out.dtype is dtype and xt.grad.dtype is dtype
    with onnxnn.set_executor("kernels"):
        x64 = onnxnn.tensor(x, requires_grad=True)
        layer(x64).sum().backward()
        expected, expected_grad = _values(layer(x64)), _values(x64.grad)
    u = 2.0**-11 if dtype is onnxnn.float16 else 2.0**-8
    # Max pools select (exact); averages of <= 4 exact terms round once or twice.
    np.testing.assert_array_less(np.abs(actual - expected), 3 * u * np.abs(expected) + 1e-12)
    np.testing.assert_array_less(np.abs(grad - expected_grad), 3 * u * np.abs(expected_grad) + 1e-12)


# ---------------------------------------------------------------- export

EXPORT_CASES = [
    ("max_pool", lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (2, 2, 7, 6), 0),
    ("avg_pool_divisor", lambda: nn.AvgPool2d(2, padding=1, divisor_override=3), (1, 2, 5, 5), 4),
    ("adaptive_avg", lambda: nn.AdaptiveAvgPool2d((3, 2)), (1, 2, 7, 5), 35),
    ("adaptive_max_uneven", lambda: nn.AdaptiveMaxPool2d((3, 2)), (1, 2, 7, 5), 0),
    ("adaptive_max_3d", lambda: nn.AdaptiveMaxPool3d(2), (1, 1, 4, 6, 2), 0),
    ("lp_pool", lambda: nn.LPPool1d(2, 3), (1, 2, 9), 5),
]


@pytest.mark.parametrize("case_id, build, input_shape, terms", EXPORT_CASES, ids=[c[0] for c in EXPORT_CASES])
def test_export_runs_in_plain_onnxruntime_like_the_layer(case_id, build, input_shape, terms):
    layer = build().eval()
    x = onnxnn.tensor(RNG.uniform(0.5, 2.0, input_shape).astype(np.float32))
    proto = to_onnx(layer, x, input_names=["x"], output_names=["y"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"x": x.numpy()})
    with onnxnn.set_executor("kernels"):
        ours = layer(x).numpy().astype(np.float64)
    # Positive inputs: both computations are within gamma(terms) of the exact value, relatively.
    np.testing.assert_array_less(np.abs(exported - ours), 2 * gamma(terms + 2) * np.abs(ours) + 1e-30)


def test_export_of_max_unpool_with_indices_as_an_input():
    x = distinct(1, 2, 4, 4).astype(np.float32)
    values, indices = F.max_pool2d(onnxnn.tensor(x), 2, return_indices=True)
    proto = to_onnx(nn.MaxUnpool2d(2).eval(), (values, indices), input_names=["v", "i"], output_names=["y"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"v": values.numpy(), "i": indices.numpy()})
    np.testing.assert_array_equal(exported, nn.MaxUnpool2d(2)(values, indices).numpy())


# ---------------------------------------------------------------- errors in PyTorch's words

ERROR_CASES = [
    (
        "max_pad_too_big",
        lambda: nn.MaxPool2d(2, padding=2)(onnxnn.randn(1, 1, 4, 4)),
        RuntimeError,
        "pad should be at most half of effective kernel size",
    ),
    (
        "avg_pad_too_big",
        lambda: nn.AvgPool1d(2, padding=2)(onnxnn.randn(1, 1, 4)),
        RuntimeError,
        "pad should be at most half of kernel size",
    ),
    (
        "max_rank",
        lambda: nn.MaxPool2d(2)(onnxnn.randn(4, 4)),
        RuntimeError,
        "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input",
    ),
    ("output_too_small", lambda: nn.MaxPool2d(3)(onnxnn.randn(1, 1, 2, 2)), RuntimeError, "Output size is too small"),
    (
        "adaptive_max_rank",
        lambda: nn.AdaptiveMaxPool2d(2)(onnxnn.randn(4, 4)),
        RuntimeError,
        "adaptive_max_pool2d(): Expected 3D or 4D tensor",
    ),
    (
        "adaptive_max_output",
        lambda: nn.AdaptiveMaxPool1d(-1)(onnxnn.randn(1, 1, 4)),  # a size of 0 pools to an empty result
        RuntimeError,
        "Trying to create tensor with negative dimension -1: [1, 1, 1, -1]",
    ),
    (
        "adaptive_avg_rank",
        lambda: nn.AdaptiveAvgPool3d(2)(onnxnn.randn(1, 4, 4)),
        RuntimeError,
        "adaptive_avg_pool3d(): Expected 4D or 5D tensor",
    ),
    (
        "unpool_output_size",
        lambda: nn.MaxUnpool2d(2)(*F.max_pool2d(onnxnn.randn(1, 1, 4, 4), 2, return_indices=True), output_size=[8, 8]),
        ValueError,
        'invalid output_size "[8, 8]" (dim 0 must be between 2 and 6)',
    ),
    (
        "unpool_output_size_length",
        lambda: nn.MaxUnpool1d(2)(*F.max_pool1d(onnxnn.randn(1, 1, 4), 2, return_indices=True), output_size=[4, 4]),
        ValueError,
        "output_size should be a sequence containing 1 or 3 elements, but it has a length of '2'",
    ),
    (
        "unpool_index_range",
        lambda: F.max_unpool1d(onnxnn.ones(1, 1, 2), onnxnn.tensor([[[0, 9]]]), 2),
        RuntimeError,
        "Found an invalid max index: 9",
    ),
    (
        "unpool_index_shape",
        lambda: F.max_unpool1d(onnxnn.ones(1, 1, 2), onnxnn.tensor([[[0]]]), 2),
        RuntimeError,
        "Expected shape of indices to be same as that of the input tensor",
    ),
]


@pytest.mark.parametrize("case_id, call, error, message", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_in_pytorch_words(case_id, call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


# ---------------------------------------------------------------- integer dtypes

INTEGER_MAX_DTYPES = [onnxnn.int8, onnxnn.uint8, onnxnn.int16, onnxnn.int32, onnxnn.int64]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", INTEGER_MAX_DTYPES, ids=str)
@pytest.mark.parametrize("case_id, cls, kwargs, input_shape", MAX_CASES, ids=[c[0] for c in MAX_CASES])
def test_integer_max_pools_pick_the_first_maxima_as_pytorch(case_id, cls, kwargs, input_shape, executor, dtype):
    # PyTorch's CPU max_pool2d/3d (and max_pool1d with indices) take every integer dtype but bool. Few
    # distinct values, so that windows hold ties: the first maximum in row-major window order wins.
    x = RNG.integers(0 if dtype is onnxnn.uint8 else -3, 4, size=input_shape)
    unbatched = len(input_shape) == {nn.MaxPool1d: 2, nn.MaxPool2d: 3, nn.MaxPool3d: 4}[cls]
    expected, expected_indices = window_pool(x[None] if unbatched else x, **kwargs)
    if unbatched:
        expected, expected_indices = expected[0], expected_indices[0]
    with onnxnn.set_executor(executor):
        values, indices = cls(**kwargs, return_indices=True)(onnxnn.tensor(x, dtype=dtype))
        np.testing.assert_array_equal(values.numpy(), expected)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)
        if cls is not nn.MaxPool1d:  # without indices, max_pool1d is PyTorch's float-only kernel
            np.testing.assert_array_equal(cls(**kwargs)(onnxnn.tensor(x, dtype=dtype)).numpy(), expected)
    assert values.dtype is dtype and indices.dtype is onnxnn.int64


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_int64_max_pool_is_exact_past_float64s_integers(executor):
    # Neighbours above 2^53 round to one float64: the maximum and its position must still be exact.
    x = np.array([[[[0, 3, 1, 2], [2, 0, 3, 1], [1, 1, 0, 0]]]], dtype=np.int64) + 2**62
    with onnxnn.set_executor(executor):
        values, indices = F.max_pool2d(onnxnn.tensor(x), (2, 2), 1, padding=1, return_indices=True)
        expected, expected_indices = window_pool(x - 2**62, (2, 2), 1, padding=1)
        np.testing.assert_array_equal(values.numpy(), expected.astype(np.int64) + 2**62)
        np.testing.assert_array_equal(indices.numpy(), expected_indices)


def _truncated_average_pool(x, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """PyTorch's int64 average: the window sum divided by the divisor with truncation toward zero."""
    sums = window_pool(x, kernel_size, stride, padding, ceil_mode=ceil_mode, mode="avg", divisor_override=1)[0]
    averages = window_pool(np.ones_like(x), kernel_size, stride, padding, ceil_mode=ceil_mode, mode="avg")[0]
    counts = window_pool(
        np.ones_like(x), kernel_size, stride, padding, ceil_mode=ceil_mode, mode="avg", divisor_override=1
    )[0]
    # averages of ones: taps inside / padded taps, so the divisor counting the padding is counts / averages.
    divisor = divisor_override or (np.rint(counts / averages) if count_include_pad else counts)
    return (np.sign(sums) * (np.abs(sums) // divisor)).astype(np.int64)


INT64_AVG_CASES = [
    ("1d", (1, 2, 9), 2, None, 0, False, True, None),
    ("1d_pad_stride", (1, 2, 9), 3, 2, 1, False, True, None),
    ("1d_pad_without_counting_it", (1, 2, 9), 3, 2, 1, False, False, None),
    ("1d_ceil", (1, 2, 9), 2, None, 0, True, True, None),
    ("2d_pad_ceil", (2, 1, 5, 6), (3, 2), (2, 2), (1, 1), True, True, None),
    ("2d_divisor_override", (1, 2, 4, 5), 2, 1, 0, False, True, 3),
    ("3d_pad_without_counting_it", (1, 1, 3, 4, 5), 2, (1, 2, 2), (0, 1, 1), False, False, None),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override",
    INT64_AVG_CASES,
    ids=[c[0] for c in INT64_AVG_CASES],
)
def test_int64_avg_pool_truncates_window_sums_as_pytorch(
    case_id, shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, executor
):
    x = RNG.integers(-9, 10, size=shape)
    rank = len(shape) - 2
    arguments = (kernel, stride, padding, ceil_mode, count_include_pad)
    extra = {} if rank == 1 else {"divisor_override": divisor_override}
    with onnxnn.set_executor(executor):
        pooled = getattr(F, f"avg_pool{rank}d")(onnxnn.tensor(x), *arguments, **extra)
        np.testing.assert_array_equal(pooled.numpy(), _truncated_average_pool(x, *arguments, divisor_override))
    assert pooled.dtype is onnxnn.int64


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_int64_lp_pool_averages_integer_powers_as_pytorch(executor):
    # PyTorch: x ** 2 in int64, its truncated average times the kernel size, then the float root.
    x = onnxnn.tensor([[[-3, -2, 5, -4, 7, 0, -1, -1]]])
    with onnxnn.set_executor(executor):
        pooled = F.lp_pool1d(x, 2, 2)
        np.testing.assert_allclose(pooled.numpy(), np.sqrt([[[12.0, 40.0, 48.0, 2.0]]]), rtol=2**-23)
    assert pooled.dtype is onnxnn.float32


# (call, dtypes it refuses with PyTorch's NotImplementedError): every integer but the ones above.
REFUSED_POOL_DTYPES = [
    ("max_pool1d", lambda x: F.max_pool1d(x, 2), INTEGER_MAX_DTYPES + [onnxnn.bool]),
    ("max_pool1d", lambda x: F.max_pool1d(x, 2, return_indices=True), [onnxnn.bool]),
    ("max_pool2d", lambda x: F.max_pool2d(x.unsqueeze(-1), (2, 1)), [onnxnn.bool]),
    ("max_pool3d", lambda x: F.max_pool3d(x.unsqueeze(-1).unsqueeze(-1), (2, 1, 1)), [onnxnn.bool]),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 2), [d for d in INTEGER_MAX_DTYPES if d is not onnxnn.int64]),
    ("avg_pool2d", lambda x: F.avg_pool2d(x.unsqueeze(-1), (2, 1)), [onnxnn.int32, onnxnn.uint8, onnxnn.bool]),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 2), INTEGER_MAX_DTYPES + [onnxnn.bool]),
    ("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x.unsqueeze(-1), 1), [onnxnn.int64, onnxnn.bool]),
    ("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 2), [onnxnn.int64, onnxnn.int32, onnxnn.bool]),
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x.unsqueeze(-1).unsqueeze(-1), 1), [onnxnn.int64]),
]
REFUSED_POOL_CASES = [(name, call, dtype) for name, call, refused in REFUSED_POOL_DTYPES for dtype in refused]
_TYPE_NAMES = {"int8": "Char", "uint8": "Byte", "int16": "Short", "int32": "Int", "int64": "Long", "bool": "Bool"}


@pytest.mark.parametrize("name, call, dtype", REFUSED_POOL_CASES, ids=[f"{c[0]}-{c[2]}" for c in REFUSED_POOL_CASES])
def test_pools_refuse_the_dtypes_pytorch_has_no_kernel_for(name, call, dtype):
    x = onnxnn.zeros(1, 2, 4, dtype=dtype)
    with pytest.raises(NotImplementedError, match=f"\"{name}\" not implemented for '{_TYPE_NAMES[dtype.name]}'"):
        call(x)


# ---------------------------------------------------------------- empty dims: only the batch may be empty

_WINDOWED = ["max_pool", "max_pool_indices", "avg_pool", "lp_pool"]


def _pool_call(kind: str, rank: int, x):
    if kind == "max_pool":
        return getattr(F, f"max_pool{rank}d")(x, 2)
    if kind == "max_pool_indices":
        return getattr(F, f"max_pool{rank}d")(x, 2, return_indices=True)[0]
    if kind == "avg_pool":
        return getattr(F, f"avg_pool{rank}d")(x, 2)
    if kind == "lp_pool":
        return getattr(F, f"lp_pool{rank}d")(x, 2.0, 2)
    return getattr(F, f"{kind}{rank}d")(x, 2)  # adaptive_max_pool, adaptive_avg_pool


def _with_empty(rank: int, axis: int, batched: bool) -> tuple:
    shape = [2, 3] + [4] * rank if batched else [3] + [4] * rank
    shape[axis] = 0
    return tuple(shape)


# (kind, rank, shape, PyTorch's message or None where it pools to an empty result). The windowed pools
# refuse every empty dim but a batched input's batch; the adaptive max pools (and adaptive_avg_pool3d)
# every empty dim from dim 1 on, even of an unbatched input; adaptive_avg_pool1d/2d empty spatial dims only.
EMPTY_DIM_CASES = (
    [
        (kind, rank, _with_empty(rank, axis, batched), None if batched and axis == 0 else "windowed")
        for kind in _WINDOWED
        for rank in (1, 2, 3)
        for batched in (True, False)
        for axis in range(rank + 1 + batched)
    ]
    + [
        (kind, rank, _with_empty(rank, axis, batched), None if axis == 0 else "adaptive")
        for kind in ("adaptive_max_pool", "adaptive_avg_pool")
        for rank in (1, 2, 3)
        for batched in (True, False)
        for axis in range(rank + 1 + batched)
        if not (kind == "adaptive_avg_pool" and rank < 3)
    ]
    + [
        ("adaptive_avg_pool", rank, _with_empty(rank, axis, batched), None if axis < 1 + batched else "adaptive")
        for rank in (1, 2)
        for batched in (True, False)
        for axis in range(rank + 1 + batched)
    ]
)
_WINDOWED_MESSAGE = {
    1: r"Expected 2D or 3D \(batch mode\) tensor with optional 0 dim batch size for input, but got:",
    2: r"Expected 3D or 4D \(batch mode\) tensor with optional 0 dim batch size for input, but got:",
    3: r"Expected input's non-batch dimensions to have positive length, but input has a shape of",
}


@pytest.mark.parametrize(
    "kind, rank, shape, refusal",
    EMPTY_DIM_CASES,
    ids=[f"{c[0]}{c[1]}d-{'x'.join(map(str, c[2]))}" for c in EMPTY_DIM_CASES],
)
def test_pools_refuse_empty_non_batch_dims_as_pytorch(kind, rank, shape, refusal):
    x = onnxnn.randn(*shape)
    if refusal is None:
        result = _pool_call(kind, rank, x)
        assert result.shape == shape[: len(shape) - rank] + (2,) * rank and result.numel() == 0
        return
    if refusal == "windowed":
        message = _WINDOWED_MESSAGE[rank]
    else:
        empty_axis = shape.index(0, 1)
        message = (
            rf"{kind}{rank}d\(\): Expected input to have non-zero size for non-batch dimensions, but input has "
            rf"sizes \[{', '.join(map(str, shape))}\] with dimension {empty_axis} being empty"
        )
    with pytest.raises(RuntimeError, match=message):
        _pool_call(kind, rank, x)


# ---------------------------------------------------------------- against PyTorch, where installed

TORCH_CASES = [
    ("MaxPool2d", (), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (2, 2, 7, 6)),
    ("MaxPool3d", (), {"kernel_size": 2, "dilation": (1, 2, 1)}, (1, 2, 3, 5, 4)),
    (
        "AvgPool1d",
        (),
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
        (2, 3, 8),
    ),
    (
        "AvgPool2d",
        (),
        {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "divisor_override": 5},
        (1, 2, 6, 7),
    ),
    ("AvgPool3d", (), {"kernel_size": 2, "ceil_mode": True}, (1, 2, 3, 5, 3)),
    ("AdaptiveAvgPool3d", ((2, 3, None),), {}, (1, 2, 5, 7, 3)),
    ("AdaptiveMaxPool2d", ((3, 4),), {}, (2, 2, 7, 5)),
    ("AdaptiveMaxPool3d", ((2, 1, 3),), {}, (1, 2, 3, 4, 7)),
    ("LPPool1d", (3, 3), {"ceil_mode": True}, (1, 2, 8)),
    ("LPPool2d", (2, 2), {"stride": 1, "ceil_mode": True}, (1, 2, 5, 4)),
    ("LPPool3d", (1, 2), {}, (1, 2, 4, 4, 4)),
]


@pytest.mark.parametrize("name, args, kwargs, input_shape", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_pooling_layer_agrees_with_pytorch(name, args, kwargs, input_shape):
    torch = pytest.importorskip("torch")
    reference = getattr(torch.nn, name)(*args, **kwargs)
    layer = getattr(nn, name)(*args, **kwargs)
    assert repr(layer) == repr(reference)
    x = distinct(*input_shape) / 16 if "LP" not in name else RNG.uniform(0.5, 2.0, input_shape)
    xt = torch.tensor(x, requires_grad=True)
    expected = reference(xt)
    expected.sum().backward()
    xo = onnxnn.tensor(x, requires_grad=True)
    with onnxnn.set_executor("kernels"):
        out = layer(xo)
        out.sum().backward()
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(xo.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_max_pool_and_unpool_indices_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    x = distinct(2, 3, 7, 6)
    expected, expected_indices = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), (3, 4), return_indices=True)
    values, indices = F.adaptive_max_pool2d(onnxnn.tensor(x), (3, 4), return_indices=True)
    np.testing.assert_array_equal(indices.numpy(), expected_indices.numpy())
    pooled, pool_indices = torch.nn.functional.max_pool2d(torch.tensor(x), 2, return_indices=True)
    unpooled = torch.nn.functional.max_unpool2d(pooled, pool_indices, 2, output_size=(7, 6))
    ours = F.max_unpool2d(*F.max_pool2d(onnxnn.tensor(x), 2, return_indices=True), 2, output_size=(7, 6))
    np.testing.assert_array_equal(ours.numpy(), unpooled.numpy())
