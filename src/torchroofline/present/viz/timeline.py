"""The timeline of a distributed rank's step (:class:`~torchroofline.price.distributed
.DistributedStep`): its compute and communication streams as the schedule places their
kernels, with the communication the compute stream waits for (exposed) marked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .canvas import IMPOSSIBLE_COLOUR, new_figure, save, save_target, time_formatter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...price.distributed import DistributedStep

TIMELINE_FIGSIZE_IN = (10.0, 2.8)
STREAM_COLOURS = {"compute": "#1f77b4", "comm": "#ff7f0e"}


def exposed_intervals(step: DistributedStep) -> list[tuple[float, float]]:
    """(start, end) in s of each gap in the compute stream: time it waits for communication."""
    gaps, last = [], 0.0
    for interval in step.timeline:
        if interval.stream != "compute":
            continue
        if interval.start_s > last:
            gaps.append((last, interval.start_s))
        last = max(last, interval.end_s)
    if step.step_estimate_s > last:
        gaps.append((last, step.step_estimate_s))
    return gaps


def plot_timeline(step: DistributedStep, path: str | Path | None = None) -> Figure:
    """Two rows, compute and communication, each kernel a bar at its scheduled time; the
    compute stream's waits for communication in red (exposed communication)."""
    target = save_target(path)
    fig, ax = new_figure(TIMELINE_FIGSIZE_IN)
    rows = {"compute": 1, "comm": 0}
    for stream, row in rows.items():
        bars = [(i.start_s * 1e3, (i.end_s - i.start_s) * 1e3)
                for i in step.timeline if i.stream == stream]
        ax.broken_barh(bars, (row - 0.35, 0.7), color=STREAM_COLOURS[stream])
    gaps = [(start * 1e3, (end - start) * 1e3) for start, end in exposed_intervals(step)]
    ax.broken_barh(gaps, (rows["compute"] - 0.35, 0.7), color=IMPOSSIBLE_COLOUR, alpha=0.6)
    ax.set_yticks([rows["comm"], rows["compute"]], ["communication", "compute"])
    ax.xaxis.set_major_formatter(time_formatter(step.step_estimate_s * 1e3))
    layout = step.layout
    ax.set_title(
        f"rank {layout.rank} of {layout.world} on {step.gpu_key}: step "
        f"{step.step_estimate_s * 1e3:.3g} ms estimated, exposed communication "
        f"{step.exposed_comm_s * 1e3:.3g} ms (red)"
    )
    ax.set_xlim(0, max(step.step_estimate_s * 1e3, 1e-9))
    return save(fig, target)
