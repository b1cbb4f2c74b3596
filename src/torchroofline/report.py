"""Stage 5: present a :class:`~torchroofline.roofline.Result` — boxed text, JSON dict, units."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .roofline import KernelEstimate, Result

SCHEMA_VERSION = 1
WIDTH = 64

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"))
_BYTES = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"))


def si(value: float, unit: str = "") -> str:
    """``3.3e8`` → ``"330.00 M"`` + unit (decimal prefixes)."""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.2f} {unit}".rstrip() if unit else f"{value:g}"


def human_bytes(count: float) -> str:
    """Decimal byte units: ``1.5e6`` → ``"1.50 MB"``."""
    for scale, unit in _BYTES:
        if abs(count) >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count:.0f} B"


def human_ms(ms: float) -> str:
    """A time given in ms, in the unit that suits its size: ``"2.66 ms"``, ``"4.90 µs"``."""
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "µs")):
        if ms >= scale:
            return f"{ms / scale:.3g} {unit}" if ms / scale < 100 else f"{ms / scale:.1f} {unit}"
    return f"{ms * 1e6:.3g} ns"


def result_to_dict(result: Result) -> dict[str, Any]:
    """The stable JSON layout (schema_version 1); see the README for every key."""
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model": result.model_name,
        "gpu": result.gpu.name,
        "gpu_key": result.gpu.key,
        "precision": result.precision,
        "cache": result.cache,
        "params": result.params,
        "flops": {
            "total": result.flops,
            "tensor": result.tensor_flops,
            "vector": result.vector_flops,
        },
        "bytes": {
            "unfused": result.unfused_bytes,
            "fused": result.fused_bytes,
            "compulsory": result.compulsory_bytes,
        },
        "kernel_count": {
            "unfused": result.unfused_kernel_count,
            "fused": result.fused_kernel_count,
        },
        "arithmetic_intensity": _finite(result.arithmetic_intensity),
        "ridge_point": result.ridge_point,
        "time_ms": result.time_ms,
        "bottleneck": result.bottleneck,
        "kernels": [kernel.to_dict() for kernel in result.kernels],
        "op_count": len(result.ops),
        "unsupported_ops": dict(result.unsupported_ops),
        "notes": list(result.notes),
    }
    if result.actual is not None:
        data["actual"] = result.actual.to_dict()
    return data


def _finite(value: float) -> float | None:
    return value if value != float("inf") else None


def _line(label: str, value: str, suffix: str = "") -> str:
    text = f"  {label:<25}: {value:>14}"
    return f"{text}   {suffix}" if suffix else text


def format_result(result: Result, top: int = 5) -> str:
    """The boxed text report followed by the top kernels by estimated time."""
    rule = "=" * WIDTH
    flops = result.flops
    lines = [
        rule,
        f"  torchroofline — {result.model_name}",
        f"  GPU: {result.gpu.name}   Precision: {result.precision}   Cache: {result.cache}",
        rule,
        _line(
            "FLOPs",
            si(flops, "FLOPs"),
            f"(tensor {si(result.tensor_flops)}, vector {si(result.vector_flops)})",
        ),
        _line("Params", si(result.params)),
        "",
        _line("HBM traffic (unfused)", human_bytes(result.unfused_bytes), "<- eager upper bound"),
        _line("HBM traffic (fused)", human_bytes(result.fused_bytes), "<- inductor-style estimate"),
        _line(
            "HBM traffic (compulsory)",
            human_bytes(result.compulsory_bytes),
            "<- perfect-fusion lower bound",
        ),
        _line("Fusion reduction", f"{result.fusion_reduction:.1%}"),
        _line(
            "Kernels (eager / fused)",
            f"{result.unfused_kernel_count} / {result.fused_kernel_count}",
        ),
        "",
        _line("Arithmetic intensity", f"{_intensity(result.arithmetic_intensity)} FLOPs/Byte"),
        _line(f"Ridge point ({result.precision})", f"{result.ridge_point:.1f} FLOPs/Byte"),
        "",
        _line("Compute SoL", human_ms(result.time_ms["compute_sol"])),
        _line("Memory  SoL", human_ms(result.time_ms["memory_sol"])),
        _line(
            "Speed of light",
            human_ms(result.sol_ms),
            f"*** Bottleneck : {result.bottleneck.upper()} BOUND ***",
        ),
        _line(
            "Fused estimate",
            human_ms(result.time_ms["fused_estimate"]),
            "(sum of per-kernel rooflines)",
        ),
        _line("Eager estimate", human_ms(result.time_ms["eager_estimate"])),
    ]
    if result.actual is not None:
        lines += ["", *_actual_lines(result)]
    lines.append(rule)
    if top > 0 and result.kernels:
        lines += ["", *kernel_table(result.top_kernels(top))]
    if result.notes:
        lines += ["", "Notes:", *(f"  - {note}" for note in result.notes)]
    return "\n".join(lines)


def _actual_lines(result: Result) -> list[str]:
    actual = result.actual
    assert actual is not None
    verdict = (
        "*** IMPOSSIBLE: faster than the speed of light (bad timing or skipped work) ***"
        if actual.impossible
        else f"({actual.headroom:.2f}x headroom)"
    )
    return [
        _line("Measured", human_ms(actual.ms)),
        _line("% of SoL", f"{actual.sol_fraction:.1%}", verdict),
        _line("Achieved", f"{actual.tflops:.2f} TFLOP/s", f"{actual.gbps:.0f} GB/s compulsory"),
    ]


def _intensity(value: float) -> str:
    return "inf" if value == float("inf") else f"{value:.2f}"


def kernel_table(kernels: list[KernelEstimate], name_width: int = 34) -> list[str]:
    """Fixed-width table of kernels: name, FLOPs, bytes, intensity, time, bound."""
    header = (
        f"  {'kernel':<{name_width}} {'FLOPs':>11} {'bytes':>10} {'FLOP/B':>8} "
        f"{'time':>11} {'bound':>7}"
    )
    rows = [header, "  " + "-" * (len(header) - 2)]
    for kernel in kernels:
        name = kernel.name if len(kernel.name) <= name_width else kernel.name[: name_width - 1] + "…"
        rows.append(
            f"  {name:<{name_width}} {si(kernel.flops):>11} {human_bytes(kernel.bytes):>10} "
            f"{_intensity(kernel.intensity):>8} {human_ms(kernel.time_ms):>11} {kernel.bound:>7}"
        )
    return rows
