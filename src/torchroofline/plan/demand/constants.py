"""Known values: what depends only on shapes and constants is evaluated for real, so the
rules can read a causal mask built in ``forward``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from ...trace.refs import TensorRef, TracedOp
from ...trace.regions import (
    Box,
    IndexSet,
    Region,
    box_size,
    positions_to_set,
    set_size,
)
from ._core import _Context

#: Row bands a triangle is cut into: each band keeps the columns all its rows keep, so the
#: demand is inside the triangle, short of it by at most 1/(2·bands) of its area.
TRIANGLE_BANDS = 64

#: Elements a floating value may have to be evaluated for real (a 2048 × 2048 causal mask is
#: 4 M).
CONSTANT_LIMIT_ELEMENTS = 1 << 22

#: Elements an integer or boolean value may have to be evaluated for real: indices and masks
#: over a whole big tensor (``x[arange(n) % 3 == 0]`` at n = 5·10⁷: 0.4 GB of int64 on the
#: way, a 50 MB mask), never big float data.
INDEX_LIMIT_ELEMENTS = 1 << 26


def too_big(ref: TensorRef) -> bool:
    """Whether a value is too big to evaluate for real (:data:`CONSTANT_LIMIT_ELEMENTS`,
    :data:`INDEX_LIMIT_ELEMENTS`)."""
    limit = CONSTANT_LIMIT_ELEMENTS if ref.is_float else INDEX_LIMIT_ELEMENTS
    return ref.storage_elements > limit


def _evaluable(op: TracedOp, known: dict[int, torch.Tensor]) -> bool:
    """Whether ``op``'s outputs depend only on shapes and on values already known: an aten op
    that is not random, writes nothing in place and allocates no uninitialised memory, whose
    every read is known and whose outputs are small."""
    func = op.func
    if func is None or op.is_view or not op.writes:
        return False
    if op.written_arguments and not _writes_an_index_in_place(op):
        return False
    if torch.Tag.nondeterministic_seeded in func.tags or "empty" in op.base:
        return False
    if any(map(too_big, op.writes)):
        return False
    return all(ref.value_id in known for ref in op.reads)


def _writes_an_index_in_place(op: TracedOp) -> bool:
    """Whether ``op`` writes only integer or boolean values, each into a storage it reads: an
    index buffer filled in place (``one_hot``'s ``scatter_`` into zeros, a routing table)."""
    read = {ref.storage_id for ref in op.reads}
    return all(not w.is_float and w.storage_id in read for w in op.writes)


def _on_cpu(leaf: Any) -> Any:
    return torch.device("cpu") if isinstance(leaf, torch.device) else leaf


def _with_values(
    op: TracedOp, known: dict[int, torch.Tensor], written: Mapping[int, torch.Tensor]
) -> tuple[Any, Any]:
    """``op``'s arguments with each tensor replaced by its known value, on the CPU; a read of
    a storage the op writes in place by ``written``'s copy of it (storage id → elements)."""
    reads = iter(
        written.get(ref.storage_id, known[ref.value_id]).as_strided(
            ref.shape, ref.strides, ref.offset
        )
        for ref in op.reads
    )
    return tree_map(
        lambda leaf: next(reads) if isinstance(leaf, torch.Tensor) else _on_cpu(leaf),
        (op.args, op.kwargs),
    )


def known_values(
    ops: Sequence[TracedOp],
    constants: Mapping[int, torch.Tensor],
    only: Collection[int] | None = None,
) -> dict[int, torch.Tensor]:
    """value id → its storage's elements (flat, on the CPU) for every value that depends only
    on shapes and constants: ``ones``, ``arange``, ``eye``, ``tril`` of them, a comparison of
    them — the causal masks and position ids a model builds in ``forward`` — starting from the
    ``constants`` the trace knows (buffers such as a mask built in ``__init__``). They are
    small, so the ops are run for real; the demand rules read them (:func:`_known`). With
    ``only``, just the ops writing one of those value ids run (the values some rule reads and
    what they are computed from: :func:`given.value_sources`)."""
    known: dict[int, torch.Tensor] = dict(constants)
    for op in ops:
        if only is not None and not any(w.value_id in only for w in op.writes):
            continue
        if all(w.value_id in known for w in op.writes) or not _evaluable(op, known):
            continue
        # an op writing in place runs on copies: the value before it stays known as it was
        written = {
            ref.storage_id: known[ref.value_id].clone()
            for ref in op.reads if any(w.storage_id == ref.storage_id for w in op.writes)
        } if op.written_arguments else {}
        args, kwargs = _with_values(op, known, written)
        try:
            output = op.func(*args, **kwargs)
        except Exception:  # noqa: BLE001 — an op the CPU cannot run stays unknown
            continue
        if written:
            known.update((w.value_id, written[w.storage_id]) for w in op.writes)
            continue
        tensors = [leaf for leaf in tree_leaves(output) if isinstance(leaf, torch.Tensor)]
        for ref, tensor in zip(op.writes, tensors, strict=False):
            if tuple(tensor.shape) != ref.shape:
                break  # sized by other values than the traced ones (a random fill): unknown
            storage = torch.zeros(ref.storage_elements or ref.elements, dtype=tensor.dtype)
            storage.as_strided(ref.shape, ref.strides, ref.offset).copy_(tensor)
            known[ref.value_id] = storage
    return known


def too_big_to_evaluate(
    ops: Sequence[TracedOp], known: Mapping[int, torch.Tensor], only: Collection[int]
) -> list[TracedOp]:
    """The ops writing one of ``only`` that :func:`known_values` left unknown for their size
    alone: every read known, an output :func:`too_big`."""
    return [
        op for op in ops
        if any(w.value_id in only and w.value_id not in known for w in op.writes)
        and any(map(too_big, op.writes))
        and all(ref.value_id in known for ref in op.reads)
    ]


def _known(context: _Context, position: int, op: TracedOp | None = None) -> torch.Tensor | None:
    """The value of read ``position`` of ``op`` (the context's op by default) as the op sees
    it, if it is known."""
    ref = (op or context.op).reads[position]
    storage = context.known.get(ref.value_id)
    return None if storage is None else storage.as_strided(ref.shape, ref.strides, ref.offset)


def _band_columns(matrix: torch.Tensor, band: int, columns: list[int]) -> list[IndexSet]:
    """For each band of ``band`` rows of the boolean ``matrix``, the ``columns`` where all its
    rows hold (:func:`row_sets`)."""
    count, width = matrix.shape
    bands = -(-count // band)
    padding = matrix.new_ones(bands * band - count, width)
    return row_sets(torch.cat((matrix, padding)).reshape(bands, band, width).all(1), columns)


def row_sets(mask: torch.Tensor, columns: Sequence[int]) -> list[IndexSet]:
    """For each row of the boolean ``mask``, the ``columns`` (sorted positions, one per mask
    column) where it holds, as :func:`positions_to_set` gives them. A row's that are one run
    of consecutive columns (a causal row's) are read off its first and last, not listed and
    sorted one by one."""
    rows, width = mask.shape
    if not width:
        return [()] * rows
    totals = mask.sum(1).tolist()
    firsts = mask.to(torch.uint8).argmax(1).tolist()
    lasts = (width - 1 - mask.flip(1).to(torch.uint8).argmax(1)).tolist()
    consecutive = columns[-1] - columns[0] == width - 1
    sets: list[IndexSet] = []
    for index, (total, first, last) in enumerate(zip(totals, firsts, lasts, strict=True)):
        if not total:
            sets.append(())
        elif consecutive and last - first + 1 == total:
            sets.append((range(columns[first], columns[last] + 1),))
        else:
            sets.append(positions_to_set(
                [columns[i] for i in mask[index].nonzero().reshape(-1).tolist()]))
    return sets


def _unexpanded(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` with every broadcast (stride-0) dim cut to size 1: what it was expanded from,
    so a condition broadcast along a dim is seen to be the same all along it."""
    for dim in range(tensor.dim()):
        if tensor.stride(dim) == 0 and tensor.shape[dim] > 1:
            tensor = tensor.narrow(dim, 0, 1)
    return tensor


#: Most positions of the leading dims (all but the last two) a known condition is split along,
#: one set of boxes each: past it, what holds at every leading position is kept.
_SPLIT_POSITIONS = 1024


def _region_where(condition: torch.Tensor, region: Region) -> Region:
    """The demanded elements where the known boolean ``condition`` (broadcast to the output
    shape) holds. Along the leading dims, each position where the condition varies keeps its
    own elements (a padding mask per batch row: each row its own columns); along dims it is
    broadcast it is the same everywhere. Rows (the second-to-last dim) are cut into bands,
    :data:`TRIANGLE_BANDS` shared by the distinct leading matrices, each band keeping the
    columns all its rows keep — exact for masks constant along rows, and short of a causal
    mask's triangle by at most 1/(2·bands) of it, which the exact count of the positions where
    it holds makes up for (where the boxes are disjoint). Outputs with no position: none
    kept."""
    boxes = []
    total = 0
    for box in region.boxes:
        lead = (1,) * (len(box) - condition.dim())
        picked = _unexpanded(condition.reshape(lead + tuple(condition.shape)))
        for dim, index_set in enumerate(box):
            if picked.shape[dim] > 1 and index_set != (range(picked.shape[dim]),):
                positions = torch.tensor([i for r in index_set for i in r], dtype=torch.int64)
                picked = picked.index_select(dim, positions)
        total += int(picked.sum()) * math.prod(
            set_size(index_set) for dim, index_set in enumerate(box) if picked.shape[dim] == 1
        )
        if len(box) < 2:
            flat = [i for r in box[0] for i in r] if box else []
            kept = picked.expand(len(flat)).nonzero().reshape(-1).tolist() if box else []
            if box and kept:
                boxes.append((positions_to_set(flat[i] for i in kept),))
            elif not box and bool(picked):
                boxes.append(())
            continue
        boxes += _kept_boxes(picked, box)
    disjoint = region.count == sum(map(box_size, region.boxes))
    return Region.of(boxes, total if disjoint else 0)


def _kept_boxes(picked: torch.Tensor, box: Box) -> list[Box]:
    """:func:`_region_where` for one box of two or more dims, ``picked`` the condition at its
    positions (size 1 along dims it is broadcast)."""
    lead = picked.shape[:-2]
    split = [d for d, n in enumerate(lead) if n > 1]
    if math.prod(lead[d] for d in split) > _SPLIT_POSITIONS:
        split = []
    others = [d for d in range(len(lead)) if d not in split]
    matrices = picked.all(others) if others else picked  # (split sizes..., rows, cols)
    rows = [i for r in box[-2] for i in r]
    columns = [i for r in box[-1] for i in r]
    shared: dict[bytes, list[tuple[int, ...]]] = {}
    for combo in itertools.product(*(range(lead[d]) for d in split)):
        shared.setdefault(matrices[combo].numpy().tobytes(), []).append(combo)
    band = max(1, -(-len(rows) // max(1, TRIANGLE_BANDS // len(shared))))
    positions = [[i for r in index_set for i in r] for index_set in box[:-2]]
    boxes = []
    for combos in shared.values():
        matrix = matrices[combos[0]].expand(len(rows), len(columns))
        for start, kept_columns in zip(range(0, len(rows), band),
                                       _band_columns(matrix, band, columns), strict=True):
            if not kept_columns:
                continue
            chunk = positions_to_set(rows[start : start + band])
            for combo in combos:
                leading = list(box[:-2])
                for d, j in zip(split, combo, strict=True):
                    leading[d] = (range(positions[d][j], positions[d][j] + 1),)
                boxes.append((*leading, chunk, kept_columns))
    return boxes
