"""A training step's figures, read from its priced Result: per phase (forward, backward,
optimizer) FLOPs, bytes of each plan, speed of light and the estimates' GPU time
(:func:`phase_figures`), and the activation-checkpointing what-if (:func:`checkpoint_what_if`:
recompute added, activations and peak memory saved). ``result`` is a
:class:`~torchroofline.roofline.Result` (typed ``Any``: roofline, a later stage, imports this)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..costs import tensor_bytes
from ..errors import InputError
from ..plan.memory import Allocation, replay, storage_bytes
from ..trace.refs import TensorRef, largest_per_value
from ..trace.training import PHASES
from .precision import compute_seconds


@dataclass(frozen=True)
class PhaseFigures:
    """One phase of a training step priced on the Result's GPU. FLOPs are the phase's
    necessary FLOPs; bytes are HBM bytes of the kernels whose last op is in the phase, for
    the eager and fused plans, and ``boundary_bytes`` those of the phase as one perfectly fused
    program: each value it reads from outside once, each value it leaves for later (a saved
    activation, a gradient, an updated parameter) once. Times in ms; ``sol_ms`` is the
    phase's FLOPs and boundary bytes at the GPU's peaks, the estimates are the performance
    model's GPU-busy time of the phase's kernels (eager: as autograd launches them)."""

    phase: str
    flops: int
    eager_bytes: int
    fused_bytes: int
    boundary_bytes: int
    eager_kernels: int
    fused_kernels: int
    sol_ms: float
    eager_gpu_ms: float
    compile_gpu_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def phase_figures(result: Any) -> tuple[PhaseFigures, ...]:
    """The forward, backward and optimizer figures of a training step's ``result`` (a
    :class:`~torchroofline.roofline.Result`); empty for an inference trace."""
    trace = result.trace
    if trace.step is None:
        return ()
    phase_of = [op.phase for op in trace.ops]
    float_bytes = result.float_bytes
    boundary = _boundary_refs(trace)
    figures = []
    for phase in PHASES:
        necessary = [op for op in result.plans.necessary.ops if phase_of[op.index] == phase]
        compute_s = compute_seconds(necessary, result.gpu, result.precision, result.switches,
                                    result.math)
        boundary_bytes = sum(tensor_bytes(ref, float_bytes) for ref in boundary[phase])
        eager = _in_phase(result.plans.eager.kernels, phase_of, phase)
        fused = _in_phase(result.plans.fused.kernels, phase_of, phase)
        performance = result.performance
        figures.append(PhaseFigures(
            phase=phase,
            flops=sum(op.total_flops for op in necessary),
            eager_bytes=sum(result.eager_kernels[i].bytes for i in eager),
            fused_bytes=sum(result.kernels[i].bytes for i in fused),
            boundary_bytes=boundary_bytes,
            eager_kernels=sum(result.eager_kernels[i].launches for i in eager),
            fused_kernels=sum(result.kernels[i].launches for i in fused),
            sol_ms=max(compute_s, boundary_bytes / result.gpu.memory_bandwidth_bytes_per_s) * 1e3,
            eager_gpu_ms=sum(performance.eager.kernel_gpu_s[i] for i in eager) * 1e3,
            compile_gpu_ms=sum(performance.compile.kernel_gpu_s[i] for i in fused) * 1e3,
        ))
    return tuple(figures)


def _in_phase(kernels: Sequence[Any], phase_of: Sequence[str], phase: str) -> list[int]:
    """Positions of the plan's ``kernels`` whose last op ran in ``phase`` (a forward op
    recomputed in a backward kernel comes first in it:
    :func:`~torchroofline.step_graphs.recomputed_in_backward`), which are also the positions of
    their estimates (the Result prices one per kernel, in plan order)."""
    return [i for i, kernel in enumerate(kernels)
            if kernel.ops and phase_of[kernel.ops[-1].index] == phase]


def _boundary_refs(trace: Any) -> dict[str, list[TensorRef]]:
    """Per phase: each value its ops read that another phase wrote or that was there before
    (largest view), and each value its ops wrote that another phase reads or the step keeps."""
    writer: dict[int, str] = {}
    readers: dict[int, set[str]] = {}
    for op in trace.ops:
        for ref in op.writes:
            writer[ref.value_id] = op.phase
        for ref in op.reads:
            readers.setdefault(ref.value_id, set()).add(op.phase)
    crossing: dict[str, list[TensorRef]] = {phase: [] for phase in PHASES}
    for op in trace.ops:
        if op.is_view:
            continue
        crossing[op.phase] += [ref for ref in op.reads if writer.get(ref.value_id) != op.phase]
        crossing[op.phase] += [
            ref for ref in op.writes
            if ref.value_id in trace.output_value_ids
            or readers.get(ref.value_id, set()) - {op.phase}
        ]
    return {phase: list(largest_per_value(refs)) for phase, refs in crossing.items()}


# --- What-if: activation checkpointing -----------------------------------------------------


@dataclass(frozen=True)
class CheckpointWhatIf:
    """What checkpointing the modules matching ``patterns`` (``fnmatch`` on module paths,
    ``"blocks.*"``) would change, from the traced step without re-tracing: their forward ops
    run again in backward (``recompute_*``), and the activations their forward saved for
    backward need not be kept (``saved_activation_bytes``, whole storages). ``peak_bytes`` is
    the eager peak (:mod:`memory`) with each of those freed after its last forward use and
    made again just before its first backward use (the recompute), against ``peak_bytes``
    without checkpointing in ``Result.memory``. The modules' inputs and parameters stay saved
    (checkpointing keeps them). Times in ms."""

    patterns: tuple[str, ...]
    modules: int  #: modules matched (each with its submodules)
    recompute_flops: int
    recompute_bytes: int  #: eager HBM bytes of the recomputed kernels
    recompute_sol_ms: float  #: their FLOPs and bytes at the GPU's peaks
    recompute_eager_gpu_ms: float  #: the performance model's GPU time of those kernels
    saved_activation_bytes: int
    peak_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {name: (list(value) if isinstance(value, tuple) else value)
                for name, value in ((n, getattr(self, n)) for n in self.__dataclass_fields__)}


def with_checkpoint(result: Any, patterns: Sequence[str]) -> Any:
    """``result`` with the checkpoint what-if of ``patterns`` (checked now, so a pattern that
    matches nothing is an error at the call)."""
    if not patterns:
        return result
    result = dataclasses.replace(result, checkpoint=tuple(patterns))
    result.checkpoint_what_if  # noqa: B018 — priced (and cached) now, so bad patterns raise here
    return result


def checkpoint_what_if(result: Any, patterns: Sequence[str]) -> CheckpointWhatIf:
    """Price checkpointing the modules of a training step's ``result`` matching ``patterns``."""
    trace = result.trace
    if trace.step is None:
        raise InputError("checkpoint needs a training step; analyze with mode='train'")
    top_of = {path: _checkpointed(path, patterns) for path in {op.module_path for op in trace.ops}}
    tops = {top for top in top_of.values() if top is not None}
    if not tops:
        raise InputError(
            f"no module matches {', '.join(patterns)}; name modules by their paths in the "
            "report's module table (e.g. 'blocks.*')"
        )
    recomputed = {i for i, op in enumerate(trace.ops)
                  if op.phase == "forward" and top_of[op.module_path] and not op.is_view}
    freed = _saved_by(trace, recomputed, _module_inputs(trace, recomputed, top_of))
    kernels = [k for k, kernel in enumerate(result.plans.eager.kernels)
               if kernel.ops and kernel.ops[0].index in recomputed]
    estimates = [result.eager_kernels[k] for k in kernels]
    flops = sum(result.ops[i].total_flops for i in recomputed)
    recompute_bytes = sum(e.bytes for e in estimates)
    compute_s = sum(e.compute_s for e in estimates)
    return CheckpointWhatIf(
        patterns=tuple(patterns),
        modules=len(tops),
        recompute_flops=flops,
        recompute_bytes=recompute_bytes,
        recompute_sol_ms=max(compute_s,
                             recompute_bytes / result.gpu.memory_bandwidth_bytes_per_s) * 1e3,
        recompute_eager_gpu_ms=sum(result.performance.eager.kernel_gpu_s[k]
                                   for k in kernels) * 1e3,
        saved_activation_bytes=sum(storage_bytes(ref, result.float_bytes) for ref in freed),
        peak_bytes=_checkpointed_peak(trace, {ref.storage_id for ref in freed},
                                      result.memory.allocations),
    )


def _checkpointed_peak(trace: Any, freed: set[int], lives: Sequence[Allocation]) -> int:
    """The eager peak of ``trace``'s allocations ``lives`` with the ``freed`` storages dropped
    after their last forward use and allocated again before their first backward use."""
    last_forward: dict[int, int] = {}
    first_backward: dict[int, int] = {}
    for position, op in enumerate(trace.ops):
        for ref in (*op.reads, *op.writes):
            if ref.storage_id not in freed:
                continue
            if op.phase == "forward":
                last_forward[ref.storage_id] = position
            else:
                first_backward.setdefault(ref.storage_id, position)
    checkpointed = []
    for life in lives:
        if life.storage_id in freed and life.storage_id in first_backward:
            checkpointed += [dataclasses.replace(life, last_op=last_forward[life.storage_id]),
                             dataclasses.replace(life, first_op=first_backward[life.storage_id])]
        else:
            checkpointed.append(life)
    return replay(checkpointed, len(trace.ops)).peak_bytes


def _saved_by(trace: Any, made_by: set[int], kept: set[int]) -> list[TensorRef]:
    """The values ops ``made_by`` wrote that backward reads, less ``kept`` ones and what the
    step keeps anyway (the loss), each storage once."""
    read_in_backward = {ref.value_id for op in trace.ops if op.phase == "backward"
                        for ref in op.reads}
    saved: dict[int, TensorRef] = {}
    for i in made_by:
        for ref in trace.ops[i].writes:
            if (ref.value_id in read_in_backward and ref.value_id not in kept
                    and ref.value_id not in trace.output_value_ids):
                saved.setdefault(ref.storage_id, ref)
    return list(saved.values())


def _checkpointed(path: str, patterns: Sequence[str]) -> str | None:
    """The outermost module on ``path`` (itself or an ancestor) that matches a pattern."""
    import fnmatch

    parts = path.split(".") if path else []
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if any(fnmatch.fnmatchcase(prefix, pattern) for pattern in patterns):
            return prefix
    return None


def _module_inputs(trace: Any, recomputed: set[int], top_of: Mapping[str, str | None]) -> set[int]:
    """Values each checkpointed module reads that it did not write itself (its inputs and
    parameters): checkpointing keeps these."""
    groups: dict[str | None, list[int]] = {}
    for i in recomputed:
        groups.setdefault(top_of[trace.ops[i].module_path], []).append(i)
    kept: set[int] = set()
    for ops in groups.values():
        written = {ref.value_id for i in ops for ref in trace.ops[i].writes}
        kept |= {ref.value_id for i in ops for ref in trace.ops[i].reads
                 if ref.value_id not in written}
    return kept
