"""benchmarks/: the generated suite is well formed and ``run.py --quick`` produces every figure.

No wall-clock threshold is asserted: only that figures exist, are positive, and agree with
closed forms where one exists.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_generated_suite_is_kernelbench_format(tmp_path):
    suite = _module("suite")
    paths = suite.write_suite(tmp_path)
    assert len(paths) >= 200
    assert {p.parent.name for p in paths} == {"level1", "level2", "level3"}
    assert len({p.name for p in paths}) == len(paths)
    for path in paths:
        source = path.read_text()
        compile(source, str(path), "exec")
        for part in ("class Model(nn.Module)", "def get_inputs()", "def get_init_inputs()"):
            assert part in source, (path, part)
    quick = suite.write_suite(tmp_path / "quick", quick=True)
    assert 0 < len(quick) < len(paths)
    assert len(suite.proto_subset(quick, quick=True)) == len(suite.QUICK_PROTO)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    report, figures = out / "RESULTS.md", out / "figures.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run.py"), "--quick", "--out", str(report),
         "--json", str(figures)],
        capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return report.read_text(), json.loads(figures.read_text())


def test_quick_report_has_every_section(quick_run):
    text, data = quick_run
    for heading in ("## Suite speed", "## Scale", "## Per-op overhead",
                    "## Many ops, and real inputs",
                    "## The prototype's method side by side", "## Where the time goes"):
        assert heading in text
    assert "python benchmarks/run.py --quick" in text
    assert data["machine"]["cores"] > 0 and data["machine"]["ram_gib"] > 0
    assert data["machine"]["torch"] in text


def test_quick_suite_figures(quick_run):
    _, data = quick_run
    for jobs in ("1", "2"):
        run = data["suite"][jobs]
        assert run["problems"] > 0
        assert run["ok"] == run["problems"], run["failed"]
        for key in ("wall_s", "sum_s", "median_s", "max_s", "peak_rss_bytes"):
            assert run[key] > 0, key
        assert run["wall_s"] > run["sum_s"] / int(jobs)


def test_quick_scale_figures(quick_run):
    _, data = quick_run
    (row,) = data["scale"]
    assert row["model"] == "GPT-2 small"
    assert row["analyze"]["seconds"] > 0 and row["process_peak_rss_bytes"] > 0
    assert row["ops"] > 12  # at least one op per block
    d, layers, vocab, context = 768, 12, 50257, 2048
    per_block = 4 * d + 4 * d * d + 2 * 4 * d * d  # 2 LayerNorms, q/kv/o, MLP (no biases)
    assert row["params"] == vocab * d + context * d + layers * per_block + 2 * d  # tied head


def test_quick_per_op_figures(quick_run):
    _, data = quick_run
    row = data["perop"]
    assert row["ops"] == row["analyze_ops"] == 49 * row["depth"]
    for key in ("bare_s", "mode_s", "trace_s", "analyze_s", "gru_s"):
        assert row[key] > 0, key
    assert row["gru_ops"] == 1  # the whole GRU is one intercepted call
    assert all(ms > 0 for ms in row["per_call_ms"].values())


def test_quick_speed_cases(quick_run):
    _, data = quick_run
    (slices,) = data["cases"]["slices"]
    # cat of n single-row slices of a (n, 16) fp32 x, summed: x read once, 4 bytes written
    assert slices["compulsory_bytes"] == (slices["n"] * 16 + 1) * 4
    (real,) = data["cases"]["real"]
    assert real["real_s"] > 0 and real["meta_s"] > 0
    assert real["ratio"] == real["real_s"] / real["meta_s"]


def test_quick_prototype_figures(quick_run):
    _, data = quick_run
    if importlib.util.find_spec("ptflops") is None:
        assert "ptflops is not installed" in data["proto_skipped"]
        return
    rows = {row["label"]: row for row in data["proto"]}
    assert set(rows) == {"level2/Conv2d_ReLU_BiasAdd", "level3/MLP"}
    for row in rows.values():
        for method in ("ours", "proto"):
            assert row[method]["seconds"] > 0 and row[method]["peak_rss_bytes"] > 0
        assert row["proto"]["flops"] > 0 and row["proto"]["bytes"] > 0
    mlp = rows["level3/MLP"]
    sizes = [4096, 2048, 2048, 1024, 10]
    matmuls = 2 * 128 * sum(a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True))
    assert mlp["ours"]["flops"]["tensor"] == matmuls
    assert mlp["ours"]["flop_counter_mode"] == matmuls


def test_quick_run_never_writes_the_tracked_results():
    run = _module("run")
    tracked = BENCHMARKS / "RESULTS.md"
    assert run.report_path(None, quick=False) == tracked
    assert run.report_path(None, quick=True).resolve() != tracked.resolve()
    assert run.report_path("x.md", quick=True) == Path("x.md")
