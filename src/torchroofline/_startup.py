"""The command line's start-up: a Ctrl-C while ``torchroofline ...`` or ``python -m
torchroofline ...`` imports torch (seconds, before any command runs) ends it with the line every
interrupt prints and exit 130, not a KeyboardInterrupt traceback from inside torch. Imported
first by the package; a process that merely imports torchroofline keeps its own SIGINT."""

from __future__ import annotations

import os
import signal
import sys


def interrupted_while_starting(signum: int, frame: object) -> None:
    """SIGINT before the command runs: nothing has run, nothing is lost."""
    sys.stderr.write("torchroofline: error: interrupted\n")
    os._exit(130)


def _started_as_the_command_line() -> bool:
    """Whether this process is ``torchroofline ...`` or ``python -m torchroofline ...``."""
    argv = getattr(sys, "orig_argv", sys.argv)
    package = __name__.partition(".")[0]
    as_module = any(a == "-m" and b == package for a, b in zip(argv, argv[1:], strict=False))
    return as_module or os.path.basename(sys.argv[0]).split(".")[0] == package


if _started_as_the_command_line() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, interrupted_while_starting)
