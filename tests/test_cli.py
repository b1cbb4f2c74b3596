"""The command line: reports, JSON, exit codes, one-line errors, and the batch in workers."""

from __future__ import annotations

import argparse
import csv
import io
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import H100_FP32
from torchroofline.cli import build_parser, main
from torchroofline.cli.common import json_or_format
from torchroofline.suites.kernelbench import analyze_file

SUITE = Path(__file__).parent / "fixtures" / "kernelbench"
MATMUL = SUITE / "level1" / "1_Square_matrix_multiplication_.py"
TIMINGS = SUITE / "baseline_time_torch.json"
GEN_TIMINGS = SUITE / "generated_time.json"
SOFTMAX = SUITE / "level1" / "23_Softmax.py"
CONV = SUITE / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
TRACE = Path(__file__).parent / "fixtures" / "traces" / "tiny_h100.json"
SLEEPS = SUITE / "broken" / "sleeps_forever.py"  #: never finishes: a batch is mid-run on it


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_analyze_text_report(capsys):
    code, out, _ = run(capsys, "analyze", MATMUL, "--gpu", "h100", "--actual-ms", "0.392")
    assert code == 0
    assert "torchroofline — 1_Square_matrix_multiplication_" in out
    assert "GPU: H100 SXM   Precision: fp32" in out
    assert "*** Bottleneck : COMPUTE BOUND ***" in out
    assert "% of SoL" in out


def test_analyze_json_is_one_document(capsys):
    code, out, _ = run(capsys, "analyze", MATMUL, "--json", "--actual-ms", "0.392")
    data = json.loads(out)
    assert code == 0
    assert data["flops"]["total"] == 2 * 2048**3
    assert data["actual"]["ms"] == 0.392
    code, out, _ = run(capsys, "analyze", MATMUL, SUITE / "level1" / "23_Softmax.py", "--json")
    assert [d["model"] for d in json.loads(out)] == [
        "1_Square_matrix_multiplication_",
        "23_Softmax",
    ]


def test_analyze_with_generated_time(capsys):
    code, out, err = run(capsys, "analyze", MATMUL, "--actual-ms", "0.392", "--gen-ms", "0.196")
    # 0.196 ms beats the 0.2568 ms fp32 bound, not the TF32 one (34.7 µs): exit 0, with a verdict
    assert code == 0 and "possible only with TF32 or lower math" in out
    assert "speedup   2.00x" in out
    # 0.01 ms beats every rung: the fp8 one is the memory term, 3·2048²·4 B / 3.35 TB/s
    code, out, err = run(capsys, "analyze", MATMUL, "--actual-ms", "0.392", "--gen-ms", "0.01")
    assert code == 3
    assert "0.01 ms is below the 0.01502 ms speed of light of the lowest-precision math" in err


def test_a_measured_time_below_every_rung_exits_3_from_every_command(capsys):
    # analyze --actual-ms and kernelbench --timings exited 0 beside "IMPOSSIBLE" where validate
    # exited 3 on the same time; 0.01 ms is below the fp8 rung, 3·2048²·4 B / 3.35 TB/s
    code, out, err = run(capsys, "analyze", MATMUL, "--actual-ms", "0.01")
    assert code == 3 and "IMPOSSIBLE" in out
    assert "the measured 0.01 ms is below the 0.01502 ms speed of light" in err
    # the fixture's 40_LayerNorm.py is timed at 0.0001 ms, below its bound
    layer_norm = SUITE / "level1" / "40_LayerNorm.py"
    code, _, err = run(capsys, "kernelbench", layer_norm, "--timings", TIMINGS)
    assert code == 3 and "LayerNorm.py: the measured 0.0001 ms is below the" in err
    code, _, _ = run(capsys, "validate", layer_norm, "--eager", TIMINGS)
    assert code == 3


def test_math_option_sets_the_bound(capsys):
    # --math tf32: SoL = 2·2048³ / 494.7e12 s = 34.73 µs; the JSON keeps every rung
    code, out, _ = run(capsys, "analyze", MATMUL, "--math", "tf32", "--json")
    data = json.loads(out)
    assert code == 0 and data["math"] == "tf32"
    assert data["time_ms"]["sol"] == pytest.approx(2 * 2048**3 / 494.7e12 * 1e3)
    assert data["time_ms"]["sol_by_math"]["program"] == pytest.approx(2 * 2048**3 / 66.9e12 * 1e3)
    code, _, err = run(capsys, "analyze", MATMUL, "--math", "int4")
    assert code == 2 and "unknown math 'int4'" in err


def test_prompt_format_is_short(capsys):
    code, out, _ = run(capsys, "analyze", MATMUL, "--format", "prompt", "--actual-ms", "0.392")
    lines = out.strip().splitlines()
    assert code == 0
    assert len(lines) <= 15
    text = "\n".join(lines)
    for needle in ("FLOPs", "compulsory", "Speed of light", "compute-bound", "estimate", "faster"):
        assert needle in text
    # one mm: not "(1 kernels)"
    assert "(1 kernel), torch.compile" in text and "(1 kernel), CUDA graphs" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", MATMUL, "--gpu", "h1000"], "unknown GPU 'h1000'"),
        (["analyze", MATMUL, "--precision", "fp12"], "unknown precision 'fp12'"),
        (["kernelbench", SUITE, "--out", "report.txt"], "--out must end in"),
        (["kernelbench", SUITE / "nowhere"], "nowhere: no such file or folder; check the path"),
        (["analyze", MATMUL, "--actual-ms", "1,2"], "--actual-ms takes one time"),
        (["analyze", SUITE / "level1"], "is a folder; to analyze every problem in it run: "
         f"torchroofline kernelbench {SUITE / 'level1'}"),
        # a missing file is bad usage from every command (trace said 1, --ref 1, --problems 0)
        (["trace", SUITE / "nowhere.json"], "nowhere.json: no such file; check the path"),
        (["analyze", MATMUL, "--ref", SUITE / "nowhere.py"], "nowhere.py: no such file"),
        (["analyze", MATMUL, "--problems", SUITE / "nowhere"], "nowhere: no such file"),
        (["analyze", SUITE / "nowhere.py"], "nowhere.py: no such file"),
        # so is a timings file, missing (it read "cannot read timings JSON ([Errno 2] ...)"),
        # and a report to plot (it read "not a readable report JSON ([Errno 2] ...)")
        (["kernelbench", SUITE, "--timings", SUITE / "nowhere.json"],
         "nowhere.json: no such file; check the path"),
        (["validate", SUITE, "--eager", SUITE / "nowhere.json"],
         "nowhere.json: no such file; check the path"),
        (["plot", SUITE / "nowhere.json", "--out", SUITE / "nowhere"],
         "nowhere.json: no such file; check the path"),
        # a JSON plot does not draw names what it is and the command that draws it
        (["plot", TRACE, "--out", SUITE / "nowhere"],
         "(it is a torch.profiler trace; draw it with 'torchroofline trace FILE --plot"),
        # a file to write in a folder that does not exist, before any work (a suite's report
        # was lost to a raw FileNotFoundError after every problem ran)
        *([[*command, option, SUITE / "nowhere" / name], f"{option} {SUITE / 'nowhere' / name}: "
           f"no folder {SUITE / 'nowhere'}; create it first"]
          for command, option, name in (
              (["kernelbench", SUITE], "--out", "r.json"),
              (["validate", SUITE, "--eager", TIMINGS], "--out", "r.json"),
              (["analyze", MATMUL], "--plot", "p.png"),
              (["trace", TRACE], "--out", "t.txt"),
              (["trace", TRACE], "--plot", "t.png"),
              (["sweep", MATMUL, "--set", "N=32:64:*2", "--gpu", "h100-sxm"], "--out", "s.json"),
          )),
        (["trace", TRACE, "--out", SUITE], "is a folder; give a file name inside it"),
        # an option that means something only beside another was silently ignored alone
        # (--optimizer sgd priced inference), where --checkpoint alone was refused
        (["analyze", MATMUL, "--optimizer", "sgd"], "--optimizer is a training what-if; add "
         "--train"),
        (["analyze", MATMUL, "--baseline-ms", "1"], "--baseline-ms scores a measured time "
         "against the baseline; add --actual-ms MS"),
        (["analyze", MATMUL, "--batch-dim", "1"], "--batch-dim is the dimension --max-batch "
         "resizes; add --max-batch"),
        (["analyze", MATMUL, "--gpus-per-node", "4"], "--gpus-per-node describes a distributed "
         "job; add --world N"),
        # a timings file naming none of the problems left every measured column empty, where
        # validate refused it
        (["kernelbench", SOFTMAX, "--timings", SUITE / "timings_elsewhere.json"],
         "timings_elsewhere.json: names none of the 1 problem files found"),
    ],
)
def test_bad_usage_exits_2_with_one_line(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("form", ["--json", "--format=text"])
def test_an_interrupted_analyze_keeps_the_files_finished(capsys, monkeypatch, form):
    # --json printed its list only after the last file: a Ctrl-C after minutes of files
    # printed "interrupted" alone
    from torchroofline.cli import analyze as analyze_command

    analyzed, finished = analyze_command._analyzed, []

    def then_ctrl_c(file, *rest):
        if finished:
            raise KeyboardInterrupt  # as the armed signal handler raises it, mid-analysis
        finished.append(file)
        return analyzed(file, *rest)

    monkeypatch.setattr(analyze_command, "_analyzed", then_ctrl_c)
    code, out, err = run(capsys, "analyze", MATMUL, SOFTMAX, CONV, form)
    assert code == 130
    assert err.strip().endswith("interrupted after 1 of 3 files; the report covers the files "
                                "finished")
    if form == "--json":
        documents = json.loads(out)
        assert documents[0]["model"] == MATMUL.stem and "error" not in documents[0]
        assert documents[1:] == [{"file": str(f), "error": "not analyzed: interrupted"}
                                 for f in (SOFTMAX, CONV)]
    else:
        assert out.count("torchroofline — ") == 1 and MATMUL.stem in out


def test_actual_ms_before_the_file_leaves_the_file_alone(capsys):
    code, out, _ = run(capsys, "analyze", "--actual-ms", "0.392", MATMUL, "--json")
    assert code == 0 and json.loads(out)["actual"]["ms"] == 0.392
    code, out, _ = run(capsys, "analyze", "--actual-ms", "0.392,4.38", MATMUL, SOFTMAX, "--json")
    assert [document["actual"]["ms"] for document in json.loads(out)] == [0.392, 4.38]
    code, out, _ = run(capsys, "analyze", MATMUL, SOFTMAX, "--actual-ms", "0.392",
                       "--actual-ms", "4.38", "--json")
    assert [document["actual"]["ms"] for document in json.loads(out)] == [0.392, 4.38]


def test_a_misspelt_option_gets_the_closest_one(capsys):
    with pytest.raises(SystemExit) as done:
        main(["analyze", str(MATMUL), "--precison", "fp32"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized argument --precison (did you mean --precision?)" in err
    assert "fp32" not in err.splitlines()[-1]  # its value is not a second complaint


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["analyze", MATMUL, "--precison", "fp32"], "did you mean --precision?"),
        # an abbreviation was taken: "--gpus h100" for --gpus-per-node ("takes a whole number,
        # got 'h100'"), and an unknown "--loss" was offered --class
        (["analyze", MATMUL, "--gpus", "h100"], "argument --gpus (did you mean --gpu?)"),
        (["sweep", MATMUL, "--set", "N=8", "--gpus", "h100"], "(did you mean --gpu?)"),
        (["analyze", MATMUL, "--cach", "warm"], "argument --cach (did you mean --cache?)"),
        (["analyze", MATMUL, "--actual-ms", "abc"], "--actual-ms: takes a finite number above 0"),
        # inf was taken: "infx headroom", and Infinity in the JSON
        (["analyze", MATMUL, "--actual-ms", "inf"], "--actual-ms: takes a finite number above 0"),
        (["analyse", MATMUL], "invalid choice: 'analyse' (choose from 'analyze', "),
        (["kernelbench", SUITE, "--cache", "warn"], "did you mean 'warm'?"),
        # a negative --top sliced rows off the end of the tables
        (["trace", TRACE, "--top", "-1"], "--top: takes a whole number of 0 or more, got '-1'"),
        (["analyze", MATMUL, "--top", "-2"], "--top: takes a whole number of 0 or more"),
        # --json is --format json on the commands that spell it so, and back
        (["trace", TRACE, "--json"], "unrecognized argument --json (did you mean --format json?)"),
        (["sweep", MATMUL, "--set", "N=32:64", "--json"], "(did you mean --format json?)"),
        (["gpus", "--format", "json"], "unrecognized argument --format (did you mean --json?)"),
        # the API's analyze(mode="train"), typed as an option: no option is spelled like it
        (["analyze", MATMUL, "--mode", "train"], "argument --mode (did you mean --train?)"),
        # counts and limits that cannot be: "analyzing 2 problems in -2 worker processes", every
        # problem failed "no result after -5 s", --world 0 asked for a parallelize()
        (["kernelbench", SUITE, "-j", "0"], "-j/--jobs: takes a whole number of 1 or more"),
        (["validate", SUITE, "-j", "-2"], "-j/--jobs: takes a whole number of 1 or more"),
        (["kernelbench", SUITE, "--timeout", "-5"], "--timeout: takes a finite number above 0"),
        (["kernelbench", SUITE, "--memory-limit", "0"], "--memory-limit: takes a finite number"),
        (["analyze", MATMUL, "--world", "0"], "--world: takes a whole number of 1 or more"),
        (["analyze", MATMUL, "--gen-ms", "-1"], "--gen-ms: takes a finite number above 0"),
        # a dim named twice: the mesh kept the last ("the mesh {'dp': 2} holds 2 ranks, not
        # the world's 4")
        (["analyze", MATMUL, "--world", "4", "--mesh", "dp=2,dp=2"],
         "--mesh: 'dp' is named twice in 'dp=2,dp=2'; name each once"),
    ],
)
def test_a_usage_error_is_one_usage_line_and_the_error(capsys, argv, error):
    # argparse printed the whole usage of the command first: 16 lines for analyze
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in argv])
    usage, message = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2
    command = "analyze" if argv[0] == "analyse" else argv[0]
    expected = "COMMAND ..." if argv[0] == "analyse" else f"{command} "
    assert usage.startswith(f"usage: torchroofline {expected}") and "(see torchroofline" in usage
    assert error in message


@pytest.mark.parametrize(("argv", "named"), [
    (["analyze", MATMUL, "--json", "--format", "text"], "--format text"),
    (["kernelbench", SUITE, "--format", "csv", "--json"], "--format csv"),
])
def test_json_and_another_format_is_refused_in_one_line(capsys, argv, named):
    # the last one given was taken without a word (analyze: text; kernelbench: --json won)
    assert main([str(a) for a in argv]) == 2
    out, err = capsys.readouterr()
    assert not out and err == f"torchroofline: error: --json and {named} name two formats; " \
        "give one\n"
    # one format named twice is one
    assert json_or_format(argparse.Namespace(json=True, format="json")) == "json"


def test_an_unknown_option_unlike_any_gets_no_suggestion(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", str(MATMUL), "--loss", "mse"])
    assert capsys.readouterr().err.strip().endswith("error: unrecognized argument --loss")


def test_validate_help_says_the_exit_code_it_returns(capsys):
    # its description said "Exits 1 if a measured time beats the speed of light"; it exits 3
    with pytest.raises(SystemExit):
        main(["validate", "--help"])
    described = " ".join(capsys.readouterr().out.split())
    assert "Exits 3 if a measured time beats the speed of light" in described


def test_a_mistyped_command_gets_the_closest_one(capsys):
    with pytest.raises(SystemExit):
        main(["kernelbenhc", str(SUITE)])
    assert capsys.readouterr().err.strip().endswith("did you mean 'kernelbench'?")


def test_host_scale_multiplies_every_host_cost(capsys):
    # --host-scale 2: each CPU cost doubles, so the host time of every mode doubles exactly
    default = analyze_file(CONV).to_dict()["estimate"]
    code, out, _ = run(capsys, "analyze", CONV, "--host-scale", "2", "--json")
    document = json.loads(out)
    scaled = document["estimate"]
    assert code == 0
    assert "host (CPU) cost × 2 of the default (--host-scale)" in document["notes"][0]
    for mode in ("eager", "fused", "cudagraph"):
        assert scaled[mode]["host_ms"] == pytest.approx(2 * default[mode]["host_ms"], rel=1e-12)
        assert scaled[mode]["gpu_busy_ms"] == pytest.approx(default[mode]["gpu_busy_ms"])


def test_every_batch_command_has_one_cache_default_and_help():
    parser = build_parser()
    helps = set()
    for command in ("analyze", "kernelbench", "validate"):
        subparser = parser.commands[command]
        [cache] = [a for a in subparser._actions if "--cache" in a.option_strings]
        assert cache.default == "cold"
        helps.add(cache.help)
    [text] = helps
    assert "clear_l2_cache" in text  # where KernelBench's flush is, to check it


def test_failed_problem_exits_1_without_traceback(capsys):
    code, _, err = run(capsys, "analyze", SUITE / "broken" / "syntax_error.py")
    assert code == 1
    assert "syntax error" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [
    ("trace", "{bad}"),
    ("plot", "{bad}", "--out", "{out}"),
    ("validate", str(MATMUL), "--eager", "{bad}"),
    ("kernelbench", str(MATMUL), "--timings", "{bad}"),
])
def test_an_unreadable_input_file_is_bad_usage_from_every_command(capsys, tmp_path, command):
    # a file the command reads, not a problem it analyzes: nothing was reported, so the code
    # is bad usage (2), as for a missing one; `trace` said 1, which means "some problems
    # failed, the reports are written"
    bad = tmp_path / "bad.json"
    bad.write_text("[")
    argv = [part.format(bad=bad, out=tmp_path / "pictures") for part in command]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(f"torchroofline: error: {bad}") and err.count("\n") == 1


TINY_TRACE = Path(__file__).parent / "fixtures" / "traces" / "tiny_h100.json"


@pytest.mark.parametrize("command", [
    ("trace", str(TINY_TRACE)),
    ("sweep", str(MATMUL), "--set", "N=64,128", "--data", "any"),
])
@pytest.mark.parametrize("suffix", [".json", ".html"])
def test_out_writes_the_format_its_suffix_names(capsys, tmp_path, command, suffix):
    # `trace --out r.html` wrote the text report into r.html, as kernelbench's --out does not
    out = tmp_path / f"report{suffix}"
    code, _, _ = run(capsys, *command, "--out", str(out))
    assert code == 0
    written = out.read_text()
    if suffix == ".json":
        assert isinstance(json.loads(written), dict)
    else:
        assert written.lstrip().lower().startswith("<!doctype html>")
    # --format, given, still decides
    code, _, _ = run(capsys, *command, "--out", str(out), "--format", "text")
    assert code == 0 and not out.read_text().lstrip().startswith(("{", "<"))


def test_out_with_a_format_the_command_lacks_is_refused(capsys, tmp_path):
    code, out, err = run(capsys, "sweep", str(MATMUL), "--set", "N=64,128", "--out",
                         str(tmp_path / "sweep.csv"))
    assert code == 2 and out == ""
    assert "--out" in err and ".csv" in err and "--format" in err
    assert not (tmp_path / "sweep.csv").exists()


def test_an_interrupted_batchs_summary_counts_the_problems_it_was_given():
    # "0 of 0 problems analyzed, 0 failed" then "interrupted after 0 of 200 problems"
    from torchroofline.present.report import suite_summary_line
    from torchroofline.suites.batch_report import BatchReport

    report = BatchReport("H100 SXM", "h100-sxm", "fp32", "cold", ())
    assert suite_summary_line(report, planned=200) == (
        "0 of 200 problems analyzed (200 not run: interrupted), 0 failed")
    assert suite_summary_line(report) == "0 of 0 problems analyzed, 0 failed"


def test_kernelbench_out_help_names_every_suffix_it_takes(capsys, tmp_path):
    # --help said "report.md, report.csv or report.json"; .html is taken too
    from torchroofline.cli.suite import _check_suffix

    for suffix in (".md", ".csv", ".json", ".html"):
        _check_suffix(f"report{suffix}")
    with pytest.raises(SystemExit):
        main(["kernelbench", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--out FILE report.md, report.csv, report.json or report.html" in out


def test_debug_shows_traceback(capsys):
    code, _, err = run(capsys, "--debug", "analyze", MATMUL, "--gpu", "h1000")
    assert code == 2
    assert "Traceback" in err


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_a_problem_files_traceback_before_or_after_the_command(capsys, where):
    broken = SUITE / "broken" / "syntax_error.py"
    argv = ["--debug", "analyze", broken] if where == "before" else ["analyze", broken, "--debug"]
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert "Traceback" in err and "SyntaxError" in err  # the problem file's own error, too
    assert "--debug shows" not in err


def test_without_debug_an_error_with_a_cause_points_to_debug(capsys):
    code, _, err = run(capsys, "analyze", SUITE / "broken" / "syntax_error.py")
    assert code == 1
    assert err.strip().endswith("--debug shows the traceback")
    assert len(err.strip().splitlines()) == 1


def test_batch_progress_shows_a_workers_traceback_with_debug():
    from torchroofline.suites.batch import Outcome, Progress

    failed = Outcome("level1/1_x.py", "failed", "boom", None, 0.1, "Traceback (most recent...)\n")
    for debug in (False, True):
        stream = io.StringIO()
        Progress(1, stream, debug=debug)(failed)
        assert ("Traceback" in stream.getvalue()) is debug
        assert "[1/1] failed" in stream.getvalue()


def test_a_shared_gpu_name_is_named_in_one_line(capsys):
    code, out, err = run(capsys, "analyze", MATMUL, "--gpu", "a100", "--json")
    assert code == 0
    assert json.loads(out)["gpu"] == "A100 80GB"
    (line,) = err.strip().splitlines()
    assert "A100 80GB" in line and "a100-40gb" in line and "a100-pcie" in line
    code, _, err = run(capsys, "analyze", MATMUL, "--gpu", "a100-80gb", "--json")
    assert code == 0 and err == ""


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["kernelbench", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "(default: h100-sxm)" in out and "(default: 60.0)" in out
    assert "(default: None)" not in out


def test_gpus_table_and_json(capsys):
    code, out, _ = run(capsys, "gpus")
    assert code == 0
    assert "h100-sxm" in out and "989.4" in out  # dense BF16, not the sparse 1979
    v100 = next(line for line in out.splitlines() if line.startswith("v100 ")).split()
    # the V100's L2 (2048 B/clk at 1530 MHz), then FP32 and packed-half2 FP16 on the CUDA cores
    assert v100[5:8] == ["3.1", "15.7", "31.4"]
    code, out, _ = run(capsys, "gpus", "--json")
    keys = {gpu["key"] for gpu in json.loads(out)}
    assert {"h100-sxm", "a100-80gb", "mi300x", "rtx4090"} <= keys
    # `gpus h100` was "unrecognized argument h100": the GPUs named, as --gpu takes them
    code, out, _ = run(capsys, "gpus", "h100", "b200", "--json")
    assert code == 0 and [gpu["key"] for gpu in json.loads(out)] == ["h100-sxm", "b200"]
    code, out, _ = run(capsys, "gpus", "mi250x")
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["mi250x"]
    code, _, err = run(capsys, "gpus", "h1000")
    assert code == 2 and err.startswith("torchroofline: error: unknown GPU 'h1000'; closest:")


@pytest.mark.parametrize("command", [[], ["analyze"], ["gpus"], ["kernelbench"], ["plot"]])
def test_help_on_every_command(capsys, command):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    assert "usage: torchroofline" in capsys.readouterr().out


def test_python_dash_m_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "torchroofline", "gpus"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert "h100-sxm" in done.stdout


@pytest.fixture(scope="module")
def suite_report(tmp_path_factory):
    """One batch over the whole fixture suite (bad problems included), in 2 workers."""
    out = tmp_path_factory.mktemp("suite") / "report.json"
    argv = [
        "kernelbench", SUITE, "--timings", TIMINGS, "--gen-timings", GEN_TIMINGS,
        "-j", "2", "--timeout", "3", "--out", out,
    ]
    code = main([str(a) for a in argv])
    return code, json.loads(out.read_text())


def _by_file(report: dict) -> dict[str, dict]:
    return {p["file"]: p for p in report["problems"]}


def test_batch_survives_bad_problems(suite_report):
    code, report = suite_report
    problems = _by_file(report)
    assert code == 1  # some problems failed; the report is still complete
    assert problems["syntax_error.py"]["status"] == "failed"
    assert "syntax error" in problems["syntax_error.py"]["error"]
    assert problems["no_model.py"]["status"] == "failed"
    assert problems["sleeps_forever.py"]["status"] == "timeout"
    assert "3 s" in problems["sleeps_forever.py"]["error"]
    ok = [p for p in report["problems"] if p["status"] == "ok"]
    assert len(ok) == 7


def test_batch_report_figures(suite_report):
    _, report = suite_report
    matmul = _by_file(report)["1_Square_matrix_multiplication_.py"]
    assert matmul["level"] == 1
    assert matmul["result"]["flops"]["total"] == 2 * 2048**3
    assert matmul["measured_ms"] == 0.392
    assert matmul["gen_ms"] == 0.196
    assert matmul["speedup"] == pytest.approx(2.0)
    # fp32 GEMM on the H100's CUDA cores: 2·2048³ FLOPs / 66.9 TFLOP/s = 0.257 ms of SoL
    sol_ms = 2 * 2048**3 / H100_FP32 * 1e3
    assert matmul["sol_fraction"] == pytest.approx(sol_ms / 0.392, rel=1e-12)
    layer_norm = _by_file(report)["40_LayerNorm.py"]
    assert layer_norm["impossible"]  # 0.0001 ms is below its speed of light
    summary = report["summary"]
    assert summary["level1"]["impossible"] == 1
    assert summary["level2"]["analyzed"] == 1
    assert summary["all"]["failed"] == 3
    assert summary["all"]["compute_bound"] + summary["all"]["memory_bound"] == 7


def test_batch_report_formats(suite_report, tmp_path):
    from torchroofline.cli import write_report
    from torchroofline.suites.batch_report import BatchReport

    _, data = suite_report
    report = BatchReport.from_dict(data)
    assert report.to_dict() == data  # the JSON reads back to the same report
    write_report(report, str(tmp_path / "r.csv"))
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    assert len(rows) == len(report.problems)
    matmul = next(r for r in rows if r["problem"] == "1_Square_matrix_multiplication_.py")
    assert int(matmul["flops"]) == 2 * 2048**3
    write_report(report, str(tmp_path / "r.md"))
    markdown = (tmp_path / "r.md").read_text()
    assert "| level1 | 5 | 5 | 0 |" in markdown
    # the fixture's 0.0001 ms layer norm against its 0.1703 ms bound: 1703x under it
    assert "**1,703x under SoL**" in markdown
    assert "sleeps_forever.py | timeout" in markdown


def test_level_filter_with_a_summary_and_where_it_wrote(capsys, tmp_path):
    out = tmp_path / "r.json"
    code = main(["kernelbench", str(SUITE), "--level", "2", "--out", str(out),
                 "--host-scale", "2"])
    report = json.loads(out.read_text())
    assert code == 0
    assert [p["file"] for p in report["problems"]] == ["1_Conv2D_ReLU_BiasAdd.py"]
    out_text, err = capsys.readouterr()
    assert out_text == ""
    assert err.startswith("analyzing 1 problem in 1 worker process")  # before any result
    assert "[1/1] ok" in err
    assert "note: 1 of 1 problems analyzed, 0 failed" in err
    assert err.strip().endswith(f"note: wrote {out}")
    # the workers price with --host-scale too
    default = analyze_file(CONV).to_dict()["estimate"]["eager"]["host_ms"]
    scaled = report["problems"][0]["result"]["estimate"]["eager"]["host_ms"]
    assert scaled == pytest.approx(2 * default, rel=1e-12)


@pytest.mark.parametrize(
    ("command", "suffix", "signal_number"),
    [
        ("kernelbench", ".md", signal.SIGINT),
        ("kernelbench", ".json", signal.SIGTERM),
        ("validate", ".csv", signal.SIGINT),
    ],
)
def test_an_interrupted_batch_keeps_the_problems_finished(tmp_path, command, suffix,
                                                           signal_number):
    out = tmp_path / f"report{suffix}"
    argv = [sys.executable, "-m", "torchroofline", command, MATMUL, SLEEPS, "-j", "2",
            "--out", out, *(["--eager", TIMINGS] if command == "validate" else [])]
    # Ctrl-C as a terminal delivers it: a shell that started this run in the background
    # (a CI job under ``&``) leaves SIGINT ignored, which the child would inherit
    process = subprocess.Popen([str(a) for a in argv], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for line in process.stderr:  # one progress line per problem finished (not a terminal)
        seen.append(line)
        if "[1/2] ok" in line:
            break
    process.send_signal(signal_number)  # while a worker is still in sleeps_forever.py
    err = "".join(seen) + process.communicate(timeout=120)[1]
    assert process.returncode == 130
    assert "interrupted after 1 of 2 problems" in err
    assert f"wrote {out}" in err
    text = out.read_text()
    assert MATMUL.name in text and SLEEPS.name not in text
    if suffix == ".json":
        report = json.loads(text)
        assert report["partial"] is True
        assert report["interrupted"] == "interrupted after 1 of 2 problems"
        assert [p["file"] for p in report["problems"]] == [MATMUL.name]
    else:
        marks = {".md": "> **Partial report**: ", ".csv": "# partial report: "}
        assert text.startswith(f"{marks[suffix]}interrupted after 1 of 2 problems")


def test_a_level_filter_that_keeps_nothing_says_so(capsys):
    from torchroofline.suites.kernelbench import discover

    code, _, err = run(capsys, "kernelbench", SUITE, "--level", "7")
    assert code == 2
    assert f"--level 7 kept none of the {len(discover([SUITE]))} problem files" in err
    assert "levels: 1, 2, 3, none" in err  # the broken/ fixtures sit outside any level folder


def test_analyze_plot_writes_a_png_and_says_where(capsys, tmp_path):
    out = tmp_path / "roof.png"
    code, _, err = run(capsys, "analyze", MATMUL, "--plot", out)
    assert code == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in err


def test_suite_pictures_without_timings_warn(suite_report, capsys, tmp_path):
    _, report = suite_report
    unmeasured = {**report, "problems": [{**p, "measured_ms": None} for p in report["problems"]]}
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(unmeasured))
    code, _, err = run(capsys, "plot", saved, "--out", tmp_path / "pics")
    assert code == 0
    assert "no analyzed problem has a measured time" in err and "--timings" in err
    code, _, err = run(capsys, "plot", _saved(report, tmp_path), "--out", tmp_path / "pics")
    assert "measured time" not in err


def _saved(report: dict, folder: Path) -> Path:
    path = folder / "measured.json"
    path.write_text(json.dumps(report))
    return path


def test_kernel_names_are_never_cut():
    import torch
    import torch.nn as nn

    import torchroofline
    from torchroofline.present.report import format_result

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.projection_into_the_first_hidden_space = nn.Linear(8, 8)
            self.projection_into_the_second_hidden_space = nn.Linear(8, 8)

        def forward(self, x):
            return self.projection_into_the_second_hidden_space(
                self.projection_into_the_first_hidden_space(x)
            )

    text = format_result(torchroofline.analyze(Model(), torch.empty(4, 8, device="meta")))
    assert "projection_into_the_first_hidden_space: addmm" in text
    assert "projection_into_the_second_hidden_space: addmm" in text


def test_every_json_key_is_documented_in_the_reference(capsys):
    reference = (Path(__file__).parent.parent / "docs" / "reference.md").read_text()
    keys_section = reference.split("## JSON keys", 1)[1].split("\n## ", 1)[0]
    code, out, _ = run(capsys, "analyze", MATMUL, "--json", "--actual-ms", "1")
    assert code == 0
    for key in json.loads(out):
        assert f"`{key}`" in keys_section, key


def test_suite_pictures_from_batch_and_saved_report(suite_report, capsys, tmp_path):
    _, report = suite_report
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    code, out, _ = run(capsys, "plot", saved, "--out", tmp_path / "pics", "--per-problem")
    written = [Path(line) for line in out.split()]
    assert code == 0
    assert all(path.exists() for path in written)
    assert len(written) == 2 + 7  # scatter, histogram, one roofline per analyzed problem
    code, _, err = run(capsys, "plot", tmp_path / "missing.json", "--out", tmp_path)
    assert code == 2 and "missing.json: no such file; check the path" in err
    (tmp_path / "truncated.json").write_text("{")
    code, _, err = run(capsys, "plot", tmp_path / "truncated.json", "--out", tmp_path)
    assert code == 2 and "not a readable report" in err
    # both named the problem but not the fix (a Markdown report, a JSON of something else)
    (tmp_path / "other.json").write_text('{"a": 1}')
    for name in ("truncated.json", "other.json"):
        code, _, err = run(capsys, "plot", tmp_path / name, "--out", tmp_path)
        assert code == 2 and err.strip().endswith(
            "; pass the JSON 'torchroofline kernelbench PATH --out report.json' wrote")


def test_plot_names_the_command_that_draws_a_validate_report(capsys, tmp_path):
    # it holds "problems" too: drawn as a suite, it read "no analyzed problem has a measured
    # time ... pass --timings" of a report made of measured times
    report = tmp_path / "v.json"
    report.write_text(json.dumps({"gpu": "H100 SXM", "modes": ["eager"], "failed": 0,
                                  "host_scale": {"used": 1.0}, "problems": []}))
    code, _, err = run(capsys, "plot", report, "--out", tmp_path)
    assert code == 2
    assert "(it is a 'torchroofline validate' report; draw it with 'torchroofline validate " in err


def test_max_batch_reuses_the_analyzed_build_and_keeps_its_switches(capsys, tmp_path):
    # the problem file runs once (the model --max-batch searches is the one analyzed), and the
    # TF32 switch it sets at import is put back after both, not left for the next file
    problem = tmp_path / "tf32_linear.py"
    problem.write_text(
        "import torch\nimport torch.nn as nn\n"
        "torch.set_float32_matmul_precision('high')\n"
        "IMPORTS = getattr(torch, '_tf32_linear_imports', 0) + 1\n"
        "torch._tf32_linear_imports = IMPORTS\n"
        "class Model(nn.Linear):\n    def __init__(self):\n        super().__init__(64, 64)\n"
        "def get_inputs():\n    return [torch.randn(8, 64)]\n"
        "def get_init_inputs():\n    return []\n"
    )
    before = torch.get_float32_matmul_precision()
    try:
        code, out, _ = run(capsys, "analyze", problem, "--max-batch", "--json")
        assert code == 0 and json.loads(out)["max_batch"]["exact"]
        assert torch._tf32_linear_imports == 1
    finally:
        vars(torch).pop("_tf32_linear_imports", None)
    assert torch.get_float32_matmul_precision() == before


def test_cli_autocast_without_train(capsys):
    # --autocast was a training what-if only; an inference forward now runs under it too
    code, out, _ = run(capsys, "analyze", MATMUL, "--json")
    plain = json.loads(out)
    code_mixed, out, _ = run(capsys, "analyze", MATMUL, "--json", "--autocast", "bf16")
    mixed = json.loads(out)
    assert code == code_mixed == 0
    assert mixed["flops"]["tensor"] == plain["flops"]["tensor"]
    assert mixed["time_ms"]["compute_sol"] < plain["time_ms"]["compute_sol"]


# --- What a new user tripped on (issue 28) ---------------------------------------------------

RUN_DIR = Path(__file__).parent / "fixtures" / "kernelbench_run" / "runs" / "demo"


def _problem_file(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(
        "import sys\nimport torch\nimport torch.nn as nn\n" + body
        + "\ndef get_inputs():\n    return [torch.randn(64, 8)]\n"
        "\ndef get_init_inputs():\n    return []\n"
    )
    return path


def test_a_missing_file_is_one_line_before_any_analysis(capsys):
    code, out, err = run(capsys, "analyze", MATMUL, "level_1_problem_7_sample_0_kernel.py")
    assert code == 2 and out == ""
    assert err == (
        "torchroofline: error: level_1_problem_7_sample_0_kernel.py: no such file; check the "
        "path\n"
    )


@pytest.mark.parametrize(("where", "said"), [
    ("at import", "1_Exits.py: importing the file called sys.exit(3)"),
    ("in forward", "1_Exits raised SystemExit at 1_Exits.py:7 in module '<top level>'"),
])
def test_a_problem_that_calls_sys_exit_fails_and_says_so(capsys, tmp_path, where, said):
    # its exit code 3 would read as "faster than light"
    forward = "        sys.exit(3)\n" if where == "in forward" else "        return x * 2\n"
    tail = "\nsys.exit(3)\n" if where == "at import" else ""
    path = _problem_file(
        tmp_path, "1_Exits.py",
        "\nclass Model(nn.Module):\n    def forward(self, x):\n" + forward + tail,
    )
    code, _, err = run(capsys, "analyze", path)
    assert code == 1
    assert said in err


def test_max_batch_without_a_batch_dimension_keeps_the_report(capsys, tmp_path):
    # x is (features, batch): resizing dimension 0 breaks x.t() @ w; dimension 1 is the batch
    path = _problem_file(
        tmp_path, "1_Transposed.py",
        "\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(64, 32))\n\n"
        "    def forward(self, x):\n        return x.t() @ self.w\n",
    )
    code, out, err = run(capsys, "analyze", path, "--max-batch")
    assert code == 1
    assert "torchroofline — 1_Transposed" in out  # the analysis stands
    assert "--max-batch: resizing dimension 0" in err and "--batch-dim" in err
    code, out, _ = run(capsys, "analyze", path, "--max-batch", "--batch-dim", "1", "--json")
    assert code == 0
    assert json.loads(out)["max_batch"]["batch"] > 8


def test_a_run_folder_gets_the_command_that_reads_it(capsys, tmp_path):
    code, _, err = run(capsys, "analyze", RUN_DIR)
    assert code == 2
    assert f"run: torchroofline kernelbench KernelBench/level1 --run {RUN_DIR}" in err
    # with the problems' level folder beside it, the command names that folder
    import shutil

    run_dir = shutil.copytree(RUN_DIR, tmp_path / "runs" / "demo")
    (tmp_path / "level1").mkdir()
    code, _, err = run(capsys, "analyze", run_dir)
    assert f"run: torchroofline kernelbench {tmp_path / 'level1'} --run {run_dir}" in err


def test_a_plot_path_it_cannot_write_is_refused_before_the_analysis(capsys, monkeypatch):
    from torchroofline.suites import kernelbench

    monkeypatch.setattr(kernelbench, "analyze_file", lambda *a, **k: pytest.fail("analyzed"))
    code, out, err = run(capsys, "analyze", MATMUL, "--plot", "out.jpg")
    assert code == 2 and out == ""
    assert "cannot save a figure as 'out.jpg'; end the path in .png or .svg" in err


def test_a_missing_einops_names_the_kernelbench_extra(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "einops", None)  # import einops raises ModuleNotFoundError
    path = _problem_file(tmp_path, "1_Einops.py", "import einops\n\nclass Model(nn.Module):\n"
                         "    def forward(self, x):\n        return x\n")
    code, _, err = run(capsys, "analyze", path)
    assert code == 1
    assert "needs the module 'einops', which is not installed; pip install " in err
    assert "'torchroofline[kernelbench]'" in err


def test_an_interrupted_batch_still_draws_the_problems_finished(capsys, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from torchroofline.suites import batch
    from torchroofline.suites.batch_report import BatchReport

    result = analyze_file(MATMUL).to_dict()
    finished = BatchReport.from_dict({"gpu": "h100-sxm", "precision": "fp32", "problems": [{
        "level": 1, "file": MATMUL.name, "status": "ok", "error": None, "result": result,
        "measured_ms": 1.0, "gen_ms": None,
    }]})

    def interrupted(*args, **kwargs):
        raise batch.BatchInterrupted(finished, 1, 2)

    monkeypatch.setattr(batch, "analyze_batch", interrupted)
    pictures = tmp_path / "pictures"
    code, _, err = run(capsys, "kernelbench", MATMUL, SOFTMAX, "--plot-dir", pictures,
                       "--out", tmp_path / "partial.json")
    assert code == 130
    assert "interrupted after 1 of 2 problems" in err
    assert (pictures / "suite_scatter.png").read_bytes()[:4] == b"\x89PNG"
    assert f"wrote {pictures / 'suite_histogram.png'}" in err


@pytest.mark.parametrize("argv", [
    # each --gpu h100 prints its "which H100 part" note once the command goes ahead; an error
    # found before any work came after that note (a missing file read as a second message)
    ["analyze", SUITE / "nowhere.py"],
    ["analyze", MATMUL, "--checkpoint", "blocks.*"],
    ["analyze", MATMUL, "--mesh", "dp=2"],
    ["analyze", MATMUL, "--actual-ms", "1,2"],
    ["analyze", MATMUL, "--timeline", "t.jpg", "--world", "2", "--parallel", "ddp"],
    ["kernelbench", SUITE / "nowhere"],
    ["kernelbench", SUITE, "--timings", SUITE / "nowhere.json"],
    ["kernelbench", SUITE, "--level", "7"],
    ["kernelbench", SUITE, "--plot-dir", MATMUL],
    ["sweep", SUITE / "nowhere.py", "--set", "N=32,64"],
    ["sweep", MATMUL, "--set", "N=32,64", "--precision", "fp33"],
    ["sweep", MATMUL, "--set", "N=32,64", "--plot", "s.jpg"],
    ["sweep", MATMUL],
    ["trace", SUITE / "nowhere.json"],
])
def test_an_error_found_before_any_work_comes_alone_before_any_note(capsys, argv):
    code, out, err = run(capsys, *argv, "--gpu", "h100")
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("torchroofline: error: ")


def test_every_output_is_made_by_one_rule_stated_in_help(capsys, tmp_path, suite_report):
    # plot --out a/b made both folders where kernelbench --out a/r.json refused: the named file
    # or folder is made, never a missing folder above it, the same from every command
    _, report = suite_report
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    code, _, err = run(capsys, "plot", saved, "--out", tmp_path / "a" / "b")
    assert code == 2 and not (tmp_path / "a").exists()
    assert err == (f"torchroofline: error: --out {tmp_path / 'a' / 'b'}: no folder "
                   f"{tmp_path / 'a'}; create it first or choose another path\n")
    code, _, _ = run(capsys, "plot", saved, "--out", tmp_path / "pictures")
    assert code == 0 and (tmp_path / "pictures" / "suite_scatter.png").is_file()
    code, _, err = run(capsys, "plot", saved, "--out", saved)
    assert code == 2 and err.endswith(": is a file; give a folder\n")
    code, _, err = run(capsys, "kernelbench", MATMUL, "--plot-dir", tmp_path / "c" / "d")
    assert code == 2 and f"no folder {tmp_path / 'c'}; create it first" in err
    code, _, err = run(capsys, "validate", MATMUL, "--plot", tmp_path / "e" / "v.png")
    assert code == 2 and f"no folder {tmp_path / 'e'}; create it first" in err
    for command in ("analyze", "kernelbench", "plot", "sweep", "trace", "validate"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        described = " ".join(capsys.readouterr().out.split())
        assert "outputs: a file or folder an option names (--out, --plot, --plot-dir, " \
               "--timeline, --plot-roofline) is created or overwritten, never a missing folder " \
               "above it" in described, command


@pytest.mark.parametrize(("name", "text", "said"), [
    # Python names no line for a null byte: it read "1_Binary.py:None: syntax error"
    ("1_Binary.py", "x = 1\0\n", "1_Binary.py: syntax error: source code string cannot contain "
     "null bytes; fix the file"),
    # it read "_torchroofline_problem_2820377131331457113.Model() argument after * must be an
    # iterable, not int"
    ("1_InitInt.py", "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
     "    def forward(self, x):\n        return x\n\ndef get_inputs():\n"
     "    return [torch.randn(4)]\n\ndef get_init_inputs():\n    return 7\n",
     "1_InitInt.py: get_init_inputs() returned int; return a list"),
    # a problem that imports triton is read as a generated kernel: it said so without why
    ("model.py", "import torch\nimport triton\nimport torch.nn as nn\n\nclass Model(nn.Module):"
     "\n    def forward(self, x):\n        return x\n\ndef get_inputs():\n"
     "    return [torch.randn(4)]\n",
     "model.py: read as a generated kernel (triton code, never run here) whose name says no "
     "problem"),
])
def test_a_malformed_problem_file_is_one_line_naming_the_fix(capsys, tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    code, out, err = run(capsys, "analyze", path)
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"torchroofline: error: {tmp_path / said}")


def test_the_ddp_preset_runs_on_a_problem_file(capsys):
    # a problem file's model is built on fake tensors: its meta copy stayed fake and
    # to_empty could not swap it, a raw "[rank0]: ... Couldn't swap Conv2d.weight" traceback
    conv = SUITE / "level2" / "1_Conv2D_ReLU_BiasAdd.py"
    code, out, err = run(capsys, "analyze", conv, "--world", "2", "--parallel", "ddp", "--json")
    assert code == 0 and "Traceback" not in err
    assert json.loads(out)["params"] > 0
    # a model without parameters: DDP's own refusal in one line, not c10d's internal assert
    code, _, err = run(capsys, "analyze", MATMUL, "--world", "2", "--parallel", "ddp")
    assert code == 2
    assert err.strip().endswith("parallel='ddp' needs a parameter that requires a gradient, as "
                                "DistributedDataParallel does; Model has none: leave out "
                                "--parallel (parallel=), or shard it with a parallelize(model, "
                                "mesh)")
