"""``onnxnn export-triton``: the repository layout, and config.pbtxt parsed back with Triton's ModelConfig protobuf."""

from __future__ import annotations

import errno
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from google.protobuf import text_format

from onnxnn.cli import main

from .models import CLASSES, FEATURES, write_fixed_shape_model, write_mlp

tritonclient = pytest.importorskip("tritonclient")
ROOT = Path(__file__).resolve().parents[2]


def _model_config_module():
    """tritonclient's model_config_pb2, loaded from its file: its package's __init__ wants grpcio, which
    the http extra does not install, and the message definitions do not need it."""
    path = Path(tritonclient.__file__).parent / "grpc" / "model_config_pb2.py"
    spec = importlib.util.spec_from_file_location("triton_model_config_pb2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _export(*arguments: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "onnxnn.cli", "export-triton", *arguments]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)


def _parse(folder: Path):
    model_config = _model_config_module()
    return model_config, text_format.Parse((folder / "config.pbtxt").read_text(), model_config.ModelConfig())


def test_batchable_model_gets_max_batch_size_dynamic_batching_and_dims_without_the_batch_axis(tmp_path):
    source = write_mlp(tmp_path / "mlp.onnx")
    done = _export(source, str(tmp_path / "repo"), "--name", "classifier", "--max-batch-size", "32", "--instances", "2")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "repo" / "classifier"
    pb, config = _parse(folder)
    assert config.name == "classifier" and config.backend == "onnxruntime"
    assert config.max_batch_size == 32
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [("x", pb.TYPE_FP32, [FEATURES])]
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [
        ("logits", pb.TYPE_FP32, [CLASSES]),
        ("label", pb.TYPE_INT64, [1]),
    ]
    # A per-row scalar: Triton's idiom is dims [1] reshaped to [].
    assert config.output[1].HasField("reshape") and list(config.output[1].reshape.shape) == []
    assert config.HasField("dynamic_batching") and config.dynamic_batching.max_queue_delay_microseconds == 1000
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, pb.ModelInstanceGroup.KIND_CPU)]
    # The repository's model is the source model, runnable as it is.
    x = np.ones((2, FEATURES), np.float32)
    expected = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    copied = onnxruntime.InferenceSession(str(folder / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    for ours, theirs in zip(copied.run(None, {"x": x}), expected):
        np.testing.assert_array_equal(ours, theirs)  # same graph, same inputs, same kernels


def test_fixed_shape_model_gets_full_dims_and_no_batching(tmp_path, capsys):
    assert main(["export-triton", write_fixed_shape_model(tmp_path / "fixed.onnx"), str(tmp_path / "repo")]) == 0
    assert "config.pbtxt" in capsys.readouterr().out
    pb, config = _parse(tmp_path / "repo" / "fixed")
    assert config.name == "fixed" and config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [
        ("a", pb.TYPE_INT32, [2, 3]),
        ("b", pb.TYPE_FP64, [2, 3]),
    ]
    assert onnx.load(str(tmp_path / "repo" / "fixed" / "1" / "model.onnx")).graph.name == "fixed"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["missing.onnx", "repo"], "'missing.onnx': no such file"),
        (["NOT_ONNX", "repo"], "not a valid ONNX model"),
        (["MLP", "repo", "--name", "../escape"], "must be letters, digits"),
        (["MLP", "repo", "--instances", "0"], "--instances >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys, arguments, message):
    (tmp_path / "bad.onnx").write_bytes(b"\x00not a protobuf\xff" * 4)
    mlp = write_mlp(tmp_path / "mlp.onnx")
    substitutions = {"NOT_ONNX": str(tmp_path / "bad.onnx"), "MLP": mlp, "repo": str(tmp_path / "repo")}
    status = main(["export-triton", *[substitutions.get(argument, argument) for argument in arguments]])
    stderr = capsys.readouterr().err
    assert status == 2 and message in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1


def test_bad_input_through_the_process_is_one_line_without_a_traceback(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"\x00not a protobuf\xff" * 4)
    done = _export(str(tmp_path / "bad.onnx"), str(tmp_path / "repo"))
    assert done.returncode == 2 and "not a valid ONNX model" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_help_lists_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["export-triton", "--help"])
    printed = capsys.readouterr().out
    assert exited.value.code == 0 and "examples:" in printed and "--max-batch-size" in printed


def test_a_failed_write_keeps_the_repository_model_there_before(tmp_path, monkeypatch, capsys):
    first = write_fixed_shape_model(tmp_path / "fixed.onnx")
    assert main(["export-triton", first, str(tmp_path / "repo")]) == 0
    model = tmp_path / "repo" / "fixed" / "1" / "model.onnx"
    before = model.read_bytes()
    write_mlp(tmp_path / "fixed.onnx")  # another model under the same name

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full_disk)
    capsys.readouterr()
    assert main(["export-triton", first, str(tmp_path / "repo")]) == 2
    assert str(model) in capsys.readouterr().err
    assert model.read_bytes() == before and os.listdir(model.parent) == ["model.onnx"]


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "-x", "a/b", "a b"])
def test_a_name_that_is_not_a_folder_inside_the_repository_is_refused_before_writing(tmp_path, capsys, name):
    (tmp_path / "source").mkdir()
    source = write_mlp(tmp_path / "source" / "mlp.onnx")
    repository = tmp_path / "repo" / "inner"
    status = main(["export-triton", source, str(repository), f"--name={name}"])
    stderr = capsys.readouterr().err
    assert status == 2 and "must be letters, digits" in stderr and "starting with a letter" in stderr, stderr
    written = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    assert written == ["source", "source/mlp.onnx"]  # not even REPO_DIR
