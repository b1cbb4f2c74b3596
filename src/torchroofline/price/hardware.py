"""The GPU table: dense datasheet peaks, memory bandwidth and cache sizes of the GPUs we model.

Every figure's datasheet or whitepaper is listed in docs/gpu_sources.md, with the rules below;
each entry's ``source`` names its documents in short.

Units, and how the datasheet units are converted:
- throughput in FLOP/s (INT8 in op/s): datasheet TFLOP/s (TOPS) x 1e12;
- memory bandwidth in bytes/s: datasheet GB/s x 1e9 (vendors use decimal units here);
- memory size in bytes: datasheet GB x 1e9 (the marketing figure; usable memory is a little less);
- L2 size in bytes: datasheet MB read as MiB, x 2**20 (caches are sized in binary units).

All tensor figures are **dense**: where a vendor prints only "with sparsity" numbers (H100, H200,
L4, B200) the table holds half of them. Where two sources give different values, the table
holds the *higher* peak and the *higher* bandwidth, because a lower bound built on a too-low
ceiling is one that real kernels beat.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from ..errors import UnknownGPUError
from . import kernelbench_gpus
from .gpu_spec import GPUSpec

_TERA = 1e12
_GIGA = 1e9
_MIB = 2**20


def _tera(**peaks: float) -> dict[str, float]:
    """Datasheet TFLOP/s (or TOPS) figures, keyed by precision, converted to FLOP/s (op/s)."""
    return {precision: value * _TERA for precision, value in peaks.items()}


def _l2_bandwidth(bytes_per_clock: int, clock_mhz: float) -> float:
    """An L2's peak bandwidth in bytes/s: the bytes it returns per clock at ``clock_mhz``."""
    return bytes_per_clock * clock_mhz * 1e6


#: Bytes per clock an SM takes from L2 at most, for NVIDIA parts whose L2 bandwidth is printed
#: nowhere: 64 B/clk per L2 slice (the A100 whitepaper's 5120 B/clk over its 80 slices) with no
#: more slices than SMs, so SMs x 64 B/clk is an upper bound on the L2's rate (unconfirmed).
_SM_L2_BYTES_PER_CLOCK = 64


def _sm_side_l2(sm_count: int, clock_mhz: float) -> float:
    """The L2 bandwidth bound of a part with no published figure: SMs x 64 B/clk x clock."""
    return _l2_bandwidth(sm_count * _SM_L2_BYTES_PER_CLOCK, clock_mhz)


_VENDOR_PREFIX = re.compile(r"^(?:(?:nvidia|amd|geforce|instinct|tesla)[\s_\-]+)+")
#: What a driver appends to a name without naming another part: "AMD Instinct MI300X VF" is an
#: SR-IOV virtual function, the whole GPU as a virtual machine sees it (rocm-smi, torch).
_DRIVER_SUFFIX = re.compile(r"[\s_\-]+vf$")
#: The model number in a name ("h100" in "NVIDIA H100 80GB HBM3", "mi300x" in "MI300X VF").
_MODEL = re.compile(r"[a-z]*\d+[a-z]*")


def _words(name: str) -> str:
    """A name in lower case without the vendor's words and the driver's suffix."""
    return _VENDOR_PREFIX.sub("", _DRIVER_SUFFIX.sub("", name.strip().lower()))


def _compact(name: str) -> str:
    """Lookup form of a GPU name: lower case, vendor words, a driver's " VF" and all spaces,
    dashes and underscores removed, so "NVIDIA GeForce RTX_4090", "rtx-4090" and "RTX4090" all
    match."""
    return re.sub(r"[\s_\-]+", "", _words(name))



# --- The built-in table (order = the order `torchroofline gpus` lists) ----------------------------
# Figures: the documents listed per GPU in docs/gpu_sources.md.

_H100_SOURCE = (
    "NVIDIA H100 datasheet (sparse figures halved); H100 architecture whitepaper "
    "(dense 494.7/989.4/1978.9, FP16 non-tensor 133.8)"
)

# Vector "fp16" is the packed-half2 non-tensor rate, where one is published (the rule of the whole
# table: where figures differ, the higher). Volta, Turing and Hopper run half2 at twice the FP32
# rate and GA100 at four times (the A100 whitepaper's comparison table prints V100 31.4 and A100
# 78; the Hopper whitepaper H100 SXM 133.8); GA102 and Ada whitepapers print FP16 non-tensor equal
# to FP32. Figures derived from those per-SM ratios rather than printed for the part are marked
# unconfirmed. B200 and the AMD parts have no published FP16 vector figure: their half-precision
# pointwise work is priced at the FP32 rate (see _VECTOR_RATES_BY_PRECISION).

# Base entries that other parts derive from (dataclasses.replace): a variant states only what
# differs from its base.

# H100 SXM5: datasheet prints TF32 989 / FP16 1979 / FP8 3958 "with sparsity"; the Hopper
# whitepaper gives the dense 494.7 / 989.4 / 1978.9 (132 SM x 4096 FLOP/clk x 1.83 GHz).
_H100_SXM = GPUSpec(
    name="H100 SXM",
    vendor="NVIDIA",
    architecture="Hopper",
    memory_bytes=int(80 * _GIGA),
    memory_bandwidth_bytes_per_s=3350 * _GIGA,
    l2_bytes=50 * _MIB,
    # 5120 B/clk (the A100's, as the Hopper table of doi:10.1016/j.ultsonch.2023.106546 gives:
    # 8986 GB/s at 1755 MHz) at the 1980 MHz boost clock; NVIDIA prints no figure
    l2_bandwidth_bytes_per_s=_l2_bandwidth(5120, 1980),
    sm_count=132,
    tensor_peak_flops_per_s=_tera(tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9, int8=1978.9),
    vector_peak_flops_per_s=_tera(fp64=33.5, fp32=66.9, fp16=133.8),
    # "H100 80GB HBM3": nvidia-smi and torch.cuda.get_device_name(); "H100-SXM5-80GB": the board
    aliases=("h100", "h100-sxm5", "h100-80gb-hbm3", "h100-sxm5-80gb"),
    source=_H100_SOURCE,
    boost_clock_mhz=1980,
    tensor_clock_mhz=1830,
    memory_clock_mhz=2619,  # HBM3 at 5.2 GT/s effective (the final H100 specification table)
    unconfirmed=("memory_clock_mhz", "l2_bandwidth_bytes_per_s"),
    host_link="PCIe 5.0 x16",
)

# A100: the datasheet prints "dense | sparse" pairs; the dense first number is used.
# FP16 non-tensor 78 from the A100 whitepaper. No FP8.
_A100_80GB = GPUSpec(
    name="A100 80GB",
    vendor="NVIDIA",
    architecture="Ampere",
    memory_bytes=int(80 * _GIGA),
    memory_bandwidth_bytes_per_s=2039 * _GIGA,
    l2_bytes=40 * _MIB,
    # A100 whitepaper: "L2 cache read bandwidth 5120 bytes/clk" (V100: 2048), at 1410 MHz
    l2_bandwidth_bytes_per_s=_l2_bandwidth(5120, 1410),
    sm_count=108,
    tensor_peak_flops_per_s=_tera(tf32=156, fp16=312, bf16=312, int8=624),
    vector_peak_flops_per_s=_tera(fp64=9.7, fp32=19.5, fp16=78),
    aliases=("a100", "a100-sxm", "a100-sxm4-80gb"),
    source="NVIDIA A100 datasheet (r4); NVIDIA A100 (GA100) architecture whitepaper",
    boost_clock_mhz=1410,  # 312 TFLOP/s = 108 SM x 2048 FLOP/clk x 1.41 GHz
    # HBM2e on a 5120-bit bus at twice the memory clock: 5120 / 8 B x 2 x 1593 MHz = 2039 GB/s
    memory_clock_mhz=1593,
    unconfirmed=("memory_clock_mhz",),
    host_link="PCIe 4.0 x16",
)

# V100 SXM2 32 GB: tensor cores do FP16 (mixed FP16/FP32) only; no BF16/TF32/INT8 tensor path.
_V100 = GPUSpec(
    name="V100",
    vendor="NVIDIA",
    architecture="Volta",
    memory_bytes=int(32 * _GIGA),
    memory_bandwidth_bytes_per_s=900 * _GIGA,
    l2_bytes=6 * _MIB,
    l2_bandwidth_bytes_per_s=_l2_bandwidth(2048, 1530),  # A100 whitepaper: V100 2048 B/clk
    sm_count=80,
    tensor_peak_flops_per_s=_tera(fp16=125),
    vector_peak_flops_per_s=_tera(fp64=7.8, fp32=15.7, fp16=31.4),
    # PCIe 32 GB: 14 FP32 / 112 tensor TFLOP/s at the same 900 GB/s; the SXM2's higher peaks kept
    aliases=("v100-sxm2", "v100-sxm2-32gb", "v100-pcie-32gb"),
    source=(
        "NVIDIA V100 datasheet / Volta architecture whitepaper (SXM2 32 GB); FP16 non-tensor "
        "31.4: NVIDIA A100 (GA100) architecture whitepaper, Table 1 (V100 column)"
    ),
    boost_clock_mhz=1530,
    host_link="PCIe 3.0 x16",
)

# MI300X: AMD prints dense and sparse separately; these are dense. FP32 163.4 is the vector
# (dual-issue) rate. L2 = 8 XCDs x 4 MB; the 256 MB Infinity Cache is not counted.
_MI300X = GPUSpec(
    name="MI300X",
    vendor="AMD",
    architecture="CDNA3",
    memory_bytes=int(192 * _GIGA),
    memory_bandwidth_bytes_per_s=5300 * _GIGA,
    l2_bytes=32 * _MIB,
    # 8 XCDs x 16 channels x 128 B/clk (ROCm Compute Profiler's L2 peak for MI300) at 2100 MHz
    l2_bandwidth_bytes_per_s=_l2_bandwidth(8 * 16 * 128, 2100),
    sm_count=304,
    tensor_peak_flops_per_s=_tera(
        tf32=653.7, fp16=1307.4, bf16=1307.4, fp8=2614.9, int8=2614.9
    ),
    vector_peak_flops_per_s=_tera(fp64=81.7, fp32=163.4),
    source="AMD Instinct MI300X data sheet; ROCm GPU specifications table (CUs, L2)",
    unconfirmed=("l2_bandwidth_bytes_per_s",),
    boost_clock_mhz=2100,
    host_link="PCIe 5.0 x16",
)

_CDNA2_SOURCE = (
    "ROCm GPU specifications table (CUs, 8 MB L2 per GCD); ROCm Compute Profiler (32 L2 channels, "
    "64 B/clk each on MI200)"
)

# MI210 (CDNA2, one GCD, 300 W): AMD prints FP64 22.6 vector / 45.3 matrix, FP32 22.6 vector /
# 45.3 packed and matrix, FP16/BF16 181.0 and INT8 181.0 TOPS dense; no TF32, FP8 or sparsity.
# FP32 here is the packed rate, which FP32 GEMMs reach on the matrix cores too (the higher
# figure, as for the MI300X's dual-issue 163.4). 104 CUs x 1024 FP16 FLOP/clk x 1.7 GHz = 181.0.
_MI210 = GPUSpec(
    name="MI210",
    vendor="AMD",
    architecture="CDNA2",
    memory_bytes=int(64 * _GIGA),
    memory_bandwidth_bytes_per_s=1638.4 * _GIGA,
    l2_bytes=8 * _MIB,
    # 32 channels x 64 B/clk (ROCm Compute Profiler's L2 peak for MI200) at 1700 MHz
    l2_bandwidth_bytes_per_s=_l2_bandwidth(32 * 64, 1700),
    sm_count=104,
    tensor_peak_flops_per_s=_tera(fp16=181.0, bf16=181.0, int8=181.0),
    vector_peak_flops_per_s=_tera(fp64=22.6, fp32=45.3),
    source="AMD Instinct MI210 data sheet; " + _CDNA2_SOURCE,
    unconfirmed=("l2_bandwidth_bytes_per_s",),
    boost_clock_mhz=1700,
)


# B200 (HGX, 1000 W): datasheet TF32 2.2 / FP16 4.5 / FP8 and FP6 9 / FP4 18 PF with
# sparsity -> dense 1.1 / 2.25 / 4.5 / 9; TF32 1.12 PF is also quoted (taken: higher).
# Per clock, FP8 and FP6 run at twice and FP4 at four times the FP16 rate (148 SMs x 8192
# FP16 FLOP/clk x the 1.86 GHz tensor clock = 2250 TFLOP/s). FP64 40 (later sheet 37) and
# FP32 80 (75 computed at 1.98 GHz) are unconfirmed, as is the L2: 126 MB measured by
# Chips and Cheese vs 65.5 MB in TechPowerUp's DB (taken: higher). Memory: the later HGX
# sheet's 180 GB per GPU (192 GB was announced).
_B200 = GPUSpec(
    name="B200",
    vendor="NVIDIA",
    architecture="Blackwell",
    memory_bytes=int(180 * _GIGA),
    memory_bandwidth_bytes_per_s=8000 * _GIGA,
    l2_bytes=126 * _MIB,
    # two dies, each with a GH100-class L2 of 5120 B/clk, at the 1980 MHz boost (unconfirmed)
    l2_bandwidth_bytes_per_s=_l2_bandwidth(2 * 5120, 1980),
    sm_count=148,
    tensor_peak_flops_per_s=_tera(
        tf32=1120, fp16=2250, bf16=2250, fp8=4500, fp6=4500, fp4=9000, int8=4500
    ),
    vector_peak_flops_per_s=_tera(fp64=40, fp32=80),
    aliases=("b200-hgx",),
    source=(
        "NVIDIA HGX B200 datasheet via glennklockwood.com (sparse figures halved); "
        "Chips and Cheese (148 SMs, 126 MB L2); hmc-tech.com (FP4, clocks)"
    ),
    unconfirmed=(
        "tensor.tf32",
        "vector.fp64",
        "vector.fp32",
        "l2_bytes",
        "l2_bandwidth_bytes_per_s",
        "boost_clock_mhz",
        "tensor_clock_mhz",
    ),
    boost_clock_mhz=1980,  # an nvidia-smi listing shows 1965 (taken: higher)
    tensor_clock_mhz=1860,
    host_link="PCIe 5.0 x16",
)

# B300 (HGX, Blackwell Ultra, 1100 W): dense FP4 14 PF (glennklockwood.com's table says
# 13.1; taken: higher), FP8 and FP6 4.5, FP16/BF16 2.25, TF32 1.125 PF, FP32 75, FP64 1.25
# TFLOP/s. INT8 is cut to 0.15 POPS dense (NVIDIA's Blackwell Ultra brief, as quoted by two
# sources); the 4.5 POPS in glennklockwood.com's table repeats the B200's row. 160 SMs.
# NVIDIA publishes no clock, so --clock-mhz needs a GPUSpec with boost_clock_mhz set.
_B300 = GPUSpec(
    name="B300",
    vendor="NVIDIA",
    architecture="Blackwell Ultra",
    memory_bytes=int(288 * _GIGA),
    memory_bandwidth_bytes_per_s=8000 * _GIGA,
    l2_bytes=126 * _MIB,
    l2_bandwidth_bytes_per_s=_l2_bandwidth(2 * 5120, 1980),  # as the B200's (no clock printed)
    sm_count=160,
    tensor_peak_flops_per_s=_tera(
        tf32=1125, fp16=2250, bf16=2250, fp8=4500, fp6=4500, fp4=14000, int8=150
    ),
    vector_peak_flops_per_s=_tera(fp64=1.25, fp32=75),
    aliases=("b300-hgx", "blackwell-ultra"),
    source=(
        "NVIDIA HGX B300 figures via glennklockwood.com, verda.com and datacrunch.io "
        "(Blackwell Ultra technical brief; dense)"
    ),
    unconfirmed=("l2_bytes", "l2_bandwidth_bytes_per_s"),
    host_link="PCIe 6.0 x16",
)


_BUILTIN: tuple[GPUSpec, ...] = (
    _H100_SXM,
    # H100 PCIe: datasheet 756/1513/3026 with sparsity, halved. Bandwidth: the datasheet says
    # 2.0 TB/s, some tables 2039 GB/s (unconfirmed); we take the higher, as for every bound.
    GPUSpec(
        name="H100 PCIe",
        vendor="NVIDIA",
        architecture="Hopper",
        memory_bytes=int(80 * _GIGA),
        memory_bandwidth_bytes_per_s=2039 * _GIGA,
        l2_bytes=50 * _MIB,
        l2_bandwidth_bytes_per_s=_l2_bandwidth(5120, 1755),  # as the SXM's, at 1755 MHz
        sm_count=114,
        tensor_peak_flops_per_s=_tera(tf32=378, fp16=756, bf16=756, fp8=1513, int8=1513),
        vector_peak_flops_per_s=_tera(fp64=25.6, fp32=51.2, fp16=102.4),
        aliases=("h100-pcie-80gb",),
        source=_H100_SOURCE
        + "; docs.nvidia.com H100 MIG guide (114 SMs, 50 MB L2); FP16 non-tensor 102.4 = 2 x FP32 "
        "(CUDA C++ Programming Guide, arithmetic-instruction throughput, cc 9.0: 256 FP16 vs 128 "
        "FP32 results/clock/SM)",
        unconfirmed=("memory_bandwidth_bytes_per_s", "vector.fp16", "tensor_clock_mhz",
                     "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=1755,  # 51.2 TFLOP/s FP32 = 114 SM x 256 FLOP/clk x 1.755 GHz
        memory_clock_mhz=1593,  # HBM2e at 3.2 GT/s effective
        tensor_clock_mhz=1620,  # derived: 756 TFLOP/s = 114 SM x 4096 FLOP/clk x 1.62 GHz
        host_link="PCIe 5.0 x16",
    ),
    # H100 NVL: the GH100 of the H100 SXM (132 SMs, 50 MB L2) with 94 GB HBM3 at 3.9 TB/s on a
    # PCIe card (NVIDIA H100 datasheet: 3.9 TB/s; 3938 GB/s = 6016 bits / 8 x 5.24 GT/s). The
    # datasheet's compute figures are lower (835 TF32 / 1671 FP16 sparse, 60 FP32 TFLOP/s at its
    # 350-400 W); the SXM's higher peaks are kept, so the bound holds at any power limit.
    replace(
        _H100_SXM,
        name="H100 NVL",
        memory_bytes=int(94 * _GIGA),
        memory_bandwidth_bytes_per_s=3938 * _GIGA,
        aliases=("h100-nvl-94gb",),
        source="NVIDIA H100 datasheet (H100 NVL: 94 GB, 3.9 TB/s); compute kept at the H100 SXM's: "
        + _H100_SOURCE,
        memory_clock_mhz=None,
        unconfirmed=("memory_bandwidth_bytes_per_s", "l2_bandwidth_bytes_per_s"),
    ),
    # H200: the same GH100 compute as H100 SXM; only memory differs (141 GB HBM3e, 4.8 TB/s).
    # L2 50 MB is inferred from the identical die.
    replace(
        _H100_SXM,
        name="H200",
        memory_bytes=int(141 * _GIGA),
        memory_bandwidth_bytes_per_s=4800 * _GIGA,
        aliases=("h200-sxm",),
        source="NVIDIA H200 datasheet (memory); compute as H100 SXM: " + _H100_SOURCE,
        memory_clock_mhz=None,  # HBM3e: no published memory clock
        unconfirmed=("l2_bandwidth_bytes_per_s",),
    ),
    # H20: a cut-down GH100 (78 SMs) for the Chinese market with 96 GB HBM3 at 4.0 TB/s. NVIDIA's
    # product brief prints dense 148 FP16/BF16, 74 TF32, 296 FP8/INT8, 44 FP32 and 1 FP64 TFLOP/s
    # (a quarter of the H100's tensor rate per SM). SMs and L2 from one source each.
    GPUSpec(
        name="H20",
        vendor="NVIDIA",
        architecture="Hopper",
        memory_bytes=int(96 * _GIGA),
        memory_bandwidth_bytes_per_s=4000 * _GIGA,
        l2_bytes=60 * _MIB,
        l2_bandwidth_bytes_per_s=_l2_bandwidth(5120, 1980),  # the H100 SXM's (no clock printed)
        sm_count=78,
        tensor_peak_flops_per_s=_tera(tf32=74, fp16=148, bf16=148, fp8=296, int8=296),
        vector_peak_flops_per_s=_tera(fp64=1, fp32=44),
        source="NVIDIA H20 product brief as quoted by willitrunai.com and zangshuxian.com",
        unconfirmed=("l2_bytes", "sm_count", "vector.fp64", "vector.fp32", "tensor.tf32",
                     "l2_bandwidth_bytes_per_s"),
        host_link="PCIe 5.0 x16",
    ),
    _B200,
    # GB200: one Blackwell GPU of a GB200 superchip (two GPUs and a Grace CPU), run at 1200 W.
    # NVIDIA's GB200 NVL72 figures per GPU (sparse halved): FP4 10, FP8/FP6 5, FP16 2.5, TF32
    # 1.25 PF, INT8 5 POPS, FP64 45, FP32 90 TFLOP/s; hmc-tech.com's superchip entry halved agrees
    # on the tensor figures but gives FP64 40 and FP32 80 (taken: higher). Tensor clock 2.06 GHz
    # (148 SM x 8192 FLOP/clk x 2.06 GHz = 2500 TFLOP/s FP16); L2 as the B200's (same die).
    replace(
        _B200,
        name="GB200",
        memory_bytes=int(192 * _GIGA),
        tensor_peak_flops_per_s=_tera(
            tf32=1250, fp16=2500, bf16=2500, fp8=5000, fp6=5000, fp4=10000, int8=5000
        ),
        vector_peak_flops_per_s=_tera(fp64=45, fp32=90),
        l2_bandwidth_bytes_per_s=_l2_bandwidth(2 * 5120, 2112),  # the B200's at 2112 MHz
        aliases=("gb200-nvl72",),
        source=(
            "NVIDIA GB200 NVL72 figures per GPU via glennklockwood.com (sparse halved); "
            "hmc-tech.com GB200 (superchip halved; clocks)"
        ),
        unconfirmed=(
            "vector.fp64",
            "vector.fp32",
            "l2_bytes",
            "l2_bandwidth_bytes_per_s",
            "boost_clock_mhz",
            "tensor_clock_mhz",
        ),
        boost_clock_mhz=2112,
        tensor_clock_mhz=2060,
        host_link="NVLink-C2C",
    ),
    _B300,
    # GB300: one Blackwell Ultra GPU of a GB300 NVL72 (1400 W). NVIDIA's rack figures per GPU:
    # FP4 1,080 PF dense / 72 = 15 PF; FP8/FP6 720 PF sparse / 72 / 2 = 5 PF; INT8 24 POPS
    # sparse -> 0.167 dense. FP16/BF16 2.5, TF32 1.25 PF and FP32 80 TFLOP/s from one source.
    # FP64 1.39 = the rack's 100 TFLOP/s / 72.
    replace(
        _B300,
        name="GB300",
        tensor_peak_flops_per_s=_tera(
            tf32=1250, fp16=2500, bf16=2500, fp8=5000, fp6=5000, fp4=15000, int8=167
        ),
        vector_peak_flops_per_s=_tera(fp64=1.39, fp32=80),
        aliases=("gb300-nvl72",),
        source=(
            "NVIDIA GB300 NVL72 figures per GPU via verda.com, vendordeep.com and "
            "glennklockwood.com (1.1 EF dense FP4 per rack)"
        ),
        unconfirmed=(
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "vector.fp64",
            "vector.fp32",
            "l2_bytes",
            "l2_bandwidth_bytes_per_s",
        ),
        host_link="NVLink-C2C",
    ),
    _A100_80GB,
    replace(
        _A100_80GB,
        name="A100 40GB",
        memory_bytes=int(40 * _GIGA),
        memory_bandwidth_bytes_per_s=1555 * _GIGA,
        # "A100-PCIE-40GB": the same 312 TFLOP/s and 1555 GB/s on a PCIe card
        aliases=("a100-sxm4-40gb", "a100-pcie-40gb", "a100-pg509-200"),
        memory_clock_mhz=1215,  # HBM2: 5120 / 8 B x 2 x 1215 MHz = 1555 GB/s
        unconfirmed=(),
    ),
    replace(
        _A100_80GB,
        name="A100 PCIe",
        memory_bandwidth_bytes_per_s=1935 * _GIGA,
        aliases=("a100-pcie-80gb", "a100-80gb-pcie"),  # the second as nvidia-smi prints it
        memory_clock_mhz=1512,  # 5120 / 8 B x 2 x 1512 MHz = 1935 GB/s
        source="NVIDIA A100 datasheet (r4, 80GB PCIe); NVIDIA A100 (GA100) whitepaper",
    ),
    # L40S: datasheet FP16/BF16 362.05 dense; TechPowerUp's calculation at the 2.52 GHz boost
    # gives 366.4 (taken: higher, for BF16 too, which runs at the same rate). Datacenter Ada runs
    # FP16 with FP32 accumulate at full rate. INT8 = FP8 rate (not printed on the L40S row).
    # L2: 96 MB vs 48 MB in other DBs (unconfirmed; taken: higher).
    GPUSpec(
        name="L40S",
        vendor="NVIDIA",
        architecture="Ada",
        memory_bytes=int(48 * _GIGA),
        memory_bandwidth_bytes_per_s=864 * _GIGA,
        l2_bytes=96 * _MIB,
        sm_count=142,
        l2_bandwidth_bytes_per_s=_sm_side_l2(142, 2520),
        tensor_peak_flops_per_s=_tera(tf32=183, fp16=366.4, bf16=366.4, fp8=733, int8=733),
        vector_peak_flops_per_s=_tera(fp64=1.43, fp32=91.6, fp16=91.6),
        source=(
            "NVIDIA L40S datasheet (dense column); TechPowerUp-derived DBs (FP64, L2, 366.4); "
            "FP16 non-tensor = FP32 rate on Ada (Ada whitepaper v2.02, Appendix A)"
        ),
        unconfirmed=("l2_bytes", "vector.fp16", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=2520,
        host_link="PCIe 4.0 x16",
    ),
    GPUSpec(
        name="L40",
        vendor="NVIDIA",
        architecture="Ada",
        memory_bytes=int(48 * _GIGA),
        memory_bandwidth_bytes_per_s=864 * _GIGA,
        l2_bytes=96 * _MIB,
        sm_count=142,
        l2_bandwidth_bytes_per_s=_sm_side_l2(142, 2490),
        tensor_peak_flops_per_s=_tera(tf32=90.5, fp16=181.05, bf16=181.05, fp8=362, int8=362),
        vector_peak_flops_per_s=_tera(fp64=1.41, fp32=90.5, fp16=90.5),
        source=(
            "NVIDIA L40 datasheet (dense column); topcpu.net (96 MB L2, FP64); FP16 non-tensor = "
            "FP32 rate on Ada (Ada whitepaper v2.02, Appendix A)"
        ),
        unconfirmed=("vector.fp16", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=2490,
        host_link="PCIe 4.0 x16",
    ),
    # L4: datasheet prints only sparse TF32 120 / FP16 242 / FP8 485 -> halved.
    # 30.3 TFLOP/s = 58 SM x 256 FLOP/clk x 2.04 GHz, hence 58 SMs (some DBs say 60).
    GPUSpec(
        name="L4",
        vendor="NVIDIA",
        architecture="Ada",
        memory_bytes=int(24 * _GIGA),
        memory_bandwidth_bytes_per_s=300 * _GIGA,
        l2_bytes=48 * _MIB,
        sm_count=58,
        l2_bandwidth_bytes_per_s=_sm_side_l2(58, 2040),
        tensor_peak_flops_per_s=_tera(tf32=60, fp16=121, bf16=121, fp8=242.5, int8=242.5),
        vector_peak_flops_per_s=_tera(fp64=0.47, fp32=30.3, fp16=30.3),
        source=(
            "NVIDIA L4 datasheet (sparse figures halved); Ada architecture whitepaper v2.01 "
            "(FP16 non-tensor = FP32 rate on Ada)"
        ),
        unconfirmed=("vector.fp16", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=2040,
        host_link="PCIe 4.0 x16",
    ),
    # T4 (Turing): no TF32/BF16/FP8; "65" is mixed FP16/FP32 at full rate.
    GPUSpec(
        name="T4",
        vendor="NVIDIA",
        architecture="Turing",
        memory_bytes=int(16 * _GIGA),
        memory_bandwidth_bytes_per_s=320 * _GIGA,
        l2_bytes=4 * _MIB,
        sm_count=40,
        l2_bandwidth_bytes_per_s=_sm_side_l2(40, 1590),
        tensor_peak_flops_per_s=_tera(fp16=65, int8=130),
        vector_peak_flops_per_s=_tera(fp64=0.25, fp32=8.1, fp16=16.2),
        source=(
            "NVIDIA T4 datasheet; deviceQuery (40 SMs, 4 MB L2); FP16 non-tensor 16.2 = 2 x FP32 "
            "(CUDA C++ Programming Guide, arithmetic-instruction throughput, cc 7.5: 128 FP16 vs "
            "64 FP32 results/clock/SM; Turing whitepaper: packed FP16 at twice the FP32 rate)"
        ),
        unconfirmed=("vector.fp16", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=1590,
        host_link="PCIe 3.0 x16",
    ),
    # A10G: no NVIDIA datasheet exists; only memory (24 GB, 600 GB/s, 6 MB L2) is confirmed.
    # The rest are the commonly quoted A10G figures (80 SMs at 1.71 GHz, GeForce-style half-rate
    # FP32 accumulate: 80 x 512 x 1.71 GHz = 70). Tables that list 31.2 / 125 / 250 copy the A10.
    GPUSpec(
        name="A10G",
        vendor="NVIDIA",
        architecture="Ampere",
        memory_bytes=int(24 * _GIGA),
        memory_bandwidth_bytes_per_s=600 * _GIGA,
        l2_bytes=6 * _MIB,
        sm_count=80,
        l2_bandwidth_bytes_per_s=_sm_side_l2(80, 1710),
        tensor_peak_flops_per_s=_tera(tf32=35, fp16=70, bf16=70, int8=280),
        vector_peak_flops_per_s=_tera(fp64=0.55, fp32=35, fp16=35),
        fp16_accumulate_fp16_flops_per_s=140 * _TERA,
        source="baseten.co A10 vs A10G comparison; AWS GPU table (no NVIDIA datasheet exists)",
        unconfirmed=(
            "l2_bandwidth_bytes_per_s",
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "tensor.int8",
            "vector.fp64",
            "vector.fp32",
            "vector.fp16",
            "fp16_accumulate_fp16_flops_per_s",
            "sm_count",
            "boost_clock_mhz",
        ),
        boost_clock_mhz=1710,
        host_link="PCIe 4.0 x16",
    ),
    # RTX 5090 (GB202, 170 SMs at 2407 MHz): NVIDIA's "3352 AI TOPS" is FP4 with sparsity ->
    # dense 1676 = 170 x 4096 FLOP/clk x 2.407 GHz. GeForce runs FP16 with FP32 accumulate at half
    # the FP16-accumulate rate, as on Ada: FP16-accumulate 419.2 (838.4 sparse in two sources),
    # FP32-accumulate 209.6; FP8 with FP32 accumulate 419.2 (the cuBLASLt default, as for the
    # 4090); TF32 104.8 and INT8 838.4 derived from the same per-SM rates. L2 96 MB.
    GPUSpec(
        name="RTX 5090",
        vendor="NVIDIA",
        architecture="Blackwell",
        memory_bytes=int(32 * _GIGA),
        memory_bandwidth_bytes_per_s=1792 * _GIGA,
        l2_bytes=96 * _MIB,
        sm_count=170,
        l2_bandwidth_bytes_per_s=_sm_side_l2(170, 2407),
        tensor_peak_flops_per_s=_tera(
            tf32=104.8, fp16=209.6, bf16=209.6, fp8=419.2, fp4=1676, int8=838.4
        ),
        vector_peak_flops_per_s=_tera(fp64=1.64, fp32=104.8, fp16=104.8),
        fp16_accumulate_fp16_flops_per_s=419.2 * _TERA,
        aliases=("5090", "rtx-5090"),
        source=(
            "NVIDIA GeForce RTX 5090 specifications (3352 AI TOPS, 104.8 TFLOP/s, 1792 GB/s) as "
            "printed by pocketmags.com and spheron.network; RTX Blackwell per-SM rates"
        ),
        unconfirmed=(
            "l2_bandwidth_bytes_per_s",
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "tensor.fp8",
            "tensor.int8",
            "vector.fp64",
            "vector.fp16",
        ),
        boost_clock_mhz=2407,
        host_link="PCIe 5.0 x16",
    ),
    # RTX PRO 6000 Blackwell (workstation, 600 W; GB202, 188 SMs at 2617 MHz): NVIDIA prints
    # 125 TFLOP/s FP32 and 4000 AI TOPS (FP4, sparse); per-SM rates at the boost clock give
    # 125.95 and 2 x 2015.2 (taken: higher). Professional parts run FP32 accumulate at full rate
    # (as hmc-tech.com lists for the RTX PRO 4000), so FP16 503.8, FP8 1007.6, TF32 251.9.
    GPUSpec(
        name="RTX PRO 6000",
        vendor="NVIDIA",
        architecture="Blackwell",
        memory_bytes=int(96 * _GIGA),
        memory_bandwidth_bytes_per_s=1792 * _GIGA,
        l2_bytes=128 * _MIB,
        sm_count=188,
        l2_bandwidth_bytes_per_s=_sm_side_l2(188, 2617),
        tensor_peak_flops_per_s=_tera(
            tf32=251.9, fp16=503.8, bf16=503.8, fp8=1007.6, fp4=2015.2, int8=1007.6
        ),
        vector_peak_flops_per_s=_tera(fp64=1.97, fp32=125.95, fp16=125.95),
        aliases=("rtx-pro-6000-blackwell", "rtx-pro-6000-blackwell-workstation"),
        source=(
            "NVIDIA RTX PRO 6000 Blackwell announcement (188 SMs, 125 TFLOP/s, 4000 AI TOPS, "
            "128 MB L2, 96 GB at 1792 GB/s) as reported by topcpu.net and gpu.name; "
            "cputronic.com (2617 MHz)"
        ),
        unconfirmed=(
            "l2_bandwidth_bytes_per_s",
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "tensor.fp8",
            "tensor.int8",
            "vector.fp64",
            "vector.fp16",
            "boost_clock_mhz",
        ),
        boost_clock_mhz=2617,
        host_link="PCIe 5.0 x16",
    ),
    # RTX 4090: Ada whitepaper v2.02 Appendix A. FP16/BF16 with FP32 accumulate 165.2 (FP16
    # accumulate 330.3); FP8 330.3 is the FP32-accumulate row (cuBLASLt FP8 GEMMs accumulate in
    # FP32; the FP16-accumulate row is 660.6). L2 73,728 KB = 72 MiB.
    GPUSpec(
        name="RTX 4090",
        vendor="NVIDIA",
        architecture="Ada",
        memory_bytes=int(24 * _GIGA),
        memory_bandwidth_bytes_per_s=1008 * _GIGA,
        l2_bytes=72 * _MIB,
        sm_count=128,
        l2_bandwidth_bytes_per_s=_sm_side_l2(128, 2520),
        tensor_peak_flops_per_s=_tera(tf32=82.6, fp16=165.2, bf16=165.2, fp8=330.3, int8=660.6),
        vector_peak_flops_per_s=_tera(fp64=1.29, fp32=82.6, fp16=82.6),
        fp16_accumulate_fp16_flops_per_s=330.3 * _TERA,
        aliases=("4090", "rtx-4090"),
        source="NVIDIA Ada GPU architecture whitepaper v2.02, Appendix A",
        unconfirmed=("vector.fp16", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=2520,
        host_link="PCIe 4.0 x16",
    ),
    # RTX 4080: tensor figures derived as 76 SM x 2.505 GHz x {256, 512, 1024, 2048} FLOP/clk/SM
    # (TF32, FP16 FP32-acc, FP16 FP16-acc, INT8), matching the whitepaper's Ada ratios; FP8 is its
    # FP32-accumulate row (194.9), as for the 4090. FP32 48.74 is confirmed by several DBs.
    GPUSpec(
        name="RTX 4080",
        vendor="NVIDIA",
        architecture="Ada",
        memory_bytes=int(16 * _GIGA),
        memory_bandwidth_bytes_per_s=716.8 * _GIGA,
        l2_bytes=64 * _MIB,
        sm_count=76,
        l2_bandwidth_bytes_per_s=_sm_side_l2(76, 2505),
        tensor_peak_flops_per_s=_tera(tf32=48.74, fp16=97.5, bf16=97.5, fp8=194.9, int8=389.9),
        vector_peak_flops_per_s=_tera(fp64=0.76, fp32=48.74, fp16=48.74),
        fp16_accumulate_fp16_flops_per_s=194.9 * _TERA,
        aliases=("4080", "rtx-4080"),
        source="Ada whitepaper v2.02 per-SM rates x 76 SMs x 2.505 GHz; cputronic.com (FP32, L2)",
        unconfirmed=(
            "l2_bandwidth_bytes_per_s",
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "tensor.fp8",
            "tensor.int8",
            "vector.fp16",
            "fp16_accumulate_fp16_flops_per_s",
        ),
        boost_clock_mhz=2505,
        host_link="PCIe 4.0 x16",
    ),
    # RTX 3090: GA102 whitepaper Appendix A (FP16 FP32-acc 71, FP16-acc 142, INT8 284, TF32 35.6).
    GPUSpec(
        name="RTX 3090",
        vendor="NVIDIA",
        architecture="Ampere",
        memory_bytes=int(24 * _GIGA),
        memory_bandwidth_bytes_per_s=936 * _GIGA,
        l2_bytes=6 * _MIB,
        sm_count=82,
        l2_bandwidth_bytes_per_s=_sm_side_l2(82, 1695),
        tensor_peak_flops_per_s=_tera(tf32=35.6, fp16=71, bf16=71, int8=284),
        vector_peak_flops_per_s=_tera(fp64=0.56, fp32=35.6, fp16=35.6),
        fp16_accumulate_fp16_flops_per_s=142 * _TERA,
        aliases=("3090", "rtx-3090"),
        source="NVIDIA Ampere GA102 architecture whitepaper v2, Appendix A",
        unconfirmed=("vector.fp16", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=1695,
        host_link="PCIe 4.0 x16",
    ),
    # RTX 3080 (10 GB): INT8 238 confirmed twice; the other tensor figures are derived
    # (68 SM x 1.71 GHz x per-SM rates).
    GPUSpec(
        name="RTX 3080",
        vendor="NVIDIA",
        architecture="Ampere",
        memory_bytes=int(10 * _GIGA),
        memory_bandwidth_bytes_per_s=760 * _GIGA,
        l2_bytes=5 * _MIB,
        sm_count=68,
        l2_bandwidth_bytes_per_s=_sm_side_l2(68, 1710),
        tensor_peak_flops_per_s=_tera(tf32=29.8, fp16=59.5, bf16=59.5, int8=238),
        vector_peak_flops_per_s=_tera(fp64=0.47, fp32=29.8, fp16=29.8),
        fp16_accumulate_fp16_flops_per_s=119 * _TERA,
        aliases=("3080", "rtx-3080"),
        source="NVIDIA GA102 whitepaper v2 (main table); KPU-Simulator RTX 30 table (INT8, BW)",
        unconfirmed=(
            "l2_bandwidth_bytes_per_s",
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "vector.fp16",
            "fp16_accumulate_fp16_flops_per_s",
        ),
        boost_clock_mhz=1710,
        host_link="PCIe 4.0 x16",
    ),
    _V100,
    # V100 16 GB (SXM2 and PCIe): the V100's GV100 with half the HBM2, at the same 900 GB/s.
    replace(_V100, name="V100 16GB", memory_bytes=int(16 * _GIGA),
            aliases=("v100-sxm2-16gb", "v100-pcie-16gb")),
    _MI300X,
    # MI325X: the same CDNA3 compute as MI300X with 256 GB at 6 TB/s.
    replace(
        _MI300X,
        name="MI325X",
        memory_bytes=int(256 * _GIGA),
        memory_bandwidth_bytes_per_s=6000 * _GIGA,
        source="AMD Instinct MI325X specifications; ROCm GPU specifications table",
    ),
    _MI210,
    # MI250X and MI250: two CDNA2 dies (GCDs) on one module, which ROCm and torch show as two
    # devices; an entry is one GCD, half the data sheet's package figures (MI250X: 220 CUs,
    # 383 FP16 / 95.7 packed FP32 / 47.9 FP64 TFLOP/s, 128 GB at 3276.8 GB/s; MI250: 208 CUs,
    # 362.1 / 90.5 / 45.3). One MI250 GCD is an MI210 (104 CUs at 1.7 GHz).
    replace(
        _MI210,
        name="MI250X",
        sm_count=110,
        tensor_peak_flops_per_s=_tera(fp16=191.5, bf16=191.5, int8=191.5),
        vector_peak_flops_per_s=_tera(fp64=23.95, fp32=47.85),
        # rocm-smi and torch name a GCD of either part "AMD Instinct MI250X/MI250": the MI250X's
        # higher peaks keep the bound a bound on both
        aliases=("mi250x/mi250", "mi250x-gcd"),
        source="AMD Instinct MI250X data sheet (package figures halved: one GCD); " + _CDNA2_SOURCE,
    ),
    replace(
        _MI210,
        name="MI250",
        aliases=("mi250-gcd",),
        source="AMD Instinct MI250 data sheet (package figures halved: one GCD); " + _CDNA2_SOURCE,
    ),
    # MI350X (CDNA4): no TF32 in hardware. FP16/BF16: AMD quotes 2307 (~2.3 PF), PyTorch's
    # device table 2309.6 (taken: higher, for both, which run at the same rate). MXFP6 and MXFP4
    # run at twice the FP8 rate (16384 FLOP/clk/CU): 256 x 16384 x 2.2 GHz = 9228 (AMD: 9.2 PF).
    GPUSpec(
        name="MI350X",
        vendor="AMD",
        architecture="CDNA4",
        memory_bytes=int(288 * _GIGA),
        memory_bandwidth_bytes_per_s=8000 * _GIGA,
        l2_bytes=32 * _MIB,
        sm_count=256,
        tensor_peak_flops_per_s=_tera(
            fp16=2309.6, bf16=2309.6, fp8=4614, fp6=9228, fp4=9228, int8=4614
        ),
        vector_peak_flops_per_s=_tera(fp64=72.1, fp32=144.2),
        l2_bandwidth_bytes_per_s=_l2_bandwidth(8 * 16 * 128, 2200),  # as the MI300X's, 2.2 GHz
        source="AMD Instinct MI350X brochure; torch/_inductor/analysis/device_info.py; ROCm table",
        unconfirmed=("tensor.fp6", "tensor.fp4", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=2200,
        host_link="PCIe 5.0 x16",
    ),
    # MI355X (CDNA4): FP8 = 256 CU x 8192 FLOP/clk x 2.4 GHz = 5033 (AMD rounds to 5.0 PF);
    # MXFP6 and MXFP4 twice that, 10066 (AMD: 10 PF).
    GPUSpec(
        name="MI355X",
        vendor="AMD",
        architecture="CDNA4",
        memory_bytes=int(288 * _GIGA),
        memory_bandwidth_bytes_per_s=8000 * _GIGA,
        l2_bytes=32 * _MIB,
        sm_count=256,
        tensor_peak_flops_per_s=_tera(
            fp16=2516.6, bf16=2516.6, fp8=5033, fp6=10066, fp4=10066, int8=5033
        ),
        vector_peak_flops_per_s=_tera(fp64=78.6, fp32=157.3),
        l2_bandwidth_bytes_per_s=_l2_bandwidth(8 * 16 * 128, 2400),  # as the MI300X's, 2.4 GHz
        source="AMD CDNA 4 whitepaper; ROCm GPU specifications table; svethardware.cz (FP32)",
        unconfirmed=("tensor.fp6", "l2_bandwidth_bytes_per_s"),
        boost_clock_mhz=2400,
        host_link="PCIe 5.0 x16",
    ),
)


# --- Lookup --------------------------------------------------------------------------------------


def _names(spec: GPUSpec) -> tuple[str, ...]:
    """Every name a GPU answers to: key, display name and aliases."""
    return (spec.key, spec.name, *spec.aliases)


def list_gpus() -> list[GPUSpec]:
    """All GPUs: the built-in table in order, then KernelBench's entries that the built-in table
    does not already know under any name (where both exist, the built-in entry wins)."""
    return list(_all_gpus())


@functools.cache
def _all_gpus() -> tuple[GPUSpec, ...]:
    known = {_compact(name) for spec in _BUILTIN for name in _names(spec)}
    extra = [
        spec
        for spec in kernelbench_gpus.load_kernelbench_gpus().values()
        if not known & {_compact(spec.name), _compact(spec.key)}
    ]
    return (*_BUILTIN, *extra)


@functools.cache
def _index() -> Mapping[str, GPUSpec]:
    """Every lookup form of every name (see :func:`_compact`) → its GPU, built once."""
    index: dict[str, GPUSpec] = {}
    for spec in _all_gpus():
        for known in _names(spec):
            index.setdefault(_compact(known), spec)
    return MappingProxyType(index)


def get_gpu(name: str | GPUSpec) -> GPUSpec:
    """The GPU called ``name`` (key, display name or alias; case, spaces, dashes, underscores and
    a leading "NVIDIA"/"AMD"/"GeForce"/"Instinct" are ignored). A GPUSpec is returned as is.

    Raises UnknownGPUError, naming the closest known names, when there is no such GPU.
    """
    if isinstance(name, GPUSpec):
        return name
    if not isinstance(name, str):  # it raised "'NoneType' object has no attribute 'strip'"
        raise UnknownGPUError(f"gpu must be a GPU name such as 'h100-sxm' or a GPUSpec, got "
                              f"{name!r} (run 'torchroofline gpus' for the list)")
    index = _index()
    spec = index.get(_compact(name))
    if spec is not None:
        return spec
    keys = _closest_keys(name, index)
    hint = f"; closest: {', '.join(keys)}" if keys else ""
    raise UnknownGPUError(f"unknown GPU {name!r}{hint} (run 'torchroofline gpus' for the list)")


def _closest_keys(name: str, index: Mapping[str, GPUSpec], count: int = 3) -> list[str]:
    """The GPUs to suggest for an unknown name: first those that share its model number, so
    "NVIDIA H100 80GB HBX" suggests the H100s, not the "A100 80GB" its other words resemble;
    then the closest spellings."""
    model = _MODEL.search(_words(name))
    same_model = [
        spec.key for spec in _all_gpus()
        if model and any(model.group() in _compact(known) for known in _names(spec))
    ]
    close = difflib.get_close_matches(_compact(name), index, n=len(index), cutoff=0.5)
    return list(dict.fromkeys([*same_model, *(index[match].key for match in close)]))[:count]


#: Words of a driver's GPU name that say whose part it is ("AMD Radeon Graphics", as ROCm names a
#: GPU it has no marketing name for).
_VENDOR_WORDS = {"nvidia": "NVIDIA", "geforce": "NVIDIA", "tesla": "NVIDIA", "quadro": "NVIDIA",
                 "amd": "AMD", "radeon": "AMD", "instinct": "AMD"}


def closest_gpu(name: str, sm_count: int | None = None,
                memory_bytes: int | None = None) -> GPUSpec | None:
    """The table's part nearest a GPU it does not know by ``name`` (a driver's board name such
    as "NVIDIA A100-PG509-200", or ROCm's "AMD Radeon Graphics"): of the vendor's parts, those
    that share its model number if any do, and of these the one whose SM (CU) count and memory
    size (bytes) are nearest the device's. None when the name gives neither a vendor nor a
    known model number, or nothing but the vendor is known."""
    vendors = {_VENDOR_WORDS[w] for w in re.findall(r"[a-z]+", name.lower()) if w in _VENDOR_WORDS}
    candidates = [spec for spec in _all_gpus() if not vendors or spec.vendor in vendors]
    model = _MODEL.search(_words(name))
    same_model = [spec for spec in candidates
                  if model and any(model.group() in _compact(known) for known in _names(spec))]
    if not same_model and not (vendors and (sm_count or memory_bytes)):
        return None

    def distance(spec: GPUSpec) -> float:
        # relative SM-count gap plus the memory sizes' log-ratio: 0 for the same SMs and memory
        sms = abs(spec.sm_count - sm_count) / sm_count if sm_count else 0.0
        memory = (abs(math.log(spec.memory_bytes / memory_bytes))
                  if memory_bytes and spec.memory_bytes else 0.0)
        return sms + memory

    return min(same_model or candidates, key=distance)


def choice_note(name: str | GPUSpec) -> str | None:
    """One line naming the part a short name picks when other GPUs answer to longer forms of it
    ("a100" is the A100 80GB; "a100-40gb" and "a100-pcie" are others); None for an exact key or
    display name, a GPUSpec, or a name nothing else shares."""
    if isinstance(name, GPUSpec):
        return None
    spec = get_gpu(name)
    wanted = _compact(name)
    if wanted in (_compact(spec.key), _compact(spec.name)):
        return None
    others = [
        other.key
        for other in _all_gpus()
        if other is not spec and any(_compact(n).startswith(wanted) for n in _names(other))
    ]
    if not others:
        return None
    return (
        f"--gpu {name} means the {spec.name} ({spec.key}: {spec.memory_bytes / _GIGA:.0f} GB, "
        f"{spec.memory_bandwidth_bytes_per_s / _GIGA:.0f} GB/s); pass "
        f"{' or '.join(others)} for the other part{'s' if len(others) > 1 else ''}"
    )
