"""Render numpy arrays exactly as PyTorch's ``repr(torch.tensor(...))`` does.

This mirrors the algorithm of ``torch/_tensor_str.py`` (default print options:
precision=4, threshold=1000, edgeitems=3, linewidth=80, sci_mode=None) without importing
torch, so that onnxnn tensors print byte-for-byte like their PyTorch counterparts:

* one formatter per tensor decides, from the (summarized) nonzero finite values, between
  "int mode" (``1.``), fixed point (``0.5000``) and scientific (``1.0000e-05``) notation,
  and pads every element to the common width it found;
* rows wrap at ``linewidth`` and long dimensions are elided with ``...`` once the element
  count exceeds ``threshold``;
* the caller supplies the trailing ``dtype=``/``device=``/``grad_fn=`` suffixes, which are
  appended (and wrapped onto a new line when too long) the way torch does.

Deliberate quirks copied from torch (they are what users see and compare against):
nonfinite values do not take part in the width computation, ``_add_suffixes`` over-counts
the last line by two characters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["format_tensor", "set_printoptions"]


@dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTS = _PrintOptions()

_PROFILES = {
    "default": (4, 1000, 3, 80),
    "short": (2, 1000, 2, 80),
    "full": (4, math.inf, 3, 80),
}


def set_printoptions(
    precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None
) -> None:
    """Same contract as ``torch.set_printoptions``.

    A profile is applied first and explicit arguments override it.  Like torch, ``sci_mode``
    is always assigned, so any call without it goes back to automatic notation.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"unknown print profile {profile!r}")
        _OPTS.precision, _OPTS.threshold, _OPTS.edgeitems, _OPTS.linewidth = _PROFILES[profile]
    if precision is not None:
        _OPTS.precision = precision
    if threshold is not None:
        _OPTS.threshold = threshold
    if edgeitems is not None:
        _OPTS.edgeitems = edgeitems
    if linewidth is not None:
        _OPTS.linewidth = linewidth
    _OPTS.sci_mode = sci_mode


class _Formatter:
    """Picks one notation and one column width for all values of a (real) tensor."""

    def __init__(self, values: np.ndarray) -> None:
        flat = values.reshape(-1)
        self.floating = flat.dtype.kind == "f"
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not self.floating:
            # Ints and bools print via str(); bools therefore get width 5 ("False").
            # np.unique keeps this cheap for huge unsummarized arrays (profile="full").
            for v in np.unique(flat).tolist():
                self.max_width = max(self.max_width, len(str(v)))
            return
        # Only nonzero finite values decide the notation: zeros and nan/inf fit any of them.
        nz = flat[np.isfinite(flat) & (flat != 0)]
        if nz.size == 0:
            return  # torch returns early here, so a forced sci_mode is ignored too
        # Ratios in float64, as torch does, so float16 extremes cannot overflow.
        abs_vals = np.abs(nz).astype(np.float64)
        vmin, vmax = float(abs_vals.min()), float(abs_vals.max())
        self.int_mode = bool(np.all(nz == np.ceil(nz)))
        uniq = np.unique(nz).astype(np.float64).tolist()
        prec = _OPTS.precision
        # The notation first (a forced sci_mode wins), then the width of the values written in it.
        if _OPTS.sci_mode is None:
            self.sci_mode = vmax / vmin > 1000.0 or vmax > 1.0e8 or vmin < 1.0e-4
        else:
            self.sci_mode = bool(_OPTS.sci_mode)
        if self.sci_mode:
            self.max_width = max(len(f"{v:.{prec}e}") for v in uniq)
        elif self.int_mode:
            # +1 for the trailing "." that marks a float tensor in int mode.
            self.max_width = max(len(f"{v:.0f}") + 1 for v in uniq)
        else:
            self.max_width = max(len(f"{v:.{prec}f}") for v in uniq)

    def format(self, value: float | int | bool) -> str:
        if self.floating:
            if self.sci_mode:
                text = f"{value:{self.max_width}.{_OPTS.precision}e}"
            elif self.int_mode:
                text = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    text += "."
            else:
                text = f"{value:.{_OPTS.precision}f}"
        else:
            text = str(value)
        return text.rjust(self.max_width)


def _format_value(value, real: _Formatter, imag: _Formatter | None) -> str:
    if imag is None:
        return real.format(value)
    # Complex: "re+imj", the sign coming from the imaginary part's own formatting.
    re_str = real.format(value.real)
    im_str = (imag.format(value.imag) + "j").lstrip()
    return re_str + im_str if im_str[0] in "+-" else re_str + "+" + im_str


def _vector_str(vec: np.ndarray, indent: int, summarize: bool, real: _Formatter, imag: _Formatter | None) -> str:
    # Each element costs its width plus ", "; complex adds the imaginary width and a sign.
    element_length = real.max_width + 2 + (imag.max_width + 1 if imag is not None else 0)
    per_line = max(1, (_OPTS.linewidth - indent) // element_length)
    edge = _OPTS.edgeitems
    if summarize and not edge:
        data = ["..."]
    elif summarize and vec.shape[0] > 2 * edge:
        # The leading space makes "  ..." line up like a right-aligned element.
        data = (
            [_format_value(v, real, imag) for v in vec[:edge].tolist()]
            + [" ..."]
            + [_format_value(v, real, imag) for v in vec[-edge:].tolist()]
        )
    else:
        data = [_format_value(v, real, imag) for v in vec.tolist()]
    lines = [", ".join(data[i : i + per_line]) for i in range(0, len(data), per_line)]
    # Continuation lines start just after the opening bracket.
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(arr: np.ndarray, indent: int, summarize: bool, real: _Formatter, imag: _Formatter | None) -> str:
    if arr.ndim == 0:
        return _format_value(arr.item(), real, imag)
    if arr.ndim == 1:
        return _vector_str(arr, indent, summarize, real, imag)
    edge = _OPTS.edgeitems
    n = arr.shape[0]
    if summarize and n > 2 * edge:
        slices = (
            [_tensor_str(arr[i], indent + 1, summarize, real, imag) for i in range(edge)]
            + ["..."]
            + [_tensor_str(arr[i], indent + 1, summarize, real, imag) for i in range(n - edge, n)]
        )
    else:
        slices = [_tensor_str(arr[i], indent + 1, summarize, real, imag) for i in range(n)]
    # ndim-1 newlines: 2-d rows are adjacent, 3-d blocks get one blank line, and so on.
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _summarized(arr: np.ndarray) -> np.ndarray:
    """The elements that will actually be shown; the formatter only looks at those."""
    edge = _OPTS.edgeitems
    if arr.ndim == 0:
        return arr
    if arr.ndim == 1:
        # Note arr[-0:] is the whole vector, matching torch when edgeitems == 0.
        return np.concatenate((arr[:edge], arr[-edge:])) if arr.shape[0] > 2 * edge else arr
    if not edge:
        return np.empty((0,) * arr.ndim, arr.dtype)
    n = arr.shape[0]
    rows = list(range(edge)) + list(range(n - edge, n)) if n > 2 * edge else range(n)
    return np.stack([_summarized(arr[i]) for i in rows])


def _as_printable(array) -> np.ndarray:
    arr = np.asarray(array)
    kind = arr.dtype.kind
    if kind in "biuc" or arr.dtype in (np.float32, np.float64):
        return arr
    if kind == "f" and arr.dtype.itemsize > 8:
        return arr.astype(np.float64)  # longdouble: nothing in torch, print as double
    # float16, ml_dtypes.bfloat16 and the float8 types: torch upcasts these to float32.
    return arr.astype(np.float32)


def _add_suffixes(text: str, suffixes: Sequence[str], indent: int) -> str:
    parts = [text]
    # Torch's own arithmetic (two more than the real last-line length); kept for parity.
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > _OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def format_tensor(array: np.ndarray, *, suffixes: Sequence[str] = (), prefix: str = "tensor(") -> str:
    """Return what ``repr`` of the equivalent torch tensor prints.

    ``suffixes`` are the caller's ``key=value`` annotations in torch's order (device, dtype,
    requires_grad/grad_fn); a ``size=(...)`` suffix is inserted after any ``device=`` one
    when torch would print it (empty tensors of ndim != 1, or ``edgeitems=0``).
    """
    arr = _as_printable(array)
    # Torch uses len(prefix); measuring the last line keeps multi-line prefixes sane.
    indent = len(prefix.rsplit("\n", 1)[-1])
    show_size = (arr.size == 0 and arr.ndim != 1) or (arr.size > 0 and not _OPTS.edgeitems)
    suffixes = list(suffixes)
    if show_size:
        pos = 0
        while pos < len(suffixes) and suffixes[pos].startswith("device="):
            pos += 1
        suffixes.insert(pos, "size=" + str(tuple(int(d) for d in arr.shape)))
    if arr.size == 0:
        body = "[]"
    else:
        summarize = arr.size > _OPTS.threshold
        shown = _summarized(arr) if summarize else arr
        if arr.dtype.kind == "c":
            # Real and imaginary parts get independent formatters, as in torch.
            real, imag = _Formatter(shown.real), _Formatter(shown.imag)
        else:
            real, imag = _Formatter(shown), None
        body = _tensor_str(arr, indent, summarize, real, imag)
    return _add_suffixes(prefix + body, suffixes, indent)
