"""``MODE.observer``: every node recorded is reported once, in recording order, and nothing else changes."""

import numpy as np

import onnxnn
from onnxnn.ir.mode import MODE


def test_observer_sees_each_recorded_node_in_order():
    seen = []
    x = onnxnn.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    MODE.observer = lambda node, outputs: seen.append((node.op_type, outputs[0].shape))
    try:
        y = (x * 2).relu().sum(dim=1)
    finally:
        MODE.observer = None
    assert [op for op, _ in seen] == ["Mul", "Relu", "ReduceSum"]
    assert seen[-1][1] == (2,)
    np.testing.assert_array_equal(y.numpy(), np.maximum(np.arange(6).reshape(2, 3) * 2, 0).sum(1))


def test_no_observer_by_default():
    assert MODE.observer is None
