"""Pictures of a KernelBench batch report: measured time against SoL, % of SoL, and one
roofline per problem."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...suites.batch_report import level_name
from ...units import human_ms
from .canvas import (
    IMPOSSIBLE_COLOUR,
    SUITE_FIGSIZE_IN,
    figure_class,
    freeze_layout,
    new_figure,
    output_folder,
    percent_formatter,
    plain_formatter,
    save,
    save_target,
)
from .labels import Labeller
from .rooflines import plot_result_dict

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...suites.batch_report import BatchReport, ProblemReport


def problem_points(report: BatchReport) -> list[ProblemReport]:
    """The problems a suite picture can place: analyzed, with a positive measured time."""
    return [p for p in report.problems if p.ok and p.measured_ms and p.measured_ms > 0]


def _percent_of_sol(problem: ProblemReport) -> float:
    """Where the pictures place a problem: its SoL over its measured time, in % (a constant
    output too, whose tables print no % of it: it sits off scale, named)."""
    return 100 * problem.sol_ms / problem.measured_ms


def plot_suite(
    report: BatchReport, out_dir: str | Path, *, per_problem: bool = False
) -> list[Path]:
    """Pictures of a KernelBench batch report in ``out_dir``; returns the paths written (PNG).

    ``suite_scatter.png`` (:func:`plot_suite_scatter`), ``suite_histogram.png``
    (:func:`plot_suite_histogram`) and, with ``per_problem``,
    ``problems/<level>_<file stem>.png``: each problem's roofline from its result dict, with its
    measured time when the report has one.
    """
    figure_class()
    out_dir = output_folder(out_dir)
    written = [out_dir / "suite_scatter.png", out_dir / "suite_histogram.png"]
    plot_suite_scatter(report, written[0])
    plot_suite_histogram(report, written[1])
    if per_problem:
        (out_dir / "problems").mkdir(exist_ok=True)
        for problem in report.problems:
            if problem.result:
                name = f"{level_name(problem.level)}_{Path(problem.file).stem}.png"
                path = out_dir / "problems" / name
                plot_result_dict(with_measured(problem), path, title=_problem_title(problem))
                written.append(path)
    return written


def with_measured(problem: ProblemReport) -> dict[str, Any]:
    """The problem's result dict, with its measured time as ``actual`` when it has none, judged
    by the problem's verdict (the one the suite table prints) so that the picture's label says
    what the table says."""
    data = problem.result
    judged = problem.verdict(problem.measured_ms)
    if data.get("actual") is None and judged is not None:
        actual = {"ms": problem.measured_ms, "impossible": judged.impossible, **judged.to_dict()}
        data = {**data, "actual": actual}
    return data


def _problem_title(problem: ProblemReport) -> str:
    return f"{problem.file} on {problem.result['gpu']}, {problem.result['precision']}"


def _levels(points: Sequence[ProblemReport]) -> dict[int | None, str]:
    """Level → colour, levels in order, "no level" last."""
    levels = sorted({p.level for p in points}, key=lambda level: (level is None, level or 0))
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22")
    return {level: palette[i % len(palette)] for i, level in enumerate(levels)}


def _suite_title(report: BatchReport, points: Sequence[ProblemReport], what: str) -> str:
    skipped = len(report.problems) - len(points)
    tail = f"; {skipped} failed or unmeasured, not shown" if skipped else ""
    return f"{what} — {len(points)} problems on {report.gpu}, {report.precision}{tail}"


def plot_suite_scatter(report: BatchReport, path: str | Path | None = None) -> Figure:
    """Measured time against SoL per problem of a batch report, log–log, coloured by level,
    with y = x: points below it beat the bound and are named, with the math that could reach
    them (:attr:`ProblemReport.possible_with`); those no math reaches are impossible (measured
    faster than light), ringed in red. Problems without a result or a measured time are counted
    in the title."""
    target = save_target(path)
    points = problem_points(report)
    off_scale = [p for p in points if _off_scale(p)]
    fig, ax = new_figure(SUITE_FIGSIZE_IN)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # an off-scale problem's SoL stays off the axes; its measured time is on them
    values = [p.measured_ms for p in points] + [p.sol_ms for p in points if not _off_scale(p)]
    lo, hi = min(values or [1e-3]) / 3, max(values or [1.0]) * 3
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.fill_between(
        [lo, hi],
        [lo, lo],
        [lo, hi],
        color=IMPOSSIBLE_COLOUR,
        alpha=0.07,
        lw=0,
        label="measured < SoL: lower-precision math, or impossible",
    )
    ax.plot([lo, hi], [lo, hi], color="k", lw=1.2, gid="sol-line", label="measured = SoL")
    guides = []
    for factor, text in ((10, "10% of SoL"), (100, "1% of SoL")):
        ax.plot([lo, hi], [lo * factor, hi * factor], color="0.6", lw=0.7, ls=":")
        x = lo * 1.5
        if x * factor < hi:
            guides.append(ax.annotate(
                text,
                (x, x * factor),
                xytext=(2, 2),
                textcoords="offset points",
                fontsize=7,
                color="0.45",
            ))
    for level, colour in _levels(points).items():
        chosen = [p for p in points if p.level == level]
        ax.scatter(
            [_scatter_x(p, lo) for p in chosen],
            [p.measured_ms for p in chosen],
            s=28,
            c=colour,
            alpha=0.8,
            edgecolors="white",
            linewidths=0.5,
            zorder=3,
            label="no level" if level is None else f"level {level}",
            gid=f"level:{level}",
        )
    if off_scale:
        ax.scatter(
            [lo] * len(off_scale),
            [p.measured_ms for p in off_scale],
            s=60, marker="<", facecolors="none", edgecolors="0.3", linewidths=1.0, zorder=4,
            label=f"<{_OFF_SCALE_PERCENT:g}% of SoL: SoL off scale, left ({len(off_scale)})",
            gid="off-scale",
        )
    impossible = [p for p in points if p.impossible]
    ax.scatter(
        [p.sol_ms for p in impossible],
        [p.measured_ms for p in impossible],
        s=110,
        facecolors="none",
        edgecolors=IMPOSSIBLE_COLOUR,
        linewidths=1.6,
        zorder=4,
        label=f"impossible ({len(impossible)})",
        gid="impossible",
    )
    ax.set_xlabel("speed of light (ms)")
    ax.set_ylabel("measured (ms)")
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.yaxis.set_major_formatter(plain_formatter())
    ax.grid(True, which="major", color="0.9", lw=0.6)
    ax.set_title(_suite_title(report, points, "measured vs speed of light"), fontsize=10)
    _say_if_empty(ax, points)
    legend = ax.legend(loc="upper left", fontsize=8)
    freeze_layout(fig, True)
    labeller = Labeller(ax)
    for guide in guides:
        labeller.block(guide.get_window_extent())
    for p in points:
        labeller.block_marker(_scatter_x(p, lo), p.measured_ms, 110 if p.impossible else 60)
    labeller.place_legend(legend)
    for p in off_scale:
        labeller.place(lo, p.measured_ms, f"{Path(p.file).stem} (SoL {human_ms(p.sol_ms)})",
                       fontsize=7, color="0.3", gid="label:off-scale")
    for p in (p for p in points if p.below_sol):
        labeller.place(
            p.sol_ms,
            p.measured_ms,
            Path(p.file).stem if p.impossible else f"{Path(p.file).stem} ({p.possible_with} math)",
            fontsize=7,
            color=IMPOSSIBLE_COLOUR if p.impossible else "0.3",
            gid="label:impossible" if p.impossible else "label:lower-math",
        )
    return save(fig, target)


# % of SoL bins: four per decade from 0.1 % to 100 %; anything below them, and anything faster
# than light, gets its own bar.
_PERCENT_EDGES = tuple(10 ** (e / 4) for e in range(-4, 9))
_IMPOSSIBLE_BIN = (100.0, 10**2.25)
#: The lowest % of SoL the pictures place among the rest: a problem below it (a SoL of
#: nanoseconds, a constant output, against microseconds measured) would stretch the scatter over
#: decades no other problem uses; it sits at the scatter's left edge, named, and in the
#: histogram's own "<0.1%" bar.
_OFF_SCALE_PERCENT = _PERCENT_EDGES[0]
_OFF_SCALE_BIN = (10**-1.25, _OFF_SCALE_PERCENT)


def _off_scale(problem: ProblemReport) -> bool:
    return _percent_of_sol(problem) < _OFF_SCALE_PERCENT


def _scatter_x(problem: ProblemReport, left_edge: float) -> float:
    return left_edge if _off_scale(problem) else problem.sol_ms


def plot_suite_histogram(report: BatchReport, path: str | Path | None = None) -> Figure:
    """How many problems reach each % of SoL (SoL / measured), stacked by level, on log bins;
    those below the bound (>100 %: lower-precision math, or impossible) in their own hatched
    bar."""
    target = save_target(path)
    points = problem_points(report)
    fig, ax = new_figure(SUITE_FIGSIZE_IN)
    ax.set_xscale("log")
    levels = _levels(points)
    stacks = [
        [
            _percent_of_sol(p) for p in points
            if p.level == level and not p.below_sol and not _off_scale(p)
        ]
        for level in levels
    ]
    if stacks:
        ax.hist(
            stacks,
            bins=_PERCENT_EDGES,
            stacked=True,
            color=list(levels.values()),
            edgecolor="white",
            label=[_level_label(level) for level in levels],
        )
    below = sum(p.below_sol for p in points)
    impossible = sum(p.impossible for p in points)
    width = _IMPOSSIBLE_BIN[1] - _IMPOSSIBLE_BIN[0]
    ax.bar(
        [_IMPOSSIBLE_BIN[0]],
        [below],
        width=width,
        align="edge",
        color="white",
        edgecolor=IMPOSSIBLE_COLOUR,
        hatch="///",
        label=f">100%: below SoL ({below}; {impossible} faster than any math)",
        gid="bars:below-sol",
    )
    under = sum(_off_scale(p) for p in points)
    if under:
        ax.bar(
            [_OFF_SCALE_BIN[0]], [under], width=_OFF_SCALE_BIN[1] - _OFF_SCALE_BIN[0],
            align="edge", color="white", edgecolor="0.3", hatch="\\\\\\",
            label=f"<{_OFF_SCALE_PERCENT:g}%: off scale ({under})", gid="bars:off-scale",
        )
    # from the bin holding the lowest value (at most 1 %, at least the first edge) to the end
    lowest = min((_percent_of_sol(p) for p in points), default=100.0)
    ax.set_xlim(
        _OFF_SCALE_BIN[0] if under
        else max(e for e in _PERCENT_EDGES if e <= max(min(lowest, 1.0), _PERCENT_EDGES[0])),
        _IMPOSSIBLE_BIN[1],
    )
    ax.xaxis.set_major_formatter(percent_formatter())
    ax.set_xlabel("% of speed of light (SoL / measured; 100% = at the bound)")
    ax.set_ylabel("problems")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(True, axis="y", color="0.9", lw=0.6)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(_suite_title(report, points, "% of speed of light"), fontsize=10)
    _say_if_empty(ax, points)
    return save(fig, target)


def _say_if_empty(ax: Any, points: Sequence[ProblemReport]) -> None:
    """A picture without points says why, in the picture: no problem had a measured time."""
    if not points:
        ax.text(
            0.5,
            0.5,
            "no problem has a measured time:\nrun 'torchroofline kernelbench' with --timings",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=10,
            color=IMPOSSIBLE_COLOUR,
            gid="note:empty",
        )


def _level_label(level: int | None) -> str:
    return "no level" if level is None else f"level {level}"
