"""The type of one GPU's datasheet figures, :class:`GPUSpec`, and the precision keys its peak
tables take. The figures themselves are in :mod:`torchroofline.hardware` (our table) and
:mod:`torchroofline.kernelbench_gpus` (KernelBench's table read into this type)."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..errors import ClockError, PrecisionError

TENSOR_PRECISIONS = ("tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")
"""Keys allowed in ``GPUSpec.tensor_peak_flops_per_s``. "fp6" and "fp4" are the e2m3/e3m2 and
e2m1 element formats (NVFP4, MXFP6, MXFP4: the block scales do not change the MMA rate)."""

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
    "fp6": ("fp16", "fp32"),  # nor FP6/FP4 ones: their values are exact in fp16
    "fp4": ("fp16", "fp32"),
}

#: One PCIe lane's rate per direction (bytes/s) after line encoding, by generation (PCI-SIG
#: base specifications): 3.0 8 GT/s and 4.0 16 GT/s and 5.0 32 GT/s with 128b/130b encoding;
#: 6.0 64 GT/s PAM4 with 242/256-byte FLITs. x16: 15.8, 31.5, 63.0, 121 GB/s.
PCIE_LANE_BYTES_PER_S: dict[str, float] = {
    "3.0": 8e9 / 8 * 128 / 130,
    "4.0": 16e9 / 8 * 128 / 130,
    "5.0": 32e9 / 8 * 128 / 130,
    "6.0": 64e9 / 8 * 242 / 256,
}
#: Host links that are not PCIe, rate per direction (bytes/s): NVLink-C2C between a Grace CPU
#: and its Hopper/Blackwell GPU, 900 GB/s both directions together (NVIDIA GH200/GB200 briefs).
HOST_LINK_BYTES_PER_S: dict[str, float] = {"NVLink-C2C": 450e9}

DEFAULT_LAUNCH_OVERHEAD_S = 2.5e-6
"""Per-kernel launch floor in seconds: typical CUDA launch latency is a few microseconds.
An estimate for the "expected time" figures, never used in bounds."""


L2_BYTES_PER_FP32_FLOP = 0.5
"""L2 bytes per second per FP32 FLOP/s, for a GPU whose entry prints no L2 bandwidth: an SM or CU
takes at most 64 bytes a clock from L2 (NVIDIA: 64 B/clk per L2 slice, and no part has more
slices than SMs; AMD: 64 or 128 B/clk per channel, at most 16 channels per 38 or more CUs) and
runs at least 128 FP32 FLOP a clock (64 lanes, FMA), so bytes/s <= 64/128 x FP32 FLOP/s. An upper
bound on the bandwidth, so the warm bound built on it stays a bound."""


def derived_l2_bandwidth(vector_peaks: Mapping[str, float]) -> float:
    """:data:`L2_BYTES_PER_FP32_FLOP` times the FP32 vector peak, in bytes/s."""
    return L2_BYTES_PER_FP32_FLOP * vector_peaks["fp32"]


@functools.lru_cache(maxsize=256)  # asked per kernel priced, of a few GPU names
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

    Clocks (MHz): ``boost_clock_mhz`` is the highest SM clock, the one the vector peaks are
    computed at; ``tensor_clock_mhz`` is the clock the tensor peaks assume where the vendor
    computes them at a lower one (H100 SXM: 1830 against a 1980 boost); ``memory_clock_mhz`` is
    the nominal memory clock in nvidia-smi's units. ``locked_clock_mhz`` and
    ``locked_memory_clock_mhz`` are set on the copy :meth:`at_clocks` returns (None: nominal).
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
    #: L1<->L2 peak (bytes/s): what the warm bound reads L2-resident data at; None: derived
    #: from the FP32 vector peak (:attr:`l2_bandwidth`)
    l2_bandwidth_bytes_per_s: float | None = None
    launch_overhead_s: float = DEFAULT_LAUNCH_OVERHEAD_S
    fp16_accumulate_fp16_flops_per_s: float | None = None
    aliases: tuple[str, ...] = ()
    source: str = ""
    unconfirmed: tuple[str, ...] = ()
    boost_clock_mhz: float | None = None
    tensor_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    locked_clock_mhz: float | None = None
    locked_memory_clock_mhz: float | None = None
    #: the link to the host CPU as the datasheet names it ("PCIe 5.0 x16", "NVLink-C2C"; sources
    #: in docs/gpu_sources.md); "" where the table does not say. Estimates only, never a bound.
    host_link: str = ""

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
    def l2_bandwidth(self) -> float:
        """The L2 bandwidth (bytes/s) the warm bound charges: the table's figure, or for an entry
        without one, :data:`L2_BYTES_PER_FP32_FLOP` of its FP32 vector peak."""
        return self.l2_bandwidth_bytes_per_s or derived_l2_bandwidth(self.vector_peak_flops_per_s)

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

    def at_clocks(
        self, clock_mhz: float | None = None, memory_clock_mhz: float | None = None
    ) -> GPUSpec:
        """This GPU with its SM clock locked at ``clock_mhz`` and its memory clock at
        ``memory_clock_mhz`` (None: left at nominal). A peak is a per-clock rate times a clock,
        so vector peaks scale by ``clock_mhz / boost_clock_mhz``, tensor peaks by
        ``clock_mhz / tensor_clock_mhz`` (the clock they assume; the boost clock where the table
        names none) and the memory bandwidth by the locked / the nominal memory clock.

        Raises ClockError for a clock that is not positive, one above the nominal clock, or one
        given for a GPU whose entry has no nominal clock to scale from.
        """
        spec = self
        if clock_mhz is not None:
            boost = self._nominal_clock("boost_clock_mhz", clock_mhz, "clock_mhz (--clock-mhz)")
            # from the clock the peaks hold now, so a locked copy can be locked again
            vector_scale = clock_mhz / (self.locked_clock_mhz or boost)
            tensor_scale = clock_mhz / (self.locked_clock_mhz or self.tensor_clock_mhz or boost)
            fp16_fp16 = self.fp16_accumulate_fp16_flops_per_s
            spec = dataclasses.replace(
                spec,
                tensor_peak_flops_per_s=_scaled(self.tensor_peak_flops_per_s, tensor_scale),
                vector_peak_flops_per_s=_scaled(self.vector_peak_flops_per_s, vector_scale),
                fp16_accumulate_fp16_flops_per_s=fp16_fp16 and fp16_fp16 * tensor_scale,
                locked_clock_mhz=float(clock_mhz),
            )
        if memory_clock_mhz is not None:
            nominal = self._nominal_clock(
                "memory_clock_mhz", memory_clock_mhz, "mem_clock_mhz (--mem-clock-mhz)"
            )
            spec = dataclasses.replace(
                spec,
                memory_bandwidth_bytes_per_s=self.memory_bandwidth_bytes_per_s
                * memory_clock_mhz
                / (self.locked_memory_clock_mhz or nominal),
                locked_memory_clock_mhz=float(memory_clock_mhz),
            )
        return spec

    def _nominal_clock(self, field_name: str, locked_mhz: float, option: str) -> float:
        """The nominal clock ``field_name`` that a lock at ``locked_mhz`` scales from, after
        checking that the lock is one the GPU can run at."""
        nominal = getattr(self, field_name)
        what = "boost clock" if field_name == "boost_clock_mhz" else "memory clock"
        if nominal is None:
            raise ClockError(
                f"the table has no {what} for the {self.name}, so {option} cannot scale its "
                f"peaks; drop {option}, or pass a GPUSpec with {field_name} set"
            )
        if not 0 < locked_mhz <= nominal:
            raise ClockError(
                f"{option} {locked_mhz:g} is outside the {self.name}'s range (above 0, at most "
                f"its {what} {nominal:g} MHz); pass a clock in that range"
            )
        return nominal

    @property
    def host_link_bytes_per_s(self) -> float | None:
        """The host link's rate per direction (bytes/s) after line encoding: the PCIe lane rate
        of its generation times its width (:data:`PCIE_LANE_BYTES_PER_S`), or the link's own
        figure (:data:`HOST_LINK_BYTES_PER_S`); None for a link the table does not name."""
        pcie = re.fullmatch(r"PCIe (\d\.0) x(\d+)", self.host_link)
        if pcie:
            return PCIE_LANE_BYTES_PER_S[pcie[1]] * int(pcie[2])
        return HOST_LINK_BYTES_PER_S.get(self.host_link)

    @property
    def clocks(self) -> dict[str, float | None]:
        """The clocks the peaks hold (MHz): the SM and memory clocks in use (nominal unless
        locked) and the nominal ones they were scaled from."""
        return {
            "clock_mhz": self.locked_clock_mhz or self.boost_clock_mhz,
            "boost_clock_mhz": self.boost_clock_mhz,
            "memory_clock_mhz": self.locked_memory_clock_mhz or self.memory_clock_mhz,
            "nominal_memory_clock_mhz": self.memory_clock_mhz,
        }

    def to_dict(self) -> dict:
        """JSON-serialisable form: every field plus ``key``; mappings become plain dicts."""
        data = {item.name: getattr(self, item.name) for item in dataclasses.fields(self)}
        data.update({name: dict(data[name]) for name in _PEAK_TABLES})
        data["aliases"] = list(self.aliases)
        data["unconfirmed"] = list(self.unconfirmed)
        return {"key": self.key, **data}


def _scaled(peaks: Mapping[str, float], scale: float) -> dict[str, float]:
    return {precision: peak * scale for precision, peak in peaks.items()}


#: The peak tables of a GPUSpec and the precision keys each allows.
_PEAK_TABLES = {
    "tensor_peak_flops_per_s": TENSOR_PRECISIONS,
    "vector_peak_flops_per_s": VECTOR_PRECISIONS,
}
