"""``torchroofline analyze``: problem files and SOL-ExecBench directories, one report each."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, TorchrooflineError
from .common import (
    EXIT_INTERRUPTED,
    USAGE_ERRORS,
    UsageError,
    actual_times,
    at_least_one,
    check_exists,
    check_outputs,
    clock_options,
    command,
    common_options,
    count,
    data_option,
    estimate_params,
    exit_code,
    faster_than_light,
    host_scale_note,
    json_or_format,
    math_option,
    plot_path,
    positive,
    print_error,
    print_note,
    report_error,
    target_gpu,
    times,
)

if TYPE_CHECKING:
    from ..plan.memory import BatchFit
    from ..price.roofline import Result


def register(commands: Any) -> None:
    """The ``analyze`` command's parser, added to ``commands``."""
    analyze = command(
        commands,
        "analyze", help="report on KernelBench-format problem files", description=(
            "Analyze problem files (class Model, get_inputs, get_init_inputs) or SOL-ExecBench "
            "problem directories (definition.json, workload.jsonl, reference.py: one result per "
            "workload). The files are Python code and are executed."
        )
    )
    analyze.add_argument("files", nargs="+", metavar="FILE|DIR")
    common_options(analyze)
    clock_options(analyze)
    math_option(analyze)
    data_option(analyze)
    analyze.add_argument(
        # one value per option (not nargs="+", which would swallow the FILE after it)
        "--actual-ms", type=times, action="extend", metavar="MS[,MS...]",
        help="measured time(s) in ms: one for all files or one per file (comma-separated or "
        "the option repeated); one below the speed of light warns and exits 3",
    )
    analyze.add_argument(
        "--baseline-ms", type=times, action="extend", metavar="MS[,MS...]",
        help="a baseline's time(s) in ms, as --actual-ms: with --actual-ms, the SOL-ExecBench "
        "score 1/(1 + (actual - SoL)/(baseline - SoL)) (1 at the speed of light, 0.5 at the "
        "baseline)",
    )
    analyze.add_argument(
        "--gen-ms", type=positive, metavar="MS",
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
    analyze.add_argument("--top", type=count, default=5, help="kernels listed")
    analyze.add_argument(
        "--format", choices=("text", "json", "prompt"),
        help="text report (the default), JSON, or a compact block for an LLM prompt",
    )
    analyze.add_argument("--json", action="store_true", help="same as --format json")
    analyze.add_argument("--plot", metavar="PNG|SVG", help="save a roofline picture")
    analyze.add_argument(
        "--train", action="store_true",
        help="analyse one training step: forward, backward (a gradient of ones seeded on the "
        "output) and an optimizer step",
    )
    analyze.add_argument(
        "--optimizer", choices=("adamw", "adam", "sgd", "adafactor", "none"),
        help="the optimizer of --train (PyTorch's foreach kernels; none: no step; default: "
        "adamw)",
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
        "--batch-dim", type=int, metavar="DIM",
        help="the inputs' batch dimension, which --max-batch resizes (default: 0)",
    )
    distributed = analyze.add_argument_group(
        "distributed job (docs/distributed.md): one rank traced on a fake process group")
    distributed.add_argument("--world", type=at_least_one, metavar="N", help="ranks in the job")
    distributed.add_argument(
        "--mesh", type=_mesh, metavar="DIM=N[,DIM=N...]",
        help="the device mesh, outermost dim first (default: dp=WORLD), e.g. dp=8,tp=8",
    )
    distributed.add_argument("--gpus-per-node", type=at_least_one, metavar="N",
                             help="GPUs per node (default: 8)")
    distributed.add_argument(
        "--parallel", choices=("ddp", "fsdp", "tp"),
        help="a preset for a plain model; without it the file's parallelize(model, mesh) "
        "shards the model",
    )
    distributed.add_argument(
        "--timeline", metavar="PNG|SVG",
        help="save the rank's compute and communication streams, exposed communication in red",
    )
    distributed.add_argument(
        "--tp-plan", type=_mesh_styles, metavar="PATH=STYLE[,...]",
        help="with --parallel tp: module path patterns and colwise/rowwise, e.g. "
        "'blocks.*.up=colwise,blocks.*.down=rowwise'",
    )
    analyze.set_defaults(handler=cmd_analyze)


def _pairs(text: str) -> list[tuple[str, str]]:
    pairs = [item.partition("=") for item in text.split(",") if item.strip()]
    if not pairs or any(not key.strip() or not sep for key, sep, _ in pairs):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE[,NAME=VALUE...], got '{text}'")
    keys = [key.strip() for key, _, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:  # a dict kept the last: "--mesh dp=2,dp=2" was the mesh {'dp': 2}
        raise argparse.ArgumentTypeError(f"'{twice[0]}' is named twice in '{text}'; name each "
                                         "once")
    return [(key, value.strip()) for key, (_, _, value) in zip(keys, pairs, strict=True)]


def _mesh(text: str) -> dict[str, int]:
    """``dp=8,tp=8`` → ``{"dp": 8, "tp": 8}``."""
    pairs = _pairs(text)
    if not all(value.isdigit() for _, value in pairs):
        raise argparse.ArgumentTypeError(f"mesh sizes must be integers, got '{text}'")
    return {key: int(value) for key, value in pairs}


def _mesh_styles(text: str) -> dict[str, str]:
    """``blocks.*.up=colwise,...`` → ``{"blocks.*.up": "colwise", ...}``."""
    return dict(_pairs(text))


def _distributed_options(args: argparse.Namespace, built: Any) -> dict[str, Any]:
    """analyze()'s distributed keywords from --world and its options; the problem file's own
    ``parallelize(model, mesh)`` where no --parallel preset is named (``built`` None: the
    options checked alone, before any file is read)."""
    if args.world is None:
        return {}
    options = {"world": args.world, "mesh": args.mesh, "gpus_per_node": args.gpus_per_node or 8,
               "parallel": args.parallel, "tp_plan": args.tp_plan}
    if args.parallel is None and built is not None:
        found = getattr(built.problem.get_inputs, "__globals__", {}).get("parallelize")
        if not callable(found):
            raise UsageError(
                f"{built.problem.path} defines no parallelize(model, mesh); define one or "
                "name a preset with --parallel ddp|fsdp|tp"
            )
        options["parallelize"] = found
    return options


#: An option that means something only beside another (its ``args`` name → the other's, and
#: what the other makes of it): given alone, it was silently ignored (``--optimizer sgd``
#: without --train priced inference, ``--gpus-per-node 4`` without --world one GPU) where
#: ``--checkpoint`` alone was refused.
COMPANIONS: dict[str, tuple[str, str]] = {
    "optimizer": ("train", "is a training what-if"),
    "checkpoint": ("train", "is a training what-if"),
    "baseline_ms": ("actual_ms", "scores a measured time against the baseline"),
    "batch_dim": ("max_batch", "is the dimension --max-batch resizes"),
    **{name: ("world", "describes a distributed job")
       for name in ("mesh", "parallel", "tp_plan", "timeline", "gpus_per_node")},
}


def _check_companions(args: argparse.Namespace) -> None:
    """Bad usage where an option of :data:`COMPANIONS` is given without the one it needs."""
    for name, (needed, meaning) in COMPANIONS.items():
        if getattr(args, name) not in (None, []) and getattr(args, needed) in (None, False):
            option, other = ("--" + n.replace("_", "-") for n in (name, needed))
            value = {"world": " N", "actual_ms": " MS"}.get(needed, "")
            raise UsageError(f"{option} {meaning}; add {other}{value}")


def _training_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """analyze()'s training-step keywords from --train and its options (--autocast alone:
    an inference forward under autocast)."""
    if not args.train:
        return {"autocast": args.autocast} if args.autocast else None
    return {"mode": "train", "optimizer": args.optimizer or "adamw", "autocast": args.autocast,
            "checkpoint": args.checkpoint}



def cmd_analyze(args: argparse.Namespace) -> int:
    from ..suites.batch import stop_signals
    from ..suites.solexecbench import is_problem_dir

    # every check that needs no analysis, then the GPU's note: an error is the one line
    args.format = json_or_format(args) or "text"
    check_exists([args.ref, args.problems])
    check_outputs({"--plot": args.plot, "--timeline": args.timeline})
    for file in args.files:
        if not is_problem_dir(file):
            _check_problem_path(Path(file))
    for picture in (args.plot, args.timeline):
        if picture:  # before any analysis: a picture it cannot save
            from ..present.viz.canvas import save_target

            save_target(picture)
    _check_companions(args)
    problem_dirs = [file for file in args.files if is_problem_dir(file)]
    # a lone SOL-ExecBench directory takes one time per workload
    lone_dir = problem_dirs == args.files and len(problem_dirs) == 1
    times = [args.actual_ms] if lone_dir else actual_times(args.files, args.actual_ms)
    baselines = (
        [args.baseline_ms] if lone_dir
        else actual_times(args.files, args.baseline_ms, "--baseline-ms")
    )
    gpu = target_gpu(args)
    params = estimate_params(args.host_scale)
    documents: list[dict[str, Any]] = []
    failed = too_fast = 0
    with stop_signals() as signals:
        for done, (file, actual_ms, baseline_ms) in enumerate(
            zip(args.files, times, baselines, strict=True)
        ):
            try:
                with signals.armed():
                    counts = _report_file(file, gpu, params, args, actual_ms, baseline_ms,
                                          problem_dirs, documents)
            except KeyboardInterrupt:
                documents += [{"file": file, "error": "not analyzed: interrupted"}
                              for file in args.files[done:]]
                _print_json(args, documents, problem_dirs)
                print_error(f"interrupted after {done} of {len(args.files)} files; the "
                            "report covers the files finished")
                return EXIT_INTERRUPTED
            failed, too_fast = failed + counts[0], too_fast + counts[1]
        _print_json(args, documents, problem_dirs)
    if signals.received:  # while the JSON was written: it is whole
        print_error("interrupted after every file was analyzed; the report is whole")
        return EXIT_INTERRUPTED
    return exit_code(failed, too_fast)


def _print_json(args: argparse.Namespace, documents: list[dict[str, Any]],
                problem_dirs: list[str]) -> None:
    """With ``--json``: one file's document, or the list of every file's (and workload's). On
    an interrupt the files not analyzed are error entries in it: the files finished are kept
    (their text reports and pictures are out already)."""
    if args.format == "json":
        one = len(args.files) == 1 and not problem_dirs
        print(json.dumps(documents[0] if one else documents, indent=2))


def _measured_too_fast(label: str, result: Result) -> bool:
    """Whether the measured time set on ``result`` is below every math rung, warned of in one
    line: it exits 3 as validate's and trace's do (it exited 0 beside "IMPOSSIBLE")."""
    if result.actual is None or not result.actual.verdict.impossible:
        return False
    faster_than_light(label, result.actual.ms, min(result.sol_by_math_s.values()) * 1e3,
                      "the measured")
    return True


def _report_file(file: str, gpu: Any, params: Any, args: argparse.Namespace,
                 actual_ms: float | None, baseline_ms: float | None, problem_dirs: list[str],
                 documents: list[dict[str, Any]]) -> tuple[int, int]:
    """One FILE (or SOL-ExecBench directory) analyzed, its report printed, its document
    appended to ``documents``: (failed, faster than light), the counts it adds."""
    from ..suites.kernelbench import compare_kernelbench, reference_for

    if file in problem_dirs:
        return _analyze_problem_dir(file, gpu, args, actual_ms, baseline_ms, documents)
    try:
        reference = reference_for(
            file, ref=args.ref, problems=args.problems, class_name=args.class_name
        )
        result, batch_fit = _analyzed(reference or file, gpu, args, actual_ms)
        if reference is not None:
            result = result.with_notes([_as_reference(file, reference)])
        if params is not None:
            result = result.on(gpu, estimate_params=params).with_actual(actual_ms)
            result = result.with_notes([host_scale_note(args.host_scale)])
    except USAGE_ERRORS:
        raise
    except (TorchrooflineError, SystemExit) as caught:
        error = _as_error(file, caught)
        documents.append({"file": file, "error": str(error)})
        report_error(error, args.debug)
        return 1, 0
    comparison = compare_kernelbench(result, actual_ms, args.gen_ms) if args.gen_ms else None
    measured = _measured_too_fast(file, result)
    too_fast = comparison is not None and comparison.gen.impossible
    if too_fast:
        faster_than_light(file, comparison.gen.ms, min(result.sol_by_math_s.values()) * 1e3)
    too_fast = too_fast or measured
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
            from ..present.report import batch_fit_line

            print(batch_fit_line(batch_fit))
    failed = isinstance(batch_fit, InputError)
    if failed:  # the analysis stands; the search failed
        print_error(f"{file}: --max-batch: {batch_fit}")
    elif args.format == "prompt":
        from ..present.report import format_prompt

        print(format_prompt(result, gen_ms=args.gen_ms))
    _scored(document, result, actual_ms, baseline_ms, args.format)
    if args.plot:
        picture = plot_path(args.plot, file, len(args.files) > 1)
        result.plot(picture, top=max(args.top, 1))
        print_note(f"wrote {picture}")
    if args.timeline and result.distributed is not None:
        from ..present.viz import plot_timeline

        picture = plot_path(args.timeline, file, len(args.files) > 1)
        plot_timeline(result.distributed, picture)
        print_note(f"wrote {picture}")
    return int(failed), int(too_fast)



def _check_problem_path(path: Path) -> None:
    """A missing file or a folder, refused before any analysis with the command to run."""
    from ..suites.kernelbench import problems_for_run
    from ..suites.runs import EVAL_RESULTS

    if (path / EVAL_RESULTS).is_file():
        raise UsageError(
            f"{path} is a KernelBench run folder; to set its samples against the speed of light "
            f"run: torchroofline kernelbench {problems_for_run(path)} --run {path}"
        )
    if path.is_dir():
        raise UsageError(
            f"{path} is a folder; to analyze every problem in it run: "
            f"torchroofline kernelbench {path}"
        )
    check_exists([str(path)])



def _as_error(file: str, caught: BaseException) -> TorchrooflineError:
    """The error to report for a problem: ours as it is; a ``sys.exit()`` the file's own code
    called (its exit code would pass for ours: 3 is "faster than light") as one."""
    if isinstance(caught, TorchrooflineError):
        return caught
    from ..suites.kernelbench import code_failed

    error = code_failed(file, "running its code", caught)
    error.__cause__ = caught
    return error



def _batch_fit_dict(batch_fit: BatchFit | InputError) -> dict[str, Any]:
    return {"error": str(batch_fit)} if isinstance(batch_fit, InputError) else batch_fit.to_dict()



def _scored(document: dict[str, Any], result: Result, actual_ms: float | None,
            baseline_ms: float | None, form: str) -> dict[str, Any]:
    """``document`` with the SOL-ExecBench score (:func:`.suites.solexecbench.with_sol_score`),
    its line printed for the text format."""
    from ..suites.solexecbench import with_sol_score

    line = with_sol_score(document, result, actual_ms, baseline_ms)
    if line and form == "text":
        print(line)
    return document



def _analyze_problem_dir(
    folder: str, gpu: Any, args: argparse.Namespace, actual: Sequence[float] | float | None,
    baseline: Sequence[float] | float | None, documents: list[dict[str, Any]],
) -> tuple[int, int]:
    """Every workload of a SOL-ExecBench directory analysed, its documents appended to
    ``documents`` and printed in ``args.format``; the counts that failed and whose measured
    time is below every rung (:func:`_measured_too_fast`). ``actual`` and
    ``baseline``: one time for all workloads or a list of one per workload."""
    from ..price.precision import restoring_switches

    if args.train or args.max_batch or args.ref or args.gen_ms:
        raise UsageError("--train, --max-batch, --ref and --gen-ms are for KernelBench files; "
                          f"{folder} is a SOL-ExecBench directory")
    with restoring_switches():  # the TF32 switches the reference sets stay its own
        return _analyze_workloads(folder, gpu, args, actual, baseline, documents)



def _analyze_workloads(
    folder: str, gpu: Any, args: argparse.Namespace, actual: Sequence[float] | float | None,
    baseline: Sequence[float] | float | None, documents: list[dict[str, Any]],
) -> tuple[int, int]:
    """:func:`_analyze_problem_dir`'s work, under its switches."""
    from ..suites.solexecbench import analyze_workload, load_definition, load_workloads

    try:
        definition, workloads = load_definition(folder), load_workloads(folder)
    except TorchrooflineError as error:
        documents.append({"file": folder, "error": str(error)})
        report_error(error, args.debug)
        return 1, 0
    labels = [workload.uuid for workload in workloads]

    def per_workload(times: Any, option: str) -> list[float | None]:
        listed = times if isinstance(times, list) or times is None else [times]
        return actual_times(labels, listed, option, "workload")

    failed = too_fast = 0
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
        except USAGE_ERRORS:
            raise
        except TorchrooflineError as error:
            failed += 1
            documents.append({"file": folder, "workload": workload.uuid, "error": str(error)})
            report_error(error, args.debug)
            continue
        if args.format == "text":
            result.print(top=args.top)
        elif args.format == "prompt":
            from ..present.report import format_prompt

            print(format_prompt(result))
        too_fast += _measured_too_fast(f"{folder} {workload.uuid}", result)
        document = {"file": folder, "workload": workload.uuid, "axes": dict(workload.axes),
                    **result.to_dict()}
        documents.append(_scored(document, result, actual_ms, baseline_ms, args.format))
        if args.plot:
            picture = plot_path(args.plot, f"{Path(folder).name}_{workload.uuid}", True)
            result.plot(picture, top=max(args.top, 1))
            print_note(f"wrote {picture}")
    return failed, too_fast



def _analyzed(
    file: str | Path, gpu: Any, args: argparse.Namespace, actual_ms: float | None
) -> tuple[Result, BatchFit | InputError | None]:
    """``file`` analyzed and, with ``--max-batch``, the largest batch of the same built model
    that fits ``gpu`` (or why there is none: an input error that leaves the analysis standing);
    the TF32 switches the file sets at import hold for both, and only them."""
    from ..api import max_batch
    from ..price.precision import restoring_switches
    from ..suites.kernelbench import analyze_file, load_and_build

    with restoring_switches():
        built = load_and_build(file, class_name=args.class_name)
        job = _distributed_options(args, built)
        result = analyze_file(
            file, gpu, args.precision, actual_ms=actual_ms, cache=args.cache,
            class_name=args.class_name, math=args.math, data=args.data,
            data_limit_bytes=int(args.data_limit * 2**30),
            training={**(_training_options(args) or {}), **job}, built=built,
        )
        if not args.max_batch:
            return result, None
        training = {"mode": "train", "optimizer": args.optimizer or "adamw"} if args.train else {}
        try:
            return result, max_batch(
                built.model, built.inputs, gpu, args.precision, batch_dim=args.batch_dim or 0,
                **training, **job,
            )
        except InputError as error:
            return result, error



def _as_reference(file: str, reference: Path) -> str:
    note = f"{file} is a generated kernel: analyzed as its reference {reference} (read, never run)"
    print_note(note)
    return note

