"""A training step's graphs as AOTAutograd compiles them (:func:`fused_step_plan`): forward,
backward and the optimizer step fused apart, and the default min-cut partitioner's choice of
what the forward saves and what the backward recomputes, modelled
(:func:`recomputed_in_backward`; METHOD.md, Training steps)."""

from __future__ import annotations

from collections.abc import Sequence

from ..costs import Category, OpRecord
from ..trace.refs import Trace
from ..trace.training import PHASES
from .fusion import Plan, fused_plan


def fused_step_plan(trace: Trace, ops: Sequence[OpRecord]) -> Plan:
    """The fused plan of a training step as AOTAutograd compiles it: the forward graph, the
    backward graph and the optimizer step fused apart (no kernel crosses a phase), each keeping
    what a later graph reads. Between forward and backward the cut follows the default min-cut
    partitioner, modelled (:func:`recomputed_in_backward`): a cheap pointwise forward value is
    recomputed inside the backward kernels that read it instead of being saved; every other
    forward value backward reads is saved. Backward leaves the gradients for the optimizer."""
    phase_of = [op.phase for op in trace.ops]
    graphs = {phase: [op for op in ops if phase_of[op.index] == phase] for phase in PHASES}
    graphs["backward"] = recomputed_in_backward(trace, ops) + graphs["backward"]
    kernels = []
    for position, phase in enumerate(PHASES):
        later = set()
        for graph in PHASES[position + 1:]:
            made = {ref.value_id for op in graphs[graph] for ref in op.writes}
            later |= {ref.value_id for op in graphs[graph] for ref in op.reads} - made
        if graphs[phase]:
            kernels += fused_plan(graphs[phase], frozenset(trace.output_value_ids | later)).kernels
    return Plan(tuple(kernels))


def recomputed_in_backward(trace: Trace, ops: Sequence[OpRecord]) -> list[OpRecord]:
    """The forward ops the min-cut partitioner would recompute in the backward graph, as
    modelled here: a fusible pointwise forward op whose outputs backward reads only in fusible
    (Inductor-generated) kernels, and whose inputs backward has anyway (saved for another
    backward op, or parameters and inputs of the step). Recomputing it then costs no extra
    read and saves the write-and-read of its output, which is the cut min-cut prefers;
    values a library kernel (a matmul's gradient) reads stay saved, as the partitioner keeps
    the inputs of ops it may not recompute."""
    phase_of = [op.phase for op in trace.ops]
    forward_made = {ref.value_id for op in ops if phase_of[op.index] == "forward"
                    for ref in op.writes}
    backward = [op for op in ops if phase_of[op.index] == "backward"]
    saved = {ref.value_id for op in backward for ref in op.reads} & forward_made
    library_reads = {ref.value_id for op in backward
                     if not op.fusible and op.category is not Category.ZERO_COPY
                     for ref in op.reads}
    recomputed = []
    for op in ops:
        if phase_of[op.index] != "forward" or op.category is not Category.POINTWISE:
            continue
        outputs = {ref.value_id for ref in op.writes}
        if (op.fusible and outputs & saved and not outputs & library_reads
                and all(ref.value_id in saved or ref.value_id not in forward_made
                        for ref in op.reads)):
            recomputed.append(op)
    return recomputed
