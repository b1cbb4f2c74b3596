"""The picture of a KernelBench run (:class:`~torchroofline.runs.RunReport`): every timed
sample's % of the speed of light, and the fast_sol shares of each level."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...price.precision import rung_name
from ...suites.runs import FAST_SOL_THRESHOLDS, fast_sol_key
from .canvas import IMPOSSIBLE_COLOUR, new_figure, percent_formatter, save, save_target

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...suites.runs import RunReport, SampleReport

RUN_FIGSIZE_IN = (11.0, 5.0)
CORRECT_COLOUR = "#2ca02c"
LOWER_MATH_COLOUR = "#ff7f0e"
INCORRECT_COLOUR = "#7f7f7f"


def plot_run(report: RunReport, path: str | Path | None = None) -> Figure:
    """Left: % of SoL (SoL / runtime, log scale) of every timed sample with an analyzed problem,
    one column per problem, correct samples in green, incorrect in grey; above the 100 % line
    (the program's math), those possible only with lower math ringed in orange and named with
    it, faster-than-light ones (no math reaches them) ringed in red: the verdicts of the run
    table and JSON (:attr:`~torchroofline.runs.SampleReport.possible_with`,
    :attr:`~torchroofline.runs.SampleReport.faster_than_light`). Right: per level, the share
    of samples that are correct and reach ≥ 25 / 50 / 75 % of SoL."""
    target = save_target(path)
    from matplotlib.ticker import NullFormatter

    fig, (strip, bars) = new_figure(RUN_FIGSIZE_IN, ncols=2, width_ratios=(3, 2))
    timed = [s for s in report.samples if s.sol_fraction is not None]
    problems = sorted({(s.sample.level or 0, s.sample.problem_id) for s in timed})
    column = {key: index for index, key in enumerate(problems)}

    def x(sample: SampleReport) -> int:
        return column[(sample.sample.level or 0, sample.sample.problem_id)]

    strip.set_yscale("log")
    for correct, colour, label in ((True, CORRECT_COLOUR, "correct"),
                                   (False, INCORRECT_COLOUR, "incorrect")):
        chosen = [s for s in timed if s.sample.correct == correct]
        strip.scatter(
            [x(s) for s in chosen],
            [100 * s.sol_fraction for s in chosen],
            s=30, c=colour, alpha=0.8, zorder=3, label=f"{label} ({len(chosen)})",
            gid=f"samples:{label}",
        )
    program = report.batch.precision
    for chosen, colour, label, gid in (
        ([s for s in timed if s.lower_math], LOWER_MATH_COLOUR, "possible only with lower math",
         "lower-math"),
        ([s for s in timed if s.faster_than_light], IMPOSSIBLE_COLOUR, "faster than light",
         "faster-than-light"),
    ):
        strip.scatter(
            [x(s) for s in chosen],
            [100 * s.sol_fraction for s in chosen],
            s=120, facecolors="none", edgecolors=colour, linewidths=1.6, zorder=4,
            label=f"{label} ({len(chosen)})", gid=gid,
        )
    for sample in (s for s in timed if s.lower_math):
        strip.annotate(
            f"{rung_name(sample.possible_with, program)} math",
            (x(sample), 100 * sample.sol_fraction),
            xytext=(8, 0), textcoords="offset points", va="center", fontsize=7,
            color=LOWER_MATH_COLOUR, gid="label:lower-math",
        )
    strip.axhline(100, color="k", lw=1.2, gid="sol-line", label=f"speed of light ({program})")
    percents = [100 * s.sol_fraction for s in timed]
    low, high = min(percents + [100.0]) / 4, max(percents + [100.0]) * 4
    strip.axhspan(100, high, color=IMPOSSIBLE_COLOUR, alpha=0.07, lw=0,
                  label=f"runtime < {program} SoL: lower math, or faster than light")
    strip.set_ylim(low, high)
    strip.set_xlim(-0.5, max(len(problems), 1) - 0.5)
    strip.set_xticks(range(len(problems)))
    strip.set_xticklabels([f"L{level} P{number}" for level, number in problems], fontsize=7,
                          rotation=90 if len(problems) > 12 else 0)
    strip.yaxis.set_major_formatter(percent_formatter())
    strip.yaxis.set_minor_formatter(NullFormatter())
    strip.set_ylabel("% of speed of light (SoL / runtime)")
    strip.set_title(f"{len(timed)} timed samples of {len(report.samples)}", fontsize=10)
    strip.grid(True, axis="y", color="0.9", lw=0.6)
    # below the pictures: a column of samples leaves no corner of the strip free
    fig.legend(*strip.get_legend_handles_labels(), loc="outside lower left", ncols=3, fontsize=8)
    summary = {key: row for key, row in report.summary.items() if key != "all"} or report.summary
    width = 0.8 / len(FAST_SOL_THRESHOLDS)
    for index, fraction in enumerate(FAST_SOL_THRESHOLDS):
        bars.bar(
            [position + index * width for position in range(len(summary))],
            [100 * (row[fast_sol_key(fraction)] or 0) for row in summary.values()],
            width=width, label=f"correct, ≥{round(fraction * 100)}% of SoL",
            gid=f"bars:{fast_sol_key(fraction)}",
        )
    bars.set_xticks([position + 0.4 - width / 2 for position in range(len(summary))])
    bars.set_xticklabels(list(summary))
    bars.set_ylim(0, 100)
    bars.yaxis.set_major_formatter(percent_formatter())
    bars.set_ylabel("share of samples")
    bars.set_title("fast_sol per level", fontsize=10)
    bars.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"KernelBench run {report.run} on {report.batch.gpu}, {report.batch.precision}",
                 fontsize=11)
    return save(fig, target)

