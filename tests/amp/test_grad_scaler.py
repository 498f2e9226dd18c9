"""onnxnn.amp.GradScaler: loss scaling with torch.amp.GradScaler's semantics."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.amp import GradScaler, autocast


def _model_and_data():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    x = onnxnn.randn(16, 4)
    target = x.sum(1, keepdim=True) * 0.5
    return model, x, target


def _scaled_backward(scaler, model, x, target, dtype=onnxnn.float16):
    with autocast("cpu", dtype=dtype):
        loss = F.mse_loss(model(x), target)
    scaler.scale(loss).backward()
    return loss


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.bfloat16])
def test_amp_training_loop_runs_unchanged_and_reduces_the_loss(dtype):
    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        losses.append(_scaled_backward(scaler, model, x, target, dtype).item())
        scaler.step(optimizer)
        scaler.update()
    assert all(p.dtype is onnxnn.float32 and p.grad.dtype is onnxnn.float32 for p in model.parameters())
    assert losses[-1] < 0.5 * losses[0]
    assert scaler.get_scale() == 2.0**12  # no overflow in 8 steps: grown after steps 3 and 6


def test_unscale_gives_the_gradients_of_the_unscaled_loss():
    model, x, target = _model_and_data()
    reference = copy.deepcopy(model)
    F.mse_loss(reference(x), target).backward()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=2.0**8)
    loss = F.mse_loss(model(x), target)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        # Scaling by a power of two is exact in float32: the gradients are equal but for the
        # float32 roundings of the scaled sums, which scale along.
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_inf_gradient_skips_the_step_and_backs_off_then_growth_after_the_interval():
    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=8.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    optimizer.zero_grad()
    _scaled_backward(scaler, model, x, target)
    before = [p.detach().numpy().copy() for p in model.parameters()]
    model[0].weight.grad.fill_(float("inf"))  # an overflow, injected
    assert scaler.step(optimizer) is None
    for value, p in zip(before, model.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), value)  # the step was skipped
    scaler.update()
    assert (scaler.get_scale(), scaler._get_growth_tracker()) == (2.0, 0)
    scales = []
    for _ in range(4):
        optimizer.zero_grad()
        _scaled_backward(scaler, model, x, target)
        scaler.step(optimizer)
        scaler.update()
        scales.append((scaler.get_scale(), scaler._get_growth_tracker()))
    assert scales == [(2.0, 1), (4.0, 0), (4.0, 1), (8.0, 0)]
    assert not np.array_equal(model[0].weight.detach().numpy(), before[0])


def test_nan_gradient_is_found_too():
    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=4.0)
    _scaled_backward(scaler, model, x, target)
    model[2].bias.grad.fill_(float("nan"))
    scaler.step(optimizer)
    scaler.update()
    assert scaler.get_scale() == 2.0


def test_per_optimizer_stages_refuse_repeated_calls():
    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu")
    with pytest.raises(AssertionError, match="Attempted unscale_ but _scale is None"):
        scaler.unscale_(optimizer)
    _scaled_backward(scaler, model, x, target)
    scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called on this optimizer"):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step\\(\\)"):
        scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called since the last update"):
        scaler.step(optimizer)
    scaler.update()
    _scaled_backward(scaler, model, x, target)
    scaler.unscale_(optimizer)  # a new iteration starts after update()
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(optimizer, closure=lambda: None)


def test_float16_gradients_are_refused():
    weight = nn.Parameter(onnxnn.ones(3, dtype=onnxnn.float16))
    optimizer = onnxnn.optim.SGD([weight], lr=0.1)
    scaler = GradScaler("cpu")
    scaler.scale(weight.sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.unscale_(optimizer)


def test_update_with_a_new_scale():
    scaler = GradScaler("cpu")
    scaler.scale(onnxnn.ones(()))
    scaler.update(3.0)
    assert scaler.get_scale() == 3.0
    scaler.update(onnxnn.tensor([5.0]))
    assert scaler.get_scale() == 5.0
    with pytest.raises(AssertionError, match="new_scale should be a float"):
        scaler.update(onnxnn.tensor([1.0, 2.0]))


def test_scale_keeps_the_structure_of_the_outputs():
    scaler = GradScaler("cpu", init_scale=4.0)
    a, b = onnxnn.ones(2), onnxnn.full((3,), 2.0)
    scaled = scaler.scale([a, (b, a)])
    assert isinstance(scaled, list) and isinstance(scaled[1], tuple)
    np.testing.assert_array_equal(scaled[1][0].numpy(), np.full(3, 8.0, np.float32))
    with pytest.raises(ValueError, match="outputs must be a Tensor or an iterable of Tensors"):
        scaler.scale([a, 3])


def test_disabled_scaler_is_a_pass_through():
    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", enabled=False)
    loss = F.mse_loss(model(x), target)
    assert scaler.scale(loss) is loss
    loss.backward()
    before = model[0].weight.detach().numpy().copy()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    assert not np.array_equal(model[0].weight.detach().numpy(), before)
    assert (scaler.get_scale(), scaler.is_enabled(), scaler.state_dict()) == (1.0, False, {})
    scaler.load_state_dict({})  # ignored when disabled


@pytest.mark.skipif(onnxnn.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_cuda_scaler_without_a_device_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = GradScaler()
    assert not scaler.is_enabled()


@pytest.mark.parametrize(
    "keywords, message",
    [({"growth_factor": 1.0}, "The growth factor must be > 1.0."), ({"backoff_factor": 1.0}, "must be < 1.0.")],
)
def test_bad_factors(keywords, message):
    with pytest.raises(AssertionError, match=message):
        GradScaler("cpu", **keywords)


def test_state_dict_round_trip():
    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=16.0, growth_factor=4.0, backoff_factor=0.125, growth_interval=5)
    for _ in range(2):
        optimizer.zero_grad()
        _scaled_backward(scaler, model, x, target)
        scaler.step(optimizer)
        scaler.update()
    state = scaler.state_dict()
    assert state == {
        "scale": 16.0,
        "growth_factor": 4.0,
        "backoff_factor": 0.125,
        "growth_interval": 5,
        "_growth_tracker": 2,
    }
    restored = GradScaler("cpu")
    restored.load_state_dict(state)
    assert restored.state_dict() == state
    restored.scale(onnxnn.ones(()))  # the lazily made scale starts from the loaded one
    assert restored.get_scale() == 16.0 and restored._get_growth_tracker() == 2
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        restored.load_state_dict({})
    with pytest.raises(KeyError, match="missing"):
        restored.load_state_dict({"scale": 1.0})
    assert restored.state_dict() == state  # nothing changed by the rejected load


def _scale_sequence(library, scaler, overflow_steps, steps=7):
    weight = library.nn.Parameter(library.ones(3))
    optimizer = library.optim.SGD([weight], lr=0.01)
    sequence = []
    for step in range(steps):
        optimizer.zero_grad()
        scaler.scale((weight * weight).sum()).backward()
        if step in overflow_steps:
            weight.grad.fill_(float("inf"))
        scaler.step(optimizer)
        scaler.update()
        sequence.append((scaler.get_scale(), scaler._get_growth_tracker()))
    return sequence, weight.detach().numpy()


def test_scale_sequence_equals_torch():
    torch = pytest.importorskip("torch")
    keywords = {"init_scale": 2.0**4, "growth_factor": 3.0, "backoff_factor": 0.5, "growth_interval": 2}
    overflow_steps = {1, 2, 5}
    ours, our_weight = _scale_sequence(onnxnn, GradScaler("cpu", **keywords), overflow_steps)
    theirs, their_weight = _scale_sequence(torch, torch.amp.GradScaler("cpu", **keywords), overflow_steps)
    assert ours == theirs
    np.testing.assert_allclose(our_weight, their_weight, rtol=1e-6)


def test_pickling_keeps_the_scale_and_is_refused_mid_iteration():
    import pickle

    model, x, target = _model_and_data()
    optimizer = onnxnn.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler("cpu", init_scale=32.0, growth_interval=3)
    optimizer.zero_grad()
    _scaled_backward(scaler, model, x, target)
    scaler.unscale_(optimizer)
    with pytest.raises(AssertionError, match="only be pickled at the beginning"):
        pickle.dumps(scaler)
    scaler.step(optimizer)
    scaler.update()
    restored = pickle.loads(pickle.dumps(scaler))
    assert restored.get_scale() == 32.0 and restored._get_growth_tracker() == 1
    optimizer.zero_grad()
    _scaled_backward(restored, model, x, target)  # the restored scaler runs a whole iteration
    restored.step(optimizer)
    restored.update()
    assert restored._get_growth_tracker() == 2


def test_factor_and_interval_setters():
    scaler = GradScaler("cpu")
    scaler.set_growth_factor(3.0)
    scaler.set_backoff_factor(0.25)
    scaler.set_growth_interval(7)
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(), scaler.get_growth_interval()) == (3.0, 0.25, 7)
    assert scaler.state_dict()["growth_interval"] == 7
