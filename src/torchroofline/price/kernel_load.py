"""What one kernel asks of the GPU: the performance model's input, one :class:`KernelLoad` per
plan kernel and a :class:`ProgramLoad` for both plans of one analysis.

A load is a kernel's work at *peak* rates, independent of
:class:`~.estimate_params.EstimateParams`: seconds of its matmul-class FLOPs at the peak of the
unit that runs them (tensor cores, or the GPU's fp32 rate) and of its other FLOPs at the
CUDA-core peak, the HBM bytes the plan charges it (each value at the size of the dtype it runs
in), its kernel family and output grid (:class:`GemmShape`), and the shape facts the family
models read: rows of a row-per-block reduction, bytes read again, element accesses that cannot
vectorize, its library call, and the host's views and submodule calls before it (eager). The
calibration computes it once per problem and GPU and re-prices it under many parameter sets;
the family modules (:mod:`.memory_time`, :mod:`.gemm_time`, :mod:`.attention_time`,
:mod:`.host_copies`) turn it into seconds in :func:`~.estimate.kernel_gpu_s`. Times are
seconds, sizes bytes.
"""


from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..costs import Category, MatmulKind, OpRecord
from ..plan.fusion import Kernel
from ..plan.plans import Plans
from ..trace.refs import Trace, TracedOp
from .eager_kernels import (
    CPP_LAUNCHES,
    EXTRA_READS,
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
from .hardware import GPUSpec
from .library_calls import (
    convolution_call,
    convolution_gemms,
    layout_kernel_elements,
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

if TYPE_CHECKING:
    from .context import PricingContext


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
    #: rows of one wave of blocks fit it, else they come from HBM
    #: (:func:`~.memory_time.l2_missed_bytes`)
    l2_reread_bytes: int = 0
    #: input bytes a fused reduction kernel reads again, loop by loop, over rows too long to
    #: keep on chip, its longest such row's bytes and that reduction's rows: the re-reads hit
    #: L2 while the rows of every block the GPU holds fit it
    #: (:func:`~.memory_time.loop_missed_bytes`)
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
    #: elements such a library's own layout kernels transpose, where it runs them as kernels
    #: of their own (MIOpen: :func:`~.library_calls.layout_kernel_elements`)
    layout_elements: int = 0
    #: it runs beside a collective (NCCL/RCCL) on another stream, which holds SMs and memory
    #: bandwidth meanwhile (:func:`~.modes.beside_collective`)
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
    layout_elements = 0
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
        layout_elements = layout_kernel_elements(matmul_op.reads, matmul_op.writes)
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
        layout_elements=layout_elements if transposes else 0,
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
