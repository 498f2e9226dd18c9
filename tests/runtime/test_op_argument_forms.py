"""Argument forms and edge operands PyTorch takes (or refuses) that onnxnn must treat alike: the
varargs of ``Tensor.flip``/``Tensor.tile``; Python numbers given to tensor-only functions; 0-d
inputs of scatter_reduce and narrow; ``dtype=bool`` of sum/prod/cumsum; INT_MIN in gcd/lcm; bool
tensors where PyTorch has no kernel. Expected values are numpy's or written out by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

EXECUTORS = ("onnxruntime", "kernels")
GRID = np.arange(6.0, dtype=np.float32).reshape(2, 3)


def _grid():
    return onnxnn.tensor(GRID)


# ---------------------------------------------------------------- flip and tile


FLIP_AND_TILE_FORMS = [
    ("flip varargs", lambda x: x.flip(0, 1), np.flip(GRID, (0, 1))),
    ("flip tuple", lambda x: x.flip((0, 1)), np.flip(GRID, (0, 1))),
    ("flip list", lambda x: x.flip([1]), np.flip(GRID, 1)),
    ("flip one int", lambda x: x.flip(-1), np.flip(GRID, 1)),
    ("flip keyword", lambda x: x.flip(dims=(0,)), np.flip(GRID, 0)),
    ("flip function", lambda x: onnxnn.flip(x, (0, 1)), np.flip(GRID, (0, 1))),
    ("tile varargs", lambda x: x.tile(2, 1), np.tile(GRID, (2, 1))),
    ("tile one int", lambda x: x.tile(2), np.tile(GRID, 2)),
    ("tile tuple", lambda x: x.tile((2,)), np.tile(GRID, 2)),
    ("tile more dims", lambda x: x.tile(2, 1, 1), np.tile(GRID, (2, 1, 1))),
    ("tile keyword", lambda x: x.tile(dims=(1, 2)), np.tile(GRID, (1, 2))),
    ("tile function", lambda x: onnxnn.tile(x, [2, 2]), np.tile(GRID, (2, 2))),
]


@pytest.mark.parametrize(
    "call,expected", [case[1:] for case in FLIP_AND_TILE_FORMS], ids=[c[0] for c in FLIP_AND_TILE_FORMS]
)
def test_flip_and_tile_take_pytorchs_argument_forms(call, expected):
    result = call(_grid())
    assert result.shape == expected.shape
    np.testing.assert_array_equal(result.numpy(), expected)


FLIP_AND_TILE_ERRORS = [
    (lambda x: onnxnn.flip(x, 0), "flip(): argument 'dims' (position 2) must be tuple of ints, not int"),
    (lambda x: onnxnn.tile(x, 2), "tile(): argument 'dims' (position 2) must be tuple of ints, not int"),
    (lambda x: x.flip(), 'flip() missing 1 required positional arguments: "dims"'),
    (lambda x: x.tile(), 'tile() missing 1 required positional arguments: "dims"'),
    (lambda x: x.flip(0, dims=(1,)), "flip() got an unexpected keyword argument 'dims'"),
]


@pytest.mark.parametrize("call,message", FLIP_AND_TILE_ERRORS)
def test_flip_and_tile_functions_refuse_one_int(call, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(_grid())


# ---------------------------------------------------------------- Python numbers for tensor-only operands


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.float32, onnxnn.int64, onnxnn.bool], ids=str)
def test_logical_functions_take_a_number_by_its_truth(executor, dtype):
    # PyTorch refuses the number; onnxnn takes it as bool(number), which never fails to compile.
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor([1, 0], dtype=dtype)
        assert onnxnn.logical_and(x, 300).tolist() == [True, False]
        assert onnxnn.logical_and(0.5, x).tolist() == [True, False]
        assert onnxnn.logical_or(x, 0.0).tolist() == [True, False]
        assert onnxnn.logical_xor(x, float("nan")).tolist() == [False, True]  # NaN is true, as bool(nan)
        assert x.logical_or(2).tolist() == [True, True]


HEAVISIDE_ERRORS = [
    (
        lambda: onnxnn.heaviside(onnxnn.tensor([1.0, 0.0]), 3),
        TypeError,
        "heaviside(): argument 'values' (position 2) must be Tensor, not int",
    ),
    (
        lambda: onnxnn.heaviside(1.0, onnxnn.tensor([2.0])),
        TypeError,
        "heaviside(): argument 'input' (position 1) must be Tensor, not float",
    ),
    (
        lambda: onnxnn.heaviside(onnxnn.tensor([1.0, 0.0]), onnxnn.tensor([2.0, 2.0], dtype=onnxnn.float16)),
        RuntimeError,
        "heaviside is not yet implemented for tensors with different dtypes.",
    ),
]


@pytest.mark.parametrize("call,error,message", HEAVISIDE_ERRORS)
def test_heaviside_takes_two_tensors_of_one_dtype(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_heaviside_with_its_arguments_right():
    result = onnxnn.heaviside(onnxnn.tensor([-1.5, 0.0, 2.0]), onnxnn.tensor([7.0]))
    assert result.tolist() == [0.0, 7.0, 1.0]


# ---------------------------------------------------------------- 0-d inputs


# (reduce, include_self, index, src, expected) on input tensor(1.0): the one element is reduced with
# the src values its index points at (all of them: every index is 0).
SCALAR_SCATTER_REDUCE = [
    ("sum", True, 0, 5.0, 6.0),
    ("sum", False, 0, 5.0, 5.0),
    ("prod", True, [0, 0], [5.0, 2.0], 10.0),
    ("mean", True, [0, 0], [5.0, 3.0], 3.0),
    ("mean", False, [0, 0], [5.0, 3.0], 4.0),
    ("amax", True, [0], [5.0], 5.0),
    ("amin", True, [0], [5.0], 1.0),
    ("amin", False, [0], [5.0], 5.0),
    ("sum", True, [], [], 1.0),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("reduce,include_self,index,src,expected", SCALAR_SCATTER_REDUCE)
def test_scatter_reduce_into_a_0d_tensor(executor, reduce, include_self, index, src, expected):
    with onnxnn.set_executor(executor):
        index = onnxnn.tensor(index, dtype=onnxnn.int64)
        result = onnxnn.tensor(1.0).scatter_reduce(0, index, onnxnn.tensor(src), reduce, include_self=include_self)
        assert result.shape == ()
        assert result.item() == expected


ZERO_DIM_ERRORS = [
    (lambda s: s.scatter_reduce(0, onnxnn.tensor(1), onnxnn.tensor(5.0), "sum"), RuntimeError, "out of bounds"),
    (lambda s: s.scatter_reduce(1, onnxnn.tensor(0), onnxnn.tensor(5.0), "sum"), IndexError, "Dimension out of range"),
    (lambda s: s.narrow(0, 0, 1), RuntimeError, "narrow() cannot be applied to a 0-dim tensor."),
]


@pytest.mark.parametrize("call,error,message", ZERO_DIM_ERRORS)
def test_0d_input_errors(call, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(onnxnn.tensor(1.0))


# ---------------------------------------------------------------- dtype=bool reductions and scans


# (function, values, keywords, expected): a bool sum is "any" of the values cast to bool (NaN, 0.5
# and -1 are true), a bool product "all"; nansum drops NaN first.
BOOL_REDUCTIONS = [
    ("sum", [0.0, 2.0, 0.0], {"dim": 0}, True),
    ("sum", [0.0, 0.0, 0.0], {}, False),
    ("sum", [-1.0, 1.0], {}, True),
    ("sum", [0.5], {}, True),
    ("sum", [float("nan")], {}, True),
    ("sum", [], {}, False),
    ("sum", [[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]], {"dim": 1, "keepdim": True}, [[True], [False]]),
    ("nansum", [0.0, 2.0, float("nan")], {"dim": 0}, True),
    ("nansum", [0.0, 0.0, float("nan")], {"dim": 0}, False),
    ("prod", [1.0, 0.0], {"dim": 0}, False),
    ("prod", [0.25, 0.25], {}, True),
    ("prod", [[1.0, 0.0], [2.0, 3.0]], {"dim": 1}, [False, True]),
    ("prod", [], {}, True),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("function,values,keywords,expected", BOOL_REDUCTIONS)
def test_reductions_to_bool(executor, function, values, keywords, expected):
    with onnxnn.set_executor(executor):
        result = getattr(onnxnn.tensor(values), function)(**keywords, dtype=onnxnn.bool)
        assert result.dtype is onnxnn.bool
        assert result.tolist() == expected


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("function", ["cumsum", "cumprod"])
def test_bool_scans_exist_only_empty(executor, function):
    with onnxnn.set_executor(executor):
        empty = getattr(onnxnn.zeros(2, 0, dtype=onnxnn.int32), function)(1, dtype=onnxnn.bool)
        assert empty.dtype is onnxnn.bool and empty.shape == (2, 0)
        with pytest.raises(NotImplementedError, match=f"\"{function}_out_cpu\" not implemented for 'Bool'"):
            getattr(onnxnn.tensor([1], dtype=onnxnn.int32), function)(0, dtype=onnxnn.bool)


# ---------------------------------------------------------------- gcd and lcm at INT_MIN


def _c_gcd(a: int, b: int, bits: int) -> int:
    """PyTorch's calc_gcd in C: abs in the dtype (abs(INT_MIN) wraps to INT_MIN), truncating %."""

    def wrap(value: int) -> int:
        return (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))

    a, b = wrap(abs(a)), wrap(abs(b))
    while a != 0:
        quotient = abs(b) // abs(a) * (1 if (a < 0) == (b < 0) else -1)
        a, b = b - quotient * a, a
    return b


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("dtype", [onnxnn.int8, onnxnn.int16, onnxnn.int32, onnxnn.int64], ids=str)
def test_gcd_and_lcm_at_int_min(executor, dtype):
    info = np.iinfo(dtype.numpy_dtype)
    low = int(info.min)
    pairs = [
        (low, 4),
        (4, low),
        (low, 0),
        (low, low),
        (low, 1),
        (low, -1),
        (low, 3),
        (-6, low),
        (low + 1, low),
        (low, 6),
    ]
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    gcd_expected = [_c_gcd(x, y, info.bits) for x, y in pairs]
    assert gcd_expected[:4] == [4, 4, low, low]  # gcd(INT_MIN, 4) is PyTorch's 4
    with onnxnn.set_executor(executor):
        x, y = onnxnn.tensor(a, dtype=dtype), onnxnn.tensor(b, dtype=dtype)
        assert onnxnn.gcd(x, y).tolist() == gcd_expected
        # lcm = |a / gcd * b| wrapped: INT_MIN wherever INT_MIN meets a nonzero value, as PyTorch's.
        assert onnxnn.lcm(x, y).tolist() == [low, low, 0, low, low, low, low, low, low, low]


# ---------------------------------------------------------------- bool tensors without a PyTorch kernel


BOOL_REFUSALS = [
    (
        lambda: onnxnn.isin(onnxnn.tensor([True]), onnxnn.tensor([True])),
        "Unsupported input type encountered for isin(): Bool",
    ),
    (
        lambda: onnxnn.isin(onnxnn.tensor([1]), onnxnn.tensor([True])),
        "Unsupported input type encountered for isin(): Bool",
    ),
    (lambda: onnxnn.isin(onnxnn.tensor([1]), True), "Unsupported input type encountered for isin(): Bool"),
    (lambda: onnxnn.tensor([True, False]).topk(1), "topk does not support bool dtypes on CPU"),
]


@pytest.mark.parametrize("call,message", BOOL_REFUSALS)
def test_bool_operands_pytorch_refuses(call, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_isin_of_numbers_still_works():
    assert onnxnn.isin(onnxnn.tensor([1, 2, 3]), 2).tolist() == [False, True, False]


# Bool maxima, minima and powers: ONNX's Max, Min and Pow take no bool.
BOOL_RESULTS = [
    ("maximum with a number", lambda t: onnxnn.maximum(t, True), [True, True]),
    ("minimum with a number", lambda t: onnxnn.minimum(t, False), [False, False]),
    ("to the power False", lambda t: t**False, [True, True]),
    ("to the power True", lambda t: t.pow(True), [True, False]),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("call,expected", [case[1:] for case in BOOL_RESULTS], ids=[case[0] for case in BOOL_RESULTS])
def test_bool_maxima_minima_and_powers(executor, call, expected):
    with onnxnn.set_executor(executor):
        result = call(onnxnn.tensor([True, False]))
        assert result.dtype is onnxnn.bool and result.tolist() == expected


TENSOR_ONLY_ERRORS = [
    (
        lambda: onnxnn.fmax(onnxnn.tensor([1.0]), 2.0),
        TypeError,
        r"fmax\(\): argument 'other' \(position 2\) must be Tensor, not float",
    ),
    (
        lambda: onnxnn.fmin(0, onnxnn.tensor([1.0])),
        TypeError,
        r"fmin\(\): argument 'input' \(position 1\) must be Tensor, not int",
    ),
    (
        lambda: onnxnn.tensor([True]) ** onnxnn.tensor([False]),
        NotImplementedError,
        "\"pow\" not implemented for 'Bool'",
    ),
    (lambda: onnxnn.tensor(3).tensor_split(1), RuntimeError, "tensor_split expected at least a 1-dimensional tensor"),
]


@pytest.mark.parametrize("call,error,message", TENSOR_ONLY_ERRORS)
def test_refusals_of_pytorchs_kind(call, error, message):
    with pytest.raises(error, match=message):
        call()
