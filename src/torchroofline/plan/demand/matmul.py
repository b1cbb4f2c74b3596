"""Demand rules of matrix products and attention."""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

import torch

from ...costs import (
    COMPLEX_PRODUCT_FACTOR,
    NO_FLOPS,
    FlopCount,
    MatmulKind,
    aten,
)
from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    NOWHERE,
    Box,
    IndexSet,
    Region,
    box_difference,
    box_intersection,
    box_size,
    full_box,
    positions_to_set,
    set_size,
)
from ._core import (
    Demand,
    _biases,
    _broadcast,
    _broadcast_batch,
    _Context,
    _one_of,
    _op_set,
    _proportional,
    demand_rule,
)
from .constants import _known
from .structures import _structure


@demand_rule([aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten._int_mm])
def matmul_demand(context: _Context) -> Demand:
    """out[..., i, j] needs row i of A and column j of B: 2·K FLOPs per demanded element, times
    :func:`real_products` for complex operands. A structured operand (a diagonal, a block
    diagonal) needs only its nonzeros; a batch both operands broadcast is computed once."""
    op = context.op
    *bias, left, right = op.reads
    region = context.output
    out_shape = op.writes[0].shape
    if any(len(box) != len(out_shape) for box in region.boxes) or len(left.shape) != len(out_shape):
        return _proportional(context)
    for position, ref in ((0, left), (1, right)):
        structure = _structure(context, ref, -2 if position == 0 else -1)
        if structure is not None:
            return _in_real_products(context, structure.product(context, region, position))
    known = known_products(context, region)
    if known is not None:
        return known
    if any(routing_mask(context.producers, ref.value_id, known=context.known)
           for ref in (left, right)):
        return _masked_by_routing(context, region)
    reduction = left.shape[-1]
    lead = len(out_shape) - 2
    # every row of A alike (every column of B): every output row (column) is the first one
    same_rows = context.shortcuts and _equal_lines(context, len(bias), -2)
    same_columns = context.shortcuts and _equal_lines(context, len(bias) + 1, -1)
    if same_rows or same_columns:
        return _equal_lines_demand(context, region, same_rows, same_columns)
    left_boxes = [(*b[:lead], b[-2], (range(reduction),)) for b in region.boxes]
    right_boxes = [(*b[:lead], (range(reduction),), b[-1]) for b in region.boxes]
    inputs = list(_biases(context, region))
    # c outputs with no position span at least ⌈c/N⌉ rows of A and ⌈c/M⌉ columns of B
    rows, columns = out_shape[-2], out_shape[-1]
    left_opaque = -(-region.opaque // max(columns, 1)) * reduction
    right_opaque = -(-region.opaque // max(rows, 1)) * reduction
    # outputs known dim by dim (a diagonal's): each row index needs its row of A, each column
    # index its column of B
    left_spreads = region.lines({lead + 1: (range(reduction),)})
    right_spreads = region.lines({lead: (range(reduction),)})
    inputs += [
        Region.of(left_boxes, left_opaque, left_spreads),
        Region.of(right_boxes, right_opaque, right_spreads),
    ]
    computed = region.count
    structure = None
    if lead and _broadcast_batch(left) and _broadcast_batch(right):
        computed = Region.of(
            [((range(1),), *b[1:]) for b in region.boxes], region.opaque // out_shape[0]
        ).count
        structure = "broadcast batch"
    elif context.shortcuts and (_transposes_of_each_other(left, right) or _symmetric_square(
        context.producers, left, right
    )):
        computed = _symmetric_products(region, out_shape)
        structure = "symmetric product"
    tensor = 2 * reduction * computed * real_products(context)
    flops = FlopCount(tensor=min(tensor, context.record.flops.tensor), kind=MatmulKind.MATMUL)
    return Demand(tuple(inputs), flops, structure=structure)


def equal_lines(value: torch.Tensor, dim: int) -> bool:
    """Whether every line of a known matmul operand along ``dim`` (-2: its rows, -1: its
    columns) is the first one (``torch.ones``, ``torch.full``, a given input of repeated
    rows). The second line is compared first, so a random operand is rejected after one."""
    if value.shape[dim] < 2:
        return False
    first = value.narrow(dim, 0, 1)
    return bool((value.narrow(dim, 1, 1) == first).all()) and bool((value == first).all())


def operand_dims(op: TracedOp) -> tuple[tuple[TensorRef, int], ...]:
    """A matmul's two operands, each with the dim along which its lines make distinct output
    lines: A's rows (-2), B's columns (-1)."""
    return ((op.reads[-2], -2), (op.reads[-1], -1))


def _equal_lines(context: _Context, position: int, dim: int) -> bool:
    """Whether matmul read ``position`` is a known value whose lines along ``dim`` are all
    alike (:func:`equal_lines`; one broadcast along ``dim``, stride 0, is the algebra's
    "broadcast operand computed once")."""
    value = _known(context, position)
    return value is not None and equal_lines(value, dim)


def _equal_lines_demand(
    context: _Context, region: Region, same_rows: bool, same_columns: bool
) -> Demand:
    """A product with every row of A alike (or every column of B): out[..., i, j] is
    out[..., 0, j] (out[..., i, 0]), so a kernel computes the first output row (column) the
    demanded ones stand for, 2·K FLOPs per distinct demanded output, and copies it (``A @
    ones(K, N)``: row sums, broadcast). It reads the demanded rows of A (one, where alike) and
    the demanded columns of B (one, where alike), each over the whole reduction."""
    reduction = context.op.reads[-2].shape[-1]
    one = (range(1),)
    boxes = [(*b[:-2], one if same_rows else b[-2], one if same_columns else b[-1])
             for b in region.boxes]
    rows, columns = context.op.writes[0].shape[-2:]
    spread = (rows if same_rows else 1) * (columns if same_columns else 1)
    computed = Region.of(boxes, -(-region.opaque // spread)).count
    # c outputs with no position span at least ⌈c/N⌉ rows of A and ⌈c/M⌉ columns of B, one
    # where they are alike
    lines_of_a = 1 if same_rows else -(-region.opaque // max(columns, 1))
    lines_of_b = 1 if same_columns else -(-region.opaque // max(rows, 1))
    whole = (range(reduction),)
    inputs = [
        *_biases(context, region),
        Region.of([(*b[:-1], whole) for b in boxes],
                  lines_of_a * reduction if region.opaque else 0),
        Region.of([(*b[:-2], whole, b[-1]) for b in boxes],
                  lines_of_b * reduction if region.opaque else 0),
    ]
    tensor = 2 * reduction * computed * real_products(context)
    flops = FlopCount(tensor=min(tensor, context.record.flops.tensor), kind=MatmulKind.MATMUL)
    return Demand(tuple(inputs), flops, structure="equal lines")


def _transposes_of_each_other(left: TensorRef, right: TensorRef) -> bool:
    """Whether ``right`` is ``left`` read transposed (``x.T @ x``, ``x @ x.mT``): the same
    value at the same offset, the last two dims swapped, the batch dims alike (a dim of size 1
    places no element: its stride is any)."""
    return (
        left.value_id == right.value_id
        and left.offset == right.offset
        and left.shape[:-2] == right.shape[:-2]
        and all(a == b for a, b, n in zip(left.strides[:-2], right.strides[:-2],
                                          left.shape[:-2], strict=True) if n > 1)
        and left.shape[-2:] == right.shape[-2:][::-1]
        and left.strides[-2:] == right.strides[-2:][::-1]
    )


#: most symmetric products walked back through to prove a value symmetric (s, s², s⁴, …)
MAX_SYMMETRIC_DEPTH = 8


def _symmetric_square(producers: Mapping[int, TracedOp], left: TensorRef, right: TensorRef,
                      depth: int = 0) -> bool:
    """Whether ``left`` and ``right`` read one symmetric matrix S whole (S = xᵀx, or S = T·T
    of a symmetric T: S² = S·Sᵀ, so a square of S is symmetric too), each plain or
    transposed: S read either way is S, so the product is S·Sᵀ, symmetric (the demand walk
    charges one triangle of it as of x.T @ x). Only a product of the two operands proves S
    symmetric (a bias added could break it)."""
    if depth > MAX_SYMMETRIC_DEPTH or left.value_id != right.value_id or (
        left.offset != right.offset or left.shape != right.shape
    ):
        return False
    op = producers.get(left.value_id)
    if op is None or op.func is None or op.func.overloadpacket not in (aten.mm, aten.bmm):
        return False
    written = op.writes[0]
    views = (written.strides, (*written.strides[:-2], *written.strides[-2:][::-1]))
    if written.offset != left.offset or written.shape != left.shape or not all(
        ref.strides in views for ref in (left, right)
    ):
        return False
    first, second = op.reads[-2:]
    return _transposes_of_each_other(first, second) or _symmetric_square(
        producers, first, second, depth + 1)


def _symmetric_products(region: Region, out_shape: Sequence[int]) -> int:
    """Outputs a kernel computes for the demanded ``region`` R of a symmetric product
    (AᵀA)ᵀ = AᵀA: out[j, i] is out[i, j], so it computes the folded set {(min, max)} of R, of
    (|R ∪ Rᵀ| + |diagonal of R|) / 2 elements — n(n+1)/2 per matrix for the whole output.
    Both terms are counted from below (R's boxes with their transposes, the diagonal's points
    in the boxes and on main-diagonal lines), so the count never exceeds the truth."""
    whole = math.prod(out_shape)
    if region.count >= whole:
        n = out_shape[-1]
        return whole // (n * n) * (n * (n + 1) // 2)
    swapped = [(*box[:-2], box[-1], box[-2]) for box in region.boxes]
    # |R ∪ Rᵀ| = 2|R| − |R ∩ Rᵀ|, the meet from above: every pair of a box and a transposed
    # one (exact for disjoint boxes), and each opaque element and its mirror in it
    meet = sum(box_size(common) for box in region.boxes for mirror in swapped
               if (common := box_intersection(box, mirror)) is not None)
    union = max(region.count, Region.of([*region.boxes, *swapped]).count,
                2 * region.count - meet - 2 * region.opaque)
    on_diagonal = [(*box[:-2], *meet) for box in region.boxes
                   if (meet := box_intersection((box[-2],), (box[-1],))) is not None]
    lead = len(out_shape) - 2
    lines = sum(line.count for line in region.diagonals
                if line.dims == (lead, lead + 1) and line.origin[0] == line.origin[1]
                and line.step[0] == line.step[1])
    diagonal = max(Region.of(on_diagonal).count if on_diagonal else 0, lines)
    return -(-(union + diagonal) // 2)


#: Conversions whose complex output of a real input has no imaginary part
_CASTS = _op_set([aten._to_copy])


def _is_complex(ref: TensorRef) -> bool:
    return ref.dtype.startswith("complex")


def _real_valued(context: _Context, position: int) -> bool:
    """Whether read ``position`` holds no imaginary part whatever the inputs: a real tensor,
    a real tensor cast to complex (``x.to(torch.complex64)``), or a known value whose
    imaginary part is zero."""
    ref = context.op.reads[position]
    if not _is_complex(ref):
        return True
    producer = context.producers.get(ref.value_id)
    if producer is not None and _one_of(producer, _CASTS) and not _is_complex(producer.reads[0]):
        return True
    value = _known(context, position)
    return value is not None and no_imaginary_part(value)


def no_imaginary_part(value: torch.Tensor) -> bool:
    """Whether a known complex operand is real-valued: structure a product skips, as it skips
    zeros (one real product fewer per complex one, :func:`real_products`)."""
    return value.is_complex() and not bool(value.imag.any())


#: Real matrix products one product of two matrices takes, by how many of the two are
#: complex (an imaginary part that may be nonzero): a real one times a complex one is two
#: (A·Br and A·Bi), two complex ones three (costs.COMPLEX_PRODUCT_FACTOR, Gauss's method)
_REAL_PRODUCTS = (1, 2, COMPLEX_PRODUCT_FACTOR)


def real_products(context: _Context) -> int:
    """Real products per product of the op's two matrix or vector operands (its last two
    reads; a bias is added, not multiplied): what every implementation performs for each
    complex multiply-add, and what the cost rule charges (``costs.complex_factor``) for two
    complex operands. An operand cast from a real tensor halves the work Gauss's method
    needs: its imaginary part is zero, so A·B = A·Br + i·A·Bi."""
    reads = len(context.op.reads)
    return _REAL_PRODUCTS[sum(not _real_valued(context, p) for p in (reads - 2, reads - 1))]


def _in_real_products(context: _Context, demand: Demand) -> Demand:
    """A structure rule's FLOPs, counted per complex multiply-add, in real ones
    (:func:`real_products`), never above the op's own in all."""
    products = real_products(context)
    if products == 1:
        return demand
    moved = context.record.flops
    tensor = min(demand.flops.tensor * products, moved.tensor)
    vector = min(demand.flops.vector * products, moved.tensor + moved.vector - tensor)
    return replace(demand, flops=replace(demand.flops, tensor=tensor, vector=vector))


#: A known operand with fewer zeros than this share of its elements is read as dense: its
#: zeros (``torch.rand`` draws 0.0 about once in 2**24 values) remove at most this share of
#: the products, which no tile-wise tensor-core kernel turns into time saved.
SCATTERED_ZERO_SHARE = 1e-3


def _nonzeros(context: _Context, position: int) -> torch.Tensor | None:
    """Where read ``position`` (a matrix or a batch of them) is nonzero, as a (batch, rows,
    columns) boolean tensor, if its value is known and has zeros enough to be structure (at
    least :data:`SCATTERED_ZERO_SHARE` of it; a dense one skips nothing)."""
    ref = context.op.reads[position]
    value = _known(context, position)
    if value is None or not has_structure(value):
        return None
    return (value != 0).reshape(math.prod(ref.shape[:-2]), *ref.shape[-2:])


#: Positions of a known operand a sample reads before the operand is scanned whole for its
#: zeros: one uniform draw in each of ``ZERO_SAMPLE`` equal strata of the flat operand
#: (jittered sampling, :func:`_sample_positions`). A set of zeros that is the share p_i of
#: stratum i escapes every draw with probability ∏(1 - p_i) ≤ (1 - p)^m ≤ e^(-p·m), p its share
#: of the operand, wherever it lies (scattered, a block, a triangle): no more than m
#: independent uniform draws. What the bound relies on: a zero set of 1 % or more escapes with
#: probability ≤ e^-41 ≈ 1.6e-18, one of 0.5 % with ≤ e^-20 ≈ 1.3e-9; a set that escapes is
#: priced dense, so the bound charges at most its share of the operand's products too much
#: (expected, at most 1/(e·m) ≈ 9e-5 of them; the smallest structure counted at all is
#: :data:`SCATTERED_ZERO_SHARE`). 2^12 draws touch 2^12 pages of a large operand: ~0.1 ms, where
#: reading a 4096² fp32 operand whole takes ~4 ms (the analysis on meta tensors: ~1.3 ms). The
#: draws are seeded, so the same inputs always give the same bound. A sample that finds a zero
#: leads to the exact count.
ZERO_SAMPLE = 2**12
#: Operands at most this many times the sample (262,144 elements, ~0.05 ms to count) are
#: counted whole: a sample would save little.
_SAMPLE_ABOVE = 64


@functools.lru_cache(maxsize=32)
def _sample_positions(elements: int) -> torch.Tensor:
    """One seeded uniform position in each of :data:`ZERO_SAMPLE` equal strata of
    ``range(elements)``, ascending: the reads walk memory forward (on a 64 MB operand about
    half the time of the same number of unordered draws), and the same size reuses them. They
    are read with ``index_select`` (one thread: ~0.13 ms on a 4096² operand), not ``take``,
    whose two-thread loop took ~12 ms whenever the other core was busy."""
    bounds = torch.arange(ZERO_SAMPLE + 1, dtype=torch.int64) * elements // ZERO_SAMPLE
    widths = (bounds[1:] - bounds[:-1]).to(torch.float64)
    draws = torch.rand(ZERO_SAMPLE, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return bounds[:-1] + (draws * widths).to(torch.int64)


#: Comparisons, whose output is a mask (0 or 1 wherever it is), and ops that keep a mask's
#: zeros: a cast or copy of it, a product with it (``one_hot * (position < C)``,
#: ``dispatch * gate``), a matrix product with it (an expert slot no token fills sums to 0).
_COMPARISONS = _op_set([aten.eq, aten.ne, aten.lt, aten.le, aten.gt, aten.ge,
                        aten.logical_and, aten.logical_or, aten.one_hot])
_KEEP_ZEROS = _op_set([aten._to_copy, aten.clone, aten.contiguous, aten.mul])
_PRODUCTS = _op_set([aten.mm, aten.bmm])

#: Ops a value is looked up through to find the routing mask it is gated by.
_MASK_DEPTH = 12


def routing_mask(
    producers: Mapping[int, TracedOp], value_id: int, products: bool = True,
    known: Collection[int] = (), depth: int = _MASK_DEPTH,
) -> bool:
    """Whether the value is zero wherever a routing mask of values not ``known`` is (a one-hot
    dispatch tensor, ``dispatch · gate``): a comparison of indices (an integer read:
    ``chosen[:, None] == arange(E)``) or of values so gated (``position < C``), or a cast,
    copy or product of one, and with ``products`` a matrix product of one (the expert slots it
    fills). A comparison of floats alone (``x > 0``) is no routing: its product is an
    activation. A known mask's zeros are read where they are (:func:`known_products`)."""
    op = producers.get(value_id)
    if op is None or depth == 0 or value_id in known:
        return False
    if _one_of(op, _COMPARISONS):
        return any(
            not ref.is_float
            or routing_mask(producers, ref.value_id, products, known, depth - 1)
            for ref in op.reads
        )
    keeps = _one_of(op, _KEEP_ZEROS) or products and _one_of(op, _PRODUCTS)
    return keeps and any(
        routing_mask(producers, ref.value_id, products, known, depth - 1) for ref in op.reads
    )


def _masked_by_routing(context: _Context, region: Region) -> Demand:
    """A matmul with an operand gated by a routing mask whose values are unknown (any input
    values): its products are those of the mask's nonzeros, which this walk does not know,
    so none is charged (fewer, never more than any routing's: a dense (T, E, C) dispatch
    einsum costs a sparse kernel its routed pairs only); the mask is read whole, to know
    where it is zero, and the other operand nowhere. The bias of ``addmm`` is the output
    where the products are none."""
    *_, left, right = context.op.reads
    whole = [
        Region.of([full_box(ref.shape)])
        if routing_mask(context.producers, ref.value_id, known=context.known) else NOWHERE
        for ref in (left, right)
    ]
    return Demand((*_biases(context, region), *whole), NO_FLOPS, structure="routing mask")


def has_structure(value: torch.Tensor) -> bool:
    """Whether a known operand's zeros are at least :data:`SCATTERED_ZERO_SHARE` of it:
    structure a matmul's products skip. Most given operands (``torch.randn``) have no zero: a
    seeded stratified sample (:data:`ZERO_SAMPLE`) says so without reading the whole operand."""
    flat = value.reshape(-1)
    if flat.numel() > _SAMPLE_ABOVE * ZERO_SAMPLE and bool(
        flat.index_select(0, _sample_positions(flat.numel())).all()
    ):
        return False
    zeros = flat.numel() - int(torch.count_nonzero(flat))
    return zeros >= SCATTERED_ZERO_SHARE * flat.numel()


def _unit_ranges(index_set: IndexSet) -> list[range]:
    """``index_set`` as step-1 ranges (a strided range becomes one range per position)."""
    units: list[range] = []
    for r in index_set:
        units += [r] if r.step == 1 else [range(i, i + 1) for i in r]
    return units


class _Lines:
    """One batch entry of a matmul operand seen along its free axis (rows of A, columns of B):
    the lines the demanded boxes name, cut into the segments their line sets share, and per
    segment the nonzeros at each reduction position k. Every line is summed once, however
    many boxes name it. ``nonzero`` is (lines, K); None: unknown, nonzero anywhere."""

    def __init__(self, nonzero: torch.Tensor | None, sets: list[IndexSet], width: int) -> None:
        ranges = [_unit_ranges(index_set) for index_set in sets]
        points = sorted({p for rs in ranges for r in rs for p in (r.start, r.stop)})
        self.segments = [
            (lo, hi) for lo, hi in zip(points, points[1:], strict=False)
            if any(r.start <= lo and hi <= r.stop for rs in ranges for r in rs)
        ]
        lengths = torch.tensor([hi - lo for lo, hi in self.segments], dtype=torch.float64)
        if nonzero is None:
            self.sums = lengths[:, None].expand(len(self.segments), width)
            return
        # one product sums every segment's lines (exact: counts stay far below 2^24)
        members = torch.zeros(len(self.segments), nonzero.shape[0])
        for number, (lo, hi) in enumerate(self.segments):
            members[number, lo:hi] = 1
        self.sums = (members @ nonzero.to(members.dtype)).to(torch.float64)

    def inside(self, index_set: IndexSet) -> list[int]:
        """The segments that make up ``index_set``."""
        ranges = _unit_ranges(index_set)
        return [
            number for number, (lo, hi) in enumerate(self.segments)
            if any(r.start <= lo and hi <= r.stop for r in ranges)
        ]

    def totals(self, index_set: IndexSet) -> torch.Tensor:
        """Nonzeros of the lines ``index_set`` at each reduction position: (K,)."""
        return self.sums[self.inside(index_set)].sum(0)

    def needed(self, meets: list[tuple[IndexSet, torch.Tensor]]) -> int:
        """Nonzeros at (line, k) with the line in some set whose ``meets`` flags k: the
        elements a known operand supplies to products with two nonzero factors."""
        flags = torch.zeros(self.sums.shape, dtype=torch.bool)
        for index_set, wanted in meets:
            flags[self.inside(index_set)] |= wanted
        return int(self.sums[flags].sum())


def _where_true(flags: torch.Tensor) -> IndexSet:
    return positions_to_set(flags.nonzero().flatten().tolist())


#: Most lines (rows of A, reduction rows of B) a known operand's needed nonzeros are placed
#: on, one box each (a one-hot dispatch's slots: the tokens, weights and routers behind them
#: are then demanded where they are, not counted); past it they are counted, not placed.
_PLACED_LINES = 1 << 14


def _placed(needed: torch.Tensor, index: tuple[IndexSet, ...]) -> list[Box] | None:
    """The (lines, columns) flags ``needed`` of one batch entry as one box per line that has
    any, or None past :data:`_PLACED_LINES` lines."""
    lines = needed.any(1).nonzero().flatten().tolist()
    if len(lines) > _PLACED_LINES:
        return None
    return [(*index, (range(i, i + 1),), _where_true(needed[i])) for i in lines]


def _operand_region(
    nonzero: torch.Tensor | None, needed: int, ref: TensorRef, lines: list[Box],
    placed: list[Box] | None = None,
) -> Region:
    """What a matmul operand must supply: a known one its ``needed`` nonzeros (every element,
    placed, when that is all of it; else at the ``placed`` boxes where known); an unknown one
    the ``lines`` (boxes) a nonzero of the known factor meets."""
    if nonzero is None:
        return Region.of(lines)
    if needed == math.prod(ref.shape):
        return Region.of([full_box(ref.shape)])
    return Region(opaque=needed) if placed is None else Region.of(placed)


def _placeable(context: _Context, nonzero: torch.Tensor | None, ref: TensorRef) -> bool:
    return nonzero is not None and routing_mask(context.producers, ref.value_id, products=False)


def _placed_too(
    placed: list[Box] | None, used: torch.Tensor | None, index: tuple[IndexSet, ...]
) -> list[Box] | None:
    """``placed`` with one more batch entry's needed nonzeros (``used``), or None once some
    entry has too many lines to place."""
    if placed is None or used is None:
        return None
    more = _placed(used, index)
    return None if more is None else placed + more


def known_products(context: _Context, region: Region) -> Demand | None:
    """A matmul with a known operand (a given triangular or banded input, a known mask):
    out[b, i, j] = Σ_k A[b, i, k]·B[b, k, j] needs only the products whose factors are both
    nonzero, Σ_k nnz(A[b, R, k])·nnz(B[b, k, C]) multiply-adds over each demanded box (R, C);
    a known operand is read only at its nonzeros that meet a nonzero of the other factor, an
    unknown one at the lines a nonzero of the known one meets. Outputs demanded with no
    position are charged nothing here (fewer products, never more). None: no operand known,
    a broadcast operand, or a batch of more than one dim."""
    *bias, left, right = context.op.reads
    first = len(bias)
    a, b = _nonzeros(context, first), _nonzeros(context, first + 1)
    if (a is None and b is None) or len(left.shape) > 3:
        return None
    if any(0 in ref.strides for ref in (left, right)):
        return None
    reduction = left.shape[-1]
    by_entry: dict[int, list[tuple[IndexSet, IndexSet]]] = {}
    for box in region.boxes:
        *lead, rows, columns = box
        for entry in [i for r in lead[0] for i in r] if lead else [0]:
            # blocks made disjoint, so an output two demanded boxes share counts its products once
            pieces = [(rows, columns)]
            for earlier in by_entry.get(entry, []):
                pieces = [piece for p in pieces for piece in box_difference(p, earlier)]
            by_entry.setdefault(entry, []).extend(pieces)
    products = needed_a = needed_b = 0
    lines_a: list[Box] = []
    lines_b: list[Box] = []
    # a routing mask's nonzeros are placed (few, and what they meet is demanded where it is);
    # a given triangle's are counted (placing thousands of lines would cost more than it saves)
    placed_a: list[Box] | None = [] if _placeable(context, a, left) else None
    placed_b: list[Box] | None = [] if _placeable(context, b, right) else None
    for entry, blocks in by_entry.items():
        rows_of_a = _Lines(None if a is None else a[entry], [r for r, _ in blocks], reduction)
        columns_of_b = _Lines(
            None if b is None else b[entry].T, [c for _, c in blocks], reduction
        )
        index = ((range(entry, entry + 1),),) if len(left.shape) == 3 else ()
        meets_a, meets_b = [], []
        # the known operands' nonzeros some product needs, placed: (rows, K) of A, (K, columns)
        # of B
        used_a = None if placed_a is None else torch.zeros_like(a[entry])
        used_b = None if placed_b is None else torch.zeros_like(b[entry])
        for rows, columns in blocks:
            a_counts = rows_of_a.totals(rows)  # nonzeros of A[b, R, k]
            b_counts = columns_of_b.totals(columns)  # nonzeros of B[b, k, C]
            products += int((a_counts * b_counts).sum())
            meets_a.append((rows, b_counts > 0))
            meets_b.append((columns, a_counts > 0))
            if used_a is not None:
                picked = [i for r in rows for i in r]
                used_a[picked] |= a[entry][picked] & (b_counts > 0)
            if used_b is not None:
                picked = [j for r in columns for j in r]
                used_b[:, picked] |= b[entry][:, picked] & (a_counts > 0)[:, None]
            if a is None:
                lines_a.append((*index, rows, _where_true(b_counts > 0)))
            if b is None:
                lines_b.append((*index, _where_true(a_counts > 0), columns))
        needed_a += rows_of_a.needed(meets_a) if a is not None else 0
        needed_b += columns_of_b.needed(meets_b) if b is not None else 0
        placed_a = _placed_too(placed_a, used_a, index)
        placed_b = _placed_too(placed_b, used_b, index)
    inputs = [
        *_biases(context, region),
        _operand_region(a, needed_a, left, [box for box in lines_a if all(box)], placed_a),
        _operand_region(b, needed_b, right, [box for box in lines_b if all(box)], placed_b),
    ]
    tensor = min(2 * products * real_products(context), context.record.flops.tensor)
    flops = FlopCount(tensor=tensor, kind=MatmulKind.MATMUL)
    structure = "known operand values" if tensor < context.record.flops.tensor else None
    return Demand(tuple(inputs), flops, structure=structure)


@demand_rule([aten.mv, aten.addmv])
def matrix_vector_demand(context: _Context) -> Demand:
    """out[i] = (β·c[i] +) α·A[i, :] @ v needs row i of A and all of v: 2·K FLOPs per demanded
    element (times :func:`real_products` for complex operands)."""
    *_, matrix, vector = context.op.reads
    region = context.output
    if len(matrix.shape) != 2 or any(len(box) != 1 for box in region.boxes):
        return _proportional(context)
    reduction = matrix.shape[1]
    every = (range(reduction),)
    rows = Region.of([(box[0], every) for box in region.boxes], region.opaque * reduction)
    inputs = (*_biases(context, region), rows, Region.of([(every,)]) if region else NOWHERE)
    per_output = 2 * reduction * real_products(context)
    tensor = min(per_output * region.count, context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.MATMUL))


@demand_rule([aten.addr])
def outer_product_demand(context: _Context) -> Demand:
    """addr(c, u, v) = β·c + α·u ⊗ v: out[i, j] needs c[i, j] (broadcast; none where β = 0),
    u[i] and v[j] (outputs with no position: one of each at least); the op's FLOPs in the
    demanded share, a product and an add per output."""
    *_, left, right = context.op.reads
    region = context.output
    if any(len(box) != 2 for box in region.boxes):
        return _proportional(context)
    one = min(region.opaque, 1)
    rows = Region.of([(box[0],) for box in region.boxes], one)
    columns = Region.of([(box[1],) for box in region.boxes], one)
    return Demand((*_biases(context, region), rows, columns),
                  context.record.flops.scaled(context.fraction))


@demand_rule([aten._cdist_forward, aten._euclidean_dist])
def distance_demand(context: _Context) -> Demand:
    """``cdist(x1 (…, P, M), x2 (…, R, M))``: out[…, i, j] needs row i of x1 and row j of x2,
    every coordinate; each pair costs the same, so its share of the FLOPs."""
    first, second = context.op.reads[:2]
    region = context.output
    out_shape = context.op.writes[0].shape
    if (
        first.shape[:-2] != out_shape[:-2]
        or second.shape[:-2] != out_shape[:-2]
        or any(len(box) != len(out_shape) for box in region.boxes)
    ):
        return _proportional(context)
    coordinates = (range(first.shape[-1]),)
    rows = Region.of([(*box[:-1], coordinates) for box in region.boxes])
    columns = Region.of([(*box[:-2], box[-1], coordinates) for box in region.boxes])
    rest = tuple(NOWHERE for _ in context.op.reads[2:])
    return Demand((rows, columns, *rest), context.record.flops.scaled(context.fraction))


#: Demanded pairs :func:`pair_distance_demand` lists one by one; beyond, its share as a count
PAIR_LIST_LIMIT = 1 << 16


@demand_rule([aten._pdist_forward])
def pair_distance_demand(context: _Context) -> Demand:
    """``pdist(x (N, M))``: output k is the pair (i, j), i < j, in row-major order; it needs
    rows i and j, every coordinate. Past :data:`PAIR_LIST_LIMIT` demanded pairs, the rows of
    ⌈√(2·pairs)⌉ (fewer rows cannot form that many pairs), as a count."""
    rows, columns = context.op.reads[0].shape
    region = context.output
    flops = context.record.flops.scaled(context.fraction)
    if region.count > PAIR_LIST_LIMIT or region.opaque:
        needed = min(rows, math.ceil(math.sqrt(2 * region.count)))
        return Demand((Region(opaque=needed * columns),), flops)
    # pairs before row i: i·N − i(i+1)/2; the first row whose pairs reach past k holds k
    starts = [i * rows - i * (i + 1) // 2 for i in range(rows)]
    picked: set[int] = set()
    for k in (k for box in region.boxes for r in box[0] for k in r):
        i = bisect.bisect_right(starts, k) - 1
        picked.update((i, i + 1 + k - starts[i]))
    box = (positions_to_set(picked), (range(columns),))
    return Demand((Region.of([box]),), flops)


@demand_rule([aten.addbmm])
def batch_sum_matmul_demand(context: _Context) -> Demand:
    """``addbmm``: out[i, j] = β·c[i, j] + α·Σ_b A[b, i, :] @ B[b, :, j] needs row i of every
    A[b] and column j of every B[b]: 2·batch·K FLOPs per demanded element (times
    :func:`real_products` for complex operands)."""
    *_, left, right = context.op.reads
    region = context.output
    if len(left.shape) != 3 or any(len(box) != 2 for box in region.boxes):
        return _proportional(context)
    batch, rows, reduction = left.shape
    columns = right.shape[-1]
    every = ((range(batch),), (range(reduction),))
    left_boxes = [(every[0], box[0], every[1]) for box in region.boxes]
    right_boxes = [(every[0], every[1], box[1]) for box in region.boxes]
    # c outputs with no position span at least ⌈c/N⌉ rows of each A[b], ⌈c/M⌉ columns of B[b]
    per_line = batch * reduction
    left_opaque = -(-region.opaque // max(columns, 1)) * per_line
    right_opaque = -(-region.opaque // max(rows, 1)) * per_line
    inputs = (
        *_biases(context, region),
        Region.of(left_boxes, left_opaque),
        Region.of(right_boxes, right_opaque),
    )
    per_output = 2 * per_line * real_products(context)
    tensor = min(per_output * region.count, context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.MATMUL))


@demand_rule(
    [
        aten.scaled_dot_product_attention,
        aten._scaled_dot_product_efficient_attention,
        aten._scaled_dot_product_flash_attention,
        aten._scaled_dot_product_cudnn_attention,
        aten._scaled_dot_product_flash_attention_for_cpu,
    ]
)
def attention_demand(context: _Context) -> Demand:
    """out[..., l, e] needs query row l, the key and value rows row l attends to (all, or with a
    causal — top-left aligned — mask keys 0..l) and value column e; grouped-query heads map to
    their key/value head. 2·(E + Ev) FLOPs per kept (row, key) pair. A row that attends one
    key (causal row 0, or a single key) is that key's value row: a softmax of one score is 1,
    so the row needs no score, no product and neither its query nor the key."""
    query, key, value, *rest = context.op.reads
    out_shape = context.op.writes[0].shape
    region = Region.of(context.outputs[0].boxes, context.outputs[0].opaque)
    if (
        not region.boxes
        or any(len(b) != len(out_shape) for b in region.boxes)
        or len(query.shape) != len(out_shape)
        or len(key.shape) != len(out_shape)
    ):
        return _proportional(context)
    keys = key.shape[-2]
    causal = bool(context.argument("is_causal", False))
    embed = query.shape[-1]
    flops, sizes = 0, 0
    query_boxes, key_boxes, value_boxes, mask_boxes = [], [], [], []

    def attended(row: int) -> tuple[range]:
        """The keys query row ``row`` attends."""
        return (range(min(row + 1, keys) if causal else keys),)

    for box in region.boxes:
        *lead, rows, columns = box
        scored = _scored_rows(rows, keys, causal)
        kept = sum(min(r + 1, keys) if causal else keys for rng in scored for r in rng)
        flops += 2 * math.prod(set_size(x) for x in lead) * kept * (embed + set_size(columns))
        sizes += box_size(box)
        last_row = max(r[-1] for r in rows if r)
        key_lead = _heads(lead, out_shape[:-2], key.shape[:-2])
        value_lead = _heads(lead, out_shape[:-2], value.shape[:-2])
        if scored:
            query_boxes.append((*lead, scored, (range(embed),)))
            key_boxes.append((*key_lead, attended(max(r[-1] for r in scored)), (range(embed),)))
        value_boxes.append((*value_lead, attended(last_row), columns))
        mask_boxes.append((*lead, rows, attended(last_row)))
    share = region.count / sizes if sizes else 0.0
    masks = []
    for ref in rest:
        mapped = _broadcast(Region.of(mask_boxes), (*out_shape[:-1], keys), ref.shape)
        masks.append(mapped if mapped is not None else NOWHERE)
    inputs = (Region.of(query_boxes), Region.of(key_boxes), Region.of(value_boxes), *masks)
    tensor = min(int(flops * share), context.record.flops.tensor)
    return Demand(inputs, FlopCount(tensor=tensor, kind=MatmulKind.ATTENTION))


def _scored_rows(rows: IndexSet, keys: int, causal: bool) -> IndexSet:
    """The query rows of ``rows`` that attend two keys or more (ranges ascend: causal row 0,
    which attends key 0 alone, can only open one)."""
    if keys == 1:
        return ()
    if not causal:
        return rows
    trimmed = (r[1:] if r and r[0] == 0 else r for r in rows)
    return tuple(r for r in trimmed if r)


def _heads(lead: Sequence[IndexSet], out_lead: Sequence[int], kv_lead: Sequence[int]) -> Box:
    """Query batch/head index sets seen from a key or value tensor: broadcast dims take index 0,
    grouped-query heads map head h to h // (query heads / key heads)."""
    mapped = []
    for index_set, size, kv_size in zip(lead, out_lead, kv_lead, strict=True):
        if kv_size == size:
            mapped.append(index_set)
        elif kv_size == 1:
            mapped.append((range(1),))
        else:
            group = max(size // kv_size, 1)
            mapped.append(positions_to_set(h // group for r in index_set for h in r))
    return tuple(mapped)
