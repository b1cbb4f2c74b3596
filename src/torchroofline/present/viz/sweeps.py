"""Pictures of a sweep (:class:`~torchroofline.suites.sweep.Sweep`): the speed of light and the
estimates against the axis, one line per GPU, crossovers marked; the roofline with the sweep's
points as a path."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...units import human_ms
from .canvas import ROOF_COLOUR, new_figure, plain_formatter, save, save_target, si_formatter
from .traces import _colours

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ...suites.sweep import Sweep, SweepPoint

SWEEP_FIGSIZE_IN = (9.0, 5.5)
#: How each time is drawn: ``time_ms`` key → (legend label, line style).
TIME_STYLES = {
    "sol": ("speed of light", "-"),
    "fused_estimate": ("compile estimate", "--"),
    "eager_estimate": ("eager estimate", ":"),
}
#: The markers of a second axis's values, in order.
SERIES_MARKERS = ("o", "s", "^", "v", "P", "*", "h")
#: The marker of each crossover kind on its line.
CROSSOVER_MARKERS = {"bound": ("D", "turns compute bound"), "fit": ("X", "stops fitting")}


def _lines(sweep: Sweep) -> list[tuple[str, str, tuple, list[SweepPoint]]]:
    """(GPU, precision, second-axis value, its points along the first axis), one per line."""
    lines: dict[tuple, list[SweepPoint]] = {}
    for point in sweep.points:
        series = tuple(point.values.values())[1:]
        lines.setdefault((point.gpu, point.precision, series), []).append(point)
    return [(*key, points) for key, points in lines.items()]


def _label(sweep: Sweep, gpu_name: str, precision: str, series: tuple) -> str:
    parts = [gpu_name]
    if len(sweep.precisions) > 1:
        parts.append(precision)
    parts += [f"{name}={value}" for name, value in zip(sweep.axes[1:], series, strict=True)]
    return " ".join(parts)


def _log_axis(values: Sequence[float]) -> bool:
    """A log scale for positive values spanning more than 8x."""
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) and max(positive) > 8 * min(positive)


def plot_sweep(sweep: Sweep, path: str | Path | None = None) -> Figure:
    """Speed of light (solid), compile (dashed) and eager (dotted) estimates against the first
    axis, one colour per GPU (and precision), one marker per value of a second axis; on each
    line a
    diamond where it turns compute bound and a cross where its peak memory stops fitting, and
    a grey vertical line where the GPUs' ranking changes."""
    from matplotlib.ticker import FuncFormatter

    target = save_target(path)
    fig, ax = new_figure(SWEEP_FIGSIZE_IN)
    lines = _lines(sweep)
    # a colour per GPU and precision, a marker per value of the second axis
    keys = list(dict.fromkeys((gpu, precision) for gpu, precision, _, _ in lines))
    colours = dict(zip(keys, _colours(len(keys)), strict=True))
    markers = {series: SERIES_MARKERS[k % len(SERIES_MARKERS)]
               for k, series in enumerate(dict.fromkeys(line[2] for line in lines))}
    for gpu, precision, series, points in lines:
        colour = colours[(gpu, precision)]
        xs = [point.values[sweep.axis] for point in points]
        label = _label(sweep, points[0].gpu_name, precision, series)
        for key, (_, style) in TIME_STYLES.items():
            ax.plot(xs, [point.time_ms[key] for point in points], ls=style, color=colour,
                    lw=1.6 if key == "sol" else 1.1,
                    marker=markers[series] if key == "sol" else None, ms=4,
                    label=label if key == "sol" else None, gid=f"line:{gpu}:{key}")
        _mark_crossovers(ax, sweep, gpu, precision, series, points, colour)
    for crossover in sweep.crossovers:
        if crossover.kind == "ranking":
            ax.axvline(crossover.after, color="0.6", lw=0.8, ls="-.", gid="ranking")
    axis_values = [float(v) for v in sweep.values[0]]
    if _log_axis(axis_values):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(plain_formatter())
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda ms, _: human_ms(ms)))
    ax.set_xlabel(sweep.axis)
    ax.set_ylabel("time")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    _legend(ax, sweep)
    ax.set_title(f"{sweep.name}: speed of light and estimates against {sweep.axis}", fontsize=10)
    return save(fig, target)


def _mark_crossovers(ax: Axes, sweep: Sweep, gpu: str, precision: str, series: tuple,
                     points: Sequence[SweepPoint], colour: str) -> None:
    """Each bound and fit crossover of the line at the first value past it, on the SoL line
    (interpolated between the swept values where bisection found it between them)."""
    fixed = dict(zip(sweep.axes[1:], series, strict=True))
    xs = [float(point.values[sweep.axis]) for point in points]
    sol = [point.sol_ms for point in points]
    for crossover in sweep.crossovers:
        line = {"gpu": gpu, "precision": precision, **fixed}
        if crossover.kind not in CROSSOVER_MARKERS or dict(crossover.line) != line:
            continue
        marker = CROSSOVER_MARKERS[crossover.kind][0]
        ax.plot([crossover.after], [_interpolated(xs, sol, float(crossover.after))],
                marker=marker, ms=9, color=colour, mec="black", ls="none", zorder=4,
                gid=f"crossover:{crossover.kind}:{gpu}")


def _interpolated(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """``ys`` at ``x`` on the polyline (in log-log where all are positive), clamped at its ends."""
    import math

    pairs = sorted(zip(xs, ys, strict=True))
    if x <= pairs[0][0]:
        return pairs[0][1]
    for (x0, y0), (x1, y1) in zip(pairs, pairs[1:], strict=False):
        if x0 <= x <= x1:
            if min(x0, y0, y1) > 0:
                share = math.log(x / x0) / math.log(x1 / x0)
                return math.exp(math.log(y0) + share * math.log(y1 / y0))
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pairs[-1][1]


def _legend(ax: Axes, sweep: Sweep) -> None:
    from matplotlib.lines import Line2D

    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls=style, label=what)
                for what, style in TIME_STYLES.values()]
    kinds = {crossover.kind for crossover in sweep.crossovers}
    handles += [Line2D([], [], color="0.3", marker=marker, ls="none", mec="black", label=what)
                for kind, (marker, what) in CROSSOVER_MARKERS.items() if kind in kinds]
    if "ranking" in kinds:
        handles.append(Line2D([], [], color="0.6", ls="-.", label="GPU ranking changes"))
    ax.legend(handles=handles, fontsize=7, loc="best")


def plot_sweep_roofline(sweep: Sweep, path: str | Path | None = None) -> Figure:
    """Each GPU's roofline (its HBM slope and main compute roof, at the first precision) and the
    sweep's points on it as a path along the first axis: at the speed of light (filled, on the
    roof by construction) and at the compile estimate (hollow, below it), the first line's
    first and last values labelled."""
    target = save_target(path)
    fig, ax = new_figure(SWEEP_FIGSIZE_IN)
    precision = sweep.precisions[0]
    lines = [line for line in _lines(sweep) if line[1] == precision]
    gpus = list(dict.fromkeys(line[0] for line in lines))
    colours = dict(zip(gpus, _colours(len(gpus)), strict=True))
    intensities = [p.intensity for *_, points in lines for p in points if p.intensity]
    x_lo, x_hi = min(intensities + [1.0]) / 4, max(intensities + [1e3]) * 4
    for entry in sweep.rooflines:
        if entry["precision"] != precision:
            continue
        bandwidth = entry["memory_bandwidth_bytes_per_s"]
        top = max(roof["peak_flops_per_s"] for roof in entry["roofs"])
        ax.plot([x_lo, top / bandwidth, x_hi], [bandwidth * x_lo, top, top],
                color=colours[entry["gpu"]], lw=1.0, alpha=0.6, gid=f"roof:{entry['gpu']}")
    for number, (gpu, _, series, points) in enumerate(lines):
        placed = [p for p in points if p.intensity and p.flops]
        if not placed:
            continue
        xs = [p.intensity for p in placed]
        label = _label(sweep, placed[0].gpu_name, precision, series)
        ax.plot(xs, [p.flops / (p.sol_ms * 1e-3) for p in placed], color=colours[gpu],
                marker="o", ms=4, lw=1.4, label=f"{label} at SoL", gid=f"path:{gpu}:sol")
        ax.plot(xs, [p.flops / (p.time_ms["fused_estimate"] * 1e-3) for p in placed],
                color=colours[gpu], marker="o", mfc="none", ms=4, lw=0.8, ls="--",
                gid=f"path:{gpu}:estimate")
        for point in (placed[0], placed[-1]) if number == 0 else ():  # one line's ends suffice
            ax.annotate(f"{sweep.axis}={point.values[sweep.axis]}",
                        (point.intensity, point.flops / (point.sol_ms * 1e-3)),
                        textcoords="offset points", xytext=(4, -10), fontsize=7,
                        color=ROOF_COLOUR)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.yaxis.set_major_formatter(si_formatter("FLOP/s"))
    ax.set_xlabel("arithmetic intensity (necessary FLOPs per compulsory byte)")
    ax.set_ylabel("throughput")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="lower right", title="filled: at SoL · hollow: compile estimate",
              title_fontsize=7)
    ax.set_title(f"{sweep.name} at {precision}: the path along {sweep.axis}", fontsize=10)
    return save(fig, target)


__all__ = ["plot_sweep", "plot_sweep_roofline"]
