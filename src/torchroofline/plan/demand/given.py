"""The bound for the given input values: which values the demand rules read, and the second
walk that reads them.

The bound for *any* input (``data="any"``) reads only values that depend on shapes and
constants (:func:`known_values`). With the input values given (``data="given"``: the tensors
passed to ``analyze``, a problem file's ``get_inputs()``), the same mechanism runs from more
seeds: the given inputs (and small real parameters) join the constants, and just the small ops
that compute an index, a mask or a routing decision from them are run for real, on the CPU
(:func:`value_sources`): router logits, ``topk``, comparisons, ``nonzero`` — never an expert's
product. Everything else stays fake. The rules then charge what those values choose: distinct
rows gathered (:mod:`.selection`), nonzero products of known matmul operands (:mod:`.matmul`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch

from ...costs import OpKey, OpRecord, add_rules, aten, lookup
from ...trace.refs import Trace, TracedOp
from ._core import _one_of, _op_set
from .constants import known_values, too_big_to_evaluate
from .matmul import equal_lines, has_structure, no_imaginary_part, operand_dims, routing_mask
from .sized import _sized_by_data
from .walk import Necessary, necessary_work

#: Ops whose demand rule reads the values of their index or mask arguments (the reads that are
#: not floats: integer indices, boolean masks); ``nonzero`` reads its input's values to choose
#: the positions it returns, so every read counts. Their producers are run for real when the
#: values they come from are given. A ``topk`` or ``sort`` is no reader: its input's values
#: matter only where a reader downstream consumes its indices, and :func:`value_sources`
#: reaches it from there.
_INDEX_READERS: dict[OpKey, bool] = {}
add_rules(
    _INDEX_READERS,
    [
        aten.embedding, aten.index_select, aten.gather, aten.index, aten._unsafe_index,
        aten.take, aten._embedding_bag, aten._embedding_bag_forward_only, aten.scatter,
        aten.scatter_add, aten.scatter_reduce, aten.index_put, aten._index_put_impl,
        aten._unsafe_index_put, aten.index_add, aten.index_copy, aten.index_reduce, aten.put,
        aten.masked_scatter, aten.index_fill, aten.masked_fill, aten.where,
        aten.masked_select,
    ],
    False,
    "value-reader",
)
add_rules(_INDEX_READERS, [aten.nonzero], True, "value-reader")

#: Losses whose rule reads its targets (the second read) where their values are known anyway
#: (passed to ``analyze``, constants): a target equal to ``ignore_index`` picks no score. They
#: never make a problem's inputs: a benchmark draws its targets in range (``randint``), so the
#: big logits made with them would change nothing.
_TARGET_READERS = _op_set([aten.nll_loss_forward, aten.nll_loss, aten.nll_loss2d_forward])

#: Grid samplers, whose rule reads the values of their grid (the second read, floats: not an
#: index) to find the taps it weighs; the grid is computed for the purpose where it is small
#: (a grid of tanh'd offsets, an ``affine_grid`` of a predicted map), never the image.
_GRID_READERS = _op_set([aten.grid_sampler_2d, aten.grid_sampler_3d])

#: Matmuls whose rule reads known operand values (:func:`matmul.known_products`): their last two
#: reads. Operands are read where they are known, never computed for the purpose (a product is
#: big work to run on the CPU).
_OPERAND_READERS = frozenset({aten.mm, aten.bmm, aten.addmm, aten.baddbmm})

#: Pointwise products, whose rule reads known factors for a zero one
#: (:func:`.reductions.product_demand`)
_PRODUCTS = _op_set([aten.mul])


def _read_values(op: TracedOp) -> list[int]:
    """Value ids whose values ``op``'s demand rule reads to choose positions."""
    if _one_of(op, _GRID_READERS):
        return [op.reads[1].value_id]
    every_read = lookup(_INDEX_READERS, op)
    if every_read is None:
        return []
    return [ref.value_id for ref in op.reads if every_read or not ref.is_float]


def value_sources(ops: Sequence[TracedOp]) -> set[int]:
    """The values some rule reads to choose positions, and every value they are computed from
    (the index-producing subgraph: router logits → topk → indices); a matmul operand gated by
    a mask (a one-hot dispatch of tokens to expert slots, whose zeros the matmul skips) is
    such a value."""
    producers = {w.value_id: op for op in ops if not op.is_view for w in op.writes}
    # (a product with a mask is not run for the purpose: it is big work on the CPU)
    wanted: set[int] = {
        v for v in _operands(ops) if routing_mask(producers, v, products=False)
    }
    for op in reversed(ops):
        if any(w.value_id in wanted for w in op.writes):
            wanted.update(ref.value_id for ref in op.reads)
        wanted.update(_read_values(op))
    return wanted


def _operands(ops: Sequence[TracedOp]) -> set[int]:
    """Values some matmul reads as an operand (:func:`matmul.known_products`)."""
    return {
        ref.value_id
        for op in ops
        if op.func is not None and op.func.overloadpacket in _OPERAND_READERS
        for ref in op.reads[-2:]
    }


def _factors(ops: Sequence[TracedOp]) -> set[int]:
    """Values some ``mul`` of two tensors reads (:func:`.reductions.product_demand`)."""
    return {ref.value_id for op in ops if _one_of(op, _PRODUCTS) and len(op.reads) == 2
            for ref in op.reads}


def _repeated_operands(ops: Sequence[TracedOp], values: Mapping[int, torch.Tensor]) -> set[int]:
    """Of the known ``values`` (flat storages), those some matmul reads with every line alike
    (:func:`matmul.equal_lines`: a given ``torch.ones`` operand)."""
    return {
        ref.value_id
        for op in ops
        if op.func is not None and op.func.overloadpacket in _OPERAND_READERS
        for ref, dim in operand_dims(op)
        if ref.value_id in values and len(ref.shape) >= 2 and equal_lines(
            values[ref.value_id].as_strided(ref.shape, ref.strides, ref.offset), dim
        )
    }


def _consulted(ops: Sequence[TracedOp]) -> set[int]:
    """Values whose known value changes what a rule charges: indices, masks, matmul operands."""
    return {v for op in ops for v in _read_values(op)} | _operands(ops)


def reads_values_of(trace: Trace, value_ids: set[int]) -> bool:
    """Whether some rule reads (or computes what it reads from) one of ``value_ids``."""
    return not value_ids.isdisjoint(_consulted(trace.ops) | value_sources(trace.ops))


def given_necessary(
    trace: Trace, records: Sequence[OpRecord], known_any: Mapping[int, torch.Tensor],
    shortcuts: bool = True,
) -> Necessary | None:
    """The necessary work for the given values (``trace.given``), or None when it is the same
    as for any values: no rule reads a value the given inputs decide, and no size is decided
    by them. Only then is the second walk run."""
    if trace.given is None:  # the bound for any values was asked for
        return None
    given = trace.given
    sizes_given = trace.ran_on_given_values and bool(_sized_by_data(trace.ops))
    if not given and not sizes_given:
        return None
    sources = value_sources(trace.ops)
    known = known_values(trace.ops, {**known_any, **given}, only=sources)
    newly_known = known.keys() - known_any.keys()
    # an operand is read for its zeros (and a complex one for a zero imaginary part) only:
    # one with none changes nothing; a factor of a ``mul`` for being all zeros (a zero factor)
    index_read = {v for op in trace.ops for v in _read_values(op)} | {
        op.reads[1].value_id for op in trace.ops if _one_of(op, _TARGET_READERS)
    }
    zeros_read = {
        v for v in newly_known & _operands(trace.ops)
        if has_structure(known[v]) or no_imaginary_part(known[v])
    } | _repeated_operands(trace.ops, {v: known[v] for v in newly_known}) | {
        v for v in newly_known & _factors(trace.ops) if not bool(known[v].any())
    }
    # the ops of the index path too big to run for real: named, the bound for any values there
    skipped = tuple(dict.fromkeys(
        f"{op.name} in '{op.module_path or '<top level>'}'"
        for op in too_big_to_evaluate(trace.ops, known, sources)
    ))
    if (not sizes_given and newly_known.isdisjoint(index_read) and not zeros_read
            and not skipped):
        return None
    necessary = necessary_work(trace, records, known=known, sizes_given=sizes_given,
                               shortcuts=shortcuts)
    return dataclasses.replace(necessary, unevaluated=skipped)
