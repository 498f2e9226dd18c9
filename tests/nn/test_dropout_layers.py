"""Dropout layers: Dropout1d/2d/3d (channel-wise), AlphaDropout and FeatureAlphaDropout.

What each output must be follows from the mask alone: kept elements are ``x / (1 - p)`` (alpha:
``a * x + alpha * a * p``), dropped ones 0 (alpha: ``alpha * a * (p - 1)``), with
``a = 1 / sqrt((alpha^2 p + 1)(1 - p))`` and alpha = SELU's scale * alpha (ATen's formula). The
tests read the mask off the output and check every element against it, that channel-wise variants
keep or drop whole channels, and that the drop rate is ``p`` within 5 binomial standard deviations
(seeded, so the check is deterministic).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx

from .layer_checks import EXECUTORS, exported_output, float32_atol

RNG = np.random.default_rng(33)
SATURATION = 1.0507009873554804934193349852946 * 1.6732632423543772848170429916717


def _alpha_constants(p):
    a = 1 / math.sqrt((SATURATION**2 * p + 1) * (1 - p))
    return a, SATURATION * a * p, SATURATION * a * (p - 1)


def _positive(shape):
    # No input element is 0 or equal to a dropped value, so the mask can be read off the output.
    return (RNG.uniform(0.5, 2.0, shape) * RNG.choice([-1, 1], shape)).astype(np.float32)


def _read_mask(x, out, p, alpha):
    """Which elements were kept, asserting each output element is the kept or the dropped value."""
    x64, out64 = x.astype(np.float64), out.astype(np.float64)
    if alpha:
        a, shift, dropped_value = _alpha_constants(p)
        kept_value = a * x64 + shift
    else:
        kept_value, dropped_value = x64 / (1 - p), 0.0
    tolerance = 4 * 2.0**-24 * np.maximum(np.abs(kept_value), 1)
    kept = np.abs(out64 - kept_value) <= tolerance
    dropped = np.abs(out64 - dropped_value) <= 4 * 2.0**-24 * max(abs(dropped_value), 1)
    assert np.all(kept ^ dropped), "every element is either the kept or the dropped value"
    return kept


VARIANTS = [
    # name, functional, module class, input shape, channel-wise, alpha
    ("dropout1d", F.dropout1d, nn.Dropout1d, (40, 30, 3), True, False),
    ("dropout1d_unbatched", F.dropout1d, nn.Dropout1d, (600, 3), True, False),
    ("dropout2d", F.dropout2d, nn.Dropout2d, (40, 30, 2, 2), True, False),
    ("dropout3d", F.dropout3d, nn.Dropout3d, (40, 30, 2, 1, 2), True, False),
    ("dropout3d_unbatched", F.dropout3d, nn.Dropout3d, (600, 2, 1, 2), True, False),
    ("alpha_dropout", F.alpha_dropout, nn.AlphaDropout, (60, 20), False, True),
    ("feature_alpha_dropout", F.feature_alpha_dropout, nn.FeatureAlphaDropout, (40, 30, 3), True, True),
]
IDS = [v[0] for v in VARIANTS]


@pytest.mark.parametrize("p", [0.2, 0.5])
@pytest.mark.parametrize("name, function, module_class, shape, channel_wise, alpha", VARIANTS, ids=IDS)
def test_training_output_is_the_masked_formula(name, function, module_class, shape, channel_wise, alpha, p):
    x = _positive(shape)
    out = module_class(p)(onnxnn.tensor(x)).numpy()
    kept = _read_mask(x, out, p, alpha)
    if channel_wise:
        unbatched = name.endswith("unbatched")
        per_channel = kept.reshape((shape[0], -1)) if unbatched else kept.reshape(shape[:2] + (-1,))
        assert np.all(per_channel.all(-1) | ~per_channel.any(-1)), "whole channels are kept or dropped"
        draws = per_channel[..., 0]
    else:
        draws = kept
    n = draws.size
    assert abs((~draws).sum() - p * n) <= 5 * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, function, module_class, shape, channel_wise, alpha", VARIANTS, ids=IDS)
def test_same_seed_gives_the_same_mask_on_both_executors(
    name, function, module_class, shape, channel_wise, alpha, executor
):
    x = _positive(shape)
    onnxnn.manual_seed(7)
    expected = function(onnxnn.tensor(x), 0.3, True).numpy()
    onnxnn.manual_seed(7)
    with onnxnn.set_executor(executor):
        actual = function(onnxnn.tensor(x), 0.3, True).numpy()
    np.testing.assert_allclose(actual, expected, rtol=2.0**-23, atol=0)


@pytest.mark.parametrize("name, function, module_class, shape, channel_wise, alpha", VARIANTS, ids=IDS)
def test_eval_mode_is_the_identity_and_exports_as_such(name, function, module_class, shape, channel_wise, alpha):
    module = module_class(0.4).eval()
    x = onnxnn.tensor(_positive(shape))
    assert module(x) is x
    assert function(x, 0.4, False) is x
    # Tanh after the dropout, so the exported graph has a node; onnxruntime's float32 tanh is within ulps.
    np.testing.assert_allclose(
        exported_output(nn.Sequential(module, nn.Tanh()), x), np.tanh(x.numpy()), rtol=0, atol=float32_atol(np.ones(1))
    )


def _check_masked_output(name, x, out, p, channel_wise, alpha):
    """``out`` is ``x`` masked by the variant's formula; returns the mask's draws (one per channel
    for the channel-wise variants), after checking that the drop rate is ``p`` within 5 binomial
    standard deviations."""
    kept = _read_mask(x, out, p, alpha)
    if channel_wise:
        per_channel = (
            kept.reshape((x.shape[0], -1)) if name.endswith("unbatched") else kept.reshape(x.shape[:2] + (-1,))
        )
        assert np.all(per_channel.all(-1) | ~per_channel.any(-1)), "whole channels are kept or dropped"
        draws = per_channel[..., 0]
    else:
        draws = kept
    n = draws.size
    assert abs((~draws).sum() - p * n) <= 5 * math.sqrt(n * p * (1 - p))
    return draws


EXPORTED_VARIANTS = [("dropout", F.dropout, nn.Dropout, (60, 20), False, False)] + VARIANTS


@pytest.mark.parametrize(
    "name, function, module_class, shape, channel_wise, alpha", EXPORTED_VARIANTS, ids=[v[0] for v in EXPORTED_VARIANTS]
)
def test_training_export_draws_a_new_mask_on_every_run(name, function, module_class, shape, channel_wise, alpha):
    # PyTorch writes dropout in a training export as ONNX Dropout(training_mode=True), which draws a
    # new mask on each run; a mask drawn while tracing would drop the same elements every time.
    p = 0.3
    proto = to_onnx(
        module_class(p),
        (onnxnn.tensor(_positive(shape)),),
        input_names=["x"],
        dynamic_axes={"x": {0: "n"}},
        training=True,
    )
    onnx.checker.check_model(proto, full_check=True)
    assert "Dropout" in [node.op_type for node in proto.graph.node]
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = _positive((shape[0] + 3,) + shape[1:])  # another size of the dynamic axis
    first, second = (
        _check_masked_output(name, x, session.run(None, {"x": x})[0], p, channel_wise, alpha) for _ in range(2)
    )
    # Hundreds of independent draws: equal masks on two runs have probability below 0.58 ** 600.
    assert not np.array_equal(first, second)


def test_a_training_export_keeps_dropout_between_layers():
    # onnxruntime's optimizers remove a Dropout whose mask output nothing reads (training mode or
    # not): a dropout between two layers must still drop, so two runs of the file differ.
    onnxnn.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 256), nn.Dropout(0.5), nn.Linear(256, 4))
    proto = to_onnx(model, (onnxnn.randn(2, 8),), input_names=["x"], training=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.ones((2, 8), np.float32)
    first, second = (session.run(None, {"x": x})[0] for _ in range(2))
    with onnxnn.no_grad():
        undropped = model.eval()(onnxnn.from_numpy(x)).numpy()
    assert not np.array_equal(first, second) and not np.array_equal(first, undropped)


@pytest.mark.parametrize("name, function, module_class, shape, channel_wise, alpha", VARIANTS, ids=IDS)
def test_gradient_matches_finite_differences_for_a_fixed_mask(name, function, module_class, shape, channel_wise, alpha):
    small = tuple(min(extent, 4) for extent in shape)

    def masked(x):
        onnxnn.manual_seed(11)
        return function(x, 0.4, True)

    check_gradients(masked, [RNG.standard_normal(small)], exhaustive_limit=16)


@pytest.mark.parametrize("function", [F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout])
def test_p_one_gives_zeros_and_p_zero_the_input(function):
    shape = (2, 3, 2) if function is F.dropout1d else (2, 3, 2, 2) if function is F.dropout2d else (2, 3, 2, 2, 2)
    x = onnxnn.tensor(_positive(shape))
    np.testing.assert_array_equal(function(x, 1.0, True).numpy(), np.zeros(shape, np.float32))
    np.testing.assert_array_equal(function(x, 0.0, True).numpy(), x.numpy())


def test_alpha_dropout_keeps_zero_mean_and_unit_variance():
    x = RNG.standard_normal(200_000).astype(np.float32)
    out = F.alpha_dropout(onnxnn.tensor(x), 0.3, True).numpy().astype(np.float64)
    # The mean of n values of unit variance is within 5 / sqrt(n) of 0; the variance within
    # 5 * sqrt(Var[(y - mu)^2] / n), Var[(y - mu)^2] = kurtosis - 1 < 3 here (a mixture of N(.,a^2) and a point).
    assert abs(out.mean()) < 5 / math.sqrt(x.size)
    assert abs(out.var() - 1) < 5 * math.sqrt(3 / x.size)


@pytest.mark.parametrize("module_class", [nn.Dropout1d, nn.Dropout3d])
def test_in_place_channel_dropout_rebinds_the_input(module_class):
    shape = (3, 4) if module_class is nn.Dropout1d else (3, 2, 2, 2)
    x = onnxnn.tensor(_positive(shape))
    original = x.numpy().copy()
    result = module_class(0.5, inplace=True)(x)
    assert result is x
    _read_mask(original, x.numpy(), 0.5, alpha=False)


@pytest.mark.parametrize(
    "module, text",
    [
        (nn.Dropout1d(), "Dropout1d(p=0.5, inplace=False)"),
        (nn.Dropout2d(0.2), "Dropout2d(p=0.2, inplace=False)"),
        (nn.Dropout3d(inplace=True), "Dropout3d(p=0.5, inplace=True)"),
        (nn.AlphaDropout(0.1), "AlphaDropout(p=0.1, inplace=False)"),
        (nn.FeatureAlphaDropout(), "FeatureAlphaDropout(p=0.5, inplace=False)"),
    ],
)
def test_repr_matches_pytorch(module, text):
    assert repr(module) == text and module.state_dict() == {}


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: nn.Dropout2d(1.5), ValueError, "dropout probability has to be between 0 and 1, but got 1.5"),
        (lambda: F.alpha_dropout(onnxnn.randn(3), -0.1, True), ValueError, "but got -0.1"),
        (
            lambda: F.dropout1d(onnxnn.randn(2, 3, 4, 5)),
            RuntimeError,
            "dropout1d: Expected 2D or 3D input, but received a 4D input",
        ),
        (
            lambda: F.feature_alpha_dropout(onnxnn.randn(3), 0.5, True),
            RuntimeError,
            "Feature dropout requires at least 2 dimensions in the input",
        ),
    ],
)
def test_bad_input_raises_pytorchs_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_dropout2d_warns_that_a_3d_input_is_taken_as_batched_1d():
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        out = F.dropout2d(onnxnn.tensor(_positive((2, 3, 4))), 0.5, True)
    assert out.shape == (2, 3, 4)
