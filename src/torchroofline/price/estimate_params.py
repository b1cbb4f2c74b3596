"""The performance model's constants: the GPU-side :class:`EstimateParams`, the host profile
:class:`HostCosts`, their defaults per architecture and GPU, and what each constant means and
where it comes from (:data:`CONSTANT_NOTES`, which METHOD.md prints). The model that uses them
is :mod:`.estimate`. Times are seconds, rates per second, bandwidths bytes per second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InputError
from .hardware import GPUSpec

# --- Parameters ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HostCosts:
    """CPU seconds of one forward call outside the GPU, on one machine (a host profile).

    They differ between machines by about 2× across the calibration sets (CPU model, clock,
    driver); ``docs/calibration.md`` lists the scale fitted for each. :meth:`scaled` gives a
    profile for a faster or slower host from one measured ratio.
    """

    eager_call_s: float  #: Python call of the model (``nn.Module.__call__``, hooks check)
    eager_op_s: float  #: one aten op that launches a kernel: Python, dispatcher, launch
    eager_view_s: float  #: one view/metadata op (no kernel): Python and dispatcher only
    eager_module_s: float  #: one submodule call in the forward (``nn.Module.__call__``)
    launch_s: float  #: one extra kernel launch inside a library call (a cuDNN RNN's steps)
    compile_call_s: float  #: ``torch.compile`` per call: guards, wrapper, output allocation
    compile_kernel_s: float  #: one Triton or extern kernel launched by Inductor's wrapper
    cudagraph_call_s: float  #: one CUDA-graph replay (``reduce-overhead``), with its checks
    #: one convolution's library call on top of its launch, eager or compiled (Inductor calls
    #: the same aten kernel): cuDNN builds its tensor and convolution descriptors and looks the
    #: plan up in its cache on the CPU before it launches
    conv_call_s: float = 0.0
    source: str = ""

    def scaled(self, factor: float) -> HostCosts:
        """Every CPU cost times ``factor`` (a host ``factor`` times slower)."""
        if not isinstance(factor, (int, float)) or not factor > 0:
            raise InputError(f"a host scale is a number above 0, got {factor!r}")
        costs = {
            name: getattr(self, name) * factor
            for name in self.__dataclass_fields__
            if name.endswith("_s")
        }
        return replace(self, **costs, source=f"{self.source} ×{factor:.3g}")


@dataclass(frozen=True)
class EstimateParams:
    """GPU-side constants of the model and the host profile; all fields documented in METHOD.md.

    Fractions are of the datasheet figures of :class:`~torchroofline.hardware.GPUSpec`.
    """

    host: HostCosts
    hbm_fraction: float  #: achievable share of the datasheet memory bandwidth (large streams)
    fill_latency_s: float  #: per-kernel fill/drain time: minimum duration of any kernel
    vector_fraction: float  #: achievable share of the CUDA-core peak for pointwise math
    #: achievable share of the unit's peak per matmul-class family (see :data:`FAMILIES`)
    matmul_fraction: Mapping[str, float] = field(hash=False)
    #: fixed time of a library matmul-class kernel (cuBLAS/cuDNN GEMM, convolution, flash
    #: attention) on top of the fill: its prologue loads the first tiles through the software
    #: pipeline and its epilogue writes them back, so even a tiny GEMM takes a few µs
    matmul_latency_s: float = 0.0
    #: extra HBM passes over a tensor-core convolution's input and output (NCHW ↔ NHWC)
    conv_layout_passes: float = 0.0
    #: output channels one tile of a tensor-core convolution computes at the least: the edge
    #: of the MMA instruction its kernels are built from (:func:`~.estimate.channel_share`)
    conv_channel_tile: int = 16
    tile_edges: tuple[int, ...] = (128, 64, 32)  #: GEMM output tiles cuBLAS/cuDNN pick from
    split_k_depth: int = 512  #: reduction depth per split when a GEMM splits K over more SMs
    #: one thread block streaming one row of 4-byte elements (eager); a block issues one
    #: element per thread per load, so rows of 2-byte elements stream at half this
    row_bandwidth_bytes_per_s: float = 10e9
    #: element accesses per second and SM of a kernel that computes every operand's offset per
    #: element (PyTorch's non-vectorized ``elementwise_kernel``, ``CatArrayBatchedCopy``)
    strided_access_rate_per_sm: float = 5.5e9
    #: one wave of flash-attention thread blocks (one per batch, head and block of query rows,
    #: each a serial loop over the keys): the least time a wave takes
    attention_wave_s: float = 0.0
    #: :attr:`fill_latency_s` as SM clock cycles: where set, :meth:`for_gpu` derives the fill
    #: from the GPU's SM clock (its locked clock where locked), so a generation's measured fill
    #: carries to its other parts and to locked clocks
    fill_cycles: float | None = None
    #: :attr:`attention_wave_s` as tensor clock cycles (the clock the MMA peaks assume): a wave
    #: is a latency chain of one block's serial steps, so a library's measured wave carries to
    #: the other GPUs that run the same kernels in cycles
    attention_wave_cycles: float | None = None
    rnn_step_s: float = 10e-6  #: one recurrent step: a small GEMM plus gate math, in series
    cudagraph_gap_s: float = 1e-6  #: GPU gap between kernels replayed from a CUDA graph
    #: L2 bandwidth (bytes/s) by GPU key where a microbenchmark figure is published
    l2_bandwidth_bytes_per_s: Mapping[str, float] = field(default_factory=dict, hash=False)
    #: share of the L2 a warm kernel's data can occupy and still hit (the rest: other data)
    l2_usable_fraction: float = 0.5
    #: share of its aligned rate a tensor-core GEMM keeps when a row of an operand is not a
    #: multiple of 16 bytes: cuBLAS then runs CUTLASS ``align1``/``align2`` kernels, which load
    #: one or two elements per instruction instead of 16 bytes; this is the share at 2 bytes a
    #: load, and it scales with the bytes a load moves (see :func:`alignment_share`)
    misaligned_gemm_fraction: float = 0.25
    #: share of the host link's rate (:attr:`GPUSpec.host_link_bytes_per_s`) a copy between
    #: pinned host memory and the GPU reaches
    host_copy_fraction: float = 0.45
    #: bytes/s of a copy to or from pageable host memory: the driver stages it through a pinned
    #: buffer with a CPU memcpy, chunk by chunk, whatever the link
    pageable_copy_bytes_per_s: float = 6e9
    #: kernels a library call launches besides its main one (layout transposes, casts, memsets),
    #: by call (``"conv"``, ``"conv_backward"``): each costs at least the fill latency
    library_kernels: Mapping[str, int] = field(default_factory=dict, hash=False)
    #: share of its own rate a kernel keeps while a collective (NCCL/RCCL) runs beside it on
    #: another stream: the collective's channels hold SMs and move link-rate traffic through HBM
    collective_share: float = 0.5
    #: share of the fp32 peak fp32 GEMMs and convolutions reach where they run on matrix cores
    #: (CDNA's fp32 MFMA, at the GPU's fp32 peak), in place of their family's share
    #: (:func:`matmul_share`); None where they run on the CUDA cores (NVIDIA: SGEMM)
    fp32_matrix_fraction: float | None = None
    #: share of its fp32 peak a cuBLAS SGEMM on the CUDA cores reaches where the architecture's
    #: FP32 lanes set it apart from the fitted ``gemm`` share; None: that share
    cuda_core_gemm_fraction: float | None = None
    #: share of the tensor-core peak the ``mma.sync`` instruction reaches: 1 where it is the
    #: GPU's full-rate MMA, below where only a warpgroup MMA (wgmma, tcgen05) reaches the peak;
    #: cuDNN's 2D convolution kernels are built from it (``estimate.MMA_SYNC_FAMILIES``)
    mma_sync_share: float = 1.0
    #: per-architecture replacements of any field above, by ``GPUSpec.architecture``
    per_architecture: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    #: per-GPU replacements of any field above, by GPU key (e.g. a measured ``hbm_fraction``),
    #: applied after the architecture's
    per_gpu: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    source: str = ""

    def for_gpu(self, gpu: GPUSpec) -> EstimateParams:
        """These parameters with ``gpu``'s architecture's entries of :attr:`per_architecture`
        applied, then its own of :attr:`per_gpu`, and the latencies given in cycles
        (:attr:`fill_cycles`, :attr:`attention_wave_cycles`) in seconds at its clocks."""
        params = self
        for changes in (self.per_architecture.get(gpu.architecture), self.per_gpu.get(gpu.key)):
            if changes:
                params = replace(params, **changes)
        return replace(params, **params._in_seconds(gpu))

    def _in_seconds(self, gpu: GPUSpec) -> dict[str, float]:
        """The latencies given in cycles, in seconds at ``gpu``'s clocks (none without one)."""
        sm_mhz = gpu.locked_clock_mhz or gpu.boost_clock_mhz
        tensor_mhz = gpu.locked_clock_mhz or gpu.tensor_clock_mhz or gpu.boost_clock_mhz
        found = {}
        if self.fill_cycles is not None and sm_mhz:
            found["fill_latency_s"] = self.fill_cycles / (sm_mhz * 1e6)
        if self.attention_wave_cycles is not None and tensor_mhz:
            found["attention_wave_s"] = self.attention_wave_cycles / (tensor_mhz * 1e6)
        return found

    def l2_bandwidth(self, gpu: GPUSpec) -> float | None:
        return self.l2_bandwidth_bytes_per_s.get(gpu.key)

    def with_host(self, host: HostCosts) -> EstimateParams:
        return replace(self, host=host)

    def host_scaled(self, factor: float) -> EstimateParams:
        """These parameters on a host ``factor`` times slower (``--host-scale``): every CPU
        cost times ``factor``, the GPU side unchanged."""
        return self.with_host(self.host.scaled(factor))


#: Published L2 bandwidths (bytes/s), measured by microbenchmarks; used only by the warm
#: *estimate*, never by the bound. Vendor peaks (bytes per clock × clock: A100 7.2 TB/s, H100
#: 9.0 TB/s, tabulated in doi:10.1016/j.ultsonch.2023.106546, Table 3) are not achieved rates:
#: priced at them, the A100 and H100 estimates of the calibration set got worse, so a GPU
#: without a measured figure reads warm data at HBM rates.
L2_BANDWIDTH_BYTES_PER_S: dict[str, float] = {
    # Jia, Maggioni, Staiger, Scarpazza, "Dissecting the NVIDIA Volta GPU Architecture via
    # Microbenchmarking" (2018), L2 load throughput on V100: 2155 GB/s.
    "v100": 2155e9,
    # Jia, Maggioni, Smith, Scarpazza, "Dissecting the NVidia Turing T4 GPU via
    # Microbenchmarking" (2019), L2 load throughput on T4: 1270 GB/s.
    "t4": 1270e9,
}


# --- What each constant means and where it comes from (METHOD.md prints this table) --------

CONSTANT_NOTES: dict[str, str] = {
    "hbm_fraction": "share of the datasheet memory bandwidth a large streaming kernel reaches: "
    "0.9 on HBM parts, 0.75-0.81 on GDDR6 parts (Ada, the T4, Ampere's GA102), measured on the "
    "calibration data's one 537 MB streaming problem (HBM_STREAM_FRACTION); not fitted",
    "fill_latency_s": "fill/drain time of every kernel, so a small kernel reaches a small share "
    "of the bandwidth and none is shorter; set from fill_cycles at the GPU's SM clock (this "
    "value only for a GPU whose entry has no clock)",
    "fill_cycles": "a kernel's fill/drain in SM clock cycles, per generation: Hopper and "
    "Blackwell 2,970 (the H100 traces' shortest kernels, 1.5 µs at 1980 MHz), Ampere and Volta "
    "4,230 (the A100 trace's median tiny kernel, 3 µs at 1410 MHz), CDNA 9,900 (the MI350X's "
    "4-5 µs per-kernel floor, issue 39, at 2200 MHz; the MI300X traces' 4-5 µs agree); "
    "measured, not fitted. Turing and Ada keep 3 and 1.5 µs, the fills KernelBench's T4, L40S "
    "and L4 sets were calibrated with",
    "fp32_matrix_fraction": "share of the fp32 peak fp32 GEMMs and 2D convolutions reach where "
    "they run on matrix cores (CDNA: fp32 MFMA, whose dense peak equals the fp32 vector peak in "
    "AMD's data sheets); CDNA 0.85: fp32 GEMMs measured near their peak on the MI350X, where "
    "the bf16 GEMM share (0.45) over-estimated them 2-6x (issue 39); none on NVIDIA (SGEMM on "
    "the CUDA cores, at the gemm share)",
    "matmul_latency_s": "added to a matmul-class library kernel (GEMM, convolution, flash "
    "attention): prologue and epilogue of its tile pipeline, so a tiny GEMM takes 5-7 µs in the "
    "traces; measured on the traces",
    "vector_fraction": "share of the CUDA-core peak pointwise math reaches: the peak counts an "
    "FMA as 2 FLOPs, pointwise ops issue one FLOP per instruction (not fitted: the data is flat "
    "in it)",
    "matmul_fraction.*": "share of the unit's peak per matmul-class family (cuBLAS SGEMM, cuDNN "
    "2D/3D/transposed/grouped convolution, SDPA, cuDNN RNN); fit. flash_attention (SDPA on "
    "tensor cores): FlashAttention-2's published H100 rate, about 30 % of the bf16 peak; the "
    "MI300X's GEMMs reach 45 % (CDNA's value), measured on the traces, and MIOpen's implicit-"
    "GEMM convolutions take that share on CDNA (as cuDNN's take about cuBLAS's)",
    "conv_layout_passes": "extra passes over a TF32 convolution's input and output: cuDNN's "
    "tensor-core kernels work in NHWC, PyTorch hands it NCHW (none for an eager 1x1 one); fit, "
    "held to 0-2 (no transpose to both); NVIDIA only: MIOpen's transposes are kernels of their "
    "own, in series with the GEMM (gemm_time.layout_kernels_s)",
    "mma_sync_share": "share of the tensor-core peak the mma.sync instruction reaches, which "
    "cuDNN's 2D convolution kernels are built from (the H100 trace's Conv2d: CUTLASS "
    "s16816fprop): 1 up to Ada; 2/3 on Hopper and Blackwell, where only the warpgroup MMA "
    "(wgmma, tcgen05) reaches the peak (FlashAttention-3 paper, 2024); not fitted",
    "cuda_core_gemm_fraction": "share of the fp32 peak a cuBLAS SGEMM reaches on SMs with 128 "
    "dedicated FP32 lanes (Hopper, Blackwell): 0.77, measured on the B200's 4096² SGEMMs (a "
    "training setup, 0.76-0.78); elsewhere the fitted gemm share, which GA102 and Ada parts "
    "(half their FP32 lanes shared with INT32) pull down",
    "conv_channel_tile": "output channels one tensor-core convolution tile computes at the "
    "least, fewer channels being computed as zeros: the M edge of the MMA instruction cuDNN's "
    "implicit-GEMM kernels are built from (PTX ISA): 16 for mma.sync (m16n8k8 TF32, Volta to "
    "Ada) and CDNA's 16x16 MFMA; 64 on Hopper and Blackwell, whose warpgroup MMA (wgmma, "
    "tcgen05) has a fixed 64-row edge; not fitted",
    "tile_edges": "output tile edges cuBLAS/cuDNN choose from (CUTLASS's 128/64/32 "
    "threadblock tiles); the largest that fills a wave is taken",
    "split_k_depth": "reduction depth per split when a GEMM splits K to fill the GPU (cuBLAS "
    "split-K heuristics split reductions of a few hundred or more)",
    "strided_access_rate_per_sm": "element accesses per second and SM of an eager kernel that "
    "cannot vectorize (an operand broadcast or laid out unlike the output: PyTorch's "
    "elementwise_kernel, cat, index_select), which computes each operand's offset per element: "
    "0.8 T/s on the H100 (132 SMs), 1.5 T/s on the MI300X (304 CUs) in the traces",
    "attention_wave_s": "least time of one wave of flash-attention blocks (one per batch × head "
    "× 128 query rows, a serial loop over the keys); set from attention_wave_cycles at the "
    "GPU's tensor clock",
    "attention_wave_cycles": "one flash-attention wave in tensor clock cycles, per library: "
    "PyTorch's CUDA FlashAttention-2 kernels 18,300 (9-11 µs on the H100 traces, at 1830 MHz; "
    "every NVIDIA part from Ampere on runs them), ROCm's AOTriton kernel 63,000 (27-33 µs on "
    "the MI300X traces, at 2100 MHz)",
    "row_bandwidth_bytes_per_s": "bandwidth of one thread block streaming one row of 4-byte "
    "elements: bytes in flight per block / memory latency (Little's law, a few KB / ~0.5 µs); "
    "rows of 2-byte elements at half (one element per thread per load); fit",
    "misaligned_gemm_fraction": "share of its rate a tensor-core GEMM keeps when an operand's "
    "rows are not a multiple of 16 bytes: cuBLAS falls back to CUTLASS align1/align2 kernels; "
    "about a quarter at 2 bytes a load, measured on an odd-leading-dimension bf16 bmm (issue 39); "
    "the kernel is bound by the loads it issues, so 4-byte loads keep half (the A100 trace's TF32 "
    "align1 kernels: about half) and 8-byte loads all of it",
    "host_copy_fraction": "share of the host link (GPUSpec.host_link: PCIe generation × width, "
    "or NVLink-C2C) a pinned copy reaches: ~0.8 on a direct link (CUDA bandwidthTest), 0.24 on "
    "the A100 training trace's 8-GPU server (shared PCIe switches); between the two",
    "pageable_copy_bytes_per_s": "a copy to or from pageable host memory, staged by the driver "
    "through a pinned buffer with a CPU memcpy: 4.4 GB/s measured device-to-host (issue 39)",
    "collective_share": "share of its own rate a kernel keeps while a collective (NCCL/RCCL) "
    "runs beside it on another stream (a profiler trace shows the overlap): the A100 training "
    "trace's kernels beside an NCCL kernel take 2× as long (median over op shapes; e.g. a "
    "[1024, 512] mul 13 µs against 6 µs alone, n = 240 / 12); CDNA 1.0: the MI300X ResNet "
    "trace's kernels beside an RCCL kernel take no longer",
    "library_kernels": "kernels a library call launches besides its GEMMs, each at least the "
    "fill latency (library_calls.convolution_call): none on NVIDIA (cuDNN's layout passes are "
    "conv_layout_passes); CDNA (MIOpen's NHWC implicit GEMMs on NCHW tensors): 5 per GEMM, the "
    "transposes of both operands and the result and, at 16 bits, the zeroed fp32 workspace "
    "and its cast (MIOpen's conv_asm_implicit_gemm_gtc_fwd_nhwc.cpp GetWorkspaceSize), so 5 "
    "forward, 10 backward (5 when one gradient is asked); a strided 1x1 convolution 2 forward "
    "(rocBLAS GEMM between CNHW transposes), 7 backward; counted in the MI300X ResNet training "
    "trace: 4.97, 9.6 (5-10), 2 and 7.3 per call (a split reduction's semaphore memset and the "
    "kernels an aten op launches from C++ are eager_kernels.CPP_LAUNCHES', every GPU)",
    "rnn_step_s": "one recurrent step of a cuDNN RNN: small GEMM + gate math in series; fit",
    "cudagraph_gap_s": "GPU gap between kernels replayed from a CUDA graph; fit",
    "l2_bandwidth_bytes_per_s": "published L2 bandwidth per GPU (microbenchmarks, cited at "
    "L2_BANDWIDTH_BYTES_PER_S); warm estimate only, never the bound",
    "l2_usable_fraction": "share of the L2 a warm kernel's data may occupy and still hit (half: "
    "the other half holds the rest of the working set; not fitted)",
    "host.eager_call_s": "eager: Python call of the model; fit",
    "host.eager_op_s": "eager: one aten op that launches a kernel (Python, dispatcher, "
    "cudaLaunchKernel); fit",
    "host.eager_view_s": "eager: one view or metadata op (no kernel); fit",
    "host.eager_module_s": "eager: one submodule call (nn.Module.__call__); fit",
    "host.launch_s": "one extra launch inside a library call (a cuDNN RNN's steps), or a kernel "
    "issued from C++ with no Python: a Python call's kernels after its first "
    "(TracedOp.python_call) and those an op launches unseen by the trace (CPP_LAUNCHES); fit",
    "host.conv_call_s": "a convolution's cuDNN call on the CPU beyond its launch (descriptors, "
    "plan-cache lookup), eager and compiled: a one-conv problem takes 15 µs more than a one-op "
    "problem on the H100 host (28.4 against 13.2 µs); fit",
    "host.compile_call_s": "torch.compile: guards, wrapper and output allocation per call; fit",
    "host.compile_kernel_s": "torch.compile: one Triton or extern kernel launch; fit",
    "host.cudagraph_call_s": "reduce-overhead: one CUDA-graph replay with its checks; fit",
}


# --- Defaults ------------------------------------------------------------------------------
# Fitted by benchmarks/calibrate.py on the KernelBench timings of nine GPU setups; the fit, its
# data and its error per GPU and level are in docs/calibration.md; the starting point and the
# physical range each constant was held in are START and RANGES in that script. Constants the
# fit left at a range limit are marked so in docs/calibration.md.

DEFAULT_HOST = HostCosts(
    eager_call_s=9.37e-06,
    eager_op_s=1.62e-05,
    eager_view_s=6.8e-06,
    eager_module_s=7.6e-06,
    launch_s=3.95e-06,
    compile_call_s=9.3e-05,
    compile_kernel_s=2.08e-05,
    cudagraph_call_s=0.000126,
    conv_call_s=1.9e-05,
    source="fit: docs/calibration.md (geometric mean of the six training hosts)",
)

#: Achievable share of the unit's peak per matmul-class family (:data:`FAMILIES`).
MATMUL_FRACTION: dict[str, float] = {
    "gemm": 0.646,
    "conv": 0.673,
    "conv3d": 0.0646,
    "conv_transposed": 0.184,
    "conv_transposed3d": 0.191,
    "conv_grouped": 0.014,
    "attention": 0.604,
    "flash_attention": 0.3,
    "rnn": 0.267,
}

# Latencies no rate sets, as clock cycles of the GPU they were measured on: a kernel's fill and
# a flash-attention wave are chains of dependent steps (launch, the first loads, one block's
# serial loop, the last writes), each a number of cycles of the SM's clock, so a part of the
# same generation (or the same GPU at a locked clock) takes them at its own clock
# (EstimateParams.for_gpu). Which generation an architecture follows is PER_ARCHITECTURE's.

#: Hopper's kernel fill: the H100 traces' shortest kernels take 1.5 µs, at its 1980 MHz SM clock.
#: Blackwell (sm_100) launches through the same front end (TMA, thread-block clusters).
HOPPER_FILL_CYCLES = 1.5e-6 * 1980e6
#: Ampere's: 3 µs on the A100 (the A100 training trace's median over 1,650 kernels that move
#: < 64 KiB) at its 1410 MHz. Volta launches as Ampere does (no TMA or clusters).
AMPERE_FILL_CYCLES = 3e-6 * 1410e6
#: ROCm's kernel fill on CDNA: a dispatch packet the command processor spreads over 8 XCDs, each
#: signalling its end: 4-5 µs on the MI350X (issue 39's measured SOL-ExecBench port: the
#: per-kernel floor under its small workloads; no trace of this repository), 4.5 µs at its
#: 2200 MHz. The MI300X traces agree (4-5 µs at 2100 MHz: 4.7 µs from this).
CDNA_FILL_CYCLES = 4.5e-6 * 2200e6
#: One wave of PyTorch's CUDA flash-attention kernel (FlashAttention-2, ``pytorch_flash::
#: flash_fwd_kernel``): 9-11 µs on the H100 traces at 141-559 keys, at its 1830 MHz tensor
#: clock. The same kernels run on every NVIDIA part from Ampere on.
CUDA_FLASH_WAVE_CYCLES = 10e-6 * 1830e6
#: One wave of ROCm's (AOTriton's ``attn_fwd``): 27-33 µs on the MI300X traces, at 2100 MHz.
ROCM_FLASH_WAVE_CYCLES = 30e-6 * 2100e6

#: Share of the bf16 peak hipBLASLt's large GEMMs reach on the MI300X traces (the H100's cuBLAS:
#: 58-70 %). MIOpen's implicit-GEMM convolutions (CK's ``kernel_grouped_conv_fwd_*``, the
#: ``igemm_*_gtcx3_nhwc`` kernels) take the same share, as cuDNN's convolutions take about
#: cuBLAS's on NVIDIA (the fitted ``conv`` 0.673 against ``gemm`` 0.646).
ROCM_GEMM_SHARE = 0.45

#: AMD's CDNA GPUs (ROCm) where they differ: a tiny kernel takes 4-5 µs (CDNA_FILL_CYCLES),
#: hipBLASLt GEMMs and MIOpen's convolutions reach about 45 % of the bf16 peak
#: (ROCM_GEMM_SHARE), a wave of AOTriton's attention kernel takes about 30 µs there, and
#: MIOpen wraps each convolution GEMM in layout transposes, a workspace memset and a cast: 5
#: kernels besides the GEMM (:func:`~.library_calls.convolution_call`), the transposes in
#: series with it (:func:`~.gemm_time.layout_kernels_s`).
#: ROCm's latencies, on every CDNA generation (the same runtime and attention kernels).
ROCM_LATENCIES: dict[str, Any] = {"fill_cycles": CDNA_FILL_CYCLES,
                                  "attention_wave_cycles": ROCM_FLASH_WAVE_CYCLES}

AMD_CDNA: dict[str, Any] = {
    **ROCM_LATENCIES,
    "matmul_fraction": {**MATMUL_FRACTION, "gemm": ROCM_GEMM_SHARE, "conv": ROCM_GEMM_SHARE},
    "fp32_matrix_fraction": 0.85,
    "library_kernels": {"conv": 5, "conv_backward": 10, "conv_backward_one": 5,
                        "conv_1x1_strided": 2, "conv_backward_1x1_strided": 7},
    # the ResNet trace's kernels beside an RCCL kernel take no longer than alone (304 CUs, and
    # xGMI traffic small against 5.3 TB/s of HBM)
    "collective_share": 1.0,
}

#: GPUs before Hopper fill a kernel as Ampere does (AMPERE_FILL_CYCLES).
PRE_HOPPER: dict[str, Any] = {"fill_cycles": AMPERE_FILL_CYCLES}
#: Turing and Ada keep the fills in seconds that KernelBench's T4, L40S and L4 sets were
#: calibrated with (Ampere's 3 µs, Hopper's 1.5 µs; no trace of either): Ampere's cycles at
#: their clocks (T4 2.66, L40S 1.68, L4 2.07 µs) moved those sets by up to a point, worse
#: (docs/validation.md).
KERNELBENCH_TURING: dict[str, Any] = {"fill_cycles": None, "fill_latency_s": 3e-6}
KERNELBENCH_ADA: dict[str, Any] = {"fill_cycles": None, "fill_latency_s": 1.5e-6}

#: Share of the datasheet bandwidth a large stream reaches, measured (not fitted) on the one
#: purely streaming problem of the calibration data (``5_Matrix_scalar_multiplication``: 537 MB
#: read and written, host time subtracted; docs/calibration.md): HBM parts 0.84-0.93 (A100 40/80
#: GB, H100), GDDR6 parts 0.75-0.81 (L40S 0.75-0.77, L4 0.78, T4 0.75, A10G 0.81). The HBM
#: figure, 0.9, is the default; GDDR parts take their own.
HBM_STREAM_FRACTION = 0.9
#: Ada's parts are all GDDR6(X): the L40S's and the L4's measured share.
GDDR_ADA: dict[str, Any] = {**KERNELBENCH_ADA, "hbm_fraction": 0.77}

#: Hopper's and Blackwell's tensor cores reach their peak only through the warpgroup MMA
#: (wgmma, tcgen05); the Ampere-era ``mma.sync`` that cuDNN's 2D convolution kernels still use
#: (the H100 trace's ``cutlass_tensorop_…_s16816fprop`` Conv2d) reaches about two thirds of
#: the H100's tensor-core peak (Shah et al., "FlashAttention-3", 2024, §3: wgmma is needed for
#: the rest). Not fitted: the H100 sets are held out, and the external H100 set's large TF32
#: Conv2d problems run at 21-35 % of the TF32 peak (0.673 × 2/3 = 45 % in the model).
WARPGROUP_MMA_SYNC_SHARE = 2 / 3
#: An SGEMM on an SM with 128 dedicated FP32 lanes (Hopper, Blackwell: INT32 on lanes of its
#: own, unlike GA102's and Ada's shared datapath) reaches 0.76-0.78 of the fp32 peak on the
#: B200 (B200_together, a training setup: its 4096² problems 12-15 of level 1), above the
#: fitted ``gemm`` share (0.646) that GA102 and Ada parts, whose second FP32 datapath is shared
#: with INT32, pull down (L40S 0.48-0.62 on the same problems).
DEDICATED_FP32_SGEMM_FRACTION = 0.77
#: Hopper and Blackwell: a convolution to fewer output channels computes 64 of them per tile
#: (the warpgroup MMA's tile edge, PTX ISA; the H100 trace's ``mma.sync`` Conv2d kernel,
#: ``s16816fprop``, is taken to tile as wide: not checked), its 2D kernels' ``mma.sync`` runs at
#: :data:`WARPGROUP_MMA_SYNC_SHARE` of the peak, and SGEMM at
#: :data:`DEDICATED_FP32_SGEMM_FRACTION` of the fp32 peak.
WARPGROUP_MMA: dict[str, Any] = {"conv_channel_tile": 64,
                                 "mma_sync_share": WARPGROUP_MMA_SYNC_SHARE,
                                 "cuda_core_gemm_fraction": DEDICATED_FP32_SGEMM_FRACTION}

#: Per-architecture constants, by ``GPUSpec.architecture``.
PER_ARCHITECTURE: dict[str, dict[str, Any]] = {
    "Hopper": WARPGROUP_MMA,
    "Blackwell": WARPGROUP_MMA,
    "Blackwell Ultra": WARPGROUP_MMA,
    "CDNA3": AMD_CDNA,
    "CDNA4": AMD_CDNA,
    "CDNA2": ROCM_LATENCIES,
    "Ampere": PRE_HOPPER,
    "Turing": {**KERNELBENCH_TURING, "hbm_fraction": 0.75},  # the T4 (GDDR6)
    "Volta": PRE_HOPPER,
    "Ada": GDDR_ADA,
}

#: Per-GPU constants, by GPU key: Ampere's GDDR6(X) parts (GA102) take the A10G's measured share;
#: Blackwell's GeForce and workstation parts (GB202, sm_120) have no warpgroup MMA (their tensor
#: cores run mma.sync at full rate, as Ada's), so they keep its 16-channel tile, and their FP32
#: lanes share a datapath with INT32 as Ada's do (the fitted ``gemm`` share).
PER_GPU: dict[str, dict[str, Any]] = {
    **{key: {"hbm_fraction": 0.81} for key in ("a10g", "rtx3090", "rtx3080")},
    **{key: {"conv_channel_tile": 16, "mma_sync_share": 1.0, "cuda_core_gemm_fraction": None}
       for key in ("rtx5090", "rtx-pro6000")},
}

DEFAULT_PARAMS = EstimateParams(
    host=DEFAULT_HOST,
    hbm_fraction=HBM_STREAM_FRACTION,
    fill_latency_s=1.5e-06,  # a GPU without a clock in the table; else fill_cycles
    fill_cycles=HOPPER_FILL_CYCLES,
    matmul_latency_s=3e-06,
    vector_fraction=0.5,
    matmul_fraction=MATMUL_FRACTION,
    conv_layout_passes=2,
    row_bandwidth_bytes_per_s=5.66e+09,
    strided_access_rate_per_sm=6e9,
    attention_wave_s=10e-6,
    attention_wave_cycles=CUDA_FLASH_WAVE_CYCLES,
    rnn_step_s=4.97e-06,
    cudagraph_gap_s=3e-07,
    l2_bandwidth_bytes_per_s=L2_BANDWIDTH_BYTES_PER_S,
    l2_usable_fraction=0.5,
    per_architecture=PER_ARCHITECTURE,
    per_gpu=PER_GPU,
    source="fit: docs/calibration.md (benchmarks/calibrate.py) and docs/validation.md "
    "(profiler traces)",
)
