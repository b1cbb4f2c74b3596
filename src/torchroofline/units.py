"""Numbers with their units, as every report prints them (decimal prefixes: 1 KB = 1,000 B)."""

from __future__ import annotations

_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K"))
_BYTES = ((1e18, "EB"), (1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"))
#: Time units (their size in ms), largest first: past a minute a time reads in minutes or
#: hours, never as thousands of seconds.
_TIMES_MS = ((3.6e6, "h"), (6e4, "min"), (1e3, "s"), (1.0, "ms"), (1e-3, "µs"))


def si(value: float, unit: str = "") -> str:
    """``3.3e8`` → ``"330.00 M"`` + unit (decimal prefixes up to E; past them ``"2e+06 E"``)."""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{_below_1000(value / scale, '.2f')} {prefix}{unit}"
    return f"{value:.2f} {unit}".rstrip() if unit else f"{value:g}"


def human_bytes(count: float, digits: str = ".2f") -> str:
    """Decimal byte units: ``1.5e6`` → ``"1.50 MB"`` (``digits``: the number's format)."""
    for scale, unit in _BYTES:
        if abs(count) >= scale:
            return f"{_below_1000(count / scale, digits)} {unit}"
    return f"{count:.0f} B"


def human_ms(ms: float) -> str:
    """A time given in ms, in the unit that suits its size: ``"2.66 ms"``, ``"4.90 µs"``,
    ``"8.3 h"``, ``"2.39 ps"`` (never ``"0.00239 ns"``); nothing is ``"0 ns"``."""
    for scale, unit in _TIMES_MS:
        if ms >= scale:
            value = ms / scale
            return f"{value:.1f} {unit}" if 100 <= value < 1000 else f"{value:.3g} {unit}"
    return f"{ms * 1e6:.3g} ns" if ms >= 1e-6 or not ms else f"{ms * 1e9:.3g} ps"


def percent(fraction: float) -> str:
    """A share as a percentage to one decimal, ``0.392`` → ``"39.2%"``; below 0.05 % (which one
    decimal rounds to "0.0%", read as nothing) to two significant figures: ``"0.0015%"``."""
    if 0 < abs(fraction) < 0.0005:
        return f"{100 * fraction:.2g}%"
    return f"{fraction:.1%}"


def times(ratio: float) -> str:
    """A ratio of two times, ``2.661`` → ``"2.66x"``; from 1000 on in three significant figures
    (``"2.33e+10x"``), never a run of digits."""
    return f"{_below_1000(ratio, '.2f')}x"


def _below_1000(value: float, digits: str) -> str:
    """``value`` in ``digits``; in three significant figures from 1000 on (beyond the largest
    unit), never a run of digits."""
    return f"{value:{digits}}" if abs(value) < 1000 else f"{value:.3g}"


def counted(count: int, noun: str) -> str:
    """A count and its noun, ``"1 kernel"``, ``"2 kernels"``."""
    return f"{count} {noun}" + ("" if count == 1 else "s")
