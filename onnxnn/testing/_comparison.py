"""``assert_close``: PyTorch's ``torch.testing.assert_close`` over onnxnn tensors, numpy arrays and scalars.

The inputs are walked together: sequences (not strings) element by element, mappings key by key,
and each pair of leaves is compared by the first comparison that takes it: ``None`` with ``None``,
booleans, Python and numpy numbers, tensor-likes (onnxnn tensors, numpy arrays) of directly related
types. Structure errors (lengths, keys, types no comparison takes, a lone ``rtol``/``atol``) raise at
once; then the pairs are compared in order and the first failure raises, naming the item where it
happened. Tensor values are read on the host and compared with numpy in their (promoted) dtype,
which is how PyTorch's CPU ``isclose`` computes, so the reported differences are PyTorch's numbers.
"""

from __future__ import annotations

import cmath
import collections.abc
from typing import Any, Callable, NoReturn, Union

import numpy as np

from ..ir import dtypes as _dtypes
from ..ir.device import CPU
from ..runtime.tensor import Size, Tensor

__all__ = ["assert_close", "default_tolerances"]

Message = Union[str, Callable[[str], str], None]

# PyTorch's defaults per dtype, (rtol, atol); other dtypes compare exactly. With two dtypes the
# looser of each is used.
_DTYPE_PRECISIONS = {
    _dtypes.float16: (0.001, 1e-5),
    _dtypes.bfloat16: (0.016, 1e-5),
    _dtypes.float32: (1.3e-6, 1e-5),
    _dtypes.float64: (1e-7, 1e-7),
}
# Python numbers compare with the tolerances of the dtype a tensor of them gets; "complex128" has
# no onnxnn dtype, so its precision (PyTorch's, that of float64) is written out.
_NUMBER_PRECISIONS = {int: (0.0, 0.0), float: _DTYPE_PRECISIONS[_dtypes.float64], complex: (1e-7, 1e-7)}
_DTYPE_OF_NUMPY = {np.dtype(d.numpy_dtype): d for d in _dtypes.ALL_DTYPES}


class _Failure(Exception):
    """A comparison's verdict: the exception type and message to raise, and the item it concerns."""

    def __init__(self, kind: type[Exception], message: str, item: tuple = ()):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.item = item

    def to_error(self, msg: Message = None) -> Exception:
        if isinstance(msg, str):
            return self.kind(msg)
        message = self.message
        if self.item:
            message += "\n\nThe failure occurred for item " + "".join(str([key]) for key in self.item)
        return self.kind(msg(message) if callable(msg) else message)


class _Unsupported(Exception):
    """Raised by a comparison that does not take the given pair of inputs (the next one is tried)."""


def default_tolerances(*dtypes: _dtypes.dtype) -> tuple[float, float]:
    """The default ``(rtol, atol)`` for comparing values of ``dtypes``: the loosest of each over them."""
    rtols, atols = zip(*[_DTYPE_PRECISIONS.get(dtype, (0.0, 0.0)) for dtype in dtypes])
    return max(rtols), max(atols)


def _tolerances(rtol, atol, defaults: tuple[float, float], item: tuple) -> tuple[float, float]:
    if (rtol is None) != (atol is None):
        # Both or neither: atol=0 alone would still let rtol's default pass values the caller meant to refuse.
        missing = "rtol" if rtol is None else "atol"
        raise _Failure(
            ValueError, f"Both 'rtol' and 'atol' must be either specified or omitted, but got no {missing}.", item
        )
    if rtol is not None:
        return rtol, atol
    return defaults


def _mismatch_message(
    what: str, abs_diff, rel_diff, rtol: float, atol: float, extra: str, abs_index=None, rel_index=None
) -> str:
    equality = rtol == 0 and atol == 0
    lines = [f"{what} are not {'equal' if equality else 'close'}!", "", extra]
    for kind, diff, index, tolerance in (
        ("absolute", abs_diff, abs_index, atol),
        ("relative", rel_diff, rel_index, rtol),
    ):
        line = (
            f"{kind.title()} difference: {diff}"
            if index is None
            else f"Greatest {kind} difference: {diff} at index {index}"
        )
        if not equality:
            line += f" (up to {tolerance} allowed)"
        lines.append(line)
    return "\n".join(lines)


def _scalar_mismatch(actual, expected, rtol: float, atol: float) -> str:
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _mismatch_message("Scalars", abs_diff, rel_diff, rtol, atol, f"Expected {expected} but got {actual}.")


# ---------------------------------------------------------------------------------------- pairs
class _NonePair:
    def __init__(self, actual, expected, item: tuple, options: dict):
        if actual is not None and expected is not None:
            raise _Unsupported
        self.actual, self.expected, self.item = actual, expected, item

    def compare(self) -> None:
        if not (self.actual is None and self.expected is None):
            raise _Failure(AssertionError, f"None mismatch: {self.actual} is not {self.expected}", self.item)


class _BooleanPair:
    def __init__(self, actual, expected, item: tuple, options: dict):
        if not all(isinstance(value, (bool, np.bool_)) for value in (actual, expected)):
            raise _Unsupported
        self.actual, self.expected, self.item = bool(actual), bool(expected), item

    def compare(self) -> None:
        if self.actual is not self.expected:
            raise _Failure(AssertionError, f"Booleans mismatch: {self.actual} is not {self.expected}", self.item)


class _NumberPair:
    def __init__(self, actual, expected, item: tuple, options: dict):
        if not all(isinstance(value, (int, float, complex, np.number)) for value in (actual, expected)):
            raise _Unsupported
        # numpy scalars compare as the Python numbers they hold (a float32 as a float).
        self.actual = actual.item() if isinstance(actual, np.number) else actual
        self.expected = expected.item() if isinstance(expected, np.number) else expected
        self.item = item
        kinds = [_number_kind(value) for value in (self.actual, self.expected)]
        loosest = (
            max(_NUMBER_PRECISIONS[kind][0] for kind in kinds),
            max(_NUMBER_PRECISIONS[kind][1] for kind in kinds),
        )
        self.rtol, self.atol = _tolerances(options["rtol"], options["atol"], loosest, item)
        self.equal_nan = options["equal_nan"]
        self.check_dtype = options["check_dtype"]

    def compare(self) -> None:
        actual, expected = self.actual, self.expected
        if self.check_dtype and type(actual) is not type(expected):
            raise _Failure(AssertionError, f"The (d)types do not match: {type(actual)} != {type(expected)}.", self.item)
        if actual == expected:
            return
        if self.equal_nan and cmath.isnan(actual) and cmath.isnan(expected):
            return
        abs_diff = abs(actual - expected)
        if cmath.isfinite(abs_diff) and abs_diff <= self.atol + self.rtol * abs(expected):
            return
        raise _Failure(AssertionError, _scalar_mismatch(actual, expected, self.rtol, self.atol), self.item)


def _number_kind(value) -> type:
    for kind in (bool, int, float, complex):
        if isinstance(value, kind):
            return int if kind is bool else kind
    raise _Unsupported  # a numpy scalar's item() is one of them


class _TensorLikePair:
    """Two onnxnn tensors, or two numpy arrays, of directly related types (one an instance of the other's)."""

    def __init__(self, actual, expected, item: tuple, options: dict):
        if not (isinstance(actual, type(expected)) or isinstance(expected, type(actual))):
            raise _Unsupported
        if not options["allow_subclasses"] and type(actual) is not type(expected):
            raise _Unsupported
        self.actual, self.expected = _TensorLike(actual), _TensorLike(expected)
        self.item = item
        defaults = default_tolerances(self.actual.dtype, self.expected.dtype)
        self.rtol, self.atol = _tolerances(options["rtol"], options["atol"], defaults, item)
        self.options = options

    def _fail(self, attribute: str, actual, expected) -> NoReturn:
        raise _Failure(
            AssertionError, f"The values for attribute '{attribute}' do not match: {actual} != {expected}.", self.item
        )

    def compare(self) -> None:
        actual, expected, options = self.actual, self.expected, self.options
        if actual.shape != expected.shape:
            self._fail("shape", actual.shape, expected.shape)
        # Every onnxnn tensor has the strided layout and no strides of its own (values, not views
        # into storage), so check_layout and check_stride have nothing to tell apart.
        if options["check_device"] and actual.device != expected.device:
            self._fail("device", actual.device, expected.device)
        if options["check_dtype"] and actual.dtype is not expected.dtype:
            self._fail("dtype", actual.dtype, expected.dtype)
        dtype = actual.dtype
        if actual.dtype is not expected.dtype:
            # PyTorch's promotion refuses the wide unsigned types; here, as there, they compare as int64.
            wide = (_dtypes.uint16, _dtypes.uint32, _dtypes.uint64)
            left = _dtypes.int64 if actual.dtype in wide else actual.dtype
            right = _dtypes.int64 if expected.dtype in wide else expected.dtype
            dtype = _dtypes.promote_types(left, right)
        numpy_dtype = np.dtype(dtype.numpy_dtype)
        self._compare_values(actual.array().astype(numpy_dtype), expected.array().astype(numpy_dtype), dtype)

    def _compare_values(self, actual: np.ndarray, expected: np.ndarray, dtype: _dtypes.dtype) -> None:
        rtol, atol = self.rtol, self.atol
        matches = _isclose(actual, expected, rtol, atol, self.options["equal_nan"], dtype.is_floating_point)
        if matches.all():
            return
        if actual.ndim == 0:
            message = _scalar_mismatch(actual.item(), expected.item(), rtol, atol)
        else:
            message = _tensor_mismatch(actual, expected, matches, rtol, atol, dtype.is_floating_point)
        raise _Failure(AssertionError, message, self.item)


class _TensorLike:
    """What a comparison needs of a tensor or numpy array: shape, dtype, device and host values."""

    def __init__(self, value):
        if isinstance(value, Tensor):
            self.tensor: Tensor | None = value
            self.shape: Any = value.shape
            self.dtype = value.dtype
            self.device = value.device
            return
        if not isinstance(value, np.ndarray):
            raise _Unsupported  # lists and tuples are sequences; anything else has no tensor form here
        dtype = _DTYPE_OF_NUMPY.get(value.dtype)
        if dtype is None:
            raise _Unsupported  # complex, object or string arrays: onnxnn has no tensor of them
        self.tensor = None
        self.values = value
        self.shape = Size(value.shape)
        self.dtype = dtype
        self.device = CPU  # what PyTorch's as_tensor gives an array

    def array(self) -> np.ndarray:
        if self.tensor is None:
            return np.asarray(self.values)
        return np.asarray(self.tensor.detach().cpu().numpy())


def _isclose(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float, equal_nan: bool, floating: bool):
    """PyTorch's ``isclose``: equal, or both NaN (``equal_nan``), or a finite difference within tolerance."""
    with np.errstate(invalid="ignore", over="ignore"):
        close = actual == expected
        if floating and equal_nan:
            close |= np.isnan(actual) & np.isnan(expected)
        if rtol == 0 and atol == 0:
            return close
        if floating:
            # In the values' dtype, as PyTorch's CPU kernel: float32 error against a float32 allowance.
            error = np.abs(actual - expected)
            allowed = atol + np.abs(rtol * expected)
        else:
            error = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
            allowed = atol + np.abs(rtol * expected.astype(np.float64))
        return close | (np.isfinite(error) & (error <= allowed))


def _tensor_mismatch(actual, expected, matches, rtol: float, atol: float, floating: bool) -> str:
    """The message listing how many elements mismatch and the greatest differences with their indices."""
    shape = matches.shape
    count = matches.size
    mismatched = count - int(matches.sum())
    extra = f"Mismatched elements: {mismatched} / {count} ({mismatched / count:.1%})"
    actual, expected, matches = actual.reshape(-1), expected.reshape(-1), matches.reshape(-1)
    if not floating:
        # Integer differences in int64 (a uint8 difference would wrap); their ratios in float32, as
        # PyTorch divides integer tensors in its default dtype.
        actual, expected = actual.astype(np.int64), expected.astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        abs_diff = np.abs(actual - expected)
        abs_diff[matches] = 0
        if floating:
            rel_diff = abs_diff / np.abs(expected)
        else:
            rel_diff = abs_diff.astype(np.float32) / np.abs(expected).astype(np.float32)
        rel_diff[matches] = 0
    abs_at, rel_at = _greatest(abs_diff), _greatest(rel_diff)
    return _mismatch_message(
        "Tensor-likes",
        abs_diff[abs_at].item(),
        rel_diff[rel_at].item(),
        rtol,
        atol,
        extra,
        _unravel(abs_at, shape),
        _unravel(rel_at, shape),
    )


def _unravel(flat_index: int, shape: tuple) -> tuple:
    return tuple(int(index) for index in np.unravel_index(flat_index, shape))


def _greatest(values: np.ndarray) -> int:
    """The flat index of the greatest value, a NaN counting as greatest (as ``torch.max``), first of ties."""
    if values.dtype.kind != "i":
        nans = np.isnan(values)
        if nans.any():
            return int(np.argmax(nans))
    return int(np.argmax(values))


# ---------------------------------------------------------------------------------------- walking
_PAIRS = (_NonePair, _BooleanPair, _NumberPair, _TensorLikePair)


def _pairs(actual, expected, item: tuple, options: dict) -> list:
    """The comparisons of ``actual`` against ``expected``, recursing into sequences and mappings."""
    if (
        isinstance(actual, collections.abc.Sequence)
        and not isinstance(actual, str)
        and isinstance(expected, collections.abc.Sequence)
        and not isinstance(expected, str)
    ):
        if len(actual) != len(expected):
            raise _Failure(
                AssertionError, f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", item
            )
        pairs = []
        for index in range(len(actual)):
            pairs.extend(_pairs(actual[index], expected[index], (*item, index), options))
        return pairs
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        actual_keys, expected_keys = set(actual.keys()), set(expected.keys())
        if actual_keys != expected_keys:
            raise _Failure(
                AssertionError,
                "The keys of the mappings do not match:\n"
                f"Missing keys in the actual mapping: {sorted(expected_keys - actual_keys)}\n"
                f"Additional keys in the actual mapping: {sorted(actual_keys - expected_keys)}",
                item,
            )
        keys: Any = actual_keys
        try:
            keys = sorted(keys)  # a fixed order for the first failure, where the keys allow one
        except TypeError:
            pass
        pairs = []
        for key in keys:
            pairs.extend(_pairs(actual[key], expected[key], (*item, key), options))
        return pairs
    for pair_type in _PAIRS:
        try:
            return [pair_type(actual, expected, item, options)]
        except _Unsupported:
            continue
    raise _Failure(
        TypeError, f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}.", item
    )


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | Callable[[str], str] | None = None,
) -> None:
    r"""Asserts that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors (and numpy arrays) are close when they have the same shape, device (``check_device``)
    and dtype (``check_dtype``; otherwise both are promoted to a common dtype) and every element
    satisfies :math:`|actual - expected| \le atol + rtol \cdot |expected|`; infinities only equal
    themselves, and NaNs equal each other only with ``equal_nan``. The default tolerances depend on
    the dtype (the looser of the two dtypes' is used):

    =============  ==========  ==========
    dtype          rtol        atol
    =============  ==========  ==========
    float16        ``1e-3``    ``1e-5``
    bfloat16       ``1.6e-2``  ``1e-5``
    float32        ``1.3e-6``  ``1e-5``
    float64        ``1e-7``    ``1e-7``
    other          ``0.0``     ``0.0``
    =============  ==========  ==========

    Python scalars compare with the tolerances of their tensor dtype (int as int64, float as
    float64); of different types (``1.0`` and ``1``) they need ``check_dtype=False``. Other inputs
    must be of directly related types (one an instance of the other's; exactly the same type with
    ``allow_subclasses=False``): a tensor never compares with a numpy array or a list. Sequences
    and mappings compare element by element, recursively, when their lengths and keys match.
    onnxnn tensors have no strides or sparse layouts, so ``check_layout`` and ``check_stride``
    change nothing.

    Args:
        actual: the actual input.
        expected: the expected input.
        allow_subclasses: whether inputs of directly related types (a Parameter and a Tensor) compare.
        rtol: relative tolerance; with ``atol``, or neither (then the table's).
        atol: absolute tolerance; with ``rtol``, or neither.
        equal_nan: whether two NaNs are equal.
        check_device: whether tensors must be on the same device (otherwise compared on the host).
        check_dtype: whether tensors must have the same dtype (otherwise promoted to a common one).
        check_layout: accepted for PyTorch's signature (every onnxnn tensor is strided).
        check_stride: accepted for PyTorch's signature (onnxnn tensors have no strides).
        msg: the message of a value or attribute mismatch, or a callable given the generated one
            and returning the message.

    Raises:
        ValueError: only one of ``rtol`` and ``atol`` is given.
        TypeError: no comparison takes a pair of inputs (unrelated types, ``allow_subclasses=False``
            with different types, objects that are neither numbers nor tensor-likes).
        AssertionError: lengths of sequences or keys of mappings differ; shapes, devices or dtypes of
            tensors differ; values are not close (the message counts the mismatched elements and
            gives the greatest absolute and relative differences with their indices).

    Example::

        >>> expected = onnxnn.tensor([1e0, 1e-1, 1e-2])
        >>> onnxnn.testing.assert_close(onnxnn.acos(onnxnn.cos(expected)), expected)
        >>> onnxnn.testing.assert_close(onnxnn.tensor([1.0, 2.0]), onnxnn.tensor([1.0, 3.0]))
        Traceback (most recent call last):
        ...
        AssertionError: Tensor-likes are not close!
        <BLANKLINE>
        Mismatched elements: 1 / 2 (50.0%)
        Greatest absolute difference: 1.0 at index (1,) (up to 1e-05 allowed)
        Greatest relative difference: 0.3333333432674408 at index (1,) (up to 1.3e-06 allowed)
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    options = {
        "allow_subclasses": allow_subclasses,
        "rtol": rtol,
        "atol": atol,
        "equal_nan": equal_nan,
        "check_device": check_device,
        "check_dtype": check_dtype,
    }
    try:
        pairs = _pairs(actual, expected, (), options)
    except _Failure as failure:
        raise failure.to_error() from None  # structure errors keep their own message, as PyTorch's
    for pair in pairs:
        try:
            pair.compare()
        except _Failure as failure:
            raise failure.to_error(msg) from None
