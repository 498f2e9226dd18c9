"""Where of dtypes onnxruntime has no kernel for (bool, int16, uint16, uint64) runs on every executor
and in exported graphs that plain onnxruntime serves, exactly."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest

import onnxnn
from onnxnn import nn
from onnxnn.export import to_onnx

CONDITION = np.array([True, False, True, False])
# Values at the ends of each dtype's range: a widening that lost a bit would show there.
VALUES = {
    "bool": (np.array([True, False, False, True]), np.array([False, True, True, False])),
    "int16": (np.array([-32768, 32767, 5, -1], np.int16), np.array([32767, -32768, -7, 0], np.int16)),
    "uint16": (np.array([65535, 0, 9, 1], np.uint16), np.array([0, 65535, 3, 2], np.uint16)),
    "uint64": (
        np.array([2**64 - 1, 0, 2**63 + 5, 1], np.uint64),
        np.array([2**63, 2**64 - 2, 7, 2**63 - 1], np.uint64),
    ),
}


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
@pytest.mark.parametrize("dtype", sorted(VALUES))
def test_where_selects_every_dtype_exactly(executor, dtype):
    a, b = VALUES[dtype]
    with onnxnn.set_executor(executor):
        result = onnxnn.where(onnxnn.tensor(CONDITION), onnxnn.tensor(a), onnxnn.tensor(b))
        assert result.dtype == getattr(onnxnn, dtype)
        np.testing.assert_array_equal(result.numpy(), np.where(CONDITION, a, b))


@pytest.mark.parametrize("executor", ["onnxruntime", "kernels"])
def test_bool_mask_assignment_and_fills(executor):
    with onnxnn.set_executor(executor):
        x = onnxnn.tensor([True, False, False])
        mask = onnxnn.tensor([False, True, False])
        assert x.masked_fill(mask, True).tolist() == [True, True, False]
        assert onnxnn.where(mask, x, ~x).tolist() == [False, False, True]
        assert onnxnn.where(mask, True, x).dtype == onnxnn.bool
        x[mask] = True
        assert x.tolist() == [True, True, False]
        y = onnxnn.tensor([[True, True], [False, True]])
        y[onnxnn.tensor([[True, False], [False, True]])] = False
        assert y.tolist() == [[False, True], [False, False]]


class _BoolSelection(nn.Module):
    def forward(self, x, mask):
        return onnxnn.where(mask, x > 0, x < -1).logical_not()


def test_exported_bool_selection_runs_in_plain_onnxruntime():
    x = onnxnn.tensor([0.5, -2.0, 1.0, -0.5])
    mask = onnxnn.tensor(CONDITION)
    proto = to_onnx(_BoolSelection().eval(), (x, mask), input_names=["x", "mask"], output_names=["y"])
    onnx.checker.check_model(proto, full_check=True)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {"x": x.numpy(), "mask": CONDITION})
    expected = ~np.where(CONDITION, x.numpy() > 0, x.numpy() < -1)
    np.testing.assert_array_equal(result, expected)
