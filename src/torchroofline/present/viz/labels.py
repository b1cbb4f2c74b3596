"""Label placement: a greedy de-overlapping placer that every picture uses for its labels."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# Offsets tried for a label, in points from its anchor: nearest ring first, and within a ring
# up-right first (the roofline's empty side is above the points).
_ANGLES_DEG = (45, 0, 90, 135, -45, 180, -90, -135, 22, 68, 112, 158, -22, -68, -112, -158)
_RADII_PT = (8, 16, 26, 38, 52, 70, 92)
_HA = ("left", "center", "right")
_VA = ("bottom", "center", "top")


@dataclass(frozen=True)
class Spot:
    """Where a label may go: anchored at data point (x, y), offset (dx, dy) points, aligned."""

    x: float
    y: float
    dx: float
    dy: float
    ha: str
    va: str


#: Where a legend may sit (matplotlib's ``loc`` names), in the order tried: the roofline's and
#: the scatters' empty corners first.
LEGEND_LOCATIONS = (
    "upper left", "lower right", "center left", "lower left", "upper center", "center right",
    "lower center", "upper right", "center",
)

_SHIFT = {"left": 0.0, "center": 0.5, "right": 1.0, "bottom": 0.0, "top": 1.0}


class Labeller:
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

    def fits(self, box: Any) -> bool:
        """Whether an artist's window extent lies inside the axes, clear of every box taken."""
        return self._fits((box.x0, box.y0, box.x1, box.y1))

    def place_legend(self, legend: Any, locations: Sequence[str] = LEGEND_LOCATIONS) -> None:
        """Move ``legend`` to the first of ``locations`` that covers the fewest boxes blocked so
        far (markers, ridge points, notes), and keep labels off it."""

        def covered(location: str) -> int:
            legend.set_loc(location)
            box = legend.get_window_extent()
            return sum(_overlap((box.x0, box.y0, box.x1, box.y1), other) for other in self.taken)

        legend.set_loc(min(locations, key=covered))  # min keeps the first of equals
        self.block(legend.get_window_extent())

    def block_marker(self, x: float, y: float, size_pt2: float) -> None:
        cx, cy = self.ax.transData.transform((x, y))
        radius = math.sqrt(size_pt2) / 2 * self.px_per_pt
        self.taken.append((cx - radius, cy - radius, cx + radius, cy + radius))

    def block_segment(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        """A vertical or horizontal line, as a box 4 px wide."""
        (x0, y0), (x1, y1) = self.ax.transData.transform([start, end])
        self.taken.append((min(x0, x1) - 2, min(y0, y1) - 2, max(x0, x1) + 2, max(y0, y1) + 2))

    def block_line(self, start: tuple[float, float], end: tuple[float, float]) -> None:
        """A line at any slope (data coordinates; the memory roof), as a chain of boxes 4 px
        wide, one every 3 px along it: a label box, taller than that, cannot slip between."""
        (x0, y0), (x1, y1) = self.ax.transData.transform([start, end])
        steps = max(1, math.ceil(math.hypot(x1 - x0, y1 - y0) / 3))
        for step in range(steps + 1):
            cx, cy = x0 + (x1 - x0) * step / steps, y0 + (y1 - y0) * step / steps
            self.taken.append((cx - 2, cy - 2, cx + 2, cy + 2))

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
                spots.append(Spot(x, y, dx, dy, ha, va))
        return self.place_first(text, spots, leader_beyond_pt=_RADII_PT[1], **style)

    def place_first(
        self,
        text: str,
        spots: Sequence[Spot],
        *,
        force: bool = False,
        leader_beyond_pt: float = math.inf,
        **style: Any,
    ) -> Any | None:
        """Annotate at the first of ``spots`` that fits; when none does and ``force``, at the
        first whose box stays inside the axes, overlaps allowed (a roof's label at the knee
        ran off the picture's right edge), else the first of all; None when none fits."""
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
            inside = next((spot for spot in spots
                           if self._inside(self._box(spot, width, height))), spots[0])
            fitting = inside, self._box(inside, width, height), False
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

    def _box(self, spot: Spot, width: float, height: float) -> _Box:
        cx, cy = self.ax.transData.transform((spot.x, spot.y))
        x0 = cx + spot.dx * self.px_per_pt - _SHIFT[spot.ha] * width
        y0 = cy + spot.dy * self.px_per_pt - _SHIFT[spot.va] * height
        return (x0 - 2, y0 - 2, x0 + width + 2, y0 + height + 2)

    def _inside(self, box: _Box) -> bool:
        area = self.area
        return area.x0 <= box[0] and area.y0 <= box[1] and box[2] <= area.x1 and box[3] <= area.y1

    def _fits(self, box: _Box) -> bool:
        return self._inside(box) and not any(_overlap(box, other) for other in self.taken)

    def _crosses_text(self, spot: Spot, box: _Box) -> bool:
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
