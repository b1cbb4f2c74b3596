"""A sweep (:class:`~torchroofline.suites.sweep.Sweep`) as text: one table per GPU and
precision, the crossovers, and what the sweep cost."""

from __future__ import annotations

from collections.abc import Sequence

from ..suites.sweep import Sweep, SweepPoint
from ..units import human_bytes, human_ms

#: The table's columns: heading → the cell of one point.
_COLUMNS = {
    "SoL": lambda p: human_ms(p.sol_ms),
    "bound": lambda p: "nothing to compute or move" if p.empty else p.bound,
    "eager est.": lambda p: human_ms(p.time_ms["eager_estimate"]),
    "compile est.": lambda p: human_ms(p.time_ms["fused_estimate"]),
    "peak memory": lambda p: human_bytes(p.peak_bytes, ".3g"),
    "fits": lambda p: p.memory_verdict,
}


def format_sweep(sweep: Sweep) -> str:
    """The sweep's tables (a column per figure, a row per value), its crossovers and cost."""
    axes = " × ".join(f"{name} ({len(values)} values)"
                      for name, values in zip(sweep.axes, sweep.values, strict=True))
    lines = [f"torchroofline sweep — {sweep.name} over {axes}", ""]
    for gpu in sweep.gpus:
        for precision in sweep.precisions:
            rows = [p for p in sweep.points if p.gpu == gpu and p.precision == precision]
            lines += [f"{rows[0].gpu_name} · {precision}", *_table(sweep, rows), ""]
    lines.append("Crossovers" if sweep.crossovers else "Crossovers: none in the values swept")
    lines += [f"  {crossover.describe()}" for crossover in sweep.crossovers]
    lines += ["", cost_line(sweep)]
    lines += [f"note: {note}" for note in sweep.notes]
    return "\n".join(lines) + "\n"


def _table(sweep: Sweep, rows: Sequence[SweepPoint]) -> list[str]:
    ranked = len(sweep.gpus) > 1
    header = [*sweep.axes, *_COLUMNS, *(["rank"] if ranked else [])]
    cells = [
        [*(str(v) for v in point.values.values()), *(cell(point) for cell in _COLUMNS.values()),
         *([str(sweep.rank(point) or "—")] if ranked else [])]
        for point in rows
    ]
    widths = [max(len(text) for text in column) for column in zip(header, *cells, strict=True)]
    line = "  ".join
    return [
        line(h.rjust(w) for h, w in zip(header, widths, strict=True)),
        "-" * (sum(widths) + 2 * (len(widths) - 1)),
        *(line(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells),
    ]


def cost_line(sweep: Sweep) -> str:
    """"9 values traced (4 of them by bisection), 36 points priced in 1.2 s"."""
    grid = len({tuple(point.values.items()) for point in sweep.points})
    narrowed = sweep.traces - grid
    extra = f" ({narrowed} more by bisection)" if narrowed > 0 else ""
    return (f"{grid} values traced{extra}, each re-priced on {len(sweep.gpus)} GPU(s) × "
            f"{len(sweep.precisions)} precision(s): {len(sweep.points)} points in "
            f"{sweep.seconds:.2f} s")


__all__ = ["cost_line", "format_sweep"]
