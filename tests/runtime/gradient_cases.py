"""The table of gradient rules of the default ONNX domain, checked against float64 central differences
by test_gradients_first_order.py (its input makers also serve test_gradients_higher_order.py).

One table, one line per (op, attribute variant, broadcasting pattern). Each case is a function of
tensors and the float64 arrays it is evaluated at; ``check_gradients`` compares the recorded
backward graph with finite differences. Inputs stay away from points where the op is not
differentiable (relu/abs at 0, clip bounds), except where a tie is the point of the case
(central differences at a two-way tie of max/min give exactly the even split PyTorch uses).
``test_every_gradient_rule_has_a_case`` keeps the table complete: it reads which ONNX op types
each case records from the autograd graph, and fails when a registered rule has no case.

``_rng`` is the one generator of the table here and of the higher-order cases, drawn in that order,
as in the module the tests were split from.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

import onnxnn
from onnxnn.runtime.ops import pad_constant, slice_axis
from onnxnn.runtime.ops._common import int64_constant
from onnxnn.runtime.tensor import apply_op


class Case(NamedTuple):
    id: str
    function: Callable
    inputs: list
    # Overrides for check_gradients (a larger eps where a float32 cast rounds the differences).
    options: dict = {}


_rng = np.random.default_rng(1234)


def randn(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


def positive(*shape: int) -> np.ndarray:
    """Values in [0.5, 2): safe for log, sqrt, division, powers with real exponents."""
    return _rng.uniform(0.5, 2.0, shape)


def nonzero(*shape: int) -> np.ndarray:
    """Values with |x| in [0.3, 1.5): away from the kinks of relu, abs, leaky_relu at 0."""
    return _rng.uniform(0.3, 1.5, shape) * _rng.choice([-1.0, 1.0], shape)


def uniform(low: float, high: float, *shape: int) -> np.ndarray:
    """Values inside an op's domain (asin's (-1, 1), acosh's (1, inf)), away from its ends."""
    return _rng.uniform(low, high, shape)


def distinct(*shape: int) -> np.ndarray:
    """Values at least 0.1 apart, so that a small step never reorders them (TopK's selection)."""
    return _rng.permutation(np.arange(int(np.prod(shape)))).reshape(shape) * 0.1 - 0.5


def avoiding(values: np.ndarray, *points: float, margin: float = 0.05) -> np.ndarray:
    """Moves entries closer than ``margin`` to any of ``points`` (clip bounds) out of the way."""
    values = values.copy()
    for point in points:
        close = np.abs(values - point) < margin
        values[close] = point + 2 * margin
    return values


def constant(array) -> onnxnn.Tensor:
    return onnxnn.tensor(np.asarray(array))


# onnxruntime's CPU provider has no float64 kernels for Elu, LeakyRelu, Softplus and Erf (nor Gelu,
# whose function body uses Erf): their cases run the op on float32 casts of the float64 inputs, with
# a step and tolerances that float32 rounding allows: at eps 1e-2 the differences' truncation is
# eps**2 / 6 |f3| ~ 2e-5 |f3| (f3 the third derivative) and their rounding u |f| / eps ~ 6e-6 |f|
# per rounding of f (a few dozen at most for these small outputs), both inside rtol 2e-3 and
# atol 1e-4 at unit scale.
IN_FLOAT32 = {"eps": 1e-2, "rtol": 2e-3, "atol": 1e-4}


def in_float32(function: Callable) -> Callable:
    return lambda *tensors: function(*[tensor.float() for tensor in tensors])


def op(op_type: str, *inputs, **attrs):
    """Records ``op_type`` directly: rules also serve imported graphs, where no tensor function applies."""
    return apply_op(op_type, inputs, attrs or None)


# Fractional parts in [0.2, 0.4] or [0.6, 0.8]: a step away from the integers and halves where
# floor, ceil and round jump.
_AWAY_FROM_JUMPS = np.array([[0.3, -1.7, 2.2], [-0.6, 1.4, -2.35]])


_QUANTIZED = np.array([[12, -7, 100], [-128, 5, 0], [3, 127, -40], [9, -9, 1]], dtype=np.int8)


_CONDITION = np.array([[True], [False], [True]])


_TIES_A = np.array([1.0, -0.5, 2.0, 0.25])


_TIES_B = np.array([1.0, 0.75, 2.0, -1.0])  # ties at positions 0 and 2


CASES = [
    # ---------------------------------------------------------------- arithmetic with broadcasting
    Case("add_broadcast_3x1_4", lambda a, b: a + b, [randn(3, 1), randn(4)]),
    Case("add_zero_dim", lambda a, b: a + b, [randn(2, 3), randn()]),
    Case("add_python_scalar", lambda a: a + 2.5, [randn(3)]),
    Case("add_alpha", lambda a, b: onnxnn.add(a, b, alpha=-2.0), [randn(2, 3), randn(3)]),
    Case("radd_scalar_zero_dim", lambda a: 1.5 + a, [randn()]),
    Case("sum_variadic_broadcast", lambda a, b, c: op("Sum", a, b, c), [randn(3, 1), randn(4), randn(3, 4)]),
    Case("mean_variadic_broadcast", lambda a, b: op("Mean", a, b), [randn(2, 3), randn(3)]),
    Case("sub_broadcast", lambda a, b: a - b, [randn(4), randn(3, 1)]),
    Case("rsub_scalar", lambda a: 1.5 - a, [randn(2, 2)]),
    Case("mul_broadcast_2x3x1_3x4", lambda a, b: a * b, [randn(2, 3, 1), randn(3, 4)]),
    Case("mul_same_input", lambda a: a * a * a, [randn(5)]),
    Case("mul_scalar", lambda a: a * -3.0, [randn(2, 3)]),
    Case("div_broadcast", lambda a, b: a / b, [randn(3, 4), nonzero(4)]),
    Case("div_zero_dim_divisor", lambda a, b: a / b, [randn(3), nonzero()]),
    Case("rdiv_scalar", lambda a: 2.0 / a, [nonzero(2, 3)]),
    Case("neg", lambda a: -a, [randn(3, 2)]),
    # Piecewise constant: zero derivative (PyTorch's FloorBackward0, ...), checked through a product
    # whose derivative is then the op's value, at inputs a step away from every jump.
    Case("floor_times_input", lambda a: onnxnn.floor(a) * a, [_AWAY_FROM_JUMPS]),
    Case("ceil_times_input", lambda a: onnxnn.ceil(a) * a, [_AWAY_FROM_JUMPS]),
    Case("round_times_input", lambda a: onnxnn.round(a) * a, [_AWAY_FROM_JUMPS]),
    Case("sign_times_input", lambda a: op("Sign", a) * a, [nonzero(2, 3)]),
    Case("pow_tensor_exponent", lambda a, b: a**b, [positive(2, 3), randn(3)]),
    Case("pow_scalar_exponent", lambda a: a**3.0, [randn(4)]),
    Case("pow_fractional_exponent", lambda a: a**0.5, [positive(2, 2)]),
    Case("pow_negative_exponent", lambda a: onnxnn.pow(a, -2), [positive(3)]),
    Case("pow_square_is_mul", lambda a: a**2, [randn(3)]),
    Case("rpow_scalar_base", lambda a: 2.0**a, [randn(3)]),
    Case("pow_zero_dim_base", lambda a, b: a**b, [positive(), randn(2, 2)]),
    Case("pow_zero_exponent_at_zero_base", lambda a: a**0.0, [np.array([0.0, 1.5])]),
    # ---------------------------------------------------------------- unary math
    Case("abs", lambda a: a.abs(), [nonzero(2, 3)]),
    Case("exp", lambda a: a.exp(), [randn(2, 3)]),
    Case("log", lambda a: a.log(), [positive(2, 3)]),
    Case("sqrt", lambda a: a.sqrt(), [positive(2, 3)]),
    Case("rsqrt", lambda a: a.rsqrt(), [positive(4)]),
    Case("reciprocal", lambda a: a.reciprocal(), [nonzero(4)]),
    Case("sin", lambda a: a.sin(), [randn(2, 3)]),
    Case("cos", lambda a: a.cos(), [randn(2, 3)]),
    Case("erf", in_float32(lambda a: a.erf()), [randn(2, 3)], IN_FLOAT32),
    Case("clone_identity", lambda a: a.clone() * a, [randn(3)]),
    # ---------------------------------------------------------------- activations
    Case("relu", lambda a: a.relu(), [nonzero(3, 4)]),
    Case("leaky_relu_default", in_float32(lambda a: onnxnn.leaky_relu(a)), [nonzero(3, 4)], IN_FLOAT32),
    Case("leaky_relu_alpha_0.2", in_float32(lambda a: onnxnn.leaky_relu(a, 0.2)), [nonzero(3, 4)], IN_FLOAT32),
    Case("elu_alpha_1", in_float32(lambda a: op("Elu", a, alpha=1.0)), [nonzero(3, 4)], IN_FLOAT32),
    Case("elu_alpha_0.5", in_float32(lambda a: op("Elu", a, alpha=0.5)), [nonzero(3, 4)], IN_FLOAT32),
    Case("sigmoid", lambda a: a.sigmoid(), [randn(3, 4)]),
    Case("tanh", lambda a: a.tanh(), [randn(3, 4)]),
    Case("softplus", in_float32(lambda a: op("Softplus", a)), [randn(3, 4)], IN_FLOAT32),
    Case("softplus_beta_2", in_float32(lambda a: onnxnn.runtime.ops.softplus(a, beta=2.0)), [randn(3, 4)], IN_FLOAT32),
    Case("gelu_erf", in_float32(lambda a: onnxnn.gelu(a)), [randn(3, 4)], IN_FLOAT32),
    Case("gelu_tanh", lambda a: onnxnn.gelu(a, approximate="tanh"), [randn(3, 4)]),
    # ---------------------------------------------------------------- casts, clamps, selection
    Case(
        "cast_float64_float32_float64",
        lambda a, b: a.to(onnxnn.float32).to(onnxnn.float64) * b,
        [randn(3), randn(3)],
        {"eps": 1e-3, "rtol": 1e-3, "atol": 1e-6},
    ),
    Case("clamp_min_only", lambda a: a.clamp(min=-0.5), [avoiding(randn(3, 4), -0.5)]),
    Case("clamp_max_only", lambda a: a.clamp(max=0.5), [avoiding(randn(3, 4), 0.5)]),
    Case("clamp_both", lambda a: a.clamp(-0.5, 0.5), [avoiding(randn(3, 4), -0.5, 0.5)]),
    Case(
        "clamp_tensor_bounds",
        lambda a, low, high: a.clamp(low, high),
        [np.array([-2.0, -0.2, 0.3, 2.0]), np.array([-1.0]), np.array([0.1, 0.1, 0.5, 1.0])],
    ),
    Case("where_broadcast", lambda a, b: onnxnn.where(constant(_CONDITION), a, b), [randn(4), randn()]),
    Case("where_scalar_other", lambda a: onnxnn.where(a > 0, a, 0.5), [nonzero(2, 3)]),
    Case("maximum_ties", lambda a, b: onnxnn.maximum(a, b), [_TIES_A, _TIES_B]),
    Case("minimum_ties", lambda a, b: onnxnn.minimum(a, b), [_TIES_A, _TIES_B]),
    Case("maximum_broadcast", lambda a, b: onnxnn.maximum(a, b), [randn(3, 1), randn(4)]),
    Case(
        "max_three_inputs_tie", lambda a, b, c: op("Max", a, b, c), [_TIES_A, _TIES_B, np.array([0.0, 0.0, 0.0, -3.0])]
    ),
    Case("min_three_inputs", lambda a, b, c: op("Min", a, b, c), [randn(2, 3), randn(3), randn(2, 1)]),
    # ---------------------------------------------------------------- matrix products
    Case("matmul_2d_2d", lambda a, b: a @ b, [randn(3, 4), randn(4, 2)]),
    Case("matmul_1d_2d", lambda a, b: a @ b, [randn(4), randn(4, 2)]),
    Case("matmul_2d_1d", lambda a, b: a @ b, [randn(3, 4), randn(4)]),
    Case("matmul_1d_1d", lambda a, b: a @ b, [randn(4), randn(4)]),
    Case("matmul_3d_1d", lambda a, b: a @ b, [randn(2, 3, 4), randn(4)]),
    Case("matmul_1d_3d", lambda a, b: a @ b, [randn(3), randn(2, 3, 4)]),
    Case("matmul_batch", lambda a, b: a @ b, [randn(2, 3, 4), randn(2, 4, 2)]),
    Case("matmul_broadcast_batch", lambda a, b: a @ b, [randn(2, 1, 3, 4), randn(5, 4, 2)]),
    Case("matmul_2d_with_batch", lambda a, b: a @ b, [randn(3, 4), randn(2, 4, 5)]),
    Case("matmul_batch_with_2d", lambda a, b: a @ b, [randn(2, 3, 4), randn(4, 5)]),
    Case("matmul_4d_with_2d", lambda a, b: a @ b, [randn(2, 1, 3, 4), randn(4, 2)]),
    Case("gemm_plain", lambda a, b, c: op("Gemm", a, b, c), [randn(3, 4), randn(4, 2), randn(3, 2)]),
    Case("gemm_transA", lambda a, b, c: op("Gemm", a, b, c, transA=1), [randn(4, 3), randn(4, 2), randn(2)]),
    Case(
        "gemm_transB_alpha_beta",
        lambda a, b, c: op("Gemm", a, b, c, transB=1, alpha=0.5, beta=-2.0),
        [randn(3, 4), randn(2, 4), randn(3, 1)],
    ),
    Case(
        "gemm_both_transposed_scalar_c",
        lambda a, b, c: op("Gemm", a, b, c, transA=1, transB=1, alpha=1.5),
        [randn(4, 3), randn(2, 4), randn()],
    ),
    Case("gemm_without_c", lambda a, b: op("Gemm", a, b, transB=1), [randn(3, 4), randn(2, 4)]),
    # ---------------------------------------------------------------- softmax family
    Case("softmax_last", lambda a: a.softmax(-1), [randn(3, 4)]),
    Case("softmax_axis_0", lambda a: a.softmax(0), [randn(3, 4)]),
    Case("softmax_middle_axis_3d", lambda a: onnxnn.softmax(a, 1), [randn(2, 3, 4)]),
    Case("softmax_zero_dim", lambda a: onnxnn.softmax(a, 0) * a, [randn()]),
    Case("log_softmax_last", lambda a: a.log_softmax(-1), [randn(3, 4)]),
    Case("log_softmax_axis_0_3d", lambda a: onnxnn.log_softmax(a, 0), [randn(3, 2, 2)]),
    # ---------------------------------------------------------------- reductions
    Case("sum_all", lambda a: a.sum(), [randn(3, 4)]),
    Case("sum_dim_0", lambda a: a.sum(0), [randn(3, 4)]),
    Case("sum_dims_keepdim", lambda a: a.sum((0, 2), keepdim=True), [randn(2, 3, 4)]),
    Case("sum_negative_dim", lambda a: a.sum(-1), [randn(2, 3, 4)]),
    Case("sum_zero_dim", lambda a: a.sum() * a, [randn()]),
    Case("mean_all", lambda a: a.mean(), [randn(3, 4)]),
    Case("mean_dim_keepdim", lambda a: a.mean(1, keepdim=True), [randn(3, 4)]),
    Case("mean_dims", lambda a: a.mean((-1, 0)), [randn(2, 3, 4)]),
    Case("amax_all", lambda a: a.amax(), [randn(3, 4)]),
    Case("max_dim_values", lambda a: a.max(1).values, [randn(3, 4)]),
    Case("max_dim_keepdim", lambda a: a.max(0, keepdim=True)[0], [randn(3, 4)]),
    Case("max_full_two_way_tie", lambda a: a.max(), [np.array([[1.0, 3.0], [3.0, -2.0]])]),
    Case("amin_dims", lambda a: a.amin((0, 2)), [randn(2, 3, 4)]),
    Case("min_dim_values", lambda a: a.min(-1).values, [randn(3, 4)]),
    Case("prod_all", lambda a: a.prod(), [nonzero(2, 3)]),
    Case("prod_dim_keepdim", lambda a: a.prod(1, keepdim=True), [nonzero(2, 3)]),
    Case("prod_with_one_zero", lambda a: a.prod(1), [np.array([[0.0, 2.0, -3.0], [1.5, 0.5, 2.0]])]),
    Case("prod_with_two_zeros", lambda a: a.prod(), [np.array([0.0, 2.0, 0.0, 1.5])]),
    Case("var_dim", lambda a: a.var(1), [randn(3, 4)]),
    Case("std_all", lambda a: a.std(), [randn(3, 4)]),
    Case("norm_dim", lambda a: a.norm(dim=1), [randn(3, 4)]),
    Case("norm_zero_row_has_zero_gradient", lambda a: a.norm(dim=1), [np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]])]),
    Case("norm_p3_keepdim", lambda a: a.norm(3, dim=0, keepdim=True), [nonzero(3, 2)]),
    Case("logsumexp_dim", lambda a: a.logsumexp(1), [randn(3, 4)]),
    Case("reduce_l2_all", lambda a: op("ReduceL2", a, keepdims=0), [randn(3, 4)]),
    Case("reduce_l2_axes", lambda a: op("ReduceL2", a, int64_constant([1])), [randn(3, 4)]),
    Case(
        "reduce_sum_square_axes",
        lambda a: op("ReduceSumSquare", a, int64_constant([0, 2]), keepdims=0),
        [randn(2, 3, 4)],
    ),
    Case("reduce_sum_square_all", lambda a: op("ReduceSumSquare", a), [randn(3, 4)]),
    Case(
        "reduce_log_sum_exp_axes", lambda a: op("ReduceLogSumExp", a, int64_constant([-1]), keepdims=0), [randn(3, 4)]
    ),
    Case("reduce_log_sum_exp_all", lambda a: op("ReduceLogSumExp", a), [randn(2, 3)]),
    # ---------------------------------------------------------------- shapes
    Case("reshape_inferred", lambda a: a.reshape(2, -1) * 1.0, [randn(3, 4)]),
    Case("view_3d", lambda a: a.view(2, 3, 2), [randn(3, 4)]),
    Case("flatten_method", lambda a: a.flatten(1), [randn(2, 3, 4)]),
    Case("flatten_op_axis_2", lambda a: op("Flatten", a, axis=2), [randn(2, 3, 4)]),
    Case("flatten_op_axis_0", lambda a: op("Flatten", a, axis=0), [randn(2, 3)]),
    Case("squeeze_all", lambda a: a.squeeze(), [randn(3, 1, 4, 1)]),
    Case("squeeze_dim", lambda a: a.squeeze(-1), [randn(3, 1, 4, 1)]),
    Case("unsqueeze", lambda a: a.unsqueeze(1), [randn(3, 4)]),
    Case("unsqueeze_negative", lambda a: a.unsqueeze(-1), [randn(3, 4)]),
    Case("transpose_perm_201", lambda a: a.permute(2, 0, 1), [randn(2, 3, 4)]),
    Case("transpose_dims", lambda a: a.transpose(0, 2), [randn(2, 3, 4)]),
    Case("transpose_T", lambda a: a.T, [randn(2, 3, 4)]),
    Case("transpose_mT", lambda a: a.mT, [randn(2, 3, 4)]),
    Case("expand_leading", lambda a: a.expand(2, 3, 4), [randn(3, 1)]),
    Case("expand_minus_one", lambda a: a.expand(-1, 5), [randn(3, 1)]),
    Case("tile_same_rank", lambda a: a.tile((2, 3)), [randn(2, 3)]),
    Case("repeat_more_dims", lambda a: a.repeat(2, 1, 2), [randn(2, 3)]),
    Case("cat_dim_0", lambda a, b: onnxnn.cat([a, b]), [randn(2, 3), randn(1, 3)]),
    Case("cat_dim_last_three", lambda a, b, c: onnxnn.cat([a, b, c], -1), [randn(2, 1), randn(2, 3), randn(2, 2)]),
    Case("cat_same_tensor_twice", lambda a: onnxnn.cat([a, a * 2.0], 1), [randn(2, 2)]),
    Case("stack_dim_1", lambda a, b: onnxnn.stack([a, b], 1), [randn(2, 3), randn(2, 3)]),
    Case(
        "split_sizes", lambda a: onnxnn.cat([p * (i + 1.0) for i, p in enumerate(a.split([1, 3], 1))], 1), [randn(2, 4)]
    ),
    Case("split_only_one_part_used", lambda a: a.split(2, 0)[1], [randn(5, 2)]),
    Case("chunk_dim_last", lambda a: a.chunk(3, -1)[2] * a.chunk(3, -1)[0], [randn(2, 6)]),
    Case("unbind", lambda a: a.unbind(1)[0] - a.unbind(1)[2], [randn(2, 3)]),
    Case("narrow", lambda a: a.narrow(1, 1, 2), [randn(3, 4)]),
    Case("slice_step_2", lambda a: slice_axis(a, 1, 0, 5, 2), [randn(2, 5)]),
    Case("slice_negative_bounds", lambda a: slice_axis(a, 0, -3, -1), [randn(5, 2)]),
    Case("slice_negative_step", lambda a: slice_axis(a, 0, -1, -6, -2), [randn(5, 2)]),
    Case(
        "slice_op_two_axes",
        lambda a: op(
            "Slice", a, int64_constant([1, 3]), int64_constant([3, 0]), int64_constant([0, -1]), int64_constant([1, -1])
        ),
        [randn(4, 5)],
    ),
    Case("flip", lambda a: a.flip((0, 1)), [randn(2, 3)]),
    Case("pad_constant", lambda a: pad_constant(a, [1, 0, 2, 3], 0.5), [randn(2, 3)]),
    Case("pad_op_with_axes", lambda a: op("Pad", a, int64_constant([2, 1]), None, int64_constant([-1])), [randn(2, 3)]),
    Case("pad_negative_crops", lambda a: pad_constant(a, [-1, 1, 0, -2]), [randn(3, 4)]),
    # Non-constant modes (imported models and F.pad record them): borders wider than half the axis,
    # so that reflected and wrapped borders overlap in the input they fold back onto.
    *[
        Case(
            f"pad_{mode}_{name}",
            lambda a, mode=mode, pads=pads, axes=axes: op(
                "Pad", a, int64_constant(pads), None, None if axes is None else int64_constant(axes), mode=mode
            ),
            [randn(3, 4, 5)],
        )
        for mode in ("reflect", "edge", "wrap")
        for name, pads, axes in (
            ("all_axes", [0, 2, 3, 0, 3, 1], None),
            ("one_axis_with_axes", [1, 3], [1]),
            ("two_axes", [2, 1, 1, 2], [-1, 0]),
        )
    ],
    # ---------------------------------------------------------------- ops only imported models record
    # Trigonometric and hyperbolic functions: each in float64 (onnxruntime lacks float64 Tan, Asin,
    # Acos, Acosh, Atanh: "auto" runs those on the kernels) and on float32 casts for both executors.
    # Asin, Acos and Atanh stay within |x| <= 0.7: the float32 cases' finite-difference step (1e-2)
    # has a truncation error f'''(x) eps^2 / 6 under 3e-4 of f'(x) there (at 0.9 it reaches rtol).
    *[
        Case(f"{op_type.lower()}{suffix}", wrap(lambda a, op_type=op_type: op(op_type, a)), [values], options)
        for op_type, values in [
            ("Tan", uniform(-1.2, 1.2, 2, 3)),
            ("Asin", uniform(-0.7, 0.7, 2, 3)),
            ("Acos", uniform(-0.7, 0.7, 2, 3)),
            ("Atan", randn(2, 3)),
            ("Sinh", randn(2, 3)),
            ("Cosh", randn(2, 3)),
            ("Asinh", randn(2, 3)),
            ("Acosh", uniform(1.2, 3.0, 2, 3)),
            ("Atanh", uniform(-0.7, 0.7, 2, 3)),
        ]
        for suffix, wrap, options in [("", lambda f: f, {}), ("_float32", in_float32, IN_FLOAT32)]
    ],
    Case(
        "fmod_broadcast",
        lambda a, b: op("Mod", a, b, fmod=1),
        [np.array([[5.3, -5.3, 2.2], [-0.7, 7.9, -3.1]]), np.array([2.0, 1.5, -0.9])],
    ),
    Case("reduce_l1_axes", lambda a: op("ReduceL1", a, int64_constant([1]), keepdims=0), [nonzero(3, 4)]),
    Case("reduce_l1_all", lambda a: op("ReduceL1", a), [nonzero(2, 3)]),
    Case("reduce_log_sum_axes", lambda a: op("ReduceLogSum", a, int64_constant([0, 2])), [positive(2, 3, 2)]),
    Case("reduce_log_sum_all", lambda a: op("ReduceLogSum", a, keepdims=0), [positive(3, 2)]),
    Case("global_lp_pool_p2", in_float32(lambda a: op("GlobalLpPool", a)), [nonzero(2, 3, 2, 2)], IN_FLOAT32),
    Case("global_lp_pool_p3", in_float32(lambda a: op("GlobalLpPool", a, p=3)), [nonzero(1, 2, 3)], IN_FLOAT32),
    Case("global_lp_pool_p2_float64", lambda a: op("GlobalLpPool", a), [nonzero(1, 2, 2, 2)]),
    Case("cumsum_axis_1", lambda a: op("CumSum", a, int64_constant(1)), [randn(3, 4)]),
    Case(
        "cumsum_exclusive_reverse", lambda a: op("CumSum", a, int64_constant(-2), exclusive=1, reverse=1), [randn(4, 3)]
    ),
    Case("cumsum_reverse", lambda a: op("CumSum", a, int64_constant(0), reverse=1), [randn(5)]),
    Case("topk_largest_last_axis", lambda a: op("TopK", a, int64_constant([2]))[0], [distinct(3, 5)]),
    Case("topk_smallest_axis_0", lambda a: op("TopK", a, int64_constant([3]), axis=0, largest=0)[0], [distinct(4, 2)]),
    Case("compress_axis_1", lambda a: op("Compress", a, constant([True, False, True, True]), axis=1), [randn(2, 4)]),
    Case(
        "compress_short_condition_axis_0", lambda a: op("Compress", a, constant([False, True]), axis=0), [randn(3, 2)]
    ),
    Case("compress_flattened", lambda a: op("Compress", a, constant([True, False, False, True, True])), [randn(2, 3)]),
    Case("trilu_upper_k1", lambda a: op("Trilu", a, int64_constant(1)), [randn(3, 4)]),
    Case("trilu_lower_batched", lambda a: op("Trilu", a, upper=0), [randn(2, 3, 3)]),
    Case("reverse_sequence_time_major", lambda a: op("ReverseSequence", a, constant([4, 1, 2])), [randn(4, 3, 2)]),
    Case(
        "reverse_sequence_batch_major",
        lambda a: op("ReverseSequence", a, constant([1, 3]), batch_axis=0, time_axis=1),
        [randn(2, 3)],
    ),
    Case("depth_to_space_dcr", lambda a: op("DepthToSpace", a, blocksize=2), [randn(1, 8, 2, 3)]),
    Case("depth_to_space_crd", lambda a: op("DepthToSpace", a, blocksize=2, mode="CRD"), [randn(2, 4, 2, 1)]),
    Case("space_to_depth", lambda a: op("SpaceToDepth", a, blocksize=2), [randn(1, 2, 4, 2)]),
    Case(
        "range_float_bounds",
        lambda start, delta: op("Range", start, constant(np.array(2.0)), delta),
        [np.array(-1.0), np.array(0.4)],
    ),
    Case(
        "one_hot_values",
        lambda values: op("OneHot", constant([[1, 0], [2, -1]]), constant(np.array(3)), values),
        [np.array([-0.5, 2.0])],
    ),
    Case(
        "one_hot_values_float32",
        in_float32(lambda values: op("OneHot", constant([[0, 2, 1]]), constant(np.array(4)), values, axis=0)),
        [np.array([0.25, -1.5])],
        IN_FLOAT32,
    ),
    Case("einsum_matmul", lambda a, b: op("Einsum", a, b, equation="ij,jk->ik"), [randn(3, 4), randn(4, 2)]),
    Case(
        "einsum_batch_ellipsis",
        lambda a, b: op("Einsum", a, b, equation="...ij,...jk->...ik"),
        [randn(2, 3, 4), randn(2, 4, 2)],
    ),
    Case("einsum_implicit_output", lambda a, b: op("Einsum", a, b, equation="ij,jk"), [randn(2, 3), randn(3, 4)]),
    Case("einsum_summed_within_operand", lambda a, b: op("Einsum", a, b, equation="ij,k->jk"), [randn(3, 2), randn(4)]),
    Case(
        "einsum_three_operands_same_input",
        lambda a, b: op("Einsum", a, b, a, equation="ab,bc,ad->cd"),
        [randn(2, 3), randn(3, 2)],
    ),
    # A subscript repeated within one operand reads a diagonal: the gradient is zero off it.
    Case("einsum_diagonal", lambda a: op("Einsum", a, equation="ii->i"), [randn(3, 3)]),
    Case("einsum_trace_of_each", lambda a: op("Einsum", a, equation="bjjj->b"), [randn(2, 3, 3, 3)]),
    Case(
        "einsum_diagonals_of_two_operands",
        lambda a, b: op("Einsum", a, b, equation="iij,jkj->ik"),
        [randn(3, 3, 2), randn(2, 4, 2)],
    ),
    Case(
        "einsum_float32",
        in_float32(lambda a, b: op("Einsum", a, b, equation="bij,bkj->bik")),
        [randn(2, 2, 3), randn(2, 4, 3)],
        IN_FLOAT32,
    ),
    # DequantizeLinear: only the scale is float (onnxruntime's scale types stop at float32).
    Case(
        "dequantize_per_tensor",
        lambda scale: op("DequantizeLinear", constant(_QUANTIZED), scale.float(), constant(np.int8(-3))),
        [np.array(0.05)],
        IN_FLOAT32,
    ),
    Case(
        "dequantize_per_axis",
        lambda scale: op(
            "DequantizeLinear",
            constant(_QUANTIZED),
            scale.float(),
            constant(np.array([1, 0, -2], dtype=np.int8)),
            axis=1,
        ),
        [np.array([0.1, 0.02, 0.3])],
        IN_FLOAT32,
    ),
    Case(
        "dequantize_blocked",
        lambda scale: op("DequantizeLinear", constant(_QUANTIZED.T), scale.float(), axis=1, block_size=2),
        [np.array([[0.1, 0.2], [0.3, 0.05], [0.2, 0.4]])],
        IN_FLOAT32,
    ),
    # DFT: real and complex signals, inverse, onesided, dft_length padding and cutting the signal.
    Case("dft_real_axis_1", lambda a: op("DFT", a, None, int64_constant(1)), [randn(2, 5, 1)]),
    Case("dft_complex_default_axis", lambda a: op("DFT", a), [randn(2, 4, 2)]),
    Case("dft_inverse_complex", lambda a: op("DFT", a, None, int64_constant(-2), inverse=1), [randn(3, 2)]),
    Case("dft_onesided_real_odd", lambda a: op("DFT", a, None, int64_constant(0), onesided=1), [randn(5, 2, 1)]),
    Case("dft_onesided_real_even", lambda a: op("DFT", a, None, int64_constant(1), onesided=1), [randn(2, 6, 1)]),
    Case("dft_length_pads", lambda a: op("DFT", a, int64_constant(6), int64_constant(1)), [randn(1, 4, 2)]),
    Case(
        "dft_length_cuts_inverse",
        lambda a: op("DFT", a, int64_constant(3), int64_constant(1), inverse=1),
        [randn(2, 5, 1)],
    ),
    Case(
        "dft_float32_onesided",
        in_float32(lambda a: op("DFT", a, int64_constant(4), int64_constant(1), onesided=1)),
        [randn(2, 6, 1)],
        IN_FLOAT32,
    ),
    Case(
        "dft_inverse_onesided_default_length",
        lambda a: op("DFT", a, None, int64_constant(1), inverse=1, onesided=1),
        [randn(2, 4, 2)],
    ),
    Case(
        "dft_inverse_onesided_odd_length",
        lambda a: op("DFT", a, int64_constant(7), int64_constant(1), inverse=1, onesided=1),
        [randn(2, 4, 2)],
    ),
    Case(
        "dft_inverse_onesided_length_pads_bins",
        lambda a: op("DFT", a, int64_constant(10), int64_constant(0), inverse=1, onesided=1),
        [randn(4, 3, 2)],
    ),
    Case(
        "dft_inverse_onesided_length_cuts_bins",
        lambda a: op("DFT", a, int64_constant(4), int64_constant(1), inverse=1, onesided=1),
        [randn(1, 5, 2)],
    ),
    Case("det_3x3", lambda a: op("Det", a), [randn(3, 3)]),
    Case("det_batched_2x2", lambda a: op("Det", a), [randn(2, 2, 2)]),
    Case("det_1x1", lambda a: op("Det", a), [randn(1, 1)]),
    Case("det_singular", lambda a: op("Det", a), [np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.5, -1.0, 2.0]])]),
    Case("det_float32", in_float32(lambda a: op("Det", a)), [randn(2, 3, 3)], IN_FLOAT32),
    # ---------------------------------------------------------------- neural-network ops
    Case(
        "batch_norm_inference_4d",
        lambda x, scale, bias, mean, var: op("BatchNormalization", x, scale, bias, mean, var, epsilon=1e-3),
        [randn(2, 3, 2, 2), randn(3), randn(3), randn(3), positive(3)],
    ),
    Case(
        "batch_norm_inference_2d",
        lambda x, scale, bias, mean, var: op("BatchNormalization", x, scale, bias, mean, var),
        [randn(4, 3), randn(3), randn(3), randn(3), positive(3)],
    ),
]
