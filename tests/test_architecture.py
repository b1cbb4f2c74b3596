"""The package's data flows one way: no module imports a later stage (README, Architecture)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "torchroofline"

#: The modules in pipeline order; a module may import only modules listed before it.
STAGES = (
    "errors", "gpu_spec", "kernelbench_gpus", "hardware",  # GPU facts
    # 1. trace
    "aten_ops", "_cuda_bindings", "collector", "intercept", "regions", "shadow", "trace",
    "training",  # a training step's trace: loss, backward, optimizer
    "costs", "precision",  # 2. costs, and the units each precision runs on
    "demand", "fusion", "step_graphs", "plans", "memory",  # 3. plans: necessary work,
    # schedules (a training step's graphs), live bytes
    "step_figures",  # a training step's figures per phase and its checkpoint what-if
    "given",  # which input values the bound holds for, and those values
    "seeded",  # a problem's seeded tensors, the big ones as shapes only
    "estimate", "roofline",  # 4. price: performance model, bound, Result
    "batch_report", "runs", "breakdown", "report", "viz",  # 5. report and pictures
    "api", "kernelbench", "batch", "validate", "cli", "_preload", "__init__", "__main__",
)

#: Thin conveniences on Result (``to_dict``, ``format``, ``plot``): imported inside the method
#: that uses them, never at module level, so they create no import cycle.
CONVENIENCES = {("roofline", "report"), ("roofline", "viz")}


def _runtime_imports(path: Path) -> list[tuple[str, bool]]:
    """(imported stage, at module level) for every relative import outside ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for sub in ast.walk(node)
    }
    top_level = {id(node) for node in tree.body}
    in_package = path.parent.name in PACKAGES
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level or id(node) in typing_only:
            continue
        if in_package and node.level == 1:
            continue  # inside the package (viz, demand, costs)
        names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
        found += [(name, id(node) in top_level) for name in names]
    return found


#: Stages that are packages: every module in them is that stage.
PACKAGES = ("viz", "demand", "costs")


def _stage(path: Path) -> str:
    return path.parent.name if path.parent.name in PACKAGES else path.stem


def test_every_module_has_a_stage() -> None:
    modules = {_stage(path) for path in PACKAGE.rglob("*.py")}
    assert modules == set(STAGES)


def test_no_module_imports_a_later_stage() -> None:
    rank = {name: position for position, name in enumerate(STAGES)}
    backwards = []
    for path in PACKAGE.rglob("*.py"):
        importer = _stage(path)
        for imported, at_module_level in _runtime_imports(path):
            allowed = (importer, imported) in CONVENIENCES and not at_module_level
            if rank[imported] > rank[importer] and not allowed:
                backwards.append(f"{importer} imports {imported}")
    assert backwards == []


def test_the_checker_sees_a_backward_import(tmp_path: Path) -> None:
    module = tmp_path / "costs.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .roofline import price\n"
        "if TYPE_CHECKING:\n    from .report import si\n"
        "def f():\n    from .viz import plot_result\n",
        encoding="utf-8",
    )
    assert _runtime_imports(module) == [("roofline", True), ("viz", False)]
