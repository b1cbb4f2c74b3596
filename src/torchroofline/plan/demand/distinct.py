"""Index values distinct whatever the data: the positions ``topk`` picks along its dim, a
``sort``'s (or ``argsort``'s) indices along its dim, a ``randperm``. A gather through such an
index reads as many distinct source slices as it uses distinct picks of one line (a router's
top-2 experts are two experts, whichever), where an index of unknown values may pick one."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...costs import OpKey, add_rules, aten, lookup
from ...trace.refs import TensorRef, TracedOp


def _sorted_indices(op: TracedOp) -> tuple[int, int]:
    """``topk`` and ``sort`` write (values, indices): the indices of each line along ``dim``
    are distinct positions of the input's line (a permutation of it for a sort)."""
    return 1, op.argument("dim", -1)


#: Ops writing an index whose values are distinct along one dim, whatever their input:
#: op → (write position of that index, the dim).
DISTINCT_LINES: dict[OpKey, Callable[[TracedOp], tuple[int, int]]] = {}
add_rules(DISTINCT_LINES, [aten.topk, aten.sort], _sorted_indices, "distinct-lines")
add_rules(DISTINCT_LINES, [aten.randperm], lambda op: (0, 0), "distinct-lines")

#: Largest index storage (elements) numbered to find its lines: 16 M int64s, 128 MB.
_NUMBERED_INDEX_LIMIT = 1 << 24


def _extent(ref: TensorRef) -> int:
    """Storage elements up to the last one the view ``ref`` touches."""
    return ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.strides, strict=True)) + 1


def index_lines(
    index: TensorRef, producers: dict[int, TracedOp]
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """For an index read (a view of an output of :data:`DISTINCT_LINES`: ``topk(…).indices``,
    ``sort(…)[1][..., :k]``, flattened), two int64 tensors of its shape: the line of the
    producer's output each element lies on, and the storage element it is. Elements of one
    line that are different storage elements hold different values. None for any other index
    (or a view not laid out in strides)."""
    producer = producers.get(index.value_id)
    rule = None if producer is None else lookup(DISTINCT_LINES, producer)
    if rule is None:
        return None
    position, dim = rule(producer)
    made = producer.writes[position]
    views = (made, index)
    if made.value_id != index.value_id or any(len(v.strides) != len(v.shape) for v in views):
        return None
    if not made.shape or 0 in made.shape:
        return None  # a 0-dim index has one line of one element: nothing to gain
    size = max(_extent(v) for v in views)
    if size > _NUMBERED_INDEX_LIMIT:
        return None
    numbers = torch.arange(size)
    placed = numbers.as_strided(made.shape, made.strides, made.offset).reshape(-1)
    if int(torch.bincount(placed, minlength=size).max()) > 1:
        return None  # an output overlapping itself: no line of its own per element
    dim %= len(made.shape)
    across = [n for d, n in enumerate(made.shape) if d != dim]
    lines = torch.arange(math.prod(across)).reshape(across).unsqueeze(dim).expand(made.shape)
    line_of = torch.full((size,), -1, dtype=torch.int64)
    line_of[placed] = lines.reshape(-1)
    elements = numbers.as_strided(index.shape, index.strides, index.offset)
    held = line_of[elements]
    if bool((held < 0).any()):
        return None
    return held, elements


def distinct_picks(lines: torch.Tensor, elements: torch.Tensor) -> int:
    """Distinct values at least, summed over the rows of ``lines`` and ``elements`` (both
    (groups, n): each row's picks land on their own source elements): in each row, the most
    distinct elements one line holds — those values differ, whatever the data; picks of
    different lines may repeat one another."""
    groups = lines.shape[0]
    if not lines.numel():
        return 0
    group = torch.arange(groups).unsqueeze(1).expand(lines.shape).reshape(-1)
    lines, elements = lines.reshape(-1), elements.reshape(-1)
    # an element lies on one line: distinct (group, element) pairs are distinct picks (as
    # one int64 key: groups and elements stay below 2^24 each)
    picks, first = (group * (int(elements.max()) + 1) + elements).unique(return_inverse=True)
    line = torch.empty_like(picks).scatter_(0, first, lines)
    owner = torch.empty_like(picks).scatter_(0, first, group)
    keys, held = (owner * (int(lines.max()) + 1) + line).unique(return_counts=True)
    most = torch.zeros(groups, dtype=torch.int64).scatter_reduce(
        0, keys // (int(lines.max()) + 1), held, "amax"
    )
    return int(most.sum())
