"""Normalization layers: LayerNorm, GroupNorm, RMSNorm, BatchNorm3d, InstanceNorm1/2/3d, LocalResponseNorm,
CrossMapLRN2d.

Forward values come from the numpy formulas below (float32 on both executors, float64 through
"auto"); gradients of input and parameters from float64 finite differences; running statistics
from numpy's mean and unbiased variance; exported graphs run in plain onnxruntime. Tolerances:
a normalization sums ``n`` terms twice (mean, variance), so float32 results agree to ``gamma(2n)``
relative to the normalized magnitudes, taken here with a few roundings more for rsqrt and affine.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS, exported_output, forward_on

RNG = np.random.default_rng(21)
# torch.finfo(dtype).eps: RMSNorm's eps=None default.
MACHINE_EPSILON = {
    "float16": 2.0**-23,
    "bfloat16": 2.0**-23,
    "float32": 2.0**-23,
    "float64": 2.0**-52,
}  # of the compute dtype


def _standardize(x, axes, eps):
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def layer_norm_reference(x, shape, weight, bias, eps):
    out = _standardize(x, tuple(range(x.ndim - len(shape), x.ndim)), eps)
    return out * (1 if weight is None else weight) + (0 if bias is None else bias)


def group_norm_reference(x, groups, weight, bias, eps):
    grouped = x.reshape(x.shape[0], groups, -1)
    out = _standardize(grouped, (2,), eps).reshape(x.shape)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    return out * (1 if weight is None else weight.reshape(channel)) + (0 if bias is None else bias.reshape(channel))


def rms_norm_reference(x, shape, weight, eps):
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    out = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return out * (1 if weight is None else weight)


def instance_norm_reference(x, weight, bias, eps):
    out = _standardize(x, tuple(range(2, x.ndim)), eps)
    channel = (1, -1) + (1,) * (x.ndim - 2)
    return out * (1 if weight is None else weight.reshape(channel)) + (0 if bias is None else bias.reshape(channel))


def lrn_reference(x, size, alpha, beta, k):
    """PyTorch's documented window: channels c - size // 2 .. c + (size - 1) // 2."""
    channels = x.shape[1]
    energy = np.zeros_like(x)
    for c in range(channels):
        low, high = max(0, c - size // 2), min(channels, c + (size - 1) // 2 + 1)
        energy[:, c] = (x[:, low:high] ** 2).sum(axis=1)
    return x / (k + alpha / size * energy) ** beta


def cross_map_lrn_reference(x, size, alpha, beta, k):
    """Lua Torch's sliding-sum algorithm, step by step as PyTorch's CrossMapLRN2d runs it."""
    channels = x.shape[1]
    squares = x * x
    pre_pad = int((size - 1) / 2 + 1)
    scale = np.zeros_like(x)
    scale[:, 0] = squares[:, : min(pre_pad, channels)].sum(axis=1)
    for c in range(1, channels):
        scale[:, c] = scale[:, c - 1]
        if c < channels - pre_pad + 1:
            scale[:, c] += squares[:, c + pre_pad - 1]
        if c > pre_pad:
            scale[:, c] -= squares[:, c - pre_pad]
    return x * (scale * alpha / size + k) ** -beta


class Case(NamedTuple):
    name: str
    expression: str  # the constructor call, evaluated with ``nn`` = onnxnn.nn or torch.nn
    shape: tuple
    reference: Callable  # (x, module parameters as float64 dict) -> expected
    reduced: int  # terms per statistic (for the tolerance)


def _build(case: "Case"):
    """The module, with random parameters (not the ones/zeros of the init, so a swapped weight and bias show)."""
    module = eval(case.expression, {"nn": nn})
    with onnxnn.no_grad():
        for parameter in module.parameters():
            parameter.copy_(onnxnn.tensor(RNG.uniform(0.5, 1.5, tuple(parameter.shape)).astype(np.float32)))
    return module


def _p(module, name):
    value = getattr(module, name, None)
    return None if value is None else np.asarray(value.detach().numpy(), np.float64)


CASES = [
    Case(
        "layer_norm_last",
        "nn.LayerNorm(5)",
        (3, 4, 5),
        lambda x, m: layer_norm_reference(x, (5,), _p(m, "weight"), _p(m, "bias"), 1e-5),
        5,
    ),
    Case(
        "layer_norm_two_dims_no_bias",
        "nn.LayerNorm([4, 5], eps=1e-3, bias=False)",
        (3, 4, 5),
        lambda x, m: layer_norm_reference(x, (4, 5), _p(m, "weight"), None, 1e-3),
        20,
    ),
    Case(
        "layer_norm_no_affine",
        "nn.LayerNorm(6, elementwise_affine=False)",
        (2, 6),
        lambda x, m: layer_norm_reference(x, (6,), None, None, 1e-5),
        6,
    ),
    Case(
        "group_norm",
        "nn.GroupNorm(2, 6)",
        (2, 6, 3, 2),
        lambda x, m: group_norm_reference(x, 2, _p(m, "weight"), _p(m, "bias"), 1e-5),
        18,
    ),
    Case(
        "group_norm_2d_input",
        "nn.GroupNorm(3, 6, eps=0.1)",
        (4, 6),
        lambda x, m: group_norm_reference(x, 3, _p(m, "weight"), _p(m, "bias"), 0.1),
        2,
    ),
    Case(
        "group_norm_no_affine",
        "nn.GroupNorm(1, 4, affine=False)",
        (2, 4, 5),
        lambda x, m: group_norm_reference(x, 1, None, None, 1e-5),
        20,
    ),
    Case(
        "rms_norm",
        "nn.RMSNorm(5, eps=1e-6)",
        (3, 4, 5),
        lambda x, m: rms_norm_reference(x, (5,), _p(m, "weight"), 1e-6),
        5,
    ),
    Case(
        "rms_norm_default_eps",
        "nn.RMSNorm([4, 5])",
        (3, 4, 5),
        lambda x, m: rms_norm_reference(x, (4, 5), _p(m, "weight"), MACHINE_EPSILON[m.weight.dtype.name]),
        20,
    ),
    Case(
        "instance_norm_1d",
        "nn.InstanceNorm1d(3)",
        (2, 3, 7),
        lambda x, m: instance_norm_reference(x, None, None, 1e-5),
        7,
    ),
    Case(
        "instance_norm_2d_affine",
        "nn.InstanceNorm2d(3, affine=True)",
        (2, 3, 4, 3),
        lambda x, m: instance_norm_reference(x, _p(m, "weight"), _p(m, "bias"), 1e-5),
        12,
    ),
    Case(
        "instance_norm_3d",
        "nn.InstanceNorm3d(2, affine=True, bias=False)",
        (2, 2, 2, 3, 2),
        lambda x, m: instance_norm_reference(x, _p(m, "weight"), None, 1e-5),
        12,
    ),
    Case(
        "instance_norm_unbatched",
        "nn.InstanceNorm2d(3)",
        (3, 4, 4),
        lambda x, m: instance_norm_reference(x[None], None, None, 1e-5)[0],
        16,
    ),
    Case(
        "local_response_norm_odd",
        "nn.LocalResponseNorm(3, alpha=0.5, beta=0.75, k=2.0)",
        (2, 5, 3, 3),
        lambda x, m: lrn_reference(x, 3, 0.5, 0.75, 2.0),
        3,
    ),
    Case(
        "local_response_norm_even_3d",
        "nn.LocalResponseNorm(2, alpha=0.3)",
        (2, 4, 5),
        lambda x, m: lrn_reference(x, 2, 0.3, 0.75, 1.0),
        2,
    ),
    Case(
        "cross_map_lrn_2d",
        "nn.CrossMapLRN2d(3, alpha=0.5, beta=0.6, k=1.5)",
        (2, 7, 2, 2),
        lambda x, m: cross_map_lrn_reference(x, 3, 0.5, 0.6, 1.5),
        4,
    ),
    Case(
        "cross_map_lrn_2d_even",
        "nn.CrossMapLRN2d(4, alpha=0.5)",
        (2, 6, 2, 2),
        lambda x, m: cross_map_lrn_reference(x, 4, 0.5, 0.75, 1),
        4,
    ),
    Case(
        "batch_norm_3d_training",
        "nn.BatchNorm3d(3)",
        (2, 3, 2, 2, 2),
        lambda x, m: (
            instance_norm_reference(np.moveaxis(x, 1, 0)[None], None, None, 1e-5)[0].swapaxes(0, 1)
            * _p(m, "weight").reshape(1, 3, 1, 1, 1)
            + _p(m, "bias").reshape(1, 3, 1, 1, 1)
        ),
        16,
    ),
]
IDS = [case.name for case in CASES]


def _tolerance(case: Case, expected: np.ndarray) -> float:
    return 2 * gamma(2 * case.reduced + 8) * max(float(np.abs(expected).max()), 1.0)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32_forward_matches_the_numpy_formula(case, executor):
    module = _build(case)
    x = RNG.standard_normal(case.shape).astype(np.float32)
    expected = case.reference(x.astype(np.float64), module)
    actual = forward_on(executor, module, x)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=_tolerance(case, expected))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float64_forward_matches_the_numpy_formula(case):
    module = _build(case).double()
    x = RNG.standard_normal(case.shape)
    expected = case.reference(x, module)
    actual = forward_on("auto", module, x, dtype=onnxnn.float64)
    np.testing.assert_allclose(actual, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradients_of_input_and_parameters_match_finite_differences(case):
    module = _build(case).double()
    names = [name for name, _ in module.named_parameters()]
    values = [_p(module, name) for name in names]

    def function(x, *parameters):
        for name, value in zip(names, parameters):
            module._parameters[name] = value
        return module(x)

    try:
        check_gradients(function, [RNG.standard_normal(case.shape)] + values)
    finally:
        for name, value in zip(names, values):
            module._parameters[name] = nn.Parameter(onnxnn.tensor(value))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_exported_module_matches_in_onnxruntime(case):
    module = _build(case).eval()
    x = onnxnn.tensor(RNG.standard_normal(case.shape).astype(np.float32))
    expected = module(x).detach().numpy()
    np.testing.assert_allclose(exported_output(module, x), expected, rtol=0, atol=_tolerance(case, expected))


@pytest.mark.parametrize(
    "dtype, unit_roundoff", [(onnxnn.float16, 2.0**-11), (onnxnn.bfloat16, 2.0**-8)], ids=["float16", "bfloat16"]
)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_low_precision_runs_close_to_the_formula(case, dtype, unit_roundoff):
    module = _build(case).to(dtype)
    x = onnxnn.tensor(RNG.standard_normal(case.shape).astype(np.float32)).to(dtype)
    expected = case.reference(x.float().numpy().astype(np.float64), module)
    out = module(x)
    assert out.dtype is dtype
    # Higham's gamma for the format's unit roundoff: the statistics may be computed in it too.
    terms = 2 * case.reduced + 8
    bound = 2 * terms * unit_roundoff / (1 - terms * unit_roundoff) * max(float(np.abs(expected).max()), 1.0)
    np.testing.assert_allclose(out.float().detach().numpy(), expected, rtol=0, atol=bound)


# ---------------------------------------------------------------- parameters, buffers, reprs


@pytest.mark.parametrize(
    "module, keys",
    [
        (nn.LayerNorm((4, 5)), {"weight": (4, 5), "bias": (4, 5)}),
        (nn.LayerNorm(4, bias=False), {"weight": (4,)}),
        (nn.LayerNorm(4, elementwise_affine=False), {}),
        (nn.GroupNorm(2, 6), {"weight": (6,), "bias": (6,)}),
        (nn.GroupNorm(2, 6, affine=False), {}),
        (nn.RMSNorm([2, 3]), {"weight": (2, 3)}),
        (nn.RMSNorm(3, elementwise_affine=False), {}),
        (nn.InstanceNorm2d(3), {}),
        (
            nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
            {"weight": (3,), "bias": (3,), "running_mean": (3,), "running_var": (3,), "num_batches_tracked": ()},
        ),
        (
            nn.BatchNorm3d(4),
            {"weight": (4,), "bias": (4,), "running_mean": (4,), "running_var": (4,), "num_batches_tracked": ()},
        ),
        (
            nn.BatchNorm3d(4, bias=False),
            {"weight": (4,), "running_mean": (4,), "running_var": (4,), "num_batches_tracked": ()},
        ),
        (nn.LocalResponseNorm(3), {}),
        (nn.CrossMapLRN2d(3), {}),
    ],
)
def test_state_dict_keys_and_shapes_are_pytorchs(module, keys):
    assert [(k, tuple(v.shape)) for k, v in module.state_dict().items()] == list(keys.items())


def test_parameters_start_at_ones_and_zeros():
    for module in (
        nn.LayerNorm(3),
        nn.GroupNorm(1, 3),
        nn.RMSNorm(3),
        nn.InstanceNorm2d(3, affine=True),
        nn.BatchNorm3d(3),
    ):
        np.testing.assert_array_equal(module.weight.detach().numpy(), np.ones(3, np.float32))
        if getattr(module, "bias", None) is not None:
            np.testing.assert_array_equal(module.bias.detach().numpy(), np.zeros(3, np.float32))


@pytest.mark.parametrize(
    "module, text",
    [
        (nn.LayerNorm(4), "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"),
        (
            nn.LayerNorm([2, 3], eps=1e-3, bias=False),
            "LayerNorm((2, 3), eps=0.001, elementwise_affine=True, bias=False)",
        ),
        (nn.GroupNorm(2, 4), "GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)"),
        (nn.RMSNorm([2, 3]), "RMSNorm((2, 3), eps=None, elementwise_affine=True)"),
        (
            nn.InstanceNorm2d(3),
            "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)",
        ),
        (
            nn.BatchNorm3d(3),
            "BatchNorm3d(3, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)",
        ),
        (nn.LocalResponseNorm(2), "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)"),
        (nn.CrossMapLRN2d(3), "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"),
    ],
)
def test_repr_matches_pytorch(module, text):
    assert repr(module) == text


@pytest.mark.parametrize(
    "name, args, kwargs",
    [
        ("LayerNorm", ((2, 3),), {"bias": False}),
        ("GroupNorm", (2, 4), {}),
        ("RMSNorm", (3,), {"eps": 1e-4}),
        ("InstanceNorm3d", (3,), {"affine": True, "track_running_stats": True}),
        ("BatchNorm3d", (5,), {}),
        ("LocalResponseNorm", (3,), {"k": 2.0}),
        ("CrossMapLRN2d", (5,), {}),
    ],
)
def test_repr_and_state_dict_match_torch(name, args, kwargs):
    torch = pytest.importorskip("torch")
    ours, reference = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(reference)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in reference.state_dict().items()
    ]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_gradients_match_torch(case):
    torch = pytest.importorskip("torch")
    module = _build(case).double()
    reference = eval(case.expression, {"nn": torch.nn}).double()
    reference.load_state_dict({k: torch.tensor(v.numpy()) for k, v in module.state_dict().items()})
    x = RNG.standard_normal(case.shape)
    tx, ox = torch.tensor(x, requires_grad=True), onnxnn.tensor(x, requires_grad=True)
    ty, oy = reference(tx), module(ox)
    cotangent = RNG.standard_normal(case.shape)
    ty.backward(torch.tensor(cotangent))
    oy.backward(onnxnn.tensor(cotangent))
    np.testing.assert_allclose(oy.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    if case.name.startswith("cross_map"):
        return  # PyTorch's hand-written CrossMapLRN2d backward is not its forward's gradient (ours is checked above)
    np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-11)
    for name, parameter in module.named_parameters():
        np.testing.assert_allclose(parameter.grad.numpy(), getattr(reference, name).grad.numpy(), rtol=1e-9, atol=1e-11)


# ---------------------------------------------------------------- running statistics and train/eval


@pytest.mark.parametrize(
    "module_class, shape",
    [(nn.InstanceNorm1d, (4, 3, 6)), (nn.InstanceNorm2d, (2, 3, 3, 4)), (nn.InstanceNorm3d, (2, 3, 2, 2, 3))],
)
def test_instance_norm_tracks_running_statistics_and_uses_them_in_eval(module_class, shape):
    module = module_class(3, momentum=0.2, track_running_stats=True)
    x = RNG.standard_normal(shape) * 2 + 1
    module(onnxnn.tensor(x.astype(np.float32)))
    axes = tuple(range(2, x.ndim))
    batch_mean = x.mean(axis=axes).mean(0)
    batch_var = x.var(axis=axes, ddof=1).mean(0)
    np.testing.assert_allclose(module.running_mean.numpy(), 0.2 * batch_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(module.running_var.numpy(), 0.8 + 0.2 * batch_var, rtol=1e-5, atol=1e-6)
    module.eval()
    y = RNG.standard_normal(shape).astype(np.float32)
    mean = module.running_mean.numpy().reshape((1, 3) + (1,) * len(axes))
    var = module.running_var.numpy().reshape((1, 3) + (1,) * len(axes))
    np.testing.assert_allclose(module(onnxnn.tensor(y)).numpy(), (y - mean) / np.sqrt(var + 1e-5), rtol=1e-5, atol=1e-5)


def test_instance_norm_without_tracking_normalizes_by_the_input_in_eval_too():
    module = nn.InstanceNorm2d(3).eval()
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    expected = instance_norm_reference(x.astype(np.float64), None, None, 1e-5)
    np.testing.assert_allclose(module(onnxnn.tensor(x)).numpy(), expected, rtol=0, atol=2 * gamma(40) * 4)


def test_batch_norm_3d_updates_running_statistics_in_training_and_uses_them_in_eval():
    module = nn.BatchNorm3d(2)
    x = RNG.standard_normal((3, 2, 2, 2, 2)) * 3 - 1
    module(onnxnn.tensor(x.astype(np.float32)))
    axes = (0, 2, 3, 4)
    np.testing.assert_allclose(module.running_mean.numpy(), 0.1 * x.mean(axis=axes), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(module.running_var.numpy(), 0.9 + 0.1 * x.var(axis=axes, ddof=1), rtol=1e-5)
    assert int(module.num_batches_tracked.numpy()) == 1
    module.eval()
    y = RNG.standard_normal((1, 2, 2, 2, 2)).astype(np.float32)
    mean = module.running_mean.numpy().reshape(1, 2, 1, 1, 1)
    var = module.running_var.numpy().reshape(1, 2, 1, 1, 1)
    np.testing.assert_allclose(
        module(onnxnn.tensor(y)).detach().numpy(), (y - mean) / np.sqrt(var + 1e-5), rtol=1e-5, atol=1e-6
    )


def test_instance_norm_drops_running_statistics_of_old_checkpoints_with_an_error_message():
    module = nn.InstanceNorm2d(3)
    state = {"running_mean": onnxnn.zeros(3), "running_var": onnxnn.ones(3)}
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        module.load_state_dict(state)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("scale", [1.0, 1e-3], ids=["unit", "small"])  # small: the default eps shows
def test_rms_norm_half_is_computed_in_float32_and_rounded_once(dtype, scale):
    # PyTorch's default eps for half inputs is float32's (they compute in float32), not their own.
    x = onnxnn.tensor(RNG.standard_normal((4, 8)) * scale).to(getattr(onnxnn, dtype))
    x64 = x.float().numpy().astype(np.float64)
    expected = rms_norm_reference(x64, (8,), None, 2.0**-23)
    actual = F.rms_norm(x, [8])
    assert actual.dtype == getattr(onnxnn, dtype)
    # one rounding of a float32 result to the half dtype: at most one step of it apart
    step = 2.0**-10 if dtype == "float16" else 2.0**-7
    np.testing.assert_allclose(actual.float().numpy().astype(np.float64), expected, rtol=step, atol=0)


# ---------------------------------------------------------------- errors with PyTorch's wording


@pytest.mark.parametrize(
    "call, error, message",
    [
        ("nn.GroupNorm(4, 6)", ValueError, r"num_channels \(6\) must be divisible by num_groups \(4\)"),
        (
            "nn.LayerNorm(4)(onnxnn.randn(2, 5))",
            RuntimeError,
            r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but got input of size\[2, 5\]",
        ),
        (
            "nn.RMSNorm(4)(onnxnn.randn(2, 5))",
            RuntimeError,
            r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but got input of size\[2, 5\]",
        ),
        ("nn.GroupNorm(2, 4)(onnxnn.randn(2, 6, 3))", RuntimeError, "shape"),
        ("nn.InstanceNorm1d(3)(onnxnn.randn(2, 3, 4, 5))", ValueError, r"expected 2D or 3D input \(got 4D input\)"),
        ("nn.InstanceNorm2d(3)(onnxnn.randn(3, 4))", ValueError, r"expected 3D or 4D input \(got 2D input\)"),
        ("nn.InstanceNorm3d(3)(onnxnn.randn(3, 4, 2))", ValueError, r"expected 4D or 5D input \(got 3D input\)"),
        (
            "nn.InstanceNorm2d(3, affine=True)(onnxnn.randn(2, 4, 3, 3))",
            ValueError,
            r"expected input's size at dim=1 to match num_features \(3\), but got: 4\.",
        ),
        ("nn.BatchNorm3d(3)(onnxnn.randn(2, 3, 4, 4))", ValueError, r"expected 5D input \(got 4D input\)"),
        ("nn.CrossMapLRN2d(3)(onnxnn.randn(2, 3, 4))", ValueError, "CrossMapLRN2d: Expected input to be 4D, got 3D"),
        ("nn.LocalResponseNorm(3)(onnxnn.randn(2, 3))", ValueError, "Expected 3D or higher dimensionality input"),
    ],
)
def test_bad_input_raises_pytorchs_error(call, error, message):
    with pytest.raises(error, match=message):
        eval(call, {"nn": nn, "onnxnn": onnxnn})


def _normalize_by_running_statistics(function, x, running_mean, running_var, training):
    if function == "batch_norm":
        return F.batch_norm(x, running_mean, running_var, training=training)
    return F.instance_norm(x, running_mean, running_var, use_input_stats=training)


@pytest.mark.parametrize("function", ["batch_norm", "instance_norm"])
@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
@pytest.mark.parametrize("statistic", ["running_mean", "running_var"])
def test_running_statistics_that_require_grad_are_refused_in_grad_mode(function, training, statistic):
    # PyTorch's native_batch_norm has no gradient for its running statistics, in either mode; under
    # no_grad it takes them.
    x = onnxnn.randn(2, 3, 4, requires_grad=True)
    stats = {"running_mean": onnxnn.zeros(3), "running_var": onnxnn.ones(3)}
    stats[statistic].requires_grad_(True)
    message = f"The function 'native_batch_norm' is not differentiable with respect to argument '{statistic}'"
    with pytest.raises(RuntimeError, match=message):
        _normalize_by_running_statistics(function, x, stats["running_mean"], stats["running_var"], training)
    with onnxnn.no_grad():
        result = _normalize_by_running_statistics(function, x, stats["running_mean"], stats["running_var"], training)
    assert result.shape == (2, 3, 4)


def test_batch_norm_module_with_running_statistics_that_require_grad_is_refused():
    module = nn.BatchNorm1d(3)
    module.running_var.requires_grad_(True)
    with pytest.raises(RuntimeError, match="argument 'running_var'. This input cannot have requires_grad True"):
        module(onnxnn.randn(4, 3))


def test_instance_norm_channel_mismatch_without_affine_warns():
    with pytest.warns(UserWarning, match="input's size at dim=1 does not match num_features"):
        nn.InstanceNorm1d(3)(onnxnn.randn(2, 4, 5))


# ---------------------------------------------------------------- F.normalize


@pytest.mark.parametrize("p, dim", [(2.0, 1), (1.0, -1), (3.0, 0), (float("inf"), 1)])
def test_normalize_divides_by_the_clamped_p_norm(p, dim):
    x = RNG.standard_normal((3, 4, 2))
    x[0, :, 0] = 0.0 if dim == 1 else x[0, :, 0]  # a zero vector stays zero: its norm is clamped to eps
    expected = x / np.maximum(np.linalg.norm(x, ord=p, axis=dim, keepdims=True), 1e-12)
    for executor in EXECUTORS:
        actual = forward_on(executor, lambda t: F.normalize(t, p, dim), x.astype(np.float32))
        np.testing.assert_allclose(actual, expected, rtol=0, atol=2 * gamma(8))
    np.testing.assert_allclose(F.normalize(onnxnn.tensor(x), p, dim).numpy(), expected, rtol=1e-14, atol=1e-15)
    check_gradients(lambda t: F.normalize(t, p, dim), [RNG.standard_normal((3, 4, 2))])
