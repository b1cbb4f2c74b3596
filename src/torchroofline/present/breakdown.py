"""Where a result's figures come from: the per-module roll-up of FLOPs, bytes and time, and the
GPU-table figures marked unconfirmed that the bound rests on. Read by the report; derived from a
:class:`~torchroofline.roofline.Result`, never stored in it."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InputError
from ..price.precision import UNIT_RULES

if TYPE_CHECKING:
    from ..price.roofline import Result

TOP_LEVEL = "<top level>"
"""How the roll-up names ops called outside any submodule (the model's own ``forward``)."""


@dataclass(frozen=True)
class ModuleCost:
    """One module's ops summed (a fact: frozen). FLOPs and bytes are ints; the time is in ms.

    ``bytes`` and ``time_ms`` are eager figures: every op its own kernel, timed by its roofline
    (max of compute and memory time, no launch floor), so they add up across modules, which
    fused kernels that span modules would not.
    """

    path: str
    ops: int
    flops: int
    bytes: int
    time_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "module": self.path,
            "ops": self.ops,
            "flops": self.flops,
            "bytes": self.bytes,
            "time_ms": self.time_ms,
        }


def module_costs(result: Result, depth: int | None = None) -> list[ModuleCost]:
    """The roll-up by module path (``OpRecord.module_path``, the innermost module that ran the
    op), costliest first. Views are free and count as ops only. With ``depth``, paths are cut to
    their first ``depth`` names, so ``depth=2`` sums ``blocks.3.attn.qkv`` and every other
    module of ``blocks.3`` into ``blocks.3``: which layer costs most. A ``depth`` below 1
    keeps no name (``depth=-1`` would cut the last name off each path): InputError."""
    if depth is not None and depth < 1:
        raise InputError(f"module_costs: depth={depth} keeps no module name; pass depth=1 or "
                         "more (the leading names a path keeps), or None for every module")

    def cut(path: str) -> str:
        return ".".join(path.split(".")[:depth]) if path else TOP_LEVEL

    totals: dict[str, list[float]] = {}
    for op in result.ops:
        row = totals.setdefault(cut(op.module_path), [0, 0, 0, 0.0])
        row[0] += 1
        row[1] += op.total_flops
    # eager kernels are named "module: op" (fusion._kernel_name); an op may run as several
    # kernels (batch norm in training), so kernels are summed by their own module
    for kernel in result.eager_kernels:
        path = kernel.name.split(": ", 1)[0] if ": " in kernel.name else ""
        row = totals.setdefault(cut(path), [0, 0, 0, 0.0])
        row[2] += kernel.bytes
        row[3] += max(kernel.compute_s, kernel.memory_s) * 1e3
    costs = [
        ModuleCost(path, int(ops), int(flops), int(nbytes), time_ms)
        for path, (ops, flops, nbytes, time_ms) in totals.items()
    ]
    return sorted(costs, key=lambda cost: (-cost.time_ms, -cost.flops, cost.path))


def unconfirmed_figures(result: Result) -> list[str]:
    """The figures of ``result.gpu.unconfirmed`` the bound rests on: the memory bandwidth, the L2
    size and bandwidth with a warm cache, and the table peak behind each roof."""
    gpu = result.gpu
    warm = {"l2_bytes", "l2_bandwidth_bytes_per_s"} if result.cache == "warm" else set()
    used = {"memory_bandwidth_bytes_per_s"} | warm
    for roof in result.roofs:
        if roof.unit == "tensor":
            keys = _behind(gpu.tensor_peak_flops_per_s, roof.peak_flops_per_s, _TENSOR_SHARES)
        else:  # the vector roof is the precision's own vector figure
            keys = [gpu.vector_key(result.precision)]
        used |= {f"{roof.unit}.{key}" for key in keys}
    return [figure for figure in gpu.unconfirmed if figure in used]


#: A tensor roof is a table peak times a unit rule's throughput (3xTF32 runs at a third of TF32).
_TENSOR_SHARES = tuple({rule.throughput for rule in UNIT_RULES.values()})


def _behind(table: Mapping[str, float], peak: float, shares: Sequence[float]) -> list[str]:
    """Keys of ``table`` whose figure, at one of the ``shares``, is ``peak``."""
    return [
        key
        for key, figure in table.items()
        if any(math.isclose(figure * share, peak) for share in shares)
    ]
