"""The kernels executor: agreement with onnxruntime, errors, the compiled-plan cache, debug mode.

The differential table (differential_cases.py and differential_layer_cases.py) records graphs, runs them through
``run_plan(_plan(...))`` and through onnxruntime (``tensor.numpy()``), and requires the same
dtypes and shapes, equal values for integer and boolean results and per-dtype tolerances for
floating-point ones. The official ONNX node tests are in test_onnx_node_tests.py.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

import onnxnn
from onnxnn.kernels import CompiledKernelPlan, array_module, cache_info, cached_plan, clear_cache, kernels, run_plan
from onnxnn.ir.plan import plan as _plan
from onnxnn.ir.registry import shape_rules
from onnxnn.runtime.tensor import Tensor, apply_op

from tolerances import TRANSCENDENTAL_ULPS, accumulation_bound, assert_within, gamma, matmul_bound, sum_bound, ulps

from .differential_cases import make
from .differential_layer_cases import CASES

# Tolerances against onnxruntime for ops that do not just sum products: float16/bfloat16 round
# every op, and onnxruntime's fused or approximated kernels (Erf, Gelu, Softmax) differ from exact
# float32 math by a few ulps. The rtols are 2 * gamma(n) for n ~ 160 roundings per element
# relative to the result (float32: 2e-5 / 6e-8 = 335 u; float64: 1e-10 leaves room for 4e5
# roundings; float16: 5e-3 = 10 u; bfloat16: 3e-2 = 8 u), a budget the single ops and the
# small graphs here (at most ~24 accumulated terms plus a handful of ulp-accurate functions)
# stay well inside; the atols stand in for the same budget near zero, at these inputs' O(1) scale.
TOLERANCES = {
    "float64": (1e-10, 1e-12),
    "float32": (2e-5, 2e-6),
    "float16": (5e-3, 5e-3),
    "bfloat16": (3e-2, 3e-2),
}

# Ops whose outputs are sums of products of their float inputs with nonnegative coefficients:
# running the same plan on |inputs| gives each output's sum of |terms| (Higham's magnitude),
# and the inputs' element count bounds the terms accumulated, so these get the accumulation
# bound rather than a per-dtype constant. Cancellation in them is common (inputs of both signs).
MULTILINEAR = {
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceSum",
    "ReduceMean",
    "ReduceL1",
    "ReduceSumSquare",
}

_RECORDABLE = [case for case in CASES if ("", case.op_type) in shape_rules]


def _outputs(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


def _assert_matches(actual: np.ndarray, expected: np.ndarray, dtype_name: str, bound=None) -> None:
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    tolerance = TOLERANCES.get(dtype_name) if expected.dtype.kind in "fV" else None
    if tolerance is None:
        np.testing.assert_array_equal(actual, expected)
    elif bound is not None:
        assert_within(actual, expected, bound)
    else:
        rtol, atol = tolerance
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    "case,dtype",
    [pytest.param(case, dtype, id=f"{case.name}-{dtype}") for case in _RECORDABLE for dtype in case.dtypes],
)
def test_kernels_agree_with_onnxruntime(case, dtype):
    outputs = _outputs(case.build(dtype))
    plan = _plan([tensor._value for tensor in outputs])
    bounds = [None] * len(outputs)
    if case.op_type in MULTILINEAR and dtype in ("float32", "float64") and len(plan.nodes) == 1:
        bounds = _multilinear_bounds(plan, dtype)[: len(outputs)]
    ours = run_plan(plan)[: len(outputs)]
    with onnxnn.set_executor("onnxruntime"):  # "auto" would give a small graph to the kernels themselves
        references = [tensor.numpy() for tensor in outputs]
    for mine, reference, bound in zip(ours, references, bounds):
        _assert_matches(mine, reference, reference.dtype.name if reference.dtype.kind == "f" else dtype, bound)


def _accumulated_terms(node, output_shape) -> int:
    """Terms summed into one output element of a multilinear node, plus one for a bias or a division."""
    shapes = [tuple(value.shape) for value in node.inputs if value is not None]
    op, attrs = node.op_type, node.attrs or {}
    if op == "MatMul":
        return shapes[0][-1]
    if op == "Gemm":
        return shapes[0][0 if attrs.get("transA") else -1] + 1
    if op == "Conv":
        return math.prod(shapes[1][1:]) + 1
    if op == "ConvTranspose":
        return shapes[1][0] // attrs.get("group", 1) * math.prod(shapes[1][2:]) + 1
    if op == "AveragePool":
        return math.prod(attrs["kernel_shape"]) + 1
    if op == "GlobalAveragePool":
        return math.prod(shapes[0][2:]) + 1
    return max(math.prod(shapes[0]) // max(math.prod(output_shape), 1), 1) + 1  # Reduce*: squares round once


def _multilinear_bounds(plan, dtype: str) -> list:
    """Accumulation bounds of a one-node multilinear plan: the magnitudes from the plan run on |inputs|."""
    absolute = [np.abs(value.data) if value.data.dtype.kind == "f" else value.data for value in plan.inputs]
    magnitudes = CompiledKernelPlan(plan)(absolute)
    bounds = []
    for magnitude in magnitudes:
        terms = _accumulated_terms(plan.nodes[0], magnitude.shape)
        # Computed in the dtype itself, the magnitudes are low by at most gamma(terms): scaled back up.
        bounds.append(accumulation_bound(magnitude * (1 + 2 * gamma(terms, dtype)), terms, dtype))
    return bounds


def test_every_recordable_op_has_a_kernel():
    # Fails when an op family gains a shape rule before the kernels executor can run it.
    assert sorted(op for op in shape_rules.op_types() if ("", op) not in kernels) == []


def test_every_recordable_op_has_a_differential_case():
    assert sorted(set(shape_rules.op_types()) - {case.op_type for case in CASES}) == []


# ---------------------------------------------------------------- semantics worth pinning by value


@pytest.mark.parametrize(
    "op_type,a,b,expected",
    [
        ("Div", [7, -7, 7, -7], [2, 2, -2, -2], [3, -3, -3, 3]),
        ("Mod", [7, -7, 7, -7], [3, 3, -3, -3], [1, 2, -2, -1]),
    ],
)
def test_integer_division_semantics(op_type, a, b, expected):
    result = apply_op(
        op_type,
        (Tensor._from_array(np.array(a)), Tensor._from_array(np.array(b))),
        {"fmod": 0} if op_type == "Mod" else None,
    )
    np.testing.assert_array_equal(run_plan(_plan([result._value]))[0], expected)


def test_erf_is_float64_accurate():
    import math

    values = np.linspace(-7, 7, 2001)
    result = apply_op("Erf", (Tensor._from_array(values),))
    expected = np.array([math.erf(v) for v in values])
    # math.erf is accurate to about an ulp; the kernel's own approximation must stay within a
    # few float64 ulps (the documented budget for ulp-accurate functions; atol: erf near 0 ~ x).
    assert_within(
        run_plan(_plan([result._value]))[0],
        expected,
        ulps(expected, TRANSCENDENTAL_ULPS, np.float64) + ulps(values, TRANSCENDENTAL_ULPS, np.float64),
    )


def test_bfloat16_computes_per_op_in_float32_and_rounds():
    import ml_dtypes

    a = np.array([1.0, 3.0, 100.0], dtype=ml_dtypes.bfloat16)
    b = np.array([0.00390625, 1 / 3, 0.3], dtype=ml_dtypes.bfloat16)
    result = apply_op("Div", (Tensor._from_array(a), Tensor._from_array(b)))
    computed = run_plan(_plan([result._value]))[0]
    assert computed.dtype == np.dtype(ml_dtypes.bfloat16)
    expected = (a.astype(np.float32) / b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(computed, expected)


def test_bfloat16_held_in_float32_matches_native_bfloat16():
    # The CUDA path holds bfloat16 as rounded float32 (CuPy has no bfloat16); numpy runs it here.
    x = make((4, 8), "bfloat16", seed=1)
    w = make((8, 3), "bfloat16", seed=2)
    y = (x @ w).tanh() * 3
    plan = _plan([y._value])
    inputs = [value.data for value in plan.inputs]
    native = CompiledKernelPlan(plan)(inputs)[0]
    emulated = CompiledKernelPlan(plan, emulate_bfloat16=True)(inputs)[0]
    assert emulated.dtype == native.dtype
    np.testing.assert_array_equal(emulated, native)


# ---------------------------------------------------------------- errors


def _single_node_plan(op_type, domain="", dtype=onnxnn.float32):
    from onnxnn.ir.device import CPU
    from onnxnn.ir.plan import GraphPlan
    from onnxnn.ir.graph import Node, Value

    data = np.zeros((2,), dtype.numpy_dtype)
    source = Value(None, 0, (2,), dtype, CPU, data)
    node = Node(op_type, domain, (source,), {}, 1)
    output = Value(node, 0, (2,), dtype, CPU)
    return GraphPlan([node], [source], [output], ((op_type, domain), (), (), CPU))


@pytest.mark.parametrize(
    "op_type,domain,named",
    [
        ("Foo", "", "op_type 'Foo' (domain 'ai.onnx')"),
        ("Fused", "com.example", "op_type 'Fused' (domain 'com.example')"),
    ],
)
def test_op_without_kernel_raises_not_implemented(op_type, domain, named):
    escaped = named.replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(NotImplementedError, match="onnxnn kernels executor has no kernel for " + escaped):
        run_plan(_single_node_plan(op_type, domain))


@pytest.mark.parametrize("op_type,dtype", [("Sqrt", "int64"), ("And", "float32"), ("Softmax", "int32")])
def test_unsupported_dtype_raises_type_error(op_type, dtype):
    operands = (make((2, 3), dtype),) * (2 if op_type == "And" else 1)
    result = apply_op(op_type, operands)
    with pytest.raises(TypeError, match=f"{op_type} does not support dtype {dtype}"):
        run_plan(_plan([result._value]))


def test_cuda_without_cupy_raises_runtime_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes ``import cupy`` fail
    with pytest.raises(RuntimeError, match="CuPy, which is not installed"):
        array_module("cuda")
    result = make((2,)) + 1
    with pytest.raises(RuntimeError, match="CUDA needs CuPy"):
        run_plan(_plan([result._value]), xp="cuda:0")


def test_kernel_errors_name_the_node():
    indices = Tensor._from_array(np.array([5]))
    result = apply_op("Gather", (make((3, 2)), indices)) * 2
    with pytest.raises(RuntimeError) as raised:
        run_plan(_plan([result._value]))
    assert "node 0 Gather (domain 'ai.onnx') on (float32[3, 2], int64[1])" in "\n".join(raised.value.__notes__)


# ---------------------------------------------------------------- cache, wiring, debug mode


def test_same_structure_reuses_one_compiled_plan():
    clear_cache()
    results = []
    for seed in range(3):
        x = make((2, 3), seed=seed)
        results.append((run_plan(_plan([(x.exp() + 1)._value]))[0], x._value.data))
    assert cache_info()["plans"] == 1
    assert cache_info()["misses"] == 1 and cache_info()["hits"] == 2
    for result, data in results:
        exact = np.exp(data.astype(np.float64)) + 1
        assert_within(result, exact, ulps(exact - 1) + ulps(exact, 1))  # exp to a few ulps, + 1 rounds once
    first = _plan([(make((2, 3)).exp() + 1)._value])
    assert cached_plan(first) is cached_plan(_plan([(make((2, 3), seed=9).exp() + 1)._value]))
    run_plan(_plan([(make((4, 3)).exp() + 1)._value]))
    assert cache_info()["plans"] == 2  # another input shape is another structure


def test_intermediates_are_freed_after_their_last_reader():
    x = make((3, 4))
    a = x.exp()
    b = a * 2
    c = b + a
    plan = _plan([(c.sum())._value])
    compiled = CompiledKernelPlan(plan)
    freed = {slot for *_, frees in compiled.steps for slot in frees}
    written = {slot for _, _, _, outputs, _ in compiled.steps for _, slot, _, _ in outputs}
    assert freed == written - set(compiled.output_slots)


def test_debug_mode_traces_every_node_and_checks_shapes(monkeypatch):
    x = make((2, 3))
    y = (x.relu() + 1).sum(1)
    plan = _plan([y._value])
    seen = []
    result = run_plan(plan, debug=True, trace=lambda description, ins, outs: seen.append(description.split()[2]))
    terms = np.maximum(x._value.data.astype(np.float64), 0) + 1
    assert_within(result[0], terms.sum(1), sum_bound(terms, 1, extra=1))  # 3 terms, each rounded by its + 1
    assert seen == ["Relu", "Add", "ReduceSum"]
    clear_cache()
    monkeypatch.setitem(kernels.table, ("", "Relu"), lambda xp, inputs, attrs: [inputs[0].reshape(-1)])
    with pytest.raises(
        RuntimeError, match=r"Relu .* output 0 has shape \[6\], but the recorded graph expects \[2, 3\]"
    ):
        run_plan(plan, debug=True)
    clear_cache()


def test_multi_output_node_and_unused_outputs():
    x = make((6, 2))
    first, second, third = apply_op("Split", (x, onnxnn.runtime.ops._common.int64_constant([1, 2, 3])))
    plan = _plan([third._value, first._value])
    third_result, first_result = run_plan(plan)
    np.testing.assert_array_equal(third_result, x._value.data[3:])
    np.testing.assert_array_equal(first_result, x._value.data[:1])


def test_unsupported_structures_are_remembered():
    clear_cache()
    plan = _single_node_plan("Foo")
    for _ in range(2):
        with pytest.raises(NotImplementedError):
            run_plan(plan)
    assert cache_info()["misses"] == 1 and cache_info()["hits"] == 1


def test_export_plan_with_realized_output_is_not_cached():
    clear_cache()
    x = make((2, 3))
    y = x * 2
    plan = _plan([y._value, x._value], include_shared=False)
    doubled, same = run_plan(plan)
    np.testing.assert_array_equal(same, x._value.data)
    np.testing.assert_array_equal(doubled, x._value.data * 2)
    other = make((2, 3), seed=4)
    _, same = run_plan(_plan([(other * 2)._value, other._value], include_shared=False))
    np.testing.assert_array_equal(same, other._value.data)


# ---------------------------------------------------------------- differential debugging


def test_compare_with_onnxruntime_reports_every_node():
    from onnxnn.kernels.debug import compare_with_onnxruntime

    x, w = make((3, 4), seed=1), make((4, 5), seed=2)
    y = ((x @ w).tanh() * 2).softmax(-1).sum()
    report = compare_with_onnxruntime([y])
    assert report.matches and report.first_mismatch is None
    assert [item.description.split()[2] for item in report.comparisons] == [
        "MatMul",
        "Tanh",
        "Mul",
        "Softmax",
        "ReduceSum",
    ]
    assert y._value.data is None  # nothing was realized


def test_compare_with_onnxruntime_finds_the_first_diverging_node(monkeypatch):
    from onnxnn.kernels.debug import compare_with_onnxruntime

    tanh = kernels.get("Tanh")
    monkeypatch.setitem(kernels.table, ("", "Tanh"), lambda xp, inputs, attrs: [tanh(xp, inputs, attrs)[0] + 0.01])
    x = make((3, 4))
    report = compare_with_onnxruntime([(x.exp().tanh() + 1).sum()])
    assert report.first_mismatch.description.startswith("node 1 Tanh")
    assert abs(report.first_mismatch.max_abs_error - 0.01) < 1e-5
    assert "MISMATCH" in str(report)


# ---------------------------------------------------------------- the non-numpy (CuPy) code path


class _ForeignArrayModule:
    """numpy under another name: drives the executor's CuPy code path (device transfers,
    bfloat16 held as float32, ``xp.sum`` instead of ufunc reductions) on a machine without a GPU."""

    __name__ = "foreign_numpy"

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def asnumpy(array):
        return np.asarray(array)


_FOREIGN = _ForeignArrayModule()


@pytest.mark.parametrize(
    "case,dtype", [pytest.param(case, case.dtypes[-1], id=f"{case.name}-{case.dtypes[-1]}") for case in _RECORDABLE]
)
def test_array_module_path_matches_numpy(case, dtype):
    outputs = _outputs(case.build(dtype))
    plan = _plan([tensor._value for tensor in outputs])
    inputs = [value.data for value in plan.inputs]
    expected = CompiledKernelPlan(plan)(inputs)
    actual = CompiledKernelPlan(plan, _FOREIGN)(inputs)
    for mine, reference in zip(actual, expected):
        _assert_matches(mine, reference, "float32" if dtype == "bfloat16" else dtype)


def test_zero_dimensional_intermediates_stay_arrays():
    x = make((3, 4))
    total = x.sum()
    scattered = apply_op(
        "ScatterND", (total.reshape(()), Tensor._from_array(np.zeros((0,), np.int64)), total.reshape(()))
    )
    y = (total * 2).reshape(1) + scattered
    data = x._value.data.astype(np.float64)
    # (sum * 2) + sum: a 12-term sum, two more roundings, all scaled by 3.
    assert_within(run_plan(_plan([y._value]))[0], [data.sum() * 3], [3 * sum_bound(data, extra=2)])


@pytest.mark.parametrize("rows", [1, 16, 127, 128, 300])
@pytest.mark.parametrize("transposed_a", [0, 1])
def test_gemm_with_a_transposed_weight_is_the_product_in_c_order(rows, transposed_a):
    # A few rows times a transposed weight is computed as the transposed product (faster in
    # OpenBLAS); either way the result is a @ b.T, C-ordered, within a 64-term product's rounding.
    from onnxnn.kernels.linalg import _plain_gemm, gemm

    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, 64)).astype(np.float32)
    b = rng.standard_normal((200, 64)).astype(np.float32)
    bias = rng.standard_normal(200).astype(np.float32)
    operand = np.ascontiguousarray(a.T) if transposed_a else a
    (result,) = gemm(np, [operand, b, bias], {"transA": transposed_a, "transB": 1})
    assert result.flags.c_contiguous and result.shape == (rows, 200)
    assert_within(result, a.astype(np.float64) @ b.T.astype(np.float64) + bias, matmul_bound(a, b.T, bias))
    # The direct kernel the executor calls for nn.Linear's Gemm computes it the same way.
    np.testing.assert_array_equal(_plain_gemm(transposed_a, 1)(operand, b, bias), result)
