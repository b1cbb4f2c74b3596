"""Analyze many KernelBench problems in worker processes, isolated from each other.

Workers are long-lived: a forkserver imports torch once and each worker, forked from it, takes
problem after problem, so a batch pays one interpreter start and one ``import torch`` rather than
one per problem. A worker that hangs past the timeout, crashes, or grows past the memory limit is
killed and replaced; that problem is recorded as failed (or timed out) with the reason, and every
other result is kept.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from .batch_report import BatchReport, ProblemReport
from .kernelbench import level_of, lookup_time, run_name

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


@dataclass(frozen=True)
class Outcome:
    """What happened to one problem."""

    path: str
    status: str  #: "ok", "failed" or "timeout"
    error: str | None
    result: dict | None  #: the problem's Result.to_dict()
    seconds: float
    traceback: str | None = None  #: the worker's traceback of a failure (shown with --debug)


def _analyze_task(task: Task) -> dict:
    from .kernelbench import analyze_file

    return analyze_file(task.path, task.gpu, task.precision, cache=task.cache).to_dict()


def _error_text(error: BaseException) -> str:
    from .errors import TorchrooflineError

    if isinstance(error, TorchrooflineError):
        return str(error)
    if isinstance(error, MemoryError):
        return "out of memory while analyzing (raise --memory-limit)"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


def _worker_main(connection: Connection) -> None:
    """Worker loop: receive a Task, send back (index, status, error, result, traceback)."""
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
        process = self.context.Process(target=_worker_main, args=(child,), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)

    def run(self, tasks: Sequence[Task], on_done: Callable[[Outcome], None]) -> list[Outcome]:
        pending = list(reversed(tasks))
        outcomes: dict[int, Outcome] = {}
        self.workers = [self.start_worker() for _ in range(min(self.jobs, len(tasks)))]
        try:
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
        finally:
            for worker in self.workers:
                worker.kill()
        return [outcomes[task.index] for task in tasks]

    def _check(self, worker: _Worker, ready: bool) -> tuple[Outcome, bool] | None:
        """The outcome of the worker's task if it has one, and whether the worker was lost
        (crashed or killed) and must be replaced; ``None`` while it is still running."""
        task = worker.task
        elapsed = time.perf_counter() - worker.started

        def lost(status: str, reason: str) -> tuple[Outcome, bool]:
            return Outcome(task.path, status, reason, None, elapsed), True

        if ready:
            try:
                _, status, error, result, trace = worker.connection.recv()
            except (EOFError, OSError):
                worker.process.join(timeout=1)
                return lost("failed", _crash_reason(worker.process.exitcode))
            return Outcome(task.path, status, error, result, elapsed, trace), False
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


def _crash_reason(exit_code: int | None) -> str:
    if exit_code is not None and exit_code < 0:
        return f"worker crashed (killed by signal {-exit_code})"
    return f"worker crashed (exit code {exit_code})"


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
) -> BatchReport:
    """Analyze every problem in worker processes; ``.to_dict()`` is the JSON report (README)."""
    from .hardware import get_gpu

    spec = get_gpu(gpu)
    tasks = [Task(i, str(path), spec, precision, cache) for i, path in enumerate(paths)]
    pool = _Pool(jobs=max(1, jobs), timeout_s=timeout_s, memory_limit_bytes=memory_limit_bytes)
    outcomes = pool.run(tasks, on_done) if tasks else []
    problems = tuple(_problem_report(o, timings or {}, gen_timings or {}) for o in outcomes)
    return BatchReport(spec.name, spec.key, precision, cache, problems)


def _problem_report(outcome: Outcome, timings: dict, gen_timings: dict) -> ProblemReport:
    path = Path(outcome.path)
    level = level_of(path)
    return ProblemReport(
        level=level,
        file=path.name,
        path=str(path),
        name=run_name(path),
        status=outcome.status,
        error=outcome.error,
        seconds=outcome.seconds,
        result=outcome.result,
        measured_ms=lookup_time(timings, level, path.name),
        gen_ms=lookup_time(gen_timings, level, path.name),
    )
