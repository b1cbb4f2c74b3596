"""``torchroofline trace``: a ``torch.profiler`` (Kineto) trace recorded with
``record_shapes=True``, each GPU activity joined to the aten op that launched it
(:mod:`.events`), each op rebuilt on fake tensors (:mod:`.rebuild`) and priced on the trace's
GPU (:mod:`.pricing`), reported against its measured time (:mod:`.report`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...errors import InputError, TraceFileError, UnknownGPUError
from ...price.gpu_spec import GPUSpec
from ...price.hardware import closest_gpu, get_gpu
from ...price.roofline import L2_HIT_LATENCY_CYCLES, kernel_floor_s
from ...units import counted
from .events import KinetoTrace, read_trace
from .pricing import OpInstance, price_trace
from .report import WRITERS, TraceReport, comparison, format_comparison, format_report

__all__ = ["TraceReport", "analyze_trace", "read_trace"]


def trace_gpu(trace: KinetoTrace, gpu: str | GPUSpec | None) -> tuple[GPUSpec, str, bool]:
    """The GPU to price on, a note saying where it came from, and whether it is a guess:
    ``gpu`` where given, else the trace's ``deviceProperties`` name as the driver prints it,
    else (a name the table does not know, such as a board name or ROCm's "AMD Radeon Graphics")
    the closest part (:func:`~torchroofline.price.hardware.closest_gpu`), a guess."""
    if gpu is not None:
        spec = get_gpu(gpu)
        said = f" (the trace says {trace.device_name!r})" if trace.device_name else ""
        return spec, f"priced on the {spec.name}, as --gpu asks{said}", False
    if not trace.device_name:
        raise TraceFileError(
            f"{trace.path}: names no GPU (no deviceProperties); pass --gpu"
        )
    try:
        spec = get_gpu(trace.device_name)
    except UnknownGPUError as error:
        closest = closest_gpu(trace.device_name, trace.device_sm_count,
                              trace.device_memory_bytes)
        if closest is None:
            raise UnknownGPUError(f"{error}; the trace's GPU: pass --gpu to choose one") from None
        return closest, (
            f"the trace's GPU {trace.device_name!r}{_device_figures(trace)} is not in the table: "
            f"priced on the closest part, the {closest.name} ({closest.sm_count} SMs/CUs, "
            f"{closest.memory_bytes / 1e9:.0f} GB); pass --gpu to choose another"
        ), True
    named = f"GPU from the trace's deviceProperties: {trace.device_name!r} → {spec.name}"
    return spec, named, False


def _device_figures(trace: KinetoTrace) -> str:
    """ " (108 SMs/CUs, 42 GB)": what the trace says of its device, where it says it."""
    figures = [f"{trace.device_sm_count} SMs/CUs"] if trace.device_sm_count else []
    if trace.device_memory_bytes:
        figures.append(f"{trace.device_memory_bytes / 1e9:.0f} GB")
    return f" ({', '.join(figures)})" if figures else ""


def analyze_trace(path: str | Path, gpu: str | GPUSpec | None = None,
                  note: Callable[[str], None] | None = None) -> TraceReport:
    """Read, join and price the profiler trace at ``path`` (JSON, or gzipped JSON) on ``gpu``
    (default: the GPU the trace names, or the closest part, which ``note`` is told of). Ctrl-C
    while pricing gives a report of the ops priced before it (``interrupted`` says so)."""
    from ..batch import BatchInterrupted

    trace = read_trace(path)
    if not trace.record_shapes:
        raise TraceFileError(
            f"{path}: its ops carry no Input Dims, so none can be rebuilt; profile with "
            "torch.profiler.profile(record_shapes=True)"
        )
    spec, gpu_note, guessed = trace_gpu(trace, gpu)
    if guessed and note is not None:
        note(f"{path}: {gpu_note}")
    try:
        instances, interrupted = price_trace(trace, spec), None
    except BatchInterrupted as stopped:
        instances, interrupted = stopped.report, str(stopped)
    return TraceReport(
        path=str(path),
        device_name=trace.device_name,
        gpu=spec,
        instances=instances,
        unjoined=tuple(a for a in trace.activities if a.op is None),
        gpu_time_us=trace.gpu_time_us,
        gpu_busy_us=trace.gpu_busy_us,
        wall_us=trace.wall_us,
        notes=(gpu_note, *_assumption_notes(instances), *_floor_note(instances, spec),
               *([f"partial report: {interrupted}"] if interrupted else [])),
        interrupted=interrupted,
    )


def _assumption_notes(instances: Sequence[OpInstance]) -> list[str]:
    """One line per thing assumed where the trace was silent, and per math a kernel's name
    chose, with the number of ops it touched."""
    assumed: Counter[str] = Counter()
    math: Counter[str] = Counter()
    for instance in instances:
        if instance.figures is not None:
            assumed.update(instance.figures.assumed)
            if instance.figures.math:
                math[instance.figures.math] += 1
    notes = [f"{counted(count, 'op')} priced assuming {what} (the trace does not record it)"
             for what, count in assumed.items()]
    notes += [f"{counted(count, 'fp32 op')} priced on {what}" for what, count in math.items()]
    return notes


def _floor_note(instances: Sequence[OpInstance], gpu: GPUSpec) -> list[str]:
    """One line saying what the SoL shared by the ops at the one-kernel floor is, if any is."""
    floored = sum(1 for i in instances if i.figures is not None and i.figures.at_kernel_floor)
    if not floored:
        return []
    floor_us = kernel_floor_s(1, gpu) * 1e6
    return [f"{counted(floored, 'op')} at the one-kernel floor, SoL {floor_us:.2g} µs: no kernel "
            f"that moves data ends before one L2 hit ({L2_HIT_LATENCY_CYCLES} cycles at the "
            f"{gpu.name}'s boost clock), above their roofline bound"]


# --- Command line ----------------------------------------------------------------------------


def add_arguments(parser: Any) -> None:
    """The options of ``torchroofline trace``."""
    parser.add_argument("traces", nargs="+", metavar="TRACE.json[.gz]",
                        help="a torch.profiler trace; two to compare them")
    parser.add_argument(
        "--gpu", help="price on this GPU (default: the one the trace names; see "
        "'torchroofline gpus')",
    )
    parser.add_argument("--format", choices=tuple(WRITERS),
                        help="report format (compare: text, md or json; default: the --out "
                        "file's suffix, else text)")
    parser.add_argument("--out", metavar="FILE", help="write the report here, not to stdout")
    parser.add_argument("--top", type=int, default=10, help="instances listed above the bound")
    parser.add_argument("--plot", metavar="PNG|SVG",
                        help="each op at its measured throughput under its roof")


def run(args: Any, note: Callable[[str], None],
        writers: dict[str, Callable[[TraceReport], str]] = WRITERS) -> list[TraceReport]:
    """``torchroofline trace``: report one trace or compare two; returns the reports.
    ``writers``: the report formats by ``--format`` name (the command line adds html)."""
    if len(args.traces) > 2:
        raise InputError(f"trace takes one trace, or two to compare; got {len(args.traces)}")
    from ..batch import stop_signals
    from ..batch_report import mark_partial

    with stop_signals() as signals:
        reports = _analyzed(args, note, signals)
        if len(reports) == 1:
            text = (format_report(reports[0], top=args.top) if args.format == "text"
                    else writers[args.format](reports[0]))
        else:
            text = _compared_text(reports, args.format)
        if reports[-1].interrupted and args.format != "html":  # a page says it in its notes
            text = mark_partial(text, "." + args.format, reports[-1].interrupted)
        _written(args, text, note)
    for report in reports:
        _said_faster(report, note)
    return reports


def _analyzed(args: Any, note: Callable[[str], None], signals: Any) -> list[TraceReport]:
    """The traces analyzed, Ctrl-C raising only while they are (the report is written whole):
    after one, those finished and the one cut short (a trace cut while read is not kept)."""
    reports: list[TraceReport] = []
    for path in args.traces:
        with signals.armed():
            reports.append(analyze_trace(path, args.gpu, note))
        if reports[-1].interrupted:
            return reports[-1:]  # one trace of a pair compares with nothing
    return reports


def _written(args: Any, text: str, note: Callable[[str], None]) -> None:
    """The report to ``--out``, else to stdout."""
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        note(f"wrote {args.out}")
    else:
        print(text, end="")


def _said_faster(report: TraceReport, note: Callable[[str], None]) -> None:
    """One line per kind of op that ran faster than its bound."""
    for listed, said in ((report.faster_than_light, "their bound at every math rung: a "
                          "bound bug or a timing bug"),
                         (report.lower_math, "their bound at their own math: possible only "
                          "with lower math")):
        if listed:
            note(f"{report.path}: {counted(len(listed), 'op')} ran faster than {said} "
                 "(listed in the report)")


def _compared_text(reports: Sequence[TraceReport], format_: str) -> str:
    compared = comparison(*reports)
    if format_ == "json":
        return json.dumps(compared, indent=2) + "\n"
    if format_ not in ("text", "md"):
        raise InputError("a comparison of two traces is written as text, md or json")
    return format_comparison(compared, markdown=format_ == "md")
