"""Factories and conversions at their edges, as PyTorch 2.13 behaves: numbers that do not fit a dtype,
ranges whose step points away from the end, integer ``linspace``/``logspace``, and ``to``'s copy."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn

OVERFLOWS = [
    ("int8 from a large int", lambda: onnxnn.tensor([300], dtype=onnxnn.int8)),
    ("uint8 from a negative float", lambda: onnxnn.tensor([-0.5], dtype=onnxnn.uint8)),
    ("int8 from a float just past the range", lambda: onnxnn.tensor([127.9], dtype=onnxnn.int8)),
    ("int64 from NaN", lambda: onnxnn.tensor([float("nan")], dtype=onnxnn.int64)),
    ("int32 from inf", lambda: onnxnn.tensor([float("inf")], dtype=onnxnn.int32)),
    ("full int32", lambda: onnxnn.full((2,), 1e10, dtype=onnxnn.int32)),
    ("full float16", lambda: onnxnn.full((2,), 2**40, dtype=onnxnn.float16)),
    ("full_like int32 with inf", lambda: onnxnn.full_like(onnxnn.zeros(2, dtype=onnxnn.int32), float("inf"))),
]


@pytest.mark.parametrize("name, program", OVERFLOWS, ids=[case[0] for case in OVERFLOWS])
def test_numbers_that_do_not_fit_the_dtype_are_refused(name, program):
    with pytest.raises(RuntimeError, match="without overflow"):
        program()


@pytest.mark.parametrize("value", [2**63, [2**64], [2**63 - 1, 2**63]])  # the last: numpy makes float64
def test_python_ints_past_int64_are_refused(value):
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        onnxnn.tensor(value)


# What PyTorch accepts: a negative int into an unsigned dtype wraps, a float beyond float16 in a
# tensor() is inf, a numpy array converts as numpy casts, and the ends of each range fit.
ACCEPTED = [
    (lambda: onnxnn.tensor([-1], dtype=onnxnn.uint8), [255]),
    (lambda: onnxnn.full((2,), -1, dtype=onnxnn.uint8), [255, 255]),
    (lambda: onnxnn.tensor([127, -128], dtype=onnxnn.int8), [127, -128]),
    (lambda: onnxnn.tensor([70000.0], dtype=onnxnn.float16), [np.inf]),
    (lambda: onnxnn.tensor(np.array([300]), dtype=onnxnn.int8), [44]),
    (lambda: onnxnn.full((1,), float("inf"), dtype=onnxnn.float16), [np.inf]),
]


@pytest.mark.parametrize("program, expected", ACCEPTED)
def test_numbers_pytorch_converts(program, expected):
    np.testing.assert_array_equal(program().numpy(), expected)


def test_a_tensor_fill_is_read_as_a_number():
    assert onnxnn.full((2,), onnxnn.tensor(3.0, dtype=onnxnn.float64)).dtype == onnxnn.float32
    assert onnxnn.full((2,), onnxnn.tensor(3)).dtype == onnxnn.int64


@pytest.mark.parametrize(
    "arguments, message",
    [
        ((1, 0), "inconsistent with step sign"),
        ((-3,), "inconsistent with step sign"),
        ((0, 5, -1), "inconsistent with step sign"),
        ((0, float("inf")), "unsupported range"),
        ((0, float("nan")), "unsupported range"),
    ],
)
def test_arange_refuses_a_step_away_from_the_end(arguments, message):
    with pytest.raises(RuntimeError, match=message):
        onnxnn.arange(*arguments)


def test_arange_of_an_empty_range():
    assert onnxnn.arange(0, 0).shape == (0,)


# PyTorch converts the ends to the integer dtype first, then truncates each value.
INTEGER_SPACINGS = [
    (lambda: onnxnn.linspace(0.5, 2, 6, dtype=onnxnn.int64), [0, 0, 0, 1, 1, 2]),
    (lambda: onnxnn.linspace(-0.5, 2.7, 4, dtype=onnxnn.int32), [0, 0, 1, 2]),
    (lambda: onnxnn.linspace(2.9, -1.5, 5, dtype=onnxnn.int64), [2, 1, 0, 0, -1]),
    (lambda: onnxnn.linspace(0, 10, 4, dtype=onnxnn.int64), [0, 3, 6, 10]),
    (lambda: onnxnn.logspace(0.5, 2, 6, dtype=onnxnn.int64), [1, 2, 6, 15, 39, 100]),
    (lambda: onnxnn.logspace(0.5, 2.5, 3, base=2.0, dtype=onnxnn.int64), [1, 2, 4]),
]


@pytest.mark.parametrize("program, expected", INTEGER_SPACINGS)
def test_integer_linspace_and_logspace_compute_in_the_dtype(program, expected):
    np.testing.assert_array_equal(program().numpy(), expected)


@pytest.mark.parametrize(
    "convert",
    [
        lambda x: x.to(onnxnn.float32, copy=True),
        lambda x: x.to(copy=True),
        lambda x: x.to("cpu", copy=True),
        lambda x: x.to(x, copy=True),
    ],
    ids=["dtype", "nothing", "device", "like"],
)
def test_to_with_copy_makes_a_new_tensor(convert):
    x = onnxnn.tensor([1.0, 2.0, 3.0])
    y = convert(x)
    y.add_(10)
    assert y is not x
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0, 3.0])


def test_to_with_copy_passes_the_gradient():
    w = onnxnn.ones(2, requires_grad=True)
    (w.to(copy=True) * 3).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize("python_type, dtype", [(float, onnxnn.float64), (int, onnxnn.int64), (bool, onnxnn.bool)])
def test_python_types_name_dtypes_in_to(python_type, dtype):
    assert onnxnn.tensor([1.5]).to(python_type).dtype == dtype


def test_one_element_tensors_in_a_sequence_are_numbers():
    assert onnxnn.tensor([onnxnn.tensor([1.0]), onnxnn.tensor([2.0])]).shape == (2,)
    assert onnxnn.tensor([[onnxnn.tensor(1)], [onnxnn.tensor([2])]]).shape == (2, 1)
    assert onnxnn.tensor([onnxnn.tensor(1, dtype=onnxnn.int32)]).dtype == onnxnn.int32
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        onnxnn.tensor([onnxnn.tensor([1.0, 2.0])])


@pytest.mark.parametrize(
    "dtype, value, expected",
    [(onnxnn.uint8, -1, [255, 255]), (onnxnn.bool, 5, [True, True]), (onnxnn.int64, 0, [0, 0])],
)
def test_fill_converts_a_number_as_pytorch(dtype, value, expected):
    np.testing.assert_array_equal(onnxnn.zeros(2, dtype=dtype).fill_(value).numpy(), expected)


@pytest.mark.parametrize(
    "dtype, value",
    [(onnxnn.int8, 300), (onnxnn.int64, float("nan")), (onnxnn.int32, 1e10), (onnxnn.float16, 1e10)],
)
def test_fill_refuses_a_number_that_does_not_fit(dtype, value):
    x = onnxnn.zeros(2, dtype=dtype)
    with pytest.raises(RuntimeError, match="without overflow"):
        x.fill_(value)
    np.testing.assert_array_equal(x.numpy(), [0, 0])  # left as it was


@pytest.mark.parametrize(
    "program, message",
    [
        (lambda: onnxnn.zeros(), 'missing 1 required positional arguments: "size"'),
        (lambda: onnxnn.zeros(2.0), "must be tuple of ints, not float"),
        (lambda: onnxnn.ones(True), "must be tuple of ints, not bool"),
        (lambda: onnxnn.empty(onnxnn.tensor(2.0)), "must be tuple of ints, not Tensor"),
        (lambda: onnxnn.randn(2, 1.5), "must be tuple of ints, not float"),
        # full takes its size as one sequence, never as an int (zeros(3) is zeros(*size))
        (lambda: onnxnn.full(3, 1.0), r"full\(\): argument 'size' \(position 1\) must be tuple of ints, not int"),
        (lambda: onnxnn.full(size=3, fill_value=1.0), "must be tuple of ints, not int"),
        (lambda: onnxnn.full(np.int64(3), 1.0), "must be tuple of ints, not int64"),
        (lambda: onnxnn.full(onnxnn.tensor(3), 1.0), "must be tuple of ints, not Tensor"),
    ],
)
def test_sizes_take_ints_only(program, message):
    with pytest.raises(TypeError, match=message):
        program()


def test_sizes_take_numpy_and_one_element_integer_tensors():
    assert onnxnn.zeros(np.int64(2), onnxnn.tensor(3)).shape == (2, 3)
    assert onnxnn.zeros(()).shape == ()


# PyTorch's dtype= takes a dtype or a Python type, never a number: onnxnn's as_dtype would read 5 as
# ONNX's element type 5 (int16) where torch's ScalarType 5 is float16.
DTYPE_NUMBERS = [
    ("zeros", lambda dtype: onnxnn.zeros(2, dtype=dtype)),
    ("ones", lambda dtype: onnxnn.ones(2, dtype=dtype)),
    ("empty", lambda dtype: onnxnn.empty(2, dtype=dtype)),
    ("full", lambda dtype: onnxnn.full((2,), 1.0, dtype=dtype)),
    ("tensor", lambda dtype: onnxnn.tensor([1], dtype=dtype)),
    ("as_tensor", lambda dtype: onnxnn.as_tensor(onnxnn.ones(2), dtype=dtype)),
    ("asarray", lambda dtype: onnxnn.asarray(onnxnn.ones(2), dtype=dtype)),
    ("arange", lambda dtype: onnxnn.arange(3, dtype=dtype)),
    ("linspace", lambda dtype: onnxnn.linspace(0, 1, 3, dtype=dtype)),
    ("logspace", lambda dtype: onnxnn.logspace(0, 1, 3, dtype=dtype)),
    ("eye", lambda dtype: onnxnn.eye(2, dtype=dtype)),
    ("randn", lambda dtype: onnxnn.randn(2, dtype=dtype)),
    ("rand", lambda dtype: onnxnn.rand(2, dtype=dtype)),
    ("randint", lambda dtype: onnxnn.randint(3, (2,), dtype=dtype)),
    ("randperm", lambda dtype: onnxnn.randperm(3, dtype=dtype)),
    ("zeros_like", lambda dtype: onnxnn.zeros_like(onnxnn.ones(2), dtype=dtype)),
    ("ones_like", lambda dtype: onnxnn.ones_like(onnxnn.ones(2), dtype=dtype)),
    ("empty_like", lambda dtype: onnxnn.empty_like(onnxnn.ones(2), dtype=dtype)),
    ("full_like", lambda dtype: onnxnn.full_like(onnxnn.ones(2), 1.0, dtype=dtype)),
    ("randn_like", lambda dtype: onnxnn.randn_like(onnxnn.ones(2), dtype=dtype)),
    ("rand_like", lambda dtype: onnxnn.rand_like(onnxnn.ones(2), dtype=dtype)),
    ("randint_like", lambda dtype: onnxnn.randint_like(onnxnn.ones(2), 3, dtype=dtype)),
    ("hann_window", lambda dtype: onnxnn.hann_window(4, dtype=dtype)),
    # The Tensor methods that take a dtype, each in its own name.
    ("new_tensor", lambda dtype: onnxnn.ones(2).new_tensor([1], dtype=dtype)),
    ("new_full", lambda dtype: onnxnn.ones(2).new_full((2,), 1.0, dtype=dtype)),
    ("new_zeros", lambda dtype: onnxnn.ones(2).new_zeros(3, dtype=dtype)),
    ("new_ones", lambda dtype: onnxnn.ones(2).new_ones(3, dtype=dtype)),
    ("new_empty", lambda dtype: onnxnn.ones(2).new_empty(3, dtype=dtype)),
    ("to", lambda dtype: onnxnn.ones(2).to(dtype=dtype)),
]


@pytest.mark.parametrize("number, type_name", [(5, "int"), (np.int64(5), "int64"), (True, "bool")])
@pytest.mark.parametrize("function, program", DTYPE_NUMBERS, ids=[case[0] for case in DTYPE_NUMBERS])
def test_factories_refuse_a_number_as_dtype(function, program, number, type_name):
    with pytest.raises(TypeError, match=rf"{function}\(\): argument 'dtype' must be onnxnn.dtype, not {type_name}"):
        program(number)


@pytest.mark.parametrize("function, program", DTYPE_NUMBERS, ids=[case[0] for case in DTYPE_NUMBERS])
def test_factories_take_python_types_as_dtype(function, program):
    assert program(float).dtype == onnxnn.float64
    assert onnxnn.zeros(2, dtype=int).dtype == onnxnn.int64 and onnxnn.zeros(2, dtype=bool).dtype == onnxnn.bool
