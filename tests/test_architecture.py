"""The layering of ARCHITECTURE.md, checked on every module's imports.

Each package sits in a layer and may import only its own layer or those below; packages import
one another without cycles; ``runtime`` and ``kernels`` never import each other (executors are
found by name); and no module imports onnxnn modules inside functions (which would hide a cycle).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "onnxnn"

# Lowest first. A package's modules may import its own layer and the layers below it.
LAYERS = [
    {"onnxnn.errors", "onnxnn.ir"},
    {"onnxnn.kernels", "onnxnn.runtime"},
    {"onnxnn.autograd"},
    {"onnxnn.nn", "onnxnn.optim", "onnxnn.utils", "onnxnn.distributions"},
    {"onnxnn.export", "onnxnn.import_", "onnxnn.models"},
    {
        "onnxnn",
        "onnxnn.backend",
        "onnxnn.cli",
        "onnxnn.commands",
        "onnxnn.compile",
        "onnxnn.cuda",
        "onnxnn.distributed",
        "onnxnn.serve",
        "onnxnn.amp",
        "onnxnn.fx",
        "onnxnn.profiler",
        "onnxnn.quantization",
        "onnxnn.testing",
    },
]
NEVER = {("onnxnn.runtime", "onnxnn.kernels"), ("onnxnn.kernels", "onnxnn.runtime")}
LAYER_OF = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _package_of(module: str) -> str:
    """The layered package a module belongs to (``onnxnn.runtime.ops.conv`` -> ``onnxnn.runtime``)."""
    parts = module.split(".")
    candidate = ".".join(parts[:2])
    return candidate if candidate in LAYER_OF else "onnxnn"


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path):
    """``(imported module, line, inside a function)`` for each import of an onnxnn module."""
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    for node in tree.body:  # ``if TYPE_CHECKING:`` imports run for type checkers only
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            top_level.update(id(child) for child in node.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from .. import nn`` imports the subpackage onnxnn.nn, not the package above it
            names = [
                f"{target}.{alias.name}" if _is_module(f"{target}.{alias.name}") else target for alias in node.names
            ]
        else:
            continue
        for name in names:
            if name == "onnxnn" or name.startswith("onnxnn."):
                yield name, node.lineno, id(node) not in top_level


MODULES = sorted(ROOT.rglob("*.py"))


@functools.lru_cache(maxsize=1)
def _edges() -> list:
    """Every import of an onnxnn module: parsed when a test first asks, not when the file is
    collected (pytest-xdist collects in every worker)."""
    return [
        (_module_name(path), path, target, line, nested) for path in MODULES for target, line, nested in _imports(path)
    ]


def test_every_package_has_a_layer():
    packages = {_package_of(_module_name(path)) for path in MODULES}
    assert packages <= set(LAYER_OF), sorted(packages - set(LAYER_OF))


def test_no_package_imports_a_layer_above_its_own():
    violations = []
    for module, path, target, line, _ in _edges():
        source, imported = _package_of(module), _package_of(target)
        if LAYER_OF[imported] > LAYER_OF[source] or (source, imported) in NEVER:
            violations.append(f"{path.relative_to(ROOT.parent)}:{line}: {source} imports {target}")
    assert not violations, "\n".join(violations)


def test_packages_import_one_another_without_cycles():
    graph: dict[str, set[str]] = {}
    for module, _, target, _, _ in _edges():
        source, imported = _package_of(module), _package_of(target)
        if source != imported:
            graph.setdefault(source, set()).add(imported)
    visiting, done, cycles = set(), set(), []

    def visit(package: str, path: list[str]) -> None:
        if package in visiting:
            cycles.append(" -> ".join(path[path.index(package) :] + [package]))
            return
        if package in done:
            return
        visiting.add(package)
        for imported in sorted(graph.get(package, ())):
            visit(imported, path + [package])
        visiting.discard(package)
        done.add(package)

    for package in sorted(graph):
        visit(package, [])
    assert not cycles, "\n".join(cycles)


def test_no_module_imports_onnxnn_inside_a_function():
    nested = [
        f"{path.relative_to(ROOT.parent)}:{line}: imports {target}"
        for _, path, target, line, inside in _edges()
        if inside
    ]
    assert not nested, "\n".join(nested)


@pytest.mark.parametrize("module", ["onnxnn.ir.graph", "onnxnn.ir.plan", "onnxnn.ir.registry"])
def test_the_bottom_layer_imports_nothing_above_it(module):
    targets = {_package_of(target) for name, _, target, _, _ in _edges() if name == module}
    assert targets <= {"onnxnn.ir", "onnxnn.errors"}, targets


def test_every_per_op_table_has_one_shape_and_a_public_lookup():
    import onnxnn  # noqa: F401  (registers every rule, kernel and importer)
    from onnxnn import ir

    for name, registry in ir.REGISTRIES.items():
        assert isinstance(registry, ir.Registry), name
    assert ir.lookup("gradient_rules", "Relu") is not None
    assert ir.lookup("kernels", "Relu") is not None
    assert ir.lookup("importers", "Relu") is None or callable(ir.lookup("importers", "Relu"))
    assert ir.lookup("shape_rules", "NoSuchOp") is None
    with pytest.raises(ValueError, match="unknown registry"):
        ir.lookup("recipes", "Relu")


def test_the_planner_inlines_is_held_faithfully():
    # plan() inlines graph.is_held for speed: both must pick the same extra outputs.
    import onnxnn
    from onnxnn.ir.graph import is_held
    from onnxnn.ir.plan import plan

    weight = onnxnn.randn(3, 2, requires_grad=True)
    x = onnxnn.randn(4, 3)
    hidden = (x @ weight).tanh()
    loss = hidden.square().mean()
    with onnxnn.no_grad():
        kept = (x * 2).exp()
        total = (kept + 1).sum()
    for target in (loss, total):
        graph = plan([target._value])
        pending = [value for node in graph.nodes for value in node.inputs if value is not None and value.data is None]
        expected = [value for value in dict.fromkeys(pending) if is_held(value)]
        assert graph.outputs[1:] == expected
    assert hidden._value in plan([loss._value]).outputs and kept._value in plan([total._value]).outputs
