"""The ``torchroofline`` command line (also ``python -m torchroofline``).

Exit codes: 0 success, 1 some problems failed to analyze (reports are still written),
2 bad usage (unknown GPU or precision, unreadable timings, bad arguments), 3 a generated
kernel's time, or a profiled op's in ``trace``, beats the speed of light (faster than light: a
timing bug or a kernel that skips work; the reports are still written, and failed problems' 1
takes precedence).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import (
    ClockError,
    InputError,
    PrecisionError,
    TorchrooflineError,
    UnknownGPUError,
)

if TYPE_CHECKING:
    from .plan.memory import BatchFit
    from .price.roofline import Result
    from .suites.batch_report import BatchReport

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_FASTER_THAN_LIGHT = 3  #: a generated kernel's (or a traced op's) time beats the SoL
EXIT_INTERRUPTED = 130  #: 128 + SIGINT, the shell's code for a command stopped by Ctrl-C
#: Errors that mean the command itself was wrong, not one problem.
_USAGE_ERRORS = (UnknownGPUError, PrecisionError, ClockError, InputError)


class _UsageError(Exception):
    """Bad arguments found after parsing."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default where there is one to show (not None/False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:  # identity: 0 is a default
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """The top-level parser: an unknown option gets the closest known one of its command
    (``--precison``: did you mean ``--precision``?)."""

    commands: dict[str, argparse.ArgumentParser] = {}

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self.commands.get(getattr(parsed, "command", None) or "", self)
            command.error(_unrecognized(command, unknown))
        return parsed


def _unrecognized(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """The unknown options, each with the closest known one (the values after an unknown
    option are left unknown too: naming the option says it all)."""
    known = [option for action in parser._actions for option in action.option_strings]
    options = [argument for argument in unknown if argument.startswith("-")] or unknown
    lines = []
    for argument in options:
        close = difflib.get_close_matches(argument.split("=")[0], known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"unrecognized argument {argument}{hint}")
    return "; ".join(lines)


def _debug_flag(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show tracebacks on errors"
    )


def _command(commands: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand that shows defaults in --help and takes --debug after its name too."""
    parser = commands.add_parser(name, formatter_class=_HelpFormatter, **kwargs)
    # SUPPRESS: without --debug here, the subparser leaves the top-level value alone
    _debug_flag(parser, argparse.SUPPRESS)
    return parser


#: What ``--cache`` means, the same for every command. KernelBench's timing code today flushes
#: L2 before every timed trial (``clear_l2_cache`` in src/kernelbench/timing.py, called by
#: ``time_execution_with_cuda_event``); its published baseline times and our calibration set
#: were taken without a flush.
CACHE_HELP = (
    "cold: L2 flushed before every timed trial (today's KernelBench timing, clear_l2_cache in "
    "src/kernelbench/timing.py); warm: no flush, data may stay in L2 (KernelBench's published "
    "baseline times and torchroofline's calibration timings)"
)


def _math_option(parser: argparse.ArgumentParser) -> None:
    """``--math``, for the commands that judge times against the bound (not ``validate``: it
    checks the program's own bound against PyTorch's times)."""
    parser.add_argument(
        "--math", default="program",
        help="the math the speed of light assumes: program (the program's own precision) or "
        "a lower one the benchmark's tolerance admits: tf32, bf16, fp16, fp8, fp4 (an fp32 check "
        "at 1e-2 admits tf32); every rung's bound is in the JSON's time_ms.sol_by_math",
    )


def _data_option(parser: argparse.ArgumentParser) -> None:
    """``--data`` and ``--data-limit``: the bound for any input values or the given ones."""
    parser.add_argument(
        "--data", choices=("any", "given"), default=None,
        help="the bound for any input values, or for the values get_inputs() makes under "
        "KernelBench's seed (a triangular input's zero half, the experts the tokens are routed "
        "to); default: given when the inputs fit in --data-limit",
    )
    parser.add_argument(
        "--data-limit", type=_positive, default=2.0, metavar="GIB",
        help="GiB of inputs and parameters a 'given' bound may make for real, a quarter of "
        "it per tensor; bigger ones are made as shapes only (default 2)",
    )


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", default="h100-sxm", help="target GPU (see 'torchroofline gpus')")
    parser.add_argument(
        "--precision",
        default="fp32",
        help="fp32 (what PyTorch runs by default), tf32, fp16, bf16 or fp8",
    )
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold", help=CACHE_HELP)
    parser.add_argument(
        "--host-scale", type=_positive, default=1.0, metavar="X",
        help="host (CPU) costs of the estimates times X: 0.5 = a host twice as fast as the "
        "default profile ('torchroofline validate' fits X from your timings)",
    )


def _clock_options(parser: argparse.ArgumentParser) -> None:
    """``--clock-mhz`` and ``--mem-clock-mhz``: the GPU's locked clocks (GPUSpec.at_clocks)."""
    parser.add_argument(
        "--clock-mhz", type=_positive, metavar="MHZ",
        help="SM clock locked at MHZ (nvidia-smi -lgc): compute peaks scale by MHZ over the "
        "clock the datasheet figures assume (default: boost; see 'torchroofline gpus')",
    )
    parser.add_argument(
        "--mem-clock-mhz", type=_positive, metavar="MHZ",
        help="memory clock locked at MHZ (nvidia-smi -lmc): bandwidth scales by MHZ over the "
        "nominal memory clock",
    )


def _positive(text: str) -> float:
    """An argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"takes a number above 0, got '{text}'")
    return value


def _times(text: str) -> list[float]:
    """An argparse type: one time in ms or several separated by commas (``2.66,0.41``)."""
    return [_positive(part) for part in text.split(",")]


def estimate_params(host_scale: float) -> Any:
    """The performance model's constants for ``--host-scale``; None (the fitted ones) at 1."""
    from .price.estimate import DEFAULT_PARAMS

    return None if host_scale == 1 else DEFAULT_PARAMS.host_scaled(host_scale)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="torchroofline",
        description="Speed-of-light bounds for PyTorch programs on a chosen GPU, no GPU needed.",
        epilog="exit codes: 0 success, 1 some problems failed (reports are still written), 2 bad "
        "usage, 3 a generated kernel's or a traced op's time beats the speed of light (faster "
        "than light: a timing bug or a kernel that skips work)",
        formatter_class=_HelpFormatter,
    )
    _debug_flag(parser, False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = commands.choices

    analyze = _command(
        commands,
        "analyze", help="report on KernelBench-format problem files", description=(
            "Analyze problem files (class Model, get_inputs, get_init_inputs) or SOL-ExecBench "
            "problem directories (definition.json, workload.jsonl, reference.py: one result per "
            "workload). The files are Python code and are executed."
        )
    )
    analyze.add_argument("files", nargs="+", metavar="FILE|DIR")
    _common(analyze)
    _clock_options(analyze)
    _math_option(analyze)
    _data_option(analyze)
    analyze.add_argument(
        # one value per option (not nargs="+", which would swallow the FILE after it)
        "--actual-ms", type=_times, action="extend", metavar="MS[,MS...]",
        help="measured time(s) in ms: one for all files or one per file (comma-separated or "
        "the option repeated)",
    )
    analyze.add_argument(
        "--baseline-ms", type=_times, action="extend", metavar="MS[,MS...]",
        help="a baseline's time(s) in ms, as --actual-ms: with --actual-ms, the SOL-ExecBench "
        "score 1/(1 + (actual - SoL)/(baseline - SoL)) (1 at the speed of light, 0.5 at the "
        "baseline)",
    )
    analyze.add_argument(
        "--gen-ms", type=float, metavar="MS",
        help="a generated kernel's time; below the speed of light it warns and exits 3",
    )
    analyze.add_argument("--class", dest="class_name", default="Model", help="model class name")
    analyze.add_argument(
        "--ref", metavar="REF.py",
        help="the reference problem a generated FILE computes (default: found by KernelBench "
        "naming); a generated file is read, never imported, compiled or run",
    )
    analyze.add_argument(
        "--problems", metavar="DIR",
        help="where to look for a generated file's reference (KernelBench/ or a level folder; "
        "default: the folders around the file)",
    )
    analyze.add_argument("--top", type=int, default=5, help="kernels listed")
    analyze.add_argument(
        "--format", choices=("text", "json", "prompt"), default="text",
        help="text report, JSON, or a compact block for an LLM prompt",
    )
    analyze.add_argument("--json", action="store_const", const="json", dest="format",
                         help="same as --format json")
    analyze.add_argument("--plot", metavar="PNG|SVG", help="save a roofline picture")
    analyze.add_argument(
        "--train", action="store_true",
        help="analyse one training step: forward, backward (a gradient of ones seeded on the "
        "output) and an optimizer step",
    )
    analyze.add_argument(
        "--optimizer", choices=("adamw", "adam", "sgd", "adafactor", "none"), default="adamw",
        help="the optimizer of --train (PyTorch's foreach kernels; none: no step)",
    )
    analyze.add_argument(
        "--autocast", choices=("bf16", "fp16"),
        help="the forward under torch.autocast (mixed precision), in inference or with --train",
    )
    analyze.add_argument(
        "--checkpoint", action="append", metavar="PATTERN", default=[],
        help="with --train: price activation checkpointing of the modules whose paths match "
        "(fnmatch, e.g. 'blocks.*'; repeatable)",
    )
    analyze.add_argument(
        "--max-batch", action="store_true",
        help="also find the largest batch (dimension --batch-dim of the inputs) whose eager peak "
        "memory fits the GPU, by re-tracing a few batch sizes",
    )
    analyze.add_argument(
        "--batch-dim", type=int, default=0, metavar="DIM",
        help="the inputs' batch dimension, which --max-batch resizes",
    )

    gpus = _command(commands, "gpus", help="list the GPU table and its key peaks")
    gpus.add_argument("--json", action="store_true", help="JSON instead of a table")

    suite = _command(
        commands,
        "kernelbench",
        help="analyze a KernelBench suite, level folder or files (and SOL-ExecBench problem "
        "directories, one row per workload) in workers",
        description="Every problem runs in a worker process with a timeout and a memory limit.",
    )
    suite.add_argument("paths", nargs="+", metavar="PATH")
    _common(suite)
    _clock_options(suite)
    _math_option(suite)
    _data_option(suite)
    suite.add_argument("--timings", metavar="JSON", help="reference times (KernelBench format)")
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
    suite.add_argument("-j", "--jobs", type=int, default=1, help="worker processes")
    suite.add_argument("--timeout", type=float, default=60.0, help="seconds per problem")
    suite.add_argument(
        "--memory-limit", type=float, default=6.0, metavar="GIB", help="GiB per worker"
    )
    suite.add_argument("--out", metavar="FILE", help="report.md, report.csv or report.json")
    suite.add_argument("--json", action="store_true", help="print the JSON report")
    suite.add_argument("--plot-dir", metavar="DIR", help="write the suite pictures here")
    suite.add_argument("--per-problem", action="store_true", help="also one roofline each")

    plot = _command(commands, "plot", help="pictures from a saved kernelbench report.json")
    plot.add_argument("report", metavar="REPORT.json")
    plot.add_argument("--out", required=True, metavar="DIR", help="folder for the pictures")
    plot.add_argument("--per-problem", action="store_true", help="also one roofline each")

    from .suites.validate import add_arguments as validate_arguments

    validate = _command(
        commands, "validate", help="check bounds and estimates against measured times",
        description="Set the speed of light and each estimate against KernelBench-format timing "
        "JSONs (one per mode), and fit the host scale of your machine. Exits 1 if a measured "
        "time beats the speed of light.",
    )
    validate_arguments(validate)
    _common(validate)

    from .suites.kineto import add_arguments as trace_arguments

    trace = _command(
        commands, "trace", help="price each op of a torch.profiler trace against its bound",
        description="Join every kernel of a torch.profiler (Kineto) trace recorded with "
        "record_shapes=True to the aten op that launched it, rebuild each op on fake tensors and "
        "set its measured time against its speed of light on the trace's GPU; two traces are "
        "compared op kind by op kind.",
    )
    trace_arguments(trace)
    return parser


def _target_gpu(args: argparse.Namespace) -> Any:
    """The GPU ``--gpu`` names, checked with ``--precision`` and ``--math`` before any work; a
    short name that several parts share (``a100``) gets a one-line note saying which it picks."""
    from .price.hardware import choice_note, get_gpu
    from .price.precision import check_math, check_precision

    gpu = get_gpu(args.gpu).at_clocks(
        getattr(args, "clock_mhz", None), getattr(args, "mem_clock_mhz", None)
    )
    check_precision(args.precision)
    if hasattr(args, "math"):
        args.math = check_math(args.math)
    note = choice_note(args.gpu)
    if note:
        _note(note)
    return gpu


# --- analyze -------------------------------------------------------------------------------


def _actual_times(files: Sequence[str], actual: Sequence[float] | None,
                  option: str = "--actual-ms", what: str = "file") -> list[float | None]:
    if not actual:
        return [None] * len(files)
    if len(actual) == 1:
        return list(actual) * len(files)
    if len(actual) != len(files):
        raise _UsageError(f"{option} takes one time or one per {what} ({len(files)} {what}s)")
    return list(actual)


def _plot_path(base: str, file: str, many: bool) -> str:
    if not many:
        return base
    path = Path(base)
    return str(path.with_name(f"{path.stem}_{Path(file).stem}{path.suffix}"))


def _training_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """analyze()'s training-step keywords from --train and its options (--autocast alone:
    an inference forward under autocast)."""
    if not args.train:
        if args.checkpoint:
            raise _UsageError("--checkpoint is a training what-if; add --train")
        return {"autocast": args.autocast} if args.autocast else None
    return {"mode": "train", "optimizer": args.optimizer, "autocast": args.autocast,
            "checkpoint": args.checkpoint}


def cmd_analyze(args: argparse.Namespace) -> int:
    from .suites.kernelbench import compare_kernelbench, reference_for
    from .suites.solexecbench import is_problem_dir

    gpu = _target_gpu(args)
    for file in args.files:
        if not is_problem_dir(file):
            _check_problem_path(Path(file))
    if args.plot:  # before any analysis: a picture it cannot save
        from .present.viz.canvas import save_target

        save_target(args.plot)
    problem_dirs = [file for file in args.files if is_problem_dir(file)]
    # a lone SOL-ExecBench directory takes one time per workload
    lone_dir = problem_dirs == args.files and len(problem_dirs) == 1
    times = [args.actual_ms] if lone_dir else _actual_times(args.files, args.actual_ms)
    baselines = (
        [args.baseline_ms] if lone_dir
        else _actual_times(args.files, args.baseline_ms, "--baseline-ms")
    )
    params = estimate_params(args.host_scale)
    documents: list[dict[str, Any]] = []
    failed = too_fast = 0
    for file, actual_ms, baseline_ms in zip(args.files, times, baselines, strict=True):
        if file in problem_dirs:
            failed += _analyze_problem_dir(file, gpu, args, actual_ms, baseline_ms, documents)
            continue
        try:
            reference = reference_for(
                file, ref=args.ref, problems=args.problems, class_name=args.class_name
            )
            result, batch_fit = _analyzed(reference or file, gpu, args, actual_ms)
            if reference is not None:
                result = result.with_notes([_as_reference(file, reference)])
            if params is not None:
                result = result.on(gpu, estimate_params=params).with_actual(actual_ms)
                result = result.with_notes([_host_scale_note(args.host_scale)])
        except _USAGE_ERRORS:
            raise
        except (TorchrooflineError, SystemExit) as caught:
            error = _as_error(file, caught)
            failed += 1
            documents.append({"file": file, "error": str(error)})
            _report(error, args.debug)
            continue
        comparison = compare_kernelbench(result, actual_ms, args.gen_ms) if args.gen_ms else None
        if comparison is not None and comparison.gen.impossible:
            too_fast += 1
            _faster_than_light(file, comparison.gen.ms, min(result.sol_by_math_s.values()) * 1e3)
        document = result.to_dict()
        if comparison is not None:
            document["comparison"] = comparison.to_dict()
        if batch_fit is not None:
            document["max_batch"] = _batch_fit_dict(batch_fit)
        documents.append(document)
        if args.format == "text":
            result.print(top=args.top)
            if comparison is not None:
                print(comparison.format())
            if batch_fit is not None and not isinstance(batch_fit, InputError):
                from .present.report import batch_fit_line

                print(batch_fit_line(batch_fit))
        if isinstance(batch_fit, InputError):  # the analysis stands; the search failed
            failed += 1
            _error(f"{file}: --max-batch: {batch_fit}")
        elif args.format == "prompt":
            from .present.report import format_prompt

            print(format_prompt(result, gen_ms=args.gen_ms))
        _scored(document, result, actual_ms, baseline_ms, args.format)
        if args.plot:
            picture = _plot_path(args.plot, file, len(args.files) > 1)
            result.plot(picture, top=max(args.top, 1))
            _note(f"wrote {picture}")
    if args.format == "json":
        one = len(documents) == 1 and not problem_dirs
        print(json.dumps(documents[0] if one else documents, indent=2))
    return _exit_code(failed, too_fast)


def _check_problem_path(path: Path) -> None:
    """A missing file or a folder, refused before any analysis with the command to run."""
    from .suites.kernelbench import problems_for_run
    from .suites.runs import EVAL_RESULTS

    if (path / EVAL_RESULTS).is_file():
        raise _UsageError(
            f"{path} is a KernelBench run folder; to set its samples against the speed of light "
            f"run: torchroofline kernelbench {problems_for_run(path)} --run {path}"
        )
    if path.is_dir():
        raise _UsageError(
            f"{path} is a folder; to analyze every problem in it run: "
            f"torchroofline kernelbench {path}"
        )
    if not path.exists():
        raise _UsageError(f"{path}: no such file; check the path")


def _as_error(file: str, caught: BaseException) -> TorchrooflineError:
    """The error to report for a problem: ours as it is; a ``sys.exit()`` the file's own code
    called (its exit code would pass for ours: 3 is "faster than light") as one."""
    if isinstance(caught, TorchrooflineError):
        return caught
    from .suites.kernelbench import code_failed

    error = code_failed(file, "running its code", caught)
    error.__cause__ = caught
    return error


def _batch_fit_dict(batch_fit: BatchFit | InputError) -> dict[str, Any]:
    return {"error": str(batch_fit)} if isinstance(batch_fit, InputError) else batch_fit.to_dict()


def _scored(document: dict[str, Any], result: Result, actual_ms: float | None,
            baseline_ms: float | None, form: str) -> dict[str, Any]:
    """``document`` with the SOL-ExecBench score (:func:`.suites.solexecbench.with_sol_score`),
    its line printed for the text format."""
    from .suites.solexecbench import with_sol_score

    line = with_sol_score(document, result, actual_ms, baseline_ms)
    if line and form == "text":
        print(line)
    return document


def _analyze_problem_dir(
    folder: str, gpu: Any, args: argparse.Namespace, actual: Sequence[float] | float | None,
    baseline: Sequence[float] | float | None, documents: list[dict[str, Any]],
) -> int:
    """Every workload of a SOL-ExecBench directory analysed, its documents appended to
    ``documents`` and printed in ``args.format``; the count that failed. ``actual`` and
    ``baseline``: one time for all workloads or a list of one per workload."""
    from .price.precision import restoring_switches

    if args.train or args.max_batch or args.ref or args.gen_ms:
        raise _UsageError("--train, --max-batch, --ref and --gen-ms are for KernelBench files; "
                          f"{folder} is a SOL-ExecBench directory")
    with restoring_switches():  # the TF32 switches the reference sets stay its own
        return _analyze_workloads(folder, gpu, args, actual, baseline, documents)


def _analyze_workloads(
    folder: str, gpu: Any, args: argparse.Namespace, actual: Sequence[float] | float | None,
    baseline: Sequence[float] | float | None, documents: list[dict[str, Any]],
) -> int:
    """:func:`_analyze_problem_dir`'s work, under its switches."""
    from .suites.solexecbench import analyze_workload, load_definition, load_workloads

    try:
        definition, workloads = load_definition(folder), load_workloads(folder)
    except TorchrooflineError as error:
        documents.append({"file": folder, "error": str(error)})
        _report(error, args.debug)
        return 1
    labels = [workload.uuid for workload in workloads]

    def per_workload(times: Any, option: str) -> list[float | None]:
        listed = times if isinstance(times, list) or times is None else [times]
        return _actual_times(labels, listed, option, "workload")

    failed = 0
    for workload, actual_ms, baseline_ms in zip(
        workloads, per_workload(actual, "--actual-ms"), per_workload(baseline, "--baseline-ms"),
        strict=True,
    ):
        try:
            result = analyze_workload(
                definition, workload, gpu, args.precision, actual_ms=actual_ms,
                cache=args.cache, math=args.math, data=args.data,
                data_limit_bytes=int(args.data_limit * 2**30),
            )
            params = estimate_params(args.host_scale)
            if params is not None:
                result = result.on(gpu, estimate_params=params).with_actual(actual_ms)
        except _USAGE_ERRORS:
            raise
        except TorchrooflineError as error:
            failed += 1
            documents.append({"file": folder, "workload": workload.uuid, "error": str(error)})
            _report(error, args.debug)
            continue
        if args.format == "text":
            result.print(top=args.top)
        elif args.format == "prompt":
            from .present.report import format_prompt

            print(format_prompt(result))
        document = {"file": folder, "workload": workload.uuid, "axes": dict(workload.axes),
                    **result.to_dict()}
        documents.append(_scored(document, result, actual_ms, baseline_ms, args.format))
        if args.plot:
            picture = _plot_path(args.plot, f"{Path(folder).name}_{workload.uuid}", True)
            result.plot(picture, top=max(args.top, 1))
            _note(f"wrote {picture}")
    return failed


def _analyzed(
    file: str | Path, gpu: Any, args: argparse.Namespace, actual_ms: float | None
) -> tuple[Result, BatchFit | InputError | None]:
    """``file`` analyzed and, with ``--max-batch``, the largest batch of the same built model
    that fits ``gpu`` (or why there is none: an input error that leaves the analysis standing);
    the TF32 switches the file sets at import hold for both, and only them."""
    from .api import max_batch
    from .price.precision import restoring_switches
    from .suites.kernelbench import analyze_file, load_and_build

    with restoring_switches():
        built = load_and_build(file, class_name=args.class_name)
        result = analyze_file(
            file, gpu, args.precision, actual_ms=actual_ms, cache=args.cache,
            class_name=args.class_name, math=args.math, data=args.data,
            data_limit_bytes=int(args.data_limit * 2**30), training=_training_options(args),
            built=built,
        )
        if not args.max_batch:
            return result, None
        training = {"mode": "train", "optimizer": args.optimizer} if args.train else {}
        try:
            return result, max_batch(
                built.model, built.inputs, gpu, args.precision, batch_dim=args.batch_dim,
                **training,
            )
        except InputError as error:
            return result, error


def _host_scale_note(host_scale: float) -> str:
    return f"estimates with every host (CPU) cost × {host_scale:g} of the default (--host-scale)"


def _as_reference(file: str, reference: Path) -> str:
    note = f"{file} is a generated kernel: analyzed as its reference {reference} (read, never run)"
    _note(note)
    return note


def _faster_than_light(what: str, time_ms: float, lowest_sol_ms: float) -> None:
    """The warning for a generated kernel's time below the speed of light of every math rung
    (``lowest_sol_ms``, ms: the lowest rung's)."""
    print(
        f"torchroofline: warning: {what}: the generated kernel's {time_ms:.4g} ms is below the "
        f"{lowest_sol_ms:.4g} ms speed of light of the lowest-precision math: faster than light "
        f"(a timing bug or a kernel that skips work); exit code {EXIT_FASTER_THAN_LIGHT}",
        file=sys.stderr,
    )


def _exit_code(failed: int, faster_than_light: int) -> int:
    """Failed problems first (1), then generated times that beat the speed of light (3)."""
    if failed:
        return EXIT_FAILED
    return EXIT_FASTER_THAN_LIGHT if faster_than_light else EXIT_OK


# --- gpus ----------------------------------------------------------------------------------


def _tflops(spec: Any, key: str, tensor: bool) -> str:
    peaks = spec.tensor_peak_flops_per_s if tensor else spec.vector_peak_flops_per_s
    if key not in peaks:
        return "—"
    mark = "?" if f"{'tensor' if tensor else 'vector'}.{key}" in spec.unconfirmed else ""
    return f"{peaks[key] / 1e12:.1f}{mark}"


GPU_COLUMNS: dict[str, Callable[[Any], str]] = {
    "key": lambda g: g.key,
    "name": lambda g: g.name,
    "mem GB": lambda g: f"{g.memory_bytes / 1e9:.0f}",
    "HBM GB/s": lambda g: f"{g.memory_bandwidth_bytes_per_s / 1e9:.0f}"
    + ("?" if "memory_bandwidth_bytes_per_s" in g.unconfirmed else ""),
    "L2 MB": lambda g: f"{g.l2_bytes / 2**20:.0f}" + ("?" if "l2_bytes" in g.unconfirmed else ""),
    "FP32": lambda g: _tflops(g, "fp32", False),
    "FP16 vec": lambda g: _tflops(g, "fp16", False),
    "TF32": lambda g: _tflops(g, "tf32", True),
    "FP16": lambda g: _tflops(g, "fp16", True),
    "BF16": lambda g: _tflops(g, "bf16", True),
    "FP8": lambda g: _tflops(g, "fp8", True),
    "FP6": lambda g: _tflops(g, "fp6", True),
    "FP4": lambda g: _tflops(g, "fp4", True),
    "boost MHz": lambda g: "—"
    if g.boost_clock_mhz is None
    else f"{g.boost_clock_mhz:g}" + ("?" if "boost_clock_mhz" in g.unconfirmed else ""),
}


def cmd_gpus(args: argparse.Namespace) -> int:
    from .price.hardware import list_gpus

    specs = list_gpus()
    if args.json:
        print(json.dumps([spec.to_dict() for spec in specs], indent=2))
        return EXIT_OK
    rows = [[read(spec) for read in GPU_COLUMNS.values()] for spec in specs]
    headers = list(GPU_COLUMNS)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(
        "Dense peaks in TFLOP/s (no sparsity); FP32 and FP16 vec on the CUDA cores / vector ALUs "
        "(FP16 vec: packed half2; '—': priced at FP32), the rest on tensor cores. '?' = not "
        "confirmed in two sources or derived; boost MHz: the clock --clock-mhz scales from "
        "('—': none published); sources: docs/gpu_sources.md."
    )
    return EXIT_OK


# --- kernelbench ---------------------------------------------------------------------------


def _levels(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise _UsageError(f"--level takes numbers like 1,2, got '{text}'") from None


def suite_text(report: BatchReport, suffix: str, interrupted: str | None = None) -> str:
    """The batch report as Markdown, CSV or JSON (``suffix``), marked partial when the batch was
    ``interrupted`` (the interruption's one line)."""
    from .present.report import suite_csv, suite_markdown
    from .suites.batch_report import mark_partial

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
    from .suites.kernelbench import discover, level_of

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
    from .present.report import suite_summary_line
    from .suites.batch import BatchInterrupted, Progress, analyze_batch, task_count
    from .suites.kernelbench import load_timings
    from .suites.solexecbench import discover_problems

    gpu = _target_gpu(args)
    if args.out:
        _check_suffix(args.out)
    timings = load_timings(args.timings) if args.timings else None
    gen_timings = load_timings(args.gen_timings) if args.gen_timings else None
    levels = _levels(args.level)
    paths = discover_problems(args.paths, levels)
    if not paths:
        raise _UsageError(_nothing_to_run(args.paths, levels))
    run = None
    if args.run:
        run, paths = _run_and_problems(args.run, paths, args.paths)
    interrupted = None
    progress = Progress(task_count(paths), debug=args.debug)
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
        report, interrupted = stopped.report, str(stopped)
    if run is not None:
        return _report_run(args, run, report, interrupted)
    if args.out:
        write_report(report, args.out, interrupted)
    if args.json:
        print(suite_text(report, ".json", interrupted), end="")
    elif not args.out:
        print(suite_text(report, ".md", interrupted))
    _note(suite_summary_line(report))
    stopped = _said_where_it_wrote(args.out, interrupted)
    if args.plot_dir:  # of the problems finished, when interrupted
        from .present.viz import plot_suite

        _warn_if_unmeasured(report)
        for picture in plot_suite(report, args.plot_dir, per_problem=args.per_problem):
            _note(f"wrote {picture}")
    if stopped:
        return EXIT_INTERRUPTED
    for problem in report.problems:
        if problem.gen_impossible:
            _faster_than_light(problem.name, problem.gen_ms, min(problem.sol_by_math_ms.values()))
    return _exit_code(report.failed, sum(p.gen_impossible for p in report.problems))


def _said_where_it_wrote(out: str | None, interrupted: str | None) -> bool:
    """The closing lines of a batch: where ``--out`` went and, for an ``interrupted`` batch,
    that the report covers the problems finished; True when it was interrupted."""
    if out:
        _note(f"wrote {out}")
    if interrupted:
        _error(f"{interrupted}; the report covers the problems finished")
    return bool(interrupted)


def _run_and_problems(folder: str, paths: list[Path], where: Sequence[str]) -> tuple[Any, list]:
    """The run in ``folder`` and the problem files among ``paths`` it has samples for."""
    from .suites.kernelbench import level_of, run_problems
    from .suites.runs import load_run

    levels = {level_of(path) for path in paths}
    run = load_run(folder, level=levels.pop() if len(levels) == 1 else None)
    matched = run_problems(paths, run)
    if not matched:
        wanted = sorted({(s.level, s.problem_id) for s in run.samples}, key=str)
        named = ", ".join(f"level {level} problem {number}" for level, number in wanted[:6])
        raise _UsageError(
            f"the run {folder} has samples for {named or 'no problem'}, and none of the "
            f"{len(paths)} problem files under {' '.join(where)} is one of them; pass the "
            "run's level folder (KernelBench/levelN)"
        )
    return run, matched


def _report_run(
    args: argparse.Namespace, run: Any, report: BatchReport, interrupted: str | None
) -> int:
    """The run report (``--run``) in place of the suite report: printed, written, pictured;
    marked partial when the batch was ``interrupted``."""
    from .suites.batch_report import mark_partial
    from .suites.runs import RUN_WRITERS, join_run

    joined = join_run(run, report)

    def text(suffix: str) -> str:
        body = RUN_WRITERS[suffix](joined)
        return mark_partial(body, suffix, interrupted) if interrupted else body

    if args.out:
        Path(args.out).write_text(text(Path(args.out).suffix.lower()), encoding="utf-8")
    if args.json or not args.out:
        print(text(".json" if args.json else ".md"), end="")
    totals = joined.summary["all"]
    _note(
        f"run {run.path}: {totals['samples']} samples, {totals['correct']} correct, "
        f"{totals['faster_than_light']} faster than light, {totals['shortcut_only']} possible "
        f"only with an algebraic shortcut, {len(joined.unmatched)} without an analyzed problem"
    )
    stopped = _said_where_it_wrote(args.out, interrupted)
    if args.plot_dir:  # of the samples whose problems finished, when interrupted
        from .present.viz import plot_run

        picture = Path(args.plot_dir) / "run_sol.png"
        picture.parent.mkdir(parents=True, exist_ok=True)
        plot_run(joined, picture)
        _note(f"wrote {picture}")
    if stopped:
        return EXIT_INTERRUPTED
    for sample in joined.faster_than_light:
        _faster_than_light(
            sample.name, sample.sample.runtime_ms, min(sample.sol_by_math_ms.values())
        )
    return _exit_code(report.failed, len(joined.faster_than_light))


def _check_suffix(path: str) -> None:
    if Path(path).suffix.lower() not in (".md", ".csv", ".json"):
        raise _UsageError(f"--out must end in .md, .csv or .json, got '{path}'")


def _warn_if_unmeasured(report: BatchReport) -> None:
    from .present.viz import problem_points

    if report.problems and not problem_points(report):
        _note(
            "no analyzed problem has a measured time, so the suite scatter and histogram are "
            "empty; pass --timings (KernelBench's baseline_time_torch.json)"
        )


def cmd_plot(args: argparse.Namespace) -> int:
    from .present.viz import plot_suite
    from .suites.batch_report import BatchReport

    try:
        data = json.loads(Path(args.report).read_text())
    except (OSError, ValueError) as error:
        raise _UsageError(f"{args.report}: not a readable report JSON ({error})") from None
    if not isinstance(data, dict) or "problems" not in data:
        raise _UsageError(f"{args.report}: not a 'torchroofline kernelbench' JSON report")
    report = BatchReport.from_dict(data)
    _warn_if_unmeasured(report)
    for path in plot_suite(report, args.out, per_problem=args.per_problem):
        print(path)
    if "samples" in data:  # a 'kernelbench --run' report
        from .present.viz import plot_run
        from .suites.runs import RunReport

        picture = Path(args.out) / "run_sol.png"
        plot_run(RunReport.from_dict(data), picture)
        print(picture)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    """0; 1 when a problem failed to analyze; 3 when a measured time beats the speed of light
    (as every command's exit codes say); 130 when interrupted."""
    from .suites.batch import Progress
    from .suites.kernelbench import discover
    from .suites.validate import impossible_count, run

    levels = _levels(args.level)
    progress = Progress(len(discover(args.paths, levels)), debug=args.debug)
    report = run(args, levels, progress, _note)
    if report.get("partial"):
        return EXIT_INTERRUPTED
    if report["failed"]:
        return EXIT_FAILED
    return EXIT_FASTER_THAN_LIGHT if impossible_count(report) else EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    """One trace's report, or two side by side (``--plot``); 3 when an op beats its bound."""
    from .suites.kineto import run

    reports = run(args, _note)
    if args.plot:
        from .present.viz import plot_trace

        for report in reports:
            picture = _plot_path(args.plot, report.path, len(reports) > 1)
            plot_trace(report, picture)
            _note(f"wrote {picture}")
    return _exit_code(0, sum(len(report.faster_than_light) for report in reports))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "analyze": cmd_analyze,
    "gpus": cmd_gpus,
    "kernelbench": cmd_kernelbench,
    "plot": cmd_plot,
    "validate": cmd_validate,
    "trace": cmd_trace,
}


def _error(message: str) -> None:
    print(f"torchroofline: error: {message}", file=sys.stderr)


def _note(message: str) -> None:
    print(f"torchroofline: note: {message}", file=sys.stderr)


def _report(error: BaseException, debug: bool) -> None:
    """The error's one line; its traceback with ``--debug``, else a pointer to ``--debug`` when
    it wraps an exception from the model, the problem file or torch (its ``__cause__``)."""
    if debug:
        traceback.print_exception(error)
    hint = "; --debug shows the traceback" if error.__cause__ is not None and not debug else ""
    _error(f"{error}{hint}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (_UsageError, *_USAGE_ERRORS) as error:
        _report(error, args.debug)
        return EXIT_USAGE
    except TorchrooflineError as error:
        _report(error, args.debug)
        return EXIT_FAILED
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `torchroofline ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
