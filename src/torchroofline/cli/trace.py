"""``torchroofline trace``: each op of a torch.profiler trace against its bound."""

from __future__ import annotations

import argparse
from typing import Any

from .common import (
    EXIT_INTERRUPTED,
    check_exists,
    check_outputs,
    command,
    count,
    exit_code,
    out_format,
    plot_path,
    print_error,
    print_note,
)


def register(commands: Any) -> None:
    """The ``trace`` command's parser, added to ``commands``."""
    from ..suites.kineto import add_arguments as trace_arguments

    trace = command(
        commands, "trace", help="price each op of a torch.profiler trace against its bound",
        description="Join every kernel of a torch.profiler (Kineto) trace recorded with "
        "record_shapes=True to the aten op that launched it, rebuild each op on fake tensors and "
        "set its measured time against its speed of light on the trace's GPU; two traces are "
        "compared op kind by op kind.",
    )
    trace_arguments(trace)
    formats = next(action for action in trace._actions if action.dest == "format")
    formats.choices = (*formats.choices, "html")  # present/html.py: a later stage than suites
    next(action for action in trace._actions if action.dest == "top").type = count
    trace.set_defaults(handler=cmd_trace)


def cmd_trace(args: argparse.Namespace) -> int:
    """One trace's report, or two side by side (``--plot``); 3 when an op beats its bound, 130
    when interrupted (the report holds the ops priced before it, marked partial)."""
    from ..present.html import trace_html
    from ..suites.batch import stop_signals
    from ..suites.kineto import WRITERS, run

    check_exists(args.traces)
    check_outputs({"--out": args.out, "--plot": args.plot})
    writers = {**WRITERS, "html": trace_html}
    args.format = out_format(args.format, args.out, tuple(writers))  # text first
    with stop_signals() as signals:
        reports = run(args, print_note, writers)
        if args.plot:
            from ..present.viz import plot_trace

            for report in reports:
                picture = plot_path(args.plot, report.path, len(reports) > 1)
                plot_trace(report, picture)
                print_note(f"wrote {picture}")
    if reports[-1].interrupted:
        print_error(f"{reports[-1].interrupted}; the report covers the ops priced before it")
        return EXIT_INTERRUPTED
    if signals.received:  # while the report was written: it is whole
        print_error("interrupted after every op was priced; the report is whole")
        return EXIT_INTERRUPTED
    return exit_code(0, sum(len(report.faster_than_light) for report in reports))

