"""How far to trust an estimate: a low/high band around each kernel's estimated time, per kernel
family, taken from the model's *held-out* errors on real kernels.

``benchmarks/estimate_cv.py`` prices every op of the profiler traces with the model fitted
without that op's trace (leave one trace out), and collects measured / estimated time per
family. A family's band is the 5th and 95th percentile of that ratio, never narrower than 2×
either way (a family's spread on other traces understates its spread on an unseen one); the
script prints this table and reports how often the band held on held-out data
(docs/validation.md). A family with too few held-out ops takes :data:`DEFAULT_BAND`.

A program's band runs its kernels through the same host/launch pipeline at the low ends and at
the high ends together (errors of one family move together within a program, so the ends are
not narrowed by averaging), with the host's costs at the ends of :data:`HOST_BAND`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """measured / estimated time of a family's kernels: the ends the band spans."""

    low: float  #: the band's low end is the estimate times this
    high: float  #: the band's high end is the estimate times this
    held_out_ops: int = 0  #: held-out op instances of ≥ 3 µs it was taken from (0: assumed)


#: A family without enough held-out data: within 2× either way, the accuracy target.
DEFAULT_BAND = Band(0.5, 2.0)

#: The host's CPU costs on another machine: the host speeds fitted on nine KernelBench setups
#: span 0.44-1.32× the default profile (docs/calibration.md).
HOST_BAND = Band(0.45, 1.35)

#: Family → band, printed by ``python benchmarks/estimate_cv.py <traces folder>`` (held-out
#: ratios measured / estimated, 5th and 95th percentile; families with ≥ 20 held-out ops).
FAMILY_BANDS: dict[str, Band] = {
    "conv": Band(0.5, 2.0, 179),
    "data-movement": Band(0.5, 2.5, 116),
    "flash_attention": Band(0.5, 2.0, 80),
    "gemm": Band(0.5, 2.18, 2321),
    "host_copy": Band(0.5, 2.59, 153),
    "pointwise": Band(0.5, 2.0, 6232),
    "reduction": Band(0.5, 2.03, 1047),
}


def family_band(family: str) -> Band:
    """The band of a kernel family (a category such as ``"pointwise"``, or a matmul family)."""
    return FAMILY_BANDS.get(family, DEFAULT_BAND)
