"""The package type-checks under mypy, and so does a user's script against the installed package.

mypy runs as a subprocess, the commands a contributor runs: ``python -m mypy`` on the repository
root (configured in pyproject.toml's ``[tool.mypy]``: the ``onnxnn`` package), and a check of
``tests/typing/user_model.py`` from outside the checkout, with the repository on ``PYTHONPATH``
the way an installed package is found, so mypy reads onnxnn's inline types only because of its
``py.typed`` marker (PEP 561; without it every onnxnn name would be Any and nothing would be
checked). Caches go to a temporary folder, so no ``.mypy_cache`` is left in the checkout; mypy's
report is printed when a check fails.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from onnxnn.runtime import tensor_api
from onnxnn.runtime.tensor_declarations import TensorDeclarations

ROOT = Path(__file__).resolve().parent.parent
USER_SCRIPT = ROOT / "tests" / "typing" / "user_model.py"


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory) -> Path:
    # One cache for both checks: the user script's check reuses what the package's check parsed.
    return tmp_path_factory.mktemp("mypy_cache")


def _run_mypy(arguments: list[str], cwd: Path, cache: Path, env: dict | None = None) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache), *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = result.stdout + result.stderr
    print(report)
    assert result.returncode == 0, f"mypy {' '.join(arguments)} found problems (exit {result.returncode}):\n{report}"


def test_package_type_checks(mypy_cache):
    _run_mypy([], ROOT, mypy_cache)


def test_user_script_type_checks_against_the_installed_package(mypy_cache, tmp_path):
    # From an empty folder, with onnxnn found on PYTHONPATH as an installed package is. The project's
    # configuration (mypy's default strictness, as a user's project has) lets this check reuse the
    # package's cache: a few seconds instead of a second full analysis of onnxnn.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    _run_mypy(["--config-file", str(ROOT / "pyproject.toml"), str(USER_SCRIPT)], tmp_path, mypy_cache, env)


def test_user_script_runs():
    # The script is a working program, not only a well-typed one.
    spec = importlib.util.spec_from_file_location("user_model", USER_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main()


def test_declared_tensor_methods_are_the_attached_ones():
    """tensor_declarations.py declares exactly the methods tensor_api.py attaches from its tables."""
    attached = set(tensor_api.DELEGATED)
    for table in (tensor_api.IN_PLACE_ARITHMETIC, tensor_api.IN_PLACE, tensor_api.IN_PLACE_RESHAPING):
        attached.update(name + "_" for name in table)
    delegated = {name for name, value in vars(TensorDeclarations).items() if callable(value)}
    in_place = set(TensorDeclarations.__annotations__)
    assert delegated | in_place == attached
    assert delegated == set(tensor_api.DELEGATED)
