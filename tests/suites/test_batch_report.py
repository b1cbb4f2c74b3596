"""The typed batch report: derived figures from closed forms, one spelling for problems outside
a level folder, and a JSON round trip."""

from __future__ import annotations

import pytest

from torchroofline.suites.batch_report import NO_LEVEL, BatchReport, ProblemReport, beats_sol


def _problem(level, measured_ms, gen_ms, sol_ms=2.0, status="ok", bottleneck="memory"):
    result = {"time_ms": {"sol": sol_ms}, "bottleneck": bottleneck} if status == "ok" else None
    return ProblemReport(
        level, f"{level}_x.py", f"level{level}/{level}_x.py", "x", status,
        None if status == "ok" else "boom", 0.1, result, measured_ms, gen_ms,
    )


def test_derived_figures():
    problem = _problem(1, measured_ms=4.0, gen_ms=1.0)  # SoL 2 ms
    assert problem.sol_fraction == pytest.approx(0.5)  # 2 / 4
    assert problem.gen_sol_fraction == pytest.approx(2.0)  # 2 / 1
    assert problem.speedup == pytest.approx(4.0)  # 4 / 1
    assert not problem.impossible and problem.gen_impossible  # 1 ms < 2 ms
    unmeasured = _problem(1, measured_ms=None, gen_ms=None)
    assert unmeasured.sol_fraction is None and unmeasured.speedup is None
    assert not unmeasured.impossible


def test_beats_sol_is_strict():
    assert beats_sol(2.0, 1.0) and not beats_sol(2.0, 2.0)
    assert not beats_sol(None, 1.0) and not beats_sol(2.0, None) and not beats_sol(2.0, 0.0)


def test_summary_per_level_and_no_level():
    report = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (
        _problem(1, 4.0, None),
        _problem(1, 1.0, None, bottleneck="compute"),  # impossible
        _problem(None, 8.0, None),
        _problem(2, None, None, status="failed"),
    ))
    summary = report.summary
    assert set(summary) == {"all", "level1", NO_LEVEL, "level2"}
    assert (summary["all"]["problems"], summary["all"]["failed"], report.failed) == (4, 1, 1)
    assert summary["level1"]["impossible"] == 1
    assert summary["level1"]["compute_bound"] == 1 and summary["level1"]["memory_bound"] == 1
    assert summary["level1"]["median_sol_fraction"] == pytest.approx((0.5 + 2.0) / 2)
    assert summary[NO_LEVEL]["median_sol_fraction"] == pytest.approx(0.25)


def test_json_round_trip():
    report = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (
        _problem(1, 4.0, 1.0), _problem(None, None, None, status="failed"),
    ))
    data = report.to_dict()
    assert data["problems"][0]["speedup"] == pytest.approx(4.0)
    assert BatchReport.from_dict(data) == report
