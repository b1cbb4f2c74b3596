"""How close the per-op estimate comes to real kernels: every profiler trace in a folder read by
``torchroofline trace``, each priced op instance of at least 3 µs set against its measured GPU
time, and each trace's total estimate against the measured time of the ops priced.

    python benchmarks/trace_accuracy.py ../shared/traces                  # print the table
    python benchmarks/trace_accuracy.py ../shared/traces --write docs/validation.md

``--write`` replaces the block between ``<!-- BEGIN trace-accuracy -->`` and
``<!-- END trace-accuracy -->`` in that file. The GPU of each trace is the one it names.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from torchroofline.suites.kineto import TraceReport, analyze_trace
from torchroofline.suites.kineto.report import ACCURACY_FLOOR_US

#: An estimate within this factor of the measured time counts as accurate (issue 29's target).
WITHIN = 2.0
#: Measured-time bins (µs) of the second table: where the model is off depends on kernel size.
BINS_US = ((3.0, 10.0), (10.0, 100.0), (100.0, 1000.0), (1000.0, float("inf")))
BLOCK = "trace-accuracy"


def ratios(report: TraceReport, low_us: float = ACCURACY_FLOOR_US,
           high_us: float = float("inf")) -> list[float]:
    """estimate / measured of each priced instance measured in [low_us, high_us)."""
    return [i.figures.estimate_s * 1e6 / i.measured_us for i in report.priced
            if low_us <= i.measured_us < high_us]


def _summary(found: list[float]) -> list[str]:
    within = sum(1 / WITHIN <= r <= WITHIN for r in found)
    return [str(len(found)), f"{100 * within / len(found):.0f} %" if found else "—",
            f"{statistics.median(found):.2f}" if found else "—"]


def row(name: str, reports: list[TraceReport]) -> list[str]:
    found = [r for report in reports for r in ratios(report)]
    measured = sum(i.measured_us for report in reports for i in report.priced)
    estimate = sum(i.figures.estimate_s * 1e6 for report in reports for i in report.priced)
    fast = sum(len(report.faster_than_light) for report in reports)
    gpus = ", ".join(dict.fromkeys(report.gpu.name for report in reports))
    return [
        name, gpus, *_summary(found),
        f"{estimate:,.0f} / {measured:,.0f} µs = {estimate / measured:.2f}",
        str(fast),
    ]


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(cells) + " |" for cells in rows]) + "\n"


def bins_table(reports: list[TraceReport]) -> str:
    """Per GPU and measured-time bin: instances, share within 2×, median ratio."""
    rows = []
    for gpu in dict.fromkeys(report.gpu.name for report in reports):
        mine = [report for report in reports if report.gpu.name == gpu]
        for low, high in BINS_US:
            found = [r for report in mine for r in ratios(report, low, high)]
            span = f"{low:,.0f}–{high:,.0f} µs" if high != float("inf") else f"≥ {low:,.0f} µs"
            rows.append([gpu, span, *_summary(found)])
    return _markdown(["GPU", "measured", "ops", f"within {WITHIN:g}×",
                      "median estimate / measured"], rows)


def table(folder: Path) -> str:
    paths = sorted(p for p in folder.iterdir() if re.search(r"\.json(\.gz)?$", p.name))
    reports = [analyze_trace(path) for path in paths]
    header = ["trace", "GPU", f"ops ≥ {ACCURACY_FLOOR_US:g} µs", f"within {WITHIN:g}×",
              "median estimate / measured", "total estimate / measured", "faster than SoL"]
    rows = [row(report_name(r), [r]) for r in reports] + [row("all", reports)]
    return _markdown(header, rows) + "\nBy the measured time of the op:\n\n" + bins_table(reports)


def report_name(report: TraceReport) -> str:
    return Path(report.path).name.removesuffix(".gz").removesuffix(".json")


def write(doc: Path, body: str, block: str = BLOCK) -> None:
    """``body`` in place of ``doc``'s generated block named ``block``."""
    text = doc.read_text(encoding="utf-8")
    pattern = re.compile(rf"(<!-- BEGIN {block} -->\n).*?(<!-- END {block} -->)", re.DOTALL)
    if not pattern.search(text):
        sys.exit(f"{doc}: no <!-- BEGIN {block} --> … <!-- END {block} --> block to replace")
    doc.write_text(pattern.sub(lambda m: m.group(1) + body + m.group(2), text), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of torch.profiler traces")
    parser.add_argument("--write", type=Path, metavar="DOC.md", help="update this doc's table")
    args = parser.parse_args()
    body = table(args.folder)
    if args.write:
        write(args.write, body)
        print(f"wrote {args.write}")
    else:
        print(body, end="")


if __name__ == "__main__":
    main()
