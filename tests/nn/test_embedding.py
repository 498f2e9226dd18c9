"""Embedding and EmbeddingBag, with F.embedding and F.embedding_bag.

Lookups are checked against numpy indexing, bags against a plain loop over the bags (sum, mean,
max, with offsets, include_last_offset, per_sample_weights and padding_idx), gradients of the weight
and of per_sample_weights against float64 finite differences, and the gradient-shaping options
(padding_idx, scale_grad_by_freq) against their definitions. float32 sums of ``n`` rows agree to
``gamma(n)`` relative to the sum of magnitudes (tests/tolerances.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_gradients
from tolerances import gamma

import onnxnn
import onnxnn.nn.functional as F
from onnxnn import nn

from .layer_checks import EXECUTORS, exported_output

RNG = np.random.default_rng(44)


def _weight(rows=7, width=3, dtype=np.float32):
    return RNG.standard_normal((rows, width)).astype(dtype)


# ---------------------------------------------------------------- embedding


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    "indices",
    [np.array([3, 0, 6, 3]), np.array([[1, 2], [6, 0], [2, 2]]), np.array(4), np.zeros((2, 0), np.int64)],
    ids=["1d", "2d", "scalar", "empty"],
)
def test_embedding_looks_up_rows(indices, executor):
    weight = _weight()
    with onnxnn.set_executor(executor):
        out = F.embedding(onnxnn.tensor(indices), onnxnn.tensor(weight)).numpy()
    assert out.shape == indices.shape + (3,)
    np.testing.assert_array_equal(out, weight[indices])


def test_embedding_float64_and_float16_keep_the_weight_dtype():
    for dtype, onnx_dtype in ((np.float64, onnxnn.float64), (np.float16, onnxnn.float16)):
        weight = _weight(dtype=dtype)
        out = F.embedding(onnxnn.tensor([5, 1]), onnxnn.tensor(weight, dtype=onnx_dtype))
        assert out.dtype is onnx_dtype
        np.testing.assert_array_equal(out.numpy(), weight[[5, 1]])


def test_embedding_gradient_matches_finite_differences():
    indices = onnxnn.tensor([[1, 4, 1], [0, 6, 4]])
    check_gradients(lambda w: F.embedding(indices, w), [_weight(dtype=np.float64)])


def test_padding_row_is_zero_at_init_and_gets_no_gradient():
    module = nn.Embedding(6, 4, padding_idx=2)
    np.testing.assert_array_equal(module.weight.detach().numpy()[2], np.zeros(4, np.float32))
    with onnxnn.no_grad():
        module.weight.copy_(onnxnn.tensor(_weight(6, 4)))
    indices = np.array([[2, 0, 2], [5, 2, 0]])
    out = module(onnxnn.tensor(indices))
    np.testing.assert_array_equal(out.detach().numpy(), module.weight.detach().numpy()[indices])
    cotangent = RNG.standard_normal(out.shape).astype(np.float32)
    out.backward(onnxnn.tensor(cotangent))
    expected = np.zeros((6, 4), np.float32)
    np.add.at(expected, indices.reshape(-1), cotangent.reshape(-1, 4))
    expected[2] = 0
    np.testing.assert_allclose(module.weight.grad.numpy(), expected, rtol=0, atol=2 * gamma(3) * 4)


@pytest.mark.parametrize("build", [nn.Embedding, nn.EmbeddingBag], ids=["embedding", "bag"])
def test_the_padding_row_is_zeroed_at_once_as_the_init_fills_are(build):
    # Computed at construction: a first call then records the graph of every later call.
    onnxnn.manual_seed(0)
    module = build(6, 4, padding_idx=-2)
    assert module.weight._value.data is not None
    onnxnn.manual_seed(0)
    drawn = onnxnn.randn(6, 4).numpy().copy()  # the draw nn.init.normal_ made
    drawn[4] = 0
    np.testing.assert_array_equal(module.weight.detach().numpy(), drawn)


@pytest.mark.parametrize("padding_idx, row", [(-1, 5), (-6, 0), (3, 3)])
def test_negative_padding_idx_counts_from_the_end(padding_idx, row):
    assert nn.Embedding(6, 2, padding_idx=padding_idx).padding_idx == row


def test_scale_grad_by_freq_divides_each_rows_gradient_by_its_count():
    weight = onnxnn.tensor(_weight(5, 2), requires_grad=True)
    indices = np.array([1, 3, 1, 1, 4])
    out = F.embedding(onnxnn.tensor(indices), weight, scale_grad_by_freq=True)
    np.testing.assert_array_equal(out.detach().numpy(), weight.detach().numpy()[indices])
    out.backward(onnxnn.ones(5, 2))
    # Each occurrence contributes 1 / count: every row that occurs gets 1 in total.
    np.testing.assert_allclose(
        weight.grad.numpy(), np.array([[0, 0], [1, 1], [0, 0], [1, 1], [1, 1]]), rtol=0, atol=2 * gamma(3)
    )


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_max_norm_renormalizes_the_looked_up_rows_in_place(norm_type):
    values = _weight(6, 4) * 3
    module = nn.Embedding.from_pretrained(onnxnn.tensor(values), max_norm=1.5, norm_type=norm_type)
    indices = np.array([0, 2, 2, 5])
    out = module(onnxnn.tensor(indices)).numpy()
    expected = values.astype(np.float64).copy()
    for row in np.unique(indices):
        norm = np.linalg.norm(expected[row], ord=norm_type)
        if norm > 1.5:
            expected[row] *= 1.5 / (norm + 1e-7)
    np.testing.assert_allclose(module.weight.detach().numpy(), expected, rtol=8 * 2.0**-24, atol=0)
    np.testing.assert_array_equal(out, module.weight.detach().numpy()[indices])
    untouched = [1, 3, 4]
    np.testing.assert_array_equal(module.weight.detach().numpy()[untouched], values[untouched])


@pytest.mark.parametrize("dtype", [onnxnn.float16, onnxnn.float32, onnxnn.float64])
@pytest.mark.parametrize("max_norm", [0.5, 1.0, 1.5, 2.0])
def test_max_norm_with_norm_type_0_counts_nonzeros(max_norm, dtype):
    # PyTorch's embedding_renorm_: norm = number of nonzero entries; a row over max_norm is scaled by
    # max_norm / (norm + 1e-7), computed in double, rounded to the weight's dtype, multiplied in its
    # opmath (float32 for float16).
    rows = np.array([[3.0, 4.0], [0.1, 0.2], [0.0, 0.0], [5.0, 0.0], [0.3, -0.7]])
    weight = onnxnn.tensor(rows, dtype=dtype)
    values = weight.numpy().copy()
    F.embedding(onnxnn.tensor([0, 1, 2, 3, 0]), weight, max_norm=max_norm, norm_type=0.0)
    opmath = np.float64 if dtype == onnxnn.float64 else np.float32
    expected = values.copy()
    for row in range(4):  # row 4 is not looked up
        count = np.count_nonzero(values[row])
        if count > max_norm:
            scale = np.asarray(max_norm / (count + 1e-7)).astype(values.dtype).astype(opmath)
            expected[row] = (values[row].astype(opmath) * scale).astype(values.dtype)
    np.testing.assert_array_equal(weight.numpy(), expected)


def test_from_pretrained_freezes_unless_asked_not_to():
    values = onnxnn.tensor(_weight(3, 2))
    frozen = nn.Embedding.from_pretrained(values)
    assert not frozen.weight.requires_grad
    np.testing.assert_array_equal(frozen(onnxnn.tensor([2, 0])).numpy(), values.numpy()[[2, 0]])
    assert nn.Embedding.from_pretrained(values, freeze=False).weight.requires_grad
    assert nn.EmbeddingBag.from_pretrained(values, mode="sum").mode == "sum"


def test_weight_is_drawn_from_a_standard_normal():
    weight = nn.Embedding(2000, 50).weight.detach().numpy().astype(np.float64)
    n = weight.size
    assert abs(weight.mean()) < 5 / math.sqrt(n)
    assert abs(weight.var() - 1) < 5 * math.sqrt(2 / n)  # Var of a sample variance of N(0, 1): 2 / n


@pytest.mark.parametrize(
    "module, text, keys",
    [
        (nn.Embedding(10, 3), "Embedding(10, 3)", {"weight": (10, 3)}),
        (
            nn.Embedding(10, 3, padding_idx=0, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True),
            "Embedding(10, 3, padding_idx=0, max_norm=1.0, norm_type=1.0, scale_grad_by_freq=True)",
            {"weight": (10, 3)},
        ),
        (nn.EmbeddingBag(10, 3), "EmbeddingBag(10, 3, mode='mean')", {"weight": (10, 3)}),
        (
            nn.EmbeddingBag(10, 3, mode="max", padding_idx=1),
            "EmbeddingBag(10, 3, mode='max', padding_idx=1)",
            {"weight": (10, 3)},
        ),
    ],
)
def test_repr_and_state_dict_are_pytorchs(module, text, keys):
    assert repr(module) == text
    assert {k: tuple(v.shape) for k, v in module.state_dict().items()} == keys


def test_repr_matches_torch():
    torch = pytest.importorskip("torch")
    for args, kwargs in (
        ((10, 3), {}),
        ((10, 3), {"padding_idx": -2, "max_norm": 2.0}),
        ((5, 2), {"scale_grad_by_freq": True, "norm_type": 3.0}),
    ):
        assert repr(nn.Embedding(*args, **kwargs)) == repr(torch.nn.Embedding(*args, **kwargs))
        assert repr(nn.EmbeddingBag(*args, **kwargs)) == repr(torch.nn.EmbeddingBag(*args, **kwargs))


def test_embedding_exports_to_a_gather_onnxruntime_runs():
    module = nn.Embedding(8, 3, padding_idx=0)
    indices = onnxnn.tensor([[0, 3, 7], [2, 2, 1]])
    np.testing.assert_array_equal(exported_output(module, indices), module.weight.detach().numpy()[indices.numpy()])


def test_a_lookup_is_one_gather_over_indices_of_any_rank_with_pytorchs_grad_fn():
    module = nn.Embedding(8, 3)
    indices = onnxnn.tensor([[[0, 3], [7, 1]], [[2, 2], [5, 6]]])
    looked_up = module(indices)
    node = looked_up._value.node
    assert (node.op_type, node.inputs[1]) == ("Gather", indices._value)
    assert looked_up.grad_fn.name() == "EmbeddingBackward0"
    np.testing.assert_array_equal(looked_up.detach().numpy(), module.weight.detach().numpy()[indices.numpy()])


# ---------------------------------------------------------------- embedding_bag


def bag_reference(weight, flat, starts, ends, mode, sample_weights=None, padding_idx=None):
    out = np.zeros((len(starts), weight.shape[1]))
    for b, (start, end) in enumerate(zip(starts, ends)):
        members = [i for i in range(start, end) if flat[i] != padding_idx]
        if not members:
            continue
        rows = weight[flat[members]].astype(np.float64)
        if sample_weights is not None:
            rows = rows * sample_weights[members, None]
        out[b] = rows.sum(0) if mode == "sum" else rows.mean(0) if mode == "mean" else rows.max(0)
    return out


BAG_CASES = [
    # name, indices, offsets, include_last_offset, padding_idx
    ("offsets", [1, 2, 4, 5, 4, 3, 2, 6], [0, 4], False, None),
    ("empty_bags", [1, 2, 4, 5], [0, 0, 3, 4], False, None),
    ("include_last_offset", [1, 2, 4, 5, 4, 3], [0, 2, 5, 6], True, None),
    ("include_last_offset_short", [1, 2, 4, 5, 4, 3], [0, 2, 4], True, None),
    ("padding", [0, 2, 0, 5, 0, 0], [0, 3, 4], False, 0),
    ("fixed_length_2d", [[1, 2, 3], [6, 6, 0]], None, False, None),
]


def _bag_layout(indices, offsets, include_last_offset):
    values = np.asarray(indices)
    if values.ndim == 2:
        count, length = values.shape
        return values.reshape(-1), np.arange(count) * length, np.arange(1, count + 1) * length
    starts = np.asarray(offsets)
    if include_last_offset:
        starts = starts[:-1]  # the last bag still runs to the end of the input, as in PyTorch
    return values, starts, np.append(starts[1:], values.size)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize(
    "name, indices, offsets, include_last_offset, padding_idx", BAG_CASES, ids=[c[0] for c in BAG_CASES]
)
def test_embedding_bag_matches_a_loop_over_the_bags(
    name, indices, offsets, include_last_offset, padding_idx, mode, executor
):
    weight = _weight()
    flat, starts, ends = _bag_layout(indices, offsets, include_last_offset)
    expected = bag_reference(weight, flat, starts, ends, mode, padding_idx=padding_idx)
    with onnxnn.set_executor(executor):
        out = F.embedding_bag(
            onnxnn.tensor(indices),
            onnxnn.tensor(weight),
            None if offsets is None else onnxnn.tensor(offsets),
            mode=mode,
            include_last_offset=include_last_offset,
            padding_idx=padding_idx,
        ).numpy()
    terms = max(int(np.max(ends - starts)), 1)
    bound = 2 * gamma(terms + 1) * np.abs(weight).max() * terms
    np.testing.assert_allclose(out, expected, rtol=0, atol=bound)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_gradient_matches_finite_differences(mode):
    indices, offsets = onnxnn.tensor([1, 2, 4, 5, 4, 3, 2]), onnxnn.tensor([0, 3, 3])
    check_gradients(lambda w: F.embedding_bag(indices, w, offsets, mode=mode), [_weight(dtype=np.float64)])


def _first_maximum_gradient(weight, flat, starts, ends, cotangent, padding_idx=None):
    """mode='max''s weight gradient as PyTorch's CPU kernel gives it: per bag and column, all of the
    cotangent to the first member row holding the maximum (max_indices), none to rows tied with it."""
    gradient = np.zeros_like(weight)
    for b, (start, end) in enumerate(zip(starts, ends)):
        members = [flat[i] for i in range(start, end) if flat[i] != padding_idx]
        for column in range(weight.shape[1]):
            if members:
                values = weight[members, column]
                gradient[members[int(np.argmax(values))], column] += cotangent[b, column]
    return gradient


TIED_BAG_CASES = [
    # name, indices, offsets, padding_idx: rows 0, 1 and 2 of TIED_WEIGHT tie in some column
    ("distinct_rows", [2, 0, 1, 3, 1, 0], [0, 4], None),
    ("a_row_twice", [3, 1, 1, 2, 2, 0], [0, 3], None),
    ("fixed_length_2d", [[2, 0, 1, 3], [1, 0, 3, 3]], None, None),
    ("padding_before_the_first_maximum", [2, 0, 1, 3, 1, 2], [0, 4], 2),
]
TIED_WEIGHT = np.array([[1.0, 5.0], [1.0, 5.0], [0.0, 5.0], [1.0, 2.0]])


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("name, indices, offsets, padding_idx", TIED_BAG_CASES, ids=[c[0] for c in TIED_BAG_CASES])
def test_embedding_bag_max_gives_a_tie_gradient_to_the_first_maximum(name, indices, offsets, padding_idx, executor):
    flat, starts, ends = _bag_layout(indices, offsets, False)
    cotangent = np.array([[1.0, 10.0], [100.0, 1000.0]])
    with onnxnn.set_executor(executor):
        weight = onnxnn.tensor(TIED_WEIGHT, requires_grad=True)
        out = F.embedding_bag(
            onnxnn.tensor(indices),
            weight,
            None if offsets is None else onnxnn.tensor(offsets),
            mode="max",
            padding_idx=padding_idx,
        )
        out.backward(onnxnn.tensor(cotangent))
        values, gradient = out.detach().numpy(), weight.grad.numpy()
    maxima = bag_reference(TIED_WEIGHT, flat, starts, ends, "max", padding_idx=padding_idx)
    np.testing.assert_array_equal(values, maxima)
    expected = _first_maximum_gradient(TIED_WEIGHT, flat, starts, ends, cotangent, padding_idx)
    np.testing.assert_array_equal(gradient, expected)


def test_per_sample_weights_scale_each_row_and_get_a_gradient():
    indices, offsets = np.array([1, 2, 4, 5, 4]), np.array([0, 2])
    weight, samples = _weight(dtype=np.float64), RNG.uniform(0.5, 2, 5)
    out = F.embedding_bag(
        onnxnn.tensor(indices),
        onnxnn.tensor(weight),
        onnxnn.tensor(offsets),
        mode="sum",
        per_sample_weights=onnxnn.tensor(samples),
    ).numpy()
    np.testing.assert_allclose(
        out, bag_reference(weight, indices, [0, 2], [2, 5], "sum", samples), rtol=1e-14, atol=1e-14
    )
    check_gradients(
        lambda w, s: F.embedding_bag(
            onnxnn.tensor(indices), w, onnxnn.tensor(offsets), mode="sum", per_sample_weights=s
        ),
        [weight, samples],
    )


def test_embedding_bag_module_matches_torch():
    torch = pytest.importorskip("torch")
    weight = _weight(dtype=np.float64)
    indices, offsets, samples = [1, 2, 4, 0, 4, 3], [0, 2, 2, 5], RNG.uniform(0.5, 2, 6)
    for mode, padding_idx, per_sample in (("mean", None, None), ("max", 0, None), ("sum", 4, samples)):
        ours = nn.EmbeddingBag.from_pretrained(onnxnn.tensor(weight), freeze=False, mode=mode, padding_idx=padding_idx)
        theirs = torch.nn.EmbeddingBag.from_pretrained(
            torch.tensor(weight), freeze=False, mode=mode, padding_idx=padding_idx
        )
        o = ours(
            onnxnn.tensor(indices), onnxnn.tensor(offsets), None if per_sample is None else onnxnn.tensor(per_sample)
        )
        t = theirs(
            torch.tensor(indices), torch.tensor(offsets), None if per_sample is None else torch.tensor(per_sample)
        )
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-14, atol=1e-14)
        cotangent = RNG.standard_normal(tuple(t.shape))
        o.backward(onnxnn.tensor(cotangent))
        t.backward(torch.tensor(cotangent))
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-14, atol=1e-14)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: nn.Embedding(5, 2)(onnxnn.tensor([1, 5])),
            IndexError,
            r"index out of range in self: index 5 is not in "
            r"\[0, 5\)",
        ),
        (lambda: nn.Embedding(5, 2)(onnxnn.tensor([-1])), IndexError, "index out of range in self"),
        (
            lambda: nn.Embedding(5, 2)(onnxnn.tensor([1.0])),
            RuntimeError,
            "'indices' to have one of the following scalar types: Long, Int",
        ),
        (lambda: nn.Embedding(5, 2, padding_idx=5), AssertionError, "Padding_idx must be within num_embeddings"),
        (lambda: nn.Embedding(5, 2, padding_idx=-6), AssertionError, "Padding_idx must be within num_embeddings"),
        (lambda: nn.Embedding(5, 2, sparse=True), NotImplementedError, "onnxnn has no sparse gradients"),
        (lambda: nn.EmbeddingBag(5, 2, sparse=True), NotImplementedError, "onnxnn has no sparse gradients"),
        (lambda: nn.Embedding(5, 2, _weight=onnxnn.zeros(4, 2)), AssertionError, "Shape of weight does not match"),
        (lambda: nn.Embedding.from_pretrained(onnxnn.zeros(4)), AssertionError, "expected to be 2-dimensional"),
        (
            lambda: nn.EmbeddingBag(5, 2)(onnxnn.tensor([1, 2])),
            ValueError,
            "offsets has to be a 1D Tensor but got None",
        ),
        (
            lambda: nn.EmbeddingBag(5, 2)(onnxnn.tensor([[1, 2]]), onnxnn.tensor([0])),
            ValueError,
            "if input is 2D, then offsets has to be None",
        ),
        (
            lambda: nn.EmbeddingBag(5, 2)(onnxnn.tensor([1, 2]), onnxnn.tensor([1])),
            RuntimeError,
            "offsets\\[0\\] has to be 0",
        ),
        (lambda: nn.EmbeddingBag(5, 2, mode="min"), None, None),
        (
            lambda: F.embedding_bag(onnxnn.tensor([1]), onnxnn.zeros(5, 2), onnxnn.tensor([0]), mode="min"),
            ValueError,
            "mode has to be one of sum, mean or max",
        ),
        (
            lambda: nn.EmbeddingBag(5, 2)(onnxnn.tensor([1, 2]), onnxnn.tensor([0]), onnxnn.ones(2)),
            NotImplementedError,
            "per_sample_weights is only supported for mode='sum' \\(got mode='mean'\\)",
        ),
        (
            lambda: nn.EmbeddingBag(5, 2, mode="sum")(onnxnn.tensor([1, 2]), onnxnn.tensor([0]), onnxnn.ones(3)),
            ValueError,
            "must have the same shape as the input",
        ),
    ],
)
def test_bad_input_raises_pytorchs_error(call, error, message):
    if error is None:
        call()  # PyTorch checks the mode at the call, not at construction
        return
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_exported_embedding_bag_takes_new_indices_and_offsets(mode):
    import onnx
    import onnxruntime

    from onnxnn.export import to_onnx

    module = nn.EmbeddingBag(7, 3, mode=mode, padding_idx=0).eval()
    proto = to_onnx(
        module, (onnxnn.tensor([1, 2, 4, 5, 4, 3]), onnxnn.tensor([0, 2, 2])), input_names=["input", "offsets"]
    )
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    indices, offsets = np.array([6, 0, 0, 1, 2, 2]), np.array([0, 1, 5])  # other values, same lengths
    (result,) = session.run(None, {"input": indices, "offsets": offsets})
    weight = module.weight.detach().numpy()
    expected = bag_reference(weight, indices, offsets, [1, 5, 6], mode, padding_idx=0)
    np.testing.assert_allclose(result, expected, rtol=0, atol=2 * gamma(5) * 4 * np.abs(weight).max())
