"""How far to trust the estimates on a machine: analyze problem files, set every estimate and the
speed of light against measured times (KernelBench-format timing JSONs, one per mode) and report
the error per level and overall.

A measured time below the speed of light is an *impossible bound*: the bound is wrong (or the
timing is), so ``torchroofline validate`` exits 1 when there is one.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InputError

#: Timing mode (also its CLI option, ``--eager`` …) → (the ``time_ms`` key of the estimate it
#: checks, what was timed).
MODES: dict[str, tuple[str, str]] = {
    "eager": ("eager_estimate", "eager PyTorch"),
    "compile": ("fused_estimate", "torch.compile (Inductor default)"),
    "cudagraph": ("cudagraph_estimate", "torch.compile mode='reduce-overhead'"),
}

WORST_COUNT = 10


@dataclass(frozen=True)
class Accuracy:
    """Estimate/measured ratios of one set of problems, summarised."""

    count: int
    median: float
    p10: float
    p90: float
    within_2x: float  #: share of problems with 1/2 ≤ ratio ≤ 2
    within_1_5x: float
    median_abs_log2: float  #: median |log2(estimate / measured)|

    @classmethod
    def of(cls, ratios: Sequence[float]) -> Accuracy | None:
        if not ratios:
            return None
        logs = sorted(math.log2(r) for r in ratios)
        return cls(
            count=len(logs),
            median=2 ** statistics.median(logs),
            p10=2 ** _quantile(logs, 0.1),
            p90=2 ** _quantile(logs, 0.9),
            within_2x=sum(abs(x) <= 1 for x in logs) / len(logs),
            within_1_5x=sum(abs(x) <= math.log2(1.5) for x in logs) / len(logs),
            median_abs_log2=statistics.median(abs(x) for x in logs),
        )

    def to_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


# --- Checking a set of problems against measured times -------------------------------------


@dataclass(frozen=True)
class Check:
    """One problem: its bound and estimates against the measured time of each mode (ms)."""

    level: int | None
    file: str
    sol_ms: float
    estimates_ms: dict[str, float]  #: mode → estimate
    measured_ms: dict[str, float]  #: mode → measured mean
    dominant: dict[str, str]  #: mode → what dominates the estimate

    @property
    def impossible_modes(self) -> list[str]:
        """Modes whose measured time is below the speed of light."""
        return [mode for mode, ms in self.measured_ms.items() if ms < self.sol_ms]

    def ratio(self, mode: str) -> float:
        return self.estimates_ms[mode] / self.measured_ms[mode]


def dominant_term(result: dict[str, Any], mode: str) -> str:
    """What the estimate of ``mode`` is made of, from a result's JSON: host/launch time when
    the GPU waits more than half the call, else the kernel family with the most GPU time."""
    entry = result["estimate"][MODES[mode][0].removesuffix("_estimate")]
    if entry["launch_bound"]:
        return f"host/launch ({entry['host_bound_share']:.0%} of the time)"
    families = entry["gpu_ms_by_family"]
    top = next(iter(families), "none")
    share = families.get(top, 0.0) / entry["gpu_busy_ms"] if entry["gpu_busy_ms"] else 0.0
    return f"{top} kernels ({share:.0%} of GPU time)"


def load_mode_timings(timing_paths: Mapping[str, str | Path]) -> dict[str, dict]:
    """Each mode's timings (mode → (level, file) → ms); an unknown mode is a usage error."""
    from .kernelbench import load_timings

    unknown = set(timing_paths) - set(MODES)
    if unknown:
        raise InputError(
            f"unknown timing mode(s) {', '.join(sorted(unknown))}; use {', '.join(MODES)}"
        )
    if not timing_paths:
        raise InputError("validate needs at least one timing JSON (--eager, --compile or "
                         "--cudagraph)")
    return {mode: load_timings(path) for mode, path in timing_paths.items()}


def check_timings_match(timings: Mapping[str, dict], paths: Sequence[Path],
                        timing_paths: Mapping[str, str | Path]) -> None:
    """Every timing file must name at least one of the problems found."""
    from .kernelbench import level_of, lookup_time

    for mode, table in timings.items():
        if not any(lookup_time(table, level_of(p), p.name) for p in paths):
            raise InputError(
                f"{timing_paths[mode]}: names none of the {len(paths)} problem files found; "
                "pass the problems these times were measured on"
            )


def checks_from_report(report: dict, timings: Mapping[str, dict]) -> list[Check]:
    """One :class:`Check` per analyzed problem that has at least one measured time."""
    from .kernelbench import lookup_time

    checks = []
    for problem in report["problems"]:
        result = problem.get("result")
        if not result:
            continue
        measured = {
            mode: ms
            for mode, table in timings.items()
            if (ms := lookup_time(table, problem["level"], problem["file"])) is not None
        }
        if not measured:
            continue
        checks.append(
            Check(
                level=problem["level"],
                file=problem["file"],
                sol_ms=result["time_ms"]["sol"],
                estimates_ms={m: result["time_ms"][MODES[m][0]] for m in measured},
                measured_ms=measured,
                dominant={m: dominant_term(result, m) for m in measured},
            )
        )
    return checks


def summarise(checks: Sequence[Check]) -> dict[str, Any]:
    """Per level and ``"all"``: problems, impossible bounds, accuracy of each mode."""
    groups: dict[str, list[Check]] = {"all": list(checks)}
    for check in checks:
        key = f"level{check.level}" if check.level is not None else "no level"
        groups.setdefault(key, []).append(check)
    summary = {}
    for key, group in sorted(groups.items(), key=lambda item: (item[0] != "all", item[0])):
        accuracy = {
            mode: Accuracy.of([c.ratio(mode) for c in group if mode in c.measured_ms])
            for mode in MODES
        }
        summary[key] = {
            "problems": len(group),
            "impossible": sum(bool(c.impossible_modes) for c in group),
            "accuracy": {m: a.to_dict() for m, a in accuracy.items() if a is not None},
        }
    return summary


def worst(checks: Sequence[Check], count: int = WORST_COUNT) -> list[dict[str, Any]]:
    """The problems whose estimate is furthest from the measured time (any mode)."""
    entries = [
        {
            "level": c.level,
            "file": c.file,
            "mode": mode,
            "estimate_ms": c.estimates_ms[mode],
            "measured_ms": c.measured_ms[mode],
            "ratio": c.ratio(mode),
            "dominant": c.dominant[mode],
        }
        for c in checks
        for mode in c.measured_ms
    ]
    entries.sort(key=lambda e: abs(math.log2(e["ratio"])), reverse=True)
    return entries[:count]


def validate(
    paths: Sequence[str | Path],
    timing_paths: Mapping[str, str | Path],
    gpu: Any,
    precision: str = "fp32",
    *,
    cache: str = "warm",
    jobs: int = 1,
    levels: set[int] | None = None,
    on_done: Callable[[Any], None] = lambda outcome: None,
) -> dict[str, Any]:
    """Analyze the problems under ``paths`` and check them against the timing JSONs
    (mode → path, modes of :data:`MODES`); returns the validation report."""
    from .batch import analyze_batch
    from .hardware import get_gpu
    from .kernelbench import discover

    spec = get_gpu(gpu)
    timings = load_mode_timings(timing_paths)
    problems = discover(paths, levels)
    if not problems:
        raise InputError(f"no problem files under {' '.join(map(str, paths))}")
    check_timings_match(timings, problems, timing_paths)
    report = analyze_batch(
        problems, spec, precision, cache=cache, jobs=jobs, on_done=on_done
    ).to_dict()
    checks = checks_from_report(report, timings)
    return {
        "gpu": spec.name,
        "gpu_key": spec.key,
        "precision": precision,
        "cache": cache,
        "modes": list(timings),
        "failed": [
            {"file": p["name"], "error": p["error"]} for p in report["problems"]
            if p["status"] != "ok"
        ],
        "summary": summarise(checks),
        "worst": worst(checks),
        "problems": [
            {
                "level": c.level,
                "file": c.file,
                "sol_ms": c.sol_ms,
                **{f"{m}_estimate_ms": c.estimates_ms[m] for m in c.measured_ms},
                **{f"{m}_measured_ms": c.measured_ms[m] for m in c.measured_ms},
                **{f"{m}_dominant": c.dominant[m] for m in c.measured_ms},
                "impossible": c.impossible_modes,
            }
            for c in checks
        ],
    }


def impossible_count(report: dict[str, Any]) -> int:
    return report["summary"]["all"]["impossible"] if "all" in report["summary"] else 0


# --- Output ----------------------------------------------------------------------------------


def _accuracy_cells(accuracy: dict[str, float] | None) -> list[str]:
    if accuracy is None:
        return [""] * 5
    return [
        f"{accuracy['median']:.2f}",
        f"{accuracy['p10']:.2f}–{accuracy['p90']:.2f}",
        f"{accuracy['within_2x']:.0%}",
        f"{accuracy['within_1_5x']:.0%}",
        f"{accuracy['median_abs_log2']:.2f}",
    ]


def format_markdown(report: dict[str, Any]) -> str:
    """The validation report as Markdown (also what the command prints)."""
    lines = [
        f"# torchroofline validate — {report['gpu']}, {report['precision']}, "
        f"cache {report['cache']}",
        "",
        "Ratio = estimate / measured mean time. Impossible = measured faster than the speed of "
        "light (must be 0).",
        "",
        "| group | mode | timed problems | impossible | median ratio | p10–p90 | within 2× "
        "| within 1.5× | median \\|log2\\| |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for group, row in report["summary"].items():
        for mode in report["modes"]:
            accuracy = row["accuracy"].get(mode)
            timed = accuracy["count"] if accuracy else 0  # problems with a time in this mode
            cells = [group, mode, str(timed), str(row["impossible"])]
            lines.append("| " + " | ".join(cells + _accuracy_cells(accuracy)) + " |")
    lines += [
        "",
        f"## {len(report['worst'])} worst estimates",
        "",
        "| problem | mode | estimate ms | measured ms | ratio | dominant term |",
        "|---|---|---|---|---|---|",
    ]
    for entry in report["worst"]:
        name = f"level{entry['level']}/{entry['file']}" if entry["level"] else entry["file"]
        lines.append(
            f"| {name} | {entry['mode']} | {entry['estimate_ms']:.4g} "
            f"| {entry['measured_ms']:.4g} | {entry['ratio']:.2f} | {entry['dominant']} |"
        )
    if report["failed"]:
        lines += ["", f"{len(report['failed'])} problem(s) could not be analyzed:"]
        lines += [f"- {f['file']}: {f['error']}" for f in report["failed"]]
    return "\n".join(lines) + "\n"


def format_csv(report: dict[str, Any]) -> str:
    """One row per problem."""
    columns = ["level", "file", "sol_ms"]
    for mode in report["modes"]:
        columns += [f"{mode}_estimate_ms", f"{mode}_measured_ms", f"{mode}_dominant"]
    columns.append("impossible")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for problem in report["problems"]:
        writer.writerow({**problem, "impossible": " ".join(problem["impossible"])})
    return buffer.getvalue()


WRITERS: dict[str, Callable[[dict[str, Any]], str]] = {
    ".md": format_markdown,
    ".csv": format_csv,
    ".json": lambda report: json.dumps(report, indent=2) + "\n",
}


def write(report: dict[str, Any], path: str | Path) -> None:
    """Write ``report`` as Markdown, CSV or JSON by the suffix of ``path``."""
    suffix = Path(path).suffix.lower()
    if suffix not in WRITERS:
        raise InputError(f"--out must end in .md, .csv or .json, got '{path}'")
    Path(path).write_text(WRITERS[suffix](report), encoding="utf-8")


def plot_estimates(
    points: Sequence[tuple[str, float, float]],
    path: str | Path,
    *,
    title: str = "",
    unit: str = "ms",
) -> Path:
    """Estimate vs measured, log-log, one point per (group, estimate, measured) in ``unit``,
    coloured by group, with the y = x line and the 2× band. Needs the ``viz`` extra."""
    from .errors import TorchrooflineError

    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise TorchrooflineError(
            "plotting needs matplotlib: pip install 'torchroofline[viz]'"
        ) from None
    fig = Figure(figsize=(6.4, 5.6), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    values = [v for _, e, m in points for v in (e, m)] or [1.0]
    low, high = min(values) / 2, max(values) * 2
    ax.fill_between([low, high], [low / 2, high / 2], [low * 2, high * 2], color="#dddddd",
                    label="within 2×", zorder=0)
    ax.plot([low, high], [low, high], color="#555555", linewidth=1, label="estimate = measured")
    for group in dict.fromkeys(g for g, _, _ in points):
        mine = [(m, e) for g, e, m in points if g == group]
        ax.scatter(*zip(*mine, strict=True), s=10, alpha=0.7, label=group)
    ax.set(xscale="log", yscale="log", xlim=(low, high), ylim=(low, high),
           xlabel=f"measured ({unit})", ylabel=f"estimate ({unit})")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


# --- Command line ----------------------------------------------------------------------------


def add_arguments(parser: Any) -> None:
    """The ``torchroofline validate`` options."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="problem files or folders")
    for mode, (key, label) in MODES.items():
        parser.add_argument(
            f"--{mode}", metavar="JSON", help=f"measured times of {label} (checks {key})"
        )
    parser.add_argument("--gpu", default="h100-sxm", help="the GPU the times were measured on")
    parser.add_argument("--precision", default="fp32", help="the precision they ran at")
    parser.add_argument(
        "--cache", choices=("cold", "warm"), default="warm",
        help="warm: no L2 flush between timed runs (KernelBench's published times); cold: flushed",
    )
    parser.add_argument("--level", help="levels to keep, e.g. 1,2")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--out", metavar="FILE", help="report.md, report.csv or report.json")
    parser.add_argument("--plot", metavar="PNG|SVG", help="estimate vs measured picture")


def run(args: Any) -> int:
    """``torchroofline validate``: 0, or 1 when a measured time beats the speed of light."""
    levels = None
    if args.level:
        try:
            levels = {int(part) for part in args.level.split(",") if part.strip()}
        except ValueError:
            raise InputError(f"--level takes numbers like 1,2, got '{args.level}'") from None
    if args.out and Path(args.out).suffix.lower() not in WRITERS:
        raise InputError(f"--out must end in .md, .csv or .json, got '{args.out}'")
    timing_paths = {m: getattr(args, m) for m in MODES if getattr(args, m)}
    report = validate(args.paths, timing_paths, args.gpu, args.precision, cache=args.cache,
                      jobs=args.jobs, levels=levels)
    print(format_markdown(report), end="")
    if args.out:
        write(report, args.out)
    if args.plot:
        points = [
            (mode, p[f"{mode}_estimate_ms"], p[f"{mode}_measured_ms"])
            for p in report["problems"]
            for mode in report["modes"]
            if f"{mode}_measured_ms" in p
        ]
        plot_estimates(points, args.plot, title=f"estimate vs measured, {report['gpu']}")
    return 1 if impossible_count(report) else 0
