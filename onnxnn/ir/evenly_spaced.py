"""Evenly spaced values rounded as PyTorch's CPU ``linspace`` rounds them, with the error-free arithmetic
that needs: ``torch.linspace``'s values and ``histc``/``histogram``'s bin edges read them from here."""

from __future__ import annotations

import numpy as np


def linspace_edges(start: float, end: float, count: int, numpy_dtype) -> np.ndarray:
    """PyTorch 2.13's CPU ``linspace`` in a floating dtype: ``fma(step, i, start)`` for the first half and
    ``fma(-step, count - 1 - i, end)`` for the rest, ``step = (end - start) / (count - 1)`` in the dtype
    (float16 and bfloat16: unfused, each operation rounded to the dtype).

    The fused multiply-adds are evaluated without intermediate rounding (``fused_multiply_add``), as
    the hardware's, in numpy passes: a million edges cost milliseconds.
    """
    kind = np.dtype(numpy_dtype).type
    first, last = kind(start), kind(end)
    if count <= 1:
        return np.full(count, first)
    step = (last - first) / kind(count - 1)
    halfway = count // 2
    if kind not in (np.float32, np.float64):
        # float16/bfloat16: PyTorch's scalar kernel rounds every operation to the dtype, the indices too
        # (bfloat16 holds integers exactly only up to 256); numpy's half types and ml_dtypes' do the same.
        counts = np.arange(count)
        return np.concatenate(
            [first + step * counts[:halfway].astype(kind), last - step * ((count - 1) - counts[halfway:]).astype(kind)]
        )
    positions = np.arange(count, dtype=np.float64)
    low = fused_multiply_add(float(step), positions[:halfway], float(first), kind)
    high = fused_multiply_add(-float(step), (count - 1) - positions[halfway:], float(last), kind)
    return np.concatenate([low, high])


def fused_multiply_add(a: float, b: np.ndarray, c: float, kind) -> np.ndarray:
    """``a * b + c`` rounded once to ``kind`` (float32 or float64), ``b`` integers below 2 ** 31.

    Error-free transformations: the product and the sum are carried as float64 pairs whose sum is
    exact (Dekker's product, Knuth's sum), then rounded once. float32: the product of a 24-bit step
    and a 31-bit integer is exact in float64, and the pair's tail breaks the ties a second rounding
    to float32 would get wrong. float64: the final addition of the tail rounds once, as an FMA does,
    but for sums within 2 ** -100 of a tie.
    """
    product = a * b
    if kind is np.float64:
        product_error = _product_error(a, b, product)
    else:
        product_error = np.zeros_like(product)  # exact
    total = product + c
    virtual = total - product
    sum_error = (product - (total - virtual)) + (c - virtual)  # Knuth's TwoSum: total + error is exact
    tail = sum_error + product_error
    if kind is np.float64:
        return total + tail
    rounded = total.astype(np.float32)
    # A float64 total exactly halfway between two float32 values was rounded to the even one; the tail
    # says on which side of that tie the exact value lies.
    offset = total - rounded.astype(np.float64)
    toward = np.where(offset > 0, np.float32(np.inf), np.float32(-np.inf))
    neighbour = np.nextafter(rounded, toward)
    tie = (offset != 0) & (offset * 2 == neighbour.astype(np.float64) - rounded.astype(np.float64))
    beyond = tie & (tail != 0) & ((tail > 0) == (offset > 0))
    return np.where(beyond, neighbour, rounded)


def _product_error(a: float, b: np.ndarray, product: np.ndarray) -> np.ndarray:
    """``a * b - product`` exactly (Dekker's TwoProduct with Veltkamp's split in halves of 26 bits)."""
    split = 134217729.0  # 2 ** 27 + 1
    a_scaled = split * a
    a_high = a_scaled - (a_scaled - a)
    a_low = a - a_high
    b_scaled = split * b
    b_high = b_scaled - (b_scaled - b)
    b_low = b - b_high
    return ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low
