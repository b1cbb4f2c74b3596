"""Numbers with their units, as every report prints them (decimal prefixes: 1 KB = 1,000 B)."""

from __future__ import annotations

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"))
_BYTES = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"))


def si(value: float, unit: str = "") -> str:
    """``3.3e8`` → ``"330.00 M"`` + unit (decimal prefixes)."""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.2f} {unit}".rstrip() if unit else f"{value:g}"


def human_bytes(count: float, digits: str = ".2f") -> str:
    """Decimal byte units: ``1.5e6`` → ``"1.50 MB"`` (``digits``: the number's format)."""
    for scale, unit in _BYTES:
        if abs(count) >= scale:
            return f"{count / scale:{digits}} {unit}"
    return f"{count:.0f} B"


def human_ms(ms: float) -> str:
    """A time given in ms, in the unit that suits its size: ``"2.66 ms"``, ``"4.90 µs"``."""
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "µs")):
        if ms >= scale:
            return f"{ms / scale:.3g} {unit}" if ms / scale < 100 else f"{ms / scale:.1f} {unit}"
    return f"{ms * 1e6:.3g} ns"
