"""Structured matmul operands: matrices whose zeros a rule can skip (diagonals, block
diagonals, scaled ones), the builders that make them (:data:`MATRIX_BUILDERS`) and the
structure rules' descriptions (:data:`STRUCTURE_RULES`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from ...costs import (
    NO_FLOPS,
    FlopCount,
    MatmulKind,
    OpKey,
    add_rules,
    aten,
    lookup,
)
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    NOWHERE,
    Box,
    IndexSet,
    Region,
    mapped_set,
    positions_to_set,
    set_intersection,
    set_size,
)
from ...trace.shadow import CONSTANT_LIMIT_ELEMENTS
from ._core import Demand, _biases, _Context
from .distinct import _extent


@dataclass(frozen=True)
class _Walk:
    """One axis of a matmul operand seen as a view of a builder's matrix: operand index i sits
    at coordinate ``origin + i·step`` of the builder's axis ``axis`` (0: rows, 1: columns)."""

    axis: int
    origin: int
    step: int
    size: int

    def indices(self, low: int, high: int) -> IndexSet:
        """The operand indices whose coordinate lies in [low, high)."""
        first = max(-(-(low - self.origin) // self.step), 0)
        last = min(-(-(high - self.origin) // self.step), self.size)
        return (range(first, last),) if first < last else ()


@dataclass(frozen=True)
class _MatrixView:
    """A matmul operand as a strided view (a slice, a transpose, a broadcast batch) of the
    matrices an op built: its free axis (rows of a left operand, columns of a right one) and
    its contracted axis each walk one axis of the builder's matrices; ``batch`` leading
    broadcast dims come before the builder's own batch dims."""

    free: _Walk
    contracted: _Walk
    batch: int
    #: the operand's batch dims are not the builder's (``(B, H, L, L)`` read as ``(B·H, L, L)``
    #: by a ``bmm``): each batch entry is one of its matrices, which one unknown here
    merged: bool = False


def _matrix_view(ref: TensorRef, written: TensorRef, free_dim: int) -> _MatrixView | None:
    """``ref`` as a view of ``written`` (a contiguous (batch of) matrices), or None if it is not
    one whose two matrix axes each walk one axis of ``written``'s matrices."""
    rank = len(written.shape)
    batch = len(ref.shape) - rank
    if rank < 2 or len(ref.strides) != len(ref.shape) or len(ref.shape) < 2:
        return None
    height, width = written.shape[-2:]
    same_batch = batch >= 0 and ref.shape[batch:-2] == written.shape[:-2] and (
        ref.strides[batch:-2] == written.strides[:-2]
    ) and not any(ref.strides[:batch])
    # batch dims reshaped: every batch step lands on a whole matrix of ``written``
    merged = not same_batch and all(s % (height * width) == 0 for s in ref.strides[:-2])
    start = ref.offset - written.offset
    if merged:
        start %= height * width
    if (
        not (same_batch or merged)
        or written.strides[-2:] != (width, 1)
        or not 0 <= start < height * width
    ):
        return None
    steps: list[tuple[int, int] | None] = []
    for size, stride in zip(ref.shape[-2:], ref.strides[-2:], strict=True):
        if size == 1:
            steps.append(None)  # its step is never taken: the other axis decides
        elif stride > 0 and stride % width == 0:
            steps.append((0, stride // width))
        elif 0 < stride < width:
            steps.append((1, stride))
        else:
            return None
    free_step, other_step = steps if free_dim == -2 else steps[::-1]
    free_axis = free_step[0] if free_step else 1 - other_step[0] if other_step else 0
    other_axis = other_step[0] if other_step else 1 - free_axis
    if free_axis == other_axis:
        return None
    origin = divmod(start, width)
    free_size, other_size = ref.shape[free_dim], ref.shape[-1 if free_dim == -2 else -2]
    walks = (
        _Walk(free_axis, origin[free_axis], free_step[1] if free_step else 1, free_size),
        _Walk(other_axis, origin[other_axis], other_step[1] if other_step else 1, other_size),
    )
    if any(w.origin + (w.size - 1) * w.step >= (height, width)[w.axis] for w in walks):
        return None
    return _MatrixView(*walks, batch, merged)


@dataclass(frozen=True)
class _Diagonal:
    """An operand with at most one nonzero per row and column, a diagonal of some offset:
    free index f pairs with contracted index ``pairs[f][0]``, whose value is element
    ``pairs[f][1]`` along the last dim of ``vector`` (None: ``eye``, or a scaled diagonal whose
    vector is charged nothing — less). ``complete``: every free index has a partner."""

    pairs: dict[int, tuple[int, int]]
    vector: TensorRef | None
    complete: bool

    def unsourced(self) -> _Diagonal:
        return replace(self, vector=None)

    def product(self, context: _Context, region: Region, position: int) -> Demand:
        """out[i, j] = d[i]·B[partner(i), j] (left) or A[i, partner(j)]·d[j] (right), zero for
        an index with no partner: one multiply per nonzero output (none for ``eye``)."""
        lead = len(context.op.writes[0].shape) - 2
        free_dim = lead + position
        other_boxes, vector_boxes, products = [], [], 0
        for box in region.boxes:
            hits = [f for r in box[free_dim] for f in r if f in self.pairs]
            if not hits:
                continue
            partners = positions_to_set(self.pairs[f][0] for f in hits)
            kept = box[lead + 1 - position]  # the other operand's free positions
            other_boxes.append(
                (*box[:lead], partners, kept) if position == 0 else (*box[:lead], kept, partners)
            )
            batch = box[lead + 1 - len(self.vector.shape) : lead] if self.vector else ()
            vector_boxes.append((*batch, positions_to_set(self.pairs[f][1] for f in hits)))
            products += len(hits) * set_size(kept) * math.prod(set_size(s) for s in box[:lead])
        # an output with no position may lie where the diagonal has no partner: only a full
        # diagonal maps c of them to c elements of the other operand
        opaque = region.opaque if self.complete else 0
        operands = [NOWHERE, Region.of(other_boxes, opaque)][:: 1 - 2 * position]
        if self.vector is None:
            return Demand((*_biases(context, region), *operands), NO_FLOPS, structure=_DIAGONAL)
        picked = Region.of(vector_boxes, min(opaque, self.vector.elements))
        flops = FlopCount(vector=products + opaque)
        extra = ((self.vector, picked),)
        return Demand((*_biases(context, region), *operands), flops, extra, structure=_DIAGONAL)


def _diagonal(view: _MatrixView, offset: int, vector: TensorRef | None) -> _Diagonal:
    """Builder element (r, c) is nonzero only where c − r = ``offset``; its value is vector
    element min(r, c) (diag_embed's ``out[..., i, i + offset] = v[..., i]``, and for a
    negative offset ``out[..., i − offset, i] = v[..., i]``)."""
    free, contracted = view.free, view.contracted
    pairs = {}
    for f in range(free.size):
        coordinate = free.origin + f * free.step
        target = coordinate + offset if free.axis == 0 else coordinate - offset
        partner, remainder = divmod(target - contracted.origin, contracted.step)
        if not remainder and 0 <= partner < contracted.size:
            pairs[f] = (partner, min(coordinate, target))
    return _Diagonal(pairs, vector, len(pairs) == free.size)


@dataclass(frozen=True)
class _Block:
    """A dense block of a block-diagonal operand: the operand's free and contracted positions
    inside it, and where operand positions fall in its ``source`` (read ``position`` of the
    builder): ``origin + i·step`` along the builder axis ``free_axis`` or the other one."""

    free: IndexSet
    contracted: IndexSet
    source: TensorRef
    position: int
    free_axis: int
    free_walk: tuple[int, int]
    contracted_walk: tuple[int, int]

    def source_box(self, hits: IndexSet, contracted: IndexSet | None = None) -> Box:
        """The source elements the free positions ``hits`` need, at the contracted positions
        ``contracted`` (all of the block's by default); a 1-D source is one row of the
        matrix, a 0-d one a single element."""
        free = mapped_set(hits, *self.free_walk)
        other = mapped_set(self.contracted if contracted is None else contracted,
                           *self.contracted_walk)
        box = (free, other) if self.free_axis == 0 else (other, free)
        return box[2 - len(self.source.shape) :]


@dataclass(frozen=True)
class _BlockDiagonal:
    """An operand whose nonzeros are dense blocks on its diagonal (``torch.block_diag``)."""

    blocks: tuple[_Block, ...]
    charged: bool = True

    def unsourced(self) -> _BlockDiagonal:
        return replace(self, charged=False)

    def product(self, context: _Context, region: Region, position: int) -> Demand:
        """Each block multiplies only the other operand's slice facing it: 2·(block width)
        FLOPs per output element in the block's rows (columns); the zero blocks cost nothing."""
        lead = len(context.op.writes[0].shape) - 2
        free_dim = lead + position
        other_boxes, tensor = [], 0
        sources: dict[int, tuple[TensorRef, list[Box]]] = {}  # by builder read position
        for box in region.boxes:
            kept = box[lead + 1 - position]
            for block in self.blocks:
                hits = set_intersection(box[free_dim], block.free)
                if not hits:
                    continue
                other_boxes.append(
                    (*box[:lead], block.contracted, kept)
                    if position == 0
                    else (*box[:lead], kept, block.contracted)
                )
                sources.setdefault(block.position, (block.source, []))[1].append(
                    block.source_box(hits)
                )
                tensor += (
                    2 * set_size(block.contracted) * set_size(hits) * set_size(kept)
                    * math.prod(set_size(s) for s in box[:lead])
                )
        operands = [NOWHERE, Region.of(other_boxes)][:: 1 - 2 * position]
        extra = tuple((ref, Region.of(boxes)) for ref, boxes in sources.values())
        flops = FlopCount(tensor=tensor, kind=MatmulKind.MATMUL)
        inputs = (*_biases(context, region), *operands)
        extra = extra if self.charged else ()
        return Demand(inputs, flops, extra, structure="block-diagonal matmul")


def _block_diagonal(view: _MatrixView, sources: Sequence[TensorRef]) -> _BlockDiagonal:
    """``block_diag(A₁, A₂, …)``: Aₖ (a 1-D tensor is one row, a 0-d one 1×1) sits at the rows
    and columns after the blocks before it."""
    blocks, corner = [], [0, 0]
    free, contracted = view.free, view.contracted
    for position, source in enumerate(sources):
        size = (*(1,) * (2 - len(source.shape)), *source.shape)
        low, other_low = corner[free.axis], corner[contracted.axis]
        free_positions = free.indices(low, low + size[free.axis])
        contracted_positions = contracted.indices(other_low, other_low + size[contracted.axis])
        if free_positions and contracted_positions:
            blocks.append(
                _Block(
                    free_positions,
                    contracted_positions,
                    source,
                    position,
                    free.axis,
                    (free.origin - low, free.step),
                    (contracted.origin - other_low, contracted.step),
                )
            )
        corner = [corner[0] + size[0], corner[1] + size[1]]
    return _BlockDiagonal(tuple(blocks))


#: Bands the free positions of a triangular operand are cut into: each band keeps the
#: contracted positions all its rows keep (inside the triangle: a floor).
_TRIANGLE_BANDS = 64


@dataclass(frozen=True)
class _Triangle:
    """An operand built by ``tril``/``triu`` of data: builder element (r, c) is nonzero only
    where c − r ≤ ``offset`` (``lower``) or ≥ it. The operand itself is charged at its
    nonzeros, so the walk finds their source through the ops between (a scaling, the
    ``tril``)."""

    view: _MatrixView
    lower: bool
    offset: int

    def unsourced(self) -> _Triangle:
        return self  # its elements are the operand's own: whatever scaled it, they are read

    def nonzeros(self, free: int) -> IndexSet:
        """The contracted positions where free position ``free`` may be nonzero: one interval
        of the builder's other axis, from 0 or up to its end."""
        walk, other = self.view.free, self.view.contracted
        coordinate = walk.origin + free * walk.step
        # along the builder's rows (axis 0) the bound is c ≤ r + offset (tril); along its
        # columns, r ≥ c − offset; triu reverses both
        edge = coordinate + self.offset if walk.axis == 0 else coordinate - self.offset
        upper_end = (walk.axis == 0) == self.lower  # the interval is [0, edge]
        low, high = (0, edge + 1) if upper_end else (edge, 1 << 62)
        return other.indices(low, high)

    def layout(self, frees: list[int]) -> tuple[IndexSet, list[int], list[IndexSet]]:
        """For :func:`sparse_product`: the other operand read at the union of the kept
        intervals (one interval: they share an end), every free position computed."""
        spans = [self.nonzeros(f) for f in frees]
        hull = [r for span in spans for r in span]
        union = (range(min(r.start for r in hull), max(r.stop for r in hull)),) if hull else ()
        return union, frees, spans

    def product(self, context: _Context, region: Region, position: int) -> Demand:
        """out[i, j] = Σ over the contracted positions free index i (j) keeps of the triangle
        times the other operand (:func:`sparse_product`)."""
        return sparse_product(context, region, position, self.layout, "triangular matmul")


def sparse_product(
    context: _Context, region: Region, position: int,
    layout: Callable[[list[int]], tuple[IndexSet, list[int], list[IndexSet]]], structure: str,
) -> Demand:
    """A matmul whose operand ``position`` has known zeros: ``layout`` maps a box's free
    positions to the contracted positions the other operand is read at, the free positions
    computed (the others are copies) and each one's nonzero contracted positions. 2 FLOPs per
    (nonzero, output column) pair of a computed position; this operand read at its computed
    nonzeros, in bands (a floor). Outputs with no position: nothing (fewer, never more)."""
    lead = len(context.op.writes[0].shape) - 2
    free_dim = lead + position
    other_boxes, own_boxes, tensor = [], [], 0
    for box in region.boxes:
        kept = box[lead + 1 - position]  # the other operand's free positions
        contracted, computed, spans = layout([f for r in box[free_dim] for f in r])
        batch = math.prod(set_size(s) for s in box[:lead])
        tensor += 2 * sum(map(set_size, spans)) * set_size(kept) * batch
        if contracted:
            other_boxes.append((*box[:lead], contracted, kept) if position == 0
                               else (*box[:lead], kept, contracted))
        own_boxes += [
            (*box[:lead], *((rows, common) if position == 0 else (common, rows)))
            for rows, common in _bands(computed, spans)
        ]
    operands = [Region.of(own_boxes), Region.of(other_boxes)][:: 1 - 2 * position]
    flops = FlopCount(tensor=min(tensor, context.record.flops.tensor), kind=MatmulKind.MATMUL)
    return Demand((*_biases(context, region), *operands), flops, structure=structure)


def _bands(frees: list[int], spans: list[IndexSet]) -> list[tuple[IndexSet, IndexSet]]:
    """Free positions (each keeping its span) cut into :data:`_TRIANGLE_BANDS` bands, each
    with the contracted positions all of its free positions keep."""
    band = max(1, -(-len(frees) // _TRIANGLE_BANDS))
    bands = []
    for start in range(0, len(frees), band):
        common: IndexSet = spans[start]
        for span in spans[start + 1 : start + band]:
            common = set_intersection(common, span)
        if common:
            bands.append((positions_to_set(frees[start : start + band]), common))
    return bands


_Structure = _Diagonal | _BlockDiagonal | _Triangle


_DIAGONAL = "diagonal matmul"


#: Ops that build matrices of known structure, keyed as the other registries: (the traced
#: builder, the operand's view of its output) → the structure, or None.
MATRIX_BUILDERS: dict[OpKey, Callable[[_Context, TracedOp, _MatrixView], _Structure | None]] = {}


def matrix_builder(ops: Sequence[OpKey]) -> Callable:
    """Decorator: register a structured-matrix builder for ``ops`` (no key twice)."""

    def decorate(builder: Callable) -> Callable:
        add_rules(MATRIX_BUILDERS, ops, builder, "matrix-builder")
        return builder

    return decorate


def _built_offset(builder: TracedOp) -> int | None:
    """The offset of the diagonal that ``builder`` (diag_embed, diag, diagflat) writes on the
    last two dims of its output from a vector; None when it extracts a diagonal instead (its
    output has fewer dims than its input) or writes on other dims."""
    rank = len(builder.writes[0].shape)
    if rank < 2 or not builder.reads or len(builder.reads[0].shape) >= rank:
        return None
    dims = (builder.argument("dim1", -2) % rank, builder.argument("dim2", -1) % rank)
    if dims != (rank - 2, rank - 1):
        return None
    return builder.argument("offset", builder.argument("diagonal", 0))


def _boxed_vector(builder: TracedOp) -> TensorRef | None:
    """The vector a diagonal builder reads, if a vector index is a position along its last dim
    (diagflat flattens a tensor of any rank: its index has no box there)."""
    vector = builder.reads[0]
    return vector if len(vector.shape) == len(builder.writes[0].shape) - 1 else None


@matrix_builder([aten.diag_embed, aten.diag, aten.diagflat])
def _built_diagonal(context: _Context, builder: TracedOp, view: _MatrixView) -> _Diagonal | None:
    offset = _built_offset(builder)
    vector = _boxed_vector(builder)
    if offset is None or view.merged and vector is not None:  # its batch is not the vector's
        return None
    return _diagonal(view, offset, vector)


@matrix_builder([aten.eye])
def _built_identity(context: _Context, builder: TracedOp, view: _MatrixView) -> _Diagonal:
    return _diagonal(view, 0, None)


@matrix_builder([aten.block_diag])
def _built_blocks(context: _Context, builder: TracedOp, view: _MatrixView) -> _BlockDiagonal:
    return _block_diagonal(view, builder.reads)


@matrix_builder([aten.tril, aten.triu])
def _built_triangle(context: _Context, builder: TracedOp, view: _MatrixView) -> _Triangle | None:
    """``tril``/``triu`` of data (a known source, a constant mask, is counted by its
    nonzeros instead: :func:`.matmul.known_products`)."""
    if not builder.reads or builder.reads[0].value_id in context.known:
        return None
    return _Triangle(view, builder.base.startswith("tril"), builder.argument("diagonal", 0))


def _scaling(dividend_only: bool) -> Callable[[_Context, TracedOp, _MatrixView], _Structure | None]:
    """A structured matrix times (or, as the dividend, over) a scalar keeps its zeros; its
    source is then charged nothing (less)."""

    def built(context: _Context, builder: TracedOp, view: _MatrixView) -> _Structure | None:
        matrices = [r for r in builder.reads if math.prod(r.shape) > 1]
        if len(matrices) != 1 or (dividend_only and builder.reads[0] is not matrices[0]):
            return None
        inner = context.producers.get(matrices[0].value_id)
        if inner is None or not inner.writes or not _as_written(matrices[0], inner.writes[0]):
            return None
        written = builder.writes[0]
        if (written.shape, written.strides) != (inner.writes[0].shape, inner.writes[0].strides):
            return None
        builder_of = lookup(MATRIX_BUILDERS, inner)
        structure = builder_of(context, inner, view) if builder_of else None
        return structure.unsourced() if structure else None

    return built


matrix_builder([aten.mul])(_scaling(dividend_only=False))


matrix_builder([aten.div])(_scaling(dividend_only=True))


#: Ops whose output is zero at places its arguments fix, whatever the data: the traced op →
#: where its output may be nonzero (a bool tensor of its shape), None where that is not known
#: or the output is past ``CONSTANT_LIMIT_ELEMENTS``. A sum skips the zeros (adding one changes
#: nothing): :func:`.reductions.reduction_demand`.
ZERO_PATTERNS: dict[OpKey, Callable[[TracedOp], torch.Tensor | None]] = {}


def zero_pattern(ops: Sequence[OpKey]) -> Callable:
    """Decorator: register a zero pattern for ``ops`` (no key twice)."""

    def decorate(pattern: Callable) -> Callable:
        add_rules(ZERO_PATTERNS, ops, pattern, "zero-pattern")
        return pattern

    return decorate


def _ones(ref: TensorRef) -> torch.Tensor | None:
    if math.prod(ref.shape) > CONSTANT_LIMIT_ELEMENTS:
        return None
    return torch.ones(ref.shape, dtype=torch.bool)


@zero_pattern([aten.tril, aten.triu])
def _triangle_nonzeros(op: TracedOp) -> torch.Tensor | None:
    """tril(x, k) keeps j ≤ i + k of each matrix, triu(x, k) j ≥ i + k."""
    ones = _ones(op.writes[0])
    if ones is None or ones.dim() < 2:
        return None
    keep = torch.tril if op.base.startswith("tril") else torch.triu
    return keep(ones, op.argument("diagonal", 0))


@zero_pattern([aten.constant_pad_nd])
def _padded_nonzeros(op: TracedOp) -> torch.Tensor | None:
    """A zero pad (``value`` 0) holds the source's elements and zeros around them."""
    ones = _ones(op.reads[0])
    if ones is None or op.argument("value", 0) != 0:
        return None
    return torch.nn.functional.pad(ones, op.argument("pad"), value=False)


@zero_pattern([aten.diag_embed])
def _diagonal_nonzeros(op: TracedOp) -> torch.Tensor | None:
    """diag_embed(v, k, d1, d2) holds v on diagonal k of the (d1, d2) planes, zeros elsewhere."""
    ones = _ones(op.reads[0])
    if ones is None or math.prod(op.writes[0].shape) > CONSTANT_LIMIT_ELEMENTS:
        return None
    return torch.diag_embed(ones, op.argument("offset", 0), op.argument("dim1", -2),
                            op.argument("dim2", -1))


def seen_through(pattern: torch.Tensor, ref: TensorRef, written: TensorRef) -> torch.Tensor | None:
    """``pattern``, a bool tensor of ``written``'s shape, as the view ``ref`` of the same value
    sees it (a slice, a select, a transpose of it); storage ``written`` does not cover counts
    as True (may be nonzero). None past :data:`CONSTANT_LIMIT_ELEMENTS`."""
    if _as_written(ref, written):
        return pattern
    if len(ref.strides) != len(ref.shape) or len(written.strides) != len(written.shape):
        return None
    size = max(_extent(written), _extent(ref))
    if size > CONSTANT_LIMIT_ELEMENTS:
        return None
    storage = torch.ones(size, dtype=torch.bool)
    storage.as_strided(written.shape, written.strides, written.offset).copy_(pattern)
    return storage.as_strided(ref.shape, ref.strides, ref.offset)


def _as_written(ref: TensorRef, written: TensorRef) -> bool:
    return (ref.shape, ref.strides, ref.offset) == (written.shape, written.strides, written.offset)


def _structure(context: _Context, ref: TensorRef, free_dim: int) -> _Structure | None:
    """The known structure of a matmul operand, if an op in :data:`MATRIX_BUILDERS` built it."""
    producer = context.producers.get(ref.value_id)
    builder = lookup(MATRIX_BUILDERS, producer) if producer is not None else None
    if builder is None or not producer.writes:
        return None
    view = _matrix_view(ref, producer.writes[0], free_dim)
    return builder(context, producer, view) if view is not None else None


#: Structured operands the demand rules recognise, with the cheapest standard implementation
#: they price and why it computes the same function.
STRUCTURE_RULES: dict[str, str] = {
    "diagonal matmul": "diag(a, k) @ B (or A @ diag(b, k)), the diagonal built by diag, "
    "diag_embed, diagflat or eye, of any offset, sliced or transposed: priced as the row "
    "(column) scaling a[:, None] * B[k:], one multiply per output element with a nonzero on its "
    "row (column) — the zeros contribute nothing to any output; eye(n) @ B is a copy of B",
    "block-diagonal matmul": "block_diag(A₁, A₂, …) @ x (or x @ block_diag(…)): priced as one "
    "product per block, Aₖ @ x[rows of block k] — the zero blocks contribute nothing",
    "broadcast batch": "a batched matmul whose operands are both broadcast along the batch "
    "(stride 0, e.g. x.expand(B, M, K) @ W), or a convolution of an input broadcast along it: "
    "one GEMM (one convolution), written B times — every batch entry is the same product",
    "equal lines": "A @ B with every row of A alike or every column of B, its value known "
    "(x @ torch.ones(k, n), a given input of repeated rows): every output row (column) is the "
    "first, so priced as that one computed, "
    "2·K FLOPs per distinct demanded output, and copied — x @ ones(k, n) is x's row sums",
    "size-1 reduction": "sum/mean/amax/… over dims of size 1 are the input itself (no "
    "arithmetic); var/std/argmax over them are constants (no input needed)",
    "size-1 norm": "a vector norm over dims of size 1 is |x| (x != 0 for order 0): one op "
    "per output, the input element under it",
    "size-1 normalisation": "softmax over a size-1 dim is 1 and log_softmax is 0 everywhere: "
    "nothing upstream is needed",
    "self difference": "x − x.mean(d, keepdim=True) (or a sum, max… of x) over dims of size 1 "
    "only: the reduction is x itself, so the difference is 0 for every finite x and nothing "
    "upstream is needed — a kernel that writes zeros passes any check on finite inputs",
    "zero factor": "a * b with a known all zeros and b known all finite (a given "
    "torch.zeros input times a given one): the product is 0 whatever they hold, so nothing "
    "upstream is needed — a kernel writes zeros; for any values b may hold inf or NaN",
    "broadcast reduction": "a reduction over dims the input is broadcast along (stride 0, "
    "x.expand(n, m).sum(0)): every reduced element is the same, so one multiply (n·x) or copy "
    "per output",
    "reduced product": "(x @ W + b).sum(1) or .mean(1), the product read by nothing else: "
    "priced as x @ W.sum(1) + b.sum() (divided by N for a mean), K·N adds to reduce W, then a "
    "matrix-vector product, 2·K FLOPs per row — the sum over columns moves inside the product, "
    "as a generated kernel for KernelBench's matmul → sum and matmul → mean problems does",
    "symmetric product": "x.T @ x, x @ x.mT (one value times itself transposed): the output "
    "is symmetric, so a kernel computes one triangle, n(n+1)/2 outputs of the n² (SYRK), and "
    "mirrors it — a part of the output needs at least half its elements computed",
    "triangular matmul": "tril(A, k) @ B or triu (or B times one), A data: priced as the "
    "products of the triangle's elements, 2 FLOPs per (kept element, output column) pair, B "
    "read at the rows the kept rows' triangle reaches — the zeros contribute nothing",
    "known operand values": "A @ B with A or B known (a given triu(randn) input, a constant "
    "mask): priced as the products of nonzero pairs, Σ_k nnz(A[R, k])·nnz(B[k, C]) "
    "multiply-adds per demanded block (R, C), reading only the nonzeros those products use — a "
    "product with a zero factor adds nothing to any output",
    "routing mask": "A @ B with A or B zero wherever a routing mask of unknown values is (a "
    "one-hot (T, E, C) dispatch einsum, the expert slots it fills, dispatch · gate): any "
    "routing may leave a product's every slot empty for all the bound knows, so none is "
    "charged, the mask read whole — a sparse kernel does the routed pairs only",
    "sum of structural zeros": "x.sum(d) (or a mean) of F.pad(x, value=0), tril/triu(x) or "
    "diag_embed(x), read as written or through a view (F.pad(x[None], p)[0]): priced at the "
    "elements that may be nonzero in each demanded line (a tril row i, i + 1 of n) — adding "
    "a zero changes no sum",
    "masked probabilities": "softmax(s.masked_fill(mask, −inf)) (or a where, or s + a bias of "
    "0 and −inf), the mask known (attention written by hand): a masked score is no work and "
    "its probability 0, so the softmax's statistics count the finite scores, and probs @ v the "
    "products of nonzero probabilities, 2 FLOPs per (probability, column) pair; a line left "
    "one finite score is the constant one-hot (causal row 0): no score, no softmax, its output "
    "row the value row it picks — as scaled_dot_product_attention is priced",
    "explicit padding": "a convolution over F.pad(x, value=0) (a max-pool over value=−inf), as "
    "padding='same' with an even kernel builds it: priced as the same op with implicit padding, "
    "so taps on the padding cost nothing — they multiply zeros (compare −inf)",
}
