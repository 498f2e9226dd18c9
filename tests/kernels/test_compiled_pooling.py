"""Max pooling's gradient nodes as compiled loops (kernels/compiled_pooling.py, pooling_loops.c).

The loops stand in for the onnxruntime graphs onnxnn's sessions run for MaxPool with Indices (the
node with its NaN flags beside it: runtime/ops/max_pool_nan.py) and for an adding ScatterElements, so
they must give those graphs' very bits: each case runs the same node through an onnxruntime session
and through the loop, on data with ties (a ReLU's zeros), NaNs and infinities, over windows that
reach past X's edges, and onnxnn's sessions must give a max pooling's gradient the same values with
the loops as without them.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import onnxnn
import onnxnn.nn.functional as F
from onnxnn.ir import dtypes
from onnxnn.ir.registry import session_lowerings
from onnxnn.kernels import compiled_pooling
from onnxnn.kernels.pooling import _pool_geometry
from onnxnn.runtime.realization import clear_cache

pytestmark = pytest.mark.skipif(not compiled_pooling.available(), reason=f"{compiled_pooling.unavailable_reason()}")


def _session(node, inputs: list, outputs: list, initializers: list = ()):
    nodes = node if isinstance(node, list) else [node]
    graph = helper.make_graph(
        nodes,
        "case",
        [helper.make_tensor_value_info(name, element, None) for name, element in inputs],
        [helper.make_tensor_value_info(name, element, None) for name, element in outputs],
        list(initializers),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _data(kind: str, shape: tuple, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    if kind == "relu":  # half the values tie at 0
        x = np.maximum(x, 0)
    elif kind == "nan":  # a window's last NaN wins
        x[x > 1.0] = np.nan
    elif kind == "infinite":  # windows of -infinity give their first position
        x[x < -0.5] = -np.inf
        x[..., :4, :4] = -np.inf
        x[..., -1, -1] = np.inf
    return x


# (id, X shape, MaxPool attributes): windows past each edge, strides, dilations, ceil_mode, SAME
# padding, rows long enough for the loop's four windows at a time and their remainders.
MAX_POOL_CASES = [
    ("resnet_stem", (2, 3, 17, 23), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    (
        "dilated_uneven_pads",
        (1, 2, 13, 21),
        dict(kernel_shape=[2, 3], strides=[1, 2], pads=[0, 1, 1, 0], dilations=[2, 1]),
    ),  # fmt: skip
    ("ceil_mode", (2, 2, 10, 19), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("same_upper", (1, 3, 9, 26), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    ("stride_one", (1, 2, 8, 33), dict(kernel_shape=[2, 2])),
    (
        "wide_kernel_dilated",
        (1, 1, 12, 40),
        dict(kernel_shape=[3, 5], strides=[1, 3], pads=[1, 2, 1, 2], dilations=[1, 2]),
    ),  # fmt: skip
]


@pytest.mark.parametrize("kind", ["random", "relu", "nan", "infinite"])
@pytest.mark.parametrize("case_id, shape, attrs", MAX_POOL_CASES, ids=[case[0] for case in MAX_POOL_CASES])
def test_max_pool_with_indices_is_onnxnns_session_form(case_id, shape, attrs, kind):
    x = _data(kind, shape, len(case_id))
    recorded = SimpleNamespace(inputs=[SimpleNamespace(dtype=dtypes.float32, shape=shape)], attrs=attrs)
    names = itertools.count()
    nodes, initializers = session_lowerings.lookup("MaxPool")(
        recorded, ["x"], ["y", "indices"], lambda stem: f"{stem}_{next(names)}", None
    )
    outputs = [("y", TensorProto.FLOAT), ("indices", TensorProto.INT64)]
    session = _session(nodes, [("x", TensorProto.FLOAT)], outputs, initializers)
    expected_y, expected_indices = session.run(None, {"x": x})
    kernel, strides, dilations, begins, _, output_shape, _ = _pool_geometry(x, attrs)
    y, indices = compiled_pooling.max_pool_with_indices(x, kernel, strides, dilations, begins, output_shape)
    np.testing.assert_array_equal(y, expected_y)  # NaNs where onnxruntime has them
    np.testing.assert_array_equal(indices, expected_indices)


def test_scatter_add_is_onnxruntimes():
    rng = np.random.default_rng(5)
    data = rng.standard_normal(1000).astype(np.float32)
    # Repeated indices (added in turn), negative ones (from the end), and every position at least once.
    indices = np.concatenate([rng.integers(-1000, 1000, 3000), np.arange(1000)]).astype(np.int64)
    updates = rng.standard_normal(indices.size).astype(np.float32)
    node = helper.make_node("ScatterElements", ["data", "indices", "updates"], ["out"], axis=0, reduction="add")
    inputs = [("data", TensorProto.FLOAT), ("indices", TensorProto.INT64), ("updates", TensorProto.FLOAT)]
    expected = _session(node, inputs, [("out", TensorProto.FLOAT)]).run(
        None, {"data": data, "indices": indices, "updates": updates}
    )[0]
    np.testing.assert_array_equal(compiled_pooling.scatter_add(data, indices, updates), expected)


@pytest.mark.parametrize("bad_index", [1000, -1001])
def test_scatter_add_rejects_an_index_outside_the_data(bad_index):
    data = np.zeros(1000, np.float32)
    indices = np.array([3, bad_index, 5], np.int64)
    with pytest.raises(IndexError, match=r"outside \[-1000, 1000\)"):
        compiled_pooling.scatter_add(data, indices, np.ones(3, np.float32))
    assert not data.any()


LARGE = (2, 4, 128, 128)
# (id, X shape, dtype, attributes, outputs): the MaxPool nodes onnxruntime keeps.
NOT_TAKEN_MAX_POOL = [
    ("values_only", LARGE, np.float32, {}, 1),
    ("column_major_indices", LARGE, np.float32, {"storage_order": 1}, 2),
    ("float64", LARGE, np.float64, {}, 2),
    ("one_spatial_axis", (2, 4, 128 * 128), np.float32, {}, 2),
    ("small", (1, 1, 16, 16), np.float32, {}, 2),
]


@pytest.mark.parametrize(
    "case_id, shape, dtype, attrs, outputs", NOT_TAKEN_MAX_POOL, ids=[case[0] for case in NOT_TAKEN_MAX_POOL]
)
def test_other_max_pools_stay_with_onnxruntime(case_id, shape, dtype, attrs, outputs):
    assert not compiled_pooling.eligible_max_pool(shape, dtype, {"kernel_shape": [3, 3], **attrs}, outputs)
    assert compiled_pooling.eligible_max_pool(LARGE, np.float32, {"kernel_shape": [3, 3]}, 2)


@pytest.mark.parametrize(
    "shape, dtype, attrs",
    [
        ((1 << 16,), np.float32, {}),
        ((1 << 16,), np.float32, {"reduction": "mul"}),
        ((256, 256), np.float32, {"reduction": "add"}),
        ((1 << 16,), np.float64, {"reduction": "add"}),
        ((100,), np.float32, {"reduction": "add"}),
    ],  # fmt: skip
    ids=["assigning", "multiplying", "two_axes", "float64", "small"],
)
def test_other_scatters_stay_with_onnxruntime(shape, dtype, attrs):
    assert not compiled_pooling.eligible_scatter_add(shape, dtype, attrs)
    assert compiled_pooling.eligible_scatter_add((1 << 16,), np.float32, {"reduction": "add"})


def _max_pool_gradient(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = onnxnn.tensor(np.maximum(rng.standard_normal((2, 8, 64, 64)), 0).astype(np.float32), requires_grad=True)
    g = onnxnn.tensor(rng.standard_normal((2, 8, 32, 32)).astype(np.float32))
    (F.max_pool2d(x * 1.0, 3, stride=2, padding=1) * g).sum().backward()
    return x.grad.numpy()


@pytest.mark.parametrize("scatter", ["compiled", "onnxruntimes"])
def test_a_max_poolings_gradient_takes_the_loops_with_the_same_values(scatter, monkeypatch):
    # Without the scatter's loop, the Indices the MaxPool loop returns (int64, not X's dtype) feed a session.
    clear_cache()
    with onnxnn.set_executor("onnxruntime"):
        monkeypatch.setattr(compiled_pooling, "ENABLED", False)
        expected = _max_pool_gradient(6)
        clear_cache()
        monkeypatch.setattr(compiled_pooling, "ENABLED", True)
        if scatter == "onnxruntimes":
            monkeypatch.setattr(compiled_pooling, "eligible_scatter_add", lambda *arguments: False)
        taken = []
        original = compiled_pooling.max_pool_with_indices
        monkeypatch.setattr(
            compiled_pooling, "max_pool_with_indices", lambda *arguments: taken.append(1) or original(*arguments)
        )
        np.testing.assert_array_equal(_max_pool_gradient(6), expected)
        assert taken
    clear_cache()
