"""The picture of a profiled run (:class:`~torchroofline.suites.kineto.TraceReport`): every priced
op instance at its measured throughput, under the GPU's roofs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from .canvas import IMPOSSIBLE_COLOUR, ROOF_COLOUR, new_figure, save, save_target, si_formatter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...suites.kineto import TraceReport

TRACE_FIGSIZE_IN = (9.0, 6.0)
#: Op kinds given their own colour (the most GPU time first); the rest are grey.
COLOURED_KINDS = 8
OTHER_COLOUR = "#9e9e9e"
#: Tensor-core precisions drawn as roofs when the trace's ops read that dtype.
_ROOF_PRECISIONS = {"c10::BFloat16": "bf16", "c10::Half": "fp16", "float": "tf32"}


def plot_trace(report: TraceReport, path: str | Path | None = None) -> Figure:
    """Each priced op that does FLOPs at (FLOPs per HBM byte, FLOPs / measured time), sized by
    its measured time and coloured by op kind, under the HBM roof (the slope) and the compute
    roofs of the precisions the trace uses. Instances faster than their bound are ringed red
    (dashed where a lower math rung reaches their time);
    ops without FLOPs (copies, fills) have no place on the FLOP axis and are counted in the
    title."""
    target = save_target(path)
    fig, ax = new_figure(TRACE_FIGSIZE_IN)
    gpu = report.gpu
    placed = [i for i in report.priced if i.figures.flops and i.figures.bytes and i.measured_us]
    kinds = [row.kind for row in report.kinds()][:COLOURED_KINDS]
    palette = dict(zip(kinds, _colours(len(kinds)), strict=True))
    xs = [i.figures.intensity for i in placed]
    ys = [i.figures.flops / (i.measured_us * 1e-6) for i in placed]
    longest = max((i.measured_us for i in placed), default=1.0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    x_lo, x_hi = min(xs + [1.0]) / 4, max(xs + [1e3]) * 4
    roofs = _roofs(report)
    top = max(roofs.values())
    bandwidth = gpu.memory_bandwidth_bytes_per_s
    ax.plot([x_lo, top / bandwidth], [bandwidth * x_lo, top], color=ROOF_COLOUR, lw=1.8,
            gid="roof:memory", label=f"HBM {bandwidth / 1e12:.2f} TB/s")
    for label, peak in roofs.items():
        ax.plot([peak / bandwidth, x_hi], [peak, peak], color=ROOF_COLOUR, lw=1.2,
                ls="-" if peak == top else "--", gid=f"roof:{label}")
        ax.annotate(f"{label} {peak / 1e12:,.0f} TFLOP/s", (x_hi, peak), ha="right",
                    va="bottom", fontsize=8)
    for kind in [*kinds, None]:
        chosen = [k for k, i in enumerate(placed) if (i.op.name in palette) == (kind is not None)
                  and (kind is None or i.op.name == kind)]
        if not chosen:
            continue
        ax.scatter([xs[k] for k in chosen], [ys[k] for k in chosen],
                   s=[12 + 200 * placed[k].measured_us / longest for k in chosen],
                   color=palette.get(kind, OTHER_COLOUR), alpha=0.7, zorder=3,
                   label=kind or "other", gid=f"ops:{kind or 'other'}")
    # ringed as the text lists them (the one verdict: TraceReport.faster_than_light, lower_math)
    for listed, style, label, gid in (
        (report.faster_than_light, "-", "faster than its bound at every math", "faster-than-light"),
        (report.lower_math, "--", "faster than its bound at its own math", "lower-math"),
    ):
        ringed = [k for k, i in enumerate(placed) if i in listed]
        if ringed:
            ax.scatter([xs[k] for k in ringed], [ys[k] for k in ringed], s=160,
                       facecolors="none", edgecolors=IMPOSSIBLE_COLOUR, linewidths=1.6,
                       linestyles=style, zorder=4, label=f"{label} ({len(ringed)})", gid=gid)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min(ys + [top / 1e4]) / 3, top * 3)
    ax.yaxis.set_major_formatter(si_formatter("FLOP/s"))
    ax.set_xlabel("arithmetic intensity (FLOPs per HBM byte)")
    ax.set_ylabel("measured throughput")
    unplaced = Counter(i.op.name for i in report.priced if i not in placed)
    name = Path(report.path).name.removesuffix(".gz").removesuffix(".json")
    ax.set_title(
        f"{name} on the {gpu.name}: {len(placed)} ops at their measured throughput\n"
        f"({sum(unplaced.values())} ops without FLOPs not shown; marker area: GPU time)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    return save(fig, target)


def _roofs(report: TraceReport) -> dict[str, float]:
    """Compute roofs: the fp32 CUDA cores, and the tensor cores of each precision the ops'
    dtypes (or their kernels' names) say they ran."""
    gpu = report.gpu
    roofs = {"fp32 vector": gpu.vector_peak("fp32")}
    seen = {name for i in report.priced for name in i.op.args.get("Input type") or ()}
    for dtype, precision in _ROOF_PRECISIONS.items():
        tf32_ran = precision != "tf32" or any(i.figures.math for i in report.priced)
        if dtype in seen and tf32_ran and gpu.has_tensor(precision):
            roofs[f"{precision} tensor"] = gpu.tensor_peak(precision)
    return roofs


#: matplotlib's tab10 without its grey (kept for "other") and its red (faster than light).
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
            "#bcbd22", "#17becf")


def _colours(count: int) -> list[str]:
    return [_PALETTE[k % len(_PALETTE)] for k in range(count)]
