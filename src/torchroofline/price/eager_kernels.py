"""What an op's shapes and arguments say about the eager kernel PyTorch runs for it, as the
performance model (:mod:`.estimate`) needs it: rows a row-per-block kernel has, passes a kernel
makes over its input, the alignment of a GEMM's operands, and the element accesses of a kernel
that cannot vectorize; and the loops an Inductor reduction kernel makes over rows too long to
keep on chip (the fused plan). Each rule names the PyTorch kernel whose behaviour it states.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..costs import Category, OpRecord
from ..trace.refs import TensorRef, TracedOp


def _layer_norm_rows(op: OpRecord, traced: TracedOp) -> int:
    """``native_layer_norm`` / ``native_group_norm`` write (out, mean, rstd): one mean per row."""
    return traced.writes[1].elements if len(traced.writes) > 1 else 1


def _softmax_rows(op: OpRecord, traced: TracedOp) -> int | None:
    """``_softmax(x, dim, …)`` over the last dim runs one block per row (``cunn_SoftMaxForward``);
    over another dim it runs a spatial kernel parallel over the inner positions."""
    source = traced.args[0]
    dim = int(traced.args[1]) % max(source.dim(), 1)
    if dim != source.dim() - 1:
        return None
    return source.numel() // max(source.shape[-1], 1)


def _channel_rows(op: OpRecord, traced: TracedOp) -> int | None:
    """Batch norm's statistics over (N, H, W) per channel: one block per channel (PyTorch's
    ``batch_norm_collect_statistics_kernel`` and the backward's ``batch_norm_backward_reduce``
    run a grid of C blocks on an NCHW input; MIOpen's spatial kernels likewise). In eval mode
    the forward is pointwise: no rows."""
    if traced.base != "native_batch_norm_backward" and not _training(traced):
        return None
    source = traced.args[1] if traced.base == "native_batch_norm_backward" else traced.args[0]
    return int(source.shape[1]) if source.dim() > 1 else None


def _inner_reduction_rows(op: OpRecord, traced: TracedOp) -> int | None:
    """PyTorch's ``reduce_kernel`` over the innermost dims gives each output one block of up to
    512 threads (``ReduceConfig::set_block_dimension``: one output wide, 512 threads along the
    reduction) until a thread would sum more than 256 values; then it splits the output across
    blocks (:func:`split_reduction`), so only an unsplit one is a block per row. The A100
    trace's full ``sum``s of 32-100 K floats: 8-12 µs, one SM streaming the tensor."""
    if split_reduction(op) or not op.reads or not op.writes:
        return None
    source = traced.args[0]
    rank = source.dim() if hasattr(source, "dim") else 0
    dims = traced.argument("dim")
    if dims is None or dims == []:
        return op.writes[0].elements if source.is_contiguous() else None
    reduced = {int(d) % max(rank, 1) for d in (dims if isinstance(dims, (list, tuple)) else [dims])}
    if reduced != set(range(rank - len(reduced), rank)) or not source.is_contiguous():
        return None
    return op.writes[0].elements


#: Reductions PyTorch runs as its ``reduce_kernel`` (by base name): one block per output over
#: the innermost dims until it splits (:func:`_inner_reduction_rows`).
INNER_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "linalg_vector_norm", "any", "all")


#: Eager kernels that give each row to one thread block, so a few long rows use a few SMs
#: (PyTorch's ``RowwiseMomentsCUDAKernel`` for layer/group norm, ``cunn_SoftMaxForward``,
#: batch norm's per-channel statistics and an unsplit ``reduce_kernel`` over the innermost
#: dims). Inductor splits such reductions across blocks, so the fused plan has no such limit.
ROW_PER_BLOCK: dict[str, Callable[[OpRecord, TracedOp], int | None]] = {
    **dict.fromkeys(INNER_REDUCTIONS, _inner_reduction_rows),
    "native_layer_norm": _layer_norm_rows,
    "native_group_norm": _layer_norm_rows,
    "_softmax": _softmax_rows,
    "_log_softmax": _softmax_rows,
    "native_batch_norm": _channel_rows,
    "_native_batch_norm_legit": _channel_rows,
    "cudnn_batch_norm": _channel_rows,
    "miopen_batch_norm": _channel_rows,
    "native_batch_norm_backward": _channel_rows,
}

#: Rows a warp-per-row softmax keeps in registers (PyTorch's ``dispatch_softmax_forward``:
#: at most 1024 elements and 4096 bytes); longer rows go to a block per row.
SOFTMAX_REGISTER_ROW = (1024, 4096)


def softmax_scalar_accesses(traced: TracedOp) -> int:
    """Element accesses of an eager softmax whose long rows are misaligned: 0 where it vectorizes.

    A row of more than 1024 elements or 4 KiB gets one block. The block stages it in shared
    memory (``cunn_SoftMaxForwardSmem``: one read) only when it fits there and its length is a
    multiple of the 16-byte vector (``dim_size % ILP == 0``); otherwise ``cunn_SoftMaxForward``
    reads it three times (its maximum, its sum of exponentials, then the output), one element
    per load, and writes it once: four accesses per element, at the rate of a kernel that cannot
    vectorize. An aligned row's re-reads are vector loads that hit L2 (a wave of blocks holds a
    few MB of rows: KernelBench's 16 × 16384 fp32 softmax runs at the one-pass HBM rate)."""
    source = traced.args[0]
    if int(traced.args[1]) % max(source.dim(), 1) != source.dim() - 1:
        return 0  # over another dim: the spatial kernel, one pass
    length = int(source.shape[-1]) if source.dim() else 1
    row_bytes = length * source.element_size()
    if length <= SOFTMAX_REGISTER_ROW[0] and row_bytes <= SOFTMAX_REGISTER_ROW[1]:
        return 0
    return 0 if row_bytes % 16 == 0 else 4 * source.numel()


#: Eager kernels that cannot vectorize for a reason their shapes alone state, by base name:
#: their element accesses (as :func:`strided_accesses`).
SCALAR_ACCESSES: dict[str, Callable[[TracedOp], int]] = {
    "_softmax": softmax_scalar_accesses,
    "_log_softmax": softmax_scalar_accesses,
}


#: Eager ops that read their input more than once, by base name: how many extra reads.
EXTRA_READS: dict[str, Callable[[TracedOp], int]] = {
    # logsumexp's kernels (CPP_LAUNCHES): amax reads x, x - maxes reads x and writes a copy,
    # exp_ reads and writes the copy, sum reads it: five passes of x's size besides the first
    "logsumexp": lambda traced: 5,
    # batch_norm_backward_kernel: one block per channel sums grad_out and grad_out·x̂ over the
    # channel, then reads both again to write grad_input
    "native_batch_norm_backward": lambda traced: 2,
    # a reduced pointwise loss writes the unreduced loss, as large as its input, then reads it
    # back to reduce it (:func:`_reduced_loss`): two passes of the input's size
    **{name: lambda traced: 2 * _reduced_loss(traced)
       for name in ("mse_loss", "smooth_l1_loss", "huber_loss")},
}


def _training(traced: TracedOp) -> bool:
    """``native_batch_norm(input, weight, bias, running_mean, running_var, training, …)``; the
    cuDNN and MIOpen spellings (what a CUDA or ROCm build of PyTorch traces) take the same."""
    return bool(traced.args[5]) if len(traced.args) > 5 else True


#: Eager normalisations that read their input twice: once for the statistics, once to normalise
#: (PyTorch's batch-norm training kernels, ``RowwiseMoments`` + the apply kernel of group norm,
#: and layer norm's Welford pass + its normalise pass). Inductor keeps a row on chip when it fits.
TWO_PASS: dict[str, Callable[[TracedOp], bool]] = {
    "native_batch_norm": _training,
    "_native_batch_norm_legit": _training,
    "cudnn_batch_norm": _training,
    "miopen_batch_norm": _training,
    "native_group_norm": lambda traced: True,
    "native_layer_norm": lambda traced: True,
}


def _contiguous(ref: TensorRef) -> bool:
    expected, stride = [], 1
    for size in reversed(ref.shape):
        expected.append(stride)
        stride *= size
    return not ref.strides or all(
        have == want for have, want, size in zip(ref.strides, reversed(expected), ref.shape,
                                                 strict=True) if size > 1
    )


def gemm_alignment(op: OpRecord) -> int:
    """The alignment (bytes, a power of two ≤ 16) of a GEMM's operands: the largest that divides
    the byte stride of every operand's rows (its leading dimension: the larger of its two
    innermost strides; the row length where the layout is contiguous). cuBLAS picks a kernel
    that loads 16 bytes per instruction only when every leading dimension allows it."""
    align = 16
    for ref in (*op.reads, *op.writes):
        if len(ref.shape) < 2:
            continue
        lead = max(ref.strides[-2:]) if len(ref.strides) >= 2 else ref.shape[-1]
        align = math.gcd(align, int(lead) * ref.itemsize)
    return align


def strided_accesses(op: OpRecord, moved_elements: int) -> int:
    """Element accesses of an eager pointwise or copy kernel that cannot vectorize: PyTorch's
    ``TensorIterator`` uses vector loads only when every operand has the output's shape and a
    contiguous layout; otherwise each thread computes each operand's offset per element (a
    broadcast bias, a transposed copy, ``cat``, ``index_select``). 0 for one that vectorizes,
    and for multi-output kernels (``_foreach_*``'s multi-tensor apply runs vectorized chunks).

    A kernel makes at most one access per operand for each element it moves
    (``moved_elements``): an in-place ``index_put_`` into a KV cache iterates over the values
    it writes, not over the whole cache its output names."""
    if op.category not in (Category.POINTWISE, Category.DATA_MOVEMENT) or len(op.writes) != 1:
        return 0
    out = op.writes[0]
    operands = [ref for ref in op.reads if ref.elements > 1] + list(op.writes)
    if all(ref.shape == out.shape and _contiguous(ref) for ref in operands):
        return 0
    return min(math.prod(out.shape), moved_elements) * len(operands)


#: Bytes the memory system moves per request: a 32-byte sector, the granule in which L1, L2 and
#: DRAM serve a warp's loads (CUDA C++ Best Practices Guide, "Coalesced Access to Global
#: Memory"); taken for AMD's parts too, whose granule no datasheet states.
SECTOR_BYTES = 32

#: Consecutive elements of a non-vectorized ``TensorIterator`` kernel one warp's lanes load at
#: once (``elementwise_kernel``: thread ``i`` of a block takes elements ``i``, ``i + 128``, …).
WARP_LANES = 32


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, stride = [], 1
    for size in reversed(shape):
        strides.append(stride)
        stride *= size
    return tuple(reversed(strides))


def sector_shares(op: OpRecord) -> list[tuple[TensorRef, float]]:
    """Each operand of an eager pointwise or copy kernel that cannot vectorize whose loads or
    stores move more than their bytes, with the bytes moved per byte used (> 1).

    The kernel walks its output's dims innermost-stride first (``TensorIterator`` orders them
    by the output's strides); a warp's lanes take consecutive elements, and the memory system
    serves them in whole :data:`SECTOR_BYTES` sectors. An operand laid out unlike its output
    (a transposing copy's source, whose elements along the walked dim lie 4.6 KB apart) has
    each lane in a sector of its own: 32 bytes for a 2-byte element. The sector's other
    elements are loaded by warps that run a whole row later, on other SMs, so each load moves
    its sector again. The traffic is charged at the memory rate (the rate at which L2 serves
    such sectors is not published). A ``cat`` input is walked the same way over its own part of
    the output. Broadcast operands (a bias: fewer elements than their shape) are reused from
    cache and keep their bytes; so do operands laid out as the output is."""
    if strided_accesses(op, 1) == 0:
        return []
    out = op.writes[0]
    out_strides = out.strides or _row_major(out.shape)
    order = sorted(range(len(out.shape)), key=lambda d: (out_strides[d], -d))
    found = []
    for ref in (*op.reads, out):
        if len(ref.shape) != len(out.shape) or ref.elements != math.prod(ref.shape):
            continue  # broadcast, or indexed by another shape (a gather's table)
        strides = ref.strides or _row_major(ref.shape)
        sectors = set()
        lanes = min(WARP_LANES, ref.elements)
        for linear in range(lanes):
            offset = 0
            for d in order:
                offset += linear % ref.shape[d] * strides[d]
                linear //= ref.shape[d]
            sectors.add(offset * ref.itemsize // SECTOR_BYTES)
        share = len(sectors) * SECTOR_BYTES / (lanes * ref.itemsize)
        if share > 1:
            found.append((ref, share))
    return found


#: Output tile edge of the CUTLASS kernels cuBLAS falls back to for misaligned operands
#: (``cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1``, ``…_256x128_tn_align1`` in
#: the odd-sequence bmm of issue 39): each output tile loads its rows of A and columns of B.
MISALIGNED_TILE = 128


def misaligned_gemm_loads(batch: int, m: int, n: int, k: int, align_bytes: int,
                          itemsize: int) -> int:
    """Load and store instructions of a tensor-core GEMM (``batch`` × ``m × n``, depth ``k``)
    whose operand rows are not 16-byte aligned (``align_bytes``, :func:`gemm_alignment`); 0 for
    an aligned one.

    Such a kernel (``align1``/``align2``) moves ``align_bytes`` per instruction, not 16: each
    output tile of :data:`MISALIGNED_TILE` reads its ``k``-deep strips of A and B that way, and
    the epilogue writes the tile the same way. Its time is then these accesses at the rate of a
    kernel that cannot vectorize (``strided_access_rate_per_sm``), far below the MMA peak."""
    if align_bytes >= 16:
        return 0
    per_load = max(align_bytes // max(itemsize, 1), 1)
    tiles_m, tiles_n = math.ceil(m / MISALIGNED_TILE), math.ceil(n / MISALIGNED_TILE)
    elements = batch * (m * k * tiles_n + n * k * tiles_m + m * n)
    return elements // per_load


def _reduced_loss(traced: TracedOp) -> int:
    """A pointwise loss with ``reduction`` mean or sum (``mse_loss``, ``smooth_l1_loss``,
    ``huber_loss``: Loss.cpp's ``apply_loss_reduction``) writes the unreduced loss with one
    kernel, then reduces it with a second (``loss.mean()``/``loss.sum()``); none with ``none``."""
    return int(int(traced.argument("reduction", 1) or 0) != 0)


def _group_norm_launches(traced: TracedOp) -> int:
    """``native_group_norm(x, weight, bias, N, C, HxW, …)`` with an affine weight or bias over
    more than one position: group_norm_kernel.cu runs ``RowwiseMomentsCUDAKernel``, then
    ``ComputeFusedParamsCUDAKernel`` (per-channel scale and shift), then the apply kernel; the
    eager plan charges the first and the last."""
    affine = traced.args[1] is not None or traced.args[2] is not None
    return int(affine and int(traced.args[5]) > 1)


def _batch_norm_launches(traced: TracedOp) -> int:
    """Training batch norm with running statistics on an (N, C) input, which PyTorch runs with
    its own kernels (cuDNN's needs 3 or more dims, ``_batch_norm_impl_index``):
    ``batch_norm_cuda_out`` computes the statistics, then updates the running mean and variance
    and inverts the variance (``batch_norm_update_stats_and_invert``), then applies them; the
    eager plan charges the first and the last."""
    running = len(traced.args) > 4 and traced.args[3] is not None
    return int(_training(traced) and running and traced.args[0].dim() == 2)


#: Eager aten ops whose CUDA implementation launches more kernels than its own from C++, by
#: base name: how many more. Each is a dispatch and a launch on the host (no Python between)
#: and a kernel's fill on the GPU.
CPP_LAUNCHES: dict[str, Callable[[TracedOp], int]] = {
    # ReduceOps.cpp's logsumexp_out_impl: amax, then maxes.abs() == INFINITY and masked_fill_
    # (3), (self - maxes).exp_() (2), sum_out, log_, add_ (3): nine kernels for the one op
    "logsumexp": lambda traced: 8,
    "mse_loss": _reduced_loss,
    "native_group_norm": _group_norm_launches,
    "native_batch_norm": _batch_norm_launches,
    "_native_batch_norm_legit": _batch_norm_launches,
    "smooth_l1_loss": _reduced_loss,
    "huber_loss": _reduced_loss,
}


#: Threads of LossNLL.cu's ``nll_loss_forward_reduce_cuda_kernel_2d`` (``NLL_LOSS_THREADS``): it
#: runs one block of them, whatever the batch.
NLL_LOSS_THREADS = 32


def _nll_loss_rows_per_thread(traced: TracedOp) -> int:
    """``nll_loss_forward(input (N, C), target, weight, reduction, …)`` with a reduction: one
    block of :data:`NLL_LOSS_THREADS` threads, each looping over every 32nd row. A row's gather
    ``input[i * C + target[i]]`` waits for its target's load; the next row's target load does
    not wait, so a thread spends one load's latency per row: ⌈N / 32⌉ in series. Without a
    reduction (or on a 1-D input) the kernel has a thread per row: 0."""
    source = traced.args[0]
    if source.dim() != 2 or int(traced.args[3]) == 0:
        return 0
    return math.ceil(int(source.shape[0]) / NLL_LOSS_THREADS)


#: Eager kernels whose threads make loads one after another, each waiting for a load's latency
#: (a kernel too narrow to hide it), by base name: loads a thread makes in series.
SERIAL_LOADS: dict[str, Callable[[TracedOp], int]] = {
    "nll_loss_forward": _nll_loss_rows_per_thread,
}


#: Reduced elements per output from which PyTorch's ``reduce_kernel`` splits the reduction
#: across blocks (``ReduceConfig::ctas_per_output`` > 1): a thread would otherwise accumulate
#: more than 256 values (``max_values_per_thread``) in a block of 512 threads (the
#: ``reduce_kernel<512, …>`` of the traces).
SPLIT_REDUCTION_LENGTH = 256 * 512


def split_reduction(op: OpRecord) -> bool:
    """A reduction whose blocks each sum part of an output's elements, then finish in a global
    reduce: partials go to a staging buffer, and the last block to pass a semaphore reads them
    back and writes the output (a second, dependent pass: the A100 training trace's gradient
    ``sum``s of 1024 × 128-2048 floats take 10-13 µs, a 1 MB stream's time plus two fills).
    Before it, the host zeroes the semaphores with ``cudaMemsetAsync`` (Reduce.cuh's
    ``launch_reduce_kernel``): one launch more, as :data:`CPP_LAUNCHES`'s."""
    if op.category is not Category.REDUCTION or not op.reads or not op.writes:
        return False
    return op.reads[0].elements >= SPLIT_REDUCTION_LENGTH * max(op.writes[0].elements, 1)


def _pool_window(spatial_dims: int) -> Callable[[OpRecord, TracedOp], int]:
    """Elements of one pooling window: ``kernel_size`` holds one edge (a cube) or one per
    spatial dim (``max_pool2d_with_indices``, ``avg_pool3d``, …; a 1-D pool traces as 2-D)."""
    def window(op: OpRecord, traced: TracedOp) -> int:
        kernel = traced.argument("kernel_size")
        edges = [int(edge) for edge in (kernel if isinstance(kernel, (list, tuple)) else [kernel])]
        return math.prod(edges * spatial_dims if len(edges) == 1 else edges)
    return window


def _depthwise_conv_window(op: OpRecord, traced: TracedOp) -> int:
    """A depthwise convolution's (one input channel per group) multiply-adds per output
    element: PyTorch's ``conv_depthwise2d``/``3d`` kernels and cuDNN run it as a direct
    convolution, not an implicit GEMM on the tensor cores (one channel fills no MMA tile);
    0 for any other convolution (a group of many channels is a grouped GEMM)."""
    groups = int(traced.argument("groups", 1) or 1)
    source = traced.argument("input")
    channels = int(source.shape[1]) if getattr(source, "dim", lambda: 0)() > 1 else 0
    if groups <= 1 or channels != groups or not op.writes:
        return 0
    return op.flops.tensor // (2 * max(op.writes[0].elements, 1))


#: Window kernels that gather each output's window element by element, computing each
#: element's offset (PyTorch's ``max_pool2d_with_indices``, ``avg_pool2d``/``3d`` kernels and
#: direct depthwise convolutions): element accesses per output element. Their rate is that of the
#: kernels that cannot vectorize (``EstimateParams.strided_access_rate_per_sm``).
WINDOW_ACCESSES: dict[str, Callable[[OpRecord, TracedOp], int]] = {
    "max_pool2d_with_indices": _pool_window(2),
    "max_pool3d_with_indices": _pool_window(3),
    "avg_pool2d": _pool_window(2),
    "avg_pool3d": _pool_window(3),
    "convolution": _depthwise_conv_window,
    "_convolution": _depthwise_conv_window,
}


def window_accesses(op: OpRecord, traced: TracedOp) -> int:
    """Element accesses of a window kernel (:data:`WINDOW_ACCESSES`): output elements times
    the accesses each makes; 0 for any other op."""
    rule = WINDOW_ACCESSES.get(traced.base)
    if rule is None or not op.writes:
        return 0
    return op.writes[0].elements * rule(op, traced)


def pointwise_convolution(traced: TracedOp) -> bool:
    """A 1×1 convolution with stride 1, no padding and one group is a GEMM over the channels of
    each image (``out[n] = W · x[n]`` on the NCHW layout as it is): eager cuDNN runs it without
    the NCHW↔NHWC transposes its tensor-core kernels need for a spatial window. (Inductor's
    layout optimisation copies a convolution's input and output to channels-last itself.)"""
    weight = traced.argument("weight")
    if weight is None or getattr(weight, "dim", lambda: 0)() < 3:
        return False
    ones = lambda name: all(int(v) == 1 for v in (traced.argument(name) or [1]))  # noqa: E731
    zeros = all(int(v) == 0 for v in (traced.argument("padding") or [0]))
    return (all(int(edge) == 1 for edge in weight.shape[2:]) and ones("stride") and zeros
            and not traced.argument("transposed", False)
            and int(traced.argument("groups", 1) or 1) == 1)


#: Shared memory a thread block gets without opting in (bytes): PyTorch's softmax stages a row
#: there only when it fits (``cunn_SoftMaxForwardSmem``; CUDA's 48 KiB static limit).
SOFTMAX_SMEM_ROW_BYTES = 48 * 1024


def softmax_l2_rereads(traced: TracedOp) -> int:
    """Extra reads of an aligned softmax row too long for registers and shared memory:
    ``cunn_SoftMaxForward`` reads it for its maximum, its sum of exponentials and the output,
    three passes, whose re-reads hit L2 only while a wave's rows fit there (a 16 × 16,384 fp32
    softmax runs at the one-pass rate; a 4,096 × 393,216 one at a third of it). Misaligned rows
    are :func:`softmax_scalar_accesses`'s."""
    source = traced.args[0]
    if int(traced.args[1]) % max(source.dim(), 1) != source.dim() - 1:
        return 0
    length = int(source.shape[-1]) if source.dim() else 1
    row_bytes = length * source.element_size()
    if length <= SOFTMAX_REGISTER_ROW[0] and row_bytes <= SOFTMAX_REGISTER_ROW[1]:
        return 0
    return 2 if row_bytes % 16 == 0 and row_bytes > SOFTMAX_SMEM_ROW_BYTES else 0


#: Row-per-block eager ops whose extra reads hit L2 while a wave's rows fit it.
L2_REREADS: dict[str, Callable[[TracedOp], int]] = {
    "_softmax": softmax_l2_rereads,
    "_log_softmax": softmax_l2_rereads,
}


def softmax_row_load_bytes(traced: TracedOp) -> int:
    """Bytes a thread of a block-per-row softmax loads per instruction: ``cunn_SoftMaxForward``
    and its shared-memory variant load ``ILP = sizeof(float4) / sizeof(T)`` elements at once, 16
    bytes, when the row's length is a multiple of ILP (an aligned row); one element otherwise."""
    source = traced.args[0]
    row_bytes = int(source.shape[-1]) * source.element_size() if source.dim() else 0
    return 16 if row_bytes and row_bytes % 16 == 0 else source.element_size()


#: Elements a thread of PyTorch's ``reduce_kernel`` loads at once over a contiguous innermost
#: reduction (``input_vec_size``, its ``vt0`` of 4 in Reduce.cuh).
REDUCE_INPUT_VEC = 4


def reduce_row_load_bytes(traced: TracedOp) -> int:
    """An inner ``reduce_kernel`` loads :data:`REDUCE_INPUT_VEC` elements per instruction."""
    return min(REDUCE_INPUT_VEC * traced.args[0].element_size(), 16)


#: Row-per-block eager kernels that load more than one element per instruction, by base name:
#: the bytes a thread loads at once (any other streams its rows one element per load).
ROW_LOAD_BYTES: dict[str, Callable[[TracedOp], int]] = {
    "_softmax": softmax_row_load_bytes,
    "_log_softmax": softmax_row_load_bytes,
    **dict.fromkeys(INNER_REDUCTIONS, reduce_row_load_bytes),
}


# --- Inductor's reduction kernels (the fused plan) -------------------------------------------

#: Longest row Inductor keeps on chip in one pass (a persistent reduction): 1,024 elements for
#: a reduction over the innermost dims, 64 for any other (``should_use_persistent_reduction``
#: in ``torch/_inductor/choices.py``). A longer row is looped over in ``RBLOCK`` chunks, once
#: per reduction stage and once more to write an output that needs the reduced value, each
#: loop loading the row again.
PERSISTENT_ROW = {"inner": 1024, "other": 64}

#: Reduction stages (loops over a long row) of an aten op Inductor lowers, by base name; 1 for
#: any other reduction. Softmax takes the row's maximum, then the sum of its exponentials
#: (Inductor as timed, PyTorch 2.5: one loop each; its later online softmax merges them).
REDUCTION_STAGES: dict[str, int] = {"_softmax": 2, "_log_softmax": 2}

#: Threads of a looped Inductor reduction's block (``num_warps`` 8 for rows of 2,048 or more,
#: ``triton_heuristics._reduction_configs``): the blocks one SM holds at once, each on one row.
INDUCTOR_REDUCTION_THREADS = 256


def _inner_reduction(op: OpRecord) -> bool:
    """The op reduces its input's innermost dims: its outputs number a product of the input's
    leading dims."""
    shape = op.reads[0].shape
    kept = [math.prod(shape[:i]) for i in range(len(shape) + 1)]
    return op.writes[0].elements in kept


def looped_reduction_rereads(ops: tuple[OpRecord, ...], writes: tuple[TensorRef, ...],
                             traced_of: Callable[[OpRecord], TracedOp],
                             bytes_of: Callable[[TensorRef], int]) -> tuple[int, int, int]:
    """(bytes read again, bytes of its longest such row, rows of that reduction) of a fused
    kernel whose reduction rows are too long to keep on chip (:data:`PERSISTENT_ROW`).

    Each loop after the first reads the reduction's input again (its largest operand): one per
    further stage (:data:`REDUCTION_STAGES`), and one to write an output as large as that
    input (softmax, a norm's ``x / norm``). Between two reads of a row, every block the GPU
    holds reads a row: the re-reads hit L2 while those rows fit it (the performance model
    decides, at its GPU's SMs and L2: :func:`~.memory_time.loop_missed_bytes`)."""
    reread = longest_row = row_count = 0
    largest_write = max((ref.elements for ref in writes), default=0)
    for op in ops:
        if op.category is not Category.REDUCTION or not op.reads or not op.writes:
            continue
        rows = max(op.writes[0].elements, 1)
        source = max(op.reads, key=lambda ref: ref.elements)
        length = source.elements // rows
        if length <= PERSISTENT_ROW["inner" if _inner_reduction(op) else "other"]:
            continue
        loops = REDUCTION_STAGES.get(traced_of(op).base, 1) + (largest_write >= source.elements)
        if loops > 1:
            reread += (loops - 1) * bytes_of(source)
            if bytes_of(source) // rows > longest_row:
                longest_row, row_count = bytes_of(source) // rows, rows
    return reread, longest_row, row_count
