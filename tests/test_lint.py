"""The repository is clean and formatted under ruff, as configured in pyproject.toml's ``[tool.ruff]`` section.

ruff runs as a subprocess on the repository root, the same commands a contributor runs
(``python -m ruff check .`` and ``python -m ruff format --check .``); its report is printed when a
check fails, so the failure says which lines to fix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "command",
    [["check"], ["format", "--check"]],
    ids=["lint", "format"],
)
def test_ruff_is_clean(command):
    # --no-cache: the test leaves no .ruff_cache in the checkout.
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = result.stdout + result.stderr
    print(report)
    assert result.returncode == 0, f"ruff {' '.join(command)} found problems (exit {result.returncode}):\n{report}"
