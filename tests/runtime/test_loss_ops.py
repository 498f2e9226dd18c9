"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss nodes (as imported training graphs hold them).

Forward values come from onnx's reference evaluator, on both executors; gradients with respect to
the input are checked against float64 finite differences, including through the optional
log-probability output of SoftmaxCrossEntropyLoss.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxnn
from onnxnn.runtime.tensor import apply_op
from gradcheck import check_gradients
from tolerances import gamma

RNG = np.random.default_rng(5)
OPSET = 21


def reference(op_type, inputs, attrs, num_outputs):
    names = [f"input{i}" for i in range(len(inputs))]
    graph_inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in zip(names, inputs)
    ]
    outputs = [f"output{i}" for i in range(num_outputs)]
    node = helper.make_node(op_type, names, outputs, **attrs)
    graph = helper.make_graph(
        [node],
        "case",
        graph_inputs,
        [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in outputs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))


SCORES_2D = RNG.standard_normal((4, 3))
TARGET_2D = np.array([0, 2, 1, 2])
SCORES_4D = RNG.standard_normal((2, 3, 2, 2))
TARGET_4D = np.array([[[0, 1], [2, 2]], [[1, 0], [1, 2]]])
WEIGHT = np.array([0.5, 2.0, 1.25])

CASES = [
    # id, scores, target, weight, attributes
    ("plain_mean", SCORES_2D, TARGET_2D, None, {}),
    ("sum", SCORES_2D, TARGET_2D, None, {"reduction": "sum"}),
    ("none_weighted", SCORES_2D, TARGET_2D, WEIGHT, {"reduction": "none"}),
    ("mean_weighted_ignored", SCORES_2D, TARGET_2D, WEIGHT, {"ignore_index": 2}),
    ("spatial_mean_weighted", SCORES_4D, TARGET_4D, WEIGHT, {}),
    ("spatial_none_ignored", SCORES_4D, TARGET_4D, None, {"reduction": "none", "ignore_index": 0}),
    # An ignored class (its rows' gradient masked) and PyTorch's -100, which chooses no class.
    ("mean_ignored_class", SCORES_2D, TARGET_2D, None, {"ignore_index": 1}),
    ("mean_ignored_padding", SCORES_2D, np.array([0, -100, 1, -100]), None, {"ignore_index": -100}),
]
IDS = [case[0] for case in CASES]


def _log_softmax(x):
    return x - np.log(np.exp(x).sum(1, keepdims=True))


def _record(op_type, tensors, attrs, num_outputs):
    return apply_op(op_type, tuple(tensors), attrs, num_outputs=num_outputs)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "op_type, num_outputs",
    [("NegativeLogLikelihoodLoss", 1), ("SoftmaxCrossEntropyLoss", 1), ("SoftmaxCrossEntropyLoss", 2)],
)
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_forward_matches_the_reference_evaluator(case, op_type, num_outputs, executor):
    _, scores, target, weight, attrs = case
    x = (_log_softmax(scores) if op_type == "NegativeLogLikelihoodLoss" else scores).astype(np.float32)
    inputs = [x, target] + ([weight.astype(np.float32)] if weight is not None else [])
    expected = reference(op_type, inputs, attrs, num_outputs)
    with onnxnn.set_executor(executor):
        outputs = _record(op_type, [onnxnn.tensor(a) for a in inputs], attrs, num_outputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        results = [output.numpy() for output in outputs]
    # A weighted sum of at most 16 log-probabilities (each a few rounded operations) and its divisor.
    bound = 2 * gamma(16 + 8, np.float32) * (1 + np.abs(x).sum())
    for result, wanted in zip(results, expected):
        assert result.shape == wanted.shape and result.dtype == np.float32
        assert np.all(np.abs(result - wanted) <= bound)


@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_input_gradient_matches_finite_differences(case, op_type):
    _, scores, target, weight, attrs = case
    x = _log_softmax(scores) if op_type == "NegativeLogLikelihoodLoss" else scores
    inputs = [x, target] + ([weight] if weight is not None else [])
    check_gradients(
        lambda *tensors: _record(op_type, tensors, attrs, 1),
        inputs,
        requires_grad=[True, False] + [False] * (weight is not None),
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_softmax_cross_entropy_gradient_through_both_outputs(case):
    _, scores, target, weight, attrs = case
    inputs = [scores, target] + ([weight] if weight is not None else [])

    def both(*tensors):
        loss, log_probabilities = _record("SoftmaxCrossEntropyLoss", tensors, attrs, 2)
        return loss.sum() + (log_probabilities * log_probabilities).sum() * 0.25

    check_gradients(both, inputs, requires_grad=[True, False] + [False] * (weight is not None))


@pytest.mark.parametrize(
    "inputs, message",
    [
        (
            lambda: (onnxnn.randn(4), onnxnn.tensor([0, 1, 2, 0])),
            r"input of shape \[4\] needs a batch and a class axis",
        ),
        (
            lambda: (onnxnn.randn(4, 3), onnxnn.tensor([0, 1])),
            r"target of shape \[2\] does not match input of shape "
            r"\[4, 3\]; expected \[4\]",
        ),
        (lambda: (onnxnn.randn(4, 3), onnxnn.rand(4)), "target must hold integer class indices"),
        (
            lambda: (onnxnn.randn(4, 3), onnxnn.tensor([0, 1, 2, 0]), onnxnn.ones(4)),
            r"weight of shape \[4\] does not match the 3 classes",
        ),
    ],
)
@pytest.mark.parametrize("op_type", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_shape_rule_names_the_op_and_the_mismatch(op_type, inputs, message):
    with pytest.raises(RuntimeError, match=f"{op_type}: {message}"):
        _record(op_type, inputs(), {}, 1)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_a_batch_of_ignored_targets_alone_has_a_zero_gradient(ignore_index, executor):
    # Its loss is 0 / 0 (NaN, as PyTorch's), but no NaN reaches the scores: PyTorch writes nothing there.
    scores = onnxnn.tensor(_log_softmax(SCORES_2D).astype(np.float32), requires_grad=True)
    target = onnxnn.tensor(np.full(4, ignore_index))
    with onnxnn.set_executor(executor):
        loss = _record("NegativeLogLikelihoodLoss", [scores, target], {"ignore_index": ignore_index}, 1)
        loss.backward()
        assert np.isnan(loss.item())
        np.testing.assert_array_equal(scores.grad.numpy(), np.zeros((4, 3), np.float32))
