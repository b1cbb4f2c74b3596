"""The ``torchroofline`` command line (also ``python -m torchroofline``): arguments in, reports
and an exit code out. One module per command (:data:`COMMAND_MODULES`), each registering its
parser; what they share is in :mod:`.common`.

Exit codes: 0 success, 1 some problems failed to analyze (reports are still written),
2 bad usage (unknown GPU or precision, bad arguments, an input file missing or unreadable: a
trace, a report, timings), 3 a measured time (``--actual-ms``, ``--timings``), a generated
kernel's, or a profiled op's in ``trace``, beats the speed of light (faster than light: a
timing bug or a kernel that skips work; the reports are still written, and failed problems' 1
takes precedence).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .._startup import ended, install_dynamo_placeholder, started, started_as_the_command_line
from ..errors import TorchrooflineError
from . import analyze, gpus, suite, sweep, trace
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    OUTPUTS_RULE,
    USAGE_ERRORS,
    HelpFormatter,
    UsageError,
    debug_flag,
    print_error,
    report_error,
)
from .suite import write_report

#: The commands, in the order ``--help`` lists them: each module's ``register`` adds its parser
#: and sets ``args.handler``, the function that runs it.
COMMAND_MODULES = (analyze, gpus, suite, sweep, trace)


class _Parser(argparse.ArgumentParser):
    """The top-level parser and every command's: an unknown option gets the closest known one
    of its command (``--precison``: did you mean ``--precision``?), a mistyped command or
    choice the closest one, and a usage error is two lines, the usage's first and the error,
    not the whole usage of a command with twenty options."""

    commands: dict[str, argparse.ArgumentParser] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # no abbreviations: "--gpus h100" was taken for --gpus-per-node ("takes a whole
        # number, got 'h100'"); a misspelled option now gets the closest one instead
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self.commands.get(getattr(parsed, "command", None) or "", self)
            command.error(_unrecognized(command, unknown))
        return parsed

    def error(self, message: str) -> NoReturn:
        formatter = self._get_formatter()
        formatter.add_usage(self.usage, self._get_positional_actions(), [])
        usage = " ".join(formatter.format_help().split())
        options = " [options]" if self._get_optional_actions() else ""
        self.exit(EXIT_USAGE, f"{usage}{options} (see {self.prog} --help)\n"
                              f"{self.prog}: error: {_with_closest_choice(message)}\n")


def _with_closest_choice(message: str) -> str:
    """argparse's "invalid choice: 'analyse' (choose from 'analyze', ...)" with the closest
    choice named (Python's own suggestion, where it makes one, is left alone)."""
    wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if wrong is None or "did you mean" in message or "maybe you meant" in message:
        return message
    choices = re.findall(r"'([^']*)'", wrong.group(2))
    close = difflib.get_close_matches(wrong.group(1), choices, n=1)
    return f"{message}; did you mean '{close[0]}'?" if close else message


#: An option one command (or the API) spells and another spells otherwise → (the other's
#: option, what to type there): ``analyze --json`` is ``trace --format json``, ``trace --format
#: json`` is ``gpus --json``, the API's ``analyze(mode="train")`` is ``analyze --train``.
SPELLED_ELSEWHERE: dict[str, tuple[str, str]] = {
    "--json": ("--format", "--format json"),
    "--format": ("--json", "--json"),
    "--mode": ("--train", "--train"),
}


def _closest_option(name: str, known: Sequence[str]) -> list[str]:
    """The known option spelled most like ``name``, compared without their dashes, which made
    any two long options look alike ("--loss": did you mean --class?)."""
    bare = {option.lstrip("-"): option for option in known}
    close = difflib.get_close_matches(name.lstrip("-"), list(bare), n=1, cutoff=0.7)
    return [bare[match] for match in close]


def _unrecognized(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """The unknown options, each with the closest known one (the values after an unknown
    option are left unknown too: naming the option says it all)."""
    known = [option for action in parser._actions for option in action.option_strings]
    options = [argument for argument in unknown if argument.startswith("-")] or unknown
    lines = []
    for argument in options:
        name = argument.split("=")[0]
        close = [SPELLED_ELSEWHERE[name][1]] if SPELLED_ELSEWHERE.get(name, ("",))[0] in known \
            else _closest_option(name, known)
        hint = f" (did you mean {close[0]}?)" if close else ""
        lines.append(f"unrecognized argument {argument}{hint}")
    return "; ".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="torchroofline",
        description="Speed-of-light bounds for PyTorch programs on a chosen GPU, no GPU needed.",
        epilog="exit codes: 0 success, 1 some problems failed (reports are still written), 2 bad "
        "usage (arguments, or an input file missing or unreadable), 3 a measured time (a "
        "reference's, a generated kernel's or a traced op's) beats the speed of light (faster "
        f"than light: a timing bug or a kernel that skips work), 130 interrupted. {OUTPUTS_RULE}",
        formatter_class=HelpFormatter,
    )
    debug_flag(parser, False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.commands = commands.choices
    for module in COMMAND_MODULES:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command ``argv`` names and returns its exit code; as the command line itself,
    ends the process with it instead (:func:`torchroofline._startup.ended`)."""
    if not started_as_the_command_line():
        return _run(argv)
    try:
        code = _run(argv)
    except SystemExit as stop:  # argparse's, after --help or a usage error
        if not isinstance(stop.code, int | None):
            raise
        code = stop.code or 0
    ended(code)


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if started_as_the_command_line():
        install_dynamo_placeholder()
    started()
    try:
        _interrupts_raise()
        return args.handler(args)
    except (UsageError, *USAGE_ERRORS) as error:
        report_error(error, args.debug)
        return EXIT_USAGE
    except TorchrooflineError as error:
        report_error(error, args.debug)
        return EXIT_FAILED
    except KeyboardInterrupt as stop:  # its own line where it has one (what was cut short)
        print_error(str(stop) or "interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `torchroofline ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _interrupts_raise() -> None:
    """From here on a Ctrl-C raises KeyboardInterrupt, which the commands handle (the start-up's
    quiet exit, :func:`torchroofline._startup.interrupted_while_starting`, ends)."""
    from .._startup import interrupted_while_starting

    if signal.getsignal(signal.SIGINT) is interrupted_while_starting:
        signal.signal(signal.SIGINT, signal.default_int_handler)


__all__ = ["EXIT_OK", "build_parser", "main", "write_report"]
