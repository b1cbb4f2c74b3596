"""Known values: what depends only on shapes and constants is evaluated for real, so the
rules can read a causal mask built in ``forward``."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from ..regions import (
    Region,
    positions_to_set,
)
from ..trace import TracedOp
from ._core import _Context
from .layout import TRIANGLE_BANDS

#: Elements a value may have to be evaluated for real (a 2048 × 2048 causal mask is 4 M).
CONSTANT_LIMIT_ELEMENTS = 1 << 22


def _evaluable(op: TracedOp, known: dict[int, torch.Tensor]) -> bool:
    """Whether ``op``'s outputs depend only on shapes and on values already known: an aten op
    that is not random, writes nothing in place and allocates no uninitialised memory, whose
    every read is known and whose outputs are small."""
    func = op.func
    if func is None or op.is_view or not op.writes or op.written_arguments:
        return False
    if torch.Tag.nondeterministic_seeded in func.tags or "empty" in op.base:
        return False
    if any(w.storage_elements > CONSTANT_LIMIT_ELEMENTS for w in op.writes):
        return False
    return all(ref.value_id in known for ref in op.reads)


def _on_cpu(leaf: Any) -> Any:
    return torch.device("cpu") if isinstance(leaf, torch.device) else leaf


def _with_values(op: TracedOp, known: dict[int, torch.Tensor]) -> tuple[Any, Any]:
    """``op``'s arguments with each tensor replaced by its known value, on the CPU."""
    reads = iter(
        known[ref.value_id].as_strided(ref.shape, ref.strides, ref.offset) for ref in op.reads
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
        args, kwargs = _with_values(op, known)
        try:
            output = op.func(*args, **kwargs)
        except Exception:  # noqa: BLE001 — an op the CPU cannot run stays unknown
            continue
        tensors = [leaf for leaf in tree_leaves(output) if isinstance(leaf, torch.Tensor)]
        for ref, tensor in zip(op.writes, tensors, strict=False):
            if tuple(tensor.shape) != ref.shape:
                break  # sized by other values than the traced ones (a random fill): unknown
            storage = torch.zeros(ref.storage_elements or ref.elements, dtype=tensor.dtype)
            storage.as_strided(ref.shape, ref.strides, ref.offset).copy_(tensor)
            known[ref.value_id] = storage
    return known


def _known(context: _Context, position: int) -> torch.Tensor | None:
    """The value of read ``position`` as the op sees it, if it is known."""
    ref = context.op.reads[position]
    storage = context.known.get(ref.value_id)
    return None if storage is None else storage.as_strided(ref.shape, ref.strides, ref.offset)


def _region_where(condition: torch.Tensor, region: Region) -> Region:
    """The demanded elements where the known boolean ``condition`` (broadcast to the output
    shape) holds. Leading dims must agree: what holds for every leading index is kept. Rows
    (the second-to-last dim) are cut into :data:`TRIANGLE_BANDS` bands, each keeping the
    columns all its rows keep — exact for masks constant along rows, and short of a causal
    mask's triangle by at most 1/(2·bands) of it. Outputs with no position: none kept."""
    boxes = []
    for box in region.boxes:
        picked = condition
        for dim, index_set in enumerate(box):
            positions = torch.tensor([i for r in index_set for i in r], dtype=torch.int64)
            picked = picked.index_select(dim, positions)
        if len(box) < 2:
            kept = picked.reshape(-1).nonzero().reshape(-1).tolist()
            flat = [i for r in box[0] for i in r] if box else []
            if box and kept:
                boxes.append((positions_to_set(flat[i] for i in kept),))
            elif not box and bool(picked):
                boxes.append(())
            continue
        matrix = picked.reshape(-1, *picked.shape[-2:]).all(0)
        rows = [i for r in box[-2] for i in r]
        columns = [i for r in box[-1] for i in r]
        band = max(1, -(-len(rows) // TRIANGLE_BANDS))
        for start in range(0, len(rows), band):
            kept = matrix[start : start + band].all(0).nonzero().reshape(-1).tolist()
            if kept:
                chunk = positions_to_set(rows[start : start + band])
                boxes.append((*box[:-2], chunk, positions_to_set(columns[i] for i in kept)))
    return Region.of(boxes)
