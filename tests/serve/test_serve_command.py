"""``onnxnn serve``'s command line: --help, and bad input as one line with exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .models import write_broken_model

ROOT = Path(__file__).resolve().parents[2]


def _serve(*arguments: str) -> subprocess.CompletedProcess:
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "onnxnn.cli", "serve", *arguments]
    return subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120)


def test_help_lists_the_flags_and_examples():
    done = _serve("--help")
    assert done.returncode == 0
    for flag in ("--max-batch-size", "--max-queue-delay-ms", "--max-body-bytes", "--intra-op-threads", "examples:"):
        assert flag in done.stdout


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
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, arguments, message):
    broken = write_broken_model(tmp_path / "broken.onnx")
    done = _serve(*[argument.replace("BROKEN", broken) for argument in arguments])
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
