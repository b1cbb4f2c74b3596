"""Compute-bound time of GEMM-class kernels (cuBLAS/hipBLASLt GEMMs, cuDNN/MIOpen
convolutions): the share of their unit's peak FLOP rate they reach, and what they add to it.

A GEMM's output tiles run in whole waves over the SMs, so a grid that leaves its last wave part
empty idles SMs (:func:`wave_efficiency`, with split-K for deep skinny shapes); each family
reaches its own fraction of its unit's peak (:func:`matmul_share`: ``matmul_fraction``, fp32 on
the CUDA cores or on CDNA's fp32 MFMA, ``mma.sync`` convolutions); a tensor-core convolution
computes whole tiles of output channels (:func:`channel_share`); a tensor-core GEMM on
misaligned rows issues a load per ``align_bytes`` of each operand (:func:`alignment_share`); an
SGEMM on the CUDA cores stores its output after its main loop (:func:`serial_epilogue_s`); and
a library's own layout transposes run as kernels in series with its GEMM
(:func:`layout_kernels_s`). Shares are fractions in (0, 1]; times seconds.
"""


from __future__ import annotations

import math

from .estimate_params import EstimateParams
from .hardware import GPUSpec
from .kernel_load import TILED_CONV_FAMILIES, GemmShape, KernelLoad
from .library_calls import (
    channel_tile_share,
)
from .memory_time import memory_s


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


def layout_kernels_s(load: KernelLoad, gpu: GPUSpec, params: EstimateParams) -> float:
    """Seconds of the layout transposes a convolution's library runs as kernels of its own,
    before and after its GEMM, in series with it: where ``EstimateParams.library_kernels``
    names its call (MIOpen's NHWC solvers on NCHW tensors). Each element of
    :attr:`KernelLoad.layout_elements` is read and written once, one 16-bit element per
    access (``batched_transpose_*_half``), at the rate of kernels that cannot vectorize
    (``EstimateParams.strided_access_rate_per_sm``). 0 where the library folds its transposes
    into passes that overlap the GEMM (cuDNN: ``EstimateParams.conv_layout_passes``), and where
    the library's solver is not known to transpose (no :attr:`KernelLoad.layout_elements`)."""
    if not (load.layout_transposes and params.library_kernels.get(load.library_call)):
        return 0.0
    return 2 * load.layout_elements / (params.strided_access_rate_per_sm * gpu.sm_count)
