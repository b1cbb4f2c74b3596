"""A distributed rank's block of the text report: its job, the collectives, compute,
communication and exposed communication, the step, and its memory (:mod:`..price.distributed`)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ..units import human_bytes, human_ms

if TYPE_CHECKING:
    from ..price.roofline import Result

#: Collectives listed in the text block, the most estimated time first.
SHOWN_COLLECTIVES = 5


def distributed_lines(result: Result) -> list[str]:
    """The block (empty for a single-GPU analysis)."""
    step = result.distributed
    if step is None:
        return []
    layout = step.layout
    mesh = " x ".join(f"{name}={size}" for name, size in layout.mesh)
    kinds = Counter(p.call.kind for p in step.collectives)
    moved = sum(p.call.size_bytes for p in step.collectives)
    counts = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())) or "none"
    verdict = "fits" if step.fits else "does not fit"
    lines = [
        "",
        f"  Distributed: rank {layout.rank} of {layout.world} (mesh {mesh}, "
        f"{layout.gpus_per_node} GPUs per node)",
        f"    collectives    {len(step.collectives)} ({counts}), {human_bytes(moved)}",
        f"    compute        SoL {_ms(step.compute_sol_s)}, "
        f"estimate {_ms(step.compute_estimate_s)}",
        f"    communication  SoL {_ms(step.comm_sol_s)}, estimate {_ms(step.comm_estimate_s)}, "
        f"exposed {_ms(step.exposed_comm_s)}",
        f"    step           SoL {_ms(step.step_sol_s)}, estimate {_ms(step.step_estimate_s)}",
        f"    memory         {human_bytes(step.peak_memory_bytes)} per rank of "
        f"{human_bytes(step.memory_bytes)}: {verdict} (NCCL workspace not modelled)",
    ]
    slowest = sorted(step.collectives, key=lambda p: p.estimate_s, reverse=True)
    for priced in slowest[:SHOWN_COLLECTIVES]:
        call = priced.call
        lines.append(
            f"      {call.kind:<14} x{call.group_size:<3} {call.span:<10} "
            f"{human_bytes(call.size_bytes):>10}  SoL {_ms(priced.sol_s):>9}  "
            f"est. {_ms(priced.estimate_s):>9}  {call.phase} {call.module_path or '<top level>'}"
        )
    return lines


def _ms(seconds: float) -> str:
    return human_ms(seconds * 1e3)
