"""docs/api_status.md stays true: its "done" names exist, its other names do not, and every public
onnxnn.Tensor attribute, onnxnn function and name of the namespaces it covers (torch's classes,
nn, nn.functional, nn.init, nn.utils, optim, lr_scheduler, autograd) is listed. With torch
installed, it also lists every public torch name of each (regenerate with ``tools/api_status.py``).
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

import onnxnn

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "api_status.md"
sys.path.insert(0, str(ROOT / "tools"))
import api_status  # noqa: E402

ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+?) \|")


def _sections() -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {}
    current = None
    for line in TABLE.read_text().splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), {})
            continue
        match = ROW.match(line)
        if match and current is not None:
            current[match.group(1)] = match.group(2).strip()
    return sections


SECTIONS = _sections()
OWNERS = {"torch.Tensor methods": onnxnn.Tensor, "torch functions": onnxnn}


def test_api_status_table_matches_the_code():
    tensor_rows, function_rows = SECTIONS["torch.Tensor methods"], SECTIONS["torch functions"]
    extra = SECTIONS["onnxnn only"]
    assert tensor_rows and function_rows
    for title, rows in (("torch.Tensor methods", tensor_rows), ("torch functions", function_rows)):
        owner = OWNERS[title]
        for name, status in rows.items():
            assert status in ("done", "n/a", "missing"), (title, name, status)
            if status == "done":
                assert hasattr(owner, name), f"{title}: '{name}' is marked done but onnxnn lacks it"
    # A name onnxnn has must be marked done (the table would undersell it otherwise).
    for name in api_status.onnxnn_tensor_names(onnxnn):
        status = tensor_rows.get(name) or (extra.get(name) == "Tensor" and "done")
        assert status == "done", f"onnxnn.Tensor.{name} is not listed as done in docs/api_status.md"
    for name in api_status.onnxnn_function_names(onnxnn):
        status = function_rows.get(name) or (extra.get(name) == "function" and "done")
        assert status == "done", f"onnxnn.{name} is not listed as done in docs/api_status.md"


def test_api_status_summary_counts_its_rows():
    text = TABLE.read_text()
    for title, label in (("torch.Tensor methods", "torch.Tensor methods"), ("torch functions", "torch functions")):
        rows = SECTIONS[title]
        done = sum(status == "done" for status in rows.values())
        assert f"- {label}: {done}/{len(rows)} done" in text


def test_api_status_table_lists_every_torch_name():
    torch = pytest.importorskip("torch")
    tensor_rows, function_rows = SECTIONS["torch.Tensor methods"], SECTIONS["torch functions"]
    missing_methods = sorted(set(api_status._torch_tensor_names(torch)) - set(tensor_rows))
    missing_functions = sorted(set(api_status._torch_function_names(torch)) - set(function_rows))
    assert not missing_methods, f"torch.Tensor methods absent from the table: {missing_methods}"
    assert not missing_functions, f"torch functions absent from the table: {missing_functions}"


NAMESPACE_IDS = [title for title, *_ in api_status.NAMESPACES]


@pytest.mark.parametrize("title, torch_path, onnxnn_path, kind", api_status.NAMESPACES, ids=NAMESPACE_IDS)
def test_namespace_tables_match_the_code(title, torch_path, onnxnn_path, kind):
    module = importlib.import_module(onnxnn_path)
    rows, extra = SECTIONS[title], SECTIONS["onnxnn only"]
    assert rows
    for name, status in rows.items():
        assert status in ("done", "n/a", "missing"), (title, name, status)
        if status == "done":
            assert name in api_status.namespace_names(module, kind), (
                f"{title}: '{name}' is marked done but {onnxnn_path} lacks it"
            )
    for name in api_status.namespace_names(module, kind):
        status = rows.get(name) or (extra.get(name) == title and "done")
        assert status == "done", f"{onnxnn_path}.{name} is not listed as done under {title} in docs/api_status.md"
    done = sum(status == "done" for status in rows.values())
    assert f"- {title}: {done}/{len(rows)} done" in TABLE.read_text()


@pytest.mark.parametrize("title, torch_path, onnxnn_path, kind", api_status.NAMESPACES, ids=NAMESPACE_IDS)
def test_namespace_tables_list_every_torch_name(title, torch_path, onnxnn_path, kind):
    pytest.importorskip("torch")
    names = api_status.namespace_names(importlib.import_module(torch_path), kind)
    absent = sorted(set(names) - set(SECTIONS[title]))
    assert not absent, f"{torch_path} names absent from the table: {absent}"
