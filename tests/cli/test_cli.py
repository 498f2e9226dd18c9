"""The onnxnn command: inspect and check an exported model; bad files get one clear line and exit status 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import onnx
import onnx.external_data_helper
import pytest
from onnx import TensorProto, helper

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
    assert "Gemm x2" in printed  # nn.Linear on a matrix exports as one Gemm(transB=1)


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


# ----------------------------------------------------------------------------- bad models, as a real process


def _write_model(path, nodes, domain_opsets=(), declared=(4,)) -> None:
    graph = helper.make_graph(
        nodes,
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(declared))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None if declared == () else [4])],
    )
    opsets = [helper.make_opsetid("", 21)] + [helper.make_opsetid(domain, 1) for domain in domain_opsets]
    onnx.save(helper.make_model(graph, opset_imports=opsets, ir_version=10), str(path))


def _truncated(path):
    _write_model(path, [helper.make_node("Relu", ["x"], ["y"])])
    path.write_bytes(path.read_bytes()[:40])
    return "not a valid ONNX model"


def _unknown_domain(path):
    _write_model(path, [helper.make_node("FastGelu", ["x"], ["y"], domain="com.example")], ["com.example"])
    return "'FastGelu' of domain 'com.example'"


def _escaping_external_data(path):
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4], bytes(16), raw=True)
    onnx.external_data_helper.set_external_data(weight, location="../secret.bin", offset=0, length=16)
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [weight],
    )
    (path.parent.parent / "secret.bin").write_bytes(bytes(16))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), str(path))
    return "points outside the model's folder"


def _perm_out_of_range(path):
    _write_model(path, [helper.make_node("Transpose", ["x"], ["y"], perm=[3], name="flip")])
    return "Transpose.*flip"


BAD_MODELS = {
    "truncated": _truncated,
    "unknown_domain": _unknown_domain,
    "escaping_external_data": _escaping_external_data,
    "perm_out_of_range": _perm_out_of_range,
}


@pytest.mark.parametrize("command", ["inspect", "check"])
@pytest.mark.parametrize("case", sorted(BAD_MODELS))
def test_a_bad_model_gets_one_line_on_stderr_and_exit_status_2(case, command, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    path = folder / f"{case}.onnx"
    expected = BAD_MODELS[case](path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(onnxnn.__file__)))
    environment = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "onnxnn.cli", command, str(path)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0] and re.search(expected, lines[0]), lines[0]


def test_check_compares_an_ml_pipeline_with_onnxruntime(tmp_path, capsys):
    scaler = helper.make_node("Scaler", ["x"], ["scaled"], domain="ai.onnx.ml", offset=[0.5, 0.0], scale=[2.0, 1.0])
    regressor = helper.make_node("LinearRegressor", ["scaled"], ["y"], domain="ai.onnx.ml", coefficients=[1.0, -1.0])
    graph = helper.make_graph(
        [scaler, regressor],
        "pipeline",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1])],
    )
    path = tmp_path / "pipeline.onnx"
    onnx.save(
        helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 1)], ir_version=10
        ),
        str(path),
    )
    assert main(["check", str(path)]) == 0
    assert "y: ok" in capsys.readouterr().out
