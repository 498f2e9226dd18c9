"""Every gradient rule of the default ONNX domain against float64 central differences.

One table (gradient_cases.py), one line per (op, attribute variant, broadcasting pattern). Each case
is a function of tensors and the float64 arrays it is evaluated at; ``check_gradients`` compares the
recorded backward graph with finite differences. Inputs stay away from points where the op is not
differentiable (relu/abs at 0, clip bounds), except where a tie is the point of the case
(central differences at a two-way tie of max/min give exactly the even split PyTorch uses).
``test_every_gradient_rule_has_a_case`` keeps the table complete: it reads which ONNX op types
each case records from the autograd graph, and fails when a registered rule has no case, unless
``COVERED_ELSEWHERE`` names the test file that checks it. Second and third derivatives are in
test_gradients_higher_order.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn.ir.registry import gradient_rules

from .gradient_cases import CASES, Case, randn

# Rules whose finite-difference checks live in another test file (path relative to tests/).
COVERED_ELSEWHERE = {
    # Indexing ops (x[i], gather, scatter, index_put), checked next to their forward semantics.
    "Gather": "runtime/test_indexing_gather_scatter.py",
    "GatherElements": "runtime/test_indexing_gather_scatter.py",
    "GatherND": "runtime/test_indexing_gather_scatter.py",
    "ScatterND": "runtime/test_indexing_gather_scatter.py",
    "ScatterElements": "runtime/test_indexing_gather_scatter.py",
    # Convolutions: float32 checks with a wide step, exact because the ops are bilinear.
    "Conv": "runtime/test_conv_ops_gradients.py",
    "ConvTranspose": "runtime/test_conv_ops_gradients.py",
    # Pools, checked against a direct numpy pooling with PyTorch's window rules.
    "MaxPool": "runtime/test_pooling_ops.py",
    "AveragePool": "runtime/test_pooling_ops.py",
    "LpPool": "runtime/test_pooling_ops.py",
    "GlobalAveragePool": "runtime/test_pooling_ops.py",
    "GlobalMaxPool": "runtime/test_pooling_ops.py",
    # Unpooling and folding as imported models use them, checked against onnx's reference.
    "MaxUnpool": "runtime/test_unpool_col2im_ops.py",
    "Col2Im": "runtime/test_unpool_col2im_ops.py",
    # Normalization ops and Dropout (whose mask is random: checked at ratio 0 and against the mask).
    "LayerNormalization": "runtime/test_normalization_ops.py",
    "GroupNormalization": "runtime/test_normalization_ops.py",
    "InstanceNormalization": "runtime/test_normalization_ops.py",
    "LRN": "runtime/test_normalization_ops.py",
    "Dropout": "runtime/test_normalization_ops.py",
    # losses (layer family L3): ONNX's loss ops, checked with weights, ignore_index and both outputs.
    "NegativeLogLikelihoodLoss": "runtime/test_loss_ops.py",
    "SoftmaxCrossEntropyLoss": "runtime/test_loss_ops.py",
    # layer library (norm/activation family): activation nodes, and normalization nodes imported models contain.
    **{
        op_type: "nn/test_activations.py"
        for op_type in (
            "Selu",
            "Celu",
            "HardSigmoid",
            "HardSwish",
            "Mish",
            "Softsign",
            "Shrink",
            "ThresholdedRelu",
            "PRelu",
        )
    },
    "LpNormalization": "runtime/test_normalization_ops.py",
    "MeanVarianceNormalization": "runtime/test_normalization_ops.py",
    "CastLike": "nn/test_activations.py",  # in the function bodies of imported Swish and RMSNormalization
    # layer library (padding/resampling family): resampling and rearranging nodes, against onnx's reference.
    **{
        op_type: "runtime/test_resample_ops.py"
        for op_type in ("Resize", "GridSample", "AffineGrid", "DepthToSpace", "SpaceToDepth", "CenterCropPad")
    },
    # recurrent nodes: finite differences over directions, sequence_lens and initial states, both executors.
    **{op_type: "runtime/test_recurrent_ops.py" for op_type in ("RNN", "LSTM", "GRU")},
    # detection nodes: sampling re-recorded and differentiated, both executors, against onnx's reference.
    **{op_type: "runtime/test_detection_ops.py" for op_type in ("RoiAlign", "DeformConv")},
}


def _recorded_op_types(case: Case) -> set[str]:
    """The ONNX op types on the autograd graph that ``case`` records (read before any backward)."""
    tensors = [onnxnn.tensor(array, dtype=onnxnn.float64, requires_grad=True) for array in case.inputs]
    output = case.function(*tensors)
    found, stack, seen = set(), [output.grad_fn], set()
    while stack:
        function = stack.pop()
        if function is None or id(function) in seen:
            continue
        seen.add(id(function))
        node = getattr(function, "node", None)
        if node is not None:
            found.add(node.op_type)
        stack.extend(edge[0] for edge in function.next_functions if edge is not None)
    return found


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_gradient_matches_finite_differences(case: Case) -> None:
    check_gradients(case.function, case.inputs, **case.options)


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))


def test_every_gradient_rule_has_a_case() -> None:
    covered = set()
    for case in CASES:
        covered |= _recorded_op_types(case)
    missing = set(gradient_rules.op_types()) - set(COVERED_ELSEWHERE) - covered
    assert not missing, f"gradient rules without a finite-difference case: {sorted(missing)}"


@pytest.mark.parametrize("op_type", sorted(COVERED_ELSEWHERE))
def test_rules_covered_elsewhere_are_checked_there(op_type: str) -> None:
    source = (Path(__file__).parents[1] / COVERED_ELSEWHERE[op_type]).read_text()
    assert "check_gradients" in source and f'"{op_type}"' in source


def test_big_inputs_use_the_directional_check() -> None:
    # Above the exhaustive limit the check compares <J v, u> along a random direction.
    check_gradients(lambda a, b: (a @ b).tanh(), [randn(12, 10), randn(10, 9)])
