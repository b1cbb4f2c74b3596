"""KernelBench run folders: reading a run, joining its samples with their problems' speed of
light, the SoL score, the fast_sol shares and the faster-than-light list."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from torchroofline.errors import InputError
from torchroofline.suites.batch_report import BatchReport, ProblemReport
from torchroofline.suites.runs import (
    KernelName,
    Run,
    RunReport,
    Sample,
    join_run,
    kernel_backend,
    load_run,
    parse_kernel_name,
    run_csv,
    run_markdown,
    sol_score,
)

RUN = Path(__file__).parents[1] / "fixtures" / "kernelbench_run" / "runs" / "demo"


def test_kernel_names_and_backends():
    assert parse_kernel_name("level_1_problem_19_sample_3_kernel.py") == KernelName(1, 19, 3)
    assert parse_kernel_name("19_ReLU.py") is None
    assert kernel_backend("from torch.utils.cpp_extension import load_inline") == "cuda"
    assert kernel_backend("import torch\nimport triton.language as tl\n") == "triton"
    assert kernel_backend("# we do not use triton here\nimport torch") == "pytorch"


def test_sol_score_closed_forms():
    # 1 / (1 + (T_k - T_sol) / (T_ref - T_sol)) with T_sol = 1 ms, T_ref = 3 ms
    assert sol_score(1.0, 1.0, 3.0) == pytest.approx(1.0)  # at the speed of light
    assert sol_score(3.0, 1.0, 3.0) == pytest.approx(0.5)  # as fast as the reference
    assert sol_score(5.0, 1.0, 3.0) == pytest.approx(1 / 3)  # 1 / (1 + 4/2)
    assert sol_score(2.0, 1.0, 3.0) == pytest.approx(2 / 3)  # 1 / (1 + 1/2)
    assert sol_score(0.5, 1.0, 3.0) is None  # faster than light: flagged, not scored
    assert sol_score(2.0, 1.0, 0.9) is None  # the reference beats SoL: no scale
    assert sol_score(2.0, 1.0, None) is None and sol_score(None, 1.0, 3.0) is None


def test_load_run_reads_every_sample():
    run = load_run(RUN)
    keys = [(s.problem_id, s.sample_id) for s in run.samples]
    assert keys == [(1, 0), (1, 1), (23, 0), (23, 1), (40, 0), (40, 1)]
    assert {s.level for s in run.samples} == {1}
    assert [s.backend for s in run.samples] == [
        "cuda", "triton", "pytorch", "cuda", "cuda", "triton",
    ]
    assert [(s.compiled, s.correct) for s in run.samples] == [
        (True, True), (True, True), (True, True), (True, False), (False, False), (True, True),
    ]
    # KernelBench writes runtime -1.0 for a sample it did not time
    assert [s.runtime_ms for s in run.samples] == [0.35, 0.01, 5.0, None, None, 0.2]
    assert run.samples[5].ref_runtime_ms == 0.5
    assert run.samples[3].error == "correctness_issue: Output mismatch"
    assert run.samples[4].error.startswith("compilation_error: Error building extension")


def test_a_runtime_of_nan_or_inf_is_no_time(tmp_path):
    # inf (1e400) was taken as a time: "0.0%" of SoL
    (tmp_path / "eval_results.json").write_text(
        '{"7": {"sample_id": 0, "compiled": true, "correctness": true, "runtime": 1e400}, '
        '"8": {"sample_id": 0, "compiled": true, "correctness": true, "runtime": NaN}}'
    )
    run = load_run(tmp_path)
    assert [s.runtime_ms for s in run.samples] == [None, None]


def test_load_run_older_layout_and_files_without_an_entry(tmp_path):
    (tmp_path / "eval_results.json").write_text(json.dumps(
        {"7": {"sample_id": 0, "compiled": True, "correctness": True, "runtime": 1.5}}
    ))
    (tmp_path / "level_2_problem_7_sample_0_kernel.py").write_text("class ModelNew: pass\n")
    (tmp_path / "level_2_problem_8_sample_0_kernel.py").write_text("import triton\n")
    run = load_run(tmp_path)
    first, second = run.samples
    assert (first.level, first.problem_id, first.runtime_ms) == (2, 7, 1.5)
    assert (second.problem_id, second.compiled, second.backend) == (8, False, "triton")
    assert second.error == "no entry in eval_results.json"


def test_load_run_without_eval_results(tmp_path):
    with pytest.raises(InputError, match="no eval_results.json.*--run runs/<run>"):
        load_run(tmp_path)


def _problem(file: str, sol_ms: float, measured_ms: float | None) -> ProblemReport:
    result = {"time_ms": {"sol": sol_ms}, "bottleneck": "memory"}
    return ProblemReport(
        1, file, f"level1/{file}", f"level1/{file}", "ok", None, 0.1, result, measured_ms, None
    )


@pytest.fixture
def joined():
    """The fixture run against hand-set speeds of light and reference times (ms)."""
    batch = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (
        _problem("1_Matmul.py", sol_ms=0.25, measured_ms=0.4),
        _problem("23_Softmax.py", sol_ms=4.0, measured_ms=4.4),
        _problem("40_LayerNorm.py", sol_ms=0.16, measured_ms=None),  # ref: the run's 0.5 ms
    ))
    return join_run(load_run(RUN), batch)


def test_per_sample_figures(joined):
    by_key = {(s.sample.problem_id, s.sample.sample_id): s for s in joined.samples}
    matmul = by_key[(1, 0)]
    assert matmul.problem == "1_Matmul.py"
    assert matmul.sol_fraction == pytest.approx(0.25 / 0.35)
    assert matmul.sol_score == pytest.approx(0.6)  # 1 / (1 + 0.10/0.15)
    hacked = by_key[(1, 1)]
    assert hacked.faster_than_light and hacked.sol_score is None
    assert hacked.sol_fraction == pytest.approx(25)
    softmax = by_key[(23, 0)]
    assert softmax.sol_score == pytest.approx(1 / 3.5)  # 1 / (1 + 1.0/0.4)
    layer_norm = by_key[(40, 1)]
    assert layer_norm.ref_ms == 0.5  # no --timings entry: KernelBench's own ref_runtime
    assert layer_norm.sol_score == pytest.approx(0.34 / 0.38)  # 1 / (1 + 0.04/0.34)
    incorrect, uncompiled = by_key[(23, 1)], by_key[(40, 0)]
    for untimed in (incorrect, uncompiled):
        assert untimed.sol_fraction is None and untimed.sol_score is None
        assert not untimed.faster_than_light


def test_level_summary(joined):
    level = joined.summary["level1"]
    assert joined.summary["all"] == level
    assert (level["samples"], level["compiled"], level["correct"]) == (6, 5, 4)
    assert level["faster_than_light"] == 1
    # correct and not faster than light: 0.714 (1/0), 0.8 (23/0), 0.8 (40/1) of SoL, of 6
    assert level["fast_sol_25"] == pytest.approx(3 / 6)
    assert level["fast_sol_50"] == pytest.approx(3 / 6)
    assert level["fast_sol_75"] == pytest.approx(2 / 6)
    assert level["median_sol_score"] == pytest.approx(0.6)  # of 0.6, 0.286, 0.895
    assert [s.name for s in joined.faster_than_light] == ["level1 problem 1 sample 1"]


def test_samples_without_an_analyzed_problem(joined):
    batch = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (
        _problem("1_Matmul.py", 0.25, 0.4),
    ))
    partial = join_run(load_run(RUN), batch)
    assert len(partial.unmatched) == 4
    assert all(s.sol_fraction is None and not s.faster_than_light for s in partial.unmatched)


def test_markdown_csv_and_json(joined):
    text = run_markdown(joined)
    assert "| level1 | 6 | 5 | 4 | 1 | 0 | 50.0% | 50.0% | 33.3% | 0.600 |" in text
    assert "- level1 problem 1 sample 1 (1_Matmul.py, triton): 0.01 ms against a 0.25 ms" in text
    row = (
        "| 1 | 1_Matmul.py | 1 | triton | yes | yes | 0.01 | 0.4 | 0.25 | 2500.0% |  |  | **YES** |"
    )
    assert row in text
    rows = list(csv.DictReader(io.StringIO(run_csv(joined))))
    assert len(rows) == 6 and rows[1]["faster_than_light"] == "True"
    data = json.loads(json.dumps(joined.to_dict()))
    assert data["faster_than_light"] == ["level1 problem 1 sample 1"]
    assert data["summary"]["level1"]["fast_sol_75"] == pytest.approx(1 / 3)
    assert data["samples"][0]["sol_score"] == pytest.approx(0.6)


def test_json_round_trip(joined):
    assert RunReport.from_dict(json.loads(json.dumps(joined.to_dict()))) == joined


def test_plot_a_saved_run_report(joined, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(joined.to_dict()))
    code, out, _ = _main(capsys, "plot", saved, "--out", tmp_path / "pictures")
    assert code == 0 and str(tmp_path / "pictures" / "run_sol.png") in out.splitlines()


def test_empty_run_renders(tmp_path):
    nothing = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", ())
    empty = join_run(Run(str(tmp_path), ()), nothing)
    assert empty.summary["all"]["fast_sol_50"] is None
    assert "- none" in run_markdown(empty)
    assert run_csv(empty).startswith("level,")


def test_run_picture(joined, tmp_path):
    pytest.importorskip("matplotlib")
    from torchroofline.present.viz import plot_run

    fig = plot_run(joined, tmp_path / "run.png")
    assert (tmp_path / "run.png").stat().st_size > 0
    strip = fig.axes[0]
    ringed = [c for c in strip.collections if c.get_gid() == "faster-than-light"]
    assert len(ringed[0].get_offsets()) == 1
    assert [c for c in strip.collections if c.get_gid() == "samples:correct"][0].get_offsets()[
        :, 1
    ].max() == pytest.approx(2500.0)  # the 0.01 ms sample against its 0.25 ms bound


def test_a_lower_math_sample_reads_the_same_in_picture_table_and_json(tmp_path):
    # a 0.45 ms sample of a problem whose fp32 bound is 2.05 ms and TF32 bound 0.278 ms (the
    # H100 Linear(4096) ladder): possible with TF32 math, not faster than light, and scored
    # against the TF32 bound: 1 / (1 + (0.45 − 0.278) / (4.0 − 0.278))
    ladder = {"program": 2.05, "tf32": 0.278, "fp16": 0.139}
    result = {"time_ms": {"sol": 2.05, "sol_by_math": ladder}, "bottleneck": "compute"}
    problem = ProblemReport(1, "1_Matmul.py", "level1/1_Matmul.py", "level1/1_Matmul.py", "ok",
                            None, 0.1, result, 4.0, None)
    sample = Sample(1, 1, 0, "level_1_problem_1_sample_0_kernel.py", "cuda", True, True, 0.45,
                    None, None)
    run = join_run(Run("runs/tf32", (sample,)),
                   BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (problem,)))
    [joined] = run.samples
    score = 1 / (1 + (0.45 - 0.278) / (4.0 - 0.278))
    assert joined.possible_with == "tf32" and joined.lower_math
    assert not joined.faster_than_light
    assert joined.sol_score == pytest.approx(score)
    assert "| 455.6% | TF32 |  | no | " + f"{score:.3f} |" in run_markdown(run)
    data = run.to_dict()["samples"][0]
    assert (data["possible_with"], data["faster_than_light"]) == ("tf32", False)
    assert data["sol_score"] == pytest.approx(score)
    pytest.importorskip("matplotlib")
    from torchroofline.present.viz import plot_run

    strip = plot_run(run).axes[0]
    rings = {c.get_gid(): c.get_offsets() for c in strip.collections}
    assert len(rings["lower-math"]) == 1 and len(rings["faster-than-light"]) == 0
    assert [t.get_text() for t in strip.texts if t.get_gid() == "label:lower-math"] == [
        "TF32 math"
    ]


# --- The command line ------------------------------------------------------------------------

SUITE = Path(__file__).parents[1] / "fixtures" / "kernelbench"
H100_FP32 = 66.9e12  #: H100 SXM CUDA-core fp32 FLOP/s (Hopper whitepaper)


def _main(capsys, *argv) -> tuple[int, str, str]:
    from torchroofline.cli import main

    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_kernelbench_run_report(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "run.json"
    code, _, err = _main(
        capsys, "kernelbench", SUITE / "level1", "--run", RUN, "--out", out, "-j", "2",
        "--timings", SUITE / "baseline_time_torch.json", "--plot-dir", tmp_path / "plots",
    )
    # a sample beats the speed of light of every math (0.01 ms: below the 15.0 µs the GEMM's
    # 3·2048²·4 B take at 3.35 TB/s); no problem failed
    assert code == 3
    assert (
        "level1 problem 1 sample 1: the generated kernel's 0.01 ms is below the 0.01502 ms" in err
    )
    assert f"wrote {out}" in err and (tmp_path / "plots" / "run_sol.png").is_file()
    report = json.loads(out.read_text())
    # only the 3 problems the run has samples for are analyzed, of the 5 in level1
    assert [p["file"] for p in report["problems"]] == [
        "1_Square_matrix_multiplication_.py", "23_Softmax.py", "40_LayerNorm.py",
    ]
    matmul = report["samples"][0]
    sol_ms = 2 * 2048**3 / H100_FP32 * 1e3  # fp32 GEMM on CUDA cores: 0.2568 ms
    assert matmul["sol_ms"] == pytest.approx(sol_ms, rel=1e-12)
    assert matmul["sol_fraction"] == pytest.approx(sol_ms / 0.35)
    assert matmul["sol_score"] == pytest.approx(1 / (1 + (0.35 - sol_ms) / (0.392 - sol_ms)))
    assert report["faster_than_light"] == ["level1 problem 1 sample 1"]
    layer_norm = report["samples"][5]
    assert layer_norm["ref_ms"] == 0.0001 and layer_norm["sol_score"] is None  # ref beats SoL


def test_kernelbench_run_matching_no_problem(capsys):
    code, _, err = _main(capsys, "kernelbench", SUITE / "level2", "--run", RUN)
    assert code == 2
    assert "level 1 problem 1" in err and "none of the 1 problem files" in err


def test_generated_time_below_the_bound_exits_3(capsys, tmp_path):
    code, _, err = _main(
        capsys, "kernelbench", SUITE / "level1" / "1_Square_matrix_multiplication_.py",
        "--gen-timings", SUITE / "generated_time.json", "--out", tmp_path / "r.csv",
    )
    # 0.196 ms is below the 0.2568 ms fp32 bound but above the TF32 one (2·2048³ / 494.7e12 s
    # = 34.7 µs): a TF32 kernel, correct if the tolerance admits it, not faster than light
    assert code == 0 and "below the" not in err
    problem = next(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert problem["gen_possible_with"] == "tf32" and problem["gen_faster_than_light"] == "False"


def test_analyze_generated_file_as_its_reference(capsys):
    kernel = RUN / "level_1_problem_1_sample_0_kernel.py"  # load_inline CUDA: never imported
    code, out, err = _main(
        capsys, "analyze", kernel, "--problems", SUITE, "--gen-ms", "0.4", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["model"] == "1_Square_matrix_multiplication_"
    assert data["flops"]["total"] == 2 * 2048**3
    assert any("generated kernel" in note for note in data["notes"])
    assert data["comparison"]["gen_sol_fraction"] == pytest.approx(data["time_ms"]["sol"] / 0.4)
    # 0.01 ms is below every math's bound (the 15.0 µs of 3·2048²·4 B at 3.35 TB/s)
    code, _, err = _main(capsys, "analyze", kernel, "--problems", SUITE, "--gen-ms", "0.01")
    assert code == 3
    assert "faster than light" in err


def test_analyze_generated_file_without_a_reference(capsys):
    kernel = RUN / "level_1_problem_1_sample_1_kernel.py"
    code, _, err = _main(capsys, "analyze", kernel)
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "no reference problem level1/1_*.py" in lines[0]
    assert "--problems" in lines[0]


def test_interrupted_run_keeps_the_finished_problems(capsys, tmp_path, monkeypatch):
    from torchroofline.suites import batch

    finished = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", (
        _problem("1_Square_matrix_multiplication_.py", sol_ms=0.25, measured_ms=0.4),
    ))

    def stopped(*args, **kwargs):
        raise batch.BatchInterrupted(finished, 1, 3)

    monkeypatch.setattr(batch, "analyze_batch", stopped)
    out = tmp_path / "run.json"
    code, _, err = _main(capsys, "kernelbench", SUITE / "level1", "--run", RUN, "--out", out)
    assert code == 130 and "interrupted after 1 of 3 problems" in err
    data = json.loads(out.read_text())
    assert data["partial"] and data["interrupted"] == "interrupted after 1 of 3 problems"
    # the two matmul samples are reported; the others' problems were not finished
    assert [s["sol_ms"] for s in data["samples"]] == [0.25, 0.25, None, None, None, None]
