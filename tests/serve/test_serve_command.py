"""``onnxnn serve``'s command line: --help, and bad input as one line with exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxnn.cli import main

from .models import write_broken_model

ROOT = Path(__file__).resolve().parents[2]


def _serve(*arguments: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "onnxnn.cli", "serve", *arguments]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)


def test_help_lists_the_flags_and_examples(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--help"])
    printed = capsys.readouterr().out
    assert exited.value.code == 0
    for flag in ("--max-batch-size", "--max-queue-delay-ms", "--max-body-bytes", "--intra-op-threads", "examples:"):
        assert flag in printed


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["BROKEN", "--port", "0"], "no model loaded: broken:"),
        (["missing.onnx", "--port", "0"], "no model loaded: missing:"),
        (["a=BROKEN", "a=BROKEN"], "given twice"),
        (["=x.onnx"], "expected PATH or NAME=PATH"),
        (["BROKEN", "--max-batch-size", "-1"], "--max-batch-size must be >= 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys, arguments, message):
    broken = write_broken_model(tmp_path / "broken.onnx")
    status = main(["serve", *[argument.replace("BROKEN", broken) for argument in arguments]])
    stderr = capsys.readouterr().err
    assert status == 2 and message in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1


def test_bad_input_through_the_process_is_one_line_without_a_traceback(tmp_path):
    done = _serve(write_broken_model(tmp_path / "broken.onnx"), "--port", "0")
    assert done.returncode == 2 and "no model loaded: broken:" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
