"""Convolutions: Conv and ConvTranspose (shape and gradient rules) and PyTorch's conv*d functions.

A convolution's gradients are built from ``conv_gradients``' formulations (standard ONNX ops only):
the input gradient of ``Conv`` scatters the output gradient back through the weight, and its
weight gradient correlates the input with the output gradient. ``ConvTranspose`` is the adjoint of
``Conv``, so its rules are the same two formulas read the other way round. Integer convolutions
and inputs without channels take no Conv node (``conv_without_conv_node``); unfold and fold are
``columns``' im2col and col2im. The window arithmetic (``windows.window_geometry``) is shared with
the pooling ops.
"""

from __future__ import annotations

import numbers

from ...ir import dtypes
from ...ir.caches import register_cache
from ...ir.dtypes import scalar_type_name
from ...ir.graph import FrozenAttributes
from ...ir.registry import gradient_rules, shape_rules
from ..tensor import autocast_arguments
from ._common import Tensor, apply_op, int64_constant
from .conv_gradients import channel_sum, gather_windows, needs_input_grad, scatter_windows, weight_gradient
from .conv_without_conv_node import INTEGER_CONVOLUTION_DTYPES, convolution_without_channels, integer_convolution
from .windows import transpose_geometry, window_geometry

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


# ---------------------------------------------------------------- Conv


def _conv_node_kernel(x, w, attrs: dict, op_type: str) -> list[int]:
    kernel = list(w.shape[2:])
    declared = attrs.get("kernel_shape")
    if declared is not None and len(declared) and [int(k) for k in declared] != kernel:
        raise RuntimeError(
            f"{op_type}: kernel_shape {list(declared)} does not match the weight of shape {list(w.shape)}"
        )
    return kernel


@shape_rules.register("Conv")
def _conv_shape(inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    if type(attrs) is not FrozenAttributes:
        return _checked_conv_shape(x, w, bias, attrs)
    key = (x.shape, x.dtype, w.shape, bias is None or bias.shape)
    return attrs.remembered(key, _checked_conv_shape, x, w, bias, attrs)


def _checked_conv_shape(x, w, bias, attrs) -> list:
    group = int(attrs.get("group", 1))
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise RuntimeError(
            f"Conv expects an input of rank >= 3 and a weight of the same rank, got input "
            f"{list(x.shape)} and weight {list(w.shape)}"
        )
    if group < 1 or w.shape[0] % group or x.shape[1] != w.shape[1] * group:
        raise RuntimeError(
            f"Conv: given group={group}, weight of size {list(w.shape)}, expected input"
            f"{list(x.shape)} to have {w.shape[1] * group} channels and the weight's first "
            f"dimension to be divisible by {group}"
        )
    if bias is not None and bias.shape != (w.shape[0],):
        raise RuntimeError(f"Conv: expected bias of shape [{w.shape[0]}], got {list(bias.shape)}")
    geometry = window_geometry(x.shape[2:], _conv_node_kernel(x, w, attrs, "Conv"), attrs)
    if any(size <= 0 for size in geometry.output):
        raise RuntimeError(
            f"Conv: input of shape {list(x.shape)} is smaller than the dilated kernel of weight "
            f"{list(w.shape)} (output size {geometry.output})"
        )
    return [((x.shape[0], w.shape[0]) + tuple(geometry.output), x.dtype)]


@gradient_rules.register("Conv")
def _conv_grad(ctx, g):
    x_shape, w_shape = ctx.input_shape(0), ctx.input_shape(1)
    group = int(ctx.attrs.get("group", 1))
    geometry = window_geometry(x_shape[2:], w_shape[2:], ctx.attrs)
    grad_x = grad_w = grad_b = None
    if needs_input_grad(ctx, 0):
        grad_x = scatter_windows(g, ctx.input(1), x_shape[2:], geometry, group)
    if needs_input_grad(ctx, 1):
        grad_w = weight_gradient(
            ctx.input(0), g, geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin, group
        )
    if ctx.num_inputs > 2 and ctx.input_value(2) is not None and needs_input_grad(ctx, 2):
        grad_b = channel_sum(g)
    return grad_x, grad_w, grad_b


# ---------------------------------------------------------------- ConvTranspose


@shape_rules.register("ConvTranspose")
def _conv_transpose_shape(inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    group = int(attrs.get("group", 1))
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise RuntimeError(
            f"ConvTranspose expects an input of rank >= 3 and a weight of the same rank, got "
            f"input {list(x.shape)} and weight {list(w.shape)}"
        )
    if group < 1 or x.shape[1] != w.shape[0] or w.shape[0] % group:
        raise RuntimeError(
            f"ConvTranspose: given group={group}, weight of size {list(w.shape)}, expected input"
            f"{list(x.shape)} to have {w.shape[0]} channels, divisible by {group}"
        )
    channels = w.shape[1] * group
    if bias is not None and bias.shape != (channels,):
        raise RuntimeError(f"ConvTranspose: expected bias of shape [{channels}], got {list(bias.shape)}")
    geometry = transpose_geometry(x.shape[2:], _conv_node_kernel(x, w, attrs, "ConvTranspose"), attrs)
    if any(size <= 0 for size in geometry.output):
        raise RuntimeError(
            f"ConvTranspose: input of shape {list(x.shape)} gives a non-positive output size {geometry.output}"
        )
    return [((x.shape[0], channels) + tuple(geometry.output), x.dtype)]


@gradient_rules.register("ConvTranspose")
def _conv_transpose_grad(ctx, g):
    x_shape, w_shape = ctx.input_shape(0), ctx.input_shape(1)
    group = int(ctx.attrs.get("group", 1))
    geometry = transpose_geometry(x_shape[2:], w_shape[2:], ctx.attrs)
    grad_x = grad_w = grad_b = None
    if needs_input_grad(ctx, 0):
        grad_x = gather_windows(
            g,
            ctx.input(1),
            x_shape[2:],
            geometry.kernel,
            geometry.strides,
            geometry.dilations,
            geometry.pads_begin,
            group,
        )
    if needs_input_grad(ctx, 1):
        # ConvTranspose(x, w) is the adjoint of Conv(., w) mapping the output space to the input's:
        # its weight gradient is Conv's weight gradient with the roles of x and g exchanged.
        grad_w = weight_gradient(
            g, ctx.input(0), geometry.kernel, geometry.strides, geometry.dilations, geometry.pads_begin, group
        )
    if ctx.num_inputs > 2 and ctx.input_value(2) is not None and needs_input_grad(ctx, 2):
        grad_b = channel_sum(g)
    return grad_x, grad_w, grad_b


# ---------------------------------------------------------------- tensor functions


def expand_param(value, rank: int, name: str, function: str | None = None) -> list[int]:
    """An int or a sequence of ``rank`` ints as a list (PyTorch's ``_pair``/``_triple`` with its error)."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, numbers.Integral):  # numpy's integer scalars too, as PyTorch takes them
        return [int(value)] * rank
    values = [int(v) for v in value]
    if len(values) == 1:
        return values * rank
    if len(values) != rank:
        if function is not None:
            count = {1: "one", 2: "two", 3: "three"}.get(rank, str(rank))
            raise RuntimeError(f"{function}: {name} must either be a single int, or a tuple of {count} ints")
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {rank} values to match "
            f"the convolution dimensions, but got {name}={values}"
        )
    return values


def _int_tuple(value, name: str, function: str) -> None:
    """PyTorch's argument parser for a ``tuple of ints`` argument: an integer or a sequence of integers;
    a bool, a float or a string (element) is a TypeError, never truncated to an int."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{function}(): argument '{name}' must be tuple of ints, not {type(value).__name__}")
    for position, element in enumerate(value):
        if not isinstance(element, numbers.Integral) or isinstance(element, bool):
            raise TypeError(
                f"{function}(): argument '{name}' must be tuple of ints, but found element of type "
                f"{type(element).__name__} at pos {position}"
            )


def _check_argument_types(function: str, groups, **tuples) -> None:
    """The argument types PyTorch's ``conv*d``/``conv_transpose*d`` take (its parser raises TypeError)."""
    for name, value in tuples.items():
        _int_tuple(value, name, function)
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool):
        raise TypeError(f"{function}(): argument 'groups' must be int, not {type(groups).__name__}")


def batched(input: Tensor, spatial_rank: int, function: str) -> tuple[Tensor, bool]:
    """``input`` with a batch axis (PyTorch accepts unbatched ``(C, *spatial)``) and whether one was added."""
    if input.dim() == spatial_rank + 2:
        return input, False
    if input.dim() == spatial_rank + 1:
        return input.unsqueeze(0), True
    raise RuntimeError(
        f"Expected {spatial_rank + 1}D (unbatched) or {spatial_rank + 2}D (batched) input to "
        f"{function}, but got input of size: {list(input.shape)}"
    )


def _check_conv_arguments(input: Tensor, weight: Tensor, bias, groups: int, transposed: bool) -> None:
    """PyTorch's ``check_shape_forward`` in its words (the input already has its batch axis)."""
    if weight.dim() != input.dim():
        raise RuntimeError(
            f"Expected {weight.dim()}-dimensional input for {weight.dim()}-dimensional weight "
            f"{list(weight.shape)}, but got {input.dim()}-dimensional input of size "
            f"{list(input.shape)} instead"
        )
    if input.dtype is not weight.dtype:
        raise RuntimeError(
            f"expected scalar type {scalar_type_name(input.dtype)} but found {scalar_type_name(weight.dtype)}"
        )
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(
            f"Input type ({scalar_type_name(input.dtype)}) and bias type ({scalar_type_name(bias.dtype)}) "
            "should be the same"
        )
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    weight_size = list(weight.shape)
    kernel = weight_size[2:]
    if 0 in kernel:  # PyTorch's messages: 1-d kernels are reported as 2-d ones of height 1
        if len(kernel) == 3:
            detail = f": {kernel[0]} x {kernel[1]} x {kernel[2]} (TxHxW)"
        else:
            height, width = (1, kernel[0]) if len(kernel) == 1 else kernel
            detail = f" kernel_height: {height} kernel_width: {width}"
        raise RuntimeError("kernel size should be greater than zero, but got" + detail)
    # PyTorch checks the weight's first dimension against the groups before the channels, transposed
    # or not (a transposed weight of no input channels is refused there).
    if weight.shape[0] < groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, "
            f"but got weight of size {weight_size} instead"
        )
    if weight.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
            f"but got weight of size {weight_size} instead"
        )
    if not transposed:
        if input.shape[1] != weight.shape[1] * groups:
            raise RuntimeError(
                f"Given groups={groups}, weight of size {weight_size}, expected input"
                f"{list(input.shape)} to have {weight.shape[1] * groups} channels, but got "
                f"{input.shape[1]} channels instead"
            )
        out_channels, prefix = weight.shape[0], ""
    else:
        if input.shape[1] != weight.shape[0]:
            raise RuntimeError(
                f"Given transposed=1, weight of size {weight_size}, expected input"
                f"{list(input.shape)} to have {weight.shape[0]} channels, but got "
                f"{input.shape[1]} channels instead"
            )
        out_channels, prefix = weight.shape[1] * groups, "transposed=1, "
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise RuntimeError(
            f"Given {prefix}weight of size {weight_size}, expected bias to be 1-dimensional with "
            f"{out_channels} elements, but got bias of size {list(bias.shape)} instead"
        )


def _sizes(values) -> str:
    return " x ".join(str(v) for v in values)


def _conv_attributes(input, weight, bias, stride, padding, dilation, groups: int, spatial_rank: int):
    """PyTorch's checks of a convolution call and the Conv node's attributes (input batched already)."""
    function = _CONV_NAMES[spatial_rank]
    if isinstance(padding, str):
        _check_argument_types(function, groups, stride=stride, dilation=dilation)
    else:
        _check_argument_types(function, groups, stride=stride, padding=padding, dilation=dilation)
    _check_conv_arguments(input, weight, bias, groups, transposed=False)
    strides = expand_param(stride, spatial_rank, "stride")
    dilations = expand_param(dilation, spatial_rank, "dilation")
    kernel = list(weight.shape[2:])
    if any(s <= 0 for s in strides):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilations):
        raise RuntimeError(f"dilation should be greater than zero, but got {dilations}")
    if isinstance(padding, str):
        if padding == "valid":
            pads_begin = pads_end = [0] * spatial_rank
        elif padding == "same":
            if any(s != 1 for s in strides):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            # PyTorch puts the odd element of the total padding at the end.
            totals = [d * (k - 1) for k, d in zip(kernel, dilations)]
            pads_begin = [total // 2 for total in totals]
            pads_end = [total - total // 2 for total in totals]
        else:  # the functional form's error (the layers raise ValueError when they are built)
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        pads_begin = pads_end = expand_param(padding, spatial_rank, "padding")
        if any(p < 0 for p in pads_begin):
            raise RuntimeError("negative padding is not supported")
    spatial = list(input.shape[2:])
    padded = [size + b + e for size, b, e in zip(spatial, pads_begin, pads_end)]
    dilated = [d * (k - 1) + 1 for k, d in zip(kernel, dilations)]
    if any(p < k for p, k in zip(padded, dilated)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({_sizes(padded)}). Kernel size: "
            f"({_sizes(dilated)}). Kernel size can't be greater than actual input size"
        )
    return FrozenAttributes(
        strides=strides,
        pads=list(pads_begin) + list(pads_end),
        dilations=dilations,
        group=groups,
        kernel_shape=kernel,
    )


# A layer calls its convolution with the same shapes and hyperparameters call after call: the
# checks and attributes above are computed once per combination (a fifth of an inference call of
# a small CNN was spent redoing them).
_CONV_ATTRIBUTES: dict = {}
_MOST_CONV_ATTRIBUTES = 1024
register_cache("convolution attributes", _CONV_ATTRIBUTES.clear)


def _conv(input: Tensor, weight: Tensor, bias, stride, padding, dilation, groups: int, spatial_rank: int) -> Tensor:
    input, added_batch = batched(input, spatial_rank, _CONV_NAMES[spatial_rank])
    # Autocast casts before the dtype checks, as PyTorch's dispatcher does.
    input, weight, bias = autocast_arguments("Conv", (input, weight, bias))
    x, w = input._value, weight._value
    bias_value = None if bias is None else bias._value
    key: tuple | None = (
        x.shape,
        x.dtype,
        w.shape,
        w.dtype,
        None if bias_value is None else (bias_value.shape, bias_value.dtype),
        stride,
        padding,
        dilation,
        groups,
        spatial_rank,
    )
    if not (_plain(stride) and _plain(padding) and _plain(dilation) and type(groups) is int):
        # 1.0 and True equal 1 as keys: only plain ints and strings take the cache, the rest
        # (lists, numpy integers, the floats and bools PyTorch refuses) is checked on each call.
        attrs = key = None
    else:
        attrs = _CONV_ATTRIBUTES.get(key)
    if attrs is None:
        attrs = _conv_attributes(input, weight, bias, stride, padding, dilation, groups, spatial_rank)
        if key is not None:
            if len(_CONV_ATTRIBUTES) >= _MOST_CONV_ATTRIBUTES:
                _CONV_ATTRIBUTES.clear()
            _CONV_ATTRIBUTES[key] = attrs
    if input.dtype is dtypes.bool:  # PyTorch's CPU kernels' words
        kernel_name = "compute_columns3d" if spatial_rank == 3 else "slow_conv2d_cpu"
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for 'Bool'")
    if input.shape[1] == 0:
        output = convolution_without_channels(input, weight, bias, attrs)
    elif input.dtype in INTEGER_CONVOLUTION_DTYPES:
        output = integer_convolution(input, weight, bias, attrs)
    else:
        operands = (input, weight) if bias is None else (input, weight, bias)
        output = apply_op("Conv", operands, attrs, "ConvolutionBackward0")
    return output.squeeze(0) if added_batch else output


_CONV_NAMES = {1: "conv1d", 2: "conv2d", 3: "conv3d"}


def _plain(value) -> bool:
    """Whether ``value`` is an int, a string or a tuple of ints (of exactly those types)."""
    kind = type(value)
    return kind is int or kind is str or (kind is tuple and all(type(element) is int for element in value))


def conv1d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1
) -> Tensor:
    """1-D convolution (cross-correlation) over ``(N, C_in, L)`` or unbatched ``(C_in, L)`` input.

    Args:
        input: ``(N, C_in, L)``.
        weight: ``(C_out, C_in / groups, kL)``.
        bias: optional ``(C_out,)``.
        stride, padding, dilation: an int or a one-element tuple; ``padding`` may be ``'valid'`` or
            ``'same'``.
        groups: splits the channels into this many independent convolutions.

    Returns:
        ``(N, C_out, L_out)``.
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1
) -> Tensor:
    """2-D convolution (cross-correlation), recorded as one ONNX ``Conv`` node.

    Args:
        input: ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_out, C_in / groups, kH, kW)``.
        bias: optional ``(C_out,)``.
        stride, padding, dilation: an int or a pair; ``padding`` may be ``'valid'`` or ``'same'``.
        groups: splits the channels into this many independent convolutions.

    Returns:
        ``(N, C_out, H_out, W_out)``.

    Example::

        >>> x = onnxnn.randn(1, 3, 8, 8)
        >>> w = onnxnn.randn(4, 3, 3, 3)
        >>> conv2d(x, w, padding=1).shape
        onnxnn.Size([1, 4, 8, 8])
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(
    input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1, groups: int = 1
) -> Tensor:
    """3-D convolution over ``(N, C_in, D, H, W)``; arguments as :func:`conv2d` with triples."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 3)


def _conv_transpose(
    input: Tensor, weight: Tensor, bias, stride, padding, output_padding, groups: int, dilation, spatial_rank: int
) -> Tensor:
    function = f"conv_transpose{spatial_rank}d"
    input, added_batch = batched(input, spatial_rank, function)
    # Transposed convolutions take no padding mode ('same', 'valid'; a module holds it as ('same', 'same')).
    if isinstance(padding, str):
        raise TypeError(f"{function}(): argument 'padding' (position 5) must be tuple of ints, not str")
    _check_argument_types(
        function, groups, stride=stride, padding=padding, output_padding=output_padding, dilation=dilation
    )
    # Autocast casts before the dtype checks, as PyTorch's dispatcher does.
    input, weight, bias = autocast_arguments("ConvTranspose", (input, weight, bias))
    _check_conv_arguments(input, weight, bias, groups, transposed=True)
    if weight.shape[1] == 0:  # PyTorch's transposed kernels refuse a weight without output channels
        raise RuntimeError(f"non-empty {weight.dim()}D weight tensor expected, but got: {list(weight.shape)}")
    if input.dtype is dtypes.bool or input.dtype in INTEGER_CONVOLUTION_DTYPES - {dtypes.int64}:
        # PyTorch's CPU transposed convolutions take int64 of the integers only (not written here yet).
        kernel_name = f"slow_conv_transpose{3 if spatial_rank == 3 else 2}d_out_cpu"
        raise NotImplementedError(f"\"{kernel_name}\" not implemented for '{scalar_type_name(input.dtype)}'")
    strides = expand_param(stride, spatial_rank, "stride")
    pads = expand_param(padding, spatial_rank, "padding")
    extra = expand_param(output_padding, spatial_rank, "output_padding")
    dilations = expand_param(dilation, spatial_rank, "dilation")
    if any(s <= 0 for s in strides):
        raise RuntimeError("non-positive stride is not supported")
    if any(p < 0 for p in pads):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in extra):
        raise RuntimeError("negative output_padding is not supported")
    if any(d <= 0 for d in dilations):
        raise RuntimeError(f"dilation should be greater than zero, but got {dilations}")
    if any(p >= s and p >= d for p, s, d in zip(extra, strides, dilations)):
        raise RuntimeError(
            f"output padding must be smaller than either stride or dilation, but got "
            f"output_padding={extra}, stride={strides} and dilation={dilations}"
        )
    kernel = list(weight.shape[2:])
    spatial = list(input.shape[2:])
    output = [
        s * (size - 1) - 2 * p + d * (k - 1) + e + 1
        for size, s, p, d, k, e in zip(spatial, strides, pads, dilations, kernel, extra)
    ]
    # PyTorch checks the output size in its kernel, which an empty batch skips: there an output of
    # no positions is an empty result (and a negative size its tensor's error).
    empty_axes = [axis for axis, size in enumerate(output) if size == 0] if input.shape[0] == 0 else []
    if any(size <= 0 for size in output) and (not empty_axes or min(output) < 0):
        raise RuntimeError(
            f"Given input size per channel: ({_sizes(spatial)}). Calculated output size per "
            f"channel: ({_sizes(output)}). Output size is too small"
        )
    pads_end = list(pads)
    for axis in empty_axes:
        # The node's output keeps one position there (its shape rule takes positive sizes only), cut
        # below. A size of zero means pads totalling at least one, so the end pad has one to give.
        pads_end[axis] -= 1
    appended = [0] * spatial_rank
    for axis, (e, s) in enumerate(zip(extra, strides)):
        if e >= s:
            # onnxruntime's ConvTranspose takes output_padding below the stride only (PyTorch's bound
            # is the dilation too). output_padding is end padding given back: the end pads take it
            # first, and the positions past the full output that remain, which no window reaches
            # (only the bias), are appended with a Pad.
            taken = min(e, pads_end[axis])
            pads_end[axis] -= taken
            extra[axis] = min(e - taken, s - 1)
            appended[axis] = e - taken - extra[axis]
    attrs = {
        "strides": strides,
        "pads": pads + pads_end,
        "dilations": dilations,
        "group": groups,
        "kernel_shape": kernel,
    }
    if any(extra):
        attrs["output_padding"] = extra
    if any(appended):
        result = apply_op("ConvTranspose", (input, weight), attrs, "ConvolutionBackward0")
        widths = int64_constant([0] * (2 + spatial_rank) + [0, 0] + appended)
        result = apply_op("Pad", (result, widths), None, "ConstantPadNdBackward0")
        if bias is not None:
            result = result + bias.reshape((1, bias.shape[0]) + (1,) * spatial_rank)
    else:
        operands = (input, weight) if bias is None else (input, weight, bias)
        result = apply_op("ConvTranspose", operands, attrs, "ConvolutionBackward0")
    for axis in empty_axes:
        result = result.narrow(2 + axis, 0, 0)
    return result.squeeze(0) if added_batch else result


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """1-D transposed convolution ("deconvolution"), the gradient of :func:`conv1d` w.r.t. its input.

    Args:
        input: ``(N, C_in, L)`` or unbatched ``(C_in, L)``.
        weight: ``(C_in, C_out / groups, kL)``.
        output_padding: extra positions added at the end of the output (less than stride or dilation).

    Returns:
        ``(N, C_out, (L - 1) * stride - 2 * padding + dilation * (kL - 1) + output_padding + 1)``.
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1)


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """2-D transposed convolution, recorded as one ONNX ``ConvTranspose`` node.

    Args:
        input: ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_in, C_out / groups, kH, kW)``.
        bias: optional ``(C_out,)``.
        stride, padding, output_padding, dilation: an int or a pair.
        groups: splits the channels into this many independent convolutions.

    Example::

        >>> x = onnxnn.randn(1, 4, 5, 5)
        >>> w = onnxnn.randn(4, 2, 3, 3)
        >>> conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).shape
        onnxnn.Size([1, 2, 10, 10])
    """
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2)


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride=1,
    padding=0,
    output_padding=0,
    groups: int = 1,
    dilation=1,
) -> Tensor:
    """3-D transposed convolution over ``(N, C_in, D, H, W)``; arguments as :func:`conv_transpose2d`."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3)
