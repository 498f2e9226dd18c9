"""The Modules note's two FX examples (examples/advanced/) run and print what they claim."""

from __future__ import annotations

import re

import numpy as np
import pytest
from example_scripts import EXAMPLES, run_script

import onnxnn
from onnxnn import nn

ADVANCED = EXAMPLES / "advanced"


@pytest.fixture
def run_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return lambda name: run_script(ADVANCED / name, monkeypatch)


def test_conv_bn_fuser_removes_every_batch_norm_and_keeps_the_outputs(run_example):
    printed, namespace = run_example("conv_bn_fuser.py")
    result = namespace["result"]
    fused, model = result["fused"], result["model"]
    # Four conv->bn pairs fused: four nodes fewer.
    assert result["counts"]["original"] - result["counts"]["fused"] == 4
    assert re.search(r"nodes: 17 before fusion, 13 after", printed)
    assert not any(isinstance(module, nn.BatchNorm2d) for module in fused.modules())
    assert sum(isinstance(module, nn.BatchNorm2d) for module in model.modules()) == 4  # the original is kept
    assert "bn" not in fused.code
    x = onnxnn.randn(2, 3, 8, 8)
    with onnxnn.no_grad():
        expected, actual = model(x).numpy(), fused(x).numpy()
    # Folding rescales each weight once: float32 rounding of a few hundred-term sums.
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
    assert result["difference"] < 1e-4
    assert re.search(r"speedup: \d+\.\d\dx", printed)


def test_fx_profiling_times_every_node_and_op_type(run_example):
    printed, namespace = run_example("fx_profiling.py")
    interpreter = namespace["interpreter"]
    nodes = list(interpreter.graph.nodes)
    assert all(len(times) == 3 for times in interpreter.node_runtimes.values())
    node_section, type_section = printed.split("\n\nop type")[0], printed.split("\n\nop type")[1]
    node_rows = re.findall(r"^(\w+)\s+(\w+)\s+(\d+\.\d+)\s+(\d+\.\d+)%$", node_section, flags=re.M)
    assert sorted(row[0] for row in node_rows) == sorted(node.name for node in nodes)
    times = [float(row[2]) for row in node_rows]
    assert times == sorted(times, reverse=True)
    type_rows = re.findall(r"^(\w+)\s+(\d+\.\d+)\s+(\d+\.\d+)%$", type_section, flags=re.M)
    assert {row[0] for row in type_rows} >= {"Conv2d", "BatchNorm2d", "ReLU", "add", "Linear", "flatten"}
    conv_rows = [float(row[2]) for row in node_rows if row[1] == "Conv2d"]
    conv_total = dict((row[0], float(row[1])) for row in type_rows)["Conv2d"]
    assert conv_total == pytest.approx(sum(conv_rows), abs=1e-3 * len(conv_rows))  # rounded to 4 decimals
    difference = float(re.search(r"max abs difference (\S+)", printed).group(1))
    assert difference < 1e-4
