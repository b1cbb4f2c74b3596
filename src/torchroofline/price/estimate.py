"""The stage after the roofline: a performance model — how long a forward call should take on a
real GPU driven by real PyTorch, as opposed to the speed of light (how long it could take at best).

The roofline stage keeps the bounds; this stage predicts. It has two parts:

1. **Per kernel, GPU time** at *achievable* rates (:func:`kernel_gpu_s`, this module): the
   slower of a kernel's memory and compute times plus the latencies no rate sets, each term from
   its family's module. What a kernel asks at peak rates is its :class:`~.kernel_load.KernelLoad`
   (:mod:`.kernel_load`). Bytes at a fraction of the datasheet bandwidth plus a fixed fill/drain
   latency, data a warm L2 holds at the L2's bandwidth, re-reads that miss L2
   (:mod:`.memory_time`); eager row-per-block reductions limited by how many rows they have,
   eager kernels that cannot vectorize limited by their per-element offset arithmetic (here);
   FLOPs at a per-family fraction of the unit's peak, GEMM-class kernels in whole waves of
   output tiles over the SMs plus their tile pipeline's prologue and epilogue, a tensor-core GEMM
   whose operands' rows are misaligned at its ``align1`` share (:mod:`.gemm_time`); flash
   attention at least its waves of query blocks (:mod:`.attention_time`); recurrences
   latency-bound per step (here); a host↔device copy at the GPU's host link
   (:mod:`.host_copies`); a library call pays the fill of the other kernels it launches, a kernel
   beside a collective runs at its share of the GPU (here). The op-shape rules live in
   :mod:`.eager_kernels`, the constants in :mod:`.estimate_params`, and every estimate's band in
   :mod:`.bands`. The kernel-level terms are measured on real kernels in profiler traces and
   cross-validated there (docs/validation.md).
2. **Per mode, a host/launch pipeline** (:mod:`.modes`): the host issues kernel *k* when it has
   finished the CPU work before it; the GPU runs it when the GPU is free and the kernel has been
   issued, giving both the launch-bound and the GPU-bound regime, for ``eager``, ``compile`` and
   ``cudagraph``.

Every constant is a field of :class:`~.estimate_params.EstimateParams` (GPU side) or
:class:`~.estimate_params.HostCosts` (CPU side, one machine) with its source; the fitted ones
come from ``benchmarks/calibrate.py``, which writes ``docs/calibration.md`` with the data, the
fit and its error per GPU and per level. Times are seconds inside this module.
"""

from __future__ import annotations

from .attention_time import attention_wave_efficiency, attention_waves
from .estimate_params import EstimateParams
from .gemm_time import (
    alignment_share,
    channel_share,
    layout_kernels_s,
    matmul_share,
    serial_epilogue_s,
    wave_efficiency,
)
from .hardware import GPUSpec
from .host_copies import host_copy_s
from .kernel_load import KernelLoad
from .memory_time import (
    fixed_latency_s,
    l2_missed_bytes,
    load_latency_s,
    loop_missed_bytes,
    memory_s,
)


def kernel_gpu_s(load: KernelLoad, gpu: GPUSpec, params: EstimateParams, cache: str) -> float:
    """GPU time of one kernel: the slower of its memory and compute times at achievable rates,
    plus the fill/drain latency and that of the other kernels its library launches; a
    recurrence is at least its serial steps; a host↔device copy runs at the host link."""
    if load.host_bytes:
        return host_copy_s(load, gpu, params)
    touched = (load.bytes + load.reread_bytes + l2_missed_bytes(load, gpu, params)
               + loop_missed_bytes(load, gpu, params) + load.sector_bytes)
    moved = memory_s(touched, gpu, params, cache)
    layout_s = layout_kernels_s(load, gpu, params)
    if load.layout_transposes and not layout_s:
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
        if load.gemm is not None and load.family == "flash_attention":
            fraction *= attention_wave_efficiency(load.gemm, gpu.sm_count)
        elif load.gemm is not None:
            fraction *= wave_efficiency(load.gemm, gpu.sm_count, params)
        fraction *= channel_share(load, params)
        compute += load.matmul_s * load.phase_work / (
            fraction * alignment_share(load.align_bytes, params))
        compute += serial_epilogue_s(load, gpu, params, cache)
    busy = max(moved, compute) + layout_s + fixed_latency_s(load, params)
    busy += (params.library_kernels.get(load.library_call, 0) + load.cpp_launches
             ) * params.fill_latency_s
    if load.shared:  # its blocks wait for SMs and bandwidth the collective holds
        busy /= params.collective_share
    if load.family == "flash_attention" and load.gemm is not None:
        busy = max(busy, attention_waves(load.gemm, gpu.sm_count) * params.attention_wave_s)
    if load.family == "rnn":
        busy = max(busy, load.launches * params.rnn_step_s)
    return busy
