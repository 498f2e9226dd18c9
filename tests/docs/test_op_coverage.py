"""docs/op_coverage.md is what tools/op_coverage.py writes from the registries, and each row says
what the registries say (regenerate with ``PYTHONPATH=. python tools/op_coverage.py``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from onnxnn import ir

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "docs" / "op_coverage.md"
sys.path.insert(0, str(ROOT / "tools"))
import op_coverage  # noqa: E402

ROW = re.compile(r"^\| `([^`]+)` \|(.*)\|$")


def _rows() -> dict[tuple[str, str], list[str]]:
    rows, domain = {}, None
    for line in TABLE.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            domain = "" if title == "ai.onnx" else title
            continue
        match = ROW.match(line)
        if match and domain is not None:
            rows[(domain, match.group(1))] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_op_coverage_file_is_current():
    assert TABLE.read_text() == op_coverage.render(ir.REGISTRIES), (
        "docs/op_coverage.md is stale: run PYTHONPATH=. python tools/op_coverage.py"
    )


def test_every_registered_op_has_a_row_that_says_what_is_registered():
    rows = _rows()
    registered = {key for registry in ir.REGISTRIES.values() for key in registry.table}
    assert set(rows) == registered
    for (domain, op_type), cells in rows.items():
        shape, gradient, kernel, decomposition, importer = cells
        assert (shape == "yes") == (ir.lookup("shape_rules", op_type, domain) is not None), op_type
        assert (kernel == "yes") == (ir.lookup("kernels", op_type, domain) is not None), op_type
        assert (decomposition == "yes") == (ir.lookup("decompositions", op_type, domain) is not None), op_type
        assert (importer == "yes") == (ir.lookup("importers", op_type, domain) is not None), op_type
        has_rule = ir.lookup("gradient_rules", op_type, domain) is not None
        marked = ir.lookup("non_differentiable", op_type, domain) is not None
        assert gradient == ("rule" if has_rule else "none needed" if marked else ""), op_type


def test_the_gap_list_names_only_ops_without_entries():
    text = TABLE.read_text()
    gap = text[text.index("## Standard ops without an entry") :]
    named = re.findall(r"`(\w+)`", gap)
    registered = {op_type for registry in ir.REGISTRIES.values() for domain, op_type in registry.table if domain == ""}
    assert named and not set(named) & registered
