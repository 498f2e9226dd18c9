"""``clamp`` (``clip``): ONNX's Clip, its shape and gradient rules, and clamping to tensor bounds.

A number bound is Clip's (a missing one is infinite in onnxnn's sessions: clip_bounds.py); a tensor
bound is ``minimum``/``maximum`` with PyTorch's gradient, which a Clip would not give.
"""

from __future__ import annotations

import math

from ...ir import dtypes
from ...ir.registry import gradient_rules, shape_rules
from ..creation import check_number_fits
from ._common import Tensor, apply_op, as_tensor_operand
from .elementwise import _masked, maximum, minimum, where

__all__ = ["clamp", "clip", "nan_everywhere"]


@shape_rules.register("Clip")
def _clip_shape(inputs, attrs):
    return [(inputs[0].shape, inputs[0].dtype)]


@gradient_rules.register("Clip")
def _clip_grad(ctx, g):
    """``g`` where ``min <= x <= max`` (PyTorch's mask: 0 where x is NaN, the comparisons being false).

    No all-true ``x == x`` to start from where a bound exists: a ReLU6's backward was 6 passes
    instead of 4, 1.2x its time (8x96x56x56).
    """
    x = ctx.input(0)
    inside = None
    if ctx.num_inputs > 1 and ctx.input_value(1) is not None:
        inside = x >= ctx.input(1)
    if ctx.num_inputs > 2 and ctx.input_value(2) is not None:
        below_max = x <= ctx.input(2)
        inside = below_max if inside is None else inside & below_max
    if inside is None:
        inside = x == x  # no bounds: everything but NaN
    return (_masked(inside, g), None, None)


def clamp(input: Tensor, min=None, max=None) -> Tensor:
    """Clamps to [min, max]; either bound may be None, a number or a tensor."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_to_tensors(input, min, max)
    bounds = [bound for bound in (min, max) if bound is not None]
    target = dtypes.result_type([(input.dtype, input.dim())], bounds)
    for bound in bounds:
        check_number_fits(bound, target, floating=True)
    if target is not input.dtype:
        input = input.to(target)
    low = None if min is None else as_tensor_operand(min, input)
    high = None if max is None else as_tensor_operand(max, input)
    clipped = apply_op("Clip", (input, low, high), None, "ClampBackward1")
    if any(isinstance(bound, float) and math.isnan(bound) for bound in bounds):
        # PyTorch's clamp is NaN everywhere (the gradient 0); onnxruntime's Clip ignores a NaN bound.
        return nan_everywhere(clipped, "ClampBackward1")
    return clipped


def nan_everywhere(result: Tensor, name: str) -> Tensor:
    """NaN in ``result``'s shape and dtype, still linked to it in the graph (its gradient 0): for results
    PyTorch defines as NaN where an ONNX op gives a number."""
    nowhere = Tensor._full((), False, dtypes.bool, result.device)
    return apply_op("Where", (nowhere, result, Tensor._full((), math.nan, result.dtype, result.device)), None, name)


clip = clamp


def _clamp_to_tensors(input: Tensor, low, high) -> Tensor:
    """``clamp`` with a tensor bound: the values of ``minimum(maximum(input, low), high)``, and the
    gradient of PyTorch's rule, which gives it to ``input`` where it lies inside the bounds (ends
    included), else to the bound that was taken, and to none on a NaN or where low == high."""
    plain = input if low is None else maximum(input, low)
    if high is not None:
        plain = minimum(plain, high)
    result = plain.detach()
    if high is not None:
        taken = input > high if low is None else (input > high) | (high < low)
        # A NaN low makes ``plain`` NaN: the value stays NaN there, its gradient still to ``high`` (PyTorch's).
        result = where(taken, where(result != result, high + result, high), result)
    if low is not None:
        taken = input < low if high is None else (input < low) & (low < high)
        result = where(taken, low, result)
    inside = input >= low if high is None else input <= high if low is None else (input >= low) & (input <= high)
    return where(~inside, result, input)  # the input second: onnxruntime's Where loses a -0.0 given first
