"""to_onnx_pruned: pruned models export smaller, and onnxruntime computes the pruned module's outputs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import numpy_helper

import onnxnn
from onnxnn import nn
from onnxnn.export.sparse_export import to_onnx_pruned
from onnxnn.nn.utils import prune


def run_onnx(proto: onnx.ModelProto, *inputs: np.ndarray, optimize: bool = True) -> np.ndarray:
    options = onnxruntime.SessionOptions()
    if not optimize:  # the decoding nodes run instead of being folded into constants at load
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feeds = {arg.name: value for arg, value in zip(session.get_inputs(), inputs)}
    return session.run(None, feeds)[0]


def dense_size(model, x) -> int:
    """The size of the same model exported with every weight dense and every channel kept."""
    return to_onnx_pruned(model, x, remove_channels=False, sparse_format=None).ByteSize()


def initializer_shapes(proto: onnx.ModelProto) -> dict:
    return {tensor.name: tuple(tensor.dims) for tensor in proto.graph.initializer}


def assert_same_outputs(proto, model, x, optimize=True):
    expected = model(x).detach().numpy()
    # float32 sums of up to ~100 products, reordered by folding: a few ulps of the largest terms.
    np.testing.assert_allclose(run_onnx(proto, x.numpy(), optimize=optimize), expected, rtol=1e-5, atol=1e-5)


def mlp(seed=0) -> nn.Sequential:
    onnxnn.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 32)).eval()


# ---------------------------------------------------------------------- unstructured: sparse storage
@pytest.mark.parametrize(
    "sparse_format, amount, bytes_per_entry",
    [
        # bitmask: the kept values plus one bit per entry
        ("bitmask", 0.5, 0.5 * 4 + 1 / 8),
        ("bitmask", 0.8, 0.2 * 4 + 1 / 8),
        # coo: each kept float with its int64 flat index
        ("coo", 0.9, 0.1 * 12),
    ],
)
def test_unstructured_pruning_is_stored_sparsely(sparse_format, amount, bytes_per_entry):
    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=amount)
    prune.l1_unstructured(model[2], "weight", amount=amount)
    x = onnxnn.randn(3, 64)
    proto = to_onnx_pruned(model, x, remove_channels=False, sparse_format=sparse_format)
    assert_same_outputs(proto, model, x)
    if sparse_format == "bitmask":
        assert_same_outputs(proto, model, x, optimize=False)
        assert "0.weight::sparse::bitmask" in initializer_shapes(proto)
    else:
        assert sorted(sparse.values.name for sparse in proto.graph.sparse_initializer) == ["0.weight", "2.weight"]
    weights = 64 * 96 + 96 * 32
    dense = dense_size(model, x)
    expected = dense - weights * (4 - bytes_per_entry)
    # Off by the proto framing (2% of the dense size) and, for a bitmask, each weight's decoder:
    # ten nodes and four small initializers, under 1 KB.
    overhead = 0.02 * dense + (2 * 1024 if sparse_format == "bitmask" else 0)
    assert proto.ByteSize() < dense
    assert abs(proto.ByteSize() - expected) < overhead


def test_only_pruned_weights_are_sparse_unless_all_are_asked_for():
    model = mlp()
    prune.l1_unstructured(model[2], "weight", amount=0.7)
    with onnxnn.no_grad():  # zeros in an unpruned weight
        model[0].weight.mul_((onnxnn.rand(96, 64) > 0.7).float())
    x = onnxnn.randn(2, 64)
    pruned_only = initializer_shapes(to_onnx_pruned(model, x))
    assert "0.weight" in pruned_only and "2.weight::sparse::values" in pruned_only
    every = to_onnx_pruned(model, x, sparse_parameters="all")
    assert "0.weight::sparse::values" in initializer_shapes(every)
    assert_same_outputs(every, model, x)


def test_model_is_left_pruned_and_unchanged():
    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=0.5)
    prune.ln_structured(model[0], "weight", amount=0.25, n=2, dim=0)
    x = onnxnn.randn(2, 64)
    model(
        x
    ).detach().numpy()  # a first run may take the kernels (plan_cache.FIRST_RUNS_ON_KERNELS): compare second runs
    before = model(x).detach().numpy()  # the pruned weight is now an op result, which deepcopy refuses
    to_onnx_pruned(model, x)
    assert prune.is_pruned(model) and model[0].weight_orig.shape == (96, 64)
    assert isinstance(next(iter(model[0]._forward_pre_hooks.values())), prune.PruningContainer)
    np.testing.assert_array_equal(model(x).detach().numpy(), before)


# ---------------------------------------------------------------------- structured: channels removed
def test_linear_relu_linear_loses_the_pruned_channels():
    model = mlp()
    prune.ln_structured(model[0], "weight", amount=0.5, n=2, dim=0)
    x = onnxnn.randn(4, 64)
    proto = to_onnx_pruned(model, x, sparse_format=None)
    shapes = initializer_shapes(proto)
    assert shapes["0.weight"] == (48, 64) and shapes["0.bias"] == (48,) and shapes["2.weight"] == (32, 48)
    assert_same_outputs(proto, model, x)
    # Half the channels gone: (48*64 + 48 + 32*48) / (96*64 + 96 + 32*96) of the parameters.
    ratio = (48 * 65 + 32 * 48 + 32) / (96 * 65 + 32 * 96 + 32)
    assert proto.ByteSize() < dense_size(model, x) * (ratio + 0.03)


def test_conv_batchnorm_relu_conv_loses_the_pruned_channels():
    onnxnn.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Conv2d(16, 8, 3), nn.ReLU()
    ).eval()
    with onnxnn.no_grad():  # statistics that make a dead channel's constant nonzero after ReLU
        model[1].running_mean.copy_(onnxnn.randn(16) * 0.1)
        model[1].running_var.copy_(onnxnn.rand(16) + 0.5)
        model[1].bias.copy_(onnxnn.rand(16) + 0.1)
    prune.ln_structured(model[0], "weight", amount=0.5, n=1, dim=0)
    x = onnxnn.randn(2, 3, 8, 8)
    proto = to_onnx_pruned(model, x)
    shapes = initializer_shapes(proto)
    assert shapes["0.weight"] == (8, 3, 3, 3) and shapes["1.running_var"] == (8,) and shapes["3.weight"] == (8, 8, 3, 3)
    assert_same_outputs(proto, model, x)
    assert proto.ByteSize() < 0.6 * dense_size(model, x)


@pytest.mark.parametrize(
    "bias, between, padding, removed",
    [
        # a dead channel is all zeros: gone even before a padded conv
        (False, lambda: [nn.Tanh()], 1, 4),
        # a constant channel: folded into the next conv's bias (no padding)
        (True, lambda: [nn.Tanh()], 0, 4),
        (True, lambda: [nn.ReLU(), nn.MaxPool2d(2)], 0, 4),
        # a constant channel before a padded conv differs at the border: kept
        (True, lambda: [nn.Tanh()], 1, 0),
        # average pooling with zero padding makes a constant map's border differ: kept
        (True, lambda: [nn.AvgPool2d(2, padding=1)], 0, 0),
    ],
)
def test_a_constant_channel_goes_only_where_it_can_be_folded(bias, between, padding, removed):
    onnxnn.manual_seed(2)
    model = nn.Sequential(nn.Conv2d(2, 8, 3, bias=bias), *between(), nn.Conv2d(8, 4, 3, padding=padding)).eval()
    if bias:
        with onnxnn.no_grad():
            model[0].bias.copy_(onnxnn.rand(8) + 0.5)
    prune.ln_structured(model[0], "weight", amount=4, n=2, dim=0)
    x = onnxnn.randn(1, 2, 9, 9)
    proto = to_onnx_pruned(model, x, sparse_format=None)
    assert initializer_shapes(proto)[f"{len(model) - 1}.weight"] == (4, 8 - removed, 3, 3)
    assert_same_outputs(proto, model, x)


def test_input_channels_pruned_in_the_next_layer_remove_the_outputs_before_it():
    model = mlp()
    prune.ln_structured(model[2], "weight", amount=0.25, n=2, dim=1)
    x = onnxnn.randn(2, 64)
    proto = to_onnx_pruned(model, x)
    assert initializer_shapes(proto)["0.weight"] == (72, 64)
    assert_same_outputs(proto, model, x)


def test_training_mode_keeps_channels_with_a_warning():
    model = mlp().train()
    prune.ln_structured(model[0], "weight", amount=0.5, n=2, dim=0)
    x = onnxnn.randn(2, 64)
    with pytest.warns(UserWarning, match="training mode"):
        proto = to_onnx_pruned(model, x, sparse_format=None)
    assert initializer_shapes(proto)["0.weight"] == (96, 64)


# ---------------------------------------------------------------------- the to_onnx options
def test_file_and_dynamic_batch(tmp_path):
    model = mlp()
    prune.l1_unstructured(model[0], "weight", amount=0.6)
    prune.ln_structured(model[0], "weight", amount=0.5, n=2, dim=0)
    path = tmp_path / "pruned.onnx"
    proto = to_onnx_pruned(model, onnxnn.randn(2, 64), path, input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    assert path.stat().st_size == proto.ByteSize()
    loaded = onnx.load(path)
    x = onnxnn.randn(5, 64)
    assert_same_outputs(loaded, model, x)
    dense_values = numpy_helper.to_array(
        next(t for t in loaded.graph.initializer if t.name == "0.weight::sparse::values")
    )
    assert dense_values.size == int((model[0].weight.detach().numpy() != 0).sum())


def test_bad_arguments():
    model = mlp()
    x = onnxnn.randn(1, 64)
    with pytest.raises(ValueError, match="sparse_format"):
        to_onnx_pruned(model, x, sparse_format="csr")
    with pytest.raises(ValueError, match="sparse_parameters"):
        to_onnx_pruned(model, x, sparse_parameters="some")
    with pytest.raises(TypeError, match="nn.Module"):
        to_onnx_pruned(lambda t: t, x)
