"""Importers of onnxruntime's quantized ``com.microsoft`` ops (forward only), in standard ONNX ops.

Quantization tools (``onnxruntime.quantization``, Intel Neural Compressor, optimum) write these:

- ``QLinear*`` (Add, Mul, Sigmoid, LeakyRelu, Softmax, AveragePool, GlobalAveragePool, Concat,
  Conv (channels-last too), Where, ReduceMean) and ``QGemm``: each quantized input is
  dequantized (``DequantizeLinear``), the float op applied and the result quantized to the
  output's scale and zero point (``QuantizeLinear``), which is how onnxruntime defines them; its
  kernels use lookup tables or fixed-point arithmetic, so a result may differ from it by one
  quantization step where the float value falls on a rounding boundary.
- ``DynamicQuantizeMatMul``: A quantized per tensor to uint8 at run time (ONNX's
  ``DynamicQuantizeLinear``), multiplied by the int8/uint8 B and scaled back, plus the bias.
  The integer products are exact in float32 (|q_a q_b| < 2^16), so only the final sums round.
- ``MatMulNBits``: A times the block-quantized weight (2-8 bits per value, packed low bits
  first, one scale and zero point per ``block_size`` values of a column), which is dequantized
  once per call in numpy: weights are constants of the model.
- ``QAttention``: Attention (``contrib_attention``) over the dequantized input and weight.
- ``QuantizeLinear``/``DequantizeLinear`` of the contrib domain (written for 16-bit types) are
  ONNX's; ``MatMulIntegerToFloat`` (onnxruntime's fused dynamic-quantization MatMul) is the
  product of the dequantized operands plus the bias.

Their quantized inputs are integers and carry no gradient; only a float input such as
QAttention's bias, a Parameter when it is an initializer, gets one, through the ordinary ops.
"""

from __future__ import annotations

import numpy as np

from ..ir.registry import importers
from ..runtime import ops
from ..runtime.tensor import Tensor, apply_op
from .contrib import CONTRIB_DOMAIN, to_channels_first, to_channels_last
from .contrib_attention import Attention
from .importers import NodeCall, array_of, constant_tensor

__all__: list[str] = []


def _dequantize(x: Tensor, scale: Tensor, zero_point: Tensor | None, axis: int = 1) -> Tensor:
    inputs = (x, scale) if zero_point is None else (x, scale, zero_point)
    return apply_op("DequantizeLinear", inputs, {"axis": axis})


def _quantize(x: Tensor, scale: Tensor, zero_point: Tensor | None) -> Tensor:
    return apply_op("QuantizeLinear", (x, scale) if zero_point is None else (x, scale, zero_point))


# ----------------------------------------------------------------------------- QLinear elementwise ops


@importers.register("QLinearAdd", domain=CONTRIB_DOMAIN)
def QLinearAdd(call: NodeCall, A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    total = _dequantize(A, A_scale, A_zero_point) + _dequantize(B, B_scale, B_zero_point)
    return (_quantize(total, C_scale, C_zero_point),)


@importers.register("QLinearMul", domain=CONTRIB_DOMAIN)
def QLinearMul(call: NodeCall, A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    product = _dequantize(A, A_scale, A_zero_point) * _dequantize(B, B_scale, B_zero_point)
    return (_quantize(product, C_scale, C_zero_point),)


@importers.register("QLinearSigmoid", domain=CONTRIB_DOMAIN)
def QLinearSigmoid(call: NodeCall, X, X_scale, X_zero_point, Y_scale, Y_zero_point=None):
    return (_quantize(ops.sigmoid(_dequantize(X, X_scale, X_zero_point)), Y_scale, Y_zero_point),)


@importers.register("QLinearLeakyRelu", domain=CONTRIB_DOMAIN)
def QLinearLeakyRelu(call: NodeCall, X, X_scale, X_zero_point, Y_scale, Y_zero_point=None, *, alpha=0.01):
    activated = apply_op("LeakyRelu", (_dequantize(X, X_scale, X_zero_point),), {"alpha": float(np.float32(alpha))})
    return (_quantize(activated, Y_scale, Y_zero_point),)


@importers.register("QLinearGlobalAveragePool", domain=CONTRIB_DOMAIN)
def QLinearGlobalAveragePool(call: NodeCall, X, x_scale, x_zero_point, y_scale, y_zero_point=None, *, channels_last=0):
    values = _dequantize(X, x_scale, x_zero_point)
    if channels_last:
        rank = len(X.shape)
        spatial = list(range(1, rank - 1))
        pooled = values.mean(spatial, keepdim=True)
    else:
        pooled = apply_op("GlobalAveragePool", (values,))
    return (_quantize(pooled, y_scale, y_zero_point),)


@importers.register("QLinearConcat", domain=CONTRIB_DOMAIN)
def QLinearConcat(call: NodeCall, Y_scale, Y_zero_point, *inputs, axis):
    """Inputs come in (tensor, scale, zero point) triples after the output's scale and zero point."""
    pieces = [_dequantize(inputs[i], inputs[i + 1], inputs[i + 2]) for i in range(0, len(inputs), 3)]
    return (_quantize(ops.cat(pieces, axis), Y_scale, Y_zero_point),)


@importers.register("QLinearAveragePool", domain=CONTRIB_DOMAIN)
def QLinearAveragePool(
    call: NodeCall, X, x_scale, x_zero_point, y_scale, y_zero_point=None, *, channels_last=0, **pool_attributes
):
    """ONNX's AveragePool (its attributes) between dequantization and quantization."""
    values = _dequantize(X, x_scale, x_zero_point)
    if channels_last:
        values = to_channels_first(values)
    pooled = apply_op("AveragePool", (values,), pool_attributes)
    if channels_last:
        pooled = to_channels_last(pooled)
    return (_quantize(pooled, y_scale, y_zero_point),)


@importers.register("QLinearSoftmax", domain=CONTRIB_DOMAIN)
def QLinearSoftmax(call: NodeCall, X, X_scale, x_zero_point, y_scale, y_zero_point=None, *, axis=-1, opset):
    """Softmax with the semantics of ``opset``: over one axis from 13 on, over every axis from
    ``axis`` on (flattened) before."""
    values = _dequantize(X, X_scale, x_zero_point)
    rank = len(X.shape)
    axis %= rank
    if opset >= 13 or axis == rank - 1:
        probabilities = ops.softmax(values, axis)
    else:
        flat = values.reshape(*X.shape[:axis], -1)
        probabilities = ops.softmax(flat, axis).reshape(*X.shape)
    return (_quantize(probabilities, y_scale, y_zero_point),)


# ----------------------------------------------------------------------------- quantized matrix products


@importers.register("DynamicQuantizeMatMul", domain=CONTRIB_DOMAIN)
def DynamicQuantizeMatMul(call: NodeCall, A, B, b_scale, b_zero_point=None, bias=None):
    quantized, a_scale, a_zero_point = apply_op("DynamicQuantizeLinear", (A,), num_outputs=3)
    a_values = _dequantize(quantized, a_scale, a_zero_point)
    # A per-column scale (and zero point) of B ([N]) applies along B's last axis.
    b_values = _dequantize(B, b_scale, b_zero_point, axis=len(B.shape) - 1 if len(b_scale.shape) else 1)
    product = ops.matmul(a_values, b_values)
    return (product if bias is None else product + bias,)


def _unpacked(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Values of ``bits`` bits packed low bits first in the last axis of ``packed``, the first ``count``."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    values = (packed[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return values.reshape(*packed.shape[:-1], -1)[..., :count]


@importers.register("MatMulNBits", domain=CONTRIB_DOMAIN)
def MatMulNBits(
    call: NodeCall,
    A,
    B,
    scales,
    zero_points=None,
    g_idx=None,
    bias=None,
    *,
    K,
    N,
    bits=4,
    block_size,
    accuracy_level=0,
    **unused,
):
    """``A @ W^T`` for the block-quantized ``W`` [N, K] stored in ``B`` [N, blocks, block_size * bits / 8]."""
    if g_idx is not None:
        raise NotImplementedError(
            f"MatMulNBits node '{call.name}' (domain '{CONTRIB_DOMAIN}'): onnxnn does not "
            "replay the g_idx input (act-order quantization)"
        )
    blocks = (K + block_size - 1) // block_size
    quantized = _unpacked(array_of(B), bits, blocks * block_size).reshape(N, blocks, block_size).astype(np.float32)
    scale = array_of(scales).astype(np.float32).reshape(N, blocks, 1)
    if zero_points is None:
        offset = np.float32(2 ** (bits - 1))
    elif zero_points.dtype.name == "uint8":
        offset = _unpacked(array_of(zero_points).reshape(N, -1), bits, blocks).astype(np.float32).reshape(N, blocks, 1)
    else:  # float zero points (HQQ): in quantized units, not rounded
        offset = array_of(zero_points).astype(np.float32).reshape(N, blocks, 1)
    weight = ((quantized - offset) * scale).reshape(N, blocks * block_size)[:, :K]
    product = ops.matmul(A, constant_tensor(np.asarray(weight.T, order="C").astype(A.dtype.numpy_dtype)))
    return (product if bias is None else product + bias,)


def _per_column(scale: Tensor, rank: int, transposed: int) -> int:
    """DequantizeLinear's axis for a weight's per-column scale: its last dim, or its first when
    the weight is stored transposed."""
    return (0 if transposed else rank - 1) if len(scale.shape) else 1


def _per_tensor_as_scalars(scale: Tensor, zero_point: Tensor | None) -> tuple[Tensor, Tensor | None]:
    """A one-element 1-D scale and zero point (``[1]``, as some tools write per-tensor ones) as
    scalars, which DequantizeLinear reads per tensor."""
    if tuple(scale.shape) != (1,):
        return scale, zero_point
    return scale.reshape(()), None if zero_point is None else zero_point.reshape(())


@importers.register("QGemm", domain=CONTRIB_DOMAIN)
def QGemm(
    call: NodeCall,
    A,
    a_scale,
    a_zero_point,
    B,
    b_scale,
    b_zero_point=None,
    C=None,
    y_scale=None,
    y_zero_point=None,
    *,
    alpha=1.0,
    transA=0,
    transB=0,
):
    """``alpha * A' B' + C`` over the dequantized A and B (per-tensor, or per column of B); C is
    int32 in the product's units (scale ``alpha * a_scale * b_scale``, zero point 0), added to
    the integer sums as onnxruntime does. Quantized to ``y_scale``/``y_zero_point`` when given,
    float32 otherwise."""
    a_values = _dequantize(A, *_per_tensor_as_scalars(a_scale, a_zero_point))
    b_scale, b_zero_point = _per_tensor_as_scalars(b_scale, b_zero_point)
    b_values = _dequantize(B, b_scale, b_zero_point, axis=_per_column(b_scale, 2, transB))
    if transA:
        a_values = a_values.transpose(0, 1)
    if transB:
        b_values = b_values.transpose(0, 1)
    alpha = float(np.float32(alpha))
    product = ops.matmul(a_values, b_values)
    if alpha != 1.0:
        product = product * alpha
    if C is not None:
        product = product + C.to(product.dtype) * (a_scale * b_scale * alpha)
    return (product if y_scale is None else _quantize(product, y_scale, y_zero_point),)


@importers.register("QLinearConv", domain=CONTRIB_DOMAIN)
def QLinearConv(
    call: NodeCall,
    x,
    x_scale,
    x_zero_point,
    w,
    w_scale,
    w_zero_point,
    y_scale,
    y_zero_point,
    B=None,
    *,
    channels_last=0,
    **conv_attributes,
):
    """ONNX's QLinearConv; with ``channels_last`` x and y are ``[N, D1, ..., Dn, C]`` (the weight
    stays ``[M, C / group, k1, ..., kn]``). The int32 bias B is in units of ``x_scale * w_scale``."""
    values = _dequantize(x, x_scale, x_zero_point)
    if channels_last:
        values = to_channels_first(values)
    weights = _dequantize(w, w_scale, w_zero_point, axis=0)
    inputs: tuple = (values, weights)
    if B is not None:
        inputs += (B.to(values.dtype) * (x_scale * w_scale),)
    output = apply_op("Conv", inputs, conv_attributes)
    if channels_last:
        output = to_channels_last(output)
    return (_quantize(output, y_scale, y_zero_point),)


@importers.register("QLinearWhere", domain=CONTRIB_DOMAIN)
def QLinearWhere(call: NodeCall, condition, X, x_scale, x_zero_point, Y, y_scale, y_zero_point, z_scale, z_zero_point):
    chosen = ops.where(condition, _dequantize(X, x_scale, x_zero_point), _dequantize(Y, y_scale, y_zero_point))
    return (_quantize(chosen, z_scale, z_zero_point),)


@importers.register("QLinearReduceMean", domain=CONTRIB_DOMAIN)
def QLinearReduceMean(
    call: NodeCall, data, data_scale, data_zero_point, reduced_scale, reduced_zero_point=None, *, axes=None, keepdims=1
):
    """``Quantize(ReduceMean(Dequantize(data)))``, as onnxruntime's contrib op documentation defines it."""
    values = _dequantize(data, data_scale, data_zero_point)
    rank = len(data.shape)
    dims = list(range(rank)) if not axes else [axis % rank for axis in axes]
    return (_quantize(values.mean(dims, keepdim=bool(keepdims)), reduced_scale, reduced_zero_point),)


@importers.register("QAttention", domain=CONTRIB_DOMAIN)
def QAttention(
    call: NodeCall,
    input,
    weight,
    bias,
    input_scale,
    weight_scale,
    mask_index=None,
    input_zero_point=None,
    weight_zero_point=None,
    past=None,
    **attention_attributes,
):
    """Attention (``contrib_attention.Attention``) of the dequantized input and weight (per tensor,
    or per column of the weight); float32 outputs, present included."""
    values = _dequantize(input, input_scale, input_zero_point)
    weights = _dequantize(weight, weight_scale, weight_zero_point, axis=_per_column(weight_scale, 2, 0))
    return Attention(call, values, weights, bias, mask_index, past, **attention_attributes)


# ----------------------------------------------------------------------------- quantization in the contrib domain


@importers.register("QuantizeLinear", domain=CONTRIB_DOMAIN)
def QuantizeLinear(call: NodeCall, x, y_scale, y_zero_point=None, *, axis=1):
    """ONNX's QuantizeLinear (onnxruntime's quantizer writes this one for 16-bit types)."""
    inputs = (x, y_scale) if y_zero_point is None else (x, y_scale, y_zero_point)
    return (apply_op("QuantizeLinear", inputs, {"axis": axis}),)


@importers.register("DequantizeLinear", domain=CONTRIB_DOMAIN)
def DequantizeLinear(call: NodeCall, x, x_scale, x_zero_point=None, *, axis=1):
    """ONNX's DequantizeLinear (onnxruntime's quantizer writes this one for 16-bit types)."""
    return (_dequantize(x, x_scale, x_zero_point, axis),)


@importers.register("MatMulIntegerToFloat", domain=CONTRIB_DOMAIN)
def MatMulIntegerToFloat(call: NodeCall, A, B, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
    """``Dequantize(A) @ Dequantize(B) + bias``: onnxruntime's fusion of DynamicQuantizeLinear's
    MatMulInteger and its scaling; A per tensor, B per tensor or per column."""
    if len(a_scale.shape) and a_scale.shape[0] != 1:
        raise NotImplementedError(
            f"MatMulIntegerToFloat node '{call.name}' (domain '{CONTRIB_DOMAIN}'): onnxnn does not "
            f"replay an a_scale of shape {list(a_scale.shape)} (only per-tensor A)"
        )
    a_values = _dequantize(A, *_per_tensor_as_scalars(a_scale, a_zero_point))
    b_scale, b_zero_point = _per_tensor_as_scalars(b_scale, b_zero_point)
    b_values = _dequantize(B, b_scale, b_zero_point, axis=_per_column(b_scale, len(B.shape), 0))
    product = ops.matmul(a_values, b_values)
    return (product if bias is None else product + bias,)
