"""Numbers with their units: every size reads in the unit that suits it, up to the largest."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn

from torchroofline import analyze
from torchroofline.units import human_bytes, human_ms, percent, si, times


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3.3e8, "330.00 MFLOP"),
        (2e18, "2.00 EFLOP"),  # 2e18 FLOPs: not "2000000.00 TFLOP"
        (4.5e15, "4.50 PFLOP"),
        (2e24, "2e+06 EFLOP"),  # past the largest prefix: three figures, never a run of digits
    ],
)
def test_si_prefixes_reach_exa(value, text):
    assert si(value, "FLOP") == text


def test_bytes_reach_exabytes():
    assert human_bytes(1.5e6) == "1.50 MB"
    assert human_bytes(3e15) == "3.00 PB"
    assert human_bytes(5e21) == "5e+03 EB"


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (2.66, "2.66 ms"),
        (822.1e-3, "822.1 µs"),
        (59.9e3, "59.9 s"),
        (90e3, "1.5 min"),  # 90 s
        (29895.4e3, "8.3 h"),  # 29,895.4 s: not "29895.4 s"
        (1.97e-4, "197 ns"),
        (2.39e-12 * 1e3, "2.39 ps"),  # x + 1 on one fp32 on an H100: 8 B / 3.35 TB/s, not
        (0.0, "0 ns"),  # "0.00239 ns"; nothing stays "0 ns", as analyze prints it
    ],
)
def test_times_switch_units_at_minutes_and_hours(ms, text):
    assert human_ms(ms) == text


def test_a_tiny_share_is_never_printed_as_nothing():
    # one decimal rounds 1.5e-5 (a 1.75 ns bound against 120 µs measured, KernelBench level 2
    # #18) to "0.0%", which reads as a bound of nothing
    assert percent(1.5e-5) == "0.0015%" and percent(0.0004) == "0.04%"
    assert percent(0.392) == "39.2%" and percent(2.519) == "251.9%" and percent(0) == "0.0%"
    result = analyze(nn.Linear(4, 4), torch.empty(2, 4, device="meta"), "h100-sxm",
                     actual_ms=1000.0)
    assert result.actual.sol_fraction < 5e-4
    [line] = [line for line in result.format().splitlines() if "% of SoL  " in line]
    assert f"{percent(result.actual.sol_fraction)}   (" in line and " 0.0%" not in line


def test_a_huge_headroom_is_never_a_run_of_digits():
    # a 1.75 ns bound against 40 ms is 2.3e7 times: three significant figures past 1000
    assert times(2.661) == "2.66x" and times(999.994) == "999.99x"
    assert times(2.326e10) == "2.33e+10x"
    result = analyze(nn.Linear(4, 4), torch.empty(2, 4, device="meta"), "h100-sxm",
                     actual_ms=1000.0)
    text = result.format()
    assert "e+" in text and not re.search(r"\d{5,}\.\d\dx", text)
