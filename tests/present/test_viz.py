"""Pictures: valid files, coordinates equal to the analysis, the impossible highlight, no
overlapping labels, and the one-line error without matplotlib."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import torchroofline
from torchroofline import api
from torchroofline.errors import InputError, TorchrooflineError
from torchroofline.present import viz
from torchroofline.present.viz.gpus import FUSED_PARTS
from torchroofline.present.viz.suite import with_measured
from torchroofline.price.hardware import get_gpu
from torchroofline.suites.batch_report import BatchReport

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.image import imread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
H100 = get_gpu("h100-sxm")


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(*shape, device="meta")


class Transpose(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(0, 1).contiguous()


class LinearTransposeLinear(nn.Module):
    """Two matmuls with a pure copy (0 FLOPs) between them."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).t().contiguous())


def conv_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 30 * 30, 10))


@pytest.fixture(scope="module")
def conv_result() -> torchroofline.Result:
    return torchroofline.analyze(conv_net(), meta(8, 3, 32, 32), "h100-sxm", "fp32", actual_ms=0.1)


def by_gid(fig: Figure, gid: str) -> list:
    return [artist for artist in fig.findobj() if artist.get_gid() == gid]


def one(fig: Figure, gid: str):
    (artist,) = by_gid(fig, gid)
    return artist


def offsets(collection) -> list[tuple[float, float]]:
    return [tuple(map(float, row)) for row in collection.get_offsets()]


def kernel_offsets(fig: Figure) -> list[tuple[float, float]]:
    return sorted(
        point
        for category in viz.CATEGORY_COLOURS
        for collection in by_gid(fig, f"kernels:{category}")
        for point in offsets(collection)
    )


def flat_roofs(fig: Figure) -> dict[float, tuple[float, float]]:
    """peak FLOP/s → (knee x, right end x) of every flat roof line."""
    roofs = {}
    for line in fig.findobj(matplotlib.lines.Line2D):
        gid = line.get_gid() or ""
        if gid.startswith("roof:") and gid != "roof:memory":
            (x0, x1), (y0, y1) = line.get_xdata(), line.get_ydata()
            assert y0 == y1
            roofs[float(y0)] = (float(x0), float(x1))
    return roofs


def approx_points(points):
    return [pytest.approx(point, rel=1e-9) for point in sorted(points)]


# --- Files -----------------------------------------------------------------------------------


def test_png_is_valid_and_has_the_figure_size(conv_result, tmp_path):
    path = tmp_path / "roofline.png"
    conv_result.plot(str(path))
    assert path.read_bytes()[:8] == PNG_MAGIC
    height, width = imread(path).shape[:2]
    assert (width, height) == (viz.FIGSIZE_IN[0] * viz.DPI, viz.FIGSIZE_IN[1] * viz.DPI)


def test_svg_by_extension(conv_result, tmp_path):
    path = tmp_path / "roofline.svg"
    viz.plot_result(conv_result, path)
    head = path.read_text(encoding="utf-8")[:200].lstrip()
    assert head.startswith("<?xml") or head.startswith("<svg")
    assert "<svg" in head


def test_unknown_extension_is_refused_before_drawing(conv_result, tmp_path):
    with pytest.raises(InputError, match=r"\.png or \.svg"):
        conv_result.plot(tmp_path / "roofline.jpg")
    assert not list(tmp_path.iterdir())


# --- The roofline's coordinates --------------------------------------------------------------


def test_fp32_roofs_are_the_units_the_ops_run_on(conv_result):
    """fp32 on H100: conv on TF32 tensor cores, matmul and pointwise on the FP32 vector units;
    no attention roof (no attention op). Each knee is the ridge point peak / bandwidth."""
    fig = conv_result.plot()
    bandwidth = H100.memory_bandwidth_bytes_per_s
    roofs = flat_roofs(fig)
    tf32, fp32 = H100.tensor_peak("tf32"), H100.vector_peak("fp32")
    assert sorted(roofs) == pytest.approx(sorted([tf32, fp32]))
    for peak, (knee, _) in roofs.items():
        assert knee == pytest.approx(peak / bandwidth)
    (vector_knee,) = [knee for peak, (knee, _) in roofs.items() if peak == pytest.approx(fp32)]
    assert vector_knee == pytest.approx(conv_result.ridge_point)  # fp32 matmul: CUDA cores
    slope = one(fig, "roof:memory")
    xs, ys = slope.get_xdata(), slope.get_ydata()
    assert ys[0] / xs[0] == pytest.approx(bandwidth)
    assert (xs[-1], ys[-1]) == pytest.approx((tf32 / bandwidth, tf32))  # meets the top roof
    ridges = {
        float(offsets(c)[0][1]): offsets(c)[0][0]
        for c in fig.findobj()
        if (c.get_gid() or "").startswith("ridge:")
    }
    assert ridges == pytest.approx({tf32: tf32 / bandwidth, fp32: fp32 / bandwidth})


def test_roof_labels_name_peak_and_ridge(conv_result):
    texts = [t.get_text() for t in by_gid(conv_result.plot(), "label:roof")]
    assert any(
        "tensor cores (conv)" in t and "494.70 TFLOP/s" in t and "ridge 148" in t for t in texts
    )
    assert any("vector fp32 (pointwise, matmul)" in t and "ridge 20" in t for t in texts)


def test_each_kernel_sits_at_its_intensity_and_flop_rate(conv_result):
    fig = conv_result.plot()
    expected = [(k.flops / k.bytes, k.flops / k.time_s) for k in conv_result.kernels if k.flops > 0]
    assert len(expected) == 3
    assert kernel_offsets(fig) == approx_points(expected)
    compute = offsets(one(fig, "kernels:compute"))
    assert len(compute) == sum(k.category == "compute" for k in conv_result.kernels)


def test_marker_area_grows_with_time_share(conv_result):
    fig = conv_result.plot()
    total = conv_result.fused_estimate_s
    for category in ("compute", "pointwise"):
        collection = one(fig, f"kernels:{category}")
        kernels = [k for k in conv_result.kernels if k.category == category]
        assert sorted(collection.get_sizes()) == pytest.approx(
            sorted(14 + 900 * k.time_s / total for k in kernels)
        )


def test_model_points_and_measured(conv_result):
    r = conv_result
    fig = r.plot()
    assert offsets(one(fig, "model:sol")) == [
        pytest.approx((r.flops / r.compulsory_bytes, r.flops / r.sol_s))
    ]
    assert offsets(one(fig, "model:fused")) == [
        pytest.approx((r.flops / r.fused_bytes, r.flops / r.fused_estimate_s))
    ]
    assert offsets(one(fig, "model:measured")) == [
        pytest.approx((r.flops / r.compulsory_bytes, r.flops / (r.actual.ms * 1e-3)))
    ]
    label = one(fig, "label:model:measured").get_text()
    assert f"{r.actual.sol_fraction:.1%} of SoL" in label
    assert "IMPOSSIBLE" not in label


def test_every_model_point_gets_its_label():
    # the README picture's block: the measured point sits right under the SoL point on a crowded
    # plot; both labels must find a place (the measured one is placed first)
    spec = importlib.util.spec_from_file_location("make_images", ROOT / "docs" / "make_images.py")
    images = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(images)
    result = torchroofline.analyze(images.TransformerBlock().eval(), meta(8, 512, 512))
    fig = result.with_actual(result.sol_ms * 2.7).plot()
    for key in ("sol", "fused", "measured"):
        assert len(by_gid(fig, f"label:model:{key}")) == 1, key


def test_measured_faster_than_light_is_flagged(conv_result):
    fast = conv_result.with_actual(conv_result.sol_ms / 2)
    fig = fast.plot()
    label = one(fig, "label:model:measured")
    assert "IMPOSSIBLE" in label.get_text()
    assert matplotlib.colors.to_hex(label.get_color()) == viz.IMPOSSIBLE_COLOUR
    point = one(fig, "model:measured")
    assert matplotlib.colors.to_hex(point.get_facecolor()[0]) == viz.IMPOSSIBLE_COLOUR


def test_the_picture_and_the_text_give_one_verdict():
    # issue 38 item 4: a time below the fp32 bound that TF32 math reaches is no impossible
    # time; the text, the JSON and the picture all say it needs TF32 or lower math
    r = torchroofline.analyze(nn.Linear(4096, 4096, device="meta"), meta(4096, 4096), "b200",
                              "fp32")
    ladder = r.sol_by_math_s
    timed = r.with_actual((ladder["program"] + ladder["tf32"]) / 2 * 1e3)
    assert "possible only with TF32 or lower math" in timed.format(0)
    assert timed.to_dict()["actual"]["verdict_kind"] == "lower math"
    fig = timed.plot()
    label = one(fig, "label:model:measured")
    assert "needs TF32 or lower math" in label.get_text()
    assert "IMPOSSIBLE" not in label.get_text()
    assert matplotlib.colors.to_hex(label.get_color()) != viz.IMPOSSIBLE_COLOUR
    point = one(fig, "model:measured")
    assert matplotlib.colors.to_hex(point.get_facecolor()[0]) != viz.IMPOSSIBLE_COLOUR


def test_zero_flop_kernels_are_left_out_with_a_note():
    r = torchroofline.analyze(LinearTransposeLinear(), meta(64, 64), "h100-sxm", "fp32")
    copies = [k for k in r.kernels if k.flops == 0]
    assert copies  # the fixture needs a data-movement kernel
    fig = r.plot()
    assert len(kernel_offsets(fig)) == len({(k.intensity, k.time_s) for k in r.kernels if k.flops})
    note = one(fig, "note").get_text()
    assert f"not drawn: {len(copies)} kernel" in note
    share = sum(k.time_s for k in copies) / r.fused_estimate_s
    assert f"{share:.1%} of the fused estimate" in note


def test_a_workload_with_no_flops_draws_roofs_only(tmp_path):
    r = torchroofline.analyze(Transpose(), meta(256, 256), "h100-sxm", "fp32", actual_ms=0.01)
    fig = r.plot(tmp_path / "t.png")
    assert kernel_offsets(fig) == []
    assert not any((a.get_gid() or "").startswith("model:") for a in fig.findobj())
    assert "no FLOPs: pure data movement" in one(fig, "note").get_text()
    assert flat_roofs(fig)  # the vector roof still
    assert (tmp_path / "t.png").read_bytes()[:8] == PNG_MAGIC


def test_identical_layers_are_one_marker_labelled_with_their_count():
    stack = nn.Sequential(*(nn.Linear(128, 128) for _ in range(8)))
    r = torchroofline.analyze(stack, meta(64, 128), "h100-sxm", "fp32")
    fig = r.plot()
    (point,) = offsets(one(fig, "kernels:compute"))
    k = r.kernels[0]
    assert point == pytest.approx((k.flops / k.bytes, k.flops / k.time_s))
    labels = [t.get_text() for t in by_gid(fig, "label:kernel")]
    assert labels == ["*: addmm ×8"]


def _bumpy_stack(layers: int) -> nn.Module:
    """Linear layers of changing widths, GELU between: many distinct kernel points."""
    widths = [64 + 48 * ((i * 7) % 11) for i in range(layers + 1)]
    blocks = []
    for fan_in, fan_out in itertools.pairwise(widths):
        blocks += [nn.Linear(fan_in, fan_out), nn.GELU()]
    return nn.Sequential(*blocks)


def test_labels_do_not_overlap_and_stay_inside_the_axes():
    r = torchroofline.analyze(_bumpy_stack(24), meta(256, 64), "h100-sxm", "bf16", actual_ms=1.0)
    fig = r.plot(top=15)
    fig.draw_without_rendering()
    ax = fig.axes[0]
    area = ax.get_window_extent()
    texts = [t for t in ax.texts if (t.get_gid() or "").startswith("label:")]
    kernel_labels = [t for t in texts if t.get_gid() == "label:kernel"]
    assert len(kernel_labels) >= 10  # the labeller found room for most of them
    boxes = [t.get_window_extent() for t in texts if t.get_gid() != "label:memory"]
    for box in boxes:
        assert area.x0 <= box.x0 and box.x1 <= area.x1 and area.y0 <= box.y0 and box.y1 <= area.y1
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)


def test_top_zero_labels_no_kernel(conv_result):
    assert by_gid(conv_result.plot(top=0), "label:kernel") == []


def test_axes_limits_hold_every_point(conv_result):
    fig = conv_result.plot()
    ax = fig.axes[0]
    (x_lo, x_hi), (y_lo, y_hi) = ax.get_xlim(), ax.get_ylim()
    assert x_hi / x_lo >= 1e3
    for x, y in kernel_offsets(fig):
        assert x_lo < x < x_hi and y_lo < y < y_hi
    assert y_hi > H100.tensor_peak("tf32")


def test_draws_into_given_axes(conv_result):
    fig = Figure()
    left, right = fig.subplots(ncols=2)
    assert conv_result.plot(ax=right) is fig
    assert kernel_offsets(fig)
    assert not left.collections


# --- The dictionary path --------------------------------------------------------------------


def test_plot_result_draws_the_dict_form(conv_result):
    """plot_result is plot_result_dict on to_dict(): the same artists, from JSON too."""
    direct = conv_result.plot()
    via_dict = viz.plot_result_dict(json.loads(conv_result.to_json()))
    assert kernel_offsets(direct) == kernel_offsets(via_dict)
    assert flat_roofs(direct) == flat_roofs(via_dict)


def test_json_without_roofs_or_actual_looks_roofs_up(conv_result):
    data = json.loads(conv_result.to_json())
    del data["actual"], data["roofline"]
    fig = viz.plot_result_dict(data)
    assert kernel_offsets(fig) == kernel_offsets(conv_result.plot())
    assert by_gid(fig, "model:measured") == []
    # without the op list every matmul family's roof is drawn: fp32 attention is 3xTF32
    assert sorted(flat_roofs(fig)) == pytest.approx(
        sorted([H100.tensor_peak("tf32"), H100.tensor_peak("tf32") / 3, H100.vector_peak("fp32")])
    )


# --- Across GPUs -----------------------------------------------------------------------------

GPUS = ("a100-80gb", "h100-sxm", "l40s")


def _bar_widths(fig: Figure, gid: str) -> list[float]:
    return [patch.get_width() for patch in by_gid(fig, gid)]  # barh gives each bar the gid


def test_plot_gpus_from_a_result_reprices_without_tracing(conv_result, monkeypatch):
    def no_trace(*args, **kwargs):
        raise AssertionError("traced again")

    monkeypatch.setattr(api, "trace_model", no_trace)
    fig = viz.plot_gpus(conv_result, gpus=GPUS)
    priced = [conv_result.on(gpu) for gpu in GPUS]
    assert _bar_widths(fig, "bars:sol") == pytest.approx([r.sol_ms for r in priced])
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in by_gid(fig, "bars:sol")]
    assert colours == [viz.BOUND_COLOURS[r.bottleneck] for r in priced]
    fused = [
        sum(parts)
        for parts in zip(
            *(_bar_widths(fig, f"bars:fused:{part}") for part in FUSED_PARTS),
            strict=True,
        )
    ]
    assert fused == pytest.approx([r.time_ms["fused_estimate"] for r in priced])
    ax = fig.axes[0]
    ticks = dict(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels()), strict=True))
    assert [ticks[y] for y in sorted(ticks, reverse=True)] == [r.gpu.name for r in priced]
    bar_rows = [p.get_y() + p.get_height() / 2 for p in by_gid(fig, "bars:sol")]
    assert bar_rows == sorted(ticks, reverse=True)  # bar i is GPU i, the first on top


def test_plot_gpus_draws_a_list_of_results_as_given(tmp_path):
    path = tmp_path / "gpus.png"
    given = [torchroofline.analyze(conv_net(), meta(8, 3, 32, 32), g, "bf16") for g in GPUS]
    fig = viz.plot_gpus(given, path=path)
    assert _bar_widths(fig, "bars:sol") == pytest.approx([r.sol_ms for r in given])
    height, width = imread(path).shape[:2]
    assert (width, height) == (viz.GPUS_FIGSIZE_IN[0] * viz.DPI, viz.GPUS_FIGSIZE_IN[1] * viz.DPI)


def test_plot_gpus_never_traces_a_model(conv_result):
    with pytest.raises(InputError, match="draws Results: pass torchroofline.analyze"):
        viz.plot_gpus(conv_net())
    with pytest.raises(InputError, match="draws Results"):
        viz.plot_gpus([])
    with pytest.raises(InputError, match="at least one GPU"):
        viz.plot_gpus(conv_result, gpus=())


# --- KernelBench suites ----------------------------------------------------------------------


def _problem(level, file, result=None, measured_ms=None, status="ok"):
    data = result.to_dict() if result is not None else None
    if data is not None:
        data.pop("actual", None)
    return {
        "level": level,
        "file": file,
        "status": status,
        "error": None if status == "ok" else "ModelError: boom",
        "result": data,
        "measured_ms": measured_ms,
        "gen_ms": None,
    }


@pytest.fixture(scope="module")
def report(conv_result) -> BatchReport:
    matmul = torchroofline.analyze(nn.Linear(256, 256), meta(512, 256), "h100-sxm", "fp32")
    copy = torchroofline.analyze(Transpose(), meta(512, 512), "h100-sxm", "fp32")
    problems = [
        _problem(1, "1_Matmul.py", matmul, matmul.sol_ms * 3),
        # half the fp32 bound: above the TF32 one (494.7 against 66.9 TFLOP/s), not impossible
        _problem(1, "2_Fast_Matmul.py", matmul, matmul.sol_ms * 0.5),
        _problem(2, "3_Conv.py", conv_result, conv_result.sol_ms * 40),
        _problem(None, "4_Transpose.py", copy, copy.sol_ms * 0.9),  # memory-bound: impossible
        _problem(2, "5_Unmeasured.py", conv_result, None),
        _problem(3, "6_Broken.py", status="failed"),
    ]
    return BatchReport.from_dict({"gpu": "h100-sxm", "precision": "fp32", "problems": problems})


def test_impossible_ring_marks_exactly_the_problems_below_every_math(report):
    fig = viz.plot_suite_scatter(report)
    transpose = next(p for p in report.problems if p.file == "4_Transpose.py")
    assert sorted(offsets(one(fig, "impossible"))) == approx_points(
        [(transpose.sol_ms, transpose.measured_ms)])
    drawn = sorted(point for level in (1, 2, None) for point in offsets(one(fig, f"level:{level}")))
    assert len(drawn) == 4  # the unmeasured and the failed problem are not drawn
    assert [t.get_text() for t in by_gid(fig, "label:impossible")] == ["4_Transpose"]
    assert [t.get_text() for t in by_gid(fig, "label:lower-math")] == ["2_Fast_Matmul (tf32 math)"]
    line = one(fig, "sol-line")
    assert list(line.get_xdata()) == list(line.get_ydata())  # y = x


def test_suite_pictures_without_measured_times_say_so(report):
    unmeasured = dataclasses.replace(
        report, problems=tuple(dataclasses.replace(p, measured_ms=None) for p in report.problems)
    )
    for draw in (viz.plot_suite_scatter, viz.plot_suite_histogram):
        (note,) = by_gid(draw(unmeasured), "note:empty")
        assert "--timings" in note.get_text()
        assert by_gid(draw(report), "note:empty") == []


def test_long_kernel_labels_keep_both_ends_and_whole_names():
    names = ("blocks.0.attention.output_projection: add+native_layer_norm+gelu",
             "blocks.0.attention.output_projection: add+native_layer_norm+relu",
             "layer1.0.conv1: convolution+_native_batch_norm_legit_no_training+relu_")
    labels = [viz.KernelPoint("pointwise", 1.0, 1.0, (name,), 1.0).label for name in names]
    assert labels[0] != labels[1]  # cut at the end, both would read the same
    assert all(label.startswith(name.split(".")[0]) and len(label) <= 38
               for name, label in zip(names, labels, strict=True))
    # only whole module and op names are left out: every part shown is a part of the name
    for name, label in zip(names, labels, strict=True):
        parts = set(re.split(r"\.|: |\+", name))
        assert set(re.split(r"\.|: |\+", label.replace("…", ""))) - {""} <= parts
    assert labels[2] == "layer1.0.conv1: convolution+…+relu_"


def test_histogram_counts_per_level_and_impossible(report):
    fig = viz.plot_suite_histogram(report)
    ax = fig.axes[0]
    below = by_gid(fig, "bars:below-sol")  # the fast matmul (TF32 math) and the transpose
    assert [p.get_height() for p in below] == [2]
    assert ">100%: below SoL (2; 1 faster than any math)" in ax.get_legend_handles_labels()[1]
    heights = sum(p.get_height() for p in ax.patches if p not in below)
    assert heights == 2  # the two possible, measured problems


def test_plot_suite_writes_pngs(report, tmp_path):
    paths = viz.plot_suite(report, tmp_path / "out", per_problem=True)
    names = sorted(p.relative_to(tmp_path / "out").as_posix() for p in paths)
    assert names == sorted(
        [
            "suite_scatter.png",
            "suite_histogram.png",
            "problems/level1_1_Matmul.png",
            "problems/level1_2_Fast_Matmul.png",
            "problems/level2_3_Conv.png",
            "problems/no-level_4_Transpose.png",
            "problems/level2_5_Unmeasured.png",
        ]
    )
    for path in paths:
        assert path.read_bytes()[:8] == PNG_MAGIC


def test_per_problem_roofline_uses_the_reported_measured_time(report):
    problem = report.problems[0]
    fig = viz.plot_result_dict(with_measured(problem))
    flops = problem.result["flops"]["total"]
    (point,) = offsets(one(fig, "model:measured"))
    assert point[1] == pytest.approx(flops / (problem.measured_ms * 1e-3))
    assert with_measured(report.problems[4]).get("actual") is None


# --- Without matplotlib ----------------------------------------------------------------------


def test_every_plot_names_the_missing_dependency(conv_result, report, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    message = "plotting needs matplotlib: pip install 'torchroofline[viz]'"
    calls = [
        lambda: conv_result.plot(),
        lambda: viz.plot_result_dict(conv_result.to_dict()),
        lambda: viz.plot_gpus(conv_result, gpus=GPUS),
        lambda: viz.plot_suite(report, tmp_path),
        lambda: viz.plot_suite_scatter(report),
    ]
    for call in calls:
        with pytest.raises(TorchrooflineError) as caught:
            call()
        assert str(caught.value) == message


def test_import_torchroofline_does_not_import_matplotlib():
    code = "import sys, torchroofline; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


# --- The README pictures ---------------------------------------------------------------------


def test_make_images_writes_the_readme_pictures(tmp_path):
    spec = importlib.util.spec_from_file_location("make_images", ROOT / "docs" / "make_images.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths = module.main(tmp_path)
    assert sorted(p.name for p in paths) == [
        "gpus.png",
        "roofline.png",
        "suite_histogram.png",
        "suite_scatter.png",
        "sweep.png",
        "trace.png",
    ]
    for path in paths:
        assert path.read_bytes()[:8] == PNG_MAGIC
        assert imread(path).shape[0] > 500


# --- Pictures that stay readable (issue 28) --------------------------------------------------


class Constant(nn.Module):
    """A constant output: a SoL of about a nanosecond (4 B written) whatever it is measured at."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(1, device=x.device)


def test_a_tiny_sol_sits_off_scale_named_not_stretching_the_axes(report):
    constant = torchroofline.analyze(Constant(), meta(4), "h100-sxm", "fp32")
    data = report.to_dict()
    data["problems"].append(_problem(1, "7_Constant.py", constant, 0.01))
    with_constant = BatchReport.from_dict(data)
    fig = viz.plot_suite_scatter(with_constant)
    ax = fig.axes[0]
    left = ax.get_xlim()[0]
    # the axes keep to the other problems' times and the constant's measured 0.01 ms
    others = [t for p in viz.problem_points(report) for t in (p.sol_ms, p.measured_ms)]
    assert left == pytest.approx(min(others + [0.01]) / 3)
    assert offsets(one(fig, "off-scale")) == [pytest.approx((left, 0.01))]
    [label] = by_gid(fig, "label:off-scale")
    assert label.get_text().startswith("7_Constant (SoL ")
    # the histogram counts it in its own bar left of 0.1 %, not in the first bin
    histogram = viz.plot_suite_histogram(with_constant)
    [bar] = by_gid(histogram, "bars:off-scale")
    assert bar.get_height() == 1 and bar.get_x() + bar.get_width() == pytest.approx(0.1)
    below = by_gid(histogram, "bars:below-sol")
    drawn = [p for p in histogram.axes[0].patches if p not in below and p is not bar]
    assert sum(p.get_height() for p in drawn) == 2  # as without the constant


def test_the_legend_leaves_the_ridge_points_clear():
    # a big matmul: its kernel at ~1,800 FLOPs/B puts the ridge (20 FLOPs/B) near the top left,
    # under a legend left at "upper left"
    result = torchroofline.analyze(nn.Linear(8192, 8192), meta(32768, 8192), "h100-sxm",
                                   "fp32", actual_ms=1e3)
    fig = result.plot()
    ax = fig.axes[0]
    box = ax.get_legend().get_window_extent()
    ridges = [point for c in ax.collections if (c.get_gid() or "").startswith("ridge:")
              for point in c.get_offsets()]
    assert ridges
    assert not any(box.contains(*ax.transData.transform(point)) for point in ridges)


def test_kernel_labels_keep_off_the_memory_roof():
    # the bundled MiniGPT block on a B200: "fc: add+gelu" (its pointwise kernel at ~0.5
    # FLOPs/B, on the slope) was placed up-right of its marker, struck through by the HBM line
    from torchroofline.suites.kernelbench import analyze_file

    example = Path(__file__).parents[2] / "examples/kernelbench/level3/mini_gpt_block.py"
    fig = analyze_file(example, "b200", actual_ms=5).plot()
    ax = fig.axes[0]
    [roof] = [line for line in ax.lines if line.get_gid() == "roof:memory"]
    (x0, y0), (x1, y1) = ax.transData.transform(list(zip(*roof.get_data(), strict=True)))
    along = [(x0 + (x1 - x0) * t / 2000, y0 + (y1 - y0) * t / 2000) for t in range(2001)]
    labels = [text for text in ax.texts if text.get_gid() == "label:kernel"]
    assert labels
    for label in labels:
        box = label.get_window_extent()
        assert not any(box.contains(x, y) for x, y in along), label.get_text()


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_a_figure_saves_to_the_same_bytes_every_time(suffix, tmp_path):
    result = torchroofline.analyze(nn.Linear(64, 64), meta(8, 64), "h100-sxm", "fp32")
    first, second = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    result.plot(first)
    result.plot(second)
    assert first.read_bytes() == second.read_bytes()
    # nothing of the machine or the day: matplotlib's version, a date
    assert b"Matplotlib" not in first.read_bytes() and b"dc:date" not in first.read_bytes()


def test_merged_kernels_of_different_modules_name_their_op_and_module_count():
    from torchroofline.present.viz.rooflines import KernelPoint

    # the num_batches_tracked adds of a ResNet's BatchNorms: one op, many unrelated modules
    names = ("bn1: add_", "layer1.0.bn1: add_", "layer1.0.bn2: add_",
             "layer2.0.downsample.1: add_")
    point = KernelPoint("memory", 0.1, 1e9, names, 0.01)
    assert point.label == "add_ ×4 in 4 modules"  # it read "bn1: add_ ×4", the first one's
    layers = KernelPoint("compute", 8.0, 1e12, ("0: addmm", "1: addmm"), 0.1)
    assert layers.label == "*: addmm ×2"
    mixed = KernelPoint("memory", 0.1, 1e9, ("a: add", "b: mul"), 0.01)
    assert mixed.label == "a: add … ×2"


def test_a_forced_label_stays_inside_the_picture():
    from torchroofline.present.viz.labels import Labeller, Spot

    fig = Figure(figsize=(8, 3))
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    labeller = Labeller(ax)
    area = labeller.area
    labeller.taken.append((area.x0, area.y0, area.x1, area.y1))  # nothing fits: forced
    text = "tensor cores (matmul): 989.40 TFLOP/s, ridge 295 FLOPs/B"
    # left-aligned at a knee near the right edge runs off it; right-aligned at the edge fits
    spots = [Spot(9.5, 5, 6, 3, "left", "bottom"), Spot(10, 5, -4, 3, "right", "bottom")]
    label = labeller.place_first(text, spots, force=True, fontsize=8)
    fig.draw_without_rendering()
    box = label.get_window_extent()
    assert area.x0 <= box.x0 and box.x1 <= area.x1  # it was clipped at the right edge


def test_a_picture_in_a_missing_folder_is_one_error_before_drawing(conv_result, tmp_path):
    # it raised matplotlib's FileNotFoundError after drawing, from result.plot and every plot_*
    missing = tmp_path / "nowhere" / "roofline.png"
    with pytest.raises(InputError, match="no such folder; create it first"):
        conv_result.plot(missing)
    assert not missing.parent.exists()


def _text_boxes(fig: Figure) -> dict[str, object]:
    """Every text of a roofline picture (labels, note, title, legend) → its window extent, the
    text alone (an annotation's extent would take in its leader line)."""
    fig.draw_without_rendering()
    ax = fig.axes[0]
    boxes = {f"{t.get_gid()}: {t.get_text()}": matplotlib.text.Text.get_window_extent(t)
             for t in [*ax.texts, ax.title] if t.get_text()}
    if ax.get_legend() is not None:
        boxes["legend"] = ax.get_legend().get_window_extent()
    return boxes


class _GemmScaleNorm(nn.Module):
    """KernelBench level 2 #39's layers at a tenth of its size."""

    def __init__(self) -> None:
        super().__init__()
        self.gemm, self.bn = nn.Linear(128, 64), nn.BatchNorm1d(64)
        self.scale = nn.Parameter(torch.randn(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.gemm(x) * self.scale)


@pytest.mark.parametrize(("model", "inputs", "gpu", "actual_ms", "name"), [
    # a measured time far faster than light: its point sat above the axes' top, its label
    # beyond the picture's bottom-left corner
    (_GemmScaleNorm(), meta(128, 128), "a100-80gb", 1e-6, None),
    # KernelBench level 1 #75: the bandwidth along the slope ran under the legend
    (nn.ConvTranspose2d(32, 64, (3, 5), stride=(2, 3), padding=(1, 2), dilation=(2, 1),
                        groups=4, bias=False),
     meta(16, 32, 128, 256), "a100-80gb", 0.001, None),
    # its 97-character name: the title ran off both sides
    (nn.Linear(64, 64), meta(8, 64), "h100-sxm", 1.0,
     "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____"
     "dilated__"),
    (_bumpy_stack(12), meta(256, 64), "b200", 5.0, None),
])
def test_no_two_texts_overlap_and_none_leaves_the_picture(model, inputs, gpu, actual_ms, name):
    result = torchroofline.analyze(model, inputs, gpu, "fp32", actual_ms=actual_ms, name=name)
    fig = result.plot(top=5)
    boxes = _text_boxes(fig)
    assert any(key.startswith("label:model:measured") for key in boxes)
    edge = fig.bbox
    for key, box in boxes.items():
        assert edge.x0 <= box.x0 and box.x1 <= edge.x1, key
        assert edge.y0 <= box.y0 and box.y1 <= edge.y1, key
    for (first, a), (second, b) in itertools.combinations(boxes.items(), 2):
        assert not a.overlaps(b), (first, second)
