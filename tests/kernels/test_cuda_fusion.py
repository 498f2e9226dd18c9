"""Elementwise fusion on CUDA (kernels/cuda_fusion.py): which nodes fuse, and that a fused kernel
computes what the nodes' own kernels compute.

The grouping cases read only a plan's wiring and run everywhere. The kernel cases generate and run
CUDA code through CuPy: they run on a machine with a GPU and CuPy, and are skipped elsewhere with
the reason.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.domains import ONNXNN_DOMAIN
from onnxnn.ir.plan import plan as _plan
from onnxnn.kernels import CompiledKernelPlan, array_module
from onnxnn.kernels.executor import compile_shared
from onnxnn.kernels.cuda_fusion import EXPRESSIONS, FusedElementwise, NodeView, fusion_groups
from onnxnn.ir.graph import static_constant
from onnxnn.runtime.tensor import Tensor, apply_op

from tolerances import TRANSCENDENTAL_ULPS, ulps

from .differential_cases import make

F32, F64, F16, BOOL = (np.dtype(name) for name in ("float32", "float64", "float16", "bool"))


def step(op_type, inputs, output, dtype=F32, input_dtypes=None, domain="", outputs=None):
    """A NodeView: inputs and output are slots; every input has ``dtype`` unless ``input_dtypes`` says."""
    input_dtypes = input_dtypes or tuple(dtype for _ in inputs)
    output_slots = (output,) if outputs is None else outputs
    return NodeView(domain, op_type, {}, tuple(inputs), tuple(input_dtypes), output_slots, (dtype,) * len(output_slots))


# Slots 1 and 2 are fed inputs; each case lists its steps, the slots the plan returns, and the groups.
GROUPING_CASES = {
    "a chain fuses whole": ([step("Mul", (1, 2), 3), step("Add", (3, 1), 4), step("Tanh", (4,), 5)], {5}, [[0, 1, 2]]),
    "a value read twice inside the group": (
        [step("Mul", (1, 2), 3), step("Add", (3, 1), 4), step("Sub", (3, 4), 5)],
        {5},
        [[0, 1, 2]],
    ),
    "a value the plan returns stays out": ([step("Mul", (1, 2), 3), step("Add", (3, 1), 4)], {3, 4}, []),
    "a value another group reads stays out": (
        [step("Mul", (1, 2), 3), step("Exp", (3,), 4), step("Add", (4, 1), 5), step("Neg", (3,), 6)],
        {5, 6},
        [[1, 2]],
    ),
    "a non-elementwise node splits the chain": (
        [
            step("Mul", (1, 2), 3),
            step("Add", (3, 1), 4),
            step("MatMul", (4, 2), 5),
            step("Add", (5, 1), 6),
            step("Exp", (6,), 7),
        ],
        {7},
        [[0, 1], [3, 4]],
    ),
    "float16 rounds per node: no fusion": ([step("Mul", (1, 2), 3, F16), step("Add", (3, 1), 4, F16)], {4}, []),
    "mixed float types: no fusion": ([step("Add", (1, 2), 3, F64, (F32, F64)), step("Exp", (3,), 4, F64)], {4}, []),
    "one plain node: no kernel of its own": ([step("Add", (1, 2), 3)], {3}, []),
    "one node whose kernel makes several passes": ([step("Sigmoid", (1,), 3)], {3}, [[0]]),
    "a comparison feeding Where": (
        [step("Less", (1, 2), 3, BOOL, (F32, F32)), step("Where", (3, 1, 2), 4, F32, (BOOL, F32, F32))],
        {4},
        [[0, 1]],
    ),
    "a Cast between float types": (
        [step("Cast", (1,), 3, F64, (F32,)), step("Mul", (3, 3), 4, F64)],
        {4},
        [[0, 1]],
    ),
    "a node with two outputs read stays out": (
        [step("Add", (1, 2), 3), step("Split", (3,), None, outputs=(4, 5)), step("Add", (4, 5), 6)],
        {6},
        [],
    ),
    "an onnxnn gradient node": (
        [step("Add", (1, 2), 3), step("ReluGradient", (3, 1), 4, domain=ONNXNN_DOMAIN)],
        {4},
        [[0, 1]],
    ),
}


@pytest.mark.parametrize("steps,kept,groups", GROUPING_CASES.values(), ids=GROUPING_CASES.keys())
def test_fusion_groups(steps, kept, groups):
    assert fusion_groups(steps, kept) == groups


# ---------------------------------------------------------------- generated kernels, on a GPU


@pytest.fixture(scope="module")
def cupy():
    try:
        return array_module("cuda")
    except RuntimeError as error:
        pytest.skip(f"generated CUDA kernels need CuPy and a GPU: {error}")


def _unary(op_type, **attrs):
    return lambda a, b, c: apply_op(op_type, (a + b,), attrs)


def _binary(op_type, **attrs):
    return lambda a, b, c: apply_op(op_type, (a + b, c), attrs)


def _gradient(op_type):
    return lambda a, b, c: apply_op(op_type, (a * c, a + b), domain=ONNXNN_DOMAIN)


def _unit(op_type):
    """Asin, Acos, Atanh: arguments mostly inside (-1, 1)."""
    return lambda a, b, c: apply_op(op_type, ((a + b) * 0.15,))


def _bounds(like, low, high):
    return tuple(onnxnn.tensor(value, dtype=like.dtype) for value in (low, high))


# op: how a small graph uses it, fed a (4, 33), b (1, 33) (broadcast) and c (33,).
OP_CASES = {
    **{
        op: _unary(op)
        for op in (
            "Exp Log Sqrt Sin Cos Tan Atan Sinh Cosh Asinh Acosh Tanh Floor Ceil Round Abs Erf "
            "Neg Reciprocal Sign Relu Sigmoid Softplus Mish Softsign Identity"
        ).split()
    },
    **{op: _binary(op) for op in "Add Sub Mul Div Pow PRelu".split()},
    **{
        op: (lambda op: lambda a, b, c: apply_op(op, (a + b, c)))(op)
        for op in "Equal Less Greater LessOrEqual GreaterOrEqual".split()
    },
    **{op: (lambda op: lambda a, b, c: apply_op(op, (a < b, b < c)))(op) for op in "And Or Xor".split()},
    **{op: _unit(op) for op in "Asin Acos Atanh".split()},
    "Not": lambda a, b, c: apply_op("Not", (a < b,)),
    "Where": lambda a, b, c: apply_op("Where", (a < c, a + b, c)),
    "Max": lambda a, b, c: apply_op("Max", (a + b, c, a)),
    "Min": lambda a, b, c: apply_op("Min", (a + b, c, a)),
    "Sum": lambda a, b, c: apply_op("Sum", (a + b, c, a)),
    "Mean": lambda a, b, c: apply_op("Mean", (a + b, c, a)),
    "LeakyRelu": _unary("LeakyRelu", alpha=0.2),
    "Elu": _unary("Elu", alpha=0.7),
    "ThresholdedRelu": _unary("ThresholdedRelu", alpha=0.5),
    "Clip": lambda a, b, c: apply_op("Clip", (a + b, *_bounds(a, -1.5, 1.0))),
    "Cast": lambda a, b, c: apply_op("Cast", (a + b,), {"to": 11}) * 3,
    "Hardtanh": lambda a, b, c: apply_op("Hardtanh", (a + b, *_bounds(a, -1.0, 2.0)), domain=ONNXNN_DOMAIN),
    "ReluGradient": _gradient("ReluGradient"),
    "HardtanhGradient": lambda a, b, c: apply_op(
        "HardtanhGradient", (a * c, a + b, *_bounds(a, -1.0, 2.0)), domain=ONNXNN_DOMAIN
    ),
    "AbsGradient": _gradient("AbsGradient"),
}


def test_every_fusible_op_has_a_case():
    assert {op_type for _, op_type in EXPRESSIONS} == set(OP_CASES)


def _assert_same_values(actual: np.ndarray, expected: np.ndarray, dtype) -> None:
    """Equal where the values are bools, NaN or infinite; elsewhere within the few ulps CUDA's and
    libm's transcendental functions may each be off by (tolerances.TRANSCENDENTAL_ULPS)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype == BOOL:
        np.testing.assert_array_equal(actual, expected)
        return
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(actual[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
    bound = ulps(expected[finite], TRANSCENDENTAL_ULPS, dtype)
    error = np.abs(actual[finite].astype(np.float64) - expected[finite])
    assert np.all(error <= bound), f"worst error {error.max():.3g} ulps bound {bound[np.argmax(error - bound)]:.3g}"


def _compiled_pair(cupy, outputs):
    plan = _plan([tensor._value for tensor in outputs])
    inputs = [value.data for value in plan.inputs]
    return plan, inputs, CompiledKernelPlan(plan), CompiledKernelPlan(plan, cupy)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type", sorted(OP_CASES))
def test_a_fused_op_computes_what_its_kernel_computes(cupy, op_type, dtype):
    a, b, c = make((4, 33), dtype, seed=1), make((1, 33), dtype, seed=2), make((33,), dtype, seed=3)
    plan, inputs, on_numpy, on_cupy = _compiled_pair(cupy, [OP_CASES[op_type](a, b, c)])
    assert len(on_cupy.steps) == 1 and isinstance(on_cupy.steps[0][0], FusedElementwise), on_cupy.step_descriptions
    assert len(on_cupy.node_steps) == len(plan.nodes) > 1
    (expected,), (actual,) = on_numpy(inputs), on_cupy(inputs)
    assert isinstance(actual, cupy.ndarray)
    _assert_same_values(cupy.asnumpy(actual), expected, dtype)


def test_size_one_constants_of_the_plan_become_literals_and_keep_their_broadcast(cupy):
    x = make((5, 7), seed=4)
    one = Tensor._from_value(static_constant(np.ones((1, 1, 1), np.float32), onnxnn.float32))
    y = ((x * 2 + one).tanh() * 0.5).relu()  # the Python scalars are fed: a new one reuses the plan
    plan, inputs, on_numpy, on_cupy = _compiled_pair(cupy, [y])
    (fused,) = on_cupy.steps
    assert len(fused[2]) == len(plan.inputs) == 3  # x, 2 and 0.5; the (1, 1, 1) one is in the source
    (actual,), (expected,) = on_cupy(inputs), on_numpy(inputs)
    assert actual.shape == expected.shape == (1, 5, 7)
    _assert_same_values(cupy.asnumpy(actual), expected, "float32")


def test_values_read_outside_a_group_and_plan_outputs_stay_correct(cupy):
    x, y = make((6, 9), seed=5), make((6, 9), seed=6)
    product = x * y
    shifted = product + 1
    outputs = [shifted.exp() * x, product.sum(1), shifted]
    plan, inputs, on_numpy, on_cupy = _compiled_pair(cupy, outputs)
    assert any(isinstance(step[0], FusedElementwise) for step in on_cupy.steps)
    for actual, expected in zip(on_cupy(inputs), on_numpy(inputs)):
        _assert_same_values(cupy.asnumpy(actual), expected, "float32")


def test_strided_and_empty_inputs(cupy):
    x = make((7, 5), seed=7)
    for outputs in ([(x.T * 2 + make((5, 7), seed=8)).sigmoid()], [(make((0, 3)) * 3 + 1).exp()]):
        plan, inputs, on_numpy, on_cupy = _compiled_pair(cupy, outputs)
        _assert_same_values(cupy.asnumpy(on_cupy(inputs)[0]), on_numpy(inputs)[0], "float32")


def test_a_plan_for_every_size_computes_each_call_s_shape(cupy):
    x, y = make((3, 8), seed=9), make((8,), seed=10)
    plan = _plan([((x * y + 1).exp() - x).relu()._value])
    shared = compile_shared(plan, cupy)
    assert any(isinstance(step[0], FusedElementwise) for step in shared.steps)
    for rows in (3, 11):
        a, b = (np.random.default_rng(rows).uniform(-2, 2, shape).astype(np.float32) for shape in [(rows, 8), (8,)])
        inputs = [a, b, *(value.data for value in plan.inputs[2:])]  # then the fed scalar 1
        expected = np.maximum(np.exp(a * b + 1) - a, 0)
        _assert_same_values(cupy.asnumpy(shared(inputs)[0]), expected, "float32")


def test_debug_runs_and_traces_go_node_by_node(cupy):
    x = make((4, 4), seed=11)
    plan, inputs, on_numpy, on_cupy = _compiled_pair(cupy, [(x * 3 - 1).sigmoid()])
    seen = []
    (traced,) = on_cupy(inputs, trace=lambda description, *_: seen.append(description))
    assert len(seen) == len(plan.nodes) == 3 and len(on_cupy.steps) == 1
    _assert_same_values(cupy.asnumpy(traced), on_numpy(inputs)[0], "float32")
    _assert_same_values(cupy.asnumpy(on_cupy(inputs, debug=True)[0]), on_numpy(inputs)[0], "float32")


def test_fusion_can_be_turned_off(cupy):
    x = make((4, 4), seed=12)
    plan = _plan([(x * 3 - 1).sigmoid()._value])
    plain = CompiledKernelPlan(plan, cupy, fuse_elementwise=False)
    assert plain.steps is plain.node_steps and len(plain.steps) == 3
