"""``onnxnn.finfo`` and ``onnxnn.iinfo``: each dtype's limits, from its bit layout, with PyTorch's
attributes, repr and refusals."""

from __future__ import annotations

import pytest

import onnxnn

# (dtype, bits, significand bits after the point, largest exponent, smallest normal exponent, decimal digits)
FLOATS = [
    (onnxnn.float16, 16, 10, 15, -14, 3),
    (onnxnn.bfloat16, 16, 7, 127, -126, 2),
    (onnxnn.float32, 32, 23, 127, -126, 6),
    (onnxnn.float64, 64, 52, 1023, -1022, 15),
]


@pytest.mark.parametrize("dtype, bits, significand, largest, smallest, digits", FLOATS, ids=[f[0].name for f in FLOATS])
def test_finfo_follows_the_bit_layout(dtype, bits, significand, largest, smallest, digits):
    info = onnxnn.finfo(dtype)
    assert info.bits == bits
    assert info.eps == 2.0**-significand
    assert info.max == (2 - 2.0**-significand) * 2.0**largest == -info.min
    assert info.tiny == info.smallest_normal == 2.0**smallest
    assert info.resolution == 10.0**-digits
    assert info.dtype == dtype.name
    assert all(type(getattr(info, name)) is float for name in ("eps", "max", "min", "tiny", "resolution"))


# (dtype, bits, min, max)
INTEGERS = [
    (onnxnn.uint8, 8, 0, 2**8 - 1),
    (onnxnn.int8, 8, -(2**7), 2**7 - 1),
    (onnxnn.int16, 16, -(2**15), 2**15 - 1),
    (onnxnn.int32, 32, -(2**31), 2**31 - 1),
    (onnxnn.int64, 64, -(2**63), 2**63 - 1),
    (onnxnn.uint16, 16, 0, 2**16 - 1),
    (onnxnn.uint32, 32, 0, 2**32 - 1),
    (onnxnn.uint64, 64, 0, 2**64 - 1),
]


@pytest.mark.parametrize("dtype, bits, low, high", INTEGERS, ids=[i[0].name for i in INTEGERS])
def test_iinfo_follows_the_bit_layout(dtype, bits, low, high):
    info = onnxnn.iinfo(dtype)
    assert (info.bits, info.min, info.max, info.dtype) == (bits, low, high, dtype.name)
    assert type(info.max) is int and type(info.min) is int


def test_finfo_defaults_to_the_default_dtype_and_compares_by_dtype():
    assert onnxnn.finfo() == onnxnn.finfo(onnxnn.float32) != onnxnn.finfo(onnxnn.float64)
    previous = onnxnn.get_default_dtype()
    onnxnn.set_default_dtype(onnxnn.float64)
    try:
        assert onnxnn.finfo().dtype == "float64"
    finally:
        onnxnn.set_default_dtype(previous)
    with pytest.raises(TypeError, match="unhashable"):
        hash(onnxnn.finfo())


@pytest.mark.parametrize(
    "info, expected",
    [
        (
            onnxnn.finfo(onnxnn.float32),
            "finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, "
            "smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)",
        ),
        (onnxnn.iinfo(onnxnn.int8), "iinfo(min=-128, max=127, dtype=int8)"),
        (onnxnn.iinfo(onnxnn.int64), "iinfo(min=-9.22337e+18, max=9.22337e+18, dtype=int64)"),
    ],
)
def test_repr_is_pytorchs(info, expected):
    assert repr(info) == expected


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: onnxnn.finfo(onnxnn.int32), r"requires a floating point input type"),
        (lambda: onnxnn.finfo(onnxnn.bool), r"requires a floating point input type"),
        (lambda: onnxnn.iinfo(onnxnn.float32), r"requires an integer input type"),
        (lambda: onnxnn.iinfo(onnxnn.bool), r"onnxnn.bool is not supported by onnxnn.iinfo"),
        (lambda: onnxnn.finfo(3), r"argument 'type' \(position 1\) must be onnxnn.dtype, not int"),
        (lambda: onnxnn.iinfo("int8"), r"must be onnxnn.dtype, not str"),
    ],
)
def test_refusals_are_type_errors(make, message):
    with pytest.raises(TypeError, match=message):
        make()
