"""Every ``onnxnn`` subcommand through a real process: --help, a success checked independently, bad input.

Expectations come from outside the command: parameter counts and MACs from the initializers' sizes and
the MatMul/Conv formulas, converted weights from the safetensors library's own reader (and torch's
loader where installed), exported models run by onnxruntime against numpy. Each process costs about a
second of start-up, so checks share processes where they can; the rest call ``main`` in-process.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import onnx.external_data_helper
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxnn
from onnxnn.cli import COMMANDS, main
from onnxnn.commands.layers import analyze
from onnxnn.commands.summary import _rows
from tests.tolerances import assert_close_to_matmul

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(onnxnn.__file__)))
FACTORIES = textwrap.dedent(
    """
    from onnxnn import nn

    def mlp():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def linear():
        return nn.Linear(4, 2)

    def not_a_module():
        return 3

    def needs_arguments(width):
        return nn.Linear(width, 2)
    """
)
MLP_PARAMETERS = 4 * 8 + 8 + 8 * 2 + 2


def onnxnn_command(*arguments, cwd=None) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    environment.pop("NO_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "onnxnn.cli", *map(str, arguments)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=300,
    )


def assert_one_line_error(done: subprocess.CompletedProcess, *fragments: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "\033[" not in lines[0]  # no colour when stderr is not a terminal
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def factories(tmp_path):
    (tmp_path / "toymodels.py").write_text(FACTORIES)
    return tmp_path


def conv_gemm_model(path) -> dict:
    """Conv(2 -> 3, 3x3) then Flatten then Gemm(27 -> 4), with a dynamic batch axis; returns its initializers."""
    rng = np.random.default_rng(0)
    weights = {
        "conv.weight": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
        "conv.bias": rng.standard_normal(3).astype(np.float32),
        "fc.weight": rng.standard_normal((4, 27)).astype(np.float32),
        "fc.bias": rng.standard_normal(4).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["features"]),
        helper.make_node("Flatten", ["features"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), str(path))
    return weights


# ----------------------------------------------------------------------------- help


def test_help_lists_every_subcommand_with_its_description():
    done = onnxnn_command("--help")
    assert done.returncode == 0, done.stderr
    for name, module in COMMANDS.items():
        assert name in done.stdout
        assert module.DESCRIPTION.split()[0] in done.stdout
    assert "exit status" in done.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_subcommand_has_help_with_examples(name):
    # Through the real command, as a user runs it (a subprocess per subcommand: ~1.5 s each).
    done = onnxnn_command(name, "--help")
    assert done.returncode == 0 and not done.stderr, done.stderr
    printed = done.stdout
    assert printed.startswith(f"usage: onnxnn {name}")
    assert "examples:" in printed and f"onnxnn {name} " in printed.split("examples:")[1]


# ----------------------------------------------------------------------------- summary


def test_summary_counts_parameters_and_macs_from_the_initializers(tmp_path, capsys):
    path = tmp_path / "convnet.onnx"
    weights = conv_gemm_model(path)
    done = onnxnn_command("summary", path, "--input-shape", "2,2,5,5", "--json")
    assert done.returncode == 0, done.stderr
    totals = json.loads(done.stdout)
    assert totals["parameters"] == sum(array.size for array in weights.values())
    # Conv: each of 2*3*3*3 outputs is 2*3*3 products; Gemm: each of 2*4 outputs is 27 products.
    assert totals["macs"] == 2 * 3 * 3 * 3 * (2 * 3 * 3) + 2 * 4 * 27
    assert totals["input_mb"] == 2 * 2 * 5 * 5 * 4 / 1e6
    assert totals["inputs"] == {"x": [2, 2, 5, 5]}

    assert main(["summary", str(path)]) == 0  # the table, in-process; the dynamic batch defaults to 1
    table = capsys.readouterr().out
    assert "├─conv (Conv)" in table and "[1, 3, 3, 3]" in table
    assert "├─fc (Gemm)" in table and "[1, 4]" in table
    assert "Total params: 169" in table


def test_summary_of_a_factory_exports_it_first(factories):
    done = onnxnn_command("summary", "toymodels:mlp", "--input-shape", "3,4", cwd=factories)
    assert done.returncode == 0, done.stderr
    assert f"Total params: {MLP_PARAMETERS}" in done.stdout
    assert "├─0 (" in done.stdout and "├─2 (" in done.stdout and "[3, 2]" in done.stdout


def test_summary_groups_modules_by_initializer_names():
    # Nested names give header rows: block.0 and block.1 under block.
    weights = {f"block.{i}.weight": np.ones((2, 2), np.float32) for i in range(2)}
    nodes = [
        helper.make_node("MatMul", ["x", "block.0.weight"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "block.1.weight"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "nested",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    rows = _rows(analyze(model, {"x": (1, 2)}).layers, depth=3)
    assert [(row["level"], row["label"], row["parameters"]) for row in rows] == [
        (1, "block", 4),
        (2, "0 (MatMul)", 4),
        (1, "Relu", 0),
        (1, "block", 4),
        (2, "1 (MatMul)", 4),
    ]


def test_summary_reads_module_paths_from_pytorch_exporter_node_names():
    # torch.onnx.export names nodes by module: attribute names, and full names below containers.
    weights = {
        "onnx::Conv_7": np.ones((2, 1, 1, 1), np.float32),  # a folded Conv+BatchNorm weight: no module name
        "fc.weight": np.ones((3, 2), np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "onnx::Conv_7"], ["c"], name="/layer1/layer1.0/conv1/Conv"),
        helper.make_node("Relu", ["c"], ["r"], name="/layer1/layer1.0/Relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fc.weight"], ["y"], name="/fc/Gemm", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "torch_names",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(array, name) for name, array in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    rows = _rows(analyze(model, {"x": (1, 1, 1, 1)}).layers, depth=3)
    assert [(row["level"], row["label"], row["parameters"]) for row in rows] == [
        (1, "layer1", 2),
        (2, "0", 2),
        (3, "conv1 (Conv)", 2),
        (3, "Relu", 0),  # layer1.0's own node, beside its submodule
        (1, "Flatten", 0),
        (1, "fc (Gemm)", 6),
    ]


# ----------------------------------------------------------------------------- convert


def test_convert_onnx_to_safetensors_to_pt_to_onnx_keeps_every_weight(tmp_path):
    source = tmp_path / "convnet.onnx"
    weights = conv_gemm_model(source)
    safetensors_numpy = pytest.importorskip("safetensors.numpy")

    done = onnxnn_command("convert", source, tmp_path / "w.safetensors")
    assert done.returncode == 0, done.stderr
    assert "wrote 4 tensors" in done.stdout
    read_back = safetensors_numpy.load_file(str(tmp_path / "w.safetensors"))  # the reference reader
    assert sorted(read_back) == sorted(weights)
    for name, array in weights.items():
        np.testing.assert_array_equal(read_back[name], array)

    assert main(["convert", str(tmp_path / "w.safetensors"), str(tmp_path / "w.pt")]) == 0  # in-process: faster
    state = onnxnn.load(str(tmp_path / "w.pt"))
    assert list(state) == list(weights)  # the state_dict order survives the round trip
    for name, array in weights.items():
        np.testing.assert_array_equal(state[name].numpy(), array)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:  # PyTorch's own loader, where installed
        for name, tensor in torch.load(str(tmp_path / "w.pt"), weights_only=True).items():
            np.testing.assert_array_equal(tensor.numpy(), weights[name])

    # Back into a copy of the model: onnxruntime runs it and gives what the original gives.
    onnxnn.save({name: value * 2 for name, value in state.items()}, str(tmp_path / "doubled.pt"))
    target = tmp_path / "doubled.onnx"
    assert main(["convert", str(tmp_path / "doubled.pt"), str(target), "--template", str(source)]) == 0
    converted = {init.name: numpy_helper.to_array(init) for init in onnx.load(str(target)).graph.initializer}
    for name, array in weights.items():
        np.testing.assert_array_equal(converted[name], array * 2)
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    assert session.run(None, {"x": np.zeros((1, 2, 5, 5), np.float32)})[0].shape == (1, 4)


def test_a_failed_convert_keeps_the_onnx_file_there_before(tmp_path, monkeypatch, capsys):
    onnxnn.save({"w": onnxnn.ones(2, 3)}, str(tmp_path / "w.safetensors"))
    target = tmp_path / "w.onnx"
    assert main(["convert", str(tmp_path / "w.safetensors"), str(target)]) == 0
    before = target.read_bytes()
    onnxnn.save({"w": onnxnn.zeros(2, 3)}, str(tmp_path / "w.safetensors"))

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "w.safetensors"), str(target)]) == 2
    assert str(target) in capsys.readouterr().err
    assert target.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["w.onnx", "w.safetensors"]


def test_convert_into_a_weights_only_onnx_model_and_bad_templates(tmp_path, capsys):
    state = {"layer.weight": onnxnn.ones(2, 3), "layer.bias": onnxnn.zeros(2)}
    onnxnn.save(state, str(tmp_path / "w.safetensors"))
    assert main(["convert", str(tmp_path / "w.safetensors"), str(tmp_path / "w.onnx")]) == 0
    outputs = onnxruntime.InferenceSession(str(tmp_path / "w.onnx"), providers=["CPUExecutionProvider"]).run(None, {})
    np.testing.assert_array_equal(outputs[0], np.ones((2, 3), np.float32))
    capsys.readouterr()

    conv_gemm_model(tmp_path / "convnet.onnx")
    arguments = ["convert", str(tmp_path / "w.safetensors"), str(tmp_path / "x.onnx")]
    assert main(arguments + ["--template", str(tmp_path / "convnet.onnx")]) == 2
    error = capsys.readouterr().err
    assert "missing ['conv.bias'" in error and "unexpected ['layer.bias'" in error and len(error.splitlines()) == 1
    assert main(["convert", str(tmp_path / "w.safetensors"), str(tmp_path / "w.pt"), "--key", "model"]) == 2
    assert "has no entry 'model'" in capsys.readouterr().err


# ----------------------------------------------------------------------------- export


def test_export_writes_a_model_onnxruntime_runs_like_the_module(factories, tmp_path):
    target = tmp_path / "linear.onnx"
    done = onnxnn_command(
        "export", factories / "toymodels.py:linear", "--input-shape", "3,4", "--dynamic-batch", "-o", target
    )
    assert done.returncode == 0, done.stderr
    model = onnx.load(str(target))
    weights = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    assert weights["weight"].shape == (2, 4) and weights["bias"].shape == (2,)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)  # another batch size: dynamic
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    (actual,) = session.run(None, {"input_0": x})
    assert_close_to_matmul(actual, x, weights["weight"].T, weights["bias"])


# ----------------------------------------------------------------------------- bench


def test_bench_reports_percentiles_and_throughput_as_json(tmp_path):
    path = tmp_path / "convnet.onnx"
    conv_gemm_model(path)
    done = onnxnn_command("bench", path, "--input-shape", "4,2,5,5", "--iterations", "20", "--warmup", "2", "--json")
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["iterations"] == 20 and figures["warmup"] == 2 and figures["batch"] == 4
    assert figures["inputs"] == {"x": [4, 2, 5, 5]}
    assert 0 < figures["min_ms"] <= figures["p50_ms"] <= figures["p90_ms"] <= figures["p99_ms"] <= figures["max_ms"]
    assert figures["samples_per_s"] == pytest.approx(4 * figures["runs_per_s"])
    assert figures["runs_per_s"] == pytest.approx(1e3 / figures["mean_ms"])


# ----------------------------------------------------------------------------- graph


def test_graph_writes_dot_with_a_cluster_per_module(tmp_path):
    pytest.importorskip("graphviz")
    path = tmp_path / "convnet.onnx"
    conv_gemm_model(path)
    done = onnxnn_command("graph", path, "-o", tmp_path / "g.dot")
    assert done.returncode == 0, done.stderr
    source = (tmp_path / "g.dot").read_text()
    assert "subgraph cluster_conv" in source and "subgraph cluster_fc" in source
    assert "Conv" in source and "Gemm" in source and "Flatten" in source
    assert '"[1, 3, 3, 3]"' in source  # the edge out of Conv carries its inferred shape


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed here")
def test_graph_draws_svg_and_png_with_dot(tmp_path, capsys):
    path = tmp_path / "convnet.onnx"
    conv_gemm_model(path)
    assert main(["graph", str(path), "-o", str(tmp_path / "g.svg")]) == 0
    assert "<svg" in (tmp_path / "g.svg").read_text()
    assert main(["graph", str(path), "-o", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").read_bytes().startswith(b"\x89PNG")


def test_graph_without_dot_names_the_missing_program(tmp_path, capsys, monkeypatch):
    pytest.importorskip("graphviz")
    conv_gemm_model(tmp_path / "convnet.onnx")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on this PATH, whatever the machine has
    assert main(["graph", str(tmp_path / "convnet.onnx"), "-o", str(tmp_path / "g.svg")]) == 2
    error = capsys.readouterr().err
    assert "needs Graphviz's 'dot' program" in error and "apt install graphviz" in error


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_one_line_naming_it_with_exit_status_2(tmp_path, factories):
    missing = tmp_path / "missing.onnx"
    assert_one_line_error(onnxnn_command("summary", missing), str(missing), "no such file")
    assert_one_line_error(
        onnxnn_command(
            "export", "toymodels:nothing_here", "--input-shape", "1,4", "-o", tmp_path / "m.onnx", cwd=factories
        ),
        "toymodels:nothing_here",
        "has no callable 'nothing_here'",
    )
    done = onnxnn_command("bench", "no_such_package.models:make", "--input-shape", "1,4", "--debug")
    assert done.returncode == 2 and "Traceback" in done.stderr  # --debug shows the traceback
    assert "cannot import 'no_such_package.models'" in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "arguments, fragments",
    [
        (["summary", "model.tflite"], ["'model.tflite'", "an .onnx file or a 'module:factory' path"]),
        (["summary", "toymodels:mlp"], ["needs --input-shape"]),
        (["summary", "toymodels:not_a_module", "--input-shape", "1,4"], ["returned int, not a module"]),
        (
            ["export", "toymodels:needs_arguments", "--input-shape", "1,4", "-o", "m.onnx"],
            ["calling 'needs_arguments()'"],
        ),
        (["summary", "nowhere/models.py:make", "--input-shape", "1,4"], ["no such file 'nowhere/models.py'"]),
        (["summary", "convnet.onnx", "--input-shape", "1,2"], ["has 2 dimensions; input 'x' has 4"]),
        (["export", "toymodels:mlp", "--input-shape", "1,4", "-o", "m.pt"], ["'m.pt'", "must be an .onnx file"]),
        (["graph", "convnet.onnx", "-o", "g.jpg"], ["'g.jpg'", "cannot draw a '.jpg' file"]),
        (["convert", "convnet.onnx", "w.npz"], ["'w.npz'", "cannot write a '.npz' file"]),
        (["convert", "weights.txt", "w.pt"], ["'weights.txt'", "not a '.txt' file"]),
        (["convert", "missing.pt", "w.safetensors"], ["'missing.pt'", "no such file"]),
        (["bench", "convnet.onnx", "--iterations", "0"], ["--iterations must be at least 1"]),
        (["check", "broken.onnx"], ["broken.onnx", "not a valid ONNX model"]),
    ],
)
def test_bad_arguments_in_process(arguments, fragments, factories, capsys, monkeypatch):
    monkeypatch.chdir(factories)
    conv_gemm_model(factories / "convnet.onnx")
    (factories / "broken.onnx").write_bytes(b"not a protobuf")
    (factories / "weights.txt").write_text("not weights")
    assert main(arguments) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"onnxnn {arguments[0]}: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize("command", ["summary", "bench", "graph", "convert"])
def test_external_data_outside_the_models_folder_is_refused(command, tmp_path, capsys):
    folder = tmp_path / "models"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(bytes(16))
    weight = numpy_helper.from_array(np.zeros(4, np.float32), "w")
    onnx.external_data_helper.set_external_data(weight, location="../secret.bin", offset=0, length=16)
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "escaping",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [weight],
    )
    path = folder / "escaping.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), str(path))
    outputs = {
        "bench": [],
        "summary": [],
        "graph": ["-o", str(tmp_path / "g.dot")],
        "convert": [str(tmp_path / "w.pt")],
    }
    assert main([command, str(path), *outputs[command]]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "points outside the model's folder" in lines[0], lines


def test_errors_are_red_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["inspect", str(tmp_path / "missing.onnx")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("\033[31monnxnn inspect:") and error.rstrip().endswith("\033[0m")
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["inspect", str(tmp_path / "missing.onnx")]) == 2
    assert "\033[" not in capsys.readouterr().err


def test_long_commands_draw_progress_bars_on_a_terminal_only(tmp_path, capsys, monkeypatch):
    conv_gemm_model(tmp_path / "convnet.onnx")
    arguments = ["bench", str(tmp_path / "convnet.onnx"), "--iterations", "3", "--warmup", "1", "--json"]
    assert main(arguments) == 0
    assert capsys.readouterr().err == ""  # not a terminal: no bar, so logs and pipes stay clean
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(arguments) == 0
    captured = capsys.readouterr()
    assert "warmup:" in captured.err and "bench:" in captured.err
    assert json.loads(captured.out)["iterations"] == 3  # the bars never mix into stdout


def test_export_with_integer_token_inputs(factories, tmp_path, capsys):
    (factories / "tokens.py").write_text(
        "from onnxnn import nn\n\ndef embed():\n    return nn.Sequential(nn.Embedding(4, 3), nn.Flatten())\n"
    )
    target = tmp_path / "embed.onnx"
    arguments = ["export", f"{factories / 'tokens.py'}:embed", "--input-shape", "2,5", "--input-dtype", "int64"]
    assert main(arguments + ["--input-names", "tokens", "-o", str(target)]) == 0
    model = onnx.load(str(target))
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.INT64
    table = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}["0.weight"]
    tokens = np.array([[0, 1, 2, 3, 0], [3, 3, 2, 1, 0]], np.int64)
    session = onnxruntime.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"tokens": tokens})[0], table[tokens].reshape(2, 15))
    arguments[-1] = "int8"  # not a choice: argparse's usage error, exit status 2
    with pytest.raises(SystemExit) as exit_info:
        main(arguments + ["-o", str(target)])
    assert exit_info.value.code == 2 and "invalid choice: 'int8'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "arguments",
    [
        ["inspect", "MISSING.onnx"],
        ["check", "MISSING.onnx"],
        ["convert", "MISSING.pt", "OUT.safetensors"],
        ["graph", "MISSING.onnx", "-o", "OUT.dot"],
        ["export-triton", "MISSING.onnx", "OUT"],
    ],
    ids=lambda arguments: arguments[0],
)
def test_a_missing_model_file_is_one_line_naming_it_through_the_real_command(arguments, tmp_path):
    # summary, export, bench and serve have theirs above and in tests/serve.
    missing = tmp_path / "missing"
    done = onnxnn_command(
        *[
            str(argument).replace("MISSING", str(missing)).replace("OUT", str(tmp_path / "out"))
            for argument in arguments
        ]
    )
    suffix = ".pt" if arguments[0] == "convert" else ".onnx"
    assert_one_line_error(done, str(missing) + suffix)
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.dot").exists()  # nothing half-written
