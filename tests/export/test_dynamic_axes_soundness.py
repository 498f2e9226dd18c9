"""Exports with dynamic axes that must be right at every size, or refused; and exports whose trace reads
data, which must warn.

Each model is exported at one example size, run by plain onnxruntime at other sizes and compared with
onnxnn's own forward at those sizes. A size the export cannot write as a computation of the axes' sizes
must raise the "depends on the dynamic axis" error, never be written as it was traced.
"""

import warnings

import numpy as np
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx
from onnxnn.export.onnx_export import TracerWarning

F = nn.functional


class _Function(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


def _pad_time_to_a_multiple_of_8(x):
    padded = F.pad(x, (0, 0, 0, (8 - x.size(1) % 8) % 8))
    return padded.reshape(padded.size(0), -1, 8, padded.size(2)).mean(2)


def _causal_attention_over_a_cache(x, past):
    # A KV cache: the new steps attend to the P cached ones and to themselves, causally.
    steps, cached = x.size(1), past.size(1)
    keys = onnxnn.cat([past, x], 1)
    scores = x @ keys.transpose(1, 2)
    mask = onnxnn.ones(steps, cached + steps, dtype=onnxnn.bool).triu(cached + 1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1) @ keys


class _LearnedPositions(nn.Module):
    """GPT-2's positions: an embedding of ``arange(T)`` added to the input."""

    def __init__(self):
        super().__init__()
        self.positions = nn.Embedding(64, 8)

    def forward(self, x):
        return x + self.positions(onnxnn.arange(x.size(1)))


class _CausalEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
        return self.encoder(x, mask=mask, is_causal=True)


def _run_at(session, names: list[str], shapes: tuple, seed: int) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    return arrays, session.run(None, dict(zip(names, arrays)))


_X_AND_PAST = {"x": {0: "b", 1: "t"}, "past": {0: "b", 1: "p"}}

# (id, forward, example shapes, dynamic axes, shapes to run at, float32 operations per output element:
# 0 compares exactly). The exports these replace were wrong at every size but the traced one.
EXPORTED_RIGHT = [
    # P + T (a KV cache's length) was fitted as 4*b - 1: the growths of t and p added up to 4 times b's.
    (
        "sum-of-two-axes",
        lambda x, past: onnxnn.ones(x.size(0), past.size(1) + x.size(1)).cumsum(-1),
        ((2, 3, 8), (2, 4, 8)),
        _X_AND_PAST,
        (((1, 2, 8), (1, 3, 8)), ((3, 5, 8), (3, 1, 8)), ((17, 1, 8), (17, 33, 8))),
        0,
    ),
    (
        "cache-concatenated-and-viewed",
        lambda x, past: onnxnn.cat([past, x], 1).view(x.size(0), past.size(1) + x.size(1), 2, 4),
        ((2, 3, 8), (2, 4, 8)),
        _X_AND_PAST,
        (((1, 2, 8), (1, 3, 8)), ((17, 1, 8), (17, 33, 8))),
        0,
    ),
    # Scores over 8 features, a softmax over up to 34 keys and a sum of as many products.
    (
        "causal-mask-over-a-cache",
        _causal_attention_over_a_cache,
        ((2, 3, 8), (2, 4, 8)),
        _X_AND_PAST,
        (((1, 2, 8), (1, 3, 8)), ((2, 9, 8), (2, 7, 8)), ((3, 1, 8), (3, 33, 8))),
        8 + 3 * 34,
    ),
    # Constant graph outputs that follow an axis were written at the traced size.
    (
        "full-of-a-size-as-an-output",
        lambda x: (x.sum(1), onnxnn.full((x.size(0),), x.size(2), dtype=onnxnn.long)),
        ((2, 4, 6),),
        {"x": {0: "b", 2: "t"}},
        (((5, 4, 9),), ((1, 4, 2),)),
        0,
    ),
    (
        "zeros-of-the-batch-as-an-output",
        lambda x: onnxnn.zeros(x.size(0), 3),
        ((2, 4, 6),),
        {"x": {0: "b"}},
        (((5, 4, 6),),),
        0,
    ),
    (
        "zeros-like-as-an-output",
        lambda x: onnxnn.zeros_like(x),
        ((2, 4, 6),),
        {"x": {0: "b", 2: "t"}},
        (((5, 4, 9),),),
        0,
    ),
    ("new-ones-as-an-output", lambda x: x.new_ones(x.size(0)), ((2, 4, 6),), {"x": {0: "b"}}, (((7, 4, 6),),), 0),
    # A NaN constant (logsumexp's guard of an all -inf row) raised "not a whole number": NaN != NaN.
    # Exp, a sum of 4 terms and log: about 8 roundings.
    ("logsumexp", lambda x: x.logsumexp(-1), ((2, 4),), {"x": {0: "b"}}, (((5, 4),), ((1, 4),)), 8),
    ("fill-with-nan", lambda x: x.masked_fill(x > 0, float("nan")), ((2, 4),), {"x": {0: "b"}}, (((5, 4),),), 0),
    # arange(T) over a dynamic axis was refused; each is a Range over the axis's size now.
    (
        "positions-from-arange",
        lambda x: x + onnxnn.arange(x.size(1)).view(1, -1, 1),
        ((2, 3, 4),),
        {"x": {0: "b", 1: "t"}},
        (((1, 1, 4),), ((3, 9, 4),), ((17, 33, 4),)),
        1,
    ),
    ("learned-positions", _LearnedPositions(), ((2, 3, 8),), {"x": {0: "b", 1: "t"}}, (((1, 1, 8),), ((4, 33, 8),)), 1),
    (
        "arange-with-a-start-and-a-step",
        lambda x: x * onnxnn.arange(-1, 2 * x.size(0) - 1, 2, dtype=onnxnn.float32).unsqueeze(1),
        ((3, 4),),
        {"x": {0: "b"}},
        (((1, 4),), ((2, 4),), ((17, 4),)),
        1,
    ),
    (
        "arange-over-a-cache",
        lambda x, past: x + onnxnn.arange(past.size(1), past.size(1) + x.size(1)).view(1, -1, 1),
        ((2, 3, 8), (2, 4, 8)),
        _X_AND_PAST,
        (((1, 2, 8), (1, 3, 8)), ((3, 1, 8), (3, 33, 8))),
        1,
    ),
    # Causal masks of a dynamic length were refused (a 0/-inf triangle, "read by Add"). Attention over
    # up to 33 keys of 4 or 8 features: the scores' sums, a softmax and the weighted sum.
    (
        "square-subsequent-mask",
        lambda x: (x @ x.transpose(1, 2)) + nn.Transformer.generate_square_subsequent_mask(x.size(1)),
        ((2, 3, 4),),
        {"x": {0: "b", 1: "t"}},
        (((1, 2, 4),), ((3, 9, 4),), ((2, 33, 4),)),
        4,
    ),
    (
        "attention-is-causal",
        lambda x: F.scaled_dot_product_attention(x, x, x, is_causal=True),
        ((2, 3, 4),),
        {"x": {0: "b", 1: "t"}},
        (((1, 2, 4),), ((3, 9, 4),), ((2, 33, 4),)),
        4 + 3 * 33,
    ),
    # One layer: the projections' sums of 8 or 16 products, scores over 8 features, a softmax and a
    # weighted sum over up to 33 keys, two layer norms over 8 features.
    (
        "encoder-is-causal",
        _CausalEncoder(),
        ((2, 3, 8),),
        {"x": {0: "b", 1: "t"}},
        (((1, 2, 8),), ((3, 9, 8),), ((2, 33, 8),)),
        5 * 8 + 16 + 2 * 33 + 2 * 8,
    ),
    # topk(min(k, T)) took k in every trace (example T >= k) and failed below it in onnxruntime, or
    # was refused (example T < k).
    (
        "topk-of-at-most-4-traced-longer",
        lambda x: x.topk(min(4, x.size(1)), dim=1)[0],
        ((2, 6, 3),),
        {"x": {0: "b", 1: "t"}},
        (((1, 1, 3),), ((3, 2, 3),), ((2, 33, 3),)),
        0,
    ),
    (
        "topk-of-at-most-4-traced-shorter",
        lambda x: x.topk(min(4, x.size(1)), dim=1, largest=False)[1],
        ((2, 3, 3),),
        {"x": {0: "b", 1: "t"}},
        (((1, 1, 3),), ((3, 4, 3),), ((2, 33, 3),)),
        0,
    ),
    (
        "attention-is-causal-over-a-cache",
        lambda x, past: F.scaled_dot_product_attention(
            x, onnxnn.cat([past, x], 1), onnxnn.cat([past, x], 1), is_causal=True
        ),
        ((2, 3, 8), (2, 4, 8)),
        _X_AND_PAST,
        (((1, 2, 8), (1, 3, 8)), ((3, 1, 8), (3, 33, 8))),
        8 + 3 * 34,
    ),
]


@pytest.mark.parametrize(
    "name, forward, shapes, dynamic_axes, run_shapes, operations", EXPORTED_RIGHT, ids=[m[0] for m in EXPORTED_RIGHT]
)
def test_an_export_with_dynamic_axes_is_right_at_other_sizes(
    name, forward, shapes, dynamic_axes, run_shapes, operations
):
    model = _Function(forward).eval()
    names = list(dynamic_axes)
    onnxnn.manual_seed(0)
    example = tuple(onnxnn.randn(*shape) for shape in shapes)
    proto = to_onnx(model, example, input_names=names, dynamic_axes=dynamic_axes)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed, run_shape in enumerate(run_shapes):
        arrays, results = _run_at(session, names, run_shape, seed)
        expected = model(*(onnxnn.tensor(array) for array in arrays))
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(results) == len(expected)
        for result, wanted in zip(results, expected):
            wanted = wanted.detach().numpy()
            assert result.shape == wanted.shape
            finite = wanted[np.isfinite(wanted)]
            bound = 2 * operations * 2.0**-24 * max(1.0, float(np.abs(finite).max(initial=0.0)))
            np.testing.assert_allclose(result, wanted, rtol=0, atol=bound, equal_nan=True)


# (id, forward, example shape, dynamic axes, the error's op and axis). These were written as lines
# through the traces near the example: silently wrong at other sizes.
REFUSED = [
    # The pad over t = 3, 6, 8 was 5, 2, 0: fitted as 8 - t, which crops every longer input.
    ("pad-to-a-multiple-of-8", _pad_time_to_a_multiple_of_8, (2, 3, 4), {"x": {0: "b", 1: "t"}}, "Pad", "'t'"),
    ("pad-to-a-multiple-of-8-one-axis", _pad_time_to_a_multiple_of_8, (2, 5, 4), {"x": {1: "t"}}, "Pad", "'t'"),
    # 2 * ceil(T / 2) took 6, 10, 12 while b took 2, 4, 5: fitted as 2*b + 2.
    (
        "upsampled-after-a-stride-of-2",
        lambda x: F.interpolate(x[:, :, ::2], scale_factor=2, mode="nearest"),
        (2, 4, 6),
        {"x": {0: "b", 2: "t"}},
        "Resize",
        "'t'",
    ),
]


@pytest.mark.parametrize("name, forward, shape, dynamic_axes, op_type, axis", REFUSED, ids=[m[0] for m in REFUSED])
def test_a_size_not_linear_in_the_axes_is_refused_naming_the_op_and_the_axis(
    name, forward, shape, dynamic_axes, op_type, axis
):
    pattern = f"a size used by {op_type} .* depends on the dynamic axis {axis}"
    with pytest.raises(RuntimeError, match=pattern):
        to_onnx(_Function(forward).eval(), onnxnn.randn(*shape), input_names=["x"], dynamic_axes=dynamic_axes)


class _PackedLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.recurrent = nn.LSTM(8, 6, batch_first=True)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        output, _ = self.recurrent(packed)
        return nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=x.size(1))[0]


# (id, module, example arguments, what the warning says). Each export holds what the example's data
# decided, and was silent.
DATA_READ = [
    (
        "packed-sequence-lengths",
        _PackedLSTM(),
        (onnxnn.randn(3, 4, 8), onnxnn.tensor(np.array([4, 2, 1]))),
        r"graph input\(s\) \['input_1'\] are read by no node",
    ),
    (
        "boolean-mask-index",
        _Function(lambda x: x[x > 0]),
        (onnxnn.randn(3, 4),),
        "read tensor data while it was traced",
    ),
    ("masked-select", _Function(lambda x: x.masked_select(x > 0)), (onnxnn.randn(3, 4),), "read tensor data"),
    ("unique", _Function(lambda x: onnxnn.unique(x.round())), (onnxnn.randn(3, 4),), "read tensor data"),
    ("branch-on-data", _Function(lambda x: x * 2 if x.sum() > 0 else x * 3), (onnxnn.randn(3, 4),), "read tensor data"),
]


@pytest.mark.parametrize("name, module, args, message", DATA_READ, ids=[m[0] for m in DATA_READ])
def test_an_export_that_holds_what_the_data_decided_warns(name, module, args, message):
    with pytest.warns(TracerWarning, match=message):
        to_onnx(module.eval(), args)


def test_reading_only_an_input_s_indices_does_not_warn():
    # Embedding reads its indices to check their range: nothing of them is written into the graph.
    # (A guard against false alarms: it passes before the warning existed too.)
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        to_onnx(model, onnxnn.tensor(np.array([[1, 2, 3]])), dynamic_axes={"input_0": {0: "b", 1: "t"}})


# (id, forward): a random draw in the forward is written as constants, so each run of the file repeats it.
RANDOM_DRAWS = [
    ("randn_like", lambda x: x + onnxnn.randn_like(x)),
    ("rand", lambda x: x + onnxnn.rand(3, 4)),
    ("normal_", lambda x: x + onnxnn.empty(3, 4).normal_()),
    ("normal-of-tensors", lambda x: onnxnn.normal(x, 1.0)),
    ("multinomial", lambda x: x + onnxnn.multinomial(onnxnn.ones(3, 4), 4, replacement=True).float()),
    ("rrelu-training", lambda x: F.rrelu(x, training=True)),
]


@pytest.mark.parametrize("name, forward", RANDOM_DRAWS, ids=[m[0] for m in RANDOM_DRAWS])
def test_an_export_that_holds_random_draws_warns_naming_the_call(name, forward):
    # The call site is this file's line of the table above.
    with pytest.warns(TracerWarning, match=r"drew random numbers while it was traced, at .*test_dynamic_axes"):
        to_onnx(_Function(forward).eval(), (onnxnn.randn(3, 4),))


def test_dropout_in_a_training_export_does_not_warn_of_random_draws():
    # Dropout is written as an ONNX Dropout node that draws on every run: nothing random is held.
    # (A guard against false alarms: it passes before the warning existed too.)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.AlphaDropout(0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TracerWarning)
        to_onnx(model, (onnxnn.randn(3, 4),), training=True)
