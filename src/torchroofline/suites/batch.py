"""Analyze many KernelBench problems in worker processes, isolated from each other.

Workers are long-lived: a forkserver imports torch once and each worker, forked from it, takes
problem after problem, so a batch pays one interpreter start and one ``import torch`` rather than
one per problem. A worker that hangs past the timeout, crashes, or grows past the memory limit is
killed and replaced; that problem is recorded as failed (or timed out) with the reason, and every
other result is kept. An interrupt (Ctrl-C, SIGTERM) stops the batch and raises
:class:`BatchInterrupted` carrying the report of the problems finished so far.

Workers never import the caller's ``__main__``: they need nothing from it, and a script that
calls a batch without an ``if __name__ == "__main__":`` guard would otherwise run again in every
worker (and try to start workers of its own there).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch

from ..errors import TorchrooflineError
from .batch_report import BatchReport, ProblemReport
from .kernelbench import level_of, lookup_time, run_name
from .solexecbench import is_problem_dir, load_workloads

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MEMORY_LIMIT_BYTES = 6 * 2**30
_POLL_S = 0.1


@dataclass(frozen=True)
class Task:
    """One problem for a worker; plain data so it crosses the process boundary cheaply."""

    index: int
    path: str
    gpu: Any  # a GPU name or a GPUSpec (picklable frozen dataclass)
    precision: str
    cache: str
    estimate_params: Any = None  #: an EstimateParams, or None for the fitted defaults
    host_scales: tuple[float, ...] = ()  #: also price the estimates at these host scales
    math: str = "program"  #: the math rung the speed of light assumes
    data: str | None = None  #: the bound for "any" input values or the "given" ones
    data_limit_bytes: int = 2 * 2**30  #: inputs a "given" bound may make for real
    also_on: tuple[str, ...] = ()  #: also the speed of light on these GPUs (no retrace)
    workload: str | None = None  #: the uuid of a SOL-ExecBench directory's workload


@dataclass(frozen=True)
class Outcome:
    """What happened to one problem."""

    path: str
    status: str  #: "ok", "failed" or "timeout"
    error: str | None
    result: dict | None  #: the problem's Result.to_dict()
    seconds: float
    traceback: str | None = None  #: the worker's traceback of a failure (shown with --debug)
    workload: str | None = None  #: the uuid of a SOL-ExecBench directory's workload

    @property
    def name(self) -> str:
        """``level1/1_Square.py``, or ``gemm_dir/uuid`` for a SOL-ExecBench workload."""
        name = run_name(Path(self.path))
        return f"{name}/{self.workload}" if self.workload is not None else name


def _analyze_task(task: Task) -> dict:
    from ..price.modes import host_scale_totals_ms
    from .kernelbench import analyze_file
    from .solexecbench import analyze_uuid

    options = {"cache": task.cache, "math": task.math, "data": task.data,
               "data_limit_bytes": task.data_limit_bytes}
    result = (
        analyze_uuid(task.path, task.workload, task.gpu, task.precision, **options)
        if is_problem_dir(task.path)
        else analyze_file(task.path, task.gpu, task.precision, **options)
    )
    if task.estimate_params is not None:
        result = result.on(result.gpu, estimate_params=task.estimate_params)
    document = result.to_dict()
    if task.host_scales:
        document["host_scale_totals_ms"] = host_scale_totals_ms(
            result.performance, task.host_scales, floor_s=result.sol_s
        )
    if task.also_on:
        document["sol_ms_on"] = {gpu: result.on(gpu).sol_ms for gpu in task.also_on}
    return document


def _error_text(error: BaseException) -> str:
    if isinstance(error, TorchrooflineError):
        return str(error)
    if isinstance(error, MemoryError):
        return "out of memory while analyzing (raise --memory-limit)"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


def _worker_main(connection: Connection, threads: int) -> None:
    """Worker loop: receive a Task, send back (index, status, error, result, traceback).
    ``threads``: torch's CPU threads in this worker (its share of the cores: the few real ops an
    analysis runs — masks, indices, a sample of a given operand — each took ~10 ms instead of
    ~0.1 ms when two workers' thread pools waited on each other for two cores)."""
    torch.set_num_threads(threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent
    # stops the batch and kills the workers, whose half-done problem is of no use
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # problem files may print; keep the CLI's stdout clean
    os.dup2(devnull, 2)
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        if task is None:
            return
        try:
            connection.send((task.index, "ok", None, _analyze_task(task), None))
        except BaseException as error:  # noqa: BLE001 — every failure is a result
            failure = (_error_text(error), None, traceback.format_exc())
            connection.send((task.index, "failed", *failure))


class BatchInterrupted(KeyboardInterrupt):
    """A batch stopped by Ctrl-C or SIGTERM: ``report`` covers the ``done`` items finished of
    the ``total`` asked for (a :class:`BatchReport`, or what a caller built from it; a trace's
    ops priced so far), ``items`` what they are ("problems", "ops")."""

    def __init__(self, report: Any, done: int, total: int, items: str = "problems") -> None:
        super().__init__(f"interrupted after {done} of {total} {items}")
        self.report = report
        self.done = done
        self.total = total
        self.items = items

    def with_report(self, report: Any) -> BatchInterrupted:
        """The same interruption carrying another report made from the partial one."""
        return BatchInterrupted(report, self.done, self.total, self.items)


@dataclass
class _Worker:
    process: Any
    connection: Connection
    task: Task | None = None
    started: float = 0.0

    def rss_bytes(self) -> int:
        """Resident memory of the worker (Linux /proc; 0 where unavailable)."""
        try:
            with open(f"/proc/{self.process.pid}/statm") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    def kill(self) -> None:
        self.process.kill()
        self.process.join(timeout=5)
        self.connection.close()


def _context() -> Any:
    if sys.platform.startswith("linux") or sys.platform == "darwin":
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torchroofline._preload"])
        return context
    return multiprocessing.get_context("spawn")


@dataclass
class _Pool:
    jobs: int
    timeout_s: float
    memory_limit_bytes: int
    context: Any = field(default_factory=_context)
    workers: list[_Worker] = field(default_factory=list)

    def start_worker(self) -> _Worker:
        parent, child = self.context.Pipe()
        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        for attempt in range(2):
            process = self.context.Process(target=_worker_main, args=(child, threads),
                                           daemon=True)
            try:
                # a forkserver that ended since _start_forkserver checked it (one a cut-short
                # start of an earlier batch left exiting) is restarted inside start(): with
                # SIGINT held there too, or its workers take a Ctrl-C in multiprocessing's
                # after-fork hooks and print a KeyboardInterrupt traceback (seen on torch 2.15)
                with _main_module_hidden(), _sigint_held(self.context):
                    process.start()
                break
            except EOFError:
                # the forkserver ended: one whose client left mid-request (an interrupt that
                # cut an earlier batch's worker start short, in this process) raises and exits
                if attempt or not _restart_forkserver(self.context):
                    raise
        child.close()
        return _Worker(process, parent)

    def run(self, tasks: Sequence[Task], on_done: Callable[[Outcome], None],
            signals: StopSignals) -> list[Outcome]:
        """Every task's outcome, in task order; on an interrupt (``signals`` are armed while
        the tasks run), :class:`BatchInterrupted` carrying the outcomes finished so far."""
        pending = list(reversed(tasks))
        outcomes: dict[int, Outcome] = {}
        self.workers = []
        try:
            with signals.armed():
                self._run(tasks, pending, outcomes, on_done)
        except KeyboardInterrupt:
            finished = [outcomes[task.index] for task in tasks if task.index in outcomes]
            raise BatchInterrupted(finished, len(finished), len(tasks)) from None
        finally:
            for worker in self.workers:
                worker.kill()
        return [outcomes[task.index] for task in tasks]

    def _run(self, tasks: Sequence[Task], pending: list[Task], outcomes: dict[int, Outcome],
             on_done: Callable[[Outcome], None]) -> None:
        """Start the workers and feed them ``pending`` until every task has its outcome."""
        _start_forkserver(self.context)
        # one by one, so that an interrupt while they start still kills those started
        for _ in range(min(self.jobs, len(tasks))):
            self.workers.append(self.start_worker())
        while len(outcomes) < len(tasks):
            for worker in self.workers:
                if worker.task is None and pending:
                    worker.task = pending.pop()
                    worker.started = time.perf_counter()
                    worker.connection.send(worker.task)
            busy = [w for w in self.workers if w.task is not None]
            ready = wait([w.connection for w in busy], timeout=_POLL_S)
            for worker in busy:
                checked = self._check(worker, worker.connection in ready)
                if checked is None:
                    continue
                outcome, worker_lost = checked
                outcomes[worker.task.index] = outcome
                on_done(outcome)
                worker.task = None
                if worker_lost:
                    self._replace(worker)

    def _check(self, worker: _Worker, ready: bool) -> tuple[Outcome, bool] | None:
        """The outcome of the worker's task if it has one, and whether the worker was lost
        (crashed or killed) and must be replaced; ``None`` while it is still running."""
        task = worker.task
        elapsed = time.perf_counter() - worker.started

        def lost(status: str, reason: str) -> tuple[Outcome, bool]:
            return Outcome(task.path, status, reason, None, elapsed,
                           workload=task.workload), True

        if ready:
            try:
                _, status, error, result, trace = worker.connection.recv()
            except (EOFError, OSError):
                worker.process.join(timeout=1)
                return lost("failed", _crash_reason(worker.process.exitcode))
            return Outcome(task.path, status, error, result, elapsed, trace,
                           task.workload), False
        if elapsed > self.timeout_s:
            return lost("timeout", f"no result after {self.timeout_s:g} s (--timeout)")
        if worker.rss_bytes() > self.memory_limit_bytes:
            limit_gib = self.memory_limit_bytes / 2**30
            return lost("failed", f"used more than {limit_gib:.1f} GiB (--memory-limit)")
        if not worker.process.is_alive():
            return lost("failed", _crash_reason(worker.process.exitcode))
        return None

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        fresh = self.start_worker()
        worker.process, worker.connection = fresh.process, fresh.connection


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start processes without the caller's ``__main__``: multiprocessing's spawn and forkserver
    re-import it in the child from ``__spec__`` or ``__file__`` (``multiprocessing.spawn.
    get_preparation_data``) and leave it alone when it has neither, as in an interactive
    session. Our workers run :func:`_worker_main` and never need it."""
    main = sys.modules.get("__main__")
    saved = {name: main.__dict__[name] for name in ("__file__", "__spec__")
             if main is not None and name in main.__dict__}
    for name in saved:
        setattr(main, name, None)  # read with getattr(..., None): None is "none"
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


class StopSignals:
    """How a batch takes SIGINT (Ctrl-C) and SIGTERM (``kill``, a scheduler's stop): counted
    always, raised (KeyboardInterrupt) only while :meth:`armed`, which the worker pool is while
    problems run, so an interrupt lands where the problems finished so far are kept, never
    while they are gathered or their report is written. One Ctrl-C often arrives twice:
    ``timeout -s INT`` signals the command and then its process group (coreutils timeout.c,
    ``cleanup``); the second used to cut the writing of the report short."""

    def __init__(self) -> None:
        self.received = 0  #: signals taken so far
        self.raised = 0  #: of them, those raised as KeyboardInterrupt
        self.is_armed = False

    def __call__(self, signum: int, frame: Any) -> None:
        self.received += 1
        if self.is_armed:
            self._raise()

    def _raise(self) -> None:
        self.raised = self.received
        self.is_armed = False
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """Within: a signal raises KeyboardInterrupt (one taken before raises on entry)."""
        if self.received > self.raised:
            self._raise()
        self.is_armed = True
        try:
            yield
        finally:
            self.is_armed = False


#: The signals a batch stops on.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """Within: SIGINT and SIGTERM are taken by one :class:`StopSignals` (the one already in
    place when nested: the command line's, around the batch and its report). Only the main
    thread can take signals; elsewhere, and for a SIGINT the caller's shell ignores (a job
    started in the background), nothing changes."""
    current = next((handler for handler in map(signal.getsignal, _STOP_SIGNALS)
                    if isinstance(handler, StopSignals)), None)
    if current is not None:
        yield current
        return
    signals = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    previous = {number: signal.getsignal(number) for number in _STOP_SIGNALS}
    for number in _STOP_SIGNALS:
        if previous[number] is not signal.SIG_IGN:
            signal.signal(number, signals)
    try:
        yield signals
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _restart_forkserver(context: Any) -> bool:
    """Forget an ended forkserver and start a fresh one; False where multiprocessing offers no
    way (its ``_stop``, which its own tests use, waits for the old one to exit)."""
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is None:
        return False
    stop()
    _start_forkserver(context)
    return True


def _start_forkserver(context: Any) -> None:
    """Start the context's forkserver (if it uses one) with SIGINT blocked and its output
    silenced, before any worker. A Ctrl-C reaches the whole process group: the forkserver
    took it while importing torch (seconds) and printed a raw KeyboardInterrupt traceback, and
    a worker forked for a start the interrupt cut short printed an EOFError one. The blocked
    mask and the output survive the forkserver's exec (a Python started with SIGINT blocked
    never sees one) and pass to every worker it forks; our own SIGINT, blocked only for the
    spawn (milliseconds), is delivered when it is unblocked, not lost."""
    if context.get_start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with _sigint_held(context):
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            forkserver.ensure_running()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (*saved, devnull):
            os.close(descriptor)


@contextlib.contextmanager
def _sigint_held(context: Any) -> Iterator[None]:
    """Within: SIGINT blocked in this thread where ``context`` forks from a forkserver (a
    forkserver started meanwhile keeps the mask for its life and passes it to every worker); a
    Ctrl-C that arrives meanwhile is delivered when it ends, not lost."""
    if context.get_start_method() != "forkserver":
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _crash_reason(exit_code: int | None) -> str:
    if exit_code is not None and exit_code < 0:
        return f"worker crashed (killed by signal {-exit_code})"
    return f"worker crashed (exit code {exit_code})"


# --- Progress on stderr ---------------------------------------------------------------------


class Progress:
    """A progress bar on a terminal; one plain line per problem otherwise (logs, CI)."""

    def __init__(self, total: int, stream: Any = None, *, debug: bool = False) -> None:
        self.total = total
        self.debug = debug
        self.done = 0
        self.failed = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()

    def __call__(self, outcome: Outcome) -> None:
        self.done += 1
        self.failed += outcome.status != "ok"
        name = outcome.name
        if self.tty:
            filled = int(30 * self.done / max(self.total, 1))
            self.stream.write(
                f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} "
                f"failed {self.failed}  {name[:40]:<40}"
            )
            if self.done == self.total:
                self.stream.write("\n")
        else:
            reason = f"  ({outcome.error})" if outcome.error else ""
            self.stream.write(
                f"[{self.done}/{self.total}] {outcome.status:<7} {outcome.seconds:6.2f}s "
                f"{name}{reason}\n"
            )
        if self.debug and outcome.traceback:
            self.stream.write(("\n" if self.tty else "") + outcome.traceback)
        self.stream.flush()

    def start(self, jobs: int) -> None:
        """Say what is about to run: the first problem takes a worker's start (``import torch``)
        before any progress shows."""
        workers = min(jobs, self.total)
        self.stream.write(
            f"analyzing {self.total} problem{'s' * (self.total != 1)} in {workers} worker "
            f"process{'es' * (workers != 1)} (a worker's start imports torch: seconds)\n"
        )
        self.stream.flush()

    def stop(self) -> None:
        """End a bar the batch left unfinished (interrupted), so the lines after start afresh."""
        if self.tty and self.done < self.total:
            self.stream.write("\n")


# --- The batch report ----------------------------------------------------------------------


def analyze_batch(
    paths: Sequence[Path],
    gpu: Any,
    precision: str,
    *,
    cache: str = "cold",
    timings: dict | None = None,
    gen_timings: dict | None = None,
    jobs: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
    on_done: Callable[[Outcome], None] = lambda outcome: None,
    estimate_params: Any = None,
    host_scales: Sequence[float] = (),
    math: str = "program",
    data: str | None = None,
    data_limit_bytes: int = 2 * 2**30,
    also_on: Sequence[str] = (),
) -> BatchReport:
    """Analyze every problem in worker processes; ``.to_dict()`` is the JSON report (README).

    ``estimate_params``: the performance model's constants (default: fitted); ``host_scales``:
    each result also carries ``host_scale_totals_ms``, its estimates with the host costs
    scaled by each factor (what ``validate`` fits a host scale from); ``also_on``: each result
    also carries ``sol_ms_on``, its speed of light on each of these GPUs (``Result.on``: the
    same plans re-priced, no retrace). Ctrl-C or SIGTERM raises
    :class:`BatchInterrupted` with the report of the problems finished so far."""
    from ..price.hardware import get_gpu

    spec = get_gpu(gpu)
    base = Task(0, "", spec, precision, cache, estimate_params, tuple(host_scales), math)
    base = replace(base, data=data, data_limit_bytes=data_limit_bytes, also_on=tuple(also_on))
    tasks = [
        replace(base, index=i, path=str(path), workload=workload)
        for i, (path, workload) in enumerate(
            (path, workload) for path in paths for workload in _workloads(path)
        )
    ]
    pool = _Pool(jobs=max(1, jobs), timeout_s=timeout_s, memory_limit_bytes=memory_limit_bytes)

    def report(outcomes: Sequence[Outcome]) -> BatchReport:
        problems = tuple(_problem_report(o, timings or {}, gen_timings or {}) for o in outcomes)
        return BatchReport(spec.name, spec.key, precision, cache, problems)

    try:
        with stop_signals() as signals:
            outcomes = pool.run(tasks, on_done, signals) if tasks else []
    except BatchInterrupted as stopped:
        raise stopped.with_report(report(stopped.report)) from None
    return report(outcomes)


def _workloads(path: Path) -> list[str | None]:
    """The uuids of a SOL-ExecBench directory's workloads, one task each (``[None]`` for a
    KernelBench file, or a directory whose workloads cannot be read: its task says why)."""
    if not is_problem_dir(path):
        return [None]
    try:
        return [workload.uuid for workload in load_workloads(path)]
    except TorchrooflineError:
        return [None]


def task_count(paths: Sequence[Path]) -> int:
    """How many tasks a batch of ``paths`` runs: one per file, one per workload of a
    SOL-ExecBench directory."""
    return sum(len(_workloads(Path(path))) for path in paths)


def _problem_report(outcome: Outcome, timings: dict, gen_timings: dict) -> ProblemReport:
    path = Path(outcome.path)
    level = level_of(path)
    file = path.name if outcome.workload is None else f"{path.name}/{outcome.workload}"
    return ProblemReport(
        level=level,
        file=file,
        path=str(path),
        name=outcome.name,
        status=outcome.status,
        error=outcome.error,
        seconds=outcome.seconds,
        result=outcome.result,
        measured_ms=lookup_time(timings, level, file),
        gen_ms=lookup_time(gen_timings, level, file),
    )
