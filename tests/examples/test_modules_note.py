"""Every code block of PyTorch's Modules note, ported to onnxnn, runs and prints what the note shows.

The scripts live in examples/modules_note/. Values are random (onnxnn's own generator), so the
checks compare what the note's printouts say structurally: names, shapes, reprs, key order.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from example_scripts import EXAMPLES, run_script

import onnxnn

NOTE = EXAMPLES / "modules_note"


@pytest.fixture
def run_example(tmp_path, monkeypatch):
    """Runs one example script in a temporary directory and returns what it printed."""
    monkeypatch.chdir(tmp_path)
    return lambda name: run_script(NOTE / name, monkeypatch)


FLOAT = r"-?\d+\.\d+(?:e[+-]\d+)?"


def test_a_simple_custom_module(run_example):
    printed, namespace = run_example("01_simple_custom_module.py")
    assert re.match(rf"tensor\(\[\s*{FLOAT},\s+{FLOAT},\s+{FLOAT}\], grad_fn=<AddBackward0>\)\n", printed)
    assert "('weight', Parameter containing:\ntensor([[" in printed
    assert "('bias', Parameter containing:\ntensor([" in printed
    assert printed.count("requires_grad=True))") == 2
    assert [name for name, _ in namespace["m"].named_parameters()] == ["weight", "bias"]
    assert namespace["m"].weight.shape == (4, 3)


def test_modules_as_building_blocks(run_example):
    printed, _ = run_example("02_modules_as_building_blocks.py")
    assert re.match(rf"tensor\(\[\s*{FLOAT}\], grad_fn=<AddBackward0>\)\n", printed)
    expected = """('l0', MyLinear())
('l1', MyLinear())
('', BigNet(
  (l1): MyLinear()
  (net): Net(
    (l0): MyLinear()
    (l1): MyLinear()
  )
))
('l1', MyLinear())
('net', Net(
  (l0): MyLinear()
  (l1): MyLinear()
))
('net.l0', MyLinear())
('net.l1', MyLinear())
"""
    assert printed.endswith(expected)


def test_dynamic_net_parameters_dtype_and_apply(run_example):
    printed, namespace = run_example("03_dynamic_net.py")
    names = re.findall(r"^\('([\w.]+)', Parameter containing:", printed, flags=re.M)
    assert names == [
        "linears.0.weight",
        "linears.0.bias",
        "linears.1.weight",
        "linears.1.bias",
        "linears.2.weight",
        "linears.2.bias",
        "final.weight",
        "final.bias",
    ]
    # On a machine with a GPU the example moves the network there, and the tensor prints its device.
    device = r"(\s+device='cuda:0',)?"
    assert re.search(rf"tensor\(\[{FLOAT}\],{device}\s+dtype=onnxnn.float64,\s+grad_fn=<AddBackward0>\)", printed)
    net = namespace["dynamic_net"]
    assert all(p.dtype is onnxnn.float64 for p in net.parameters())


def test_training_drives_the_last_layer_to_zero_and_modes_differ(run_example):
    printed, namespace = run_example("04_training.py")
    weights = namespace["net"].l1.weight.detach().numpy()
    assert weights.shape == (3, 1)
    assert np.abs(weights).max() < 0.01, weights
    assert not namespace["net"].training
    training = np.array(
        re.search(r"training mode output: tensor\(\[([^\]]*)\]\)", printed).group(1).split(","), dtype=float
    )
    evaluation = np.array(
        re.search(r"evaluation mode output: tensor\(\[([^\]]*)\]\)", printed).group(1).split(","), dtype=float
    )
    # Values parsed from printed tensors (4 decimals: each within 5e-5), one of them twice.
    np.testing.assert_allclose(training - evaluation, 1.0, atol=2e-4)


def test_module_state_saving_buffers_and_key_order(run_example, tmp_path):
    printed, namespace = run_example("05_module_state.py")
    assert printed.startswith("<All keys matched successfully>\n")
    # An OrderedDict prints as OrderedDict([(key, value)]) up to Python 3.11, OrderedDict({key: value}) after.
    mean = rf"tensor\(\[{FLOAT}(,\s+{FLOAT}){{3}}\]\)"
    assert re.search(rf"OrderedDict\((\[\('mean', {mean}\)\]|\{{'mean': {mean}\}})\)", printed)
    assert re.search(r"\('mean', tensor\(\[[^\]]*\],(\s+device='cuda:0',)?\s+dtype=onnxnn.float64\)\)", printed)
    keys = re.findall(r"'([\w.]+)'[,:] tensor", printed.split("\n", 3)[-1])
    assert keys == [
        "param1",
        "param2",
        "buffer1",
        "param_list.0",
        "param_list.1",
        "param_list.2",
        "param_dict.bar",
        "param_dict.foo",
        "linear.weight",
        "linear.bias",
    ]
    assert (tmp_path / "net.pt").exists() and (tmp_path / "state.pt").exists()
    loaded = namespace["m_loaded"].state_dict()
    original = namespace["m"].state_dict()
    assert list(loaded) == list(original)
    for key in original:
        np.testing.assert_array_equal(loaded[key].numpy(), original[key].numpy())


def test_module_initialization(run_example):
    printed, namespace = run_example("06_module_initialization.py")
    lines = printed.splitlines()
    assert lines[0] == "onnxnn.float16"
    assert printed.endswith("tensor([0., 0., 0.], dtype=onnxnn.float16)\n")
    weight = namespace["m"].running_mean  # the last m is the BatchNorm2d
    assert weight.dtype is onnxnn.float16
    gram = re.search(r"tensor\((\[\[.*?\]\]), grad_fn", printed, flags=re.S).group(1)
    values = np.array(eval(gram.replace("\n", "")))
    # An orthogonal weight's Gram matrix, as printed: 4 decimals round its 5-term float32 sums
    # (errors ~1e-7) to exactly 1 and 0.
    np.testing.assert_allclose(values, np.eye(3), atol=1e-6)


def test_module_hooks(run_example):
    printed, namespace = run_example("07_module_hooks.py")

    def matrix(label):
        found = re.search(label + r": tensor\((\[\[.*?\]\])", printed, flags=re.S).group(1)
        return np.array(eval(found.replace("\n", "")))

    plain = matrix("output with no forward hooks")
    assert "grad_fn=<AddmmBackward0>" in printed
    np.testing.assert_allclose(matrix("output after removing forward hooks"), plain)
    assert not np.allclose(matrix("output with forward pre hook"), plain)
    pre = matrix("output with forward pre hook")
    both = matrix("output with both forward hooks")
    # forward_hook adds inputs[0], which the pre hook made x + 1: both == pre + x + 1.
    x = namespace["x"].detach().numpy()
    np.testing.assert_allclose(both - pre, x + 1, atol=2e-4)  # printed to 4 decimals, as above
    np.testing.assert_allclose(matrix("x.grad with backwards hook"), np.full((2, 3), 42.0))
    assert not np.allclose(matrix("x.grad with no backwards hook"), 42.0)
