"""Check that the speed of light never exceeds a real GPU time, on every calibration problem.

    python benchmarks/soundness.py [--data DIR] [-j 2] [--limit N] [--level 1,2] [--setups A,B]

The data (not in this repository): ``problems/level{1,2,3}/*.py`` and ``timings/<set>/
baseline_time_<mode>.json``, KernelBench's published times on nine GPU setups (PyTorch 2.5,
CUDA 12.4, fp32 inputs, no L2 flush between trials); default ``../shared/calibration`` beside
the repository when it is there.

Each problem is analysed once per data mode (the bound for ``any`` input values and for the
``given`` ones), in batch workers that isolate problems from each other, at what the timings
ran: fp32 with PyTorch's default math switches (matmuls in full FP32, cuDNN convolutions and
RNNs allowed TF32: ``math="program"`` reads them, and the report lists the switches each
analysis saw) and a warm cache. Each result is re-priced on every setup's GPU (``Result.on``,
no retrace) and set against the fastest time of that problem on that setup: the fastest trial
(``min``) of every mode timed there (eager, Inductor, CUDA graphs, max-autotune). A sound bound
has SoL / measured ≤ 1 everywhere; the exit status is 1 if any is above.

A full run writes docs/soundness.md; a partial one (``--limit``, ``--level``, ``--setups``)
prints its report and writes it to a temporary file, never over the tracked one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from calibrate import ROOT, SETUPS, setup_timings

from torchroofline.suites.batch import Progress, analyze_batch
from torchroofline.suites.kernelbench import discover, level_of, lookup_time, run_name

DEFAULT_DATA = ROOT.parent / "shared" / "calibration"
DOC = ROOT / "docs" / "soundness.md"
DATA_MODES = ("any", "given")
#: Analysed on this GPU, then re-priced on each setup's (any key would do: no retrace).
ANALYSED_ON = "h100-sxm"
#: Closest approaches listed per setup.
CLOSEST = 10
#: Why a closest approach is as close as it is, keyed by (setup, problem); checked by hand
#: against the problem's FLOPs and the rates the same GPU reaches on other problems.
NOTES: dict[tuple[str, str], str] = {
    ("T4_modal", "level1/68_conv_transposed_3D__square_input__asymmetric_kernel.py"):
    "a soundness risk of the convolution rule, not a timing fluke: 160 ms for 1.29e12 "
    "direct-convolution FLOPs is 8.05 TFLOP/s, 99 % of the T4's FP32 peak (8.1, boost clock) "
    "and 1.6× the best the same T4 reaches on SGEMM (level1/6: 4.94 TFLOP/s) or on any other "
    "level-1 convolution (≤ 4.2). cuDNN must have run a reduced-arithmetic algorithm (FFT "
    "or Winograd: PyTorch's cuDNN engine filter drops down-converting and, without TF32, "
    "tensor-core engines, never FFT or Winograd ones), which does fewer multiplies than the "
    "2·Ci·taps per output the conv rule charges (METHOD.md, Costs); the "
    "bound held by 0.6 %. Only GPUs without TF32 (T4) show it: elsewhere the TF32 peak the "
    "bound assumes for cuDNN is far above what the FP32 FFT path reaches.",
    ("A100_modal", "level1/13_Matmul_for_symmetric_matrices.py"):
    "tight, not over: 2·4096³ FLOPs in 7.23 ms is cuBLAS SGEMM at 19.0 TFLOP/s, 97.5 % of the "
    "A100's FP32 peak (19.5 at the 1410 MHz boost clock), matmuls in full FP32 "
    "(allow_tf32 False).",
}


@dataclass(frozen=True)
class Bound:
    """One analysed problem: its speed of light (ms) per data mode, per GPU key."""

    path: Path
    sol_ms: dict[str, dict[str, float]]  #: data mode → GPU key → SoL (ms)


@dataclass(frozen=True)
class Check:
    """One problem on one setup: its bound per data mode against its fastest measured time."""

    setup: str
    name: str
    sol_ms: dict[str, float]  #: data mode → SoL (ms) on the setup's GPU
    measured_ms: float
    mode: str  #: the timing mode that was fastest

    @property
    def ratio(self) -> float:
        """The largest SoL / measured over the data modes (above 1: the bound is unsound)."""
        return max(self.sol_ms.values()) / self.measured_ms


def mode_files(data: Path) -> dict[str, str]:
    """Timing mode → file name, for every ``baseline_time_<mode>.json`` of any setup."""
    names = sorted({p.name for p in (data / "timings").glob("*/baseline_time_*.json")})
    return {name.removeprefix("baseline_time_").removesuffix(".json"): name for name in names}


def mode_label(mode: str) -> str:
    return "eager" if mode == "torch" else mode.removeprefix("torch_compile_")


def analyse(paths: Sequence[Path], gpus: Sequence[str], jobs: int, timeout_s: float
            ) -> tuple[list[Bound], list[str], Counter]:
    """Bounds of the problems analysed in every data mode, the failures ("name (data): why"),
    and how many analyses saw each set of math switches."""
    sols: dict[str, dict[str, dict[str, float]]] = {}
    failures: list[str] = []
    switches: Counter = Counter()
    for data in DATA_MODES:
        print(f"data={data}:", file=sys.stderr)
        progress = Progress(len(paths))
        progress.start(jobs)
        batch = analyze_batch(
            paths, ANALYSED_ON, "fp32", cache="warm", jobs=jobs, timeout_s=timeout_s,
            on_done=progress, data=data, also_on=gpus,
        )
        for problem in batch.problems:
            if problem.ok:
                sols.setdefault(problem.path, {})[data] = problem.result["sol_ms_on"]
                switches[_switches(problem.result)] += 1
            else:
                why = (problem.error or problem.status).removeprefix(problem.path + ": ")
                failures.append(f"{problem.name} (data={data}): {why}")
    bounds = [
        Bound(Path(path), by_data)
        for path, by_data in sols.items()
        if len(by_data) == len(DATA_MODES)
    ]
    return bounds, failures, switches


def _switches(result: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(result["math_switches"].items()))


def compare(bounds: Sequence[Bound], timings: dict, setups: Sequence[str]) -> list[Check]:
    """Every (setup, problem) with a time: the bound against the fastest mode's fastest trial."""
    checks = []
    for setup in setups:
        for bound in bounds:
            times = {
                mode: lookup_time(table, level_of(bound.path), bound.path.name)
                for (where, mode), table in timings.items()
                if where == setup
            }
            times = {mode: ms for mode, ms in times.items() if ms}
            if not times:
                continue
            fastest = min(times, key=times.__getitem__)
            checks.append(Check(
                setup, run_name(bound.path),
                {data: sol[SETUPS[setup]] for data, sol in bound.sol_ms.items()},
                times[fastest], mode_label(fastest),
            ))
    return checks


# --- Report ----------------------------------------------------------------------------------


def _summary(checks: Sequence[Check], setups: Sequence[str], modes: dict[str, list[str]]
             ) -> list[str]:
    lines = [
        "| set | GPU | modes timed | problems compared | SoL above measured | max SoL / measured "
        "| median (any) | median (given) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for setup in setups:
        mine = [c for c in checks if c.setup == setup]
        if not mine:
            continue
        medians = [
            statistics.median(c.sol_ms[data] / c.measured_ms for c in mine) for data in DATA_MODES
        ]
        lines.append(
            f"| {setup} | `{SETUPS[setup]}` | {', '.join(modes[setup])} | {len(mine)} "
            f"| {sum(c.ratio > 1 for c in mine)} | {max(c.ratio for c in mine):.3f} "
            f"| {medians[0]:.3f} | {medians[1]:.3f} |"
        )
    return lines


def _check_table(checks: Sequence[Check]) -> list[str]:
    lines = [
        "| problem | SoL any (ms) | SoL given (ms) | fastest measured (ms) | its mode "
        "| SoL / measured |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c.name} | {c.sol_ms['any']:.4g} | {c.sol_ms['given']:.4g} | {c.measured_ms:.4g} "
        f"| {c.mode} | {c.ratio:.3f} |"
        for c in checks
    ]
    return lines


def report(checks: Sequence[Check], bounds: Sequence[Bound], problems: int, failures: list[str],
           switches: Counter, setups: Sequence[str], modes: dict[str, list[str]],
           command: str, seconds: float) -> str:
    above = sorted((c for c in checks if c.ratio > 1), key=lambda c: -c.ratio)
    lines = [
        "# Soundness: the speed of light against real GPU times",
        "",
        f"Written by `{command}` ({seconds:.0f} s); do not edit by hand.",
        "",
        "Every calibration problem (KernelBench levels 1–3 at the timed revision) is analysed "
        "once per data mode (the bound for `any` input values and for the `given` ones) at what "
        f"the timings ran — fp32, PyTorch's default math switches, warm cache (no L2 flush) — on "
        f"`{ANALYSED_ON}`, then re-priced on each setup's GPU (`Result.on`, no retrace). Measured: "
        "the fastest trial (`min` of 100) of the fastest mode timed on that setup. A sound bound "
        "never exceeds it: SoL / measured ≤ 1.",
        "",
        f"- problems: {problems}; analysed in both data modes: {len(bounds)}; failed analyses: "
        f"{len(failures)}",
        f"- (setup, problem) pairs compared: {len(checks)}; **SoL above a measured time: "
        f"{len(above)}**",
        "- math switches the analyses saw: "
        + "; ".join(f"{s} ({n})" for s, n in switches.most_common()),
        "",
        "## Per setup",
        "",
        *_summary(checks, setups, modes),
        "",
    ]
    if above:
        lines += ["## SoL above a measured time (unsound)", "", *_check_table(above), ""]
    lines += [f"## Closest approaches (top {CLOSEST} by SoL / measured, per setup)", ""]
    for setup in setups:
        mine = sorted((c for c in checks if c.setup == setup), key=lambda c: -c.ratio)
        if mine:
            lines += [f"### {setup} (`{SETUPS[setup]}`)", "", *_check_table(mine[:CLOSEST]), ""]
    noted = [(c, NOTES[(c.setup, c.name)]) for c in checks if (c.setup, c.name) in NOTES]
    if noted:
        lines += ["## Notes on the closest (checked by hand)", ""]
        lines += [f"- {c.setup}, {c.name} ({c.ratio:.3f}): {note}" for c, note in noted]
        lines += [""]
    if failures:
        lines += ["## Failed analyses", "", *[f"- {f}" for f in failures], ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"the calibration data folder (default {DEFAULT_DATA})")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--limit", type=int, help="only the first N problems (a partial run)")
    parser.add_argument("--level", help="only these levels, e.g. 1,2 (a partial run)")
    parser.add_argument("--setups", help="only these setups, comma-separated (a partial run)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per problem")
    args = parser.parse_args(argv)
    if not (args.data / "problems").is_dir() or not (args.data / "timings").is_dir():
        parser.error(f"{args.data}: no problems/ and timings/ folders; pass --data DIR "
                     "(the calibration data is not part of this repository)")
    setups = args.setups.split(",") if args.setups else list(SETUPS)
    unknown = set(setups) - set(SETUPS)
    if unknown:
        parser.error(f"unknown setup(s) {', '.join(sorted(unknown))}; use {', '.join(SETUPS)}")
    levels = {int(part) for part in args.level.split(",")} if args.level else None
    paths = discover([args.data / "problems"], levels)[:args.limit]
    files = mode_files(args.data)
    timings = setup_timings(args.data, files, stat="min")
    modes = {s: [mode_label(m) for (where, m) in timings if where == s] for s in setups}
    started = time.perf_counter()
    gpus = sorted({SETUPS[s] for s in setups})
    bounds, failures, switches = analyse(paths, gpus, args.jobs, args.timeout)
    checks = compare(bounds, timings, setups)
    command = "python benchmarks/soundness.py " + " ".join(argv if argv is not None
                                                            else sys.argv[1:])
    text = report(checks, bounds, len(paths), failures, switches, setups, modes,
                  command.strip(), time.perf_counter() - started)
    print(text)
    partial = args.limit is not None or levels is not None or args.setups is not None
    if partial:
        with tempfile.NamedTemporaryFile("w", prefix="soundness-", suffix=".md",
                                         delete=False) as out:
            out.write(text)
        print(f"partial run: wrote {out.name} (not {DOC.relative_to(ROOT)})", file=sys.stderr)
    else:
        DOC.write_text(text, encoding="utf-8")
        print(f"wrote {DOC}", file=sys.stderr)
    return 1 if any(c.ratio > 1 for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
