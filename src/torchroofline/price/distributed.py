"""A distributed step priced on one rank: each collective's bound and estimate from the
interconnect (:mod:`.interconnect`), and the step on two streams, compute and communication.

The bound of a collective of ``size`` bytes (nccl-tests' size, :mod:`..trace.distributed`) on
a group of ``n`` ranks, ``r`` on each of ``m`` nodes, is the larger of

- what one GPU must receive over all its links: ``size`` × its bus factor ÷ (its scale-up rate
  inside the node, plus its NICs where the group leaves the node). The bus factors are
  nccl-tests' (doc/PERFORMANCE.md): all-gather, reduce-scatter and all-to-all (n−1)/n;
  all-reduce 2(n−1)/n, or 1 where a switch can reduce (NVLink SHARP inside a node, SHARP in
  the network across nodes: each GPU sends its data once and receives the sum once);
- what one node must move over its NICs (every NIC of the node: NCCL's PXN routes a GPU's
  traffic through its neighbours' NICs): the node's share of the data leaving it;

with no latency. The estimate adds a latency (NCCL's ring model: a base plus one step latency
per hop) to the bytes moved at the bus bandwidth NCCL reaches, in two levels across nodes: a
phase inside each node over NVLink/xGMI and a phase between nodes over the NICs.

The step's bound is the larger of the rank's compute bound (its :class:`Result`) and the
communication bound (what its links must carry: every collective's GPU bytes over the GPU's
fastest links, the inter-node bytes over the node's NICs); the estimate is a dependency-aware
schedule (:func:`schedule`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..trace.distributed import CollectiveCall, DistributedTrace, Layout
from .interconnect import Interconnect, interconnect_for

if TYPE_CHECKING:
    from .roofline import Result

#: What the per-rank memory leaves out, said wherever it is reported.
NOT_MODELLED = (
    "NCCL/RCCL workspace and channel buffers are not modelled in the peak memory (often "
    "hundreds of MiB per GPU)"
)


@dataclass(frozen=True)
class KindShape:
    """How a collective kind's traffic grows: ``bus_factor(n)`` (nccl-tests' busbw factor: the
    bytes each GPU moves per byte of size on a flat ring), ``reducing`` (a switch can do its
    arithmetic), ``node_factor(m, r)`` (bytes a node must send out or take in per byte of
    size), and the ring steps of its latency (``steps(n)``)."""

    bus_factor: Callable[[int], float]
    node_factor: Callable[[int, int], float]
    steps: Callable[[int], int]
    reducing: bool = False


def _share(n: int) -> float:
    return (n - 1) / n


#: Each kind's traffic. An all-to-all's node sends each of its ``r`` ranks' data to the other
#: nodes; an all-gather's node needs the other nodes' data once (its GPUs share it over NVLink).
KINDS: dict[str, KindShape] = {
    "all_reduce": KindShape(lambda n: 2 * _share(n), lambda m, r: 1.0,
                            lambda n: 2 * (n - 1), reducing=True),
    "all_gather": KindShape(_share, lambda m, r: _share(m), lambda n: n - 1),
    "reduce_scatter": KindShape(_share, lambda m, r: _share(m), lambda n: n - 1,
                                reducing=True),
    "all_to_all": KindShape(_share, lambda m, r: r * _share(m), lambda n: n - 1),
    "broadcast": KindShape(lambda n: 1.0, lambda m, r: 1.0, lambda n: n - 1),
    "send": KindShape(lambda n: 1.0, lambda m, r: 1.0, lambda n: 1),
    "recv": KindShape(lambda n: 1.0, lambda m, r: 1.0, lambda n: 1),
}


def _gpu_factor(call: CollectiveCall, net: Interconnect) -> float:
    """Bytes per byte of size that must enter one GPU, whatever the algorithm: the bus factor,
    or 1 for an all-reduce a switch can reduce (NVLS inside a node, SHARP across nodes)."""
    if call.group_size == 1:
        return 0.0
    if call.kind == "all_reduce" and (net.in_switch_reduction or call.nodes > 1):
        return 1.0
    return KINDS[call.kind].bus_factor(call.group_size)


def _gpu_rate(call: CollectiveCall, net: Interconnect) -> float:
    """One GPU's links the collective can use: scale-up to its node's group ranks, NICs when
    the group leaves the node."""
    rate = net.scale_up_rate(call.ranks_per_node) if call.ranks_per_node > 1 else 0.0
    return rate + (net.nic_rate if call.nodes > 1 else 0.0)


def gpu_bytes(call: CollectiveCall, net: Interconnect) -> float:
    """Bytes that must enter one GPU of the group (:func:`_gpu_factor` × size)."""
    return _gpu_factor(call, net) * call.size_bytes


def node_bytes(call: CollectiveCall) -> float:
    """Bytes one node must move over its NICs (0 inside a node)."""
    if call.nodes == 1:
        return 0.0
    return KINDS[call.kind].node_factor(call.nodes, call.ranks_per_node) * call.size_bytes


def collective_sol_s(call: CollectiveCall, net: Interconnect, gpus_per_node: int) -> float:
    """The collective's bound (s): the larger of its GPU bytes over the GPU's links and its
    node bytes over every NIC of the node; zero latency."""
    if call.group_size == 1:
        return 0.0
    gpu_s = gpu_bytes(call, net) / _gpu_rate(call, net)
    node_s = node_bytes(call) / (gpus_per_node * net.nic_rate)
    return max(gpu_s, node_s)


def collective_estimate_s(call: CollectiveCall, net: Interconnect) -> float:
    """The collective's estimate (s): NCCL's ring latency plus a phase inside the node at the
    bus bandwidth NCCL reaches there (an NVLS all-reduce at its algorithm bandwidth) and a
    phase between nodes of the node's share per GPU at its NICs' achievable rate."""
    if call.group_size == 1:
        return 0.0
    shape, r, m = KINDS[call.kind], call.ranks_per_node, call.nodes
    intra_s = 0.0
    if r > 1 and call.kind == "all_reduce" and net.nvls_algorithm_bytes_per_s is not None:
        intra_s = call.size_bytes / net.nvls_algorithm_bytes_per_s
    elif r > 1:
        bus = net.ring_bus_bytes_per_s * net.scale_up_rate(r) / net.scale_up_bytes_per_s
        intra_s = shape.bus_factor(r) * call.size_bytes / bus  # a mesh: fewer links
    inter_s = 0.0
    if m > 1:
        per_gpu = _inter_bytes_per_gpu(call)
        inter_s = per_gpu / (net.nics * net.nic_achievable_bytes_per_s)
    latency = (net.base_latency_s + shape.steps(r) * net.link_step_latency_s
               + (shape.steps(m) * net.nic_step_latency_s if m > 1 else 0.0))
    return latency + intra_s + inter_s


def _inter_bytes_per_gpu(call: CollectiveCall) -> float:
    """Bytes one GPU sends between nodes in a two-level algorithm: the node's share split over
    its ``r`` GPUs (an all-reduce: a ring all-reduce of size/r among the nodes)."""
    m, r = call.nodes, call.ranks_per_node
    if call.kind == "all_reduce":
        return 2 * _share(m) * call.size_bytes / r
    return node_bytes(call) / r


@dataclass(frozen=True)
class PricedCollective:
    """A collective with its bound and estimate (s)."""

    call: CollectiveCall
    sol_s: float
    estimate_s: float

    def to_dict(self) -> dict[str, Any]:
        call = self.call
        return {
            "op": call.kind, "aten": call.op, "group_size": call.group_size, "span": call.span,
            "nodes": call.nodes, "bytes": call.size_bytes, "dtype": call.dtype,
            "phase": call.phase, "module": call.module_path,
            "sol_us": self.sol_s * 1e6, "estimate_us": self.estimate_s * 1e6,
        }


@dataclass(frozen=True)
class Interval:
    """One kernel on one stream of the schedule (s from the step's start)."""

    stream: str  #: "compute" or "comm"
    start_s: float
    end_s: float
    name: str


@dataclass(frozen=True)
class DistributedStep:
    """One rank's step: its layout, collectives, the communication and step bounds and
    estimates (s), exposed communication, peak memory and the two streams' schedule."""

    layout: Layout
    gpu_key: str
    collectives: tuple[PricedCollective, ...]
    compute_sol_s: float
    comm_sol_s: float
    compute_estimate_s: float
    comm_estimate_s: float
    step_estimate_s: float
    peak_memory_bytes: int
    memory_bytes: int
    timeline: tuple[Interval, ...]
    notes: tuple[str, ...] = ()

    @property
    def step_sol_s(self) -> float:
        """No step beats its compute bound, nor what its links must carry."""
        return max(self.compute_sol_s, self.comm_sol_s)

    @property
    def exposed_comm_s(self) -> float:
        """The schedule's time the compute stream waits for communication."""
        return max(self.step_estimate_s - self.compute_estimate_s, 0.0)

    @property
    def fits(self) -> bool:
        return self.peak_memory_bytes <= self.memory_bytes

    def to_dict(self) -> dict[str, Any]:
        layout = self.layout
        return {
            "world": layout.world, "mesh": dict(layout.mesh), "rank": layout.rank,
            "gpus_per_node": layout.gpus_per_node,
            "collectives": [priced.to_dict() for priced in self.collectives],
            "compute_sol_ms": self.compute_sol_s * 1e3,
            "compute_estimate_ms": self.compute_estimate_s * 1e3,
            "comm_sol_ms": self.comm_sol_s * 1e3,
            "comm_estimate_ms": self.comm_estimate_s * 1e3,
            "exposed_comm_ms": self.exposed_comm_s * 1e3,
            "step_sol_ms": self.step_sol_s * 1e3,
            "step_estimate_ms": self.step_estimate_s * 1e3,
            "peak_memory_bytes": self.peak_memory_bytes,
            "fits": self.fits,
            "notes": list(self.notes),
        }


def comm_sol_s(priced: Sequence[PricedCollective], net: Interconnect | None, layout: Layout
               ) -> float:
    """What the rank's links must carry over the whole step: every collective's GPU bytes over
    the GPU's fastest links, the node's inter-node bytes over every NIC of the node, and no
    less than the slowest collective alone."""
    if not priced:
        return 0.0
    spans_nodes = any(p.call.nodes > 1 for p in priced)
    fastest = net.scale_up_bytes_per_s + (net.nic_rate if spans_nodes else 0.0)
    gpu_s = sum(gpu_bytes(p.call, net) for p in priced) / fastest
    node_s = sum(node_bytes(p.call) for p in priced) / (layout.gpus_per_node * net.nic_rate)
    return max(gpu_s, node_s, max(p.sol_s for p in priced))


@dataclass(frozen=True)
class StepKernel:
    """One kernel of the rank's plan for :func:`schedule`: its GPU time (s), the value ids it
    reads and writes, and its collective (None: a compute kernel)."""

    name: str
    gpu_s: float
    reads: frozenset[int]
    writes: frozenset[int]
    collective: PricedCollective | None = None
    #: no kernel (a view, a wait): its outputs are ready when its inputs are, on no stream
    passes: bool = False


def schedule(kernels: Sequence[StepKernel]) -> tuple[Interval, ...]:
    """The kernels on their streams in program order, each starting when its stream is free
    and every value it reads is written: a collective's first reader waits for it (its sync
    point; a c10d collective has no wait op). Compute kernels share one stream; each process
    group's collectives have their own, as NCCL runs each communicator on its own stream
    (concurrent collectives are assumed not to slow each other). An all-gather also waits
    until the previous one's output is in use: FSDP2 holds at most two all-gathered groups
    (its rate limiter), so it prefetches one block ahead. Communication behind compute is
    hidden; the rest is exposed."""
    ready: dict[int, float] = {}
    free: dict[Any, float] = {}  # stream → when it is free: compute, one per process group
    gathers: dict[int, int] = {}  # value id an all-gather wrote → the all-gather's number
    consumed: dict[int, float] = {}  # all-gather number → when its output was first read
    issued = 0
    intervals = []
    for kernel in kernels:
        inputs_ready = max((ready.get(value, 0.0) for value in kernel.reads), default=0.0)
        if kernel.passes:
            ready.update(dict.fromkeys(kernel.writes, inputs_ready))
            continue
        stream = "compute" if kernel.collective is None else "comm"
        lane = stream if kernel.collective is None else kernel.collective.call.group_ranks
        start = max(free.get(lane, 0.0), inputs_ready)
        if kernel.collective is not None and kernel.collective.call.kind == "all_gather":
            start = max(start, consumed.get(issued - 1, 0.0))
            gathers.update(dict.fromkeys(kernel.writes, issued))
            issued += 1
        for value in kernel.reads:
            if value in gathers:
                consumed.setdefault(gathers[value], start)
        end = start + kernel.gpu_s
        free[lane] = end
        ready.update(dict.fromkeys(kernel.writes, end))
        intervals.append(Interval(stream, start, end, kernel.name))
    return tuple(intervals)


def price_step(result: Result, job: DistributedTrace) -> DistributedStep:
    """``job``'s rank priced as ``result`` (its trace's single-GPU analysis) prices its work:
    the collectives on ``result.gpu``'s interconnect, the step on the eager plan's kernels."""
    layout = job.layout
    calls = [call.at_precision(result.float_bytes) for call in job.collectives]
    net = interconnect_for(result.gpu) if calls else None  # one GPU needs no interconnect
    priced = {
        call.index: PricedCollective(call, collective_sol_s(call, net, layout.gpus_per_node),
                                     collective_estimate_s(call, net))
        for call in calls
    }
    kernels = _program_order(result, priced)
    timeline = schedule(kernels)
    compute = [k for k in kernels if k.collective is None]
    collectives = tuple(priced[index] for index in sorted(priced))
    return DistributedStep(
        layout=layout,
        gpu_key=result.gpu.key,
        collectives=collectives,
        compute_sol_s=result.sol_s,
        comm_sol_s=comm_sol_s(collectives, net, layout),
        compute_estimate_s=sum(k.gpu_s for k in compute),
        comm_estimate_s=sum(p.estimate_s for p in collectives),
        step_estimate_s=max((i.end_s for i in timeline), default=0.0),
        peak_memory_bytes=result.memory.peak_bytes,
        memory_bytes=result.gpu.memory_bytes,
        timeline=timeline,
        notes=(NOT_MODELLED,),
    )


def _program_order(result: Result, priced: dict[int, PricedCollective]) -> list[StepKernel]:
    """The eager plan's kernels in program order (each at its first op), with the ops no
    kernel runs (views, waits) between them as pass-through steps."""
    plan = result.plans.eager
    first: dict[int, StepKernel] = {}
    in_kernels: set[int] = set()
    for kernel, gpu_s in zip(plan.kernels, result.performance.eager.kernel_gpu_s, strict=True):
        first[min(op.index for op in kernel.ops)] = _step_kernel(kernel, gpu_s, priced)
        in_kernels.update(op.index for op in kernel.ops)
    order = []
    for op in result.ops:
        if op.index in first:
            order.append(first[op.index])
        elif op.index not in in_kernels:
            order.append(StepKernel(op.name, 0.0, frozenset(r.value_id for r in op.reads),
                                    frozenset(w.value_id for w in op.writes), passes=True))
    return order


def _step_kernel(kernel: Any, gpu_s: float, priced: dict[int, PricedCollective]) -> StepKernel:
    """A kernel of the plan for :func:`schedule`; what it reads from its ops (a kernel's own
    boundary leaves out values a pass-through op only renamed)."""
    collective = next((priced[op.index] for op in kernel.ops if op.index in priced), None)
    writes = frozenset(ref.value_id for op in kernel.ops for ref in op.writes)
    return StepKernel(
        name=kernel.name,
        gpu_s=gpu_s if collective is None else collective.estimate_s,
        reads=frozenset(ref.value_id for op in kernel.ops for ref in op.reads) - writes,
        writes=writes,
        collective=collective,
    )
