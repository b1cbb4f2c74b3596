"""``torchroofline validate``: estimates and bounds against KernelBench-format timings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchroofline.cli import main
from torchroofline.errors import InputError
from torchroofline.price.estimate_params import DEFAULT_PARAMS
from torchroofline.suites.kernelbench import analyze_file
from torchroofline.suites.validate import (
    HOST_SCALE_GRID,
    USED_SCALE,
    Accuracy,
    Check,
    fit_error,
    fit_host_scale,
    format_markdown,
    host_scale_line,
    validate,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "kernelbench"
TIMINGS = FIXTURES / "baseline_time_torch.json"
#: The fixture problems the timing file names (its 40_LayerNorm time, 0.1 µs, is impossible).
TIMED = [
    FIXTURES / "level1" / "1_Square_matrix_multiplication_.py",
    FIXTURES / "level1" / "23_Softmax.py",
    FIXTURES / "level1" / "40_LayerNorm.py",
    FIXTURES / "level2" / "1_Conv2D_ReLU_BiasAdd.py",
]


def test_accuracy_closed_form() -> None:
    accuracy = Accuracy.of([1.0, 2.0, 4.0, 0.5, 1.25])
    assert accuracy.count == 5
    assert accuracy.median == pytest.approx(1.25)
    assert accuracy.within_2x == pytest.approx(4 / 5)  # 4.0 is out
    assert accuracy.within_1_5x == pytest.approx(2 / 5)  # 1.0 and 1.25
    assert accuracy.median_abs_log2 == pytest.approx(1.0)  # of |log2|: 0, 1, 2, 1, 0.32
    assert accuracy.p10 <= accuracy.median <= accuracy.p90
    assert Accuracy.of([]) is None


@pytest.fixture(scope="module")
def report() -> dict:
    return validate(TIMED, {"eager": TIMINGS}, "h100-sxm")


def test_validate_reports_levels_and_the_impossible_time(report: dict) -> None:
    assert set(report["summary"]) == {"all", "level1", "level2"}
    assert report["summary"]["all"]["problems"] == 4
    assert report["summary"]["all"]["impossible"] == 1
    assert report["summary"]["level1"]["impossible"] == 1
    accuracy = report["summary"]["all"]["accuracy"]["eager"]
    assert accuracy["count"] == 4
    assert 0 <= accuracy["within_2x"] <= 1
    [layer_norm] = [p for p in report["problems"] if p["file"] == "40_LayerNorm.py"]
    assert layer_norm["impossible"] == ["eager"]
    worst = report["worst"][0]
    assert worst["file"] == "40_LayerNorm.py"  # 0.1 µs measured: the furthest estimate
    assert worst["ratio"] == pytest.approx(worst["estimate_ms"] / worst["measured_ms"])
    assert worst["dominant"]


def test_markdown_counts_the_problems_timed_in_each_mode(tmp_path) -> None:
    # the compile file times 2 of the 4 problems: its rows count 2, eager's 4
    times = json.loads(TIMINGS.read_text())
    level1 = times["level1"]
    kept = {"1_Square_matrix_multiplication_.py": level1["1_Square_matrix_multiplication_.py"],
            "23_Softmax.py": level1["23_Softmax.py"]}
    compile_times = tmp_path / "compile.json"
    compile_times.write_text(json.dumps({"level1": kept}))
    both = validate(TIMED, {"eager": TIMINGS, "compile": compile_times}, "h100-sxm")
    default_table = format_markdown(both).split("## With the fitted host scale")[0]
    rows = [line.split(" | ")[:3] for line in default_table.splitlines()
            if line.startswith("| all |")]
    assert rows == [["| all", "eager", "4"], ["| all", "compile", "2"]]


def test_cli_exits_3_on_an_impossible_bound_and_writes_every_format(tmp_path, capsys) -> None:
    paths = [str(p) for p in TIMED]
    code = main(["validate", *paths, "--eager", str(TIMINGS)])
    assert code == 3  # a measured time beats the speed of light, as for every command
    out = capsys.readouterr().out
    assert "| all | eager | 4 | 1 |" in out
    assert "worst estimates" in out
    code = main(["validate", *paths, "--eager", str(TIMINGS), "--out", str(tmp_path / "v.md")])
    out, err = capsys.readouterr()
    assert code == 3
    assert out == ""  # with --out the report goes to the file only
    assert err.startswith("analyzing 4 problems in 1 worker process")  # before any result
    assert "[4/4] ok" in err  # progress, one line per problem
    assert "4 problems checked, 0 failed to analyze, 1 measured faster than" in err
    assert f"wrote {tmp_path / 'v.md'}" in err
    assert (tmp_path / "v.md").read_text().startswith("# torchroofline validate")
    for suffix in (".csv", ".json"):
        assert main(["validate", paths[0], "--eager", str(TIMINGS), "--out",
                     str(tmp_path / f"v{suffix}")]) == 0
    rows = (tmp_path / "v.csv").read_text().splitlines()
    assert rows[0].startswith("level,file,sol_ms,eager_estimate_ms,eager_measured_ms")
    assert len(rows) == 2
    assert json.loads((tmp_path / "v.json").read_text())["summary"]["all"]["impossible"] == 0


def test_plot_draws_estimate_against_measured(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    picture = tmp_path / "v.png"
    assert main(["validate", str(TIMED[0]), "--eager", str(TIMINGS), "--plot", str(picture)]) == 0
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {picture}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        # a syntax error is said where it is, without "--debug shows the traceback" (its
        # traceback adds nothing to json's own message)
        ("{not json", "cannot read timings JSON (Expecting property name enclosed in double "
                      "quotes at line 1, column 2); fix the file"),
        ('{"level1": {"1_Square_matrix_multiplication_.py": {"mean": -1}}}',
         "no finite positive 'mean'"),
        ('{"level1": {"1_Square_matrix_multiplication_.py": {"mean": 0}}}',
         "no finite positive 'mean'"),
        ('{"level1": {"999_Unknown.py": {"mean": 1.0}}}', "names none of the"),
    ],
)
def test_bad_timings_give_one_clear_line(tmp_path, capsys, content: str, message: str) -> None:
    bad = tmp_path / "times.json"
    bad.write_text(content)
    with pytest.raises(InputError, match=re.escape(message)):
        validate([TIMED[0]], {"eager": bad}, "h100-sxm")
    assert main(["validate", str(TIMED[0]), "--eager", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert "--debug" not in err[0]


def test_a_timings_folder_names_the_files_in_it(tmp_path, capsys) -> None:
    # KernelBench keeps a GPU's timings in a folder (results/timing/H100_together/); passing
    # the folder read "cannot read timings JSON ([Errno 21] Is a directory: ...); --debug
    # shows the traceback"
    folder = tmp_path / "H100_together"
    folder.mkdir()
    for name in ("baseline_time_torch.json", "baseline_time_torch_compile_inductor_default.json"):
        (folder / name).write_text("{}")
    assert main(["validate", str(TIMED[0]), "--eager", str(folder)]) == 2
    [err] = capsys.readouterr().err.strip().splitlines()
    assert err == (f"torchroofline: error: {folder}: is a folder; pass a timings JSON file in "
                   "it: baseline_time_torch.json, "
                   "baseline_time_torch_compile_inductor_default.json")


def test_validate_needs_a_timing_file(capsys) -> None:
    assert main(["validate", str(TIMED[0])]) == 2
    assert "at least one timing JSON" in capsys.readouterr().err


def _timings_at_host_scale(tmp_path: Path, scale: float) -> dict[str, Path]:
    """Eager and compile timing JSONs whose times are our own estimates on a host ``scale``
    times slower than the default profile: timings whose host scale is known."""
    params = DEFAULT_PARAMS.host_scaled(scale)
    files = {}
    for mode, key in (("eager", "eager_estimate"), ("compile", "fused_estimate")):
        times: dict[str, dict] = {}
        for path in TIMED[:2] + TIMED[3:]:  # LayerNorm's time would be below the bound
            result = analyze_file(path, "h100-sxm").on("h100-sxm", estimate_params=params)
            level = path.parent.name
            times.setdefault(level, {})[path.name] = {"mean": result.time_ms[key]}
        files[mode] = tmp_path / f"{mode}.json"
        files[mode].write_text(json.dumps(times))
    return files


def test_validate_fits_a_known_host_scale(tmp_path, capsys) -> None:
    # times made on a host at 0.5× the default profile (a grid point: 2^(-20/20)); the Conv2D
    # problem is launch-bound, so its estimates move with the host scale and pin it down
    timings = _timings_at_host_scale(tmp_path, 0.5)
    report = validate(TIMED, timings, "h100-sxm")
    assert report["host_scale"]["fitted"] == pytest.approx(0.5, rel=1e-12)
    assert report["host_scale"]["fitted_on"] == ["eager", "compile"]
    for mode in ("eager", "compile"):
        fitted = report["host_scale"]["summary"]["all"]["accuracy"][mode]
        assert fitted["median_abs_log2"] == pytest.approx(0.0, abs=1e-12)  # exact at 0.5
        default = report["summary"]["all"]["accuracy"][mode]
        assert default["median"] > 1  # the default host is slower: estimates above the times
    out = tmp_path / "v.json"
    code = main(["validate", *map(str, TIMED[:2]), str(TIMED[3]), "--eager", str(timings["eager"]),
                 "--compile", str(timings["compile"]), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0
    assert "your host runs at 0.5× the default profile: pass --host-scale 0.5" in err
    # priced at the fitted scale, the fit is relative to it: 1×, and the estimates match
    rescaled = validate(TIMED, timings, "h100-sxm", host_scale=0.5)
    assert rescaled["host_scale"]["fitted"] == pytest.approx(0.5, rel=1e-12)
    assert rescaled["summary"]["all"]["accuracy"]["eager"]["median"] == pytest.approx(1.0)


def _check(name: str, ratio_at) -> Check:  # noqa: ANN001
    """A problem measured at 1 ms whose eager estimate at host scale s is ``ratio_at(s)`` ms."""
    curve = tuple(ratio_at(scale) for scale in HOST_SCALE_GRID)
    return Check(1, name, 0.1, {"eager": curve[USED_SCALE]}, {"eager": 1.0}, {"eager": ""},
                 {"eager": curve})


def test_the_fit_lowers_the_error_it_reports_or_says_none_helps() -> None:
    # two problems exact at the scale used, one 8× off whatever the scale: least squares of
    # ln(ratio) would pick s = 8^(-1/3) = 0.5 (2 ln² s + ln² 8s is least there), turning the
    # median |log2| of [0, 0, 3] = 0 into that of [1, 1, 2] = 1. The reported error only rises
    # away from 1×: no host scale helps.
    checks = [_check("a", lambda s: s), _check("b", lambda s: s), _check("c", lambda s: 8 * s)]
    assert fit_error(checks, HOST_SCALE_GRID.index(0.5)) == pytest.approx(1.0)
    assert fit_host_scale(checks) == USED_SCALE
    # all three 2× slow: 0.5× brings the two to exact, median |log2| 1 → 0
    slow = [_check("a", lambda s: 2 * s), _check("b", lambda s: 2 * s),
            _check("c", lambda s: 8 * s)]
    fitted = fit_host_scale(slow)
    assert HOST_SCALE_GRID[fitted] == 0.5
    assert fit_error(slow, fitted) == pytest.approx(0.0, abs=1e-12)
    assert fit_error(slow, USED_SCALE) == pytest.approx(1.0)


def test_the_report_says_when_no_host_scale_helps() -> None:
    report = {"host_scale": {"used": 1.0, "fitted": 1.0, "helps": False, "fitted_on": ["eager"],
                             "error": {"used": 0.21, "fitted": 0.21}}}
    assert host_scale_line(report) == (
        "no host scale fits your times better than the 1× used (mean of the median |log2| of "
        "eager: 0.21): keep it"
    )


def test_the_host_scale_grid_is_geometric_around_one() -> None:
    assert HOST_SCALE_GRID[0] == 0.25 and HOST_SCALE_GRID[-1] == 4.0
    assert HOST_SCALE_GRID[len(HOST_SCALE_GRID) // 2] == 1.0


def test_an_unguarded_script_runs_once(tmp_path) -> None:
    # no `if __name__ == "__main__":` guard: workers must not run the script again (they would
    # print its line once each and try to start workers of their own)
    script = tmp_path / "check.py"
    script.write_text(textwrap.dedent(f"""
        from torchroofline.suites.validate import validate
        print("script ran")
        report = validate({[str(p) for p in TIMED]!r}, {{"eager": {str(TIMINGS)!r}}},
                          "h100-sxm", jobs=2)
        print("checked", report["summary"]["all"]["problems"])
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["script ran", "checked 4"]
    assert "bootstrapping" not in done.stderr
