"""KernelBench run directories as input: the generated kernels of a run and how KernelBench
judged them, set against the speed of light of the reference problem each one claims to compute.

KernelBench's pipeline writes ``runs/<run>/level_<L>_problem_<P>_sample_<S>_kernel.py`` (a
``ModelNew`` built with ``load_inline`` CUDA, Triton or plain PyTorch) and
``runs/<run>/eval_results.json``: ``{problem_id: [{sample_id, compiled, correctness, runtime,
runtime_stats, metadata}]}`` with times in ms (an older layout maps a problem to one entry, not a
list; newer entries add ``ref_runtime``). ``problem_id`` is the problem's number in its level,
the ``P`` of the reference file ``P_Name.py``.

The kernel files are read as text and never imported, compiled or run: the bound is the
reference problem's work, whatever the kernel does.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..price.precision import rung_name
from ..price.verdicts import Verdict, verdict_fields
from ..units import percent
from .batch_report import BatchReport, ProblemReport, beats_sol, level_name, unmeasured_cell

EVAL_RESULTS = "eval_results.json"
RUN_KERNEL_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")

#: How a generated kernel is built, told from its source text (first match wins; no match is
#: plain PyTorch). Files of these backends are never imported: ``load_inline`` needs a CUDA
#: toolkit (``CUDA_HOME``) and Triton a GPU driver, and neither is needed to bound the work.
KERNEL_BACKENDS: dict[str, re.Pattern[str]] = {
    "cuda": re.compile(r"\bload_inline\b|\bcpp_extension\b"),
    "triton": re.compile(r"^\s*(?:import|from)\s+triton\b", re.MULTILINE),
}
COMPILED_BACKENDS = frozenset(KERNEL_BACKENDS)

#: The fast_p-style thresholds: a sample counts at p when it is correct and reaches at least
#: p of the speed of light (SoL / runtime ≥ p) without beating it.
FAST_SOL_THRESHOLDS = (0.25, 0.5, 0.75)


@dataclass(frozen=True)
class KernelName:
    """What a run file's name says: ``level_1_problem_19_sample_0_kernel.py``."""

    level: int
    problem_id: int
    sample_id: int


def parse_kernel_name(name: str) -> KernelName | None:
    """The level, problem and sample of a KernelBench run file name, else ``None``."""
    match = RUN_KERNEL_NAME.match(name)
    return KernelName(*map(int, match.groups())) if match else None


def problem_number(file_name: str) -> int | None:
    """The number KernelBench puts before a problem's name (``19`` of ``19_ReLU.py``)."""
    match = re.match(r"^(\d+)_", file_name)
    return int(match.group(1)) if match else None


def kernel_backend(source: str) -> str:
    """``"cuda"``, ``"triton"`` (:data:`KERNEL_BACKENDS`) or ``"pytorch"``."""
    return next((name for name, rule in KERNEL_BACKENDS.items() if rule.search(source)), "pytorch")


def sol_score(kernel_ms: float | None, sol_ms: float | None, ref_ms: float | None) -> float | None:
    """``1 / (1 + (T_k − T_sol) / (T_ref − T_sol))``: 1 at the speed of light, 0.5 at the
    reference's time, towards 0 as the kernel slows down (above 0.5: faster than the reference).

    ``None`` (not scored) when a time is missing, when the kernel beats the speed of light (it is
    flagged faster than light instead: a timing bug or skipped work, never a score above 1), and
    when the reference is itself at or below the speed of light (no scale to score against)."""
    if kernel_ms is None or sol_ms is None or ref_ms is None:
        return None
    if beats_sol(sol_ms, kernel_ms) or ref_ms <= sol_ms:
        return None
    return 1 / (1 + (kernel_ms - sol_ms) / (ref_ms - sol_ms))


# --- Reading a run ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One generated kernel of a run and KernelBench's verdict on it. Times in ms."""

    level: int | None
    problem_id: int
    sample_id: int
    kernel_file: str | None  #: the run's file, None when eval_results names a sample with none
    backend: str | None  #: :func:`kernel_backend` of the file
    compiled: bool
    correct: bool
    runtime_ms: float | None  #: KernelBench's mean; None when not timed (it writes -1)
    ref_runtime_ms: float | None  #: the reference time KernelBench recorded, when it did
    error: str | None  #: the first error KernelBench's metadata names


@dataclass(frozen=True)
class Run:
    path: str
    samples: tuple[Sample, ...]


def read_json_object(path: Path, what: str, holding: str) -> dict:
    """A JSON file of ``what`` (for the errors) that must hold an object of ``holding``; a
    missing one is said as every command says a missing file."""
    if not path.exists():
        raise InputError(f"{path}: no such file; check the path")
    if path.is_dir():  # KernelBench keeps a GPU's timings in a folder of them
        inside = sorted(found.name for found in path.glob("*.json"))
        files = f" in it: {', '.join(inside[:6])}{', ...' if len(inside) > 6 else ''}" \
            if inside else ""
        raise InputError(f"{path}: is a folder; pass a {what} JSON file{files}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:  # the line says all a traceback would: no --debug hint
        raise InputError(f"{path}: cannot read {what} JSON ({error.msg} at line {error.lineno}, "
                         f"column {error.colno}); fix the file") from None
    except (OSError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{path}: cannot read {what} JSON ({first})") from error
    if not isinstance(data, dict):
        raise InputError(f"{path}: {what} must be a JSON object of {holding}")
    return data


def load_run(path: str | Path, level: int | None = None) -> Run:
    """Read a run folder: its kernel files (names only, plus the text to tell the backend) and
    ``eval_results.json``. A sample's level comes from its file name, else from the one level
    the run's files share, else ``level``. A kernel file without an entry is kept as not
    evaluated."""
    folder = Path(path)
    results_path = folder / EVAL_RESULTS
    if not results_path.is_file():
        raise InputError(
            f"{folder}: no {EVAL_RESULTS} (KernelBench's eval_from_generations.py writes it); "
            "pass --run runs/<run>, the folder holding it"
        )
    results = read_json_object(results_path, "eval results", "problem ids: lists of samples")
    files = {
        (name.problem_id, name.sample_id): (name.level, file)
        for file in sorted(folder.glob("level_*_problem_*_sample_*_kernel.py"))
        if (name := parse_kernel_name(file.name))
    }
    levels = {found_level for found_level, _ in files.values()}
    run_level = levels.pop() if len(levels) == 1 else level
    samples = {}
    for problem_key, entries in results.items():
        for entry in entries if isinstance(entries, list) else [entries]:
            sample = _sample(results_path, problem_key, entry, files, run_level)
            samples[(sample.problem_id, sample.sample_id)] = sample
    for key, (file_level, file) in files.items():
        if key not in samples:
            samples[key] = Sample(
                file_level, *key, str(file), kernel_backend(file.read_text(errors="replace")),
                False, False, None, None, f"no entry in {EVAL_RESULTS}",
            )
    return Run(str(folder), tuple(samples[key] for key in sorted(samples)))


def _sample(
    results_path: Path, problem_key: str, entry: Any, files: dict, run_level: int | None
) -> Sample:
    if not isinstance(entry, dict) or not str(problem_key).isdigit():
        raise InputError(
            f"{results_path}: problem '{problem_key}' is not a problem number with sample entries"
        )
    problem_id, sample_id = int(problem_key), int(entry.get("sample_id", 0))
    file_level, file = files.get((problem_id, sample_id), (run_level, None))
    stats = entry.get("runtime_stats") or {}
    return Sample(
        level=file_level,
        problem_id=problem_id,
        sample_id=sample_id,
        kernel_file=str(file) if file else None,
        backend=kernel_backend(file.read_text(errors="replace")) if file else None,
        compiled=bool(entry.get("compiled")),
        correct=bool(entry.get("correctness")),
        runtime_ms=_positive(entry.get("runtime", stats.get("mean"))),
        ref_runtime_ms=_positive(entry.get("ref_runtime")),
        error=_metadata_error(entry.get("metadata")),
    )


def _positive(value: Any) -> float | None:
    if isinstance(value, dict):  # some writers nest runtime stats: {"mean": ms, ...}
        value = value.get("mean")
    finite = isinstance(value, (int, float)) and 0 < value < math.inf  # NaN and inf: no time
    return float(value) if finite else None


def _metadata_error(metadata: Any) -> str | None:
    """KernelBench's metadata keys its failures ``compilation_error``, ``runtime_error``,
    ``correctness_issue``, ``cuda_error``, ``other_error``…: the first one's first line."""
    if not isinstance(metadata, dict):
        return None
    for key, value in metadata.items():
        if ("error" in key or "issue" in key) and not key.endswith("_name") and value:
            lines = str(value).strip().splitlines()
            return f"{key}: {lines[0][:200]}" if lines else key
    return None


# --- A run set against the speed of light ----------------------------------------------------


@dataclass(frozen=True)
class SampleReport:
    """A sample joined with its reference problem's analysis (None when none was analyzed: not
    given, or it failed). Every verdict on the runtime is the reference's
    (:meth:`~.batch_report.ProblemReport.verdict`: the single result's), so a sample reads the
    same kind, rung and shortcut as the problem would for that time. Times in ms."""

    sample: Sample
    reference: ProblemReport | None

    @property
    def problem(self) -> str | None:
        """The reference file's name; None when none was analyzed."""
        return self.reference.file if self.reference else None

    @property
    def name(self) -> str:
        sample = self.sample
        return f"{level_name(sample.level)} problem {sample.problem_id} sample {sample.sample_id}"

    @property
    def sol_ms(self) -> float | None:
        return self.reference.sol_ms if self.reference else None

    @property
    def sol_by_math_ms(self) -> dict[str, float] | None:
        """The speed of light (ms) per math rung; None when no reference was analyzed."""
        return self.reference.sol_by_math_ms if self.reference else None

    @property
    def ref_ms(self) -> float | None:
        """The reference's time: --timings, else KernelBench's ref_runtime."""
        measured = self.reference.measured_ms if self.reference else None
        return measured or self.sample.ref_runtime_ms

    @property
    def verdict(self) -> Verdict | None:
        """The reference's verdict on the runtime (the single result's)."""
        return self.reference.verdict(self.sample.runtime_ms) if self.reference else None

    @property
    def sol_fraction(self) -> float | None:
        """SoL / runtime (1.0 at the bound; above 1 only when faster than light); None where the
        verdict says a % of SoL says nothing (a constant output)."""
        judged = self.verdict
        runtime = self.sample.runtime_ms
        if judged is None or not judged.measures_kernel or not runtime:
            return None
        return self.sol_ms / runtime

    @property
    def possible_with(self) -> str | None:
        """The highest math rung the runtime does not beat (e.g. "tf32": correct only if the
        benchmark's tolerance admits TF32 math)."""
        judged = self.verdict
        return judged.rung if judged else None

    @property
    def lower_math(self) -> bool:
        """Below the speed of light of the program's own math, not of every rung: possible only
        if the benchmark's tolerance admits the lower math :attr:`possible_with` names."""
        judged = self.verdict
        return bool(judged and judged.kind == "lower math")

    @property
    def shortcut_verdict(self) -> str | None:
        """"possible only with an algebraic shortcut (…)" for a runtime at or above the bound
        but below the bound of the reference as written: a correct kernel must compute another,
        cheaper program (:attr:`~torchroofline.price.verdicts.Verdict.shortcut`)."""
        judged = self.verdict
        return judged.shortcut if judged else None

    @property
    def faster_than_light(self) -> bool:
        """The verdict: a runtime below the speed of light of every math, a timing bug or a
        kernel that skips work (reward hacking)."""
        judged = self.verdict
        return bool(judged and judged.impossible)

    @property
    def sol_score(self) -> float | None:
        """:func:`sol_score` against the speed of light of the math the runtime is possible
        with (:attr:`possible_with`: a kernel that beats the fp32 bound with TF32 math is scored
        against the TF32 one); None when faster than light. Every rung's bound is the one after
        algebraic shortcuts, the bound the verdicts use: a kernel that needs a shortcut
        (:attr:`shortcut_verdict`) is scored against it, never against the bound as written."""
        rung = self.possible_with
        sol_ms = self.sol_by_math_ms[rung] if rung is not None else self.sol_ms
        return sol_score(self.sample.runtime_ms, sol_ms, self.ref_ms)

    def reaches(self, fraction: float) -> bool:
        """Correct, not faster than light, and at least ``fraction`` of the speed of light."""
        reached = self.sol_fraction
        return (
            self.sample.correct and not self.faster_than_light
            and reached is not None and reached >= fraction
        )

    def to_dict(self) -> dict[str, Any]:
        sample, reference = self.sample, self.reference
        result = (reference.result or {}) if reference else {}
        judged = self.verdict
        return {
            "level": sample.level,
            "problem_id": sample.problem_id,
            "sample_id": sample.sample_id,
            "problem": self.problem,
            "kernel_file": sample.kernel_file,
            "backend": sample.backend,
            "compiled": sample.compiled,
            "correct": sample.correct,
            "runtime_ms": sample.runtime_ms,
            "ref_runtime_ms": sample.ref_runtime_ms,
            "ref_ms": self.ref_ms,
            "sol_ms": self.sol_ms,
            "sol_by_math_ms": self.sol_by_math_ms,
            "sol_fraction": self.sol_fraction,
            "possible_with": self.possible_with,
            "sol_as_written_ms": reference.sol_as_written_ms if reference else None,
            "sol_as_written_by_math_ms": reference.sol_as_written_by_math_ms if reference else None,
            "math": result.get("math", "program"),
            "precision": result.get("precision", "fp32"),
            "shortcut": reference.shortcut if reference else None,
            "constant_output": bool(result.get("constant_output")),
            "shortcut_verdict": self.shortcut_verdict,
            **verdict_fields(judged),
            "faster_than_light": self.faster_than_light,
            "sol_score": self.sol_score,
            "error": sample.error,
        }


@dataclass(frozen=True)
class RunReport:
    """A run's samples against the speed of light of the problems they claim to compute."""

    run: str
    batch: BatchReport  #: the reference problems' analysis
    samples: tuple[SampleReport, ...]

    @property
    def faster_than_light(self) -> tuple[SampleReport, ...]:
        return tuple(sample for sample in self.samples if sample.faster_than_light)

    @property
    def unmatched(self) -> tuple[SampleReport, ...]:
        """Samples whose reference problem was not analyzed (not given, or it failed)."""
        return tuple(sample for sample in self.samples if sample.sol_ms is None)

    @property
    def summary(self) -> dict[str, dict[str, Any]]:
        """Per level (and ``"all"``): counts, fast_sol shares, the median SoL score."""
        groups: dict[str, list[SampleReport]] = {"all": list(self.samples)}
        for sample in self.samples:
            groups.setdefault(level_name(sample.sample.level), []).append(sample)
        return {key: _run_summary(group) for key, group in groups.items()}

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (README, KernelBench runs)."""
        batch = self.batch.to_dict()
        return {
            "run": self.run,
            **{key: batch[key] for key in ("gpu", "gpu_key", "precision", "cache")},
            "samples": [sample.to_dict() for sample in self.samples],
            "summary": self.summary,
            "faster_than_light": [sample.name for sample in self.faster_than_light],
            "problems": batch["problems"],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunReport:
        """From :meth:`to_dict`'s layout (a saved run report): the samples joined again with
        the saved problems (:func:`join_run`); every derived figure is recomputed."""
        samples = tuple(
            Sample(**{item.name: sample.get(item.name) for item in fields(Sample)})
            for sample in data.get("samples", ())
        )
        return join_run(Run(data.get("run", "?"), samples), BatchReport.from_dict(data))


def fast_sol_key(fraction: float) -> str:
    """``"fast_sol_50"`` for 0.5: the summary key of a :data:`FAST_SOL_THRESHOLDS` share."""
    return f"fast_sol_{round(fraction * 100)}"


def _run_summary(samples: Sequence[SampleReport]) -> dict[str, Any]:
    count = len(samples)
    scores = [s.sol_score for s in samples if s.sample.correct and s.sol_score is not None]
    return {
        "samples": count,
        "compiled": sum(s.sample.compiled for s in samples),
        "correct": sum(s.sample.correct for s in samples),
        "faster_than_light": sum(s.faster_than_light for s in samples),
        "shortcut_only": sum(s.shortcut_verdict is not None for s in samples),
        **{
            fast_sol_key(p): sum(s.reaches(p) for s in samples) / count if count else None
            for p in FAST_SOL_THRESHOLDS
        },
        "median_sol_score": statistics.median(scores) if scores else None,
    }


def join_run(run: Run, batch: BatchReport) -> RunReport:
    """Each sample with the analyzed problem of its level whose file starts with its number."""
    problems = {
        (problem.level, problem_number(problem.file)): problem
        for problem in batch.problems
        if problem.ok
    }
    samples = tuple(
        SampleReport(sample, problems.get((sample.level, sample.problem_id)))
        for sample in run.samples
    )
    return RunReport(run.path, batch, samples)


# --- Markdown and CSV ------------------------------------------------------------------------


def _percent(value: float | None) -> str:
    return "" if value is None else percent(value)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _yes(value: bool) -> str:
    return "yes" if value else "no"


#: Columns of the per-sample table: header → (read from the sample's to_dict, Markdown cell).
RUN_COLUMNS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "level": ("level", str),
    "problem": ("problem", lambda v: v or "(not analyzed)"),
    "sample": ("sample_id", str),
    "backend": ("backend", lambda v: v or ""),
    "compiled": ("compiled", _yes),
    "correct": ("correct", _yes),
    "runtime_ms": ("runtime_ms", _number),
    "ref_ms": ("ref_ms", _number),
    "sol_ms": ("sol_ms", _number),
    "% of SoL": ("sol_fraction", _percent),
    "possible with": ("possible_with", lambda v: v or ""),
    "only with a shortcut": ("shortcut_verdict", lambda v: v or ""),
    "faster than light": ("faster_than_light", lambda v: "**YES**" if v else "no"),
    "SoL score": ("sol_score", lambda v: "" if v is None else f"{v:.3f}"),
    "error": ("error", lambda v: (v or "").replace("|", "\\|")[:120]),
}


def run_csv(report: RunReport) -> str:
    """One row per sample, the keys of :meth:`SampleReport.to_dict`."""
    rows = [sample.to_dict() for sample in report.samples]
    buffer = io.StringIO()
    fieldnames = list(rows[0]) if rows else [key for key, _ in RUN_COLUMNS.values()]
    writer = csv.DictWriter(buffer, fieldnames=fieldnames, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def run_markdown(report: RunReport) -> str:
    """Summary per level, the faster-than-light list, then one row per sample."""
    batch = report.batch
    shares = [f"≥{round(p * 100)}% of SoL" for p in FAST_SOL_THRESHOLDS]
    lines = [
        f"# torchroofline KernelBench run report — {report.run}, {batch.gpu}, {batch.precision}",
        "",
        "| level | samples | compiled | correct | faster than light | only with a shortcut | "
        + " | ".join(shares) + " | median SoL score |",
        "|---" * (7 + len(shares)) + "|",
    ]
    for level, row in report.summary.items():
        fast = [_percent(row[fast_sol_key(p)]) for p in FAST_SOL_THRESHOLDS]
        score = row["median_sol_score"]
        lines.append(
            f"| {level} | {row['samples']} | {row['compiled']} | {row['correct']} "
            f"| {row['faster_than_light']} | {row['shortcut_only']} | " + " | ".join(fast)
            + f" | {'' if score is None else f'{score:.3f}'} |"
        )
    lines += ["", "Faster than light (below the speed of light: a timing bug or reward hacking):"]
    lines += [
        f"- {s.name} ({s.problem}, {s.sample.backend}): {s.sample.runtime_ms:.4g} ms against "
        f"a {s.sol_ms:.4g} ms speed of light, {'correct' if s.sample.correct else 'incorrect'}"
        for s in report.faster_than_light
    ] or ["- none"]
    lines += [
        "",
        "| " + " | ".join(RUN_COLUMNS) + " |",
        "|---" * len(RUN_COLUMNS) + "|",
    ]
    for sample in report.samples:
        data = sample.to_dict()
        if sample.possible_with is not None:  # the math as the reports name it: fp32, TF32
            data["possible_with"] = rung_name(sample.possible_with, batch.precision)
        cells = {name: cell(data[key]) for name, (key, cell) in RUN_COLUMNS.items()}
        cells["% of SoL"] = unmeasured_cell(sample.verdict) or cells["% of SoL"]
        lines.append("| " + " | ".join(cells.values()) + " |")
    return "\n".join(lines) + "\n"


#: ``--out`` suffix → the text of the run report.
RUN_WRITERS: Mapping[str, Callable[[RunReport], str]] = {
    ".md": run_markdown,
    ".csv": run_csv,
    ".json": lambda report: json.dumps(report.to_dict(), indent=2) + "\n",
}
