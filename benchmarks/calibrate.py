"""Fit the performance model's constants on real KernelBench timings and write docs/calibration.md.

    python benchmarks/calibrate.py --data DIR [--rounds 4] [--out FILE] [--hold-out SETUPS]

The data (not in this repository; never copied into it): ``problems/level{1,2,3}/*.py`` (the
KernelBench problem files at the revision that was timed) and ``timings/<set>/baseline_time_
<mode>.json`` for nine GPU setups (PyTorch 2.5, fp32, no L2 flush between trials: warm cache).

What it does:

1. analyzes every problem once (warm cache), then re-prices it on each setup's GPU with
   ``Result.on`` and keeps only the model's input
   (:class:`~torchroofline.price.kernel_load.ProgramLoad`), so the fit re-runs the model itself,
   not a copy of it;
2. fits the shared constants of :data:`~torchroofline.price.estimate_params.DEFAULT_PARAMS` plus
   one host speed per *training* setup (CPU costs differ between machines) by coordinate descent
   in log space on a robust loss over |log2(estimate / measured)|; the default host profile is the
   geometric mean of the training hosts;
3. reports every setup, and separately the held-out ones, with the default host and with only
   their host speed fitted (one number, what a user gets from timing one tiny model), per level;
4. writes docs/calibration.md, the pictures in docs/img/ and prints the fitted constants to
   paste into estimate_params.py.

Not run by tests or CI (they do not have the data).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from torchroofline.price.estimate_params import DEFAULT_PARAMS, EstimateParams, HostCosts
from torchroofline.price.kernel_load import ProgramLoad
from torchroofline.price.modes import estimate_modes
from torchroofline.suites.kernelbench import analyze_file, discover, load_timings, lookup_time
from torchroofline.suites.validate import MODES, Accuracy, plot_estimates

ROOT = Path(__file__).resolve().parent.parent

#: Setup → torchroofline GPU key (the data's README).
SETUPS: dict[str, str] = {
    "A100_modal": "a100-40gb",
    "A100-80GB_modal": "a100-80gb",
    "A10G_modal": "a10g",
    "L40S_modal": "l40s",
    "L40S_matx3": "l40s",
    "L4_modal": "l4",
    "T4_modal": "t4",
    "H100_together": "h100-sxm",
    "B200_together": "b200",
}
#: Held out of the fit: a GPU generation absent from the training set (Hopper), a small Ada
#: part whose big sibling is in it, and an Ampere GDDR part.
HELD_OUT = ("H100_together", "L4_modal", "A10G_modal")

#: Timing file of each estimate mode.
TIMING_FILES = {
    "eager": "baseline_time_torch.json",
    "compile": "baseline_time_torch_compile_inductor_default.json",
    "cudagraph": "baseline_time_torch_compile_inductor_reduce-overhead.json",
}
_ESTIMATE_OF = {"eager": "eager", "compile": "fused", "cudagraph": "cudagraph"}


@dataclass(frozen=True)
class Sample:
    """One problem on one setup: the model's input and the measured times (s) per mode."""

    setup: str
    level: int
    file: str
    program: ProgramLoad
    sol_s: float
    measured_s: dict[str, float]


# --- Data ------------------------------------------------------------------------------------


def setup_timings(
    data: Path, files: Mapping[str, str] = TIMING_FILES, stat: str = "mean"
) -> dict[tuple[str, str], dict[tuple[int | None, str], float]]:
    """(setup, mode) → that setup's times (ms, each entry's ``stat``) for every mode in
    ``files`` (mode → timing file name) the setup has."""
    return {
        (setup, mode): load_timings(data / "timings" / setup / name, stat)
        for setup in SETUPS
        for mode, name in files.items()
        if (data / "timings" / setup / name).is_file()
    }


def load_samples(data: Path) -> list[Sample]:
    timings = setup_timings(data)
    samples: list[Sample] = []
    started = time.perf_counter()
    for path in discover([data / "problems"]):
        try:
            result = analyze_file(path, SETUPS["H100_together"], "fp32", cache="warm")
        except Exception as error:  # noqa: BLE001 — reported and skipped
            print(f"skipped {path.name}: {str(error).splitlines()[0][:120]}", file=sys.stderr)
            continue
        level = int(path.parent.name.removeprefix("level"))
        priced = {key: result.on(key) for key in set(SETUPS.values())}
        for setup, key in SETUPS.items():
            measured = {
                mode: lookup_time(timings[(setup, mode)], level, path.name)
                for mode in TIMING_FILES
                if (setup, mode) in timings
            }
            measured = {mode: ms * 1e-3 for mode, ms in measured.items() if ms}
            if measured:
                on_gpu = priced[key]
                samples.append(
                    Sample(setup, level, path.name, on_gpu.performance.program, on_gpu.sol_s,
                           measured)
                )
    print(f"analyzed {len({(s.level, s.file) for s in samples})} problems in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
    return samples


# --- The model under a parameter set -----------------------------------------------------------


def predicted(sample: Sample, params: EstimateParams) -> dict[str, float]:
    modes = estimate_modes(sample.program, params).modes
    return {
        mode: max(modes[_ESTIMATE_OF[mode]].total_s, sample.sol_s) for mode in sample.measured_s
    }


def log_errors(samples: list[Sample], params: EstimateParams, modes: tuple[str, ...]
               ) -> dict[str, list[float]]:
    errors: dict[str, list[float]] = {mode: [] for mode in modes}
    for sample in samples:
        for mode, estimate in predicted(sample, params).items():
            if mode in errors:
                errors[mode].append(math.log2(estimate / sample.measured_s[mode]))
    return errors


def loss(errors: dict[str, list[float]]) -> float:
    """Mean |log2 error|, three times as steep outside 2× (the target is the share within 2×)."""
    values = [abs(x) + 2 * max(abs(x) - 1, 0) for errs in errors.values() for x in errs]
    return sum(values) / max(len(values), 1)


# --- Fitted constants: name → (read, write) on EstimateParams --------------------------------


def _field(name: str) -> tuple[Callable, Callable]:
    return (lambda p: getattr(p, name), lambda p, v: replace(p, **{name: v}))


def _host(name: str) -> tuple[Callable, Callable]:
    return (
        lambda p: getattr(p.host, name),
        lambda p, v: replace(p, host=replace(p.host, **{name: v})),
    )


def _fraction(family: str) -> tuple[Callable, Callable]:
    return (
        lambda p: p.matmul_fraction[family],
        lambda p, v: replace(p, matmul_fraction={**p.matmul_fraction, family: min(v, 1.0)}),
    )


#: Constants measured on real kernels (the profiler traces of docs/validation.md), not fitted
#: here: the whole-model times of these small fp32 problems hide a kernel's own duration behind
#: host overhead, and they have no flash attention (fp32 SDPA runs the memory-efficient kernel).
#: They stay at their DEFAULT_PARAMS values, with their per-architecture values
#: (DEFAULT_PARAMS.per_architecture).
MEASURED_ON_TRACES = ("fill_latency_s", "fill_cycles", "matmul_latency_s",
                      "strided_access_rate_per_sm", "attention_wave_s", "attention_wave_cycles",
                      "flash_attention")
#: Kept at their DEFAULT_PARAMS values as well: the data is flat in them (fp32 SDPA is in two
#: problems, both host-bound at any value; left free, it drifts to its range limit).
FLAT = ("attention",)

FITTED: dict[str, tuple[Callable, Callable]] = {
    **{name: _field(name) for name in (
        "conv_layout_passes", "row_bandwidth_bytes_per_s",
        "rnn_step_s", "cudagraph_gap_s",
    )},
    **{f"matmul_fraction.{f}": _fraction(f) for f in DEFAULT_PARAMS.matmul_fraction
       if f not in MEASURED_ON_TRACES + FLAT},
    **{f"host.{name}": _host(name) for name in (
        "eager_call_s", "eager_op_s", "eager_view_s", "eager_module_s", "launch_s",
        "conv_call_s", "compile_call_s", "compile_kernel_s", "cudagraph_call_s",
    )},
}
#: The physical range of each constant (published microbenchmarks and profiles put them there);
#: the fit never leaves it, so a constant cannot absorb an effect the model lacks.
RANGES: dict[str, tuple[float, float]] = {
    "conv_layout_passes": (0.0, 2.0),  # none (NCHW kernels) to both transposes (in and out)
    "row_bandwidth_bytes_per_s": (1e9, 50e9),  # one block: ~KBs in flight / ~µs latency
    "rnn_step_s": (2e-6, 30e-6),
    "cudagraph_gap_s": (0.3e-6, 4e-6),
    **{f"matmul_fraction.{f}": (0.01, 1.0) for f in DEFAULT_PARAMS.matmul_fraction
       if f not in MEASURED_ON_TRACES + FLAT},
    "host.eager_call_s": (1e-6, 50e-6),
    "host.eager_op_s": (3e-6, 30e-6),  # PyTorch eager per-op overhead: ~5-20 µs (Python+dispatch)
    "host.eager_view_s": (0.5e-6, 10e-6),
    "host.eager_module_s": (1e-6, 8e-6),  # nn.Module.__call__ alone: a few µs of Python
    "host.launch_s": (1e-6, 5e-6),  # cudaLaunchKernel: 2-5 µs of CPU
    # cuDNN descriptors and plan lookup: a one-conv problem takes 15 µs more than a one-op one
    # on the H100 host (0.55× the default profile): at most ~20 µs of the default profile
    "host.conv_call_s": (1e-6, 20e-6),
    "host.compile_call_s": (10e-6, 200e-6),
    "host.compile_kernel_s": (2e-6, 40e-6),
    "host.cudagraph_call_s": (10e-6, 200e-6),
}


def _set(params: EstimateParams, name: str, value: float) -> EstimateParams:
    low, high = RANGES[name]
    return FITTED[name][1](params, min(max(value, low), high))


#: Where the descent starts: mid-range physical values, independent of the committed fit so
#: that a rerun reproduces it.
START = EstimateParams(
    host=HostCosts(
        eager_call_s=5e-6, eager_op_s=12e-6, eager_view_s=3e-6, eager_module_s=5e-6,
        launch_s=4e-6, conv_call_s=10e-6, compile_call_s=60e-6, compile_kernel_s=15e-6,
        cudagraph_call_s=60e-6,
        source=DEFAULT_PARAMS.host.source,
    ),
    hbm_fraction=DEFAULT_PARAMS.hbm_fraction,
    fill_latency_s=DEFAULT_PARAMS.fill_latency_s,
    fill_cycles=DEFAULT_PARAMS.fill_cycles,
    matmul_latency_s=DEFAULT_PARAMS.matmul_latency_s,
    vector_fraction=0.5,
    matmul_fraction={"gemm": 0.7, "conv": 0.4, "conv3d": 0.2, "conv_transposed": 0.1,
                     "conv_transposed3d": 0.1,
                     "conv_grouped": 0.05, "rnn": 0.2,
                     **{f: DEFAULT_PARAMS.matmul_fraction[f] for f in MEASURED_ON_TRACES + FLAT
                        if f in DEFAULT_PARAMS.matmul_fraction}},
    conv_layout_passes=1.0,
    strided_access_rate_per_sm=DEFAULT_PARAMS.strided_access_rate_per_sm,
    attention_wave_s=DEFAULT_PARAMS.attention_wave_s,
    attention_wave_cycles=DEFAULT_PARAMS.attention_wave_cycles,
    per_architecture=DEFAULT_PARAMS.per_architecture,
    per_gpu=DEFAULT_PARAMS.per_gpu,
    l2_bandwidth_bytes_per_s=DEFAULT_PARAMS.l2_bandwidth_bytes_per_s,
    source=DEFAULT_PARAMS.source,
)


@dataclass
class Fit:
    params: EstimateParams
    host_scale: dict[str, float]

    def for_setup(self, setup: str) -> EstimateParams:
        return self.params.with_host(self.params.host.scaled(self.host_scale.get(setup, 1.0)))


def _setup_loss(samples_by_setup: dict[str, list[Sample]], fit: Fit, setup: str) -> float:
    errors = log_errors(samples_by_setup[setup], fit.for_setup(setup), tuple(TIMING_FILES))
    return loss(errors) * sum(len(e) for e in errors.values())


def fit_constants(samples: list[Sample], train: list[str], rounds: int) -> Fit:
    """Coordinate descent in log space: shared constants, then each training host's speed."""
    by_setup = {s: [x for x in samples if x.setup == s] for s in train}
    fit = Fit(START, {s: 1.0 for s in train})
    per_setup = {s: _setup_loss(by_setup, fit, s) for s in train}
    steps = [0.35, 0.17, 0.08, 0.04, 0.02][:rounds]
    for step in steps:
        for name in FITTED:
            per_setup = _descend_shared(by_setup, fit, name, step, per_setup)
        for setup in train:
            per_setup[setup] = _descend_scale(by_setup, fit, setup, step, per_setup[setup])
        total = sum(per_setup.values()) / sum(len(v) for v in by_setup.values())
        print(f"step {step:.2f}: loss {total:.4f}", file=sys.stderr, flush=True)
    # the default host is the geometric mean of the training hosts
    centre = math.exp(statistics.mean(math.log(v) for v in fit.host_scale.values()))
    fit.params = fit.params.with_host(replace(fit.params.host.scaled(centre),
                                              source=DEFAULT_PARAMS.host.source))
    fit.host_scale = {s: v / centre for s, v in fit.host_scale.items()}
    return fit


def _descend_shared(by_setup, fit: Fit, name: str, step: float, per_setup: dict) -> dict:
    read, _ = FITTED[name]
    improved = True
    while improved:
        improved = False
        for sign in (1, -1):
            value = read(fit.params) * math.exp(sign * step)
            if name == "conv_layout_passes":  # may be 0: step additively
                value = read(fit.params) + sign * step
            trial = Fit(_set(fit.params, name, value), fit.host_scale)
            if read(trial.params) == read(fit.params):
                continue
            losses = {s: _setup_loss(by_setup, trial, s) for s in by_setup}
            if sum(losses.values()) < sum(per_setup.values()) - 1e-9:
                fit.params, per_setup, improved = trial.params, losses, True
                break
    return per_setup


def _descend_scale(by_setup, fit: Fit, setup: str, step: float, current: float) -> float:
    improved = True
    while improved:
        improved = False
        for sign in (1, -1):
            scale = min(max(fit.host_scale[setup] * math.exp(sign * step), 0.25), 4.0)
            scales = {**fit.host_scale, setup: scale}
            value = _setup_loss(by_setup, Fit(fit.params, scales), setup)
            if value < current - 1e-9:
                fit.host_scale, current, improved = scales, value, True
                break
    return current


def host_scale_only(samples: list[Sample], params: EstimateParams) -> float:
    """A held-out setup's host speed, the only number fitted on it (golden-section in log)."""
    def cost(log_scale: float) -> float:
        scaled = params.with_host(params.host.scaled(math.exp(log_scale)))
        return loss(log_errors(samples, scaled, tuple(TIMING_FILES)))

    low, high = math.log(0.25), math.log(4.0)
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(30):
        a, b = high - ratio * (high - low), low + ratio * (high - low)
        if cost(a) < cost(b):
            high = b
        else:
            low = a
    return math.exp((low + high) / 2)


# --- Report ----------------------------------------------------------------------------------


def accuracy_rows(samples: list[Sample], params_of: Callable[[str], EstimateParams],
                  group: Callable[[Sample], str]) -> dict[tuple[str, str], Accuracy]:
    ratios: dict[tuple[str, str], list[float]] = {}
    for sample in samples:
        for mode, estimate in predicted(sample, params_of(sample.setup)).items():
            ratios.setdefault((group(sample), mode), []).append(
                estimate / sample.measured_s[mode]
            )
    return {key: Accuracy.of(values) for key, values in ratios.items()}


def _table(rows: dict[tuple[str, str], Accuracy], order: list[str]) -> list[str]:
    lines = [
        "| set | mode | problems | within 2× | within 1.5× | median \\|log2\\| | median ratio "
        "| p10 | p90 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in order:
        for mode in TIMING_FILES:
            acc = rows.get((name, mode))
            if acc is None:
                continue
            lines.append(
                f"| {name} | {mode} | {acc.count} | {acc.within_2x:.0%} | {acc.within_1_5x:.0%} "
                f"| {acc.median_abs_log2:.2f} | {acc.median:.2f} | {acc.p10:.2f} | {acc.p90:.2f} |"
            )
    return lines


def constants_lines(fit: Fit) -> list[str]:
    lines = ["| constant | start | fitted value | range |", "|---|---|---|---|"]
    for name, (read, _) in FITTED.items():
        low, high = RANGES[name]
        value = read(fit.params)
        edge = " (at its range limit)" if value in (low, high) else ""
        lines.append(
            f"| `{name}` | {read(START):.3g} | {value:.3g}{edge} | {low:.3g} – {high:.3g} |"
        )
    return lines


def write_report(samples: list[Sample], fit: Fit, held_scale: dict[str, float], out: Path,
                 seconds: float) -> None:
    train, held_out = list(fit.host_scale), list(held_scale)
    default = lambda setup: fit.params  # noqa: E731
    own_host = lambda setup: fit.for_setup(setup) if setup in fit.host_scale else (  # noqa: E731
        fit.params.with_host(fit.params.host.scaled(held_scale[setup])))
    by_set_default = accuracy_rows(samples, default, lambda s: s.setup)
    by_set_host = accuracy_rows(samples, own_host, lambda s: s.setup)
    by_level = accuracy_rows(samples, own_host, lambda s: f"level{s.level}")
    images = out.parent / "img"
    for mode in TIMING_FILES:
        points = [
            (s.setup, predicted(s, own_host(s.setup))[mode] * 1e3, s.measured_s[mode] * 1e3)
            for s in samples if mode in s.measured_s
        ]
        plot_estimates(points, images / f"calibration_{mode}.png",
                       title=f"{MODES[mode][1]}: estimate vs measured", unit="ms")
    lines = [
        "# Calibration of the performance model",
        "",
        "Generated by `python benchmarks/calibrate.py --data <calibration data>` "
        f"({seconds:.0f} s); do not edit by hand.",
        "",
        "Data: KernelBench levels 1–3 at the revision that was timed "
        f"({len({(s.level, s.file) for s in samples})} problem files analysed; a problem that "
        "cannot be analysed here is named on stderr and left out), real times published for "
        "nine GPU setups (PyTorch 2.5, CUDA 12.4, fp32, CUDA events, no L2 flush: analysed with "
        "`cache=\"warm\"`). Modes: `eager` = eager PyTorch → `eager_estimate`; `compile` = "
        "`torch.compile` default → `fused_estimate`; `cudagraph` = `mode=\"reduce-overhead\"` → "
        "`cudagraph_estimate` (two setups only).",
        "",
        f"Fitted on {', '.join(train)}; held out: {', '.join(held_out)}.",
        "",
        "## Fitted constants",
        "",
        *constants_lines(fit),
        "",
        "Not fitted here, kept at their `DEFAULT_PARAMS` values: "
        + ", ".join(f"`{name}`" for name in MEASURED_ON_TRACES)
        + " (measured on real kernels in profiler traces, docs/validation.md, with their MI300X "
        "values), `hbm_fraction` (measured per memory type on the data's one streaming problem, "
        "`HBM_STREAM_FRACTION` in estimate_params.py) and "
        + ", ".join(f"`matmul_fraction.{name}`" for name in FLAT) + " (the data is flat in it).",
        "",
        "Host speed of each setup (× the default host profile; CPU costs differ by machine):",
        "",
        "| set | host scale | fitted on |",
        "|---|---|---|",
        *[f"| {s} | {v:.2f} | its own timings (training set) |" for s, v in fit.host_scale.items()],
        *[f"| {s} | {v:.2f} | its own timings, this one number only (held out) |"
          for s, v in held_scale.items()],
        "",
        "## Accuracy per setup, each host's speed fitted",
        "",
        "Ratio = estimate / measured mean. Held-out setups: only their host speed was fitted.",
        "",
        *_table(by_set_host, list(SETUPS)),
        "",
        "## Accuracy per setup, default host (no data from the machine at all)",
        "",
        *_table(by_set_default, list(SETUPS)),
        "",
        "## Accuracy per level (all setups, each host's speed fitted)",
        "",
        *_table(by_level, ["level1", "level2", "level3"]),
        "",
        "## Pictures",
        "",
        *[f"![{mode}](img/calibration_{mode}.png)" for mode in TIMING_FILES],
        "",
    ]
    out.write_text("\n".join(lines), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the calibration data folder")
    parser.add_argument("--rounds", type=int, default=4, help="step sizes of the descent (1-5)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "calibration.md")
    parser.add_argument("--hold-out", default=",".join(HELD_OUT),
                        help="setups left out of the fit, comma-separated")
    args = parser.parse_args()
    held_out = [s for s in args.hold_out.split(",") if s]
    unknown = set(held_out) - set(SETUPS)
    if unknown:
        parser.error(f"unknown setup(s) {', '.join(sorted(unknown))}; use {', '.join(SETUPS)}")
    started = time.perf_counter()
    samples = load_samples(args.data)
    train = [s for s in SETUPS if s not in held_out]
    fit = fit_constants([s for s in samples if s.setup in train], train, args.rounds)
    held_scale = {
        setup: host_scale_only([s for s in samples if s.setup == setup], fit.params)
        for setup in held_out
    }
    write_report(samples, fit, held_scale, args.out, time.perf_counter() - started)
    print("# fitted constants for estimate_params.py (DEFAULT_HOST / DEFAULT_PARAMS), 3 digits:")
    for name, (read, _) in FITTED.items():
        print(f"{name} = {read(fit.params):.3g}")
    print({s: round(v, 3) for s, v in {**fit.host_scale, **held_scale}.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
