"""``onnxnn.testing.assert_close``: PyTorch's closeness rule, default tolerances per dtype, its walk
through sequences and mappings, its error types and its messages (values computed here with numpy)."""

from __future__ import annotations

import collections
import re

import ml_dtypes
import numpy as np
import pytest

import onnxnn
from onnxnn.testing import assert_close

# PyTorch's documented defaults, (rtol, atol).
DEFAULTS = {
    onnxnn.float16: (1e-3, 1e-5),
    onnxnn.bfloat16: (1.6e-2, 1e-5),
    onnxnn.float32: (1.3e-6, 1e-5),
    onnxnn.float64: (1e-7, 1e-7),
}
NUMPY = {
    onnxnn.float16: np.float16,
    onnxnn.bfloat16: ml_dtypes.bfloat16,
    onnxnn.float32: np.float32,
    onnxnn.float64: np.float64,
}


@pytest.mark.parametrize("dtype", list(DEFAULTS), ids=lambda d: d.name)
def test_default_tolerances_per_dtype(dtype):
    rtol, atol = DEFAULTS[dtype]
    kind = NUMPY[dtype]
    one = kind(1.0)
    # One ulp above 1 is within atol + rtol for every floating dtype; three allowances above is not
    # (rounding to the dtype moves it by half an ulp at most, less than one allowance).
    neighbour = np.nextafter(one, kind(2.0))
    far = kind(1.0 + 3 * (atol + rtol))
    assert float(neighbour) - 1.0 <= atol + rtol
    assert_close(onnxnn.tensor([float(neighbour)], dtype=dtype), onnxnn.tensor([1.0], dtype=dtype))
    with pytest.raises(AssertionError, match=rf"up to {rtol} allowed"):
        assert_close(onnxnn.tensor([float(far)], dtype=dtype), onnxnn.tensor([1.0], dtype=dtype))


def test_mismatch_message_counts_elements_and_locates_the_greatest_differences():
    actual = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    expected = actual.copy()
    expected[1, 0] = 4.5  # absolute 0.5, relative 0.5 / 4.5
    expected[0, 2] = 3.25  # absolute 0.25, relative 0.25 / 3.25
    with pytest.raises(AssertionError) as error:
        assert_close(onnxnn.tensor(actual), onnxnn.tensor(expected))
    abs_diff = np.abs(actual - expected)
    rel_diff = abs_diff / np.abs(expected)
    assert str(error.value) == (
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 2 / 6 (33.3%)\n"
        f"Greatest absolute difference: {abs_diff[1, 0].item()} at index (1, 0) (up to 1e-05 allowed)\n"
        f"Greatest relative difference: {rel_diff[1, 0].item()} at index (1, 0) (up to 1.3e-06 allowed)"
    )


def test_integer_tensors_compare_exactly_and_report_int_differences():
    with pytest.raises(AssertionError) as error:
        assert_close(onnxnn.tensor([200, 1], dtype=onnxnn.uint8), onnxnn.tensor([5, 1], dtype=onnxnn.uint8))
    # The difference in int64 (195, not uint8's wrapped value), its ratio in float32, no tolerances shown.
    assert str(error.value) == (
        "Tensor-likes are not equal!\n\n"
        "Mismatched elements: 1 / 2 (50.0%)\n"
        "Greatest absolute difference: 195 at index (0,)\n"
        f"Greatest relative difference: {(np.float32(195) / np.float32(5)).item()} at index (0,)"
    )


def test_zero_dimensional_tensors_and_python_scalars_get_the_scalar_message():
    with pytest.raises(AssertionError) as error:
        assert_close(onnxnn.tensor(1.0), onnxnn.tensor(2.0))
    assert str(error.value) == (
        "Scalars are not close!\n\nExpected 2.0 but got 1.0.\n"
        "Absolute difference: 1.0 (up to 1e-05 allowed)\nRelative difference: 0.5 (up to 1.3e-06 allowed)"
    )
    with pytest.raises(AssertionError) as error:
        assert_close(1e-9, 1e-10, rtol=0, atol=0)
    assert str(error.value) == (
        f"Scalars are not equal!\n\nExpected 1e-10 but got 1e-09.\nAbsolute difference: {1e-9 - 1e-10}\n"
        f"Relative difference: {(1e-9 - 1e-10) / 1e-10}"
    )


@pytest.mark.parametrize(
    "actual, expected, equal_nan, close",
    [
        ([float("nan")], [float("nan")], False, False),
        ([float("nan")], [float("nan")], True, True),
        ([float("inf")], [float("inf")], False, True),
        ([float("inf")], [float("-inf")], False, False),
        ([0.0], [-0.0], False, True),
    ],
)
def test_nan_and_infinities(actual, expected, equal_nan, close):
    check = lambda: assert_close(onnxnn.tensor(actual), onnxnn.tensor(expected), equal_nan=equal_nan)  # noqa: E731
    if close:
        check()
    else:
        with pytest.raises(AssertionError):
            check()


def test_a_nan_mismatch_is_the_greatest_difference():
    with pytest.raises(AssertionError, match=r"Greatest absolute difference: nan at index \(1,\)"):
        assert_close(onnxnn.tensor([1.0, float("nan"), 5.0]), onnxnn.tensor([2.0, 0.0, 5.0]))


@pytest.mark.parametrize(
    "actual, expected",
    [
        ((1.0, onnxnn.tensor([2.0]), np.array(3.0)), [1.0, onnxnn.tensor([2.0]), np.array(3.0)]),
        (collections.OrderedDict(a=1.0, b=onnxnn.tensor([2.0])), {"b": onnxnn.tensor([2.0]), "a": 1.0}),
        ({"a": [1, {"b": True}]}, {"a": (1, {"b": np.bool_(True)})}),
        (np.float32(0.5), 0.5),  # a numpy scalar compares as the Python float it holds
        (None, None),
        (onnxnn.nn.Parameter(onnxnn.ones(2)), onnxnn.ones(2)),  # directly related types
    ],
)
def test_close_structures(actual, expected):
    assert_close(actual, expected)


def test_nested_failure_names_the_item():
    actual = {"a": [1.0, {"b": onnxnn.tensor([1.0, 2.0])}]}
    expected = {"a": [1.0, {"b": onnxnn.tensor([1.0, 5.0])}]}
    with pytest.raises(AssertionError) as error:
        assert_close(actual, expected)
    assert str(error.value).endswith("\n\nThe failure occurred for item ['a'][1]['b']")


@pytest.mark.parametrize(
    "actual, expected, error, message",
    [
        ([1.0, 2.0], [1.0], AssertionError, "The length of the sequences mismatch: 2 != 1"),
        (
            {"a": 1, "b": 2},
            {"a": 1, "c": 2},
            AssertionError,
            "The keys of the mappings do not match:\nMissing keys in the actual mapping: ['c']\n"
            "Additional keys in the actual mapping: ['b']",
        ),
        (onnxnn.tensor([1.0]), np.array([1.0], np.float32), TypeError, "No comparison pair was able to handle"),
        (onnxnn.tensor([1.0]), [1.0], TypeError, "No comparison pair was able to handle"),
        ("a", "a", TypeError, "No comparison pair was able to handle inputs of type <class 'str'>"),
        (None, 1, AssertionError, "None mismatch: None is not 1"),
        (True, False, AssertionError, "Booleans mismatch: True is not False"),
        (1.0, 1, AssertionError, "The (d)types do not match: <class 'float'> != <class 'int'>."),
        (
            onnxnn.tensor([1.0]),
            onnxnn.tensor([1.0, 2.0]),
            AssertionError,
            "The values for attribute 'shape' do not match: onnxnn.Size([1]) != onnxnn.Size([2]).",
        ),
        (
            onnxnn.tensor([1.0]),
            onnxnn.tensor([1.0], dtype=onnxnn.float64),
            AssertionError,
            "The values for attribute 'dtype' do not match: onnxnn.float32 != onnxnn.float64.",
        ),
    ],
)
def test_structure_type_and_attribute_errors(actual, expected, error, message):
    with pytest.raises(error) as raised:
        assert_close(actual, expected)
    assert str(raised.value).startswith(message)


def test_allow_subclasses_false_needs_the_same_type():
    with pytest.raises(TypeError, match="No comparison pair"):
        assert_close(onnxnn.nn.Parameter(onnxnn.ones(2)), onnxnn.ones(2), allow_subclasses=False)


@pytest.mark.parametrize("given", [{"rtol": 0.1}, {"atol": 0.1}])
def test_rtol_and_atol_go_together(given):
    missing = "atol" if "rtol" in given else "rtol"
    with pytest.raises(
        ValueError, match=f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}"
    ):
        assert_close(onnxnn.tensor([1.0]), onnxnn.tensor([1.0]), **given)


def test_without_check_dtype_values_compare_in_the_promoted_dtype():
    assert_close(1.0, 1, check_dtype=False)
    assert_close(onnxnn.tensor([1, 2]), onnxnn.tensor([1.0, 2.0]), check_dtype=False)
    # int64 and float32 promote to float32: the difference is float32's.
    with pytest.raises(
        AssertionError, match=re.escape(f"Greatest relative difference: {np.float32(0.5 / 2.5).item()}")
    ):
        assert_close(onnxnn.tensor([1, 2]), onnxnn.tensor([1.0, 2.5]), check_dtype=False)


def test_explicit_tolerances_are_reported():
    assert_close(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([1.05, 2.0]), rtol=0.0, atol=0.1)
    with pytest.raises(AssertionError, match=r"\(up to 0\.01 allowed\)"):
        assert_close(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([1.05, 2.0]), rtol=0.0, atol=0.01)


@pytest.mark.parametrize("msg", ["custom message", lambda generated: "prefix: " + generated])
def test_msg_replaces_or_rewrites_the_message(msg):
    with pytest.raises(AssertionError) as error:
        assert_close(onnxnn.tensor([1.0]), onnxnn.tensor([2.0]), msg=msg)
    if isinstance(msg, str):
        assert str(error.value) == msg
    else:
        assert str(error.value).startswith("prefix: Tensor-likes are not close!")


def test_numpy_arrays_and_tensors_that_require_grad():
    assert_close(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    assert_close(x * 1, x.detach())
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        assert_close(np.array([1, 2]), np.array([1, 3]))


@pytest.mark.skipif(not onnxnn.cuda.is_available(), reason="needs a GPU (onnxnn.cuda.is_available() is False)")
def test_devices_must_match_unless_check_device_is_off():
    on_gpu = onnxnn.tensor([1.0, 2.0], device="cuda")
    with pytest.raises(AssertionError, match="The values for attribute 'device' do not match"):
        assert_close(on_gpu, onnxnn.tensor([1.0, 2.0]))
    assert_close(on_gpu, onnxnn.tensor([1.0, 2.0]), check_device=False)
