"""optim.swa_utils: AveragedModel (SWA and EMA), SWALR and update_bn, against their formulas and torch."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.optim import SGD
from onnxnn.optim.swa_utils import (
    SWALR,
    AveragedModel,
    get_ema_avg_fn,
    get_ema_multi_avg_fn,
    get_swa_avg_fn,
    get_swa_multi_avg_fn,
    update_bn,
)


def _model() -> nn.Module:
    onnxnn.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def _snapshot(model: nn.Module, buffers: bool = False) -> list[np.ndarray]:
    tensors = list(model.parameters()) + (list(model.buffers()) if buffers else [])
    return [tensor.detach().numpy().copy() for tensor in tensors]


def _perturb(model: nn.Module, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with onnxnn.no_grad():
        for parameter in model.parameters():
            parameter.copy_(onnxnn.tensor(rng.standard_normal(parameter.shape).astype(np.float32)))
        model[1].running_mean.copy_(onnxnn.tensor(rng.standard_normal(4).astype(np.float32)))


def _average_of_three_updates(**options):
    model = _model()
    averaged = AveragedModel(model, **options)
    snapshots = []
    for seed in range(3):
        _perturb(model, seed)
        snapshots.append(_snapshot(model, buffers=True))
        averaged.update_parameters(model)
    return model, averaged, snapshots


def test_default_is_the_equally_weighted_mean_of_the_models_seen():
    model, averaged, snapshots = _average_of_three_updates()
    means = [np.mean(values, axis=0) for values in zip(*snapshots)]
    parameter_count = len(list(model.parameters()))
    for got, want in zip(_snapshot(averaged.module), means[:parameter_count]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert averaged.n_averaged.item() == 3
    # without use_buffers the buffers are the model's latest, not averaged
    np.testing.assert_array_equal(averaged.module[1].running_mean.numpy(), model[1].running_mean.numpy())


def test_use_buffers_averages_the_buffers_too():
    model, averaged, snapshots = _average_of_three_updates(use_buffers=True)
    names = [name for name, _ in model.named_parameters()] + [name for name, _ in model.named_buffers()]
    means = dict(zip(names, [np.mean(values, axis=0) for values in zip(*snapshots)]))
    np.testing.assert_allclose(averaged.module[1].running_mean.numpy(), means["1.running_mean"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "options",
    [
        {"avg_fn": get_ema_avg_fn(0.9)},
        {"multi_avg_fn": get_ema_multi_avg_fn(0.9)},
    ],
    ids=["avg_fn", "multi_avg_fn"],
)
def test_exponential_moving_average(options):
    model, averaged, snapshots = _average_of_three_updates(**options)
    parameter_count = len(list(model.parameters()))
    for index in range(parameter_count):
        expected = snapshots[0][index]
        for snapshot in snapshots[1:]:
            expected = 0.9 * expected + 0.1 * snapshot[index]
        np.testing.assert_allclose(_snapshot(averaged.module)[index], expected, rtol=1e-6, atol=1e-6)


def test_swa_functions_agree_with_the_default():
    _, by_default, _ = _average_of_three_updates()
    _, by_function, _ = _average_of_three_updates(avg_fn=get_swa_avg_fn())
    _, by_list_function, _ = _average_of_three_updates(multi_avg_fn=get_swa_multi_avg_fn())
    for a, b, c in zip(_snapshot(by_default.module), _snapshot(by_function.module), _snapshot(by_list_function.module)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_the_copy_is_independent_and_state_dict_has_n_averaged():
    model = _model()
    averaged = AveragedModel(model)
    before = _snapshot(model)
    _perturb(averaged.module, 5)
    for got, want in zip(_snapshot(model), before):
        np.testing.assert_array_equal(got, want)
    keys = list(averaged.state_dict())
    assert keys[0] == "n_averaged" and "module.0.weight" in keys
    x = onnxnn.randn(5, 3)
    averaged.eval()
    np.testing.assert_array_equal(averaged(x).detach().numpy(), averaged.module(x).detach().numpy())


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda m: AveragedModel(m, avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn()),
            AssertionError,
            "Only one",
        ),
        (lambda m: get_ema_avg_fn(1.5), ValueError, "Invalid decay value 1.5"),
        (lambda m: get_ema_multi_avg_fn(-0.1), ValueError, "Invalid decay value -0.1"),
        (lambda m: AveragedModel(m).update_parameters(nn.Linear(3, 4)), ValueError, "tensors to average"),
    ],
)
def test_bad_input(make, error, message):
    with pytest.raises(error, match=message):
        make(_model())


def test_a_mismatched_model_leaves_the_averages_unchanged():
    model = _model()
    averaged = AveragedModel(model)
    averaged.update_parameters(model)
    before = _snapshot(averaged.module)
    other = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 2))
    with pytest.raises(ValueError, match="shape"):
        averaged.update_parameters(other)
    assert averaged.n_averaged.item() == 1
    for got, want in zip(_snapshot(averaged.module), before):
        np.testing.assert_array_equal(got, want)


def test_update_bn_recomputes_the_statistics_over_the_loader():
    model = _model()
    model.eval()
    rng = np.random.default_rng(1)
    batches = [rng.standard_normal((8, 3)).astype(np.float32) for _ in range(3)]
    loader = [(onnxnn.tensor(batch), onnxnn.zeros(8)) for batch in batches]
    update_bn(loader, model)
    features = np.concatenate([model[0](onnxnn.tensor(batch)).detach().numpy() for batch in batches])
    # momentum=None: the running statistics are the cumulative average of the batch statistics
    per_batch = features.reshape(3, 8, 4)
    np.testing.assert_allclose(model[1].running_mean.numpy(), per_batch.mean(axis=1).mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        model[1].running_var.numpy(), per_batch.var(axis=1, ddof=1).mean(axis=0), rtol=1e-5, atol=1e-6
    )
    assert model[1].momentum == 0.1 and not model.training


def test_update_bn_without_batch_norm_does_nothing():
    model = nn.Linear(3, 2)
    update_bn([onnxnn.randn(2, 3)], model)
    assert model.training


def _swalr_lrs(strategy: str, anneal_epochs: int, steps: int = 8) -> list[float]:
    optimizer = SGD([nn.Parameter(onnxnn.zeros(1))], lr=1.0)
    scheduler = SWALR(optimizer, swa_lr=0.1, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    lrs = [optimizer.param_groups[0]["lr"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(steps):
            optimizer.step()
            scheduler.step()
            lrs.append(optimizer.param_groups[0]["lr"])
    return lrs


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 4, True, False])  # a bool is an int to PyTorch too
def test_swalr_anneals_to_the_swa_lr(strategy, anneal_epochs):
    anneal = (lambda t: (1 - math.cos(math.pi * t)) / 2) if strategy == "cos" else (lambda t: t)
    expected = [0.1 + 0.9 * (1 - anneal(min(1.0, step / max(1, anneal_epochs)))) for step in range(9)]
    if anneal_epochs == 0:
        expected = [0.1] * 9
    np.testing.assert_allclose(_swalr_lrs(strategy, anneal_epochs), expected, rtol=1e-12)


def test_swalr_state_dict_round_trip():
    optimizer = SGD([nn.Parameter(onnxnn.zeros(1))], lr=1.0)
    scheduler = SWALR(optimizer, swa_lr=0.1, anneal_epochs=4, anneal_strategy="linear")
    optimizer.step()
    scheduler.step()
    state = scheduler.state_dict()
    assert "optimizer" not in state and state["anneal_epochs"] == 4
    fresh = SWALR(SGD([nn.Parameter(onnxnn.zeros(1))], lr=1.0), swa_lr=0.5, anneal_strategy="cos")
    fresh.load_state_dict(state)
    assert fresh.anneal_func(0.5) == 0.5 and fresh.last_epoch == scheduler.last_epoch


@pytest.mark.parametrize(
    "options, message",
    [
        ({"swa_lr": 0.1, "anneal_strategy": "exp"}, "anneal_strategy must be one of 'cos' or 'linear'"),
        ({"swa_lr": 0.1, "anneal_epochs": -1}, "anneal_epochs must be equal or greater than 0"),
        ({"swa_lr": 0.1, "anneal_epochs": 2.5}, "anneal_epochs must be equal or greater than 0"),
        ({"swa_lr": [0.1, 0.2]}, "swa_lr must have the same length"),
    ],
)
def test_swalr_rejects_bad_arguments_without_touching_the_optimizer(options, message):
    optimizer = SGD([nn.Parameter(onnxnn.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match=message):
        SWALR(optimizer, **options)
    assert "swa_lr" not in optimizer.param_groups[0]


def test_matches_torch():
    torch = pytest.importorskip("torch")
    model, averaged, snapshots = _average_of_three_updates(multi_avg_fn=get_ema_multi_avg_fn(0.8), use_buffers=True)
    torch_model = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 2)
    )
    torch_averaged = torch.optim.swa_utils.AveragedModel(
        torch_model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.8), use_buffers=True
    )
    names = [name for name, _ in torch_model.named_parameters()] + [name for name, _ in torch_model.named_buffers()]
    for snapshot in snapshots:
        torch_model.load_state_dict({name: torch.from_numpy(value) for name, value in zip(names, snapshot)})
        torch_averaged.update_parameters(torch_model)
    assert list(averaged.state_dict()) == list(torch_averaged.state_dict())
    for name, value in torch_averaged.state_dict().items():
        np.testing.assert_allclose(averaged.state_dict()[name].detach().numpy(), value.numpy(), rtol=1e-6, atol=1e-6)
    torch_optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    torch_scheduler = torch.optim.swa_utils.SWALR(torch_optimizer, swa_lr=0.1, anneal_epochs=4)
    torch_lrs = [torch_optimizer.param_groups[0]["lr"]]
    for _ in range(8):
        torch_optimizer.step()
        torch_scheduler.step()
        torch_lrs.append(torch_optimizer.param_groups[0]["lr"])
    np.testing.assert_allclose(_swalr_lrs("cos", 4), torch_lrs, rtol=1e-12)
