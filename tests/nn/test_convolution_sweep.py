"""A table-driven sweep of the convolutions against a direct numpy reference, on both executors.

``conv*d``, ``conv_transpose*d`` and the ``Conv*d``/``ConvTranspose*d``/``LazyConv*`` layers over
strides, dilations, groups (depthwise, with a channel multiplier), ``'same'``/``'valid'``/int/tuple
padding, the padding modes, ``output_padding`` and ``output_size``, unbatched inputs and empty
batches, in float32 and float64: values, and the gradients with respect to the input, the weight and
the bias. Then the errors PyTorch raises for bad arguments, and unfold/fold.

The reference (``reference_conv``, ``reference_conv_transpose``) loops over the kernel taps, each a
strided window of the padded input times one tap of the weight, with the adjoint loops for the
gradients, in float64. Tolerances come from the arithmetic: a sum of ``n`` products rounds to
within ``gamma(n) = n * eps / (1 - n * eps)`` of the same sum taken over absolute values, which the
reference computes too (``bound``); ``n`` is the number of terms of the sum (``C_in / groups``
times the taps for the output; the batch times the output positions for the weight's gradient).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

EXECUTORS = ("onnxruntime", "kernels")
DTYPES = {"float32": onnxnn.float32, "float64": onnxnn.float64}
NUMPY_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


# ---------------------------------------------------------------- numpy reference


def _taps(kernel, dilation, stride, out):
    """Each kernel tap's index and the strided window of the padded input it reads, as slices."""
    for tap in itertools.product(*[range(k) for k in kernel]):
        window = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, s, o in zip(tap, dilation, stride, out))
        yield tap, window


def _summed_product(a, b):
    """``sum over n and positions of a[n, i, ...] * b[n, j, ...]``, an ``(I, J)`` matrix."""
    positions = int(np.prod(a.shape[2:]))
    return np.einsum("nip,njp->ij", a.reshape(*a.shape[:2], positions), b.reshape(*b.shape[:2], positions))


def reference_conv(x, w, b, stride, pads_begin, pads_end, dilation, groups, g=None):
    """``conv*d`` of a batched ``x`` in float64, and with an output gradient ``g`` also the gradients
    ``(dx, dw, db)``: per kernel tap, the window times the weight's tap, channels per group."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    rank = x.ndim - 2
    widths = [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end))
    padded = np.pad(x, widths)
    kernel = w.shape[2:]
    out = [(size - d * (k - 1) - 1) // s + 1 for size, k, d, s in zip(padded.shape[2:], kernel, dilation, stride)]
    per_in, per_out = x.shape[1] // groups, w.shape[0] // groups
    y = np.zeros((x.shape[0], w.shape[0], *out))
    dpadded, dw = np.zeros_like(padded), np.zeros_like(w)
    for tap, window in _taps(kernel, dilation, stride, out):
        for group in range(groups):
            cin, cout = slice(group * per_in, (group + 1) * per_in), slice(group * per_out, (group + 1) * per_out)
            patch = padded[(slice(None), cin) + window]  # (N, C/g, *out)
            tap_weight = w[(cout, slice(None)) + tap]  # (M/g, C/g)
            y[:, cout] += np.einsum("nc...,mc->nm...", patch, tap_weight)
            if g is not None:
                dpadded[(slice(None), cin) + window] += np.einsum("nm...,mc->nc...", g[:, cout], tap_weight)
                dw[(cout, slice(None)) + tap] += _summed_product(g[:, cout], patch)
    if b is not None:
        y += np.asarray(b, np.float64).reshape((1, -1) + (1,) * rank)
    if g is None:
        return y
    crop = tuple(slice(p, p + size) for p, size in zip(pads_begin, x.shape[2:]))
    db = None if b is None else g.sum(axis=(0, *range(2, 2 + rank)))
    return y, (dpadded[(slice(None), slice(None)) + crop], dw, db)


def reference_conv_transpose(x, w, b, stride, padding, output_padding, dilation, groups, g=None):
    """``conv_transpose*d`` of a batched ``x``: every input position scattered through the weight to
    ``i * stride + t * dilation - padding``, and with ``g`` the gradients ``(dx, dw, db)``."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    rank = x.ndim - 2
    kernel, spatial = w.shape[2:], x.shape[2:]
    full = [
        (i - 1) * s + d * (k - 1) + 1 + e for i, s, d, k, e in zip(spatial, stride, dilation, kernel, output_padding)
    ]
    per_in, per_out = x.shape[1] // groups, w.shape[1]
    canvas = np.zeros((x.shape[0], per_out * groups, *full))
    crop = (slice(None), slice(None)) + tuple(slice(p, f - p) for p, f in zip(padding, full))
    gcanvas = None
    if g is not None:
        gcanvas = np.zeros_like(canvas)
        gcanvas[crop] = g
    dx, dw = np.zeros_like(x), np.zeros_like(w)
    for tap, window in _taps(kernel, dilation, stride, spatial):
        for group in range(groups):
            cin, cout = slice(group * per_in, (group + 1) * per_in), slice(group * per_out, (group + 1) * per_out)
            tap_weight = w[(cin, slice(None)) + tap]  # (C/g, M/g)
            canvas[(slice(None), cout) + window] += np.einsum("nc...,cm->nm...", x[:, cin], tap_weight)
            if g is not None:
                reached = gcanvas[(slice(None), cout) + window]
                dx[:, cin] += np.einsum("nm...,cm->nc...", reached, tap_weight)
                dw[(cin, slice(None)) + tap] += _summed_product(x[:, cin], reached)
    y = canvas[crop]
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape((1, -1) + (1,) * rank)
    if g is None:
        return y
    db = None if b is None else g.sum(axis=(0, *range(2, 2 + rank)))
    return y, (dx, dw, db)


def _tolerance(bound, terms: int, dtype) -> np.ndarray:
    """gamma(terms + 2) times the sum over absolute values (bias and the final rounding: two more)."""
    eps = float(np.finfo(dtype.numpy_dtype).eps)
    n = terms + 2
    return n * eps / (1 - n * eps) * bound + np.finfo(np.float64).tiny


def _assert_close(actual, expected, bound, terms, dtype, what):
    actual = np.asarray(actual, np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, expected {expected.shape}"
    excess = np.abs(actual - expected) - _tolerance(bound, terms, dtype)
    assert (excess <= 0).all(), f"{what}: off by {np.max(np.abs(actual - expected)):.3g} beyond the rounding bound"


def _check(executor, dtype, function, reference, arrays, terms, grad_terms, rng):
    """``function`` of tensors of ``arrays`` against ``reference(*arrays, g=...)``: value and gradients."""
    kind = DTYPES[dtype]
    cast = [None if a is None else a.astype(kind.numpy_dtype) for a in arrays]
    exact = [None if a is None else a.astype(np.float64) for a in cast]
    with onnxnn.set_executor(executor):
        tensors = [None if a is None else onnxnn.tensor(a, requires_grad=True) for a in cast]
        output = function(*tensors)
        g = rng.standard_normal(tuple(output.shape)).astype(kind.numpy_dtype)
        output.backward(onnxnn.tensor(g))
        value = output.detach().numpy()
        grads = [None if t is None else t.grad.numpy() for t in tensors]
    assert value.dtype == kind.numpy_dtype
    expected, expected_grads = reference(*exact, g=g.astype(np.float64))
    absolute = [None if a is None else np.abs(a) for a in exact]
    bound, bound_grads = reference(*absolute, g=np.abs(g).astype(np.float64))
    _assert_close(value, expected, bound, terms, kind, "output")
    for name, got, want, limit in zip(("input", "weight", "bias"), grads, expected_grads, bound_grads):
        if want is not None:
            _assert_close(got, want, limit, grad_terms, kind, f"gradient w.r.t. {name}")


# ---------------------------------------------------------------- conv*d


# (id, input shape (None: unbatched), weight shape, bias, stride, padding, dilation, groups)
CONV_CASES = [
    ("1d-plain", (2, 3, 9), (4, 3, 3), True, 1, 0, 1, 1),
    ("1d-stride-dilation", (2, 2, 11), (3, 2, 3), True, 2, 1, 2, 1),
    ("1d-same-even-dilated", (1, 2, 7), (2, 2, 4), True, 1, "same", 3, 1),
    ("1d-valid", (2, 2, 6), (2, 2, 2), False, 1, "valid", 1, 1),
    ("1d-depthwise-multiplier", (2, 3, 8), (6, 1, 3), True, 1, 1, 1, 3),
    ("1d-unbatched", None, (4, 3, 2), True, 3, (2,), 1, 1),
    ("1d-empty-batch", (0, 2, 6), (3, 2, 3), True, 1, 1, 1, 1),
    ("2d-tuples", (2, 2, 7, 6), (3, 2, 3, 2), True, (2, 1), (1, 0), (1, 2), 1),
    ("2d-groups", (1, 4, 6, 6), (6, 2, 3, 3), True, 1, 1, 1, 2),
    ("2d-depthwise", (2, 4, 5, 5), (4, 1, 3, 3), False, 1, 1, 1, 4),
    ("2d-depthwise-multiplier", (1, 3, 6, 5), (9, 1, 2, 3), True, (1, 2), "valid", 1, 3),
    ("2d-same-asymmetric", (2, 2, 6, 7), (3, 2, 2, 4), True, 1, "same", (2, 1), 1),
    ("2d-stride-over-kernel", (1, 2, 9, 9), (2, 2, 2, 2), True, 3, 2, 1, 1),
    ("2d-unbatched", None, (3, 2, 3, 3), True, 1, "same", 1, 1),
    ("2d-empty-batch", (0, 4, 5, 5), (4, 2, 3, 3), True, 2, 1, 1, 2),
    ("2d-kernel-equals-input", (2, 2, 3, 4), (2, 2, 3, 4), True, 1, 0, 1, 1),
    ("2d-blocked-channels", (2, 16, 12, 12), (16, 16, 3, 3), True, 1, 1, 1, 1),
    ("2d-one-gemm-batch", (2, 128, 3, 3), (64, 128, 3, 3), True, 1, 1, 1, 1),
    ("2d-pointwise", (2, 16, 5, 5), (8, 16, 1, 1), True, 1, 0, 1, 1),
    ("3d-plain", (1, 2, 4, 5, 4), (3, 2, 2, 3, 2), True, 1, 1, 1, 1),
    ("3d-tuples-groups", (2, 4, 5, 4, 6), (4, 2, 3, 1, 2), True, (2, 1, 3), (1, 0, 2), (1, 2, 1), 2),
    ("3d-same", (1, 2, 4, 4, 4), (2, 2, 2, 3, 2), False, 1, "same", (1, 1, 2), 1),
    ("3d-unbatched", None, (2, 3, 2, 2, 2), True, 1, 0, 1, 1),
]
CONV_FUNCTIONS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def _spatial(value, rank):
    return [value] * rank if isinstance(value, int) else list(value)


def _conv_pads(padding, kernel, dilation):
    if padding == "valid":
        return [0] * len(kernel), [0] * len(kernel)
    if padding == "same":  # PyTorch puts the odd element at the end
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return [t // 2 for t in totals], [t - t // 2 for t in totals]
    return padding, padding


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "input_shape, weight_shape, bias, stride, padding, dilation, groups",
    [case[1:] for case in CONV_CASES],
    ids=[case[0] for case in CONV_CASES],
)
def test_conv_matches_reference(input_shape, weight_shape, bias, stride, padding, dilation, groups, executor, dtype):
    rng = np.random.default_rng(3)
    rank = len(weight_shape) - 2
    unbatched = input_shape is None
    shape = (weight_shape[1] * groups, *[5 + i for i in range(rank)]) if unbatched else input_shape
    x, w = rng.standard_normal(shape), rng.standard_normal(weight_shape)
    b = rng.standard_normal(weight_shape[0]) if bias else None
    strides, dilations = _spatial(stride, rank), _spatial(dilation, rank)
    pads = padding if isinstance(padding, str) else _spatial(padding, rank)
    begin, end = _conv_pads(pads, weight_shape[2:], dilations)

    def reference(x, w, b, g):
        x = x[None] if unbatched else x
        y, grads = reference_conv(x, w, b, strides, begin, end, dilations, groups, g=g[None] if unbatched else g)
        return (y[0], (grads[0][0], *grads[1:])) if unbatched else (y, grads)

    def function(x, w, b):
        return CONV_FUNCTIONS[rank](x, w, b, stride, padding, dilation, groups)

    terms = int(np.prod(weight_shape[1:]))
    grad_terms = max(terms, weight_shape[0] * int(np.prod(weight_shape[2:])), int(np.prod(shape)))
    _check(executor, dtype, function, reference, [x, w, b], terms, grad_terms, rng)


# ---------------------------------------------------------------- conv_transpose*d


# (id, input shape (None: unbatched), weight shape, bias, stride, padding, output_padding, dilation, groups)
TRANSPOSE_CASES = [
    ("1d-plain", (2, 3, 5), (3, 2, 3), True, 1, 0, 0, 1, 1),
    ("1d-stride-output-padding", (2, 2, 4), (2, 3, 3), True, 2, 1, 1, 1, 1),
    ("1d-output-padding-below-dilation", (1, 2, 5), (2, 2, 3), True, 1, 0, 2, 3, 1),
    ("1d-output-padding-past-stride", (2, 2, 4), (2, 2, 2), True, 2, 0, 3, 4, 1),
    ("1d-groups", (1, 4, 5), (4, 3, 2), True, 3, 1, 2, 1, 2),
    ("1d-unbatched", None, (3, 2, 3), True, 2, 1, 0, 1, 1),
    ("1d-empty-batch", (0, 2, 4), (2, 3, 2), True, 2, 0, 1, 1, 1),
    ("1d-padding-past-kernel", (1, 2, 9), (2, 2, 3), False, 2, 4, 0, 1, 1),
    ("2d-tuples", (2, 2, 4, 3), (2, 3, 3, 2), True, (2, 1), (1, 0), (1, 0), (1, 2), 1),
    ("2d-depthwise", (2, 4, 5, 5), (4, 1, 3, 3), True, 1, 1, 0, 1, 4),
    ("2d-depthwise-multiplier", (1, 3, 4, 4), (3, 2, 3, 3), False, 2, 1, 1, 1, 3),
    ("2d-grouped-one-output", (2, 8, 5, 5), (8, 1, 3, 3), True, 1, 1, 0, 1, 4),
    ("2d-pointwise", (2, 16, 5, 5), (16, 8, 1, 1), True, 1, 0, 0, 1, 1),
    ("2d-blocked-channels", (2, 16, 12, 12), (16, 16, 3, 3), True, 1, 1, 0, 1, 1),
    ("2d-unbatched", None, (2, 2, 2, 3), True, (1, 2), 0, (0, 1), 1, 1),
    ("2d-empty-batch", (0, 2, 3, 3), (2, 2, 3, 3), True, 2, 1, 1, 1, 1),
    ("3d-plain", (1, 2, 3, 3, 3), (2, 2, 2, 2, 2), True, 1, 0, 0, 1, 1),
    ("3d-mixed", (1, 2, 3, 3, 2), (2, 2, 2, 2, 2), True, (1, 2, 1), (0, 1, 0), (2, 1, 1), (3, 1, 2), 1),
    ("3d-groups-unbatched", None, (4, 1, 2, 2, 2), False, 2, 1, 1, 1, 2),
]
TRANSPOSE_FUNCTIONS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "input_shape, weight_shape, bias, stride, padding, output_padding, dilation, groups",
    [case[1:] for case in TRANSPOSE_CASES],
    ids=[case[0] for case in TRANSPOSE_CASES],
)
def test_conv_transpose_matches_reference(
    input_shape, weight_shape, bias, stride, padding, output_padding, dilation, groups, executor, dtype
):
    rng = np.random.default_rng(4)
    rank = len(weight_shape) - 2
    unbatched = input_shape is None
    shape = (weight_shape[0], *[3 + i for i in range(rank)]) if unbatched else input_shape
    x, w = rng.standard_normal(shape), rng.standard_normal(weight_shape)
    b = rng.standard_normal(weight_shape[1] * groups) if bias else None
    arguments = [_spatial(v, rank) for v in (stride, padding, output_padding, dilation)]

    def reference(x, w, b, g):
        x = x[None] if unbatched else x
        y, grads = reference_conv_transpose(x, w, b, *arguments, groups, g=g[None] if unbatched else g)
        return (y[0], (grads[0][0], *grads[1:])) if unbatched else (y, grads)

    def function(x, w, b):
        return TRANSPOSE_FUNCTIONS[rank](x, w, b, stride, padding, output_padding, groups, dilation)

    taps = int(np.prod(weight_shape[2:]))
    terms = weight_shape[0] // groups * taps
    grad_terms = max(terms, weight_shape[1] * taps, int(np.prod(shape)) * taps)
    _check(executor, dtype, function, reference, [x, w, b], terms, grad_terms, rng)


# ---------------------------------------------------------------- layers


def _with_parameters(layer, weight, bias):
    """``layer`` computing with ``weight`` and ``bias`` (tensors whose gradients the test reads)."""
    layer._parameters["weight"] = weight
    if bias is not None:
        layer._parameters["bias"] = bias
    return layer


# (id, layer class, in, out, kernel, padding_mode, other keyword arguments, input shape)
LAYER_CASES = [
    ("1d-reflect", nn.Conv1d, 2, 3, 3, "reflect", {"padding": 2}, (2, 2, 6)),
    ("1d-circular-same-even", nn.Conv1d, 2, 2, 4, "circular", {"padding": "same"}, (1, 2, 7)),
    ("1d-replicate-unbatched", nn.Conv1d, 3, 2, 2, "replicate", {"padding": 1}, (3, 5)),
    ("2d-reflect-stride", nn.Conv2d, 2, 4, 3, "reflect", {"stride": 2, "padding": (1, 2)}, (2, 2, 5, 6)),
    ("2d-replicate-groups", nn.Conv2d, 4, 4, 3, "replicate", {"padding": 2, "dilation": 2, "groups": 2}, (1, 4, 5, 5)),
    ("2d-circular-unbatched", nn.Conv2d, 2, 3, (2, 3), "circular", {"padding": (1, 2)}, (2, 4, 5)),
    ("2d-circular-same-dilated", nn.Conv2d, 2, 2, 2, "circular", {"padding": "same", "dilation": 3}, (1, 2, 6, 6)),
    ("2d-zeros-valid-nobias", nn.Conv2d, 3, 2, 3, "zeros", {"padding": "valid", "bias": False}, (2, 3, 5, 5)),
    ("2d-reflect-empty-batch", nn.Conv2d, 2, 2, 3, "reflect", {"padding": 1}, (0, 2, 4, 4)),
    ("2d-depthwise-multiplier", nn.Conv2d, 3, 6, 3, "replicate", {"padding": 1, "groups": 3}, (2, 3, 4, 4)),
    ("3d-reflect", nn.Conv3d, 2, 2, 2, "reflect", {"padding": 1}, (1, 2, 3, 4, 3)),
    ("3d-circular-unbatched", nn.Conv3d, 2, 2, 3, "circular", {"padding": (1, 0, 2)}, (2, 3, 3, 3)),
]


def _padded_reference(layer, mode):
    """The layer's convolution as the reference: np.pad in the padding mode, then reference_conv."""
    rank = len(layer.kernel_size)
    begin, end = _conv_pads(
        layer.padding if isinstance(layer.padding, str) else list(layer.padding), layer.kernel_size, layer.dilation
    )

    def reference(x, w, b, g):
        unbatched = x.ndim == rank + 1
        x, g = (x[None], g[None]) if unbatched else (x, g)
        pads_begin, pads_end = begin, end
        padded = x
        if mode != "zeros":
            padded = np.pad(x, [(0, 0), (0, 0), *zip(begin, end)], mode=NUMPY_PAD_MODES[mode])
            pads_begin = pads_end = [0] * rank
        y, (dpadded, dw, db) = reference_conv(
            padded, w, b, layer.stride, pads_begin, pads_end, layer.dilation, layer.groups, g=g
        )
        if mode != "zeros":  # the padding's adjoint: every padded element's gradient back to its source
            sources = np.arange(x.size).reshape(x.shape)
            sources = np.pad(sources, [(0, 0), (0, 0), *zip(begin, end)], mode=NUMPY_PAD_MODES[mode])
            dx = np.bincount(sources.ravel(), dpadded.ravel(), minlength=x.size).reshape(x.shape)
        else:
            dx = dpadded
        return (y[0], (dx[0], dw, db)) if unbatched else (y, (dx, dw, db))

    return reference


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "cls, in_channels, out_channels, kernel, mode, kwargs, input_shape",
    [case[1:] for case in LAYER_CASES],
    ids=[case[0] for case in LAYER_CASES],
)
def test_conv_layer_padding_modes(cls, in_channels, out_channels, kernel, mode, kwargs, input_shape, executor, dtype):
    rng = np.random.default_rng(5)
    layer = cls(in_channels, out_channels, kernel, **kwargs, padding_mode=mode, dtype=DTYPES[dtype])
    x = rng.standard_normal(input_shape)
    w = rng.standard_normal(tuple(layer.weight.shape))
    b = None if layer.bias is None else rng.standard_normal(out_channels)
    terms = int(np.prod(w.shape[1:]))
    # A padded element's gradient sums those of up to every copy of it (at most the kernel's taps each).
    grad_terms = max(terms, out_channels * int(np.prod(w.shape[2:])) * 8, int(np.prod(input_shape)) * 8)
    _check(
        executor,
        dtype,
        lambda x, w, b: _with_parameters(layer, w, b)(x),
        _padded_reference(layer, mode),
        [x, w, b],
        terms,
        grad_terms,
        rng,
    )


# (id, layer class, in, out, kernel, keyword arguments, input shape, output_size)
TRANSPOSE_LAYER_CASES = [
    ("1d", nn.ConvTranspose1d, 2, 3, 3, {"stride": 3}, (2, 2, 4), [12]),
    ("1d-with-channels-unbatched", nn.ConvTranspose1d, 2, 2, 2, {"stride": 2}, (2, 5), [2, 11]),
    ("2d-batch-channels", nn.ConvTranspose2d, 2, 2, 3, {"stride": 2, "padding": 1}, (1, 2, 3, 4), [1, 2, 6, 8]),
    ("2d-dilated", nn.ConvTranspose2d, 4, 2, 2, {"stride": (2, 3), "dilation": 2, "groups": 2}, (2, 4, 3, 3), [7, 10]),
    ("2d-output-padding", nn.ConvTranspose2d, 2, 2, 3, {"stride": 2, "output_padding": 1}, (1, 2, 3, 3), None),
    ("2d-no-bias", nn.ConvTranspose2d, 2, 2, 2, {"padding": 1, "bias": False}, (2, 2, 3, 3), None),
    ("3d", nn.ConvTranspose3d, 2, 2, 2, {"stride": 2, "padding": (0, 1, 0)}, (1, 2, 2, 3, 2), [5, 4, 4]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "cls, in_channels, out_channels, kernel, kwargs, input_shape, output_size",
    [case[1:] for case in TRANSPOSE_LAYER_CASES],
    ids=[case[0] for case in TRANSPOSE_LAYER_CASES],
)
def test_conv_transpose_layer_output_size(
    cls, in_channels, out_channels, kernel, kwargs, input_shape, output_size, executor, dtype
):
    rng = np.random.default_rng(6)
    layer = cls(in_channels, out_channels, kernel, **kwargs, dtype=DTYPES[dtype])
    rank = len(layer.kernel_size)
    unbatched = len(input_shape) == rank + 1
    x = rng.standard_normal(input_shape)
    w = rng.standard_normal(tuple(layer.weight.shape))
    b = None if layer.bias is None else rng.standard_normal(out_channels)
    spatial = input_shape[-rank:]
    smallest = [
        (i - 1) * s - 2 * p + d * (k - 1) + 1
        for i, s, p, d, k in zip(spatial, layer.stride, layer.padding, layer.dilation, layer.kernel_size)
    ]
    wanted = smallest if output_size is None else output_size[-rank:]
    extra = list(layer.output_padding) if output_size is None else [o - s for o, s in zip(wanted, smallest)]
    arguments = (layer.stride, layer.padding, extra, layer.dilation)

    def reference(x, w, b, g):
        x, g = (x[None], g[None]) if unbatched else (x, g)
        y, grads = reference_conv_transpose(x, w, b, *arguments, layer.groups, g=g)
        return (y[0], (grads[0][0], *grads[1:])) if unbatched else (y, grads)

    taps = int(np.prod(layer.kernel_size))
    terms = in_channels // layer.groups * taps
    _check(
        executor,
        dtype,
        lambda x, w, b: _with_parameters(layer, w, b)(x, output_size=output_size),
        reference,
        [x, w, b],
        terms,
        max(terms, int(np.prod(input_shape)) * taps),
        rng,
    )


LAZY_CASES = [
    (nn.LazyConv1d, nn.Conv1d, (2, 4, 6)),
    (nn.LazyConv2d, nn.Conv2d, (4, 5, 5)),
    (nn.LazyConv3d, nn.Conv3d, (1, 4, 3, 3, 3)),
    (nn.LazyConvTranspose1d, nn.ConvTranspose1d, (4, 5)),
    (nn.LazyConvTranspose2d, nn.ConvTranspose2d, (2, 4, 3, 3)),
    (nn.LazyConvTranspose3d, nn.ConvTranspose3d, (4, 2, 2, 2)),
]


@pytest.mark.parametrize("lazy, becomes, input_shape", LAZY_CASES, ids=[case[0].__name__ for case in LAZY_CASES])
def test_lazy_layers_take_channels_from_batched_and_unbatched_inputs(lazy, becomes, input_shape):
    rng = np.random.default_rng(7)
    layer = lazy(6, 2, groups=2, dtype=onnxnn.float64)
    x = rng.standard_normal(input_shape)
    output = layer(onnxnn.tensor(x))
    assert type(layer) is becomes
    assert layer.in_channels == 4
    transposed = lazy.__name__.startswith("LazyConvTranspose")
    expected_weight = (4, 3, 2, 2, 2) if transposed else (6, 2, 2, 2, 2)
    assert tuple(layer.weight.shape) == expected_weight[: 2 + len(layer.kernel_size)]
    rank = len(layer.kernel_size)
    batched = x if x.ndim == rank + 2 else x[None]
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    if transposed:
        expected = reference_conv_transpose(batched, w, b, [1] * rank, [0] * rank, [0] * rank, [1] * rank, 2)
    else:
        expected = reference_conv(batched, w, b, [1] * rank, [0] * rank, [0] * rank, [1] * rank, 2)
    expected = expected if x.ndim == rank + 2 else expected[0]
    np.testing.assert_allclose(output.detach().numpy(), expected, rtol=0, atol=1e-13)


# ---------------------------------------------------------------- regressions


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("transposed", [False, True], ids=["conv1d", "conv_transpose1d"])
def test_input_gradient_across_kernel_sizes_with_a_frozen_weight(executor, transposed):
    """The input gradient is a Conv (or ConvTranspose) node of its own when the weight takes none; with
    no kernel_shape it shared one float64 graph between kernels of 2 and 3 taps (the taps of the first
    written into it) and onnxruntime failed on the third call (a MatMul of mismatched sizes)."""
    rng = np.random.default_rng(8)
    for channels, kernel, length in [(2, 2, 4), (1, 3, 7), (1, 2, 4)]:
        x = rng.standard_normal((1, channels, length))
        w = rng.standard_normal((channels, channels, kernel))
        with onnxnn.set_executor(executor):
            xt = onnxnn.tensor(x, requires_grad=True)
            function = F.conv_transpose1d if transposed else F.conv1d
            y = function(xt, onnxnn.tensor(w), padding=1)
            y.detach().numpy()
            g = rng.standard_normal(tuple(y.shape))
            y.backward(onnxnn.tensor(g))
            got = xt.grad.numpy()
        if transposed:
            _, (expected, _, _) = reference_conv_transpose(x, w, None, [1], [1], [0], [1], 1, g=g)
        else:
            _, (expected, _, _) = reference_conv(x, w, None, [1], [1], [1], [1], 1, g=g)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "input_shape, weight_shape, kwargs, output_shape",
    [
        ((0, 2, 4), (2, 1, 1), {"padding": 2}, (0, 1, 0)),
        ((0, 2, 4, 4, 4), (2, 1, 2, 1, 2), {"stride": (1, 1, 3), "padding": (1, 2, 1)}, (0, 1, 3, 0, 9)),
        ((0, 4, 3, 3), (4, 1, 1, 3), {"padding": (1, 2), "groups": 2}, (0, 2, 1, 1)),
    ],
    ids=["1d", "3d", "2d-groups"],
)
def test_empty_batch_transposed_output_of_no_positions(executor, input_shape, weight_shape, kwargs, output_shape):
    """PyTorch checks a transposed convolution's output size in its kernel, which an empty batch skips:
    an output of zero positions is an empty result there (a negative size is still an error)."""
    rank = len(input_shape) - 2
    with onnxnn.set_executor(executor):
        x = onnxnn.zeros(input_shape, dtype=onnxnn.float64, requires_grad=True)
        w = onnxnn.ones(weight_shape, dtype=onnxnn.float64, requires_grad=True)
        b = onnxnn.ones(output_shape[1], dtype=onnxnn.float64, requires_grad=True)
        y = TRANSPOSE_FUNCTIONS[rank](x, w, b, **kwargs)
        y.sum().backward()
        assert tuple(y.shape) == output_shape
        np.testing.assert_array_equal(w.grad.numpy(), np.zeros(weight_shape))
        np.testing.assert_array_equal(b.grad.numpy(), np.zeros(output_shape[1]))
        with pytest.raises(RuntimeError, match="Output size is too small"):
            TRANSPOSE_FUNCTIONS[rank](x[:, :, :1] if rank == 1 else x, w, **{**kwargs, "padding": 3})


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w: F.conv2d(x, w, stride=np.int64(2), padding=np.int32(1), dilation=np.int64(1), groups=np.int64(1)),
        lambda x, w: F.conv2d(x, w, stride=(np.int64(2), 2), padding=[1, np.int16(1)]),
    ],
    ids=["scalars", "in-sequences"],
)
def test_numpy_integer_hyperparameters_are_taken(call):
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    got = call(onnxnn.tensor(x), onnxnn.tensor(w)).numpy()
    expected = reference_conv(x, w, None, [2, 2], [1, 1], [1, 1], [1, 1], 1)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)


_X2, _W2 = np.zeros((1, 4, 5, 5)), np.zeros((4, 2, 3, 3))

# (id, call on (x, w) tensors, error type, message pattern): PyTorch's type for each.
ERROR_CASES = [
    ("channels", lambda x, w: F.conv2d(x, w), RuntimeError, r"expected input\[1, 4, 5, 5\] to have 2 channels"),
    ("groups", lambda x, w: F.conv2d(x, w, groups=3), RuntimeError, "divisible by 3 at dimension 0"),
    ("kernel-too-large", lambda x, w: F.conv2d(x[:, :2, :2], w), RuntimeError, r"Kernel size: \(3 x 3\)"),
    ("dilated-too-large", lambda x, w: F.conv2d(x[:, :2], w, dilation=3), RuntimeError, "can't be greater"),
    ("negative-padding", lambda x, w: F.conv2d(x[:, :2], w, padding=(1, -1)), RuntimeError, "negative padding"),
    ("same-strided", lambda x, w: F.conv2d(x[:, :2], w, padding="same", stride=2), RuntimeError, "strided"),
    ("padding-string", lambda x, w: F.conv2d(x[:, :2], w, padding="full"), RuntimeError, "string: 'full'"),
    ("zero-dilation", lambda x, w: F.conv2d(x[:, :2], w, dilation=(0, 1)), RuntimeError, r"but got \[0, 1\]"),
    ("rank-2", lambda x, w: F.conv2d(x[0, 0], w), RuntimeError, "Expected 3D .* or 4D"),
    ("rank-5", lambda x, w: F.conv2d(x[None], w), RuntimeError, "Expected 3D .* or 4D"),
    ("bool-stride", lambda x, w: F.conv2d(x[:, :2], w, stride=True), TypeError, "'stride' must be .*, not bool"),
    ("float-padding", lambda x, w: F.conv2d(x[:, :2], w, padding=1.0), TypeError, "'padding' must be tuple of ints"),
    ("float-element", lambda x, w: F.conv2d(x[:, :2], w, stride=(2.0, 1)), TypeError, "type float at pos 0"),
    ("float-groups", lambda x, w: F.conv2d(x, w, groups=2.0), TypeError, "'groups' must be int, not float"),
    ("transposed-float", lambda x, w: F.conv_transpose2d(x, w, padding=(1.5, 0)), TypeError, "type float"),
    ("transposed-same", lambda x, w: F.conv_transpose2d(x, w, padding="same"), TypeError, "not str"),
    ("output-padding", lambda x, w: F.conv_transpose2d(x, w, stride=2, output_padding=2), RuntimeError, "either"),
    ("output-padding-2", lambda x, w: F.conv_transpose2d(x, w, dilation=2, output_padding=2), RuntimeError, "either"),
    ("transposed-channels", lambda x, w: F.conv_transpose2d(x[:, :3], w), RuntimeError, "to have 4 channels"),
    ("transposed-no-outputs", lambda x, w: F.conv_transpose2d(x, w[:, :0]), RuntimeError, "non-empty 4D weight"),
    ("transposed-rank", lambda x, w: F.conv_transpose2d(x[0, 0], w), RuntimeError, "Expected 3D .* or 4D"),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("call, error, pattern", [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_bad_arguments_raise_pytorchs_errors(call, error, pattern, executor):
    with onnxnn.set_executor(executor), pytest.raises(error, match=pattern):
        call(onnxnn.tensor(_X2), onnxnn.tensor(_W2)).numpy()


def test_a_float_padding_is_refused_after_the_same_int_padding():
    """1.0 equals 1 as a key of the remembered hyperparameters: the refusal must not depend on order."""
    x, w = onnxnn.zeros(1, 2, 5, 5), onnxnn.zeros(2, 2, 3, 3)
    F.conv2d(x, w, padding=1)
    with pytest.raises(TypeError, match="'padding' must be tuple of ints, not float"):
        F.conv2d(x, w, padding=1.0)
    with pytest.raises(TypeError, match="'stride' must be tuple of ints, not bool"):
        F.conv2d(x, w, stride=True, padding=1)


C1, C2, T1, T2 = nn.Conv1d, nn.Conv2d, nn.ConvTranspose1d, nn.ConvTranspose2d
# (id, class of a layer (4, 6, 3, **kwargs), kwargs, input shape, forward's keyword arguments, error, pattern)
LAYER_ERROR_CASES = [
    ("reflect-rank-2", C2, {"padding": 1, "padding_mode": "reflect"}, (4, 6), {}, NotImplementedError, "2D"),
    ("circular-rank-5", C2, {"padding": 1, "padding_mode": "circular"}, (1, 1, 4, 6, 6), {}, NotImplementedError, "5D"),
    ("replicate-rank-1", C1, {"padding": 1, "padding_mode": "replicate"}, (4,), {}, NotImplementedError, "size 2"),
    ("reflect-too-wide", C2, {"padding": 3, "padding_mode": "reflect"}, (1, 4, 3, 3), {}, RuntimeError, "less than"),
    ("circular-too-wide", C2, {"padding": 4, "padding_mode": "circular"}, (1, 4, 3, 3), {}, RuntimeError, "once"),
    ("channels", C2, {}, (1, 3, 5, 5), {}, RuntimeError, "to have 4 channels"),
    ("output-size", T2, {"stride": 2}, (1, 4, 5, 5), {"output_size": [13, 10]}, ValueError, r"\[12, 12\]"),
    ("output-size-length", T1, {}, (4, 5), {"output_size": [1, 2, 7]}, ValueError, "1 or 2 elements"),
]


@pytest.mark.parametrize(
    "cls, kwargs, input_shape, forward, error, pattern",
    [c[1:] for c in LAYER_ERROR_CASES],
    ids=[c[0] for c in LAYER_ERROR_CASES],
)
def test_layer_forward_errors(cls, kwargs, input_shape, forward, error, pattern):
    layer = cls(4, 6, 3, **kwargs)
    with pytest.raises(error, match=pattern):
        layer(onnxnn.zeros(input_shape), **forward)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"groups": 3}, "in_channels must be divisible by groups"),
        ({"groups": 0}, "groups must be a positive integer"),
        ({"padding": "same", "stride": 2}, "not supported for strided convolutions"),
        ({"padding": "full"}, "Invalid padding string 'full'"),
        ({"padding_mode": "wrap"}, "padding_mode must be one of"),
    ],
)
def test_layer_construction_errors(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        nn.Conv2d(4, 6, 3, **kwargs)


# ---------------------------------------------------------------- unfold / fold


def reference_unfold(x, kernel, dilation, padding, stride):
    """im2col: ``(N, C * kh * kw, L)``, rows channel-major ``(c, kh, kw)`` as PyTorch orders them."""
    padded = np.pad(x, [(0, 0), (0, 0), (padding[0], padding[0]), (padding[1], padding[1])])
    out = [(s - d * (k - 1) - 1) // st + 1 for s, k, d, st in zip(padded.shape[2:], kernel, dilation, stride)]
    columns = np.stack(
        [padded[(slice(None), slice(None)) + window] for _, window in _taps(kernel, dilation, stride, out)], axis=2
    )
    return columns.reshape(x.shape[0], x.shape[1] * kernel[0] * kernel[1], out[0] * out[1])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "shape, kernel, dilation, padding, stride",
    [
        ((2, 3, 6, 7), (3, 3), (1, 1), (0, 0), (1, 1)),
        ((1, 2, 6, 7), (2, 3), (2, 1), (1, 2), (2, 1)),
        ((0, 2, 5, 5), (2, 2), (1, 1), (1, 1), (2, 2)),
        ((1, 1, 5, 5), (3, 3), (1, 1), (1, 1), (3, 3)),
    ],
)
def test_unfold_and_fold_against_numpy(executor, shape, kernel, dilation, padding, stride):
    rng = np.random.default_rng(10)
    x = rng.standard_normal(shape)
    columns = reference_unfold(x, kernel, dilation, padding, stride)
    arguments = {"kernel_size": kernel, "dilation": dilation, "padding": padding, "stride": stride}
    with onnxnn.set_executor(executor):
        np.testing.assert_array_equal(F.unfold(onnxnn.tensor(x), **arguments).numpy(), columns)
        c = rng.standard_normal(columns.shape)
        folded = F.fold(onnxnn.tensor(c), shape[2:], **arguments).numpy()
    # fold is unfold's adjoint: <fold(c), x> = <c, unfold(x)> for every x, so fold(c) is the
    # gradient of that sum: each element collects the columns that copied it.
    sources = reference_unfold(np.arange(x.size, dtype=np.float64).reshape(x.shape), kernel, dilation, padding, stride)
    inside = reference_unfold(np.ones(x.shape), kernel, dilation, padding, stride) > 0
    expected = np.bincount(sources[inside].astype(np.int64), c[inside], minlength=x.size).reshape(x.shape)
    np.testing.assert_allclose(folded, expected, rtol=0, atol=1e-12)
