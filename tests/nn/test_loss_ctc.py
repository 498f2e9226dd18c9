"""CTC loss: the sum over every alignment, checked by enumerating the alignments of short inputs.

The reference collapses each of the ``C^T`` frame labellings (repeats merged, blanks dropped) and
sums the probabilities of those that spell the target, which is the definition the forward
recursion computes. Tolerances: a float64 sum of at most ``C^T`` products of ``T`` factors.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx
from gradcheck import check_gradients
from tolerances import gamma

RNG = np.random.default_rng(7)
FRAMES, BATCH, CLASSES = 5, 3, 3


def _log_softmax(z):
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _collapse(path, blank):
    merged = [label for i, label in enumerate(path) if i == 0 or label != path[i - 1]]
    return [label for label in merged if label != blank]


def reference_nll(log_probs, target, frames, blank=0):
    """-log of the summed probability of every alignment of ``target`` to the first ``frames`` frames."""
    total = 0.0
    for path in itertools.product(range(log_probs.shape[-1]), repeat=frames):
        if _collapse(path, blank) == list(target):
            total += np.exp(sum(log_probs[t, label] for t, label in enumerate(path)))
    return -np.log(total) if total > 0 else np.inf


LOG_PROBS = _log_softmax(RNG.standard_normal((FRAMES, BATCH, CLASSES)))
# Sample 0: a repeat needing a blank between; sample 1: shorter input and target; sample 2: empty target.
TARGETS = np.array([[1, 1, 2], [2, 1, 0], [0, 0, 0]])
INPUT_LENGTHS = [5, 4, 3]
TARGET_LENGTHS = [3, 2, 0]


def _expected_none(
    log_probs=LOG_PROBS, targets=TARGETS, input_lengths=INPUT_LENGTHS, target_lengths=TARGET_LENGTHS, blank=0
):
    return np.array(
        [
            reference_nll(log_probs[:, n], targets[n, : target_lengths[n]], input_lengths[n], blank)
            for n in range(len(input_lengths))
        ]
    )


def _reduce(losses, reduction, target_lengths=TARGET_LENGTHS):
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return (losses / np.maximum(target_lengths, 1)).mean()


TOLERANCE = 4 * gamma(CLASSES**FRAMES + FRAMES + 8, np.float64)


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_sums_every_alignment(reduction, executor):
    with onnxnn.set_executor(executor):
        result = F.ctc_loss(
            onnxnn.tensor(LOG_PROBS), onnxnn.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS, reduction=reduction
        ).numpy()
    np.testing.assert_allclose(result, _reduce(_expected_none(), reduction), rtol=TOLERANCE)


def test_ctc_loss_in_float32_within_its_rounding():
    result = F.ctc_loss(
        onnxnn.tensor(LOG_PROBS, dtype=onnxnn.float32),
        onnxnn.tensor(TARGETS),
        INPUT_LENGTHS,
        TARGET_LENGTHS,
        reduction="none",
    ).numpy()
    expected = _expected_none(LOG_PROBS.astype(np.float32).astype(np.float64))
    assert result.dtype == np.float32
    # Each frame's logsumexp and sum are a few dozen rounded operations on values of the loss's size.
    bound = 2 * gamma(40 * FRAMES, np.float32) * (1 + np.abs(expected) + np.abs(LOG_PROBS).sum((0, 2)))
    assert np.all(np.abs(result - expected) <= bound)


def test_ctc_loss_takes_concatenated_targets_and_tensor_lengths():
    flat = np.concatenate([TARGETS[n, : TARGET_LENGTHS[n]] for n in range(BATCH)])
    result = F.ctc_loss(
        onnxnn.tensor(LOG_PROBS),
        onnxnn.tensor(flat),
        onnxnn.tensor(INPUT_LENGTHS),
        onnxnn.tensor(TARGET_LENGTHS),
        reduction="none",
    ).numpy()
    np.testing.assert_allclose(result, _expected_none(), rtol=TOLERANCE)


def test_a_replayed_ctc_loss_lays_out_each_calls_targets():
    # Concatenated targets are laid out by their lengths' values: an evaluation-mode module under
    # no_grad (whose forward is otherwise replayed by shapes) must lay out each call's own.
    loss = nn.CTCLoss(reduction="none").eval()
    flat = np.array([1, 2, 1])
    with onnxnn.no_grad():
        for lengths in ([2, 1, 0], [2, 1, 0], [1, 2, 0], [3, 0, 0], [0, 3, 0]):
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            padded = np.zeros((BATCH, 3), np.int64)
            for n, (start, length) in enumerate(zip(starts, lengths)):
                padded[n, :length] = flat[start : start + length]
            result = loss(
                onnxnn.tensor(LOG_PROBS), onnxnn.tensor(flat), onnxnn.tensor(INPUT_LENGTHS), onnxnn.tensor(lengths)
            )
            expected = _expected_none(targets=padded, target_lengths=lengths)
            np.testing.assert_allclose(result.numpy(), expected, rtol=TOLERANCE)


def test_ctc_loss_of_only_empty_targets_is_the_blank_paths():
    result = F.ctc_loss(
        onnxnn.tensor(LOG_PROBS), onnxnn.zeros(0, dtype=onnxnn.int64), INPUT_LENGTHS, [0, 0, 0], reduction="none"
    )
    expected = -np.array([LOG_PROBS[:frames, n, 0].sum() for n, frames in enumerate(INPUT_LENGTHS)])
    np.testing.assert_allclose(result.numpy(), expected, rtol=TOLERANCE)


def test_ctc_loss_unbatched_input():
    result = F.ctc_loss(
        onnxnn.tensor(LOG_PROBS[:, 0]), onnxnn.tensor(TARGETS[0]), onnxnn.tensor(5), onnxnn.tensor(3), reduction="none"
    )
    assert result.shape == ()
    np.testing.assert_allclose(result.numpy(), reference_nll(LOG_PROBS[:, 0], TARGETS[0], 5), rtol=TOLERANCE)


def test_ctc_loss_with_another_blank():
    targets = np.array([[0, 1, 0], [1, 1, 1], [0, 0, 0]])
    result = F.ctc_loss(
        onnxnn.tensor(LOG_PROBS), onnxnn.tensor(targets), INPUT_LENGTHS, [3, 1, 1], blank=2, reduction="none"
    ).numpy()
    np.testing.assert_allclose(
        result, _expected_none(targets=targets, target_lengths=[3, 1, 1], blank=2), rtol=TOLERANCE
    )


@pytest.mark.parametrize("zero_infinity, expected", [(False, np.inf), (True, 0.0)])
def test_impossible_alignment_is_inf_or_zero(zero_infinity, expected):
    # Target 1, 1 needs three frames (a blank between the repeats); two are given.
    log_probs = onnxnn.tensor(LOG_PROBS[:, :1], dtype=onnxnn.float64, requires_grad=True)
    loss = F.ctc_loss(log_probs, onnxnn.tensor([[1, 1]]), [2], [2], reduction="sum", zero_infinity=zero_infinity)
    assert loss.item() == expected
    if zero_infinity:
        loss.backward()
        np.testing.assert_array_equal(log_probs.grad.numpy(), 0.0)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_ctc_loss_gradients_match_finite_differences(reduction):
    check_gradients(
        lambda lp: F.ctc_loss(lp, onnxnn.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS, reduction=reduction),
        [LOG_PROBS],
    )


def test_ctc_loss_gradients_through_log_softmax_match_torch():
    torch = pytest.importorskip("torch")
    logits = RNG.standard_normal((FRAMES, BATCH, CLASSES))
    ours = onnxnn.tensor(logits, dtype=onnxnn.float64, requires_grad=True)
    theirs = torch.tensor(logits, requires_grad=True)
    loss = F.ctc_loss(ours.log_softmax(2), onnxnn.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS)
    expected = torch.nn.functional.ctc_loss(theirs.log_softmax(2), torch.tensor(TARGETS), INPUT_LENGTHS, TARGET_LENGTHS)
    loss.backward()
    expected.backward()
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=TOLERANCE)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_exported_ctc_loss_takes_new_lengths():
    module = nn.CTCLoss(reduction="none")
    args = (
        onnxnn.tensor(LOG_PROBS),
        onnxnn.tensor(TARGETS),
        onnxnn.tensor(INPUT_LENGTHS),
        onnxnn.tensor(TARGET_LENGTHS),
    )
    names = ["log_probs", "targets", "input_lengths", "target_lengths"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = to_onnx(module, args, input_names=names)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    lengths, label_counts = np.array([5, 5, 2]), np.array([2, 1, 0])
    (result,) = session.run(
        None, {"log_probs": LOG_PROBS, "targets": TARGETS, "input_lengths": lengths, "target_lengths": label_counts}
    )
    np.testing.assert_allclose(
        result, _expected_none(input_lengths=lengths, target_lengths=label_counts), rtol=TOLERANCE
    )


def test_ctc_loss_module_repr_and_state():
    module = nn.CTCLoss(blank=1, zero_infinity=True)
    assert repr(module) == "CTCLoss()" and module.blank == 1 and module.zero_infinity
    assert list(module.state_dict()) == []


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda lp, t: F.ctc_loss(lp, t, [6, 5, 3], [3, 2, 0]),
            RuntimeError,
            r"Expected input_lengths to have value at most 5, but got value 6 \(while checking arguments for "
            r"ctc_loss_allocate_outputs\)",
        ),
        (
            lambda lp, t: F.ctc_loss(lp, t, [5, 5, 3], [4, 2, 0]),
            RuntimeError,
            "Expected tensor to have size at least 4 at dimension 1, but got size 3 for argument #2 'targets'",
        ),
        (lambda lp, t: F.ctc_loss(lp, t, [5, 5], [3, 2, 0]), RuntimeError, "input_lengths must be of size batch_size"),
        # Concatenated targets: as many labels as the lengths sum to (fewer were made up, more dropped).
        (
            lambda lp, t: F.ctc_loss(lp, onnxnn.tensor([1, 2, 1]), [5, 5, 3], [3, 2, 0]),
            RuntimeError,
            "Expected tensor to have size 5 at dimension 0, but got size 3 for argument #2 'targets'",
        ),
        (
            lambda lp, t: F.ctc_loss(lp, onnxnn.tensor([1, 2, 1, 2, 1, 2]), [5, 5, 3], [3, 2, 0]),
            RuntimeError,
            "Expected tensor to have size 5 at dimension 0, but got size 6 for argument #2 'targets'",
        ),
        (
            lambda lp, t: F.ctc_loss(lp, t, [5, 5, 3], [3, -1, 0]),
            RuntimeError,
            "Expected target_lengths to have value at least 0, but got value -1",
        ),
        (lambda lp, t: F.ctc_loss(lp, t, [5, 5, 3], [3, 2, 0], blank=3), RuntimeError, "blank must be in label range"),
        (
            lambda lp, t: F.ctc_loss(lp, t, [5, 5, 3], [3, 2, 0], reduction="avg"),
            ValueError,
            "avg is not a valid value for reduction",
        ),
        (
            lambda lp, t: F.ctc_loss(lp.half(), t, [5, 5, 3], [3, 2, 0]),
            NotImplementedError,
            "\"ctc_loss\" not implemented for 'Half'",
        ),
    ],
)
def test_ctc_loss_argument_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(onnxnn.tensor(LOG_PROBS, dtype=onnxnn.float32), onnxnn.tensor(TARGETS))
