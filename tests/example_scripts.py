"""Running an example script as its user would, capturing what it prints and the names it leaves."""

from __future__ import annotations

import contextlib
import io
import runpy
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_script(path: Path, monkeypatch) -> tuple[str, dict]:
    """Runs ``path`` as ``__main__`` with its folder importable (a fresh ``common`` helper module each
    time); the caller chooses the working directory. Returns (standard output, module namespace)."""
    monkeypatch.syspath_prepend(str(path.parent))
    sys.modules.pop("common", None)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        namespace = runpy.run_path(str(path), run_name="__main__")
    return output.getvalue(), namespace
