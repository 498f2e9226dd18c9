"""The hook-based nn.utils.weight_norm and nn.utils.spectral_norm (PyTorch's older forms of the
parametrizations), against numpy formulas.

weight_norm: ``w = g v / ||v||``, the norm over every dim but ``dim`` (None or -1: the whole tensor),
``g`` starting at the weight's norm and ``v`` at the weight. spectral_norm, one power-method step:
``v' = normalize(W^T u)``, ``u' = normalize(W v')``, ``w = W / (u'^T W v')`` with W the weight as a
(size(dim), -1) matrix; no step in eval mode. state_dict keys and metadata, and loading PyTorch's
state_dicts (converted to numpy), against torch itself where it is installed.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.nn.utils import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm
from onnxnn.nn.utils.stateless import functional_call
from tests.gradcheck import check_gradients

EXECUTORS = ["onnxruntime", "kernels"]
RNG = np.random.default_rng(23)

pytestmark = pytest.mark.filterwarnings("ignore:`onnxnn.nn.utils.weight_norm` is deprecated:FutureWarning")


def _numpy(tensor):
    return tensor.detach().numpy().copy()


def _unit(vector):
    return vector / np.linalg.norm(vector)


def _as_matrix(W, dim):
    return np.moveaxis(W, dim, 0).reshape(W.shape[dim], -1)


def _numpy_linear(x, W, b):
    return x @ W.T + b


# ---------------------------------------------------------------------- weight_norm

# (layer, dim, axes the norm runs over (None: all), shape of g)
WEIGHT_NORM_CASES = {
    "linear_dim0": (lambda: nn.Linear(3, 4), 0, (1,), (4, 1)),
    "linear_dim1": (lambda: nn.Linear(3, 4), 1, (0,), (1, 3)),
    "linear_none": (lambda: nn.Linear(3, 4), None, None, ()),
    "linear_minus1_whole": (lambda: nn.Linear(3, 4), -1, None, ()),
    "conv1d_minus2": (lambda: nn.Conv1d(2, 3, 4), -2, (0, 2), (1, 2, 1)),
    "conv1d_dim2": (lambda: nn.Conv1d(2, 3, 4), 2, (0, 1), (1, 1, 4)),
}


@pytest.mark.parametrize("case", WEIGHT_NORM_CASES)
def test_weight_norm_registers_magnitude_and_direction(case):
    make, dim, axes, g_shape = WEIGHT_NORM_CASES[case]
    layer = make().double()
    W = _numpy(layer.weight)
    assert weight_norm(layer, dim=dim) is layer
    assert list(layer.state_dict()) == ["bias", "weight_g", "weight_v"]
    assert isinstance(layer.weight_g, nn.Parameter) and isinstance(layer.weight_v, nn.Parameter)
    assert "weight" not in layer._parameters and not isinstance(layer.weight, nn.Parameter)
    g = _numpy(layer.weight_g)
    assert g.shape == g_shape
    np.testing.assert_allclose(g, np.sqrt((W * W).sum(axis=axes, keepdims=axes is not None)), rtol=1e-14)
    np.testing.assert_array_equal(_numpy(layer.weight_v), W)
    np.testing.assert_allclose(_numpy(layer.weight), W, rtol=1e-14)


def _float64_runs(cases):
    """(case, executor) pairs: onnxruntime's CPU provider has no float64 Conv, so convolutions run on
    the kernels executor only (their weight is what these tests check)."""
    return [
        (case, executor)
        for case in cases
        for executor in EXECUTORS
        if case.startswith("linear") or executor == "kernels"
    ]


@pytest.mark.parametrize(("case", "executor"), _float64_runs(WEIGHT_NORM_CASES))
def test_weight_norm_recomputes_the_weight_before_every_forward(case, executor):
    make, dim, axes, g_shape = WEIGHT_NORM_CASES[case]
    layer = weight_norm(make().double(), dim=dim)
    g = RNG.uniform(0.5, 2.0, g_shape)
    v = RNG.standard_normal(tuple(layer.weight_v.shape))
    layer.weight_g = nn.Parameter(onnxnn.tensor(g))
    layer.weight_v = nn.Parameter(onnxnn.tensor(v))
    x = RNG.standard_normal((2, 3) if isinstance(layer, nn.Linear) else (2, 2, 5))
    with onnxnn.set_executor(executor):
        output = layer(onnxnn.tensor(x)).detach().numpy()
    expected_weight = g * v / np.sqrt((v * v).sum(axis=axes, keepdims=axes is not None))
    np.testing.assert_allclose(_numpy(layer.weight), expected_weight, rtol=1e-14)
    if isinstance(layer, nn.Linear):
        np.testing.assert_allclose(output, _numpy_linear(x, expected_weight, _numpy(layer.bias)), rtol=1e-13)


def test_weight_norm_gradients_reach_g_and_v():
    layer = weight_norm(nn.Linear(3, 2).double())
    x = RNG.standard_normal((4, 3))

    def loss(g, v, inputs):
        output = functional_call(layer, {"weight_g": g, "weight_v": v}, (inputs,))
        return (output * output).sum()

    check_gradients(loss, [_numpy(layer.weight_g), _numpy(layer.weight_v), x], requires_grad=[True, True, False])


def test_weight_norm_warns_as_deprecated():
    with pytest.warns(FutureWarning, match=r"`onnxnn.nn.utils.weight_norm` is deprecated in favor of"):
        weight_norm(nn.Linear(3, 2))


def test_remove_weight_norm_leaves_a_parameter_with_the_current_weight():
    layer = weight_norm(nn.Linear(3, 4).double())
    g, v = RNG.uniform(0.5, 2.0, (4, 1)), RNG.standard_normal((4, 3))
    layer.weight_g = nn.Parameter(onnxnn.tensor(g))
    layer.weight_v = nn.Parameter(onnxnn.tensor(v))
    assert remove_weight_norm(layer) is layer
    assert list(layer.state_dict()) == ["bias", "weight"] and isinstance(layer.weight, nn.Parameter)
    assert not layer._forward_pre_hooks
    np.testing.assert_allclose(_numpy(layer.weight), g * v / np.linalg.norm(v, axis=1, keepdims=True), rtol=1e-14)


WEIGHT_NORM_ERRORS = {
    "twice": (
        lambda: weight_norm(weight_norm(nn.Linear(3, 2))),
        RuntimeError,
        "Cannot register two weight_norm hooks on the same parameter weight",
    ),
    "dim_out_of_range": (
        lambda: weight_norm(nn.Linear(3, 2), dim=2),
        IndexError,
        r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
    ),
    "none_parameter": (
        lambda: weight_norm(nn.Linear(3, 2, bias=False), name="bias"),
        TypeError,
        "must be Tensor, not NoneType",
    ),
    "remove_without_hook": (
        lambda: remove_weight_norm(nn.Linear(3, 2)),
        ValueError,
        "weight_norm of 'weight' not found in Linear",
    ),
}


@pytest.mark.parametrize("case", WEIGHT_NORM_ERRORS)
def test_weight_norm_errors(case):
    call, error, message = WEIGHT_NORM_ERRORS[case]
    with pytest.raises(error, match=message):
        call()


def test_weight_norm_with_a_dim_out_of_range_leaves_the_module_unchanged():
    layer = nn.Linear(3, 2)
    weight = layer.weight
    with pytest.raises(IndexError):
        weight_norm(layer, dim=-3)
    assert layer.weight is weight and list(layer.state_dict()) == ["weight", "bias"]


# ---------------------------------------------------------------------- spectral_norm

# (layer, dim argument, dim used, u size, v size)
SPECTRAL_NORM_CASES = {
    "linear": (lambda: nn.Linear(5, 4), None, 0, 4, 5),
    "linear_dim1": (lambda: nn.Linear(5, 4), 1, 1, 5, 4),
    "linear_minus1": (lambda: nn.Linear(5, 4), -1, 1, 5, 4),
    "conv2d": (lambda: nn.Conv2d(2, 3, 2), None, 0, 3, 8),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(2, 3, 2), None, 1, 3, 8),  # weight (in, out, kh, kw)
}


@pytest.mark.parametrize("case", SPECTRAL_NORM_CASES)
def test_spectral_norm_registers_orig_and_the_singular_vector_buffers(case):
    make, dim, _, u_size, v_size = SPECTRAL_NORM_CASES[case]
    layer = make()
    weight = layer.weight
    assert spectral_norm(layer, dim=dim) is layer
    assert list(layer.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert layer.weight_orig is weight and set(layer._buffers) == {"weight_u", "weight_v"}
    assert layer.weight_u.shape == (u_size,) and layer.weight_v.shape == (v_size,)
    np.testing.assert_allclose(np.linalg.norm(layer.weight_u.numpy()), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(layer.weight_v.numpy()), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(_numpy(layer.weight), _numpy(weight))  # until the first call
    assert layer.state_dict()._metadata[""]["spectral_norm"] == {"weight.version": 1}


def _set_spectral_state(layer, u_size, v_size):
    u, v = _unit(RNG.standard_normal(u_size)), _unit(RNG.standard_normal(v_size))
    with onnxnn.no_grad():
        layer.weight_u.copy_(onnxnn.tensor(u))
        layer.weight_v.copy_(onnxnn.tensor(v))
    return _numpy(layer.weight_orig), u, v


@pytest.mark.parametrize("n_power_iterations", [1, 3])
@pytest.mark.parametrize(("case", "executor"), _float64_runs(SPECTRAL_NORM_CASES))
def test_spectral_norm_runs_the_power_method_in_training_mode(case, n_power_iterations, executor):
    make, dim, used_dim, u_size, v_size = SPECTRAL_NORM_CASES[case]
    layer = spectral_norm(make().double(), n_power_iterations=n_power_iterations, dim=dim)
    W, u, v = _set_spectral_state(layer, u_size, v_size)
    matrix = _as_matrix(W, used_dim)
    for _ in range(n_power_iterations):
        v = _unit(matrix.T @ u)
        u = _unit(matrix @ v)
    x = RNG.standard_normal((2, 5) if isinstance(layer, nn.Linear) else (2, 2, 3, 3))
    with onnxnn.set_executor(executor):
        output = layer(onnxnn.tensor(x)).detach().numpy()
    np.testing.assert_allclose(layer.weight_u.numpy(), u, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(layer.weight_v.numpy(), v, rtol=1e-13, atol=1e-15)
    expected_weight = W / (u @ matrix @ v)
    np.testing.assert_allclose(_numpy(layer.weight), expected_weight, rtol=1e-13)
    if isinstance(layer, nn.Linear):
        np.testing.assert_allclose(output, _numpy_linear(x, expected_weight, _numpy(layer.bias)), rtol=1e-12)


@pytest.mark.parametrize("case", SPECTRAL_NORM_CASES)
def test_spectral_norm_uses_the_stored_vectors_in_eval_mode(case):
    make, dim, used_dim, u_size, v_size = SPECTRAL_NORM_CASES[case]
    layer = spectral_norm(make().double(), dim=dim).eval()
    W, u, v = _set_spectral_state(layer, u_size, v_size)
    x = RNG.standard_normal((2, 5) if isinstance(layer, nn.Linear) else (2, 2, 3, 3))
    layer(onnxnn.tensor(x))
    np.testing.assert_array_equal(layer.weight_u.numpy(), u)
    np.testing.assert_array_equal(layer.weight_v.numpy(), v)
    np.testing.assert_allclose(_numpy(layer.weight), W / (u @ _as_matrix(W, used_dim) @ v), rtol=1e-13)


def test_spectral_norm_gradient_flows_to_orig_only():
    layer = spectral_norm(nn.Linear(3, 2).double()).eval()
    x = RNG.standard_normal((4, 3))

    def loss(original, inputs):
        output = functional_call(layer, {"weight_orig": original}, (inputs,))
        return (output * output).sum()

    check_gradients(loss, [_numpy(layer.weight_orig), x], requires_grad=[True, False])


def test_remove_spectral_norm_leaves_a_parameter_and_drops_the_state_dict_hooks():
    layer = spectral_norm(nn.Linear(5, 4).double())
    W, u, v = _set_spectral_state(layer, 4, 5)
    assert remove_spectral_norm(layer) is layer
    assert list(layer.state_dict()) == ["bias", "weight"] and isinstance(layer.weight, nn.Parameter)
    np.testing.assert_allclose(_numpy(layer.weight), W / (u @ W @ v), rtol=1e-13)  # no power iteration
    assert not layer._forward_pre_hooks and not layer._state_dict_hooks and not layer._load_state_dict_pre_hooks
    assert "spectral_norm" not in layer.state_dict()._metadata[""]
    layer.load_state_dict(layer.state_dict())  # its own state loads again (PyTorch 2.13 keeps a hook that refuses it)


SPECTRAL_NORM_ERRORS = {
    "twice": (
        lambda: spectral_norm(spectral_norm(nn.Linear(3, 2))),
        RuntimeError,
        "Cannot register two spectral_norm hooks on the same parameter weight",
    ),
    "n_power_iterations": (
        lambda: spectral_norm(nn.Linear(3, 2), n_power_iterations=0),
        ValueError,
        "Expected n_power_iterations to be positive, but got n_power_iterations=0",
    ),
    "no_such_parameter": (lambda: spectral_norm(nn.Linear(3, 2), name="kernel"), KeyError, "kernel"),
    "none_parameter": (
        lambda: spectral_norm(nn.Linear(3, 2, bias=False), name="bias"),
        ValueError,
        "cannot be applied as parameter `bias` is None",
    ),
    "dim_out_of_range": (lambda: spectral_norm(nn.Linear(3, 2), dim=2), IndexError, "Dimension out of range"),
    "remove_without_hook": (
        lambda: remove_spectral_norm(nn.Linear(3, 2)),
        ValueError,
        "spectral_norm of 'weight' not found in Linear",
    ),
}


@pytest.mark.parametrize("case", SPECTRAL_NORM_ERRORS)
def test_spectral_norm_errors(case):
    call, error, message = SPECTRAL_NORM_ERRORS[case]
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("version", [0, None])
def test_spectral_norm_converts_a_version_0_state_dict(version):
    # Version 0 stored the normalized weight and no v: sigma = mean(W_orig / W), and v solves
    # W_orig v = u in least squares, scaled so that u^T W_orig v = sigma.
    W = RNG.standard_normal((4, 5))
    u, sigma = _unit(RNG.standard_normal(4)), 2.5
    state = OrderedDict(
        bias=onnxnn.tensor(RNG.standard_normal(4)),
        weight_orig=onnxnn.tensor(W),
        weight=onnxnn.tensor(W / sigma),
        weight_u=onnxnn.tensor(u),
    )
    if version is not None:
        state._metadata = OrderedDict({"": {"version": 1, "spectral_norm": {"weight.version": version}}})
    layer = spectral_norm(nn.Linear(5, 4).double()).eval()
    layer.load_state_dict(state)
    solution = np.linalg.pinv(W.T @ W) @ W.T @ u
    expected_v = solution * sigma / (u @ W @ solution)
    np.testing.assert_allclose(layer.weight_v.numpy(), expected_v, rtol=1e-10)
    layer(onnxnn.zeros(1, 5, dtype=onnxnn.float64))
    np.testing.assert_allclose(_numpy(layer.weight), W / sigma, rtol=1e-10)


def test_spectral_norm_state_dict_missing_keys_are_reported():
    layer = spectral_norm(nn.Linear(5, 4))
    # PyTorch's hook names the keys of version 0 it misses, then the module's own are missing too.
    missing = ", ".join(
        f'"{key}"' for key in ["weight_orig", "weight", "weight_u", "weight_orig", "weight_u", "weight_v"]
    )
    with pytest.raises(RuntimeError, match=rf"Missing key\(s\) in state_dict: {missing}\. "):
        layer.load_state_dict({"bias": onnxnn.zeros(4)})


# ---------------------------------------------------------------------- PyTorch


def _torch_state_to_onnxnn(state):
    converted = OrderedDict((key, onnxnn.tensor(value.detach().numpy())) for key, value in state.items())
    converted._metadata = state._metadata  # spectral_norm's version lives there
    return converted


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_same_keys_and_weight_as_torch(dim):
    torch = pytest.importorskip("torch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch_layer = torch.nn.utils.weight_norm(torch.nn.Conv1d(2, 3, 4).double(), dim=dim)
    with torch.no_grad():
        torch_layer.weight_g.mul_(1.5)
    layer = weight_norm(nn.Conv1d(2, 3, 4).double(), dim=dim)
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    layer.load_state_dict(_torch_state_to_onnxnn(torch_layer.state_dict()))
    x = RNG.standard_normal((2, 2, 6))
    expected = torch_layer(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(layer(onnxnn.tensor(x)).detach().numpy(), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(_numpy(layer.weight), torch_layer.weight.detach().numpy(), rtol=1e-13)


@pytest.mark.parametrize("make", ["Linear", "ConvTranspose2d"])
@pytest.mark.parametrize("training", [True, False])
def test_spectral_norm_same_keys_metadata_and_weight_as_torch(make, training):
    torch = pytest.importorskip("torch")
    args = (5, 4) if make == "Linear" else (2, 3, 2)
    torch_layer = torch.nn.utils.spectral_norm(getattr(torch.nn, make)(*args).double())
    torch_layer(torch.zeros((1, 5) if make == "Linear" else (1, 2, 3, 3), dtype=torch.float64))
    layer = spectral_norm(getattr(nn, make)(*args).double())
    torch_state = torch_layer.state_dict()
    assert list(layer.state_dict()) == list(torch_state)
    assert layer.state_dict()._metadata[""]["spectral_norm"] == torch_state._metadata[""]["spectral_norm"]
    layer.load_state_dict(_torch_state_to_onnxnn(torch_state))
    layer.train(training), torch_layer.train(training)
    x = RNG.standard_normal((2, 5) if make == "Linear" else (2, 2, 3, 3))
    expected = torch_layer(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(layer(onnxnn.tensor(x)).detach().numpy(), expected, rtol=1e-12, atol=1e-14)
    for name in ("weight_u", "weight_v"):
        np.testing.assert_allclose(getattr(layer, name).numpy(), getattr(torch_layer, name).numpy(), rtol=1e-12)
