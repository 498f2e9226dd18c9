"""onnxnn.runtime.internal: the API nn, optim and export use instead of Tensor's private attributes.

Expected values are numpy's; each test checks one promise of the API's docstrings (versions,
autograd history, liveness, depth bounding, casting).
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxnn
from onnxnn.ir.graph import Value
from onnxnn.runtime import internal
from onnxnn.runtime.depth import MAX_PENDING_DEPTH


def test_value_of_and_tensor_of_share_one_value():
    x = onnxnn.tensor([1.0, 2.0])
    value = internal.value_of(x)
    assert isinstance(value, Value)
    y = internal.tensor_of(value)
    assert internal.value_of(y) is value
    assert not y.requires_grad and y.is_leaf
    assert internal.tensor_of(value, requires_grad=True).requires_grad
    parameter = internal.tensor_of(value, requires_grad=True, tensor_type=onnxnn.nn.Parameter)
    assert type(parameter) is onnxnn.nn.Parameter and parameter.requires_grad


def test_tensor_of_a_grad_fn_is_a_non_leaf_that_backpropagates():
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    z = internal.tensor_of(internal.value_of(y), internal.grad_function(y), 0)
    assert internal.grad_function(z) is y.grad_fn and internal.requires_grad_flag(z)
    z.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


def test_constant_and_full_tensors():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    constant = internal.constant_tensor(array)
    assert constant.dtype is onnxnn.float32 and not constant.requires_grad
    np.testing.assert_array_equal(constant.numpy(), array)
    assert internal.constant_tensor(array, onnxnn.float64, requires_grad=True).requires_grad
    full = internal.full_tensor((2, 2), 0.5, onnxnn.float64)
    assert full.dtype is onnxnn.float64
    np.testing.assert_array_equal(full.numpy(), np.full((2, 2), 0.5))


@pytest.mark.parametrize("dtype", [onnxnn.float32, onnxnn.float16, onnxnn.bfloat16, onnxnn.int32])
def test_constant_tensor_converts_the_array_to_the_dtype_it_declares(dtype):
    tensor = internal.constant_tensor(np.array([1.0, 2.5, -3.0]), dtype)
    assert tensor.dtype == dtype
    # the value computes in graphs of that dtype (float64 data declared float32 failed in onnxruntime)
    expected = 2 * np.array([1.0, 2.5, -3.0]).astype(dtype.numpy_dtype).astype(np.float32)
    np.testing.assert_array_equal((tensor + tensor).float().numpy(), expected)


def test_rebind_bumps_the_version_and_keeps_autograd_flags():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    version = param._version
    internal.rebind(param, internal.value_of(onnxnn.tensor([5.0, 6.0])))
    assert param._version == version + 1
    assert param.requires_grad and param.is_leaf  # no autograd check refused the leaf
    np.testing.assert_array_equal(param.detach().numpy(), [5.0, 6.0])


def test_a_rebound_saved_tensor_makes_backward_refuse():
    param = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    loss = (param * param).sum()  # Mul saves param for backward
    internal.rebind(param, internal.value_of(onnxnn.tensor([0.0, 0.0])))
    with pytest.raises(RuntimeError):
        loss.backward()


def test_record_op_records_without_autograd_and_computes_lazily():
    x = onnxnn.tensor([1.0, -2.0], requires_grad=True)
    (out,) = internal.record_op("Mul", (internal.value_of(x), internal.value_of(x)))
    assert isinstance(out, Value) and out.data is None  # pending
    result = internal.tensor_of(out)
    assert result.grad_fn is None and not result.requires_grad
    np.testing.assert_array_equal(internal.data_of(result), [1.0, 4.0])


def test_record_op_realizes_in_eager_mode():
    x = onnxnn.tensor([1.0, 2.0])
    with onnxnn.set_executor("kernels", eager=True):
        (out,) = internal.record_op("Add", (internal.value_of(x), internal.value_of(x)))
    np.testing.assert_array_equal(out.data, [2.0, 4.0])


def test_record_op_bounds_the_pending_depth():
    value = internal.value_of(onnxnn.tensor([1.0]))
    one = internal.value_of(onnxnn.tensor([1.0]))
    for _ in range(MAX_PENDING_DEPTH + 5):
        (value,) = internal.record_op("Add", (value, one))
        assert value.data is not None or value.node.depth <= MAX_PENDING_DEPTH
    np.testing.assert_array_equal(internal.data_of(internal.tensor_of(value)), [MAX_PENDING_DEPTH + 6.0])


def test_record_update_casts_to_the_state_dtype():
    state = onnxnn.zeros(2, dtype=onnxnn.float16)
    version = state._version
    internal.record_update(state, onnxnn.tensor([0.1, 0.2], dtype=onnxnn.float64))
    assert state.dtype is onnxnn.float16 and state._version == version + 1
    np.testing.assert_array_equal(state.numpy(), np.array([0.1, 0.2]).astype(np.float16))
    internal.record_update(state, internal.value_of(onnxnn.tensor([3.0, 4.0])))  # a Value too
    np.testing.assert_array_equal(state.numpy(), np.array([3.0, 4.0], np.float16))


def test_apply_in_place_writes_through_autograd():
    x = onnxnn.tensor([-1.0, 2.0], requires_grad=True)
    y = x * 1.0
    assert internal.apply_in_place(y, onnxnn.relu) is y
    np.testing.assert_array_equal(y.detach().numpy(), [0.0, 2.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0])
    with pytest.raises(RuntimeError, match="leaf Variable"):
        internal.apply_in_place(x, onnxnn.relu)


def test_restore_state_is_a_write_unless_the_version_is_rewound():
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    saved = internal.save_state(y)
    internal.rebind(y, internal.value_of(onnxnn.tensor([7.0, 7.0])))
    y.detach_()
    internal.restore_state(y, saved)
    assert y.grad_fn is saved.grad_fn and y.requires_grad
    assert y._version == 2  # the rebind, then the restore
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 4.0])

    internal.rebind(y, internal.value_of(onnxnn.tensor([0.0, 0.0])))
    saved = internal.save_state(y)
    internal.rebind(y, internal.value_of(onnxnn.tensor([9.0, 9.0])))
    internal.restore_state(y, saved, rewind_version=True)
    assert y._version == saved.version
    np.testing.assert_array_equal(y.detach().numpy(), [0.0, 0.0])


def test_known_data_never_runs_and_realize_values_computes_together():
    x = onnxnn.tensor([1.0, 2.0])
    assert internal.known_data(x) is not None
    pending = [x + 1.0, x * 3.0]
    assert all(internal.known_data(t) is None for t in pending)
    internal.realize_values(pending)
    np.testing.assert_array_equal(internal.known_data(pending[0]), [2.0, 3.0])
    np.testing.assert_array_equal(internal.known_data(pending[1]), [3.0, 6.0])
