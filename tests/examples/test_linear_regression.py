"""examples/linear_regression.py (the README's main job): a progress bar with the running loss, the
printed loss falling, and a loss-curve PNG when matplotlib is installed (a note when it is not)."""

from __future__ import annotations

import re
import sys

import pytest
from example_scripts import EXAMPLES, run_script

SCRIPT = EXAMPLES / "linear_regression.py"


def _printed_losses(output: str) -> list[float]:
    return [float(value) for value in re.findall(r"^step +\d+ +loss ([0-9.]+)$", output, re.MULTILINE)]


def test_shows_a_progress_bar_and_saves_the_loss_curve(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    output, namespace = run_script(SCRIPT, monkeypatch)
    bar = capsys.readouterr().err
    assert "training: 100%" in bar and "201/201" in bar and "loss=" in bar
    losses = _printed_losses(output)
    assert len(losses) == 11 and losses[-1] < 1e-2 * losses[0]
    assert namespace["losses"][-1] == pytest.approx(losses[-1], abs=1e-5)
    assert "saved the loss curve to linear_regression_loss.png" in output
    assert (tmp_path / "linear_regression_loss.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_runs_without_matplotlib_and_says_the_plot_was_skipped(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # None in sys.modules makes `import matplotlib` raise ImportError, as on an install without it.
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)
    output, _ = run_script(SCRIPT, monkeypatch)
    assert "skipped the loss-curve plot" in output and "fitted: y = 3.0" in output
    assert not (tmp_path / "linear_regression_loss.png").exists()
