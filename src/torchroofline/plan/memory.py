"""Stage 3c: peak memory — the live bytes of the eager run, op by op, as the CUDA caching
allocator would hold them.

Every storage the program touches is one allocation. The storages that exist before the first
op (parameters, buffers, the forward arguments) and the ones the program keeps (its outputs)
live from start to end; every other storage is allocated by the op that first writes it and
freed right after the last op that reads or writes it — when eager PyTorch drops the last
reference at the earliest (a Python variable that holds a tensor longer keeps it longer). The
allocations are replayed through a model of PyTorch's caching allocator
(``c10/cuda/CUDACachingAllocator.cpp``, default settings, one stream): requests rounded up to
512-byte blocks, small (≤ 1 MiB) requests carved from 2 MiB segments, 1–10 MiB requests from
20 MiB segments, larger ones from segments rounded up to 2 MiB, best-fit reuse of freed blocks
with splitting and coalescing. ``peak_bytes`` is what ``torch.cuda.max_memory_allocated``
would read, ``reserved_bytes`` the segments ``torch.cuda.max_memory_reserved`` would.

Sizes follow the precision the plans are priced at, as the bytes of the plans do
(:func:`torchroofline.costs.tensor_bytes`): an fp32 model analysed at ``bf16`` holds 2-byte
floats. Nothing here depends on the GPU; :meth:`MemoryTimeline.fit` sets the peak against a
GPU's memory.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..costs import tensor_bytes
from ..errors import InputError
from ..trace.refs import TensorRef, Trace, TracedOp

if TYPE_CHECKING:  # a fit compares with a GPU's memory; the spec is priced later
    from ..price.gpu_spec import GPUSpec

MiB = 2**20
#: c10/cuda/CUDACachingAllocator.cpp constants (default allocator settings)
MIN_BLOCK_BYTES = 512  #: kMinBlockSize: every request is rounded up to a multiple of this
SMALL_REQUEST_BYTES = 1 * MiB  #: kSmallSize: requests up to this come from the small pool
SMALL_SEGMENT_BYTES = 2 * MiB  #: kSmallBuffer: the segment a small request opens
LARGE_SEGMENT_BYTES = 20 * MiB  #: kLargeBuffer: the segment a 1–10 MiB request opens
MIN_LARGE_ALLOC_BYTES = 10 * MiB  #: kMinLargeAlloc: from here a request gets its own segment
ROUND_LARGE_BYTES = 2 * MiB  #: kRoundLarge: such a segment is rounded up to this

#: What a live storage is, in the order the breakdown lists them.
KINDS = (
    "parameters", "buffers", "gradients", "optimizer_states", "inputs", "outputs",
    "activations", "temporaries", "other",
)


def block_bytes(request_bytes: int) -> int:
    """The block a request of ``request_bytes`` occupies (``round_size``): a multiple of 512,
    and none for an empty tensor (the allocator hands out no block for 0 bytes)."""
    return -(-request_bytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def segment_bytes(block: int) -> int:
    """The segment ``cudaMalloc`` is asked for when no cached block fits ``block`` bytes
    (``get_allocation_size``)."""
    if block <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if block < MIN_LARGE_ALLOC_BYTES:
        return LARGE_SEGMENT_BYTES
    return -(-block // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


def _splits(remaining: int, small_pool: bool) -> bool:
    """``should_split``: a small block keeps a remainder of one 512-byte block or more; a
    large block only a remainder above 1 MiB (a smaller one stays part of the allocation)."""
    return remaining >= MIN_BLOCK_BYTES if small_pool else remaining > SMALL_REQUEST_BYTES


class _Block:
    __slots__ = ("address", "size", "small", "free", "previous", "next")

    def __init__(self, address: int, size: int, small: bool) -> None:
        self.address = address
        self.size = size
        self.small = small
        self.free = True
        self.previous: _Block | None = None
        self.next: _Block | None = None


class CachingAllocator:
    """A replay of the caching allocator's block pools on sizes only (one stream, default
    configuration, nothing ever released to the driver). ``allocated_bytes`` counts whole
    blocks, as the allocator's own statistics do; ``reserved_bytes`` the segments."""

    def __init__(self) -> None:
        #: per pool (small?), the free blocks as (size, address), smallest first: best fit is
        #: the first entry not smaller than the request, the lowest address among equals
        self._free: dict[bool, list[tuple[int, int]]] = {True: [], False: []}
        self._by_address: dict[int, _Block] = {}
        self._next_segment = 0
        self.allocated_bytes = 0
        self.reserved_bytes = 0

    def malloc(self, request_bytes: int) -> _Block:
        size = block_bytes(request_bytes)
        small = size <= SMALL_REQUEST_BYTES
        pool = self._free[small]
        position = bisect_left(pool, (size, -1))
        if position < len(pool):
            block = self._by_address[pool.pop(position)[1]]
        else:
            block = _Block(self._next_segment, segment_bytes(size), small)
            self._next_segment += block.size
            self.reserved_bytes += block.size
        if _splits(block.size - size, small):
            rest = _Block(block.address + size, block.size - size, small)
            rest.previous, rest.next = block, block.next
            if block.next is not None:
                block.next.previous = rest
            block.next, block.size = rest, size
            self._release(rest)
        block.free = False
        self._by_address[block.address] = block
        self.allocated_bytes += block.size
        return block

    def free(self, block: _Block) -> None:
        self.allocated_bytes -= block.size
        for neighbour in (block.previous, block.next):
            if neighbour is not None and neighbour.free:
                self._free[block.small].remove((neighbour.size, neighbour.address))
                self._merge(block, neighbour)
        self._release(block)

    def _merge(self, block: _Block, neighbour: _Block) -> None:
        """Coalesce a free neighbour (same segment) into ``block``."""
        if neighbour is block.previous:
            del self._by_address[block.address]
            block.address, block.previous = neighbour.address, neighbour.previous
            if neighbour.previous is not None:
                neighbour.previous.next = block
        else:
            del self._by_address[neighbour.address]
            block.next = neighbour.next
            if neighbour.next is not None:
                neighbour.next.previous = block
        block.size += neighbour.size
        self._by_address[block.address] = block

    def _release(self, block: _Block) -> None:
        block.free = True
        self._by_address[block.address] = block
        insort(self._free[block.small], (block.size, block.address))


@dataclass(frozen=True)
class Allocation:
    """One storage's life in the timeline. ``first_op``/``last_op`` are op positions; -1 and
    ``len(ops)``: it exists before the first op, it is kept after the last."""

    storage_id: int
    request_bytes: int  #: the storage's bytes at the analysed precision (before rounding)
    kind: str  #: one of :data:`KINDS`
    module_path: str  #: the module whose op made it ("" for storages made before the trace)
    first_op: int
    last_op: int


@dataclass(frozen=True)
class MemoryFit:
    """The peak set against one GPU's memory."""

    gpu_name: str
    capacity_bytes: int
    peak_bytes: int
    reserved_bytes: int

    @property
    def verdict(self) -> str:
        """``fits`` (even the reserved segments fit), ``tight`` (the blocks fit, the cached
        segments do not: it runs only if the allocator frees its cache and retries, as it does
        before raising out-of-memory) or ``does not fit``."""
        if self.peak_bytes > self.capacity_bytes:
            return "does not fit"
        return "fits" if self.reserved_bytes <= self.capacity_bytes else "tight"

    @property
    def fits(self) -> bool:
        return self.verdict != "does not fit"


@dataclass(frozen=True)
class MemoryTimeline:
    """Live bytes over the eager execution order, and the peak (bytes are allocator blocks)."""

    allocations: tuple[Allocation, ...]
    #: allocated bytes while each op runs (its inputs and outputs both live), in op order
    live_bytes: tuple[int, ...]
    peak_bytes: int  #: the most bytes allocated at once (``max_memory_allocated``)
    #: the most bytes requested at once, each request rounded up to 512 bytes only (what
    #: MemTracker counts for CUDA tensors): below ``peak_bytes`` by the ≤ 1 MiB remainders
    #: large blocks keep unsplit
    requested_peak_bytes: int
    reserved_bytes: int  #: the segments the allocator holds at the end (``max_memory_reserved``)
    peak_op: int  #: the op running at the peak (-1: before the first op)
    peak_op_name: str
    peak_module: str
    peak_phase: str
    #: kind → bytes live at the peak, in :data:`KINDS` order, kinds with bytes only
    peak_breakdown: Mapping[str, int]
    #: module → bytes of the activations it made that are live at the peak, largest first
    peak_activations_by_module: Mapping[str, int]
    #: phase (TracedOp.phase) → the most bytes allocated while one of its ops runs
    peak_bytes_by_phase: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def fit(self, gpu: GPUSpec) -> MemoryFit:
        """The peak set against ``gpu``'s memory (a ``GPUSpec``: ``torchroofline.get_gpu``
        makes one of a name, a later stage than this one)."""
        if not hasattr(gpu, "memory_bytes"):
            raise InputError(f"memory.fit takes a GPUSpec, got {gpu!r}; pass "
                             f"torchroofline.get_gpu({gpu!r})" if isinstance(gpu, str) else
                             f"memory.fit takes a GPUSpec, got {type(gpu).__name__}; pass "
                             "torchroofline.get_gpu(name)")
        return MemoryFit(gpu.name, gpu.memory_bytes, self.peak_bytes, self.reserved_bytes)

    def to_dict(self, gpu: GPUSpec) -> dict[str, object]:
        fit = self.fit(gpu)
        return {
            "peak_bytes": self.peak_bytes,
            "requested_peak_bytes": self.requested_peak_bytes,
            "reserved_bytes": self.reserved_bytes,
            "breakdown": dict(self.peak_breakdown),
            "peak_phase": self.peak_phase,
            "peak_op": self.peak_op_name,
            "peak_module": self.peak_module,
            "activation_bytes_by_module": dict(self.peak_activations_by_module),
            "peak_bytes_by_phase": dict(self.peak_bytes_by_phase),
            "gpu_memory_bytes": fit.capacity_bytes,
            "fits": fit.fits,
            "verdict": fit.verdict,
        }


def storage_bytes(ref: TensorRef, float_bytes: int) -> int:
    """Bytes of the whole storage behind ``ref`` at a float element size of ``float_bytes``."""
    whole = dataclasses.replace(ref, elements=max(ref.storage_elements, ref.elements))
    return tensor_bytes(whole, float_bytes)


def _step_roles(trace: Trace) -> dict[int, str]:
    """storage → kind of a training step's parameters, gradients and optimizer states."""
    if trace.step is None:
        return {}
    return {
        ref.storage_id: kind
        for kind, refs in (
            ("parameters", trace.step.parameters),
            ("gradients", trace.step.gradients),
            ("optimizer_states", trace.step.optimizer_states),
        )
        for ref in refs
    }


def allocations(trace: Trace, float_bytes: int) -> tuple[Allocation, ...]:
    """Every storage of ``trace`` with its size, kind and life: module tensors and inputs
    first, then in the order the ops make them.

    Kinds: what :attr:`Trace.resident` says (parameters, buffers, inputs) and, in a training
    step, what :attr:`Trace.step` says (gradients, optimizer states); the rest by who made
    them: ``outputs`` (kept), ``activations`` (made in the forward; in a training step the
    ones backward still reads are the saved activations), ``temporaries`` (made or first used
    in backward or the optimizer's step: backward's seed too), ``other`` (read in the forward
    before any op wrote it: a constant made outside the ops)."""
    end = len(trace.ops)
    first: dict[int, tuple[int, TensorRef, TracedOp]] = {}
    made: set[int] = set()
    last: dict[int, int] = {}
    for position, op in enumerate(trace.ops):
        read = {ref.storage_id for ref in op.reads}
        for ref in (*op.reads, *op.writes):
            if ref.storage_id not in first:
                first[ref.storage_id] = (position, ref, op)
                if ref.storage_id not in read:
                    made.add(ref.storage_id)
            last[ref.storage_id] = position
    roles = _step_roles(trace)
    kept = {ref.storage_id for ref in trace.output_refs} | set(roles)
    lives = [
        Allocation(ref.storage_id, storage_bytes(ref, float_bytes),
                   roles.get(ref.storage_id, kind), "", -1, end)
        for kind, ref in trace.resident
    ]
    resident = {ref.storage_id for _, ref in trace.resident}
    for storage_id, (position, ref, op) in first.items():
        if storage_id in resident:
            continue
        kind = roles.get(storage_id) or _made_kind(storage_id in made, storage_id in kept, op)
        if kind == "optimizer_states":  # alive across steps: before this one starts
            position = -1
        until = end if storage_id in kept else last[storage_id]
        lives.append(Allocation(
            storage_id, storage_bytes(ref, float_bytes), kind, op.module_path, position, until,
        ))
    return tuple(lives)


def _made_kind(made: bool, kept: bool, op: TracedOp) -> str:
    """The kind of a storage with no role, from the op that first touched it: one no op made
    is a constant in the forward and a given value after it (backward's seed)."""
    if op.phase != "forward":
        return "temporaries"
    if not made:
        return "other"
    return "outputs" if kept else "activations"


@dataclass(frozen=True)
class Replay:
    """What one pass of allocations through the caching allocator found (bytes are blocks)."""

    live_bytes: tuple[int, ...]  #: allocated while each op runs
    peak_op: int
    peak_bytes: int
    requested_peak_bytes: int
    reserved_bytes: int
    peak_by_kind: Mapping[str, int]
    peak_activations_by_module: Mapping[str, int]


def replay(lives: Sequence[Allocation], op_count: int) -> Replay:
    """Replay ``lives`` through the caching allocator, op by op: an op's new storages are
    allocated before it runs, the storages it used for the last time are freed after it."""
    made_at: dict[int, list[Allocation]] = {}
    freed_after: dict[int, list[Allocation]] = {}
    for life in lives:
        made_at.setdefault(life.first_op, []).append(life)
        freed_after.setdefault(life.last_op, []).append(life)
    allocator = CachingAllocator()
    blocks: dict[int, _Block] = {}
    live_by_kind = dict.fromkeys(KINDS, 0)
    live_activations: dict[str, int] = {}
    peak = (-1, 0, dict(live_by_kind), dict(live_activations))
    live_bytes = []
    requested = requested_peak = 0
    for position in range(-1, op_count):
        for life in made_at.get(position, ()):
            if not life.request_bytes:
                continue
            block = blocks[life.storage_id] = allocator.malloc(life.request_bytes)
            _count(live_by_kind, live_activations, life, block.size)
            requested += block_bytes(life.request_bytes)
        requested_peak = max(requested_peak, requested)
        if position >= 0:
            live_bytes.append(allocator.allocated_bytes)
        if allocator.allocated_bytes > peak[1]:
            peak = (position, allocator.allocated_bytes, dict(live_by_kind),
                    dict(live_activations))
        for life in freed_after.get(position, ()):
            block = blocks.pop(life.storage_id, None)
            if block is None:  # an empty tensor: it had no block
                continue
            _count(live_by_kind, live_activations, life, -block.size)
            requested -= block_bytes(life.request_bytes)
            allocator.free(block)
    peak_op, peak_bytes, by_kind, by_module = peak
    return Replay(
        live_bytes=tuple(live_bytes),
        peak_op=peak_op,
        peak_bytes=peak_bytes,
        requested_peak_bytes=requested_peak,
        reserved_bytes=allocator.reserved_bytes,
        peak_by_kind={kind: size for kind, size in by_kind.items() if size},
        peak_activations_by_module=dict(
            sorted(((m, b) for m, b in by_module.items() if b), key=lambda item: -item[1])
        ),
    )


def memory_timeline(trace: Trace, float_bytes: int) -> MemoryTimeline:
    """The live bytes of ``trace``'s eager run at a float element size of ``float_bytes``
    (:func:`allocations` replayed by :func:`replay`) and where the peak falls."""
    lives = allocations(trace, float_bytes)
    run = replay(lives, len(trace.ops))
    op = trace.ops[run.peak_op] if run.peak_op >= 0 else None
    by_phase: dict[str, int] = {}
    for traced, live in zip(trace.ops, run.live_bytes, strict=True):
        by_phase[traced.phase] = max(by_phase.get(traced.phase, 0), live)
    return MemoryTimeline(
        allocations=lives,
        live_bytes=run.live_bytes,
        peak_bytes=run.peak_bytes,
        requested_peak_bytes=run.requested_peak_bytes,
        reserved_bytes=run.reserved_bytes,
        peak_op=run.peak_op,
        peak_op_name=op.name if op else "before the first op",
        peak_module=op.module_path if op else "",
        peak_phase=op.phase if op else "forward",
        peak_breakdown=run.peak_by_kind,
        peak_activations_by_module=run.peak_activations_by_module,
        peak_bytes_by_phase=by_phase,
    )


def batch_scaled(
    first: Sequence[Allocation], second: Sequence[Allocation], first_batch: int,
    second_batch: int,
) -> Callable[[int], tuple[Allocation, ...]] | None:
    """The allocations at any batch from those traced at two batches, each storage's bytes
    on the line through its two sizes; None unless the two runs pair up storage by storage
    (the same kinds made and freed at the same ops) and every size grows by whole bytes per
    sample (then the batch changed no op, only sizes)."""
    if len(first) != len(second):
        return None
    growth = []
    for before, after in zip(first, second, strict=True):
        if (before.kind, before.first_op, before.last_op) != (
            after.kind, after.first_op, after.last_op
        ):
            return None
        per_sample, rest = divmod(after.request_bytes - before.request_bytes,
                                  second_batch - first_batch)
        if rest or per_sample < 0:
            return None
        growth.append(per_sample)

    def at(batch: int) -> tuple[Allocation, ...]:
        return tuple(
            dataclasses.replace(life, request_bytes=life.request_bytes + g * (batch - first_batch))
            for life, g in zip(first, growth, strict=True)
        )

    return at


def _count(by_kind: dict[str, int], activations: dict[str, int], life: Allocation,
           size: int) -> None:
    by_kind[life.kind] += size
    if life.kind == "activations":
        activations[life.module_path] = activations.get(life.module_path, 0) + size


@dataclass(frozen=True)
class BatchFit:
    """The largest batch whose eager peak fits a GPU's memory, and every batch tried to find
    it (``peaks``: batch → peak bytes, traced or re-priced)."""

    gpu_name: str
    capacity_bytes: int
    batch: int  #: the largest batch found to fit (0: not even batch 1)
    peaks: Mapping[int, int]
    #: True when the next batch up was tried and does not fit (the answer is exact); False
    #: when the search stopped at its trace budget or at ``limit``
    exact: bool
    #: the batches traced; the others in :attr:`peaks` were re-priced from traced sizes
    traced: tuple[int, ...] = ()

    @property
    def peak_bytes(self) -> int:
        """The peak at :attr:`batch` (0 when nothing fits)."""
        return self.peaks.get(self.batch, 0)

    def to_dict(self) -> dict[str, object]:
        return {
            "batch": self.batch,
            "peak_bytes": self.peak_bytes,
            "gpu_memory_bytes": self.capacity_bytes,
            "exact": self.exact,
            "peaks": {str(batch): peak for batch, peak in sorted(self.peaks.items())},
            "traced": list(self.traced),
        }


def largest_batch(
    peak_at: Callable[[int], int],
    capacity_bytes: int,
    start: int,
    *,
    limit: int = 2**24,
    traces: int = 12,
) -> tuple[int, dict[int, int], bool]:
    """The largest batch ``b`` ≤ ``limit`` with ``peak_at(b) <= capacity_bytes``, the peaks of
    the batches tried and whether the answer is exact (``b + 1`` tried and too large, or
    ``b == limit``); at most ``traces`` calls of ``peak_at``.

    The peak grows about linearly with the batch (the activations scale, the parameters do
    not), so each guess is where the line through two traced batches reaches the capacity:
    the two that bracket the answer, or the last two before one is too large. When the same
    end of the bracket moves twice in a row (a bent curve), the next guess halves it."""
    peaks: dict[int, int] = {}
    moved: list[bool] = []  #: per guess inside a bracket: did it fit?

    def fits(batch: int) -> bool:
        peaks[batch] = peak_at(batch)
        return peaks[batch] <= capacity_bytes

    below, above = (start, None) if fits(start) else (0, start)
    while len(peaks) < traces and (above is None or above - below > 1) and below < limit:
        guess = _next_guess(peaks, capacity_bytes, below, above, limit)
        if above is not None and below and len(moved) >= 2 and moved[-1] == moved[-2]:
            guess = (below + above) // 2
        if guess in peaks:
            break
        fitted = fits(guess)
        if above is not None:
            moved.append(fitted)
        below, above = (guess, above) if fitted else (below, guess)
    exact = (above is not None and above == below + 1) or below == limit
    return below, peaks, exact


def _next_guess(peaks: Mapping[int, int], capacity_bytes: int, below: int, above: int | None,
                limit: int) -> int:
    """The batch where the line through two traced peaks reaches ``capacity_bytes``, inside
    the bracket (``below`` fits, ``above`` does not; None: nothing too large traced yet)."""
    if above is not None and not below:  # nothing fits yet: halve down to batch 1
        return max(above // 2, 1)
    known = sorted(peaks)
    if len(known) < 2:  # one batch traced, and it fits: twice the batch gives a slope
        return min(2 * below, limit)
    first, second = (below, above) if above is not None else (known[-2], known[-1])
    slope = (peaks[second] - peaks[first]) / (second - first)
    line = first + int((capacity_bytes - peaks[first]) // slope) if slope > 0 else 2 * below
    upper = limit if above is None else above - 1
    return min(max(line, below + 1), upper)


__all__ = [
    "KINDS", "Allocation", "BatchFit", "CachingAllocator", "MemoryFit", "MemoryTimeline",
    "Replay", "allocations", "batch_scaled", "block_bytes", "largest_batch", "memory_timeline",
    "replay", "segment_bytes", "storage_bytes",
]
