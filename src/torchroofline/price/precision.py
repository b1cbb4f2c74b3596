"""The precision policy in one place: which unit runs matmul-class work at each precision, what
the user's torch math switches change for fp32 work, and what runs a precision a GPU has no
tensor cores for.

Three tables decide it, each entry with its reason: :data:`FP32_SWITCHES` (fp32 work of a family
runs at the math precision its torch switch allows), :data:`UNIT_RULES` (the unit of each
precision and family) and :data:`FALLBACK_UNITS` (one rule for every precision a GPU lacks: the
fastest unit that can run it, named in a note). :func:`unit_for` applies them.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from math import inf
from typing import Any

import torch

from ..costs import MatmulKind, OpRecord, float_element_bytes, tensor_bytes
from ..errors import PrecisionError
from ..trace.refs import TensorRef, TracedOp
from .hardware import GPUSpec

# --- The precision an op runs at ----------------------------------------------------------------

#: Traced dtype → the precision whose units run it, for dtypes narrower than fp32.
NARROW_DTYPE_PRECISION = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8",
}


#: Packed quantized dtypes → the precision whose units run them: NVFP4 and MXFP4 data are
#: ``float4_e2m1fn_x2``, two e2m1 values per byte. (Their scales, e4m3 or ``float8_e8m0fnu``,
#: are read, never multiplied on tensor cores, so they name no precision.)
QUANTIZED_DTYPE_PRECISION = {"float4_e2m1fn_x2": "fp4"}

#: Both tables above: the precision of each dtype narrower than fp32
_NARROW_PRECISION = {**NARROW_DTYPE_PRECISION, **QUANTIZED_DTYPE_PRECISION}

#: Integer dtypes whose matrix products run on integer tensor cores (``torch._int_mm``: int8
#: operands, int32 products); an integer read by any other op says nothing of its unit
INTEGER_MATMUL_PRECISION = {"int8": "int8", "uint8": "int8"}

#: Bits of one value at each precision (TF32 values are stored as fp32): an op runs at the
#: narrowest precision among its target's and the ones of the dtypes it reads.
VALUE_BITS = {"fp32": 32, "tf32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "fp4": 4}


def read_precision(op: OpRecord) -> str | None:
    """The narrowest precision among the dtypes ``op`` reads (the first of equals); None where
    it reads no float narrower than fp32. An NVFP4 ``_scaled_mm`` reads fp4 data and e4m3
    scales: fp4. A matrix product of int8 operands (``_int_mm``): int8."""
    narrow = [_NARROW_PRECISION[r.dtype] for r in op.reads if r.dtype in _NARROW_PRECISION]
    if op.flops.tensor:
        narrow += [INTEGER_MATMUL_PRECISION[r.dtype] for r in op.reads
                   if r.dtype in INTEGER_MATMUL_PRECISION]
    return min(narrow, key=VALUE_BITS.__getitem__) if narrow else None


def op_precision(op: OpRecord, precision: str) -> str:
    """The precision an op runs at: the target, unless the model itself computes it in a
    narrower float dtype (then that dtype's tensor cores are the ones that can run it)."""
    narrow = read_precision(op)
    if narrow is None or VALUE_BITS[narrow] >= VALUE_BITS[precision]:
        return precision
    return narrow


# --- The dtypes a program chose itself (the estimate) ------------------------------------------

#: Integer dtypes that hold quantized values: a program converting them to a float dequantizes
#: (int8 weights, uint8 codes). Wider integers and booleans (indices, masks) become the default
#: float, which a precision casts like any other.
QUANTIZED_INTEGER_DTYPES = frozenset({"int8", "uint8"})


#: The widest value :func:`widened_value_ids` keeps: fp32. fp64 and complex values keep the
#: precision's cast in the estimate too: the A100 training trace's copies into fp64 measure
#: 9-11 µs, nearer the 8.6-17 µs estimated at their cast bytes than the 11-23 µs at their own.
MAX_WIDENED_BITS = 32


def _value_bits(ref: TensorRef) -> int | None:
    """Bits of one value of a float or quantized-integer tensor (packed fp4: 4); None for the
    other integers and booleans."""
    if ref.dtype in QUANTIZED_INTEGER_DTYPES:
        return 8
    precision = _NARROW_PRECISION.get(ref.dtype)
    if precision is not None:
        return VALUE_BITS[precision]
    return 8 * ref.itemsize if ref.is_float else None


def widened_value_ids(ops: Iterable[TracedOp]) -> frozenset[int]:
    """Float values (up to fp32) the program itself made wider than the data they come from:
    written by an op that reads a narrower float or a quantized integer (``A.to(torch.float32)``
    of an fp8 or int8 ``A``, ``x.float()`` of a bf16 ``x``, a bf16 tensor times an fp32 scale),
    or by an op that reads such a value (the fp32 matmul of two dequantized operands).

    ``precision=`` casts a program written in fp32 as a whole; these values it cannot cast: the
    program converts to them on purpose, and its kernels run in their dtype (a SOL-ExecBench
    FP8 GEMM's reference dequantizes to fp32 and multiplies in fp32, whatever the problem's
    precision). The estimate prices them so (:func:`running_precision`); the bound keeps the
    precision's cast, its math rungs say what lower math would give."""
    widened: set[int] = set()
    for op in ops:
        read_bits = [bits for ref in op.reads if (bits := _value_bits(ref)) is not None]
        reads_widened = any(ref.value_id in widened for ref in op.reads)
        for ref in op.writes:
            bits = _value_bits(ref)
            if ref.is_float and bits <= MAX_WIDENED_BITS and (
                    reads_widened or any(read < bits for read in read_bits)):
                widened.add(ref.value_id)
    return frozenset(widened)


def running_precision(op: OpRecord, precision: str, widened: frozenset[int] = frozenset()
                      ) -> str:
    """The precision ``op`` runs at in a program run at ``precision``, as the estimate takes
    it: :func:`op_precision` from its :func:`cast_precision`."""
    return op_precision(op, cast_precision(op, precision, widened))


def cast_precision(op: OpRecord, precision: str, widened: frozenset[int] = frozenset()) -> str:
    """The precision ``precision=`` casts ``op`` to in the estimate: ``precision``; fp32 where
    the op reads a value the program widened itself (``widened``: :func:`widened_value_ids`);
    the narrowest it reads where it reads only floats the program typed narrower than fp32 (a
    bf16 input of a SOL-ExecBench definition stays bf16 at ``precision="fp8"``). The cast is
    for a program written in fp32; a dtype the program chose, it keeps."""
    if VALUE_BITS[precision] >= VALUE_BITS["fp32"]:
        return precision
    floats = [ref for ref in op.reads if ref.is_float]
    if any(ref.value_id in widened for ref in floats):
        return "fp32"
    narrow = read_precision(op)
    if narrow and all(_value_bits(ref) < VALUE_BITS["fp32"] for ref in floats):
        return narrow
    return precision


def running_bytes(ref: TensorRef, float_bytes: int, widened: frozenset[int] = frozenset()
                  ) -> int:
    """Bytes of one access as the estimate takes it: at a float element size of
    ``float_bytes`` (the precision's cast), a value the program widened itself or typed
    narrower than fp32 at its own (see :func:`cast_precision`)."""
    typed = ref.value_id in widened or (ref.is_float and ref.itemsize < 4)
    return tensor_bytes(ref, ref.itemsize if typed else float_bytes)


# --- The user's switches ------------------------------------------------------------------------


def _fp32_precision(*levels: Any) -> str:
    """PyTorch's newer per-backend ``fp32_precision`` setting: the first of the operator, its
    backend and ``torch.backends`` that is not ``"none"`` ("none" inherits from the parent);
    IEEE fp32 when none is set."""
    for level in (*levels, torch.backends):
        value = getattr(level, "fp32_precision", "none")
        if value != "none":
            return value
    return "ieee"


def _float32_matmul_precision() -> str:
    """``torch.get_float32_matmul_precision()``, which ``torch.backends.cuda.matmul.allow_tf32``
    sets too ("high" when True). PyTorch refuses to answer once the newer
    ``torch.backends.cuda.matmul.fp32_precision`` was set; that setting has no "medium"."""
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        tf32 = _fp32_precision(torch.backends.cuda.matmul) == "tf32"
        return "high" if tf32 else "highest"


#: The per-backend ``fp32_precision`` settings (PyTorch's newer spelling of the TF32 switches).
_FP32_PRECISION_LEVELS = ("", "cuda.matmul", "cudnn", "cudnn.conv", "cudnn.rnn")


def _backend(path: str) -> Any:
    backend = torch.backends
    for part in filter(None, path.split(".")):
        backend = getattr(backend, part)
    return backend


@contextlib.contextmanager
def restoring_switches() -> Iterator[None]:
    """Put every TF32 switch back as it was on exit: code run inside (a problem file's import)
    may set them for its own analysis without changing the next one's. The legacy switches
    are restored first, then the per-backend settings they also write; in that order both
    spellings stay readable."""
    matmul = _float32_matmul_precision()
    cudnn = _fp32_precision(torch.backends.cudnn.conv, torch.backends.cudnn) == "tf32"
    levels = [_backend(path).fp32_precision for path in _FP32_PRECISION_LEVELS]
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn
        for path, value in zip(_FP32_PRECISION_LEVELS, levels, strict=True):
            _backend(path).fp32_precision = value


@dataclass(frozen=True)
class MathSwitches:
    """The torch switches that decide where fp32 matmul-class work runs, as read once at analysis
    time (https://pytorch.org/docs/stable/notes/cuda.html#tf32-on-ampere). Defaults are
    PyTorch's: fp32 matmuls in IEEE fp32, cuDNN convolutions and RNNs allowed TF32."""

    #: ``torch.get_float32_matmul_precision()``: "highest", "high" (TF32) or "medium" (bf16)
    matmul: str = "highest"
    #: cuDNN convolutions: "tf32" or "ieee" (``torch.backends.cudnn.allow_tf32``)
    cudnn_conv: str = "tf32"
    #: cuDNN RNNs: "tf32" or "ieee" (``torch.backends.cudnn.allow_tf32``)
    cudnn_rnn: str = "tf32"

    @classmethod
    def current(cls) -> MathSwitches:
        """The switches as torch holds them now."""
        cudnn = torch.backends.cudnn
        return cls(
            matmul=_float32_matmul_precision(),
            cudnn_conv=_fp32_precision(cudnn.conv, cudnn),
            cudnn_rnn=_fp32_precision(cudnn.rnn, cudnn),
        )


@dataclass(frozen=True)
class SwitchRule:
    """How one switch maps its states to the math precision fp32 work of a family runs at."""

    attribute: str  #: the :class:`MathSwitches` field holding the switch's state
    precision_by_state: Mapping[str, str] = field(hash=False)
    spelling: Mapping[str, str] = field(hash=False)  #: each state as the user set it


_MATMUL_SWITCH = SwitchRule(
    "matmul",
    {"highest": "fp32", "high": "tf32", "medium": "bf16"},
    {
        "highest": "torch.backends.cuda.matmul.allow_tf32 is False",
        "high": "torch.backends.cuda.matmul.allow_tf32 is True (float32 matmul precision 'high')",
        "medium": "torch.get_float32_matmul_precision() is 'medium'",
    },
)


def _cudnn_switch(attribute: str, operator: str) -> SwitchRule:
    return SwitchRule(
        attribute,
        {"ieee": "fp32", "tf32": "tf32"},
        {
            "ieee": f"torch.backends.cudnn.allow_tf32 is False (cudnn.{operator}.fp32_precision)",
            "tf32": f"torch.backends.cudnn.allow_tf32 is True (cudnn.{operator}.fp32_precision)",
        },
    )


#: fp32 work of each family runs at the precision its switch allows. "medium" lets cuBLAS use
#: bf16 internally; pricing it on bf16 tensor cores takes the higher peak, which keeps a bound.
#: SDPA follows the matmul switch: its math backend is two cuBLAS batched matmuls, a correct
#: implementation that then runs at the precision the switch allows.
FP32_SWITCHES: dict[MatmulKind, SwitchRule] = {
    MatmulKind.MATMUL: _MATMUL_SWITCH,
    MatmulKind.ATTENTION: _MATMUL_SWITCH,
    MatmulKind.CONV: _cudnn_switch("cudnn_conv", "conv"),
    MatmulKind.RNN: _cudnn_switch("cudnn_rnn", "rnn"),
}

#: PyTorch's own default switches (what a fresh ``import torch`` holds).
TORCH_DEFAULTS = MathSwitches()


def math_precision(precision: str, kind: MatmulKind, switches: MathSwitches) -> str:
    """The precision ``kind`` work requested at ``precision`` runs at under ``switches``."""
    if precision != "fp32":
        return precision
    rule = FP32_SWITCHES[kind]
    return rule.precision_by_state[getattr(switches, rule.attribute)]


# --- Units --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitRule:
    """Where a matmul-class family runs: a tensor-core peak (``tensor_key``) scaled by
    ``throughput``, or the CUDA cores (``tensor_key=None``)."""

    tensor_key: str | None
    throughput: float
    reason: str


_CUDA_CORES = "CUDA cores"

#: (math precision, matmul family) → unit. The math precision is the requested one, or for fp32
#: the one :data:`FP32_SWITCHES` allows; these fp32 rows are what runs with TF32 switched off.
UNIT_RULES: dict[tuple[str, MatmulKind], UnitRule] = {
    ("fp32", MatmulKind.MATMUL): UnitRule(None, 1.0, "cuBLAS in IEEE fp32: FMA on CUDA cores"),
    ("fp32", MatmulKind.CONV): UnitRule(None, 1.0, "cuDNN in IEEE fp32: FMA on CUDA cores"),
    ("fp32", MatmulKind.ATTENTION): UnitRule(
        "tf32",
        1 / 3,
        "fp32 SDPA dispatches to memory-efficient attention, 3xTF32 "
        "(CUTLASS OpMultiplyAddFastF32: three TF32 MMAs per fp32 MMA)",
    ),
    ("fp32", MatmulKind.RNN): UnitRule(
        None, 1.0, "cuDNN RNNs in CUDNN_FMA_MATH when TF32 is off: CUDA cores"
    ),
    **{("tf32", kind): UnitRule("tf32", 1.0, "TF32 tensor cores") for kind in MatmulKind},
    **{
        (precision, kind): UnitRule(precision, 1.0, f"{precision} tensor cores")
        for precision in ("fp16", "bf16", "fp8", "int8", "fp4")
        for kind in MatmulKind
    },
}

#: One rule for every tensor-core format a GPU lacks: the work runs on the fastest unit that
#: can run it, the entry here (``None``: the CUDA cores), and a note says so. The same rule
#: prices ``--gpu a100 --precision fp8``, ``--gpu t4 --precision bf16`` and fp32 convolutions
#: on a V100 (no TF32).
FALLBACK_UNITS: dict[str, tuple[str | None, str]] = {
    # a GPU table without an fp4 peak prices FP4 work at the fp8 rate: sound, as every GPU
    # with FP4 tensor cores runs them at least as fast as fp8 (2x on Blackwell)
    "fp4": ("fp8", "fp4 (e2m1) values are exact in e4m3"),
    "fp8": ("fp16", "fp8 values are exact in fp16"),
    "int8": ("fp16", "int8 values are exact in fp16"),
    "bf16": ("fp16", "no unit runs bf16 faster; the higher peak keeps a bound"),
    "fp16": (None, "half-precision FMA"),
    "tf32": (None, "TF32 inputs are fp32 values"),
}


#: A format whose values another format holds exactly runs, for a bound, at the faster of the
#: two: Blackwell Ultra (B300) cut its int8 tensor cores to 150 TOPS while fp16 runs 2,250
#: TFLOP/s, and an int8 GEMM is exact on the fp16 units (products of int8 values are exact in
#: them; fp32 accumulation is exact to 2^24)
EXACT_IN_FASTER: dict[str, tuple[str, str]] = {
    "int8": ("fp16", "int8 values are exact in fp16"),
}


@dataclass(frozen=True)
class Unit:
    """The unit that runs a matmul-class family, and why where it is not the table's plain
    choice (a switch the user changed, or a fallback)."""

    name: str  #: "tensor" or "vector"
    peak_flops_per_s: float
    label: str  #: e.g. "tf32 tensor cores"
    notes: tuple[str, ...] = ()


def unit_for(
    gpu: GPUSpec, precision: str, kind: MatmulKind, switches: MathSwitches = TORCH_DEFAULTS
) -> Unit:
    """The unit that runs ``kind`` work requested at ``precision`` on ``gpu`` under the user's
    ``switches``: :data:`FP32_SWITCHES`, then :data:`UNIT_RULES`, then
    :data:`FALLBACK_UNITS` while the GPU lacks the unit."""
    math = math_precision(precision, kind, switches)
    reasons = []
    rule = FP32_SWITCHES[kind]
    state = getattr(switches, rule.attribute)
    if precision == "fp32" and state != getattr(TORCH_DEFAULTS, rule.attribute):
        reasons.append(rule.spelling[state])
    unit_rule = UNIT_RULES[(math, kind)]
    key, throughput = unit_rule.tensor_key, unit_rule.throughput
    exact = EXACT_IN_FASTER.get(key)
    if exact is not None and gpu.has_tensor(key) and gpu.has_tensor(exact[0]) and (
            gpu.tensor_peak(exact[0]) > gpu.tensor_peak(key) * throughput):
        reasons.append(f"the {gpu.name}'s {exact[0]} tensor cores are faster than its {key} "
                       f"ones; priced on them ({exact[1]})")
        key, throughput = exact[0], 1.0
    while key is not None and not gpu.has_tensor(key):
        fallback, why = FALLBACK_UNITS[key]
        reasons.append(
            f"the {gpu.name} has no {key} tensor cores; priced on the fastest unit that can run "
            f"them ({why})"
        )
        key, throughput = fallback, 1.0
    if key is None:
        return Unit("vector", gpu.vector_peak(math), _CUDA_CORES, tuple(reasons))
    label = f"{key} tensor cores"
    return Unit("tensor", gpu.tensor_peak(key) * throughput, label, tuple(reasons))


@dataclass(frozen=True)
class UnitSeconds:
    """Seconds some work takes on each unit at its peak; the units overlap, so its compute time
    is the larger of the two."""

    tensor_s: float
    vector_s: float

    @property
    def compute_s(self) -> float:
        return max(self.tensor_s, self.vector_s)


#: The math ladder: precisions a correct kernel may do its matmul-class work in, highest first.
#: "program" is what the program itself runs (PyTorch's rules and the user's switches). Which
#: rungs are correct is the benchmark's tolerance to decide (an fp32 check at 1e-2 admits TF32
#: math): the bound at each rung says what a kernel computing at that precision cannot beat.
MATH_RUNGS = ("program", "tf32", "bf16", "fp16", "fp8", "fp4")


def math_rungs(gpu: GPUSpec, chosen: str = "program") -> tuple[str, ...]:
    """The rungs of :data:`MATH_RUNGS` that ``gpu`` has, and the ``chosen`` one (the math an
    analysis assumes): fp4 where it has FP4 tensor cores (Blackwell, CDNA4) or where fp4 is
    chosen. Elsewhere FP4 math runs on the fp8 unit and its rung repeats fp8's; it is kept when
    chosen so that the bound the analysis reports has its rung in the ladder."""
    return tuple(rung for rung in MATH_RUNGS
                 if rung != "fp4" or rung == chosen or gpu.has_tensor("fp4"))


def check_math(math: str) -> str:
    """Validate a math rung (:data:`MATH_RUNGS`); returns it lower-cased."""
    rung = str(math).lower()
    if rung not in MATH_RUNGS:
        raise PrecisionError(
            f"unknown math {math!r}; use one of: {', '.join(MATH_RUNGS)} (program: the "
            "precision the program's own ops run at)"
        )
    return rung


def possible_rung(sol_by_math: Mapping[str, float], measured: float) -> str | None:
    """The highest math rung (:data:`MATH_RUNGS` order, the keys of ``sol_by_math``) whose speed
    of light ``measured`` does not beat, in the same unit as the bounds; None: faster than the
    bound of every rung, which no correct kernel on that GPU can be."""
    return next((rung for rung, sol in sol_by_math.items() if sol <= measured), None)


def unit_seconds(
    ops: Iterable[OpRecord],
    gpu: GPUSpec,
    precision: str,
    switches: MathSwitches | None = None,
    widened: frozenset[int] = frozenset(),
) -> UnitSeconds:
    """Tensor-core and CUDA-core seconds of ``ops`` as the program runs them: FLOPs / the peak
    of the unit running them (:func:`unit_for` under the user's ``switches``; default: as torch
    holds them now), each op at its :func:`running_precision` (``widened``: the values the
    program widened itself)."""
    switches = switches or MathSwitches.current()
    tensor_s = 0.0
    vector_s = 0.0
    for op in ops:
        vector_s += op.flops.vector / gpu.vector_peak(cast_precision(op, precision, widened))
        if op.flops.tensor:
            unit = unit_for(gpu, running_precision(op, precision, widened), op.flops.kind,
                            switches)
            if unit.name == "tensor":
                tensor_s += op.flops.tensor / unit.peak_flops_per_s
            else:
                vector_s += op.flops.tensor / unit.peak_flops_per_s
    return UnitSeconds(tensor_s, vector_s)


def compute_seconds(
    ops: Sequence[OpRecord],
    gpu: GPUSpec,
    precision: str,
    switches: MathSwitches | None = None,
    math: str = "program",
) -> float:
    """The compute time of ``ops`` at the ``math`` rung (seconds): the entry of
    :func:`compute_seconds_by_math` on the ladder down to that rung."""
    rungs = MATH_RUNGS[: MATH_RUNGS.index(math) + 1]
    return compute_seconds_by_math(ops, gpu, precision, switches, rungs)[math]


def compute_seconds_by_math(
    ops: Sequence[OpRecord],
    gpu: GPUSpec,
    precision: str,
    switches: MathSwitches | None = None,
    rungs: Sequence[str] = MATH_RUNGS,
) -> dict[str, float]:
    """The compute time of ``ops`` (seconds) at each of ``rungs`` (the ladder of
    :data:`MATH_RUNGS` from "program" down, as :func:`math_rungs` gives it), each at most the
    one above it by construction.

    "program" is :func:`unit_seconds`: each op on its own unit. A lower rung lets each op's
    matmul-class work run on its own unit or on the unit of any rung down to this one (a kernel
    that may use bf16 math may also keep the program's precision, or use TF32), and vector work
    at the fastest vector rate among them. The units overlap, so the time is the larger of the
    tensor-core and the CUDA-core seconds; moving every op to its faster unit can raise it (an
    fp32 ``addmm`` that hid under the convolutions' tensor-core time on the CUDA cores adds to
    it on the tensor cores), so each rung takes a lower bound on the best assignment
    (:func:`_least_compute_s`), and the least of it and every rung above."""
    switches = switches or MathSwitches.current()
    by_math: dict[str, float] = {}
    for depth, rung in enumerate(rungs):
        least = _least_compute_s(ops, gpu, precision, switches, tuple(rungs[1 : depth + 1]))
        by_math[rung] = min([least, *by_math.values()])
    return by_math


def _least_compute_s(
    ops: Sequence[OpRecord],
    gpu: GPUSpec,
    precision: str,
    switches: MathSwitches,
    rungs: tuple[str, ...],
) -> float:
    """A lower bound (seconds) on the compute time of the best assignment of each op's
    matmul-class work, whole, to its own unit or a unit of ``rungs``, with vector work at the
    fastest vector rate of ``precision`` and ``rungs``.

    Two assignments are known: the program's units, and each op on its faster unit; the better
    one's time is ``best``. No assignment that beats ``best`` puts an op where its own seconds,
    added to the work that has one place, reach ``best``: such an op is pinned to its other
    unit, and pinning repeats while pins add up. The ops left with two places are assigned
    (:func:`_assigned_s`): exactly where they are few, else in fractional shares, which no whole
    assignment beats. The bound is the smaller of that and ``best``."""
    vector_peak = max(gpu.vector_peak(p) for p in (precision, *rungs))
    program = [0.0, 0.0]  # tensor-core, CUDA-core seconds on the program's own units
    #: per op: its vector work's seconds, and its matmul-class work's seconds on the fastest
    #: tensor-core and CUDA-core unit allowed (inf: none)
    items: list[tuple[float, float, float]] = []
    places: list[int | None] = []  #: 0 tensor cores, 1 CUDA cores, None: either
    for op in ops:
        vector_s = op.flops.vector / vector_peak
        program[1] += vector_s
        if not op.flops.tensor:
            items.append((vector_s, 0.0, 0.0))
            places.append(1)
            continue
        own = unit_for(gpu, op_precision(op, precision), op.flops.kind, switches)
        program[0 if own.name == "tensor" else 1] += op.flops.tensor / own.peak_flops_per_s
        units = [own, *(unit_for(gpu, rung, op.flops.kind) for rung in rungs)]
        if op.flops.alternative is not None:
            units.append(unit_for(gpu, op_precision(op, precision), op.flops.alternative,
                                  switches))
        on_tensor, on_vector = (_seconds_on(units, name, op.flops.tensor)
                                for name in ("tensor", "vector"))
        items.append((vector_s, on_tensor, on_vector))
        places.append(None if inf not in (on_tensor, on_vector) else int(on_tensor == inf))
    fastest = [0 if on_tensor <= on_vector else 1 for _, on_tensor, on_vector in items]
    best = min(max(_loads(items, fastest)), max(program))
    while True:
        tensor_s, vector_s = _loads(items, places)
        either = [i for i, place in enumerate(places) if place is None]
        pins = {}
        for i in either:
            fits = (tensor_s + items[i][1] < best, vector_s + items[i][2] < best)
            if not any(fits):
                return best
            if not all(fits):
                pins[i] = 0 if fits[0] else 1
        if not pins:
            return min(best, _assigned_s(tensor_s, vector_s, [items[i][1:] for i in either]))
        for i, place in pins.items():
            places[i] = place


def _loads(items: Sequence[tuple[float, float, float]], places: Sequence[int | None]
           ) -> tuple[float, float]:
    """Tensor-core and CUDA-core seconds of ``items`` (see :func:`_least_compute_s`) with each
    op's matmul-class work where ``places`` puts it (None: left out), summed in op order."""
    tensor_s = 0.0
    vector_s = 0.0
    for (own_vector_s, on_tensor, on_vector), place in zip(items, places, strict=True):
        vector_s += own_vector_s
        if place == 0:
            tensor_s += on_tensor
        elif place == 1:
            vector_s += on_vector
    return tensor_s, vector_s


def _seconds_on(units: Sequence[Unit], name: str, flops: int) -> float:
    """Seconds of ``flops`` on the fastest of ``units`` named ``name``; inf where none is."""
    peaks = [unit.peak_flops_per_s for unit in units if unit.name == name]
    return flops / max(peaks) if peaks else inf


#: Up to this many ops that may run on either unit are assigned exactly (2ⁿ assignments tried,
#: 1,024 at most); more are shared out fractionally, a lower bound on the best assignment.
EXACT_ASSIGNMENT_OPS = 10


def _assigned_s(
    tensor_s: float, vector_s: float, movable: Sequence[tuple[float, float]]
) -> float:
    """The least max(tensor, vector seconds) over assignments of the ``movable`` items (their
    tensor-core and CUDA-core seconds) to either unit, the loads starting at ``tensor_s`` and
    ``vector_s``: every whole assignment where there are at most :data:`EXACT_ASSIGNMENT_OPS`,
    else the fractional optimum (:func:`_balanced_s`)."""
    if len(movable) > EXACT_ASSIGNMENT_OPS:
        return _balanced_s(tensor_s, vector_s, movable)
    return min(
        max(tensor_s + sum(item[0] for item, on in zip(movable, picks, strict=True) if on),
            vector_s + sum(item[1] for item, on in zip(movable, picks, strict=True) if not on))
        for picks in itertools.product((True, False), repeat=len(movable))
    )


def _balanced_s(
    tensor_s: float, vector_s: float, movable: Sequence[tuple[float, float]]
) -> float:
    """The least max(tensor, vector seconds) when each ``movable`` item (its tensor-core and
    CUDA-core seconds) may be split between the units, the loads starting at ``tensor_s`` and
    ``vector_s``: the linear programme's optimum. Items move to the tensor cores in order of
    their tensor-to-vector time ratio until the loads meet; the one where they meet is split."""
    ordered = sorted(movable, key=lambda item: item[0] / item[1])
    vector_s += sum(item[1] for item in ordered)
    for on_tensor, on_vector in ordered:
        if tensor_s + on_tensor >= vector_s - on_vector:
            share = max(vector_s - tensor_s, 0.0) / (on_tensor + on_vector)
            return tensor_s + share * on_tensor
        tensor_s += on_tensor
        vector_s -= on_vector
    return max(tensor_s, vector_s)


#: How notes name each family's work.
KIND_LABELS = {
    MatmulKind.MATMUL: "matmuls",
    MatmulKind.CONV: "convolutions",
    MatmulKind.ATTENTION: "attention",
    MatmulKind.RNN: "cuDNN RNNs",
}


def unit_notes(
    ops: Iterable[OpRecord], gpu: GPUSpec, precision: str, switches: MathSwitches
) -> tuple[str, ...]:
    """One note per matmul-class family of ``ops`` whose unit a changed switch or a fallback
    decided, e.g. "fp32 matmuls on tf32 tensor cores: torch.backends.cuda.matmul.allow_tf32 is
    True (float32 matmul precision 'high')"."""
    families = dict.fromkeys(
        (op_precision(op, precision), op.flops.kind)
        for op in ops
        if op.flops.tensor and op.flops.kind is not None
    )
    notes = []
    for op_prec, kind in families:
        unit = unit_for(gpu, op_prec, kind, switches)
        if unit.notes:
            notes.append(f"{op_prec} {KIND_LABELS[kind]} on {unit.label}: {'; '.join(unit.notes)}")
    return tuple(notes)


def check_precision(precision: str) -> str:
    """Validate a requested precision; returns it lower-cased. Every known precision runs on
    every GPU (:data:`FALLBACK_UNITS` covers the ones it lacks)."""
    if not isinstance(precision, str):
        raise PrecisionError(f"precision must be a string such as 'fp32', got {precision!r}")
    precision = precision.lower()
    float_element_bytes(precision)
    return precision


def rung_name(rung: str, precision: str) -> str:
    """A math rung as the reports print it: "program" is the program's precision ("fp32")."""
    return precision if rung == "program" else rung.upper()


#: The rungs above FP8 math: an analysis at one of them holds an FP8 kernel to a higher bound.
_ABOVE_FP8 = MATH_RUNGS[: MATH_RUNGS.index("fp8")]


def fp8_rung_note(
    ops: Iterable[OpRecord], math: str, precision: str,
    sol_by_math_s: Callable[[], Mapping[str, float]],
) -> str | None:
    """Where the program holds FP8 values (FP8-quantized inputs, or casts a reference makes to
    emulate an FP8 GEMM in fp32) but the bound (``sol_by_math_s()[math]``, asked only then)
    assumes higher math that FP8 math would beat: which rung an FP8 kernel is held to, and how
    to ask for it. A SOL-ExecBench FP8 problem was bounded at 1.01 ms where its FP8 rung is
    31.4 µs, and nothing said so."""
    from ..units import human_ms

    ops = list(ops)
    dtypes = sorted({ref.dtype for op in ops for ref in (*op.reads, *op.writes)
                     if NARROW_DTYPE_PRECISION.get(ref.dtype) == "fp8"})
    # matmul-class work the program runs above FP8 (a real FP8 kernel's already runs at it)
    above = any(op.flops.tensor and VALUE_BITS[op_precision(op, precision)] > VALUE_BITS["fp8"]
                for op in ops)
    by_math = sol_by_math_s() if dtypes and above and math in _ABOVE_FP8 else {}
    if "fp8" not in by_math or by_math["fp8"] >= by_math[math]:
        return None
    bound_s, fp8_s = by_math[math], by_math["fp8"]
    return (
        f"the program holds FP8 values ({', '.join(dtypes)}) but its bound, "
        f"{human_ms(bound_s * 1e3)}, assumes {rung_name(math, precision)} math; an FP8 kernel "
        f"is held to the FP8 rung, {human_ms(fp8_s * 1e3)}: pass --math fp8 "
        "(analyze(..., math=\"fp8\")) where the benchmark's tolerance admits FP8 math "
        "(every rung: time_ms.sol_by_math)"
    )
