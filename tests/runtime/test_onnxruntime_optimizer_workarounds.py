"""Graphs onnxruntime 1.31's optimizers broke (could not build, or computed wrongly): onnxnn's sessions
leave those optimizers out where the graph has the pattern (``runtime/sessions.py``:
``session_optimizers.disabled_optimizers``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
import onnxnn.nn.functional as F

RNG = np.random.default_rng(0)
X, W, C = RNG.standard_normal((2, 5)), RNG.standard_normal((7, 5)), RNG.standard_normal((2, 7))
WEIGHTS = RNG.standard_normal((7, 2))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "product",
    [
        pytest.param(lambda x, w, c: onnxnn.addmm(c, x, w.t()).t(), id="addmm-transposed"),
        pytest.param(lambda x, w, c: F.linear(x, w, c).t(), id="linear-with-a-full-bias-transposed"),
    ],
)
def test_a_gemm_reading_a_transposed_output_builds(executor, product):
    # C's gradient is the output's gradient transposed: a graph output that a Gemm also reads, which
    # GemmTransposeFusion deleted.
    with onnxnn.set_executor(executor):
        x, w = onnxnn.tensor(X), onnxnn.tensor(W, requires_grad=True)
        c = onnxnn.tensor(C, requires_grad=True)
        (product(x, w, c) * onnxnn.tensor(WEIGHTS)).sum().backward()
        c_grad, w_grad = c.grad.numpy(), w.grad.numpy()
    np.testing.assert_allclose(c_grad, WEIGHTS.T, rtol=1e-12)
    np.testing.assert_allclose(w_grad, WEIGHTS @ X, rtol=1e-12)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_float64_relu_clamped_above_builds(executor):
    # FuseReluClip refused the float64 Clip with the constant infinite bound onnxnn writes.
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        result = F.relu(onnxnn.tensor([0.5, -1.0, 9.0], dtype=onnxnn.float64)).clamp(max=6.0).numpy()
    np.testing.assert_array_equal(result, [0.5, 0.0, 6.0])


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("axes, pads", [([2, 1, 0], [1, 0, 0, 0, 2, 0]), ([-1], [1, 2])], ids=["reordered", "partial"])
def test_an_imported_pad_with_axes_between_transposes(executor, axes, pads):
    # The transpose optimizer pushed the Transposes through the Pad as if its pads covered every axis.
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    width = [(0, 0)] * 3
    for k, axis in enumerate(axes):
        width[axis % 3] = (pads[k], pads[k + len(axes)])
    expected = np.pad(x.transpose(1, 0, 2), width).transpose(1, 0, 2)
    constants = [
        numpy_helper.from_array(np.array(pads, np.int64), "pads"),
        numpy_helper.from_array(np.array(axes, np.int64), "axes"),
    ]
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Pad", ["t", "pads", "", "axes"], ["p"], mode="constant"),
        helper.make_node("Transpose", ["p"], ["y"], perm=[1, 0, 2]),
    ]
    graph = helper.make_graph(
        nodes,
        "padded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(expected.shape))],
        constants,
    )
    module = onnxnn.import_.from_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    )
    with onnxnn.set_executor(executor):
        result = module(onnxnn.tensor(x)).numpy()
    np.testing.assert_array_equal(result, expected)


def _moment_normalized(x, scale, shift, power: float):
    centred = x - x.mean(-1, keepdim=True)
    return centred / (centred.pow(power).mean(-1, keepdim=True) + 1e-5).sqrt() * scale + shift


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_normalization_by_a_fourth_power_is_not_taken_for_a_layer_norm(executor):
    # onnxruntime's LayerNormFusionL1 fused this into LayerNormalization, whose power is 2.
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 8)) * 3 + 1).astype(np.float32)
    scale, shift = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    with onnxnn.set_executor(executor):
        result = _moment_normalized(*[onnxnn.tensor(a) for a in (x, scale, shift)], 4.0).numpy()
    centred = x.astype(np.float64) - x.mean(-1, keepdims=True, dtype=np.float64)
    want = centred / np.sqrt((centred**4).mean(-1, keepdims=True) + 1e-5) * scale + shift
    # float32 means of 8 fourth powers: a few units in the last place.
    np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


def _empty_gradient_times_one():
    x = onnxnn.ones(0, 3, requires_grad=True)
    (x * 2).sum().backward()
    return x.grad * 1


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "compute, shape",
    [
        pytest.param(lambda: (onnxnn.ones(1) * 3).expand(0) * 2, (0,), id="expand-to-empty"),
        pytest.param(lambda: (onnxnn.ones(2, 1) * 3).expand(2, 0) + 1, (2, 0), id="expand-inner-to-empty"),
        pytest.param(_empty_gradient_times_one, (0, 3), id="empty-gradient"),
    ],
)
def test_an_expand_to_an_empty_shape_stays_empty(executor, compute, shape):
    # ExpandElimination took the 0 of the target shape for a 1: one element under an empty shape.
    with onnxnn.set_executor(executor):
        result = compute().numpy()
    assert result.shape == shape


@pytest.mark.parametrize(
    "product, shape",
    [
        ("onnxnn.ones(0, 2, 4).permute(1, 0, 2) @ onnxnn.ones(2, 4, 5)", "(2, 0, 5)"),
        # The empty operand made inside the graph, whose inputs and outputs are all of nonzero sizes.
        ("(onnxnn.ones(3, 2, 4)[:0].permute(1, 0, 2) @ onnxnn.ones(2, 4, 5)).sum(1)", "(2, 5)"),
    ],
)
def test_a_transpose_moving_an_empty_dim_into_a_product_runs(product, shape):
    # MatmulTransposeFusion's kernel divided by zero here: the process died of SIGFPE. So the product
    # runs in a process of its own, where a regression fails this test instead of killing the run.
    script = f"import onnxnn\nwith onnxnn.set_executor('onnxruntime'):\n    print(({product}).numpy().shape)\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shape


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_a_product_over_an_empty_transposed_dim_is_zero_after_other_sizes(executor):
    # A session that ran at other lengths (a graph with symbolic sizes from the second) returned the
    # previous run's memory for a contracted length of 0, where the sum of no terms is 0.
    with onnxnn.set_executor(executor):
        for length in (4, 7, 5, 0):
            a = onnxnn.tensor(RNG.standard_normal((2, length, 3)), requires_grad=True)
            b = onnxnn.tensor(RNG.standard_normal((2, length, 5)))
            product = a.transpose(1, 2) @ b
            (product * 2).sum().backward()
            expected = np.swapaxes(a.detach().numpy(), 1, 2) @ b.numpy()
            np.testing.assert_allclose(product.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(a.grad.numpy(), 2 * b.numpy().sum(-1, keepdims=True).repeat(3, -1), rtol=1e-12)
