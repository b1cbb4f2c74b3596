"""The HTML page (present/html.py): the same numbers as the JSON, and in a real headless browser
(Chromium) it loads without a script error, its table sorts and its roofline is drawn."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from torchroofline.present.html import page_html, suite_html, sweep_html, trace_html
from torchroofline.suites.batch_report import BatchReport, ProblemReport
from torchroofline.suites.kineto import analyze_trace
from torchroofline.suites.sweep import sweep_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
BERT_TRACE = FIXTURES / "traces" / "h100_gaunernst_bert-small-uncased__1016001.json.gz"
CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser", "google-chrome")
     if (found := shutil.which(name))),
    None,
)
needs_browser = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium binary on PATH (apt-get install chromium): the HTML page's browser "
    "test is skipped",
)
PALETTE_FIRST = (0x1F, 0x77, 0xB4)  #: html_page.js's first group colour


def small_sweep():
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    return sweep_model(model, lambda batch: (torch.empty(batch, 256, device="meta"),),
                       {"batch": [1, 64, 4096]}, ["h100", "l40s"])


def embedded(page: str, element: str) -> dict:
    found = re.search(f'<script type="application/json" id="{element}">(.*?)</script>', page,
                      re.S)
    return json.loads(found.group(1))


def test_sweep_page_carries_the_json_and_its_numbers():
    sweep = small_sweep()
    page = sweep_html(sweep)
    assert embedded(page, "document-data") == json.loads(json.dumps(sweep.to_dict()))
    rows = embedded(page, "page-data")["rows"]
    assert [row["sol_ms"] for row in rows] == [p.sol_ms for p in sweep.points]
    assert [row["batch"] for row in rows] == [p.values["batch"] for p in sweep.points]


def test_script_end_tag_in_data_cannot_close_the_script():
    page = page_html("t", [], [], [{"name": "</script><b>"}], [], [], ("Notes", []), {},
                     "x", "y")
    assert page.count("</script>") == 4  # the error hook, two data blocks, the page script


def run_browser(page: str, tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The page opened headless at #selftest: its <html>/<body> attributes, and a screenshot."""
    path, shot = tmp_path / "page.html", tmp_path / "shot.png"
    path.write_text(page, encoding="utf-8")
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1000",
         f"--screenshot={shot}", "--dump-dom", f"{path.as_uri()}#selftest"],
        capture_output=True, text=True, timeout=120,
    )
    tags = re.findall(r"<(?:html|body)\b[^>]*>", done.stdout)
    attributes = dict(re.findall(r'data-([\w-]+)="([^"]*)"', " ".join(tags)))
    return attributes, shot


@needs_browser
@pytest.mark.parametrize("kind", ["sweep", "suite", "trace"])
def test_page_in_a_headless_browser(kind, tmp_path):
    page = {"sweep": lambda: sweep_html(small_sweep()), "suite": suite_page,
            "trace": lambda: trace_html(analyze_trace(BERT_TRACE))}[kind]()
    attributes, shot = run_browser(page, tmp_path)
    assert "error" not in attributes, attributes["error"]
    assert attributes.get("ready") == "1"
    # the self-test clicked the first numeric heading twice: ascending, then descending
    assert "ascending=true descending=true" in attributes["selftest"]
    if kind == "sweep":
        image = pytest.importorskip("matplotlib.image").imread(shot)
        plot = (image[:560, :, :3] * 255).round()  # the roofline sits at the top of the page
        first = ((abs(plot - PALETTE_FIRST) <= 2).all(axis=-1)).sum()
        assert first > 500  # the first GPU's roof, path and points, not just its legend dot


def suite_page() -> str:
    from torchroofline.suites.kernelbench import analyze_file

    result = analyze_file(FIXTURES / "kernelbench" / "level1" / "23_Softmax.py", "h100")
    problems = (
        ProblemReport(1, "23_Softmax.py", "level1/23_Softmax.py", "level1/23_Softmax.py", "ok",
                      None, 0.1, result.to_dict(), 4.38, None),
        ProblemReport(1, "9_Bad.py", "level1/9_Bad.py", "level1/9_Bad.py", "failed",
                      "ProblemFileError: no Model", 0.0, None, None, None),
    )
    return suite_html(BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", problems))


def test_the_suite_page_draws_the_roof_of_every_problem():
    # the page drew the first problem's roofs only: at bf16 on the H100, a softmax's vector
    # roof (133.8 TFLOP/s), far under which a matmul's speed of light on the tensor cores
    # (989.4) was drawn, above every roof
    from torchroofline.suites.kernelbench import analyze_file

    problems = tuple(
        ProblemReport(1, name, f"level1/{name}", f"level1/{name}", "ok", None, 0.1,
                      analyze_file(FIXTURES / "kernelbench" / "level1" / name, "h100",
                                   precision="bf16").to_dict(), None, None)
        for name in ("23_Softmax.py", "1_Square_matrix_multiplication_.py")
    )
    data = embedded(suite_html(BatchReport("H100 SXM", "h100-sxm", "bf16", "cold", problems)),
                    "page-data")
    top = max(peak["flops_per_s"] for roof in data["roofs"] for peak in roof["peaks"])
    at_sol = [point["y"] for point in data["points"] if point["group"] == "at SoL"]
    assert len(at_sol) == 2 and max(at_sol) == pytest.approx(top)  # the matmul, at its roof
    labels = [peak["label"] for roof in data["roofs"] for peak in roof["peaks"]]
    assert len(labels) == len(set(labels)) == 2  # each roof once, however many share it


def test_the_trace_page_starts_its_ops_at_the_first_one():
    # the profiler's clock is µs since boot or the epoch: "2.204e+12" in every row; the page
    # counts from the first op, the JSON keeps the trace's own clock (to join it to the trace)
    report = analyze_trace(BERT_TRACE)
    page = trace_html(report)
    starts_ms = [row["start_ms"] for row in embedded(page, "page-data")["rows"]]
    absolute_us = [op["start_us"] for op in embedded(page, "document-data")["ops"]]
    assert min(starts_ms) == 0 and min(absolute_us) > 1e9
    assert starts_ms == pytest.approx([(start - min(absolute_us)) / 1e3 for start in absolute_us])


def test_trace_and_suite_commands_write_the_page(tmp_path):
    from torchroofline.cli import main

    page, report = tmp_path / "trace.html", tmp_path / "trace.json"
    assert main(["trace", str(BERT_TRACE), "--format", "html", "--out", str(page)]) == 0
    assert main(["trace", str(BERT_TRACE), "--format", "json", "--out", str(report)]) == 0
    assert embedded(page.read_text(), "document-data") == json.loads(report.read_text())
    suite = tmp_path / "suite.html"
    problem = FIXTURES / "kernelbench" / "level1" / "23_Softmax.py"
    assert main(["kernelbench", str(problem), "--out", str(suite)]) == 0
    rows = embedded(suite.read_text(), "page-data")["rows"]
    assert [row["name"] for row in rows] == ["level1/23_Softmax.py"]
