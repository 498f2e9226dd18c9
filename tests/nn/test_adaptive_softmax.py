"""AdaptiveLogSoftmaxWithLoss: the head/tail factorisation of the class distribution.

The numpy reference computes every class's log-probability from the module's weights (head
log-softmax, plus a cluster's log-softmax for tail classes) and picks the targets' entries.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from gradcheck import check_gradients
from tolerances import gamma

RNG = np.random.default_rng(11)
IN_FEATURES, CLASSES, CUTOFFS = 8, 10, [3, 6]
X = RNG.standard_normal((6, IN_FEATURES))
TARGET = np.array([0, 4, 9, 2, 6, 5])  # shortlist, first cluster, second cluster


def _log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def _weights(module):
    return {k: np.asarray(v.detach().to(onnxnn.float64).numpy()) for k, v in module.state_dict().items()}


def reference_log_prob(module, x):
    w = _weights(module)
    head = x @ w["head.weight"].T + w.get("head.bias", 0.0)
    head_logprob = _log_softmax(head)
    pieces = [head_logprob[:, : CUTOFFS[0]]]
    for i in range(len(CUTOFFS)):
        cluster = (x @ w[f"tail.{i}.0.weight"].T) @ w[f"tail.{i}.1.weight"].T
        pieces.append(_log_softmax(cluster) + head_logprob[:, CUTOFFS[0] + i : CUTOFFS[0] + i + 1])
    return np.concatenate(pieces, 1)


def _module(dtype=onnxnn.float64, head_bias=True):
    return nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, CLASSES, CUTOFFS, div_value=2.0, head_bias=head_bias, dtype=dtype)


def test_state_dict_keys_and_shapes_follow_pytorch():
    # The last cluster's hidden size is 16 // 4^3 = 0; PyTorch warns about its empty weights too.
    with pytest.warns(UserWarning, match="zero-element"):
        module = nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 10, 15], head_bias=True)
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    # Head: the 5 shortlist classes and one entry per cluster; tail i: in -> in // 4^(i+1) -> cluster size.
    assert shapes == {
        "head.weight": (8, 16),
        "head.bias": (8,),
        "tail.0.0.weight": (4, 16),
        "tail.0.1.weight": (5, 4),
        "tail.1.0.weight": (1, 16),
        "tail.1.1.weight": (5, 1),
        "tail.2.0.weight": (0, 16),
        "tail.2.1.weight": (5, 0),
    }


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_output_is_each_targets_log_probability_and_loss_their_negative_mean(executor):
    module = _module()
    with onnxnn.set_executor(executor):
        output, loss = module(onnxnn.tensor(X, dtype=onnxnn.float64), onnxnn.tensor(TARGET))
        output, loss = output.detach().numpy(), loss.item()
    expected = reference_log_prob(module, X)[np.arange(len(TARGET)), TARGET]
    # Two matmuls over 8 features and a log-softmax over at most 5 entries, in float64.
    tolerance = 2 * gamma(2 * IN_FEATURES + 24, np.float64) * (1 + np.abs(X).sum() * 10)
    np.testing.assert_allclose(output, expected, rtol=0, atol=tolerance)
    np.testing.assert_allclose(loss, -expected.mean(), rtol=0, atol=tolerance)


def test_log_prob_and_predict():
    module = _module()
    log_prob = module.log_prob(onnxnn.tensor(X, dtype=onnxnn.float64)).detach().numpy()
    expected = reference_log_prob(module, X)
    np.testing.assert_allclose(log_prob, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(log_prob).sum(1), 1.0, rtol=1e-12)
    scaled = X * 5
    assert (
        module.predict(onnxnn.tensor(scaled, dtype=onnxnn.float64)).numpy().tolist()
        == reference_log_prob(module, scaled).argmax(1).tolist()
    )


def test_unbatched_input_gives_a_scalar_output():
    module = _module()
    output, loss = module(onnxnn.tensor(X[1], dtype=onnxnn.float64), onnxnn.tensor(TARGET[1]))
    assert output.shape == () and loss.shape == ()
    np.testing.assert_allclose(output.item(), reference_log_prob(module, X[1:2])[0, TARGET[1]], atol=1e-12)


def test_gradients_match_finite_differences():
    module = _module()
    check_gradients(lambda x, t: module(x, t).loss, [X, TARGET])
    check_gradients(lambda x, t: module(x, t).output, [X, TARGET])


def test_forward_and_parameter_gradients_match_torch():
    torch = pytest.importorskip("torch")
    ours = _module()
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(IN_FEATURES, CLASSES, CUTOFFS, div_value=2.0, head_bias=True).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in _weights(ours).items()})
    ours(onnxnn.tensor(X, dtype=onnxnn.float64), onnxnn.tensor(TARGET)).loss.backward()
    theirs(torch.tensor(X), torch.tensor(TARGET)).loss.backward()
    for (name, ours_parameter), (_, theirs_parameter) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(
            ours_parameter.grad.numpy(), theirs_parameter.grad.numpy(), rtol=1e-10, atol=1e-14, err_msg=name
        )


def test_a_cluster_without_targets_leaves_its_gradients_none():
    # PyTorch runs each cluster on its own rows: a cluster no target falls in gets no gradient at
    # all (None), so weight decay and momentum leave its weights alone, as they would in PyTorch.
    module = _module()
    result = module(onnxnn.tensor(X[:4]), onnxnn.tensor(np.array([0, 4, 2, 5])))  # the shortlist, the first cluster
    result.loss.backward()
    assert module.tail[0][0].weight.grad is not None and module.head.weight.grad is not None
    assert module.tail[1][0].weight.grad is None and module.tail[1][1].weight.grad is None
    expected = reference_log_prob(module, X[:4])[np.arange(4), [0, 4, 2, 5]]
    np.testing.assert_allclose(result.output.detach().numpy(), expected, rtol=1e-12)


def test_exported_module_takes_the_targets_as_an_input():
    module = _module(onnxnn.float32).eval()
    x, target = onnxnn.tensor(X, dtype=onnxnn.float32), onnxnn.tensor(TARGET)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = to_onnx(module, (x, target), input_names=["x", "target"], output_names=["output", "loss"])
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    other_target = np.array([9, 9, 0, 3, 5, 1])
    output, loss = session.run(None, {"x": x.numpy(), "target": other_target})
    expected = reference_log_prob(module, x.numpy().astype(np.float64))[np.arange(6), other_target]
    tolerance = 2 * gamma(2 * IN_FEATURES + 24, np.float32) * (1 + np.abs(X).sum() * 10)
    np.testing.assert_allclose(output, expected, rtol=0, atol=tolerance)
    np.testing.assert_allclose(loss, -expected.mean(), rtol=0, atol=tolerance)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, []), "cutoffs should be a sequence of length larger than 0"),
        (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [6, 3]), "cutoffs should be a sequence of unique, positive"),
        (lambda: nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 10]), "each value is between 1 and n_classes-1"),
    ],
)
def test_bad_cutoffs_raise_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    "x, target, message",
    [
        (
            onnxnn.randn(3, 8),
            onnxnn.tensor([0, 1]),
            "Input and target should have the same size in the batch dimension.",
        ),
        (onnxnn.randn(3, 8), onnxnn.tensor([[0, 1, 2]]), "0D or 1D target tensor expected, multi-target not supported"),
        (
            onnxnn.randn(3, 8),
            onnxnn.tensor(1),
            r"0D target tensor expects 1D input tensors, but found inputs with size "
            r"onnxnn.Size\(\[3, 8\]\)",
        ),
        (
            onnxnn.randn(3, 8),
            onnxnn.tensor([0, 10, 2]),
            r"Target values should be in \[0, 9\], but values in range "
            r"\[0, 10\] were found.",
        ),
    ],
)
def test_bad_targets_raise_pytorchs_errors(x, target, message):
    with pytest.raises(RuntimeError, match=message):
        _module(onnxnn.float32)(x, target)
