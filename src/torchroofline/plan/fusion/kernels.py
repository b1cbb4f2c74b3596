"""The fused and eager plans' kernels (:class:`Kernel`, :class:`Plan`) and how the two plans are
built: the kernels' boundaries, their traffic and their names."""


from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from ...costs import Category, Cost, OpRecord, tensor_bytes
from ...trace.refs import TensorRef
from ...trace.storages import (
    united_elements,
)
from .lowering import (
    SEPARATE_BIAS,
    _kept_storages,
    _loop,
    _node_kind,
    lower,
    split_bias,
    split_normalization,
)
from .passes import _short_op_name
from .scheduler import schedule


@dataclass(frozen=True)
class Refusal:
    """Why a kernel stayed apart from another kernel it shares a buffer with: the other
    kernel's number in execution order (from 1) and name, and the reason the first fusion rule
    that refused the pair gave (:data:`FUSION_RULES`)."""

    kernel: int
    name: str
    reason: str

    def __str__(self) -> str:
        return f"apart from kernel {self.kernel} ({self.name}): {self.reason}"


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of a plan: the ops it runs and the tensors crossing its boundary.

    ``recomputed`` holds cheap pointwise ops another kernel is charged for that this kernel
    computes again instead of loading their result (Inductor inlines them into every reader);
    their FLOPs count once, in the kernel that lists them in ``ops``. ``refusals`` says why the
    kernel stayed apart from kernels it shares a buffer with."""

    name: str
    category: Category
    ops: tuple[OpRecord, ...]
    reads: tuple[TensorRef, ...]
    writes: tuple[TensorRef, ...]
    recomputed: tuple[OpRecord, ...] = ()
    refusals: tuple[Refusal, ...] = ()

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
        return max(op.flops.launches for op in (*self.ops, *self.recomputed))

    def bytes(self, float_bytes: int) -> int:
        """HBM bytes read plus written by this kernel at a float element size of ``float_bytes``."""
        return sum(tensor_bytes(ref, float_bytes) for ref in (*self.reads, *self.writes))

    def cost(self, float_bytes: int) -> Cost:
        """This kernel's FLOPs and HBM bytes at a float element size of ``float_bytes``."""
        return Cost(self.tensor_flops, self.vector_flops, self.bytes(float_bytes))


@dataclass(frozen=True)
class Plan:
    """A list of kernels (a schedule): eager or fused."""

    kernels: tuple[Kernel, ...]

    def bytes(self, float_bytes: int) -> int:
        return sum(kernel.bytes(float_bytes) for kernel in self.kernels)

    @property
    def kernel_count(self) -> int:
        return sum(kernel.launches for kernel in self.kernels)


# --- 1. FX passes ---------------------------------------------------------------------------


_CATEGORY_RANK = {
    Category.COMPUTE: 4,
    Category.REDUCTION: 3,
    Category.POINTWISE: 2,
    Category.DATA_MOVEMENT: 1,
    Category.ZERO_COPY: 0,
}


def _category_of(ops: Sequence[OpRecord]) -> Category:
    """A kernel is named by its heaviest op kind: a pointwise chain with a sum is a reduction."""
    return max((op.category for op in ops), key=_CATEGORY_RANK.__getitem__,
               default=Category.ZERO_COPY)


def uninitialised_values(ops: Sequence[OpRecord]) -> frozenset[int]:
    """Values that zero-copy ops create (``empty``, ``new_empty``): memory with nothing in it
    yet. An op that fills one (``empty_like(x).copy_(y)``, dropout's ``bernoulli_``) is traced as
    reading it, but no kernel has anything to load from it, so no plan charges that read."""
    return frozenset(
        ref.value_id for op in ops if op.category is Category.ZERO_COPY for ref in op.writes
    )


def _untouched_loads(
    ops: Sequence[OpRecord], mine: set[int], uninitialised: frozenset[int]
) -> list[TensorRef]:
    """Loads of what partial writes inside a kernel leave untouched: ``c[:, 10] = k`` then
    ``c[:, :12].sum()`` in one kernel still loads the old ``c[:, :10]``. A read of a version
    made here by writes smaller than the read loads the rest from the version before them."""
    latest: dict[int, int] = {}
    previous: dict[int, int] = {}
    written_here: dict[int, int] = {}  # storage → elements the kernel's writes there cover
    refs_by_value: dict[int, TensorRef] = {}
    for op in ops:
        for ref in op.reads:
            latest.setdefault(ref.storage_id, ref.value_id)
            refs_by_value.setdefault(ref.value_id, ref)
        for ref in op.writes:
            if latest.get(ref.storage_id, ref.value_id) != ref.value_id:
                previous[ref.value_id] = latest[ref.storage_id]
            latest[ref.storage_id] = ref.value_id
            written_here[ref.storage_id] = written_here.get(ref.storage_id, 0) + ref.elements
    loads = []
    for op in ops:
        for ref in op.reads:
            if ref.value_id not in mine or ref.value_id not in previous:
                continue
            before, seen = previous[ref.value_id], {ref.value_id}
            while before in mine and before in previous and before not in seen:
                seen.add(before)
                before = previous[before]
            if before in mine or before in uninitialised or before not in refs_by_value:
                continue
            untouched = ref.elements - written_here.get(ref.storage_id, 0)
            if untouched > 0:
                loads.append(replace(refs_by_value[before], elements=untouched))
    return loads


def _boundary(
    ops_by_kernel: Sequence[Sequence[OpRecord]],
    kept_values: set[int],
    uninitialised: frozenset[int],
) -> list[tuple[tuple[TensorRef, ...], tuple[TensorRef, ...]]]:
    """(reads, writes) of each kernel: values from outside it once each; values another kernel
    reads or the model keeps; for a kept storage, its last version in the kernel at the size of
    the largest write any of its versions made there (what every version wrote must reach
    memory)."""
    produced = [{ref.value_id for op in ops for ref in op.writes} for ops in ops_by_kernel]
    loads = [
        [ref for op in ops for ref in op.reads
         if ref.value_id not in mine and ref.value_id not in uninitialised]
        + _untouched_loads(ops, mine, uninitialised)
        for ops, mine in zip(ops_by_kernel, produced, strict=True)
    ]
    loaded_elsewhere = {ref.value_id for refs in loads for ref in refs}
    kept_storages = _kept_storages(itertools.chain(*ops_by_kernel), kept_values)
    united = _UnitedViews()
    boundaries = []
    for ops, refs in zip(ops_by_kernel, loads, strict=True):
        stores = [ref for op in ops for ref in op.writes]
        by_value = [ref for ref in stores if ref.storage_id not in kept_storages
                    and ref.value_id in loaded_elsewhere]
        versions: dict[int, list[TensorRef]] = {}
        for ref in stores:
            if ref.storage_id in kept_storages:
                versions.setdefault(ref.storage_id, []).append(ref)
        in_full = (
            replace(max(refs, key=lambda r: r.elements), value_id=refs[-1].value_id,
                    elements=united(refs))
            for refs in versions.values()
        )
        boundaries.append((united.per_value(refs), united.per_value(by_value) + tuple(in_full)))
    return boundaries


@dataclass
class _UnitedViews:
    """:func:`~torchroofline.trace.storages.united_elements` remembered by the views' geometry (the
    storage aside): uniting two strided views costs ~0.3 ms, and a deep model's kernels read
    the same views of their own buffers layer after layer."""

    _memo: dict[tuple, int] = field(default_factory=dict)

    def __call__(self, refs: Sequence[TensorRef]) -> int:
        """Distinct elements of ``refs``, views of one storage."""
        key = tuple((ref.shape, ref.strides, ref.offset, ref.elements, ref.storage_elements,
                     ref.itemsize, ref.dtype) for ref in refs)
        if key not in self._memo:
            self._memo[key] = united_elements(refs)
        return self._memo[key]

    def per_value(self, refs: Iterable[TensorRef]) -> tuple[TensorRef, ...]:
        """:func:`~torchroofline.trace.largest_per_value` with its views united here."""
        views: dict[int, list[TensorRef]] = {}
        for ref in refs:
            views.setdefault(ref.value_id, []).append(ref)
        return tuple(
            group[0] if len(group) == 1
            else replace(max(group, key=lambda ref: ref.elements), elements=self(group))
            for group in views.values()
        )


def _kernel_name(ops: Sequence[OpRecord]) -> str:
    """``module: op1+op2+…``: every distinct op in order of first use, never cut (as Inductor
    names a kernel ``triton_poi_fused_add_mul_…``), so kernels of different ops never read alike."""
    names = list(dict.fromkeys(_short_op_name(op) for op in ops))
    module = next((op.module_path for op in ops if op.module_path), "")
    label = "+".join(names)
    return f"{module}: {label}" if module else label


def fused_plan(ops: Sequence[OpRecord], kept_values: frozenset[int]) -> Plan:
    """Inductor-style plan: see the module docstring and :data:`FUSION_RULES`."""
    nodes, graph = lower(ops, kept_values)
    groups, refused = schedule(nodes, lambda ref: ref.elements * ref.itemsize)
    run: list[list[OpRecord]] = []
    charged: set[int] = set()  # ids of ops whose FLOPs a kernel already counts
    owned: list[list[OpRecord]] = []
    for members in groups:
        # by identity: an op inlined into several nodes is one record (hashing records is slow)
        kernel_ops = list({id(op): op for m in members for op in nodes[m].ops}.values())
        kernel_ops.sort(key=lambda op: op.index)
        run.append(kernel_ops)
        owned.append([op for op in kernel_ops if id(op) not in charged])
        charged |= {id(op) for op in kernel_ops}
    kernel_of_op: dict[int, int] = {}  # op index → the first kernel that runs it
    for k, kernel_ops in enumerate(run):
        for op in kernel_ops:
            kernel_of_op.setdefault(op.index, k)
    for twin, duplicate in graph.duplicates:  # CSE: a duplicate runs where its twin runs
        home = kernel_of_op.get(twin.index)
        if home is not None:
            owned[home].append(duplicate)
    boundaries = _boundary(run, graph.kept, uninitialised_values(ops))
    names = [_kernel_name(kernel_ops) for kernel_ops in run]
    apart: list[list[Refusal]] = [[] for _ in run]
    for (first, second), reason in sorted(refused.items()):
        apart[first].append(Refusal(second + 1, names[second], reason))
        apart[second].append(Refusal(first + 1, names[first], reason))
    kernels = []
    for k, (kernel_ops, (reads, writes)) in enumerate(zip(run, boundaries, strict=True)):
        mine_ids = {id(op) for op in owned[k]}
        kernels.append(Kernel(
            name=names[k],
            category=_category_of(kernel_ops),
            ops=tuple(owned[k]),
            reads=reads,
            writes=writes,
            recomputed=tuple(op for op in kernel_ops if id(op) not in mine_ids),
            refusals=tuple(apart[k]),
        ))
    return Plan(tuple(kernels))


def eager_plan(ops: Sequence[OpRecord]) -> Plan:
    """One kernel per non-view op; each reads its distinct inputs (except uninitialised
    memory, see :func:`uninitialised_values`) and writes all its outputs. A normalization over
    outer dims (batch norm in training, group norm) is two kernels, as ATen runs it: statistics,
    then normalize (``batch_norm_stats`` and ``batch_norm_elemt``); a convolution with a bias is
    the cuDNN call and an in-place bias add (:data:`SEPARATE_BIAS`)."""
    uninitialised = uninitialised_values(ops)
    fresh = itertools.count(-1, -1)
    return Plan(
        tuple(
            Kernel(
                name=_kernel_name([op]),
                category=op.category,
                ops=(part,),
                reads=tuple(r for r in part.distinct_reads if r.value_id not in uninitialised),
                writes=part.writes,
            )
            for op in ops
            if op.category is not Category.ZERO_COPY
            for part in _eager_parts(op, fresh.__next__)
        )
    )


def _eager_parts(op: OpRecord, fresh_id: Callable[[], int]) -> tuple[OpRecord, ...]:
    rule = SEPARATE_BIAS.get(op.name)
    if rule is not None and rule.in_eager:
        return split_bias(op, fresh_id)
    loop = _loop(op, _node_kind(op))
    return (op,) if loop is None or loop.inner else split_normalization(op, fresh_id)
