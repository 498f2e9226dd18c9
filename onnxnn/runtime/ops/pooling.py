"""Pooling: MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool and PyTorch's pooling functions.

Gradients stay within standard ONNX ops: a max pool routes each output gradient to the element its
``Indices`` output names (``ScatterElements`` with ``reduction="add"``, so overlapping windows that
pick the same element add up); an average or Lp pool spreads the gradient back over each window with
a ``ConvTranspose`` against a kernel of ones, the adjoint of summing a window.
"""

from __future__ import annotations

import numpy as np

from ...ir import dtypes
from ...ir.registry import gradient_rules, shape_rules
from ._common import Tensor, apply_op, int64_constant
from .gathered_pooling import (
    INTEGER_AVG_POOLS,
    INTEGER_MAX_POOLS,
    MAX_POOLED_AS_FLOAT64,
    int64_avg_pool,
    int64_max_pool,
    refuse_pool_dtype,
)
from .elementwise import onnx_sign, where
from .conv import batched, expand_param
from .conv_gradients import scatter_windows
from .windows import pooled_size, window_geometry
from .opmath import widened
from .padding import pad_constant
from .shape import _constant_list
from ..tensor import outside_autocast

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
]


def _pool_geometry(inputs, attrs, op_type: str):
    x = inputs[0]
    if len(x.shape) < 3:
        raise RuntimeError(f"{op_type} expects an input of shape (N, C, *spatial), got {list(x.shape)}")
    kernel = attrs.get("kernel_shape")
    if kernel is None or len(kernel) != len(x.shape) - 2:
        raise RuntimeError(
            f"{op_type}: kernel_shape {None if kernel is None else list(kernel)} must give one size "
            f"per spatial axis of the input of shape {list(x.shape)}"
        )
    geometry = window_geometry(x.shape[2:], kernel, attrs, bool(attrs.get("ceil_mode", 0)), pooling=True)
    if any(size <= 0 for size in geometry.output):
        raise RuntimeError(
            f"{op_type}: input of shape {list(x.shape)} with kernel_shape {list(kernel)} gives a "
            f"non-positive output size {geometry.output}"
        )
    return geometry


@shape_rules.register("MaxPool")
def _max_pool_shape(inputs, attrs):
    x = inputs[0]
    shape = x.shape[:2] + tuple(_pool_geometry(inputs, attrs, "MaxPool").output)
    return [(shape, x.dtype), (shape, dtypes.int64)]


@shape_rules.register("AveragePool")
def _average_pool_shape(inputs, attrs):
    x = inputs[0]
    return [(x.shape[:2] + tuple(_pool_geometry(inputs, attrs, "AveragePool").output), x.dtype)]


@shape_rules.register("LpPool")
def _lp_pool_shape(inputs, attrs):
    x = inputs[0]
    return [(x.shape[:2] + tuple(_pool_geometry(inputs, attrs, "LpPool").output), x.dtype)]


@shape_rules.register("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool_shape(inputs, attrs):
    x = inputs[0]
    if len(x.shape) < 3:
        raise RuntimeError(f"global pooling expects an input of shape (N, C, *spatial), got {list(x.shape)}")
    return [(x.shape[:2] + (1,) * (len(x.shape) - 2), x.dtype)]


def _pool_node(op_type: str, x: Tensor, attrs: dict, name: str | None = None, num_outputs: int = 1):
    """Records a pooling node over ``x``, sliced to its size where ONNX's shape inference is one longer.

    With ceil_mode, onnxruntime's kernels and PyTorch drop a last window that would start in the end
    padding, but ONNX's shape inference, which onnxruntime runs on every graph, keeps it: any op
    meeting the output and a tensor of the true size then fails ("Incompatible dimensions"). A Slice
    to the true size (nothing to cut when run) gives the inference the size the kernel computes.
    """
    result = apply_op(op_type, (x,), attrs, name, num_outputs=num_outputs)
    if not attrs.get("ceil_mode", 0):
        return result
    geometry = window_geometry(x.shape[2:], attrs["kernel_shape"], attrs, True, pooling=True)
    inferred = [
        -(-(size + begin + end - dilation * (kernel - 1) - 1) // stride) + 1
        for size, kernel, stride, dilation, begin, end in zip(
            x.shape[2:], geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin, geometry.pads_end
        )
    ]
    if inferred == geometry.output:
        return result
    starts = int64_constant([0] * len(inferred))
    ends = int64_constant(geometry.output)
    axes = int64_constant(list(range(2, 2 + len(inferred))))

    def trimmed(output: Tensor) -> Tensor:
        return apply_op("Slice", (output, starts, ends, axes), None, "SliceBackward0")

    return tuple(trimmed(output) for output in result) if isinstance(result, tuple) else trimmed(result)


# ---------------------------------------------------------------- gradient rules


def _windows_in_padding(input_shape: tuple, attrs: dict, output_spatial: tuple) -> np.ndarray | None:
    """Where a MaxPool window lies wholly in the padding (possible with dilation), as a boolean mask of
    the output's spatial shape; None where none does (the usual case: no mask is recorded).

    Such a window has no element to route its gradient to: its Indices name no position of its own
    (onnxruntime writes -1, onnxnn's kernels one past the channel), so they get none, as PyTorch's.
    """
    if all(dilation == 1 for dilation in attrs.get("dilations", ())):
        return None  # contiguous taps, at most half a kernel of padding: every window reaches the input
    geometry = window_geometry(input_shape[2:], attrs["kernel_shape"], attrs, bool(attrs.get("ceil_mode", 0)), True)
    inside = []
    for size, out, kernel, stride, dilation, begin in zip(
        input_shape[2:], output_spatial, geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin
    ):
        positions = np.arange(out)[:, None] * stride - begin + np.arange(kernel)[None, :] * dilation
        inside.append(((positions >= 0) & (positions < size)).any(axis=1))
    if all(axis.all() for axis in inside):
        return None
    mask = np.ones((), bool)
    for axis in inside:
        mask = np.logical_and.outer(mask, axis)
    return ~mask


def _route_to_indices(g: Tensor, indices: Tensor, input_shape: tuple, name: str, padded=None) -> Tensor:
    """Adds each gradient entry at the flat input position ``indices`` names (ONNX MaxPool's Indices);
    ``padded`` (``_windows_in_padding``), where given, marks the windows that route nothing."""
    size = int(np.prod(input_shape))
    if padded is not None:
        nowhere = Tensor._from_array(padded, dtypes.bool, g.device)
        g = where(nowhere, Tensor._zeros((), g.dtype, g.device), g)
        indices = where(nowhere, Tensor._zeros((), indices.dtype, g.device), indices.detach())
    # onnxruntime's CPU ScatterElements cannot add float16 or bfloat16: add in float32 and round
    # once (PyTorch's CPU kernels accumulate low precision in float32 as well).
    wide = widened(g)
    zeros = Tensor._zeros((), wide.dtype, g.device).expand((size,))
    routed = apply_op(
        "ScatterElements",
        (zeros, indices.detach().reshape(-1), wide.reshape(-1)),
        {"axis": 0, "reduction": "add"},
        name,
    )
    return routed.reshape(input_shape).to(g.dtype)


def _max_indices(x: Tensor, attrs: dict) -> Tensor:
    """The Indices output of MaxPool recomputed in row-major order (whatever storage_order the node used)."""
    attrs = {key: value for key, value in attrs.items() if key != "storage_order"}
    return apply_op("MaxPool", (x,), attrs, num_outputs=2)[1]


@gradient_rules.register("MaxPool")
def _max_pool_grad(ctx, g, *unused):
    outputs = ctx.function.outputs
    if len(outputs) > 1 and not ctx.attrs.get("storage_order", 0):
        indices = ctx.output(1)
    else:
        indices = _max_indices(ctx.input(0), ctx.attrs)
    # Ties route to the one element Indices names, as PyTorch's max_pool backward does.
    input_shape = ctx.input_shape(0)
    padded = _windows_in_padding(input_shape, ctx.attrs, tuple(g.shape[2:]))
    return (_route_to_indices(g, indices, input_shape, "MaxPoolWithIndicesBackward0", padded),)


@gradient_rules.register("GlobalMaxPool")
def _global_max_pool_grad(ctx, g):
    x = ctx.input(0)
    indices = _max_indices(x, {"kernel_shape": list(x.shape[2:])})
    return (_route_to_indices(g, indices, x.shape, "AdaptiveMaxPoolBackward0"),)


@gradient_rules.register("GlobalAveragePool")
def _global_average_pool_grad(ctx, g):
    shape = ctx.input_shape(0)
    return ((g / float(np.prod(shape[2:]))).expand(shape),)


def _valid_counts(geometry, spatial) -> np.ndarray:
    """How many taps of each window fall inside the unpadded input (an outer product over axes)."""
    counts = np.ones((1, 1), dtype=np.int64)
    for size, out, k, s, d, b in zip(
        spatial, geometry.output, geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin
    ):
        starts = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - b
        per_axis = ((starts >= 0) & (starts < size)).sum(axis=1)
        counts = counts[..., None] * per_axis.reshape((1,) * counts.ndim + (out,))
    return counts


def _spread_over_windows(g: Tensor, input_shape: tuple, geometry) -> Tensor:
    """The adjoint of summing every window: each input element gets the sum of g over the windows holding it."""
    batch, channels = input_shape[0], input_shape[1]
    planes = g.reshape((batch * channels, 1) + tuple(g.shape[2:]))
    ones = Tensor._full((), 1.0, g.dtype, g.device).expand((1, 1) + tuple(geometry.kernel))
    spread = scatter_windows(planes, ones, input_shape[2:], geometry, 1)
    return spread.reshape(input_shape)


@gradient_rules.register("AveragePool")
def _average_pool_grad(ctx, g):
    shape = ctx.input_shape(0)
    geometry = window_geometry(
        shape[2:], ctx.attrs["kernel_shape"], ctx.attrs, bool(ctx.attrs.get("ceil_mode", 0)), pooling=True
    )
    # Each output is (sum of the valid elements of its window) / divisor. The divisor depends on
    # count_include_pad and on ceil_mode's partial windows; pooling a plane of ones gives
    # valid_count / divisor exactly as the forward node computed it, whatever the attributes.
    ones = Tensor._full((), 1.0, g.dtype, g.device).expand((1, 1) + tuple(shape[2:]))
    ones_pooled = _pool_node("AveragePool", ones, dict(ctx.attrs))
    counts = np.maximum(_valid_counts(geometry, shape[2:]), 1).astype(g.dtype.numpy_dtype)
    per_window = ones_pooled / Tensor._from_array(counts, g.dtype, g.device)
    return (_spread_over_windows(g * per_window, shape, geometry),)


@gradient_rules.register("LpPool")
def _lp_pool_grad(ctx, g):
    x, y = ctx.input(0), ctx.output(0)
    p = float(ctx.attrs.get("p", 2))
    geometry = window_geometry(
        x.shape[2:], ctx.attrs["kernel_shape"], ctx.attrs, bool(ctx.attrs.get("ceil_mode", 0)), pooling=True
    )
    # y = (sum |x|^p)^(1/p): dy/dx = (|x| / y)^(p-1) * sign(x) for each window holding x.
    spread = _spread_over_windows(g * y.pow(1.0 - p), x.shape, geometry)
    return (spread * x.abs().pow(p - 1.0) * onnx_sign(x),)


@gradient_rules.register("GlobalLpPool")
def _global_lp_pool_grad(ctx, g):
    # One window covering every spatial position: LpPool's derivative without the spreading.
    x, y = ctx.input(0), ctx.output(0)
    p = float(ctx.attrs.get("p", 2))
    # A zero norm takes the subgradient 0 (as ReduceL2 and PyTorch's norm do) rather than 0 * inf.
    scale = where(y == 0, 0.0, g * where(y == 0, 1.0, y).pow(1.0 - p))
    return (scale * x.abs().pow(p - 1.0) * onnx_sign(x),)


@shape_rules.register("MaxUnpool")
def _max_unpool_shape(inputs, attrs):
    x = inputs[0]
    if len(inputs) > 2 and inputs[2] is not None:
        return [(tuple(int(v) for v in _constant_list(inputs[2])), x.dtype)]
    rank = len(x.shape) - 2
    kernel = [int(k) for k in attrs["kernel_shape"]]
    strides = [int(v) for v in attrs.get("strides") or [1] * rank]
    pads = [int(v) for v in attrs.get("pads") or [0] * (2 * rank)]
    spatial = [(x.shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[rank + i] for i in range(rank)]
    return [(x.shape[:2] + tuple(spatial), x.dtype)]


@gradient_rules.register("MaxUnpool")
def _max_unpool_grad(ctx, g, *unused):
    # Y[I[i]] = X[i] over the flattened tensors (ONNX's indices count over the whole tensor), so
    # dX[i] = dY[I[i]]. Indices and output_shape are integer inputs.
    shape = ctx.input_shape(0)
    gathered = apply_op("Gather", (g.reshape(-1), ctx.input(1).detach().reshape(-1)), {"axis": 0}, "MaxUnpoolBackward0")
    return (gathered.reshape(shape),) + (None,) * (ctx.num_inputs - 1)


# ---------------------------------------------------------------- tensor functions


def _window_arguments(function: str, rank: int, kernel_size, stride, padding, dilation=1):
    """kernel/stride/padding/dilation as lists of ``rank`` ints, with PyTorch's checks and messages."""
    what = "a tuple of " + {1: "one", 2: "two", 3: "three"}[rank] + " ints"
    kernel = expand_param(kernel_size, rank, "kernel_size", function)
    if stride is None or (not isinstance(stride, int) and len(stride) == 0):
        strides = list(kernel)
    elif isinstance(stride, int):
        strides = [stride] * rank
    else:
        if len(stride) not in (1, rank):
            raise RuntimeError(f"{function}: stride must either be omitted, a single int, or {what}")
        strides = expand_param(stride, rank, "stride", function)
    pads = expand_param(padding, rank, "padding", function)
    dilations = expand_param(dilation, rank, "dilation", function)
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_size={kernel}")
    if any(s <= 0 for s in strides):
        raise RuntimeError(f"stride should be greater than zero, but got stride={strides}")
    if any(d <= 0 for d in dilations):
        raise RuntimeError(f"dilation should be greater than zero, but got dilation={dilations}")
    return kernel, strides, pads, dilations


def _check_output(input: Tensor, output: list[int]) -> None:
    if any(size <= 0 for size in output):
        given = "x".join(str(v) for v in input.shape[1:])
        calculated = "x".join(str(v) for v in [input.shape[1]] + list(output))
        raise RuntimeError(
            f"Given input size: ({given}). Calculated output size: ({calculated}). Output size is too small"
        )


def _batched_pool_input(input: Tensor, rank: int, function: str) -> tuple[Tensor, bool]:
    if input.dim() not in (rank + 1, rank + 2):
        raise RuntimeError(
            f"{function}: Expected {rank + 1}D or {rank + 2}D (batch mode) tensor with optional 0 dim "
            f"batch size for input, but got: {list(input.shape)}"
        )
    _require_nonempty_planes(input, rank, function)
    return batched(input, rank, function)


def _require_nonempty_planes(input: Tensor, rank: int, function: str) -> None:
    """Refuses an empty channel or spatial dim, as PyTorch's max and average pools do: only the batch
    of a batched input may be empty (an unbatched input has none)."""
    shape = input.shape
    non_batch = shape[1:] if len(shape) == rank + 2 else shape
    if 0 not in non_batch:
        return
    if rank == 3:  # PyTorch's 3-D kernels word it their own way
        raise RuntimeError(
            f"{function}(): Expected input's non-batch dimensions to have positive length, but input has a "
            f"shape of {list(shape)} and non-batch dimension {list(non_batch).index(0)} has length zero!"
        )
    raise RuntimeError(
        f"{function}: Expected {rank + 1}D or {rank + 2}D (batch mode) tensor with optional 0 dim batch size "
        f"for input, but got:{list(shape)}"
    )


def require_nonempty_dims(input: Tensor, first: int, function: str) -> None:
    """Refuses an empty dim from ``first`` on, as PyTorch's adaptive pools do (from dim 1 for the max
    pools and adaptive_avg_pool3d, even on an unbatched input; the spatial dims only for
    adaptive_avg_pool1d and 2d, whose channels may be empty)."""
    shape = input.shape
    if 0 not in shape[first:]:
        return
    raise RuntimeError(
        f"{function}(): Expected input to have non-zero size for non-batch dimensions, but input has sizes "
        f"{list(shape)} with dimension {first + list(shape[first:]).index(0)} being empty"
    )


def _negative_infinity_where_no_element(result: Tensor, input_shape: tuple, attrs: dict, narrow) -> Tensor:
    """``result`` of a float MaxPool with -inf where a window lies wholly in the padding, as PyTorch's
    (onnxruntime writes the lowest float there, or NaN through onnxnn's NaN-propagating form)."""
    if narrow is not None:
        return result
    padded = _windows_in_padding(input_shape, attrs, tuple(result.shape[2:]))
    if padded is None:
        return result
    nowhere = Tensor._from_array(padded, dtypes.bool, result.device)
    return where(nowhere, Tensor._full((), float("-inf"), result.dtype, result.device), result)


def _max_pool(input: Tensor, kernel_size, stride, padding, dilation, ceil_mode: bool, return_indices: bool, rank: int):
    function = f"max_pool{rank}d"
    # PyTorch's max_pool1d without indices is a kernel of its own, for floats only.
    refuse_pool_dtype(input.dtype, function, INTEGER_MAX_POOLS if rank > 1 or return_indices else frozenset())
    kernel, strides, pads, dilations = _window_arguments(function, rank, kernel_size, stride, padding, dilation)
    effective = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
    if any(p > e // 2 for p, e in zip(pads, effective)):
        raise RuntimeError(
            f"pad should be at most half of effective kernel size, but got pad={pads}, "
            f"kernel_size={kernel} and dilation={dilations}"
        )
    if any(p > k // 2 for p, k in zip(pads, kernel)):  # PyTorch checks the undilated kernel too (after)
        raise RuntimeError(
            f"pad should be smaller than or equal to half of kernel size, but got pad={pads} and kernel_size={kernel}"
        )
    x, added_batch = _batched_pool_input(input, rank, function)
    output = [
        pooled_size(size, k, s, d, p, p, ceil_mode)
        for size, k, s, d, p in zip(x.shape[2:], kernel, strides, dilations, pads)
    ]
    _check_output(x, output)
    if x.dtype is dtypes.int64:
        pooled = int64_max_pool(x, kernel, strides, pads, dilations, output, return_indices)
        if not added_batch:
            return pooled
        return tuple(part.squeeze(0) for part in pooled) if return_indices else pooled.squeeze(0)
    attrs = {
        "kernel_shape": kernel,
        "strides": strides,
        "pads": pads + pads,
        "dilations": dilations,
        "ceil_mode": int(ceil_mode),
    }
    name = f"MaxPool{rank}DWithIndicesBackward0"
    narrow = x.dtype if x.dtype in MAX_POOLED_AS_FLOAT64 else None
    if narrow is not None:
        x = x.to(dtypes.float64)
    if not return_indices:
        result = _negative_infinity_where_no_element(
            _pool_node("MaxPool", x, attrs, name), tuple(x.shape), attrs, narrow
        )
        result = result if narrow is None else result.to(narrow)
        return result.squeeze(0) if added_batch else result
    result, flat_indices = _pool_node("MaxPool", x, attrs, name, num_outputs=2)
    result = _negative_infinity_where_no_element(result, tuple(x.shape), attrs, narrow)
    result = result if narrow is None else result.to(narrow)
    # ONNX counts positions over the whole (N, C, *spatial) tensor, PyTorch within each (n, c) plane.
    plane = int(np.prod(x.shape[2:]))
    offsets = (np.arange(x.shape[0] * x.shape[1], dtype=np.int64) * plane).reshape(
        (x.shape[0], x.shape[1]) + (1,) * rank
    )
    indices = flat_indices - Tensor._from_array(offsets, dtypes.int64, x.device)
    if added_batch:
        return result.squeeze(0), indices.squeeze(0)
    return result, indices


def max_pool1d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)``; see :func:`max_pool2d`."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


def max_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """2-D max pooling, recorded as one ONNX ``MaxPool`` node.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        kernel_size: window size (int or pair).
        stride: window step (default: ``kernel_size``).
        padding: implicit ``-inf`` padding on both sides, at most half the effective kernel.
        dilation: spacing between window elements.
        ceil_mode: keep a last partial window (never one starting in the padding).
        return_indices: also return the argmax of each window, flattened per ``(n, c)`` plane.

    Returns:
        The pooled tensor, or ``(pooled, indices)``.

    Example::

        >>> x = onnxnn.arange(16.0).reshape(1, 1, 4, 4)
        >>> max_pool2d(x, 2)
        tensor([[[[ 5.,  7.],
                  [13., 15.]]]])
    """
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


@outside_autocast("max_pool3d")
def max_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode: bool = False,
    return_indices: bool = False,
):
    """3-D max pooling over ``(N, C, D, H, W)``; see :func:`max_pool2d`."""
    return _max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3)


def _avg_pool(
    input: Tensor, kernel_size, stride, padding, ceil_mode: bool, count_include_pad: bool, divisor_override, rank: int
) -> Tensor:
    function = f"avg_pool{rank}d"
    refuse_pool_dtype(input.dtype, function, INTEGER_AVG_POOLS)
    kernel, strides, pads, _ = _window_arguments(function, rank, kernel_size, stride, padding)
    if any(p > k // 2 for p, k in zip(pads, kernel)):
        raise RuntimeError(f"pad should be at most half of kernel size, but got pad={pads} and kernel_size={kernel}")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x, added_batch = _batched_pool_input(input, rank, function)
    output = [pooled_size(size, k, s, 1, p, p, ceil_mode) for size, k, s, p in zip(x.shape[2:], kernel, strides, pads)]
    _check_output(x, output)
    name = f"AvgPool{rank}DBackward0"
    if x.dtype is dtypes.int64:
        result = int64_avg_pool(x, kernel, strides, pads, output, count_include_pad, divisor_override)
    elif divisor_override is None:
        attrs = {
            "kernel_shape": kernel,
            "strides": strides,
            "pads": pads + pads,
            "ceil_mode": int(ceil_mode),
            "count_include_pad": int(count_include_pad),
        }
        result = _pool_node("AveragePool", x, attrs, name)
    else:
        # Window sums: zero-pad so that every window (ceil_mode's last one too) lies inside, where
        # an average counting the padding is the sum over the kernel size.
        ends = [(out - 1) * s + k - size - p for size, out, k, s, p in zip(x.shape[2:], output, kernel, strides, pads)]
        padded = pad_constant(x, [0, 0] + pads + [0, 0] + [max(e, 0) for e in ends])
        attrs = {"kernel_shape": kernel, "strides": strides, "count_include_pad": 1}
        averaged = apply_op("AveragePool", (padded,), attrs, name)
        result = averaged * (float(np.prod(kernel)) / float(divisor_override))
    return result.squeeze(0) if added_batch else result


def avg_pool1d(
    input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True
) -> Tensor:
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)``; see :func:`avg_pool2d`."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


def avg_pool2d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """2-D average pooling, recorded as one ONNX ``AveragePool`` node.

    Args:
        input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``.
        kernel_size, stride, padding: as in :func:`max_pool2d` (stride defaults to ``kernel_size``).
        ceil_mode: keep a last partial window; its divisor counts only positions inside the padded input.
        count_include_pad: whether zero padding counts in the divisor.
        divisor_override: divide every window sum by this instead.

    Example::

        >>> avg_pool2d(onnxnn.ones(1, 1, 4, 4), 2, padding=1, count_include_pad=False).shape
        onnxnn.Size([1, 1, 3, 3])
    """
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2)


@outside_autocast("avg_pool3d")
def avg_pool3d(
    input: Tensor,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)``; see :func:`avg_pool2d`."""
    return _avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3)
