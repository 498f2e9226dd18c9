"""MaxUnpool and Col2Im nodes (as imported models use them): values, gradients, both executors.

Expected values come from onnx's reference implementation (``onnx.reference.ReferenceEvaluator``).
Gradients are checked against float64 finite differences on the kernels executor, and in float32
on onnxruntime (whose CPU provider runs MaxUnpool and Col2Im in float32 only).
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxnn
from onnxnn.runtime.tensor import apply_op

from .conv_cases import check_gradients_float32

RNG = np.random.default_rng(5)


def reference(op_type, inputs, attrs, opset=18):
    names = [f"i{k}" for k in range(len(inputs))]
    types = [TensorProto.INT64 if np.asarray(a).dtype.kind == "i" else TensorProto.FLOAT for a in inputs]
    node = helper.make_node(op_type, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))[0]


def pooled_with_indices(shape, kernel, strides):
    """MaxPool's values and whole-tensor indices for distinct inputs (the pair MaxUnpool takes).

    Overlapping windows can share their maximum, and MaxUnpool keeps one of the values written to a
    repeated index (its gradient then differs from finite differences), so draws repeat until every
    index is distinct. The generator is the function's own: the data must not depend on test order.
    """
    rng = np.random.default_rng(len(shape))
    while True:
        x = (rng.permutation(int(np.prod(shape))).reshape(shape) - 7.5).astype(np.float32)
        values, indices = apply_op(
            "MaxPool", (onnxnn.tensor(x),), {"kernel_shape": kernel, "strides": strides}, num_outputs=2
        )
        indices = indices.numpy()
        if np.unique(indices).size == indices.size:
            return values.numpy(), indices


UNPOOL_CASES = [
    # id, input shape of the pooling, kernel, strides, pads, output_shape input
    ("2d", (2, 3, 4, 4), [2, 2], [2, 2], None, None),
    ("2d_output_shape", (1, 2, 5, 5), [2, 2], [2, 2], None, [1, 2, 5, 5]),
    ("1d_strided", (1, 2, 7), [3], [2], None, None),
    ("3d", (1, 1, 2, 4, 2), [2, 2, 2], [2, 2, 2], None, None),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "case_id, shape, kernel, strides, pads, output_shape", UNPOOL_CASES, ids=[c[0] for c in UNPOOL_CASES]
)
def test_max_unpool_node_matches_the_reference(case_id, shape, kernel, strides, pads, output_shape, executor):
    values, indices = pooled_with_indices(shape, kernel, strides)
    attrs = {"kernel_shape": kernel, "strides": strides}
    inputs = [values, indices] + ([] if output_shape is None else [np.array(output_shape, dtype=np.int64)])
    if output_shape is None:
        expected = reference("MaxUnpool", inputs, attrs)
    else:  # the spec's Y[I[i]] = X[i] over flattened tensors (onnx's reference mishandles output_shape)
        expected = np.zeros(int(np.prod(output_shape)), dtype=np.float32)
        expected[indices.reshape(-1)] = values.reshape(-1)
        expected = expected.reshape(output_shape)
    with onnxnn.set_executor(executor):
        actual = apply_op("MaxUnpool", tuple(onnxnn.tensor(a) for a in inputs), attrs).numpy()
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize(
    "case_id, shape, kernel, strides, pads, output_shape", UNPOOL_CASES[:3], ids=[c[0] for c in UNPOOL_CASES[:3]]
)
def test_max_unpool_gradient_reads_the_output_gradient_at_the_indices(
    case_id, shape, kernel, strides, pads, output_shape
):
    values, indices = pooled_with_indices(shape, kernel, strides)
    attrs = {"kernel_shape": kernel, "strides": strides}
    extra = () if output_shape is None else (onnxnn.tensor(np.array(output_shape, dtype=np.int64)),)

    def unpool(v):
        return apply_op("MaxUnpool", (v, onnxnn.tensor(indices)) + extra, attrs)

    with onnxnn.set_executor("kernels"):
        check_gradients(unpool, [values.astype(np.float64)])
    with onnxnn.set_executor("onnxruntime"):
        check_gradients_float32(unpool, [values])


COL2IM_CASES = [
    # id, image shape, block shape, attributes
    ("plain", [4, 5], [2, 2], {}),
    ("strides_pads", [4, 5], [2, 2], {"strides": [1, 2], "pads": [1, 0, 0, 1]}),
    ("dilations", [6, 5], [2, 3], {"dilations": [2, 1], "pads": [1, 1, 1, 1]}),
    ("3d", [3, 4, 3], [2, 2, 2], {"strides": [1, 2, 1]}),
]


def _columns_shape(image, block, attrs, channels=2, batch=2):
    rank = len(image)
    strides = attrs.get("strides", [1] * rank)
    dilations = attrs.get("dilations", [1] * rank)
    pads = attrs.get("pads", [0] * 2 * rank)
    blocks = [
        (image[i] + pads[i] + pads[rank + i] - dilations[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(rank)
    ]
    return (batch, channels * int(np.prod(block)), int(np.prod(blocks)))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("case_id, image, block, attrs", COL2IM_CASES, ids=[c[0] for c in COL2IM_CASES])
def test_col2im_node_matches_the_reference(case_id, image, block, attrs, executor):
    if executor == "onnxruntime" and len(image) != 2:
        pytest.skip("onnxruntime's Col2Im implements 2-D images only")
    columns = RNG.standard_normal(_columns_shape(image, block, attrs)).astype(np.float32)
    inputs = [columns, np.array(image, dtype=np.int64), np.array(block, dtype=np.int64)]
    expected = reference("Col2Im", inputs, attrs)
    with onnxnn.set_executor(executor):
        actual = apply_op("Col2Im", tuple(onnxnn.tensor(a) for a in inputs), attrs).numpy()
    # Each image element sums at most prod(block) column entries.
    terms = int(np.prod(block))
    bound = 2 * terms * np.finfo(np.float32).eps * reference("Col2Im", [np.abs(columns)] + inputs[1:], attrs)
    assert actual.shape == expected.shape
    assert np.all(np.abs(actual - expected) <= bound)


@pytest.mark.parametrize("case_id, image, block, attrs", COL2IM_CASES, ids=[c[0] for c in COL2IM_CASES])
def test_col2im_gradient_is_im2col(case_id, image, block, attrs):
    shape_inputs = (onnxnn.tensor(np.array(image, dtype=np.int64)), onnxnn.tensor(np.array(block, dtype=np.int64)))

    def col2im(columns):
        return apply_op("Col2Im", (columns,) + shape_inputs, attrs)

    with onnxnn.set_executor("kernels"):
        check_gradients(col2im, [RNG.standard_normal(_columns_shape(image, block, attrs, channels=1, batch=1))])
