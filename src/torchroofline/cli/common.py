"""What every command shares: exit codes, the usage error, the options several commands take,
the target GPU, and the one-line notes and errors on stderr."""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ClockError, InputError, PrecisionError, TraceFileError, UnknownGPUError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_FASTER_THAN_LIGHT = 3  #: a generated kernel's (or a traced op's) time beats the SoL
EXIT_INTERRUPTED = 130  #: 128 + SIGINT, the shell's code for a command stopped by Ctrl-C

#: Errors that mean the command itself was wrong, not one problem: its arguments, or a file it
#: reads that is not what it takes (a profiler trace here; a report or timings raise their
#: UsageError), as a missing one is.
USAGE_ERRORS = (UnknownGPUError, PrecisionError, ClockError, InputError, TraceFileError)



#: The rule for every file and folder a command writes, as each command's --help states it.
OUTPUTS_RULE = (
    "outputs: a file or folder an option names (--out, --plot, --plot-dir, --timeline, "
    "--plot-roofline) is created or overwritten, never a missing folder above it: that is "
    "refused, before any work, with the folder to create"
)


class UsageError(Exception):
    """Bad arguments found after parsing."""



class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default where there is one to show (not None/False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:  # identity: 0 is a default
            return action.help
        return super()._get_help_string(action)





def debug_flag(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--debug", action="store_true", default=default, help="show tracebacks on errors"
    )



def command(commands: Any, name: str, writes: bool = True,
            **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand that shows defaults in --help and takes --debug after its name too; one
    that ``writes`` files states :data:`OUTPUTS_RULE` at the end of its --help."""
    epilog = OUTPUTS_RULE if writes else None
    parser = commands.add_parser(name, formatter_class=HelpFormatter, epilog=epilog, **kwargs)
    # SUPPRESS: without --debug here, the subparser leaves the top-level value alone
    debug_flag(parser, argparse.SUPPRESS)
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



def math_option(parser: argparse.ArgumentParser) -> None:
    """``--math``, for the commands that judge times against the bound (not ``validate``: it
    checks the program's own bound against PyTorch's times)."""
    parser.add_argument(
        "--math", default="program",
        help="the math the speed of light assumes: program (the program's own precision) or "
        "a lower one the benchmark's tolerance admits: tf32, bf16, fp16, fp8, fp4 (an fp32 check "
        "at 1e-2 admits tf32); every rung's bound is in the JSON's time_ms.sol_by_math",
    )



def data_option(parser: argparse.ArgumentParser) -> None:
    """``--data`` and ``--data-limit``: the bound for any input values or the given ones."""
    parser.add_argument(
        "--data", choices=("any", "given"), default=None,
        help="the bound for any input values, or for the values get_inputs() makes under "
        "KernelBench's seed (a triangular input's zero half, the experts the tokens are routed "
        "to); default: given when the inputs fit in --data-limit",
    )
    parser.add_argument(
        "--data-limit", type=positive, default=2.0, metavar="GIB",
        help="GiB of inputs and parameters a 'given' bound may make for real, a quarter of "
        "it per tensor; bigger ones are made as shapes only (default 2)",
    )



def common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu", default="h100-sxm", help="target GPU (see 'torchroofline gpus')")
    parser.add_argument(
        "--precision",
        default="fp32",
        help="fp32 (what PyTorch runs by default), tf32, fp16, bf16 or fp8",
    )
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold", help=CACHE_HELP)
    parser.add_argument(
        "--host-scale", type=positive, default=1.0, metavar="X",
        help="host (CPU) costs of the estimates times X: 0.5 = a host twice as fast as the "
        "default profile ('torchroofline validate' fits X from your timings)",
    )



def clock_options(parser: argparse.ArgumentParser) -> None:
    """``--clock-mhz`` and ``--mem-clock-mhz``: the GPU's locked clocks (GPUSpec.at_clocks)."""
    parser.add_argument(
        "--clock-mhz", type=positive, metavar="MHZ",
        help="SM clock locked at MHZ (nvidia-smi -lgc): compute peaks scale by MHZ over the "
        "clock the datasheet figures assume (default: boost; see 'torchroofline gpus')",
    )
    parser.add_argument(
        "--mem-clock-mhz", type=positive, metavar="MHZ",
        help="memory clock locked at MHZ (nvidia-smi -lmc): bandwidth scales by MHZ over the "
        "nominal memory clock",
    )



def positive(text: str) -> float:
    """An argparse type: a finite number above 0 (``inf`` and ``nan`` are refused: a time or
    a limit of either is no figure, and JSON cannot hold them)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"takes a finite number above 0, got '{text}'")
    return value



def times(text: str) -> list[float]:
    """An argparse type: one time in ms or several separated by commas (``2.66,0.41``)."""
    return [positive(part) for part in text.split(",")]



def estimate_params(host_scale: float) -> Any:
    """The performance model's constants for ``--host-scale``; None (the fitted ones) at 1."""
    from ..price.estimate_params import DEFAULT_PARAMS

    return None if host_scale == 1 else DEFAULT_PARAMS.host_scaled(host_scale)



def levels_option(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise UsageError(f"--level takes numbers like 1,2, got '{text}'") from None



def target_gpu(args: argparse.Namespace) -> Any:
    """The GPU ``--gpu`` names, checked with ``--precision`` and ``--math`` before any work; a
    short name that several parts share (``a100``) gets a one-line note saying which it picks."""
    from ..price.hardware import choice_note, get_gpu
    from ..price.precision import check_math, check_precision

    gpu = get_gpu(args.gpu).at_clocks(
        getattr(args, "clock_mhz", None), getattr(args, "mem_clock_mhz", None)
    )
    check_precision(args.precision)
    if hasattr(args, "math"):
        args.math = check_math(args.math)
    note = choice_note(args.gpu)
    if note:
        print_note(note)
    return gpu



def check_exists(paths: Sequence[str | None]) -> None:
    """A missing file or folder is bad usage (exit 2), the same from every command."""
    for path in paths:
        if path is not None and not Path(path).exists():
            raise UsageError(f"{path}: no such file; check the path")


def check_outputs(files: Mapping[str, str | None],
                  folders: Mapping[str, str | None] | None = None) -> None:
    """Each file (``files``) and folder (``folders``) an option will write (its name → the path
    given, None where not given), checked by :data:`OUTPUTS_RULE` before any work: bad usage
    (exit 2) where the folder above it does not exist, or where a file is a folder or a folder
    a file. A suite's report, written after minutes of work, was lost to a raw
    FileNotFoundError; ``plot --out a/b`` made both folders where ``--out a/r.json`` refused."""
    named = [(option, path, False) for option, path in files.items()]
    named += [(option, path, True) for option, path in (folders or {}).items()]
    for option, path, folder in named:
        if path is None:
            continue
        if not folder and Path(path).is_dir():
            raise UsageError(f"{option} {path}: is a folder; give a file name inside it")
        if folder and Path(path).exists() and not Path(path).is_dir():
            raise UsageError(f"{option} {path}: is a file; give a folder")
        above = Path(path).parent
        if not above.is_dir():
            raise UsageError(f"{option} {path}: no folder {above}; create it first or choose "
                             "another path")


#: The report format a file's suffix names (``--out r.json``).
SUFFIX_FORMATS = {".txt": "text", ".md": "md", ".csv": "csv", ".json": "json", ".html": "html"}


def out_format(given: str | None, out: str | None, formats: Sequence[str]) -> str:
    """The format a report is written in: ``--format`` where ``given``; else the one the
    ``--out`` file's suffix names, as kernelbench's ``--out`` takes it; else ``formats[0]``.
    ``trace --out r.html`` wrote the text report into r.html. A suffix naming a format the
    command does not write is bad usage, said before any work."""
    if given is not None:
        return given
    named = SUFFIX_FORMATS.get(Path(out).suffix.lower()) if out else None
    if named is None:
        return formats[0]
    if named not in formats:
        suffixes = ", ".join(suffix for suffix, name in SUFFIX_FORMATS.items() if name in formats)
        raise UsageError(f"--out {out}: this command writes no {named}; end the path in "
                         f"{suffixes}, or pass --format")
    return named


def json_or_format(args: argparse.Namespace) -> str | None:
    """The format ``--json`` or ``--format`` names (None: neither given). Where they name two,
    bad usage naming both: ``--json --format text`` took whichever came last."""
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} name two formats; give one")
    return "json" if args.json else args.format


def whole_number(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number of ``least`` or more (a negative ``--top`` sliced rows
    off the end of a table; ``-j 0`` started "0 worker processes")."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(
                f"takes a whole number of {least} or more, got '{text}'")
        return value

    return parse


#: ``--top``: rows listed (0: none).
count = whole_number(0)
#: ``-j``, ``--world``, ``--gpus-per-node``: how many of a thing that must exist.
at_least_one = whole_number(1)



def actual_times(files: Sequence[str], actual: Sequence[float] | None,
                  option: str = "--actual-ms", what: str = "file") -> list[float | None]:
    if not actual:
        return [None] * len(files)
    if len(actual) == 1:
        return list(actual) * len(files)
    if len(actual) != len(files):
        raise UsageError(f"{option} takes one time or one per {what}; got {len(actual)} for "
                         f"{len(files)} {what}{'s' if len(files) != 1 else ''}")
    return list(actual)



def plot_path(base: str, file: str, many: bool) -> str:
    if not many:
        return base
    path = Path(base)
    return str(path.with_name(f"{path.stem}_{Path(file).stem}{path.suffix}"))



def host_scale_note(host_scale: float) -> str:
    return f"estimates with every host (CPU) cost × {host_scale:g} of the default (--host-scale)"



def faster_than_light(what: str, time_ms: float, lowest_sol_ms: float,
                      whose: str = "the generated kernel's") -> None:
    """The warning for a time (``whose``: a generated kernel's, or a measured one) below the
    speed of light of every math rung (``lowest_sol_ms``, ms: the lowest rung's)."""
    print(
        f"torchroofline: warning: {what}: {whose} {time_ms:.4g} ms is below the "
        f"{lowest_sol_ms:.4g} ms speed of light of the lowest-precision math: faster than light "
        f"(a timing bug or a kernel that skips work); exit code {EXIT_FASTER_THAN_LIGHT}",
        file=sys.stderr,
    )



def exit_code(failed: int, faster_than_light: int) -> int:
    """Failed problems first (1), then generated times that beat the speed of light (3)."""
    if failed:
        return EXIT_FAILED
    return EXIT_FASTER_THAN_LIGHT if faster_than_light else EXIT_OK



def print_error(message: str) -> None:
    print(f"torchroofline: error: {message}", file=sys.stderr)



def print_note(message: str) -> None:
    print(f"torchroofline: note: {message}", file=sys.stderr)



def report_error(error: BaseException, debug: bool) -> None:
    """The error's one line; its traceback with ``--debug``, else a pointer to ``--debug`` when
    it wraps an exception from the model, the problem file or torch (its ``__cause__``)."""
    if debug:
        traceback.print_exception(error)
    hint = "; --debug shows the traceback" if error.__cause__ is not None and not debug else ""
    print_error(f"{error}{hint}")

