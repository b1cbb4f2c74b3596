"""One verdict (:func:`torchroofline.price.verdicts.verdict`) feeds every output (issue 38): for
each of its six kinds, a time judged by the text report, the JSON, the KernelBench comparison, the
suite table, CSV and page, a run's sample and the pictures reads the same kind and words. The
kinds are built on three programs: a fp32 GEMM on a B200 (headroom, lower math, impossible), the
column sum of a GEMM whose bound takes the shortcut "sum through the linear map" (shortcut,
shortcut or lower math), and a KernelBench problem whose output is a constant (a softmax over a
dim of size 1: tests/fixtures/kernelbench_constant). ``torchroofline trace`` judges each op and
each module the same way, on their warm ladders (an fp32 GEMM on CUDA cores timed at headroom,
lower math and impossible)."""

from __future__ import annotations

import csv
import io
import json
import re
from functools import cache
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from conftest import meta
from torchroofline import analyze
from torchroofline.cli import main
from torchroofline.present.html import suite_html, trace_html
from torchroofline.present.report import suite_csv, suite_markdown
from torchroofline.price.roofline import Result
from torchroofline.price.verdicts import verdict
from torchroofline.suites.batch_report import BatchReport, ProblemReport
from torchroofline.suites.kernelbench import analyze_file, compare_kernelbench
from torchroofline.suites.kineto import analyze_trace
from torchroofline.suites.kineto.report import WRITERS
from torchroofline.suites.runs import Run, RunReport, Sample, join_run, run_markdown
from torchroofline.units import times

FIXTURES = Path(__file__).parents[1] / "fixtures"
CONSTANT = FIXTURES / "kernelbench_constant" / "level2" / "66_Matmul_Mean_Softmax.py"
#: two 1024³ fp32 GEMMs on an H100, the second on CUDA cores (its kernel's name says no TF32)
TF32_TRACE = FIXTURES / "traces" / "tiny_tf32.json"
N = 4096  #: the GEMMs' size: compute-bound in fp32, and the column sum far from its bound


class ColumnSum(nn.Module):
    """(x @ Wᵀ / 2).sum(1): the bound reads x and W once (x @ (Wᵀ.sum(1) / 2))."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(N, N, bias=False, device="meta")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.fc(x) / 2).sum(1)


@cache
def _gemm() -> Result:
    return analyze(nn.Linear(N, N, device="meta"), meta(N, N), "b200", "fp32")


@cache
def _column_sum() -> Result:
    return analyze(ColumnSum(), meta(N, N), "h100", "fp32")


@cache
def _constant() -> Result:
    return analyze_file(CONSTANT, "h100", "fp32")


def _timed(kind: str) -> tuple[Result, float]:
    """A result and a time (ms) its verdict reads as ``kind``, chosen from its ladders."""
    if kind in ("headroom", "lower math", "impossible"):
        result = _gemm()
        ladder = {rung: s * 1e3 for rung, s in result.sol_by_math_s.items()}
        below = sorted(value for value in ladder.values() if value < result.sol_ms)
        times = {"headroom": 4 * result.sol_ms, "lower math": (below[-1] + result.sol_ms) / 2,
                 "impossible": min(ladder.values()) / 2}
        return result, times[kind]
    if kind == "constant output":
        return _constant(), 0.05
    result = _column_sum()
    written = {rung: s * 1e3 for rung, s in result.sol_as_written_by_math_s.items()}
    # above the bound, below the bound as written at every rung: the shortcut alone explains
    # it; between the lowest rung as written above it and the program's: the shortcut, or the
    # lower math as written
    assert result.sol_ms < min(written.values())
    times = {"shortcut": (result.sol_ms + min(written.values())) / 2,
             "shortcut or lower math": (written["program"] + written["tf32"]) / 2}
    return result, times[kind]


KINDS = ("headroom", "lower math", "impossible", "shortcut", "shortcut or lower math",
         "constant output")


def _problem(result: Result, time_ms: float) -> ProblemReport:
    return ProblemReport(2, "66_x.py", "level2/66_x.py", "level2/66_x.py", "ok", None, 0.1,
                         result.to_dict(), time_ms, time_ms)


def _page_rows(page: str) -> list[dict]:
    embedded = re.search(r'id="page-data">(.*?)</script>', page, re.S).group(1)
    return json.loads(embedded.replace("<\\/", "</"))["rows"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_report_reads_the_one_verdict(kind: str) -> None:
    result, time_ms = _timed(kind)
    judged = result.judge(time_ms)
    assert judged.kind == kind
    timed = result.with_actual(time_ms)
    # the text report and the JSON
    assert judged.sentence in timed.format()
    actual = timed.to_dict()["actual"]
    assert (actual["verdict_kind"], actual["verdict_short"]) == (kind, judged.short)
    assert actual["impossible"] == (kind == "impossible")
    assert (actual["sol_fraction"] is None) == (kind == "constant output")
    # KernelBench's comparison of a reference and a generated time
    comparison = compare_kernelbench(result, time_ms, time_ms)
    data = comparison.to_dict()
    for side in ("ref", "gen"):
        assert (data[f"{side}_verdict_kind"], data[f"{side}_verdict"]) == (kind, judged.text)
        assert data[f"{side}_shortcut"] == judged.shortcut
    assert comparison.format().count(judged.sentence) == 2
    # the suite: JSON, CSV, Markdown and page
    problem = _problem(result, time_ms)
    report = BatchReport("GPU", "gpu", "fp32", "cold", (problem,))
    entry = report.to_dict()["problems"][0]
    for prefix in ("", "gen_"):
        assert entry[f"{prefix}verdict_kind"] == kind
        assert entry[f"{prefix}shortcut_verdict"] == judged.shortcut
        assert entry[f"{prefix}impossible"] == (kind == "impossible")
        assert (entry[f"{prefix}sol_fraction"] is None) == (kind == "constant output")
    [row] = csv.DictReader(io.StringIO(suite_csv(report)))
    assert row["shortcut_verdict"] == (judged.shortcut or "")
    assert row["gen_faster_than_light"] == str(kind == "impossible")
    markdown = suite_markdown(report).strip().splitlines()[-1]
    assert ("— (constant output)" in markdown) == (kind == "constant output")
    assert ("under SoL" in markdown) == (kind in ("lower math", "impossible"))
    [page_row] = _page_rows(suite_html(report))
    assert page_row["verdict"] == judged.short
    # a KernelBench run's sample timed the same
    sample = Sample(2, 66, 0, None, "cuda", True, True, time_ms, None, None)
    run = join_run(Run("runs/one", (sample,)), report)
    [joined] = run.samples
    assert joined.verdict == judged
    saved = joined.to_dict()
    assert (saved["verdict_kind"], saved["shortcut_verdict"]) == (kind, judged.shortcut)
    assert saved["faster_than_light"] == (kind == "impossible")
    assert joined.lower_math == (kind == "lower math")
    assert (joined.sol_fraction is None) == (kind == "constant output")
    assert RunReport.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    cells = run_markdown(run).strip().splitlines()[-1]
    assert ("— (constant output)" in cells) == (kind == "constant output")


@pytest.mark.parametrize("kind", KINDS)
def test_the_pictures_read_the_one_verdict(kind: str) -> None:
    pytest.importorskip("matplotlib")
    from torchroofline.present import viz
    from torchroofline.present.viz.suite import with_measured

    result, time_ms = _timed(kind)
    judged = result.judge(time_ms)
    # the analysis's picture, and the suite's per-problem picture of a result saved without a
    # time (the batch's), whose time the suite report gives
    saved = result.to_dict()
    assert saved.get("actual") is None
    problem = ProblemReport(2, "66_x.py", "level2/66_x.py", "66_x", "ok", None, 0.1, saved,
                            time_ms, None)
    for figure in (result.with_actual(time_ms).plot(),
                   viz.plot_result_dict(with_measured(problem))):
        # the measured point's label; a program without FLOPs (the constant) has no point, and
        # the note below the picture says it
        texts = [artist.get_text() for artist in figure.findobj(
            lambda artist: artist.get_gid() in ("label:model:measured", "note"))]
        [text] = [line for text in texts for line in text.splitlines()
                  if line.startswith("measured")]
        assert ("IMPOSSIBLE" in text) == (kind == "impossible")
        if kind not in ("headroom", "impossible"):
            assert judged.short in text
        assert bool(re.search(r"\d% of SoL", text)) == judged.measures_kernel


def _trace_timed(tmp_path: Path, kind: str) -> tuple[Path, dict[str, float]]:
    """The TF32 trace with its CUDA-core GEMM inside a module ``Gemm_0`` and timed so that its
    verdict is ``kind``: four times its bound, between its TF32 and its fp32 bound, or under
    every rung; and that GEMM's warm ladder (ms per rung)."""
    simt = analyze_trace(TF32_TRACE).instances[1]
    ladder = {rung: s * 1e3 for rung, s in simt.figures.sol_warm_by_math_s.items()}
    # the fp32 GEMM's 2·1024³ FLOPs at the H100's 67 TFLOP/s CUDA cores, 32.1 µs; at 495
    # TFLOP/s TF32, 4.3 µs: a time between is possible only with TF32 math
    assert ladder["tf32"] < ladder["program"] / 5
    time_us = {"headroom": 4 * ladder["program"], "lower math": ladder["program"] / 2,
               "impossible": min(ladder.values()) / 2}[kind] * 1e3
    document = json.loads(TF32_TRACE.read_text())
    for event in document["traceEvents"]:
        if "simt_sgemm" in event["name"]:
            event["dur"] = time_us
    document["traceEvents"].append({"ph": "X", "cat": "python_function", "name":
                                    "nn.Module: Gemm_0", "pid": 1, "tid": 1, "ts": 125,
                                    "dur": 30, "args": {}})
    path = tmp_path / f"{kind.replace(' ', '_')}.json"
    path.write_text(json.dumps(document))
    return path, ladder


@pytest.mark.parametrize("kind", ("headroom", "lower math", "impossible"))
def test_trace_reads_the_one_verdict(tmp_path: Path, kind: str, capsys) -> None:
    path, ladder = _trace_timed(tmp_path, kind)
    report = analyze_trace(path)
    instance = report.instances[1]
    # the one verdict, on the op's measured time and warm ladder at its own (fp32) math
    judged = verdict(instance.measured_us * 1e-3, ladder, "program", "fp32")
    assert judged.kind == kind and instance.verdict == judged
    # the op, its kind's and its module's rows, in the JSON (the module holds that op alone)
    data = report.to_dict()
    op = data["ops"][1]
    [module] = [row for row in data["modules"] if row["kind"] == "Gemm"]
    [row] = [row for row in data["kinds"] if row["kind"] == "aten::mm"]
    assert (op["verdict_kind"], op["verdict"]) == (kind, judged.text)
    assert op["faster_than_light"] == (kind == "impossible")
    assert (module["verdict_kind"], module["verdict"]) == (kind, judged.text)
    # both mm ops summed: the TF32 one (12 µs, above every rung) lifts the kind's row
    both = verdict((12 + instance.measured_us) * 1e-3,
                   {rung: sol + report.instances[0].figures.sol_warm_by_math_s[rung] * 1e3
                    for rung, sol in ladder.items()}, "program", "fp32")
    assert (row["verdict_kind"], row["verdict"]) == (both.kind, both.text)
    # the text: the module's cell, and the op listed with the verdict's sentence where it beats
    # its bound at its own math
    text = WRITERS["text"](report)
    module_line = next(line for line in text.splitlines() if line.startswith("Gemm "))
    # the headroom written as every report writes a ratio (the suite tables: "1.98e+03x", where
    # the trace once wrote "1,980.0x")
    cell = times(judged.headroom) if kind == "headroom" else judged.short
    assert cell in module_line and f"{judged.sol_fraction:.1%}" in module_line
    assert (judged.text in text) == (kind != "headroom")
    # the CSV
    csv_row = list(csv.DictReader(io.StringIO(WRITERS["csv"](report))))[1]
    assert (csv_row["verdict_kind"], csv_row["verdict"]) == (kind, judged.text)
    # the page, and the exit code: 3 only where no math reaches the time
    [page_op] = [r for r in _page_rows(trace_html(report)) if r["measured_us"] == op[
        "measured_us"]]
    assert page_op["verdict"] == judged.short
    assert main(["trace", str(path), "--format", "json"]) == (3 if kind == "impossible" else 0)
    capsys.readouterr()
    # the picture rings the op as the text lists it
    pytest.importorskip("matplotlib")
    from torchroofline.present.viz import plot_trace

    rings = {artist.get_gid() for artist in plot_trace(report).findobj()} & {
        "faster-than-light", "lower-math"}
    assert rings == {"impossible": {"faster-than-light"}, "lower math": {"lower-math"},
                     "headroom": set()}[kind]
