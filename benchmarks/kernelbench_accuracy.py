"""KernelBench whole-problem accuracy of the committed performance model: in-sample, held out
(one GPU setup, one level), and on an external set it was never fitted on.

    python benchmarks/kernelbench_accuracy.py --data DIR [--folds] [--external DIR]
                                              [--write docs/validation.md]

``--data``: the calibration data of ``benchmarks/calibrate.py`` (not in this repository). Per
setup and mode, the share of problems within 1.25× and within 2× and the median |log2| error,
each setup's host speed fitted (one number, as ``torchroofline validate`` fits it); the setups
``calibrate.HELD_OUT`` were left out of the committed fit (leave one GPU out: only their host
speed is fitted on them). ``--folds`` adds leave one level out: the constants are refitted
without that level (``calibrate.fit_constants``), and the level is priced with each setup's host
speed fitted on the other levels. ``--external``: a folder with ``problems/level{1,2,3}/*.py``
and ``timings/<set>/baseline_time_torch[_compile_inductor_default].json`` (KernelBench's
layout); every problem is priced on the GPU its timing entry names, with the default host
profile and nothing fitted. ``--write`` replaces the ``kernelbench-accuracy`` block of a doc.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from calibrate import (
    HELD_OUT,
    SETUPS,
    TIMING_FILES,
    Sample,
    fit_constants,
    host_scale_only,
    load_samples,
    predicted,
)
from trace_accuracy import write

from torchroofline.price.estimate_params import DEFAULT_PARAMS, EstimateParams
from torchroofline.price.hardware import get_gpu
from torchroofline.suites.kernelbench import analyze_file, discover

WITHIN = (1.25, 2.0)
BLOCK = "kernelbench-accuracy"
#: The external set's modes: KernelBench's timing file → this script's mode name.
EXTERNAL_FILES = {"eager": TIMING_FILES["eager"], "compile": TIMING_FILES["compile"]}


@dataclass(frozen=True)
class Shares:
    """|log2(estimate / measured)| of a group of problems, summarised."""

    errors: tuple[float, ...]

    def cells(self) -> str:
        if not self.errors:
            return "— | — | — | —"
        shares = [sum(e <= math.log2(w) for e in self.errors) / len(self.errors) for w in WITHIN]
        return (f"{len(self.errors)} | {shares[0]:.0%} | {shares[1]:.0%} "
                f"| {statistics.median(self.errors):.2f}")


def errors_by(samples: Iterable[Sample], params_of: Callable[[Sample], EstimateParams],
              key: Callable[[Sample], str]) -> dict[tuple[str, str], list[float]]:
    """(group, mode) → |log2 error| of each sample priced with ``params_of(sample)``."""
    found: dict[tuple[str, str], list[float]] = {}
    for sample in samples:
        for mode, estimate in predicted(sample, params_of(sample)).items():
            found.setdefault((key(sample), mode), []).append(
                abs(math.log2(estimate / sample.measured_s[mode])))
    return found


def host_scaled(samples: list[Sample], params: EstimateParams) -> dict[str, EstimateParams]:
    """Each setup's parameters with its host speed fitted on ``samples`` (its one number)."""
    return {setup: params.host_scaled(host_scale_only([s for s in samples if s.setup == setup],
                                                      params))
            for setup in SETUPS if any(s.setup == setup for s in samples)}


def per_setup_table(samples: list[Sample]) -> list[str]:
    """In-sample and leave-one-GPU-out: the committed model, each host's speed fitted."""
    params = host_scaled(samples, DEFAULT_PARAMS)
    found = errors_by(samples, lambda s: params[s.setup], lambda s: s.setup)
    lines = ["| set | fit | mode | problems | within 1.25× | within 2× | median \\|log2\\| |",
             "|---|---|---|---|---|---|---|"]
    for setup in SETUPS:
        held = "held out (host speed only)" if setup in HELD_OUT else "in-sample"
        lines += [f"| {setup} | {held} | {mode} | {Shares(tuple(found[(setup, mode)])).cells()} |"
                  for mode in TIMING_FILES if (setup, mode) in found]
    for fit, chosen in (("in-sample", [s for s in SETUPS if s not in HELD_OUT]),
                        ("held out", list(HELD_OUT))):
        for mode in TIMING_FILES:
            pooled = [e for setup in chosen for e in found.get((setup, mode), [])]
            lines.append(f"| all {fit} | | {mode} | {Shares(tuple(pooled)).cells()} |")
    return lines


def level_folds_table(samples: list[Sample], rounds: int) -> list[str]:
    """Leave one level out: constants refitted without it, beside the committed (in-sample) fit."""
    train = [s for s in SETUPS if s not in HELD_OUT]
    committed = host_scaled(samples, DEFAULT_PARAMS)
    lines = ["| level | mode | problems | in-sample: within 1.25× | within 2× | median | "
             "held out: within 1.25× | within 2× | median |",
             "|---|---|---|---|---|---|---|---|---|"]
    for level in (1, 2, 3):
        rest = [s for s in samples if s.level != level]
        mine = [s for s in samples if s.level == level]
        fit = fit_constants([s for s in rest if s.setup in train], train, rounds)
        held = host_scaled(rest, fit.params)
        inside = errors_by(mine, lambda s: committed[s.setup], lambda s: "all")
        outside = errors_by(mine, lambda s, held=held: held[s.setup], lambda s: "all")
        for mode in TIMING_FILES:
            if ("all", mode) in inside:
                a, b = Shares(tuple(inside[("all", mode)])), Shares(tuple(outside[("all", mode)]))
                lines.append(f"| {level} | {mode} | {a.cells()} | "
                             f"{b.cells().split(' | ', 1)[1]} |")
    return lines


def external_table(folder: Path) -> list[str]:
    """The committed model on another KernelBench timing set: default host, nothing fitted."""
    timings = {
        (path.parent.name, mode): json.loads(path.read_text(encoding="utf-8"))
        for mode, name in EXTERNAL_FILES.items()
        for path in sorted((folder / "timings").glob(f"*/{name}"))
    }
    found: dict[tuple[str, str], list[float]] = {}
    for path in discover([folder / "problems"]):
        level = path.parent.name
        entries = {key: table.get(level, {}).get(path.name) for key, table in timings.items()}
        entries = {key: entry for key, entry in entries.items() if entry and entry.get("mean")}
        if not entries:
            continue
        try:
            result = analyze_file(path, "h100-sxm", "fp32", cache="warm")
        except Exception as error:  # noqa: BLE001 — reported and skipped
            print(f"skipped {path.name}: {str(error).splitlines()[0][:120]}", file=sys.stderr)
            continue
        for (timing_set, mode), entry in entries.items():
            priced = result.on(get_gpu(entry.get("hardware", "h100-sxm")).key)
            estimate = max(priced.performance.modes[_ESTIMATE[mode]].total_s, priced.sol_s)
            error = abs(math.log2(estimate / (entry["mean"] * 1e-3)))
            found.setdefault((f"{timing_set} {level}", mode), []).append(error)
    lines = ["| set | mode | problems | within 1.25× | within 2× | median \\|log2\\| |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {name} | {mode} | {Shares(tuple(errors)).cells()} |"
              for (name, mode), errors in sorted(found.items())]
    return lines


_ESTIMATE = {"eager": "eager", "compile": "fused"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the calibration data folder")
    parser.add_argument("--folds", action="store_true", help="add leave one level out (slow)")
    parser.add_argument("--rounds", type=int, default=4, help="descent rounds of each refit")
    parser.add_argument("--external", type=Path, help="an external KernelBench timing set")
    parser.add_argument("--write", type=Path, metavar="DOC.md", help="update this doc's block")
    args = parser.parse_args()
    samples = load_samples(args.data)
    sections = ["Per setup (committed model; each setup's host speed fitted, its only fitted "
                "number where held out):", "", *per_setup_table(samples), ""]
    if args.folds:
        sections += ["Leave one level out (constants refitted without the level; host speeds "
                     "fitted on the other levels):", "",
                     *level_folds_table(samples, args.rounds), ""]
    if args.external:
        sections += [f"External held-out check ({args.external.name}; default host profile, "
                     "nothing fitted):", "", *external_table(args.external), ""]
    body = "\n".join(sections)
    if args.write:
        write(args.write, body, BLOCK)
        print(f"wrote {args.write}")
    else:
        print(body)


if __name__ == "__main__":
    main()
