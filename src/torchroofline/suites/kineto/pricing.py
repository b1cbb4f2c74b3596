"""Price each op instance of a joined trace with the project's own machinery: the op rebuilt as
a one-op program (:mod:`.rebuild`), traced on fake tensors, planned and priced on the GPU, warm
(the bound a kernel inside a model may not beat: what an earlier kernel left in L2 is free to
re-read) and cold (everything from HBM). The performance model's estimate is the cold one: in a
model's step an op reads what earlier ops wrote, weights and activations that were last touched
many kernels before, more than the L2 holds (a warm estimate reads up to half the L2 at its
bandwidth: on the V100 3 MB at 3.4× the HBM rate, which put its mid-sized elementwise ops and
reductions at 0.2-0.75× of measured, issue 39).

The math an op ran in comes from its tensors' dtypes, and from its kernels' names where they
say more (:data:`KERNEL_MATH`): a ``tensorop`` or ``tf32`` GEMM on fp32 data ran on TF32
tensor cores, which the fp32 default would not assume.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import fsum

import torch

from ...errors import TorchrooflineError
from ...plan.plans import make_plans
from ...price.context import PricingContext
from ...price.gpu_spec import GPUSpec
from ...price.host_copies import DEFAULT_HOST_LINK_BYTES_PER_S
from ...price.kernel_load import ProgramLoad
from ...price.modes import beside_collective, host_copies
from ...price.precision import TORCH_DEFAULTS, VALUE_BITS, MathSwitches, read_precision
from ...price.roofline import Result, kernel_floor_s, price
from ...price.verdicts import Verdict, verdict
from ...trace.tracer import trace_model
from .events import Activity, CpuOp, KinetoTrace
from .rebuild import TENSOR_TYPES, RebuildError, rebuild

#: The precision the one-op programs are priced at: fp32, so that each tensor keeps the dtype
#: the trace recorded (a narrower one is priced at its own size and on its own tensor cores).
PRICING_PRECISION = "fp32"
#: How record_shapes names an fp32 tensor's dtype.
FP32_TYPE = "float"


@dataclass(frozen=True)
class KernelMath:
    """A kernel-name pattern that says which math an fp32 op's kernel ran."""

    pattern: re.Pattern[str]
    switches: MathSwitches
    why: str


#: Read only for ops on fp32 tensors; first match wins. cuBLAS and CUTLASS name TF32 kernels
#: ``..._tf32...`` or ``s1688gemm`` (fp32 data, the m16n8k8 TF32 mma; ``bf16_s16816gemm`` is a
#: bf16 one). PyTorch's fp32 default (no TF32 for matmuls) would price them on the CUDA cores, a
#: bound these kernels beat.
KERNEL_MATH: tuple[KernelMath, ...] = (
    KernelMath(
        re.compile(r"tf32|s1688gemm", re.IGNORECASE),
        MathSwitches(matmul="high", cudnn_conv="tf32", cudnn_rnn="tf32"),
        "TF32 tensor cores (the kernel's name says so)",
    ),
)


#: A copy between host and GPU as CUPTI names it: "Memcpy HtoD (Pinned -> Device)",
#: "Memcpy DtoH (Device -> Pageable)".
HOST_COPY = re.compile(r"Memcpy (?:HtoD|DtoH) \((\w+) -> (\w+)\)")


#: Ops whose result is a host value (``.item()``): any copy they launch is device to host,
#: whatever the runtime calls it (ROCm: "Memcpy DtoD (Device -> Device)", into a pinned buffer
#: the GPU maps).
HOST_RESULT_OPS = frozenset({"aten::_local_scalar_dense"})


def host_side(names: Iterable[str], op: str = "") -> str | None:
    """``"pinned"`` or ``"pageable"`` for an op (named ``op``) whose activities (named
    ``names``) copy between host and GPU (the copy then runs at the host link, not at HBM
    rates); None for one that stays on the GPU."""
    names = list(names)
    for name in names:
        found = HOST_COPY.match(name)
        if found:
            return "pageable" if "Pageable" in found.groups() else "pinned"
    return "pinned" if names and op in HOST_RESULT_OPS else None


#: A collective's kernel as NCCL and RCCL name it (``ncclKernel_AllReduce_RING_LL_Sum_float``,
#: ``ncclDevKernel_SendRecv``).
COLLECTIVE = re.compile(r"^(?:void )?[nr]cclDev(?:ice)?Kernel|^(?:void )?[nr]cclKernel")


def beside_collectives(trace: KinetoTrace, launched: Mapping[int, list]) -> set[int]:
    """The ops any of whose activities overlapped a collective's kernel on another stream: they
    shared the GPU's SMs and memory bandwidth with it (:func:`~torchroofline.price.modes.
    beside_collective`)."""
    spans = sorted((a.start_us, a.end_us, a.stream) for a in trace.activities
                   if a.kind == "kernel" and COLLECTIVE.search(a.name))
    starts = [start for start, _, _ in spans]
    found = set()
    for index, activities in launched.items():
        for activity in activities:
            # collectives starting before this activity ends; the last few may still overlap
            last = bisect.bisect_left(starts, activity.end_us)
            if any(end > activity.start_us and stream != activity.stream
                   for _, end, stream in spans[max(0, last - 8):last]):
                found.add(index)
                break
    return found


def kernel_math(op: CpuOp, names: Iterable[str]) -> KernelMath | None:
    """The rule of :data:`KERNEL_MATH` the first matching kernel name picks, for an op that
    reads fp32 tensors (the names say nothing new of narrower ones)."""
    if FP32_TYPE not in (op.args.get("Input type") or ()):
        return None
    for name in names:
        for rule in KERNEL_MATH:
            if rule.pattern.search(name):
                return rule
    return None


@dataclass(frozen=True)
class OpFigures:
    """An op's figures on one GPU: its work, both bounds and the performance model's time."""

    priced_as: str  #: the overload priced, e.g. ``"aten.addmm.default"``
    flops: int
    bytes: int  #: HBM bytes of its eager kernels (read + written)
    #: the warm bound (seconds) at each math rung the GPU has (``"program"``: the op's own math,
    #: :func:`~torchroofline.price.precision.math_rungs`), each at least the op's floor: the
    #: ladder a measured time is judged against (:func:`judge_warm`)
    sol_warm_by_math_s: Mapping[str, float]
    sol_cold_s: float
    estimate_s: float  #: the performance model's eager GPU time, cold L2
    #: the band around it, from the held-out errors of its kernels' families (price/bands.py)
    estimate_low_s: float
    estimate_high_s: float
    bound: str  #: "compute" or "memory"
    math: str | None  #: the math its kernels' names said, where they did
    assumed: tuple[str, ...]  #: what the trace did not say
    #: the precision the op's own math runs at ("bf16" for an op on bf16 tensors), as a
    #: verdict names the "program" rung
    precision: str = PRICING_PRECISION
    #: where an algebraic shortcut lowers the bound: its label, and the warm ladder as written
    shortcut: str | None = None
    sol_warm_as_written_by_math_s: Mapping[str, float] | None = None
    #: the performance model's input for the op (its eager kernels), so that a fit of the
    #: model's constants can price it again (benchmarks/estimate_cv.py)
    program: ProgramLoad | None = field(default=None, compare=False, repr=False)
    #: its warm bound at its own math is the one-kernel floor (:func:`kernel_floor_s`, one L2
    #: hit), not its roofline bound, which is below it
    at_kernel_floor: bool = False

    @property
    def sol_warm_s(self) -> float:
        """The warm bound (seconds) at the op's own math."""
        return self.sol_warm_by_math_s[PROGRAM_RUNG]

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


#: The rung of the math ladder that is the op's own math: the one the trace's ops are priced at.
PROGRAM_RUNG = "program"
#: How a verdict names the "program" rung of ops of several precisions summed (a module's).
MIXED_PRECISION = "ops' own"


def judge_warm(measured_us: float, figures: Sequence[OpFigures]) -> Verdict:
    """The verdict (:func:`~torchroofline.price.verdicts.verdict`, the one analyze's reports
    print) on ``measured_us`` of GPU time spent running the ops of ``figures``, against their
    warm ladders summed rung by rung: the ops ran one after another, so no correct run of all of
    them beats the sum of their bounds at any one math rung. A one-op program's output is the
    op's work, never a constant a correct model may skip, so no verdict here is
    "constant output"."""
    precisions = {f.precision for f in figures}
    shortcuts = [f.shortcut for f in figures if f.shortcut]
    written = (_summed([f.sol_warm_as_written_by_math_s or f.sol_warm_by_math_s
                        for f in figures]) if shortcuts else None)
    return verdict(measured_us * 1e-3, _summed([f.sol_warm_by_math_s for f in figures]),
                   PROGRAM_RUNG, precisions.pop() if len(precisions) == 1 else MIXED_PRECISION,
                   written, "; ".join(dict.fromkeys(shortcuts)) or None)


def _summed(ladders: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Ladders (seconds per rung, the same rungs) summed rung by rung, in ms."""
    return {rung: fsum(ladder[rung] for ladder in ladders) * 1e3 for rung in ladders[0]}


@dataclass(frozen=True)
class OpInstance:
    """One op the trace ran, with the GPU activities it launched and its figures (None where
    it could not be rebuilt: :attr:`why_unpriced` says why)."""

    op: CpuOp
    activities: tuple[Activity, ...]
    figures: OpFigures | None
    why_unpriced: str | None = None

    @property
    def measured_us(self) -> float:
        """The summed GPU time of its activities."""
        return sum(activity.duration_us for activity in self.activities)

    @property
    def verdict(self) -> Verdict | None:
        """Its measured time against its warm ladder (:func:`judge_warm`); None unpriced."""
        return None if self.figures is None else judge_warm(self.measured_us, [self.figures])

    @property
    def faster_than_light(self) -> bool:
        """Faster than its warm bound at every math rung: a bound bug or a timing bug."""
        judged = self.verdict
        return judged is not None and judged.impossible


def list_dtype(trace: KinetoTrace) -> torch.dtype:
    """The dtype assumed for the tensors of a tensor list, whose dtypes the trace does not
    record: the narrowest floating dtype among the ops' recorded tensors (the most common of
    equals), so that a list is never charged more bytes than it may hold."""
    counts: Counter[torch.dtype] = Counter()
    for op in trace.ops:
        for name in op.args.get("Input type") or ():
            dtype = TENSOR_TYPES.get(name)
            if dtype is not None and dtype.is_floating_point:
                counts[dtype] += 1
    if not counts:
        return torch.float32
    return min(counts, key=lambda dtype: (dtype.itemsize, -counts[dtype]))


class Pricer:
    """Prices ops on one GPU, each distinct (op, inputs, math) once."""

    def __init__(self, gpu: GPUSpec, tensor_list_dtype: torch.dtype) -> None:
        self.gpu = gpu
        self.list_dtype = tensor_list_dtype
        self._done: dict[str, OpFigures | str] = {}

    def figures(self, op: CpuOp, math: KernelMath | None, host: str | None = None,
                shared: bool = False) -> OpFigures | str:
        """The op's figures, or the one-line reason it cannot be priced; ``host`` names the
        host side of a copy between host and GPU (:func:`host_side`), ``shared`` says it ran
        beside a collective (:func:`beside_collectives`)."""
        key = json.dumps([op.name, *(op.args.get(k) for k in _SHAPE_FIELDS),
                          math.why if math else None, host, shared], default=str)
        if key not in self._done:
            self._done[key] = self._price(op, math, host, shared)
        return self._done[key]

    def _price(self, op: CpuOp, math: KernelMath | None, host: str | None, shared: bool
               ) -> OpFigures | str:
        try:
            rebuilt = rebuild(op.name, op.args, self.list_dtype)
            traced = trace_model(rebuilt.module, rebuilt.tensors, name=op.name)
        except RebuildError as error:
            return str(error)
        except TorchrooflineError as error:
            return f"does not run on fake tensors ({str(error).split(': ', 1)[-1][:120]})"
        switches = math.switches if math else TORCH_DEFAULTS
        context = PricingContext.resolve(self.gpu, PRICING_PRECISION, "warm", switches=switches)
        warm = price(make_plans(traced), context)
        if warm.unsupported_ops:
            return f"no cost rule for {', '.join(warm.unsupported_ops)}"
        cold = warm.on(cache="cold")
        performance = cold.performance
        crossing = 0 if host is None else host_copy_bytes(rebuilt.tensors)
        if host is not None:
            performance = host_copies(performance, pageable=host == "pageable",
                                      host_bytes=crossing)
        if shared:
            performance = beside_collective(performance)
        bands = performance.kernel_band_s("eager")
        # one op is one kernel (or a few): its bound is at least one memory access's latency;
        # a copy between host and GPU at least its data over the host link, and one access
        # (the copy engine reads through the L2 even where the plan sees no HBM traffic)
        link = self.gpu.host_link_bytes_per_s or DEFAULT_HOST_LINK_BYTES_PER_S
        l2_floor_s = kernel_floor_s(warm.unfused_bytes or crossing, self.gpu)
        floor_s = max(l2_floor_s, crossing / link)
        written = warm.sol_as_written_by_math_s
        return OpFigures(
            priced_as=", ".join(dict.fromkeys(o.name for o in traced.ops if not o.is_view))
            or rebuilt.overload,
            flops=warm.flops,
            bytes=warm.unfused_bytes,
            sol_warm_by_math_s=_floored(warm.sol_by_math_s, floor_s),
            sol_cold_s=max(cold.sol_s, floor_s),
            estimate_s=performance.eager.gpu_busy_s,
            estimate_low_s=sum(low for low, _ in bands),
            estimate_high_s=sum(high for _, high in bands),
            bound=warm.bottleneck,
            math=math.why if math else None,
            assumed=rebuilt.assumed,
            precision=own_precision(warm),
            shortcut="; ".join(shortcut.label for shortcut in warm.rewrites) or None,
            sol_warm_as_written_by_math_s=None if written is None else _floored(written, floor_s),
            program=performance.program,
            at_kernel_floor=warm.sol_by_math_s[PROGRAM_RUNG] < l2_floor_s == floor_s,
        )


def _floored(ladder: Mapping[str, float], floor_s: float) -> dict[str, float]:
    return {rung: max(sol_s, floor_s) for rung, sol_s in ladder.items()}


def own_precision(priced: Result) -> str:
    """The precision of an op's own math: the narrowest float narrower than fp32 it reads (bf16
    for a GEMM on bf16 tensors), else the precision it was priced at."""
    read = [read_precision(op) for op in priced.necessary.ops]
    return min((p for p in read if p), key=VALUE_BITS.__getitem__, default=PRICING_PRECISION)


_SHAPE_FIELDS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def host_copy_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """The bytes a copy between host and GPU moves over the host link, at least: its smallest
    tensor (``.item()``'s scalar, the source of a copy, which a destination may broadcast). A
    copy's HBM traffic may be nothing (``aten._local_scalar_dense`` reads one element the
    driver fetches), its link traffic not."""
    return min((t.numel() * t.element_size() for t in tensors if t.numel()), default=0)


def price_trace(trace: KinetoTrace, gpu: GPUSpec) -> tuple[OpInstance, ...]:
    """Every op that launched GPU work, in start order, with its figures on ``gpu``. An op
    that cannot be rebuilt is priced as the enclosing op whose only launching op it is
    (``aten::cudnn_convolution`` as ``aten::_convolution``), else kept with its reason.
    Ctrl-C raises :class:`~torchroofline.suites.batch.BatchInterrupted` carrying the ops priced
    so far."""
    pricer = Pricer(gpu, list_dtype(trace))
    launched = trace.activities_by_op()
    sole = _sole_launchers(trace.ops, launched)
    shared = beside_collectives(trace, launched)
    instances: list[OpInstance] = []
    try:
        for index in sorted(launched):
            instances.append(_instance(trace.ops, index, launched, sole, pricer, shared))
    except KeyboardInterrupt:
        from ..batch import BatchInterrupted

        raise BatchInterrupted(tuple(instances), len(instances), len(launched), "ops") from None
    return tuple(instances)


def _instance(ops: Sequence[CpuOp], index: int, launched: Mapping[int, list],
              sole: Mapping[int, int], pricer: Pricer, shared: set[int]) -> OpInstance:
    """The op at ``index`` with the activities it launched, priced (or with its reason)."""
    activities = tuple(launched[index])
    math = kernel_math(ops[index], (a.name for a in activities if a.kind == "kernel"))
    host = host_side((a.name for a in activities if a.kind == "memcpy"), ops[index].name)
    outcome = _first_priced(ops, index, sole, pricer, math, host, index in shared)
    if isinstance(outcome, OpFigures):
        return OpInstance(ops[index], activities, outcome)
    return OpInstance(ops[index], activities, None, outcome)


def _sole_launchers(ops: Sequence[CpuOp], launched: Mapping[int, list]) -> dict[int, int]:
    """Enclosing op → the one launching op under it, for enclosing ops with exactly one."""
    under: dict[int, set[int]] = {}
    for index in launched:
        parent = ops[index].parent
        while parent is not None:
            under.setdefault(parent, set()).add(index)
            parent = ops[parent].parent
    return {parent: next(iter(found)) for parent, found in under.items()
            if len(found) == 1 and parent not in launched}


def _first_priced(ops: Sequence[CpuOp], index: int, sole: Mapping[int, int], pricer: Pricer,
                  math: KernelMath | None, host: str | None, shared: bool
                  ) -> OpFigures | str:
    """The op's own figures, else those of the nearest enclosing op that launches nothing
    else; the op's own reason where none can be priced."""
    first = pricer.figures(ops[index], math, host, shared)
    candidate = ops[index].parent
    outcome = first
    while not isinstance(outcome, OpFigures) and candidate is not None and \
            sole.get(candidate) == index:
        outcome = pricer.figures(ops[candidate], math, host, shared)
        candidate = ops[candidate].parent
    return outcome if isinstance(outcome, OpFigures) else first
