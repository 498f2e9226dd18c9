"""Normalizations, embeddings and activations: the arguments PyTorch refuses, as a specification.

- The activations PyTorch computes only for floating inputs (leaky_relu, gelu, silu, elu, selu,
  celu, softplus, logsigmoid, softmax, log_softmax, softmin, hardsigmoid, hardswish, mish,
  softshrink, rrelu, glu) refuse an integer or bool input with NotImplementedError at the call,
  where silu, glu and the softmaxes promoted it to float and the others failed only when the graph
  ran. With ``dtype=`` the softmaxes convert the input first, so an integer input is accepted.
- ``rrelu`` refuses ``lower > upper`` with RuntimeError, in evaluation as in training.
- ``batch_norm``, ``layer_norm``, ``group_norm``, ``instance_norm`` and ``rms_norm`` refuse an
  integer input with NotImplementedError (``group_norm`` returned truncated zeros).
- ``batch_norm``, ``layer_norm``, ``group_norm`` and ``instance_norm`` refuse parameters (weight,
  bias, running statistics) of another dtype than the input's with RuntimeError, where they were
  silently converted (a float64 input normalized with a weight rounded to float32, a float32 one
  with a float64 running statistic rounded); float32 parameters with a float16 or bfloat16 input
  (PyTorch's mixed-dtype form) stay accepted and give the input's dtype.
- ``embedding_bag`` refuses ``per_sample_weights`` of another dtype than ``weight``'s.
- ``celu`` with a negative ``alpha`` computes ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``
  on both executors (onnxruntime's Celu kernel returned ``x`` itself for ``x < 0``).
- ``softmax``, ``log_softmax`` and ``softmin`` of a 0-d input refuse a dim outside ``[-1, 0]`` with
  IndexError, where any dim was taken.
- ``batch_norm`` in training refuses exactly one of ``running_mean`` and ``running_var`` with
  ValueError, where only the given one was updated.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS

FLOATING_ONLY_ACTIVATIONS = [
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.1)),
    ("gelu", lambda x: F.gelu(x)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
    ("silu", lambda x: F.silu(x)),
    ("elu", lambda x: F.elu(x)),
    ("selu", lambda x: F.selu(x)),
    ("celu", lambda x: F.celu(x)),
    ("softplus", lambda x: F.softplus(x)),
    ("logsigmoid", lambda x: F.logsigmoid(x)),
    ("softmax", lambda x: F.softmax(x, dim=0)),
    ("log_softmax", lambda x: F.log_softmax(x, dim=0)),
    ("softmin", lambda x: F.softmin(x, dim=0)),
    ("hardsigmoid", lambda x: F.hardsigmoid(x)),
    ("hardswish", lambda x: F.hardswish(x)),
    ("mish", lambda x: F.mish(x)),
    ("softshrink", lambda x: F.softshrink(x)),
    ("rrelu_eval", lambda x: F.rrelu(x)),
    ("rrelu_training", lambda x: F.rrelu(x, training=True)),
    ("glu", lambda x: F.glu(x, dim=0)),
    ("silu_module", lambda x: nn.SiLU()(x)),
    ("softmax_module", lambda x: nn.Softmax(dim=0)(x)),
    ("glu_module", lambda x: nn.GLU(0)(x)),
]


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
@pytest.mark.parametrize("name, function", FLOATING_ONLY_ACTIVATIONS, ids=[c[0] for c in FLOATING_ONLY_ACTIVATIONS])
def test_floating_only_activations_refuse_integer_inputs(name, function, dtype):
    values = onnxnn.tensor(np.array([0, 1, 1, 0]).astype(dtype))
    with pytest.raises(NotImplementedError, match="not implemented for"):
        function(values)


SOFTMAXES_WITH_DTYPE = [
    ("softmax", lambda x: F.softmax(x, dim=0, dtype=onnxnn.float64), lambda v: np.exp(v) / np.exp(v).sum()),
    ("log_softmax", lambda x: F.log_softmax(x, dim=0, dtype=onnxnn.float64), lambda v: v - np.log(np.exp(v).sum())),
    ("softmin", lambda x: F.softmin(x, dim=0, dtype=onnxnn.float64), lambda v: np.exp(-v) / np.exp(-v).sum()),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, function, formula", SOFTMAXES_WITH_DTYPE, ids=[c[0] for c in SOFTMAXES_WITH_DTYPE])
def test_softmaxes_accept_integer_inputs_converted_by_dtype(name, function, formula, executor):
    values = np.array([0, 1, 2, 5])
    with onnxnn.set_executor(executor):
        out = function(onnxnn.tensor(values))
        assert out.dtype is onnxnn.float64
        result = out.numpy()
    # a few float64 roundings of values of magnitude up to 5
    np.testing.assert_allclose(result, formula(values.astype(np.float64)), rtol=0, atol=32 * 2.0**-52 * 6)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("inplace", [False, True])
def test_rrelu_refuses_a_lower_bound_above_the_upper(training, inplace):
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
        F.rrelu(onnxnn.tensor([-1.0, 2.0]), 0.5, 0.1, training=training, inplace=inplace)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_rrelu_accepts_equal_bounds(executor):
    with onnxnn.set_executor(executor):
        out = F.rrelu(onnxnn.tensor([-2.0, 3.0]), 0.25, 0.25, training=True).numpy()
    np.testing.assert_array_equal(out, np.array([-0.5, 3.0], np.float32))  # exact: -2 * 0.25


INTEGER_NORMALIZATIONS = [
    ("batch_norm_training", lambda x: F.batch_norm(x, None, None, training=True)),
    (
        "batch_norm_eval",
        lambda x: F.batch_norm(x, onnxnn.zeros(3, dtype=onnxnn.int64), onnxnn.ones(3, dtype=onnxnn.int64)),
    ),
    ("layer_norm", lambda x: F.layer_norm(x, (3,))),
    ("group_norm", lambda x: F.group_norm(x, 3)),
    ("instance_norm", lambda x: F.instance_norm(x.reshape(1, 3, 4))),
    ("rms_norm", lambda x: F.rms_norm(x, [3])),
]


@pytest.mark.parametrize("name, function", INTEGER_NORMALIZATIONS, ids=[c[0] for c in INTEGER_NORMALIZATIONS])
def test_normalizations_refuse_integer_inputs(name, function):
    values = onnxnn.tensor(np.arange(12).reshape(4, 3))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        function(values)


def _vector(dtype: str, size: int = 3):
    return onnxnn.ones(size, dtype=getattr(onnxnn, dtype))


def _batch_norm(training: bool):
    def call(input, parameter_dtype, statistics_dtype):
        return F.batch_norm(
            input,
            _vector(statistics_dtype),
            _vector(statistics_dtype),
            _vector(parameter_dtype),
            _vector(parameter_dtype) * 0,
            training=training,
        )

    return call


NORMALIZATIONS_WITH_PARAMETERS = [
    ("batch_norm_training", _batch_norm(True)),
    ("batch_norm_eval", _batch_norm(False)),
    ("layer_norm", lambda x, p, s: F.layer_norm(x, (3,), _vector(p), _vector(p) * 0)),
    ("group_norm", lambda x, p, s: F.group_norm(x, 3, _vector(p), _vector(p) * 0)),
    (
        "instance_norm",
        lambda x, p, s: F.instance_norm(
            x.reshape(1, 3, 4), _vector(s), _vector(s), _vector(p), _vector(p) * 0, use_input_stats=True
        ),
    ),
    (
        "instance_norm_eval",
        lambda x, p, s: F.instance_norm(
            x.reshape(1, 3, 4), _vector(s), _vector(s), _vector(p), _vector(p) * 0, use_input_stats=False
        ),
    ),
]

# input dtype, parameters' dtype, running statistics' dtype
MIXED_DTYPES = [
    ("float64", "float32", "float64"),
    ("float64", "float64", "float32"),
    ("float32", "float64", "float32"),
    ("float32", "float32", "float64"),
    ("float16", "float16", "float32"),
    ("float16", "float32", "float16"),
]


@pytest.mark.parametrize("input_dtype, parameter_dtype, statistics_dtype", MIXED_DTYPES)
@pytest.mark.parametrize(
    "name, function", NORMALIZATIONS_WITH_PARAMETERS, ids=[c[0] for c in NORMALIZATIONS_WITH_PARAMETERS]
)
def test_normalizations_refuse_parameters_of_another_dtype(
    name, function, input_dtype, parameter_dtype, statistics_dtype
):
    mixed_form = input_dtype == "float16" and parameter_dtype == "float32"
    if name in ("layer_norm", "group_norm") and (parameter_dtype == input_dtype or mixed_form):
        pytest.skip("no running statistics: the parameters alone are of an accepted dtype")
    values = onnxnn.tensor(np.arange(12.0).reshape(4, 3).astype(input_dtype))
    with pytest.raises(RuntimeError, match="mixed dtype"):
        function(values, parameter_dtype, statistics_dtype)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("input_dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "name, function", NORMALIZATIONS_WITH_PARAMETERS, ids=[c[0] for c in NORMALIZATIONS_WITH_PARAMETERS]
)
def test_half_inputs_take_float32_parameters(name, function, input_dtype, executor):
    """PyTorch's mixed-dtype form: float32 weight, bias and statistics normalize a float16 or bfloat16
    input, whose dtype the result keeps."""
    rows = np.array([[1.0, 2.0, 4.0], [3.0, 2.0, 0.0], [1.0, 2.0, 4.0], [3.0, 2.0, 0.0]], np.float32)
    values = onnxnn.tensor(rows).to(getattr(onnxnn, input_dtype))
    with onnxnn.set_executor(executor):
        out = function(values, "float32", "float32")
        assert out.dtype is getattr(onnxnn, input_dtype)
        assert np.all(np.isfinite(out.float().numpy()))


@pytest.mark.parametrize("executor", EXECUTORS)
def test_layer_norm_with_parameters_of_the_input_dtype_still_normalizes(executor):
    rows = np.array([[1.0, 2.0, 6.0], [-3.0, 0.0, 3.0]])
    with onnxnn.set_executor(executor):
        out = F.layer_norm(onnxnn.tensor(rows), (3,), _vector("float64"), _vector("float64") * 0, eps=0.0).numpy()
    centered = rows - rows.mean(1, keepdims=True)
    expected = centered / np.sqrt((centered**2).mean(1, keepdims=True))
    np.testing.assert_allclose(out, expected, rtol=0, atol=16 * 2.0**-52 * 2)


@pytest.mark.parametrize("weights_dtype", ["float64", "float16"])
def test_embedding_bag_refuses_per_sample_weights_of_another_dtype(weights_dtype):
    weight = onnxnn.ones((4, 2))
    sample_weights = onnxnn.ones(3, dtype=getattr(onnxnn, weights_dtype))
    with pytest.raises(RuntimeError, match="per_sample_weights"):
        F.embedding_bag(
            onnxnn.tensor([0, 1, 3]), weight, onnxnn.tensor([0, 2]), mode="sum", per_sample_weights=sample_weights
        )


# ---------------------------------------------------------------- celu's negative alpha, 0-d softmaxes


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("alpha", [-1.0, -0.5, -2.0])
def test_celu_with_a_negative_alpha_follows_its_formula(alpha, executor):
    values = np.array([-3.0, -1.0, -0.25, 0.5, 2.0], np.float32)
    x = onnxnn.tensor(values, requires_grad=True)
    with onnxnn.set_executor(executor):
        out = F.celu(x, alpha)
        (gradient,) = onnxnn.autograd.grad(out.sum(), [x])
        result, gradient = out.detach().numpy(), gradient.numpy()
    wide = values.astype(np.float64)
    curve = alpha * np.expm1(wide / alpha)
    expected = np.maximum(wide, 0.0) + np.minimum(curve, 0.0)
    # d/dx of the curve is exp(x / alpha); x > 0 takes the identity (the curve is positive there)
    expected_gradient = np.where(wide > 0, 1.0, np.exp(wide / alpha))
    # exp of arguments up to 6 in float32: a few ulps of results up to e^6
    np.testing.assert_allclose(result, expected, rtol=8 * 2.0**-23, atol=8 * 2.0**-23)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=8 * 2.0**-23, atol=8 * 2.0**-23)


SOFTMAXES = [("softmax", F.softmax, 1.0), ("log_softmax", F.log_softmax, 0.0), ("softmin", F.softmin, 1.0)]


@pytest.mark.parametrize("dim", [1, -2, 3])
@pytest.mark.parametrize("name, function, _value", SOFTMAXES, ids=[c[0] for c in SOFTMAXES])
def test_softmaxes_of_a_0d_input_refuse_a_dim_out_of_range(name, function, _value, dim):
    with pytest.raises(IndexError, match="Dimension out of range"):
        function(onnxnn.tensor(0.7), dim)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("name, function, value", SOFTMAXES, ids=[c[0] for c in SOFTMAXES])
def test_softmaxes_of_a_0d_input_take_dim_0_or_minus_1(name, function, value, dim, executor):
    with onnxnn.set_executor(executor):
        out = function(onnxnn.tensor(0.7), dim)
        assert out.shape == ()
        assert out.item() == value  # a single element: exp(0) / 1 exactly


@pytest.mark.parametrize("missing", ["running_mean", "running_var"])
def test_batch_norm_training_refuses_one_running_statistic_alone(missing):
    statistics = {"running_mean": onnxnn.zeros(3), "running_var": onnxnn.ones(3)}
    statistics[missing] = None
    with pytest.raises(ValueError, match="must either both be None or neither be None"):
        F.batch_norm(onnxnn.randn(4, 3), statistics["running_mean"], statistics["running_var"], training=True)
