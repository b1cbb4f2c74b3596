"""Stage 3 (bound side), before the demand walk: the cheapest program equal to the traced one.

The speed of light charges the necessary work of the cheapest program that computes the same
outputs under a declared set of exact identities (identities over the reals, for finite
inputs: what a tolerance check accepts). Each identity is one rule (:data:`ALGEBRA_RULES`,
keyed by the op whose output it recomputes), in a module of its family: :mod:`.network` and
:mod:`.contraction` (a linear segment as one tensor network, contracted in its cheapest order),
:mod:`.linear` (linear maps commute with sums and means), :mod:`.convs` (convolutions as
structured linear maps: sums over any of their dims), :mod:`.norms` (normalised values summed
over any dims), :mod:`.literals` (zero and one tensors act as the numbers), :mod:`.identities`
(values constant for finite inputs),
:mod:`.shared` (work done once: common subexpressions, broadcast operands), :mod:`.chains`
(matrix chains in their cheapest order), :mod:`.buffers` (constant buffers with structure:
ones, triangles of ones, box filters). A rule rewrites, it never prices:
:func:`cheapest_program` splices every rule's replacement into the trace (:mod:`.splice`),
round after round until none applies, and
the demand walk and the pricing take the rewritten program as they take the program as
written. Why a hand-written
pass and not equality saturation: docs/algebra.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import torch

from ...costs import OpRecord
from ...trace.refs import Trace
from ..demand.constants import known_values
from . import (
    buffers,
    chains,
    contraction,
    convs,
    identities,
    linear,
    literals,
    network,
    norms,
    shared,
    sums,
)
from ._core import ALGEBRA_RULES, Graph, Match, rules_for
from .chains import chain_order
from .splice import Rewrite, Rewritten, spliced

#: most rounds of rewriting (each round's shortcuts may enable the next: a common
#: subexpression makes an x − x, which makes a sum of zeros)
MAX_ROUNDS = 8


def cheapest_program(
    trace: Trace,
    records: Sequence[OpRecord],
    known: Mapping[int, torch.Tensor] | None = None,
) -> Rewritten | None:
    """``trace`` with the rules applied until none applies (a fixed point), costed; None when
    none applies (most programs: one registry look-up per op, one value-numbering pass) or for
    a training step (its backward reads the forward's values). ``known``: the values known
    from shapes and constants (:func:`..demand.known_values`), which constant buffers' rules
    read. Each round takes the common subexpressions first (:func:`.shared.common_values`,
    then :func:`.shared.equal_networks`), and only where there are none the other rules, so
    that the identities see one value."""
    if trace.step is not None:
        return None
    program = Rewritten(trace, tuple(records), (), tuple(range(len(trace.ops))))
    #: per op of the current program: the traced op it is, or the rewrite that inserted it
    origins: list[int | tuple[int]] = list(range(len(trace.ops)))
    applied: list[tuple[Rewrite, list[int]]] = []
    for _ in range(MAX_ROUNDS):
        inserted = frozenset(i for i, o in enumerate(origins) if not isinstance(o, int))
        graph = Graph.of(program.trace, known, program.ops, inserted)
        matches = shared.common_values(graph) or shared.equal_networks(graph) or _matches(graph)
        if not matches:
            break
        step = spliced(program.trace, program.ops, matches, graph)
        if not step.rewrites:
            break
        numbers = []
        for rewrite in step.rewrites:
            gone = [origins[i] for i in rewrite.removed if isinstance(origins[i], int)]
            if gone or not rewrite.removed:
                numbers.append(len(applied))
                applied.append((rewrite, gone))
            else:  # it rewrote only what an earlier rewrite inserted: part of that one
                numbers.append(origins[rewrite.removed[0]][0])
        origins = [
            origins[source] if source is not None else (_inserted_by(step, index, numbers),)
            for index, source in enumerate(step.sources)
        ]
        program = step
        known = known_values(program.trace.ops, program.trace.constants)
    if not applied:
        return None
    rewrites = tuple(
        replace(rewrite, removed=tuple(sorted(gone)),
                inserted=tuple(i for i, o in enumerate(origins) if o == (number,)))
        for number, (rewrite, gone) in enumerate(applied)
    )
    return replace(program, rewrites=rewrites, sources=tuple(
        o if isinstance(o, int) else None for o in origins
    ))


def _matches(graph: Graph) -> list[Match]:
    """The first match of each op's rules, in program order."""
    matches = []
    for index, op in enumerate(graph.trace.ops):
        for rule in rules_for(op):
            match = rule(graph, index)
            if match is not None:
                matches.append(match)
                break
    return matches


def _inserted_by(step: Rewritten, index: int, numbers: Sequence[int]) -> int:
    """The number of the rewrite that inserted op ``index`` of ``step``'s program."""
    return next(numbers[n] for n, rewrite in enumerate(step.rewrites) if index in rewrite.inserted)


__all__ = [
    "ALGEBRA_RULES",
    "Rewrite",
    "Rewritten",
    "buffers",
    "chain_order",
    "chains",
    "cheapest_program",
    "contraction",
    "convs",
    "identities",
    "linear",
    "literals",
    "network",
    "norms",
    "shared",
    "sums",
]
