"""Copies and pickles of parameters and modules leave autograd state behind, as PyTorch's.

``copy.deepcopy`` of a Parameter is PyTorch's ``Parameter.__deepcopy__``: a new parameter of the
same value and ``requires_grad``, nothing else (no ``.grad``, no hooks, no other attribute), a leaf
of its own, so a backward through a copied module (a target network, an EMA or best-model copy)
fills the copy's gradients and never the original's. A plain tensor's deepcopy also copies its
``.grad`` and attributes, but not its hooks. Pickling keeps attributes but not ``.grad`` or hooks.
Expected gradients are written out from the chain rule: for ``sum(W x + b)``, dW = x, db = 1.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import onnxnn
from onnxnn import nn


def _linear(weight, bias=None):
    layer = nn.Linear(len(weight[0]), len(weight), bias=bias is not None)
    with onnxnn.no_grad():
        layer.weight.copy_(onnxnn.tensor(weight))
        if bias is not None:
            layer.bias.copy_(onnxnn.tensor(bias))
    return layer


# ----------------------------------------------------------------------------- deepcopy of a Parameter
def test_deepcopy_of_a_parameter_is_a_bare_new_parameter():
    p = nn.Parameter(onnxnn.tensor([1.0, 2.0]))
    p.note = ["kept by pickle, not by deepcopy"]
    (p * 3).sum().backward()
    copied = copy.deepcopy(p)
    assert type(copied) is nn.Parameter and copied is not p
    assert copied.requires_grad and copied.is_leaf
    assert copied.grad is None  # PyTorch's Parameter.__deepcopy__ leaves .grad behind
    assert not hasattr(copied, "note")
    np.testing.assert_array_equal(copied.detach().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 3.0])
    frozen = copy.deepcopy(nn.Parameter(onnxnn.ones(2), requires_grad=False))
    assert not frozen.requires_grad


def test_deepcopy_of_a_parameter_does_not_share_its_hooks():
    p = nn.Parameter(onnxnn.ones(2))
    p.register_hook(lambda grad: grad * 100)
    copied = copy.deepcopy(p)
    (copied * 1).sum().backward()
    np.testing.assert_array_equal(copied.grad.numpy(), [1.0, 1.0])  # the original's hook did not run
    assert p.grad is None

    q = nn.Parameter(onnxnn.ones(2))
    q.register_hook(lambda grad: grad)
    copy.deepcopy(q).register_hook(lambda grad: grad * 7)
    (q * 1).sum().backward()
    np.testing.assert_array_equal(q.grad.numpy(), [1.0, 1.0])  # the copy's hook did not run


def test_deepcopy_keeps_a_parameter_shared_within_the_copied_object_shared():
    p = nn.Parameter(onnxnn.ones(2))
    first, second = copy.deepcopy([p, p])
    assert first is second and first is not p
    encoder, decoder = nn.Linear(2, 2), nn.Linear(2, 2)
    decoder.weight = encoder.weight  # tied weights
    tied = copy.deepcopy(nn.Sequential(encoder, decoder))
    assert tied[0].weight is tied[1].weight
    assert tied[0].weight is not encoder.weight


def test_copy_is_independent_of_writes_to_the_original():
    p = nn.Parameter(onnxnn.tensor([1.0, 2.0]))
    copied = copy.deepcopy(p)
    with onnxnn.no_grad():
        p.add_(10.0)
    np.testing.assert_array_equal(copied.detach().numpy(), [1.0, 2.0])


# ----------------------------------------------------------------------------- deepcopy of a module
@pytest.mark.parametrize("graph_alive", [True, False], ids=["loss_still_referenced", "graph_released"])
def test_backward_through_a_copied_module_fills_the_copy_alone(graph_alive):
    original = _linear([[1.0, 2.0]], [0.5])
    loss = original(onnxnn.ones(1, 2)).sum()
    loss.backward()
    if not graph_alive:
        del loss
    np.testing.assert_array_equal(original.weight.grad.numpy(), [[1.0, 1.0]])
    target = copy.deepcopy(original)
    assert target.weight.grad is None and target.bias.grad is None
    original.zero_grad()
    target(onnxnn.full((1, 2), 3.0)).sum().backward()
    np.testing.assert_array_equal(target.weight.grad.numpy(), [[3.0, 3.0]])
    np.testing.assert_array_equal(target.bias.grad.numpy(), [1.0])
    assert original.weight.grad is None and original.bias.grad is None


def test_optimizer_of_a_copied_module_steps_the_copy():
    original = _linear([[1.0, 2.0]])
    loss = original(onnxnn.ones(1, 2)).sum()
    loss.backward()
    original.zero_grad()
    target = copy.deepcopy(original)
    optimizer = onnxnn.optim.SGD(target.parameters(), lr=1.0)
    target(onnxnn.full((1, 2), 3.0)).sum().backward()
    optimizer.step()
    np.testing.assert_array_equal(target.weight.detach().numpy(), [[1.0 - 3.0, 2.0 - 3.0]])
    np.testing.assert_array_equal(original.weight.detach().numpy(), [[1.0, 2.0]])


def test_backward_through_the_original_after_copying_fills_the_original_alone():
    original = _linear([[1.0, 2.0]], [0.0])
    original(onnxnn.ones(1, 2)).sum().backward()
    target = copy.deepcopy(original)
    original(onnxnn.full((1, 2), 2.0)).sum().backward()
    np.testing.assert_array_equal(original.weight.grad.numpy(), [[1.0 + 2.0, 1.0 + 2.0]])
    assert target.weight.grad is None


# ----------------------------------------------------------------------------- deepcopy of a plain tensor
def test_deepcopy_of_a_tensor_copies_grad_and_attributes_but_not_hooks():
    x = onnxnn.tensor([1.0, 2.0], requires_grad=True)
    x.note = [1]
    (x * 1).sum().backward()
    x.register_hook(lambda grad: grad * 100)
    copied = copy.deepcopy(x)
    assert copied.note == [1] and copied.note is not x.note
    assert copied.grad is not x.grad
    np.testing.assert_array_equal(copied.grad.numpy(), [1.0, 1.0])
    (copied * 1).sum().backward()
    np.testing.assert_array_equal(copied.grad.numpy(), [2.0, 2.0])  # accumulated, without the hook
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])


def test_deepcopy_of_a_buffer_keeps_its_persistence():
    # onnxnn's Buffer keeps ``persistent`` in its __dict__ (parameter.py): an attribute copies keep.
    buffer = nn.Buffer(onnxnn.zeros(2), persistent=False)
    copied = copy.deepcopy(buffer)
    assert type(copied) is nn.Buffer and copied.persistent is False


# ----------------------------------------------------------------------------- pickle
def test_a_module_pickles_after_forward_and_backward_without_its_gradients():
    layer = _linear([[1.0, 2.0]], [0.5])
    layer(onnxnn.ones(1, 2)).sum().backward()
    restored = pickle.loads(pickle.dumps(layer))
    assert restored.weight.grad is None and restored.bias.grad is None
    np.testing.assert_array_equal(restored.weight.detach().numpy(), [[1.0, 2.0]])
    restored(onnxnn.full((1, 2), 2.0)).sum().backward()
    np.testing.assert_array_equal(restored.weight.grad.numpy(), [[2.0, 2.0]])
    np.testing.assert_array_equal(layer.weight.grad.numpy(), [[1.0, 1.0]])


def test_a_pickled_parameter_keeps_its_attributes_but_not_grad_or_hooks():
    p = nn.Parameter(onnxnn.tensor([1.0, 2.0]))
    p.note = "kept"
    p.register_hook(lambda grad: grad * 100)
    (p * 2).sum().backward()
    restored = pickle.loads(pickle.dumps(p))
    assert type(restored) is nn.Parameter and restored.requires_grad
    assert restored.note == "kept"
    assert restored.grad is None
    (restored * 2).sum().backward()
    np.testing.assert_array_equal(restored.grad.numpy(), [2.0, 2.0])
