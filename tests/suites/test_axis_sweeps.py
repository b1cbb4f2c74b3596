"""Sweeps (suites/sweep.py): crossovers against closed forms, points against single analyses."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import torchroofline
from torchroofline.cli import main
from torchroofline.cli.common import UsageError
from torchroofline.cli.sweep import parse_axis
from torchroofline.errors import InputError
from torchroofline.price.hardware import get_gpu
from torchroofline.suites.kernelbench import analyze_file
from torchroofline.suites.solexecbench import analyze_workload, load_definition, load_workloads
from torchroofline.suites.sweep import (
    SweepInterrupted,
    point_of,
    sweep_kernelbench,
    sweep_model,
    sweep_solexecbench,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SQUARE = FIXTURES / "kernelbench" / "level1" / "1_Square_matrix_multiplication_.py"
GEMM_DIR = FIXTURES / "solexecbench" / "gemm"
WIDTH = 1024


def batch_inputs(batch: int) -> tuple:
    return (torch.empty(batch, WIDTH, device="meta"),)


def ridge(gpu: str) -> float:
    """FLOPs per byte where an fp32 matmul turns compute bound on ``gpu``: the peak of the unit
    fp32 matmuls run on (PyTorch's default: CUDA cores) over the HBM bandwidth."""
    linear = nn.Linear(WIDTH, WIDTH, bias=False)
    return torchroofline.analyze(linear, batch_inputs(1), gpu).ridge_point


def test_square_gemm_turns_compute_bound_at_six_ridges():
    # C = A·B, all N×N fp32: FLOPs 2N³, compulsory bytes 3·4·N² (A, B read, C written), so
    # compute time 2N³/P > memory time 12N²/B exactly when N > 6·P/B = 6R (at N = 6R the two
    # tie, and a tie is memory bound: B200's R is 10.0, so N = 60 ties). The swept values
    # bracket it (16 memory bound, 256 compute bound); bisection finds the first N > 6R.
    sweep = sweep_kernelbench(SQUARE, {"N": [16, 256]}, ["h100", "b200"], data="any")
    bound = {c.line["gpu"]: c for c in sweep.crossovers if c.kind == "bound"}
    for gpu in ("h100-sxm", "b200"):
        crossover = bound[gpu]
        assert (crossover.old, crossover.new, crossover.exact) == ("memory", "compute", True)
        assert crossover.after == math.floor(6 * ridge(gpu)) + 1
        assert crossover.before == crossover.after - 1


def test_batched_gemm_crossover_batch_is_the_ridge_formula():
    # y = x·Wᵀ, x b×n, W n×n, fp32: FLOPs 2bn², compulsory bytes 4(bn + n² + bn). Compute
    # bound when 2bn²/P ≥ 4(2bn + n²)/B, i.e. b ≥ 2Rn/(n − 4R) with R = P/B the ridge point.
    linear = nn.Linear(WIDTH, WIDTH, bias=False)
    sweep = sweep_model(linear, batch_inputs, {"batch": [1, 16, 1024]},
                        ["h100", "l40s"])
    for crossover in (c for c in sweep.crossovers if c.kind == "bound"):
        r = ridge(crossover.line["gpu"])
        assert crossover.after == math.floor(2 * r * WIDTH / (WIDTH - 4 * r)) + 1
        assert crossover.exact and crossover.before == crossover.after - 1
    assert {c.line["gpu"] for c in sweep.crossovers if c.kind == "bound"} == {"h100-sxm", "l40s"}


class Doubles(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


SAMPLE_ELEMENTS = 2**20  #: fp32: 4 MiB a sample, a multiple of the allocator's 512-byte block


def test_fit_batch_is_memory_over_bytes_per_sample():
    # x * 2 holds its input and output at once: 2 · 4 B · 2**20 = 8 MiB a sample and nothing
    # else, so the largest batch that fits is ⌊memory / 8 MiB⌋ (H100 80 GB: 9,536; L40S 48 GB:
    # 5,722).
    sweep = sweep_model(
        Doubles(), lambda batch: (torch.empty(batch, SAMPLE_ELEMENTS, device="meta"),),
        {"batch": [1, 20000]}, ["h100", "l40s"],
    )
    per_sample = 2 * 4 * SAMPLE_ELEMENTS
    fits = {c.line["gpu"]: c for c in sweep.crossovers if c.kind == "fit"}
    for gpu in ("h100-sxm", "l40s"):
        assert fits[gpu].before == get_gpu(gpu).memory_bytes // per_sample
        assert (fits[gpu].old, fits[gpu].new, fits[gpu].exact) == ("fits", "does not fit", True)
    assert [p.peak_bytes for p in sweep.points[::2]] == [per_sample, 20000 * per_sample]


def test_points_equal_single_analyses_on_every_gpu_and_precision():
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
    inputs = lambda batch: (torch.empty(batch, 64, device="meta"),)  # noqa: E731
    sweep = sweep_model(model, inputs, {"batch": [1, 32]}, ["h100", "mi300x"], ["fp32", "bf16"])
    assert len(sweep.points) == 2 * 2 * 2 and sweep.traces == 2  # one trace per value
    for point in sweep.points:
        single = torchroofline.analyze(model, inputs(point.values["batch"]), point.gpu,
                                       point.precision)
        assert point == point_of(single, point.values)


def test_kernelbench_point_equals_the_file_with_that_global(tmp_path):
    # set by tuple unpacking, as KernelBench files do; hidden is computed from batch_size at
    # import and follows the swept value
    source = (
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, width):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(width, width)\n\n"
        "    def forward(self, x):\n"
        "        return torch.relu(self.fc(x))\n\n"
        "batch_size, width = 4, 32\nhidden = batch_size * 2\n\n"
        "def get_inputs():\n    return [torch.randn(batch_size, hidden, width)]\n\n"
        "def get_init_inputs():\n    return [width]\n"
    )
    problem = tmp_path / "9_Linear_relu.py"
    problem.write_text(source)
    sweep = sweep_kernelbench(problem, {"batch_size": [2, 8], "width": [16, 64]}, ["h100"])
    assert sweep.axes == ("batch_size", "width") and len(sweep.points) == 4
    for point in sweep.points:
        single = tmp_path / "single" / problem.name
        single.parent.mkdir(exist_ok=True)
        single.write_text(source.replace(
            "batch_size, width = 4, 32",
            f"batch_size, width = {point.values['batch_size']}, {point.values['width']}",
        ))
        expected = point_of(analyze_file(single, "h100"), point.values)
        assert point == expected
    assert sweep.points[0].flops < sweep.points[-1].flops


def test_kernelbench_global_not_in_the_file():
    with pytest.raises(InputError, match="no top-level assignment to batch"):
        sweep_kernelbench(SQUARE, {"batch": [1, 2]})


def test_solexecbench_workloads_and_set_axis_equal_single_analyses():
    definition, workloads = load_definition(GEMM_DIR), load_workloads(GEMM_DIR)
    sweep = sweep_solexecbench(GEMM_DIR, None, ["h100", "b200"])
    assert sweep.axes == ("M",) and sweep.values == ((16, 128),)
    by_m = {w.axes["M"]: w for w in workloads}
    for point in sweep.points:
        single = analyze_workload(definition, by_m[point.values["M"]], point.gpu)
        assert point == point_of(single, point.values)
    resized = sweep_solexecbench(GEMM_DIR, {"M": [4096]}, ["h100"], narrow=False)
    (point,) = resized.points
    assert point.flops == 2 * 4096 * 64 * 32  # C = A·Bᵀ: 2·M·N·K
    with pytest.raises(InputError, match="no var axis"):
        sweep_solexecbench(GEMM_DIR, {"N": [1, 2]})


def test_gpu_ranking_is_the_order_of_single_analyses():
    model = nn.Linear(WIDTH, WIDTH, bias=False)
    gpus = ["h100", "b200", "l40s", "mi300x"]
    sweep = sweep_model(model, batch_inputs, {"batch": [1, 64, 1024]}, gpus)

    def ranking(batch: int) -> list[str]:
        results = [torchroofline.analyze(model, batch_inputs(batch), gpu) for gpu in gpus]
        return [r.gpu.key for r in sorted(results, key=lambda r: r.sol_s)]

    for batch in (1, 64, 1024):
        assert sweep.ranking({"batch": batch}, "fp32") == ranking(batch)
    changes = [c for c in sweep.crossovers if c.kind == "ranking"]
    assert changes  # the L40S's fp32 CUDA cores pass the H100's once compute bound
    for change in changes:
        assert change.old == " > ".join(ranking(change.before))
        assert change.new == " > ".join(ranking(change.after))
    ranks = {(p["values"]["batch"], p["gpu"]): p["rank"]
             for p in sweep.to_dict()["sweep"]["points"]}
    assert [ranks[(1024, gpu)] for gpu in ranking(1024)] == [1, 2, 3, 4]


def test_an_empty_point_says_what_analyze_says_and_is_not_ranked():
    # x + 1 at N = 0 has nothing to compute or move: analyze says so, the sweep said "0 ns
    # memory" and ranked the tie; at N = 1 its SoL, 8 B over the H100's 3.35 TB/s = 2.39 ps,
    # read "0.00239 ns"
    from torchroofline.present.sweeps import format_sweep

    class AddOne(nn.Module):
        def forward(self, x):
            return x + 1

    sweep = sweep_model(AddOne(), lambda n: (torch.empty(n),), {"N": [0, 1]}, ["h100", "a100"],
                        narrow=False)
    empty = [p for p in sweep.points if p.values["N"] == 0]
    assert all(p.empty and p.sol_ms == 0 and sweep.rank(p) is None for p in empty)
    assert [sweep.rank(p) for p in sweep.points if p.values["N"] == 1] == [1, 2]
    rows = {line.split()[0]: line for line in format_sweep(sweep).splitlines()[5:7]}
    assert rows["0"].split()[-1] == "—" and "nothing to compute or move" in rows["0"]
    assert " memory " in rows["1"] and "ps" in rows["1"] and "0.00" not in rows["1"]


@pytest.mark.parametrize(
    ("text", "values"),
    [("batch=1,2,4", [1, 2, 4]), ("n=3:6", [3, 4, 5, 6]), ("n=0:10:5", [0, 5, 10]),
     ("b=1:64:*4", [1, 4, 16, 64]), ("eps=0.5,1e-3", [0.5, 0.001])],
)
def test_parse_axis(text, values):
    assert parse_axis(text)[1] == values


@pytest.mark.parametrize("text", ["batch", "batch=", "batch=a,b", "n=4:1", "n=1:8:*1"])
def test_parse_axis_refuses(text):
    with pytest.raises(UsageError):
        parse_axis(text)


@pytest.mark.parametrize(("text", "fault"), [
    ("N=1024:32:*2", "the range '1024:32:*2' ends (32) below its start (1024)"),
    ("N=32:1024:*1", "the range '32:1024:*1' has the step '*1', which never reaches 1024"),
    ("N=32:1024:0", "the range '32:1024:0' has the step '0', which never reaches 1024: a step"),
    ("N=32:64:*x", "'x' is no number"),
    ("N=1,,2", "an empty value"),
    ("N=1:2:3:4", "'1:2:3:4' has 4 parts; a range has 2 or 3"),
    ("N=1:inf", "'inf' is no finite number"),
    # a billion values were counted for ever before the first trace
    ("N=1:1e9", "more than 1000 values, each one a trace; give a coarser step"),
])
def test_a_bad_axis_is_one_line_naming_its_fault_and_the_syntax(capsys, text, fault):
    code = main(["sweep", str(SQUARE), "--set", text])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"torchroofline: error: --set {text}: {fault}")
    if "values" not in fault:
        assert err.strip().endswith("VALUES is a list 1,2,4 or a range lo:hi, lo:hi:step or "
                                    "lo:hi:*f with lo <= hi")


def test_cli_json_layout(tmp_path, capsys):
    out = tmp_path / "sweep.json"
    code = main(["sweep", str(SQUARE), "--set", "N=64,256", "--gpu", "h100,b200", "--data",
                 "any", "--format", "json", "--out", str(out), "--no-narrow"])
    assert code == 0
    data = json.loads(out.read_text())["sweep"]
    assert (data["axis"], data["values"], data["gpus"]) == ("N", [64, 256], ["h100-sxm", "b200"])
    assert len(data["points"]) == 4 and data["crossovers"]
    point = data["points"][0]
    assert {"sol_ms", "bound", "eager_estimate_ms", "fused_estimate_ms", "peak_bytes",
            "fits", "rank"} <= set(point)
    assert "points in" in capsys.readouterr().err


def test_an_interrupted_sweep_keeps_the_values_finished():
    # a Ctrl-C after minutes of values printed "interrupted" alone: nothing was kept
    linear = nn.Linear(WIDTH, WIDTH, bias=False)

    def inputs_then_ctrl_c(batch: int) -> tuple:
        if batch == 1024:
            raise KeyboardInterrupt  # as Ctrl-C raises it, mid-trace
        return batch_inputs(batch)

    with pytest.raises(SweepInterrupted) as stopped:
        sweep_model(linear, inputs_then_ctrl_c, {"batch": [1, 16, 256, 1024]}, ["h100", "l40s"])
    sweep = stopped.value.sweep
    assert sweep.values == ((1, 16, 256),) and len(sweep.points) == 3 * 2
    assert sweep.notes[-1] == ("interrupted after 3 of 4 values of batch: the report covers "
                               "them, its crossovers not narrowed")
    # compute bound from b = 2Rn/(n - 4R) (test above): the H100's b (~43) lies between 16 and
    # 256, the L40S's (~2·106·1024/600 ≈ 362) past the values finished; read between them, not
    # narrowed (no trace after the interrupt)
    crossing = {gpu: 2 * ridge(gpu) * WIDTH / (WIDTH - 4 * ridge(gpu)) for gpu in ("h100", "l40s")}
    assert 16 < crossing["h100"] <= 256 < crossing["l40s"]
    bound = [c for c in sweep.crossovers if c.kind == "bound"]
    assert [(c.line["gpu"], c.before, c.after, c.exact) for c in bound] == [
        ("h100-sxm", 16, 256, False)]


def test_an_interrupted_sweep_command_writes_the_values_finished(tmp_path, capsys, monkeypatch):
    from torchroofline.suites import sweep as sweeps

    analyzed = sweeps.analyze_file

    def then_ctrl_c(path, gpu, precision, *, built, **options):
        if built.inputs[0].shape[0] == 256:
            raise KeyboardInterrupt
        return analyzed(path, gpu, precision, built=built, **options)

    monkeypatch.setattr(sweeps, "analyze_file", then_ctrl_c)
    out = tmp_path / "sweep.json"
    code = main(["sweep", str(SQUARE), "--set", "N=32,64,256", "--data", "any", "--out",
                 str(out)])
    assert code == 130
    assert json.loads(out.read_text())["sweep"]["values"] == [32, 64]
    assert capsys.readouterr().err.strip().endswith("interrupted after 2 of 3 values of N: the "
                                                    "report covers them, its crossovers not "
                                                    "narrowed")


def test_sweep_picture_marks_each_crossover_at_its_value():
    from torchroofline.present.viz import plot_sweep

    sweep = sweep_model(nn.Linear(WIDTH, WIDTH, bias=False), batch_inputs,
                        {"batch": [1, 1024]}, ["h100"])
    (bound,) = [c for c in sweep.crossovers if c.kind == "bound"]
    figure = plot_sweep(sweep)
    (marker,) = [line for line in figure.axes[0].lines
                 if line.get_gid() == "crossover:bound:h100-sxm"]
    assert list(marker.get_xdata()) == [bound.after]
