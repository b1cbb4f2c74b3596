"""Memory-bound time of one kernel, and the latencies no rate sets.

Bytes move at ``EstimateParams.hbm_fraction`` of the datasheet HBM bandwidth; with a warm cache
the part that fits the usable L2 comes from L2 at its published bandwidth (:func:`memory_s`).
Bytes a kernel reads again hit L2 while what it holds in flight between two reads of one row
(rows the resident blocks work on × a row's bytes) fits the usable L2, and come from HBM again
otherwise (:func:`l2_missed_bytes` for eager row-per-block kernels, :func:`loop_missed_bytes`
for fused looped reductions). One load's latency follows by Little's law from the loads an SM
completes a second (:func:`load_latency_s`), and every kernel pays a fill/drain latency, plus a
library GEMM's tile-pipeline prologue and epilogue (:func:`fixed_latency_s`). Seconds, bytes,
bytes/s.
"""


from __future__ import annotations

from .eager_kernels import (
    INDUCTOR_REDUCTION_THREADS,
)
from .estimate_params import EstimateParams
from .hardware import GPUSpec
from .kernel_load import KernelLoad


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
