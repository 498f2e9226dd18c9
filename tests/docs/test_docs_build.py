"""The documentation site builds with warnings as errors (``mkdocs build --strict``).

A broken link, a page missing from the navigation, an API reference entry naming an object that
no longer exists, a docstring mkdocstrings cannot parse, or an included example that moved, each
fails this test. Skipped only where mkdocs is not installed (the ``test`` extra installs it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings_handlers.python")


def test_docs_build_strict(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in (
        "index.html",
        "tutorials/modules_note/index.html",
        "reference/nn/index.html",
        "op_coverage/index.html",
        "api_status/index.html",
    ):
        assert (site / page).is_file(), page
    # The included example scripts and the generated reference are on the pages, not placeholders.
    assert "class MyLinear(nn.Module)" in (site / "tutorials/modules_note/index.html").read_text()
    assert 'id="onnxnn.nn.Module.state_dict"' in (site / "reference/nn/index.html").read_text()
