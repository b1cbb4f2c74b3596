"""Suite reports and run directories give the single result's algebraic-shortcut verdict: a time
between the speed of light (after the shortcut) and the bound as written is "possible only with
an algebraic shortcut (…)", never faster than light, and a run sample's SoL score is taken against
the bound that verdict uses. The problem (tests/fixtures/kernelbench_shortcut): (x @ W / 2).sum(1).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from conftest import H100_BANDWIDTH, H100_FP32
from torchroofline.present.report import suite_csv, suite_markdown, suite_summary_line
from torchroofline.suites.batch_report import BatchReport, ProblemReport
from torchroofline.suites.kernelbench import analyze_file
from torchroofline.suites.runs import Run, RunReport, Sample, join_run, run_csv, run_markdown

PROBLEM = (
    Path(__file__).parents[1] / "fixtures" / "kernelbench_shortcut" / "level2"
    / "14_Gemm_Divide_Sum.py"
)
M, K, N = 2048, 1024, 1024  # x (M, K), W (K, N): the fixture's sizes
# After the shortcut the work is x @ (W.sum(1) / 2): memory-bound, the compulsory bytes are
# x, W and the (M,) output in fp32 (4 B each).
SOL_MS = 4 * (M * K + K * N + M) / H100_BANDWIDTH * 1e3
# As written, compute-bound on fp32 CUDA cores: the GEMM's 2·M·K·N FLOPs, M·N divides and the
# sum's M·N adds (the sum is charged one add per element).
AS_WRITTEN_MS = (2 * M * K * N + M * N + M * N) / H100_FP32 * 1e3
RULE = "<top level>, sum through the linear map"
VERDICT = f"possible only with an algebraic shortcut ({RULE})"
# As written with TF32 math the GEMM takes 2·M·K·N / 494.7 TFLOP/s = 8.7 µs: a time between
# that and the fp32 bound as written (64 µs) is explained by the shortcut or by TF32 math; with
# FP8 (1,979 TFLOP/s: 2.2 µs) the program as written is memory-bound at the bound itself
BOTH = f"{VERDICT}, or as written with TF32 or lower math (check your tolerance)"
AT_SOL = f"{VERDICT}, or as written with FP8 or lower math (check your tolerance)"


@pytest.fixture(scope="module")
def result() -> dict:
    return analyze_file(PROBLEM, "h100", "fp32").to_dict()


def _problem(result: dict, measured_ms: float | None, gen_ms: float | None) -> ProblemReport:
    return ProblemReport(
        2, PROBLEM.name, str(PROBLEM), PROBLEM.stem, "ok", None, 0.1, result, measured_ms, gen_ms
    )


def test_both_bounds_closed_form(result):
    problem = _problem(result, None, None)
    assert problem.sol_ms == pytest.approx(SOL_MS, rel=1e-9)
    assert problem.sol_as_written_ms == pytest.approx(AS_WRITTEN_MS, rel=1e-9)
    assert problem.shortcut == RULE


def test_problem_verdicts(result):
    between = (SOL_MS + AS_WRITTEN_MS) / 2
    problem = _problem(result, measured_ms=2 * AS_WRITTEN_MS, gen_ms=between)
    assert problem.shortcut_verdict is None  # slower than the bound as written: no shortcut needed
    assert problem.gen_shortcut_verdict == BOTH
    assert not problem.gen_impossible and problem.gen_possible_with == "program"
    at_sol = _problem(result, measured_ms=SOL_MS, gen_ms=SOL_MS / 2)
    assert at_sol.shortcut_verdict == AT_SOL  # the bound is reachable, with the shortcut or FP8
    assert at_sol.gen_shortcut_verdict is None and at_sol.gen_impossible  # below every bound
    summary = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (problem, at_sol)).summary
    assert (summary["level2"]["shortcut_only"], summary["level2"]["gen_shortcut_only"]) == (1, 1)


def test_suite_report_carries_the_verdict(result):
    between = (SOL_MS + AS_WRITTEN_MS) / 2
    report = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (
        _problem(result, measured_ms=between, gen_ms=None),
    ))
    [row] = csv.DictReader(io.StringIO(suite_csv(report)))
    assert (row["shortcut"], row["shortcut_verdict"]) == (RULE, BOTH)
    assert float(row["sol_as_written_ms"]) == pytest.approx(AS_WRITTEN_MS)
    text = suite_markdown(report)
    assert f"| {BOTH} |" in text and "| 0 | 1 |" in text  # measured < SoL 0, shortcut-only 1
    assert suite_summary_line(report).endswith(
        "; 1 time(s) possible only with an algebraic shortcut"
    )
    data = json.loads(json.dumps(report.to_dict()))
    assert data["problems"][0]["shortcut_verdict"] == BOTH
    assert BatchReport.from_dict(data) == report


def test_run_sample_between_the_bounds(result):
    ref_ms = 2 * AS_WRITTEN_MS
    runtime_ms = (SOL_MS + AS_WRITTEN_MS) / 2
    sample = Sample(2, 14, 0, None, "cuda", True, True, runtime_ms, None, None)
    batch = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (_problem(result, ref_ms, None),))
    run = join_run(Run("runs/shortcut", (sample,)), batch)
    [joined] = run.samples
    assert joined.shortcut_verdict == BOTH and not joined.faster_than_light
    assert joined.to_dict()["sol_as_written_ms"] == pytest.approx(AS_WRITTEN_MS)
    # scored against the bound the verdict uses, SoL after the shortcut:
    # 1 / (1 + (T_k − T_sol) / (T_ref − T_sol))
    score = 1 / (1 + (runtime_ms - SOL_MS) / (ref_ms - SOL_MS))
    assert joined.sol_score == pytest.approx(score)
    assert run.summary["level2"]["shortcut_only"] == 1
    text = run_markdown(run)
    assert f"| {BOTH} | no | {score:.3f} |" in text
    assert "| level2 | 1 | 1 | 1 | 0 | 1 |" in text  # faster than light 0, shortcut-only 1
    [row] = csv.DictReader(io.StringIO(run_csv(run)))
    assert (row["shortcut_verdict"], row["faster_than_light"]) == (BOTH, "False")
    assert RunReport.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_a_sum_the_demand_walk_moves_into_the_product_is_a_named_shortcut():
    # Linear(x).sum(1): the demand walk's reduced product prices x @ W.sum(1) + b.sum()
    # (memory-bound: x, W, b and the (M,) output); as written it is the addmm's 2·M·K·N
    # FLOPs (the bias add rides in the epilogue: no FLOPs charged), then M·N adds of the sum,
    # on fp32 CUDA cores. The same
    # shortcut as the rewrite's, named the same, with the same verdict and suite counts.
    problem_file = PROBLEM.with_name("18_Linear_Sum.py")
    data = analyze_file(problem_file, "h100", "fp32").to_dict()
    sol_ms = 4 * (M * K + K * N + N + M) / H100_BANDWIDTH * 1e3
    as_written_ms = (2 * M * K * N + M * N) / H100_FP32 * 1e3
    assert data["time_ms"]["sol"] == pytest.approx(sol_ms, rel=1e-9)
    assert data["time_ms"]["sol_as_written"] == pytest.approx(as_written_ms, rel=1e-9)
    assert [(r["module"], r["rule"]) for r in data["rewrites"]] == [
        ("linear", "sum through the linear map")
    ]
    between = (sol_ms + as_written_ms) / 2
    problem = ProblemReport(2, problem_file.name, str(problem_file), problem_file.stem, "ok",
                            None, 0.1, data, between, None)
    verdict = "possible only with an algebraic shortcut (linear, sum through the linear map)"
    assert problem.shortcut_verdict == f"{verdict}, or as written with TF32 or lower math " \
        "(check your tolerance)"
    summary = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (problem,)).summary
    assert summary["level2"]["shortcut_only"] == 1

