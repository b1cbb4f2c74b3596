"""``torchroofline kernelbench``, ``plot`` and ``validate``: suites of problems in workers,
their reports and pictures, and measured times against the bounds."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import (
    EXIT_FAILED,
    EXIT_FASTER_THAN_LIGHT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    at_least_one,
    check_exists,
    check_outputs,
    clock_options,
    command,
    common_options,
    data_option,
    estimate_params,
    exit_code,
    faster_than_light,
    json_or_format,
    levels_option,
    math_option,
    positive,
    print_error,
    print_note,
    target_gpu,
)

if TYPE_CHECKING:
    from ..suites.batch_report import BatchReport


def register(commands: Any) -> None:
    """The ``kernelbench``, ``plot`` and ``validate`` commands' parsers, added to ``commands``."""
    suite = command(
        commands,
        "kernelbench",
        help="analyze a KernelBench suite, level folder or files (and SOL-ExecBench problem "
        "directories, one row per workload) in workers",
        description="Every problem runs in a worker process with a timeout and a memory limit.",
    )
    suite.add_argument("paths", nargs="+", metavar="PATH")
    common_options(suite)
    clock_options(suite)
    math_option(suite)
    data_option(suite)
    suite.add_argument("--timings", metavar="JSON", help="reference times (KernelBench format); "
                       "one below the speed of light warns and exits 3")
    suite.add_argument(
        "--gen-timings", metavar="JSON",
        help="generated kernels' times; one below the speed of light warns and exits 3",
    )
    suite.add_argument(
        "--run", metavar="DIR",
        help="a KernelBench run folder (runs/<run>: eval_results.json and the kernel files); "
        "reports its samples against the speed of light of their problems",
    )
    suite.add_argument("--level", help="levels to keep, e.g. 1,2")
    suite.add_argument("-j", "--jobs", type=at_least_one, default=1, help="worker processes")
    suite.add_argument("--timeout", type=positive, default=60.0, help="seconds per problem")
    suite.add_argument(
        "--memory-limit", type=positive, default=6.0, metavar="GIB", help="GiB per worker"
    )
    suite.add_argument("--out", metavar="FILE",
                       help="report.md, report.csv, report.json or report.html")
    suite.add_argument("--json", action="store_true", help="print the JSON report")
    suite.add_argument(
        "--format", choices=("md", "csv", "json", "html"),
        help="print the report in this format (html: one self-contained page, a sortable table "
        "and the roofline; default md, or nothing with --out)",
    )
    suite.add_argument("--plot-dir", metavar="DIR",
                       help="write the suite pictures here (made where it does not exist)")
    suite.add_argument("--per-problem", action="store_true", help="also one roofline each")

    plot = command(commands, "plot", help="pictures from a saved kernelbench report.json")
    plot.add_argument("report", metavar="REPORT.json")
    plot.add_argument("--out", required=True, metavar="DIR",
                      help="folder for the pictures (made where it does not exist)")
    plot.add_argument("--per-problem", action="store_true", help="also one roofline each")

    from ..suites.validate import add_arguments as validate_arguments

    validate = command(
        commands, "validate", help="check bounds and estimates against measured times",
        description="Set the speed of light and each estimate against KernelBench-format timing "
        "JSONs (one per mode), and fit the host scale of your machine. Exits 3 if a measured "
        "time beats the speed of light.",
    )
    validate_arguments(validate)
    next(action for action in validate._actions if action.dest == "jobs").type = at_least_one
    common_options(validate)
    suite.set_defaults(handler=cmd_kernelbench)
    plot.set_defaults(handler=cmd_plot)
    validate.set_defaults(handler=cmd_validate)


def suite_text(report: BatchReport, suffix: str, interrupted: str | None = None) -> str:
    """The batch report as Markdown, CSV or JSON (``suffix``), marked partial when the batch was
    ``interrupted`` (the interruption's one line)."""
    from ..present.html import suite_html
    from ..present.report import suite_csv, suite_markdown
    from ..suites.batch_report import mark_partial

    if suffix == ".html":  # a page marks itself partial: its title, summary and JSON
        return suite_html(report, interrupted)
    writers = {
        ".md": suite_markdown,
        ".csv": suite_csv,
        ".json": lambda data: json.dumps(data.to_dict(), indent=2) + "\n",
    }
    text = writers[suffix](report)
    return mark_partial(text, suffix, interrupted) if interrupted else text



def write_report(report: BatchReport, path: str, interrupted: str | None = None) -> None:
    """Write the batch report as Markdown, CSV or JSON by ``path``'s extension."""
    _check_suffix(path)
    Path(path).write_text(
        suite_text(report, Path(path).suffix.lower(), interrupted), encoding="utf-8"
    )



def _nothing_to_run(paths: Sequence[str], levels: set[int] | None) -> str:
    """Why ``discover`` found nothing: no problem files at all, or a level filter that left none."""
    from ..suites.kernelbench import discover, level_of

    where = " ".join(paths)
    unfiltered = discover(paths) if levels else []
    if not unfiltered:
        return f"no problem files under {where}"
    found = {level_of(path) for path in unfiltered}
    named = [str(level) for level in sorted(found - {None})] + ["none"] * (None in found)
    return (
        f"--level {','.join(map(str, sorted(levels or ())))} kept none of the {len(unfiltered)} "
        f"problem files under {where} (their levels: {', '.join(named)})"
    )



def cmd_kernelbench(args: argparse.Namespace) -> int:
    from ..present.report import suite_summary_line
    from ..suites.batch import Progress, stop_signals, task_count
    from ..suites.kernelbench import load_timings
    from ..suites.solexecbench import discover_problems
    from ..suites.validate import check_timings_match

    # every check that reads no problem, then the GPU's note: an error is the one line
    printed = json_or_format(args)
    if args.out:
        _check_suffix(args.out)
    check_outputs({"--out": args.out}, {"--plot-dir": args.plot_dir})
    check_exists([args.run])  # the PATHs: discover_problems, "no such file or folder"
    timings = load_timings(args.timings) if args.timings else None
    gen_timings = load_timings(args.gen_timings) if args.gen_timings else None
    levels = levels_option(args.level)
    paths = discover_problems(args.paths, levels)
    if not paths:
        raise UsageError(_nothing_to_run(args.paths, levels))
    # as validate's: a timings file naming none of the problems (another level's, a typo) left
    # every measured column empty without a word
    given = {option: table for option, table in (("--timings", timings),
                                                 ("--gen-timings", gen_timings)) if table}
    check_timings_match(given, paths, {"--timings": args.timings,
                                       "--gen-timings": args.gen_timings})
    run = None
    if args.run:
        run, paths = _run_and_problems(args.run, paths, args.paths)
    gpu = target_gpu(args)
    progress = Progress(task_count(paths), debug=args.debug)
    # signals are raised only while problems run (the batch arms them); one taken at any other
    # time stops the command once the report is written whole
    with stop_signals() as signals:
        report, interrupted = _run_batch(args, paths, gpu, progress, timings, gen_timings)
        if run is not None:
            return _report_run(args, run, report, interrupted, signals)
        if args.out:
            write_report(report, args.out, interrupted)
        if printed:
            print(suite_text(report, f".{printed}", interrupted), end="")
        elif not args.out:
            print(suite_text(report, ".md", interrupted))
        print_note(suite_summary_line(report, progress.total if interrupted else None))
        stopped = _said_where_it_wrote(args.out, interrupted, signals)
        if args.plot_dir and (interrupted or not stopped):  # of the problems finished, if cut
            # short; a Ctrl-C stops the drawing of a whole batch's pictures
            with contextlib.nullcontext() if interrupted else signals.armed():
                _plot_suite(args, report)
    if stopped:
        return EXIT_INTERRUPTED
    for problem in report.problems:
        # a --timings time below every rung exits 3 as validate's does (it exited 0)
        for too_fast, time_ms, whose in ((problem.impossible, problem.measured_ms, "the measured"),
                                         (problem.gen_impossible, problem.gen_ms,
                                          "the generated kernel's")):
            if too_fast:
                faster_than_light(problem.name, time_ms, min(problem.sol_by_math_ms.values()),
                                  whose)
    return exit_code(report.failed,
                     sum(p.gen_impossible or p.impossible for p in report.problems))


def _run_batch(args: argparse.Namespace, paths: list[Path], gpu: Any, progress: Any,
               timings: dict | None, gen_timings: dict | None) -> tuple[BatchReport, str | None]:
    """The batch's report, and the interruption's one line when Ctrl-C or SIGTERM stopped it
    (the report then covers the problems finished)."""
    from ..suites.batch import BatchInterrupted, analyze_batch

    progress.start(args.jobs)
    try:
        report = analyze_batch(
            paths, gpu, args.precision, cache=args.cache, timings=timings,
            gen_timings=gen_timings, jobs=args.jobs, timeout_s=args.timeout,
            memory_limit_bytes=int(args.memory_limit * 2**30), on_done=progress,
            estimate_params=estimate_params(args.host_scale), math=args.math,
            data=args.data, data_limit_bytes=int(args.data_limit * 2**30),
        )
    except BatchInterrupted as stopped:
        progress.stop()
        return stopped.report, str(stopped)
    return report, None


def _plot_suite(args: argparse.Namespace, report: BatchReport) -> None:
    from ..present.viz import plot_suite

    _warn_if_unmeasured(report)
    for picture in plot_suite(report, args.plot_dir, per_problem=args.per_problem):
        print_note(f"wrote {picture}")


def _said_where_it_wrote(out: str | None, interrupted: str | None, signals: Any) -> bool:
    """The closing lines of a batch: where ``--out`` went and, for an ``interrupted`` batch,
    that the report covers the problems finished; True when it was interrupted, before the
    report was written or while (``signals``: the :class:`~..suites.batch.StopSignals` taken)."""
    if out:
        print_note(f"wrote {out}")
    if interrupted:
        print_error(f"{interrupted}; the report covers the problems finished")
    elif signals.received:
        print_error("interrupted after the batch finished; the report is whole")
    return bool(interrupted or signals.received)



def _run_and_problems(folder: str, paths: list[Path], where: Sequence[str]) -> tuple[Any, list]:
    """The run in ``folder`` and the problem files among ``paths`` it has samples for."""
    from ..suites.kernelbench import level_of, run_problems
    from ..suites.runs import load_run

    levels = {level_of(path) for path in paths}
    run = load_run(folder, level=levels.pop() if len(levels) == 1 else None)
    matched = run_problems(paths, run)
    if not matched:
        wanted = sorted({(s.level, s.problem_id) for s in run.samples}, key=str)
        named = ", ".join(f"level {level} problem {number}" for level, number in wanted[:6])
        raise UsageError(
            f"the run {folder} has samples for {named or 'no problem'}, and none of the "
            f"{len(paths)} problem files under {' '.join(where)} is one of them; pass the "
            "run's level folder (KernelBench/levelN)"
        )
    return run, matched



def _report_run(args: argparse.Namespace, run: Any, report: BatchReport,
                interrupted: str | None, signals: Any) -> int:
    """The run report (``--run``) in place of the suite report: printed, written, pictured;
    marked partial when the batch was ``interrupted``."""
    from ..suites.batch_report import mark_partial
    from ..suites.runs import RUN_WRITERS, join_run

    joined = join_run(run, report)

    def text(suffix: str) -> str:
        body = RUN_WRITERS[suffix](joined)
        return mark_partial(body, suffix, interrupted) if interrupted else body

    if args.out:
        Path(args.out).write_text(text(Path(args.out).suffix.lower()), encoding="utf-8")
    if args.json or not args.out:
        print(text(".json" if args.json else ".md"), end="")
    totals = joined.summary["all"]
    print_note(
        f"run {run.path}: {totals['samples']} samples, {totals['correct']} correct, "
        f"{totals['faster_than_light']} faster than light, {totals['shortcut_only']} possible "
        f"only with an algebraic shortcut, {len(joined.unmatched)} without an analyzed problem"
    )
    stopped = _said_where_it_wrote(args.out, interrupted, signals)
    if args.plot_dir and (interrupted or not stopped):
        # of the samples whose problems finished, when interrupted
        from ..present.viz import plot_run

        picture = Path(args.plot_dir) / "run_sol.png"
        picture.parent.mkdir(exist_ok=True)  # its own folder checked: check_outputs
        plot_run(joined, picture)
        print_note(f"wrote {picture}")
    if stopped:
        return EXIT_INTERRUPTED
    for sample in joined.faster_than_light:
        faster_than_light(
            sample.name, sample.sample.runtime_ms, min(sample.sol_by_math_ms.values())
        )
    return exit_code(report.failed, len(joined.faster_than_light))



def _check_suffix(path: str) -> None:
    if Path(path).suffix.lower() not in (".md", ".csv", ".json", ".html"):
        raise UsageError(f"--out must end in .md, .csv, .json or .html, got '{path}'")



def _warn_if_unmeasured(report: BatchReport) -> None:
    from ..present.viz import problem_points

    if report.problems and not problem_points(report):
        print_note(
            "no analyzed problem has a measured time, so the suite scatter and histogram are "
            "empty; pass --timings (KernelBench's baseline_time_torch.json)"
        )



#: A JSON file ``plot`` does not draw, known by a key only it holds → what it is and the
#: command that draws it.
OTHER_JSON: dict[str, str] = {
    "traceEvents": "a torch.profiler trace; draw it with 'torchroofline trace FILE --plot "
    "out.png'",
    "ops": "a 'torchroofline trace' report; draw its trace with 'torchroofline trace TRACE "
    "--plot out.png'",
    "time_ms": "one 'torchroofline analyze --json' result; draw it with 'torchroofline analyze "
    "FILE --plot out.png'",
    "sweep": "a 'torchroofline sweep' report; draw it with 'torchroofline sweep FILE ... --plot "
    "out.png'",
    # it holds "problems" too: drawn as a suite, it read "no analyzed problem has a measured
    # time ... pass --timings" of a report made of measured times
    "host_scale": "a 'torchroofline validate' report; draw it with 'torchroofline validate "
    "PATH... --eager TIMES.json --plot out.png'",
}


#: What ``plot`` draws, as the fix its errors name.
PLOTTED = "pass the JSON 'torchroofline kernelbench PATH --out report.json' wrote"


def _drawn_elsewhere(data: object) -> str:
    """"; it is ... draw it with ..." where ``data`` is a JSON another command draws."""
    found = next((what for key, what in OTHER_JSON.items()
                  if isinstance(data, dict) and key in data), None)
    return f" (it is {found})" if found else ""


def cmd_plot(args: argparse.Namespace) -> int:
    from ..present.viz import plot_suite
    from ..suites.batch_report import BatchReport

    check_exists([args.report])
    check_outputs({}, {"--out": args.out})
    try:
        data = json.loads(Path(args.report).read_text())
    except (OSError, ValueError) as error:
        raise UsageError(f"{args.report}: not a readable report JSON ({error}); {PLOTTED}"
                         ) from None
    if not isinstance(data, dict) or "problems" not in data or _drawn_elsewhere(data):
        raise UsageError(f"{args.report}: not a 'torchroofline kernelbench' JSON report"
                         + (_drawn_elsewhere(data) or f"; {PLOTTED}"))
    report = BatchReport.from_dict(data)
    _warn_if_unmeasured(report)
    for path in plot_suite(report, args.out, per_problem=args.per_problem):
        print(path)
    if "samples" in data:  # a 'kernelbench --run' report
        from ..present.viz import plot_run
        from ..suites.runs import RunReport

        picture = Path(args.out) / "run_sol.png"
        plot_run(RunReport.from_dict(data), picture)
        print(picture)
    return EXIT_OK



def cmd_validate(args: argparse.Namespace) -> int:
    """0; 1 when a problem failed to analyze; 3 when a measured time beats the speed of light
    (as every command's exit codes say); 130 when interrupted."""
    from ..suites.batch import Progress, stop_signals
    from ..suites.kernelbench import discover
    from ..suites.validate import impossible_count, run

    check_outputs({"--out": args.out, "--plot": args.plot})
    check_exists(args.paths)
    levels = levels_option(args.level)
    progress = Progress(len(discover(args.paths, levels)), debug=args.debug)
    with stop_signals() as signals:
        report = run(args, levels, progress, print_note)
    if report.get("partial") or signals.received:  # a late one: the report was written whole
        return EXIT_INTERRUPTED
    if report["failed"]:
        return EXIT_FAILED
    return EXIT_FASTER_THAN_LIGHT if impossible_count(report) else EXIT_OK

