"""Every figure README.md and METHOD.md show is what the code prints now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
import torch.nn as nn

import torchroofline

ROOT = Path(__file__).resolve().parent.parent
_DOCS = (ROOT / "README.md", ROOT / "METHOD.md", *sorted((ROOT / "docs").glob("*.md")))


def test_generated_blocks_are_current():
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "sync_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_readme_quickstart_output_matches():
    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128))
    result = torchroofline.analyze(model, (torch.randn(1, 512),), gpu="h100-sxm", precision="fp32")
    readme = (ROOT / "README.md").read_text()
    assert result.format() in readme
    assert "result = torchroofline.analyze(model, (torch.randn(1, 512),)" in readme


def test_ci_runs_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    for command in ('pip install -e ".[dev]"', "pytest"):
        assert command in readme and command in ci
    example = next(
        line.strip() for line in ci.splitlines() if line.strip().startswith("torchroofline analyze")
    )
    assert example.split(" --")[0] in readme


def _fences_outside_generated_blocks(text: str) -> list[str]:
    """Code fences of program output (``text``, or ``console`` with a ``$`` prompt) that lie
    outside a ``<!-- BEGIN … -->`` … ``<!-- END … -->`` block."""
    found, inside_block, fence = [], False, None
    for line in text.splitlines():
        if line.startswith("<!-- BEGIN "):
            inside_block = True
        elif line.startswith("<!-- END "):
            inside_block = False
        elif line.startswith("```") and fence is None:
            fence = [line]
        elif line.startswith("```"):
            body = fence[1:]
            # a console fence shows output after a "$ " prompt; bare lines are commands to type
            shows_output = fence[0] == "```text" or (
                fence[0] == "```console" and any(row.startswith("$ ") for row in body)
            )
            if shows_output and not inside_block:
                found.append("\n".join(fence))
            fence = None
        elif fence is not None:
            fence.append(line)
    return found


def test_program_output_in_the_docs_is_generated():
    # a report line pasted by hand goes stale silently; generated blocks are checked above
    for doc in _DOCS:
        assert _fences_outside_generated_blocks(doc.read_text()) == [], doc.name
    pasted = "intro\n```text\n  Eager estimate : 64.5 µs\n```\n"
    assert _fences_outside_generated_blocks(pasted) == ["```text\n  Eager estimate : 64.5 µs"]


def _as_documented(function, on: str = "") -> str:
    """``function``'s call as docs/api.md writes it: every parameter in order, ``*`` before the
    keyword-only ones, defaults as Python writes them (with double quotes; a function as …); a
    method ``on`` an object named so (``result.on(...)``), without its ``self``."""
    import inspect

    parts, keyword_only = [], False
    for parameter in inspect.signature(function).parameters.values():
        if on and parameter.name == "self":
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not keyword_only:
            parts.append("*")
            keyword_only = True
        if parameter.kind is parameter.VAR_KEYWORD:
            parts.append(f"**{parameter.name}")
            continue
        if parameter.default is parameter.empty:
            parts.append(parameter.name)
            continue
        default = parameter.default
        shown = "…" if callable(default) else repr(default).replace("'", '"')
        parts.append(f"{parameter.name}={shown}")
    return f"`{on}{function.__name__}({', '.join(parts)})`"


def test_the_api_reference_lists_every_keyword_of_the_real_signatures():
    from torchroofline.suites import validate as validate_module

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    functions = [torchroofline.analyze, torchroofline.analyze_file, torchroofline.max_batch,
                 torchroofline.load_problem, torchroofline.compare_kernelbench,
                 torchroofline.validate, torchroofline.sweep_model,
                 torchroofline.sweep_kernelbench, torchroofline.sweep_solexecbench]
    for function in functions:
        assert _as_documented(function) in api
    # the methods a user calls on a result: `result.on` lacked its math=, sweep_model its name=
    for method in (torchroofline.Result.on, torchroofline.Result.with_actual,
                   torchroofline.Result.plot):
        assert _as_documented(method, on="result.") in api
    # the package's name is the function the docs show, not the module that holds it
    assert torchroofline.validate is validate_module.validate


def test_every_call_the_api_reference_names_can_be_imported():
    import importlib
    import re

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    cells = [row.split(" | ")[0] for row in api.splitlines() if row.startswith("| `")]
    # each call's name (`breakdown.module_costs(`), less those on a result or a GPU spec
    names = {name for cell in cells for name in re.findall(r"`([\w.]+)\(", cell)
             if name.split(".")[0] not in ("result", "spec")}
    assert {"analyze", "validate", "GPUSpec"} <= names
    for name in names:
        *module, attribute = name.removeprefix("torchroofline.").split(".")
        # `breakdown.module_costs` was named so, and `from torchroofline import breakdown` fails
        assert hasattr(importlib.import_module(".".join(["torchroofline", *module])), attribute)


def test_the_set_up_runs_every_kernelbench_problem_and_warns_before_the_cuda_download():
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    # the CPU-torch advice must come before the install that would pull 5.6 GB of CUDA builds
    assert readme.index("download.pytorch.org/whl/cpu") < readme.index('pip install -e ".[dev]"')
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")

    def extra(name: str) -> set[str]:
        # a list may span lines (no tomllib before Python 3.11)
        listed = re.search(rf"^{name} = \[(.*?)\]$", pyproject, re.MULTILINE | re.DOTALL).group(1)
        return set(re.findall(r'"([^"]+)"', listed))

    # what KernelBench's problem files import beyond torch (einops) comes with the set-up
    assert extra("kernelbench") <= extra("dev") and extra("viz") <= extra("dev")
