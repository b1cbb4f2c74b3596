"""Lowering the ops to scheduler nodes, as Inductor's ``lowering.py``/``graph.py`` do: bias adds
split from library calls (``addmm``, convolutions), node kinds,
outer products, ``cat`` (pointwise or ``ConcatKernel``), normalizations split into statistics
and a normalize, and pointwise ops inlined into their readers unless realized."""


from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from ...costs import Category, FlopCount, OpRecord
from ...trace.refs import TensorRef, largest_per_value
from ...trace.regions import (
    Box,
    Region,
    box_size,
    full_box,
)
from ...trace.storages import (
    dense_layout,
    place,
    to_base,
)
from .passes import (
    _call_arguments,
    _Graph,
    _short_op_name,
    common_subexpressions,
    eliminate_dead_code,
    remove_noop_ops,
)


@dataclass(frozen=True)
class SeparateBias:
    """An op whose bias add runs as a pointwise add after a library call without the bias:
    ``library_op`` is the call that remains, ``bias_position`` the bias's place in its reads."""

    library_op: str
    bias_position: int
    #: Inductor moves the bias out only when every user is pointwise (else it stays in the call)
    only_before_pointwise: bool
    #: eager ATen runs the bias add as a kernel of its own too
    in_eager: bool


#: Ops whose bias add Inductor (and for convolutions eager ATen) runs apart from the library call:
#: ``addmm`` → ``mm`` + add (``post_grad.unfuse_bias_add_to_pointwise``: on GPU, when every user
#: is pointwise); a convolution always, on GPU (``kernel/conv.py`` ``convolution``: "peel off the
#: bias, cudnn is slower with it") — and eager cuDNN has no bias either (``Convolution.cpp``:
#: ``cudnn_convolution`` then ``output.add_(reshape_bias(…))``).
SEPARATE_BIAS = {
    "aten.addmm.default": SeparateBias("aten.mm.default", 0, only_before_pointwise=True,
                                       in_eager=False),
    "aten.convolution.default": SeparateBias("aten.convolution.default", 2,
                                             only_before_pointwise=False, in_eager=True),
}
#: Inductor keeps ``addmm`` whole in half precision (``config.keep_addmm_fused_for_half_dtypes``).
_KEEP_ADDMM_DTYPES = frozenset({"float16", "bfloat16"})


def unfuse_bias_add(graph: _Graph) -> None:
    """Each op of :data:`SEPARATE_BIAS` that Inductor splits becomes its library call and a
    pointwise bias add (see :func:`split_bias`), which the users then absorb: one epilogue
    kernel reads the bias instead of cuBLAS or cuDNN."""
    readers = graph.readers()
    graph.ops = [
        part for op in graph.ops
        for part in (split_bias(op, graph.fresh_id)
                     if _inductor_splits_bias(op, readers, graph.kept) else (op,))
    ]


def split_bias(op: OpRecord, fresh_id: Callable[[], int]) -> tuple[OpRecord, ...]:
    """``(library call, bias add)`` for an op of :data:`SEPARATE_BIAS` given a bias, else
    ``(op,)``. The library call keeps the op's FLOPs; the add (which ``flop_counter`` does not
    count) reads the bias and the call's product and writes the op's output."""
    rule = SEPARATE_BIAS.get(op.name)
    if rule is None or len(op.reads) <= rule.bias_position or len(op.writes) != 1:
        return (op,)
    bias = op.reads[rule.bias_position]
    (out,) = op.writes
    product = replace(out, value_id=fresh_id(), storage_id=fresh_id())
    operands = tuple(ref for k, ref in enumerate(op.reads) if k != rule.bias_position)
    return (
        replace(op, name=rule.library_op, reads=operands, writes=(product,), call_key=()),
        replace(op, name="aten.add.Tensor", category=Category.POINTWISE, fusible=True,
                flops=FlopCount(), reads=(bias, product), writes=(out,), call_key=(),
                reduced_dims=None),
    )


def _inductor_splits_bias(op: OpRecord, readers: dict[int, list[OpRecord]],
                          kept: set[int]) -> bool:
    """``should_prefer_unfused_addmm`` for ``addmm`` (every user pointwise, the output not
    returned; not in half precision); always for a convolution."""
    rule = SEPARATE_BIAS.get(op.name)
    if rule is None or len(op.writes) != 1:
        return False
    if not rule.only_before_pointwise:
        return True
    (out,) = op.writes
    users = readers.get(out.value_id, [])
    return (
        out.dtype not in _KEEP_ADDMM_DTYPES
        and out.value_id not in kept
        and bool(users)
        and all(map(_pointwise_use, users))
    )


# --- 2. Lowering: node kinds, cat, inlining --------------------------------------------------


def _pointwise_use(op: OpRecord) -> bool:
    """``is_pointwise_use``: an elementwise op (``Tag.pointwise``: our pointwise cost category)
    reads it — not a gather, pad, resampling or ``cat``, though Inductor lowers those as
    pointwise loops too."""
    return _node_kind(op) is NodeKind.POINTWISE and op.category is Category.POINTWISE


class NodeKind(str, Enum):
    """Inductor's scheduler node classes."""

    NOP = "nop"  #: ``NopKernelSchedulerNode``: views, ``ConcatKernel`` — no kernel
    EXTERN = "extern"  #: ``ExternKernelSchedulerNode``: a library call; never fused
    POINTWISE = "pointwise"  #: ``SchedulerNode`` over a pointwise loop
    REDUCTION = "reduction"  #: ``SchedulerNode`` over a reduction loop


def _node_kind(op: OpRecord) -> NodeKind:
    if op.category is Category.ZERO_COPY:
        return NodeKind.NOP
    if not op.fusible and not _is_outer_product(op):
        return NodeKind.EXTERN
    # gathers, pads, cat and resampling are pointwise loops with indexed loads in Inductor; a
    # "reduction" that folds no dim (batch norm in eval) only scales and shifts, and one that
    # folds fewer than 8 elements per output is unrolled into a pointwise expression
    if (
        op.category is Category.REDUCTION
        and op.reduced_dims != ()
        and _reduced_loop(op).rnumel >= UNROLL_REDUCTIONS_THRESHOLD
    ):
        return NodeKind.REDUCTION
    return NodeKind.POINTWISE


#: Matmuls Inductor's decompositions (``decomposition.py`` ``mm``, ``addmm``, ``bmm``) turn into
#: a broadcast multiply on GPU when the inner dim is 1: op → (positions of the two matrices
#: among its reads, whether a single-row or single-column product stays a matmul).
OUTER_PRODUCTS = {
    "aten.mm.default": (0, 1, True),
    "aten.addmm.default": (1, 2, True),
    "aten.bmm.default": (0, 1, False),
}


def _is_outer_product(op: OpRecord) -> bool:
    """A matmul over an inner dim of 1 (see :data:`OUTER_PRODUCTS`): a pointwise node."""
    rule = OUTER_PRODUCTS.get(op.name)
    if rule is None or len(op.reads) <= max(rule[:2]):
        return False
    a, b = op.reads[rule[0]].shape, op.reads[rule[1]].shape
    if len(a) < 2 or len(b) < 2 or a[-1] != 1:
        return False
    return not rule[2] or (a[-2] != 1 and b[-1] != 1)


#: ``config.unroll_reductions_threshold``: ``Reduction.create`` lowers a reduction over fewer
#: elements per output than this as a ``Pointwise`` (on GPU even a full reduction).
UNROLL_REDUCTIONS_THRESHOLD = 8


#: Ops that Inductor lowers as a concatenation of their inputs along one dim.
CAT_OPS = frozenset({"aten.cat.default", "aten.stack.default"})
#: ``config.max_complex_pointwise_cat_inputs``: more inputs than this → ``ConcatKernel``.
MAX_POINTWISE_CAT_INPUTS = 8


def lower_cat(graph: _Graph) -> None:
    """``lowering.cat``: a ``pointwise_cat`` when every input is a pointwise value with no other
    reader or a value that would need a copy anyway (one kernel loads each input where its
    slice lies), else a ``ConcatKernel``: no kernel of its own; inputs computed in the graph are
    written straight into their slices by their producers (pointwise kernels and reductions),
    others (graph inputs, extern outputs) are copied in by a pointwise kernel
    (see :func:`_into_slice`)."""
    if not any(op.name in CAT_OPS for op in graph.ops):
        return
    readers = graph.readers()
    producers = {ref.value_id: op for op in graph.ops for ref in op.writes}
    ops: list[OpRecord] = []
    for op in graph.ops:
        if op.name not in CAT_OPS or len(op.writes) != 1 or _is_pointwise_cat(
            op, readers, producers, graph.kept
        ):
            ops.append(op)
            continue
        (out,) = op.writes
        # a ConcatKernel's buffer has a fixed layout (no producer can write it into another
        # cat's slice): a later cat reading it copies it, as it copies a graph input
        del producers[out.value_id]
        parts: list[TensorRef] = []
        for ref in op.reads:
            if not _into_slice(ref, producers, graph.kept) or ref.value_id in graph.must_realize:
                copy = replace(ref, value_id=graph.fresh_id(), storage_id=out.storage_id)
                ops.append(replace(op, reads=(ref,), writes=(copy,), call_key=(),
                                   category=Category.POINTWISE))
                parts.append(copy)
            else:
                graph.must_realize.add(ref.value_id)
                parts.append(ref)
        graph.renamed[out.value_id] = Concat(out, tuple(parts), _slice_boxes(op))
        if out.value_id in graph.kept:
            graph.kept |= {part.value_id for part in parts}
    graph.ops = [
        replace(op, reads=graph.rename(op.reads))
        if any(ref.value_id in graph.renamed for ref in op.reads) else op
        for op in ops
    ]


@dataclass(frozen=True)
class Concat:
    """A ``ConcatKernel`` output and the values standing for it, each written into its slice:
    ``boxes[k]`` is where ``parts[k]`` lies in ``out``, in ``out``'s coordinates (None: not
    known)."""

    out: TensorRef
    parts: tuple[TensorRef, ...]
    boxes: tuple[Box, ...] | None

    def read(self, ref: TensorRef) -> tuple[TensorRef, ...]:
        """The slices a read of view ``ref`` of the output loads, each at the elements of it
        the view covers: ``cat([a, b], 1)[:, :1]`` loads a column of ``a`` and nothing of
        ``b``, as Inductor's reader of the concatenated buffer does (loading every slice in
        full would move more than eager's reader). Every slice in full where the view is not
        an index box of the output. Each load keeps the view's shape: the reader's loop (a
        softmax's rows) is that of the whole view, not of a slice."""

        def load(part: TensorRef, elements: int, box: Box | None = None) -> TensorRef:
            return replace(ref, value_id=part.value_id, storage_id=part.storage_id,
                           elements=elements, offset=self._part_offset(ref, part, box))

        layout = dense_layout(self.out)
        out_at = place(self.out, layout) if layout is not None else None
        view_at = place(ref, layout) if layout is not None else None
        if self.boxes is None or out_at is None or view_at is None or (
            ref.itemsize != self.out.itemsize
        ):
            return tuple(load(part, part.elements) for part in self.parts)
        read = to_base(view_at, ref, Region.of([full_box(ref.shape)]))
        left = ref.elements  # a read narrowed by demand loads no more than it did
        loads = []
        for part, box in zip(self.parts, self.boxes, strict=True):
            covered = sum(
                read.intersect_box(piece, box_size(piece), self.out.storage_elements).count
                for piece in to_base(out_at, self.out, Region.of([box])).boxes
            )
            if covered:
                loads.append(load(part, min(covered, left), box))
                left -= loads[-1].elements
        return tuple(loads)

    def _part_offset(self, ref: TensorRef, part: TensorRef, box: Box | None) -> int:
        """The offset of view ``ref`` of the output moved into ``part``'s own storage, where
        the part is laid out as the output (the rows of a cat along its first dim): a reader
        of ``cat([x[1:], e])[:1]`` loads ``x[1]``, not ``x[0]``. Elsewhere the view's own
        offset (the loads then count elements, not where they lie)."""
        if box is None or tuple(part.strides) != tuple(self.out.strides):
            return ref.offset
        start = sum(dim[0].start * stride for dim, stride in zip(box, self.out.strides,
                                                                strict=True) if dim)
        return ref.offset - self.out.offset - start + part.offset


def _slice_boxes(op: OpRecord) -> tuple[Box, ...] | None:
    """Where each input of a ``cat`` or ``stack`` lies in its output (None: not known)."""
    (out,) = op.writes
    arguments = _call_arguments(op)
    keywords = dict(op.call_key[1][1]) if len(op.call_key) == 2 and op.call_key[1] else {}
    dim = arguments[1] if len(arguments) > 1 else keywords.get("dim", 0)
    if type(dim) is not int or not out.shape:
        return None
    dim %= len(out.shape)
    shapes = [ref.shape for ref in op.reads]
    if op.name == "aten.stack.default":
        if any(shape != out.shape[:dim] + out.shape[dim + 1:] for shape in shapes):
            return None
        starts, sizes = range(len(shapes)), [1] * len(shapes)
    else:
        if any(len(shape) != len(out.shape) for shape in shapes):
            return None  # a legacy empty input, skipped by ``cat``
        sizes = [shape[dim] for shape in shapes]
        starts = list(itertools.accumulate(sizes, initial=0))
    whole = full_box(out.shape)
    boxes = tuple(
        (*whole[:dim], (range(start, start + size),), *whole[dim + 1:])
        for start, size in zip(starts, sizes, strict=False)
    )
    if sum(map(box_size, boxes)) != math.prod(out.shape):
        return None
    return boxes


def _into_slice(ref: TensorRef, producers: dict[int, OpRecord], kept: set[int]) -> bool:
    """Whether the producer of ``ref`` can write it straight into a slice of a ``ConcatKernel``
    (``ConcatKernel.can_realize_into_without_copy``: a buffer whose layout is still flexible):
    not a graph input, a kept value or an in-place write, and not an extern call other than
    ``mm`` and ``addmm`` (see :data:`FLEXIBLE_LAYOUT_EXTERNS`) — a batched GEMM's
    ``ExternKernelOut`` has a fixed layout and a convolution or attention allocates its own
    output (``ExternKernelAlloc``), so their outputs are copied in."""
    producer = producers.get(ref.value_id)
    return (
        producer is not None
        and ref.value_id not in kept
        and not _mutates(producer)
        and (_node_kind(producer) is not NodeKind.EXTERN
             or producer.name in FLEXIBLE_LAYOUT_EXTERNS)
    )


#: Library calls whose output layout Inductor leaves flexible without max-autotune
#: (``InductorChoices._need_to_fix_layout``: "the historical implementation for mm and addmm
#: allowed flexible layouts"), so a ``ConcatKernel`` has cuBLAS write them into their slices.
FLEXIBLE_LAYOUT_EXTERNS = frozenset({"aten.mm.default", "aten.addmm.default"})


#: ``cat``'s ``additional_pointwise_ops``: users that count as pointwise for ``pointwise_cat``.
CAT_POINTWISE_USERS = CAT_OPS | {"aten.constant_pad_nd.default"}


def _mutates(op: OpRecord) -> bool:
    """The op writes into storage one of its inputs lives in (an in-place op)."""
    return bool({ref.storage_id for ref in op.writes} & {ref.storage_id for ref in op.reads})


def _is_pointwise_cat(
    op: OpRecord,
    readers: dict[int, list[OpRecord]],
    producers: dict[int, OpRecord],
    kept: set[int],
) -> bool:
    inputs = largest_per_value(op.reads)
    if len(inputs) > MAX_POINTWISE_CAT_INPUTS:
        return False

    def lowered_in_place(ref: TensorRef) -> bool:  # ``should_lower_cat_input``
        producer = producers.get(ref.value_id)
        unrealized = producer is not None and _node_kind(producer) is NodeKind.POINTWISE
        return (unrealized and ref.value_id not in kept) or not _into_slice(ref, producers, kept)

    def shared(ref: TensorRef) -> bool:  # ``any_input_has_multi_consumers``
        others = [user for user in readers.get(ref.value_id, []) if user is not op]
        producer = producers.get(ref.value_id)
        return any(_pointwise_use(user) for user in others) or bool(others) and (
            producer is not None and _node_kind(producer) is NodeKind.POINTWISE
        )

    if any(map(shared, inputs)):
        return False  # realized once into its slice rather than recomputed by each reader
    (out,) = op.writes
    users = readers.get(out.value_id, [])
    pointwise_use = bool(users) and out.value_id not in kept and all(
        _pointwise_use(user) or user.name in CAT_POINTWISE_USERS for user in users
    )
    lowered = [lowered_in_place(ref) for ref in inputs]
    return (any(lowered) and pointwise_use) or (
        all(lowered) and not any(_reads_a_reduction(ref, producers) for ref in inputs)
    )


def _reads_a_reduction(ref: TensorRef, producers: dict[int, OpRecord]) -> bool:
    """``cat``'s ``can_fuse_reduction``: the value is a reduction's output, or a pointwise value
    computed from one (a softmax's normalize reads its statistics). A ``pointwise_cat`` of it
    would recompute its expression for every output element, so a ``cat`` with no pointwise
    user keeps such inputs in their own kernels (``ConcatKernel``)."""
    pending, seen = [ref.value_id], {ref.value_id}
    while pending:
        producer = producers.get(pending.pop())
        if producer is None or producer.name in CAT_OPS:
            continue
        kind = _node_kind(producer)
        if kind is NodeKind.REDUCTION:
            return True
        if kind is NodeKind.POINTWISE:
            fresh = {read.value_id for read in producer.reads} - seen
            seen |= fresh
            pending.extend(fresh)
    return False


#: Ops Inductor decomposes into statistics (a reduction) and a pointwise normalize that reads
#: the input again: softmaxes and the norms (``torch/_decomp``, ``torch/_refs``).
NORMALIZATIONS = frozenset({
    "_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax", "native_layer_norm",
    "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional", "cudnn_batch_norm", "miopen_batch_norm",
    "_fused_rms_norm", "rms_norm",
})


def split_normalizations(graph: _Graph) -> None:
    """Each normalization becomes its statistics reduction and a pointwise normalize (see
    :func:`split_normalization`); the normalize is then inlined or fused like any pointwise value
    (into a row-wise statistics kernel, or recomputed by a reader over other dims)."""
    graph.ops = [part for op in graph.ops for part in split_normalization(op, graph.fresh_id)]


def split_normalization(op: OpRecord, fresh_id: Callable[[], int]) -> tuple[OpRecord, ...]:
    """``(statistics, normalize)`` for a normalization, else ``(op,)``: the statistics
    reduction keeps the op's FLOPs and writes the per-row statistics — a norm's own small
    outputs (mean and rstd; an RMS norm's rstd), a softmax's row max and row sum (the buffers
    its decomposition stores: ``amax``, then ``sum(exp(x - amax))``); the normalize reads the
    input and the statistics and writes the normalized output. A batch norm's updated running
    statistics (written over its inputs' storage) are the statistics kernel's too; the
    normalize does not read them."""
    if (
        op.category is not Category.REDUCTION  # the cheap test first: most ops are not
        or _short_op_name(op) not in NORMALIZATIONS
        or _node_kind(op) is not NodeKind.REDUCTION
    ):
        return (op,)
    rows = _loop(op, NodeKind.REDUCTION).numel
    out, *small = op.writes
    stats = tuple(small) or tuple(
        replace(out, value_id=fresh_id(), storage_id=fresh_id(), shape=(rows,), strides=(1,),
                offset=0, storage_elements=rows, elements=rows)
        for _ in ("max", "sum")
    )
    updated = {ref.storage_id for ref in op.reads}
    return (
        replace(op, writes=stats),
        replace(op, category=Category.POINTWISE,
                reads=(*op.reads, *(ref for ref in stats if ref.storage_id not in updated)),
                writes=(out,), flops=FlopCount(), call_key=(), reduced_dims=None),
    )


@dataclass(frozen=True)
class Loop:
    """A scheduler node's ``group``: ``numel`` output points × ``rnumel`` reduced elements each;
    a reduction's ``order`` tells reductions over different dims of one input apart (None: a
    pointwise loop)."""

    numel: int
    rnumel: int = 1
    order: tuple | None = None
    #: the reduction folds the innermost dims of its input (rows, not columns)
    inner: bool = True


@dataclass(frozen=True)
class SchedulerNode:
    """One realized value and what computes it: its op, after the pointwise ops inlined into it
    (in execution order). Extern nodes have no loop."""

    kind: NodeKind
    ops: tuple[OpRecord, ...]
    loop: Loop | None

    @property
    def op(self) -> OpRecord:
        return self.ops[-1]

    @functools.cached_property
    def loads(self) -> tuple[TensorRef, ...]:
        """The values it loads from memory (made outside its ops), each once at its largest
        view: asked for both its dependencies and its buffers, so found once."""
        return _external_reads(self.ops)


def _loop(op: OpRecord, kind: NodeKind) -> Loop | None:
    if kind is NodeKind.EXTERN:
        return None
    if kind is NodeKind.POINTWISE:
        return Loop(max((ref.elements for ref in op.writes), default=0))
    return _reduced_loop(op)


def _reduced_loop(op: OpRecord) -> Loop:
    """The loop of a reduction op: its output points × the elements each folds."""
    if not op.reads:
        return Loop(max((ref.elements for ref in op.writes), default=0))
    source = op.reads[0]
    total = math.prod(source.shape)
    if op.reduced_dims is None:
        points = max(min((ref.elements for ref in op.writes), default=1), 1)
        return Loop(points, max(total // points, 1), (source.shape, None),
                    _points_are_outer_dims(source.shape, points))
    reduced = max(math.prod(source.shape[d] for d in op.reduced_dims), 1)
    return Loop(total // reduced, reduced, _reduced_layout(source, op.reduced_dims),
                _folds_innermost(source, op.reduced_dims))


def _points_are_outer_dims(shape: Sequence[int], points: int) -> bool:
    """Whether a reduction of ``shape`` to ``points`` outputs keeps whole outer dims. A group
    norm's (N, G) statistics over (N, C, …) do not (1 < G < C): its normalize loop reads them at
    ``n·G + c // (C/G)``, an index that is not a prefix of its own loop, so the scheduler cannot
    match it with the statistics' store (``Scheduler.fusable_read_and_write``) and the
    normalize stays a kernel of its own."""
    return any(math.prod(shape[:k]) == points for k in range(len(shape) + 1))


def _folds_innermost(ref: TensorRef, dims: tuple[int, ...]) -> bool:
    """Every reduced dim lies inside every kept dim in memory (size-1 dims aside)."""
    strides = ref.strides or tuple(math.prod(ref.shape[d + 1:]) for d in range(len(ref.shape)))
    reduced = [strides[d] for d in dims if ref.shape[d] > 1]
    kept = [strides[d] for d in range(len(ref.shape)) if d not in dims and ref.shape[d] > 1]
    return not reduced or not kept or max(reduced) < min(kept)


def _reduced_layout(ref: TensorRef, dims: tuple[int, ...]) -> tuple:
    """The (size, stride) of each reduced dim: ``x.sum(0)`` and ``x.t().sum(1)`` load ``x``
    in the same order (one loop), ``x.sum(0)`` and ``x.sum(1)`` do not."""
    strides = ref.strides or (None,) * len(ref.shape)
    return tuple(sorted(((ref.shape[d], strides[d]) for d in dims), key=repr))


#: ``config.realize_reads_threshold``: a value with several users is stored, not recomputed,
#: once its expression loads more buffers than this.
REALIZE_READS_THRESHOLD = 4
#: ``config.realize_acc_reads_threshold``: an expression loading more buffers is stored.
REALIZE_ACC_READS_THRESHOLD = 8


def _external_reads(ops: Sequence[OpRecord]) -> tuple[TensorRef, ...]:
    produced = {ref.value_id for op in ops for ref in op.writes}
    return largest_per_value(ref for op in ops for ref in op.reads if ref.value_id not in produced)


def _inlined(op: OpRecord, expression: Sequence[OpRecord], graph: _Graph,
             readers: dict[int, list[OpRecord]], kinds: dict[int, NodeKind],
             kept_storages: set[int], born: set[int]) -> bool:
    """Whether Inductor's lowering leaves this pointwise value unrealized (``StorageBox`` not
    stored), so every reader recomputes it: it is not kept, not mutated, not read by an extern
    kernel, loads few enough buffers (``mark_reuse``, ``has_exceeded_max_reads``), and —
    our addition, so that a plan never moves more than eager — recomputing it in each reader
    loads no more than storing it once and loading it in each would. ``kinds``: the node kind
    of each op of the graph, by ``id``."""
    if len(op.writes) != 1:
        return False
    (out,) = op.writes
    users = readers.get(out.value_id, [])
    if (
        not users
        or out.value_id in graph.kept
        or out.value_id in graph.must_realize
        or out.storage_id in kept_storages
        or out.storage_id in born
        or any(kinds[id(user)] in (NodeKind.NOP, NodeKind.EXTERN) for user in users)
        or any(_mutates(user) and out.storage_id in {r.storage_id for r in user.writes}
               for user in users)
    ):
        return False
    loads = _external_reads(expression)
    if len(loads) > REALIZE_ACC_READS_THRESHOLD:
        return False
    if len(users) == 1:
        return True
    loaded = sum(ref.elements for ref in loads)
    return len(loads) <= REALIZE_READS_THRESHOLD and (
        (len(users) - 1) * loaded <= (len(users) + 1) * out.elements
    )


@dataclass
class _Expressions:
    """What a node computes for its op: the inlined producers of what it loads, each narrowed
    to the view of its output the reader loads (``x.cos()[:, :4]`` loads ``x[:, :4]``), then the
    op itself."""

    inlined: dict[int, OpRecord] = field(default_factory=dict)  # inlined value → its op
    _memo: dict[tuple, tuple[OpRecord, ...]] = field(default_factory=dict)

    def __call__(self, op: OpRecord, view: TensorRef | None = None) -> tuple[OpRecord, ...]:
        key = (id(op), view and (view.shape, view.strides, view.offset, view.elements))
        if key not in self._memo:
            op = _narrowed(op, view) if view is not None else op
            parts: list[OpRecord] = []
            for ref in largest_per_value(op.reads):
                producer = self.inlined.get(ref.value_id)
                if producer is not None:
                    parts.extend(self(producer, ref))
            # each op once, in first-use order (by identity: hashing records is slow)
            self._memo[key] = tuple({id(part): part for part in (*parts, op)}.values())
        return self._memo[key]


def _narrowed(op: OpRecord, view: TensorRef) -> OpRecord:
    """A pointwise op computing only ``view`` of its output: each input laid out as the output
    is loaded through the same view (a broadcast or differently strided input stays whole), and
    FLOPs shrink in proportion."""
    out = op.writes[0]
    if view.elements >= out.elements or not view.strides or not out.strides:
        return op
    loaded = _whole_lines(op, view)
    if loaded is None:
        return op

    def through_view(ref: TensorRef) -> TensorRef:
        if (ref.shape, ref.strides) != (out.shape, out.strides):
            return ref
        return replace(ref, shape=loaded.shape, strides=loaded.strides,
                       elements=loaded.elements, offset=ref.offset + loaded.offset - out.offset)

    share = loaded.elements / out.elements
    flops = replace(op.flops, vector=math.ceil(op.flops.vector * share),
                    tensor=math.ceil(op.flops.tensor * share))
    return replace(op, reads=tuple(map(through_view, op.reads)),
                   writes=(replace(view, value_id=out.value_id), *op.writes[1:]), flops=flops)


def _whole_lines(op: OpRecord, view: TensorRef) -> TensorRef | None:
    """``view`` of ``op``'s output widened to whole lines along the dims it reduces: a
    reduction unrolled into a pointwise loop (fewer than ``UNROLL_REDUCTIONS_THRESHOLD``
    elements per line: a softmax over 4) loads each kept output's whole line
    (``x.softmax(1)[:, :1]`` loads every column). None where the view does not cut the
    output's row-major layout dim by dim; ``view`` itself where no read is narrowed (a
    reduction that drops its dims)."""
    out = op.writes[0]
    dims = op.reduced_dims or ()
    if not dims or all((ref.shape, ref.strides) != (out.shape, out.strides) for ref in op.reads):
        return view  # no read is laid out as the output: none is narrowed
    if (
        len(view.shape) != len(out.shape)
        or tuple(out.strides) != _row_major(out.shape)
        or any(view.strides[d] != out.strides[d] for d in dims)
    ):
        return None
    shape, offset = list(view.shape), view.offset
    for d in dims:
        offset -= (view.offset - out.offset) // out.strides[d] % out.shape[d] * out.strides[d]
        shape[d] = out.shape[d]
    return replace(view, shape=tuple(shape), offset=offset, elements=math.prod(shape))


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def _kept_through_metadata_ops(ops: Sequence[OpRecord], kept: frozenset[int]) -> frozenset[int]:
    """``kept`` plus what an in-place metadata op (``transpose_``, ``unsqueeze_``: zero-copy, yet
    recorded as a new version) made a kept value from: that version's data is what is kept
    (stft returns its FFT's output transposed in place)."""
    grown = set(kept)
    for op in reversed(ops):
        if op.category is Category.ZERO_COPY and any(ref.value_id in grown for ref in op.writes):
            grown |= {ref.value_id for ref in op.reads}
    return frozenset(grown)


def lower(ops: Sequence[OpRecord], kept_values: frozenset[int]) -> tuple[list[SchedulerNode],
                                                                         _Graph]:
    """The scheduler nodes Inductor builds for ``ops``: FX passes, ``cat`` lowering, inlining."""
    kept_values = _kept_through_metadata_ops(ops, kept_values)
    unique, duplicates = common_subexpressions(ops, kept_values)
    kept = set(kept_values)
    unique = remove_noop_ops(unique, kept)
    graph = _Graph(ops=eliminate_dead_code(unique, kept), kept=kept, duplicates=duplicates)
    unfuse_bias_add(graph)
    split_normalizations(graph)
    lower_cat(graph)
    readers = graph.readers()
    # a reduction's kind takes its loop to find: found once per op, not once per reader too
    kinds = {id(op): _node_kind(op) for op in graph.ops}
    kept_storages = _kept_storages(graph.ops, graph.kept)
    expression = _Expressions()
    born: set[int] = set()  # storages seen so far: a later write into one is a mutation
    nodes: list[SchedulerNode] = []
    for op in graph.ops:
        kind = kinds[id(op)]
        if kind is NodeKind.POINTWISE and _inlined(op, expression(op), graph, readers, kinds,
                                                   kept_storages, born):
            expression.inlined[op.writes[0].value_id] = op
        elif kind is not NodeKind.NOP:
            nodes.append(SchedulerNode(kind, expression(op), _loop(op, kind)))
        born |= {ref.storage_id for ref in (*op.reads, *op.writes)}
    return nodes, graph


def _kept_storages(ops: Iterable[OpRecord], kept: set[int]) -> set[int]:
    return {ref.storage_id for op in ops for ref in op.writes if ref.value_id in kept}


# --- 3. Fusion rules ------------------------------------------------------------------------
# Each rule returns why two nodes may not fuse (after Inductor's ``WhyNoFuse`` texts), or None.


