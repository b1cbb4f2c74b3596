"""The stage after the roofline: a performance model — how long a forward call should take on a
real GPU driven by real PyTorch, as opposed to the speed of light (how long it could take at best).

The roofline stage keeps the bounds; this stage predicts. It has two parts:

1. **Per kernel, GPU time** at *achievable* rates (:func:`kernel_gpu_s`): bytes at a fraction of
   the datasheet bandwidth plus a fixed fill/drain latency (so a small kernel reaches a small
   share of the bandwidth and no kernel takes less than that latency), FLOPs at a per-family
   fraction of the unit's peak, GEMM-class kernels in whole waves of output tiles over the SMs
   (wave quantization) plus their tile pipeline's prologue and epilogue, eager row-per-block
   reductions limited by how many rows they have, eager kernels that cannot vectorize limited by
   their per-element offset arithmetic, flash attention at least its waves of query blocks, and
   recurrences latency-bound per step. Data a warm L2 holds is read at the L2's bandwidth. A
   tensor-core GEMM whose operands' rows are misaligned runs at its ``align1`` share; a library
   call pays the fill of the other kernels it launches; a host↔device copy runs at the GPU's
   host link; a kernel beside a collective at its share of the GPU. The op-shape rules live in
   :mod:`.eager_kernels`, the constants in :mod:`.estimate_params`, and every
   estimate's band in :mod:`.bands`. The kernel-level terms are measured on real kernels in
   profiler traces and cross-validated there (docs/validation.md).
2. **Per mode, a host/launch pipeline** (:func:`timeline`): the host issues kernel *k* when it
   has finished the CPU work before it; the GPU runs it when the GPU is free and the kernel has
   been issued. When kernels are short the host is the bottleneck and the GPU waits: the same
   rule gives both the launch-bound and the GPU-bound regime. Modes: ``eager`` (one kernel per
   aten op, Python and dispatcher cost per op), ``compile`` (Inductor's fused kernels, a guard
   check per call and a launch per kernel) and ``cudagraph`` (the fused kernels replayed as one
   CUDA graph: one replay per call, a small gap between kernels on the GPU).

Every constant is a field of :class:`EstimateParams` (GPU side) or :class:`HostCosts` (CPU side,
one machine) with its source; the fitted ones come from ``benchmarks/calibrate.py``, which
writes ``docs/calibration.md`` with the data, the fit and its error per GPU and per level.
Times are seconds inside this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ..costs import Category, MatmulKind, OpRecord
from ..plan.fusion import Kernel
from ..plan.plans import Plans
from ..trace.refs import Trace, TracedOp
from .bands import HOST_BAND, family_band
from .eager_kernels import (
    CPP_LAUNCHES,
    EXTRA_READS,
    INDUCTOR_REDUCTION_THREADS,
    L2_REREADS,
    ROW_LOAD_BYTES,
    ROW_PER_BLOCK,
    SCALAR_ACCESSES,
    SERIAL_LOADS,
    TWO_PASS,
    gemm_alignment,
    looped_reduction_rereads,
    misaligned_gemm_loads,
    pointwise_convolution,
    sector_shares,
    split_reduction,
    strided_accesses,
    window_accesses,
)
from .estimate_params import DEFAULT_HOST, DEFAULT_PARAMS, EstimateParams, HostCosts
from .hardware import GPUSpec
from .library_calls import (
    channel_tile_share,
    convolution_call,
    convolution_gemms,
    row_block_share,
    transposed_phase_work,
)
from .precision import (
    MathSwitches,
    cast_precision,
    running_bytes,
    running_precision,
    unit_for,
    unit_seconds,
    widened_value_ids,
)

if TYPE_CHECKING:  # the context holds this module's EstimateParams
    from .context import PricingContext

# --- What one kernel asks of the GPU ------------------------------------------------------


@dataclass(frozen=True)
class GemmShape:
    """The output grid of a GEMM-class kernel: ``batch`` independent ``m × n`` outputs, each
    a reduction of depth ``k``."""

    batch: int
    m: int
    n: int
    k: int


@dataclass(frozen=True)
class KernelLoad:
    """What one kernel asks of one GPU at one precision, at peak rates: the model's input.

    Independent of :class:`EstimateParams`, so the calibration computes it once per problem
    and GPU and re-prices it under many parameter sets.
    """

    name: str
    family: str  #: a key of ``matmul_fraction`` for matmul-class kernels, else a category
    matmul_s: float  #: matmul-class FLOPs at the peak of the unit that runs them
    vector_s: float  #: other FLOPs at the CUDA-core peak
    bytes: int  #: HBM bytes the plan charges this kernel
    launches: int  #: GPU launches (a cuDNN RNN launches one per step)
    gemm: GemmShape | None = None  #: output grid, for wave quantization
    rows: int | None = None  #: rows of a row-per-block eager reduction (parallelism limit)
    #: bytes a thread loads per instruction from those rows: one element, or a 16-byte vector
    #: where the kernel vectorizes (:data:`~.eager_kernels.ROW_LOAD_BYTES`)
    element_bytes: int = 4
    #: share of the row bandwidth one of its blocks keeps (:func:`~.library_calls.row_block_share`)
    row_share: float = 1.0
    reread_bytes: int = 0  #: input bytes a two-pass eager kernel reads a second time
    #: input bytes a row-per-block eager kernel reads again, row by row: they hit L2 while the
    #: rows of one wave of blocks fit it, else they come from HBM (:func:`l2_missed_bytes`)
    l2_reread_bytes: int = 0
    #: input bytes a fused reduction kernel reads again, loop by loop, over rows too long to
    #: keep on chip, its longest such row's bytes and that reduction's rows: the re-reads hit
    #: L2 while the rows of every block the GPU holds fit it (:func:`loop_missed_bytes`)
    loop_reread_bytes: int = 0
    loop_row_bytes: int = 0
    loop_rows: int = 0
    #: element accesses (output elements × operands) of an eager kernel that cannot use vector
    #: loads: an operand broadcast or laid out unlike its output (see :func:`strided_accesses`)
    accesses: int = 0
    #: bytes such a kernel moves beyond :attr:`bytes` in whole sectors for operands laid out
    #: unlike its output (:func:`~.eager_kernels.sector_shares`), at the memory rate
    sector_bytes: int = 0
    host_views: int = 0  #: view/metadata ops the host runs before this kernel (eager)
    #: issued from C++ by the Python call that issued the kernel before it (one that decomposes
    #: in C++, :attr:`~torchroofline.trace.refs.TracedOp.python_call`): a dispatch and a launch,
    #: no Python (eager)
    cpp_issued: bool = False
    #: kernels its aten op launches from C++ besides this one (eager: logsumexp's nine,
    #: :data:`~.eager_kernels.CPP_LAUNCHES`; a split reduction's semaphore memset)
    cpp_launches: int = 0
    #: loads one of its threads makes in series, each a load's full latency (eager: a kernel of
    #: a single narrow block, :data:`~.eager_kernels.SERIAL_LOADS`)
    serial_loads: int = 0
    host_modules: int = 0  #: submodule calls that start before this kernel (eager)
    #: seconds of its FLOPs on the units that run them, at their peaks (the larger of the
    #: tensor-core and CUDA-core times: the per-kernel roofline's compute time)
    compute_s: float = 0.0
    #: the largest power of two (≤ 16) dividing every row of a tensor-core GEMM's operands, in
    #: bytes (:func:`gemm_alignment`); 16 for every other kernel
    align_bytes: int = 16
    host_bytes: int = 0  #: bytes a host↔device copy moves over the host link
    pageable: bool = False  #: the host side of that copy is pageable memory
    library_call: str = ""  #: a key of ``EstimateParams.library_kernels``, or ""
    #: GEMM kernels of its library call, each with its own fill, prologue and epilogue (a
    #: convolution backward: one per gradient, :func:`~.library_calls.convolution_gemms`)
    gemm_kernels: int = 1
    #: a tensor-core convolution whose NCHW input and output cuDNN transposes to NHWC and back
    #: (``EstimateParams.conv_layout_passes``); not an eager 1×1 one (:func:`pointwise_convolution`)
    layout_transposes: bool = False
    #: it runs beside a collective (NCCL/RCCL) on another stream, which holds SMs and memory
    #: bandwidth meanwhile (:func:`beside_collective`)
    shared: bool = False
    #: the unit its matmul-class work runs on (:class:`~.precision.Unit`'s name): "tensor", or
    #: "vector" (the GPU's fp32 rate: NVIDIA's CUDA cores, CDNA's fp32 MFMA); "" without such work
    matmul_unit: str = ""
    #: MACs its kernel computes per MAC of its FLOPs: a strided transposed convolution's
    #: phases (:func:`~.library_calls.transposed_phase_work`); 1 for every other kernel
    phase_work: float = 1.0
    #: bytes a GEMM-class kernel's epilogue writes (its output tile by tile), 0 for other kernels
    output_bytes: int = 0


@dataclass(frozen=True)
class ProgramLoad:
    """Both plans of one analysis on one GPU, as the model sees them."""

    gpu: GPUSpec
    cache: str
    eager: tuple[KernelLoad, ...]
    fused: tuple[KernelLoad, ...]
    #: what a CUDA-graph replay runs before the graph (:func:`replay_input_copy`); () for none
    replay_copies: tuple[KernelLoad, ...] = ()

    @property
    def replayed(self) -> tuple[KernelLoad, ...]:
        """The kernels a CUDA-graph replay runs: its input copies, then the fused plan."""
        return self.replay_copies + self.fused


#: Matmul-class families with their own achievable fraction, and why they differ.
FAMILIES: dict[str, str] = {
    "gemm": "cuBLAS GEMM (fp32: SGEMM on the CUDA cores)",
    "conv": "cuDNN 2D convolution (implicit GEMM on TF32 tensor cores)",
    "conv3d": "cuDNN 3D convolution: fewer tuned kernels, more index math per MAC",
    "conv_transposed": "cuDNN transposed convolution: a data-gradient kernel with scattered "
    "accumulation",
    "conv_transposed3d": "cuDNN 3D transposed convolution: the data-gradient kernel over a "
    "volume, with 3D's index math",
    "conv_grouped": "grouped/depthwise convolution: too little work per group for the tensor cores",
    "attention": "fused SDPA kernels on the CUDA cores (memory-efficient attention in fp32)",
    "flash_attention": "flash attention on the tensor cores (FA2, CK, Triton): the softmax "
    "between its two small MMAs runs on the CUDA cores and the SFU, far below the MMA peak",
    "rnn": "cuDNN RNN: per-step GEMMs, small and serial",
}


#: Convolution families cuDNN runs as implicit GEMMs over all output channels at once (a
#: grouped convolution's kernels work group by group).
TILED_CONV_FAMILIES = frozenset({"conv", "conv3d", "conv_transposed", "conv_transposed3d"})


def _conv_family(traced: TracedOp) -> str:
    """A convolution's kernel family from its schema arguments (``convolution``,
    ``_convolution`` and ``convolution_backward`` name ``groups``, ``transposed`` and
    ``weight`` alike, at different positions)."""
    if int(traced.argument("groups", 1) or 1) > 1:
        return "conv_grouped"
    weight = traced.argument("weight")
    three_d = getattr(weight, "dim", lambda: 4)() >= 5
    if traced.argument("transposed", False):
        return "conv_transposed3d" if three_d else "conv_transposed"
    return "conv3d" if three_d else "conv"


#: SDPA runs a flash kernel (FlashAttention-2, CK, Triton) at these precisions; in fp32 it
#: runs the memory-efficient kernel (the ``attention`` family).
FLASH_PRECISIONS = frozenset({"fp16", "bf16"})

#: Families whose kernels differ at those 16-bit precisions: SDPA runs a flash kernel, and a 3D
#: convolution runs cuDNN's implicit-GEMM tensor-core kernels, the 2D family's (a profiled
#: bf16 Conv3d on an H100 runs ``sm90_xmma_fprop_implicit_gemm_bf16…_nhwc``, the time folded
#: into the GEMM's rows and depth, behind ``nchwToNhwc`` transposes); ``conv3d``'s share is
#: cuDNN's fp32 3D kernels'.
HALF_PRECISION_FAMILY: dict[str, str] = {"attention": "flash_attention", "conv3d": "conv"}


_FAMILY_OF_KIND: dict[MatmulKind, Callable[[TracedOp], str]] = {
    MatmulKind.MATMUL: lambda traced: "gemm",
    MatmulKind.CONV: _conv_family,
    MatmulKind.ATTENTION: lambda traced: "attention",
    MatmulKind.RNN: lambda traced: "rnn",
}


def _gemm_of(op: OpRecord) -> GemmShape | None:
    """Output grid of a matmul-class op from its output shape; depth from its FLOPs
    (2·batch·m·n·k). Convolutions are implicit GEMMs: m = images × output pixels, n = output
    channels. Attention tiles over query blocks of each (batch, head)."""
    if not op.writes or op.flops.kind is MatmulKind.RNN:
        return None
    shape = op.writes[0].shape
    if op.flops.kind is MatmulKind.CONV and len(shape) >= 3:
        batch, m, n = 1, shape[0] * math.prod(shape[2:]), shape[1]
    elif len(shape) >= 2:
        batch, m, n = math.prod(shape[:-2]), shape[-2], shape[-1]
    else:
        batch, m, n = 1, math.prod(shape), 1
    outputs = max(batch * m * n, 1)
    return GemmShape(max(batch, 1), max(m, 1), max(n, 1), max(op.flops.tensor // (2 * outputs), 1))


def kernel_load(
    kernel: Kernel,
    trace: Trace,
    gpu: GPUSpec,
    precision: str,
    float_bytes: int,
    *,
    eager: bool,
    switches: MathSwitches | None = None,
    host_views: int = 0,
    host_modules: int = 0,
    cpp_issued: bool = False,
    widened: frozenset[int] = frozenset(),
) -> KernelLoad:
    """The model's view of one plan kernel on ``gpu`` (units as ``switches`` put them), with
    the view ops and submodule calls the host runs before it (eager). A dtype the program chose
    (a value it widened itself, ``widened``: :func:`~.precision.widened_value_ids`, or one it
    typed narrower than fp32) is kept whatever ``precision`` casts: its bytes at its size
    (:func:`~.precision.running_bytes`), the ops reading it at its precision
    (:func:`~.precision.running_precision`)."""
    switches = switches or MathSwitches.current()
    work = unit_seconds(kernel.ops, gpu, precision, switches, widened)
    vector_s = sum(op.flops.vector / gpu.vector_peak(cast_precision(op, precision, widened))
                   for op in kernel.ops)
    matmul_op = next((op for op in kernel.ops if op.flops.tensor), None)
    family = kernel.category.value
    gemm = None
    matmul_unit = ""
    if matmul_op is not None and matmul_op.flops.kind is not None:
        running = running_precision(matmul_op, precision, widened)
        family = _FAMILY_OF_KIND[matmul_op.flops.kind](trace.ops[matmul_op.index])
        if running in FLASH_PRECISIONS:
            family = HALF_PRECISION_FAMILY.get(family, family)
        gemm = _gemm_of(matmul_op)
        matmul_unit = unit_for(gpu, running, matmul_op.flops.kind, switches).name
    gemm_like = matmul_op is not None
    loop_reread = loop_row = loop_rows = 0
    if not eager:
        loop_reread, loop_row, loop_rows = looped_reduction_rereads(
            kernel.ops, kernel.writes, lambda op: trace.ops[op.index],
            lambda ref: running_bytes(ref, float_bytes, widened))
    moved = sum(running_bytes(ref, float_bytes, widened)
                for ref in (*kernel.reads, *kernel.writes))
    rows = None
    reread = l2_reread = cpp_launches = serial_loads = sector_extra = 0
    row_load_bytes = 4
    # a window kernel gathers element by element in either plan (Inductor calls the same aten
    # kernels for these, or generates the same per-element gather)
    accesses = sum(window_accesses(op, trace.ops[op.index]) for op in kernel.ops)
    if eager:
        traced = trace.ops[kernel.ops[0].index]
        rule = ROW_PER_BLOCK.get(traced.base)
        # the apply pass of a norm the eager plan split (pointwise) is parallel over elements
        statistics = kernel.ops[0].category is not Category.POINTWISE
        rows = rule(kernel.ops[0], traced) if rule and statistics else None
        # one kernel for the whole op (the eager plan splits some into their two passes,
        # each then charged its own load)
        whole = kernel.ops[0].writes == traced.writes
        passes = TWO_PASS.get(traced.base, lambda traced: False)(traced)
        passes += EXTRA_READS.get(traced.base, lambda traced: 0)(traced)
        largest = max((running_bytes(ref, float_bytes, widened) for ref in kernel.ops[0].reads),
                      default=0)
        if whole and passes:
            # each extra pass re-reads the op's input (its largest operand)
            reread = passes * largest
        if whole:
            l2_reread = L2_REREADS.get(traced.base, lambda traced: 0)(traced) * largest
        if whole or (rule and statistics):  # an op's own kernel, or a split norm's first
            cpp_launches = CPP_LAUNCHES.get(traced.base, lambda traced: 0)(traced)
            serial_loads = SERIAL_LOADS.get(traced.base, lambda traced: 0)(traced)
        cpp_launches += split_reduction(kernel.ops[0])
        if rows and kernel.ops[0].reads:
            row_load_bytes = ROW_LOAD_BYTES.get(
                traced.base, lambda traced: kernel.ops[0].reads[0].itemsize)(traced)
        if not (rule and not statistics):
            # a norm's apply pass (batch norm's batch_norm_transform_input, group norm's apply
            # kernel) indexes its per-channel statistics per block, not per element as a
            # broadcasting TensorIterator kernel does
            itemsize = min((ref.itemsize for ref in kernel.ops[0].writes), default=float_bytes)
            accesses = max(accesses, strided_accesses(kernel.ops[0], moved // itemsize))
            sector_extra = round(sum((share - 1) * running_bytes(ref, float_bytes, widened)
                                     for ref, share in sector_shares(kernel.ops[0])))
        accesses = max(accesses, SCALAR_ACCESSES.get(traced.base, lambda traced: 0)(traced))
    align = 16
    library_call = ""
    transposes = False
    gemm_kernels = 1
    phase_work = 1.0
    if family == "gemm" and work.tensor_s:
        align = gemm_alignment(matmul_op)
        if gemm is not None:
            accesses = max(accesses, misaligned_gemm_loads(
                gemm.batch, gemm.m, gemm.n, gemm.k, align, matmul_op.reads[0].itemsize))
    if family.startswith("conv"):
        traced_conv = trace.ops[matmul_op.index]
        library_call = convolution_call(traced_conv)
        gemm_kernels = convolution_gemms(traced_conv)
        transposes = family != "conv_grouped" and not (eager and pointwise_convolution(traced_conv))
        phase_work = transposed_phase_work(traced_conv) if family in TILED_CONV_FAMILIES else 1.0
    return KernelLoad(
        name=kernel.name,
        family=family,
        # fp32 GEMMs run on the CUDA cores: unit_seconds counts them in its vector seconds
        matmul_s=work.tensor_s + max(work.vector_s - vector_s, 0.0) if gemm_like else 0.0,
        vector_s=vector_s if gemm_like else work.vector_s,
        bytes=moved,
        launches=kernel.launches,
        gemm=gemm,
        matmul_unit=matmul_unit,
        rows=rows,
        element_bytes=row_load_bytes,
        row_share=row_block_share(trace.ops[kernel.ops[0].index], gpu) if rows else 1.0,
        reread_bytes=reread,
        l2_reread_bytes=l2_reread,
        loop_reread_bytes=loop_reread,
        loop_row_bytes=loop_row,
        loop_rows=loop_rows,
        accesses=accesses,
        sector_bytes=sector_extra,
        host_views=host_views,
        host_modules=host_modules,
        cpp_issued=cpp_issued,
        cpp_launches=cpp_launches,
        serial_loads=serial_loads,
        compute_s=work.compute_s,
        align_bytes=align,
        library_call=library_call,
        gemm_kernels=gemm_kernels,
        layout_transposes=transposes,
        phase_work=phase_work,
        output_bytes=sum(running_bytes(ref, float_bytes, widened) for ref in matmul_op.writes)
        if gemm_like else 0,
    )


def _host_work(kernels: Sequence[Kernel], ops: Sequence[OpRecord], trace: Trace
               ) -> tuple[list[int], list[int], list[bool]]:
    """(view ops, submodule calls, issued from C++) of each eager kernel: the views and
    submodule calls the host runs before it (since the previous kernel), and whether the
    Python call that issued the kernel before it issues it too.

    Eager dispatches every aten op, kernel or not, in order; Python runs once per Python-level
    call (``TracedOp.python_call``), so a call that decomposes in C++ (``F.cosine_similarity``:
    13 kernels) pays Python for its first kernel only, and a dispatch and a launch for each
    other. Every view keeps its dispatch cost, issued from Python or C++ (einsum's permutes and
    reshapes cost its C++ as much: charged as Python views, held-out figures were better than
    with C++ views free)."""
    positions: dict[int, list[int]] = {}
    for i, kernel in enumerate(kernels):
        positions.setdefault(kernel.ops[0].index, []).append(i)
    call_of = [traced.python_call for traced in trace.ops]
    views = [0] * len(kernels)
    modules = [0] * len(kernels)
    from_cpp = [False] * len(kernels)
    pending_views = pending_modules = 0
    previous_module = None
    previous_call = 0
    for op in ops:
        if op.module_path != previous_module:
            pending_modules += op.module_path != ""
            previous_module = op.module_path
        call = call_of[op.index]
        if op.index not in positions:
            pending_views += op.category is Category.ZERO_COPY
            continue
        first = positions[op.index][0]
        views[first], modules[first] = pending_views, pending_modules
        pending_views = pending_modules = 0
        for position in positions[op.index]:
            from_cpp[position] = bool(call) and call == previous_call
            previous_call = call
    return views, modules, from_cpp


#: The family of a replay's input copy (a copy kernel: bytes, no FLOPs).
REPLAY_COPY_FAMILY = Category.DATA_MOVEMENT.value


def replay_input_copy(trace: Trace, float_bytes: int, widened: frozenset[int]
                      ) -> tuple[KernelLoad, ...]:
    """The copy a CUDA-graph replay (``torch.compile(mode="reduce-overhead")``) runs first:
    the graph reads its inputs from static buffers it recorded with, so cudagraph trees copy
    every input that is not a parameter or buffer into them before each replay, one
    ``torch._foreach_copy_`` of the forward arguments (``CUDAGraphNode.run`` →
    ``_copy_inputs_and_remove_from_src`` in ``torch/_inductor/cudagraph_trees.py``). Each byte
    is read and written once; () for a program without tensor arguments."""
    copied = sum(running_bytes(ref, float_bytes, widened)
                 for kind, ref in trace.resident if kind == "inputs")
    if not copied:
        return ()
    return (KernelLoad(name="cudagraph input copy: _foreach_copy_", family=REPLAY_COPY_FAMILY,
                       matmul_s=0.0, vector_s=0.0, bytes=2 * copied, launches=1),)


def program_load(plans: Plans, context: PricingContext) -> ProgramLoad:
    """Both plans' :class:`KernelLoad` under ``context`` (its GPU, precision and switches)."""
    trace = plans.trace
    eager = plans.eager.kernels
    gpu, precision, switches = context.gpu, context.precision, context.switches
    float_bytes = context.float_bytes
    widened = widened_value_ids(trace.ops)
    return ProgramLoad(
        gpu=gpu,
        cache=context.cache,
        eager=tuple(
            kernel_load(k, trace, gpu, precision, float_bytes, eager=True, switches=switches,
                        host_views=views, host_modules=modules, cpp_issued=cpp, widened=widened)
            for k, views, modules, cpp in zip(eager, *_host_work(eager, plans.ops, trace),
                                              strict=True)
        ),
        fused=tuple(
            kernel_load(k, trace, gpu, precision, float_bytes, eager=False, switches=switches,
                        widened=widened)
            for k in plans.fused.kernels
        ),
        replay_copies=replay_input_copy(trace, float_bytes, widened),
    )


# --- Per kernel: GPU time ------------------------------------------------------------------


def wave_efficiency(gemm: GemmShape, sm_count: int, params: EstimateParams) -> float:
    """Share of the GPU a GEMM-class kernel keeps busy: its work items (output tiles, times
    the K splits of a deep reduction) run in whole waves of ``sm_count``.

    Like cuBLAS's heuristics, the largest tile edge that still gives a full wave is taken;
    with too few tiles even at the smallest edge, K is split (when deep enough) to fill it.
    """
    edges = params.tile_edges
    for edge in edges:
        tiles = gemm.batch * math.ceil(gemm.m / edge) * math.ceil(gemm.n / edge)
        if tiles >= sm_count or edge == edges[-1]:
            break
    if tiles < sm_count:
        splits = max(1, min(gemm.k // params.split_k_depth, sm_count // tiles))
        tiles *= splits
    waves = math.ceil(tiles / sm_count)
    return tiles / (waves * sm_count)


#: Query rows per flash-attention thread block (FlashAttention-2's and CK's forward tile).
ATTENTION_QUERY_ROWS = 128


def attention_waves(gemm: GemmShape, sm_count: int) -> int:
    """Waves of a flash-attention kernel: one thread block per (batch × head) and block of
    :data:`ATTENTION_QUERY_ROWS` query rows, one block per SM at a time."""
    return math.ceil(gemm.batch * math.ceil(gemm.m / ATTENTION_QUERY_ROWS) / sm_count)


def memory_s(moved_bytes: int, gpu: GPUSpec, params: EstimateParams, cache: str) -> float:
    """``moved_bytes`` at the achievable bandwidth; with a warm cache the part that fits the
    usable L2 comes from L2 at its published bandwidth (HBM rate where none is published)."""
    hbm = params.hbm_fraction * gpu.memory_bandwidth_bytes_per_s
    l2_bandwidth = params.l2_bandwidth(gpu)
    if cache != "warm" or l2_bandwidth is None or not moved_bytes:
        return moved_bytes / hbm
    from_l2 = min(moved_bytes, params.l2_usable_fraction * gpu.l2_bytes)
    return from_l2 / l2_bandwidth + (moved_bytes - from_l2) / hbm


#: Thread blocks of 1,024 threads one SM holds at once (2,048 resident threads per SM from
#: Volta on, CUDA programming guide's compute-capability table): the rows of one wave of a
#: row-per-block kernel.
ROW_BLOCKS_PER_SM = 2


def l2_missed_bytes(load: KernelLoad, gpu: GPUSpec, params: EstimateParams) -> int:
    """The re-reads of a row-per-block kernel that miss L2: all of them when the rows one wave
    of blocks works on (one row per block) exceed the usable L2, none when they fit."""
    if not load.l2_reread_bytes or not load.rows:
        return 0
    row_bytes = (load.bytes / 2) / load.rows  # a row read once, written once
    in_flight = min(load.rows, ROW_BLOCKS_PER_SM * gpu.sm_count) * row_bytes
    return load.l2_reread_bytes if in_flight > params.l2_usable_fraction * gpu.l2_bytes else 0


#: Threads one SM holds at once (Volta on: 2,048, CUDA programming guide's compute-capability
#: table).
THREADS_PER_SM = 2048


def loop_missed_bytes(load: KernelLoad, gpu: GPUSpec, params: EstimateParams) -> int:
    """The loop re-reads of a fused reduction kernel (:attr:`KernelLoad.loop_reread_bytes`)
    that miss L2: all of them when the rows read between two reads of one row — a row for each
    block the GPU holds, :data:`THREADS_PER_SM` / ``INDUCTOR_REDUCTION_THREADS`` per SM —
    exceed the usable L2, none when they fit."""
    blocks = THREADS_PER_SM // INDUCTOR_REDUCTION_THREADS * gpu.sm_count
    in_flight = min(blocks, load.loop_rows) * load.loop_row_bytes
    return load.loop_reread_bytes if in_flight > params.l2_usable_fraction * gpu.l2_bytes else 0


def load_latency_s(params: EstimateParams) -> float:
    """Seconds one thread waits for one global load: an SM whose resident threads each keep one
    load in flight completes ``strided_access_rate_per_sm`` of them a second, so by Little's law
    each takes :data:`THREADS_PER_SM` / that rate (0.34 µs at 6e9 /s)."""
    return THREADS_PER_SM / params.strided_access_rate_per_sm


def fixed_latency_s(load: KernelLoad, params: EstimateParams) -> float:
    """The part of a kernel's time no rate sets: its fill/drain, plus a library matmul
    kernel's tile-pipeline prologue and epilogue, for each GEMM kernel of its call."""
    if not load.matmul_s:
        return params.fill_latency_s
    return (params.fill_latency_s + params.matmul_latency_s) * load.gemm_kernels


#: Bytes one load instruction moves in the kernel ``misaligned_gemm_fraction`` was measured on
#: (issue 39's bf16 ``align1`` bmm: one 2-byte element a load).
MEASURED_ALIGN_BYTES = 2


def alignment_share(align_bytes: int, params: EstimateParams) -> float:
    """Share of its aligned rate a tensor-core GEMM keeps at ``align_bytes``. A misaligned
    CUTLASS kernel issues one load instruction per ``align_bytes`` of each operand, so its rate
    is bound by the loads it issues and grows with the bytes each moves: the share measured at 2
    bytes a load, scaled, and all of it once the loads keep up (8 bytes; 16: aligned). The
    A100 trace's TF32 ``align1`` kernels (4-byte loads) ran at about half their aligned rate."""
    scaled = params.misaligned_gemm_fraction * min(align_bytes, 16) / MEASURED_ALIGN_BYTES
    return min(1.0, scaled)


#: The host link assumed for a GPU whose entry names none: PCIe 4.0 x16 (bytes/s).
DEFAULT_HOST_LINK_BYTES_PER_S = 16e9 / 8 * 128 / 130 * 16


def host_copy_s(load: KernelLoad, gpu: GPUSpec, params: EstimateParams) -> float:
    """A host↔device copy: its bytes at the achievable share of the host link (PCIe generation
    and width, or NVLink-C2C), no faster than the driver's staging rate where the host side is
    pageable, plus the fill latency of the copy engine."""
    link = gpu.host_link_bytes_per_s or DEFAULT_HOST_LINK_BYTES_PER_S
    rate = params.host_copy_fraction * link
    if load.pageable:
        rate = min(rate, params.pageable_copy_bytes_per_s)
    return load.host_bytes / rate + params.fill_latency_s


def as_host_copy(load: KernelLoad, pageable: bool) -> KernelLoad:
    """A copy kernel's load as a copy between host and GPU: a copy reads each byte once and
    writes it once, so half the bytes it moves cross the host link."""
    return replace(load, family=HOST_COPY_FAMILY, host_bytes=load.bytes // 2, pageable=pageable)


def host_copies(performance: Performance, pageable: bool, host_bytes: int = 0) -> Performance:
    """The same prediction with each eager kernel run as a copy between host and GPU (where a
    profiler saw the op's ``Memcpy HtoD``/``DtoH``: the one-op program cannot say). A program
    with no kernel (``.item()``: the driver copies the scalar) is one copy of ``host_bytes``,
    not free."""
    eager = tuple(as_host_copy(load, pageable) for load in performance.program.eager) or (
        KernelLoad(name="memcpy", family=HOST_COPY_FAMILY, matmul_s=0.0, vector_s=0.0, bytes=0,
                   launches=1, host_bytes=host_bytes, pageable=pageable),)
    return estimate_modes(replace(performance.program, eager=eager), performance.params)


def beside_collective(performance: Performance) -> Performance:
    """The same prediction with each eager kernel sharing the GPU with a collective on another
    stream (where a profiler saw them overlap: the one-op program cannot say)."""
    eager = tuple(replace(load, shared=True) for load in performance.program.eager)
    return estimate_modes(replace(performance.program, eager=eager), performance.params)


#: The family of a host↔device copy (:func:`host_copy_s`).
HOST_COPY_FAMILY = "host_copy"


#: Families whose fp32 work CDNA runs on fp32 MFMA like a GEMM (rocBLAS/hipBLASLt, MIOpen's
#: implicit-GEMM convolutions); grouped, 3D and transposed convolutions keep their own shares.
FP32_MATRIX_FAMILIES = frozenset({"gemm", "conv"})


#: Families whose tensor-core kernels are built from ``mma.sync`` on every NVIDIA generation:
#: cuDNN's 2D convolutions (the H100 trace's Conv2d runs CUTLASS's Ampere kernel
#: ``cutlass_tensorop_bf16_s16816fprop_optimized_…_nhwc_align8``, no warpgroup MMA), at
#: :attr:`EstimateParams.mma_sync_share` of the peak.
MMA_SYNC_FAMILIES = frozenset({"conv"})


def matmul_share(load: KernelLoad, params: EstimateParams) -> float:
    """Share of its unit's peak a matmul-class kernel reaches: its family's, or for fp32 work of
    :data:`FP32_MATRIX_FAMILIES` on a GPU that runs it on matrix cores (the ``vector`` unit
    there), :attr:`EstimateParams.fp32_matrix_fraction`. The fp32 MFMA path is easy to feed:
    its peak is an eighth (CDNA3) or a sixteenth (CDNA4) of bf16's, so the libraries get near
    it where bf16 GEMMs reach 45 %. An SGEMM on the CUDA cores takes
    :attr:`EstimateParams.cuda_core_gemm_fraction` where the architecture sets one, and a
    :data:`MMA_SYNC_FAMILIES` kernel on tensor cores its family's share of the ``mma.sync``
    rate (:attr:`EstimateParams.mma_sync_share`)."""
    if load.matmul_unit == "vector":
        if load.family in FP32_MATRIX_FAMILIES and params.fp32_matrix_fraction is not None:
            return params.fp32_matrix_fraction
        if load.family == "gemm" and params.cuda_core_gemm_fraction is not None:
            return params.cuda_core_gemm_fraction
    share = params.matmul_fraction[load.family]
    if load.family in MMA_SYNC_FAMILIES and load.matmul_unit == "tensor":
        share *= params.mma_sync_share
    return share


def channel_share(load: KernelLoad, params: EstimateParams) -> float:
    """Share of a tensor-core convolution's tile work that lands on real output channels
    (:func:`~.library_calls.channel_tile_share` at ``EstimateParams.conv_channel_tile``): a
    3D convolution to 16 channels on Hopper computes 64 per tile, four times its FLOPs. 1 for
    every other kernel."""
    if (load.family not in TILED_CONV_FAMILIES or load.matmul_unit != "tensor"
            or load.gemm is None):
        return 1.0
    return channel_tile_share(load.gemm.n, params.conv_channel_tile)


def serial_epilogue_s(load: KernelLoad, gpu: GPUSpec, params: EstimateParams, cache: str
                      ) -> float:
    """Seconds an SGEMM on the CUDA cores spends storing its output after its main loop, not
    overlapped with multiply-adds. A thread block of cuBLAS's fp32 SIMT kernels
    (``sm80_xmma_gemm_f32f32_…``, ``maxwell_sgemm_…``) holds a large register tile, so an SM
    holds one or two of them; a block runs its K loop, then stores its tile from registers, and
    few warps are left to issue multiply-adds meanwhile: the output's bytes at the memory rate
    add to the compute time. It matters where K is small (an output element per 2K FLOPs). 0
    for every other kernel: tensor-core GEMMs and CDNA's fp32 MFMA run warp-specialised or
    persistent kernels whose epilogue overlaps the next tile's main loop."""
    if (load.family != "gemm" or load.matmul_unit != "vector"
            or params.fp32_matrix_fraction is not None):
        return 0.0
    return memory_s(load.output_bytes, gpu, params, cache)


def kernel_gpu_s(load: KernelLoad, gpu: GPUSpec, params: EstimateParams, cache: str) -> float:
    """GPU time of one kernel: the slower of its memory and compute times at achievable rates,
    plus the fill/drain latency and that of the other kernels its library launches; a
    recurrence is at least its serial steps; a host↔device copy runs at the host link."""
    if load.host_bytes:
        return host_copy_s(load, gpu, params)
    touched = (load.bytes + load.reread_bytes + l2_missed_bytes(load, gpu, params)
               + loop_missed_bytes(load, gpu, params) + load.sector_bytes)
    moved = memory_s(touched, gpu, params, cache)
    if load.layout_transposes:
        moved *= 1 + params.conv_layout_passes
    if load.rows is not None:
        row_rate = (params.row_bandwidth_bytes_per_s * load.row_share
                    * min(load.element_bytes, 16) / 4)
        moved = max(moved, touched / (load.rows * row_rate))
    if load.accesses:
        moved = max(moved, load.accesses / (params.strided_access_rate_per_sm * gpu.sm_count))
    moved = max(moved, load.serial_loads * load_latency_s(params))
    compute = load.vector_s / params.vector_fraction
    if load.matmul_s:
        fraction = matmul_share(load, params)
        if load.gemm is not None:
            fraction *= wave_efficiency(load.gemm, gpu.sm_count, params)
        fraction *= channel_share(load, params)
        compute += load.matmul_s * load.phase_work / (
            fraction * alignment_share(load.align_bytes, params))
        compute += serial_epilogue_s(load, gpu, params, cache)
    busy = max(moved, compute) + fixed_latency_s(load, params)
    busy += (params.library_kernels.get(load.library_call, 0) + load.cpp_launches
             ) * params.fill_latency_s
    if load.shared:  # its blocks wait for SMs and bandwidth the collective holds
        busy /= params.collective_share
    if load.family == "flash_attention" and load.gemm is not None:
        busy = max(busy, attention_waves(load.gemm, gpu.sm_count) * params.attention_wave_s)
    if load.family == "rnn":
        busy = max(busy, load.launches * params.rnn_step_s)
    return busy


# --- Per mode: the host/launch pipeline ----------------------------------------------------


@dataclass(frozen=True)
class ModeEstimate:
    """One mode's predicted time: the pipeline's end, the GPU's busy time within it, and each
    kernel's GPU time (in plan order)."""

    mode: str
    total_s: float
    gpu_busy_s: float
    host_s: float  #: CPU time of the call (issue of the last kernel)
    kernel_gpu_s: tuple[float, ...]

    @property
    def host_bound_share(self) -> float:
        """Share of the time the GPU waits for the host (0: GPU-bound, →1: launch-bound)."""
        return 1 - self.gpu_busy_s / self.total_s if self.total_s else 0.0

    @property
    def launch_bound(self) -> bool:
        """The GPU idles more than half the call, waiting on the host."""
        return self.host_bound_share > 0.5


def timeline(mode: str, start_s: float, issue_s: Sequence[float], gpu_s: Sequence[float]
             ) -> ModeEstimate:
    """Kernel *k* is issued ``issue_s[k]`` after kernel *k−1* (the first after ``start_s``)
    and runs when the GPU is free and it has been issued."""
    issued = start_s
    end = 0.0
    for host, busy in zip(issue_s, gpu_s, strict=True):
        issued += host
        end = max(end, issued) + busy
    return ModeEstimate(mode, max(end, issued), sum(gpu_s), issued, tuple(gpu_s))


def _library_s(load: KernelLoad, host: HostCosts) -> float:
    """CPU seconds a kernel's library call adds to its launch: a convolution's cuDNN set-up
    and the extra launches of a library call (a cuDNN RNN's steps) or of its aten op issued
    from C++ (:attr:`KernelLoad.cpp_launches`), in either mode."""
    return ((load.launches - 1 + load.cpp_launches) * host.launch_s
            + (host.conv_call_s if load.library_call else 0.0))


def _eager_issue(load: KernelLoad, host: HostCosts) -> float:
    """CPU seconds before an eager kernel is issued: a Python call's op, or a dispatch and a
    launch from C++ (:attr:`KernelLoad.cpp_issued`), after the views and submodule calls
    before it, plus its library call's own."""
    return (
        (host.launch_s if load.cpp_issued else host.eager_op_s)
        + load.host_views * host.eager_view_s
        + load.host_modules * host.eager_module_s
        + _library_s(load, host)
    )


def estimate_modes(program: ProgramLoad, params: EstimateParams) -> Performance:
    """The three modes' :class:`ModeEstimate` for one program."""
    gpu, cache = program.gpu, program.cache
    on_gpu = params.for_gpu(gpu)
    eager_gpu = [kernel_gpu_s(k, gpu, on_gpu, cache) for k in program.eager]
    fused_gpu = [kernel_gpu_s(k, gpu, on_gpu, cache) for k in program.fused]
    return _pipelines(program, params, eager_gpu, fused_gpu)


def _pipelines(program: ProgramLoad, params: EstimateParams, eager_gpu: Sequence[float],
               fused_gpu: Sequence[float]) -> Performance:
    """Each mode's host/launch pipeline over the kernels' GPU seconds."""
    on_gpu = params.for_gpu(program.gpu)
    host = on_gpu.host
    copies = [kernel_gpu_s(k, program.gpu, on_gpu, program.cache) for k in program.replay_copies]
    eager = timeline(
        "eager", host.eager_call_s, [_eager_issue(k, host) for k in program.eager], eager_gpu
    )
    compiled = timeline(
        "compile",
        host.compile_call_s,
        [host.compile_kernel_s + _library_s(k, host) for k in program.fused],
        fused_gpu,
    )
    replayed = timeline(
        "cudagraph",
        host.cudagraph_call_s,
        [0.0] * (len(copies) + len(fused_gpu)),
        [busy + on_gpu.cudagraph_gap_s for busy in [*copies, *fused_gpu]],
    )
    return Performance(params, program, eager, compiled, replayed)


def host_scaled(performance: Performance, factor: float) -> Performance:
    """The same prediction on a host ``factor`` times slower: the kernels' GPU times are kept
    (they do not depend on the host), only the pipelines are run again."""
    return _pipelines(
        performance.program, performance.params.host_scaled(factor),
        performance.eager.kernel_gpu_s, performance.compile.kernel_gpu_s,
    )


def host_scale_totals_ms(performance: Performance, factors: Sequence[float], floor_s: float
                         ) -> dict[str, list[float]]:
    """Per mode (``eager``, ``fused``, ``cudagraph``), the estimated total (ms, never below
    ``floor_s``, the SoL) at each host scale of ``factors``: what a host scale is fitted on."""
    scaled = [host_scaled(performance, factor).modes for factor in factors]
    return {
        mode: [max(modes[mode].total_s, floor_s) * 1e3 for modes in scaled]
        for mode in performance.modes
    }


@dataclass(frozen=True)
class Performance:
    """The model's prediction for one analysis: the parameters, its input and each mode."""

    params: EstimateParams = field(repr=False)
    program: ProgramLoad = field(repr=False)
    eager: ModeEstimate
    compile: ModeEstimate
    cudagraph: ModeEstimate

    @property
    def modes(self) -> dict[str, ModeEstimate]:
        """Result-facing names: ``eager``, ``fused`` (torch.compile) and ``cudagraph``."""
        return {"eager": self.eager, "fused": self.compile, "cudagraph": self.cudagraph}

    def loads(self, mode: str) -> tuple[KernelLoad, ...]:
        """The kernels a mode runs (eager's plan, the fused plan, or a replay's)."""
        return {"eager": self.program.eager, "fused": self.program.fused}.get(
            mode, self.program.replayed)

    def top_kernels(self, mode: str, count: int = 5
                    ) -> list[tuple[KernelLoad, float, tuple[float, float]]]:
        """A mode's kernels with the most estimated GPU time, with that time and its band (s)."""
        found = zip(self.loads(mode), self.modes[mode].kernel_gpu_s, self.kernel_band_s(mode),
                    strict=True)
        return sorted(found, key=lambda kernel: kernel[1], reverse=True)[:count]

    def gpu_s_by_family(self, mode: str) -> dict[str, float]:
        """Estimated GPU seconds of a mode per kernel family, largest first."""
        totals: dict[str, float] = {}
        for load, busy in zip(self.loads(mode), self.modes[mode].kernel_gpu_s, strict=True):
            totals[load.family] = totals.get(load.family, 0.0) + busy
        return dict(sorted(totals.items(), key=lambda item: item[1], reverse=True))

    @cached_property
    def ends(self) -> tuple[Performance, Performance]:
        """The same prediction at the low and at the high end of every kernel's family band
        (:mod:`.bands`), with the host's costs at the ends of ``HOST_BAND``."""
        return self._at_end("low"), self._at_end("high")

    def _at_end(self, end: str) -> Performance:
        def scaled(loads: Sequence[KernelLoad], gpu_s: Sequence[float]) -> list[float]:
            return [busy * getattr(family_band(load.family), end)
                    for load, busy in zip(loads, gpu_s, strict=True)]

        return _pipelines(self.program, self.params.host_scaled(getattr(HOST_BAND, end)),
                          scaled(self.program.eager, self.eager.kernel_gpu_s),
                          scaled(self.program.fused, self.compile.kernel_gpu_s))

    def band_s(self, mode: str, floor_s: float = 0.0) -> tuple[float, float]:
        """A mode's total at the low and the high end of its band (s), never below ``floor_s``."""
        low, high = (max(end.modes[mode].total_s, floor_s) for end in self.ends)
        return low, high

    def kernel_band_s(self, mode: str) -> list[tuple[float, float]]:
        """Each kernel's GPU time at the low and the high end of its family's band (s)."""
        low, high = (end.modes[mode].kernel_gpu_s for end in self.ends)
        return list(zip(low, high, strict=True))

    def to_dict(self, floor_s: float, top: int = 5) -> dict[str, Any]:
        """Per mode: total, GPU-busy and host ms, host-bound share, launch-bound verdict, GPU ms
        per kernel family and the top kernels, with the band of the total and of each top
        kernel (µs); a total is never below ``floor_s`` (the SoL)."""
        return {
            name: {
                "total_ms": max(mode.total_s, floor_s) * 1e3,
                **_band_us(self.band_s(name, floor_s)),
                "gpu_busy_ms": mode.gpu_busy_s * 1e3,
                "host_ms": mode.host_s * 1e3,
                "host_bound_share": mode.host_bound_share,
                "launch_bound": mode.launch_bound,
                "gpu_ms_by_family": {
                    family: busy * 1e3 for family, busy in self.gpu_s_by_family(name).items()
                },
                "top_kernels": [
                    {"name": load.name, "family": load.family, "gpu_ms": busy * 1e3,
                     **_band_us(band)}
                    for load, busy, band in self.top_kernels(name, top)
                ],
            }
            for name, mode in self.modes.items()
        }


def _band_us(band_s: tuple[float, float]) -> dict[str, float]:
    """A band (s) as the JSON keys ``estimate_low_us`` and ``estimate_high_us``."""
    return {"estimate_low_us": band_s[0] * 1e6, "estimate_high_us": band_s[1] * 1e6}


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PARAMS",
    "EstimateParams",
    "HostCosts",
    "KernelLoad",
    "ModeEstimate",
    "Performance",
    "estimate_modes",
    "fixed_latency_s",
    "host_scale_totals_ms",
    "host_scaled",
    "kernel_gpu_s",
    "program_load",
    "timeline",
    "wave_efficiency",
]
