"""The KernelBench batch report as facts: one :class:`ProblemReport` per problem file and the
:class:`BatchReport` of a run, shared by ``batch`` (which builds it), ``report`` (Markdown, CSV)
and ``viz`` (suite pictures). Every derived figure — % of SoL, speedup, "impossible", the
per-level summary — is a property computed in one place; the JSON layout is :meth:`to_dict`,
and :meth:`from_dict` reads it back (``torchroofline plot report.json``)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..price.shortcuts import labels_of
from ..price.verdicts import Verdict, verdict, verdict_fields

NO_LEVEL = "no-level"
"""The name of the group of problems outside a ``levelN`` folder (summary key, file names)."""


def level_name(level: int | None) -> str:
    """``"level1"``, or :data:`NO_LEVEL`."""
    return NO_LEVEL if level is None else f"level{level}"


def beats_sol(sol_ms: float | None, measured_ms: float | None) -> bool:
    """A measured time below the speed of light at the analysis's math: a wrong timing, a
    kernel that skips work, or one computing at lower precision (a run sample's SoL score is
    then taken against the bound of that precision: :attr:`~.runs.SampleReport.sol_score`)."""
    return sol_ms is not None and bool(measured_ms) and measured_ms < sol_ms


def judge(
    sol_by_math_ms: Mapping[str, float] | None,
    measured_ms: float | None,
    *,
    math: str = "program",
    precision: str = "fp32",
    as_written_by_math_ms: Mapping[str, float] | None = None,
    sol_as_written_ms: float | None = None,
    shortcut: str | None = None,
    constant_output: bool = False,
) -> Verdict | None:
    """The single result's verdict (:func:`~torchroofline.price.verdicts.verdict`) from a
    saved report's figures; None without a time or a ladder. A report saved before the ladder
    as written was has the bound as written alone (``sol_as_written_ms``)."""
    if not sol_by_math_ms or not measured_ms:
        return None
    math = math if math in sol_by_math_ms else next(iter(sol_by_math_ms))
    written = as_written_by_math_ms or (
        None if sol_as_written_ms is None else {math: sol_as_written_ms}
    )
    return verdict(measured_ms, sol_by_math_ms, math, precision, written, shortcut,
                   constant_output)


def unmeasured_cell(judged: Verdict | None) -> str | None:
    """The % of SoL cell of a Markdown table where the verdict says a % says nothing of the
    kernel ("— (constant output)"); None where the % stands."""
    return None if judged is None or judged.measures_kernel else f"— ({judged.kind})"


def ladder_ms(time_ms: Mapping[str, Any]) -> dict[str, float]:
    """An analysis's speed of light per math rung (ms) from its JSON ``time_ms``; a report
    written before the ladder existed has the program's bound alone."""
    return dict(time_ms.get("sol_by_math") or {"program": time_ms["sol"]})


@dataclass(frozen=True)
class ProblemReport:
    """One problem of a batch (a fact: frozen). Times in ms; ``result`` is the problem's
    ``Result.to_dict()`` (None when it failed)."""

    level: int | None
    file: str
    path: str
    name: str
    status: str  #: "ok", "failed" or "timeout"
    error: str | None
    seconds: float
    result: dict | None
    measured_ms: float | None
    gen_ms: float | None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.result is not None

    @property
    def sol_ms(self) -> float | None:
        return self.result["time_ms"]["sol"] if self.result else None

    @property
    def sol_by_math_ms(self) -> dict[str, float] | None:
        """The speed of light (ms) per math rung (:func:`ladder_ms`)."""
        return ladder_ms(self.result["time_ms"]) if self.result else None

    @property
    def sol_as_written_ms(self) -> float | None:
        """The speed of light of the program as written (ms), where algebraic shortcuts lower
        the bound (``time_ms.sol_as_written``); None otherwise."""
        return self.result["time_ms"].get("sol_as_written") if self.result else None

    @property
    def shortcut(self) -> str | None:
        """The algebraic shortcuts the bound takes, named as the verdicts name them ("fc, sum
        through the linear map"; several joined by "; "); None when it takes none."""
        return labels_of(self.result.get("rewrites")) if self.result else None

    @property
    def sol_as_written_by_math_ms(self) -> dict[str, float] | None:
        """The ladder of the program as written (ms per math rung), where shortcuts lower the
        bound (``time_ms.sol_as_written_by_math``)."""
        return self.result["time_ms"].get("sol_as_written_by_math") if self.result else None

    def verdict(self, measured_ms: float | None) -> Verdict | None:
        """The verdict on ``measured_ms`` (:func:`judge`: the single result's)."""
        result = self.result or {}
        return judge(
            self.sol_by_math_ms, measured_ms, math=result.get("math", "program"),
            precision=result.get("precision", "fp32"),
            as_written_by_math_ms=self.sol_as_written_by_math_ms,
            sol_as_written_ms=self.sol_as_written_ms, shortcut=self.shortcut,
            constant_output=bool(result.get("constant_output")),
        )

    @property
    def shortcut_verdict(self) -> str | None:
        """"possible only with an algebraic shortcut (…)" for a reference time between the bound
        and the bound as written (:attr:`~torchroofline.price.verdicts.Verdict.shortcut`)."""
        judged = self.verdict(self.measured_ms)
        return judged.shortcut if judged else None

    @property
    def gen_shortcut_verdict(self) -> str | None:
        judged = self.verdict(self.gen_ms)
        return judged.shortcut if judged else None

    @property
    def sol_fraction(self) -> float | None:
        """SoL / measured time of the reference (1.0 = at the bound); None where the verdict
        says a % of SoL says nothing (a constant output)."""
        return self._sol_fraction(self.measured_ms)

    @property
    def gen_sol_fraction(self) -> float | None:
        """SoL / time of the generated kernel (as :attr:`sol_fraction`)."""
        return self._sol_fraction(self.gen_ms)

    def _sol_fraction(self, measured_ms: float | None) -> float | None:
        judged = self.verdict(measured_ms)
        return None if judged and not judged.measures_kernel else _fraction(self.sol_ms,
                                                                             measured_ms)

    @property
    def speedup(self) -> float | None:
        """Reference time / generated time."""
        return _fraction(self.measured_ms, self.gen_ms)

    @property
    def possible_with(self) -> str | None:
        """The highest math rung the reference's time does not beat (the verdict's)."""
        judged = self.verdict(self.measured_ms)
        return judged.rung if judged else None

    @property
    def gen_possible_with(self) -> str | None:
        judged = self.verdict(self.gen_ms)
        return judged.rung if judged else None

    @property
    def below_sol(self) -> bool:
        """The reference's time beats the bound at the analysis's math (:func:`beats_sol`)."""
        return beats_sol(self.sol_ms, self.measured_ms)

    @property
    def impossible(self) -> bool:
        judged = self.verdict(self.measured_ms)
        return bool(judged and judged.impossible)

    @property
    def gen_impossible(self) -> bool:
        judged = self.verdict(self.gen_ms)
        return bool(judged and judged.impossible)

    def to_dict(self) -> dict[str, Any]:
        data = {item.name: getattr(self, item.name) for item in fields(self)}
        derived = (
            "sol_fraction", "gen_sol_fraction", "speedup", "possible_with", "gen_possible_with",
            "impossible", "gen_impossible", "sol_as_written_ms", "shortcut", "shortcut_verdict",
            "gen_shortcut_verdict",
        )
        return {**data, **{name: getattr(self, name) for name in derived},
                **verdict_fields(self.verdict(self.measured_ms)),
                **verdict_fields(self.verdict(self.gen_ms), "gen_")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProblemReport:
        """From :meth:`to_dict`'s layout; derived keys are recomputed, not read."""
        return cls(**{item.name: data.get(item.name) for item in fields(cls)})


def _fraction(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


@dataclass(frozen=True)
class BatchReport:
    """A batch run: where it was priced and every problem, in the order they were given."""

    gpu: str
    gpu_key: str
    precision: str
    cache: str
    problems: tuple[ProblemReport, ...]

    @property
    def summary(self) -> dict[str, dict[str, Any]]:
        """Per level (and ``"all"``): counts, bottlenecks, medians, problems that beat SoL."""
        groups: dict[str, list[ProblemReport]] = {"all": list(self.problems)}
        for problem in self.problems:
            groups.setdefault(level_name(problem.level), []).append(problem)
        return {key: _summary_of(group) for key, group in groups.items()}

    @property
    def failed(self) -> int:
        return sum(not problem.ok for problem in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (see the README)."""
        return {
            "gpu": self.gpu,
            "gpu_key": self.gpu_key,
            "precision": self.precision,
            "cache": self.cache,
            "problems": [problem.to_dict() for problem in self.problems],
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchReport:
        """From :meth:`to_dict`'s layout (a saved ``report.json``); the summary is recomputed."""
        return cls(
            gpu=data.get("gpu", "?"),
            gpu_key=data.get("gpu_key", ""),
            precision=data.get("precision", "?"),
            cache=data.get("cache", "cold"),
            problems=tuple(ProblemReport.from_dict(p) for p in data.get("problems", ())),
        )


def _summary_of(problems: Sequence[ProblemReport]) -> dict[str, Any]:
    ok = [p for p in problems if p.ok]

    def median(values: list[float | None]) -> float | None:
        present = [value for value in values if value is not None]
        return statistics.median(present) if present else None

    return {
        "problems": len(problems),
        "analyzed": len(ok),
        "failed": len(problems) - len(ok),
        "compute_bound": sum(p.result["bottleneck"] == "compute" for p in ok),
        "memory_bound": sum(p.result["bottleneck"] == "memory" for p in ok),
        "median_sol_fraction": median([p.sol_fraction for p in ok]),
        "median_gen_sol_fraction": median([p.gen_sol_fraction for p in ok]),
        "median_speedup": median([p.speedup for p in ok]),
        "impossible": sum(p.impossible for p in ok),
        "gen_impossible": sum(p.gen_impossible for p in ok),
        "shortcut_only": sum(p.shortcut_verdict is not None for p in ok),
        "gen_shortcut_only": sum(p.gen_shortcut_verdict is not None for p in ok),
    }


def mark_partial(text: str, suffix: str, note: str) -> str:
    """A report cut short (``note``: "interrupted after 90 of 250 problems") marked so in its own
    format: JSON gains ``"partial": true`` and ``"interrupted"``, Markdown a first line, CSV a
    ``#`` comment line (``pandas.read_csv(..., comment="#")`` skips it)."""
    import json

    if suffix == ".json":
        document = {"partial": True, "interrupted": note, **json.loads(text)}
        return json.dumps(document, indent=2) + "\n"
    if suffix == ".csv":
        return f"# partial report: {note}\n{text}"
    return f"> **Partial report**: {note}.\n\n{text}"
