"""Scheduling, as Inductor's ``scheduler.py``: nodes grouped by named fusion rules
(:data:`FUSION_RULES`, each returning why a pair may not fuse), best score first, in rounds."""


from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...trace.refs import TensorRef
from .lowering import Loop, NodeKind, SchedulerNode


@dataclass
class _Group:
    """A scheduler node while fusion runs — one node, or a ``FusedSchedulerNode`` of several —
    with its place in the dependency graph (``ancestors``: bit i set when original node i must
    run before it)."""

    members: list[int]
    mask: int
    ancestors: int
    loop: Loop | None
    extern: bool
    first: int
    last: int
    used: dict[int, TensorRef]  #: values it loads or stores (``used_buffer_names``)
    #: how many entries of ``_Scheduler.merges`` ``ancestors`` already reflects
    merges_seen: int = 0

    @property
    def reduction(self) -> bool:
        return self.loop is not None and self.loop.order is not None


def _without(bits: int, mask: int) -> int:
    """``bits & ~mask`` in non-negative ints: ``~`` makes a negative int, and ``&`` with one
    costs ~10× more on the 10⁴-bit masks of a deep model."""
    return bits ^ (bits & mask)


@dataclass
class _Scheduler:
    groups: list[_Group]
    group_of: list[int]  # original node → index of its group in ``groups``
    live: set[int]  # indices of the groups not fused into another
    bytes_of: Callable[[TensorRef], int]
    #: every fusion so far: (the fused node's mask, its mask and ancestors)
    merges: list[tuple[int, int]] = field(default_factory=list)
    #: for each size of :data:`MERGE_RUNS`, per run of that many consecutive entries of
    #: :attr:`merges`: their masks and their closures, each united
    merge_runs: tuple[list[tuple[int, int]], ...] = field(
        default_factory=lambda: tuple([] for _ in MERGE_RUNS))

    def merged(self, mask: int, closure: int) -> None:
        """Log a fusion: the fused node's ``mask``, and ``closure``, its mask and ancestors."""
        for size, runs in zip(MERGE_RUNS, self.merge_runs, strict=True):
            if len(self.merges) % size:
                masks, closures = runs[-1]
                runs[-1] = (masks | mask, closures | closure)
            else:
                runs.append((mask, closure))
        self.merges.append((mask, closure))

    def ancestors(self, group: _Group) -> int:
        """``group``'s ancestors with every fusion so far applied — a group that depends on a
        fused node follows all the fused node depends on. Fusions are replayed from
        :attr:`merges` when a group is asked, not pushed to every group at each fusion."""
        ancestors = self._replay(group.ancestors, 0, group.merges_seen, len(self.merges))
        if ancestors != group.ancestors:  # the stored ancestors leave out the group's own nodes
            group.ancestors = _without(ancestors, group.mask)
        group.merges_seen = len(self.merges)
        return group.ancestors

    def _replay(self, ancestors: int, level: int, start: int, stop: int) -> int:
        """``ancestors`` after the fusions ``merges[start:stop]``, in order. A run of them (of
        the size ``MERGE_RUNS[level]``) changes nothing when the ancestors meet none of their
        nodes, or already hold all their closures (in a deep stack, a late node follows almost
        all before it); a run that may change them is replayed in the runs of the next size,
        and the last size one fusion at a time."""
        if level == len(MERGE_RUNS):
            for mask, closure in self.merges[start:stop]:
                if ancestors & mask:
                    ancestors |= closure
            return ancestors
        size, runs = MERGE_RUNS[level], self.merge_runs[level]
        while start < stop:
            end = min((start // size + 1) * size, stop)
            masks, closures = runs[start // size]
            if ancestors & masks and closures & ancestors != closures:
                ancestors = self._replay(ancestors, level + 1, start, end)
            start = end
        return ancestors

    def depends(self, later: _Group, earlier: _Group) -> bool:
        """Whether ``later`` must run after ``earlier`` (two live groups). Ancestors only grow as
        fusions are replayed, so ancestors not brought up to date already settle a yes."""
        return bool(later.ancestors & earlier.mask or self.ancestors(later) & earlier.mask)


def extern_never_fuses(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """Either node is an extern kernel (cuBLAS, cuDNN, attention, scatter, ops without a rule):
    without max-autotune templates Inductor fuses nothing into a library call
    (``ExternKernelSchedulerNode``)."""
    if a.extern or b.extern:
        return "extern kernel (library call) is never fused"
    return None


def max_fusion_size(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """More than 64 nodes in one kernel (``config.max_fusion_size``)."""
    if len(a.members) + len(b.members) > MAX_FUSION_SIZE:
        return f"exceeds max fusion ({MAX_FUSION_SIZE} nodes)"
    return None


def shares_data(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """Two independent nodes load fewer than 10 bytes in common or lie more than 64 nodes
    apart (``choices.can_fuse_horizontal``: ``score_fusion_memory_threshold``,
    ``are_long_distant_nodes``): horizontal fusion exists to load shared inputs once."""
    # both tests first: they are cheaper than the dependency walk, and a pair that passes
    # them fuses whether or not one depends on the other
    if _shared_bytes(s, a, b) < SCORE_FUSION_MEMORY_THRESHOLD:
        reason = "no shared data (score_fusion_memory_threshold)"
    elif max(abs(a.first - b.last), abs(b.first - a.last)) > MAX_FUSION_DISTANCE:
        reason = "nodes are too far apart"
    else:
        return None
    return None if s.depends(a, b) or s.depends(b, a) else reason


def loops_match(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """The loops differ (``codegen/simd.py`` ``can_fuse``, one generated kernel has one loop
    nest): pointwise nodes need the same element count; reductions the same ``(numel, rnumel)``
    and the same reduced dims (mix-order reduction pairs other dims only from 5 M elements up);
    a pointwise node joins a reduction over ``numel`` elements (an epilogue) or over
    ``numel × rnumel`` (a prologue; or an epilogue on a broadcast result as in softmax, only
    when the reduction folds the innermost dims — a column reduction completes no point
    before the end)."""
    if a.loop is None or b.loop is None:
        return None
    if a.reduction and b.reduction:
        if (a.loop.numel, a.loop.rnumel) != (b.loop.numel, b.loop.rnumel):
            return "numel/rnumel mismatch (reduce)"
        if a.loop.order != b.loop.order:
            return "reductions over different dims"
        return None
    if not a.reduction and not b.reduction:
        return None if a.loop.numel == b.loop.numel else "numel mismatch (non-reduce)"
    (pointwise, p), (reduction, r) = ((a.loop, a), (b.loop, b)) if b.reduction else (
        (b.loop, b), (a.loop, a))
    if pointwise.numel == reduction.numel:
        return None
    if pointwise.numel != reduction.numel * reduction.rnumel:
        return "numel/rnumel incompatibility (pointwise and reduction)"
    if s.depends(p, r) and not reduction.inner:
        # each point of the epilogue needs a whole column of the reduction first
        return "full-size epilogue on a reduction over outer dims"
    return None


def no_cycle(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """A node outside the pair depends on one and feeds the other: the fused kernel would have
    to run both before and after it (``will_fusion_create_cycle``, "intermediate nodes between
    node1 & node2")."""
    for src, dst in ((a, b), (b, a)):
        # a node on such a path follows ``src``: nodes are numbered in a topological order
        after_src = src.first + 1
        # bit k: node ``after_src + k`` (shifted down, the walk works on a few-bit int)
        between = _without(s.ancestors(dst), src.mask | dst.mask) >> after_src
        seen: set[int] = set()
        while between:
            low = between & -between
            between ^= low
            group_index = s.group_of[after_src + low.bit_length() - 1]
            if group_index in seen:
                continue
            seen.add(group_index)
            if s.depends(s.groups[group_index], src):
                return "will create cycle"
    return None


#: Sizes of the runs of consecutive fusions :meth:`_Scheduler.ancestors` tests together before
#: it replays them in smaller runs, then one by one
MERGE_RUNS = (64, 16, 4)
#: ``config.max_fusion_size``
MAX_FUSION_SIZE = 64
#: ``config.score_fusion_memory_threshold`` (bytes both nodes load, for horizontal fusion)
SCORE_FUSION_MEMORY_THRESHOLD = 10
#: ``Scheduler.are_long_distant_nodes``: 64 nodes apart in program order
MAX_FUSION_DISTANCE = 64
#: ``Scheduler.fuse_nodes``: at most this many rounds of ``fuse_nodes_once``
FUSION_ROUNDS = 10

Rule = Callable[[_Scheduler, _Group, _Group], "str | None"]
#: The rules in the order Inductor's ``can_fuse`` and ``_try_fusion_pairs`` apply them.
FUSION_RULES: tuple[Rule, ...] = (
    extern_never_fuses, shares_data, max_fusion_size, loops_match, no_cycle
)


def refusal(s: _Scheduler, a: _Group, b: _Group) -> str | None:
    """The first rule of :data:`FUSION_RULES` that refuses the pair (None: they fuse)."""
    return next((reason for rule in FUSION_RULES if (reason := rule(s, a, b))), None)


def _shared_bytes(s: _Scheduler, a: _Group, b: _Group) -> int:
    return sum(s.bytes_of(a.used[v]) for v in a.used.keys() & b.used.keys())


# --- 4. Scheduling: fuse_nodes ---------------------------------------------------------------


def _dependencies(nodes: Sequence[SchedulerNode]) -> list[set[int]]:
    """Node → nodes it must follow: producers of what it loads, and — for a node writing a new
    version into existing storage — the readers and writers of the earlier versions."""
    producer: dict[int, int] = {}
    storage_users: dict[int, set[int]] = {}
    deps: list[set[int]] = []
    for index, node in enumerate(nodes):
        mine = {producer[ref.value_id] for ref in node.loads if ref.value_id in producer}
        for ref in node.op.writes:
            mine |= storage_users.get(ref.storage_id, set())
        mine.discard(index)
        deps.append(mine)
        for ref in node.op.writes:
            producer[ref.value_id] = index
        for ref in (*node.loads, *node.op.writes):
            storage_users.setdefault(ref.storage_id, set()).add(index)
    return deps


def _node_values(node: SchedulerNode) -> dict[int, TensorRef]:
    """Values a node loads from or stores to memory (Inductor's ``used_buffer_names``)."""
    return {ref.value_id: ref for ref in (*node.loads, *node.op.writes)}


def schedule(nodes: Sequence[SchedulerNode], bytes_of: Callable[[TensorRef], int]
             ) -> tuple[list[list[int]], dict[tuple[int, int], str]]:
    """Inductor's ``fuse_nodes``: groups of node indices, and why pairs of groups that share a
    buffer stayed apart (by final group index)."""
    deps = _dependencies(nodes)
    ancestors: list[int] = []
    for node_deps in deps:
        mask = 0
        for dep in node_deps:
            mask |= ancestors[dep] | (1 << dep)
        ancestors.append(mask)
    s = _Scheduler(
        groups=[
            _Group([i], 1 << i, ancestors[i], node.loop, node.kind is NodeKind.EXTERN, i, i,
                   _node_values(node))
            for i, node in enumerate(nodes)
        ],
        group_of=list(range(len(nodes))),
        live=set(range(len(nodes))),
        bytes_of=bytes_of,
    )
    refused: dict[frozenset[int], str] = {}
    for _ in range(FUSION_ROUNDS):
        if not _fuse_once(s, refused):
            break
    alive = _topological(s, deps)
    position = {g: k for k, g in enumerate(alive)}
    reasons = {}
    for pair, reason in refused.items():
        first, second = sorted(position[s.group_of[i]] for i in pair)
        if first != second:
            reasons[(first, second)] = reason
    return [sorted(s.groups[g].members) for g in alive], reasons


def _topological(s: _Scheduler, deps: Sequence[set[int]]) -> list[int]:
    """The live groups in an order that runs every producer first, the earliest first
    (``topological_sort_schedule``)."""
    successors: dict[int, set[int]] = {g: set() for g in s.live}
    waiting = dict.fromkeys(s.live, 0)
    for node, node_deps in enumerate(deps):
        for dep in node_deps:
            before, after = s.group_of[dep], s.group_of[node]
            if before != after and after not in successors[before]:
                successors[before].add(after)
                waiting[after] += 1
    ready = [(s.groups[g].first, g) for g, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, group = heapq.heappop(ready)
        order.append(group)
        for after in successors[group]:
            waiting[after] -= 1
            if not waiting[after]:
                heapq.heappush(ready, (s.groups[after].first, after))
    return order


def _candidates(s: _Scheduler) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``get_possible_fusions``: pairs of live groups that load or store the same value — those
    of two fusible groups best first (``score_fusion``: reduction pairs of the same kind, then
    shared bytes, then the closer pair in program order), and those with an extern kernel,
    which :func:`extern_never_fuses` refuses whatever their place in that order."""
    by_value: dict[int, list[int]] = {}
    for index in s.live:
        for value in s.groups[index].used:
            by_value.setdefault(value, []).append(index)
    pairs = set()
    for groups in by_value.values():
        if len(groups) == 1:  # most values: no pair to make
            continue
        unique = sorted(groups, key=lambda g: s.groups[g].first)
        for i, a in enumerate(unique):
            pairs |= {(a, b) for b in unique[i + 1: i + 1 + MAX_FUSION_SIZE]}
    fusible, with_extern = [], []
    for pair in pairs:
        extern = s.groups[pair[0]].extern or s.groups[pair[1]].extern
        (with_extern if extern else fusible).append(pair)

    def score(pair: tuple[int, int]) -> tuple:
        a, b = s.groups[pair[0]], s.groups[pair[1]]
        distance = max(abs(a.first - b.last), abs(b.first - a.last))
        return (a.reduction == b.reduction, _shared_bytes(s, a, b), -distance, -a.first)

    return sorted(fusible, key=score, reverse=True), with_extern


def _fuse_once(s: _Scheduler, refused: dict[frozenset[int], str]) -> bool:
    """``fuse_nodes_once``: try every candidate pair in score order on the current groups."""
    fusible, with_extern = _candidates(s)
    # an extern kernel never joins a group, so its pairs are refused here (about two thirds
    # of the candidates in a transformer) rather than scored; the refusals reach the same
    # final groups whenever they are noted
    for first, second in with_extern:
        a, b = s.groups[first], s.groups[second]
        refused[frozenset((a.members[0], b.members[0]))] = extern_never_fuses(s, a, b)
    fused = False
    for first, second in fusible:
        a_index = s.group_of[s.groups[first].members[0]]
        b_index = s.group_of[s.groups[second].members[0]]
        if a_index == b_index:
            continue
        a, b = s.groups[a_index], s.groups[b_index]
        reason = refusal(s, a, b)
        pair = frozenset((a.members[0], b.members[0]))
        if reason:
            refused[pair] = reason
            continue
        refused.pop(pair, None)
        _merge(s, a_index, b_index)
        fused = True
    return fused


def _merge(s: _Scheduler, keep: int, gone: int) -> None:
    a, b = s.groups[keep], s.groups[gone]
    ancestors = s.ancestors(a) | s.ancestors(b)
    a.members += b.members
    a.mask |= b.mask
    a.ancestors = _without(ancestors, a.mask)
    if a.loop is None or (b.reduction and not a.reduction):
        a.loop = b.loop
    a.first, a.last = min(a.first, b.first), max(a.last, b.last)
    a.used = {**a.used, **b.used}
    for member in b.members:
        s.group_of[member] = keep
    s.live.discard(gone)
    s.merged(a.mask, a.ancestors | a.mask)
    a.merges_seen = len(s.merges)


# --- 5. Kernel boundaries -------------------------------------------------------------------


