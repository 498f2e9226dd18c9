"""torch.gradient (finite differences), torch.histogramdd, torch.asarray, torch.empty_permuted and
Tensor.as_subclass: forward against numpy's definitions (numpy.gradient, numpy.histogramdd),
gradients against float64 finite differences, both executors, and torch when it is installed.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.export import to_onnx
from tests.gradcheck import check_gradients

EXECUTORS = ("onnxruntime", "kernels")
RNG = np.random.default_rng(0)
COORDINATES = np.array([0.0, 0.5, 1.5, 1.75, 3.0])


def _numpy_gradient(array, spacing, dims, edge_order):
    result = np.gradient(array, *spacing, axis=tuple(dims), edge_order=edge_order)
    return result if isinstance(result, (list, tuple)) else [result]


# (id, input shape, onnxnn/torch keyword arguments, numpy spacing, numpy axes)
GRADIENT_CASES = [
    ("default-1d", (6,), {}, [1.0], [0]),
    ("scalar-spacing-2d", (4, 5), {"spacing": 0.5}, [0.5, 0.5], [0, 1]),
    ("per-dim-spacing", (4, 5), {"spacing": [2.0, 0.25]}, [2.0, 0.25], [0, 1]),
    ("one-dim", (3, 5, 4), {"dim": 1}, [1.0], [1]),
    ("negative-dims", (3, 5, 4), {"dim": [-1, 0], "spacing": [0.5, 3.0]}, [0.5, 3.0], [2, 0]),
    ("coordinates", (3, 5), {"spacing": [COORDINATES], "dim": 1}, [COORDINATES], [1]),
    ("edge-order-2", (5, 4), {"edge_order": 2, "spacing": 0.5}, [0.5, 0.5], [0, 1]),
    ("coordinates-edge-order-2", (5, 3), {"spacing": [COORDINATES], "dim": 0, "edge_order": 2}, [COORDINATES], [0]),
    ("two-samples", (2, 3), {"dim": 0}, [1.0], [0]),
]


def _onnxnn_kwargs(kwargs):
    spacing = kwargs.get("spacing")
    if isinstance(spacing, list) and any(isinstance(item, np.ndarray) for item in spacing):
        return {**kwargs, "spacing": [onnxnn.tensor(item) for item in spacing]}
    return kwargs


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("case_id, shape, kwargs, spacing, dims", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_gradient_matches_numpy(case_id, shape, kwargs, spacing, dims, executor):
    array = RNG.standard_normal(shape)
    with onnxnn.set_executor(executor):
        actual = onnxnn.gradient(onnxnn.tensor(array, dtype=onnxnn.float32), **_onnxnn_kwargs(kwargs))
        actual = [np.asarray(t.numpy(), dtype=np.float64) for t in actual]
    expected = _numpy_gradient(array, spacing, dims, kwargs.get("edge_order", 1))
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        # three float32 terms of at most ~4/h each: a few float32 roundings of the largest term
        scale = (
            np.max(np.abs(array)) * 8.0 / min(np.min(np.diff(s)) if isinstance(s, np.ndarray) else s for s in spacing)
        )
        np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(np.float32).eps * scale)


@pytest.mark.parametrize("case_id, shape, kwargs, spacing, dims", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_gradient_matches_torch(case_id, shape, kwargs, spacing, dims):
    torch = pytest.importorskip("torch")
    array = RNG.standard_normal(shape)
    torch_kwargs = {**kwargs}
    if "spacing" in kwargs and isinstance(kwargs["spacing"], list):
        torch_kwargs["spacing"] = [torch.from_numpy(s) if isinstance(s, np.ndarray) else s for s in kwargs["spacing"]]
    expected = torch.gradient(torch.from_numpy(array), **torch_kwargs)
    actual = onnxnn.gradient(onnxnn.tensor(array), **_onnxnn_kwargs(kwargs))
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case_id", ["scalar-spacing-2d", "coordinates-edge-order-2", "edge-order-2"])
def test_gradient_gradients_match_finite_differences(case_id):
    _, shape, kwargs, _, _ = next(case for case in GRADIENT_CASES if case[0] == case_id)
    check_gradients(lambda x: onnxnn.stack(onnxnn.gradient(x, **_onnxnn_kwargs(kwargs))), [RNG.standard_normal(shape)])


def test_gradient_exports_to_onnxruntime():
    onnxruntime = pytest.importorskip("onnxruntime")

    class Slopes(onnxnn.nn.Module):
        def forward(self, x):
            return onnxnn.gradient(x, spacing=0.5, dim=1, edge_order=2)[0]

    x = onnxnn.tensor(RNG.standard_normal((3, 6)), dtype=onnxnn.float32)
    proto = to_onnx(Slopes(), (x,))
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_allclose(actual, np.gradient(x.numpy(), 0.5, axis=1, edge_order=2), rtol=1e-5, atol=1e-5)


def test_gradient_errors_use_torchs_wording():
    x = onnxnn.randn(3, 4)
    with pytest.raises(RuntimeError, match="only supports edge_order=1 and edge_order=2"):
        onnxnn.gradient(x, edge_order=3)
    with pytest.raises(RuntimeError, match="expected each dimension size to be at least edge_order\\+1"):
        onnxnn.gradient(onnxnn.randn(2, 4), edge_order=2)
    with pytest.raises(RuntimeError, match="spacing argument of length 3 and a dim argument of length 2"):
        onnxnn.gradient(x, spacing=[1.0, 2.0, 3.0])
    with pytest.raises(IndexError, match="Dimension out of range"):
        onnxnn.gradient(x, dim=2)


@pytest.mark.parametrize(
    "bins, kwargs",
    [
        (3, {}),
        ([2, 4], {"range": [-1.0, 1.0, -2.0, 2.0]}),
        (4, {"density": True}),
        ([np.array([-3.0, 0.0, 3.0]), np.array([-1.0, -0.5, 0.5, 1.0])], {}),
        (2, {"weight": True}),
    ],
)
def test_histogramdd_matches_numpy(bins, kwargs):
    points = RNG.standard_normal((20, 2))
    weight = RNG.uniform(0.0, 1.0, 20)
    ours_bins = [onnxnn.tensor(b) for b in bins] if isinstance(bins, list) and isinstance(bins[0], np.ndarray) else bins
    ours_kwargs = {**kwargs, "weight": onnxnn.tensor(weight)} if "weight" in kwargs else kwargs
    result = onnxnn.histogramdd(onnxnn.tensor(points), ours_bins, **ours_kwargs)
    hist, edges = result
    assert result.hist is hist and isinstance(result.bin_edges, tuple)  # as torch.return_types.histogramdd
    numpy_kwargs = {key: value for key, value in kwargs.items() if key != "weight"}
    if "range" in kwargs:
        numpy_kwargs["range"] = [(-1.0, 1.0), (-2.0, 2.0)]
    want_hist, want_edges = np.histogramdd(points, bins, weights=weight if "weight" in kwargs else None, **numpy_kwargs)
    np.testing.assert_allclose(hist.numpy(), want_hist, rtol=1e-12)
    for got, want in zip(edges, want_edges):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    torch = pytest.importorskip("torch")
    torch_bins = (
        [torch.from_numpy(b) for b in bins] if isinstance(bins, list) and isinstance(bins[0], np.ndarray) else bins
    )
    torch_kwargs = {**kwargs, "weight": torch.from_numpy(weight)} if "weight" in kwargs else kwargs
    theirs, _ = torch.histogramdd(torch.from_numpy(points), torch_bins, **torch_kwargs)
    np.testing.assert_allclose(hist.numpy(), theirs.numpy(), rtol=1e-12)


def test_asarray_shares_or_copies_as_asked():
    x = onnxnn.tensor([1.0, 2.0])
    assert onnxnn.asarray(x) is x
    copied = onnxnn.asarray(x, copy=True)
    assert copied is not x and np.array_equal(copied.numpy(), x.numpy())
    assert onnxnn.asarray(x, dtype=onnxnn.float64).dtype == onnxnn.float64
    with pytest.raises(ValueError, match="can't alias"):
        onnxnn.asarray(x, dtype=onnxnn.float64, copy=False)
    assert onnxnn.asarray([1, 2]).dtype == onnxnn.int64
    leaf = onnxnn.asarray(np.ones(3), requires_grad=True)
    assert leaf.requires_grad and leaf.is_leaf


def test_empty_permuted_checks_the_layout():
    assert onnxnn.empty_permuted((2, 3, 4), (0, 2, 1), dtype=onnxnn.float64).shape == (2, 3, 4)
    with pytest.raises(RuntimeError, match="Duplicate dim not allowed"):
        onnxnn.empty_permuted((2, 3), (0, 0))
    with pytest.raises(RuntimeError, match="len\\(size\\) = 2 is not equal to len\\(physical_layout\\) = 1"):
        onnxnn.empty_permuted((2, 3), (0,))


def test_as_subclass_keeps_the_autograd_edge():
    class Marked(onnxnn.Tensor):
        pass

    x = onnxnn.randn(3, requires_grad=True)
    y = x.as_subclass(Marked)
    assert type(y) is Marked and not y.is_leaf and y.grad_fn.name() == "AliasBackward0"
    (y * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
    z = onnxnn.randn(2).as_subclass(Marked)
    assert type(z) is Marked and z.is_leaf and not z.requires_grad
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        x.as_subclass(int)


@pytest.mark.parametrize(
    "values, dtype",
    [
        (RNG.standard_normal((3, 4)), onnxnn.float64),
        (RNG.standard_normal((3, 4)), onnxnn.float32),
        (np.array([[1, -2, 3], [4, 5, -6]]), onnxnn.int32),
        (np.array([[1, 2, 250]]), onnxnn.uint8),
        (np.array([[True, False], [True, True]]), onnxnn.bool),
    ],
)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), ([0], True), ((0, 1), False)])
def test_hash_tensor_xors_the_64_bit_patterns(values, dtype, dim, keepdim):
    x = onnxnn.tensor(values).to(dtype)
    data = x.numpy()
    wide = (
        data.astype(np.float64)
        if dtype.is_floating_point
        else data.astype(np.uint64 if data.dtype.kind in "ub" else np.int64)
    )
    axes = tuple(range(data.ndim)) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    expected = np.bitwise_xor.reduce(wide.view(np.uint64), axis=axes, keepdims=keepdim)
    actual = onnxnn.hash_tensor(x, dim, keepdim=keepdim)
    assert actual.dtype == onnxnn.uint64
    np.testing.assert_array_equal(actual.numpy(), expected)
    np.testing.assert_array_equal(x.hash_tensor(dim, keepdim=keepdim).numpy(), expected)
    torch = pytest.importorskip("torch")
    theirs = (
        torch.hash_tensor(torch.from_numpy(data), dim, keepdim=keepdim)
        if dim is not None
        else torch.hash_tensor(torch.from_numpy(data))
    )
    np.testing.assert_array_equal(actual.numpy(), theirs.numpy())


def test_hash_tensor_errors_use_torchs_wording():
    with pytest.raises(RuntimeError, match="Unknown hash_tensor mode: 1"):
        onnxnn.hash_tensor(onnxnn.ones(2), mode=1)
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified for input.numel\\(\\) == 0"):
        onnxnn.hash_tensor(onnxnn.zeros(0))
    with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
        onnxnn.hash_tensor(onnxnn.zeros(0, 3), 0)
