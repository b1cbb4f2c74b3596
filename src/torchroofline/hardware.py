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
import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from . import kernelbench_gpus
from .errors import UnknownGPUError
from .gpu_spec import GPUSpec

_TERA = 1e12
_GIGA = 1e9
_MIB = 2**20


def _tera(**peaks: float) -> dict[str, float]:
    """Datasheet TFLOP/s (or TOPS) figures, keyed by precision, converted to FLOP/s (op/s)."""
    return {precision: value * _TERA for precision, value in peaks.items()}


_VENDOR_PREFIX = re.compile(r"^(?:(?:nvidia|amd|geforce|instinct|tesla)[\s_\-]+)+")


def _compact(name: str) -> str:
    """Lookup form of a GPU name: lower case, vendor words and all spaces, dashes and
    underscores removed, so "NVIDIA GeForce RTX_4090", "rtx-4090" and "RTX4090" all match."""
    return re.sub(r"[\s_\-]+", "", _VENDOR_PREFIX.sub("", name.strip().lower()))



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
    sm_count=132,
    tensor_peak_flops_per_s=_tera(tf32=494.7, fp16=989.4, bf16=989.4, fp8=1978.9, int8=1978.9),
    vector_peak_flops_per_s=_tera(fp64=33.5, fp32=66.9, fp16=133.8),
    aliases=("h100", "h100-sxm5"),
    source=_H100_SOURCE,
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
    sm_count=108,
    tensor_peak_flops_per_s=_tera(tf32=156, fp16=312, bf16=312, int8=624),
    vector_peak_flops_per_s=_tera(fp64=9.7, fp32=19.5, fp16=78),
    aliases=("a100", "a100-sxm", "a100-sxm4-80gb"),
    source="NVIDIA A100 datasheet (r4); NVIDIA A100 (GA100) architecture whitepaper",
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
    sm_count=304,
    tensor_peak_flops_per_s=_tera(
        tf32=653.7, fp16=1307.4, bf16=1307.4, fp8=2614.9, int8=2614.9
    ),
    vector_peak_flops_per_s=_tera(fp64=81.7, fp32=163.4),
    source="AMD Instinct MI300X data sheet; ROCm GPU specifications table (CUs, L2)",
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
        sm_count=114,
        tensor_peak_flops_per_s=_tera(tf32=378, fp16=756, bf16=756, fp8=1513, int8=1513),
        vector_peak_flops_per_s=_tera(fp64=25.6, fp32=51.2, fp16=102.4),
        aliases=("h100-pcie-80gb",),
        source=_H100_SOURCE
        + "; docs.nvidia.com H100 MIG guide (114 SMs, 50 MB L2); FP16 non-tensor 102.4 = 2 x FP32 "
        "(CUDA C++ Programming Guide, arithmetic-instruction throughput, cc 9.0: 256 FP16 vs 128 "
        "FP32 results/clock/SM)",
        unconfirmed=("memory_bandwidth_bytes_per_s", "vector.fp16"),
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
    ),
    # B200 (HGX, 1000 W): datasheet TF32 2.2 / FP16 4.5 / FP8 9 PF with sparsity -> dense
    # 1.1 / 2.25 / 4.5; TF32 1.12 PF is also quoted (taken: higher). FP64 40 (later sheet 37) and
    # FP32 80 (75 computed at 1.98 GHz) are unconfirmed, as is the L2: 126 MB measured by
    # Chips and Cheese vs 65.5 MB in TechPowerUp's DB (taken: higher). Memory: the later HGX
    # sheet's 180 GB per GPU (192 GB was announced).
    GPUSpec(
        name="B200",
        vendor="NVIDIA",
        architecture="Blackwell",
        memory_bytes=int(180 * _GIGA),
        memory_bandwidth_bytes_per_s=8000 * _GIGA,
        l2_bytes=126 * _MIB,
        sm_count=148,
        tensor_peak_flops_per_s=_tera(tf32=1120, fp16=2250, bf16=2250, fp8=4500, int8=4500),
        vector_peak_flops_per_s=_tera(fp64=40, fp32=80),
        aliases=("b200-hgx",),
        source=(
            "NVIDIA HGX B200 datasheet via glennklockwood.com (sparse figures halved); "
            "Chips and Cheese (148 SMs, 126 MB L2)"
        ),
        unconfirmed=("tensor.tf32", "vector.fp64", "vector.fp32", "l2_bytes"),
    ),
    _A100_80GB,
    replace(
        _A100_80GB,
        name="A100 40GB",
        memory_bytes=int(40 * _GIGA),
        memory_bandwidth_bytes_per_s=1555 * _GIGA,
        aliases=("a100-sxm4-40gb",),
    ),
    replace(
        _A100_80GB,
        name="A100 PCIe",
        memory_bandwidth_bytes_per_s=1935 * _GIGA,
        aliases=("a100-pcie-80gb",),
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
        tensor_peak_flops_per_s=_tera(tf32=183, fp16=366.4, bf16=366.4, fp8=733, int8=733),
        vector_peak_flops_per_s=_tera(fp64=1.43, fp32=91.6, fp16=91.6),
        source=(
            "NVIDIA L40S datasheet (dense column); TechPowerUp-derived DBs (FP64, L2, 366.4); "
            "FP16 non-tensor = FP32 rate on Ada (Ada whitepaper v2.02, Appendix A)"
        ),
        unconfirmed=("l2_bytes", "vector.fp16"),
    ),
    GPUSpec(
        name="L40",
        vendor="NVIDIA",
        architecture="Ada",
        memory_bytes=int(48 * _GIGA),
        memory_bandwidth_bytes_per_s=864 * _GIGA,
        l2_bytes=96 * _MIB,
        sm_count=142,
        tensor_peak_flops_per_s=_tera(tf32=90.5, fp16=181.05, bf16=181.05, fp8=362, int8=362),
        vector_peak_flops_per_s=_tera(fp64=1.41, fp32=90.5, fp16=90.5),
        source=(
            "NVIDIA L40 datasheet (dense column); topcpu.net (96 MB L2, FP64); FP16 non-tensor = "
            "FP32 rate on Ada (Ada whitepaper v2.02, Appendix A)"
        ),
        unconfirmed=("vector.fp16",),
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
        tensor_peak_flops_per_s=_tera(tf32=60, fp16=121, bf16=121, fp8=242.5, int8=242.5),
        vector_peak_flops_per_s=_tera(fp64=0.47, fp32=30.3, fp16=30.3),
        source=(
            "NVIDIA L4 datasheet (sparse figures halved); Ada architecture whitepaper v2.01 "
            "(FP16 non-tensor = FP32 rate on Ada)"
        ),
        unconfirmed=("vector.fp16",),
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
        tensor_peak_flops_per_s=_tera(fp16=65, int8=130),
        vector_peak_flops_per_s=_tera(fp64=0.25, fp32=8.1, fp16=16.2),
        source=(
            "NVIDIA T4 datasheet; deviceQuery (40 SMs, 4 MB L2); FP16 non-tensor 16.2 = 2 x FP32 "
            "(CUDA C++ Programming Guide, arithmetic-instruction throughput, cc 7.5: 128 FP16 vs "
            "64 FP32 results/clock/SM; Turing whitepaper: packed FP16 at twice the FP32 rate)"
        ),
        unconfirmed=("vector.fp16",),
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
        tensor_peak_flops_per_s=_tera(tf32=35, fp16=70, bf16=70, int8=280),
        vector_peak_flops_per_s=_tera(fp64=0.55, fp32=35, fp16=35),
        fp16_accumulate_fp16_flops_per_s=140 * _TERA,
        source="baseten.co A10 vs A10G comparison; AWS GPU table (no NVIDIA datasheet exists)",
        unconfirmed=(
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "tensor.int8",
            "vector.fp64",
            "vector.fp32",
            "vector.fp16",
            "fp16_accumulate_fp16_flops_per_s",
            "sm_count",
        ),
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
        tensor_peak_flops_per_s=_tera(tf32=82.6, fp16=165.2, bf16=165.2, fp8=330.3, int8=660.6),
        vector_peak_flops_per_s=_tera(fp64=1.29, fp32=82.6, fp16=82.6),
        fp16_accumulate_fp16_flops_per_s=330.3 * _TERA,
        aliases=("4090", "rtx-4090"),
        source="NVIDIA Ada GPU architecture whitepaper v2.02, Appendix A",
        unconfirmed=("vector.fp16",),
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
        tensor_peak_flops_per_s=_tera(tf32=48.74, fp16=97.5, bf16=97.5, fp8=194.9, int8=389.9),
        vector_peak_flops_per_s=_tera(fp64=0.76, fp32=48.74, fp16=48.74),
        fp16_accumulate_fp16_flops_per_s=194.9 * _TERA,
        aliases=("4080", "rtx-4080"),
        source="Ada whitepaper v2.02 per-SM rates x 76 SMs x 2.505 GHz; cputronic.com (FP32, L2)",
        unconfirmed=(
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "tensor.fp8",
            "tensor.int8",
            "vector.fp16",
            "fp16_accumulate_fp16_flops_per_s",
        ),
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
        tensor_peak_flops_per_s=_tera(tf32=35.6, fp16=71, bf16=71, int8=284),
        vector_peak_flops_per_s=_tera(fp64=0.56, fp32=35.6, fp16=35.6),
        fp16_accumulate_fp16_flops_per_s=142 * _TERA,
        aliases=("3090", "rtx-3090"),
        source="NVIDIA Ampere GA102 architecture whitepaper v2, Appendix A",
        unconfirmed=("vector.fp16",),
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
        tensor_peak_flops_per_s=_tera(tf32=29.8, fp16=59.5, bf16=59.5, int8=238),
        vector_peak_flops_per_s=_tera(fp64=0.47, fp32=29.8, fp16=29.8),
        fp16_accumulate_fp16_flops_per_s=119 * _TERA,
        aliases=("3080", "rtx-3080"),
        source="NVIDIA GA102 whitepaper v2 (main table); KPU-Simulator RTX 30 table (INT8, BW)",
        unconfirmed=(
            "tensor.tf32",
            "tensor.fp16",
            "tensor.bf16",
            "vector.fp16",
            "fp16_accumulate_fp16_flops_per_s",
        ),
    ),
    # V100 SXM2 32 GB: tensor cores do FP16 (mixed FP16/FP32) only; no BF16/TF32/INT8 tensor path.
    GPUSpec(
        name="V100",
        vendor="NVIDIA",
        architecture="Volta",
        memory_bytes=int(32 * _GIGA),
        memory_bandwidth_bytes_per_s=900 * _GIGA,
        l2_bytes=6 * _MIB,
        sm_count=80,
        tensor_peak_flops_per_s=_tera(fp16=125),
        vector_peak_flops_per_s=_tera(fp64=7.8, fp32=15.7, fp16=31.4),
        aliases=("v100-sxm2", "v100-sxm2-32gb"),
        source=(
            "NVIDIA V100 datasheet / Volta architecture whitepaper (SXM2 32 GB); FP16 non-tensor "
            "31.4: NVIDIA A100 (GA100) architecture whitepaper, Table 1 (V100 column)"
        ),
    ),
    _MI300X,
    # MI325X: the same CDNA3 compute as MI300X with 256 GB at 6 TB/s.
    replace(
        _MI300X,
        name="MI325X",
        memory_bytes=int(256 * _GIGA),
        memory_bandwidth_bytes_per_s=6000 * _GIGA,
        source="AMD Instinct MI325X specifications; ROCm GPU specifications table",
    ),
    # MI350X (CDNA4): no TF32 in hardware. FP16/BF16: AMD quotes 2307 (~2.3 PF), PyTorch's
    # device table 2309.6 (taken: higher, for both, which run at the same rate).
    GPUSpec(
        name="MI350X",
        vendor="AMD",
        architecture="CDNA4",
        memory_bytes=int(288 * _GIGA),
        memory_bandwidth_bytes_per_s=8000 * _GIGA,
        l2_bytes=32 * _MIB,
        sm_count=256,
        tensor_peak_flops_per_s=_tera(fp16=2309.6, bf16=2309.6, fp8=4614, int8=4614),
        vector_peak_flops_per_s=_tera(fp64=72.1, fp32=144.2),
        source="AMD Instinct MI350X brochure; torch/_inductor/analysis/device_info.py; ROCm table",
    ),
    # MI355X (CDNA4): FP8 = 256 CU x 8192 FLOP/clk x 2.4 GHz = 5033 (AMD rounds to 5.0 PF).
    GPUSpec(
        name="MI355X",
        vendor="AMD",
        architecture="CDNA4",
        memory_bytes=int(288 * _GIGA),
        memory_bandwidth_bytes_per_s=8000 * _GIGA,
        l2_bytes=32 * _MIB,
        sm_count=256,
        tensor_peak_flops_per_s=_tera(fp16=2516.6, bf16=2516.6, fp8=5033, int8=5033),
        vector_peak_flops_per_s=_tera(fp64=78.6, fp32=157.3),
        source="AMD CDNA 4 whitepaper; ROCm GPU specifications table; svethardware.cz (FP32)",
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
    index = _index()
    spec = index.get(_compact(name))
    if spec is not None:
        return spec
    close = difflib.get_close_matches(_compact(name), index, n=len(index), cutoff=0.5)
    keys = list(dict.fromkeys(index[match].key for match in close))[:3]
    hint = f"; closest: {', '.join(keys)}" if keys else ""
    raise UnknownGPUError(f"unknown GPU {name!r}{hint} (run 'torchroofline gpus' for the list)")


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
