"""The fast path's straight-line code for kernels plans (onnxnn/runtime/fastpath/straight_line.py).

For numpy plans the fast path (``accelerate``) writes one Python function per plan; ordinary calls run it,
debug calls run the interpreted loop. The specification is that both give exactly the same
outputs (values, dtypes, shapes, memory layout), that errors name the node as the loop does, and
that the commonest ops call their direct form (``kernels.register_direct``), each of which equals
its kernel for every dtype the kernel takes.
"""

from __future__ import annotations

import types
import warnings
import weakref

import numpy as np
import pytest

import onnxnn
from onnxnn.runtime.fastpath import straight_line
from onnxnn.runtime.fastpath.straight_line import StraightLinePlan, accelerate, accelerate_when_run_again
from onnxnn.kernels import compile_plan, kernels
from onnxnn.kernels.executor import CompiledKernelPlan
from onnxnn.ir.kernel_registry import ALL_TYPES, LOW_PRECISION, DirectForm
from onnxnn.runtime.ops._common import int64_constant
from onnxnn.ir.plan import plan as _plan
from onnxnn.runtime.tensor import Tensor, apply_op

from kernels.differential_cases import make


def _op(op_type, *inputs, **attrs):
    return apply_op(op_type, inputs, attrs or None)


def _elementwise_chain(dtype):
    x, y = make((2, 3), dtype, seed=1), make((3,), dtype, seed=2)
    return [(((x + y) * x - y) / (y.abs() + 1)).relu().neg().exp()]


def _integer_arithmetic(dtype):
    x, y = make((2, 3), dtype, low=-9, high=9, seed=1), make((3,), dtype, low=1, high=4, seed=2)
    return [x + y * 2, _op("Div", x, y), _op("Mod", x, y), _op("Mod", x, y, fmod=1), (x - y).abs().sign()]


def _not_a_number(dtype):
    x = make((4,), dtype, seed=3)  # negative values: log gives nan, division by zero gives inf
    return [x.log() * 2, x / (x - x)]


def _matmul_and_gemm(dtype):
    a, b, c = make((3, 2), dtype, seed=1), make((2, 4), dtype, seed=2), make((4,), dtype, seed=3)
    a_t, b_t = make((2, 3), dtype, seed=4), make((4, 2), dtype, seed=5)
    return [
        a @ b,
        make((2,), dtype) @ b,
        _op("Gemm", a, b, c),
        _op("Gemm", a, b),
        _op("Gemm", a_t, b, c, transA=1),
        _op("Gemm", a, b_t, transB=1),
        _op("Gemm", a_t, b_t, c, transA=1, transB=1),
        _op("Gemm", a, b, c, alpha=0.5, beta=2.0),
    ]  # scaled: the generic kernel call


def _where_greater(dtype):
    x, y = make((2, 3), dtype, seed=1), make((3,), dtype, seed=2)
    return [onnxnn.where(x > y, x, y * 2), (x > 0) & (y < 1)]


def _reshapes(dtype):
    x = make((3, 4), dtype, seed=1)
    return [
        x.unsqueeze(0) + 1,
        x.reshape(6, 2) * 2,
        x.flatten(),
        x.reshape(1, 3, 4).squeeze(0) - 1,
        x.expand(2, 3, 4) * 1,
        x.t(),
        x.t() * 2,
    ]  # transposes: outputs not C-contiguous before finishing


def _zero_dimensional(dtype):
    x, y = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    total = x.sum()
    return [total * y, total + x.mean(), (total * 2).exp(), make((3,), dtype) @ make((3,), dtype, seed=4)]


def _dtype_differs_from_numpy(dtype):
    # Add(int32, int64) is recorded as int32 while np.add gives int64; float16 kernels compute in float32.
    narrow, wide = make((2, 3), "int32", low=-5, high=5), make((3,), "int64", low=-5, high=5, seed=1)
    half = make((2, 3), "float16", seed=2)
    return [_op("Add", narrow, wide), (half * half + 1).exp(), (half.sum() * 2).relu()]


def _multi_output_with_unused_output(dtype):
    x = make((6, 2), dtype)
    first, _, third = _op("Split", x, int64_constant([1, 2, 3]))
    values, _ = _op("TopK", x, int64_constant([1]), axis=0)
    return [third * 2, first, values + 1]


def _clip_with_omitted_bound(dtype):
    x = make((2, 3), dtype, seed=1)
    high = Tensor._from_array(np.array(0.5, dtype=np.dtype(dtype)))
    return [_op("Clip", x, None, high), _op("Clip", x, -high, high), x.clamp(min=0.0)]


def _single_input(dtype):
    return [make((5,), dtype).tanh()]


def _strided_inputs(dtype):
    # Fed inputs may be views in any layout; numpy gives elementwise results the inputs' layout.
    transposed = Tensor._from_array(np.asfortranarray(make((3, 4), dtype, seed=1).numpy()))
    strided = Tensor._from_array(make((8,), dtype, seed=2).numpy()[::2])
    column = Tensor._from_array(make((1, 3), dtype, seed=3).numpy().T)
    return [
        transposed + 1,
        transposed * strided,
        strided.exp(),
        column - 2,
        column + strided,
        (column * 2).sum(),
        strided.unsqueeze(1),
    ]


GRAPHS = [
    ("elementwise chain", _elementwise_chain, ("float32", "float64")),
    ("integer arithmetic", _integer_arithmetic, ("int64", "int32")),
    ("nan and inf", _not_a_number, ("float32",)),
    ("MatMul and Gemm with transA/transB", _matmul_and_gemm, ("float32", "float64")),
    ("Where of Greater", _where_greater, ("float32", "int64")),
    ("Unsqueeze, Reshape, Flatten, Squeeze, Expand, Transpose", _reshapes, ("float32", "int64")),
    ("0-d reduction feeding elementwise ops", _zero_dimensional, ("float32", "float64")),
    ("result dtype differs from numpy's", _dtype_differs_from_numpy, ("float32",)),
    ("multi-output node with an unused output", _multi_output_with_unused_output, ("float32",)),
    ("Clip with an omitted bound", _clip_with_omitted_bound, ("float32",)),
    ("single fed input", _single_input, ("float32",)),
    ("transposed and strided fed inputs", _strided_inputs, ("float32", "int64")),
]


def _compiled(outputs):
    plan = _plan([tensor._value for tensor in outputs])
    return accelerated_plan(plan), [value.data for value in plan.inputs]


def _assert_identical(actual: list, expected: list) -> None:
    assert len(actual) == len(expected)
    for mine, reference in zip(actual, expected):
        assert type(mine) is np.ndarray
        assert mine.dtype == reference.dtype and mine.shape == reference.shape
        assert mine.flags.c_contiguous
        np.testing.assert_array_equal(mine, reference)  # nan equals nan here


@pytest.mark.parametrize(
    "build,dtype",
    [pytest.param(build, dtype, id=f"{name}-{dtype}") for name, build, dtypes in GRAPHS for dtype in dtypes],
)
def test_generated_code_gives_the_interpreted_loops_outputs(build, dtype):
    outputs = build(dtype)
    compiled, inputs = _compiled(outputs)
    assert compiled.straight_line is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # floating-point errors are ignored, as in the loop
        generated = compiled(inputs)
    _assert_identical(generated, compiled(inputs, debug=True))
    for mine, tensor in zip(generated, outputs):  # and onnxruntime, up to its own rounding of exp, log, ...
        reference = tensor.numpy()
        assert mine.dtype == reference.dtype and mine.shape == reference.shape
        # These graphs chain up to a few dozen elementwise ops and short reductions over values that
        # can cancel; 2e-3 is a float32 budget of 2 gamma(n) for n ~ 16000 relative to the result,
        # which any rounding-level difference stays far inside and a wrong kernel (O(1)) does not.
        np.testing.assert_allclose(mine.astype(np.float64), reference.astype(np.float64), rtol=2e-3)


def _casting_nodes(source: str) -> list:
    """The op types of the nodes whose generated lines cast their result."""
    casting, op_type = [], None
    for line in source.splitlines():
        if line.startswith("    # node "):
            op_type = line.split()[3]
        elif ".astype(" in line:
            casting.append(op_type)
    return casting


@pytest.mark.parametrize(
    "build,dtype,casting",
    [
        (_elementwise_chain, "float32", ["Relu"]),  # Relu's direct form is no ufunc: its dtype is not known before
        (_elementwise_chain, "float64", ["Relu"]),  # (an unknown dtype is not float64, though np.dtype(None) is)
        (_integer_arithmetic, "int64", ["Div", "Mod", "Mod"]),  # integer Div and Mod check their divisor: no ufuncs
        (_dtype_differs_from_numpy, "float32", ["Add", "Mul", "Add", "Exp", "ReduceSum", "Mul", "Relu"]),
    ],
    ids=["float32 chain", "float64 chain", "integer arithmetic", "numpy's dtype differs"],
)
def test_casts_only_where_numpy_does_not_decide_the_recorded_dtype(build, dtype, casting):
    compiled, inputs = _compiled(build(dtype))
    assert _casting_nodes(compiled.straight_line.source) == casting  # Add(int32, int64) gives int64: cast


def test_output_checks_only_where_the_layout_is_not_certain():
    x, column = make((3, 4), seed=1), make((3, 1), seed=2)
    outputs = [x + 1, column * 2, (column * 2).sum(), x.sum(1) - 1, x.t() * 1, x.unsqueeze(0).squeeze(0)]
    compiled, inputs = _compiled(outputs)
    returned = compiled.straight_line.source.splitlines()[-1]
    checked = [line for line in compiled.straight_line.source.splitlines() if "flags.c_contiguous" in line]
    # (3, 4) may come out transposed, a reshape may be a view of a strided input, a reduction is a
    # kernel; new elementwise results of shapes (3, 1) and () are contiguous whatever their order.
    assert len(checked) == 4 and "return [" in returned
    _assert_identical(compiled(inputs), compiled(inputs, debug=True))


def test_ordinary_calls_run_the_generated_function(monkeypatch):
    compiled, inputs = _compiled(_elementwise_chain("float32"))
    calls = []
    generated = compiled.straight_line.function
    monkeypatch.setattr(compiled.straight_line, "function", lambda arrays: calls.append(1) or generated(arrays))
    compiled(inputs)
    assert calls == [1]
    compiled(inputs, debug=True)
    compiled(inputs, trace=lambda *arguments: None)
    assert calls == [1]  # debug runs and traces take the interpreted loop


def test_a_plan_the_fast_path_compiles_gets_its_code_at_its_second_run():
    plan = _plan([tensor._value for tensor in _elementwise_chain("float64")])
    compiled, inputs = compile_plan(plan), [value.data for value in plan.inputs]
    accelerate_when_run_again(compiled)
    first = compiled(inputs)
    assert not isinstance(compiled.straight_line, StraightLinePlan)  # a plan run once pays for no code
    second = compiled(inputs)
    assert isinstance(compiled.straight_line, StraightLinePlan)
    _assert_identical(first, second)
    _assert_identical(compiled(inputs), second)


def test_the_fast_path_writes_code_for_the_structures_that_run_again(monkeypatch):
    written = []
    write = straight_line.generate
    monkeypatch.setattr(straight_line, "generate", lambda *arguments: written.append(1) or write(*arguments))
    onnxnn.clear_caches()
    x = onnxnn.tensor(np.linspace(-1.0, 1.0, 7 * 13).reshape(7, 13))

    def realize():
        return ((x * 3 + 1).tanh() - x).numpy()

    with onnxnn.set_executor("kernels"):
        expected = realize()
        assert written == []
        np.testing.assert_array_equal(realize(), expected)
        assert written == [1]
        np.testing.assert_array_equal(realize(), expected)
        assert written == [1]
    np.testing.assert_allclose(expected, np.tanh(x.numpy() * 3 + 1) - x.numpy(), rtol=1e-15)


@pytest.mark.parametrize("state", [{"all": "warn"}, {"divide": "raise", "invalid": "raise"}])
def test_floating_point_errors_are_ignored_and_the_callers_state_restored(state):
    compiled, inputs = _compiled(_not_a_number("float32"))
    with np.errstate(**state):
        before = np.geterr()
        compiled(inputs)  # divides zero by zero: no warning, no FloatingPointError
        assert np.geterr() == before
    indices = Tensor._from_array(np.array([5]))
    failing, failing_inputs = _compiled([apply_op("Gather", (make((3, 2)) * 2, indices))])
    with np.errstate(**state):
        with pytest.raises(RuntimeError):
            failing(failing_inputs)
        assert np.geterr() == before  # restored on errors too


def _note_step():
    """The shape of the Modules note's training step: Linear, relu, abs loss, gradients, updates."""
    x, weight, bias = make((4,)), make((4, 3), seed=1), make((3,), seed=2)
    hidden = (x @ weight + bias).relu()
    gate = hidden > 0
    upstream = make((3,), seed=3)
    grad_hidden = onnxnn.where(gate, upstream, Tensor._from_array(np.array(0, np.float32)))
    grad_weight = _op("Gemm", x.unsqueeze(1), grad_hidden.unsqueeze(0))
    outer = _op("Gemm", x.unsqueeze(0), grad_hidden.unsqueeze(0), transA=1)
    return [weight - (grad_weight + weight * 0.01) * 1e-4, bias - grad_hidden * 1e-4, outer, gate]


@pytest.mark.parametrize(
    "build,direct_calls,kernel_calls",
    [
        pytest.param(
            _note_step,
            {
                "matmul",
                "add",
                "relu",
                "greater",
                "where",
                "reshape_to",
                "gemm",
                "gemm_transposed_a",
                "multiply",
                "subtract",
            },
            set(),
            id="note step",
        ),
        pytest.param(
            lambda: _elementwise_chain("float32"),
            {"add", "multiply", "subtract", "absolute", "divide", "relu", "negative", "exp"},
            set(),
            id="elementwise",
        ),
        pytest.param(
            lambda: _reshapes("float32"),
            {"reshape_to", "broadcast_to", "add", "multiply", "subtract"},
            {"transpose"},
            id="reshapes",
        ),  # Transpose has a perm attribute: its kernel
        pytest.param(
            lambda: _matmul_and_gemm("float32"),
            {"matmul", "gemm", "gemm_transposed_a", "gemm_transposed_b", "gemm_transposed_a_transposed_b"},
            {"gemm"},
            id="matmul and gemm",
        ),  # the scaled Gemm: its kernel
        pytest.param(
            lambda: _integer_arithmetic("int64"),
            {"add", "multiply", "remainder", "fmod", "subtract", "absolute", "sign"},
            {"div"},
            id="integers",
        ),  # integer division truncates: its kernel
    ],
)
def test_common_ops_call_their_direct_forms(build, direct_calls, kernel_calls):
    compiled, _ = _compiled(build())
    calls = [
        line.split(" = ", 1)[1].split("(")[0]
        for line in compiled.straight_line.source.splitlines()
        if line.startswith(("    node_", "    results = ")) and "(" in line and "= results[" not in line
    ]
    assert {name for name in calls if not name.endswith("_kernel")} == direct_calls
    assert {name[: -len("_kernel")] for name in calls if name.endswith("_kernel")} == kernel_calls


def _exp_chain(keep_exponential: bool):
    exponential = make((3, 4)).exp()
    total = ((exponential * 2 + exponential) * 3).sum()
    return [total, exponential] if keep_exponential else [total]  # nothing else holds the intermediates


@pytest.mark.parametrize("keep_exponential", [False, True])
def test_dead_intermediates_are_released_after_their_last_reader(monkeypatch, keep_exponential):
    exponentials = []

    def recording_exp(x):
        result = np.exp(x)
        exponentials.append(weakref.ref(result))
        return result

    alive_at_the_sum = []
    reduce_sum = kernels.get("ReduceSum")

    def probing_sum(xp, inputs, attrs):
        alive_at_the_sum.append(exponentials[-1]() is not None)
        return reduce_sum(xp, inputs, attrs)

    monkeypatch.setitem(
        kernels.direct_forms, ("", "Exp"), [DirectForm(recording_exp, kernels.get("Exp"), {}, {}, None, False)]
    )
    monkeypatch.setitem(kernels.table, ("", "ReduceSum"), probing_sum)
    compiled, inputs = _compiled(_exp_chain(keep_exponential))
    compiled(inputs)
    # Read last by the Add two nodes before the sum: released there, unless the plan returns it.
    assert alive_at_the_sum == [keep_exponential]


@pytest.mark.parametrize(
    "emulate,xp_is_numpy,generated", [(False, True, True), (True, True, False), (False, False, False)]
)
def test_generated_only_for_numpy_without_bfloat16_rounding(emulate, xp_is_numpy, generated):
    x = make((2, 3), "bfloat16")
    plan = _plan([(x * 2 + 1)._value])
    xp = (
        np
        if xp_is_numpy
        else types.SimpleNamespace(
            __name__="other", **{name: getattr(np, name) for name in dir(np) if not name.startswith("_")}
        )
    )
    compiled = CompiledKernelPlan(plan, xp, emulate_bfloat16=emulate)
    accelerate(compiled)
    assert (compiled.straight_line is not None) == generated


def _notes(error: BaseException) -> str:
    return "\n".join(getattr(error, "__notes__", []))


def test_kernel_errors_carry_the_node_note():
    indices = Tensor._from_array(np.array([5]))
    compiled, inputs = _compiled([(apply_op("Gather", (make((3, 2)) * 2, indices)) + 1)])
    with pytest.raises(RuntimeError) as generated:
        compiled(inputs)
    with pytest.raises(RuntimeError) as interpreted:
        compiled(inputs, debug=True)
    assert (
        "while running node 1 Gather (domain 'ai.onnx') on (float32[3, 2], int64[1]) in the onnxnn kernels "
        "executor" in _notes(generated.value)
    )
    assert _notes(generated.value) == _notes(interpreted.value)


def test_direct_form_errors_carry_the_node_note(monkeypatch):
    def failing_exp(x):
        raise FloatingPointError("exp refused")

    form = DirectForm(failing_exp, kernels.get("Exp"), {}, {}, None, False)
    monkeypatch.setitem(kernels.direct_forms, ("", "Exp"), [form])
    compiled, inputs = _compiled([(make((2,)) + 1).exp()])
    with pytest.raises(FloatingPointError, match="exp refused") as raised:
        compiled(inputs)
    assert (
        _notes(raised.value) == "while running node 1 Exp (domain 'ai.onnx') on (float32[2]) in the onnxnn "
        "kernels executor"
    )


def test_a_kernel_replaced_in_the_table_is_not_bypassed(monkeypatch):
    monkeypatch.setitem(kernels.table, ("", "Exp"), lambda xp, inputs, attrs: [inputs[0] * 0])
    compiled, inputs = _compiled([make((3,)).exp()])
    np.testing.assert_array_equal(compiled(inputs)[0], np.zeros(3, np.float32))


# ---------------------------------------------------------------- the direct-form table


@pytest.mark.parametrize(
    "op_type,attrs,dtype,expected",
    [
        ("Add", {}, "float32", "add"),
        ("Add", {"unknown": 1}, "float32", None),  # an attribute the form knows nothing about
        ("Div", {}, "float64", "divide"),
        ("Div", {}, "int64", None),  # integer Div truncates: the kernel
        ("Mod", {}, "int32", "remainder"),
        ("Mod", {"fmod": 0}, "float32", "remainder"),
        ("Mod", {"fmod": 1}, "float32", "fmod"),
        ("Relu", {}, "int8", "relu"),
        ("Gemm", {}, "float32", "gemm"),
        ("Gemm", {"transA": 1}, "float32", "gemm_transposed_a"),
        ("Gemm", {"transA": 1, "transB": 1, "alpha": 1.0}, "float32", "gemm_transposed_a_transposed_b"),
        ("Gemm", {"alpha": 2.0}, "float32", None),
        ("Unsqueeze", {"axes": [0]}, "float32", "_reshape_to"),  # the recorded output shape covers attributes
        ("Softmax", {}, "float32", None),
    ],
)
def test_direct_form_lookup(op_type, attrs, dtype, expected):
    form = kernels.direct_form(op_type, "", attrs, dtype)
    assert (form.function.__name__ if form is not None else None) == expected


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda: kernels.register_direct("NoSuchOp", np.add), KeyError, "no kernel registered for op_type 'NoSuchOp'"),
        (
            lambda: kernels.register_direct("Gemm", np.matmul, defaults={"alpha": 1.0}, when={"transA": 0}),
            ValueError,
            r"attributes \['transA'\] in `when` have no declared default",
        ),
    ],
)
def test_register_direct_rejects_bad_declarations(call, error, message):
    before = {key: list(forms) for key, forms in kernels.direct_forms.items()}
    with pytest.raises(error, match=message):
        call()
    assert kernels.direct_forms == before


def _array(shape, dtype: str, seed: int = 0, nonzero: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        low = 1 if nonzero else (-6 if kind == "i" else 0)
        return rng.integers(low, 7, shape).astype(dtype)
    values = rng.uniform(-3, 3, shape)
    values[..., 0] = 0.0  # zeros: division by zero, relu's sign of zero
    return values.astype(dtype)


def _gemm_arguments(dtype, form):
    a = _array((2, 3) if form.required["transA"] else (3, 2), dtype, 1)
    b = _array((4, 2) if form.required["transB"] else (2, 4), dtype, 2)
    c = _array((4,), dtype, 3)
    return [a, b, c]


def _reshaping(shape):
    def arguments(dtype, form):
        return [_array((3, 4), dtype)], shape

    return arguments


# How each op with direct forms is called: a list of input arrays (the same for the kernel and
# the form), or for output-shape forms the first input and the recorded output shape.
_BINARY = lambda dtype, form: [_array((2, 3), dtype, 1), _array((3,), dtype, 2)]  # noqa: E731
_DIRECT_FORM_ARGUMENTS = {
    "Where": lambda dtype, form: [_array((2, 3), "bool", 1), _array((2, 3), dtype, 2), _array((3,), dtype, 3)],
    "Clip": lambda dtype, form: [_array((2, 3), dtype, 1), np.array(1, dtype), np.array(4, dtype)],
    "Hardtanh": lambda dtype, form: [_array((2, 3), dtype, 1), np.array(1, dtype), np.array(4, dtype)],
    "AbsGradient": lambda dtype, form: [_array((2, 3), dtype, 1), _array((2, 3), dtype, 2)],
    "MatMul": lambda dtype, form: [_array((2, 3), dtype, 1), _array((3, 4), dtype, 2)],
    "Gemm": _gemm_arguments,
    # An integer divisor of zero raises: the comparison needs divisors without one.
    "Div": lambda dtype, form: [_array((2, 3), dtype, 1), _array((3,), dtype, 2, nonzero=True)],
    "Mod": lambda dtype, form: [_array((2, 3), dtype, 1), _array((3,), dtype, 2, nonzero=True)],
    "Reshape": _reshaping((2, 6)),
    "Flatten": _reshaping((12,)),
    "Unsqueeze": _reshaping((3, 1, 4)),
    "Squeeze": _reshaping((3, 4)),
    "Expand": _reshaping((2, 3, 4)),
}
_BINARY_OPS = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Xor",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
}
_UNARY_OPS = {
    "Exp",
    "Log",
    "Sqrt",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Asinh",
    "Acosh",
    "Atanh",
    "Tanh",
    "Floor",
    "Ceil",
    "Round",
    "Neg",
    "Abs",
    "Sign",
    "Reciprocal",
    "Relu",
    "Not",
    "BitwiseNot",
    "IsNaN",
    "Erf",
    "Softsign",
    "Sigmoid",
    "Softplus",
    "Mish",
    "Identity",
}
_STRUCTURAL_INPUTS = {"Reshape": [2, 6], "Flatten": None, "Unsqueeze": [1], "Squeeze": None, "Expand": [2, 3, 4]}


def _direct_form_cases():
    cases = []
    for (domain, op_type), forms in sorted(kernels.direct_forms.items()):
        for number, form in enumerate(forms):
            allowed = (kernels.types.get((domain, op_type), ALL_TYPES) & (form.types or ALL_TYPES)) - LOW_PRECISION
            if op_type == "Where":
                allowed = ALL_TYPES - LOW_PRECISION  # the condition is bool; the values take any dtype
            for dtype in sorted(allowed):
                cases.append(pytest.param(domain, op_type, form, dtype, id=f"{op_type}-{number}-{dtype}"))
    return cases


@pytest.mark.parametrize("domain,op_type,form,dtype", _direct_form_cases())
def test_every_direct_form_equals_its_kernel(domain, op_type, form, dtype):
    """Values and dtype, for every dtype the kernel takes (float16/bfloat16 widen: never direct)."""
    kernel = kernels.get(op_type, domain)
    attrs = {**form.required, "_num_outputs": 1, "_used_outputs": (0,)}
    if form.output_shape:
        (x,), shape = _DIRECT_FORM_ARGUMENTS[op_type](dtype, form)
        structural = _STRUCTURAL_INPUTS[op_type]
        kernel_inputs = [x] if structural is None else [x, np.array(structural, np.int64)]
        expected = kernel(np, kernel_inputs, {"axis": 1, **attrs} if op_type == "Flatten" else attrs)[0]
        if op_type == "Flatten":
            shape = expected.shape
        actual = form.function(x, shape)
    else:
        if op_type in _DIRECT_FORM_ARGUMENTS:
            arguments = _DIRECT_FORM_ARGUMENTS[op_type](dtype, form)
        elif op_type in _BINARY_OPS:
            arguments = _BINARY(dtype, form)
        else:
            assert op_type in _UNARY_OPS, f"{op_type}: add its argument maker"
            arguments = [_array((2, 3), dtype, 1)]
        with np.errstate(all="ignore"):
            expected = kernel(np, arguments, attrs)[0]
            actual = form.function(*arguments)
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


def test_every_op_with_direct_forms_has_an_argument_maker():
    """So that a new direct form is checked against its kernel by the test above."""
    ops = {op_type for (_, op_type) in kernels.direct_forms}
    assert ops <= _BINARY_OPS | _UNARY_OPS | set(_DIRECT_FORM_ARGUMENTS), sorted(
        ops - _BINARY_OPS - _UNARY_OPS - set(_DIRECT_FORM_ARGUMENTS)
    )


def accelerated_plan(plan):
    """The kernels' compiled plan with the fast path's straight-line code attached."""
    compiled = compile_plan(plan)
    accelerate(compiled)
    return compiled
