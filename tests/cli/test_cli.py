"""The onnxnn command: inspect and check an exported model; bad files get a clear message."""
from __future__ import annotations

import pytest

import onnxnn
from onnxnn import nn
from onnxnn.cli import main


@pytest.fixture
def model_path(tmp_path):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    path = tmp_path / "model.onnx"
    onnxnn.export.to_onnx(model, onnxnn.randn(3, 4), path, input_names=["x"])
    return str(path)


def test_inspect_prints_the_module_tree_parameters_and_ops(model_path, capsys):
    assert main(["inspect", model_path]) == 0
    printed = capsys.readouterr().out
    assert "GraphModule(" in printed and "(0): Module()" in printed
    assert "parameters: 58" in printed  # 4*8 + 8 + 8*2 + 2
    assert "MatMul x2" in printed


def test_check_agrees_with_onnxruntime(model_path, capsys):
    assert main(["check", model_path]) == 0
    assert "output_0: ok" in capsys.readouterr().out


def test_a_missing_or_broken_file_is_a_clear_error(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nope.onnx")]) == 2
    assert "nope.onnx" in capsys.readouterr().err
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"definitely not a protobuf")
    assert main(["check", str(broken)]) == 2
    assert "not a valid ONNX model" in capsys.readouterr().err
