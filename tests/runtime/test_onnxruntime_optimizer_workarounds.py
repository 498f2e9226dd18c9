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


# Products over a contracted length of 0 whose second operand has batch dims the first's do not
# cover: onnxruntime's MatMul gave the first operand's batch, or left part of the result as the
# buffer held it. Sum of no terms: zeros of numpy's shape.
EMPTY_PRODUCT_SHAPES = [
    ((1, 3, 4), (2, 4, 5)),  # a batch of 1 against 2: the result had a's batch
    ((2, 1, 3, 4), (3, 4, 5)),
    ((2, 3, 4), (1, 1, 4, 5)),  # fewer dims than the second operand
    ((3, 4), (2, 4, 5)),  # a matrix against a batch: the second matrix was not zeroed
    ((4,), (3, 4, 2)),  # a vector against a batch
]


def _summed_to(gradient, shape):
    """``gradient`` summed over the dims ``shape`` was broadcast along."""
    gradient = gradient.sum(axis=tuple(range(gradient.ndim - len(shape))))
    return gradient.sum(axis=tuple(axis for axis, size in enumerate(shape) if size == 1), keepdims=True)


def _product_gradients(a, b, length):
    """The gradients of ``(2 * (a[..., :length] @ b[..., :length, :])).sum()`` for a and b (a 1-D a as one row)."""
    rows = a[..., :length] if a.ndim > 1 else a[None, :length]
    columns = b[..., :length, :]
    seed = 2 * np.ones(np.broadcast_shapes(rows.shape[:-2], columns.shape[:-2]) + (rows.shape[-2], columns.shape[-1]))
    grad_a, grad_b = np.zeros(a.shape), np.zeros(b.shape)
    grad_a[..., :length] = _summed_to(seed @ np.swapaxes(columns, -1, -2), rows.shape).reshape(
        grad_a[..., :length].shape
    )
    grad_b[..., :length, :] = _summed_to(np.swapaxes(rows, -1, -2) @ seed, columns.shape)
    return grad_a, grad_b


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("a_shape, b_shape", EMPTY_PRODUCT_SHAPES, ids=str)
def test_a_broadcast_product_over_an_empty_length_is_zeros(executor, a_shape, b_shape):
    a, b = RNG.standard_normal(a_shape), RNG.standard_normal(b_shape)
    with onnxnn.set_executor(executor):
        for length in (3, 0, 2, 0):
            # The empty operands are made inside the graph, whose inputs and output are nonempty.
            first = onnxnn.tensor(a, requires_grad=True)
            second = onnxnn.tensor(b, requires_grad=True)
            product = first[..., :length] @ second[..., :length, :]
            (product * 2).sum().backward()
            want = np.matmul(a[..., :length], b[..., :length, :])
            np.testing.assert_allclose(product.detach().numpy(), want, rtol=1e-12, atol=1e-12)
            assert product.detach().numpy().shape == want.shape
            want_a, want_b = _product_gradients(a, b, length)
            np.testing.assert_allclose(first.grad.numpy(), want_a, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(second.grad.numpy(), want_b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("a_shape, b_shape", EMPTY_PRODUCT_SHAPES, ids=str)
def test_a_broadcast_product_at_an_empty_length_after_others(executor, a_shape, b_shape):
    # Lengths that change from call to call: from the second, one graph with symbolic sizes runs
    # them all (fastpath.dynamic_shapes), where the lowering must hold at every length.
    with onnxnn.set_executor(executor), onnxnn.no_grad():
        for length in (4, 5, 0, 3, 0, 0):
            a = RNG.standard_normal(a_shape[:-1] + (length,))
            b = RNG.standard_normal(b_shape[:-2] + (length, b_shape[-1]) if len(b_shape) > 1 else (length,))
            result = (onnxnn.tensor(a) @ onnxnn.tensor(b)) + 1.0
            np.testing.assert_allclose(result.numpy(), np.matmul(a, b) + 1.0, rtol=1e-12, atol=1e-12)


def _imported_gemm(a_dims, b_dims, sliced: bool):
    """An imported model's Gemm with beta 0.5 (onnxnn records beta 1 only), over ``x[:, :0]`` when ``sliced``."""
    nodes, constants = [], []
    first, second = "x", "w"
    if sliced:
        constants = [
            numpy_helper.from_array(np.array([value], np.int64), name)
            for name, value in [("at", 0), ("axis", 1), ("rows", 0)]
        ]
        nodes = [
            helper.make_node("Slice", ["x", "at", "at", "axis"], ["x_empty"]),
            helper.make_node("Slice", ["w", "at", "at", "rows"], ["w_empty"]),
        ]
        first, second = "x_empty", "w_empty"
    nodes.append(helper.make_node("Gemm", [first, second, "c"], ["y"], alpha=2.0, beta=0.5))
    graph = helper.make_graph(
        nodes,
        "gemm",
        [
            helper.make_tensor_value_info("x", TensorProto.DOUBLE, a_dims),
            helper.make_tensor_value_info("w", TensorProto.DOUBLE, b_dims),
            helper.make_tensor_value_info("c", TensorProto.DOUBLE, [3, 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, 2])],
        constants,
    )
    return onnxnn.import_.from_onnx(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    )


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_an_imported_gemm_over_an_empty_length_scales_c(executor):
    # onnxruntime's Gemm returned C, not beta * C, for a contracted length of 0.
    module = _imported_gemm([3, 4], [4, 2], sliced=True)
    x, w, c = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal((3, 2))
    with onnxnn.set_executor(executor):
        result = module(onnxnn.tensor(x), onnxnn.tensor(w), onnxnn.tensor(c)).numpy()
    np.testing.assert_allclose(result, 0.5 * c, rtol=1e-15)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_an_imported_gemm_at_an_empty_length_after_others(executor):
    module = _imported_gemm([3, "K"], ["K", 2], sliced=False)
    with onnxnn.set_executor(executor):
        for length in (4, 5, 0, 3, 0):
            x, w, c = RNG.standard_normal((3, length)), RNG.standard_normal((length, 2)), RNG.standard_normal((3, 2))
            result = (module(onnxnn.tensor(x), onnxnn.tensor(w), onnxnn.tensor(c)) * 1.0).numpy()
            np.testing.assert_allclose(result, 2 * x @ w + 0.5 * c, rtol=1e-12, atol=1e-12)


_EINSUM_SCRIPT = """
import numpy as np
import onnxnn
rng = np.random.default_rng(0)
equation, x_shape, y_shape, axes, lengths, grad = {arguments!r}
with onnxnn.set_executor("onnxruntime"):
    for length in lengths:
        x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
        first = onnxnn.tensor(x, requires_grad=grad)
        second = onnxnn.tensor(y, requires_grad=grad)
        result = onnxnn.einsum(equation, first.narrow(axes[0], 0, length), second.narrow(axes[1], 0, length)) + 1.0
        if grad:
            (result * 2).sum().backward()
        want = np.einsum(equation, np.take(x, range(length), axes[0]), np.take(y, range(length), axes[1])) + 1.0
        assert result.shape == want.shape, (result.shape, want.shape)
        np.testing.assert_allclose(result.detach().numpy(), want, rtol=1e-12, atol=1e-12)
        if grad:
            assert first.grad.shape == x.shape and second.grad.shape == y.shape
print("done")
"""


@pytest.mark.parametrize(
    "equation, x_shape, y_shape, axes",
    [
        ("ij,kj->ik", (3, 4), (5, 4), (1, 1)),  # a contracted subscript of 0
        ("ij,bjk->bik", (3, 4), (2, 4, 5), (1, 1)),
        ("i,bik->bk", (4,), (2, 4, 5), (0, 1)),
        ("bij,bkj->bik", (3, 3, 4), (3, 5, 4), (0, 0)),  # an output subscript of 0
    ],
)
@pytest.mark.parametrize(
    "lengths, grad",
    [((0,), True), ((2, 0, 3, 0), True), ((2, 0, 3, 0), False)],
    ids=["empty", "after-other-lengths", "after-other-lengths-no-grad"],
)
def test_an_einsum_of_an_empty_operand_runs(equation, x_shape, y_shape, axes, lengths, grad):
    # onnxruntime's Einsum divided by zero on these: the process died of SIGFPE, so each runs in a
    # process of its own.
    script = _EINSUM_SCRIPT.format(arguments=(equation, x_shape, y_shape, axes, lengths, grad))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "done"


def test_an_einsum_of_an_empty_operand_runs_at_sizes_shared_with_others():
    # Input sizes that change: one graph with symbolic sizes (an If around the Einsum) runs them all.
    script = """
import numpy as np
import onnxnn
rng = np.random.default_rng(0)
with onnxnn.set_executor("onnxruntime"), onnxnn.no_grad():
    for length in (4, 5, 0, 3, 0):
        for equation, x_shape, y_shape in [
            ("ij,kj->ik", (3, length), (5, length)),
            ("bij,bkj->bik", (length, 3, 2), (length, 4, 2)),
            ("i,i->", (length,), (length,)),
        ]:
            x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
            result = onnxnn.einsum(equation, onnxnn.tensor(x), onnxnn.tensor(y)) * 1.0
            np.testing.assert_allclose(result.numpy(), np.einsum(equation, x, y), rtol=1e-12, atol=1e-12)
assert onnxnn.runtime.fastpath.dynamic_shapes.dynamic_info()["shared_runs"] > 0
print("done")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "done"
