"""Cross-validate the performance model's trace-measured constants on real kernels, and take each
kernel family's estimate band from the held-out errors:

    python benchmarks/estimate_cv.py ../shared/traces                     # print the tables
    python benchmarks/estimate_cv.py ../shared/traces --write docs/validation.md

1. Every profiler trace in the folder is read and priced by ``torchroofline trace`` (the GPU it
   names; ``--gpu-of`` for a driver name the table does not know); each priced op keeps the
   model's input (``OpFigures.program``), so the model prices it again under other constants.
2. The constants measured on traces (:data:`FITTED`: a kernel's fill latency and a
   flash-attention wave, both in clock cycles, so a GPU takes them at its own clocks; the GEMM
   share of the tensor peak; the host-copy share of the link) are fitted — one common value,
   then one per vendor (whose runtime and libraries run the kernels), then one per GPU
   architecture, each level only for the constants its ops inform — by coordinate descent in
   log space on the |log2(estimate / measured)| of the ops of ≥ 3 µs, counted per op *and*
   weighted by their measured time, plus each trace's total. Every other constant stays as
   committed (datasheet facts, kernel counts and the KernelBench fit of docs/calibration.md).
3. Three fits are reported side by side, per trace: on all traces (in-sample); without the
   trace itself (leave one trace out); without every trace of its GPU (leave one GPU out: its
   architecture then takes its vendor's constants, as an unseen GPU of a known vendor does;
   with no other GPU of its vendor, the common ones but for :data:`UNSEEN_VENDOR`).
4. Each family's band is the 5th-95th percentile of measured / estimated over the ops held out
   by (3)'s trace folds; whether it held is checked on each trace with bands taken from the
   *other* traces' residuals. A band is never narrower than 2× either way (:data:`BAND_FLOOR`).
   The table for ``price/bands.py`` is printed at the end.

Not run by tests or CI (they do not have the traces).
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from trace_accuracy import write

from torchroofline.price.bands import DEFAULT_BAND, Band
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import CDNA_FILL_CYCLES, DEFAULT_PARAMS, EstimateParams
from torchroofline.price.gpu_spec import GPUSpec
from torchroofline.price.hardware import get_gpu, list_gpus
from torchroofline.price.host_copies import DEFAULT_HOST_LINK_BYTES_PER_S
from torchroofline.price.kernel_load import ProgramLoad
from torchroofline.suites.kineto import analyze_trace

#: Ops shorter than this are mostly the GPU's own launch latency: not counted (as
#: benchmarks/trace_accuracy.py).
FLOOR_S = 3e-6
WITHIN = 2.0
#: Driver names the GPU table does not know, by the start of the trace's file name.
GPU_OF = {"a100_hta": "a100-40gb"}
#: Held-out ops a family needs for a band of its own.
BAND_MIN_OPS = 20
BAND_QUANTILES = (0.05, 0.95)
#: The narrowest band: the 2× the model is held to. A family's spread on the other traces
#: understates its spread on an unseen one (checked nested, per trace: the bare 5th-95th
#: percentiles held on 68 % of the held-out ops, with this floor on 85 %).
BAND_FLOOR = (0.5, 2.0)
BLOCK = "estimate-cv"
#: Each architecture of the GPU table and its vendor (whose software runs its kernels).
ARCHITECTURE_VENDOR = {gpu.architecture: gpu.vendor for gpu in list_gpus()}


@dataclass(frozen=True)
class Op:
    """One priced op instance: its trace, its GPU's architecture, the model's input and the
    measured GPU time."""

    trace: str
    gpu: str
    vendor: str
    architecture: str
    program: ProgramLoad
    measured_s: float
    family: str  #: the family of its longest kernel under the committed constants


# --- The constants fitted here ---------------------------------------------------------------


def _gemm(params: EstimateParams, value: float) -> dict:
    return {"matmul_fraction": {**params.matmul_fraction, "gemm": value}}


#: name → (start, low, high, the replacement it makes on an EstimateParams). The latencies are
#: fitted in clock cycles (fill: of the SM clock; an attention wave: of the tensor clock), so a
#: value measured on one GPU reaches another at that GPU's clocks.
FITTED: dict[str, tuple[float, float, float, Callable[[EstimateParams, float], dict]]] = {
    "fill_cycles": (4000, 1000, 20000, lambda p, v: {"fill_cycles": v}),
    "matmul_fraction.gemm": (0.6, 0.2, 0.95, _gemm),
    "attention_wave_cycles": (3e4, 4e3, 1.2e5, lambda p, v: {"attention_wave_cycles": v}),
    "host_copy_fraction": (0.5, 0.1, 0.9, lambda p, v: {"host_copy_fraction": v}),
}
#: Of those, the ones a vendor's software (runtime, cuBLAS or hipBLASLt, the attention kernels)
#: and then an architecture get values of their own (a link share is the server's).
PER_ARCHITECTURE = ("fill_cycles", "matmul_fraction.gemm", "attention_wave_cycles")
_OWN_KEYS = {"fill_cycles", "matmul_fraction", "attention_wave_cycles"}
#: What an architecture takes for a constant its vendor's ops in the fit do not inform, where
#: not the common value: no wave floor (a library's wave is not another vendor's library's),
#: and ROCm's kernel fill from the MI350X's measured per-kernel floor (issue 39; not one of
#: these traces).
UNSEEN_VENDOR: dict[str, dict[str, float]] = {
    "NVIDIA": {"attention_wave_cycles": 0.0},
    "AMD": {"attention_wave_cycles": 0.0, "fill_cycles": CDNA_FILL_CYCLES},
}
#: The constants fitted to a common value: those some vendor without data of its own reads
#: (a wave floor is never common: every vendor's is its own library's).
COMMON = tuple(name for name in FITTED
               if not all(name in unseen for unseen in UNSEEN_VENDOR.values()))


def _runs_flash_attention(op: Op) -> bool:
    return any(load.family == "flash_attention" for load in op.program.eager)


def _crosses_the_link(op: Op) -> bool:
    """A host copy whose bytes take the link longer than a kernel's fill at the committed share:
    ``.item()``'s scalar copies (1-8 B, 1-2 µs of latency) say nothing of the link's share."""
    params = DEFAULT_PARAMS.for_gpu(op.program.gpu)
    link = op.program.gpu.host_link_bytes_per_s or DEFAULT_HOST_LINK_BYTES_PER_S
    return any(load.host_bytes / (params.host_copy_fraction * link) >= params.fill_latency_s
               for load in op.program.eager)


#: The ops that can inform a constant, where not all: a vendor or an architecture gets a value of
#: its own only for the constants its ops inform (the A100 trace runs no flash attention), and a
#: common constant no op informs keeps its committed value (without the A100 trace, no copy
#: crosses the host link long enough to show its share: the fit drifted to its bound, 0.9).
INFORMED_BY: dict[str, Callable[[Op], bool]] = {"attention_wave_cycles": _runs_flash_attention,
                                                "host_copy_fraction": _crosses_the_link}


def _informed(name: str, ops: Sequence[Op]) -> bool:
    return any(map(INFORMED_BY.get(name, bool), ops))


@dataclass(frozen=True)
class Fitted:
    """The fitted constants: common values, then a vendor's and an architecture's own."""

    common: dict[str, float]
    vendor: dict[str, dict[str, float]]
    architecture: dict[str, dict[str, float]]


def build(fitted: Fitted) -> EstimateParams:
    """DEFAULT_PARAMS with the fitted constants replaced, for every architecture of the GPU
    table: its own values, else its vendor's, else the common ones (:data:`UNSEEN_VENDOR` for a
    vendor without data); its committed entries for these constants dropped."""
    params = DEFAULT_PARAMS
    for name, value in fitted.common.items():
        params = replace(params, **FITTED[name][3](params, value))
    arches = {}
    for arch, vendor in ARCHITECTURE_VENDOR.items():
        entry = {k: v for k, v in DEFAULT_PARAMS.per_architecture.get(arch, {}).items()
                 if k not in _OWN_KEYS}
        values = {**fitted.common, **UNSEEN_VENDOR[vendor], **fitted.vendor.get(vendor, {}),
                  **fitted.architecture.get(arch, {})}
        for name in PER_ARCHITECTURE:
            entry.update(FITTED[name][3](params, values[name]))
        arches[arch] = entry
    return replace(params, per_architecture=arches)


# --- Pricing and loss ------------------------------------------------------------------------


def estimates(ops: Sequence[Op], params: EstimateParams) -> list[float]:
    """Each op's eager GPU estimate (s) under ``params``; each distinct program priced once."""
    done: dict[tuple[int, str], float] = {}
    found = []
    for op in ops:
        key = (id(op.program), op.gpu)
        if key not in done:
            gpu = op.program.gpu
            on_gpu = params.for_gpu(gpu)
            done[key] = sum(kernel_gpu_s(load, gpu, on_gpu, op.program.cache)
                            for load in op.program.eager)
        found.append(done[key])
    return found


def loss(ops: Sequence[Op], params: EstimateParams) -> float:
    """Per trace, each trace weighing the same: the mean |log2 error| of its ops (≥ 3 µs),
    three times as steep outside 2×, counted per op and weighted by measured time, plus the
    |log2| of its total. Their mean over the traces."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * 6)
    for op, estimate in zip(ops, estimates(ops, params), strict=True):
        mine = sums[op.trace]
        mine[0] += estimate
        mine[1] += op.measured_s
        if op.measured_s < FLOOR_S:
            continue
        error = abs(math.log2(estimate / op.measured_s))
        steep = error + 2 * max(error - 1, 0)
        mine[2] += steep
        mine[3] += 1
        mine[4] += steep * op.measured_s
        mine[5] += op.measured_s
    return statistics.mean(
        abs(math.log2(total / measured)) + counted / max(n, 1) + timed / max(long_s, 1e-30)
        for total, measured, counted, n, timed, long_s in sums.values()
    )


def fit_values(ops: Sequence[Op]) -> Fitted:
    """The FITTED constants on ``ops``: common values on all of them, then per vendor on its
    ops, then per architecture on its own (:func:`build` makes the parameters)."""
    common = {name: FITTED[name][0] for name in COMMON if _informed(name, ops)}
    fitted = Fitted(_descend(ops, Fitted(common, {}, {}), None, None), {}, {})
    for vendor in sorted({op.vendor for op in ops}):
        mine = [op for op in ops if op.vendor == vendor]
        start = {name: fitted.common.get(name, FITTED[name][0])
                 for name in PER_ARCHITECTURE if _informed(name, mine)}
        fitted = _descend(mine, replace(fitted, vendor={**fitted.vendor, vendor: start}),
                          "vendor", vendor)
    for arch in sorted({op.architecture for op in ops}):
        mine = [op for op in ops if op.architecture == arch]
        start = {name: value for name, value in fitted.vendor[mine[0].vendor].items()
                 if _informed(name, mine)}
        fitted = _descend(mine, replace(fitted, architecture={**fitted.architecture,
                                                              arch: start}),
                          "architecture", arch)
    return fitted


def _descend(ops: Sequence[Op], fitted: Fitted, level: str | None, key: str | None):
    """Coordinate descent in log space of the common constants (``level`` None) or of one
    vendor's or architecture's; returns the common values, or ``fitted`` with that level's."""
    values = dict(getattr(fitted, level)[key]) if level else dict(fitted.common)

    def with_values(trial: dict) -> Fitted:
        if not level:
            return replace(fitted, common=trial)
        return replace(fitted, **{level: {**getattr(fitted, level), key: trial}})

    best = loss(ops, build(with_values(values)))
    for step in (0.5, 0.2, 0.08, 0.03):
        for name in values:
            _, low, high, _ = FITTED[name]
            improved = True
            while improved:
                improved = False
                for sign in (1, -1):
                    value = min(max(values[name] * math.exp(sign * step), low), high)
                    trial = {**values, name: value}
                    if value == values[name]:
                        continue
                    found = loss(ops, build(with_values(trial)))
                    if found < best - 1e-9:
                        values, best, improved = trial, found, True
                        break
    return with_values(values) if level else values


# --- Data ------------------------------------------------------------------------------------


def load(folder: Path, gpu_of: dict[str, str]) -> list[Op]:
    ops = []
    for path in sorted(p for p in folder.iterdir() if re.search(r"\.json(\.gz)?$", p.name)):
        gpu = next((key for start, key in gpu_of.items() if path.name.startswith(start)), None)
        report = analyze_trace(path, gpu)
        name = path.name.removesuffix(".gz").removesuffix(".json")
        for instance in report.priced:
            program = instance.figures.program
            if program is None or not program.eager:
                continue
            on_gpu = DEFAULT_PARAMS.for_gpu(program.gpu)
            longest = max(program.eager,
                          key=lambda k: kernel_gpu_s(k, program.gpu, on_gpu, program.cache))
            ops.append(Op(name, program.gpu.name, program.gpu.vendor, program.gpu.architecture,
                          program,
                          instance.measured_us * 1e-6, longest.family))
        print(f"read {name}: {len(report.priced)} ops priced", file=sys.stderr, flush=True)
    return ops


# --- Report ----------------------------------------------------------------------------------


def accuracy(ops: Sequence[Op], params: EstimateParams) -> tuple[float, float, int]:
    """(share of ops ≥ 3 µs within 2×, total estimate / total measured, ops ≥ 3 µs)."""
    found = estimates(ops, params)
    timed = [(e, op.measured_s) for e, op in zip(found, ops, strict=True)
             if op.measured_s >= FLOOR_S]
    within = sum(1 / WITHIN <= e / m <= WITHIN for e, m in timed)
    total = sum(found) / sum(op.measured_s for op in ops)
    return within / max(len(timed), 1), total, len(timed)


def bands_from(ratios: dict[str, list[float]]) -> dict[str, Band]:
    """Per family with enough held-out ops: the 5th-95th percentile of measured / estimated,
    never inside :data:`BAND_FLOOR`."""
    found = {}
    for family, values in ratios.items():
        if len(values) < BAND_MIN_OPS:
            continue
        values = sorted(values)
        low = values[int(BAND_QUANTILES[0] * (len(values) - 1))]
        high = values[math.ceil(BAND_QUANTILES[1] * (len(values) - 1))]
        found[family] = Band(round(min(low, BAND_FLOOR[0]), 2),
                             round(max(high, BAND_FLOOR[1]), 2), len(values))
    return found


def held(ops: Sequence[Op], params: EstimateParams, bands: dict[str, Band]) -> tuple[int, int]:
    """(ops ≥ 3 µs whose measured time lies in their family's band, ops ≥ 3 µs)."""
    inside = count = 0
    for op, estimate in zip(ops, estimates(ops, params), strict=True):
        if op.measured_s < FLOOR_S:
            continue
        band = bands.get(op.family, DEFAULT_BAND)
        inside += band.low * estimate <= op.measured_s <= band.high * estimate
        count += 1
    return inside, count


def _cell(share: float, total: float) -> str:
    return f"{100 * share:.0f} % · {total:.2f}"


def run(ops: list[Op]) -> tuple[str, dict[str, Band]]:
    traces = list(dict.fromkeys(op.trace for op in ops))
    gpus = list(dict.fromkeys(op.gpu for op in ops))
    values = fit_values(ops)
    everything = build(values)
    by_trace = {t: [op for op in ops if op.trace == t] for t in traces}
    fold_values = {
        **{("trace", t): fit_values([op for op in ops if op.trace != t]) for t in traces},
        **{("gpu", g): fit_values([op for op in ops if op.gpu != g]) for g in gpus},
    }
    loto = {t: build(fold_values["trace", t]) for t in traces}
    logo = {g: build(fold_values["gpu", g]) for g in gpus}
    committed = DEFAULT_PARAMS
    # held-out residuals, measured / estimated, per family and trace
    residuals: dict[str, dict[str, list[float]]] = {t: defaultdict(list) for t in traces}
    for t in traces:
        for op, estimate in zip(by_trace[t], estimates(by_trace[t], loto[t]), strict=True):
            if op.measured_s >= FLOOR_S:
                residuals[t][op.family].append(op.measured_s / estimate)
    rows, inside_all, count_all = [], 0, 0
    for t in traces:
        mine = by_trace[t]
        gpu = mine[0].gpu
        others: dict[str, list[float]] = defaultdict(list)
        for other in traces:
            if other != t:
                for family, found in residuals[other].items():
                    others[family].extend(found)
        inside, count = held(mine, loto[t], bands_from(others))
        inside_all, count_all = inside_all + inside, count_all + count
        cells = [_cell(*accuracy(mine, p)[:2]) for p in (committed, everything, loto[t], logo[gpu])]
        rows.append(f"| {t} | {gpu} | {accuracy(mine, everything)[2]} | " + " | ".join(cells)
                    + f" | {100 * inside / max(count, 1):.0f} % |")
    pooled: dict[str, list[float]] = defaultdict(list)
    for per_family in residuals.values():
        for family, found in per_family.items():
            pooled[family].extend(found)
    bands = bands_from(pooled)
    header = ("| trace | GPU | ops ≥ 3 µs | committed model | in-sample fit | trace held out "
              "| GPU held out | band held (trace held out) |\n|---|---|---|---|---|---|---|---|\n")
    table = header + "\n".join(rows) + "\n"
    table += (f"\nCells: share of ops ≥ 3 µs within {WITHIN:g}× · total estimate / measured. "
              f"Bands held on {inside_all:,} of {count_all:,} held-out ops "
              f"({100 * inside_all / max(count_all, 1):.0f} %).\n")
    gpus_of = {op.gpu: op.program.gpu for op in ops}
    table += ("\n" + constants_table(values, list(fold_values.values())) + "\n"
              + per_gpu_table({**{f"{g} (GPU held out)": (gpus_of[g], logo[g]) for g in gpus},
                               **{f"{get_gpu(g).name} (no trace)": (get_gpu(g), everything)
                                  for g in UNTRACED}})
              + bands_table(bands))
    return table, bands


#: GPUs of the table whose architecture has no trace, shown with what the fit gives them.
UNTRACED = ("b200", "v100", "l40s", "mi355x")


def constants_table(values: Fitted, folds: Sequence[Fitted]) -> str:
    """The fitted constants on all traces (common, per vendor, per architecture; latencies in
    cycles; — where a level has no value of its own), and their common value's range over the
    held-out folds."""
    columns = [*sorted(values.vendor), *sorted(values.architecture)]
    levels = [values.vendor[c] if c in values.vendor else values.architecture[c]
              for c in columns]
    lines = ["| constant | common | " + " | ".join(columns) + " | common, over the folds |",
             "|---|---|" + "---|" * len(columns) + "---|"]
    for name in FITTED:
        found = [fold.common[name] for fold in folds if name in fold.common]
        spread = f"{min(found):.3g} – {max(found):.3g}" if found else "—"
        lines.append(f"| `{name}` | " + " | ".join(
            f"{level[name]:.3g}" if name in level else "—" for level in [values.common, *levels])
                     + f" | {spread} |")
    return "\n".join(lines) + "\n"


def per_gpu_table(cases: dict[str, tuple[GPUSpec, EstimateParams]]) -> str:
    """What a GPU's kernels are priced with: its fill, GEMM share and attention wave."""
    lines = ["| GPU (fit) | fill (µs) | GEMM share | flash-attention wave (µs) |",
             "|---|---|---|---|"]
    for label, (gpu, params) in cases.items():
        on_gpu = params.for_gpu(gpu)
        wave = f"{on_gpu.attention_wave_s * 1e6:.1f}" if on_gpu.attention_wave_s else "none"
        lines.append(f"| {label} | {on_gpu.fill_latency_s * 1e6:.2f} | "
                     f"{on_gpu.matmul_fraction['gemm']:.2f} | {wave} |")
    return "\n".join(lines) + "\n"


def bands_table(bands: dict[str, Band]) -> str:
    lines = ["\n| family | band: measured / estimated | held-out ops |", "|---|---|---|"]
    lines += [f"| {family} | {band.low:.2f} – {band.high:.2f} | {band.held_out_ops:,} |"
              for family, band in sorted(bands.items())]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of torch.profiler traces")
    parser.add_argument("--write", type=Path, metavar="DOC.md", help="update this doc's table")
    args = parser.parse_args()
    body, bands = run(load(args.folder, GPU_OF))
    if args.write:
        write(args.write, body, BLOCK)
        print(f"wrote {args.write}")
    else:
        print(body, end="")
    print("\nFAMILY_BANDS for price/bands.py:")
    for family, band in sorted(bands.items()):
        print(f'    "{family}": Band({band.low}, {band.high}, {band.held_out_ops}),')


if __name__ == "__main__":
    main()
