"""nn.utils.prune: PyTorch's pruning reparametrization, methods and their masks, checked against numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.nn.utils import prune


def distinct_values(shape, seed=0) -> np.ndarray:
    """Values whose magnitudes are all different (no ties), in a shuffled order, with mixed signs."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape))
    magnitudes = rng.permutation(np.arange(1, count + 1)) / count
    signs = rng.choice([-1.0, 1.0], size=count)
    return (magnitudes * signs).reshape(shape).astype(np.float32)


def linear_with(weight: np.ndarray) -> nn.Linear:
    layer = nn.Linear(weight.shape[1], weight.shape[0])
    with onnxnn.no_grad():
        layer.weight.copy_(onnxnn.tensor(weight))
    return layer


def conv_with(weight: np.ndarray) -> nn.Conv2d:
    layer = nn.Conv2d(weight.shape[1], weight.shape[0], weight.shape[2])
    with onnxnn.no_grad():
        layer.weight.copy_(onnxnn.tensor(weight))
    return layer


def mask_of(module, name="weight") -> np.ndarray:
    return np.array(getattr(module, name + "_mask").numpy())


def l1_mask(values: np.ndarray, count: int) -> np.ndarray:
    mask = np.ones(values.size, np.float32)
    mask[np.argsort(np.abs(values).reshape(-1))[:count]] = 0
    return mask.reshape(values.shape)


def channel_norms(values: np.ndarray, n, dim: int) -> np.ndarray:
    channels = np.moveaxis(values, dim, 0).reshape(values.shape[dim], -1).astype(np.float64)
    return np.linalg.norm(channels, ord=n, axis=1)


def ln_mask(values: np.ndarray, count: int, n, dim: int) -> np.ndarray:
    pruned = np.argsort(channel_norms(values, n, dim))[:count]
    mask = np.ones(values.shape, np.float32)
    index = [slice(None)] * values.ndim
    index[dim] = pruned
    mask[tuple(index)] = 0
    return mask


# ---------------------------------------------------------------------- the module's reparametrization
def test_pruning_reparametrizes_the_module_as_torch_does():
    layer = linear_with(distinct_values((3, 4)))
    original = layer.weight
    prune.l1_unstructured(layer, "weight", amount=5)
    assert [name for name, _ in layer.named_parameters()] == ["bias", "weight_orig"]
    assert [name for name, _ in layer.named_buffers()] == ["weight_mask"]
    assert list(layer.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert layer.weight_orig is original
    assert "weight" not in layer._parameters and not isinstance(layer.weight, nn.Parameter)
    (hook,) = layer._forward_pre_hooks.values()
    assert isinstance(hook, prune.L1Unstructured) and hook._tensor_name == "weight"
    expected = original.detach().numpy() * mask_of(layer)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), expected)
    assert prune.is_pruned(nn.Sequential(layer)) and not prune.is_pruned(nn.Linear(2, 2))


def test_forward_uses_the_masked_weight_recomputed_by_the_pre_hook():
    layer = linear_with(distinct_values((3, 4)))
    prune.l1_unstructured(layer, "weight", amount=0.5)
    with onnxnn.no_grad():
        layer.weight_orig.mul_(2.0)  # the hook must recompute weight from the new weight_orig
    x = distinct_values((2, 4), seed=1)
    expected = x @ (layer.weight_orig.detach().numpy() * mask_of(layer)).T + layer.bias.detach().numpy()
    np.testing.assert_allclose(layer(onnxnn.tensor(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_gradient_reaches_weight_orig_and_is_zero_where_masked():
    layer = linear_with(distinct_values((3, 4)))
    prune.l1_unstructured(layer, "weight", amount=6)
    x = distinct_values((5, 4), seed=2)
    layer(onnxnn.tensor(x)).sum().backward()
    # d(sum(x @ (w * m).T)) / dw = m * (column sums of x, one row per output)
    expected = mask_of(layer) * np.broadcast_to(x.sum(axis=0), (3, 4))
    np.testing.assert_allclose(layer.weight_orig.grad.numpy(), expected, rtol=1e-5)
    assert np.all(layer.weight_orig.grad.numpy()[mask_of(layer) == 0] == 0)


def test_remove_makes_the_pruning_permanent():
    layer = linear_with(distinct_values((3, 4)))
    prune.l1_unstructured(layer, "weight", amount=0.25)
    masked = layer.weight.detach().numpy().copy()
    prune.remove(layer, "weight")
    assert isinstance(layer.weight, nn.Parameter) and layer.weight.requires_grad
    assert [name for name, _ in layer.named_parameters()] == ["bias", "weight"]
    assert list(layer.buffers()) == [] and not layer._forward_pre_hooks
    assert not hasattr(layer, "weight_orig") and not hasattr(layer, "weight_mask")
    np.testing.assert_array_equal(layer.weight.detach().numpy(), masked)
    assert int((masked == 0).sum()) == 3
    with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
        prune.remove(layer, "weight")


# ---------------------------------------------------------------------- how many and which entries
@pytest.mark.parametrize(
    "prune_call, zeros",
    [
        (lambda m: prune.l1_unstructured(m, "weight", amount=0.5), 12),
        (lambda m: prune.l1_unstructured(m, "weight", amount=5), 5),
        (lambda m: prune.l1_unstructured(m, "weight", amount=0), 0),
        (lambda m: prune.random_unstructured(m, "weight", amount=0.25), 6),
        (lambda m: prune.random_unstructured(m, "weight", amount=24), 24),
        (lambda m: prune.ln_structured(m, "weight", amount=2, n=2, dim=0), 2 * 6),
        (lambda m: prune.ln_structured(m, "weight", amount=0.5, n=1, dim=1), 3 * 4),
        (lambda m: prune.random_structured(m, "weight", amount=1, dim=0), 6),
        (lambda m: prune.random_structured(m, "weight", amount=0.34, dim=-1), 2 * 4),
        (lambda m: prune.identity(m, "weight"), 0),
    ],
)
def test_number_of_pruned_entries(prune_call, zeros):
    layer = linear_with(distinct_values((4, 6)))
    prune_call(layer)
    assert int((layer.weight.detach().numpy() == 0).sum()) == zeros
    assert int((mask_of(layer) == 0).sum()) == zeros


@pytest.mark.parametrize("amount, count", [(0.3, 4), (7, 7), (1.0, 12)])
def test_l1_unstructured_prunes_the_smallest_magnitudes(amount, count):
    values = distinct_values((3, 4), seed=3)
    layer = prune.l1_unstructured(linear_with(values), "weight", amount=amount)
    np.testing.assert_array_equal(mask_of(layer), l1_mask(values, count))


@pytest.mark.parametrize(
    "shape, n, dim, amount, count",
    [
        ((5, 4), 2, 0, 2, 2),
        ((5, 4), 1, 1, 0.5, 2),
        ((5, 4), math.inf, 0, 0.4, 2),
        ((5, 4), -math.inf, 1, 1, 1),
        ((4, 3, 2, 2), 2, 0, 0.5, 2),
        ((4, 3, 2, 2), 1, 1, 1, 1),
        ((4, 3, 2, 2), "fro", -1, 1, 1),
    ],
)
def test_ln_structured_prunes_the_channels_of_smallest_norm(shape, n, dim, amount, count):
    values = distinct_values(shape, seed=4)
    layer = linear_with(values) if len(shape) == 2 else conv_with(values)
    prune.ln_structured(layer, "weight", amount=amount, n=2 if n == "fro" else n, dim=dim)
    np.testing.assert_array_equal(mask_of(layer), ln_mask(values, count, 2 if n == "fro" else n, dim))


def test_importance_scores_rank_the_entries_instead_of_the_weights():
    values = distinct_values((3, 4))
    scores = distinct_values((3, 4), seed=9)
    layer = prune.l1_unstructured(linear_with(values), "weight", amount=5, importance_scores=onnxnn.tensor(scores))
    np.testing.assert_array_equal(mask_of(layer), l1_mask(scores, 5))
    conv_scores = distinct_values((4, 2, 2, 2), seed=5)
    conv = conv_with(distinct_values((4, 2, 2, 2)))
    prune.ln_structured(conv, "weight", 2, 1, 0, importance_scores=onnxnn.tensor(conv_scores))
    np.testing.assert_array_equal(mask_of(conv), ln_mask(conv_scores, 2, 1, 0))


def test_random_methods_repeat_under_manual_seed():
    masks = []
    for _ in range(2):
        onnxnn.manual_seed(123)
        layer = prune.random_unstructured(linear_with(distinct_values((4, 6))), "weight", amount=0.5)
        prune.random_structured(layer, "weight", amount=1, dim=0)
        masks.append(mask_of(layer))
    np.testing.assert_array_equal(masks[0], masks[1])
    onnxnn.manual_seed(124)
    other = prune.random_unstructured(linear_with(distinct_values((4, 6))), "weight", amount=0.5)
    assert int((mask_of(other) == 0).sum()) == 12


def test_custom_from_mask_and_prune_method():
    values = distinct_values((2, 3))
    given = np.array([[1, 0, 1], [0, 1, 1]], np.float32)
    layer = prune.custom_from_mask(linear_with(values), "weight", mask=onnxnn.tensor(given))
    np.testing.assert_array_equal(layer.weight.detach().numpy(), values * given)
    pruned = prune.L1Unstructured(amount=2).prune(onnxnn.tensor(values))
    np.testing.assert_array_equal(pruned.numpy(), values * l1_mask(values, 2))


# ---------------------------------------------------------------------- iterative pruning
def test_second_unstructured_pruning_acts_on_the_entries_still_unpruned():
    values = distinct_values((3, 4), seed=6)
    layer = prune.l1_unstructured(linear_with(values), "weight", amount=3)
    prune.l1_unstructured(layer, "weight", amount=0.5)  # half of the 9 entries left: 4 more (round(4.5))
    (hook,) = layer._forward_pre_hooks.values()
    assert isinstance(hook, prune.PruningContainer) and len(hook) == 2
    assert [type(method) for method in hook] == [prune.L1Unstructured, prune.L1Unstructured]
    np.testing.assert_array_equal(mask_of(layer), l1_mask(values, 3 + 4))


def test_unstructured_after_structured_composes_the_masks():
    values = distinct_values((4, 3), seed=7)
    layer = prune.ln_structured(linear_with(values), "weight", amount=1, n=2, dim=0)
    first = mask_of(layer)
    prune.l1_unstructured(layer, "weight", amount=3)
    kept = first == 1
    expected = first.copy()
    smallest = np.argsort(np.abs(values[kept]))[:3]
    expected_kept = np.ones(kept.sum(), np.float32)
    expected_kept[smallest] = 0
    expected[kept] = expected_kept
    np.testing.assert_array_equal(mask_of(layer), expected)
    prune.l1_unstructured(layer, "weight", amount=1)  # a third method joins the same container
    (hook,) = layer._forward_pre_hooks.values()
    assert len(hook) == 3 and int((mask_of(layer) == 0).sum()) == 3 + 3 + 1


def test_structured_after_structured_counts_the_channels_left():
    values = distinct_values((6, 3), seed=8)
    layer = prune.ln_structured(linear_with(values), "weight", amount=2, n=1, dim=0)
    prune.ln_structured(layer, "weight", amount=0.5, n=1, dim=0)  # half of the 4 channels left
    np.testing.assert_array_equal(mask_of(layer), ln_mask(values, 4, 1, 0))


# ---------------------------------------------------------------------- global pruning
def test_global_unstructured_ranks_entries_across_layers():
    first, second = distinct_values((4, 3), seed=10), distinct_values((2, 4), seed=11) * 0.5
    net = nn.Sequential(linear_with(first), nn.ReLU(), linear_with(second))
    parameters = [(net[0], "weight"), (net[2], "weight")]
    prune.global_unstructured(parameters, pruning_method=prune.L1Unstructured, amount=0.4)
    joint = l1_mask(np.concatenate([first.reshape(-1), second.reshape(-1)]), round(0.4 * 20))
    np.testing.assert_array_equal(mask_of(net[0]), joint[:12].reshape(4, 3))
    np.testing.assert_array_equal(mask_of(net[2]), joint[12:].reshape(2, 4))
    assert isinstance(next(iter(net[0]._forward_pre_hooks.values())), prune.CustomFromMask)


def test_global_unstructured_keeps_earlier_masks_and_reads_importance_scores():
    first, second = distinct_values((3, 3), seed=12), distinct_values((3, 3), seed=13)
    a, b = linear_with(first), linear_with(second)
    prune.l1_unstructured(a, "weight", amount=2)
    scores = {(b, "weight"): onnxnn.tensor(second * 10)}
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured, importance_scores=scores, amount=4)
    earlier = l1_mask(first, 2)
    joint_values = np.concatenate([first.reshape(-1), (second * 10).reshape(-1)])
    alive = np.concatenate([earlier.reshape(-1), np.ones(9, np.float32)]) == 1
    expected = np.concatenate([earlier.reshape(-1), np.ones(9, np.float32)])
    alive_positions = np.flatnonzero(alive)
    expected[alive_positions[np.argsort(np.abs(joint_values[alive]))[:4]]] = 0
    np.testing.assert_array_equal(mask_of(a), expected[:9].reshape(3, 3))
    np.testing.assert_array_equal(mask_of(b), expected[9:].reshape(3, 3))


# ---------------------------------------------------------------------- state_dict
def test_state_dict_round_trip_into_a_freshly_pruned_model(tmp_path):
    onnxnn.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(2, 3, 2), nn.ReLU(), nn.Flatten(), nn.Linear(12, 2))
    prune.l1_unstructured(net[0], "weight", amount=0.5)
    prune.ln_structured(net[3], "weight", amount=1, n=2, dim=0)
    onnxnn.save(net.state_dict(), tmp_path / "pruned.pt")
    fresh = nn.Sequential(nn.Conv2d(2, 3, 2), nn.ReLU(), nn.Flatten(), nn.Linear(12, 2))
    prune.identity(fresh[0], "weight")
    prune.identity(fresh[3], "weight")
    fresh.load_state_dict(onnxnn.load(tmp_path / "pruned.pt"))
    x = onnxnn.randn(2, 2, 3, 3)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), net(x).detach().numpy())
    np.testing.assert_array_equal(mask_of(fresh[0]), mask_of(net[0]))


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "prune_call, error, message",
    [
        (lambda m: prune.l1_unstructured(m, "weight", amount=-1), ValueError, "non-negative integer"),
        (lambda m: prune.l1_unstructured(m, "weight", amount=1.5), ValueError, r"range \[0, 1\]"),
        (lambda m: prune.random_unstructured(m, "weight", amount="half"), TypeError, "Must be int or float"),
        (lambda m: prune.l1_unstructured(m, "weight", amount=13), ValueError, "smaller than the number"),
        (lambda m: prune.ln_structured(m, "weight", amount=4, n=2, dim=0), ValueError, "smaller than the number"),
        (lambda m: prune.ln_structured(m, "bias", amount=1, n=2, dim=0), ValueError, "multidimensional"),
        (lambda m: prune.random_structured(m, "weight", amount=1, dim=2), IndexError, "Invalid index 2"),
        (
            lambda m: prune.l1_unstructured(m, "weight", amount=1, importance_scores=onnxnn.ones(4, 3)),
            AssertionError,
            "same shape",
        ),
    ],
)
def test_bad_input_raises_and_leaves_the_module_unchanged(prune_call, error, message):
    layer = linear_with(distinct_values((3, 4)))
    before = layer.weight.detach().numpy().copy()
    with pytest.raises(error, match=message):
        prune_call(layer)
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    assert list(layer.buffers()) == [] and not layer._forward_pre_hooks and not prune.is_pruned(layer)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), before)


def test_failed_second_pruning_keeps_the_first():
    layer = prune.l1_unstructured(linear_with(distinct_values((3, 4))), "weight", amount=2)
    first_hook, first_mask = next(iter(layer._forward_pre_hooks.values())), mask_of(layer)
    with pytest.raises(ValueError, match="smaller than the number"):
        prune.l1_unstructured(layer, "weight", amount=20)
    assert list(layer._forward_pre_hooks.values()) == [first_hook]
    np.testing.assert_array_equal(mask_of(layer), first_mask)
    prune.l1_unstructured(layer, "weight", amount=1)
    container = next(iter(layer._forward_pre_hooks.values()))
    with pytest.raises(ValueError):
        prune.l1_unstructured(layer, "weight", amount=20)
    assert len(container) == 2 and int((mask_of(layer) == 0).sum()) == 3


def test_container_and_global_errors():
    method = prune.L1Unstructured(amount=1)
    method._tensor_name = "weight"
    container = prune.PruningContainer(method)
    other = prune.L1Unstructured(amount=1)
    other._tensor_name = "bias"
    with pytest.raises(ValueError, match="named 'weight'"):
        container.add_pruning_method(other)
    with pytest.raises(TypeError, match="not a BasePruningMethod subclass"):
        container.add_pruning_method("l1")  # type: ignore[arg-type]
    layer = nn.Linear(3, 2)
    with pytest.raises(TypeError, match="not an Iterable"):
        prune.global_unstructured(5, prune.L1Unstructured, amount=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be of type dict"):
        prune.global_unstructured([(layer, "weight")], prune.L1Unstructured, importance_scores=[1], amount=1)
    with pytest.raises(TypeError, match='Only "unstructured"'):
        prune.global_unstructured([(layer, "weight")], prune.RandomStructured, amount=1)
    with pytest.raises(TypeError):
        prune.BasePruningMethod()  # type: ignore[abstract]


# ---------------------------------------------------------------------- same masks as torch
def test_same_masks_as_torch():
    torch = pytest.importorskip("torch")
    from torch.nn.utils import prune as torch_prune

    conv_values, linear_values = distinct_values((4, 2, 3, 3), seed=20), distinct_values((3, 16), seed=21)
    ours = nn.Sequential(conv_with(conv_values), linear_with(linear_values))
    theirs = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.Linear(16, 3))
    with torch.no_grad():
        theirs[0].weight.copy_(torch.from_numpy(conv_values))
        theirs[1].weight.copy_(torch.from_numpy(linear_values))
    for library, net in ((prune, ours), (torch_prune, theirs)):
        library.l1_unstructured(net[0], "weight", amount=0.3)
        library.ln_structured(net[0], "weight", amount=1, n=2, dim=0)
        library.ln_structured(net[1], "weight", amount=0.25, n=1, dim=1)
        library.global_unstructured([(net[0], "weight"), (net[1], "weight")], library.L1Unstructured, amount=20)
    for index in range(2):
        np.testing.assert_array_equal(mask_of(ours[index]), theirs[index].weight_mask.numpy())


def test_structured_pruning_after_every_channel_is_pruned_keeps_them_pruned():
    layer = nn.Linear(4, 3)
    prune.ln_structured(layer, "weight", amount=1.0, n=2, dim=0)
    prune.ln_structured(layer, "weight", amount=0.5, n=2, dim=0)  # no channel left to rank
    np.testing.assert_array_equal(layer.weight_mask.numpy(), np.zeros((3, 4), np.float32))
