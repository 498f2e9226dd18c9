"""Integer division and remainder by zero raise the same error on every executor.

onnxruntime refuses an integer divisor of zero ("Integer division by zero", "Integer modulo by
zero") and onnxnn surfaces that as RuntimeError; PyTorch raises RuntimeError too. numpy returns 0
with a warning, which the kernels executor used to pass on as a result. Divisors without a zero
give C's (ONNX's) quotients and remainders on both, computed here in Python's exact integers.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import onnxnn
from onnxnn.import_ import from_onnx

EXECUTORS = ["onnxruntime", "kernels"]
DTYPES = [onnxnn.int32, onnxnn.int64]
ZERO_DIVISOR = r"(?i)integer (division|modulo) by zero"

DIVIDEND = [7, -7, 7, -7, 0, 5]
DIVISOR = [2, 2, -2, -2, 3, 0]
DIVISOR_WITHOUT_ZERO = [2, 2, -2, -2, 3, 1]


def _c_quotient(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _c_remainder(a: int, b: int) -> int:
    return a - b * _c_quotient(a, b)


# name, program, exact result per (a, b) pair where b != 0
API_CASES = [
    ("div_trunc", lambda a, b: onnxnn.div(a, b, rounding_mode="trunc"), _c_quotient),
    ("div_floor", lambda a, b: onnxnn.div(a, b, rounding_mode="floor"), lambda a, b: a // b),
    ("floor_divide", onnxnn.floor_divide, lambda a, b: a // b),
    ("floordiv_operator", lambda a, b: a // b, lambda a, b: a // b),
    ("remainder", onnxnn.remainder, lambda a, b: a % b),
    ("mod_operator", lambda a, b: a % b, lambda a, b: a % b),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name, program, exact", API_CASES, ids=[case[0] for case in API_CASES])
def test_integer_division_by_zero_raises_runtime_error(executor, dtype, name, program, exact):
    a, b = onnxnn.tensor(DIVIDEND, dtype=dtype), onnxnn.tensor(DIVISOR, dtype=dtype)
    with onnxnn.set_executor(executor):
        with pytest.raises(RuntimeError, match=ZERO_DIVISOR):
            program(a, b).numpy()


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("name, program, exact", API_CASES, ids=[case[0] for case in API_CASES])
def test_integer_division_without_zero_divisors_is_exact(executor, dtype, name, program, exact):
    a, b = onnxnn.tensor(DIVIDEND, dtype=dtype), onnxnn.tensor(DIVISOR_WITHOUT_ZERO, dtype=dtype)
    with onnxnn.set_executor(executor):
        actual = program(a, b).numpy()
    assert actual.dtype == np.dtype(dtype.numpy_dtype)
    assert actual.tolist() == [exact(x, y) for x, y in zip(DIVIDEND, DIVISOR_WITHOUT_ZERO)]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_scalar_zero_divisor_raises_too(executor):
    with onnxnn.set_executor(executor):
        with pytest.raises(RuntimeError, match=ZERO_DIVISOR):
            (onnxnn.tensor([4, 6]) // 0).numpy()


def _binary_model(op_type: str, elem_type: int, **attributes) -> onnx.ModelProto:
    node = helper.make_node(op_type, ["a", "b"], ["y"], **attributes)
    values = [helper.make_tensor_value_info(name, elem_type, [len(DIVIDEND)]) for name in ("a", "b", "y")]
    graph = helper.make_graph([node], op_type.lower(), values[:2], values[2:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


# op_type, attributes, exact result per (a, b) pair where b != 0
ONNX_CASES = [
    ("Div", {}, _c_quotient),
    ("Mod", {"fmod": 0}, lambda a, b: a % b),
    ("Mod", {"fmod": 1}, _c_remainder),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("op_type, attributes, exact", ONNX_CASES, ids=["Div", "Mod_fmod0", "Mod_fmod1"])
def test_an_imported_integer_div_or_mod_node_behaves_the_same_on_both_executors(
    executor, dtype, op_type, attributes, exact
):
    module = from_onnx(_binary_model(op_type, dtype.onnx_type, **attributes))
    a = onnxnn.tensor(DIVIDEND, dtype=dtype)
    with onnxnn.set_executor(executor):
        actual = module(a, onnxnn.tensor(DIVISOR_WITHOUT_ZERO, dtype=dtype)).numpy()
        assert actual.tolist() == [exact(x, y) for x, y in zip(DIVIDEND, DIVISOR_WITHOUT_ZERO)]
        with pytest.raises(RuntimeError, match=ZERO_DIVISOR) as raised:
            module(a, onnxnn.tensor(DIVISOR, dtype=dtype)).numpy()
    assert op_type in str(raised.value)


def test_float_division_by_zero_still_gives_inf_and_nan():
    for executor in EXECUTORS:
        with onnxnn.set_executor(executor):
            result = (onnxnn.tensor([1.0, -1.0, 0.0]) / onnxnn.tensor([0.0, 0.0, 0.0])).numpy()
            remainder = onnxnn.remainder(onnxnn.tensor([1.0]), onnxnn.tensor([0.0])).numpy()
        assert result[0] == np.inf and result[1] == -np.inf and np.isnan(result[2]), executor
        assert np.isnan(remainder[0]), executor
