"""PyTorch's semantics of nn.functional at edges a differential sweep found: ``lp_pool`` at p = +-inf,
distances between coinciding rows, NaN through the shrinks, ``glu``'s dim, hardtanh's gradient at its
bounds. Expectations from
numpy formulas and PyTorch's documented definitions.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn
from onnxnn.export import to_onnx

rng = np.random.default_rng(7)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("norm_type", [float("inf"), -float("inf")], ids=["inf", "minus_inf"])
def test_lp_pool_at_infinite_p_pools_the_largest_or_smallest_magnitude(rank, norm_type):
    # PyTorch: p = inf is max pooling of |x|, p = -inf its smallest |x| (kernel 2, stride 2).
    x = rng.standard_normal((1, 2) + (4,) * rank)
    pool = getattr(F, f"lp_pool{rank}d")
    windows = x.reshape((1, 2) + sum(((2, 2) for _ in range(rank)), ()))
    axes = tuple(range(3, 3 + 2 * rank, 2))
    reduce = np.max if norm_type > 0 else np.min
    expected = reduce(np.abs(windows), axis=axes)
    np.testing.assert_array_equal(pool(onnxnn.tensor(x), norm_type, 2).numpy(), expected)


@pytest.mark.parametrize("p", [2.0, 3.0, 0.5, 1.0])
def test_distances_between_coinciding_rows_have_finite_gradients(p):
    # Rows 0 and 1 coincide: their distance is 0 and passes no gradient (PyTorch's), and the other
    # pairs' gradients are those of |d|^p summed and rooted: sign(d) |d|^(p-1) / dist^(p-1).
    rows = np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0], [1.0, 0.5]])
    x = onnxnn.tensor(rows, requires_grad=True)
    distances = F.pdist(x, p)
    distances.sum().backward()
    expected = np.zeros_like(rows)
    for i, j in zip(*np.triu_indices(4, 1)):
        d = rows[i] - rows[j]
        norm = np.sum(np.abs(d) ** p) ** (1 / p)
        if norm == 0:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(d == 0, 0.0, np.sign(d) * np.abs(d) ** (p - 1) / norm ** (p - 1))
        expected[i] += slope
        expected[j] -= slope
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12, atol=1e-12)
    pairs = onnxnn.tensor(rows, requires_grad=True)
    onnxnn.cdist(pairs, pairs, p).sum().backward()
    assert np.isfinite(pairs.grad.numpy()).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "name, formula",
    [
        ("hardshrink", lambda x: np.where(np.abs(x) <= 0.5, 0.0, x)),
        ("softshrink", lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, x * 0.0))),
    ],
)
def test_shrinks_keep_nans(name, formula, dtype):
    x = np.array([np.nan, -1.0, -0.5, -0.2, 0.0, 0.5, 0.7, 2.0], dtype)
    with np.errstate(invalid="ignore"):
        expected = formula(x).astype(dtype)
    np.testing.assert_array_equal(getattr(F, name)(onnxnn.tensor(x), 0.5).numpy(), expected)


def test_glu_refuses_a_dim_out_of_range():
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.glu(onnxnn.ones(2, 4, 2), 3)


@pytest.mark.parametrize(
    "indices, num_classes, message",
    [
        ([0, 3, 1], 2, "smaller than num_classes"),
        ([-1, 0], 2, "non-negative"),
        ([], -1, "empty tensor"),
    ],
)
def test_one_hot_refuses_indices_outside_the_classes(indices, num_classes, message):
    with pytest.raises(RuntimeError, match=message):
        F.one_hot(onnxnn.tensor(indices, dtype=onnxnn.int64), num_classes)


def test_one_hot_takes_int64_indices_only():
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(onnxnn.tensor([1], dtype=onnxnn.int32), 3)
    np.testing.assert_array_equal(F.one_hot(onnxnn.tensor([1, 0]), 3).numpy(), np.eye(3, dtype=np.int64)[[1, 0]])


@pytest.mark.parametrize(
    "arguments, output",
    [
        ({"scale_factor": -1.0}, "H: -5, W: -6"),
        ({"size": (0, 3)}, "H: 0, W: 3"),
        ({"scale_factor": 0.1}, "H: 0, W: 0"),
        ({"size": (2, 3), "mode": "bilinear"}, None),
    ],
)
def test_interpolate_refuses_sizes_below_one(arguments, output):
    x = onnxnn.ones(1, 1, 5, 6)
    if output is None:
        assert F.interpolate(x, **arguments).shape == (1, 1, 2, 3)
        return
    with pytest.raises(RuntimeError, match=rf"input \(H: 5, W: 6\) output \({output}\)"):
        F.interpolate(x, **arguments)


def test_attention_takes_a_float32_mask_with_a_query_of_another_float_dtype():
    # PyTorch's rule: the mask is bool, float (float32), or the query's dtype.
    q, k, v = (rng.standard_normal((2, 3, 4, 5)) for _ in range(3))
    mask = rng.standard_normal((4, 4)).astype(np.float32)
    tensors = [onnxnn.tensor(a) for a in (q, k, v)]
    actual = F.scaled_dot_product_attention(*tensors, attn_mask=onnxnn.tensor(mask))
    expected = F.scaled_dot_product_attention(*tensors, attn_mask=onnxnn.tensor(mask.astype(np.float64)))
    assert actual.dtype == onnxnn.float64
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype"):
        F.scaled_dot_product_attention(*tensors, attn_mask=onnxnn.tensor(mask.astype(np.float16)))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_bfloat16_recurrent_layers_run_under_no_grad(kind):
    # ONNX's recurrent ops take no bfloat16: inference records the unrolled steps, as training does.
    layer = getattr(onnxnn.nn, kind)(4, 3).to(onnxnn.bfloat16)
    x = onnxnn.tensor(rng.standard_normal((5, 2, 4)), dtype=onnxnn.bfloat16)
    with onnxnn.no_grad():
        inferred = layer(x)[0]
    differentiated = layer(x)[0]
    assert inferred.dtype == onnxnn.bfloat16 and inferred.shape == (5, 2, 3)
    np.testing.assert_array_equal(inferred.float().numpy(), differentiated.detach().float().numpy())


HARDTANH_POINTS = np.array([-2.0, -1.0, -0.5, 0.0, 6.0, 7.0, np.nan])


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize(
    "function, low, high",
    [
        (lambda x: F.hardtanh(x, -1.0, 6.0), -1.0, 6.0),
        (F.relu6, 0.0, 6.0),
        (lambda x: F.hardtanh(x.clone(), -1.0, 6.0, inplace=True), -1.0, 6.0),
        (lambda x: nn.ReLU6(inplace=True)(x * 1), 0.0, 6.0),
    ],
    ids=["hardtanh", "relu6", "hardtanh_in_place", "ReLU6_in_place"],
)
def test_hardtanh_passes_no_gradient_at_its_bounds_and_all_of_it_at_nan(executor, function, low, high):
    # PyTorch's hardtanh_backward: G where neither x <= min nor x >= max (clamp's passes at the bounds).
    x = onnxnn.tensor(HARDTANH_POINTS, requires_grad=True)
    with onnxnn.set_executor(executor):
        y = function(x)
        y.backward(onnxnn.ones_like(y))
        values, gradient = y.detach().numpy(), x.grad.numpy()  # realized on ``executor`` (onnxnn is lazy)
    np.testing.assert_array_equal(values, np.clip(HARDTANH_POINTS, low, high))
    outside = (HARDTANH_POINTS <= low) | (HARDTANH_POINTS >= high)  # NaN: both False, so inside
    np.testing.assert_array_equal(gradient, np.where(outside, 0.0, 1.0))


def test_hardtanh_of_bools_is_refused():
    with pytest.raises(RuntimeError, match="Bool inputs not supported for hardtanh"):
        F.hardtanh(onnxnn.tensor([True, False]))


def test_exported_relu6_is_a_standard_clip():
    proto = to_onnx(nn.Sequential(nn.Linear(3, 3), nn.ReLU6()).eval(), onnxnn.randn(2, 3))
    assert "Clip" in {node.op_type for node in proto.graph.node}
    assert {opset.domain for opset in proto.opset_import} <= {"", "ai.onnx"}


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda q: F.scaled_dot_product_attention(q.long(), q.long(), q.long()),
            "expected scalar type Float but found Long",
        ),
        (
            lambda q: F.scaled_dot_product_attention(
                q, q, q, attn_mask=onnxnn.ones(2, 2, dtype=onnxnn.bool), is_causal=True
            ),
            "Explicit attn_mask should not be set when is_causal=True",
        ),
    ],
    ids=["integer_query", "mask_and_is_causal"],
)
def test_attention_refuses_what_pytorch_refuses(call, message):
    with pytest.raises(RuntimeError, match=message):
        call(onnxnn.ones(1, 2, 4))


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("batch_first, shape", [(False, (0, 2, 3)), (True, (2, 0, 3)), (False, (0, 3))])
def test_recurrent_layers_refuse_an_empty_sequence(kind, batch_first, shape):
    layer = getattr(nn, kind)(3, 4, batch_first=batch_first)
    with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0 in RNN"):
        layer(onnxnn.zeros(*shape))


# What PyTorch's functionals refuse (a second pass over the normalization, dropout and embedding layers).
REFUSED = [
    (
        "group_norm_one_value_per_group",
        lambda: F.group_norm(onnxnn.tensor([[0.5, 1.5]]), 2),
        ValueError,
        "more than 1 value per channel",
    ),
    (
        "instance_norm_running_mean_alone",
        lambda: F.instance_norm(onnxnn.ones(2, 3, 4), onnxnn.zeros(3), None),
        ValueError,
        "both be None or neither",
    ),
    ("layer_norm_int_shape", lambda: F.layer_norm(onnxnn.ones(2, 4), 4), TypeError, "tuple of ints, not int"),
    ("rms_norm_int_shape", lambda: F.rms_norm(onnxnn.ones(2, 4), 4), TypeError, "tuple of ints, not int"),
    (
        "dropout_of_integers",
        lambda: F.dropout(onnxnn.ones(6, dtype=onnxnn.int64), 0.5),
        RuntimeError,
        "result type Float can't be cast to the desired output type Long",
    ),
    (
        "dropout2d_of_bools",
        lambda: F.dropout2d(onnxnn.ones(2, 3, 2, 2, dtype=onnxnn.bool), 0.5),
        RuntimeError,
        "desired output type Bool",
    ),
    (
        "embedding_bag_max_scaled_by_frequency",
        lambda: nn.EmbeddingBag(5, 2, mode="max", scale_grad_by_freq=True)(onnxnn.tensor([[0, 1]])),
        ValueError,
        "max mode does not support scaling",
    ),
]


@pytest.mark.parametrize("call, error, message", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
def test_what_pytorch_refuses(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("p, dtype", [(0.0, "int64"), (1.0, "int64"), (1.0, "bool")])
def test_dropout_of_integers_that_needs_no_mask_is_accepted(p, dtype):
    # PyTorch returns the input (p = 0) or zeros (p = 1) without multiplying by a float mask.
    result = F.dropout(onnxnn.ones(4, dtype=getattr(onnxnn, dtype)), p)
    assert result.dtype == getattr(onnxnn, dtype) and result.tolist() == [p == 0.0] * 4


def test_embedding_of_no_indices_scaled_by_frequency():
    weight = onnxnn.ones(5, 2, requires_grad=True)
    rows = F.embedding(onnxnn.zeros(0, dtype=onnxnn.int64), weight, scale_grad_by_freq=True)
    assert tuple(rows.shape) == (0, 2)
    rows.sum().backward()
    np.testing.assert_array_equal(weight.grad.numpy(), np.zeros((5, 2), np.float32))
