"""LazyLinear, LazyBatchNorm1d/2d/3d and LazyInstanceNorm1d/2d/3d (the lazy convolutions are in
test_conv_lazy_export_errors.py): the first input decides in_features / num_features, the module becomes its eager
class and then computes exactly what the eager layer with the same state computes; state_dict holds
uninitialized parameters and buffers until then; loading a state_dict materializes them; errors and
reprs are PyTorch's.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from tests.nn.layer_checks import EXECUTORS, exported_output

RNG = np.random.default_rng(0)

# lazy class, keyword arguments, input shape, the class it becomes, eager constructor arguments
LAZY_CASES = [
    (nn.LazyLinear, {"out_features": 4}, (3, 5), nn.Linear, (5, 4)),
    (nn.LazyLinear, {"out_features": 2, "bias": False}, (2, 3, 6), nn.Linear, (6, 2)),
    (nn.LazyBatchNorm1d, {}, (4, 3), nn.BatchNorm1d, (3,)),
    (nn.LazyBatchNorm1d, {"momentum": None}, (4, 3, 5), nn.BatchNorm1d, (3,)),
    (nn.LazyBatchNorm2d, {"eps": 1e-3}, (2, 3, 4, 4), nn.BatchNorm2d, (3,)),
    (nn.LazyBatchNorm3d, {}, (2, 2, 3, 2, 2), nn.BatchNorm3d, (2,)),
    (nn.LazyInstanceNorm1d, {}, (2, 3, 6), nn.InstanceNorm1d, (3,)),
    (nn.LazyInstanceNorm2d, {"affine": False}, (2, 3, 4, 4), nn.InstanceNorm2d, (3,)),
    (nn.LazyInstanceNorm3d, {"track_running_stats": False}, (1, 2, 3, 3, 3), nn.InstanceNorm3d, (2,)),
]
IDS = [f"{case[0].__name__}-{i}" for i, case in enumerate(LAZY_CASES)]


def _eager(becomes, eager_args, kwargs):
    if becomes is nn.Linear:
        return becomes(*eager_args, bias=kwargs.get("bias", True), dtype=onnxnn.float64)
    defaults = {"affine": True, "track_running_stats": True}  # the lazy norms' defaults, as in PyTorch
    return becomes(*eager_args, **{**defaults, **kwargs}, dtype=onnxnn.float64)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("lazy_cls, kwargs, input_shape, becomes, eager_args", LAZY_CASES, ids=IDS)
def test_lazy_module_infers_its_size_and_computes_as_the_eager_one(
    lazy_cls, kwargs, input_shape, becomes, eager_args, executor
):
    layer = lazy_cls(**kwargs, dtype=onnxnn.float64)
    assert layer.has_uninitialized_params() or not (
        getattr(layer, "affine", True) or getattr(layer, "track_running_stats", True)
    )
    x = onnxnn.tensor(RNG.standard_normal(input_shape))
    eager = _eager(becomes, eager_args, kwargs)
    # The eager layer starts from the lazy one's freshly initialized state (parameters and statistics).
    with onnxnn.set_executor(executor):
        layer.train()
        out = layer(x)
        assert type(layer) is becomes and not hasattr(layer, "_initialize_hook")
        eager.train()
        eager.load_state_dict({key: value for key, value in _fresh_state(layer, becomes, eager_args, kwargs).items()})
        expected = eager(x)
        np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
        # the running statistics moved identically
        for (name, got), (_, want) in zip(layer.state_dict().items(), eager.state_dict().items()):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)
    if becomes is nn.Linear:
        assert layer.in_features == input_shape[-1] and layer.weight.shape == (kwargs["out_features"], input_shape[-1])
    else:
        assert layer.num_features == input_shape[1]


def _fresh_state(layer, becomes, eager_args, kwargs) -> dict:
    """The state a just-materialized lazy layer had: its parameters (unchanged by a forward) and the
    reset statistics (zeros, ones, count 0)."""
    reset = _eager(becomes, eager_args, kwargs)
    state = dict(reset.state_dict())
    for name, parameter in layer.named_parameters():
        state[name] = parameter.detach()
    return state


def test_lazy_linear_initializes_as_linear():
    layer = nn.LazyLinear(50)
    layer(onnxnn.randn(2, 400))
    bound = 1 / math.sqrt(400)
    weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    assert np.abs(weight).max() <= bound and np.abs(bias).max() <= bound
    # U(-b, b) has standard deviation b / sqrt(3): 20,000 draws land within a few percent
    assert abs(weight.std() / (bound / math.sqrt(3)) - 1) < 0.05


@pytest.mark.parametrize("lazy_cls", [nn.LazyBatchNorm2d, nn.LazyInstanceNorm2d])
def test_lazy_norm_state_dict_before_initialization(lazy_cls):
    layer = lazy_cls()
    state = layer.state_dict()
    assert list(state) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert isinstance(state["weight"], nn.UninitializedParameter)
    assert isinstance(state["running_mean"], nn.UninitializedBuffer)
    assert state["num_batches_tracked"].dtype == onnxnn.int64 and state["num_batches_tracked"].item() == 0
    assert repr(layer.running_var) == "<UninitializedBuffer>"
    assert (
        repr(layer) == f"{lazy_cls.__name__}(0, eps=1e-05, momentum=0.1, affine=True, bias=True, "
        "track_running_stats=True)"
    )


def test_loading_a_state_dict_materializes_the_lazy_norm():
    source = nn.BatchNorm2d(4)
    source.train()(onnxnn.randn(3, 4, 2, 2))
    layer = nn.LazyBatchNorm2d()
    layer.load_state_dict(source.state_dict())
    assert not layer.has_uninitialized_params() and type(layer) is nn.LazyBatchNorm2d
    assert layer.running_mean.shape == (4,) and type(layer.running_mean) is onnxnn.Tensor
    x = onnxnn.randn(2, 4, 3, 3)
    np.testing.assert_array_equal(layer.eval()(x).detach().numpy(), source.eval()(x).detach().numpy())
    assert type(layer) is nn.BatchNorm2d


def test_loading_a_state_dict_materializes_lazy_linear():
    source = nn.Linear(3, 6)
    layer = nn.LazyLinear(6)
    layer.load_state_dict(source.state_dict())
    x = onnxnn.randn(2, 3)
    np.testing.assert_array_equal(layer(x).detach().numpy(), source(x).detach().numpy())


def test_a_lazy_module_converted_before_its_first_forward_stays_lazy():
    layer = nn.LazyBatchNorm1d().double()
    assert isinstance(layer.running_mean, nn.UninitializedBuffer) and layer.running_mean.dtype == onnxnn.float64
    layer(onnxnn.randn(4, 3, dtype=onnxnn.float64))
    assert layer.running_mean.dtype == layer.weight.dtype == onnxnn.float64
    copied = pickle.loads(pickle.dumps(nn.LazyInstanceNorm1d()))
    assert isinstance(copied.running_var, nn.UninitializedBuffer)
    copied(onnxnn.randn(2, 4, 3))  # its initialization hook survived the pickle
    assert type(copied) is nn.InstanceNorm1d and copied.running_var.shape == (4,)


def test_lazy_norm_without_affine_or_statistics_has_nothing_to_infer():
    # PyTorch's behaviour: nothing is uninitialized, so the first forward only changes the class.
    layer = nn.LazyBatchNorm1d(affine=False, track_running_stats=False)
    assert list(layer.state_dict()) == [] and not layer.has_uninitialized_params()
    layer(onnxnn.randn(4, 3))
    assert type(layer) is nn.BatchNorm1d and layer.num_features == 0


def test_optimizer_built_before_the_first_forward_trains_lazy_linear():
    layer = nn.LazyLinear(2)
    optimizer = onnxnn.optim.SGD(layer.parameters(), lr=0.5)
    layer(onnxnn.randn(4, 3)).sum().backward()
    before, gradient = layer.weight.detach().numpy().copy(), layer.weight.grad.numpy()
    optimizer.step()
    np.testing.assert_allclose(layer.weight.detach().numpy(), before - 0.5 * gradient, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: nn.LazyLinear(5)(onnxnn.randn(())), IndexError, "tuple index out of range"),
        (lambda: nn.LazyBatchNorm2d()(onnxnn.randn(2, 3)), ValueError, "expected 4D input (got 2D input)"),
        (lambda: nn.LazyBatchNorm1d()(onnxnn.randn(2, 3, 4, 5)), ValueError, "expected 2D or 3D input (got 4D input)"),
        # as in PyTorch, num_features comes from size(1) even for an unbatched input, which then mismatches
        (
            lambda: nn.LazyInstanceNorm1d()(onnxnn.randn(3, 5)),
            ValueError,
            "expected input's size at dim=0 to match num_features (5), but got: 3.",
        ),
    ],
)
def test_lazy_errors_in_pytorch_words(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def test_lazy_linear_exports_after_its_first_forward():
    layer = nn.Sequential(nn.LazyLinear(4), nn.LazyBatchNorm1d())
    x = onnxnn.randn(3, 5)
    layer.train()(x)
    expected = layer.eval()(x).detach().numpy()
    np.testing.assert_allclose(exported_output(layer, x), expected, rtol=1e-5, atol=1e-6)
