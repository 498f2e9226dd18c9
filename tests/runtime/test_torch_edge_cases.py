"""Edge cases where onnxnn's answer was not PyTorch's, found side by side with torch 2.13: each
expectation is PyTorch's documented behaviour, written as numpy or as the error it raises."""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: onnxnn.zeros(0).max(), RuntimeError, r"max\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(0).min(), RuntimeError, r"min\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(0).amax(), RuntimeError, r"amax\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(0).argmax(), IndexError, r"argmax\(\): Expected reduction dim to be specified"),
        (lambda: onnxnn.zeros(2, 0).max(dim=1), IndexError, r"max\(\): Expected reduction dim 1 to have non-zero"),
        (lambda: onnxnn.zeros(2, 0).amin(dim=-1), IndexError, r"amin\(\): Expected reduction dim 1 to have non-zero"),
        (lambda: onnxnn.zeros(0, 3).amax(dim=(0, 1)), IndexError, r"amax\(\): Expected reduction dim 0"),
        (lambda: onnxnn.zeros(2, 0).argmin(1), IndexError, r"argmin\(\): Expected reduction dim 1"),
        (lambda: onnxnn.zeros(0, 3).median(0), IndexError, r"median\(\): Expected reduction dim 0"),
        (lambda: onnxnn.zeros(0, 3).nanmedian(-2), IndexError, r"median\(\): Expected reduction dim 0"),
        (lambda: onnxnn.zeros(0, 3).kthvalue(1, 0), IndexError, r"kthvalue\(\): Expected reduction dim 0"),
        (lambda: onnxnn.zeros(3, 0).mode(1), IndexError, r"mode\(\): Expected reduction dim 1"),
    ],
)
def test_max_and_min_over_no_elements_are_refused(call, error, message):
    # ONNX's ReduceMax/ReduceMin give -inf/inf over no elements; PyTorch refuses them.
    with pytest.raises(error, match=message):
        call()


def test_max_and_min_along_a_nonempty_dim_of_an_empty_tensor_are_empty():
    empty = onnxnn.zeros(0, 3)
    assert tuple(empty.max(dim=1).values.shape) == (0,) and tuple(empty.amin(dim=1).shape) == (0,)
    assert tuple(empty.median(1).values.shape) == (0,) and tuple(empty.mode(1).indices.shape) == (0,)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: onnxnn.cat([]), ValueError, r"torch.cat\(\): expected a non-empty list of Tensors"),
        (lambda: onnxnn.stack([]), RuntimeError, "stack expects a non-empty TensorList"),
        (lambda: onnxnn.hstack([]), RuntimeError, "hstack expects a non-empty TensorList"),
        (lambda: onnxnn.vstack([]), RuntimeError, "vstack expects a non-empty TensorList"),
        (lambda: onnxnn.row_stack([]), RuntimeError, "vstack expects a non-empty TensorList"),
        (lambda: onnxnn.dstack([]), RuntimeError, "dstack expects a non-empty TensorList"),
        (lambda: onnxnn.column_stack([]), RuntimeError, "column_stack expects a non-empty TensorList"),
    ],
)
def test_joining_no_tensors_is_refused_as_pytorch_refuses_it(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_masked_fill_keeps_the_tensors_dtype():
    values = onnxnn.tensor([1, 5])
    mask = onnxnn.tensor([True, False])
    filled = values.masked_fill(mask, 2.7)  # the value becomes an int64, as PyTorch casts it
    assert filled.dtype is onnxnn.int64 and filled.tolist() == [2, 5]
    values.masked_fill_(mask, 2.7)
    assert values.dtype is onnxnn.int64 and values.tolist() == [2, 5]
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        values.masked_fill(onnxnn.tensor([1, 0]), 0)


def test_negating_an_unsigned_tensor_wraps_around():
    values = onnxnn.tensor([0, 1, 200], dtype=onnxnn.uint8)
    np.testing.assert_array_equal((-values).numpy(), -np.array([0, 1, 200], np.uint8))


def test_maximum_and_minimum_of_bool_tensors_are_or_and_and():
    a, b = onnxnn.tensor([True, True, False]), onnxnn.tensor([True, False, False])
    assert onnxnn.maximum(a, b).tolist() == [True, True, False] and onnxnn.maximum(a, b).dtype is onnxnn.bool
    assert onnxnn.minimum(a, b).tolist() == [True, False, False]


@pytest.mark.parametrize(
    "layout, shape",
    [
        ("contiguous_format", (1, 2, 3)),
        ("channels_last", (1, 2, 3, 4)),
        ("channels_last_3d", (1, 2, 1, 3, 4)),
        ("preserve_format", (2, 3)),
    ],
)
def test_memory_formats_are_accepted_and_change_nothing(layout, shape):
    memory_format = getattr(onnxnn, layout)
    assert isinstance(memory_format, onnxnn.memory_format) and repr(memory_format) == f"onnxnn.{layout}"
    x = onnxnn.arange(float(np.prod(shape))).reshape(shape)
    for converted in (x.contiguous(memory_format=memory_format), x.clone(memory_format=memory_format)):
        np.testing.assert_array_equal(converted.numpy(), x.numpy())


@pytest.mark.parametrize("layout, rank", [("channels_last", 4), ("channels_last_3d", 5)])
def test_a_channels_last_format_needs_its_rank(layout, rank):
    x = onnxnn.zeros(*([2] * (rank + 1)))
    with pytest.raises(RuntimeError, match=f"required rank {rank} tensor to use {layout} format"):
        x.contiguous(memory_format=getattr(onnxnn, layout))
    with pytest.raises(RuntimeError, match=f"required rank {rank}"):
        x.clone(memory_format=getattr(onnxnn, layout))


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "call, expected",
    [
        # Over no elements any() is False and all() True (ONNX's ReduceMax identity cast to bool was True).
        (lambda: onnxnn.zeros(0).any(), np.array(False)),
        (lambda: onnxnn.zeros(3, 0).any(dim=1), np.zeros(3, bool)),
        (lambda: onnxnn.zeros(3, 0).all(dim=1), np.ones(3, bool)),
        # softplus in float64 keeps its tail: log1p(exp(-50)), not log(1 + exp(-50)) = 0.
        (
            lambda: onnxnn.nn.functional.softplus(onnxnn.tensor([-50.0], dtype=onnxnn.float64)),
            np.log1p(np.exp([-50.0])),
        ),
        # A Python int outside a small integer dtype's range wraps around, as PyTorch casts it.
        (lambda: onnxnn.tensor([5], dtype=onnxnn.uint8) + -2, np.array([3], np.uint8)),
        (lambda: onnxnn.tensor([5], dtype=onnxnn.uint8) * -2, np.array([5 * 254 % 256], np.uint8)),
        (lambda: onnxnn.tensor([5], dtype=onnxnn.int8) + 300, np.array([5 + 300 - 256], np.int8)),
        # Result dtypes: copysign promotes both operands; hardtanh keeps integers; a bool squares as an integer.
        (lambda: onnxnn.copysign(onnxnn.tensor([1.0]), onnxnn.tensor([-1.0], dtype=onnxnn.float64)), np.array([-1.0])),
        (lambda: onnxnn.nn.functional.hardtanh(onnxnn.tensor([-3, 0, 4])), np.array([-1, 0, 1])),
        (lambda: onnxnn.tensor([True, False]).square(), np.array([1, 0])),
        # A 0-d tensor's dim 0 is itself.
        (lambda: onnxnn.tensor(1.5, dtype=onnxnn.float64).var(dim=0, correction=0), np.array(0.0)),
        (lambda: onnxnn.tensor(1.5, dtype=onnxnn.float64).quantile(0.5, dim=0), np.array(1.5)),
        (lambda: onnxnn.unique(onnxnn.tensor(3), return_inverse=True)[1], np.array(0)),
        (lambda: onnxnn.tensor(0.5, dtype=onnxnn.float64).erf(), np.array(0.5204998778130465)),
        # Empty inputs: logsumexp over no elements is log(0), cummax of nothing is nothing.
        (lambda: onnxnn.logsumexp(onnxnn.zeros(3, 0, dtype=onnxnn.float64), dim=1), np.full(3, -np.inf)),
        (lambda: onnxnn.zeros(0, 3).cummax(0).indices, np.zeros((0, 3), np.int64)),
        (lambda: onnxnn.zeros(0, 3, dtype=onnxnn.float64).cummin(0).values, np.zeros((0, 3))),
        # tensor() infers PyTorch's dtype: numpy scalars, arrays and tensors keep theirs, promoted
        # with the Python numbers beside them.
        (lambda: onnxnn.tensor(np.float64(0.1)), np.array(0.1)),
        (lambda: onnxnn.tensor([np.float64(1.0), 2.5]), np.array([1.0, 2.5])),
        (lambda: onnxnn.tensor([np.ones(2, np.int8)] * 2), np.ones((2, 2), np.int8)),
        (lambda: onnxnn.tensor([np.uint8(1), np.int8(1)]), np.array([1, 1], np.int16)),
        (lambda: onnxnn.tensor([onnxnn.tensor(1.0, dtype=onnxnn.float64)] * 2), np.array([1.0, 1.0])),
        (lambda: onnxnn.tensor([]), np.zeros(0, np.float32)),
        # full takes a tensor fill's dtype and casts its fill as PyTorch casts a scalar.
        (lambda: onnxnn.full((2,), onnxnn.tensor(3)), np.array([3, 3])),
        (lambda: onnxnn.full((2,), -1, dtype=onnxnn.uint8), np.array([255, 255], np.uint8)),
        (lambda: onnxnn.full((2,), 2.7, dtype=onnxnn.int64), np.array([2, 2])),
        # arange in an integer dtype converts its bounds and step to it first.
        (lambda: onnxnn.arange(2.5, dtype=onnxnn.int64), np.arange(2)),
        (lambda: onnxnn.arange(0, 5, 2.5, dtype=onnxnn.int64), np.arange(0, 5, 2)),
        (lambda: onnxnn.arange(-1, -10, -1.5, dtype=onnxnn.int64), np.arange(-1, -10, -1)),
        # max along a dim points at a line's first NaN, even after a +inf.
        (lambda: onnxnn.tensor([[1.0, INF, NAN], [3.0, 1.0, 2.0]]).max(1).indices, np.array([2, 0])),
    ],
)
def test_values_at_the_edges_are_pytorchs(call, expected):
    result = call().numpy()
    assert result.dtype == expected.dtype and result.shape == expected.shape
    np.testing.assert_array_equal(result, expected)


def test_atan2_of_an_int_and_a_float64_computes_in_float64():
    # pi was y's float32. Within a few units in the last place of float64: atan2 is atan (correctly
    # rounded or one ulp off, by the libm onnxruntime links) plus a rounded shift by pi.
    result = onnxnn.atan2(onnxnn.tensor([3]), onnxnn.tensor([-1.1], dtype=onnxnn.float64)).numpy()
    assert result.dtype == np.float64 and result.shape == (1,)
    np.testing.assert_allclose(result, np.arctan2([3.0], [-1.1]), rtol=4 * np.finfo(np.float64).eps, atol=0)


def test_erf_of_a_float32_scalar_tensor_is_a_scalar():
    result = onnxnn.tensor(0.5).erf()
    assert result.shape == () and abs(result.item() - 0.5204998778130465) <= 2**-23


def _cdist_self_gradient(rows: np.ndarray) -> np.ndarray:
    """d/d rows of sum_ij |rows_i - rows_j| (rows as both arguments): zero-distance terms give 0."""
    gradient = np.zeros_like(rows)
    for i in range(len(rows)):
        for j in range(len(rows)):
            distance = np.linalg.norm(rows[i] - rows[j])
            if distance > 0:
                gradient[i] += 2 * (rows[i] - rows[j]) / distance
    return gradient


ROWS = np.array([[0.0, 1.0], [2.0, 3.0], [2.0, 3.0]])


@pytest.mark.parametrize(
    "function, inputs, expected",
    [
        # atan2 on the y axis: d/dy = x / (x^2 + y^2) = 0, d/dx = -y / (x^2 + y^2) = -1/y; 0 at the origin.
        (onnxnn.atan2, [[1.0, 0.0, -2.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [-1.0, 0.0, 0.5]]),
        # softplus's slope at 0 is sigmoid(0), in float64 as in float32.
        (onnxnn.nn.functional.softplus, [[0.0, -800.0, 800.0]], [[0.5, 0.0, 1.0]]),
        # Roots of sums of powers at 0 (std, norms, distances): gradient 0, not the root's inf times 0.
        (lambda x: x.std(), [[1.5, 1.5]], [[0.0, 0.0]]),
        (lambda x: x.norm(p=3), [[0.0, 0.0]], [[0.0, 0.0]]),
        (lambda x: onnxnn.cdist(x, x), [ROWS], [_cdist_self_gradient(ROWS)]),
        # xlogy: d/dx = log(y), 0 where x == 0 and y <= 0; d/dy = x / y (NaN at 0 / 0).
        (onnxnn.xlogy, [[0.0, 0.0, 1.0], [3.0, 0.0, 2.0]], [[np.log(3.0), 0.0, np.log(2.0)], [0.0, NAN, 0.5]]),
        # maximum/minimum: both inputs take the gradient beside a NaN; a tie halves it.
        (onnxnn.maximum, [[1.0, 2.0, 3.0], [NAN, 0.0, 3.0]], [[1.0, 1.0, 0.5], [1.0, 0.0, 0.5]]),
        (onnxnn.minimum, [[1.0, 2.0, 3.0], [NAN, 0.0, 3.0]], [[1.0, 0.0, 0.5], [1.0, 1.0, 0.5]]),
        # fmax/fmin: the operand taken takes it all, ``input`` on a tie.
        (onnxnn.fmax, [[1.0, 2.0, 3.0], [NAN, 0.0, 3.0]], [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]),
        (onnxnn.fmin, [[1.0, NAN, 3.0], [NAN, 0.0, 3.0]], [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]),
        # max()/min() of a tensor holding NaNs: the NaNs share it; along a dim, the first NaN takes it.
        (lambda x: x.min(), [[1.0, NAN, 2.0, NAN]], [[0.0, 0.5, 0.0, 0.5]]),
        (lambda x: x.max(1).values, [[[1.0, NAN, NAN], [2.0, 2.0, 1.0]]], [[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]]),
        # median() without dim spreads it over the tied elements (over the NaNs of a tensor holding
        # some); along a dim the element at the index takes it, a line's first NaN where it holds one.
        (lambda x: x.median(), [[1.0, 3.0, 3.0, 3.0, 0.0]], [[0.0, 1 / 3, 1 / 3, 1 / 3, 0.0]]),
        (lambda x: x.nanmedian(), [[1.0, NAN, 2.0, 2.0]], [[0.0, 0.0, 0.5, 0.5]]),
        (lambda x: x.median(), [[1.0, NAN, 2.0, NAN]], [[0.0, 0.5, 0.0, 0.5]]),
        (lambda x: x.median(1).values, [[[1.0, NAN, 2.0], [3.0, 1.0, 2.0]]], [[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]]),
        # clamp with tensor bounds: the input keeps it on a bound; the bound only where taken (the
        # upper one where the bounds cross); none to a NaN.
        (
            lambda x, low: onnxnn.clamp(x, min=low),
            [[0.0, -1.0, NAN, 2.0], [0.0, 0.0, 0.0, 1.0]],
            [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]],
        ),
        (
            lambda x, low, high: onnxnn.clamp(x, min=low, max=high),
            [[5.0, 2.0, 2.0], [0.0, 2.0, 3.0], [4.0, 2.0, 1.0]],
            [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]],
        ),
        # Inputs read only for signs or positions get zeros, not None (an optimizer still steps them).
        (onnxnn.copysign, [[1.0, -2.0, 0.0], [-1.0, 3.0, -0.0]], [[-1.0, -1.0, 0.0], [0.0, 0.0, 0.0]]),
        (
            lambda x, source: x.masked_scatter(onnxnn.tensor([False, False]), source),
            [[1.0, 2.0], [5.0, 6.0, 7.0]],
            [[1.0, 1.0], [0.0, 0.0, 0.0]],
        ),
    ],
)
def test_gradients_at_the_edges_are_pytorchs(function, inputs, expected):
    tensors = [onnxnn.tensor(np.asarray(x), dtype=onnxnn.float64, requires_grad=True) for x in inputs]
    function(*tensors).sum().backward()
    for tensor, gradient in zip(tensors, expected):
        np.testing.assert_allclose(tensor.grad.numpy(), np.asarray(gradient), rtol=1e-15, atol=0)


def test_adding_to_a_clamp_keeps_the_sign_of_a_zero_input():
    result = onnxnn.clamp(onnxnn.tensor([-0.0, 3.0]), min=onnxnn.tensor([-1.0, 0.0]), max=onnxnn.tensor(2.0))
    assert np.signbit(result.numpy()).tolist() == [True, False]


@pytest.mark.parametrize(
    "call",
    [
        # np.ascontiguousarray makes a 0-d array 1-d; these went through it.
        lambda: onnxnn.nn.functional.dropout(onnxnn.tensor(1.0), 0.5, training=True),
        lambda: onnxnn.nn.functional.rrelu(onnxnn.tensor(-1.0), training=True),
        lambda: onnxnn.tensor(1.0).view(onnxnn.int32),
        lambda: onnxnn.utils.data.default_convert(np.array(3.0)),
        lambda: onnxnn.unique(onnxnn.tensor(3), return_inverse=True)[1],
    ],
)
def test_zero_dimensional_results_stay_zero_dimensional(call):
    assert tuple(call().shape) == ()


def test_from_numpy_holds_the_values_the_array_had():
    # Pending results read their inputs when they are computed: a write to the array after
    # from_numpy must not reach them (PyTorch computes them at once).
    array = np.array([1.0, 2.0, 3.0])
    tensor = onnxnn.from_numpy(array)
    doubled, copied, as_tensor = tensor * 2, tensor.clone(), onnxnn.as_tensor(array) + 1
    array[0] = 100.0
    assert doubled.tolist() == [2.0, 4.0, 6.0] and copied.tolist() == [1.0, 2.0, 3.0]
    assert as_tensor.tolist() == [2.0, 3.0, 4.0] and tensor.tolist() == [1.0, 2.0, 3.0]


def test_from_numpy_shares_a_read_only_array():
    array = np.arange(4.0)
    array.setflags(write=False)
    assert np.shares_memory(onnxnn.from_numpy(array).numpy(), array)


MASK = onnxnn.tensor([True, False])


@pytest.mark.parametrize(
    "call",
    [
        # The attention-mask idiom -1e9 in float16: PyTorch refuses it (softmax of a row of -inf is NaN).
        lambda: onnxnn.zeros(2, dtype=onnxnn.float16).masked_fill(MASK, -1e9),
        lambda: onnxnn.zeros(2, dtype=onnxnn.float16).masked_fill(MASK, onnxnn.tensor(70000.0)),
        lambda: onnxnn.zeros(2, dtype=onnxnn.bfloat16).masked_fill(MASK, 1e39),
        lambda: onnxnn.zeros(2, dtype=onnxnn.int8).masked_fill(MASK, 300),
        lambda: onnxnn.zeros(2, dtype=onnxnn.float16).index_fill(0, onnxnn.tensor([0]), 1e9),
        lambda: onnxnn.zeros(2, dtype=onnxnn.int8).__setitem__(0, 200),
        lambda: onnxnn.zeros(2, dtype=onnxnn.uint8).__setitem__(0, 256),
        lambda: onnxnn.zeros(2).__setitem__(0, 1e300),
        # An integer power's exponent must fit the tensor's dtype too (uint8 ** 300 was 0).
        lambda: onnxnn.tensor([2], dtype=onnxnn.uint8) ** 300,
        lambda: onnxnn.tensor([2], dtype=onnxnn.int32) ** 2**40,
    ],
)
def test_fill_values_the_dtype_cannot_hold_are_refused(call):
    with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
        call()


def test_fill_values_the_dtype_holds_are_written():
    half = onnxnn.zeros(2, dtype=onnxnn.float16)
    assert half.masked_fill(MASK, float("-inf")).tolist() == [float("-inf"), 0.0]
    assert half.masked_fill(MASK, -65504.0).tolist() == [-65504.0, 0.0]
    # Unsigned dtypes take negatives down to minus their largest value, wrapped (c10's checked_convert).
    assert onnxnn.zeros(2, dtype=onnxnn.uint8).masked_fill(MASK, -1).tolist() == [255, 0]
    unsigned = onnxnn.zeros(2, dtype=onnxnn.uint8)
    unsigned[0] = -1
    assert unsigned.tolist() == [255, 0]


def test_max_and_min_of_bool_tensors_along_a_dim_are_values_and_indices():
    x = onnxnn.tensor([[True, False], [False, False], [False, True]])
    values, indices = x.max(1)
    assert values.dtype is onnxnn.bool and values.tolist() == [True, False, True] and indices.tolist() == [0, 0, 1]
    values, indices = x.min(1)
    assert values.tolist() == [False, False, False] and indices.tolist() == [1, 0, 0]
    with pytest.raises(RuntimeError, match=r"argmax\(\): does not support bool input"):
        x.argmax(1)


LOGITS = np.arange(12, dtype=np.float32).reshape(3, 4)


def _pending(values) -> onnxnn.Tensor:
    """Indices computed in the graph: their values are not known when the op is recorded."""
    return onnxnn.tensor(values) * 1


# A computed negative index (a 1-based label minus one): PyTorch refuses it; ONNX's ops would count it
# from the end and read or write the last entry.
NEGATIVE_PENDING = [
    ("gather", lambda: onnxnn.tensor(LOGITS).gather(1, _pending([[0], [-1], [2]]))),
    ("index_select", lambda: onnxnn.tensor(LOGITS).index_select(0, _pending([0, -1]))),
    ("scatter", lambda: onnxnn.zeros(3, 4).scatter(1, _pending([[0], [-1], [2]]), 1.0)),
    ("scatter_add", lambda: onnxnn.zeros(3, 4).scatter_add(1, _pending([[0], [-1], [2]]), onnxnn.ones(3, 1))),
    ("cross_entropy", lambda: onnxnn.nn.functional.cross_entropy(onnxnn.tensor(LOGITS), _pending([1, -1, 3]))),
]


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("name, call", NEGATIVE_PENDING, ids=[case[0] for case in NEGATIVE_PENDING])
def test_a_computed_negative_index_fails_when_the_graph_runs(name, call, executor):
    with onnxnn.set_executor(executor), pytest.raises((RuntimeError, IndexError), match="(?i)out of"):
        call().numpy()


def test_computed_indices_in_range_and_ignored_targets_are_read():
    gathered = onnxnn.tensor(LOGITS).gather(1, _pending([[0], [3], [2]]))
    assert gathered.reshape(-1).tolist() == [0.0, 7.0, 10.0]
    target = _pending([1, -100, 3])  # ignore_index is negative and stays
    loss = onnxnn.nn.functional.cross_entropy(onnxnn.tensor(LOGITS), target, reduction="none").numpy()
    shifted = LOGITS - LOGITS.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(loss, [-log_probs[0, 1], 0.0, -log_probs[2, 3]], rtol=1e-6)


@pytest.mark.parametrize(
    "call, shape",
    [
        (lambda x: x.reshape(shape=(3, 2)), (3, 2)),
        (lambda x: x.view(size=(3, 2)), (3, 2)),
        (lambda x: x.permute(dims=(1, 0)), (3, 2)),
        (lambda x: x[:1].expand(size=(4, 3)), (4, 3)),
        (lambda x: x.repeat(repeats=(1, 2)), (2, 6)),
    ],
)
def test_shape_methods_take_their_varargs_by_keyword_as_pytorchs(call, shape):
    assert tuple(call(onnxnn.zeros(2, 3)).shape) == shape


@pytest.mark.parametrize(
    "arguments", [{}, {"indices_or_sections": 2, "sections": 2}, {"sections": 2, "indices": [1]}], ids=str
)
def test_tensor_split_takes_exactly_one_of_its_overloads_names(arguments):
    with pytest.raises(TypeError, match="takes one of indices_or_sections, sections, indices"):
        onnxnn.tensor_split(onnxnn.zeros(4), **arguments)


def test_a_weight_changed_after_the_forward_is_read_only_if_the_input_needs_its_gradient():
    # PyTorch's addmm saves the weight only for the input's gradient: updating the weight in place
    # between forward and backward is no error when the input needs none (the first layer).
    layer = onnxnn.nn.Linear(2, 1)
    loss = layer(onnxnn.ones(3, 2)).sum()
    with onnxnn.no_grad():
        layer.weight.mul_(2.0)
    loss.backward()
    assert layer.weight.grad.tolist() == [[3.0, 3.0]]
    inputs = onnxnn.ones(3, 2, requires_grad=True)
    loss = layer(inputs).sum()
    with onnxnn.no_grad():
        layer.weight.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
