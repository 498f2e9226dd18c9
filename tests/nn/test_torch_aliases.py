"""torch's top-level forms of nn.functional ops (onnxnn/nn/torch_aliases.py, torch_recurrent.py):
each, called with torch's own argument order, gives exactly the values of the functional it wraps
(same recorded ops), on both executors; with torch installed, also torch's values.

Each case is ``(id, alias, functional, inputs)``: ``alias(m, *tensors)`` is written once against a
namespace ``m`` that is ``onnxnn`` or ``torch``; ``functional(*tensors)`` is the onnxnn
nn.functional (or Tensor) expression the alias stands for.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from tests.gradcheck import check_gradients
from tests.nn.layer_checks import EXECUTORS

RNG = np.random.default_rng(0)


def _normal(*shape):
    return RNG.standard_normal(shape)


def _positive(*shape):
    return RNG.uniform(0.5, 2.0, shape)


X = _normal(2, 3, 4)
EPS = 1e-5

CASES = [
    # normalization
    (
        "batch_norm-eval",
        lambda m, x, w, b, rm, rv: m.batch_norm(x, w, b, rm, rv, False, 0.1, EPS, False),
        lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, False, 0.1, EPS),
        [X, _normal(3), _normal(3), _normal(3), _positive(3)],
    ),
    (
        "batch_norm-train",
        lambda m, x, w, b, rm, rv: m.batch_norm(x, w, b, rm, rv, True, 0.1, EPS, True),
        lambda x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, True, 0.1, EPS),
        [X, _normal(3), _normal(3), _normal(3), _positive(3)],
    ),
    (
        "native_batch_norm-train",
        lambda m, x, w, b, rm, rv: m.native_batch_norm(x, w, b, rm, rv, True, 0.1, EPS),
        lambda x, w, b, rm, rv: (
            F.batch_norm(x, rm, rv, w, b, True, 0.1, EPS),
            x.mean([0, 2]),
            (x.var([0, 2], correction=0) + EPS).rsqrt(),
        ),
        [X, _normal(3), _normal(3), _normal(3), _positive(3)],
    ),
    (
        "native_batch_norm-eval",
        lambda m, x, w, b, rm, rv: m.native_batch_norm(x, w, b, rm, rv, False, 0.1, EPS),
        lambda x, w, b, rm, rv: (F.batch_norm(x, rm, rv, w, b, False, 0.1, EPS), onnxnn.empty(0), onnxnn.empty(0)),
        [X, _normal(3), _normal(3), _normal(3), _positive(3)],
    ),
    (
        "native_layer_norm",
        lambda m, x, w, b: m.native_layer_norm(x, [3, 4], w, b, EPS),
        lambda x, w, b: (
            F.layer_norm(x, [3, 4], w, b, EPS),
            x.mean([1, 2], keepdim=True),
            (x.var([1, 2], correction=0, keepdim=True) + EPS).rsqrt(),
        ),
        [X, _normal(3, 4), _normal(3, 4)],
    ),
    (
        "native_group_norm",
        lambda m, x, w, b: m.native_group_norm(x, w, b, 2, 4, 3, 2, EPS),
        lambda x, w, b: (
            F.group_norm(x, 2, w, b, EPS),
            x.reshape((2, 2, 6)).mean(-1),
            (x.reshape((2, 2, 6)).var(-1, correction=0) + EPS).rsqrt(),
        ),
        [_normal(2, 4, 3), _normal(4), _normal(4)],
    ),
    ("norm_except_dim-0", lambda m, v: m.norm_except_dim(v, 2, 0), lambda v: v.norm(2, [1, 2], keepdim=True), [X]),
    ("norm_except_dim-2", lambda m, v: m.norm_except_dim(v, 3, 2), lambda v: v.norm(3, [0, 1], keepdim=True), [X]),
    ("norm_except_dim-all", lambda m, v: m.norm_except_dim(v, 2, -1), lambda v: v.norm(2), [X]),
    # losses: ATen's integer reductions
    *[
        (
            f"kl_div-{reduction}",
            lambda m, x, t, r=reduction: m.kl_div(x, t, r),
            lambda x, t, r=name: F.kl_div(x, t, reduction=r),
            [_normal(3, 4), _positive(3, 4)],
        )
        for reduction, name in ((0, "none"), (1, "mean"), (2, "sum"))
    ],
    (
        "kl_div-log_target",
        lambda m, x, t: m.kl_div(x, t, 2, log_target=True),
        lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True),
        [_normal(3, 4), _normal(3, 4)],
    ),
    (
        "binary_cross_entropy_with_logits",
        lambda m, x, t, w, pw: m.binary_cross_entropy_with_logits(x, t, w, pw, 2),
        lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction="sum", pos_weight=pw),
        [_normal(3, 4), RNG.uniform(0, 1, (3, 4)), _positive(4), _positive(4)],
    ),
    (
        "cosine_embedding_loss",
        lambda m, a, b, y: m.cosine_embedding_loss(a, b, y, 0.1, 1),
        lambda a, b, y: F.cosine_embedding_loss(a, b, y, 0.1),
        [_normal(3, 5), _normal(3, 5), np.array([1.0, -1, 1])],
    ),
    (
        "hinge_embedding_loss",
        lambda m, x, y: m.hinge_embedding_loss(x, y, 0.5, 0),
        lambda x, y: F.hinge_embedding_loss(x, y, 0.5, reduction="none"),
        [_normal(6), np.array([1.0, -1, 1, -1, 1, -1])],
    ),
    (
        "margin_ranking_loss",
        lambda m, a, b, y: m.margin_ranking_loss(a, b, y, 0.2, 2),
        lambda a, b, y: F.margin_ranking_loss(a, b, y, 0.2, reduction="sum"),
        [_normal(5), _normal(5), np.array([1.0, -1, 1, 1, -1])],
    ),
    (
        "poisson_nll_loss",
        lambda m, x, t: m.poisson_nll_loss(x, t, False, True, 1e-8, 1),
        lambda x, t: F.poisson_nll_loss(x, t, False, True, eps=1e-8),
        [_positive(3, 4), _positive(3, 4) * 3],
    ),
    (
        "triplet_margin_loss",
        lambda m, a, p, n: m.triplet_margin_loss(a, p, n, 0.5, 1.0, 1e-6, True, 1),
        lambda a, p, n: F.triplet_margin_loss(a, p, n, 0.5, 1.0, 1e-6, True),
        [_normal(3, 4), _normal(3, 4), _normal(3, 4)],
    ),
    (
        "ctc_loss",
        lambda m, lp, t: m.ctc_loss(lp, t, [5, 4], [2, 1], 0, 1, False),
        lambda lp, t: F.ctc_loss(lp, t, [5, 4], [2, 1], 0, "mean", False),
        [np.log(RNG.dirichlet(np.ones(3), (5, 2))), np.array([[1, 2], [2, 0]])],
    ),
    # convolution, padding, pooling, sampling
    (
        "convolution-2d",
        lambda m, x, w, b: m.convolution(x, w, b, [1, 2], [1, 0], [1, 1], False, [0, 0], 1),
        lambda x, w, b: F.conv2d(x, w, b, (1, 2), (1, 0)),
        [_normal(1, 2, 4, 5), _normal(3, 2, 3, 3), _normal(3)],
    ),
    (
        "convolution-transposed-1d",
        lambda m, x, w: m.convolution(x, w, None, [2], [1], [1], True, [1], 2),
        lambda x, w: F.conv_transpose1d(x, w, None, 2, 1, 1, 2),
        [_normal(1, 4, 3), _normal(4, 1, 3)],
    ),
    (
        "conv_tbc",
        lambda m, x, w, b: m.conv_tbc(x, w, b, 1),
        lambda x, w, b: F.conv_tbc(x, w, b, 1),
        [_normal(5, 2, 3), _normal(3, 3, 4), _normal(4)],
    ),
    (
        "constant_pad_nd",
        lambda m, x: m.constant_pad_nd(x, [1, 2, -1, 1], 0.5),
        lambda x: F.pad(x, [1, 2, -1, 1], "constant", 0.5),
        [X],
    ),
    (
        "adaptive_max_pool1d",
        lambda m, x: m.adaptive_max_pool1d(x, [3]),
        lambda x: F.adaptive_max_pool1d(x, 3, True),
        [_normal(2, 3, 7)],
    ),
    (
        "max_pool1d_with_indices",
        lambda m, x: m.max_pool1d_with_indices(x, [3], [2], [1], [1], True),
        lambda x: F.max_pool1d(x, 3, 2, 1, 1, True, return_indices=True),
        [_normal(2, 3, 8)],
    ),
    (
        "affine_grid_generator",
        lambda m, t: m.affine_grid_generator(t, [2, 1, 3, 4], False),
        lambda t: F.affine_grid(t, [2, 1, 3, 4], align_corners=False),
        [_normal(2, 2, 3)],
    ),
    (
        "grid_sampler-bilinear-border",
        lambda m, x, g: m.grid_sampler(x, g, 0, 1, True),
        lambda x, g: F.grid_sample(x, g, "bilinear", "border", True),
        [_normal(1, 2, 3, 4), _normal(1, 2, 3, 2)],
    ),
    (
        "grid_sampler_2d-nearest-zeros",
        lambda m, x, g: m.grid_sampler_2d(x, g, 1, 0, False),
        lambda x, g: F.grid_sample(x, g, "nearest", "zeros", False),
        [_normal(1, 2, 3, 4), RNG.uniform(-0.9, 0.9, (1, 2, 3, 2))],
    ),
    (
        "grid_sampler_3d",
        lambda m, x, g: m.grid_sampler_3d(x, g, 0, 0, False),
        lambda x, g: F.grid_sample(x, g, "bilinear", "zeros", False),
        [_normal(1, 2, 2, 3, 3), _normal(1, 1, 2, 2, 3)],
    ),
    ("pixel_shuffle", lambda m, x: m.pixel_shuffle(x, 2), lambda x: F.pixel_shuffle(x, 2), [_normal(1, 8, 2, 3)]),
    ("pixel_unshuffle", lambda m, x: m.pixel_unshuffle(x, 2), lambda x: F.pixel_unshuffle(x, 2), [_normal(1, 2, 4, 2)]),
    ("channel_shuffle", lambda m, x: m.channel_shuffle(x, 2), lambda x: F.channel_shuffle(x, 2), [_normal(1, 4, 3)]),
    (
        "native_channel_shuffle",
        lambda m, x: m.native_channel_shuffle(x, 3),
        lambda x: F.channel_shuffle(x, 3),
        [_normal(2, 6, 2)],
    ),
    (
        "bilinear",
        lambda m, a, b, w, c: m.bilinear(a, b, w, c),
        lambda a, b, w, c: F.bilinear(a, b, w, c),
        [_normal(3, 2), _normal(3, 4), _normal(5, 2, 4), _normal(5)],
    ),
    (
        "cosine_similarity",
        lambda m, a, b: m.cosine_similarity(a, b, 0, 1e-8),
        lambda a, b: F.cosine_similarity(a, b, 0, 1e-8),
        [_normal(4, 3), _normal(4, 3)],
    ),
    # embeddings (weight first in torch)
    (
        "embedding",
        lambda m, w, i: m.embedding(w, i, 2),
        lambda w, i: F.embedding(i, w, 2),
        [_normal(5, 3), np.array([[0, 2, 4], [1, 2, 3]])],
    ),
    (
        "embedding-no-padding",
        lambda m, w, i: m.embedding(w, i),
        lambda w, i: F.embedding(i, w),
        [_normal(5, 3), np.array([[0, 2, 4], [1, 2, 2]])],
    ),
    *[
        (
            f"embedding_bag-{name}",
            lambda m, w, i, o, mode=mode: m.embedding_bag(w, i, o, False, mode)[0],
            lambda w, i, o, name=name: F.embedding_bag(i, w, o, mode=name),
            [_normal(10, 3), np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4])],
        )
        for mode, name in ((0, "sum"), (1, "mean"), (2, "max"))
    ],
    # dropout: not training, the identity
    ("feature_dropout-eval", lambda m, x: m.feature_dropout(x, 0.5, False), lambda x: x, [X]),
    ("native_dropout-eval", lambda m, x: m.native_dropout(x, 0.5, False)[0], lambda x: x, [X]),
]


def _onnxnn_tensors(arrays, dtype=onnxnn.float64):
    return [onnxnn.tensor(a, dtype=dtype) if a.dtype.kind == "f" else onnxnn.tensor(a) for a in arrays]


def _as_arrays(result) -> list[np.ndarray]:
    results = result if isinstance(result, (tuple, list)) else (result,)
    return [np.asarray(r.detach().numpy()) for r in results]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, alias, functional, arrays", CASES, ids=[case[0] for case in CASES])
def test_alias_equals_the_functional_it_wraps(case_id, alias, functional, arrays, executor):
    # float32: onnxruntime has no float64 kernels for some ops (Conv)
    with onnxnn.set_executor(executor):
        actual = _as_arrays(alias(onnxnn, *_onnxnn_tensors(arrays, onnxnn.float32)))
        expected = _as_arrays(functional(*_onnxnn_tensors(arrays, onnxnn.float32)))
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case_id, alias, functional, arrays", CASES, ids=[case[0] for case in CASES])
def test_alias_matches_torch(case_id, alias, functional, arrays):
    torch = pytest.importorskip("torch")
    actual = _as_arrays(alias(onnxnn, *_onnxnn_tensors(arrays)))
    # torch.tensor copies: torch's in-place running-statistics updates must not reach the shared arrays
    result = alias(torch, *[torch.tensor(a) for a in arrays])
    expected = [t.detach().numpy() for t in (result if isinstance(result, (tuple, list)) else (result,))]
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.shape == want.shape, case_id
        # float64 on both sides: the two libraries differ by reduction order only (a few ulps of the
        # terms summed, at most tens of terms here)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


GRADIENT_CASES = [
    "batch_norm-train",
    "native_layer_norm",
    "norm_except_dim-0",
    "kl_div-1",
    "convolution-2d",
    "convolution-transposed-1d",
    "constant_pad_nd",
    "grid_sampler-bilinear-border",
    "embedding-no-padding",
]


@pytest.mark.parametrize("case_id", GRADIENT_CASES)
def test_alias_gradients_match_finite_differences(case_id):
    _, alias, _, arrays = next(case for case in CASES if case[0] == case_id)

    def function(*tensors):
        result = alias(onnxnn, *tensors)
        return result[0] if isinstance(result, tuple) else result

    requires = [a.dtype.kind == "f" for a in arrays]
    if case_id == "batch_norm-train":
        requires = [True, True, True, False, False]  # the running statistics are buffers
    check_gradients(function, arrays, requires_grad=requires)


def test_embedding_bag_bookkeeping_matches_torch():
    """float64: PyTorch's general kernel (its float32 sum fast path leaves offset2bag empty)."""
    torch = pytest.importorskip("torch")
    weight, indices, offsets = _normal(10, 3), np.array([1, 2, 4, 5, 4, 3, 2, 9]), np.array([0, 4])
    for mode in (0, 1, 2):
        ours = onnxnn.embedding_bag(onnxnn.tensor(weight), onnxnn.tensor(indices), onnxnn.tensor(offsets), False, mode)
        theirs = torch.embedding_bag(
            torch.from_numpy(weight), torch.from_numpy(indices), torch.from_numpy(offsets), False, mode
        )
        for got, want in zip(ours, theirs):
            np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=0)


def test_embedding_renorm_rescales_the_rows_looked_up():
    weight = onnxnn.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    result = onnxnn.embedding_renorm_(weight, onnxnn.tensor([0, 1]), 1.0, 2.0)
    assert result is weight
    np.testing.assert_allclose(
        weight.numpy(), [[0.6 / (1 + 2e-7), 0.8 / (1 + 2e-7)], [0.3, 0.4], [6.0, 8.0]], rtol=1e-6
    )


def test_feature_dropout_drops_whole_channels_and_rescales():
    x = onnxnn.ones(4, 6, 5)
    out = onnxnn.feature_dropout(x, 0.5, True).numpy()
    per_channel = out.reshape(4, 6, 5)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # one decision per (sample, channel)
    y = onnxnn.ones(3, 4)
    assert onnxnn.feature_dropout_(y, 0.5, True) is y
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        onnxnn.feature_dropout(x, 1.5, True)


def test_native_dropout_returns_its_mask():
    x = onnxnn.randn(20, 10)
    out, mask = onnxnn.native_dropout(x, 0.25, True)
    assert mask.dtype == onnxnn.bool
    np.testing.assert_allclose(out.numpy(), x.numpy() * mask.numpy() / 0.75, rtol=1e-6)
    out, mask = onnxnn.native_dropout(x, 0.25, None)
    assert mask.numpy().all() and np.array_equal(out.numpy(), x.numpy())


def test_alias_errors_use_torchs_wording():
    x = onnxnn.randn(2, 3)
    with pytest.raises(ValueError, match="3 is not a valid value for reduction"):
        onnxnn.kl_div(x, x, 3)
    with pytest.raises(RuntimeError, match="unknown interpolation mode 5"):
        onnxnn.grid_sampler(onnxnn.randn(1, 1, 2, 2), onnxnn.zeros(1, 1, 1, 2), 5, 0, False)
    with pytest.raises(RuntimeError, match="expected 5D input"):
        onnxnn.grid_sampler_3d(onnxnn.randn(1, 1, 2, 2), onnxnn.zeros(1, 1, 1, 2), 0, 0, False)
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined in evaluation mode"):
        onnxnn.native_batch_norm(onnxnn.randn(2, 3), None, None, None, None, False, 0.1, 1e-5)


# --- recurrent cells and flat-weight forms -------------------------------------------------------------------


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "name, module_class, kwargs",
    [
        ("rnn_tanh_cell", nn.RNNCell, {}),
        ("rnn_relu_cell", nn.RNNCell, {"nonlinearity": "relu"}),
        ("gru_cell", nn.GRUCell, {}),
        ("lstm_cell", nn.LSTMCell, {}),
    ],
)
def test_cells_equal_the_cell_modules(name, module_class, kwargs, executor):
    cell = module_class(3, 4, **kwargs).double()
    x, h = onnxnn.tensor(_normal(2, 3)), onnxnn.tensor(_normal(2, 4))
    state = [h, onnxnn.tensor(_normal(2, 4))] if name == "lstm_cell" else h
    with onnxnn.set_executor(executor):
        actual = getattr(onnxnn, name)(x, state, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
        expected = cell(x, tuple(state) if name == "lstm_cell" else state)
        actual, expected = _as_arrays(actual), _as_arrays(expected)  # realized on ``executor`` (onnxnn is lazy)
    for got, want in zip(actual, expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "name, mode, kwargs",
    [
        ("rnn_tanh", "RNN", {}),
        ("rnn_relu", "RNN", {"nonlinearity": "relu"}),
        ("gru", "GRU", {}),
        ("lstm", "LSTM", {}),
        ("lstm", "LSTM", {"proj_size": 2}),
    ],
)
@pytest.mark.parametrize("batch_first", [False, True])
def test_flat_recurrent_forms_equal_the_modules(name, mode, kwargs, batch_first):
    module = getattr(nn, mode)(3, 4, num_layers=2, bidirectional=True, batch_first=batch_first, **kwargs).double()
    params = [getattr(module, weight_name) for weight_name in module._flat_weights_names]
    x = onnxnn.tensor(_normal(5, 2, 3))
    hidden = 2 if kwargs.get("proj_size") else 4
    h0 = onnxnn.tensor(_normal(4, 5 if batch_first else 2, hidden))
    hx = [h0, onnxnn.tensor(_normal(4, h0.shape[1], 4))] if mode == "LSTM" else h0
    actual = getattr(onnxnn, name)(x, hx, params, True, 2, 0.0, False, True, batch_first)
    output, state = module(x, tuple(hx) if mode == "LSTM" else hx)
    expected = (output, *state) if mode == "LSTM" else (output, state)
    # The same ops, but the module's graph and this one may be planned apart (a few float64 roundings).
    for got, want in zip(_as_arrays(actual), _as_arrays(expected)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    torch = pytest.importorskip("torch")
    theirs = getattr(torch, name)(
        torch.from_numpy(x.numpy()),
        [torch.from_numpy(t.numpy()) for t in hx] if mode == "LSTM" else torch.from_numpy(h0.numpy()),
        [torch.from_numpy(p.detach().numpy()) for p in params],
        True,
        2,
        0.0,
        False,
        True,
        batch_first,
    )
    for got, want in zip(_as_arrays(actual), theirs):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)


def test_flat_lstm_packed_overload_and_gradients():
    module = nn.LSTM(2, 3).double()
    params = [getattr(module, weight_name) for weight_name in module._flat_weights_names]
    data, batch_sizes = _normal(5, 2), np.array([2, 2, 1])
    h0, c0 = _normal(1, 2, 3), _normal(1, 2, 3)
    output, h_n, c_n = onnxnn.lstm(
        onnxnn.tensor(data),
        onnxnn.tensor(batch_sizes),
        [onnxnn.tensor(h0), onnxnn.tensor(c0)],
        params,
        True,
        1,
        0.0,
        False,
        False,
    )
    packed = nn.utils.rnn.PackedSequence(onnxnn.tensor(data), onnxnn.tensor(batch_sizes))
    expected, (h_e, c_e) = module(packed, (onnxnn.tensor(h0), onnxnn.tensor(c0)))
    for got, want in ((output, expected.data), (h_n, h_e), (c_n, c_e)):
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-14)
    check_gradients(
        lambda x, h, c, w: onnxnn.lstm(x, [h, c], [w, *params[1:]], True, 1, 0.0, False, False, False)[0],
        [_normal(3, 1, 2), _normal(1, 1, 3), _normal(1, 1, 3), params[0].detach().numpy()],
        requires_grad=[True, True, True, True],
    )
