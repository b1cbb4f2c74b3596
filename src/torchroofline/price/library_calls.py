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
