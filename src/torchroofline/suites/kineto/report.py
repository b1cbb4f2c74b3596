"""The report of ``torchroofline trace``: where the GPU time of a profiled run went, op kind by
op kind, against each op's speed of light; and two traces side by side.

Per op kind: instances, measured GPU time, SoL (the warm bound), % of SoL (SoL / measured) and
headroom (measured / SoL); the instances with the most time above their bound; GPU busy time
against wall time (what is left is the host-bound share); instances faster than their bound
(a bound bug or a timing bug); the ops that could not be rebuilt, by name and time; the GPU
activity no op launched, with the reason.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...price.gpu_spec import GPUSpec
from ...price.verdicts import Verdict, verdict_fields
from ...units import percent, times
from .events import Activity
from .pricing import OpInstance, judge_warm

#: Instances listed under "most time above their bound".
TOP_COUNT = 10
#: The instances whose estimate accuracy is counted: shorter kernels are mostly the GPU's own
#: minimum kernel duration (issue 29).
ACCURACY_FLOOR_US = 3.0


@dataclass(frozen=True)
class KindRow:
    """One op kind (e.g. ``aten::addmm``) summed over its instances."""

    kind: str
    count: int
    measured_us: float  #: all its instances' GPU time
    priced_us: float  #: the GPU time of the instances that were priced
    sol_us: float  #: their summed warm bounds
    estimate_us: float  #: their summed eager estimates
    #: the priced instances' time against their summed warm ladders (:func:`.judge_warm`, the
    #: verdict analyze prints); None where none was priced
    verdict: Verdict | None = None

    @property
    def sol_fraction(self) -> float | None:
        """SoL / measured over the priced instances (1.0: at the limit)."""
        return self.sol_us / self.priced_us if self.priced_us else None

    @property
    def headroom(self) -> float | None:
        """How many times faster the priced instances could still run."""
        return self.priced_us / self.sol_us if self.sol_us else None

    @property
    def priced_share(self) -> float:
        """The share of the row's measured time whose ops were priced (0 to 1)."""
        return self.priced_us / self.measured_us if self.measured_us else 0.0

    @property
    def speaks_for_the_row(self) -> bool:
        """Whether the priced instances hold most of the row's time, so that their % of SoL and
        headroom describe the row: a vLLM ``FusedMoE`` of 7.7 ms, nearly all custom ops that
        cannot be rebuilt, read "0.0%" from its few priced copies."""
        return self.priced_share > 0.5

    def to_dict(self) -> dict[str, Any]:
        """Its figures; ``sol_us`` and ``estimate_us`` null where none of its ops was priced,
        as an unpriced op's are."""
        priced = self.verdict is not None
        return {
            "kind": self.kind, "count": self.count, "measured_us": self.measured_us,
            "priced_us": self.priced_us, "priced_share": self.priced_share,
            "sol_us": self.sol_us if priced else None,
            "estimate_us": self.estimate_us if priced else None,
            "sol_fraction": self.sol_fraction, "headroom": self.headroom,
            **verdict_fields(self.verdict),
        }


@dataclass(frozen=True)
class TraceReport:
    """One profiled run priced on one GPU."""

    path: str
    device_name: str | None  #: the GPU the trace names (``deviceProperties``)
    gpu: GPUSpec  #: the GPU it is priced on
    instances: tuple[OpInstance, ...]
    unjoined: tuple[Activity, ...]
    gpu_time_us: float  #: every GPU activity's duration, summed
    gpu_busy_us: float  #: the time any GPU activity ran
    wall_us: float
    notes: tuple[str, ...] = ()
    #: "interrupted after 12 of 40 ops" when Ctrl-C cut the pricing short: the report holds the
    #: ops priced before it
    interrupted: str | None = None

    @property
    def priced(self) -> list[OpInstance]:
        return [i for i in self.instances if i.figures is not None]

    @property
    def unpriced(self) -> list[OpInstance]:
        return [i for i in self.instances if i.figures is None]

    @property
    def faster_than_light(self) -> list[OpInstance]:
        """The instances faster than their warm bound at every math rung."""
        return [i for i in self.instances if i.faster_than_light]

    @property
    def lower_math(self) -> list[OpInstance]:
        """The instances faster than their warm bound at their own math, not at a lower rung."""
        return [i for i in self.instances if i.verdict and i.verdict.kind == "lower math"]

    @property
    def host_bound_share(self) -> float:
        """Share of the wall time the GPU ran nothing."""
        return 1 - self.gpu_busy_us / self.wall_us if self.wall_us else 0.0

    def kinds(self) -> list[KindRow]:
        """One row per op kind, the most measured time first."""
        return _grouped(self.instances, lambda instance: instance.op.name)

    def modules(self) -> list[KindRow]:
        """One row per class of the innermost ``nn.Module`` around the ops (``Linear_25`` and
        ``Linear_3`` are both ``Linear``), the most measured time first; empty for a trace
        recorded without ``with_modules``."""
        if not any(instance.op.module for instance in self.instances):
            return []
        return _grouped(self.instances, _module_class)

    def above_bound(self, count: int = TOP_COUNT) -> list[OpInstance]:
        """The priced instances with the most measured time above their warm bound."""
        return sorted(self.priced, key=lambda i: -_above_us(i))[:count]

    def to_dict(self) -> dict[str, Any]:
        return {
            "trace": self.path,
            "device_name": self.device_name,
            "gpu_key": self.gpu.key,
            "gpu": self.gpu.name,
            "gpu_time_us": self.gpu_time_us,
            "gpu_busy_us": self.gpu_busy_us,
            "wall_us": self.wall_us,
            "host_bound_share": self.host_bound_share,
            "joined_gpu_us": sum(i.measured_us for i in self.instances),
            "priced_gpu_us": sum(i.measured_us for i in self.priced),
            # the priced ops' summed eager estimate and its band (each op's band summed)
            **{key: sum(getattr(i.figures, field) for i in self.priced) * 1e6
               for key, field in (("estimate_us", "estimate_s"),
                                  ("estimate_low_us", "estimate_low_s"),
                                  ("estimate_high_us", "estimate_high_s"))},
            "kinds": [row.to_dict() for row in self.kinds()],
            "modules": [row.to_dict() for row in self.modules()],
            "ops": [_op_dict(instance) for instance in self.instances],
            "unjoined": [
                {"name": a.name, "kind": a.kind, "duration_us": a.duration_us,
                 "reason": a.unjoined}
                for a in self.unjoined
            ],
            "notes": list(self.notes),
        }


def _module_class(instance: OpInstance) -> str:
    innermost = instance.op.module.rsplit("/", 1)[-1]
    return re.sub(r"_\d+$", "", innermost) or "(no module)"


def _grouped(instances: Sequence[OpInstance], key: Callable[[OpInstance], str]
             ) -> list[KindRow]:
    grouped: dict[str, list[OpInstance]] = defaultdict(list)
    for instance in instances:
        grouped[key(instance)].append(instance)
    rows = [_kind_row(kind, listed) for kind, listed in grouped.items()]
    return sorted(rows, key=lambda row: -row.measured_us)


def _kind_row(kind: str, instances: Sequence[OpInstance]) -> KindRow:
    priced = [i for i in instances if i.figures is not None]
    priced_us = sum(i.measured_us for i in priced)
    return KindRow(
        kind=kind,
        count=len(instances),
        measured_us=sum(i.measured_us for i in instances),
        priced_us=priced_us,
        sol_us=sum(i.figures.sol_warm_s for i in priced) * 1e6,
        estimate_us=sum(i.figures.estimate_s for i in priced) * 1e6,
        verdict=judge_warm(priced_us, [i.figures for i in priced]) if priced else None,
    )


def _above_us(instance: OpInstance) -> float:
    return instance.measured_us - instance.figures.sol_warm_s * 1e6


def _op_dict(instance: OpInstance) -> dict[str, Any]:
    op, figures = instance.op, instance.figures
    row: dict[str, Any] = {
        "op": op.name,
        "start_us": op.start_us,
        "module": op.module,
        "measured_us": instance.measured_us,
        "kernels": [a.name for a in instance.activities],
        "sol_us": None, "sol_cold_us": None, "estimate_us": None,
        "estimate_low_us": None, "estimate_high_us": None,
        "faster_than_light": instance.faster_than_light,
        **verdict_fields(instance.verdict),
    }
    if figures is None:
        row["unpriced"] = instance.why_unpriced
        return row
    row.update(
        sol_us=figures.sol_warm_s * 1e6,
        sol_cold_us=figures.sol_cold_s * 1e6,
        estimate_us=figures.estimate_s * 1e6,
        estimate_low_us=figures.estimate_low_s * 1e6,
        estimate_high_us=figures.estimate_high_s * 1e6,
        priced_as=figures.priced_as,
        flops=figures.flops,
        bytes=figures.bytes,
        bound=figures.bound,
        math=figures.math,
        assumed=list(figures.assumed),
        input_dims=op.args.get("Input Dims"),
    )
    return row


# --- Text ------------------------------------------------------------------------------------


def _us(value: float | None) -> str:
    """µs to one decimal, or to three significant digits below 1 µs (a bound of 0.034 µs)."""
    if value is None:
        return "—"
    return f"{value:,.1f}" if abs(value) >= 1 or value == 0 else f"{value:.2g}"


def _percent(value: float | None) -> str:
    return "—" if value is None else percent(value)


def _times(value: float | None) -> str:
    """A ratio as every report writes it (``units.times``: three significant figures from 1000
    on, as the suite tables), or "—" where the time was not priced."""
    return "—" if value is None else times(value)


def _shapes(instance: OpInstance) -> str:
    dims = [d for d in instance.op.args.get("Input Dims") or [] if d]
    return " ".join(str(d).replace(" ", "") for d in dims)[:60]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return lines + ["| " + " | ".join(row) + " |" for row in rows]
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    render = [
        "  ".join(cell.ljust(width) if column == 0 else cell.rjust(width)
                  for column, (cell, width) in enumerate(zip(row, widths, strict=True)))
        for row in (header, *rows)
    ]
    return [render[0], "-" * len(render[0]), *render[1:]]


def format_report(report: TraceReport, markdown: bool = False, top: int = TOP_COUNT) -> str:
    """The report as text (or markdown tables)."""
    heading = "## " if markdown else ""
    lines = [
        f"{heading}torchroofline trace — {report.path}",
        "",
        f"GPU: {report.gpu.name} ({report.gpu.key})"
        + (f", the trace's {report.device_name!r}" if report.device_name else ""),
        f"GPU activity {_us(report.gpu_time_us)} µs, busy {_us(report.gpu_busy_us)} µs of "
        f"{_us(report.wall_us)} µs wall: the GPU idles {_percent(report.host_bound_share)} "
        "(host-bound share)",
        f"ops {len(report.instances)}: priced {len(report.priced)}, not rebuilt "
        f"{len(report.unpriced)}; GPU activity no op launched: {len(report.unjoined)} "
        f"({_us(sum(a.duration_us for a in report.unjoined))} µs)",
        "",
    ]
    lines += _kind_table("op kind", report.kinds(), markdown)
    if report.modules():
        lines += ["", f"{heading}By module (the innermost nn.Module's class)", ""]
        lines += _kind_table("module", report.modules()[:top], markdown)
    lines += ["", f"{heading}Most time above the bound", ""]
    lines += _table(
        ["op", "module", "shapes", "measured µs", "SoL µs", "above µs"],
        [[i.op.name, i.op.module.rsplit("/", 1)[-1] or "—", _shapes(i), _us(i.measured_us),
          _us(i.figures.sol_warm_s * 1e6), _us(_above_us(i))] for i in report.above_bound(top)],
        markdown,
    )
    lines += _listing(report, heading)
    return "\n".join(lines) + "\n"


def _kind_table(title: str, rows: Sequence[KindRow], markdown: bool) -> list[str]:
    """One line per row; its % of SoL and verdict (the headroom, or where the time beats the
    bound the verdict's few words) only where the priced instances hold most of its time
    (``priced``: their share), "—" elsewhere."""
    cells = [
        [row.kind, str(row.count), _us(row.measured_us), _percent(row.priced_share),
         *_priced_cells(row)]
        for row in rows
    ]
    return _table([title, "count", "measured µs", "priced", "SoL µs", "% of SoL", "verdict",
                   "estimate µs"], cells, markdown)


def _priced_cells(row: KindRow) -> list[str]:
    """SoL, % of SoL, verdict and estimate: "—" for a row none of whose ops was priced (a bound
    of 0.0 µs said the unpriced custom ops were free)."""
    if row.verdict is None:
        return ["—"] * 4
    return [_us(row.sol_us), *_verdict_cells(row.verdict if row.speaks_for_the_row else None),
            _us(row.estimate_us)]


def _verdict_cells(judged: Verdict | None) -> list[str]:
    """A row's % of SoL and verdict cells: the headroom ("4.0x"), or the verdict's few words
    where it is anything else ("IMPOSSIBLE", "needs TF32 or lower math")."""
    if judged is None:
        return ["—", "—"]
    said = _times(judged.headroom) if judged.kind == "headroom" else judged.short
    return [_percent(judged.sol_fraction), said]


def _listing(report: TraceReport, heading: str) -> list[str]:
    """Instances faster than their bound, ops not rebuilt, unjoined activity and the notes."""
    lines: list[str] = []
    for title, listed in (("Faster than their bound at every math rung (a bound bug or a timing "
                           "bug)", report.faster_than_light),
                          ("Faster than their bound at their own math", report.lower_math)):
        if listed:
            lines += ["", f"{heading}{title}"]
            lines += [f"  {i.op.name} {_shapes(i)}: {_us(i.measured_us)} µs < SoL "
                      f"{_us(i.figures.sol_warm_s * 1e6)} µs: {i.verdict.text}" for i in listed]
    if report.unpriced:
        lines += ["", f"{heading}Ops not rebuilt (their time is in 'measured', not in SoL)"]
        reasons = Counter((i.op.name, i.why_unpriced) for i in report.unpriced)
        spent: dict[tuple[str, str | None], float] = defaultdict(float)
        for i in report.unpriced:
            spent[(i.op.name, i.why_unpriced)] += i.measured_us
        lines += [f"  {name} ×{count}, {_us(spent[(name, why)])} µs: {why}"
                  for (name, why), count in reasons.items()]
    if report.unjoined:
        lines += ["", f"{heading}GPU activity no op launched"]
        spent_by_reason: dict[str | None, list[float]] = defaultdict(list)
        for activity in report.unjoined:
            spent_by_reason[activity.unjoined].append(activity.duration_us)
        lines += [f"  {len(times)} activities, {_us(sum(times))} µs: {why}"
                  for why, times in spent_by_reason.items()]
    if report.notes:
        lines += ["", f"{heading}Notes"] + [f"  - {note}" for note in report.notes]
    return lines


def format_csv(report: TraceReport) -> str:
    """One row per op instance."""
    out = io.StringIO()
    fields = ["op", "module", "start_us", "measured_us", "sol_us", "sol_cold_us",
              "estimate_us", "estimate_low_us", "estimate_high_us", "faster_than_light",
              "verdict_kind", "verdict", "flops", "bytes", "bound", "unpriced"]
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for instance in report.instances:
        writer.writerow(_op_dict(instance))
    return out.getvalue()


#: Output format → writer.
WRITERS: dict[str, Callable[[TraceReport], str]] = {
    "text": format_report,
    "md": lambda report: format_report(report, markdown=True),
    "csv": format_csv,
    "json": lambda report: json.dumps(report.to_dict(), indent=2) + "\n",
}


# --- Two traces ----------------------------------------------------------------------------


def comparison(first: TraceReport, second: TraceReport) -> dict[str, Any]:
    """Per op kind, the two runs' counts, measured times and % of SoL side by side."""
    rows_a = {row.kind: row for row in first.kinds()}
    rows_b = {row.kind: row for row in second.kinds()}
    kinds = sorted(rows_a.keys() | rows_b.keys(),
                   key=lambda k: -max(r.measured_us for r in (rows_a.get(k), rows_b.get(k)) if r))
    return {
        "traces": [first.path, second.path],
        "gpu_keys": [first.gpu.key, second.gpu.key],
        "gpu_time_us": [first.gpu_time_us, second.gpu_time_us],
        "kinds": [
            {"kind": kind,
             "count": [_field(rows_a, kind, "count"), _field(rows_b, kind, "count")],
             "measured_us": [_field(rows_a, kind, "measured_us"),
                             _field(rows_b, kind, "measured_us")],
             "sol_fraction": [_field(rows_a, kind, "sol_fraction"),
                              _field(rows_b, kind, "sol_fraction")]}
            for kind in kinds
        ],
    }


def _field(rows: dict[str, KindRow], kind: str, name: str) -> Any:
    row = rows.get(kind)
    return None if row is None else getattr(row, name)


def format_comparison(compared: dict[str, Any], markdown: bool = False) -> str:
    """:func:`comparison` as a table: A and B per op kind, and B's time over A's."""
    a, b = compared["gpu_keys"]
    header = ["op kind", "A count", "B count", f"A µs ({a})", f"B µs ({b})", "B/A",
              "A % of SoL", "B % of SoL"]
    rows = []
    for kind in compared["kinds"]:
        time_a, time_b = kind["measured_us"]
        ratio = time_b / time_a if time_a and time_b is not None else None
        rows.append([kind["kind"], str(kind["count"][0] or 0), str(kind["count"][1] or 0),
                     _us(time_a), _us(time_b), _times(ratio), _percent(kind["sol_fraction"][0]),
                     _percent(kind["sol_fraction"][1])])
    total_a, total_b = compared["gpu_time_us"]
    lines = [f"A: {compared['traces'][0]}", f"B: {compared['traces'][1]}",
             f"GPU activity: A {_us(total_a)} µs, B {_us(total_b)} µs "
             f"({_times(total_b / total_a)})", ""]
    return "\n".join(lines + _table(header, rows, markdown)) + "\n"
