"""The package's layout shows the pipeline and its data flows one way (README, Architecture).

Stages in order: trace → costs → plan → price → (api) → suites → present → cli. A module
imports only its own stage or earlier ones, at module level or inside a function, and no two
modules import each other, even through others (imports under ``TYPE_CHECKING`` are for
annotations and do not count).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "torchroofline"
README = PACKAGE.parents[1] / "README.md"

#: Stages in pipeline order; a module may import only its own stage or those listed before it.
STAGES = (
    ("errors", "units"),  # what every stage may use: our exceptions, numbers with units
    ("trace",),  # 1. trace on fake tensors
    ("costs",),  # 2. each op's FLOPs and bytes
    ("plan",),  # 3. necessary work, fused and eager plans, memory
    ("price",),  # 4. GPUs, precision, the bound and the estimates: Result
    ("api",),  # analyze(): stages 1–4 in one call
    ("suites",),  # KernelBench problems, batches, runs, validation
    ("present",),  # text, JSON and pictures of a Result or a suite
    ("cli", "_preload", "_startup", "__init__", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(STAGES) for name in names}

#: Limits that keep the layout readable.
MAX_TOP_LEVEL_MODULES = 12
MAX_MODULE_LINES = 1000
MAX_README_CHARS = 20_000


def _module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(path: Path, root: Path = PACKAGE) -> list[str]:
    """Every module of the package that ``path`` imports outside ``TYPE_CHECKING`` (dotted,
    relative to the package), at module level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in ast.walk(node)
    }
    package = _module_name(path, root).split(".") if path.name == "__init__.py" else (
        _module_name(path, root).split(".")[:-1]
    )
    package = [part for part in package if part]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level or id(node) in typing_only:
            continue
        base = package[: len(package) - (node.level - 1)]
        # each imported name may be a module of that package (from .costs import rules); a
        # name that is no module resolves to the module holding it (see _graph)
        module = [*base, *(node.module.split(".") if node.module else [])]
        found += [".".join([*module, alias.name]) for alias in node.names]
    return found


def _graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    modules = {_module_name(path, root): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _runtime_imports(path, root):
            while imported and imported not in modules:  # a name imported from a module
                imported = imported.rpartition(".")[0]
            if imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _stage(module: str) -> str:
    return module.split(".")[0] or "__init__"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_module_has_a_stage() -> None:
    assert {_stage(module) for module in _graph()} <= set(RANK)


def test_no_module_imports_a_later_stage() -> None:
    backwards = [
        f"{importer} imports {imported}"
        for importer, targets in _graph().items()
        for imported in targets
        if RANK[_stage(imported)] > RANK[_stage(importer)]
    ]
    assert backwards == []


def test_no_import_circle() -> None:
    assert _cycles(_graph()) == []


def test_the_checkers_see_a_backward_import_and_a_circle(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "costs").mkdir()
    (tmp_path / "costs" / "__init__.py").write_text("from . import rules\n")
    (tmp_path / "costs" / "rules.py").write_text("def f():\n    from . import helper\n")
    (tmp_path / "costs" / "helper.py").write_text("from .rules import f\n")
    (tmp_path / "trace.py").write_text("def g():\n    from .costs import rules\n")
    (tmp_path / "price.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .present import x\n"
    )
    graph = _graph(tmp_path)
    assert graph["trace"] == {"costs.rules"}  # in a function, and found as a later stage
    assert graph["price"] == set()  # annotations only
    assert _cycles(graph) == [["costs.helper", "costs.rules"]]


def test_the_layout_stays_readable() -> None:
    top_level = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top_level) <= MAX_TOP_LEVEL_MODULES, top_level
    long_modules = {
        str(path.relative_to(PACKAGE)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long_modules == {}
    assert len(README.read_text(encoding="utf-8")) <= MAX_README_CHARS


def test_every_stage_folder_says_what_enters_and_leaves() -> None:
    for names in STAGES:
        for name in names:
            init = PACKAGE / name / "__init__.py"
            if init.exists():
                doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
                assert doc and re.search(r"\bin\b", doc) and re.search(r"\bout\b", doc), name
