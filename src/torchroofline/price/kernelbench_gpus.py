"""KernelBench's GPU table (``kernelbench.prompts.hardware.gpu_specs.GPU_SPEC_INFO``) read into
:class:`~torchroofline.hardware.GPUSpec` entries, with the dense-figure rule of our own table.

``hardware.list_gpus`` adds the GPUs found here that the built-in table lacks; the built-in entry
wins where both exist. Nothing here is used when KernelBench is not installed.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Mapping

from .gpu_spec import TENSOR_PRECISIONS, VECTOR_PRECISIONS, GPUSpec, derived_l2_bandwidth

_TERA = 1e12
_MIB = 2**20

# kernelbench.prompts.hardware.gpu_specs.GPU_SPEC_INFO maps a GPU name to a dict of strings, e.g.
# {"Memory Bandwidth": "3.35 TB/s", "FP16 Tensor Core TFLOPS": "1979 with sparsity",
#  "TF32 Tensor Core TFLOPS": "156 (312 with sparsity)", "GPU Memory": "80GB"}.

_KERNELBENCH_MODULE = "kernelbench.prompts.hardware.gpu_specs"

_NUMBER = r"(\d+(?:\.\d+)?)"
_SPARSE_ONLY = re.compile(rf"^{_NUMBER}\s*with\s+sparsity", re.IGNORECASE)
_LEADING_NUMBER = re.compile(rf"^{_NUMBER}")
_WITH_UNIT = re.compile(rf"{_NUMBER}\s*([A-Za-z]+(?:/s)?)")

_BANDWIDTH_UNITS = {"tb/s": 1e12, "gb/s": 1e9}
_SIZE_UNITS = {"tb": 1e12, "gb": 1e9}
_CACHE_UNITS = {"mb": _MIB, "kb": 2**10}

# Precision named by a KernelBench key, tried in order (FP16 before FP32 so that
# "Mixed-Precision (FP16/FP32) TFLOPS" reads as FP16; word boundaries keep "fp6" off "fp64").
_KEY_PRECISIONS = (
    ("fp64", re.compile(r"\bfp64\b|double")),
    ("tf32", re.compile(r"\btf32\b")),
    ("bf16", re.compile(r"\bbf16\b|bfloat16")),
    ("fp8", re.compile(r"\bfp8\b")),
    ("int8", re.compile(r"\bint8\b")),
    ("fp16", re.compile(r"\bfp16\b|half|mixed-precision")),
    ("fp32", re.compile(r"\bfp32\b|single")),
)
_TENSOR_KEY = re.compile(r"tensor|matrix|mixed-precision")  # KernelBench also spells "Tensore"
_PEAK_KEY = re.compile(r"\bt(?:flops|ops)\b")  # peaks are given in TFLOPS / TOPS
_IGNORED_KEY = re.compile(r"\bint4\b|\bfp[46]\b|mxfp|\brt core")
_GFX_ARCHITECTURES = {"gfx942": "CDNA3", "gfx950": "CDNA4", "gfx90a": "CDNA2"}


def _dense_tera(text: str) -> float | None:
    """A KernelBench peak string in FLOP/s, dense: "156 (312 with sparsity)" -> 156e12,
    "1979 with sparsity" (sparse only) -> 989.5e12, "19.5" -> 19.5e12; None if unparsable."""
    text = text.strip().replace(",", "")
    sparse = _SPARSE_ONLY.match(text)
    if sparse:
        return float(sparse[1]) / 2 * _TERA  # 2:4 structured sparsity doubles the printed peak
    dense = _LEADING_NUMBER.match(text)
    return float(dense[1]) * _TERA if dense else None


def _with_unit(text: str, units: Mapping[str, float]) -> float | None:
    """First "<number> <unit>" in ``text`` with a unit from ``units``, scaled; None if none."""
    for number, unit in _WITH_UNIT.findall(text.replace(",", "")):
        scale = units.get(unit.lower())
        if scale is not None:
            return float(number) * scale
    return None


def _peak_slot(key: str) -> tuple[str, str] | None:
    """("tensor" | "vector", precision) that a KernelBench key describes, or None to ignore it."""
    lowered = key.lower()
    if not _PEAK_KEY.search(lowered) or _IGNORED_KEY.search(lowered):
        return None
    precision = next((p for p, pattern in _KEY_PRECISIONS if pattern.search(lowered)), None)
    if precision is None:
        return None
    on_tensor = bool(_TENSOR_KEY.search(lowered)) or precision not in VECTOR_PRECISIONS
    if on_tensor:
        return ("tensor", precision) if precision in TENSOR_PRECISIONS else None
    return "vector", precision


def _parse_kernelbench_entry(name: str, entry: Mapping[str, str]) -> GPUSpec | None:
    """One KernelBench entry as a GPUSpec; None without a bandwidth and an FP32 peak (a roofline
    needs both). Missing sizes and counts become 0 and are listed in ``unconfirmed``, as is the
    L2 bandwidth, which KernelBench does not give: derived from the FP32 peak
    (:data:`~.gpu_spec.L2_BYTES_PER_FP32_FLOP`), an upper bound."""
    peaks: dict[str, dict[str, float]] = {"tensor": {}, "vector": {}}
    for key, value in entry.items():
        slot = _peak_slot(str(key))
        peak = _dense_tera(value) if slot and isinstance(value, str) else None
        if slot and peak is not None:
            peaks[slot[0]].setdefault(slot[1], peak)

    def text(label: str) -> str:
        value = entry.get(label)
        return value if isinstance(value, str) else ""

    bandwidth = _with_unit(text("Memory Bandwidth"), _BANDWIDTH_UNITS)
    if bandwidth is None or "fp32" not in peaks["vector"]:
        return None
    memory = _with_unit(text("GPU Memory"), _SIZE_UNITS)
    l2 = _with_unit(text("L2 Cache"), _CACHE_UNITS)
    units = _LEADING_NUMBER.match(text("Number of CU").strip() or text("Number of SM").strip())
    missing = tuple(
        label
        for label, found in (("memory_bytes", memory), ("l2_bytes", l2), ("sm_count", units))
        if found is None
    )
    architecture = text("GPU Architecture").strip() or "unknown"
    architecture = _GFX_ARCHITECTURES.get(architecture.lower(), architecture)
    amd = name.upper().startswith("MI") or architecture.startswith("CDNA")
    return GPUSpec(
        name=name,
        vendor="AMD" if amd else "NVIDIA",
        architecture=architecture,
        memory_bytes=int(memory or 0),
        memory_bandwidth_bytes_per_s=bandwidth,
        l2_bytes=int(l2 or 0),
        sm_count=int(float(units[1])) if units else 0,
        tensor_peak_flops_per_s=peaks["tensor"],
        vector_peak_flops_per_s=peaks["vector"],
        l2_bandwidth_bytes_per_s=derived_l2_bandwidth(peaks["vector"]),
        source=f"KernelBench {_KERNELBENCH_MODULE}.GPU_SPEC_INFO[{name!r}]",
        unconfirmed=(*missing, "l2_bandwidth_bytes_per_s"),
    )


def parse_kernelbench_specs(table: Mapping[str, Mapping[str, str]]) -> dict[str, GPUSpec]:
    """GPUSpecs from a table in KernelBench's ``GPU_SPEC_INFO`` format, keyed by its GPU names.

    Peaks are read as dense: a figure printed only "with sparsity" is halved, and of
    "156 (312 with sparsity)" the first (dense) number is taken. Bandwidth may be in TB/s or GB/s.
    Unknown keys and unparsable values are skipped; entries without a memory bandwidth or an
    FP32 peak are dropped.
    """
    specs = {}
    for name, entry in table.items():
        spec = _parse_kernelbench_entry(str(name), entry) if isinstance(entry, Mapping) else None
        if spec is not None:
            specs[str(name)] = spec
    return specs


@functools.cache
def _kernelbench_specs() -> tuple[tuple[str, GPUSpec], ...]:
    """KernelBench's installed table, parsed once; empty when KernelBench is not installed."""
    try:
        module = importlib.import_module(_KERNELBENCH_MODULE)
    except ImportError:
        return ()
    table = getattr(module, "GPU_SPEC_INFO", None)
    if not isinstance(table, Mapping):
        return ()
    return tuple(parse_kernelbench_specs(table).items())


def load_kernelbench_gpus() -> dict[str, GPUSpec]:
    """GPUs from the installed KernelBench's ``GPU_SPEC_INFO`` ({} if KernelBench is absent)."""
    return dict(_kernelbench_specs())
