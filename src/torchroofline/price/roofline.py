"""Stage 5: price the plans on a GPU — speed of light, bottleneck, per-kernel rooflines — and
gather everything one analysis found into a :class:`Result`.

The plans (:mod:`torchroofline.plans`) do not depend on the GPU; :func:`price` divides their
work by ``gpu``'s peaks under the precision policy of :mod:`torchroofline.precision` and runs the
performance model (:mod:`torchroofline.price.estimate`) on them. Every total a :class:`Result` shows
is derived from its plans and kernels, so no two figures can disagree. Times are seconds inside
this module and milliseconds at the API (``*_ms``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..costs import Category, Cost, MatmulKind, OpRecord, total_cost
from ..errors import InputError
from ..plan.fusion import Kernel, Plan, Refusal
from ..plan.memory import MemoryTimeline, memory_timeline
from ..plan.plans import Plans
from .context import PricingContext
from .estimate_params import EstimateParams
from .hardware import GPUSpec
from .kernel_load import KernelLoad, program_load
from .modes import Performance, estimate_modes
from .precision import (
    TORCH_DEFAULTS,
    MathSwitches,
    compute_seconds,
    compute_seconds_by_math,
    fp8_rung_note,
    math_rungs,
    op_precision,
    possible_rung,
    unit_for,
    unit_notes,
)
from .shortcuts import (
    Shortcut,
    any_input_work,
    as_written_work,
    bound_work,
    shortcuts,
)
from .verdicts import Verdict, verdict

if TYPE_CHECKING:
    from ..plan.demand import Necessary
    from ..trace.distributed import DistributedTrace
    from ..trace.refs import Trace
    from .distributed import DistributedStep
    from .step_figures import CheckpointWhatIf, PhaseFigures



#: How a :class:`Result` shows itself ("to_dict", "format", "plot"), filled in by
#: :mod:`torchroofline.present` when the package is imported. The one documented exception to
#: the one-way flow: ``result.print()`` and ``result.plot()`` stay on the result for users, while
#: this stage imports nothing of the presentation (it registers itself here instead).
PRESENTERS: dict[str, Callable[..., Any]] = {}


@dataclass(frozen=True)
class Roof:
    """A flat roof: the peak of one unit and the matmul families that run on it."""

    unit: str  # "tensor" or "vector"
    peak_flops_per_s: float
    kinds: tuple[str, ...]

    def ridge(self, bandwidth_bytes_per_s: float) -> float:
        """FLOPs/byte where this roof meets the memory slope."""
        return self.peak_flops_per_s / bandwidth_bytes_per_s


def roofs_for(
    gpu: GPUSpec,
    precision: str,
    kinds: Iterable[MatmulKind],
    switches: MathSwitches = TORCH_DEFAULTS,
) -> list[Roof]:
    """The vector roof plus the roof each matmul family in ``kinds`` runs under, highest first.

    Families that share a unit share a roof; a family that falls back to the CUDA cores (fp32
    matmul) joins the vector roof. ``switches`` default to PyTorch's own.
    """
    vector_peak = gpu.vector_peak(precision)
    users: dict[tuple[str, float], list[str]] = {("vector", vector_peak): []}
    for kind in kinds:
        unit = unit_for(gpu, precision, kind, switches)
        peak = unit.peak_flops_per_s if unit.name == "tensor" else vector_peak
        roof = (unit.name, peak)
        users.setdefault(roof, []).append(kind.value)
    roofs = [Roof(unit, peak, tuple(sorted(names))) for (unit, peak), names in users.items()]
    return sorted(roofs, key=lambda roof: roof.peak_flops_per_s, reverse=True)


def roofline_entry(gpu: GPUSpec, roofs: Sequence[Roof]) -> dict[str, Any]:
    return {
        "memory_bandwidth_bytes_per_s": gpu.memory_bandwidth_bytes_per_s,
        "roofs": [
            {
                "unit": roof.unit,
                "peak_flops_per_s": roof.peak_flops_per_s,
                "kinds": list(roof.kinds),
            }
            for roof in roofs
        ],
    }



@dataclass(frozen=True)
class KernelEstimate:
    """One kernel's roofline: FLOPs, HBM bytes and the time of the slower of the two."""

    number: int  #: position in its plan's execution order, from 1 (what a Refusal names)
    name: str
    category: str
    op_names: tuple[str, ...]
    cost: Cost  #: the kernel's FLOPs and HBM bytes
    compute_s: float
    memory_s: float
    launches: int
    launch_s: float
    #: why the kernel stayed apart from kernels it shares a buffer with (fusion.Kernel.refusals)
    refusals: tuple[Refusal, ...] = ()

    @property
    def flops(self) -> int:
        return self.cost.flops

    @property
    def bytes(self) -> int:
        """HBM bytes read plus written."""
        return self.cost.bytes

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def bound(self) -> str:
        """"compute" where the compute time is the longer, else "memory" (a tie, e.g. no FLOPs
        and no bytes, is never labelled compute-bound)."""
        return "compute" if self.compute_s > self.memory_s else "memory"

    @property
    def time_s(self) -> float:
        """max(compute, memory) plus the launch floor of each launch."""
        return max(self.compute_s, self.memory_s) + self.launches * self.launch_s

    @property
    def time_ms(self) -> float:
        return self.time_s * 1e3

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "category": self.category,
            "ops": list(self.op_names),
            "flops": self.flops,
            "bytes": self.bytes,
            "intensity": _finite(self.intensity),
            "time_ms": self.time_ms,
            "bound": self.bound,
            "refusals": [str(refusal) for refusal in self.refusals],
        }


def _finite(value: float) -> float | None:
    return value if value != float("inf") else None


def _estimate(number: int, kernel: Kernel, load: KernelLoad, gpu: GPUSpec) -> KernelEstimate:
    """The roofline of ``kernel`` from its ``load`` (its bytes, launches and compute seconds,
    worked out once for both the roofline and the performance model)."""
    return KernelEstimate(
        number=number,
        name=kernel.name,
        category=kernel.category.value,
        op_names=tuple(op.name for op in kernel.ops),
        cost=Cost(kernel.tensor_flops, kernel.vector_flops, load.bytes),
        compute_s=load.compute_s,
        memory_s=load.bytes / gpu.memory_bandwidth_bytes_per_s,
        launches=load.launches,
        launch_s=gpu.launch_overhead_s,
        refusals=kernel.refusals,
    )


def memory_sol_s(compulsory_bytes: int, gpu: GPUSpec, cache: str) -> float:
    """Cold: every compulsory byte from HBM. Warm: every byte still crosses the L2 (the SMs
    reach memory only through it), at the L2's peak bandwidth, and the part that does not fit
    in L2 also comes from HBM; the two streams may overlap, so the bound is the larger time."""
    if cache == "cold":
        return compulsory_bytes / gpu.memory_bandwidth_bytes_per_s
    beyond_l2 = max(compulsory_bytes - gpu.l2_bytes, 0)
    return max(compulsory_bytes / gpu.l2_bandwidth,
               beyond_l2 / gpu.memory_bandwidth_bytes_per_s)


#: The fewest SM clocks one memory access takes: an L2 hit. Below every published measurement
#: (V100 193 and T4 188 cycles: Jia et al. 2018 and 2019; 200 on V100, A100 and H100 in
#: doi:10.1016/j.ultsonch.2023.106546, Table 3; about 260 on H100: Chips and Cheese, 2023).
L2_HIT_LATENCY_CYCLES = 150
#: The clock a part without a boost clock in the table is taken to run at: above every listed
#: one (the RTX PRO 6000's 2617 MHz), so its latency floor stays a floor.
_FASTEST_CLOCK_MHZ = 3000.0


def kernel_floor_s(moved_bytes: int, gpu: GPUSpec) -> float:
    """The least time (seconds) one kernel that moves data takes, its launch left out: a load
    waits for at least one L2 hit before its value can be used or stored, and a kernel ends only
    when its stores have reached L2. 0 for a kernel that moves nothing."""
    if not moved_bytes:
        return 0.0
    return L2_HIT_LATENCY_CYCLES / ((gpu.boost_clock_mhz or _FASTEST_CLOCK_MHZ) * 1e6)


@dataclass(frozen=True)
class Actual:
    """A measured time set against the bound; what it says is :attr:`verdict`'s, the one every
    report prints (:func:`.verdicts.verdict`)."""

    ms: float
    sol_ms: float
    flops: int
    compulsory_bytes: int
    fused_bytes: int
    verdict: Verdict

    @property
    def possible_with(self) -> str | None:
        """The highest math rung whose bound ``ms`` does not beat (:meth:`Result.possible_with`):
        "program" unless the time beats the program's own bound; None: faster than any math."""
        return self.verdict.rung

    @property
    def shortcut(self) -> str | None:
        """"possible only with an algebraic shortcut (…)" for a time between the bound and the
        bound of the program as written (:attr:`.verdicts.Verdict.shortcut`); else None."""
        return self.verdict.shortcut

    @property
    def below_bound(self) -> bool:
        """Faster than ``sol_ms``, the bound at the analysis's math: a wrong timing, a kernel
        that skips work, or (see :attr:`possible_with`) one computing at a lower precision."""
        return self.ms < self.sol_ms

    @property
    def impossible(self) -> bool:
        """Faster than the bound at every math rung on this GPU: no correct kernel can be (a
        wrong timing or a kernel that skips work)."""
        return self.verdict.impossible

    @property
    def sol_fraction(self) -> float | None:
        """SoL / measured (1.0 = at the limit); >1 only below the bound; None for a constant
        output, whose bound only writes it (:attr:`.verdicts.Verdict.sol_fraction`)."""
        return self.verdict.sol_fraction

    @property
    def headroom(self) -> float:
        """How many times faster the measured kernel could still get."""
        return self.verdict.headroom

    @property
    def tflops(self) -> float:
        return self.flops / (self.ms * 1e-3) / 1e12

    @property
    def gbps(self) -> float:
        """Achieved GB/s on compulsory bytes."""
        return self.compulsory_bytes / (self.ms * 1e-3) / 1e9

    @property
    def gbps_fused(self) -> float:
        return self.fused_bytes / (self.ms * 1e-3) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "ms": self.ms,
            "sol_fraction": self.sol_fraction,
            "headroom": self.headroom,
            "tflops": self.tflops,
            "gbps": self.gbps,
            "gbps_fused": self.gbps_fused,
            "impossible": self.impossible,
            "possible_with": self.possible_with,
            **({} if self.shortcut is None else {"shortcut": self.shortcut}),
            **self.verdict.to_dict(),
        }


@dataclass(frozen=True)
class Result:
    """Everything one analysis found: the GPU-independent ``plans`` priced on ``gpu``. FLOPs and
    bytes are ints; ``*_s`` seconds, ``*_ms`` ms. Totals are derived from the plans and kernels."""

    plans: Plans = field(repr=False, compare=False)
    #: the GPU, precision, math rung, cache mode, torch switches and model constants it was
    #: priced under (:class:`~.context.PricingContext`); :meth:`on` changes some of them
    context: PricingContext
    kernels: tuple[KernelEstimate, ...]  #: the fused plan, in execution order
    eager_kernels: tuple[KernelEstimate, ...]
    notes: tuple[str, ...]
    #: the performance model's prediction (modes.py); the estimates below read it
    performance: Performance = field(repr=False, compare=False)
    actual: Actual | None = None
    #: module-path patterns a training step's what-if checkpoints (:attr:`checkpoint_what_if`)
    checkpoint: tuple[str, ...] = ()
    #: the distributed job this rank belongs to, when it is one (:meth:`with_job`)
    job: DistributedTrace | None = field(default=None, repr=False, compare=False)

    # -- what it was priced under (the context's fields) --
    @property
    def gpu(self) -> GPUSpec:
        return self.context.gpu

    @property
    def precision(self) -> str:
        return self.context.precision

    @property
    def cache(self) -> str:
        return self.context.cache

    @property
    def switches(self) -> MathSwitches:
        """The torch math switches read at analysis time; :meth:`on` keeps them."""
        return self.context.switches

    @property
    def math(self) -> str:
        """The math rung (:data:`precision.MATH_RUNGS`) the speed of light assumes: "program"
        (the program's own math) unless the benchmark's tolerance admits lower-precision math."""
        return self.context.math

    # -- facts of the traced program --
    @property
    def trace(self) -> Trace:
        return self.plans.trace

    @property
    def model_name(self) -> str:
        return self.plans.trace.model_name

    @property
    def params(self) -> int:
        """Parameter count (elements)."""
        return self.plans.trace.params

    @property
    def ops(self) -> tuple[OpRecord, ...]:
        return self.plans.ops

    @property
    def unsupported_ops(self) -> dict[str, int]:
        return self.plans.unsupported_ops

    # -- derived figures --
    @property
    def float_bytes(self) -> int:
        """Bytes of one float element at this precision."""
        return self.context.float_bytes

    @cached_property
    def necessary_cost(self) -> Cost:
        """What the bound charges: the necessary FLOPs and the compulsory bytes."""
        ops = self.necessary.ops
        return Cost(
            tensor_flops=sum(op.flops.tensor for op in ops),
            vector_flops=sum(op.flops.vector for op in ops),
            bytes=self.necessary.bytes(self.float_bytes),
        )

    @cached_property
    def necessary(self) -> Necessary:
        """The work the bound charges: that of the cheapest equal program the algebraic rules
        found, where it prices lower here than the program as written
        (:func:`.shortcuts.bound_work`)."""
        return bound_work(self)

    @cached_property
    def rewrites(self) -> tuple[Shortcut, ...]:
        """The algebraic shortcuts the bound takes, each with the work and time it saves."""
        return shortcuts(self)

    @cached_property
    def sol_as_written_ms(self) -> float | None:
        """The speed of light of the program as written (ms), where shortcuts lower it."""
        return self.sol_of(as_written_work(self)) * 1e3 if self.rewrites else None

    @cached_property
    def fused_cost(self) -> Cost:
        """FLOPs and HBM bytes of the fused plan's kernels."""
        return total_cost(kernel.cost for kernel in self.kernels)

    @cached_property
    def eager_cost(self) -> Cost:
        """FLOPs and HBM bytes of the eager plan's kernels."""
        return total_cost(kernel.cost for kernel in self.eager_kernels)

    @property
    def tensor_flops(self) -> int:
        """Necessary matmul-class FLOPs."""
        return self.necessary_cost.tensor_flops

    @property
    def vector_flops(self) -> int:
        """Necessary FLOPs on the vector units."""
        return self.necessary_cost.vector_flops

    @property
    def flops(self) -> int:
        """Necessary FLOPs: the work the bound charges, which leaves out what no kept output
        needs (dead ops, products with a padded border's zeros, masked scores)."""
        return self.necessary_cost.flops

    @property
    def executed_flops(self) -> int:
        """FLOPs the traced kernels execute, every op as it ran (the eager plan's; what
        ``torch.utils.flop_counter.FlopCounterMode`` counts for the matmul-class ops)."""
        return self.eager_cost.flops

    @property
    def compulsory_bytes(self) -> int:
        """HBM bytes any implementation must move: the inputs the kept outputs need, and them."""
        return self.necessary_cost.bytes

    @property
    def fused_bytes(self) -> int:
        return self.fused_cost.bytes

    @property
    def unfused_bytes(self) -> int:
        return self.eager_cost.bytes

    @property
    def fused_kernel_count(self) -> int:
        """GPU launches of the fused plan."""
        return sum(kernel.launches for kernel in self.kernels)

    @property
    def unfused_kernel_count(self) -> int:
        """GPU launches of the eager plan."""
        return sum(kernel.launches for kernel in self.eager_kernels)

    @cached_property
    def compute_sol_s(self) -> float:
        """The necessary FLOPs on their units at peak, at the analysis's math rung (seconds)."""
        return compute_seconds(
            self.necessary.ops, self.gpu, self.precision, self.switches, self.math
        )

    @property
    def memory_sol_s(self) -> float:
        """The compulsory bytes at the memory system's speed (seconds; see :func:`memory_sol_s`)."""
        return memory_sol_s(self.compulsory_bytes, self.gpu, self.cache)

    @cached_property
    def sol_by_math_s(self) -> dict[str, float]:
        """The speed of light (seconds) at each rung the GPU has and at the analysis's math
        (:func:`precision.math_rungs`: ``sol_by_math_s[result.math]`` is the bound): the
        necessary work on the units the rung allows, each rung at most the one above
        (:func:`precision.compute_seconds_by_math`). Inputs and outputs keep their dtypes in
        memory, so the memory term is the same on every rung."""
        return self.ladder_of(self.necessary)

    def ladder_of(self, necessary: Necessary) -> dict[str, float]:
        """The speed of light (seconds) of ``necessary`` work at each math rung (see
        :attr:`sol_by_math_s`)."""
        compute = compute_seconds_by_math(
            necessary.ops, self.gpu, self.precision, self.switches,
            math_rungs(self.gpu, self.math),
        )
        memory = memory_sol_s(necessary.bytes(self.float_bytes), self.gpu, self.cache)
        return {rung: max(compute_s, memory) for rung, compute_s in compute.items()}

    @cached_property
    def sol_as_written_by_math_s(self) -> dict[str, float] | None:
        """The ladder of :attr:`sol_by_math_s` for the program as written, where shortcuts
        lower the bound (else None): a time between the two ladders may need the shortcut,
        lower math, or either (:func:`.verdicts.verdict`)."""
        return self.ladder_of(as_written_work(self)) if self.rewrites else None

    def judge(self, measured_ms: float) -> Verdict:
        """The verdict on a measured time (ms): :func:`.verdicts.verdict` on both ladders."""
        written = self.sol_as_written_by_math_s
        return verdict(
            measured_ms, {k: v * 1e3 for k, v in self.sol_by_math_s.items()}, self.math,
            self.precision, None if written is None else {k: v * 1e3 for k, v in written.items()},
            "; ".join(shortcut.label for shortcut in self.rewrites) or None,
            self.necessary.constant_output,
        )

    def possible_with(self, measured_s: float) -> str | None:
        """The highest math rung whose speed of light ``measured_s`` does not beat (None: faster
        than any math on this GPU)."""
        return possible_rung(self.sol_by_math_s, measured_s)

    @property
    def sol_s(self) -> float:
        return max(self.compute_sol_s, self.memory_sol_s)

    @property
    def sol_ms(self) -> float:
        return self.sol_s * 1e3

    @cached_property
    def sol_any_input_s(self) -> float | None:
        """The speed of light for any input values (seconds) where the bound (:attr:`sol_s`)
        is for the given ones and differs from it (``plans.necessary_any_input``); else None."""
        any_input = any_input_work(self)
        if any_input is None:
            return None
        any_input_s = self.sol_of(any_input)
        return None if any_input_s == self.sol_s else any_input_s

    def sol_of(self, necessary: Necessary) -> float:
        """The speed of light (seconds) of ``necessary`` work on this GPU, at this precision,
        math rung and cache mode."""
        compute = compute_seconds(
            necessary.ops, self.gpu, self.precision, self.switches, self.math
        )
        return max(compute, memory_sol_s(necessary.bytes(self.float_bytes), self.gpu, self.cache))

    @property
    def bottleneck(self) -> str:
        """"compute" where the compute bound is the longer, else "memory" (ties included)."""
        return "compute" if self.compute_sol_s > self.memory_sol_s else "memory"

    @property
    def memory_fused_s(self) -> float:
        """The prototype's memory figure: fused bytes / bandwidth."""
        return self.fused_bytes / self.gpu.memory_bandwidth_bytes_per_s

    def _predicted_s(self, mode: str) -> float:
        """A mode's predicted time from the performance model, never below the speed of light."""
        return max(self.performance.modes[mode].total_s, self.sol_s)

    @property
    def fused_estimate_s(self) -> float:
        """``torch.compile`` (Inductor, no CUDA graphs): fused kernels plus host costs."""
        return self._predicted_s("fused")

    @property
    def eager_estimate_s(self) -> float:
        """Eager PyTorch: one kernel per op plus host costs."""
        return self._predicted_s("eager")

    @property
    def cudagraph_estimate_s(self) -> float:
        """Inductor with CUDA graphs (``mode="reduce-overhead"``)."""
        return self._predicted_s("cudagraph")

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per fused HBM byte."""
        return self.flops / self.fused_bytes if self.fused_bytes else float("inf")

    @property
    def compulsory_intensity(self) -> float:
        return self.flops / self.compulsory_bytes if self.compulsory_bytes else float("inf")

    @cached_property
    def computing_precision(self) -> str:
        """The precision most FLOPs run at (tensor-core class FLOPs where there are any):
        :attr:`precision`, unless the program computes in a narrower dtype itself
        (:func:`.precision.op_precision`: an fp16 model analysed at the default "fp32" runs its
        matmuls on fp16 tensor cores)."""
        flops_by_precision: dict[str, int] = {}
        tensor = any(op.flops.tensor for op in self.ops)
        for op in self.ops:
            flops = op.flops.tensor if tensor else op.flops.tensor + op.flops.vector
            if flops:
                running = op_precision(op, self.precision)
                flops_by_precision[running] = flops_by_precision.get(running, 0) + flops
        if not flops_by_precision:
            return self.precision
        return max(flops_by_precision, key=flops_by_precision.__getitem__)

    @property
    def main_peak_flops_per_s(self) -> float:
        """Peak (FLOP/s) of the unit a matmul runs on at :attr:`computing_precision` (the ridge
        point's numerator)."""
        unit = unit_for(self.gpu, self.computing_precision, MatmulKind.MATMUL, self.switches)
        return unit.peak_flops_per_s

    @property
    def ridge_point(self) -> float:
        """FLOPs/byte where the main unit's roof meets the memory slope."""
        return self.main_peak_flops_per_s / self.gpu.memory_bandwidth_bytes_per_s

    @cached_property
    def distributed(self) -> DistributedStep | None:
        """The rank's step in its distributed job: collectives, communication, exposed
        communication, step time, memory (:func:`.distributed.price_step`); None for one GPU."""
        from .distributed import price_step

        return None if self.job is None else price_step(self, self.job)

    def with_job(self, job: DistributedTrace) -> Result:
        """This rank's analysis as one rank of ``job``."""
        return replace(self, job=job)

    @cached_property
    def memory(self) -> MemoryTimeline:
        """Live bytes of the eager run at this precision and their peak (:mod:`memory`);
        ``memory.fit(result.gpu)`` sets the peak against the GPU's memory."""
        return memory_timeline(self.plans.trace, self.float_bytes)

    @cached_property
    def phases(self) -> tuple[PhaseFigures, ...]:
        """A training step's figures per phase (forward, backward, optimizer); empty for an
        inference analysis (:func:`step_figures.phase_figures`)."""
        from .step_figures import phase_figures

        return phase_figures(self)

    @cached_property
    def checkpoint_what_if(self) -> CheckpointWhatIf | None:
        """What checkpointing the :attr:`checkpoint` modules would add and save (None when no
        module is named; :func:`step_figures.checkpoint_what_if`)."""
        from .step_figures import checkpoint_what_if

        return checkpoint_what_if(self, self.checkpoint) if self.checkpoint else None

    @property
    def fusion_reduction(self) -> float:
        """Share of eager traffic that fusion removes (0..1)."""
        return 1 - self.fused_bytes / self.unfused_bytes if self.unfused_bytes else 0.0

    @property
    def time_ms(self) -> dict[str, Any]:
        """Every time in ms; ``sol_by_math`` maps each math rung to its speed of light."""
        return {
            "compute_sol": self.compute_sol_s * 1e3,
            "memory_sol": self.memory_sol_s * 1e3,
            "memory_fused": self.memory_fused_s * 1e3,
            "sol": self.sol_s * 1e3,
            "sol_by_math": {rung: sol * 1e3 for rung, sol in self.sol_by_math_s.items()},
            **_any_input_ms(self.sol_any_input_s),
            **_as_written_ms(self.sol_as_written_ms),
            **({} if self.sol_as_written_by_math_s is None else {"sol_as_written_by_math": {
                rung: sol * 1e3 for rung, sol in self.sol_as_written_by_math_s.items()
            }}),
            "fused_estimate": self.fused_estimate_s * 1e3,
            "eager_estimate": self.eager_estimate_s * 1e3,
            "cudagraph_estimate": self.cudagraph_estimate_s * 1e3,
        }

    @property
    def roofs(self) -> list[Roof]:
        """The vector roof and the roof of each unit this model's matmul-class ops run on."""
        kinds = {op.flops.kind for op in self.ops if op.flops.tensor and op.flops.kind}
        ordered = sorted(kinds, key=list(MatmulKind).index)
        return roofs_for(self.gpu, self.precision, ordered, self.switches)

    @property
    def kernel_gpu_s(self) -> dict[KernelEstimate, float]:
        """The performance model's GPU seconds of each fused kernel."""
        return dict(zip(self.kernels, self.performance.compile.kernel_gpu_s, strict=True))

    def top_kernels(self, count: int = 5) -> list[KernelEstimate]:
        """The ``count`` fused kernels with the most estimated GPU time."""
        gpu_s = self.kernel_gpu_s
        return sorted(self.kernels, key=gpu_s.__getitem__, reverse=True)[:count]

    # -- output --
    def to_dict(self) -> dict[str, Any]:
        return PRESENTERS["to_dict"](self)

    def to_json(self, path: str | None = None, *, indent: int = 2) -> str:
        """The JSON of :meth:`to_dict`; written to ``path`` when given."""
        if path is not None and not Path(path).parent.is_dir():  # as Result.plot's check
            raise InputError(f"cannot write {str(path)!r}: no folder {str(Path(path).parent)!r}; "
                             "create it first")
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
        return text

    def format(self, top: int = 5) -> str:
        return PRESENTERS["format"](self, top=top)

    def print(self, top: int = 5) -> None:
        print(self.format(top=top))

    def plot(self, path: str | None = None, *, ax: Any = None, top: int = 10) -> Any:
        return PRESENTERS["plot"](self, path, ax=ax, top=top)

    def with_notes(self, notes: Sequence[str]) -> Result:
        """The same analysis with ``notes`` added in front (e.g. how a problem was built); its
        plans keep them, so :meth:`on` shows them too."""
        plans = replace(self.plans, notes=(*notes, *self.plans.notes))
        return replace(self, plans=plans, notes=(*notes, *self.notes))

    def with_actual(self, actual_ms: float | None) -> Result:
        """The same analysis set against a measured time (ms)."""
        return replace(self, actual=_actual(actual_ms, self))

    def on(
        self,
        gpu: str | GPUSpec | None = None,
        precision: str | None = None,
        cache: str | None = None,
        estimate_params: EstimateParams | None = None,
        math: str | None = None,
    ) -> Result:
        """The same plans priced on another GPU / precision / cache mode / math rung, or under
        other performance-model parameters (no retrace, no re-planning)."""
        context = self.context.on(gpu, precision, cache, estimate_params, math)
        return replace(price(self.plans, context), checkpoint=self.checkpoint, job=self.job)


def _any_input_ms(any_input_s: float | None) -> dict[str, float]:
    """``{"sol_any_input": ms}`` where the bound for any input values differs from the bound."""
    return {} if any_input_s is None else {"sol_any_input": any_input_s * 1e3}


def _as_written_ms(as_written_ms: float | None) -> dict[str, float]:
    """``{"sol_as_written": ms}`` where algebraic shortcuts lower the bound."""
    return {} if as_written_ms is None else {"sol_as_written": as_written_ms}


def _actual(actual_ms: float | None, result: Result) -> Actual | None:
    if actual_ms is None:
        return None
    if (isinstance(actual_ms, bool) or not isinstance(actual_ms, (int, float))
            or not 0 < actual_ms < math.inf):
        raise InputError(
            f"actual_ms must be a finite time above 0 in milliseconds, got {actual_ms!r}")
    judged = result.judge(float(actual_ms))
    return Actual(
        ms=float(actual_ms),
        sol_ms=result.sol_ms,
        flops=result.flops,
        compulsory_bytes=result.compulsory_bytes,
        fused_bytes=result.fused_bytes,
        verdict=judged,
    )


def price(plans: Plans, context: PricingContext, actual_ms: float | None = None) -> Result:
    """Price ``plans`` under ``context``: per-kernel rooflines of both plans, the notes, and the
    performance model (:mod:`torchroofline.price.estimate`). The per-kernel rooflines and
    estimates keep the program's math; ``context.math`` is the rung the speed of light
    assumes."""
    gpu, precision, switches = context.gpu, context.precision, context.switches
    notes = [
        *plans.notes,
        *plans.trace.notes,
        *unit_notes(plans.ops, gpu, precision, switches),
        *plans.necessary.notes,
    ]
    unsupported = plans.unsupported_note(context.float_bytes)
    if unsupported:
        notes.append(unsupported)
    program = program_load(plans, context)
    result = Result(
        plans=plans,
        context=context,
        kernels=_estimates(plans.fused, program.fused, gpu),
        eager_kernels=_estimates(plans.eager, program.eager, gpu),
        notes=tuple(notes),
        performance=estimate_modes(program, context.estimate_params),
    )
    fp8 = fp8_rung_note(plans.ops, context.math, precision, lambda: result.sol_by_math_s)
    if fp8:
        result = replace(result, notes=(*result.notes, fp8))
    return result.with_actual(actual_ms)


def _estimates(
    plan: Plan, loads: Sequence[KernelLoad], gpu: GPUSpec
) -> tuple[KernelEstimate, ...]:
    return tuple(
        _estimate(number, kernel, load, gpu)
        for number, (kernel, load) in enumerate(zip(plan.kernels, loads, strict=True), 1)
    )


__all__ = ["Actual", "Category", "KernelEstimate", "Result", "price"]
