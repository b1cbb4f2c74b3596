"""Read a ``torch.profiler`` (Kineto) Chrome trace and join each GPU activity to the aten op
that launched it.

The join follows the profiler's own links. A kernel, memcpy or memset carries the
``correlation`` id of the runtime call (``cudaLaunchKernel``, ``hipExtModuleLaunchKernel``,
``cudaMemsetAsync`` …) that queued it; that call ran on a CPU thread inside a stack of
``cpu_op`` events, and the innermost of them is the op that launched the activity
(``aten::linear`` → ``aten::addmm`` → the GEMM: the GEMM is ``aten::addmm``'s, counted once).
Where the launch call is missing, the activity's own ``External id`` names the op. An activity
that neither link reaches is kept as unjoined, with the reason.
"""

from __future__ import annotations

import bisect
import gzip
import json
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import TraceFileError

#: Chrome-trace categories (lower case) of GPU activity, and what each is called in the report;
#: PyTorch 1.8–1.9 wrote "Kernel", "Memcpy" and "Memset".
ACTIVITY_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
                  "memcpy": "memcpy", "memset": "memset"}
#: Categories of the host-side runtime and driver calls that queue GPU work (CUDA and HIP
#: traces both write ``cuda_runtime``; newer Kineto builds write ``cuda_driver`` for
#: ``cuLaunchKernel``, some ``hip_runtime``; PyTorch 1.8–1.9 wrote "Runtime").
LAUNCH_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver",
                               "runtime"})
#: Categories of ops ("Operator" before PyTorch 1.10).
OP_CATEGORIES = frozenset({"cpu_op", "operator"})
#: The step ranges ``profile.step()`` marks (a ``cpu_op`` in some releases): no op of their own.
STEP_PREFIX = "ProfilerStep#"
#: Older spellings of the argument names read here → the current ones.
ARGUMENT_SPELLINGS = {
    "input dims": "Input Dims", "input type": "Input type", "input strides": "Input Strides",
    "concrete inputs": "Concrete Inputs", "external id": "External id",
}
#: ``with_modules=True`` marks each module's forward as a ``python_function`` named so.
MODULE_PREFIX = "nn.Module: "


@dataclass(frozen=True)
class CpuOp:
    """One ``cpu_op`` event: an aten op (or another record_function range) on a host thread.

    ``args`` holds the record_shapes fields as the trace wrote them (``Input Dims``,
    ``Input type``, ``Input Strides``, ``Concrete Inputs``)."""

    index: int  #: position in :attr:`KinetoTrace.ops`
    name: str  #: e.g. ``"aten::addmm"``
    thread: tuple[Any, Any]  #: (pid, tid)
    start_us: float
    duration_us: float
    external_id: int | None
    parent: int | None  #: the innermost op enclosing this one on its thread
    module: str  #: the enclosing ``nn.Module`` ranges, outermost first, joined by "/"
    args: Mapping[str, Any]

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class Activity:
    """One GPU activity (kernel, memcpy or memset) and the op it is joined to."""

    name: str
    kind: str  #: "kernel", "memcpy" or "memset"
    start_us: float
    duration_us: float
    stream: Any
    op: int | None  #: index of the launching :class:`CpuOp`; None when unjoined
    unjoined: str | None = None  #: why no op was found

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class KinetoTrace:
    """A profiler trace with every GPU activity joined to its op."""

    path: str
    device_name: str | None  #: ``deviceProperties[0].name``, e.g. "NVIDIA H100 80GB HBM3"
    ops: tuple[CpuOp, ...]
    activities: tuple[Activity, ...]
    record_shapes: bool  #: whether the ops carry ``Input Dims``
    device_sm_count: int | None = None  #: ``deviceProperties[0].numSms`` (SMs, or AMD CUs)
    device_memory_bytes: int | None = None  #: ``deviceProperties[0].totalGlobalMem``

    @property
    def gpu_time_us(self) -> float:
        """The summed duration of every GPU activity, joined or not."""
        return sum(activity.duration_us for activity in self.activities)

    @property
    def gpu_busy_us(self) -> float:
        """The time at least one GPU activity ran (overlaps on several streams count once)."""
        return _union_length((a.start_us, a.end_us) for a in self.activities)

    @property
    def wall_us(self) -> float:
        """From the first op or activity to the last one's end."""
        spans = [(o.start_us, o.end_us) for o in self.ops]
        spans += [(a.start_us, a.end_us) for a in self.activities]
        return max(end for _, end in spans) - min(start for start, _ in spans)

    def activities_by_op(self) -> dict[int, list[Activity]]:
        """The joined activities of each op that launched any, in trace order."""
        found: dict[int, list[Activity]] = defaultdict(list)
        for activity in self.activities:
            if activity.op is not None:
                found[activity.op].append(activity)
        return dict(found)


def _union_length(spans: Iterable[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def load_events(path: str | Path) -> dict[str, Any]:
    """The trace's JSON document; gzip is recognised by its magic bytes, not its name."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise TraceFileError(f"{path}: cannot read the trace ({error.strerror})") from None
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        document = json.loads(raw)
    except (EOFError, OSError, zlib.error) as error:
        raise TraceFileError(
            f"{path}: not a complete gzip file ({error}); copy or record the trace again"
        ) from None
    except (UnicodeDecodeError, ValueError) as error:
        raise TraceFileError(
            f"{path}: not a JSON Chrome trace ({error}); pass the file "
            "torch.profiler's export_chrome_trace or tensorboard_trace_handler wrote"
        ) from None
    if isinstance(document, list):  # the bare-array form of the Chrome trace format
        document = {"traceEvents": document}
    if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
        raise TraceFileError(
            f"{path}: no traceEvents list: not a torch.profiler Chrome trace"
        )
    return document


class TraceReadInterrupted(KeyboardInterrupt):
    """Ctrl-C while a trace was read or joined, before any of its ops was priced: nothing to
    report, and the one line says so (the phase cut short)."""

    def __init__(self, path: str | Path, phase: str) -> None:
        super().__init__(f"interrupted while {phase} {path}, before any op was priced: "
                         "no report was written")


def read_trace(path: str | Path) -> KinetoTrace:
    """Load ``path`` and join its GPU activities to their ops (see the module's docstring).

    Raises :class:`~torchroofline.errors.TraceFileError` with one line for a file that is
    not a trace, a truncated one, or one without GPU activity or CPU ops, and
    :class:`TraceReadInterrupted` on Ctrl-C."""
    try:
        document = load_events(path)
    except KeyboardInterrupt:
        raise TraceReadInterrupted(path, "reading") from None
    try:
        return _joined(path, document)
    except KeyboardInterrupt:
        raise TraceReadInterrupted(path, "joining the kernels to the ops of") from None


def _joined(path: str | Path, document: dict[str, Any]) -> KinetoTrace:
    """The trace whose events ``document`` holds, its GPU activities joined to their ops."""
    events = [e for e in document["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    try:
        ops, launches, raw_activities = _split(events)
    except (KeyError, TypeError, ValueError) as error:
        raise TraceFileError(
            f"{path}: a malformed event ({error!r} missing or of the wrong type); pass an "
            "unedited torch.profiler trace"
        ) from None
    if not raw_activities:
        raise TraceFileError(
            f"{path}: no GPU activity (kernel, memcpy, memset): a CPU-only trace; profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
    if not ops:
        raise TraceFileError(
            f"{path}: no cpu_op events, so no kernel can be joined to an op; profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
        )
    modules = [e for e in events if str(e.get("name", "")).startswith(MODULE_PREFIX)]
    cpu_ops = _cpu_ops(ops, modules)
    activities = _join(raw_activities, launches, cpu_ops)
    devices = document.get("deviceProperties") or [{}]
    device = devices[0] if isinstance(devices[0], dict) else {}
    return KinetoTrace(
        path=str(path),
        device_name=device.get("name"),
        ops=tuple(cpu_ops),
        activities=tuple(activities),
        record_shapes=any("Input Dims" in op.args for op in cpu_ops),
        device_sm_count=_positive_int(device.get("numSms")),
        device_memory_bytes=_positive_int(device.get("totalGlobalMem")),
    )


def _positive_int(value: Any) -> int | None:
    """A device property that is a positive integer, else None (absent or malformed)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _split(events: Sequence[dict]) -> tuple[list[dict], dict[int, dict], list[dict]]:
    """cpu_op events, launch calls by correlation id, GPU activities; times checked as
    numbers (a malformed event raises KeyError, TypeError or ValueError)."""
    ops, launches, activities = [], {}, []
    for event in events:
        category = str(event.get("cat", "")).lower()
        if category in OP_CATEGORIES and not str(event.get("name", "")).startswith(STEP_PREFIX):
            float(event["ts"]), float(event["dur"])
            ops.append(event)
        elif category in LAUNCH_CATEGORIES:
            correlation = (event.get("args") or {}).get("correlation")
            if correlation is not None:
                launches[correlation] = event
        elif category in ACTIVITY_KINDS:
            float(event["ts"]), float(event["dur"])
            activities.append({**event, "cat": category, "args": _arguments(event)})
    return ops, launches, activities


def _arguments(event: dict) -> dict[str, Any]:
    """An event's args under their current names."""
    return {ARGUMENT_SPELLINGS.get(str(key).lower(), key): value
            for key, value in (event.get("args") or {}).items()}


def _thread(event: dict) -> tuple[Any, Any]:
    return event.get("pid"), event.get("tid")


def _by_thread(events: Iterable[dict]) -> dict[tuple[Any, Any], list[dict]]:
    """Events per thread, each list sorted outermost-first: by start, the longer first."""
    found: dict[tuple[Any, Any], list[dict]] = defaultdict(list)
    for event in events:
        found[_thread(event)].append(event)
    for listed in found.values():
        listed.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
    return found


def _module_name(event: dict) -> str:
    return str(event["name"])[len(MODULE_PREFIX):]


def _cpu_ops(ops: Sequence[dict], modules: Sequence[dict]) -> list[CpuOp]:
    """The ops in start order, each with its parent op and enclosing module path (one sweep
    per thread over ranges that nest, as a host thread's ranges do)."""
    module_threads = _by_thread(modules)
    made: list[CpuOp] = []
    for thread, listed in sorted(_by_thread(ops).items(), key=lambda item: str(item[0])):
        module_stack = _Stack(module_threads.get(thread, []))
        op_stack: list[CpuOp] = []
        for event in listed:
            start, duration = float(event["ts"]), float(event["dur"])
            while op_stack and op_stack[-1].end_us <= start:
                op_stack.pop()
            args = _arguments(event)
            op = CpuOp(
                index=len(made),
                name=str(event["name"]),
                thread=thread,
                start_us=start,
                duration_us=duration,
                external_id=args.get("External id"),
                parent=op_stack[-1].index if op_stack else None,
                module="/".join(_module_name(m) for m in module_stack.at(start)),
                args=args,
            )
            made.append(op)
            op_stack.append(op)
    return made


class _Stack:
    """The ranges of one thread enclosing a point, for points queried in increasing order."""

    def __init__(self, ranges: Sequence[dict]) -> None:
        self._ranges = ranges
        self._next = 0
        self._open: list[dict] = []

    def at(self, time_us: float) -> list[dict]:
        while self._next < len(self._ranges) and float(self._ranges[self._next]["ts"]) <= time_us:
            self._close_before(float(self._ranges[self._next]["ts"]))
            self._open.append(self._ranges[self._next])
            self._next += 1
        self._close_before(time_us)
        return self._open

    def _close_before(self, time_us: float) -> None:
        while self._open and float(self._open[-1]["ts"]) + float(self._open[-1]["dur"]) < time_us:
            self._open.pop()


def _innermost_op(ops_of_thread: Sequence[CpuOp], starts: Sequence[float], time_us: float
                  ) -> CpuOp | None:
    """The innermost op of one thread (sorted by start) whose range holds ``time_us``: the
    latest-starting one that still runs then, found by walking up from the last op started."""
    position = bisect.bisect_right(starts, time_us) - 1
    if position < 0:
        return None
    op: CpuOp | None = ops_of_thread[position]
    while op is not None and op.end_us < time_us:
        op = _parent(op, ops_of_thread)
    return op


def _parent(op: CpuOp, ops_of_thread: Sequence[CpuOp]) -> CpuOp | None:
    if op.parent is None:
        return None
    first = ops_of_thread[0].index  # a thread's ops are contiguous in index order
    return ops_of_thread[op.parent - first]


def _join(raw: Sequence[dict], launches: Mapping[int, dict], ops: Sequence[CpuOp]
          ) -> list[Activity]:
    """Each GPU activity with its op: launch call → innermost enclosing op, else External id."""
    threads: dict[tuple[Any, Any], list[CpuOp]] = defaultdict(list)
    for op in ops:
        threads[op.thread].append(op)
    starts = {thread: [op.start_us for op in listed] for thread, listed in threads.items()}
    by_external = {op.external_id: op for op in ops if op.external_id is not None}
    first_op_us = min(op.start_us for op in ops)
    joined = []
    for event in sorted(raw, key=lambda e: float(e["ts"])):
        args = event["args"]
        launch = launches.get(args.get("correlation"))
        op = None
        if launch is not None:
            thread = _thread(launch)
            if thread in threads:
                op = _innermost_op(threads[thread], starts[thread], float(launch["ts"]))
        if op is None:
            op = by_external.get(args.get("External id"))
        reason = None if op is not None else _unjoined_reason(event, launch, first_op_us)
        joined.append(Activity(
            name=str(event.get("name", "")),
            kind=ACTIVITY_KINDS[event["cat"]],
            start_us=float(event["ts"]),
            duration_us=float(event["dur"]),
            stream=args.get("stream"),
            op=None if op is None else op.index,
            unjoined=reason,
        ))
    return joined


def _unjoined_reason(event: dict, launch: dict | None, first_op_us: float) -> str:
    if launch is not None:
        return (f"its launch call {launch.get('name')} ran inside no aten op (a library or "
                "Python-level launch)")
    if float(event["ts"]) < first_op_us:
        return "queued before the profiler's first CPU op (its launch is not in the trace)"
    return "its launch call is not in the trace and it names no op by External id"
