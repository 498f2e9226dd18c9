"""examples/finetune_digits.py runs end to end: fine-tuning steps, accuracy, export, onnxruntime agreement."""

from __future__ import annotations

import re

import pytest

from tests.example_scripts import EXAMPLES, run_script

pytest.importorskip("sklearn")  # the `examples` extra; the `test` extra installs it too


def test_finetune_digits_trains_exports_and_agrees(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ONNXNN_EXAMPLE_STEPS", "3")
    monkeypatch.setattr("sys.argv", ["finetune_digits.py"])
    output, namespace = run_script(EXAMPLES / "finetune_digits.py", monkeypatch)
    assert "step 3/3" in output
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", output).group(1))
    assert 0.0 <= accuracy <= 1.0
    # Same graph, same weights: onnxruntime's predictions are onnxnn's (one near-tie may round apart).
    agreement = float(re.search(r"onnxruntime agrees with onnxnn on ([0-9.]+)%", output).group(1))
    assert agreement >= 99.0
