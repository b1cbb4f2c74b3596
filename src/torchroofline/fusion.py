"""Stage 3: group ops into kernels — Inductor-style fusion, eager (one kernel per op) and the
compulsory traffic of perfect fusion.

The fused plan is built greedily in execution order, the way Inductor's scheduler reads: every
non-view op is a node; a node joins an existing kernel when :func:`can_fuse` allows it, else it
starts a kernel of its own. A node may join only the newest kernel among those it depends on, so
every data-flow edge runs from an older kernel to a newer one and the plan never has a cycle.

Only values that cross a kernel's boundary cost traffic: a kernel reads each value produced
outside it once (the largest view of it that its ops touch) and writes each value it produces
that another kernel reads or that the model returns (or leaves in a mutated input or buffer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .costs import Category, OpRecord, tensor_bytes
from .trace import TensorRef, largest_per_value


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of a plan: the ops it runs and the tensors crossing its boundary."""

    name: str
    category: Category
    ops: tuple[OpRecord, ...]
    reads: tuple[TensorRef, ...]
    writes: tuple[TensorRef, ...]

    @property
    def tensor_flops(self) -> int:
        return sum(op.flops.tensor for op in self.ops)

    @property
    def vector_flops(self) -> int:
        return sum(op.flops.vector for op in self.ops)

    @property
    def flops(self) -> int:
        return self.tensor_flops + self.vector_flops

    @property
    def launches(self) -> int:
        """GPU launches: 1, or what a multi-launch library call (an RNN) stands for."""
        return max(op.flops.launches for op in self.ops)

    def bytes(self, float_bytes: int) -> int:
        """HBM bytes read plus written by this kernel at a float element size of ``float_bytes``."""
        return sum(tensor_bytes(ref, float_bytes) for ref in (*self.reads, *self.writes))


@dataclass(frozen=True)
class Plan:
    """A list of kernels (a schedule): eager or fused."""

    kernels: tuple[Kernel, ...]

    def bytes(self, float_bytes: int) -> int:
        return sum(kernel.bytes(float_bytes) for kernel in self.kernels)

    @property
    def kernel_count(self) -> int:
        return sum(kernel.launches for kernel in self.kernels)


# --- Fusion rules --------------------------------------------------------------------------
# Each rule states when a node may join a kernel and why Inductor does the same.


@dataclass
class _Group:
    """A kernel being built: its ops and the iteration sizes (elements) a new node can share."""

    index: int
    ops: list[OpRecord]
    category: Category
    sizes: set[int] = field(default_factory=set)

    @property
    def fusible(self) -> bool:
        return all(op.fusible for op in self.ops)


def _output_elements(op: OpRecord) -> int:
    return max((ref.elements for ref in op.writes), default=0)


def _input_elements(op: OpRecord) -> int:
    return max((ref.elements for ref in op.reads), default=0)


def extern_stays_alone(group: _Group, op: OpRecord) -> bool:
    """Matmul-class ops and non-fusible data movement (scatter, sort, unknown ops) are extern
    library calls or kernels Inductor does not fuse into (``ExternKernel``): they neither absorb
    neighbours nor join them."""
    return group.fusible and op.fusible


def same_iteration_space(group: _Group, op: OpRecord) -> bool:
    """Inductor fuses nodes whose loops have the same size (``can_fuse_vertical`` compares
    iteration ranges): a pointwise node over as many elements as the kernel's pointwise loop,
    its reduction's input (prologue) or its reduction's output (epilogue); a reduction over the
    kernel's element count (a persistent multi-reduction, e.g. softmax's max and sum)."""
    if op.category is Category.REDUCTION:
        return _input_elements(op) in group.sizes
    return _output_elements(op) in group.sizes


FUSION_RULES = (extern_stays_alone, same_iteration_space)


def can_fuse(group: _Group, op: OpRecord) -> bool:
    """All rules of :data:`FUSION_RULES` hold."""
    return all(rule(group, op) for rule in FUSION_RULES)


def _sizes_of(op: OpRecord) -> set[int]:
    sizes = {_output_elements(op)}
    if op.category is Category.REDUCTION:
        sizes.add(_input_elements(op))
    return sizes


def _group_ops(ops: Sequence[OpRecord]) -> list[_Group]:
    groups: list[_Group] = []
    producer: dict[int, int] = {}  # value id → index of the group that wrote it
    readers: dict[int, list[int]] = {}  # value id → groups that read it (for horizontal fusion)
    for op in ops:
        if op.category is Category.ZERO_COPY:
            continue
        read_ids = [ref.value_id for ref in op.reads]
        newest_producer = max((producer.get(v, -1) for v in read_ids), default=-1)
        candidates = {producer[v] for v in read_ids if v in producer}
        candidates |= {g for v in read_ids for g in readers.get(v, ())}
        target = next(
            (
                groups[g]
                for g in sorted(candidates, reverse=True)
                if g >= newest_producer and can_fuse(groups[g], op)
            ),
            None,
        )
        if target is None:
            target = _Group(index=len(groups), ops=[], category=op.category)
            groups.append(target)
        target.ops.append(op)
        target.sizes |= _sizes_of(op)
        target.category = _dominant(target.category, op.category)
        for value in read_ids:
            readers.setdefault(value, []).append(target.index)
        for ref in op.writes:
            producer[ref.value_id] = target.index
    return groups


_CATEGORY_RANK = {
    Category.COMPUTE: 4,
    Category.REDUCTION: 3,
    Category.POINTWISE: 2,
    Category.DATA_MOVEMENT: 1,
    Category.ZERO_COPY: 0,
}


def _dominant(first: Category, second: Category) -> Category:
    """A kernel is named by its heaviest op kind: a pointwise chain with a sum is a reduction."""
    return max(first, second, key=_CATEGORY_RANK.__getitem__)


def uninitialised_values(ops: Sequence[OpRecord]) -> frozenset[int]:
    """Values that zero-copy ops create (``empty``, ``new_empty``): memory with nothing in it
    yet. An op that fills one (``empty_like(x).copy_(y)``, dropout's ``bernoulli_``) is traced as
    reading it, but no kernel has anything to load from it, so no plan charges that read."""
    return frozenset(
        ref.value_id for op in ops if op.category is Category.ZERO_COPY for ref in op.writes
    )


def _boundary(
    ops_by_group: Sequence[Sequence[OpRecord]],
    kept_values: frozenset[int],
    uninitialised: frozenset[int],
) -> list[Kernel]:
    """Kernels with the traffic crossing their boundaries."""
    owner: dict[int, int] = {}
    for index, group_ops in enumerate(ops_by_group):
        for op in group_ops:
            for ref in op.writes:
                owner[ref.value_id] = index
    read_elsewhere: set[int] = set()
    for index, group_ops in enumerate(ops_by_group):
        for op in group_ops:
            read_elsewhere |= {r.value_id for r in op.reads if owner.get(r.value_id) != index}
    kernels = []
    for index, group_ops in enumerate(ops_by_group):
        outside_reads = [
            ref
            for op in group_ops
            for ref in op.reads
            if owner.get(ref.value_id) != index and ref.value_id not in uninitialised
        ]
        writes = [
            ref
            for op in group_ops
            for ref in op.writes
            if ref.value_id in read_elsewhere or ref.value_id in kept_values
        ]
        kernels.append(
            Kernel(
                name=_kernel_name(group_ops),
                category=_category_of(group_ops),
                ops=tuple(group_ops),
                reads=largest_per_value(outside_reads),
                writes=tuple(writes),
            )
        )
    return kernels


def _category_of(ops: Sequence[OpRecord]) -> Category:
    category = Category.ZERO_COPY
    for op in ops:
        category = _dominant(category, op.category)
    return category


def _short_op_name(op: OpRecord) -> str:
    return op.name.split(".")[1] if op.name.count(".") >= 1 else op.name


def _kernel_name(ops: Sequence[OpRecord]) -> str:
    """``module: op1+op2+…``; long chains keep their first two ops and a count."""
    names = [_short_op_name(op) for op in ops]
    if len(names) > 3:
        names = [*names[:2], f"…{len(names) - 2} more"]
    module = next((op.module_path for op in ops if op.module_path), "")
    label = "+".join(names)
    return f"{module}: {label}" if module else label


def fused_plan(ops: Sequence[OpRecord], kept_values: frozenset[int]) -> Plan:
    """Inductor-style plan: see the module docstring and :data:`FUSION_RULES`."""
    groups = _group_ops(ops)
    return Plan(tuple(_boundary([g.ops for g in groups], kept_values, uninitialised_values(ops))))


def eager_plan(ops: Sequence[OpRecord]) -> Plan:
    """One kernel per non-view op; each reads its distinct inputs (except uninitialised
    memory, see :func:`uninitialised_values`) and writes all its outputs."""
    uninitialised = uninitialised_values(ops)
    return Plan(
        tuple(
            Kernel(
                name=_kernel_name([op]),
                category=op.category,
                ops=(op,),
                reads=tuple(r for r in op.distinct_reads if r.value_id not in uninitialised),
                writes=op.writes,
            )
            for op in ops
            if op.category is not Category.ZERO_COPY
        )
    )


def compulsory_refs(
    ops: Sequence[OpRecord], input_values: frozenset[int], kept_values: frozenset[int]
) -> tuple[TensorRef, ...]:
    """Perfect fusion: every graph input (parameter, buffer, model input) that a kernel reads,
    at the largest view read of it, plus every kept value (outputs, mutated buffers), once each,
    at the largest write to its storage: an output assembled in place (``zeros``, then a slice
    copied in) keeps what every version wrote there, so all of it must be written."""
    kernel_ops = [op for op in ops if op.category is not Category.ZERO_COPY]
    reads = [ref for op in kernel_ops for ref in op.reads if ref.value_id in input_values]
    kept_storages = {
        ref.storage_id for op in kernel_ops for ref in op.writes if ref.value_id in kept_values
    }
    writes_by_storage: dict[int, list[TensorRef]] = {}
    for ref in (ref for op in kernel_ops for ref in op.writes):
        if ref.storage_id in kept_storages:
            writes_by_storage.setdefault(ref.storage_id, []).append(ref)
    largest_writes = (max(refs, key=lambda r: r.elements) for refs in writes_by_storage.values())
    return largest_per_value(reads) + tuple(largest_writes)
