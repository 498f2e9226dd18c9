"""The code of the tutorial and how-to pages runs: every ```python block, in order, per page.

Each page's blocks run one after another in one fresh namespace (a page is one program, as a
reader would type it), in a temporary working directory, so files the page writes go nowhere.
The onnxnn switches a page may flip (executor, eager mode, fast path, default dtype, grad mode,
threads, the flushing of subnormals) are restored afterwards.

Markers, an HTML comment on the line right before a block's opening fence (invisible on the site):

- ``<!-- docs-test: skip -->``: shown, never run (a fragment, or code that needs a GPU).
- ``<!-- docs-test: needs torch -->`` (one or more module names, comma separated): run only when
  those modules import; the page's other blocks never depend on such a block.

A block that includes a file (``--8<-- "examples/..."``, pymdownx.snippets) is not run here: the
included scripts are run by their own tests, and ``test_included_examples_are_tested`` checks that
each has one.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

import onnxnn
from onnxnn.ir.mode import MODE

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(
    [DOCS / "index.md", DOCS / "differences.md", *(DOCS / "tutorials").glob("*.md"), *(DOCS / "how-to").glob("*.md")]
)

FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(skip|needs\s+[\w., ]+?)\s*-->\s*$")
INCLUDE = re.compile(r'^--8<--\s+"([^"]+)"\s*$')


class Block:
    def __init__(self, page: Path, line: int, language: str, code: str, marker: str | None):
        self.page, self.line, self.language, self.code, self.marker = page, line, language, code, marker

    @property
    def includes(self) -> list[str]:
        return [match.group(1) for match in map(INCLUDE.match, self.code.splitlines()) if match]

    @property
    def needs(self) -> list[str]:
        if self.marker is None or not self.marker.startswith("needs"):
            return []
        return [name.strip() for name in self.marker[len("needs") :].split(",") if name.strip()]


def code_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, with the marker comment before each, if any."""
    blocks, lines = [], page.read_text().splitlines()
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            index += 1
            continue
        start = index
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "```")
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        blocks.append(
            Block(
                page,
                start + 1,
                match.group(1),
                "\n".join(lines[start + 1 : end]) + "\n",
                marker.group(1) if marker else None,
            )
        )
        index = end + 1
    return blocks


def _importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


@pytest.fixture
def restored_switches():
    executor, eager = onnxnn.get_executor(), MODE.eager
    fast_path, dtype, grad = onnxnn.is_fast_path_enabled(), onnxnn.get_default_dtype(), onnxnn.is_grad_enabled()
    threads, flush_denormal = MODE.intra_op_threads, MODE.flush_denormal
    with threadpool_limits(limits=None):  # restores numpy's BLAS threads (set_num_threads limits them)
        yield
    onnxnn.set_flush_denormal(flush_denormal)  # the thread's mode: later tests compute with subnormals
    if MODE.intra_op_threads != threads:
        MODE.intra_op_threads = threads
        onnxnn.clear_caches()
    onnxnn.set_executor(executor, eager=eager)
    onnxnn.set_fast_path(fast_path)
    onnxnn.set_default_dtype(dtype)
    onnxnn.set_grad_enabled(grad)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(DOCS)))
def test_page_code_runs(page, tmp_path, monkeypatch, capsys, restored_switches):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    for block in code_blocks(page):
        if block.language != "python" or block.marker == "skip" or block.includes:
            continue
        if not all(_importable(name) for name in block.needs):
            continue
        # Padded with blank lines so that a traceback names the page's own line numbers.
        code = "\n" * block.line + block.code
        exec(compile(code, str(page.relative_to(ROOT)), "exec"), namespace)  # noqa: S102  (the page's code)
        ran += 1
    assert ran or not any(b.language == "python" and not b.includes for b in code_blocks(page)), page


def test_pages_have_runnable_code():
    """Every tutorial and how-to page shows code, and every Python block is runnable or marked."""
    for page in PAGES:
        blocks = code_blocks(page)
        assert blocks, f"{page} has no code blocks"
        for block in blocks:
            assert block.language, f"{page}:{block.line}: a code block without a language"
            if block.marker is not None:
                assert block.marker == "skip" or block.needs, f"{page}:{block.line}: bad marker {block.marker!r}"


def test_included_examples_are_tested():
    """Each script a page includes exists and is run by a test under tests/examples."""
    tests = "\n".join(path.read_text() for path in (ROOT / "tests" / "examples").glob("test_*.py"))
    included = [name for page in DOCS.rglob("*.md") for block in code_blocks(page) for name in block.includes]
    assert included
    for name in included:
        path = ROOT / name
        assert path.is_file(), f"{name} is included by the docs but does not exist"
        assert path.name == "common.py" or path.name in tests, f"{name} is included by the docs but no test runs it"
