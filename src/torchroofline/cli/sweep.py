"""``torchroofline sweep``: one problem over one or two axes, GPUs and precisions."""

from __future__ import annotations

import argparse
import functools
import json
import math
from pathlib import Path
from typing import Any

from .common import (
    CACHE_HELP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    check_exists,
    check_outputs,
    command,
    data_option,
    math_option,
    out_format,
    print_error,
    print_note,
)

#: The formats ``sweep`` writes, the default first.
SWEEP_FORMATS = ("text", "json", "html")


def register(commands: Any) -> None:
    """The ``sweep`` command's parser, added to ``commands``."""
    from ..suites.sweep import RANK_TIMES

    sweep = command(
        commands, "sweep", help="one problem over one or two axes (batch, sequence ...), GPUs "
        "and precisions, with the crossovers",
        description="Analyse a KernelBench problem file at each value of its module globals "
        "(--set batch_size=1,2,4), or a SOL-ExecBench problem directory at each of its "
        "workloads (or at --set values of its var axes), on each GPU and precision; report "
        "where it turns compute bound, where it stops fitting, where the GPUs' ranking changes.",
    )
    sweep.add_argument("path", metavar="PATH", help="a problem file or SOL-ExecBench directory")
    sweep.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUES", dest="axes",
        help="an axis and its values: 1,2,4 or a range lo:hi (every integer), lo:hi:step, "
        "lo:hi:*f (times f); twice for two axes, the first being the one crossovers run along",
    )
    sweep.add_argument("--gpu", default="h100-sxm", help="GPUs, comma-separated (h100,b200)")
    sweep.add_argument("--precision", default="fp32", help="precisions, comma-separated")
    sweep.add_argument("--cache", choices=("cold", "warm"), default="cold", help=CACHE_HELP)
    math_option(sweep)
    data_option(sweep)
    sweep.add_argument("--rank-by", choices=tuple(RANK_TIMES), default="sol",
                       help="what the GPU ranking orders by: sol, compile or eager estimate")
    sweep.add_argument("--no-narrow", action="store_true",
                       help="report crossovers between the values given, without bisection")
    sweep.add_argument("--format", choices=SWEEP_FORMATS,
                       help="report format (default: the --out file's suffix, else text)")
    sweep.add_argument("--out", metavar="FILE", help="write the report here, not to stdout")
    sweep.add_argument("--plot", metavar="PNG|SVG",
                       help="SoL and estimates against the axis, one line per GPU")
    sweep.add_argument("--plot-roofline", metavar="PNG|SVG",
                       help="the roofline with the sweep's points as a path")
    sweep.set_defaults(handler=cmd_sweep)


#: The ``--set`` syntax, as every error about it says.
AXIS_SYNTAX = "VALUES is a list 1,2,4 or a range lo:hi, lo:hi:step or lo:hi:*f with lo <= hi"
#: The most values one axis takes: each is a trace (``N=1:1e12`` counted for ever).
MAX_AXIS_VALUES = 1000


def parse_axis(text: str) -> tuple[str, list[int | float]]:
    """``NAME=VALUES`` (:func:`register`'s ``--set``) → the name and its values; a bad one is
    one line naming the part at fault and the syntax."""
    name, equals, values = text.partition("=")
    if not equals or not name.strip() or not values.strip():
        raise UsageError(f"--set takes NAME=VALUES (batch_size=1,2,4 or 1:64), got '{text}'")
    parsed: list[int | float] = []
    for part in values.split(","):
        try:
            parsed += _values(part.strip())
        except ValueError as error:
            raise UsageError(f"--set {text}: {error}; {AXIS_SYNTAX}") from None
        if len(parsed) > MAX_AXIS_VALUES:
            raise UsageError(f"--set {text}: more than {MAX_AXIS_VALUES} values, each one a "
                             "trace; give a coarser step (lo:hi:*2)")
    return name.strip(), parsed


def _values(part: str) -> list[int | float]:
    """One comma-separated part of VALUES: a number or a range; ValueError saying what is
    wrong with it."""
    if ":" not in part:
        return [_number(part)]
    low, high, *step = part.split(":")
    start, stop = _number(low), _number(high)
    if len(step) > 1:
        raise ValueError(f"'{part}' has {2 + len(step)} parts; a range has 2 or 3")
    if stop < start:
        raise ValueError(f"the range '{part}' ends ({high}) below its start ({low})")
    grow = bool(step) and step[0].startswith("*")
    by = _number(step[0].lstrip("*")) if step else 1
    if by <= (1 if grow else 0):
        raise ValueError(f"the range '{part}' has the step '{step[0]}', which never reaches "
                         f"{high}: {'a factor above 1' if grow else 'a step above 0'}")
    values, value = [], start
    while value <= stop and len(values) <= MAX_AXIS_VALUES:
        values.append(value)
        value = value * by if grow else value + by
    return values


def _number(text: str) -> int | float:
    """``text`` as an int where it is a whole number written without a point; ValueError
    naming it where it is no number."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is no number" if text else "an empty value") from None
    if not math.isfinite(value):
        raise ValueError(f"'{text}' is no finite number")
    return int(value) if value.is_integer() and "." not in text else value


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..price.hardware import choice_note, get_gpu
    from ..price.precision import check_math, check_precision
    from ..suites.batch import stop_signals
    from ..suites.solexecbench import is_problem_dir
    from ..suites.sweep import SweepInterrupted, sweep_kernelbench, sweep_solexecbench

    # every check that reads no problem, then the GPUs' notes: an error is the one line
    check_exists([args.path])
    check_outputs({"--out": args.out, "--plot": args.plot, "--plot-roofline": args.plot_roofline})
    args.format = out_format(args.format, args.out, SWEEP_FORMATS)
    for picture in (args.plot, args.plot_roofline):
        if picture:
            from ..present.viz.canvas import save_target

            save_target(picture)
    axes = dict(parse_axis(text) for text in args.axes)
    if len(axes) != len(args.axes):
        raise UsageError("--set names an axis twice; give each axis once")
    if not axes and not is_problem_dir(args.path):
        raise UsageError("sweep a problem file over its module globals: --set NAME=VALUES")
    gpus = [name.strip() for name in args.gpu.split(",") if name.strip()]
    precisions = [name.strip() for name in args.precision.split(",") if name.strip()]
    options = {"cache": args.cache, "math": check_math(args.math), "data": args.data,
               "data_limit_bytes": int(args.data_limit * 2**30)}
    for name in gpus:
        get_gpu(name)
    for name in precisions:
        check_precision(name)
    for name in gpus:
        if choice_note(name):
            print_note(choice_note(name))
    if is_problem_dir(args.path):
        run = functools.partial(sweep_solexecbench, args.path, axes or None)
    else:
        run = functools.partial(sweep_kernelbench, args.path, axes)
    # a Ctrl-C while values are traced keeps those finished (SweepInterrupted); one taken while
    # the report is written waits for it
    with stop_signals() as signals:
        try:
            with signals.armed():
                sweep = run(gpus, precisions, rank_by=args.rank_by, narrow=not args.no_narrow,
                            **options)
        except SweepInterrupted as stopped:
            if stopped.sweep is not None:
                _write_all(args, stopped.sweep)
            print_error(f"{stopped}" if stopped.sweep is None else stopped.sweep.notes[-1])
            return EXIT_INTERRUPTED
        _write_all(args, sweep)
    if signals.received:
        print_error("interrupted after the sweep finished; the report is whole")
        return EXIT_INTERRUPTED
    return EXIT_OK


def _write_all(args: argparse.Namespace, sweep: Any) -> None:
    """The report and the pictures ``args`` ask for."""
    _write(args, sweep)
    if args.plot or args.plot_roofline:
        from ..present.viz import plot_sweep, plot_sweep_roofline

        for path, draw in ((args.plot, plot_sweep), (args.plot_roofline, plot_sweep_roofline)):
            if path:
                draw(sweep, path)
                print_note(f"wrote {path}")


def _write(args: argparse.Namespace, sweep: Any) -> None:
    from ..present.html import sweep_html
    from ..present.sweeps import cost_line, format_sweep

    writers = {
        "text": format_sweep,
        "json": lambda data: json.dumps(data.to_dict(), indent=2) + "\n",
        "html": sweep_html,
    }
    text = writers[args.format](sweep)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print_note(f"wrote {args.out}")
    else:
        print(text, end="")
    if args.format != "text":
        print_note(cost_line(sweep))
