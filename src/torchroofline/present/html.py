"""One self-contained HTML page for a sweep, a suite run or a profiler trace (``--format
html``): a sortable, filterable table, a roofline with hover on every point, the crossovers or
notes, and the report's JSON itself (a download link), so the page shows the same numbers.

The page opens from disk with no server and no network: its script (``html_page.js``, plain
JavaScript written for it, no library) and its data are inlined. The table keeps its first
1,000 matching rows in the DOM and sorts and filters all of them; the roofline is one canvas,
so a trace of 10,000 ops stays fast.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..suites.batch_report import BatchReport
    from ..suites.kineto import TraceReport
    from ..suites.sweep import Sweep

_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 14px; margin: 18px 0 6px; }
.summary { color: #555; margin: 0 0 10px; white-space: pre-line; }
#roofline { width: 100%; max-width: 1100px; height: 460px; border: 1px solid #ddd;
  display: block; }
#legend span { margin-right: 14px; white-space: nowrap; }
#legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px;
  border-radius: 5px; }
#tip { position: absolute; display: none; background: #fff; border: 1px solid #999;
  padding: 4px 6px; white-space: pre; font-size: 12px; pointer-events: none; }
table { border-collapse: collapse; font-size: 12px; }
th { cursor: pointer; background: #f3f3f3; position: sticky; top: 0; user-select: none; }
th.asc::after { content: " ▲"; } th.desc::after { content: " ▼"; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:hover { background: #fff6d8; }
#filter { width: 420px; padding: 3px 6px; }
"""

#: Caught before the page's own script runs: the browser test reads ``data-error``.
_ERROR_HOOK = (
    'window.addEventListener("error", function (e) { document.documentElement.dataset.error = '
    "e.message; });"
)

#: The filter's hint: free text, or a column compared with a value.
_FILTER_HINT = "filter: words, or column<value (sol_ms<0.1 bound=memory)"


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def _embedded(data: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</``)."""
    return json.dumps(_finite(data), allow_nan=False).replace("</", "<\\/")


def column(key: str, label: str, kind: str = "num", tip: bool = False) -> dict[str, Any]:
    """A table column: ``kind`` formats it ("ms", "bytes", "flops", "percent", "num",
    "text"); ``tip``: shown in the roofline's hover too."""
    return {"key": key, "label": label, "kind": kind, "tip": tip}


def page_html(title: str, summary: Sequence[str], columns: Sequence[Mapping[str, Any]],
              rows: Sequence[Mapping[str, Any]], points: Sequence[Mapping[str, Any]],
              roofs: Sequence[Mapping[str, Any]], findings: tuple[str, Sequence[str]],
              document: Mapping[str, Any], x_label: str, y_label: str) -> str:
    """The page: ``points`` ({x, y, row, group, path, label}: ``row`` indexes ``rows``, ``path``
    joins points in order) under ``roofs`` ({group, bandwidth_bytes_per_s, peaks: [{label,
    flops_per_s}]}); ``findings``: a heading and its lines (crossovers, notes); ``document``:
    the report's JSON, embedded whole."""
    page = {
        "columns": list(columns), "rows": list(rows), "points": list(points),
        "roofs": list(roofs), "plot": {"x_label": x_label, "y_label": y_label},
    }
    script = resources.files(__package__).joinpath("html_page.js").read_text(encoding="utf-8")
    heading, lines = findings
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines) or "<li>none</li>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_STYLE}</style><script>{_ERROR_HOOK}</script></head>
<body>
<h1>{html.escape(title)}</h1>
<p class="summary">{html.escape(chr(10).join(summary))}</p>
<canvas id="roofline"></canvas>
<div id="legend"></div>
<h2>{html.escape(heading)}</h2>
<ul id="findings">{items}</ul>
<h2>Table</h2>
<p><input id="filter" placeholder="{html.escape(_FILTER_HINT)}"> <span id="row-count"></span>
 · <a id="download" download="report.json">the JSON</a></p>
<table id="rows"><thead></thead><tbody></tbody></table>
<div id="tip"></div>
<script type="application/json" id="page-data">{_embedded(page)}</script>
<script type="application/json" id="document-data">{_embedded(document)}</script>
<script>{script}</script>
</body></html>
"""


def _roof(group: str | None, entry: Mapping[str, Any], label: str = "") -> dict[str, Any]:
    """A :func:`~torchroofline.price.roofline.roofline_entry` as the page draws it."""
    return {
        "group": group,
        "bandwidth_bytes_per_s": entry["memory_bandwidth_bytes_per_s"],
        "peaks": [{"label": f"{label}{roof['unit']} {roof['peak_flops_per_s'] / 1e12:.4g} "
                            "TFLOP/s", "flops_per_s": roof["peak_flops_per_s"]}
                  for roof in entry["roofs"]],
    }


def _every_roof(roofs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Problems' roofs on one GPU as one: each unit's peak once, whichever problems use it (a
    softmax's vector roof and a matmul's tensor-core one)."""
    if not roofs:
        return []
    peaks = {peak["label"]: peak for roof in roofs for peak in roof["peaks"]}
    return [{**roofs[0], "peaks": sorted(peaks.values(), key=lambda peak: -peak["flops_per_s"])}]


# --- A sweep -----------------------------------------------------------------------------------


def sweep_html(sweep: Sweep) -> str:
    """A sweep's page: a row per point, each point at its speed of light on the roofline, a path
    per line along the first axis, the crossovers."""
    from .sweeps import cost_line

    document = sweep.to_dict()
    data = document["sweep"]
    many_precisions = len(sweep.precisions) > 1
    rows, points = [], []
    for index, point in enumerate(data["points"]):
        rows.append({**point["values"], **{k: v for k, v in point.items() if k != "values"}})
        group = point["gpu"] + (f" {point['precision']}" if many_precisions else "")
        series = [f"{k}={v}" for k, v in point["values"].items()][1:]
        flops, sol_ms = point["flops"], point["sol_ms"]
        points.append({
            "x": point["intensity"], "y": flops / (sol_ms * 1e-3) if sol_ms else None,
            "row": index, "group": group, "path": " ".join([group, *series]),
            "label": f"{group} " + " ".join(f"{k}={v}" for k, v in point["values"].items()),
        })
    band_keys = sorted({key for point in data["points"] for key in point
                        if key.endswith("_ms") and key not in _SWEEP_TIMES})
    columns = [
        *(column(axis, axis, tip=True) for axis in sweep.axes),
        column("gpu", "GPU", "text"), column("precision", "precision", "text"),
        *(column(key, label, "ms", tip=True) for key, label in _SWEEP_TIMES.items()),
        *(column(key, key.removesuffix("_ms"), "ms") for key in band_keys),
        column("bound", "bound", "text", tip=True), column("flops", "FLOPs", "flops"),
        column("compulsory_bytes", "compulsory bytes", "bytes"),
        column("intensity", "FLOP/B"), column("peak_bytes", "peak memory", "bytes", tip=True),
        column("memory_verdict", "fits", "text", tip=True), column("rank", "rank", tip=True),
    ]
    roofs = [_roof(entry["gpu"] + (f" {entry['precision']}" if many_precisions else ""), entry)
             for entry in data["rooflines"]]
    axes = " × ".join(sweep.axes)
    summary = [f"over {axes}: {', '.join(sweep.gpus)} · {', '.join(sweep.precisions)}",
               cost_line(sweep), *sweep.notes]
    return page_html(
        f"torchroofline sweep — {sweep.name}", summary, columns, rows, points, roofs,
        ("Crossovers", [c.describe() for c in sweep.crossovers]), document,
        "arithmetic intensity (necessary FLOPs per compulsory byte)", "throughput at SoL",
    )


#: A sweep point's times shown as columns (``<key>``: its label); other ``*_ms`` keys (the
#: estimates' bands, the bound for any input) get a column of their own name.
_SWEEP_TIMES = {
    "sol_ms": "SoL", "compute_sol_ms": "compute SoL", "memory_sol_ms": "memory SoL",
    "eager_estimate_ms": "eager est.", "fused_estimate_ms": "compile est.",
    "cudagraph_estimate_ms": "CUDA-graph est.", "memory_fused_ms": "fused bytes / HBM",
}


# --- A suite run -------------------------------------------------------------------------------


def suite_html(report: BatchReport, interrupted: str | None = None) -> str:
    """A suite's page: a row per problem, each analysed problem at its speed of light and, where
    measured, at its measured time (same intensity, lower throughput); marked partial, in its
    title, first summary line and embedded JSON, when the batch was ``interrupted`` (the
    interruption's one line: "interrupted after 90 of 250 problems")."""
    document = report.to_dict()
    if interrupted:  # as the JSON report marks it (suites.batch_report.mark_partial)
        document = {"partial": True, "interrupted": interrupted, **document}
    rows, points, roofs = [], [], []
    for index, (problem, report_problem) in enumerate(
        zip(document["problems"], report.problems, strict=True)
    ):
        result = problem.get("result") or {}
        judged = report_problem.verdict(report_problem.measured_ms)
        flops = (result.get("flops") or {}).get("total")
        compulsory = (result.get("bytes") or {}).get("compulsory")
        intensity = flops / compulsory if flops and compulsory else None
        sol_ms = (result.get("time_ms") or {}).get("sol")
        rows.append({
            "name": problem["name"], "level": problem["level"], "status": problem["status"],
            "sol_ms": sol_ms, "bound": result.get("bottleneck"),
            "measured_ms": problem["measured_ms"],
            "sol_fraction": problem["sol_fraction"], "verdict": judged and judged.short,
            "gen_ms": problem["gen_ms"],
            "speedup": problem["speedup"], "flops": flops, "compulsory_bytes": compulsory,
            "intensity": intensity, "error": problem["error"],
        })
        for what, time_ms in (("at SoL", sol_ms), ("measured", problem["measured_ms"])):
            if intensity and time_ms:
                points.append({"x": intensity, "y": flops / (time_ms * 1e-3), "row": index,
                               "group": what, "path": None,
                               "label": f"{problem['name']} {what}"})
        if result.get("roofline"):
            roofs.append(_roof(None, result["roofline"]))
    roofs = _every_roof(roofs)
    columns = [
        column("name", "problem", "text", tip=True), column("level", "level"),
        column("status", "status", "text"), column("sol_ms", "SoL", "ms", tip=True),
        column("bound", "bound", "text", tip=True), column("measured_ms", "measured", "ms", True),
        column("sol_fraction", "% of SoL", "percent", tip=True),
        column("verdict", "verdict", "text", tip=True), column("gen_ms", "gen.", "ms"),
        column("speedup", "speedup"), column("flops", "FLOPs", "flops"),
        column("compulsory_bytes", "compulsory bytes", "bytes"), column("intensity", "FLOP/B"),
        column("error", "error", "text"),
    ]
    totals = document["summary"]["all"]
    summary = [f"{report.gpu} · {report.precision} · cache {report.cache}: "
               f"{totals['analyzed']} of {totals['problems']} problems analysed, "
               f"{totals['compute_bound']} compute bound, {totals['memory_bound']} memory bound"]
    partial = " (partial)" if interrupted else ""
    if interrupted:
        summary.insert(0, f"Partial report: {interrupted}; the page holds the problems finished.")
    notes = [f"{p.name}: {p.error}" for p in report.problems if not p.ok]
    return page_html(
        f"torchroofline kernelbench — {report.gpu}{partial}", summary, columns, rows, points,
        roofs,
        ("Failed problems", notes), document,
        "arithmetic intensity (necessary FLOPs per compulsory byte)", "throughput",
    )


# --- A profiler trace --------------------------------------------------------------------------

#: Op kinds given their own colour on the trace's roofline (the most GPU time first).
_TRACE_GROUPS = 9


def trace_html(report: TraceReport) -> str:
    """A trace's page: a row per op instance, each priced op with FLOPs at its measured
    throughput under the trace GPU's roofs."""
    from .viz.traces import _roofs

    document = report.to_dict()
    kinds = [row.kind for row in report.kinds()][:_TRACE_GROUPS]
    rows, points = [], []
    # the profiler's clock counts from boot or the epoch (2.2e12 µs): the page counts from the
    # first op; the JSON keeps the trace's clock, to join it to the trace
    first_us = min((op["start_us"] for op in document["ops"]), default=0.0)
    for index, op in enumerate(document["ops"]):
        flops, size, measured = op.get("flops"), op.get("bytes"), op["measured_us"]
        rows.append({**{key: op.get(key) for key in _TRACE_KEYS},
                     "start_ms": (op["start_us"] - first_us) / 1e3, "verdict": op["verdict_short"],
                     "intensity": flops / size if flops and size else None})
        if flops and size and measured:
            group = op["op"] if op["op"] in kinds else "other"
            points.append({"x": flops / size, "y": flops / (measured * 1e-6), "row": index,
                           "group": group, "path": None,
                           "label": f"{op['op']} {op.get('module') or ''}".strip()})
    peaks = _roofs(report)
    roofs = [{"group": None, "bandwidth_bytes_per_s": report.gpu.memory_bandwidth_bytes_per_s,
              "peaks": [{"label": f"{label} {peak / 1e12:.4g} TFLOP/s", "flops_per_s": peak}
                        for label, peak in peaks.items()]}]
    columns = [
        column("op", "op", "text", tip=True), column("module", "module", "text", tip=True),
        column("start_ms", "start", "ms"), column("measured_us", "measured µs", tip=True),
        column("sol_us", "SoL µs", tip=True), column("estimate_us", "estimate µs"),
        column("flops", "FLOPs", "flops"), column("bytes", "bytes", "bytes"),
        column("intensity", "FLOP/B", tip=True), column("bound", "bound", "text"),
        column("verdict", "verdict", "text"),
    ]
    summary = [f"{Path(report.path).name} on the {report.gpu.name}: {len(report.instances)} ops, "
               f"GPU activity {report.gpu_time_us:,.1f} µs of {report.wall_us:,.1f} µs wall"]
    return page_html(
        f"torchroofline trace — {Path(report.path).name}", summary, columns, rows, points, roofs,
        ("Notes", [*report.notes, *(f"{i.op.name} ran {i.measured_us:,.1f} µs: {i.verdict.text}"
                                    for i in (*report.faster_than_light, *report.lower_math))]),
        document, "arithmetic intensity (FLOPs per HBM byte)", "measured throughput",
    )


_TRACE_KEYS = ("op", "module", "measured_us", "sol_us", "estimate_us", "flops",
               "bytes", "bound", "faster_than_light")


__all__ = ["page_html", "suite_html", "sweep_html", "trace_html"]
