"""KernelBench problem files, reference/generated timings and the comparison of both with SoL.

A problem is a Python file defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``; a generated solution defines ``ModelNew`` with the same interface. Problem
files are Python code and are **executed**, as KernelBench itself does.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode

from .api import analyze
from .errors import InputError, ProblemFileError, TorchrooflineError
from .hardware import GPUSpec
from .precision import restoring_switches
from .roofline import Actual, Result

_LEVEL_DIR = re.compile(r"^level(\d+)$")


@dataclass(frozen=True)
class Problem:
    """One loaded problem file."""

    name: str  #: file stem, e.g. ``"1_Square_matrix_multiplication_"``
    level: int | None  #: from a ``levelN`` parent folder
    path: Path
    model_class: type[nn.Module]
    get_inputs: Callable[[], Sequence[Any]]
    get_init_inputs: Callable[[], Sequence[Any]]


def level_of(path: Path) -> int | None:
    """The N of the nearest ``levelN`` folder above ``path``, else ``None``."""
    for parent in path.parents:
        match = _LEVEL_DIR.match(parent.name)
        if match:
            return int(match.group(1))
    return None


def load_problem(path: str | Path, *, class_name: str = "Model") -> Problem:
    """Execute a problem file in its own namespace and pick out its parts.

    Raises :class:`ProblemFileError` for a missing file, a syntax error, an exception at import,
    or a file without ``class_name`` / ``get_inputs``.
    """
    path = Path(path)
    if not path.is_file():
        raise ProblemFileError(f"{path}: no such problem file")
    module_name = f"_torchroofline_problem_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ProblemFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        raise ProblemFileError(
            f"{path}:{error.lineno}: syntax error: {error.msg}; fix the file"
        ) from error
    except Exception as error:  # noqa: BLE001 — the file's own code failed
        raise ProblemFileError(
            f"{path}: importing the file raised {type(error).__name__}: {_first_line(error)}"
        ) from error
    model_class = getattr(module, class_name, None)
    if not (isinstance(model_class, type) and issubclass(model_class, nn.Module)):
        raise ProblemFileError(
            f"{path}: defines no nn.Module class '{class_name}'; a KernelBench problem needs "
            f"'class {class_name}(nn.Module)', get_inputs() and get_init_inputs()"
        )
    get_inputs = getattr(module, "get_inputs", None)
    if not callable(get_inputs):
        raise ProblemFileError(f"{path}: defines no get_inputs(); add one returning the inputs")
    get_init_inputs = getattr(module, "get_init_inputs", None) or (lambda: [])
    return Problem(
        name=path.stem,
        level=level_of(path),
        path=path,
        model_class=model_class,
        get_inputs=get_inputs,
        get_init_inputs=get_init_inputs,
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def build_problem(problem: Problem) -> tuple[nn.Module, tuple, list[str]]:
    """Construct the model and its inputs under fake tensors (nothing is allocated, so a
    ``torch.randn(huge)`` parameter or a 6 GB input costs nothing). A constructor that needs real
    data is built for real instead, with a note."""
    notes: list[str] = []
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            return _construct(problem) + (notes,)
    except TorchrooflineError:
        raise
    except Exception as fake_error:  # noqa: BLE001 — retried with real tensors
        notes.append(
            f"built with real tensors: construction under fake tensors raised "
            f"{type(fake_error).__name__}: {_first_line(fake_error)}"
        )
    try:
        return _construct(problem) + (notes,)
    except Exception as error:  # noqa: BLE001 — the problem's own code failed
        raise ProblemFileError(
            f"{problem.path}: building the model or inputs raised {type(error).__name__}: "
            f"{_first_line(error)}"
        ) from error


def _construct(problem: Problem) -> tuple[nn.Module, tuple]:
    init_inputs = problem.get_init_inputs()
    model = problem.model_class(*init_inputs)
    inputs = problem.get_inputs()
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)):
        raise ProblemFileError(
            f"{problem.path}: get_inputs() returned {type(inputs).__name__}; return a list"
        )
    return model, tuple(inputs)


def analyze_file(
    path: str | Path,
    gpu: str | GPUSpec = "h100-sxm",
    precision: str = "fp32",
    *,
    actual_ms: float | None = None,
    cache: str = "cold",
    class_name: str = "Model",
) -> Result:
    """Load, build (on fake tensors) and analyze one KernelBench problem file. TF32 switches the
    file sets at import count for its own analysis and are put back afterwards."""
    with restoring_switches():
        problem = load_problem(path, class_name=class_name)
        model, inputs, notes = build_problem(problem)
        result = analyze(
            model, inputs, gpu, precision, cache=cache, actual_ms=actual_ms, name=problem.name
        )
    return result.with_notes(notes) if notes else result


# --- Timings -------------------------------------------------------------------------------


def load_timings(path: str | Path) -> dict[tuple[int | None, str], float]:
    """Mean times (ms) from a KernelBench timing JSON (``{"level1": {"file.py": {"mean": ms}}}``),
    keyed by (level, file name). A flat ``{"file.py": {"mean": ms}}`` or ``{"file.py": ms}`` gives
    level ``None``. A ``null`` entry (a problem that was not timed) is left out."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: cannot read timings JSON ({_first_line(error)})") from error
    if not isinstance(data, dict):
        raise InputError(f"{path}: timings must be a JSON object of levels or files")
    timings: dict[tuple[int | None, str], float] = {}
    for key, value in data.items():
        match = _LEVEL_DIR.match(key)
        if match and isinstance(value, dict):
            for file, entry in value.items():
                if entry is not None:
                    timings[(int(match.group(1)), file)] = _mean_ms(path, file, entry)
        elif value is not None:
            timings[(None, key)] = _mean_ms(path, key, value)
    return timings


def _mean_ms(path: Path, file: str, entry: Any) -> float:
    value = entry.get("mean") if isinstance(entry, dict) else entry
    if not isinstance(value, (int, float)) or value <= 0:
        raise InputError(f"{path}: '{file}' has no positive 'mean' time in ms")
    return float(value)


def lookup_time(
    timings: dict[tuple[int | None, str], float], level: int | None, file: str
) -> float | None:
    """The time for ``file`` at ``level``, else a level-less entry for the file."""
    return timings.get((level, file), timings.get((None, file)))


# --- Reference vs generated vs speed of light ------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A reference and/or a generated kernel's time set against the speed of light."""

    problem: str
    sol_ms: float
    ref: Actual | None  #: the reference's measured time against SoL
    gen: Actual | None  #: the generated kernel's

    @property
    def speedup(self) -> float | None:
        """ref / gen, KernelBench's score."""
        return self.ref.ms / self.gen.ms if self.ref and self.gen else None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"problem": self.problem, "sol_ms": self.sol_ms}
        for label, actual in (("ref", self.ref), ("gen", self.gen)):
            data[f"{label}_ms"] = actual.ms if actual else None
            data[f"{label}_sol_fraction"] = actual.sol_fraction if actual else None
            data[f"{label}_headroom"] = actual.headroom if actual else None
            data[f"{label}_impossible"] = bool(actual and actual.impossible)
        data["speedup"] = self.speedup
        return data

    def format(self) -> str:
        lines = [f"{self.problem}: speed of light {self.sol_ms:.4g} ms"]
        for label, actual in (("reference", self.ref), ("generated", self.gen)):
            if actual is None:
                continue
            verdict = (
                "IMPOSSIBLE (below SoL: bad timing or skipped work)"
                if actual.impossible
                else f"{actual.headroom:.2f}x headroom"
            )
            lines.append(
                f"  {label:<9} {actual.ms:.4g} ms  {actual.sol_fraction:.1%} of SoL  {verdict}"
            )
        if self.speedup is not None:
            lines.append(f"  speedup   {self.speedup:.2f}x (reference / generated)")
        return "\n".join(lines)

    def print(self) -> None:
        print(self.format())


def compare_kernelbench(
    result: Result, ref_ms: float | None = None, gen_ms: float | None = None
) -> Comparison:
    """Speedup, % of SoL reached by the reference and the generated kernel, headroom left."""
    return Comparison(
        result.model_name,
        result.sol_ms,
        result.with_actual(ref_ms).actual,
        result.with_actual(gen_ms).actual,
    )


# --- Finding problems ----------------------------------------------------------------------


def discover(paths: Iterable[str | Path], levels: set[int] | None = None) -> list[Path]:
    """Problem files under ``paths`` (a suite folder, a level folder or files), sorted by level
    then by the number KernelBench puts before the name; ``levels`` keeps only those levels."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [p for p in path.rglob("*.py") if not p.name.startswith("_")]
        elif path.exists():
            found.append(path)
        else:
            raise InputError(f"{path}: no such file or folder")
    unique = list(dict.fromkeys(found))
    if levels is not None:
        unique = [p for p in unique if level_of(p) in levels]
    return sorted(unique, key=_problem_order)


def _problem_order(path: Path) -> tuple:
    number = re.match(r"^(\d+)", path.name)
    return (level_of(path) or 0, str(path.parent), int(number.group(1)) if number else 0, path.name)


def run_name(path: Path) -> str:
    """``level1/1_Square_matrix_multiplication_.py`` style label for progress and reports."""
    level = level_of(path)
    return f"level{level}/{path.name}" if level is not None else path.name


__all__ = [
    "Comparison",
    "Problem",
    "analyze_file",
    "build_problem",
    "compare_kernelbench",
    "discover",
    "load_problem",
    "load_timings",
]
