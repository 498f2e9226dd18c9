"""The repository is clean under ruff, as configured in pyproject.toml's ``[tool.ruff]`` section.

ruff runs as a subprocess on the repository root, the same command a contributor runs
(``python -m ruff check .``); its report is printed when the check fails, so the failure says which
lines to fix.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    # --no-cache: the test leaves no .ruff_cache in the checkout.
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    report = result.stdout + result.stderr
    print(report)
    assert result.returncode == 0, f"ruff check found problems (exit {result.returncode}):\n{report}"
