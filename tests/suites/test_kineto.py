"""``torchroofline trace``: the join of GPU activity to ops, the rebuild of each op from its
record_shapes fields, its pricing, the report and the command line, on small traces written by
hand (tests/fixtures/traces/) and one real H100 trace from AMD-AGI/TraceLens (MIT, its licence
beside it)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest
import torch

from torchroofline.cli import main
from torchroofline.errors import TraceFileError, UnknownGPUError
from torchroofline.price.hardware import get_gpu
from torchroofline.suites.kineto import analyze_trace, read_trace
from torchroofline.suites.kineto.pricing import Pricer
from torchroofline.suites.kineto.report import WRITERS, comparison

TRACES = Path(__file__).resolve().parent.parent / "fixtures" / "traces"
TINY = TRACES / "tiny_h100.json"
TF32 = TRACES / "tiny_tf32.json"
BERT = TRACES / "h100_gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.fixture(scope="module")
def tiny():
    return analyze_trace(TINY)


def _instance(report, name):
    (found,) = [i for i in report.instances if i.op.name == name]
    return found


# --- the join ----------------------------------------------------------------------------------


def test_each_activity_joins_the_innermost_op_that_launched_it() -> None:
    trace = read_trace(TINY)
    owner = {a.name: (trace.ops[a.op].name if a.op is not None else None) for a in trace.activities}
    # the GEMM's launch sits in aten::addmm inside aten::linear: the innermost op, counted once
    assert owner["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"] == "aten::addmm"
    assert owner["Memset (Device)"] == "aten::zero_"  # a memset joins like a kernel
    # correlation 16 has no launch call in the trace: the kernel's External id names aten::neg
    neg = "void at::native::vectorized_elementwise_kernel<4, neg_kernel_cuda>"
    assert owner[neg] == "aten::neg"


def test_unjoined_activity_is_kept_with_its_reason() -> None:
    reasons = {a.name: a.unjoined for a in read_trace(TINY).activities if a.op is None}
    assert reasons == {
        "void at::native::vectorized_elementwise_kernel<4, queued_before>":
            "queued before the profiler's first CPU op (its launch is not in the trace)",
        "outside_any_op_kernel":
            "its launch call cudaLaunchKernel ran inside no aten op (a library or Python-level "
            "launch)",
    }


def test_the_ops_at_the_kernel_floor_are_said_in_one_note(tiny) -> None:
    # every priced op of TINY is small enough that its roofline bound is below one L2 hit,
    # 150 cycles / 1980 MHz (the H100 SXM's boost clock) = 0.0758 µs, which its SoL shows bare
    assert get_gpu("h100-sxm").boost_clock_mhz == 1980
    (note,) = [note for note in tiny.notes if "one-kernel floor" in note]
    assert note.startswith("5 ops at the one-kernel floor, SoL 0.076 µs: no kernel that moves "
                           "data ends before one L2 hit")
    assert all(i.figures.sol_warm_s == pytest.approx(150 / 1980e6) for i in tiny.priced)


def test_gpu_time_busy_and_wall(tiny) -> None:
    # activities 6 + 10 + 4 + 3 + 1 + 5 + 3 + 2 µs, none overlapping; wall: the first activity
    # (ts 50) to the last end (ts 300 + 2)
    assert tiny.gpu_time_us == pytest.approx(34.0)
    assert tiny.gpu_busy_us == pytest.approx(34.0)
    assert tiny.wall_us == pytest.approx(252.0)
    assert tiny.host_bound_share == pytest.approx(1 - 34 / 252)


def test_module_path_from_the_module_ranges(tiny) -> None:
    assert _instance(tiny, "aten::addmm").op.module == "Block_0/Linear_0"
    assert _instance(tiny, "aten::add").op.module == "Block_0"


# --- the rebuild and the figures -------------------------------------------------------------


def test_addmm_closed_form(tiny) -> None:
    figures = _instance(tiny, "aten::addmm").figures
    m, k, n, bf16 = 128, 256, 512, 2
    assert figures.flops == 2 * m * k * n
    # reads A (m×k), B (k×n) and the bias (n), writes C (m×n)
    assert figures.bytes == (m * k + k * n + n + m * n) * bf16 == 459_776
    gpu = get_gpu("h100-sxm")
    cold = max(figures.flops / gpu.tensor_peak("bf16"),
               figures.bytes / gpu.memory_bandwidth_bytes_per_s)
    assert figures.sol_cold_s == pytest.approx(cold)
    assert figures.sol_warm_s <= figures.sol_cold_s


def test_every_bound_is_below_its_measured_time(tiny) -> None:
    for instance in tiny.priced:
        assert instance.figures.sol_warm_s * 1e6 <= instance.measured_us
        assert not instance.faster_than_light


def test_missing_strides_are_assumed_contiguous_and_said(tiny) -> None:
    mul = _instance(tiny, "aten::mul").figures
    assert mul.priced_as == "aten.mul.Scalar"  # 'Scalar' in the trace picks the Scalar overload
    assert "contiguous strides" in mul.assumed
    assert mul.bytes == 2 * 128 * 512 * 2  # reads and writes 128×512 bf16
    assert any("contiguous strides" in note for note in tiny.notes)


def test_an_op_that_cannot_be_rebuilt_is_listed_with_its_time(tiny) -> None:
    (unpriced,) = tiny.unpriced
    assert unpriced.op.name == "mylib::fused_thing"
    assert unpriced.measured_us == 5.0
    assert "no op of the installed PyTorch" in unpriced.why_unpriced
    assert "mylib::fused_thing ×1, 5.0 µs" in WRITERS["text"](tiny)


def test_tf32_kernel_names_price_fp32_gemms_on_tf32_tensor_cores() -> None:
    tf32, simt = analyze_trace(TF32).instances
    gpu = get_gpu("h100-sxm")
    flops = 2 * 1024**3
    # compute-bound either way: 3 × 4 MiB at 3.35 TB/s is 3.8 µs cold
    assert tf32.figures.sol_warm_s == pytest.approx(flops / gpu.tensor_peak("tf32"))
    assert simt.figures.sol_warm_s == pytest.approx(flops / gpu.vector_peak("fp32"))
    assert tf32.figures.math and simt.figures.math is None


def test_the_gpu_comes_from_the_trace_and_gpu_overrides_it(tiny) -> None:
    assert tiny.gpu.key == "h100-sxm"
    assert tiny.device_name == "NVIDIA H100 80GB HBM3"
    other = analyze_trace(TINY, gpu="mi300x")
    assert other.gpu.key == "mi300x"
    assert "as --gpu asks" in other.notes[0]


# --- a real trace ----------------------------------------------------------------------------


def test_a_real_h100_trace_joins_and_prices_every_kernel() -> None:
    report = analyze_trace(BERT)
    assert report.gpu.key == "h100-sxm"
    assert len(report.instances) == 61 and not report.unjoined and not report.unpriced
    assert sum(i.measured_us for i in report.instances) == pytest.approx(report.gpu_time_us)
    assert not report.faster_than_light
    # its bf16 GEMMs are cutlass "tensorop_bf16_s16816gemm": bf16 math, not TF32
    assert not any(i.figures.math for i in report.instances)
    kinds = {row.kind: row.count for row in report.kinds()}
    assert kinds["aten::addmm"] == 26 and kinds["aten::_flash_attention_forward"] == 4
    # its 5 GELUs record no approximate=: the note said "assuming approximate at its default",
    # leaving the reader to look the default up
    assert ("5 ops priced assuming approximate='none', its default (the trace does not record "
            "it)") in report.notes


def test_warm_bounds_of_ops_that_move_data_are_never_zero() -> None:
    from torchroofline.price.roofline import L2_HIT_LATENCY_CYCLES

    report = analyze_trace(BERT)
    gpu = report.gpu
    floor_s = L2_HIT_LATENCY_CYCLES / (gpu.boost_clock_mhz * 1e6)  # 150 / 1.98 GHz = 76 ns
    for instance in report.priced:
        figures = instance.figures
        if figures.bytes:
            # at least its bytes through the L2 at the L2's peak, and one L2 hit's latency
            assert figures.sol_warm_s >= max(figures.bytes / gpu.l2_bandwidth, floor_s) * 0.999
            # a one-element op's headroom is not millions: its time is within 1000x of one hit
            assert instance.measured_us / (figures.sol_warm_s * 1e6) < 1000
        if figures.flops == 0:
            assert figures.bound == "memory"
    # the one-element `eq` (a [1, 141] mask): 2 bf16/bool elements cannot beat one L2 hit
    eq = next(i for i in report.priced if i.op.name == "aten::eq")
    assert eq.figures.sol_warm_s == pytest.approx(floor_s)
    # no op kind that moves data reads "0.0 %" of SoL
    moved = {i.op.name for i in report.priced if i.figures.bytes}
    assert all(round(100 * row.sol_fraction, 1) > 0 for row in report.kinds() if row.kind in moved)


def test_the_host_copy_of_item_is_bounded_and_estimated_as_a_copy() -> None:
    from torchroofline.price.estimate_params import DEFAULT_PARAMS
    from torchroofline.price.roofline import L2_HIT_LATENCY_CYCLES

    # `.item()` (aten._local_scalar_dense, a "Memcpy DtoH" activity) moves no HBM data the
    # plan sees, but the copy engine reads its scalar through the L2 (one hit: 150 cycles at
    # 1.98 GHz = 76 ns) and the scalar crosses the host link: BERT's is a bool, 1 B, at PCIe
    # 5.0 x16's 32 GT/s · 128/130 · 16 lanes / 8 = 63.0 GB/s, 16 ps. The bound is the larger,
    # warm and cold; it was the 16 ps, a headroom of 149,220x on Qwen's
    report = analyze_trace(BERT)
    item = next(i for i in report.priced if i.op.name == "aten::_local_scalar_dense")
    assert item.op.args["Input type"] == ["bool"]
    link = 32e9 * 128 / 130 * 16 / 8
    assert report.gpu.host_link_bytes_per_s == pytest.approx(link)
    hit_s = L2_HIT_LATENCY_CYCLES / (report.gpu.boost_clock_mhz * 1e6)
    assert item.figures.sol_warm_s == pytest.approx(max(hit_s, 1 / link))
    assert item.figures.sol_cold_s == pytest.approx(max(hit_s, 1 / link))
    # its estimate is a copy's (host_copy_s: 1 B at the achievable share of the link, plus the
    # copy engine's fill latency), not the 0.0 µs of a program that launches no kernel
    params = DEFAULT_PARAMS.for_gpu(report.gpu)
    copy_s = 1 / (params.host_copy_fraction * link) + params.fill_latency_s
    assert item.figures.estimate_s == pytest.approx(copy_s)
    assert item.figures.estimate_s > item.figures.sol_warm_s
    # an int64 scalar is 8 B; the same op with no host copy (a CPU tensor's scalar) launches
    # nothing to bound or estimate
    op = dataclasses.replace(item.op, args={**item.op.args, "Input type": ["long"]})
    pricer = Pricer(report.gpu, torch.bfloat16)
    pinned = pricer.figures(op, None, host="pinned")
    assert pinned.sol_warm_s == pytest.approx(max(hit_s, 8 / link))
    assert pinned.estimate_s == pytest.approx(8 / (params.host_copy_fraction * link)
                                              + params.fill_latency_s)
    on_the_host = pricer.figures(op, None)
    assert (on_the_host.sol_warm_s, on_the_host.estimate_s) == (0, 0)


def test_a_traced_op_is_estimated_cold() -> None:
    from torchroofline.price.estimate_params import DEFAULT_PARAMS
    from torchroofline.price.memory_time import memory_s

    # in a model's step an op's inputs were last touched many kernels before: the estimate reads
    # them from HBM. The V100 has a published L2 bandwidth, so a warm estimate would read the
    # [128, 512] bf16 add's 393,216 B (two inputs and the output) from its 6 MB L2 instead
    # (issue 39: the V100's elementwise ops at 0.2-0.75× of their kernels); cold, it is that
    # many bytes at the HBM rate plus Volta's fill (4,230 cycles at 1530 MHz)
    report = analyze_trace(TINY, gpu="v100")
    add = _instance(report, "aten::add")
    v100 = get_gpu("v100")
    params = DEFAULT_PARAMS.for_gpu(v100)
    assert add.figures.bytes == 3 * 128 * 512 * 2
    cold_s = memory_s(add.figures.bytes, v100, params, "cold") + params.fill_latency_s
    assert add.figures.estimate_s == pytest.approx(cold_s)
    assert memory_s(add.figures.bytes, v100, params, "warm") < memory_s(
        add.figures.bytes, v100, params, "cold")


def test_item_is_a_host_copy_whatever_its_memcpy_is_called(tmp_path) -> None:
    # ROCm names .item()'s copy "Memcpy DtoD (Device -> Device)" (a MI300X trace of the same
    # BERT): its scalar still ends on the host, so it is priced as the H100's DtoH is, not as
    # a GPU-side op that keeps nothing (SoL 0, estimate 0.0, "nothing kept")
    import gzip

    document = json.loads(gzip.decompress(BERT.read_bytes()))
    for event in document["traceEvents"]:
        if event["name"] == "Memcpy DtoH (Device -> Pinned)":
            event["name"] = "Memcpy DtoD (Device -> Device)"
    renamed = _written(tmp_path, "rocm_named.json", json.dumps(document).encode())
    as_named, as_cupti = (next(i for i in analyze_trace(path).priced
                               if i.op.name == "aten::_local_scalar_dense")
                          for path in (renamed, BERT))
    assert as_named.figures.sol_warm_s == as_cupti.figures.sol_warm_s > 0
    assert as_named.figures.estimate_s == as_cupti.figures.estimate_s > 0


# --- the report ------------------------------------------------------------------------------


def test_json_keys_scripts_rely_on(tiny) -> None:
    document = json.loads(WRITERS["json"](tiny))
    assert document["gpu_key"] == "h100-sxm"
    assert document["gpu_time_us"] == pytest.approx(34.0)
    row = next(op for op in document["ops"] if op["op"] == "aten::addmm")
    assert {"op", "measured_us", "sol_us", "estimate_us", "faster_than_light"} <= row.keys()
    assert row["measured_us"] == 10.0


def test_csv_and_markdown(tiny) -> None:
    lines = WRITERS["csv"](tiny).splitlines()
    assert lines[0].startswith("op,module,start_us,measured_us,sol_us")
    assert len(lines) == 1 + len(tiny.instances)
    assert "| aten::addmm | 1 |" in WRITERS["md"](tiny)


def test_kinds_sum_their_instances(tiny) -> None:
    rows = tiny.kinds()
    assert sum(row.measured_us for row in rows) == pytest.approx(
        sum(i.measured_us for i in tiny.instances)
    )
    addmm = next(row for row in rows if row.kind == "aten::addmm")
    assert addmm.sol_fraction == pytest.approx(addmm.sol_us / 10.0)
    assert addmm.headroom == pytest.approx(10.0 / addmm.sol_us)


def test_comparison_puts_kinds_side_by_side(tiny) -> None:
    compared = comparison(tiny, analyze_trace(TINY, gpu="mi300x"))
    addmm = next(k for k in compared["kinds"] if k["kind"] == "aten::addmm")
    assert addmm["measured_us"] == [10.0, 10.0]
    # the same time against a different GPU's bound
    assert addmm["sol_fraction"][0] != addmm["sol_fraction"][1]


# --- bad files -------------------------------------------------------------------------------


def _written(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def _cpu_only() -> bytes:
    events = [e for e in json.loads(TINY.read_text())["traceEvents"] if e["cat"] == "cpu_op"]
    return json.dumps({"traceEvents": events}).encode()


def _no_shapes() -> bytes:
    document = json.loads(TINY.read_text())
    for event in document["traceEvents"]:
        event["args"] = {k: v for k, v in event["args"].items() if not k.startswith("Input")}
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("notjson.json", b"{not json", "not a JSON Chrome trace"),
        ("cut.json.gz", gzip.compress(TINY.read_bytes())[:200], "not a complete gzip file"),
        ("other.json", b'{"events": []}', "no traceEvents list"),
        ("cpu.json", _cpu_only(), "a CPU-only trace"),
        ("shapes.json", _no_shapes(), "record_shapes=True"),
    ],
    # ids by name: a gzip's bytes hold the time it was made, and parallel workers (xdist)
    # must collect the same tests
    ids=lambda value: value if isinstance(value, str) and value.endswith((".json", ".gz"))
    else "",
)
def test_a_bad_trace_is_one_line(tmp_path, name, content, message) -> None:
    with pytest.raises(TraceFileError) as caught:
        analyze_trace(_written(tmp_path, name, content))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_trace_naming_no_known_gpu_asks_for_gpu(tmp_path) -> None:
    document = json.loads(TINY.read_text())
    document["deviceProperties"][0]["name"] = "Imaginary Accelerator 9000"
    path = _written(tmp_path, "odd.json", json.dumps(document).encode())
    with pytest.raises(UnknownGPUError, match="pass --gpu"):
        analyze_trace(path)
    assert analyze_trace(path, gpu="h100").gpu.key == "h100-sxm"


@pytest.mark.parametrize(
    ("name", "sms", "memory_bytes", "closest"),
    [
        # an A100 board's driver name the table does not list (PG509-200 is an alias of the
        # A100 40GB now); 42.5e9 bytes: the 40 GB part
        ("NVIDIA A100-PG506-230", 108, 42505273344, "a100-40gb"),
        # ROCm's name for a GPU it has no marketing name for: 304 CUs and 192 GB are an MI300X
        ("AMD Radeon Graphics", 304, 205571227648, "mi300x"),
        # one MI250X die: 110 CUs, 64 GB
        ("AMD Radeon Graphics", 110, 68702699520, "mi250x"),
    ],
)
def test_a_trace_naming_an_unlisted_part_is_priced_on_the_closest(
        tmp_path, capsys, name, sms, memory_bytes, closest) -> None:
    document = json.loads(TINY.read_text())
    document["deviceProperties"][0].update(name=name, numSms=sms, totalGlobalMem=memory_bytes)
    path = _written(tmp_path, "board.json", json.dumps(document).encode())
    told: list[str] = []
    report = analyze_trace(path, note=told.append)
    assert report.gpu.key == closest
    # one line, naming the trace's GPU, the part priced and the way to choose another
    [line] = told
    assert name in line and report.gpu.name in line and "--gpu" in line and "\n" not in line
    assert analyze_trace(path, gpu="h100").gpu.key == "h100-sxm"  # --gpu overrides
    assert main(["trace", str(path), "--format", "json"]) == 0
    assert "closest part" in capsys.readouterr().err


# --- the command line ------------------------------------------------------------------------


def test_cli_json(capsys) -> None:
    assert main(["trace", str(TINY), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["gpu_key"] == "h100-sxm" and len(document["ops"]) == 6


def test_cli_compares_two_traces(capsys) -> None:
    assert main(["trace", str(TINY), str(TF32)]) == 0
    out = capsys.readouterr().out
    assert "aten::addmm" in out and "aten::mm" in out and "B/A" in out


def _with_a_faster_gemm(tmp_path: Path) -> Path:
    """The tiny trace with its GEMM measured at 0.001 µs: its 2·128·256·512 bf16 FLOPs take at
    least 0.034 µs at the H100's 989 TFLOP/s, so it ran faster than its bound."""
    document = json.loads(TINY.read_text())
    for event in document["traceEvents"]:
        if event["name"].startswith("sm90_xmma_gemm"):
            event["dur"] = 0.001
    return _written(tmp_path, "faster.json", json.dumps(document).encode())


def test_cli_exits_3_when_an_op_beats_its_bound(tmp_path, capsys) -> None:
    faster = _with_a_faster_gemm(tmp_path)
    (instance,) = analyze_trace(faster).faster_than_light
    assert instance.op.name == "aten::addmm"
    assert main(["trace", str(faster)]) == 3
    assert "1 op ran faster than their bound at every math rung" in capsys.readouterr().err
    # compared with a trace where none does, the faster one still makes it 3
    assert main(["trace", str(TINY), str(faster)]) == 3
    assert main(["trace", str(TINY)]) == 0


@pytest.mark.parametrize("form", ["text", "json"])
def test_an_interrupted_trace_keeps_the_ops_priced(capsys, monkeypatch, form) -> None:
    # Ctrl-C while the third of TINY's 6 launching ops is priced: printed "interrupted" alone
    # and lost the two priced; now the report holds those two, marked partial, and exits 130
    price, calls = Pricer.figures, []

    def interrupted_at_the_third(self, op, *args, **kwargs):
        calls.append(op.name)
        if len(calls) == 3:
            raise KeyboardInterrupt  # as the armed signal handler raises it, mid-pricing
        return price(self, op, *args, **kwargs)

    monkeypatch.setattr(Pricer, "figures", interrupted_at_the_third)
    assert main(["trace", str(TINY), "--format", form]) == 130
    out, err = capsys.readouterr()
    assert err.strip().splitlines()[-1].endswith(
        "interrupted after 2 of 6 ops; the report covers the ops priced before it")
    if form == "json":
        document = json.loads(out)
        assert document["partial"] and len(document["ops"]) == 2
    else:
        assert out.startswith("> **Partial report**: interrupted after 2 of 6 ops")


@pytest.mark.parametrize("phase", ["load_events", "_cpu_ops"])
def test_an_interrupt_while_reading_says_no_report_was_written(capsys, monkeypatch, phase) -> None:
    # Ctrl-C while a large trace was read (or its kernels joined to their ops) printed only
    # "interrupted": now one line names the trace, the phase and that nothing was written
    from torchroofline.suites.kineto import events

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as the armed signal handler raises it, mid-read

    monkeypatch.setattr(events, phase, interrupted)
    assert main(["trace", str(TINY)]) == 130
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.strip().splitlines()
    doing = "reading" if phase == "load_events" else "joining the kernels to the ops of"
    assert line == (f"torchroofline: error: interrupted while {doing} {TINY}, before any op "
                    "was priced: no report was written")


def test_cli_bad_file_is_one_line(tmp_path, capsys) -> None:
    path = _written(tmp_path, "bad.json", b"[")
    assert main(["trace", str(path)]) == 2  # bad usage, as a missing trace is
    err = capsys.readouterr().err.strip()
    assert err.startswith("torchroofline: error:") and "\n" not in err


def test_picture(tiny, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    from torchroofline.present.viz import plot_trace

    fig = plot_trace(tiny, tmp_path / "trace.png")
    assert (tmp_path / "trace.png").stat().st_size > 0
    gids = {artist.get_gid() for artist in fig.axes[0].get_children()}
    assert "roof:memory" in gids and "roof:bf16 tensor" in gids
    assert "ops:aten::addmm" in gids


def test_the_accuracy_table_of_benchmarks(tmp_path) -> None:
    import importlib.util
    import shutil
    import sys

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "trace_accuracy.py"
    spec = importlib.util.spec_from_file_location("_bench_trace_accuracy", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    shutil.copy(TF32, tmp_path / TF32.name)
    body = module.table(tmp_path)
    # two fp32 GEMMs of 12 and 60 µs, both ≥ 3 µs; the trace row and the "all" row
    assert "| tiny_tf32 | H100 SXM | 2 |" in body and "| all | H100 SXM | 2 |" in body
    doc = tmp_path / "doc.md"
    begin, end = "<!-- BEGIN trace-accuracy -->\n", "<!-- END trace-accuracy -->"
    doc.write_text(f"a\n{begin}old\n{end}\nb\n")
    module.write(doc, body)
    assert doc.read_text() == f"a\n{begin}{body}{end}\nb\n"


def _priced(name: str, types: list, dims: list, concrete: list):
    from torchroofline.suites.kineto.events import CpuOp
    from torchroofline.suites.kineto.pricing import Pricer

    op = CpuOp(0, name, (1, 1), 0.0, 1.0, None, None, "",
               {"Input type": types, "Input Dims": dims, "Concrete Inputs": concrete})
    return Pricer(get_gpu("h100-sxm"), torch.bfloat16).figures(op, None)


def test_an_op_called_with_out_records_its_output_among_its_inputs() -> None:
    figures = _priced("aten::where", ["bool", "float", "float", "float"], [[8]] * 4, [""] * 4)
    assert figures.priced_as == "aten.where.self"  # the tracer records out= as the functional op
    assert figures.bytes == 8 * 1 + 3 * 8 * 4  # reads a bool mask and two fp32, writes one


def test_memory_format_codes_are_parsed() -> None:
    # c10::MemoryFormat 0 is contiguous; a 4×4 fp32 clone reads and writes 64 B
    figures = _priced("aten::clone", ["float", "Scalar"], [[4, 4], []], ["", "0"])
    assert figures.bytes == 2 * 16 * 4


def test_flash_attention_is_priced_as_the_attention_it_computes() -> None:
    # (batch 1, length 141, heads 8, E 64): QKᵀ and PV, 2·L·S·E FLOPs each, per head
    q = [1, 141, 8, 64]
    types = ["c10::BFloat16"] * 3 + ["", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]
    full = _priced("aten::_flash_attention_forward", types, [q, q, q] + [[]] * 7,
                   ["", "", "", "", "", "141", "141", "0.", "False", "False"])
    assert full.flops == 2 * (2 * 141 * 141 * 64) * 8
    causal = _priced("aten::_flash_attention_forward", types, [q, q, q] + [[]] * 7,
                     ["", "", "", "", "", "141", "141", "0.", "True", "False"])
    # a causal mask keeps L(L + 1)/2 of the L² scores; row 0 sees key 0 alone, its softmax is 1
    # and its output v[0] (no product): L(L + 1)/2 − 1 score and PV pairs, 2·E FLOPs each
    assert causal.flops == 2 * (2 * (141 * 142 // 2 - 1) * 64) * 8


def test_a_trace_of_pytorch_1_8_joins_too(tmp_path) -> None:
    # PyTorch 1.8–1.9 wrote categories "Operator", "Runtime", "Kernel", "Memset" and the
    # argument names "Input dims" and "external id"; a ProfilerStep range is no op
    document = json.loads(TINY.read_text())
    renamed = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "kernel": "Kernel",
               "gpu_memset": "Memset"}
    for event in document["traceEvents"]:
        event["cat"] = renamed.get(event["cat"], event["cat"])
        event["args"] = {{"Input Dims": "Input dims", "External id": "external id"}.get(k, k): v
                         for k, v in event["args"].items()}
    document["traceEvents"].append({"ph": "X", "cat": "Operator", "name": "ProfilerStep#3",
                                    "pid": 1, "tid": 1, "ts": 0, "dur": 400, "args": {}})
    old = analyze_trace(_written(tmp_path, "old.json", json.dumps(document).encode()))
    assert [(i.op.name, i.measured_us) for i in old.instances] == [
        (i.op.name, i.measured_us) for i in analyze_trace(TINY).instances
    ]
    assert old.to_dict()["unjoined"] == analyze_trace(TINY).to_dict()["unjoined"]


def test_modules_roll_up_by_the_innermost_module_class(tiny) -> None:
    rows = {row.kind: row for row in tiny.modules()}
    # addmm (10 µs) ran in Linear_0; add, mul, zero_, neg and the unrebuilt op in Block_0
    assert rows["Linear"].count == 1 and rows["Linear"].measured_us == 10.0
    assert rows["Block"].count == 5
    assert rows["Block"].measured_us == pytest.approx(4 + 3 + 1 + 5 + 3)
    assert "By module" in WRITERS["text"](tiny)
    assert analyze_trace(TF32).modules() == []  # recorded without with_modules


def test_a_tensor_list_recorded_without_shapes_is_not_priced_as_nothing() -> None:
    from torchroofline.suites.kineto.rebuild import RebuildError, rebuild

    # as an older profiler records `_foreach_add_(params, grads, alpha=-0.001)`: the lists'
    # shapes are [], though the op launched kernels over them; pricing 0 bytes would be a lie
    args = {"Input type": ["TensorList", "TensorList", "Scalar"], "Input Dims": [[], [], []],
            "Input Strides": [[], [], []], "Concrete Inputs": ["", "", "-0.001"]}
    with pytest.raises(RebuildError, match="no shapes for its tensor lists"):
        rebuild("aten::_foreach_add_", args, torch.float32)


def test_a_module_whose_time_is_mostly_not_priced_shows_no_percent_of_sol(tiny) -> None:
    from dataclasses import replace

    # the unrebuilt op (mylib::fused_thing, 5 µs in Block_0) made to run 95 µs: Block then
    # holds 4 + 3 + 1 + 3 = 11 µs priced of 106 µs, as a vLLM FusedMoE of custom ops does
    def stretched(instance):
        if instance.figures is not None:
            return instance
        first, *rest = instance.activities
        return replace(instance, activities=(replace(first, duration_us=95.0), *rest))

    report = replace(tiny, instances=tuple(stretched(i) for i in tiny.instances))
    block = {row.kind: row for row in report.modules()}["Block"]
    assert block.measured_us == pytest.approx(106.0)
    assert block.priced_share == pytest.approx(11 / 106)
    assert block.to_dict()["priced_share"] == pytest.approx(11 / 106)
    line = next(row for row in WRITERS["text"](report).splitlines() if row.startswith("Block "))
    # its priced copies' "0.0%" (their SoL over their 11 µs) is not the module's: "—"
    assert line.split()[3:7] == ["10.4%", line.split()[4], "—", "—"]
    linear = next(row for row in WRITERS["text"](report).splitlines()
                  if row.startswith("Linear "))
    # (Linear's % of SoL: its warm bound, with L2-resident bytes at the L2's bandwidth)
    assert linear.split()[3] == "100.0%" and linear.split()[5] == "0.8%"


def test_a_row_none_of_whose_ops_was_priced_reads_dashes_not_zero(tiny) -> None:
    # mylib::fused_thing (5 µs) cannot be rebuilt: its row's bound and estimate are unknown,
    # not 0.0 µs (a free op), in the text and the JSON alike
    line = next(row for row in WRITERS["text"](tiny).splitlines()
                if row.startswith("mylib::fused_thing"))
    assert line.split()[1:] == ["1", "5.0", "0.0%", "—", "—", "—", "—"]
    [row] = [row for row in tiny.to_dict()["kinds"] if row["kind"] == "mylib::fused_thing"]
    assert (row["sol_us"], row["estimate_us"], row["verdict_kind"]) == (None, None, None)
    # and one op is "1 op"
    assert "1 op priced assuming contiguous strides (the trace does not record it)" in tiny.notes
