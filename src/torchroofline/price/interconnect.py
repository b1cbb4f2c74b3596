"""The interconnect of each GPU a distributed job can be priced on: the scale-up link inside a
node (NVLink through NVSwitch, AMD's xGMI mesh), the NICs between nodes, and the bus
bandwidths and latencies NCCL/RCCL reach on them. A table of its own, keyed by the GPU table's
keys (:mod:`.hardware`); every figure's source is in ``docs/gpu_sources.md`` (Interconnect).

Rates are bytes per second in one direction, per GPU: a collective's traffic leaves and enters
each GPU at once, so the one-direction rate is what bounds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .hardware import GPUSpec, get_gpu

_GB = 1e9


@dataclass(frozen=True)
class Interconnect:
    """One GPU's links. ``scale_up_bytes_per_s``: its whole scale-up rate (every NVLink to the
    switches), or where ``mesh_link_bytes_per_s`` is set (xGMI: one link to each peer, no
    switch) the sum of its links; ``in_switch_reduction``: the switch reduces (NVLink SHARP,
    NVLS), so an all-reduce crosses each GPU's link once each way. ``nics`` NICs per GPU of
    ``nic_bytes_per_s`` each lead to other nodes.

    The estimate's figures: the bus bandwidth (nccl-tests' ``busbw``) of ring collectives
    inside a node, the algorithm bandwidth (``algbw``, size ÷ time) of an NVLS all-reduce
    where the switch reduces (each GPU sends and receives the buffer once, whatever the
    group's size), and one NIC's achievable rate;
    the latency of a ring step inside and across nodes and the base latency of a call
    (:mod:`.distributed`)."""

    link: str  #: the scale-up link and its generation, as its vendor names it
    scale_up_bytes_per_s: float
    nics: int
    nic_bytes_per_s: float
    ring_bus_bytes_per_s: float
    nic_achievable_bytes_per_s: float
    in_switch_reduction: bool = False
    nvls_algorithm_bytes_per_s: float | None = None
    mesh_link_bytes_per_s: float | None = None
    base_latency_s: float = 8.4e-6
    link_step_latency_s: float = 3.4e-6
    nic_step_latency_s: float = 6.6e-6
    source: str = ""

    def scale_up_rate(self, ranks_on_node: int) -> float:
        """Bytes/s one GPU can move to the ``ranks_on_node - 1`` other ranks of its group on
        its node: through the switches, all of it; in a mesh, one link per peer."""
        if self.mesh_link_bytes_per_s is None:
            return self.scale_up_bytes_per_s
        return min(self.scale_up_bytes_per_s,
                   (ranks_on_node - 1) * self.mesh_link_bytes_per_s)

    @property
    def nic_rate(self) -> float:
        """One GPU's line rate to other nodes (all its NICs)."""
        return self.nics * self.nic_bytes_per_s


#: NCCL's ring latencies (src/graph/tuning.cc, Ring/Simple): 8.4 µs a call, 3.4 µs an NVLink
#: step, 6.6 µs a network step; RCCL keeps NCCL's model.
_HOPPER = Interconnect(
    link="NVLink 4 (18 links, NVSwitch gen 3)",
    scale_up_bytes_per_s=450 * _GB,  # 900 GB/s both directions
    nics=1,
    nic_bytes_per_s=50 * _GB,  # ConnectX-7, 400 Gb/s InfiniBand NDR
    ring_bus_bytes_per_s=370 * _GB,
    nic_achievable_bytes_per_s=46 * _GB,
    in_switch_reduction=True,
    # nccl-tests: 480 GB/s busbw on 8 GPUs, busbw = algbw × 2·7/8
    nvls_algorithm_bytes_per_s=480 * _GB * 8 / 14,
    source="NVIDIA H100 datasheet, DGX H100 user guide, nccl-tests (NVLS), ConnectX-7",
)

INTERCONNECTS: dict[str, Interconnect] = {
    "h100-sxm": _HOPPER,
    "h200": _HOPPER,
    "b200": Interconnect(
        link="NVLink 5 (18 links, NVSwitch gen 4)",
        scale_up_bytes_per_s=900 * _GB,  # 1.8 TB/s both directions
        nics=1,
        nic_bytes_per_s=50 * _GB,  # ConnectX-7, 400 Gb/s
        ring_bus_bytes_per_s=740 * _GB,  # Hopper's 370 of 450 GB/s, scaled to 900
        nic_achievable_bytes_per_s=46 * _GB,
        in_switch_reduction=True,
        nvls_algorithm_bytes_per_s=960 * _GB * 8 / 14,  # Hopper's, scaled to 900 GB/s
        source="NVIDIA DGX B200 datasheet, ConnectX-7; achievable scaled from Hopper",
    ),
    "a100-80gb": Interconnect(
        link="NVLink 3 (12 links, NVSwitch gen 2)",
        scale_up_bytes_per_s=300 * _GB,  # 600 GB/s both directions
        nics=1,
        nic_bytes_per_s=25 * _GB,  # ConnectX-6, 200 Gb/s InfiniBand HDR
        ring_bus_bytes_per_s=230 * _GB,
        nic_achievable_bytes_per_s=23 * _GB,
        source="NVIDIA A100 datasheet, DGX A100 user guide, nccl-tests",
    ),
    "mi300x": Interconnect(
        link="AMD Infinity Fabric (xGMI, 7 links, full mesh)",
        scale_up_bytes_per_s=7 * 64 * _GB,
        mesh_link_bytes_per_s=64 * _GB,  # 128 GB/s per link both directions
        nics=1,
        nic_bytes_per_s=50 * _GB,  # 400 Gb/s per GPU
        ring_bus_bytes_per_s=7 * 48 * _GB,  # 48 GB/s achievable per link and direction
        nic_achievable_bytes_per_s=46 * _GB,
        source="AMD Instinct MI300X datasheet, AMD MI300X platform guide (xGMI 48 GB/s)",
    ),
}
INTERCONNECTS["a100-40gb"] = INTERCONNECTS["a100-80gb"]


def interconnect_for(gpu: str | GPUSpec) -> Interconnect:
    """The interconnect of ``gpu``; an :class:`InputError` naming the GPUs that have one."""
    spec = get_gpu(gpu)
    found = INTERCONNECTS.get(spec.key)
    if found is None:
        raise InputError(
            f"no interconnect figures for {spec.name} yet; a distributed job is priced on "
            f"{', '.join(sorted(INTERCONNECTS))} (add it to price/interconnect.py)"
        )
    return found
