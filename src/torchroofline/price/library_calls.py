"""What a library call launches, as the performance model (:mod:`.estimate`) needs it where
ROCm and CUDA differ: the threads of PyTorch's batch-norm blocks, the GEMM kernels of a
convolution and the kernels MIOpen launches around them. Each rule names the source that
states it.
"""

from __future__ import annotations

import math

from ..trace.refs import TracedOp
from .eager_kernels import pointwise_convolution
from .hardware import GPUSpec

#: Threads per block of PyTorch's batch-norm kernels (``batch_norm_collect_statistics_kernel``,
#: ``batch_norm_backward_kernel``): ``MAX_BLOCK_SIZE`` in ``aten/src/ATen/native/cuda/
#: Normalization.cuh`` is 512 on CUDA and 256 under ROCm, by vendor; the row bandwidth
#: (``EstimateParams.row_bandwidth_bytes_per_s``) is measured on 512-thread blocks.
BATCH_NORM_BLOCK_THREADS: dict[str, int] = {"NVIDIA": 512, "AMD": 256}
#: The block size the row bandwidth was measured with (PyTorch on CUDA).
MEASURED_BLOCK_THREADS = 512
#: Tensors one batch-norm block streams at once, per op: the forward's statistics read the
#: input; the backward reads the output's gradient and the input side by side.
BATCH_NORM_STREAMS: dict[str, int] = {
    "native_batch_norm": 1,
    "_native_batch_norm_legit": 1,
    "native_batch_norm_backward": 2,
}


def row_block_share(traced: TracedOp, gpu: GPUSpec) -> float:
    """Share of the measured row bandwidth one block of a row-per-block kernel keeps on ``gpu``:
    a block streams at the loads it keeps in flight (Little's law), its threads times the
    tensors it streams at once, over the 512 threads of one stream the rate was measured on;
    never above it (the rate of a block beyond that is not measured). 1 for every op but
    PyTorch's own batch norm: a ROCm forward keeps half (256 threads, one stream), its
    backward all of it (256 threads, two streams)."""
    streams = BATCH_NORM_STREAMS.get(traced.base)
    if streams is None:
        return 1.0
    threads = BATCH_NORM_BLOCK_THREADS.get(gpu.vendor, MEASURED_BLOCK_THREADS)
    return min(1.0, threads * streams / MEASURED_BLOCK_THREADS)


def _strided_pointwise(traced: TracedOp) -> bool:
    """A 1×1 convolution with a stride above 1, no padding and one group (ResNet's
    downsampling shortcut)."""
    weight = traced.argument("weight")
    if weight is None or getattr(weight, "dim", lambda: 0)() < 3:
        return False
    strides = [int(v) for v in (traced.argument("stride") or [1])]
    return (
        all(int(edge) == 1 for edge in weight.shape[2:])
        and max(strides) > 1
        and all(int(v) == 0 for v in (traced.argument("padding") or [0]))
        and not traced.argument("transposed", False)
        and int(traced.argument("groups", 1) or 1) == 1
    )


def convolution_call(traced: TracedOp) -> str:
    """The key of ``EstimateParams.library_kernels`` for a convolution's library call: what it
    launches besides its GEMMs differs by MIOpen solver and by the gradients it computes.

    - ``conv`` / ``conv_backward``: MIOpen's NHWC implicit GEMMs (``igemm_*_gtcx3_nhwc``, CK's
      grouped convolutions) on NCHW tensors transpose both operands in and the result out
      (``TransposeSolutionDefault2Nhwc``/``Nhwc2Default``), and at 16 bits accumulate in an
      fp32 workspace they zero first and cast back after: 5 kernels per GEMM; a backward runs
      one GEMM per gradient it computes (``output_mask``), ``conv_backward_one`` where only one.
    - ``conv_pointwise``: a 1×1 stride-1 convolution forward is a GEMM per image on the NCHW
      layout as it is (MIOpen's ``GemmFwd1x1_0_1``, cuDNN likewise; :func:`~.eager_kernels.
      pointwise_convolution`): nothing around it.
    - ``conv_1x1_strided`` / ``conv_backward_1x1_strided``: a strided 1×1 convolution runs a
      rocBLAS GEMM between ``transpose_NCHW2CNHW`` and ``transpose_CNHW2NCHW`` forward, and a
      zeroed data gradient beside an NHWC weight-gradient GEMM backward.

    cuDNN's layout transposes are ``EstimateParams.conv_layout_passes``' bytes: on NVIDIA
    none of these keys has kernels of its own.
    """
    backward = traced.base == "convolution_backward"
    if not backward and pointwise_convolution(traced):
        return "conv_pointwise"
    if _strided_pointwise(traced):
        return "conv_backward_1x1_strided" if backward else "conv_1x1_strided"
    if not backward:
        return "conv"
    return "conv_backward" if convolution_gemms(traced) == 2 else "conv_backward_one"


def convolution_gemms(traced: TracedOp) -> int:
    """GEMM kernels a convolution's library call runs, each with its own fill, prologue and
    epilogue: one forward; backward one per gradient its ``output_mask`` asks of the input and
    the weight (cuDNN's dgrad and wgrad kernels, MIOpen's ``igemm_bwd``/``igemm_wrw``; the bias
    gradient is a reduction)."""
    if traced.base != "convolution_backward":
        return 1
    mask = traced.argument("output_mask") or [True, True, True]
    return max(1, sum(bool(wanted) for wanted in mask[:2]))


def transposed_phase_work(traced: TracedOp) -> float:
    """MACs a strided transposed convolution's kernel computes per MAC of its FLOP count (1 for
    every other convolution). cuDNN runs it as the data gradient of a strided convolution, which
    splits the output into one phase per stride offset (CUTLASS's ``StrideSupport::kStrided``
    dgrad iterators): each phase is a unit-stride convolution over ``ceil(k / s)`` taps per
    dimension, where ``k / s`` taps reach an output pixel on average. A 3×3×3 kernel at stride 2
    computes ``(2 · 2 / 3)³ = 64 / 27`` of its work; a 4×4 kernel at stride 2 none extra."""
    weight = traced.argument("weight")
    if (not traced.argument("transposed", False) or weight is None
            or traced.base == "convolution_backward"):
        return 1.0
    taps = [int(edge) for edge in weight.shape[2:]]
    strides = [int(v) for v in (traced.argument("stride") or [1])]
    strides = (strides * len(taps))[:len(taps)] if len(strides) == 1 else strides
    return math.prod(math.ceil(k / s) * s / k for k, s in zip(taps, strides, strict=True))


def channel_tile_share(channels: int, tile: int) -> float:
    """Share of the output channels one tensor-core convolution tile computes that exist:
    ``channels`` rounded up to a whole ``tile`` (``EstimateParams.conv_channel_tile``, the
    channel edge of the MMA instruction its kernels are built from)."""
    return channels / (math.ceil(channels / tile) * tile)


#: Inductor's measured channels-last speedup (below 1) or slowdown (above 1) of a convolution by
#: kind, which ``GraphLowering.decide_layout_opt`` (``torch/_inductor/graph.py``, the same from
#: PyTorch 2.1 on) weighs by FLOPs to decide whether an inference graph runs its 2D convolutions
#: channels-last (its comment: averages over torchbench's convolution inputs).
CHANNELS_LAST_MULTIPLIER: dict[str, float] = {
    "grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
#: ``decide_layout_opt`` leaves a graph of this many nodes or more per convolution as it is.
NODES_PER_CONV_LIMIT = 300


def _layout_kind(traced: TracedOp) -> str:
    """``decide_layout_opt``'s kind of a convolution, from its weight as aten passes it."""
    weight = traced.argument("weight")
    if int(traced.argument("groups", 1) or 1) > 1 and weight.shape[1] > 1:
        return "grouped"
    if weight.shape[0] <= 64 and weight.shape[1] <= 64:
        return "small"
    if weight.shape[0] * 2 <= weight.shape[1] and weight.dim() > 2 and weight.shape[2] > 1:
        return "in_out"
    return "default"


def inductor_channels_last(convolutions: list[tuple[TracedOp, int]], graph_ops: int) -> bool:
    """Whether ``torch.compile`` runs an inference graph's 2D convolutions channels-last, from
    each convolution and its FLOPs (``decide_layout_opt``): a graph with convolutions, not too
    few of them among its ``graph_ops``, whose FLOPs weighted by
    :data:`CHANNELS_LAST_MULTIPLIER` do not exceed its FLOPs (a graph of grouped convolutions
    with several channels per group stays as it is; a depthwise one is "small" or "default")."""
    if not convolutions or graph_ops >= NODES_PER_CONV_LIMIT * len(convolutions):
        return False
    total = sum(flops for _, flops in convolutions)
    weighted = sum(CHANNELS_LAST_MULTIPLIER[_layout_kind(traced)] * flops
                   for traced, flops in convolutions)
    return weighted <= total


def _channels_last_ordered(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """A 4-D tensor already in channels-last order, size-1 dimensions ignored (Inductor's
    ``Layout.is_stride_ordered``); a tensor without strides is taken as contiguous."""
    strides = strides or tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
    kept = [strides[d] for d in (0, 2, 3, 1) if shape[d] != 1]  # N, H, W, C: outer to inner
    return all(a >= b for a, b in zip(kept, kept[1:], strict=False))


def channels_last_copies(traced: TracedOp, graph_inputs: frozenset[int],
                         graph_outputs: frozenset[int]) -> int:
    """Copy kernels Inductor launches around a 2D convolution it runs channels-last
    (``kernel/conv.py``: ``require_channels_last`` of the input and the weight; graph outputs
    keep eager's strides, ``config.keep_output_stride``): one per operand that is a graph
    input (a forward argument or a parameter: without freezing, the weights are inputs of
    every call) not already channels-last ordered, and one back to NCHW where its output is a
    graph output (with a bias, the add Inductor peels off the call writes it so). An operand
    an Inductor kernel computes is written channels-last by it."""
    copies = sum(ref.value_id in graph_inputs and len(ref.shape) == 4
                 and not _channels_last_ordered(ref.shape, ref.strides)
                 for ref in traced.reads[:2])
    output = traced.writes[0] if traced.writes else None
    if (output is not None and traced.argument("bias") is None
            and output.value_id in graph_outputs and len(output.shape) == 4):
        copies += not _channels_last_ordered(output.shape, output.strides)
    return copies
