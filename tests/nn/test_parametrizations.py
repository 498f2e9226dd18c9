"""nn.utils.parametrizations: orthogonal (matrix_exp, cayley, householder), weight_norm, spectral_norm.

Values against numpy formulas of each map; orthogonality after optimizer steps; finite-difference
gradients (float64) with respect to ``original``; state_dict round trips; ONNX export run by
onnxruntime; PyTorch's weights and state_dict keys for the same stored tensors (skipped without torch).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.nn.utils import parametrize, stateless
from onnxnn.nn.utils.parametrizations import orthogonal, spectral_norm, weight_norm

MAPS = ["matrix_exp", "cayley", "householder"]
# (out_features, in_features): a square, a tall and a wide weight
SHAPES = [(4, 4), (5, 3), (3, 5)]


def float64_linear(shape):
    return nn.Linear(shape[1], shape[0]).double()


def numpy_expm(A):
    """exp(A) of a real skew-symmetric A through its eigendecomposition (A is normal: V is unitary)."""
    eigenvalues, vectors = np.linalg.eig(A)
    return (vectors @ np.diag(np.exp(eigenvalues)) @ np.linalg.inv(vectors)).real


def numpy_orthogonal(X, orthogonal_map):
    """The parametrization without trivialization, written from its definition."""
    transposed = X.shape[0] < X.shape[1]
    if transposed:
        X = X.T
    n, k = X.shape
    if orthogonal_map == "householder":
        Q = np.eye(n)
        for j in range(k):
            v = np.tril(X, -1)[:, j].copy()
            v[j] = 1.0
            Q = Q @ (np.eye(n) - 2.0 / (v @ v) * np.outer(v, v))
        Q = Q[:, :k] * np.diag(X).astype(np.int32)
    else:
        square = np.zeros((n, n))
        square[:, :k] = np.tril(X)
        A = square - square.T
        identity = np.eye(n)
        Q = numpy_expm(A) if orthogonal_map == "matrix_exp" else np.linalg.solve(identity - A / 2, identity + A / 2)
        Q = Q[:, :k]
    return Q.T if transposed else Q


def orthogonality_error(W):
    gram = W.T @ W if W.shape[0] >= W.shape[1] else W @ W.T
    return np.abs(gram - np.eye(gram.shape[0])).max()


def float32_orthogonality_tolerance(n):
    # PyTorch's own test of orthogonality: ten units of roundoff per row.
    return 10.0 * n * np.finfo(np.float32).eps


def set_original(layer, array):
    layer.parametrizations.weight.original = nn.Parameter(onnxnn.tensor(array, dtype=layer.bias.dtype))


# ---------------------------------------------------------------------- orthogonal: values


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_orthogonal_map_matches_its_formula(orthogonal_map, shape):
    layer = orthogonal(float64_linear(shape), orthogonal_map=orthogonal_map, use_trivialization=False)
    X = np.random.default_rng(1).standard_normal(shape)
    if orthogonal_map == "householder":  # the diagonal holds signs
        np.fill_diagonal(X, np.where(np.random.default_rng(2).random(min(shape)) < 0.5, -1.0, 1.0))
    set_original(layer, X)
    W = layer.weight.detach().numpy()
    np.testing.assert_allclose(W, numpy_orthogonal(X, orthogonal_map), rtol=1e-10, atol=1e-12)
    assert orthogonality_error(W) < 1e-13


@pytest.mark.parametrize("orthogonal_map", MAPS)
def test_orthogonal_with_trivialization_multiplies_by_base(orthogonal_map):
    layer = orthogonal(float64_linear((5, 3)), orthogonal_map=orthogonal_map)
    parametrization = layer.parametrizations.weight[0]
    base = parametrization.base.numpy()
    assert base.shape == (5, 5) and orthogonality_error(base) < 1e-13
    # right_inverse stored -I, which every map sends to I: the weight starts at base's first columns
    np.testing.assert_array_equal(layer.parametrizations.weight.original.detach().numpy(), -np.eye(5, 3))
    np.testing.assert_allclose(layer.weight.detach().numpy(), base[:, :3], atol=1e-14)
    X = 0.3 * np.random.default_rng(3).standard_normal((5, 3))
    X[np.diag_indices(3)] = -1.0
    set_original(layer, X)
    np.testing.assert_allclose(
        layer.weight.detach().numpy(), base @ numpy_orthogonal(X, orthogonal_map), rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize(
    ("shape", "expected_map"),
    [((4, 4), "matrix_exp"), ((5, 3), "householder"), ((3, 5), "householder")],
)
def test_orthogonal_default_map(shape, expected_map):
    layer = orthogonal(nn.Linear(shape[1], shape[0]))
    assert layer.parametrizations.weight[0].orthogonal_map.name == expected_map


def test_assigning_an_orthogonal_matrix_sets_the_weight_to_it():
    layer = orthogonal(float64_linear((4, 4)))
    Q, _ = np.linalg.qr(np.random.default_rng(4).standard_normal((4, 4)))
    layer.weight = onnxnn.tensor(Q)
    np.testing.assert_allclose(layer.weight.detach().numpy(), Q, atol=1e-14)


def test_assigning_any_matrix_sets_the_q_of_its_qr_decomposition():
    layer = orthogonal(float64_linear((4, 4)))
    A = np.random.default_rng(5).standard_normal((4, 4))
    layer.weight = onnxnn.tensor(A)
    Q, R = np.linalg.qr(A)
    np.testing.assert_allclose(layer.weight.detach().numpy(), Q * np.sign(np.diag(R)), atol=1e-12)


def test_householder_without_trivialization_inverts_the_assigned_matrix():
    layer = orthogonal(float64_linear((5, 3)), orthogonal_map="householder", use_trivialization=False)
    Q, _ = np.linalg.qr(np.random.default_rng(6).standard_normal((5, 3)))
    layer.weight = onnxnn.tensor(Q)
    np.testing.assert_allclose(layer.weight.detach().numpy(), Q, atol=1e-12)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley"])
def test_assigning_without_trivialization_is_not_possible_for_exp_and_cayley(orthogonal_map):
    layer = orthogonal(float64_linear((4, 4)), orthogonal_map=orthogonal_map, use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        layer.weight = onnxnn.eye(4, dtype=onnxnn.float64)


# ---------------------------------------------------------------------- orthogonal: training


@pytest.mark.parametrize(
    ("orthogonal_map", "optimizer"),
    [
        ("matrix_exp", lambda parameters: onnxnn.optim.SGD(parameters, lr=0.5)),
        ("cayley", lambda parameters: onnxnn.optim.Adam(parameters, lr=0.1)),
        ("householder", lambda parameters: onnxnn.optim.Adam(parameters, lr=0.1)),
    ],
)
def test_weight_stays_orthogonal_while_training(orthogonal_map, optimizer):
    layer = orthogonal(nn.Linear(4, 4), orthogonal_map=orthogonal_map)
    steps = optimizer(layer.parameters())
    x, target = onnxnn.randn(8, 4), onnxnn.randn(8, 4)
    original = layer.parametrizations.weight.original.detach().numpy().copy()
    losses = []
    for _ in range(5):
        steps.zero_grad()
        loss = ((layer(x) - target) ** 2).mean()
        loss.backward()
        steps.step()
        losses.append(loss.item())
        W = layer.weight.detach().numpy()
        assert orthogonality_error(W) < float32_orthogonality_tolerance(4)
    assert losses[-1] < losses[0]
    assert not np.array_equal(layer.parametrizations.weight.original.detach().numpy(), original)


@pytest.mark.parametrize(
    ("orthogonal_map", "shape"), [("matrix_exp", (3, 3)), ("cayley", (3, 2)), ("householder", (2, 3))]
)
def test_orthogonal_gradients_match_finite_differences(orthogonal_map, shape):
    layer = orthogonal(float64_linear(shape), orthogonal_map=orthogonal_map)
    x = np.random.default_rng(7).standard_normal((4, shape[1]))
    original = 0.5 * np.random.default_rng(8).standard_normal(shape)
    original[np.diag_indices(min(shape))] = 1.5  # householder reads int(diagonal): away from its jumps

    def loss(original, inputs):
        output = stateless.functional_call(layer, {"parametrizations.weight.original": original}, (inputs,))
        return (output * output).sum()

    check_gradients(loss, [original, x], requires_grad=[True, False])


# ---------------------------------------------------------------------- weight_norm


@pytest.mark.parametrize(("dim", "g_shape"), [(0, (4, 1)), (1, (1, 3)), (None, ())])
def test_weight_norm_splits_magnitude_and_direction(dim, g_shape):
    layer = nn.Linear(3, 4).double()
    W = layer.weight.detach().numpy().copy()
    weight_norm(layer, dim=dim)
    g = layer.parametrizations.weight.original0.detach().numpy()
    v = layer.parametrizations.weight.original1.detach().numpy()
    axes = None if dim is None else 1 - dim
    assert g.shape == g_shape
    np.testing.assert_allclose(g, np.sqrt((W * W).sum(axis=axes, keepdims=dim is not None)), rtol=1e-14)
    np.testing.assert_array_equal(v, W)
    np.testing.assert_allclose(layer.weight.detach().numpy(), W, rtol=1e-14)
    layer.parametrizations.weight.original0 = nn.Parameter(onnxnn.tensor(2.0 * g, dtype=onnxnn.float64))
    np.testing.assert_allclose(layer.weight.detach().numpy(), 2.0 * W, rtol=1e-14)


@pytest.mark.parametrize("dim", [2, 5, -3])
def test_weight_norm_refuses_a_dim_out_of_range_before_registering(dim):
    layer = nn.Linear(3, 4)
    weight = layer.weight
    with pytest.raises(
        IndexError, match=rf"Dimension out of range \(expected to be in range of \[-2, 1\], but got {dim}\)"
    ):
        weight_norm(layer, dim=dim)
    assert type(layer) is nn.Linear and layer.weight is weight
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]


def test_weight_norm_dim_minus_2_counts_from_the_end_and_minus_1_is_the_whole_tensor():
    assert weight_norm(nn.Linear(3, 4), dim=-2).parametrizations.weight.original0.shape == (4, 1)
    assert weight_norm(nn.Linear(3, 4), dim=-1).parametrizations.weight.original0.shape == ()  # as dim=None


def test_weight_norm_gradients_match_finite_differences():
    layer = weight_norm(nn.Linear(3, 2).double())
    x = np.random.default_rng(9).standard_normal((4, 3))
    g = layer.parametrizations.weight.original0.detach().numpy()
    v = layer.parametrizations.weight.original1.detach().numpy()

    def loss(g, v, inputs):
        tensors = {"parametrizations.weight.original0": g, "parametrizations.weight.original1": v}
        output = stateless.functional_call(layer, tensors, (inputs,))
        return (output * output).sum()

    check_gradients(loss, [g, v, x], requires_grad=[True, True, False])


def test_weight_norm_loads_the_old_key_names():
    source = weight_norm(nn.Linear(3, 2))
    state = source.state_dict()
    old_names = {
        "bias": state["bias"],
        "weight_g": state["parametrizations.weight.original0"],
        "weight_v": state["parametrizations.weight.original1"],
    }
    target = weight_norm(nn.Linear(3, 2))
    target.load_state_dict(old_names)
    np.testing.assert_array_equal(target.weight.detach().numpy(), source.weight.detach().numpy())


# ---------------------------------------------------------------------- spectral_norm


def test_spectral_norm_divides_by_the_largest_singular_value():
    layer = spectral_norm(nn.Linear(5, 4).double())
    W = layer.parametrizations.weight.original.detach().numpy()
    normalized = layer.weight.detach().numpy()  # training mode: one more power iteration
    # sigma is the power method's estimate u^T W v; after 16 iterations it is near the true largest
    # singular value (the error shrinks like (s2/s1)^(2 * iterations)).
    parametrization = layer.parametrizations.weight[0]
    u, v = parametrization._u.numpy(), parametrization._v.numpy()
    np.testing.assert_allclose(normalized, W / (u @ W @ v), rtol=1e-14)
    assert abs(u @ W @ v - np.linalg.svd(W, compute_uv=False)[0]) < 1e-3 * np.linalg.norm(W, 2)


def test_spectral_norm_power_iteration_runs_in_training_mode_only():
    layer = spectral_norm(nn.Linear(5, 4).double())
    parametrization = layer.parametrizations.weight[0]
    W = layer.parametrizations.weight.original.detach().numpy()
    u, v = parametrization._u.numpy().copy(), parametrization._v.numpy().copy()
    layer.weight  # training: u <- normalize(W v), v <- normalize(W^T u)
    expected_u = W @ v / np.linalg.norm(W @ v)
    expected_v = W.T @ expected_u / np.linalg.norm(W.T @ expected_u)
    np.testing.assert_allclose(parametrization._u.numpy(), expected_u, rtol=1e-13)
    np.testing.assert_allclose(parametrization._v.numpy(), expected_v, rtol=1e-13)
    layer.eval()
    layer.weight
    np.testing.assert_array_equal(parametrization._u.numpy(), expected_u)  # unchanged in eval mode
    assert not np.array_equal(u, expected_u)


def test_spectral_norm_gradient_flows_to_original_only():
    layer = spectral_norm(nn.Linear(3, 2).double()).eval()
    x = np.random.default_rng(10).standard_normal((4, 3))
    original = layer.parametrizations.weight.original.detach().numpy()

    def loss(original, inputs):
        output = stateless.functional_call(layer, {"parametrizations.weight.original": original}, (inputs,))
        return (output * output).sum()

    check_gradients(loss, [original, x], requires_grad=[True, False])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: spectral_norm(nn.Linear(3, 2), n_power_iterations=0), ValueError, "n_power_iterations to be positive"),
        (lambda: spectral_norm(nn.Linear(3, 2), dim=2), IndexError, "Dimension out of range"),
        (lambda: spectral_norm(nn.Linear(3, 2), "kernel"), ValueError, "has no parameter or buffer with name 'kernel'"),
        (lambda: orthogonal(nn.Linear(3, 2), "bias"), ValueError, "Expected a matrix or batch of matrices"),
        (lambda: orthogonal(nn.Linear(3, 2), orthogonal_map="qr"), ValueError, "orthogonal_map has to be one of"),
        (lambda: orthogonal(nn.Linear(3, 2), "kernel"), ValueError, "has no parameter or buffer with name 'kernel'"),
    ],
)
def test_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ---------------------------------------------------------------------- state_dict and export

PARAMETRIZE = {
    "orthogonal": lambda layer: orthogonal(layer),
    "orthogonal_householder": lambda layer: orthogonal(layer, orthogonal_map="householder"),
    "orthogonal_cayley": lambda layer: orthogonal(layer, orthogonal_map="cayley"),
    "weight_norm": lambda layer: weight_norm(layer),
    "spectral_norm": lambda layer: spectral_norm(layer),
}


@pytest.mark.parametrize("kind", PARAMETRIZE)
def test_state_dict_round_trip_through_a_file(kind, tmp_path):
    source = PARAMETRIZE[kind](nn.Linear(4, 4))
    with onnxnn.no_grad():
        for name, tensor in source.named_parameters():
            tensor.add_(0.1 * onnxnn.randn(*tensor.shape))
    onnxnn.save(source.state_dict(), tmp_path / "parametrized.pt")
    target = PARAMETRIZE[kind](nn.Linear(4, 4))
    target.load_state_dict(onnxnn.load(tmp_path / "parametrized.pt"))
    source.eval(), target.eval()
    x = onnxnn.randn(3, 4)
    np.testing.assert_array_equal(target(x).detach().numpy(), source(x).detach().numpy())


@pytest.mark.parametrize("kind", PARAMETRIZE)
def test_export_runs_in_onnxruntime_as_the_module(kind):
    layer = PARAMETRIZE[kind](nn.Linear(4, 3)).eval()
    x = onnxnn.randn(2, 4)
    proto = to_onnx(layer, (x,))
    initializers = {initializer.name for initializer in proto.graph.initializer}
    assert set(layer.state_dict()) <= initializers
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (output,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(output, layer(x).detach().numpy(), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- PyTorch


def torch_state_to_onnxnn(state):
    return {key: onnxnn.tensor(value.detach().numpy()) for key, value in state.items()}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("orthogonal_map", MAPS)
@pytest.mark.parametrize("use_trivialization", [True, False])
def test_orthogonal_same_weight_as_torch(orthogonal_map, shape, use_trivialization):
    torch = pytest.importorskip("torch")
    torch_layer = torch.nn.Linear(shape[1], shape[0]).double()
    torch.nn.utils.parametrizations.orthogonal(
        torch_layer, orthogonal_map=orthogonal_map, use_trivialization=use_trivialization
    )
    with torch.no_grad():
        torch_layer.parametrizations.weight.original.normal_(0.0, 0.5)
    layer = orthogonal(float64_linear(shape), orthogonal_map=orthogonal_map, use_trivialization=use_trivialization)
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    layer.load_state_dict(torch_state_to_onnxnn(torch_layer.state_dict()))
    np.testing.assert_allclose(
        layer.weight.detach().numpy(), torch_layer.weight.detach().numpy(), rtol=1e-10, atol=1e-12
    )


def test_orthogonal_assignment_same_as_torch():
    torch = pytest.importorskip("torch")
    A = np.random.default_rng(11).standard_normal((5, 3))
    torch_layer = torch.nn.utils.parametrizations.orthogonal(
        torch.nn.Linear(3, 5).double(), orthogonal_map="householder", use_trivialization=False
    )
    torch_layer.weight = torch.tensor(A)
    layer = orthogonal(float64_linear((5, 3)), orthogonal_map="householder", use_trivialization=False)
    layer.weight = onnxnn.tensor(A)
    np.testing.assert_allclose(
        layer.parametrizations.weight.original.detach().numpy(),
        torch_layer.parametrizations.weight.original.detach().numpy(),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm"])
def test_norms_same_weight_and_keys_as_torch(kind):
    torch = pytest.importorskip("torch")
    torch_layer = getattr(torch.nn.utils.parametrizations, kind)(torch.nn.Linear(5, 4).double())
    layer = PARAMETRIZE[kind](float64_linear((4, 5)))
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    layer.load_state_dict(torch_state_to_onnxnn(torch_layer.state_dict()))
    for mode in (True, False):  # training mode runs one power iteration on the same u, v
        layer.train(mode), torch_layer.train(mode)
        np.testing.assert_allclose(
            layer.weight.detach().numpy(), torch_layer.weight.detach().numpy(), rtol=1e-12, atol=1e-14
        )


@pytest.mark.parametrize("kind", PARAMETRIZE)
def test_remove_leaves_the_parametrized_weight_as_a_plain_parameter(kind):
    layer = PARAMETRIZE[kind](nn.Linear(4, 4)).eval()
    expected = layer.weight.detach().numpy().copy()
    parametrize.remove_parametrizations(layer, "weight")
    assert type(layer) is nn.Linear and isinstance(layer.weight, nn.Parameter)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), expected)


@pytest.mark.parametrize(
    ("layer", "u_size", "v_size"),
    [
        (nn.Conv2d(2, 3, 2), 3, 2 * 2 * 2),  # weight (out, in, kh, kw): dim 0
        (nn.ConvTranspose2d(2, 3, 2), 3, 2 * 2 * 2),  # weight (in, out, kh, kw): dim 1 by default
    ],
)
def test_spectral_norm_reads_output_channels_as_rows(layer, u_size, v_size):
    parametrization = spectral_norm(layer).parametrizations.weight[0]
    assert parametrization._u.shape == (u_size,) and parametrization._v.shape == (v_size,)
