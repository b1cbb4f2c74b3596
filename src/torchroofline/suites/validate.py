"""How far to trust the estimates on a machine: analyze problem files, set every estimate and the
speed of light against measured times (KernelBench-format timing JSONs, one per mode) and report
the error per level and overall.

A measured time below the speed of light is an *impossible bound*: the bound is wrong (or the
timing is), so ``torchroofline validate`` exits 1 when there is one.

Host costs differ between machines (0.45–1.40× the default profile across the calibration
setups), so the report also fits the one number that moves them all, the *host scale*
(:meth:`~torchroofline.price.estimate_params.HostCosts.scaled`, ``--host-scale``), to the user's own eager and
compile times, and gives the accuracy with it and without it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputError

#: Timing mode (also its CLI option, ``--eager`` …) → (the ``time_ms`` key of the estimate it
#: checks, what was timed).
MODES: dict[str, tuple[str, str]] = {
    "eager": ("eager_estimate", "eager PyTorch"),
    "compile": ("fused_estimate", "torch.compile (Inductor default)"),
    "cudagraph": ("cudagraph_estimate", "torch.compile mode='reduce-overhead'"),
}

WORST_COUNT = 10

#: Host scales the fit chooses from, relative to the scale the batch is priced at: 2^(k/20) for
#: k = −40 … 40, 0.25× to 4× in steps of 3.5 % (finer than the fit's own spread).
HOST_SCALE_GRID: tuple[float, ...] = tuple(2 ** (k / 20) for k in range(-40, 41))
#: The index of 1×, the scale the batch is priced at.
USED_SCALE = HOST_SCALE_GRID.index(1.0)
#: The modes a host scale is fitted on: CUDA graphs replay without the per-kernel host costs.
FIT_MODES = ("eager", "compile")
#: The least drop in :func:`fit_error` a fitted host scale must bring to be offered: half the
#: last digit the report prints it to (0.01), below which the figures read the same.
MIN_FIT_GAIN = 0.005


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
    #: mode → the estimate at each host scale of :data:`HOST_SCALE_GRID` (ms)
    scaled_ms: dict[str, tuple[float, ...]] = field(default_factory=dict)

    @property
    def impossible_modes(self) -> list[str]:
        """Modes whose measured time is below the speed of light."""
        return [mode for mode, ms in self.measured_ms.items() if ms < self.sol_ms]

    def ratio(self, mode: str) -> float:
        return self.estimates_ms[mode] / self.measured_ms[mode]

    def at_scale(self, index: int) -> Check:
        """The same check with the estimates of the host scale ``HOST_SCALE_GRID[index]``."""
        return replace(self, estimates_ms={m: self.scaled_ms[m][index] for m in self.estimates_ms})


def dominant_term(result: dict[str, Any], mode: str) -> str:
    """What the estimate of ``mode`` is made of, from a result's JSON: host/launch time when
    the GPU waits more than half the call, else the kernel family with the most GPU time."""
    entry = result["estimate"][_estimate_key(mode)]
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
        curves = result.get("host_scale_totals_ms", {})
        checks.append(
            Check(
                level=problem["level"],
                file=problem["file"],
                sol_ms=result["time_ms"]["sol"],
                estimates_ms={m: result["time_ms"][MODES[m][0]] for m in measured},
                measured_ms=measured,
                dominant={m: dominant_term(result, m) for m in measured},
                scaled_ms={m: tuple(curves[_estimate_key(m)]) for m in measured if curves},
            )
        )
    return checks


def _estimate_key(mode: str) -> str:
    """The estimate's key in a result's ``estimate`` and ``host_scale_totals_ms``."""
    return MODES[mode][0].removesuffix("_estimate")


def fit_error(checks: Sequence[Check], index: int) -> float | None:
    """The error the report shows, at host scale ``HOST_SCALE_GRID[index]``: the median
    |log2(estimate / measured)| of each mode of :data:`FIT_MODES` over every problem timed in
    it, averaged over those modes; None without such times."""
    medians = [
        accuracy.median_abs_log2
        for mode in FIT_MODES
        if (accuracy := Accuracy.of([
            check.scaled_ms[mode][index] / check.measured_ms[mode]
            for check in checks if mode in check.scaled_ms
        ])) is not None
    ]
    return statistics.fmean(medians) if medians else None


def fit_host_scale(checks: Sequence[Check]) -> int | None:
    """The index in :data:`HOST_SCALE_GRID` of the host scale that lowers :func:`fit_error` (the
    error the report shows) the most, equals broken by the least squares of ln(estimate /
    measured) over the times not below the speed of light (wrong timings, which no host
    explains); :data:`USED_SCALE`, the scale priced at, when no scale lowers the error by
    :data:`MIN_FIT_GAIN`; None without eager or compile times."""
    if fit_error(checks, USED_SCALE) is None:
        return None
    pairs = [
        (check.scaled_ms[mode], check.measured_ms[mode])
        for check in checks
        for mode in FIT_MODES
        if mode in check.scaled_ms and mode not in check.impossible_modes
    ]

    def rank(index: int) -> tuple[float, float]:
        squares = sum(math.log(curve[index] / measured) ** 2 for curve, measured in pairs)
        return fit_error(checks, index), squares

    best = min(range(len(HOST_SCALE_GRID)), key=rank)
    gain = fit_error(checks, USED_SCALE) - fit_error(checks, best)
    return best if gain >= MIN_FIT_GAIN else USED_SCALE


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
    cache: str = "cold",
    jobs: int = 1,
    levels: set[int] | None = None,
    on_done: Callable[[Any], None] = lambda outcome: None,
    host_scale: float = 1.0,
    on_start: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Analyze the problems under ``paths`` and check them against the timing JSONs
    (mode → path, modes of :data:`MODES`); returns the validation report. ``host_scale``: the
    host profile the estimates are priced at (× the default; ``--host-scale``); the report's
    ``host_scale`` entry holds the one that fits the timings and the accuracy with it.
    ``on_start`` is called once the inputs are checked, before the workers start; ``on_done``
    with each problem's outcome.

    Ctrl-C or SIGTERM raises :class:`~torchroofline.batch.BatchInterrupted` carrying the report
    of the problems finished so far, marked ``"partial"``."""
    from ..price.estimate_params import DEFAULT_PARAMS
    from ..price.hardware import get_gpu
    from .batch import BatchInterrupted, analyze_batch
    from .kernelbench import discover

    spec = get_gpu(gpu)
    timings = load_mode_timings(timing_paths)
    problems = discover(paths, levels)
    if not problems:
        raise InputError(f"no problem files under {' '.join(map(str, paths))}")
    check_timings_match(timings, problems, timing_paths)
    params = None if host_scale == 1 else DEFAULT_PARAMS.host_scaled(host_scale)
    on_start()
    try:
        batch = analyze_batch(
            problems, spec, precision, cache=cache, jobs=jobs, on_done=on_done,
            estimate_params=params, host_scales=HOST_SCALE_GRID,
        )
    except BatchInterrupted as stopped:
        partial = _report(stopped.report.to_dict(), timings, spec, precision, cache, host_scale)
        marked = {"partial": True, "interrupted": str(stopped), **partial}
        raise stopped.with_report(marked) from None
    return _report(batch.to_dict(), timings, spec, precision, cache, host_scale)


def _report(batch: dict[str, Any], timings: Mapping[str, dict], spec: Any, precision: str,
            cache: str, host_scale: float) -> dict[str, Any]:
    """The validation report of an analyzed batch (its JSON)."""
    checks = checks_from_report(batch, timings)
    fitted = fit_host_scale(checks)
    return {
        "gpu": spec.name,
        "gpu_key": spec.key,
        "precision": precision,
        "cache": cache,
        "modes": list(timings),
        "failed": [
            {"file": p["name"], "error": p["error"]} for p in batch["problems"]
            if p["status"] != "ok"
        ],
        "summary": summarise(checks),
        "host_scale": {
            "used": host_scale,
            "fitted": None if fitted is None else host_scale * HOST_SCALE_GRID[fitted],
            "helps": fitted is not None and fitted != USED_SCALE,
            "error": {
                "used": fit_error(checks, USED_SCALE),
                "fitted": None if fitted is None else fit_error(checks, fitted),
            },
            "fitted_on": [mode for mode in FIT_MODES if mode in timings],
            "summary": None if fitted is None else summarise([c.at_scale(fitted) for c in checks]),
        },
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


def host_scale_line(report: dict[str, Any]) -> str | None:
    """"your host runs at 0.54× the default profile: pass --host-scale 0.54", or None when no
    eager or compile times were given."""
    scale = report["host_scale"]
    fitted = scale["fitted"]
    if fitted is None:
        return None
    if not scale["helps"]:
        return (
            f"no host scale fits your times better than the {scale['used']:.2g}× used (mean of "
            f"the median |log2| of {' and '.join(scale['fitted_on'])}: "
            f"{scale['error']['used']:.2f}): keep it"
        )
    line = (
        f"your host runs at {fitted:.2g}× the default profile: pass --host-scale {fitted:.2g} "
        f"(median |log2| {scale['error']['used']:.2f} → {scale['error']['fitted']:.2f})"
    )
    low, high = (scale["used"] * HOST_SCALE_GRID[end] for end in (0, -1))
    if fitted in (low, high):
        line += f" (the edge of the {low:.2g}–{high:.2g}× range searched: the times may not be "
        "of this GPU or precision)"
    return line


def _accuracy_table(summary: dict[str, Any], modes: Sequence[str]) -> list[str]:
    lines = [
        "| group | mode | timed problems | impossible | median ratio | p10–p90 | within 2× "
        "| within 1.5× | median \\|log2\\| |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for group, row in summary.items():
        for mode in modes:
            accuracy = row["accuracy"].get(mode)
            timed = accuracy["count"] if accuracy else 0  # problems with a time in this mode
            cells = [group, mode, str(timed), str(row["impossible"])]
            lines.append("| " + " | ".join(cells + _accuracy_cells(accuracy)) + " |")
    return lines


def format_markdown(report: dict[str, Any]) -> str:
    """The validation report as Markdown (also what the command prints)."""
    scale = report["host_scale"]
    lines = [
        f"# torchroofline validate — {report['gpu']}, {report['precision']}, "
        f"cache {report['cache']}, host scale {scale['used']:.3g}",
        "",
        "Ratio = estimate / measured mean time. Impossible = measured faster than the speed of "
        "light (must be 0).",
        "",
        *_accuracy_table(report["summary"], report["modes"]),
    ]
    if scale["helps"]:
        lines += [
            "",
            f"## With the fitted host scale: {host_scale_line(report)}",
            "",
            "The host scale that minimises the median |log2(estimate / measured)| of the "
            f"{' and '.join(scale['fitted_on'])} times, averaged over those modes (CPU costs "
            "of every estimate × it).",
            "",
            *_accuracy_table(scale["summary"], report["modes"]),
        ]
    elif scale["fitted"] is not None:
        lines += ["", f"## Host scale: {host_scale_line(report)}"]
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


def _text(report: dict[str, Any], suffix: str) -> str:
    """``report`` as Markdown, CSV or JSON, marked partial when it was interrupted."""
    from .batch_report import mark_partial

    text = WRITERS[suffix](report)
    return mark_partial(text, suffix, report["interrupted"]) if report.get("partial") else text


def write(report: dict[str, Any], path: str | Path) -> None:
    """Write ``report`` as Markdown, CSV or JSON by the suffix of ``path``."""
    suffix = Path(path).suffix.lower()
    if suffix not in WRITERS:
        raise InputError(f"--out must end in .md, .csv or .json, got '{path}'")
    Path(path).write_text(_text(report, suffix), encoding="utf-8")


def plot_estimates(
    points: Sequence[tuple[str, float, float]],
    path: str | Path,
    *,
    title: str = "",
    unit: str = "ms",
) -> Path:
    """Estimate vs measured, log-log, one point per (group, estimate, measured) in ``unit``,
    coloured by group, with the y = x line and the 2× band. Needs the ``viz`` extra."""
    from ..errors import TorchrooflineError

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
    if not path.parent.is_dir():  # as every picture: never a missing folder made
        raise InputError(f"cannot save a figure in {str(path.parent)!r}: no such folder; "
                         "create it first")
    fig.savefig(path)
    return path


# --- Command line ----------------------------------------------------------------------------


def add_arguments(parser: Any) -> None:
    """The ``torchroofline validate`` options of its own (the CLI adds ``--gpu``,
    ``--precision``, ``--cache`` and ``--host-scale``, shared with ``analyze``)."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help="problem files or folders")
    for mode, (key, label) in MODES.items():
        parser.add_argument(
            f"--{mode}", metavar="JSON", help=f"measured times of {label} (checks {key})"
        )
    parser.add_argument("--level", help="levels to keep, e.g. 1,2")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--out", metavar="FILE", help="report.md, report.csv or report.json")
    parser.add_argument("--plot", metavar="PNG|SVG", help="estimate vs measured picture")


def run(args: Any, levels: set[int] | None, progress: Any, note: Callable[[str], None]
        ) -> dict[str, Any]:
    """``torchroofline validate`` with the command line's ``progress`` (a
    :class:`~torchroofline.batch.Progress`) and ``note`` (a line to stderr): check, write or
    print the report, note the summary, the fitted host scale and the files written; returns the
    report (``"partial"`` when interrupted: what was finished is still written)."""
    from .batch import BatchInterrupted

    if args.out and Path(args.out).suffix.lower() not in WRITERS:
        raise InputError(f"--out must end in .md, .csv or .json, got '{args.out}'")
    timing_paths = {m: getattr(args, m) for m in MODES if getattr(args, m)}
    try:
        report = validate(args.paths, timing_paths, args.gpu, args.precision, cache=args.cache,
                          jobs=args.jobs, levels=levels, on_done=progress,
                          host_scale=args.host_scale, on_start=lambda: progress.start(args.jobs))
    except BatchInterrupted as stopped:
        progress.stop()
        report = stopped.report
    if args.out:
        write(report, args.out)
    else:
        print(_text(report, ".md"), end="")
    for line in filter(None, [_summary_line(report), host_scale_line(report)]):
        note(line)
    if args.out:
        note(f"wrote {args.out}")
    if args.plot:
        points = [
            (mode, p[f"{mode}_estimate_ms"], p[f"{mode}_measured_ms"])
            for p in report["problems"]
            for mode in report["modes"]
            if f"{mode}_measured_ms" in p
        ]
        picture = plot_estimates(points, args.plot, title=f"estimate vs measured, {report['gpu']}")
        note(f"wrote {picture}")
    return report


def _summary_line(report: dict[str, Any]) -> str:
    """Problems checked, failed, impossible, and the eager/compile share within 2×."""
    overall = report["summary"].get("all", {"problems": 0, "impossible": 0, "accuracy": {}})
    within = [
        f"{mode} {accuracy['within_2x']:.0%}"
        for mode, accuracy in overall["accuracy"].items()
    ]
    line = (
        f"{overall['problems']} problems checked, {len(report['failed'])} failed to analyze, "
        f"{overall['impossible']} measured faster than the speed of light"
    )
    line += f"; within 2×: {', '.join(within)}" if within else ""
    return f"{report['interrupted']}; {line}" if report.get("partial") else line
