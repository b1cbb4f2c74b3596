"""Stage 3 (bound side), before the demand walk: the cheapest program equal to the traced one.

The speed of light charges the necessary work of the cheapest program that computes the same
outputs under a declared set of exact identities (identities over the reals, for finite
inputs: what a tolerance check accepts). Each identity is one rule (:data:`ALGEBRA_RULES`,
keyed by the op whose output it recomputes), in a module of its family: :mod:`.linear` (linear
maps commute with sums and means), :mod:`.convs` (convolutions as structured linear maps:
sums over any of their dims), :mod:`.norms` (normalised values summed over any dims),
:mod:`.literals` (zero and one tensors act as the numbers), :mod:`.identities` (values
constant for finite inputs),
:mod:`.shared` (work done once: common subexpressions, broadcast operands), :mod:`.chains`
(matrix chains in their cheapest order), :mod:`.buffers` (constant buffers with structure:
ones, triangles of ones, box filters). A rule rewrites, it never prices:
:func:`cheapest_program` splices every rule's replacement into the trace (:mod:`.splice`), and
the demand walk and the pricing take the rewritten program as they take the program as
written. Why a hand-written
pass and not equality saturation: docs/algebra.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ...costs import OpRecord
from ...trace.refs import Trace
from . import buffers, chains, convs, identities, linear, literals, norms, shared, sums
from ._core import ALGEBRA_RULES, Graph, Match, rules_for
from .chains import chain_order
from .splice import Rewrite, Rewritten, spliced


def cheapest_program(
    trace: Trace,
    records: Sequence[OpRecord],
    known: Mapping[int, torch.Tensor] | None = None,
) -> Rewritten | None:
    """``trace`` with every shortcut a rule finds applied, costed; None when none applies (most
    programs: one registry look-up per op) or for a training step (its backward reads the
    forward's values). ``known``: the values known from shapes and constants
    (:func:`..demand.known_values`), which constant buffers' rules read."""
    if trace.step is not None:
        return None
    candidates = [
        (index, rules) for index, op in enumerate(trace.ops) if (rules := rules_for(op))
    ]
    if not candidates:
        return None
    graph = Graph.of(trace, known)
    matches: list[Match] = []
    for index, rules in candidates:
        match = next((m for rule in rules if (m := rule(graph, index)) is not None), None)
        if match is not None:
            matches.append(match)
    if not matches:
        return None
    rewritten = spliced(trace, records, matches, graph)
    return rewritten if rewritten.rewrites else None


__all__ = [
    "ALGEBRA_RULES",
    "Rewrite",
    "Rewritten",
    "buffers",
    "chain_order",
    "chains",
    "cheapest_program",
    "convs",
    "identities",
    "linear",
    "literals",
    "norms",
    "shared",
    "sums",
]
