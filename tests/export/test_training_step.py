"""training_step_to_onnx: N runs in plain onnxruntime equal N onnxnn training steps."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import training_step_to_onnx

OPTIMIZERS = [
    ("sgd", lambda p: onnxnn.optim.SGD(p, lr=0.1)),
    ("sgd_momentum_weight_decay", lambda p: onnxnn.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3)),
    ("sgd_nesterov", lambda p: onnxnn.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True)),
    # A dampened buffer's first update takes the whole gradient: its count is carried in the graph.
    ("sgd_dampening", lambda p: onnxnn.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.5)),
    ("adam", lambda p: onnxnn.optim.Adam(p, lr=0.01)),
    ("adam_amsgrad", lambda p: onnxnn.optim.Adam(p, lr=0.01, amsgrad=True)),
    ("adamw", lambda p: onnxnn.optim.AdamW(p, lr=0.01, weight_decay=0.1)),
    ("rmsprop", lambda p: onnxnn.optim.RMSprop(p, lr=0.01, momentum=0.5)),
    ("adagrad", lambda p: onnxnn.optim.Adagrad(p, lr=0.1)),
    ("adagrad_initial_sum", lambda p: onnxnn.optim.Adagrad(p, lr=0.1, initial_accumulator_value=0.5)),
    ("adagrad_lr_decay", lambda p: onnxnn.optim.Adagrad(p, lr=0.1, lr_decay=0.5)),
    # Factors of the step count (bias corrections, momentum products, eta and mu) computed in the
    # graph; RAdam's rectification starts at step 6, ASGD's averaging after t0.
    ("adamax", lambda p: onnxnn.optim.Adamax(p, lr=0.05)),
    ("nadam", lambda p: onnxnn.optim.NAdam(p, lr=0.05)),
    ("nadam_decoupled", lambda p: onnxnn.optim.NAdam(p, lr=0.05, weight_decay=0.1, decoupled_weight_decay=True)),
    ("radam", lambda p: onnxnn.optim.RAdam(p, lr=0.05)),
    ("adadelta", lambda p: onnxnn.optim.Adadelta(p, lr=1.0)),
    ("asgd", lambda p: onnxnn.optim.ASGD(p, lr=0.05, lambd=0.01, t0=3)),
    ("rprop", lambda p: onnxnn.optim.Rprop(p, lr=0.01)),  # its step sizes start at lr
    ("adafactor", lambda p: onnxnn.optim.Adafactor(p, lr=0.05)),
]
STEPS = 8


def _run_in_onnxruntime(proto, signature, batch: dict, steps: int):
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    feeds = dict(signature.initial_state)
    losses = []
    for _ in range(steps):
        outputs = dict(zip(names, session.run(None, {**feeds, **batch})))
        losses.append(float(outputs[signature.loss]))
        feeds = {name: outputs[next_name] for name, next_name in signature.state.items()}
    return losses, feeds


def _optimizer_state(optimizer) -> dict:
    return {
        (index, key): value.numpy().copy()
        for index, state in enumerate(optimizer.state.values())
        for key, value in state.items()
        if isinstance(value, onnxnn.Tensor)
    }


@pytest.mark.parametrize("name, make_optimizer", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_n_exported_steps_equal_n_onnxnn_steps(name, make_optimizer):
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    optimizer = make_optimizer(net.parameters())
    x, y = onnxnn.randn(16, 4), onnxnn.randn(16, 2)
    before = {key: value.numpy().copy() for key, value in net.state_dict().items()}
    state_before = _optimizer_state(optimizer)
    proto, signature = training_step_to_onnx(net, F.mse_loss, optimizer, (x, y))
    for key, value in net.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key], err_msg="exporting must not train the model")
    for key, value in state_before.items():  # nor step the optimizer (Adagrad's state exists already)
        np.testing.assert_array_equal(_optimizer_state(optimizer)[key], value, err_msg=str(key))
    assert all("capturable" not in group or not group["capturable"] for group in optimizer.param_groups)

    losses, state = _run_in_onnxruntime(proto, signature, {"input": x.numpy(), "target": y.numpy()}, STEPS)
    expected_losses = []
    for _ in range(STEPS):
        loss = F.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        expected_losses.append(loss.item())
    # Eight float32 steps of the same graph in two runtimes, which sum in different orders: the
    # loss is a mean of 32 squares (positive: 2 gamma(33) = 4e-6 relative), on a forward whose
    # 4- and 8-term matmuls and tanh add a few gamma more; 1e-5 = 2 gamma(84) is that budget.
    # Parameters move by lr * updates computed from gradients (16-term batch sums); the adaptive
    # optimizers divide by sqrt(v) ~ |g|, which turns a gradient's relative error into the same
    # relative error of an update of size lr: rtol 1e-4 bounds it for these unit-scale weights.
    # A step missing or an update wrong moves a parameter by O(lr), far outside.
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    for key, param in net.named_parameters():
        np.testing.assert_allclose(state[key], param.detach().numpy(), rtol=1e-4, atol=1e-6)
        for state_key, value in optimizer.state[param].items():  # and every state it carries
            if isinstance(value, onnxnn.Tensor) and f"optimizer.{key}.{state_key}" in state:
                carried = state[f"optimizer.{key}.{state_key}"]
                np.testing.assert_allclose(carried, value.numpy(), rtol=1e-4, atol=1e-6, err_msg=state_key)


@pytest.mark.parametrize("name", ["sgd_dampening", "adam", "rprop"])
def test_training_after_an_export_is_training_as_if_it_never_happened(name):
    # The export creates the optimizer's state to record a step; left behind, a zero momentum buffer
    # would dampen the next eager step's gradient where PyTorch's first step copies it.
    make_optimizer = dict(OPTIMIZERS)[name]
    x, y = onnxnn.randn(16, 4), onnxnn.randn(16, 2)
    weights = []
    for export_first in (True, False):
        onnxnn.manual_seed(0)
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
        optimizer = make_optimizer(net.parameters())
        if export_first:
            training_step_to_onnx(net, F.mse_loss, optimizer, (x, y))
            assert all(not state for state in optimizer.state.values())
        for _ in range(3):
            loss = F.mse_loss(net(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        weights.append([param.detach().numpy() for param in net.parameters()])
    for exported_first, fresh in zip(*weights):
        np.testing.assert_array_equal(exported_first, fresh)


def test_batchnorm_buffers_are_carried_state():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 1))
    optimizer = onnxnn.optim.SGD(net.parameters(), lr=0.1)
    x, y = onnxnn.randn(8, 3), onnxnn.randn(8, 1)
    proto, signature = training_step_to_onnx(net, F.mse_loss, optimizer, (x, y))
    assert "1.running_mean" in signature.state and "1.num_batches_tracked" in signature.state
    _, state = _run_in_onnxruntime(proto, signature, {"input": x.numpy(), "target": y.numpy()}, steps=3)
    for _ in range(3):
        loss = F.mse_loss(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    np.testing.assert_allclose(state["1.running_mean"], net[1].running_mean.numpy(), rtol=1e-5, atol=1e-6)
    assert int(state["1.num_batches_tracked"]) == 3


class _DeepChain(nn.Module):
    """A forward deeper than the pending-history bound (``runtime/depth.py``): eager runs realize part
    of such a history on the way, which an export must not (it would hold that part as a constant)."""

    def __init__(self, depth: int):
        super().__init__()
        self.depth = depth
        self.shift = nn.Parameter(onnxnn.full((3,), 1e-3))

    def forward(self, x):
        for _ in range(self.depth):
            x = x * 0.999 + self.shift
        return x


def test_a_forward_deeper_than_the_pending_bound_is_exported_as_a_function_of_the_batch():
    from onnxnn.runtime.depth import MAX_PENDING_DEPTH

    net = _DeepChain(MAX_PENDING_DEPTH + 100)
    optimizer = onnxnn.optim.SGD(net.parameters(), lr=0.1)
    proto, signature = training_step_to_onnx(net, F.mse_loss, optimizer, (onnxnn.randn(4, 3), onnxnn.randn(4, 3)))
    # Another batch than the example: a forward frozen at the example's values would not see it.
    x, y = onnxnn.randn(4, 3), onnxnn.randn(4, 3)
    losses, _ = _run_in_onnxruntime(proto, signature, {"input": x.numpy(), "target": y.numpy()}, steps=1)
    expected = F.mse_loss(net(x), y).item()
    # 700 multiply-adds of unit-scale values, each rounded once in both runtimes: about 700 eps apart.
    np.testing.assert_allclose(losses[0], expected, rtol=1e-3)


def test_a_loss_that_is_not_a_scalar_is_rejected_and_nothing_changes():
    net = nn.Linear(2, 2)
    optimizer = onnxnn.optim.SGD(net.parameters(), lr=0.1)
    before = net.weight.detach().numpy().copy()
    with pytest.raises(ValueError, match="one-element tensor"):
        training_step_to_onnx(
            net, lambda out, target: out - target, optimizer, (onnxnn.randn(3, 2), onnxnn.randn(3, 2))
        )
    np.testing.assert_array_equal(net.weight.detach().numpy(), before)


def test_an_optimizer_over_foreign_tensors_is_rejected():
    net = nn.Linear(2, 2)
    optimizer = onnxnn.optim.SGD([onnxnn.randn(2, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="not a parameter of the model"):
        training_step_to_onnx(net, F.mse_loss, optimizer, (onnxnn.randn(3, 2), onnxnn.randn(3, 2)))


@pytest.mark.parametrize(
    "make_optimizer, dtype",
    [
        # Their op-by-op steps of half-precision parameters read host numbers.
        (lambda p: onnxnn.optim.Adafactor(p, lr=0.01), onnxnn.float16),
        (lambda p: onnxnn.optim.NAdam(p, lr=0.01), onnxnn.float16),
        (lambda p: onnxnn.optim.ASGD(p, lr=0.01), onnxnn.bfloat16),
    ],
    ids=["adafactor-float16", "nadam-float16", "asgd-bfloat16"],
)
def test_a_step_that_updates_state_on_the_host_is_refused_and_nothing_changes(make_optimizer, dtype):
    """The file would repeat the number of the recorded step at every run (a count that never
    advances): refused, with the model and the optimizer as they were."""
    net = nn.Linear(4, 2).to(dtype)
    optimizer = make_optimizer(net.parameters())
    x, y = onnxnn.randn(16, 4).to(dtype), onnxnn.randn(16, 2).to(dtype)
    before = {key: value.numpy().copy() for key, value in net.state_dict().items()}
    with pytest.raises(NotImplementedError, match="computed on the host"):
        training_step_to_onnx(net, F.mse_loss, optimizer, (x, y))
    for key, value in net.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key])
    assert all(state["step"].item() == 0 for state in optimizer.state.values())
    assert all(not group.get("capturable", False) for group in optimizer.param_groups)
