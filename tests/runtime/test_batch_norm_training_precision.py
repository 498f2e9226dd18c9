"""Gradients through a deep stack of training-mode batch normalization keep float32 precision.

A 12-layer Conv -> BatchNormalization(training_mode=1) -> Relu stack, imported from ONNX as torch
exports training-mode models, runs forward and backward on each executor; a float64 numpy
implementation of the same forward and backward (written out here) is the reference.

The BN inputs carry a large per-channel offset (the conv biases) over a unit spread: a variance
computed as E[x^2] - E[x]^2 loses ``(offset / spread)^2`` units of float32 roundoff there, the
two-pass form (mean first, then the mean of squared deviations) only the ``offset / spread`` that
rounding the conv output itself costs. The tolerance is the second, times the layers the error
crosses, plus the reductions' rounding, taken with the probabilistic bound
``lambda * sqrt(n) * u`` for a sum of n terms (Higham and Mary, SIAM J. Sci. Comput. 41(5),
2019), which holds with probability at least ``1 - 2 exp(-lambda^2 / 2)`` per sum.

ReLU makes the gradient jump where a pre-activation crosses zero: a float32 forward that lands on
the other side of zero than float64 changes a gradient by O(1), whichever executor computes it
(on resnet18 exported by torch, which executor shows such a jump changes with the input). The
case checks that no pre-activation comes within the forward error bound of zero.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn.import_ import from_onnx

EXECUTORS = ["onnxruntime", "kernels"]
LAYERS, BATCH, CHANNELS, SIZE = 12, 2, 4, 6
OFFSET = 512.0  # the conv biases: BN inputs sit this far from zero, with a spread of about 1
EPSILON = 1e-5
U32 = float(np.finfo(np.float32).eps) / 2
LAMBDA = 6.0  # each sum stays within its probabilistic bound with probability 1 - 3e-8


def _probabilistic_gamma(terms: int) -> float:
    return LAMBDA * math.sqrt(terms) * U32


def _parameters(seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(LAYERS):
        fan_in = CHANNELS * 9
        layers.append(
            {
                "weight": (rng.standard_normal((CHANNELS, CHANNELS, 3, 3)) * math.sqrt(2 / fan_in)).astype(np.float32),
                "bias": (OFFSET + rng.standard_normal(CHANNELS)).astype(np.float32),
                "scale": rng.uniform(0.5, 1.5, CHANNELS).astype(np.float32),
                # Shifts away from zero: fewer pre-activations near ReLU's kink (see the module docstring).
                "shift": (rng.choice([-1.0, 1.0], CHANNELS) * rng.uniform(0.5, 1.5, CHANNELS)).astype(np.float32),
            }
        )
    return layers


def _model(layers: list[dict]) -> onnx.ModelProto:
    nodes, initializers, current = [], [], "x"
    for index, layer in enumerate(layers):
        names = {key: f"layer{index}.{key}" for key in layer}
        initializers += [numpy_helper.from_array(value, names[key]) for key, value in layer.items()]
        initializers += [
            numpy_helper.from_array(np.zeros(CHANNELS, np.float32), f"layer{index}.running_mean"),
            numpy_helper.from_array(np.ones(CHANNELS, np.float32), f"layer{index}.running_var"),
        ]
        nodes += [
            helper.make_node("Conv", [current, names["weight"], names["bias"]], [f"conv{index}"], pads=[1, 1, 1, 1]),
            helper.make_node(
                "BatchNormalization",
                [
                    f"conv{index}",
                    names["scale"],
                    names["shift"],
                    f"layer{index}.running_mean",
                    f"layer{index}.running_var",
                ],
                [f"bn{index}", f"mean_out{index}", f"var_out{index}"],
                epsilon=EPSILON,
                momentum=0.9,
                training_mode=1,
            ),
            helper.make_node("Relu", [f"bn{index}"], [f"relu{index}"]),
        ]
        current = f"relu{index}"
    shape = [BATCH, CHANNELS, SIZE, SIZE]
    graph = helper.make_graph(
        nodes,
        "conv_bn_relu_stack",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, shape)],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


# ---------------------------------------------------------------- float64 reference


def _windows(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W, 3, 3) views of the zero-padded input: the 3x3 neighbourhood of every pixel."""
    return sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))


def _reference(x: np.ndarray, layers: list[dict], upstream: np.ndarray):
    """Float64 forward and backward of the stack for loss = sum(output * upstream): (gradients, pre-activations)."""
    layers = [{key: value.astype(np.float64) for key, value in layer.items()} for layer in layers]
    axes, shape = (0, 2, 3), (1, CHANNELS, 1, 1)
    saved, pre_activations, h = [], [], x.astype(np.float64)
    for layer in layers:
        windows = _windows(h)
        conv = np.einsum("nchwij,ocij->nohw", windows, layer["weight"]) + layer["bias"].reshape(shape)
        centered = conv - conv.mean(axes, keepdims=True)
        inv_std = 1 / np.sqrt((centered * centered).mean(axes, keepdims=True) + EPSILON)
        normalized = centered * inv_std
        pre = normalized * layer["scale"].reshape(shape) + layer["shift"].reshape(shape)
        saved.append((windows, normalized, inv_std))
        pre_activations.append(pre)
        h = np.maximum(pre, 0)
    gradients, g = [], upstream.astype(np.float64)
    for layer, (windows, normalized, inv_std), pre in reversed(list(zip(layers, saved, pre_activations))):
        g = g * (pre > 0)
        grad_scale, grad_shift = (g * normalized).sum(axes), g.sum(axes)
        g_hat = g * layer["scale"].reshape(shape)
        g = inv_std * (
            g_hat - g_hat.mean(axes, keepdims=True) - normalized * (g_hat * normalized).mean(axes, keepdims=True)
        )
        grad_weight = np.einsum("nohw,nchwij->ocij", g, windows)
        grad_bias = g.sum(axes)
        padded = np.zeros((BATCH, CHANNELS, SIZE + 2, SIZE + 2))
        for i in range(3):
            for j in range(3):
                padded[:, :, i : i + SIZE, j : j + SIZE] += np.einsum("nohw,oc->nchw", g, layer["weight"][:, :, i, j])
        g = padded[:, :, 1:-1, 1:-1]
        gradients.append({"weight": grad_weight, "bias": grad_bias, "scale": grad_scale, "shift": grad_shift})
    return gradients[::-1], pre_activations


def _forward_tolerance() -> float:
    """The float32 error bound of a pre-activation, relative to the unit spread BN gives it.

    Per layer: rounding a conv output of magnitude ~OFFSET costs OFFSET * u against a spread of
    ~1, which centering keeps (twice: the conv, then the centering subtraction), plus the
    rounding of the conv's sum and of the mean's and the variance's; BN renormalizes every
    layer, so a layer passes its input's relative error on without amplifying it.
    """
    per_channel, conv_terms = BATCH * SIZE * SIZE, CHANNELS * 9
    return LAYERS * (2 * OFFSET * U32 + _probabilistic_gamma(conv_terms) + 2 * _probabilistic_gamma(per_channel))


def _gradient_tolerance() -> float:
    """The float32 error bound of a gradient relative to its largest entry.

    The forward's error, and per layer the backward's sums: two means and a channel sum in BN's
    gradient, the conv's data and weight gradients.
    """
    per_channel, conv_terms = BATCH * SIZE * SIZE, CHANNELS * 9
    backward = LAYERS * (4 * _probabilistic_gamma(per_channel) + _probabilistic_gamma(conv_terms))
    return _forward_tolerance() + backward


def test_the_tolerance_is_below_what_a_cancelling_variance_loses():
    """E[x^2] - E[x]^2 loses OFFSET^2 * u of the variance in every layer: far beyond the bound."""
    assert _gradient_tolerance() < OFFSET**2 * U32 / 4


@pytest.mark.parametrize("executor", EXECUTORS)
def test_deep_conv_batch_norm_relu_gradients_match_float64(executor):
    layers = _parameters()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE)).astype(np.float32)
    upstream = rng.standard_normal((BATCH, CHANNELS, SIZE, SIZE)).astype(np.float32)
    expected, pre_activations = _reference(x, layers, upstream)
    tolerance = _gradient_tolerance()
    # No ReLU input within the forward's error of zero: the float32 forward takes the same branch.
    closest = min(float(np.abs(pre).min()) for pre in pre_activations)
    assert closest > 2 * _forward_tolerance(), f"a pre-activation at {closest:.2e} makes the case ill-conditioned"

    with onnxnn.set_executor(executor):
        module = from_onnx(_model(layers))
        output = module(onnxnn.tensor(x))
        (output * onnxnn.tensor(upstream)).sum().backward()
        parameters = dict(module.named_parameters())
        for index, reference in enumerate(expected):
            for key in ("weight", "scale", "shift"):
                actual = parameters[f"layer{index}.{key}"].grad.numpy().astype(np.float64)
                error = np.abs(actual - reference[key]).max() / np.abs(reference[key]).max()
                assert error <= tolerance, f"layer{index}.{key}: relative error {error:.2e} > {tolerance:.2e}"
            # The conv bias's exact gradient is zero (the BN after it removes every per-channel shift):
            # what float32 leaves there must be rounding of the weight gradient's size.
            bias_gradient = np.abs(parameters[f"layer{index}.bias"].grad.numpy()).max()
            assert bias_gradient <= tolerance * np.abs(reference["weight"]).max() * 10
