"""The roofline of one result: roofs, ridge points, the model and each fused kernel.

Every roofline is drawn by one function from the dictionary form of a result
(:meth:`Result.to_dict`, the layout KernelBench batch reports carry), so a picture from a
``Result`` and one from its JSON are the same picture. :func:`plot_result` adds the one thing
the dictionary lacks, the roofs (``data["roofline"]``): the memory slope and a flat roof per
unit the workload uses. A dictionary without them gets them from the GPU table, with a roof
for every matmul family the precision maps to a unit (the dictionary does not say which
families occur).

Where each point sits — its height is always FLOPs / a time, the FLOP/s that time implies:

* model at SoL: x = FLOPs / compulsory bytes, y = FLOPs / speed-of-light time. It touches the
  roof when one unit does all the work; mixed work (matmuls on one unit, pointwise on another)
  sits below the top roof, at the blended rate the bound allows.
* model, fused: x = FLOPs / fused bytes, y = FLOPs / fused estimate (the sum of the per-kernel
  rooflines, each with its launch floor).
* each fused kernel: x = its FLOPs / its bytes, y = its FLOPs / its estimated time (launch floor
  included, so a tiny kernel sinks below the roof). Marker area is its share of the fused
  estimate. Kernels at the same point (the layers of a stack) are drawn as one marker, "×n".
  Kernels with no FLOPs or no bytes have no place on log axes; a note counts them.
* measured (with ``actual``): x = the SoL point's intensity, y = FLOPs / measured time, so the
  vertical gap to the SoL point is the headroom.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...costs import MatmulKind
from ...price.roofline import Roof, roofline_entry, roofs_for
from ...price.verdicts import NO_PERCENT_KINDS
from ...units import human_bytes, human_ms, percent, si
from .canvas import (
    CATEGORY_COLOURS,
    FIGSIZE_IN,
    IMPOSSIBLE_COLOUR,
    ROOF_COLOUR,
    axes_for,
    freeze_layout,
    plain_formatter,
    save,
    save_target,
    si_formatter,
)
from .labels import Labeller, Spot

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from ...price.roofline import Result

# --- Roofs --------------------------------------------------------------------------------------


def describe_roof(roof: Roof, precision: str, bandwidth_bytes_per_s: float) -> str:
    """E.g. "tensor cores (conv): 494.70 TFLOP/s, ridge 148 FLOPs/B"."""
    if roof.unit == "tensor":
        unit, uses = "tensor cores", roof.kinds
    else:  # every non-matmul FLOP runs here too
        unit, uses = f"vector {precision}", ("pointwise", *roof.kinds)
    return (
        f"{unit} ({', '.join(uses)}): {si(roof.peak_flops_per_s, 'FLOP/s')}, "
        f"ridge {roof.ridge(bandwidth_bytes_per_s):.3g} FLOPs/B"
    )


def _roofline_of(data: dict[str, Any]) -> tuple[float, list[Roof]]:
    """(bandwidth, roofs) from ``data["roofline"]``, else from the GPU table."""
    entry = data.get("roofline")
    if entry is None:
        from ...price.hardware import get_gpu

        gpu = get_gpu(data["gpu_key"])
        has_compute = any(kernel["category"] == "compute" for kernel in data.get("kernels", ()))
        entry = roofline_entry(
            gpu, roofs_for(gpu, data["precision"], MatmulKind if has_compute else ())
        )
    roofs = [
        Roof(roof["unit"], float(roof["peak_flops_per_s"]), tuple(roof["kinds"]))
        for roof in entry["roofs"]
    ]
    return float(entry["memory_bandwidth_bytes_per_s"]), roofs


# --- Points -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KernelPoint:
    """One marker: kernels of one category at the same (intensity, FLOP/s)."""

    category: str
    intensity: float  # FLOPs/byte
    flops_per_s: float
    names: tuple[str, ...]
    time_ms: float  # all of them together

    @property
    def label(self) -> str:
        """The kernel's name; for a merged marker, the names with layer numbers as "*" and the
        count; where the modules differ otherwise but the ops are the same, the ops and how
        many modules ran them (53 BatchNorms' ``num_batches_tracked`` adds read "bn1: add_
        ×53"); else the first name and "…"."""
        if len(self.names) == 1:
            return _shorten(self.names[0])
        patterns = {re.sub(r"\d+", "*", name) for name in self.names}
        if len(patterns) == 1:
            return f"{_shorten(patterns.pop())} ×{len(self.names)}"
        modules = {name.rpartition(": ")[0] for name in self.names}
        ops = {name.rpartition(": ")[2] for name in self.names}
        if len(ops) == 1 and len(modules) > 1:
            return f"{_shorten(ops.pop())} ×{len(self.names)} in {len(modules)} modules"
        return f"{_shorten(self.names[0] + ' …')} ×{len(self.names)}"


#: What separates the names in a kernel's name: module path parts, the module from its ops, ops.
_NAME_SEPARATORS = re.compile(r"(\.|: |\+)")


def _shorten(name: str, width: int = 38) -> str:
    """A long name with whole names left out of its middle ("…"): the start (the module) and the
    end (the last op) are what tell two kernels apart, so both stay, and no module or op name is
    cut (a name of fewer than three parts stays whole)."""
    tokens = _NAME_SEPARATORS.split(name)  # names at even positions, separators between

    def kept(front: int, back: int) -> str:
        return "".join(tokens[: 2 * front]) + "…" + "".join(tokens[len(tokens) - 2 * back :])

    count = len(tokens) // 2 + 1
    if len(name) <= width or count < 3:
        return name
    front = back = 1
    while front + back < count:
        grown = next(
            (size for size in ((front + 1, back), (front, back + 1)) if len(kept(*size)) <= width),
            None,
        )
        if grown is None:
            break
        front, back = grown
    return kept(front, back)


# Kernels closer than this in log10 space are one marker (0.005 decades ≈ 1.2 %).
_MERGE_DECADES = 0.005


def kernel_points(kernels: Sequence[dict[str, Any]]) -> tuple[list[KernelPoint], list[dict]]:
    """Markers for the kernels that can sit on log axes, largest time first, and the rest."""
    groups: dict[tuple[str, int, int], list[KernelPoint]] = {}
    undrawable = []
    for kernel in kernels:
        if kernel["flops"] <= 0 or kernel["bytes"] <= 0 or kernel["time_ms"] <= 0:
            undrawable.append(kernel)
            continue
        point = KernelPoint(
            category=kernel["category"],
            intensity=kernel["flops"] / kernel["bytes"],
            flops_per_s=kernel["flops"] / (kernel["time_ms"] * 1e-3),
            names=(kernel["name"],),
            time_ms=kernel["time_ms"],
        )
        key = (
            point.category,
            round(math.log10(point.intensity) / _MERGE_DECADES),
            round(math.log10(point.flops_per_s) / _MERGE_DECADES),
        )
        groups.setdefault(key, []).append(point)
    merged = [
        replace(
            members[0],
            names=tuple(name for member in members for name in member.names),
            time_ms=sum(member.time_ms for member in members),
        )
        for members in groups.values()
    ]
    return sorted(merged, key=lambda point: point.time_ms, reverse=True), undrawable


# --- The roofline -------------------------------------------------------------------------------


def plot_result(
    result: Result, path: str | Path | None = None, *, ax: Axes | None = None, top: int = 10
) -> Figure:
    """The roofline of ``result``: roofs, ridge points, the model and each fused kernel.

    ``top`` kernels (by estimated time) are labelled; ``ax`` draws into existing axes.
    Saved to ``path`` (.png or .svg) when given. See the module docstring for where points sit.
    """
    save_target(path)
    return plot_result_dict(result.to_dict(), path, ax=ax, top=top)


def plot_result_dict(
    data: dict[str, Any],
    path: str | Path | None = None,
    *,
    ax: Axes | None = None,
    top: int = 10,
    title: str | None = None,
) -> Figure:
    """The roofline drawn from a :meth:`Result.to_dict` dictionary (``"actual"`` optional;
    only its ``"ms"`` is read). Roofs come from ``data["roofline"]`` or the GPU table."""
    target = save_target(path)
    fig, ax, owned = axes_for(ax, FIGSIZE_IN)
    bandwidth, roofs = _roofline_of(data)
    points, undrawable = kernel_points(data.get("kernels", ()))
    model = _model_points(data)
    fused_ms = data["time_ms"]["fused_estimate"]

    xs = [roof.ridge(bandwidth) for roof in roofs] + [p.intensity for p in points]
    ys = [p.flops_per_s for p in points]
    xs += [x for x, _, _ in model.values()]
    ys += [y for _, y, _ in model.values()]
    (x_lo, x_hi), (y_lo, y_hi) = _limits(xs, ys, roofs)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    _draw_roofs(ax, bandwidth, roofs, x_lo, x_hi, y_lo)
    sizes = [_marker_size(point.time_ms / fused_ms if fused_ms else 0.0) for point in points]
    for category, colour in CATEGORY_COLOURS.items():
        chosen = [i for i, point in enumerate(points) if point.category == category]
        if chosen:
            ax.scatter(
                [points[i].intensity for i in chosen],
                [points[i].flops_per_s for i in chosen],
                s=[sizes[i] for i in chosen],
                c=colour,
                alpha=0.6,
                edgecolors="white",
                linewidths=0.5,
                label=category,
                gid=f"kernels:{category}",
                zorder=3,
            )
    _draw_model(ax, model, _impossible(data))

    ax.set_xlabel("arithmetic intensity (FLOPs / HBM byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.yaxis.set_major_formatter(si_formatter("FLOP/s"))
    ax.xaxis.set_major_formatter(plain_formatter())
    ax.grid(True, which="major", color="0.9", lw=0.6)
    ax.set_title(title or _title(data), fontsize=11)
    legend = None
    if ax.get_legend_handles_labels()[0]:  # a workload with no FLOPs has no points
        legend = ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
        for handle in legend.legend_handles:
            handle.set_sizes([40])  # one size in the key; marker area means time on the plot
    note = ax.text(
        0.99,
        0.015,
        _note(data, points, undrawable, fused_ms),
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=7,
        color="0.35",
        gid="note",
    )
    freeze_layout(fig, owned)

    labeller = Labeller(ax)
    labeller.block(note.get_window_extent())
    for point, size in zip(points, sizes, strict=True):
        labeller.block_marker(point.intensity, point.flops_per_s, size)
    for x, y, _ in model.values():
        labeller.block_marker(x, y, _MODEL_MARKER_PT2)
    for roof in roofs:
        labeller.block_marker(roof.ridge(bandwidth), roof.peak_flops_per_s, _RIDGE_MARKER_PT2)
    if "measured" in model:
        labeller.block_segment(model["sol"][:2], model["measured"][:2])
    for roof in roofs:
        labeller.block_segment(
            (roof.ridge(bandwidth), roof.peak_flops_per_s), (x_hi, roof.peak_flops_per_s)
        )
    if legend is not None:
        labeller.place_legend(legend)
    _label_roofs(ax, labeller, data, bandwidth, roofs, (x_lo, x_hi), y_lo)
    # the measured point first: it sits right under the SoL point, whose label has more room;
    # its label carries the verdict, so it is placed even where no spot is free
    for key in sorted(model, key=lambda key: key != "measured"):
        x, y, text = model[key]
        labeller.place(
            x,
            y,
            text,
            force=key == "measured",
            fontsize=8,
            fontweight="bold",
            gid=f"label:model:{key}",
            color=IMPOSSIBLE_COLOUR if _impossible(data) and key == "measured" else "k",
        )
    for point in points[: max(top, 0)]:
        labeller.place(
            point.intensity,
            point.flops_per_s,
            point.label,
            fontsize=7,
            color="0.15",
            gid="label:kernel",
        )
    return save(fig, target)


_MODEL_MARKER_PT2 = 170
_RIDGE_MARKER_PT2 = 28
_MODEL_STYLE = {
    "sol": {"marker": "*", "color": "k", "label": "model at SoL (compulsory bytes)"},
    "fused": {"marker": "D", "color": "0.35", "label": "model, fused estimate"},
    "measured": {"marker": "P", "color": "#e6550d", "label": "model, measured"},
}


def _model_points(data: dict[str, Any]) -> dict[str, tuple[float, float, str]]:
    """(x, y, label) of the whole-model points that exist (FLOPs, bytes and times > 0)."""
    flops = data["flops"]["total"]
    times = data["time_ms"]
    compulsory, fused = data["bytes"]["compulsory"], data["bytes"]["fused"]
    points: dict[str, tuple[float, float, str]] = {}
    if flops <= 0:
        return points
    if compulsory > 0 and times["sol"] > 0:
        points["sol"] = (
            flops / compulsory,
            flops / (times["sol"] * 1e-3),
            f"SoL {human_ms(times['sol'])} ({data['bottleneck']})",
        )
    if fused > 0 and times["fused_estimate"] > 0:
        points["fused"] = (
            flops / fused,
            flops / (times["fused_estimate"] * 1e-3),
            f"fused est. {human_ms(times['fused_estimate'])}",
        )
    measured = _measured_ms(data)
    if measured is not None and "sol" in points:
        points["measured"] = (
            points["sol"][0],
            flops / (measured * 1e-3),
            _measured_label(data, measured, times["sol"] / measured),
        )
    return points


def _measured_ms(data: dict[str, Any]) -> float | None:
    actual = data.get("actual") or {}
    return actual.get("ms")


def _impossible(data: dict[str, Any]) -> bool:
    """The verdict the JSON carries (:func:`torchroofline.price.verdicts.verdict`): faster
    than the bound at every math rung."""
    return bool((data.get("actual") or {}).get("impossible"))


def _measured_label(data: dict[str, Any], measured_ms: float, fraction: float) -> str:
    """"measured 5 ms: 251.9% of SoL, needs TF32 or lower math": the verdict's few words as
    the text report judges the time ("IMPOSSIBLE: " first for a time no math reaches; nothing
    for a time with headroom)."""
    actual = data.get("actual") or {}
    kind, short = actual.get("verdict_kind"), actual.get("verdict_short")
    impossible = "IMPOSSIBLE: " if _impossible(data) else ""
    if kind in NO_PERCENT_KINDS:  # a bound that writes a constant, or nothing: no % of it
        return f"measured {human_ms(measured_ms)}: {short}"
    words = "" if kind in (None, "headroom", "impossible") else f", {short}"
    return f"measured {human_ms(measured_ms)}: {impossible}{percent(fraction)} of SoL{words}"


def _draw_model(ax: Axes, model: dict[str, tuple[float, float, str]], impossible: bool) -> None:
    if "sol" in model and "measured" in model:
        (x, y_sol, _), (_, y_measured, _) = model["sol"], model["measured"]
        ax.plot([x, x], [y_sol, y_measured], ls="--", lw=0.8, color="0.4", zorder=3)
    for key, (x, y, _) in model.items():
        style = dict(_MODEL_STYLE[key])
        if key == "measured" and impossible:
            style["color"] = IMPOSSIBLE_COLOUR
        ax.scatter(
            [x],
            [y],
            s=_MODEL_MARKER_PT2,
            edgecolors="white",
            linewidths=0.8,
            zorder=6 if key == "sol" else 5,  # the bound on top where points coincide
            gid=f"model:{key}",
            **style,
        )


def _limits(
    xs: Sequence[float], ys: Sequence[float], roofs: Sequence[Roof]
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Axes ranges: every point and ridge with a margin, at least 3 decades of intensity, the
    top roof with room for its label, at least 3 decades of FLOP/s below it."""
    x_lo, x_hi = min(xs) / 4, max(xs) * 8
    span = math.log10(x_hi / x_lo)
    if span < 3:
        widen = 10 ** ((3 - span) / 2)
        x_lo, x_hi = x_lo / widen, x_hi * widen
    top = max(roof.peak_flops_per_s for roof in roofs)
    y_lo = min([*ys, top / 1e3]) / 3
    # a measured time faster than light sits above every roof: its point and label stay in
    return (x_lo, x_hi), (y_lo, max([*ys, top]) * 3)


def _draw_roofs(
    ax: Axes, bandwidth: float, roofs: Sequence[Roof], x_lo: float, x_hi: float, y_lo: float
) -> None:
    top = roofs[0]
    ridge = top.ridge(bandwidth)
    ax.plot(
        [x_lo, ridge],
        [bandwidth * x_lo, top.peak_flops_per_s],
        color=ROOF_COLOUR,
        lw=1.8,
        gid="roof:memory",
        zorder=2,
    )
    for index, roof in enumerate(roofs):
        ridge = roof.ridge(bandwidth)
        style = {"lw": 1.8, "ls": "-"} if index == 0 else {"lw": 1.2, "ls": "--"}
        ax.plot(
            [ridge, x_hi],
            [roof.peak_flops_per_s] * 2,
            color=ROOF_COLOUR,
            zorder=2,
            gid=f"roof:{roof.unit}:{roof.peak_flops_per_s:.6g}",
            **style,
        )
        ax.plot(
            [ridge, ridge], [y_lo, roof.peak_flops_per_s], color="0.75", lw=0.6, ls=":", zorder=1
        )
        ax.scatter(
            [ridge],
            [roof.peak_flops_per_s],
            s=_RIDGE_MARKER_PT2,
            facecolors="white",
            edgecolors=ROOF_COLOUR,
            zorder=4,
            gid=f"ridge:{roof.peak_flops_per_s:.6g}",
        )


def _label_roofs(
    ax: Axes,
    labeller: Labeller,
    data: dict[str, Any],
    bandwidth: float,
    roofs: Sequence[Roof],
    x_range: tuple[float, float],
    y_lo: float,
) -> None:
    """Each roof's unit, peak and ridge beside its knee (or at its right end when the knee is
    too far right), above the line or else below; the bandwidth along the slope. All of them
    then block kernel labels, as does the memory roof itself."""
    x_lo, x_hi = x_range
    for roof in roofs:
        knee, peak = roof.ridge(bandwidth), roof.peak_flops_per_s
        # beside the knee or at the right end, just above the line, then just below it, then
        # further off (clear of markers that sit on the roof)
        anchors = [knee * (x_hi / knee) ** (step / 6) for step in range(5)]
        spots = []
        for gap in (3, 10, 18):
            for dy, va in ((gap, "bottom"), (-gap - 1, "top")):
                spots += [Spot(x, peak, 6, dy, "left", va) for x in anchors]
                spots.append(Spot(x_hi, peak, -4, dy, "right", va))
            spots.append(Spot(knee, peak, -6, gap, "right", "bottom"))
        labeller.place_first(
            describe_roof(roof, data["precision"], bandwidth),
            spots,
            force=True,
            fontsize=8,
            color=ROOF_COLOUR,
            gid="label:roof",
        )
    _label_slope(ax, labeller, bandwidth, max(x_lo * 1.6, y_lo * 6 / bandwidth),
                 roofs[0].ridge(bandwidth) / 4)
    # the slope's own label sits on it; the kernels' labels keep off it
    top = roofs[0]
    labeller.block_line((x_lo, bandwidth * x_lo), (top.ridge(bandwidth), top.peak_flops_per_s))


def _label_slope(
    ax: Axes, labeller: Labeller, bandwidth: float, x_start: float, x_stop: float
) -> None:
    """The bandwidth along the memory roof, at the first spot from ``x_start`` up to ``x_stop``
    (intensities, FLOPs/B) clear of the legend, the notes and the markers; none where no spot
    is (it ran under the legend)."""
    x = x_start
    while x < x_stop:
        (x0, y0), (x1, y1) = ax.transData.transform(
            [(x, bandwidth * x), (x * 10, bandwidth * x * 10)]
        )
        slope = ax.annotate(
            f"HBM {human_bytes(bandwidth)}/s",
            (x, bandwidth * x),
            xytext=(0, 4),
            textcoords="offset points",
            rotation=math.degrees(math.atan2(y1 - y0, x1 - x0)),
            rotation_mode="anchor",
            ha="left",
            va="bottom",
            fontsize=8,
            color=ROOF_COLOUR,
            gid="label:memory",
        )
        if labeller.fits(slope.get_window_extent()):
            labeller.block(slope.get_window_extent())
            return
        slope.remove()
        x *= 2


def _marker_size(share: float) -> float:
    """Marker area in pt²: a floor so every kernel shows, then in proportion to time share."""
    return 14 + 900 * share


def _title(data: dict[str, Any]) -> str:
    cache = "" if data.get("cache", "cold") == "cold" else f", {data['cache']} L2"
    precision = data.get("computing_precision", data["precision"])  # an fp16 model: "fp16"
    return f"{_middle_cut(data['model'])} on {data['gpu']}, {precision}{cache}"


def _middle_cut(name: str, width: int = 64) -> str:
    """``name`` in at most ``width`` characters, its middle left out ("…"): a KernelBench
    name of 97 characters ran off both sides of the picture; its number and its end stay."""
    if len(name) <= width:
        return name
    back = (width - 1) // 3
    return f"{name[: width - 1 - back]}…{name[-back:]}"


def _note(
    data: dict[str, Any], points: Sequence[KernelPoint], undrawable: Sequence[dict], fused_ms: float
) -> str:
    count = len(data.get("kernels", ()))
    lines = [
        f"{count} fused kernel{'s' if count != 1 else ''}; marker area ∝ share of fused estimate"
    ]
    if any(len(point.names) > 1 for point in points):
        lines.append("×n: kernels at the same point drawn as one")
    if undrawable:
        share = sum(kernel["time_ms"] for kernel in undrawable) / fused_ms if fused_ms else 0.0
        lines.append(
            f"not drawn: {len(undrawable)} kernel{'s' if len(undrawable) != 1 else ''} with no "
            "FLOPs (data movement), "
            f"{share:.1%} of the fused estimate"
        )
    if data["flops"]["total"] <= 0:
        sol_ms = data["time_ms"]["sol"]
        lines.append(  # "pure data movement" of 0 B said there was some
            f"no FLOPs: pure data movement, SoL {human_ms(sol_ms)} "
            f"= {human_bytes(data['bytes']['compulsory'])} / bandwidth"
            if data["bytes"]["compulsory"] else "no FLOPs, no bytes: nothing to compute or move"
        )
        measured = _measured_ms(data)
        if measured is not None:  # no point to label: the verdict goes here
            lines.append(_measured_label(data, measured, sol_ms / measured))
    return "\n".join(lines)
