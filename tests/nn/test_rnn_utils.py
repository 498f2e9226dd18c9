"""nn.utils.rnn: packing and padding of variable-length sequences.

A packed batch lists, for each time step ``t``, the step-``t`` elements of the sequences longer
than ``t`` in decreasing-length order; ``batch_sizes[t]`` counts them. The expectations below build
that layout with numpy loops over the sequences. Packing only moves elements, so values must match
exactly; gradients (a scatter back through the gathers) are checked by float64 finite differences.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_gradients

import onnxnn
from onnxnn.nn.utils import rnn

from .layer_checks import EXECUTORS

RNG = np.random.default_rng(1301)


def packed_reference(padded: np.ndarray, lengths, batch_first: bool):
    """(data, batch_sizes, order): the packed layout built sequence by sequence."""
    sequences = padded if batch_first else np.swapaxes(padded, 0, 1)
    order = sorted(range(len(lengths)), key=lambda b: -lengths[b])  # stable, like a stable descending sort
    batch_sizes = [sum(1 for length in lengths if length > t) for t in range(max(lengths))]
    data = [sequences[b][t] for t in range(max(lengths)) for b in order if lengths[b] > t]
    return np.stack(data), np.array(batch_sizes), np.array(order)


# (id, padded shape, lengths, batch_first)
PACK_CASES = [
    ("sorted-time-major", (4, 3, 2), [4, 2, 1], False),
    ("unsorted-time-major", (4, 3, 2), [2, 4, 1], False),
    ("unsorted-batch-first", (3, 5, 2), [3, 5, 1], True),
    ("ties-and-extra-dims", (4, 3, 2, 2), [2, 3, 2, 1], True),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, shape, lengths, batch_first", PACK_CASES, ids=[c[0] for c in PACK_CASES])
def test_pack_padded_sequence_lists_steps_of_running_sequences(case_id, shape, lengths, batch_first, executor):
    padded = RNG.standard_normal(shape).astype(np.float32)
    data, batch_sizes, order = packed_reference(padded, lengths, batch_first)
    with onnxnn.set_executor(executor):
        packed = rnn.pack_padded_sequence(
            onnxnn.tensor(padded), onnxnn.tensor(lengths), batch_first=batch_first, enforce_sorted=False
        )
        np.testing.assert_array_equal(packed.data.numpy(), data)
    np.testing.assert_array_equal(packed.batch_sizes.numpy(), batch_sizes)
    assert packed.batch_sizes.dtype == onnxnn.int64
    np.testing.assert_array_equal(packed.sorted_indices.numpy(), order)
    np.testing.assert_array_equal(packed.unsorted_indices.numpy(), np.argsort(order))


def test_sorted_input_packs_without_a_permutation():
    packed = rnn.pack_padded_sequence(onnxnn.randn(3, 2, 1), [3, 2])
    assert packed.sorted_indices is None and packed.unsorted_indices is None
    assert isinstance(packed, tuple) and packed._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_packed_sequence_restores_order_and_pads(batch_first, executor):
    lengths = [2, 4, 1]
    padded = RNG.standard_normal((3, 4, 2) if batch_first else (4, 3, 2))
    with onnxnn.set_executor(executor):
        packed = rnn.pack_padded_sequence(onnxnn.tensor(padded), lengths, batch_first=batch_first, enforce_sorted=False)
        unpacked, out_lengths = rnn.pad_packed_sequence(
            packed, batch_first=batch_first, padding_value=-7.0, total_length=6
        )
        unpacked = unpacked.numpy()
    np.testing.assert_array_equal(out_lengths.numpy(), lengths)
    assert out_lengths.dtype == onnxnn.int64
    expected = np.full((3, 6, 2), -7.0)
    sequences = padded if batch_first else np.swapaxes(padded, 0, 1)
    for b, length in enumerate(lengths):
        expected[b, :length] = sequences[b, :length]
    np.testing.assert_array_equal(unpacked, expected if batch_first else np.swapaxes(expected, 0, 1))


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("batch_first, side", [(False, "right"), (True, "right"), (True, "left")])
def test_pad_sequence_stacks_and_pads_on_the_chosen_side(batch_first, side, executor):
    sequences = [RNG.standard_normal((n, 2)) for n in (2, 4, 1)]
    with onnxnn.set_executor(executor):
        result = rnn.pad_sequence(
            [onnxnn.tensor(s) for s in sequences], batch_first=batch_first, padding_value=3.0, padding_side=side
        ).numpy()
    expected = np.full((3, 4, 2), 3.0)
    for b, sequence in enumerate(sequences):
        if side == "right":
            expected[b, : len(sequence)] = sequence
        else:
            expected[b, 4 - len(sequence) :] = sequence
    np.testing.assert_array_equal(result, expected if batch_first else np.swapaxes(expected, 0, 1))


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack_sequence_round_trip(enforce_sorted):
    lengths = (4, 3, 1) if enforce_sorted else (1, 4, 3)
    sequences = [onnxnn.tensor(RNG.standard_normal((n, 3))) for n in lengths]
    packed = rnn.pack_sequence(sequences, enforce_sorted=enforce_sorted)
    np.testing.assert_array_equal(packed.batch_sizes.numpy(), [3, 2, 2, 1])
    for original, restored in zip(sequences, rnn.unpack_sequence(packed)):
        np.testing.assert_array_equal(restored.numpy(), original.numpy())


@pytest.mark.parametrize(
    "method, dtype",
    [
        ("float", onnxnn.float32),
        ("double", onnxnn.float64),
        ("half", onnxnn.float16),
        ("long", onnxnn.int64),
        ("int", onnxnn.int32),
        ("short", onnxnn.int16),
        ("char", onnxnn.int8),
        ("byte", onnxnn.uint8),
    ],
)
def test_a_packed_sequence_casts_its_data_and_keeps_its_indices(method, dtype):
    packed = rnn.pack_sequence([onnxnn.tensor([1.0, 2.0, 3.0]), onnxnn.tensor([4.0, 5.0, 6.0, 7.0])], False)
    cast = getattr(packed, method)()
    assert isinstance(cast, rnn.PackedSequence) and cast.data.dtype is dtype
    np.testing.assert_array_equal(cast.data.numpy(), packed.data.numpy().astype(dtype.numpy_dtype))
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        assert getattr(cast, field) is getattr(packed, field)
    assert packed.pin_memory().data.tolist() == packed.data.tolist()


def test_unpad_sequence_cuts_each_sequence_to_its_length():
    padded = RNG.standard_normal((4, 2, 3))
    pieces = rnn.unpad_sequence(onnxnn.tensor(padded), onnxnn.tensor([4, 2]))
    assert [tuple(p.shape) for p in pieces] == [(4, 3), (2, 3)]
    np.testing.assert_array_equal(pieces[1].numpy(), padded[:2, 1])


@pytest.mark.parametrize("executor", EXECUTORS)
def test_gradients_flow_through_pack_and_pad(executor):
    def pack_then_pad(x, scale):
        packed = rnn.pack_padded_sequence(x * scale, [2, 3, 1], enforce_sorted=False)
        return rnn.pad_packed_sequence(packed, padding_value=0.5)[0] * scale

    with onnxnn.set_executor(executor):
        check_gradients(pack_then_pad, [RNG.standard_normal((3, 3, 2)), RNG.standard_normal(2)])


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: rnn.pack_padded_sequence(onnxnn.randn(3, 2, 1), [2, 3]),
            RuntimeError,
            "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True",
        ),
        (
            lambda: rnn.pack_padded_sequence(onnxnn.randn(3, 2, 1), [2, 0]),
            RuntimeError,
            "Length of all samples has to be greater than 0",
        ),
        (
            lambda: rnn.pack_padded_sequence(onnxnn.randn(3, 2, 1), [2, 1, 1]),
            RuntimeError,
            r"Expected `len\(lengths\)` to be equal to batch_size, but got 3 \(batch_size=2\)",
        ),
        (
            lambda: rnn.pad_packed_sequence(rnn.pack_padded_sequence(onnxnn.randn(3, 2, 1), [3, 1]), total_length=2),
            ValueError,
            "Expected total_length to be at least the length of the longest sequence in input, but got "
            "total_length=2 and max sequence length being 3",
        ),
        (lambda: rnn.pad_sequence(5), RuntimeError, "pad_sequence: Expected iterable for input sequences"),
    ],
)
def test_bad_arguments_raise_pytorchs_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_matches_torch_packing():
    torch = pytest.importorskip("torch")
    padded = RNG.standard_normal((5, 4, 2)).astype(np.float32)
    lengths = [3, 5, 1, 4]  # distinct, so torch's (unstable) sort agrees with the stable one
    ours = rnn.pack_padded_sequence(onnxnn.tensor(padded), lengths, enforce_sorted=False)
    theirs = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(padded), torch.tensor(lengths), enforce_sorted=False)
    for field in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_array_equal(getattr(ours, field).numpy(), getattr(theirs, field).numpy())
    padded_ours, _ = rnn.pad_packed_sequence(ours, batch_first=True, padding_value=2.0)
    padded_theirs, _ = torch.nn.utils.rnn.pad_packed_sequence(theirs, batch_first=True, padding_value=2.0)
    np.testing.assert_array_equal(padded_ours.numpy(), padded_theirs.numpy())
