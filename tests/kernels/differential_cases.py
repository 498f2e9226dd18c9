"""The differential table's makers and its first families: recorded graphs of the elementwise ops,
predicates, reductions, arg-reductions and shape ops that the kernels executor and onnxruntime must
agree on.

Each case records a graph with ``apply_op`` (raw ONNX semantics, attribute variants) or the
Tensor API and returns the tensors to compare. Inputs come from a seeded generator per case and
dtype; ``positive``/``unit`` keep inputs inside an op's domain. A case whose op has no shape rule
yet (a family another engineer is adding) is left out of the table until it has one; the
coverage test in test_kernels.py notices ops with a shape rule but no case. The other families
(linear algebra, indexing, nn layers, small graphs, Tensor API, resampling) and the whole table,
``CASES``, are in differential_layer_cases.py.
"""

from __future__ import annotations

import numpy as np

from onnxnn.runtime.ops._common import int64_constant
from onnxnn.runtime.tensor import Tensor, apply_op

__all__ = ["ELEMENTWISE_AND_SHAPE_CASES", "Case", "make"]

FLOATS = ("float32", "float64", "float16")
ALL_FLOATS = FLOATS + ("bfloat16",)


def make(shape, dtype="float32", low=-3.0, high=3.0, seed=0) -> Tensor:
    """A constant tensor of random values in [low, high) (integers: rounded, bool: coin flips)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        array = rng.random(shape) < 0.5
    elif dtype.startswith("int") or dtype.startswith("uint"):
        array = np.floor(rng.uniform(low, high, shape)).astype(dtype)
    else:
        from onnxnn.ir.dtypes import as_dtype

        array = rng.uniform(low, high, shape).astype(np.float32).astype(as_dtype(dtype).numpy_dtype)
    return Tensor._from_array(np.asarray(array))


def _with_extremes(tensor: Tensor) -> Tensor:
    """``tensor`` with its dtype's minimum and maximum written into every row."""
    array = tensor.numpy().copy()
    info = np.iinfo(array.dtype)
    array[:, 1], array[:, 3] = info.min, info.max
    if array.dtype.kind == "u":
        array[:, 4] = info.max // 2 + 7  # above the signed range of the same width
    return Tensor._from_array(array)


def op(op_type, *inputs, **attrs):
    return apply_op(op_type, inputs, attrs or None)


ints = int64_constant


class Case:
    """One row: ``build(dtype)`` records the graph; it is checked for each of ``dtypes``."""

    def __init__(self, name: str, op_type: str, build, dtypes=("float32",)):
        self.name, self.op_type, self.build, self.dtypes = name, op_type, build, dtypes


def _unary(op_type, dtypes=FLOATS, low=-3.0, high=3.0, **attrs):
    return Case(
        f"{op_type}{'_' + '_'.join(f'{k}{v}' for k, v in attrs.items()) if attrs else ''}",
        op_type,
        lambda d: op(op_type, make((3, 5), d, low, high), **attrs),
        dtypes,
    )


def _binary(op_type, dtypes=FLOATS, shapes=((3, 4), (4,)), low=-3.0, high=3.0, name=None, **attrs):
    return Case(
        name or f"{op_type}_{'x'.join(map(str, shapes[0]))}_{'x'.join(map(str, shapes[1]))}",
        op_type,
        lambda d: op(op_type, make(shapes[0], d, low, high, 1), make(shapes[1], d, low, high, 2), **attrs),
        dtypes,
    )


# onnxruntime's CPU provider implements float64 for only part of the ops: the dtype lists say where
# it serves as the reference; the ONNX node tests and test_erf_is_float64_accurate cover the rest.
HALF = ("float32", "float16")
WIDE = FLOATS

_UNARY = [
    _unary("Abs", WIDE + ("int64", "int32")),
    _unary("Neg", ALL_FLOATS + ("int64",)),
    _unary("Exp", ALL_FLOATS),
    _unary("Log", WIDE, 0.1, 5.0),
    _unary("Sqrt", ALL_FLOATS, 0.0, 5.0),
    _unary("Reciprocal", WIDE, 0.5, 3.0),
    _unary("Sin", WIDE),
    _unary("Cos", WIDE),
    _unary("Tan", HALF, -1.0, 1.0),
    _unary("Asin", HALF, -0.99, 0.99),
    _unary("Acos", HALF, -0.99, 0.99),
    _unary("Atan", HALF),
    _unary("Sinh", HALF),
    _unary("Cosh", HALF),
    _unary("Asinh", HALF),
    _unary("Acosh", HALF, 1.0, 4.0),
    _unary("Atanh", HALF, -0.99, 0.99),
    _unary("Tanh", ALL_FLOATS),
    _unary("Sigmoid", ALL_FLOATS),
    _unary("Sigmoid", ("float32", "float64"), -60.0, 60.0),
    _unary("Relu", ALL_FLOATS + ("int32",)),
    _unary("Floor", WIDE),
    _unary("Ceil", WIDE),
    _unary("Round", WIDE, -4.0, 4.0),
    _unary("Sign", WIDE + ("int64",)),
    _unary("Erf", ("float32", "float16", "bfloat16"), -5.0, 5.0),
    _unary("Softplus", HALF, -30.0, 30.0),
    _unary("Softsign", HALF),
    _unary("Mish", ("float32",)),
    _unary("Gelu", ("float32", "float16", "bfloat16")),
    _unary("Gelu", HALF, approximate="tanh"),
    _unary("Elu", HALF, alpha=0.7),
    _unary("Selu", HALF),
    _unary("Celu", ("float32",), alpha=1.5),
    _unary("LeakyRelu", ("float32", "float16", "bfloat16"), alpha=0.2),
    _unary("HardSigmoid", HALF, alpha=0.3, beta=0.4),
    _unary("HardSwish", HALF),
    _unary("ThresholdedRelu", HALF, alpha=0.5),
    _unary("Identity", ALL_FLOATS + ("int64", "bool")),
    _unary("Not", ("bool",)),
    _unary("BitwiseNot", ("int32", "int64", "uint8")),
]

_SPECIAL_VALUES = np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 2.0], dtype=np.float32)

_PREDICATES = [
    Case("IsNaN", "IsNaN", lambda d: op("IsNaN", Tensor._from_array(_SPECIAL_VALUES.astype(d))), FLOATS),
    Case("IsInf", "IsInf", lambda d: op("IsInf", Tensor._from_array(_SPECIAL_VALUES.astype(d))), FLOATS),
    Case("IsInf_positive_only", "IsInf", lambda d: op("IsInf", Tensor._from_array(_SPECIAL_VALUES), detect_negative=0)),
]

_BINARY = [
    _binary("Add", ALL_FLOATS + ("int64", "int32")),
    _binary("Sub", FLOATS + ("int64",), ((2, 1, 4), (3, 1))),
    _binary("Mul", ALL_FLOATS + ("int64", "int32"), ((3, 4), ())),
    _binary("Div", ALL_FLOATS, low=0.5),
    _binary("Div", ("int64", "int32"), ((4, 6), (6,)), low=-9.0, high=9.0, name="Div_integers_truncate"),
    _binary("Pow", ("float32", "float64"), low=0.5, high=2.0),
    _binary("Mod", ("int64", "int32"), ((4, 6), (6,)), low=-9.0, high=9.0, name="Mod_integers_python_sign", fmod=0),
    _binary(
        "Mod",
        ("float32", "float64", "int64"),
        ((4, 6), (6,)),
        low=-9.0,
        high=9.0,
        name="Mod_fmod_dividend_sign",
        fmod=1,
    ),
    _binary("Max", ALL_FLOATS + ("int64",)),
    _binary("Min", FLOATS + ("int64",), ((2, 3, 4), (3, 1))),
    _binary("PRelu", HALF),
    _binary("Equal", FLOATS + ("int64", "bool")),
    _binary("Less", FLOATS + ("int64",)),
    _binary("Greater", FLOATS + ("int32",)),
    _binary("LessOrEqual", ("float32", "int64")),
    _binary("GreaterOrEqual", ("float32", "int64")),
    _binary("And", ("bool",)),
    _binary("Or", ("bool",)),
    _binary("Xor", ("bool",)),
    Case(
        "Pow_integer_base",
        "Pow",
        lambda d: op("Pow", make((3, 4), d, -4, 5, 1), make((3, 4), d, 0, 4, 2)),
        ("int64", "int32"),
    ),
    Case(
        "Max_three_inputs",
        "Max",
        lambda d: op("Max", make((2, 3), d, seed=1), make((3,), d, seed=2), make((2, 1), d, seed=3)),
    ),
    Case("Min_one_input", "Min", lambda d: op("Min", make((2, 3), d))),
    Case(
        "Sum_three_inputs",
        "Sum",
        lambda d: op("Sum", make((2, 3), d, seed=1), make((3,), d, seed=2), make((2, 1), d, seed=3)),
        ("float32", "float64"),  # ONNX's Sum takes floating types only
    ),
    Case("Mean_two_inputs", "Mean", lambda d: op("Mean", make((2, 3), d, seed=1), make((3,), d, seed=2))),
]

_FRACTIONS = np.array([[-2.7, -0.5, 0.0], [0.4, 1.9, 2.5]], dtype=np.float32)


def _where(d):
    return op("Where", make((3, 1), "bool", seed=1), make((1, 4), d, seed=2), make((3, 4), d, seed=3))


def _bound(value, d):
    return None if value is None else Tensor._from_array(np.array(value).astype(_dtype(d).numpy_dtype))


def _clip(d, low, high):
    return op("Clip", make((3, 4), d, -5, 5), _bound(low, d), _bound(high, d))


def _cast(source, target):
    def build(d):
        if source == "bool":
            x = make((3, 4), "bool")
        elif source.startswith("int"):
            x = make((3, 4), source, -9, 9)
        else:
            x = Tensor._from_array(_FRACTIONS.astype(_dtype(source).numpy_dtype))
        return op("Cast", x, to=_dtype(target))

    return Case(f"Cast_{source}_to_{target}", "Cast", build)


def _dtype(name):
    from onnxnn.ir.dtypes import as_dtype

    return as_dtype(name)


_MISC = [
    Case("Where_broadcast", "Where", _where, ALL_FLOATS + ("int64", "uint8")),
    Case("Clip_both", "Clip", lambda d: _clip(d, -1, 2), FLOATS + ("int64",)),
    Case("Clip_min_only", "Clip", lambda d: _clip(d, 0, None), ("float32", "int64")),
    Case("Clip_max_only", "Clip", lambda d: _clip(d, None, 1), ("float32",)),
    Case("Clip_min_above_max", "Clip", lambda d: _clip(d, 2, 1), ("float32",)),
    Case("Clip_no_bounds", "Clip", lambda d: op("Clip", make((3, 4), d))),
    _cast("float32", "int64"),
    _cast("float32", "int32"),
    _cast("float32", "bool"),
    _cast("bool", "float32"),
    _cast("float32", "float16"),
    _cast("float32", "bfloat16"),
    _cast("bfloat16", "float32"),
    _cast("float64", "float32"),
    _cast("int64", "float64"),
    _cast("int64", "int32"),
    _cast("float16", "int64"),
    _cast("int32", "bool"),
    _cast("bfloat16", "int64"),
]


def _reduce(op_type, dtypes=FLOATS, low=-3.0, high=3.0):
    shape = (3, 4, 5)
    return [
        Case(f"{op_type}_axis1_keepdims", op_type, lambda d: op(op_type, make(shape, d, low, high), ints([1])), dtypes),
        Case(
            f"{op_type}_axes_neg_dropped",
            op_type,
            lambda d: op(op_type, make(shape, d, low, high), ints([-1, 0]), keepdims=0),
            dtypes,
        ),
        Case(f"{op_type}_all", op_type, lambda d: op(op_type, make(shape, d, low, high), keepdims=0), dtypes[:1]),
        Case(
            f"{op_type}_noop_with_empty_axes",
            op_type,
            lambda d: op(op_type, make(shape, d, low, high), noop_with_empty_axes=1),
            dtypes[:1],
        ),
        # Over no elements (ONNX leaves ReduceMean's undefined; both give onnxruntime's 0).
        Case(f"{op_type}_empty_axis", op_type, lambda d: op(op_type, make((3, 0, 5), d, low, high), ints([1])), dtypes),
    ]


_REDUCE = (
    _reduce("ReduceSum", ALL_FLOATS + ("int64", "int32"))
    + _reduce("ReduceMean", ALL_FLOATS)
    + _reduce("ReduceMax", FLOATS + ("int64",))
    + _reduce("ReduceMin", FLOATS + ("int32",))
    + _reduce("ReduceProd", ("float32", "float64", "int64"), 0.5, 1.5)
    + _reduce("ReduceL1")
    + _reduce("ReduceL2", ("float32", "float64"))
    + _reduce("ReduceSumSquare")
    + _reduce("ReduceLogSum", ("float32", "float64"), 0.1, 2.0)
    + _reduce("ReduceLogSumExp", ("float32", "float64"), -50.0, 50.0)
)

_ARG = [
    Case(
        f"{name}_{variant}",
        name,
        lambda d, name=name, attrs=attrs: op(name, make((4, 6), d, -2, 2), **attrs),
        ("float32", "int64"),
    )
    for name in ("ArgMax", "ArgMin")
    for variant, attrs in [
        ("axis0", {}),
        ("axis1_dropped", {"axis": 1, "keepdims": 0}),
        ("last_index_of_ties", {"axis": -1, "select_last_index": 1}),
    ]
]

_SHAPE = [
    Case(
        "Reshape_zero_copies_and_minus_one",
        "Reshape",
        lambda d: op("Reshape", make((2, 3, 4), d), ints([0, -1])),
        ("float32", "bfloat16", "int64", "bool"),
    ),
    Case("Reshape_allowzero", "Reshape", lambda d: op("Reshape", make((2, 0, 4), d), ints([0, 4, 2]), allowzero=1)),
    Case("Flatten_axis0", "Flatten", lambda d: op("Flatten", make((2, 3, 4), d), axis=0)),
    Case("Flatten_axis2", "Flatten", lambda d: op("Flatten", make((2, 3, 4), d), axis=2), ("float32", "int64")),
    Case("Flatten_negative_axis", "Flatten", lambda d: op("Flatten", make((2, 3, 4), d), axis=-1)),
    Case(
        "Transpose_perm",
        "Transpose",
        lambda d: op("Transpose", make((2, 3, 4), d), perm=[1, 2, 0]),
        ("float32", "float16", "int64"),
    ),
    Case("Transpose_default_reverses", "Transpose", lambda d: op("Transpose", make((2, 3, 4), d))),
    Case("Squeeze_axes", "Squeeze", lambda d: op("Squeeze", make((1, 3, 1, 2), d), ints([0, -2]))),
    Case("Squeeze_all", "Squeeze", lambda d: op("Squeeze", make((1, 3, 1, 2), d))),
    Case(
        "Unsqueeze_negative",
        "Unsqueeze",
        lambda d: op("Unsqueeze", make((3, 2), d), ints([0, -1])),
        ("float32", "bool"),
    ),
    Case(
        "Expand_bidirectional", "Expand", lambda d: op("Expand", make((3, 1), d), ints([2, 1, 4])), ("float32", "int64")
    ),
    Case("Tile", "Tile", lambda d: op("Tile", make((2, 3), d), ints([2, 3])), ("float32", "int64")),
    Case(
        "Concat_negative_axis",
        "Concat",
        lambda d: op("Concat", make((2, 3), d, seed=1), make((2, 1), d, seed=2), make((2, 2), d, seed=3), axis=-1),
        ("float32", "float16", "int64", "bool"),
    ),
    Case("Split_sizes", "Split", lambda d: op("Split", make((6, 4), d), ints([1, 2, 3])), ("float32", "int64")),
    Case("Split_num_outputs_uneven", "Split", lambda d: op("Split", make((3, 5), d), axis=1, num_outputs=3)),
    Case("Slice_basic", "Slice", lambda d: op("Slice", make((5, 6), d), ints([1, 0]), ints([4, 5]))),
    Case(
        "Slice_negative_step_clamped",
        "Slice",
        lambda d: op("Slice", make((5, 6), d), ints([-1, 100]), ints([-100, 0]), ints([0, 1]), ints([-2, -1])),
        ("float32", "int64"),
    ),
    Case(
        "Slice_steps_beyond_end",
        "Slice",
        lambda d: op("Slice", make((5, 6), d), ints([1]), ints([1000]), ints([-1]), ints([2])),
    ),
    Case(
        "Pad_constant",
        "Pad",
        lambda d: op(
            "Pad", make((2, 3), d), ints([0, 1, 2, 0]), Tensor._from_array(np.array(1.5, _dtype(d).numpy_dtype))
        ),
        ("float32", "float64"),
    ),
    Case("Pad_reflect", "Pad", lambda d: op("Pad", make((3, 4), d), ints([1, 2, 1, 2]), mode="reflect")),
    Case(
        "Pad_edge", "Pad", lambda d: op("Pad", make((3, 4), d), ints([2, 0, 0, 3]), mode="edge"), ("float32", "int64")
    ),
    Case("Pad_negative_crops", "Pad", lambda d: op("Pad", make((4, 5), d), ints([-1, 1, 0, -2]))),
    Case("Shape", "Shape", lambda d: op("Shape", make((2, 3, 4), d))),
    Case("Shape_start_end", "Shape", lambda d: op("Shape", make((2, 3, 4), d), start=1, end=-1)),
]

ELEMENTWISE_AND_SHAPE_CASES = _UNARY + _PREDICATES + _BINARY + _MISC + _REDUCE + _ARG + _SHAPE
