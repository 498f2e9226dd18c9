"""Activations: every activation of torch.nn and torch.nn.functional, as a specification.

Each row of the table names the functional form, its numpy formula and its module. Forward values
come from the numpy formulas (float32 on both executors, within a few float32 roundings; float64
through the decompositions); gradients from float64 finite differences; exported graphs run in plain
onnxruntime. The ONNX ops these record (HardSwish, HardSigmoid, PRelu, Selu, Celu, Mish, Softsign,
Shrink, ThresholdedRelu) get their gradient rules checked on the ops themselves too.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.runtime.tensor import apply_op

from .layer_checks import EXECUTORS, exported_output, float32_atol, forward_on

RNG = np.random.default_rng(12)
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


class Case(NamedTuple):
    name: str
    function: Callable  # onnxnn functional form
    formula: Callable  # numpy float64 formula
    module: Callable | None  # builds the nn module computing the same
    torch_function: str  # torch.nn.functional attribute name, or an expression of F and x


CASES = [
    Case(
        "threshold",
        lambda x: F.threshold(x, 0.3, -2.0),
        lambda x: np.where(x > 0.3, x, -2.0),
        lambda: nn.Threshold(0.3, -2.0),
        "F.threshold(x, 0.3, -2.0)",
    ),
    Case(
        "hardtanh",
        lambda x: F.hardtanh(x, -0.5, 1.5),
        lambda x: np.clip(x, -0.5, 1.5),
        lambda: nn.Hardtanh(-0.5, 1.5),
        "F.hardtanh(x, -0.5, 1.5)",
    ),
    Case("relu6", F.relu6, lambda x: np.clip(x, 0, 6), nn.ReLU6, "F.relu6(x)"),
    Case(
        "elu",
        lambda x: F.elu(x, 0.7),
        lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)),
        lambda: nn.ELU(0.7),
        "F.elu(x, 0.7)",
    ),
    Case("selu", F.selu, lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)), nn.SELU, "F.selu(x)"),
    Case(
        "celu",
        lambda x: F.celu(x, 1.5),
        lambda x: np.maximum(x, 0) + np.minimum(0, 1.5 * np.expm1(x / 1.5)),
        lambda: nn.CELU(1.5),
        "F.celu(x, 1.5)",
    ),
    Case("hardsigmoid", F.hardsigmoid, lambda x: np.clip(x + 3, 0, 6) / 6, nn.Hardsigmoid, "F.hardsigmoid(x)"),
    Case("hardswish", F.hardswish, lambda x: x * np.clip(x + 3, 0, 6) / 6, nn.Hardswish, "F.hardswish(x)"),
    Case("silu", F.silu, lambda x: x * _sigmoid(x), nn.SiLU, "F.silu(x)"),
    Case("mish", F.mish, lambda x: x * np.tanh(_softplus(x)), nn.Mish, "F.mish(x)"),
    Case("softsign", F.softsign, lambda x: x / (1 + np.abs(x)), nn.Softsign, "F.softsign(x)"),
    Case("tanhshrink", F.tanhshrink, lambda x: x - np.tanh(x), nn.Tanhshrink, "F.tanhshrink(x)"),
    Case(
        "hardshrink",
        lambda x: F.hardshrink(x, 0.8),
        lambda x: np.where(np.abs(x) > 0.8, x, 0.0),
        lambda: nn.Hardshrink(0.8),
        "F.hardshrink(x, 0.8)",
    ),
    Case(
        "softshrink",
        lambda x: F.softshrink(x, 0.8),
        lambda x: np.sign(x) * np.maximum(np.abs(x) - 0.8, 0),
        lambda: nn.Softshrink(0.8),
        "F.softshrink(x, 0.8)",
    ),
    Case("logsigmoid", F.logsigmoid, lambda x: -_softplus(-x), nn.LogSigmoid, "F.logsigmoid(x)"),
    Case(
        "softplus",
        lambda x: F.softplus(x, 2.0, 3.0),
        lambda x: np.where(2 * x > 3, x, _softplus(2 * x) / 2),
        lambda: nn.Softplus(2.0, 3.0),
        "F.softplus(x, 2.0, 3.0)",
    ),
    Case(
        "leaky_relu",
        lambda x: F.leaky_relu(x, 0.2),
        lambda x: np.where(x > 0, x, 0.2 * x),
        lambda: nn.LeakyReLU(0.2),
        "F.leaky_relu(x, 0.2)",
    ),
    Case(
        "rrelu_eval",
        F.rrelu,
        lambda x: np.where(x >= 0, x, x * (1 / 8 + 1 / 3) / 2),
        lambda: nn.RReLU().eval(),
        "F.rrelu(x)",
    ),
    Case("glu", lambda x: F.glu(x, 1), lambda x: x[:, :2] * _sigmoid(x[:, 2:]), lambda: nn.GLU(1), "F.glu(x, 1)"),
    Case(
        "softmin",
        lambda x: F.softmin(x, 1),
        lambda x: np.exp(-x) / np.exp(-x).sum(1, keepdims=True),
        lambda: nn.Softmin(1),
        "F.softmin(x, 1)",
    ),
    Case(
        "softmax2d",
        lambda x: F.softmax(x, -3),
        lambda x: np.exp(x) / np.exp(x).sum(-3, keepdims=True),
        nn.Softmax2d,
        "F.softmax(x, -3)",
    ),
]
IDS = [case.name for case in CASES]


def _input(case: Case) -> np.ndarray:
    # Values away from the kinks (0, +-3, +-lambd, thresholds): finite differences straddle no corner.
    shape = (2, 3, 2, 2) if case.name == "softmax2d" else (3, 4)
    x = RNG.uniform(-5, 5, shape)
    for kink in (0.0, 0.3, -0.5, 1.5, 0.8, -0.8, 3.0, -3.0, 1.5):
        x = np.where(np.abs(x - kink) < 0.05, x + 0.1, x)
    return x


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float32_forward_matches_the_numpy_formula(case, executor):
    x = _input(case).astype(np.float32)
    expected = case.formula(x.astype(np.float64))
    actual = forward_on(executor, case.function, x)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=float32_atol(expected))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_float64_forward_matches_the_numpy_formula(case):
    x = _input(case)
    actual = forward_on("auto", case.function, x, dtype=onnxnn.float64)
    np.testing.assert_allclose(actual, case.formula(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gradient_matches_finite_differences(case):
    check_gradients(case.function, [_input(case)])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_module_applies_its_function_and_exports(case):
    module = case.module()
    x = onnxnn.tensor(_input(case).astype(np.float32))
    expected = case.function(x).numpy()
    np.testing.assert_array_equal(module(x).detach().numpy(), expected)
    np.testing.assert_allclose(exported_output(module, x), expected, rtol=0, atol=float32_atol(expected))


@pytest.mark.parametrize("dtype, bits", [(onnxnn.float16, 11), (onnxnn.bfloat16, 8)], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_low_precision_runs_near_the_formula(case, dtype, bits):
    x = onnxnn.tensor(_input(case).astype(np.float32)).to(dtype)
    expected = case.formula(x.float().numpy().astype(np.float64))
    out = case.function(x)
    assert out.dtype is dtype
    # A few roundings to the format's ``bits`` significant bits, relative to the largest value.
    np.testing.assert_allclose(
        out.float().numpy(), expected, rtol=0, atol=8 * 2.0**-bits * max(np.abs(expected).max(), 1.0)
    )


# ---------------------------------------------------------------- against torch


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_and_gradient_match_torch(case):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF  # noqa: F401  (used by the expressions)

    x = _input(case)
    expression = case.torch_function
    tx = torch.tensor(x, requires_grad=True)
    ty = eval(expression, {"F": torch.nn.functional, "x": tx})
    cotangent = RNG.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(cotangent))
    ox = onnxnn.tensor(x, dtype=onnxnn.float64, requires_grad=True)
    oy = case.function(ox)
    oy.backward(onnxnn.tensor(cotangent))
    # PyTorch's float64 kernels hold some constants in float32 (hardsigmoid's backward multiplies by
    # float(1/6)), so agreement is to float32's relative precision, not float64's.
    np.testing.assert_allclose(oy.detach().numpy(), ty.detach().numpy(), rtol=2.0**-23, atol=1e-14)
    np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=2.0**-23, atol=1e-14)


@pytest.mark.parametrize(
    "name",
    [
        "Threshold",
        "RReLU",
        "Hardtanh",
        "ReLU6",
        "Hardsigmoid",
        "SiLU",
        "Mish",
        "Hardswish",
        "ELU",
        "CELU",
        "SELU",
        "GLU",
        "Hardshrink",
        "LogSigmoid",
        "Softplus",
        "Softshrink",
        "PReLU",
        "Softsign",
        "Tanhshrink",
        "Softmin",
        "Softmax2d",
    ],
)
def test_repr_and_state_dict_match_torch(name):
    torch = pytest.importorskip("torch")
    args = (0.1, 2.0) if name == "Threshold" else ()
    for kwargs in ({}, {"inplace": True}):
        try:
            reference = getattr(torch.nn, name)(*args, **kwargs)
        except TypeError:
            continue  # no inplace option
        ours = getattr(nn, name)(*args, **kwargs)
        assert repr(ours) == repr(reference)
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == {
            k: tuple(v.shape) for k, v in reference.state_dict().items()
        }


# ---------------------------------------------------------------- in-place forms


@pytest.mark.parametrize(
    "in_place, out_of_place",
    [
        (lambda x: F.threshold_(x, 0.1, 5.0), lambda x: F.threshold(x, 0.1, 5.0)),
        (lambda x: F.hardtanh_(x, -0.3, 0.3), lambda x: F.hardtanh(x, -0.3, 0.3)),
        (lambda x: F.elu_(x, 0.5), lambda x: F.elu(x, 0.5)),
        (F.selu_, F.selu),
        (lambda x: F.celu_(x, 2.0), lambda x: F.celu(x, 2.0)),
        (lambda x: F.rrelu_(x), lambda x: F.rrelu(x)),
        (lambda x: F.hardswish(x, inplace=True), F.hardswish),
        (lambda x: F.hardsigmoid(x, inplace=True), F.hardsigmoid),
        (lambda x: F.mish(x, inplace=True), F.mish),
        (lambda x: nn.SELU(inplace=True)(x), F.selu),
    ],
)
def test_in_place_forms_rebind_the_input_to_the_result(in_place, out_of_place):
    x = onnxnn.randn(3, 4)
    expected = out_of_place(x).numpy()
    result = in_place(x)
    assert result is x
    np.testing.assert_array_equal(x.numpy(), expected)


# ---------------------------------------------------------------- PReLU and RReLU


@pytest.mark.parametrize(
    "shape, num_parameters", [((4,), 1), ((), 1), ((2, 3), 3), ((2, 3, 5), 3), ((2, 3, 2, 2), 3), ((2, 3, 2, 2), 1)]
)
def test_prelu_scales_negative_inputs_per_channel(shape, num_parameters):
    module = nn.PReLU(num_parameters)
    assert [(k, tuple(v.shape)) for k, v in module.state_dict().items()] == [("weight", (num_parameters,))]
    np.testing.assert_array_equal(module.weight.detach().numpy(), np.full(num_parameters, 0.25, np.float32))
    slopes = RNG.uniform(0.1, 0.9, num_parameters)
    x = RNG.standard_normal(shape)
    broadcast = slopes.reshape((-1,) + (1,) * (len(shape) - 2)) if num_parameters > 1 else slopes
    expected = np.where(x < 0, x * broadcast, x)
    for executor in EXECUTORS:
        actual = forward_on(executor, F.prelu, x.astype(np.float32), slopes.astype(np.float32))
        np.testing.assert_allclose(actual, expected, rtol=0, atol=float32_atol(expected))
    check_gradients(F.prelu, [x, slopes])
    with onnxnn.no_grad():
        module.weight.copy_(onnxnn.tensor(slopes.astype(np.float32)))
    tx = onnxnn.tensor(x.astype(np.float32))
    np.testing.assert_allclose(exported_output(module, tx), expected, rtol=0, atol=float32_atol(expected))


@pytest.mark.parametrize("shape, channels", [((2, 4, 5), 4), ((3,), 1)])
def test_prelu_channel_mismatch_names_both_numbers(shape, channels):
    with pytest.raises(RuntimeError, match=f"Found parameter numbers = 3 and channel size = {channels}"):
        nn.PReLU(3)(onnxnn.randn(*shape))


def test_rrelu_in_training_draws_slopes_between_lower_and_upper():
    module = nn.RReLU(0.1, 0.3)
    x = -np.abs(RNG.standard_normal((200,))) - 0.1
    out = module(onnxnn.tensor(x.astype(np.float32))).numpy()
    slopes = out / x.astype(np.float32)
    assert np.all(slopes >= 0.1 - 1e-6) and np.all(slopes <= 0.3 + 1e-6)
    assert slopes.std() > 0.03  # drawn per element, not one shared slope
    positive = np.abs(x).astype(np.float32)
    np.testing.assert_array_equal(module(onnxnn.tensor(positive)).numpy(), positive)
    onnxnn.manual_seed(3)
    first = module(onnxnn.tensor(x)).numpy()
    onnxnn.manual_seed(3)
    np.testing.assert_array_equal(module(onnxnn.tensor(x)).numpy(), first)


# ---------------------------------------------------------------- errors with PyTorch's wording


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: F.glu(onnxnn.randn(2, 3)), RuntimeError, "Halving dimension must be even, but dimension 1 is size 3"),
        (lambda: F.glu(onnxnn.tensor(1.0)), RuntimeError, "glu does not support scalars"),
        (lambda: F.softshrink(onnxnn.randn(2), -1.0), RuntimeError, "lambda must be greater or equal to 0"),
        (lambda: nn.Hardtanh(1.0, -1.0), AssertionError, r"max_val \(-1.0\) must be greater than min_val \(1.0\)"),
        (lambda: nn.Softmax2d()(onnxnn.randn(2, 3)), ValueError, "Softmax2d: expected input to be 3D or 4D, got 2D"),
        (
            lambda: F.prelu(onnxnn.randn(2, 3), onnxnn.randn(3, 1)),
            RuntimeError,
            "scalar or 1D tensor, but got: ndim = 2",
        ),
    ],
)
def test_bad_input_raises_pytorchs_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_softmin_without_dim_warns_and_picks_the_legacy_dim():
    x = onnxnn.randn(2, 3)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        out = F.softmin(x)
    np.testing.assert_allclose(out.numpy().sum(1), np.ones(2), rtol=0, atol=4 * 2.0**-23 * 3)


# ---------------------------------------------------------------- the ONNX ops' gradient rules


OP_CASES = [
    ("Selu", {}),
    ("Selu", {"alpha": 1.2, "gamma": 0.8}),
    ("Celu", {"alpha": 0.7}),
    ("HardSigmoid", {}),
    ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}),
    ("HardSwish", {}),
    ("Mish", {}),
    ("Softsign", {}),
    ("Shrink", {"lambd": 0.6, "bias": 0.2}),
    ("Shrink", {}),
    ("ThresholdedRelu", {"alpha": 0.4}),
    ("ThresholdedRelu", {}),
]


@pytest.mark.parametrize("op_type, attrs", OP_CASES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(OP_CASES)])
def test_onnx_activation_op_gradient_matches_finite_differences(op_type, attrs):
    x = RNG.uniform(-5, 5, (3, 4))
    # onnxruntime lacks these float64 kernels (its Shrink rounds through float32): onnxnn's kernels run them.
    with onnxnn.set_executor("kernels"):
        check_gradients(lambda t: apply_op(op_type, (t,), attrs), [x])


@pytest.mark.parametrize("slope_shape", [(), (1,), (3, 1), (4,)])
def test_onnx_prelu_gradient_reaches_input_and_slope(slope_shape):
    with onnxnn.set_executor("kernels"):
        check_gradients(
            lambda x, s: apply_op("PRelu", (x, s)), [RNG.standard_normal((2, 3, 4)), RNG.uniform(0.1, 0.5, slope_shape)]
        )


def test_every_op_recorded_by_the_activations_has_a_gradient_rule():
    from onnxnn.ir.registry import gradient_rules

    for op_type in (
        "Selu",
        "Celu",
        "HardSigmoid",
        "HardSwish",
        "Mish",
        "Softsign",
        "Shrink",
        "ThresholdedRelu",
        "PRelu",
    ):
        assert gradient_rules.get(op_type) is not None, op_type
    assert math.isclose(SELU_ALPHA * SELU_SCALE, 1.7580993408473766, rel_tol=1e-15)


# ---------------------------------------------------------------- gumbel_softmax


def test_gumbel_softmax_argmax_is_distributed_as_softmax_of_the_logits():
    logits = np.log(np.array([0.2, 0.5, 0.3]))
    n = 6000
    samples = F.gumbel_softmax(onnxnn.tensor(np.tile(logits, (n, 1))), tau=0.7).numpy()
    np.testing.assert_allclose(samples.sum(1), np.ones(n), rtol=0, atol=4 * 2.0**-23 * 3)
    counts = np.bincount(samples.argmax(1), minlength=3)
    probabilities = np.array([0.2, 0.5, 0.3])
    # The Gumbel-max trick: argmax of logits + Gumbel noise is a draw from softmax(logits).
    assert np.all(np.abs(counts - n * probabilities) <= 5 * np.sqrt(n * probabilities * (1 - probabilities)))


def test_hard_gumbel_softmax_is_one_hot_with_the_soft_gradient():
    logits = RNG.standard_normal((4, 5))
    cotangent = onnxnn.tensor(RNG.standard_normal((4, 5)))
    outputs, grads = [], []
    for hard in (False, True):
        x = onnxnn.tensor(logits, requires_grad=True)
        onnxnn.manual_seed(9)  # the same noise for both
        y = F.gumbel_softmax(x, tau=0.5, hard=hard, dim=1)
        (y * cotangent).sum().backward()
        outputs.append(y.detach().numpy())
        grads.append(x.grad.numpy())
    soft, hard_values = outputs
    np.testing.assert_array_equal(np.sort(hard_values, axis=1), np.tile([0, 0, 0, 0, 1.0], (4, 1)))
    np.testing.assert_array_equal(hard_values.argmax(1), soft.argmax(1))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- ops newer than opset 21, imported


def _imported(op_type: str, opset: int, extra_inputs=(), **attrs):
    """A one-node float64 model of ``op_type`` imported with from_onnx (which runs its ONNX function body)."""
    import onnx
    from onnx import TensorProto, helper

    from onnxnn.import_ import from_onnx

    names = ["x"] + [f"extra_{i}" for i in range(len(extra_inputs))]
    initializers = [
        onnx.numpy_helper.from_array(np.asarray(value), name) for name, value in zip(names[1:], extra_inputs)
    ]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, 4])],
        initializer=initializers,
    )
    return from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


@pytest.mark.parametrize("alpha", [1.0, 1.7])
def test_imported_swish_trains_through_its_function_body(alpha):
    module = _imported("Swish", 24, alpha=alpha)
    x = RNG.uniform(-4, 4, (3, 4))
    stored = float(np.float32(alpha))  # ONNX float attributes are float32
    np.testing.assert_allclose(module(onnxnn.tensor(x)).detach().numpy(), x * _sigmoid(stored * x), rtol=1e-12)
    check_gradients(module, [x])


def test_cast_like_sends_the_gradient_to_its_first_input():
    # Swish's body casts alpha with "CastLike"; as a node of its own, CastLike(x, like) passes g on to x.
    module = _imported("CastLike", 21, [np.zeros((), np.float64)])
    check_gradients(module, [RNG.standard_normal((3, 4))])


def test_hardmax_passes_no_gradient():
    x = onnxnn.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    one_hot = apply_op("Hardmax", (x,), {"axis": 1})
    assert not one_hot.requires_grad  # piecewise constant: zero gradient, as for Floor
    (one_hot * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), one_hot.numpy())


# (name, function, its first derivative on x <= 0 at 0 and -1, its second derivative at -1): at
# exactly 0 the first derivative is the negative side's and the second is 0, as PyTorch's
# elu_double_backward (strict x < 0).
EXPONENTIAL_KINKS = [
    ("elu", F.elu, 1.0, math.exp(-1), math.exp(-1)),
    ("elu alpha 0.5", lambda x: F.elu(x, alpha=0.5), 0.5, 0.5 * math.exp(-1), 0.5 * math.exp(-1)),
    ("celu alpha 2", lambda x: F.celu(x, alpha=2.0), 1.0, math.exp(-0.5), 0.5 * math.exp(-0.5)),
    (
        "selu",
        F.selu,
        1.0507009873554805 * 1.6732632423543772,
        1.0507009873554805 * 1.6732632423543772 * math.exp(-1),
        1.0507009873554805 * 1.6732632423543772 * math.exp(-1),
    ),
]


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize(
    "function, at_zero, at_minus_one, second_at_minus_one",
    [case[1:] for case in EXPONENTIAL_KINKS],
    ids=[case[0] for case in EXPONENTIAL_KINKS],
)
def test_exponential_units_have_no_second_derivative_at_zero(
    function, at_zero, at_minus_one, second_at_minus_one, dtype
):
    x = onnxnn.tensor([0.0, -0.0, -1.0, 0.5], dtype=dtype, requires_grad=True)
    (first,) = onnxnn.autograd.grad(function(x).sum(), x, create_graph=True)
    (second,) = onnxnn.autograd.grad(first.sum(), x)
    tolerance = {onnxnn.float32: 1e-6, onnxnn.float64: 1e-14}[dtype]  # a few roundings of exp
    np.testing.assert_allclose(first.detach().numpy()[:3], [at_zero, at_zero, at_minus_one], rtol=tolerance)
    np.testing.assert_allclose(second.numpy(), [0.0, 0.0, second_at_minus_one, 0.0], rtol=tolerance, atol=0)


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
def test_prelu_mixed_second_derivatives_vanish_at_zero(dtype):
    # PyTorch's double backward takes x >= 0 for both mixed terms; the first derivatives are unchanged.
    x = onnxnn.tensor([0.0, -1.0, 1.0], dtype=dtype, requires_grad=True)
    slope = onnxnn.tensor([0.25], dtype=dtype, requires_grad=True)
    grad_x, grad_slope = onnxnn.autograd.grad(F.prelu(x, slope).sum(), [x, slope], create_graph=True)
    assert grad_x.tolist() == [0.25, 0.25, 1.0] and grad_slope.tolist() == [-1.0]
    assert onnxnn.autograd.grad(grad_slope.sum(), x, retain_graph=True)[0].tolist() == [0.0, 1.0, 0.0]
    assert onnxnn.autograd.grad(grad_x.sum(), slope)[0].tolist() == [1.0]


def test_rrelu_training_takes_the_slope_at_zero_and_passes_nan():
    # PyTorch's rrelu_with_noise: the slope where x <= 0 (its gradient at 0), 1 for a NaN.
    x = onnxnn.tensor([-1.0, -0.0, 0.0, 2.0, float("nan")], dtype=onnxnn.float64, requires_grad=True)
    (gradient,) = onnxnn.autograd.grad(F.rrelu(x, 0.25, 0.25, training=True).sum(), x)
    assert gradient.tolist() == [0.25, 0.25, 0.25, 1.0, 1.0]


def test_rrelu_training_gradient_is_the_drawn_slope():
    def with_fixed_slopes(x):
        onnxnn.manual_seed(4)
        return F.rrelu(x, 0.1, 0.4, training=True)

    check_gradients(with_fixed_slopes, [RNG.uniform(-3, 3, (3, 4))])


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float64], ids=["float32", "float64"])
@pytest.mark.parametrize(
    "function, slopes",
    [
        # PyTorch's one-sided choices at the kinks -3 and 3 (x = -3, -1, 0, 1, 3, 6).
        (F.hardswish, [0.0, 1 / 6, 0.5, 5 / 6, 1.0, 1.0]),
        (F.hardsigmoid, [0.0, 1 / 6, 1 / 6, 1 / 6, 0.0, 0.0]),
        # At 0 PReLU takes the slope's side (x > 0 is the identity's).
        (lambda x: F.prelu(x, onnxnn.tensor([0.25], dtype=x.dtype)), [0.25, 0.25, 0.25, 1.0, 1.0, 1.0]),
    ],
)
def test_slopes_at_the_kinks_are_pytorchs(function, slopes, dtype):
    x = onnxnn.tensor([-3.0, -1.0, 0.0, 1.0, 3.0, 6.0], dtype=dtype, requires_grad=True)
    function(x).sum().backward()
    u = 2.0**-24 if dtype is onnxnn.float32 else 2.0**-53
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=4 * u, atol=0)
