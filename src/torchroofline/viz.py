"""Pictures of an analysis: the roofline, a GPU comparison, and KernelBench suite summaries.

matplotlib is imported here only, inside the drawing functions, so ``import torchroofline``
never needs it. Figures are :class:`matplotlib.figure.Figure` objects on the non-interactive
Agg canvas (pyplot and its global state are not used), returned to the caller and saved when a
``path`` ending in ``.png`` or ``.svg`` is given.

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

from .costs import MatmulKind
from .errors import InputError, TorchrooflineError
from .report import human_bytes, human_ms, si
from .roofline import Roof, roofline_entry, roofs_for

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from .hardware import GPUSpec
    from .roofline import Result

FIGSIZE_IN = (9.0, 6.0)  #: roofline figure size, inches
GPUS_FIGSIZE_IN = (10.0, 4.8)
SUITE_FIGSIZE_IN = (8.0, 6.0)
DPI = 150  #: pixels per inch of saved PNGs
SAVE_SUFFIXES = (".png", ".svg")

#: GPUs :func:`plot_gpus` compares unless told otherwise: NVIDIA's data-centre generations from
#: Volta to Blackwell, an inference card (L40S) and AMD's MI300X.
DEFAULT_GPUS = ("v100", "a100-80gb", "h100-sxm", "h200", "b200", "l40s", "mi300x")

CATEGORY_COLOURS = {
    "compute": "#1f77b4",
    "reduction": "#9467bd",
    "pointwise": "#2ca02c",
    "data-movement": "#7f7f7f",
}
BOUND_COLOURS = {"compute": "#1f77b4", "memory": "#ff7f0e", "launch": "#9e9e9e"}
IMPOSSIBLE_COLOUR = "#d62728"
ROOF_COLOUR = "#333333"

_MISSING_MATPLOTLIB = "plotting needs matplotlib: pip install 'torchroofline[viz]'"


# --- matplotlib ---------------------------------------------------------------------------------


def _figure_class() -> type:
    """matplotlib's Figure, or the one-line error that says how to get it."""
    try:
        import matplotlib  # noqa: F401  (checked first: a cached submodule would hide its absence)
        from matplotlib.figure import Figure
    except ImportError:
        raise TorchrooflineError(_MISSING_MATPLOTLIB) from None
    return Figure


def _new_figure(figsize: tuple[float, float], **subplots: Any) -> tuple[Figure, Any]:
    """A Figure on an Agg canvas (no pyplot, no display) and its axes."""
    figure_class = _figure_class()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure_class(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(**subplots)


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes, bool]:
    """The caller's axes, or new ones; the flag says whether the figure is ours to lay out."""
    if ax is None:
        fig, ax = _new_figure(figsize)
        return fig, ax, True
    return ax.figure, ax, False


def _target(path: str | Path | None) -> Path | None:
    """The path a figure will be saved to, checked before any drawing."""
    _figure_class()
    if path is None:
        return None
    path = Path(path)
    if path.suffix.lower() not in SAVE_SUFFIXES:
        raise InputError(f"cannot save a figure as {path.name!r}; end the path in .png or .svg")
    return path


def _save(fig: Figure, path: Path | None) -> Figure:
    if path is not None:
        fig.savefig(path, dpi=DPI)
    return fig


def _freeze_layout(fig: Figure, owned: bool) -> None:
    """Run the layout once and keep it, so display positions measured now stay true."""
    fig.draw_without_rendering()
    if owned:
        fig.set_layout_engine("none")


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
        from .hardware import get_gpu

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
        """The kernel's name; for a merged marker, the names with layer numbers as "*" (or the
        first name and "…" when they differ otherwise) and the count."""
        if len(self.names) == 1:
            return _shorten(self.names[0])
        patterns = {re.sub(r"\d+", "*", name) for name in self.names}
        name = patterns.pop() if len(patterns) == 1 else self.names[0] + " …"
        return f"{_shorten(name)} ×{len(self.names)}"


def _shorten(name: str, width: int = 38) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


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


# --- Label placement ----------------------------------------------------------------------------

# Offsets tried for a label, in points from its anchor: nearest ring first, and within a ring
# up-right first (the roofline's empty side is above the points).
_ANGLES_DEG = (45, 0, 90, 135, -45, 180, -90, -135, 22, 68, 112, 158, -22, -68, -112, -158)
_RADII_PT = (8, 16, 26, 38, 52, 70, 92)
_HA = ("left", "center", "right")
_VA = ("bottom", "center", "top")


@dataclass(frozen=True)
class _Spot:
    """Where a label may go: anchored at data point (x, y), offset (dx, dy) points, aligned."""

    x: float
    y: float
    dx: float
    dy: float
    ha: str
    va: str


_SHIFT = {"left": 0.0, "center": 0.5, "right": 1.0, "bottom": 0.0, "top": 1.0}


class _Labeller:
    """Greedy de-overlap: each label takes the first spot whose box stays inside the axes and
    clear of every box placed so far (labels, legend, notes, markers), and whose leader line, if
    it has one, crosses no text."""

    def __init__(self, ax: Axes) -> None:
        self.ax = ax
        self.px_per_pt = ax.figure.dpi / 72
        self.area = ax.get_window_extent()
        self.taken: list[_Box] = []
        self.text: list[_Box] = []  # the taken boxes that hold text: leader lines avoid them

    def block(self, box: Any) -> None:
        """Keep labels off an artist's window extent (text: the legend, a note)."""
        self.taken.append((box.x0, box.y0, box.x1, box.y1))
        self.text.append(self.taken[-1])

    def block_marker(self, x: float, y: float, size_pt2: float) -> None:
        cx, cy = self.ax.transData.transform((x, y))
        radius = math.sqrt(size_pt2) / 2 * self.px_per_pt
        self.taken.append((cx - radius, cy - radius, cx + radius, cy + radius))

    def block_segment(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        """A vertical or horizontal line, as a box 4 px wide."""
        (x0, y0), (x1, y1) = self.ax.transData.transform([start, end])
        self.taken.append((min(x0, x1) - 2, min(y0, y1) - 2, max(x0, x1) + 2, max(y0, y1) + 2))

    def place(self, x: float, y: float, text: str, **style: Any) -> Any | None:
        """Annotate (x, y) with ``text`` on the nearest ring spot that fits; None when none does.
        A label pushed further than two rings out gets a leader line."""
        spots = []
        for radius in _RADII_PT:
            for angle in _ANGLES_DEG:
                dx = radius * math.cos(math.radians(angle))
                dy = radius * math.sin(math.radians(angle))
                ha = _HA[0] if dx > 0.3 * radius else _HA[2] if dx < -0.3 * radius else _HA[1]
                va = _VA[0] if dy > 0.3 * radius else _VA[2] if dy < -0.3 * radius else _VA[1]
                spots.append(_Spot(x, y, dx, dy, ha, va))
        return self.place_first(text, spots, leader_beyond_pt=_RADII_PT[1], **style)

    def place_first(
        self,
        text: str,
        spots: Sequence[_Spot],
        *,
        force: bool = False,
        leader_beyond_pt: float = math.inf,
        **style: Any,
    ) -> Any | None:
        """Annotate at the first of ``spots`` that fits (the first of all when none does and
        ``force``); None when none fits."""
        probe = self.ax.text(0, 0, text, transform=None, **style)
        width, height = probe.get_window_extent().width, probe.get_window_extent().height
        probe.remove()
        fitting = None
        for spot in spots:
            leader = math.hypot(spot.dx, spot.dy) > leader_beyond_pt
            box = self._box(spot, width, height)
            if self._fits(box) and not (leader and self._crosses_text(spot, box)):
                fitting = spot, box, leader
                break
        if fitting is None and force:
            fitting = spots[0], self._box(spots[0], width, height), False
        if fitting is None:
            return None
        spot, box, leader = fitting
        self.taken.append(box)
        self.text.append(box)
        return self.ax.annotate(
            text,
            (spot.x, spot.y),
            xytext=(spot.dx, spot.dy),
            textcoords="offset points",
            ha=spot.ha,
            va=spot.va,
            arrowprops={"arrowstyle": "-", "color": "0.45", "lw": 0.6} if leader else None,
            **style,
        )

    def _box(self, spot: _Spot, width: float, height: float) -> _Box:
        cx, cy = self.ax.transData.transform((spot.x, spot.y))
        x0 = cx + spot.dx * self.px_per_pt - _SHIFT[spot.ha] * width
        y0 = cy + spot.dy * self.px_per_pt - _SHIFT[spot.va] * height
        return (x0 - 2, y0 - 2, x0 + width + 2, y0 + height + 2)

    def _fits(self, box: _Box) -> bool:
        area = self.area
        if box[0] < area.x0 or box[1] < area.y0 or box[2] > area.x1 or box[3] > area.y1:
            return False
        return not any(_overlap(box, other) for other in self.taken)

    def _crosses_text(self, spot: _Spot, box: _Box) -> bool:
        """Whether the leader from the point to the label crosses any text."""
        start = self.ax.transData.transform((spot.x, spot.y))
        end = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)  # matplotlib aims at the centre
        return any(_segment_hits(start, end, other) for other in self.text)


_Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels


def _overlap(a: _Box, b: _Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _segment_hits(start: Sequence[float], end: Sequence[float], box: _Box) -> bool:
    """Whether the segment start→end passes through ``box`` (Liang–Barsky clipping)."""
    (x0, y0), (x1, y1) = start, end
    dx, dy = x1 - x0, y1 - y0
    low, high = 0.0, 1.0
    for p, q in ((-dx, x0 - box[0]), (dx, box[2] - x0), (-dy, y0 - box[1]), (dy, box[3] - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        t = q / p
        if p < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


# --- The roofline -------------------------------------------------------------------------------


def plot_result(
    result: Result, path: str | Path | None = None, *, ax: Axes | None = None, top: int = 10
) -> Figure:
    """The roofline of ``result``: roofs, ridge points, the model and each fused kernel.

    ``top`` kernels (by estimated time) are labelled; ``ax`` draws into existing axes.
    Saved to ``path`` (.png or .svg) when given. See the module docstring for where points sit.
    """
    _target(path)
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
    target = _target(path)
    fig, ax, owned = _axes(ax, FIGSIZE_IN)
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
    _draw_model(ax, model)

    ax.set_xlabel("arithmetic intensity (FLOPs / HBM byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.yaxis.set_major_formatter(_si_formatter("FLOP/s"))
    ax.xaxis.set_major_formatter(_plain_formatter())
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
    _freeze_layout(fig, owned)

    labeller = _Labeller(ax)
    if legend is not None:
        labeller.block(legend.get_window_extent())
    labeller.block(note.get_window_extent())
    for point, size in zip(points, sizes, strict=True):
        labeller.block_marker(point.intensity, point.flops_per_s, size)
    for x, y, _ in model.values():
        labeller.block_marker(x, y, _MODEL_MARKER_PT2)
    if "measured" in model:
        labeller.block_segment(model["sol"][:2], model["measured"][:2])
    for roof in roofs:
        labeller.block_segment(
            (roof.ridge(bandwidth), roof.peak_flops_per_s), (x_hi, roof.peak_flops_per_s)
        )
        labeller.block_marker(roof.ridge(bandwidth), roof.peak_flops_per_s, _RIDGE_MARKER_PT2)
    _label_roofs(ax, labeller, data, bandwidth, roofs, (x_lo, x_hi), y_lo)
    for key, (x, y, text) in model.items():
        labeller.place(
            x,
            y,
            text,
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
    return _save(fig, target)


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
        verdict = "IMPOSSIBLE: " if _impossible(data) else ""
        points["measured"] = (
            points["sol"][0],
            flops / (measured * 1e-3),
            f"measured {human_ms(measured)}: {verdict}{times['sol'] / measured:.1%} of SoL",
        )
    return points


def _measured_ms(data: dict[str, Any]) -> float | None:
    actual = data.get("actual") or {}
    return actual.get("ms")


def _impossible(data: dict[str, Any]) -> bool:
    measured = _measured_ms(data)
    return measured is not None and measured < data["time_ms"]["sol"]


def _draw_model(ax: Axes, model: dict[str, tuple[float, float, str]]) -> None:
    if "sol" in model and "measured" in model:
        (x, y_sol, _), (_, y_measured, _) = model["sol"], model["measured"]
        ax.plot([x, x], [y_sol, y_measured], ls="--", lw=0.8, color="0.4", zorder=3)
    for key, (x, y, _) in model.items():
        style = dict(_MODEL_STYLE[key])
        if key == "measured" and y > model["sol"][1]:
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
    return (x_lo, x_hi), (y_lo, top * 3)


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
    labeller: _Labeller,
    data: dict[str, Any],
    bandwidth: float,
    roofs: Sequence[Roof],
    x_range: tuple[float, float],
    y_lo: float,
) -> None:
    """Each roof's unit, peak and ridge beside its knee (or at its right end when the knee is
    too far right), above the line or else below; the bandwidth along the slope. All of them
    then block kernel labels."""
    x_lo, x_hi = x_range
    for roof in roofs:
        knee, peak = roof.ridge(bandwidth), roof.peak_flops_per_s
        # beside the knee or at the right end, just above the line, then just below it, then
        # further off (clear of markers that sit on the roof)
        anchors = [knee * (x_hi / knee) ** (step / 6) for step in range(5)]
        spots = []
        for gap in (3, 10, 18):
            for dy, va in ((gap, "bottom"), (-gap - 1, "top")):
                spots += [_Spot(x, peak, 6, dy, "left", va) for x in anchors]
                spots.append(_Spot(x_hi, peak, -4, dy, "right", va))
            spots.append(_Spot(knee, peak, -6, gap, "right", "bottom"))
        labeller.place_first(
            describe_roof(roof, data["precision"], bandwidth),
            spots,
            force=True,
            fontsize=8,
            color=ROOF_COLOUR,
            gid="label:roof",
        )
    x = max(x_lo * 1.6, y_lo * 6 / bandwidth)
    if x < roofs[0].ridge(bandwidth) / 4:
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
        labeller.block(slope.get_window_extent())


def _marker_size(share: float) -> float:
    """Marker area in pt²: a floor so every kernel shows, then in proportion to time share."""
    return 14 + 900 * share


def _title(data: dict[str, Any]) -> str:
    cache = "" if data.get("cache", "cold") == "cold" else f", {data['cache']} L2"
    return f"{data['model']} on {data['gpu']}, {data['precision']}{cache}"


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
        lines.append(
            f"no FLOPs: pure data movement, SoL {human_ms(data['time_ms']['sol'])} "
            f"= {human_bytes(data['bytes']['compulsory'])} / bandwidth"
        )
    return "\n".join(lines)


def _si_formatter(unit: str) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: si(value, unit).replace(".00 ", " "))


def _time_formatter(widest_ms: float) -> Any:
    """Ticks of an axis in ms, in one unit that suits its range: "20 µs", "1.5 ms", "2 s"."""
    from matplotlib.ticker import FuncFormatter

    scale, unit = (1e3, "µs") if widest_ms < 1 else (1.0, "ms") if widest_ms < 1e3 else (1e-3, "s")
    return FuncFormatter(lambda value, _: f"{value * scale:g} {unit}" if value else "0")


def _plain_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:g}")


# --- Across GPUs --------------------------------------------------------------------------------


def plot_gpus(
    model_or_result: Any,
    inputs: Any = None,
    gpus: Sequence[str | GPUSpec] = DEFAULT_GPUS,
    precision: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Speed of light and fused estimate of one workload on each of ``gpus``.

    Given a :class:`Result`, its trace is re-priced on each GPU (``Result.on``); given a model,
    it is traced once with ``inputs``. ``precision`` defaults to the Result's own, or "fp32".
    Left: SoL per GPU, coloured by bottleneck. Right: the fused estimate split into time in
    compute-bound kernels, in memory-bound kernels, and launch floors.
    """
    target = _target(path)
    results = _on_each(model_or_result, inputs, gpus, precision)
    fig, (sol_ax, fused_ax) = _new_figure(GPUS_FIGSIZE_IN, ncols=2, sharey=True)
    rows = list(range(len(results)))[::-1]  # first GPU at the top
    sol = [result.sol_ms for result in results]
    sol_ax.barh(
        rows, sol, color=[BOUND_COLOURS[r.bottleneck] for r in results], height=0.6, gid="bars:sol"
    )
    for row, result in zip(rows, results, strict=True):
        sol_ax.annotate(
            f" {human_ms(result.sol_ms)} ({result.bottleneck})",
            (result.sol_ms, row),
            va="center",
            fontsize=8,
        )
    left = [0.0] * len(results)
    for part in ("compute", "memory", "launch"):
        widths = [_fused_part_ms(result, part) for result in results]
        fused_ax.barh(
            rows, widths, left=left, color=BOUND_COLOURS[part], height=0.6, gid=f"bars:fused:{part}"
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for row, total in zip(rows, left, strict=True):
        fused_ax.annotate(f" {human_ms(total)}", (total, row), va="center", fontsize=8)
    sol_ax.set_yticks(rows, [result.gpu.name for result in results])
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    for ax, heading, widest in (
        (sol_ax, "speed of light (bottleneck)", max(sol)),
        (fused_ax, "fused estimate (time by kernel bound, launch floors)", max(left)),
    ):
        ax.set_title(heading, fontsize=10)
        ax.set_xlabel("time")
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(_time_formatter(widest))
        ax.set_xlim(0, widest * 1.45)  # room for the value labels
        ax.grid(True, axis="x", color="0.9", lw=0.6)
    fig.legend(
        handles=[
            Patch(color=BOUND_COLOURS["compute"], label="compute bound"),
            Patch(color=BOUND_COLOURS["memory"], label="memory bound"),
            Patch(color=BOUND_COLOURS["launch"], label="launch floors"),
        ],
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    first = results[0]
    fig.suptitle(
        f"{first.model_name}, {first.precision}: {si(first.flops, 'FLOPs')}, "
        f"{human_bytes(first.compulsory_bytes)} compulsory",
        fontsize=11,
    )
    return _save(fig, target)


def _on_each(
    model_or_result: Any, inputs: Any, gpus: Sequence[str | GPUSpec], precision: str | None
) -> list[Result]:
    from . import api
    from .roofline import Result

    if not gpus:
        raise InputError("plot_gpus needs at least one GPU in gpus=")
    if isinstance(model_or_result, Result):
        return [model_or_result.on(gpu, precision) for gpu in gpus]
    if inputs is None:
        raise InputError("plot_gpus needs inputs= to trace a model (or pass a Result)")
    first = api.analyze(model_or_result, inputs, gpus[0], precision or "fp32")
    return [first, *(first.on(gpu) for gpu in gpus[1:])]


def _fused_part_ms(result: Result, part: str) -> float:
    """Fused-estimate ms in kernels of one bound (their roofline time), or in launch floors."""
    if part == "launch":
        return sum(k.launches * k.launch_s for k in result.kernels) * 1e3
    return sum(max(k.compute_s, k.memory_s) for k in result.kernels if k.bound == part) * 1e3


# --- KernelBench suites -------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemPoint:
    """One problem of a batch report with a bound and a measured time."""

    level: int | None
    file: str
    sol_ms: float
    measured_ms: float

    @property
    def impossible(self) -> bool:
        """Measured faster than the speed of light."""
        return self.measured_ms < self.sol_ms

    @property
    def percent_of_sol(self) -> float:
        return 100 * self.sol_ms / self.measured_ms


def problem_points(report: dict[str, Any]) -> list[ProblemPoint]:
    """Problems with status "ok", a result and a positive measured time."""
    points = []
    for problem in report.get("problems", ()):
        result, measured = problem.get("result"), problem.get("measured_ms")
        if problem.get("status") != "ok" or not result or not measured or measured <= 0:
            continue
        points.append(
            ProblemPoint(problem.get("level"), problem["file"], result["time_ms"]["sol"], measured)
        )
    return points


def plot_suite(
    report: dict[str, Any], out_dir: str | Path, *, per_problem: bool = False
) -> list[Path]:
    """Pictures of a KernelBench batch report in ``out_dir``; returns the paths written (PNG).

    ``suite_scatter.png`` (:func:`plot_suite_scatter`), ``suite_histogram.png``
    (:func:`plot_suite_histogram`) and, with ``per_problem``,
    ``problems/<level>_<file stem>.png``: each problem's roofline from its result dict, with its
    measured time when the report has one.
    """
    _figure_class()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "suite_scatter.png", out_dir / "suite_histogram.png"]
    plot_suite_scatter(report, written[0])
    plot_suite_histogram(report, written[1])
    if per_problem:
        (out_dir / "problems").mkdir(exist_ok=True)
        for problem in report.get("problems", ()):
            if problem.get("result"):
                name = f"{_level_name(problem.get('level'))}_{Path(problem['file']).stem}.png"
                path = out_dir / "problems" / name
                plot_result_dict(_with_measured(problem), path, title=_problem_title(problem))
                written.append(path)
    return written


def _with_measured(problem: dict[str, Any]) -> dict[str, Any]:
    """The problem's result dict, with its measured time as ``actual`` when it has none."""
    data = problem["result"]
    if data.get("actual") is None and problem.get("measured_ms"):
        data = {**data, "actual": {"ms": problem["measured_ms"]}}
    return data


def _problem_title(problem: dict[str, Any]) -> str:
    data = problem["result"]
    return f"{problem['file']} on {data['gpu']}, {data['precision']}"


def _level_name(level: int | None) -> str:
    return "no-level" if level is None else f"level{level}"


def _levels(points: Sequence[ProblemPoint]) -> dict[int | None, str]:
    """Level → colour, levels in order, "no level" last."""
    levels = sorted({p.level for p in points}, key=lambda level: (level is None, level or 0))
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22")
    return {level: palette[i % len(palette)] for i, level in enumerate(levels)}


def _suite_title(report: dict[str, Any], points: Sequence[ProblemPoint], what: str) -> str:
    skipped = len(report.get("problems", ())) - len(points)
    tail = f"; {skipped} failed or unmeasured, not shown" if skipped else ""
    return (
        f"{what} — {len(points)} problems on {report.get('gpu', '?')}, "
        f"{report.get('precision', '?')}{tail}"
    )


def plot_suite_scatter(report: dict[str, Any], path: str | Path | None = None) -> Figure:
    """Measured time against SoL per problem of a batch report, log–log, coloured by level,
    with y = x: points below it are impossible (measured faster than light), ringed in red and
    named. Problems without a result or a measured time are counted in the title."""
    target = _target(path)
    points = problem_points(report)
    fig, ax = _new_figure(SUITE_FIGSIZE_IN)
    ax.set_xscale("log")
    ax.set_yscale("log")
    values = [t for p in points for t in (p.sol_ms, p.measured_ms)] or [1e-3, 1.0]
    lo, hi = min(values) / 3, max(values) * 3
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.fill_between(
        [lo, hi],
        [lo, lo],
        [lo, hi],
        color=IMPOSSIBLE_COLOUR,
        alpha=0.07,
        lw=0,
        label="impossible: measured < SoL",
    )
    ax.plot([lo, hi], [lo, hi], color="k", lw=1.2, gid="sol-line", label="measured = SoL")
    for factor, text in ((10, "10% of SoL"), (100, "1% of SoL")):
        ax.plot([lo, hi], [lo * factor, hi * factor], color="0.6", lw=0.7, ls=":")
        x = lo * 1.5
        if x * factor < hi:
            ax.annotate(
                text,
                (x, x * factor),
                xytext=(2, 2),
                textcoords="offset points",
                fontsize=7,
                color="0.45",
            )
    for level, colour in _levels(points).items():
        chosen = [p for p in points if p.level == level]
        ax.scatter(
            [p.sol_ms for p in chosen],
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
    ax.xaxis.set_major_formatter(_plain_formatter())
    ax.yaxis.set_major_formatter(_plain_formatter())
    ax.grid(True, which="major", color="0.9", lw=0.6)
    ax.set_title(_suite_title(report, points, "measured vs speed of light"), fontsize=10)
    legend = ax.legend(loc="upper left", fontsize=8)
    _freeze_layout(fig, True)
    labeller = _Labeller(ax)
    labeller.block(legend.get_window_extent())
    for p in points:
        labeller.block_marker(p.sol_ms, p.measured_ms, 110 if p.impossible else 28)
    for p in impossible:
        labeller.place(
            p.sol_ms,
            p.measured_ms,
            Path(p.file).stem,
            fontsize=7,
            color=IMPOSSIBLE_COLOUR,
            gid="label:impossible",
        )
    return _save(fig, target)


# % of SoL bins: four per decade from 0.1 % to 100 %; anything faster than light gets its own bar.
_PERCENT_EDGES = tuple(10 ** (e / 4) for e in range(-4, 9))
_IMPOSSIBLE_BIN = (100.0, 10**2.25)


def plot_suite_histogram(report: dict[str, Any], path: str | Path | None = None) -> Figure:
    """How many problems reach each % of SoL (SoL / measured), stacked by level, on log bins;
    impossible ones (>100 %) in their own hatched bar."""
    target = _target(path)
    points = problem_points(report)
    fig, ax = _new_figure(SUITE_FIGSIZE_IN)
    ax.set_xscale("log")
    levels = _levels(points)
    floor = _PERCENT_EDGES[0] * 1.0001
    stacks = [
        [max(p.percent_of_sol, floor) for p in points if p.level == level and not p.impossible]
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
    impossible = sum(p.impossible for p in points)
    width = _IMPOSSIBLE_BIN[1] - _IMPOSSIBLE_BIN[0]
    ax.bar(
        [_IMPOSSIBLE_BIN[0]],
        [impossible],
        width=width,
        align="edge",
        color="white",
        edgecolor=IMPOSSIBLE_COLOUR,
        hatch="///",
        label=f"impossible, >100% ({impossible})",
        gid="bars:impossible",
    )
    # from the bin holding the lowest value (at most 1 %, at least the first edge) to the end
    lowest = min((p.percent_of_sol for p in points), default=100.0)
    ax.set_xlim(
        max([e for e in _PERCENT_EDGES if e <= min(lowest, 1.0)] or [_PERCENT_EDGES[0]]),
        _IMPOSSIBLE_BIN[1],
    )
    ax.xaxis.set_major_formatter(_percent_formatter())
    ax.set_xlabel("% of speed of light (SoL / measured; 100% = at the bound)")
    ax.set_ylabel("problems")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.grid(True, axis="y", color="0.9", lw=0.6)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(_suite_title(report, points, "% of speed of light"), fontsize=10)
    return _save(fig, target)


def _level_label(level: int | None) -> str:
    return "no level" if level is None else f"level {level}"


def _percent_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:g}%")


__all__ = [
    "DEFAULT_GPUS",
    "KernelPoint",
    "ProblemPoint",
    "Roof",
    "kernel_points",
    "plot_gpus",
    "plot_result",
    "plot_result_dict",
    "plot_suite",
    "plot_suite_histogram",
    "plot_suite_scatter",
    "problem_points",
]
