"""Helpers of the Conv/ConvTranspose tests, shared with the pooling, normalization, resampling and
nn tests: a float32 gradient check, the ONNX backend node cases and PyTorch-converted models
(replayed node by node), and direct numpy convolutions as references.

onnxruntime's CPU provider has no float64 kernels for Conv, ConvTranspose, AveragePool, LRN,
InstanceNormalization or the global pools, so gradients through them are checked in float32 with
:func:`check_gradients_float32` (wider eps and tolerance; exact for these linear ops up to rounding).
"""

from __future__ import annotations

import glob
import importlib
import os
from typing import Callable

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import onnxnn
from onnxnn.runtime.realization import realize
from onnxnn.runtime.tensor import apply_op


def check_gradients_float32(
    function: Callable,
    inputs: list,
    *,
    eps: float = 1e-2,
    rtol: float = 1e-2,
    atol: float = 2e-3,
    seed: int = 0,
    exhaustive_limit: int = 48,
) -> None:
    """Backward through ``function`` against central differences, all in float32.

    For ops onnxruntime runs only in float32. Small inputs are checked element by element, larger
    ones along a random direction, as ``gradcheck.check_gradients`` does in float64.

    The tolerances are those of central differences in float32, not of the backward pass: with
    step ``eps`` they err by the truncation ``eps**2 / 6 * |f3|`` (f3 the third derivative; 1.7e-5 |f3| at 1e-2) plus
    the rounding of the two evaluations, ``gamma(n) * sum |output * cotangent| / eps`` for n
    output elements (about 6e-6 n per unit of output at 1e-2), which rtol 1e-2 and atol 2e-3
    cover for the unit-scale inputs and outputs of these cases; a wrong rule is off by O(1).
    """
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(a, dtype=np.float32) for a in inputs]
    tensors = [onnxnn.tensor(a, requires_grad=True) for a in arrays]
    output = function(*tensors)
    cotangent = rng.standard_normal(output.shape).astype(np.float32)
    output.backward(onnxnn.tensor(cotangent))

    def evaluate(shifted):
        with onnxnn.no_grad():
            value = function(*[onnxnn.tensor(a) for a in shifted])
        return float(np.sum(value.numpy().astype(np.float64) * cotangent))

    for index, array in enumerate(arrays):
        analytic = tensors[index].grad
        assert analytic is not None, f"input {index} got no gradient"
        analytic = analytic.numpy().astype(np.float64)
        assert analytic.shape == array.shape
        if array.size <= exhaustive_limit:
            numeric = np.zeros(array.shape)
            for position in np.ndindex(array.shape):
                shifted = [a.copy() for a in arrays]
                shifted[index][position] += eps
                up = evaluate(shifted)
                shifted[index][position] -= 2 * eps
                numeric[position] = (up - evaluate(shifted)) / (2 * eps)
            np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of input {index}")
        else:
            direction = rng.standard_normal(array.shape).astype(np.float32)
            shifted = [a.copy() for a in arrays]
            shifted[index] = array + eps * direction
            up = evaluate(shifted)
            shifted[index] = array - eps * direction
            numeric = (up - evaluate(shifted)) / (2 * eps)
            np.testing.assert_allclose(
                float(np.sum(analytic * direction)),
                numeric,
                rtol=rtol,
                atol=atol * np.sqrt(array.size),
                err_msg=f"directional gradient of input {index}",
            )


def onnx_node_cases(module_name: str, op_type: str, skip: tuple = ()) -> list:
    """The ONNX backend node cases of ``onnx.backend.test.case.node.<module_name>`` as pytest params.

    Each export function of the module builds a node and its inputs and expected outputs (computed
    by onnx's reference implementation) and hands them to ``expect``, captured here.
    """
    module = importlib.import_module(f"onnx.backend.test.case.node.{module_name}")
    from onnx.backend.test.case.base import Base

    captured = []

    def capture(node, inputs, outputs, name, **kwargs):
        if node.op_type == op_type and name not in skip:
            captured.append(pytest.param(node, list(inputs), list(outputs), id=name))

    original = module.expect
    module.expect = capture
    try:
        for cls in list(vars(module).values()):
            if isinstance(cls, type) and issubclass(cls, Base) and cls.__module__ == module.__name__:
                for attribute in sorted(vars(cls)):
                    if attribute.startswith("export"):
                        np.random.seed(0)
                        getattr(cls, attribute)()
    finally:
        module.expect = original
    return captured


def node_attributes(node: onnx.NodeProto) -> dict:
    attributes = {}
    for attribute in node.attribute:
        value = onnx.helper.get_attribute_value(attribute)
        attributes[attribute.name] = value.decode() if isinstance(value, bytes) else value
    return attributes


def replay_node(node: onnx.NodeProto, inputs: list) -> list:
    """Runs one ONNX node through ``apply_op`` (absent optional inputs as None) and returns numpy outputs."""
    remaining = iter(inputs)
    operands = [None if name == "" else onnxnn.tensor(np.asarray(next(remaining))) for name in node.input]
    while operands and operands[-1] is None:
        operands.pop()
    result = apply_op(node.op_type, tuple(operands), node_attributes(node), num_outputs=len(node.output))
    results = list(result) if isinstance(result, tuple) else [result]
    realize([tensor._value for tensor in results])  # one run: random or stateful nodes agree with themselves
    for tensor in results:
        assert tuple(tensor.shape) == tensor.numpy().shape, "shape rule disagrees with the computed value"
    return [tensor.numpy() for tensor in results]


def pytorch_converted_cases(prefixes: tuple, op_types: set) -> list:
    """Single-node models PyTorch exported into onnx's test data, with their stored inputs and outputs."""
    base = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "pytorch-converted")
    cases = []
    for directory in sorted(glob.glob(os.path.join(base, "test_*"))):
        name = os.path.basename(directory)[len("test_") :]
        if not name.startswith(prefixes):
            continue
        model = onnx.load(os.path.join(directory, "model.onnx"))
        if len(model.graph.node) != 1 or model.graph.node[0].op_type not in op_types:
            continue
        cases.append(pytest.param(directory, id=name))
    return cases


def replay_pytorch_converted(directory: str) -> None:
    model = onnx.load(os.path.join(directory, "model.onnx"))
    initializers = {tensor.name: onnx.numpy_helper.to_array(tensor) for tensor in model.graph.initializer}
    data = os.path.join(directory, "test_data_set_0")
    fed = [name for name in (i.name for i in model.graph.input) if name not in initializers]
    values = dict(initializers)
    for position, name in enumerate(fed):
        values[name] = onnx.numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"input_{position}.pb")))
    node = model.graph.node[0]
    (actual,) = replay_node(node, [values[name] for name in node.input if name])
    expected = onnx.numpy_helper.to_array(onnx.load_tensor(os.path.join(data, "output_0.pb")))
    # Against stored float32 results of another implementation (PyTorch), summed in an unknown
    # order: onnx's own backend-test tolerance (rtol 1e-3, which exceeds 2 gamma(n) for the
    # few hundred terms of these cases by far), atol for outputs near zero.
    np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5)


def conv_reference(x, w, b=None, strides=None, pads_begin=None, pads_end=None, dilations=None, group=1):
    """Direct cross-correlation: y[n, o, p] = sum_{c, k} x_padded[n, c, p * s + k * d] * w[o, c, k]."""
    rank = x.ndim - 2
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    pads_begin = pads_begin or [0] * rank
    pads_end = pads_end if pads_end is not None else pads_begin
    padded = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + list(zip(pads_begin, pads_end)))
    kernel = w.shape[2:]
    output = [(padded.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(rank)]
    out_channels, per_group_in = w.shape[0], w.shape[1]
    per_group_out = out_channels // group
    y = np.zeros((x.shape[0], out_channels, *output))
    for position in np.ndindex(*output):
        for offset in np.ndindex(*kernel):
            where = tuple(position[i] * strides[i] + offset[i] * dilations[i] for i in range(rank))
            patch = padded[(slice(None), slice(None)) + where]
            for g in range(group):
                taps = w[(slice(g * per_group_out, (g + 1) * per_group_out), slice(None)) + offset]
                y[(slice(None), slice(g * per_group_out, (g + 1) * per_group_out)) + position] += (
                    patch[:, g * per_group_in : (g + 1) * per_group_in] @ taps.T
                )
    if b is not None:
        y += b.reshape((1, -1) + (1,) * rank)
    return y


def conv_transpose_reference(
    x, w, b=None, strides=None, pads_begin=None, output=None, dilations=None, group=1, output_padding=None
):
    """Scatter every input element times the kernel, then crop ``pads_begin`` and keep ``output`` positions."""
    rank = x.ndim - 2
    strides = strides or [1] * rank
    dilations = dilations or [1] * rank
    pads_begin = pads_begin or [0] * rank
    output_padding = output_padding or [0] * rank
    kernel = w.shape[2:]
    per_group_in, per_group_out = x.shape[1] // group, w.shape[1]
    full = [
        strides[i] * (x.shape[2 + i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(rank)
    ]
    scattered = np.zeros((x.shape[0], per_group_out * group, *full))
    for position in np.ndindex(*x.shape[2:]):
        for offset in np.ndindex(*kernel):
            where = tuple(position[i] * strides[i] + offset[i] * dilations[i] for i in range(rank))
            for g in range(group):
                values = x[(slice(None), slice(g * per_group_in, (g + 1) * per_group_in)) + position]
                taps = w[(slice(g * per_group_in, (g + 1) * per_group_in), slice(None)) + offset]
                scattered[(slice(None), slice(g * per_group_out, (g + 1) * per_group_out)) + where] += values @ taps
    if output is None:
        output = [full[i] - 2 * pads_begin[i] for i in range(rank)]
    result = np.zeros((x.shape[0], per_group_out * group, *output))
    crop = tuple(slice(pads_begin[i], pads_begin[i] + output[i]) for i in range(rank))
    kept = scattered[(slice(None), slice(None)) + crop]
    result[(slice(None), slice(None)) + tuple(slice(0, s) for s in kept.shape[2:])] = kept
    if b is not None:
        result += b.reshape((1, -1) + (1,) * rank)
    return result
