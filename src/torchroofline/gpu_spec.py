"""The type of one GPU's datasheet figures, :class:`GPUSpec`, and the precision keys its peak
tables take. The figures themselves are in :mod:`torchroofline.hardware` (our table) and
:mod:`torchroofline.kernelbench_gpus` (KernelBench's table read into this type)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .errors import PrecisionError

TENSOR_PRECISIONS = ("tf32", "fp16", "bf16", "fp8", "int8")
"""Keys allowed in ``GPUSpec.tensor_peak_flops_per_s``."""

VECTOR_PRECISIONS = ("fp64", "fp32", "fp16")
"""Keys allowed in ``GPUSpec.vector_peak_flops_per_s`` ("fp16" = packed half2 non-tensor rate)."""

# Which vector-table figure bounds pointwise work in each precision, in order of preference.
# Half-precision work falls back to the FP32 rate where no FP16 non-tensor figure can be cited.
# That fallback is a lower ceiling than the packed-half2 rate, so in principle it could make a
# compute "bound" too high; in practice pointwise work is nearly always memory-bound, so the
# compute ceiling it sets is rarely the binding one.
_VECTOR_RATES_BY_PRECISION: dict[str, tuple[str, ...]] = {
    "fp64": ("fp64",),
    "fp32": ("fp32",),
    "tf32": ("fp32",),  # TF32 is a tensor-core input format; pointwise TF32 work is FP32 work
    "fp16": ("fp16", "fp32"),
    "bf16": ("fp16", "fp32"),
    "fp8": ("fp16", "fp32"),  # no FP8 vector ALUs: FP8 pointwise work is upcast
}

DEFAULT_LAUNCH_OVERHEAD_S = 2.5e-6
"""Per-kernel launch floor in seconds: typical CUDA launch latency is a few microseconds.
An estimate for the "expected time" figures, never used in bounds."""


def _key_from_name(name: str) -> str:
    """Canonical key of a display name: lower case, words joined by dashes, except that an
    all-letter word is glued to the number after it ("H100 SXM" -> "h100-sxm",
    "RTX 4090" -> "rtx4090", "A100 80GB" -> "a100-80gb")."""
    words: list[str] = []
    for word in re.split(r"[\s_\-]+", name.strip().lower()):
        if words and words[-1].isalpha() and word[:1].isdigit():
            words[-1] += word
        elif word:
            words.append(word)
    return "-".join(words)


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's datasheet figures (a fact: frozen). Units: bytes, bytes/s, FLOP/s, seconds.

    ``tensor_peak_flops_per_s`` holds DENSE tensor/matrix-core peaks; a precision that is absent
    has no tensor-core support. Its "fp16" entry is the FP32-accumulate rate (the cuBLAS default);
    GeForce parts run FP16-accumulate at twice that, kept in ``fp16_accumulate_fp16_flops_per_s``.
    ``unconfirmed`` names the figures not confirmed in two sources, or derived rather than printed
    ("tensor.fp16", "vector.fp32", or a field name such as "sm_count"); they are used, and
    reports flag them. The two peak tables are read-only mappings, whatever mapping is passed in.
    """

    name: str
    vendor: str
    architecture: str
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    l2_bytes: int  # AMD: sum of per-XCD L2; the Infinity Cache (MALL) is not counted here
    sm_count: int  # SMs (NVIDIA) or CUs (AMD)
    tensor_peak_flops_per_s: Mapping[str, float] = field(hash=False)
    vector_peak_flops_per_s: Mapping[str, float] = field(hash=False)
    l2_bandwidth_bytes_per_s: float | None = None  # no trustworthy published figure for any GPU
    launch_overhead_s: float = DEFAULT_LAUNCH_OVERHEAD_S
    fp16_accumulate_fp16_flops_per_s: float | None = None
    aliases: tuple[str, ...] = ()
    source: str = ""
    unconfirmed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, allowed in _PEAK_TABLES.items():
            table = getattr(self, name)
            unknown = set(table) - set(allowed)
            if unknown:
                raise ValueError(f"{self.name}: unknown precision keys {sorted(unknown)}")
            # a fact stays a fact: nobody can change a GPU's peaks after the entry is made
            object.__setattr__(self, name, MappingProxyType(dict(table)))

    def __getstate__(self) -> dict:
        """Pickle state (specs cross to batch workers): read-only mappings as plain dicts."""
        return {**self.__dict__, **{name: dict(getattr(self, name)) for name in _PEAK_TABLES}}

    def __setstate__(self, state: dict) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    @property
    def key(self) -> str:
        """Canonical lower-case key, e.g. "h100-sxm"."""
        return _key_from_name(self.name)

    def has_tensor(self, precision: str) -> bool:
        """Whether the GPU has tensor/matrix-core hardware for ``precision`` ("fp16", ...)."""
        return precision.lower() in self.tensor_peak_flops_per_s

    def tensor_peak(self, precision: str) -> float:
        """Dense tensor/matrix-core peak for ``precision`` in FLOP/s (op/s for "int8").

        Raises PrecisionError when the GPU has no tensor-core support for it.
        """
        peak = self.tensor_peak_flops_per_s.get(precision.lower())
        if peak is None:
            supported = ", ".join(self.tensor_peak_flops_per_s) or "none"
            raise PrecisionError(
                f"{self.name} has no {precision} tensor cores (supported: {supported}); "
                "pick one of those precisions or another GPU"
            )
        return peak

    def vector_peak(self, precision: str) -> float:
        """Non-tensor (CUDA-core / vector ALU) peak for work in ``precision``, in FLOP/s.

        "fp32"/"tf32" use the FP32 rate; "fp16"/"bf16"/"fp8" use the packed-FP16 rate where a
        figure is known and the FP32 rate otherwise; "fp64" uses the FP64 vector rate.
        """
        return self.vector_peak_flops_per_s[self.vector_key(precision)]

    def vector_key(self, precision: str) -> str:
        """The ``vector_peak_flops_per_s`` entry that prices vector work in ``precision``."""
        rates = _VECTOR_RATES_BY_PRECISION.get(precision.lower())
        if rates is None:
            raise PrecisionError(
                f"unknown precision {precision!r} for vector work; "
                f"use one of: {', '.join(_VECTOR_RATES_BY_PRECISION)}"
            )
        for rate in rates:
            if rate in self.vector_peak_flops_per_s:
                return rate
        raise PrecisionError(f"{self.name} has no published {precision} vector peak")

    def to_dict(self) -> dict:
        """JSON-serialisable form: every field plus ``key``; mappings become plain dicts."""
        data = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        data.update({name: dict(data[name]) for name in _PEAK_TABLES})
        data["aliases"] = list(self.aliases)
        data["unconfirmed"] = list(self.unconfirmed)
        return {"key": self.key, **data}


#: The peak tables of a GPUSpec and the precision keys each allows.
_PEAK_TABLES = {
    "tensor_peak_flops_per_s": TENSOR_PRECISIONS,
    "vector_peak_flops_per_s": VECTOR_PRECISIONS,
}
