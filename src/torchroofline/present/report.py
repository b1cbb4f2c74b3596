"""Stage 5: present a :class:`~torchroofline.roofline.Result` — boxed text, JSON dict, units."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..plan.demand.walk import UNKEPT_NOTE_SHARE
from ..price.memory_time import fixed_latency_s
from ..price.precision import rung_name
from ..units import counted, human_bytes, human_ms, percent, si, times
from .breakdown import ModuleCost, module_costs, unconfirmed_figures
from .distributed import distributed_lines

if TYPE_CHECKING:
    from ..plan.memory import BatchFit
    from ..price.estimate_params import EstimateParams
    from ..price.kernel_load import KernelLoad
    from ..price.roofline import Actual, KernelEstimate, Result
    from ..price.shortcuts import Shortcut
    from ..suites.batch_report import BatchReport, ProblemReport

SCHEMA_VERSION = 1
WIDTH = 64

def result_to_dict(result: Result) -> dict[str, Any]:
    """The stable JSON layout (schema_version 1); see the README for every key."""
    from ..price.roofline import roofline_entry

    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "model": result.model_name,
        "gpu": result.gpu.name,
        "gpu_key": result.gpu.key,
        "gpu_clocks": result.gpu.clocks,
        "precision": result.precision,
        "computing_precision": result.computing_precision,
        "math": result.math,
        "math_switches": dataclasses.asdict(result.switches),
        "cache": result.cache,
        "bound_data": result.plans.bound_data,
        "params": result.params,
        "flops": {
            "total": result.flops,
            "tensor": result.tensor_flops,
            "vector": result.vector_flops,
            "executed": result.executed_flops,
        },
        "unkept": {
            "flops_share": result.necessary.unkept_share,
            "where": result.necessary.narrowed_at,
        },
        "constant_output": result.necessary.constant_output,
        "bytes": {
            "unfused": result.unfused_bytes,
            "fused": result.fused_bytes,
            "compulsory": result.compulsory_bytes,
        },
        "kernel_count": {
            "unfused": result.unfused_kernel_count,
            "fused": result.fused_kernel_count,
        },
        "arithmetic_intensity": _finite(result.arithmetic_intensity),
        "ridge_point": result.ridge_point,
        "time_ms": result.time_ms,
        "estimate": result.performance.to_dict(result.sol_s),
        "bottleneck": result.bottleneck,
        "roofline": roofline_entry(result.gpu, result.roofs),
        "kernels": [kernel.to_dict() for kernel in result.kernels],
        "op_count": len(result.ops),
        "unsupported_ops": dict(result.unsupported_ops),
        "rewrites": [shortcut.to_dict() for shortcut in result.rewrites],
        "notes": list(result.notes),
        "unconfirmed_figures": unconfirmed_figures(result),
        "modules": [cost.to_dict() for cost in module_costs(result)],
        "memory": {**result.memory.to_dict(result.gpu), "summary": fit_line(result)},
    }
    if result.actual is not None:
        data["actual"] = result.actual.to_dict()
    if result.phases:
        data["phases"] = {figures.phase: figures.to_dict() for figures in result.phases}
    if result.checkpoint_what_if is not None:
        data["checkpoint"] = result.checkpoint_what_if.to_dict()
    if result.distributed is not None:
        data["distributed"] = result.distributed.to_dict()
    return data


def short_bytes(count: float) -> str:
    """Decimal byte units to three significant digits: ``1.41e11`` → ``"141 GB"``."""
    return human_bytes(count, ".3g")


#: What each memory verdict (memory.MemoryFit.verdict) adds after the figures.
_FIT_WORDS = {
    "fits": "fits",
    "tight": "tight (the blocks fit, the allocator's cached segments do not: it runs only if "
             "the allocator frees its cache and retries)",
    "does not fit": "does not fit",
}


def fit_line(result: Result) -> str:
    """``needs 141 GB, H100 SXM has 80 GB: does not fit``: the eager peak against the GPU."""
    fit = result.memory.fit(result.gpu)
    reserved = (
        f" ({short_bytes(fit.reserved_bytes)} reserved)" if fit.verdict == "tight" else ""
    )
    return (
        f"needs {short_bytes(fit.peak_bytes)}{reserved}, {fit.gpu_name} has "
        f"{short_bytes(fit.capacity_bytes)}: {_FIT_WORDS[fit.verdict]}"
    )


def phase_lines(result: Result) -> list[str]:
    """A training step's table per phase: necessary FLOPs, bytes of each plan, the phase's
    speed of light and the performance model's GPU time of its kernels (eager, compile)."""
    if not result.phases:
        return []
    header = (f"  {'phase':<10} {'FLOPs':>10} {'eager B':>10} {'fused B':>10} "
              f"{'boundary B':>10} {'SoL':>10} {'eager GPU':>10} {'compile GPU':>11}")
    rows = [
        f"  {f.phase:<10} {si(f.flops):>10} {short_bytes(f.eager_bytes):>10} "
        f"{short_bytes(f.fused_bytes):>10} {short_bytes(f.boundary_bytes):>10} "
        f"{human_ms(f.sol_ms):>10} {human_ms(f.eager_gpu_ms):>10} "
        f"{human_ms(f.compile_gpu_ms):>11}"
        for f in result.phases
    ]
    return ["", f"  Training step ({result.trace.step.optimizer} optimizer):", header, *rows,
            *checkpoint_lines(result)]


def checkpoint_lines(result: Result) -> list[str]:
    """The activation-checkpointing what-if, where modules were named."""
    what_if = result.checkpoint_what_if
    if what_if is None:
        return []
    return [
        f"  Checkpoint {', '.join(what_if.patterns)} ({what_if.modules} modules): recompute "
        f"{si(what_if.recompute_flops)}FLOPs, +{human_ms(what_if.recompute_sol_ms)} at SoL, "
        f"+{human_ms(what_if.recompute_eager_gpu_ms)} eager GPU; saves "
        f"{short_bytes(what_if.saved_activation_bytes)} of activations, peak "
        f"{short_bytes(result.memory.peak_bytes)} -> {short_bytes(what_if.peak_bytes)}",
    ]


def batch_fit_line(fit: BatchFit) -> str:
    """``largest batch that fits H100 SXM (80 GB): 412 (needs 79.8 GB; 413 needs 80.1 GB)``."""
    head = f"largest batch that fits {fit.gpu_name} ({short_bytes(fit.capacity_bytes)}): "
    if not fit.batch:
        smallest = min(fit.peaks)
        return head + f"none (batch {smallest:,} needs {short_bytes(fit.peaks[smallest])})"
    above = fit.peaks.get(fit.batch + 1)
    needs, then_needs = human_bytes(fit.peak_bytes), human_bytes(above or 0)
    if above is not None and needs == then_needs:  # "needs 80.00 GB; 266,411 needs 80.00 GB"
        needs, then_needs = f"{fit.peak_bytes:,} B", f"{above:,} B"
    then = f"; {fit.batch + 1:,} needs {then_needs}" if above is not None else ""
    bound = "" if fit.exact else " or more (the search stopped)"
    return head + f"{fit.batch:,}{bound} (needs {needs}{then})"


def memory_lines(result: Result) -> list[str]:
    """The Memory section: the eager peak, where it falls, what is live then, the verdict."""
    memory = result.memory
    where = (
        f"at {memory.peak_op_name} in '{memory.peak_module or '<top level>'}'"
        if memory.peak_op >= 0 else "before the first op"
    )
    live = ", ".join(
        f"{kind.replace('_', ' ')} {short_bytes(size)}"
        for kind, size in memory.peak_breakdown.items()
    )
    makers = list(memory.peak_activations_by_module.items())
    by_module = ", ".join(
        f"{module or '<top level>'} {short_bytes(size)}" for module, size in makers[:3]
    )
    more = f" (+{len(makers) - 3} more)" if len(makers) > 3 else ""
    phases = ", ".join(
        f"{phase} {short_bytes(size)}" for phase, size in memory.peak_bytes_by_phase.items()
    )
    return [
        _line("Peak memory (eager)", human_bytes(memory.peak_bytes),
              f"{memory.peak_phase}, {where}"),
        f"    live then: {live or 'nothing'}",
        *([f"    activations by module: {by_module}{more}"] if makers else []),
        *([f"    peak by phase: {phases}"] if len(memory.peak_bytes_by_phase) > 1 else []),
        f"    {fit_line(result)}",
    ]


def _finite(value: float) -> float | None:
    return value if value != float("inf") else None


def _line(label: str, value: str, suffix: str = "") -> str:
    text = f"  {label:<25}: {value:>14}"
    return f"{text}   {suffix}" if suffix else text


def _precision_label(result: Result) -> str:
    """The precision asked, or the one most FLOPs run at where the program's own dtypes are
    narrower ("fp16 (the model's dtypes; fp32 asked)": ``precision`` casts fp32 values only)."""
    if result.computing_precision == result.precision:
        return result.precision
    return f"{result.computing_precision} (the model's dtypes; {result.precision} asked)"


def format_result(result: Result, top: int = 5) -> str:
    """The boxed text report followed by the top kernels by estimated time."""
    rule = "=" * WIDTH
    flops = result.flops
    lines = [
        rule,
        f"  torchroofline — {result.model_name}",
        f"  GPU: {result.gpu.name}   Precision: {_precision_label(result)}{_math_label(result)}   "
        f"Cache: {result.cache}",
        *_locked_clocks_line(result),
        *_unconfirmed_line(result),
        rule,
        _line(
            "FLOPs (necessary)",
            si(flops, "FLOPs"),
            f"(tensor {si(result.tensor_flops)}, vector {si(result.vector_flops)})",
        ),
        _line("FLOPs (executed)", si(result.executed_flops, "FLOPs"), "<- the traced kernels"),
        _line("Params", si(result.params)),
        "",
        _line("HBM traffic (unfused)", human_bytes(result.unfused_bytes), "<- eager upper bound"),
        _line("HBM traffic (fused)", human_bytes(result.fused_bytes), "<- inductor-style estimate"),
        _line(
            "HBM traffic (compulsory)",
            human_bytes(result.compulsory_bytes),
            "<- perfect-fusion lower bound",
        ),
        _line("Fusion reduction", f"{result.fusion_reduction:.1%}"),
        _line(
            "Kernels (eager / fused)",
            f"{result.unfused_kernel_count} / {result.fused_kernel_count}",
        ),
        "",
        _line("Arithmetic intensity", _intensity(result.arithmetic_intensity, " FLOPs/Byte")),
        _line(f"Ridge point ({result.computing_precision})",
              f"{result.ridge_point:.1f} FLOPs/Byte"),
        "",
        _line("Compute SoL", human_ms(result.time_ms["compute_sol"])),
        _line("Memory  SoL", human_ms(result.time_ms["memory_sol"])),
        _line(
            "Speed of light",
            human_ms(result.sol_ms),
            f"*** Bottleneck : {result.bottleneck.upper()} BOUND ***" if result.sol_s
            else "(nothing to compute or move)",
        ),
        f"  SoL by math: {ladder_line(result)}",
        *as_written_ladder_lines(result),
        *shortcut_lines(result),
        *bound_data_lines(result),
        "",
        *estimate_lines(result),
        "",
        *memory_lines(result),
        *phase_lines(result),
        *distributed_lines(result),
    ]
    if result.actual is not None:
        lines += ["", *_actual_lines(result)]
    lines.append(rule)
    if top > 0 and result.kernels:
        shown = result.top_kernels(top)
        lines += [
            "",
            *kernel_table(shown, gpu_s=result.kernel_gpu_s),
            *far_above_peak_lines(shown, result),
            *refusal_lines(shown, result.kernels),
        ]
    if top > 0 and result.ops:
        lines += ["", *module_table(module_costs(result)[:top])]
    if result.notes:
        lines += ["", "Notes:", *(f"  - {note}" for note in result.notes)]
    return "\n".join(lines)


#: Estimate rows of the report: label, ``time_ms`` key, key of ``Result.performance.modes``.
ESTIMATE_ROWS = (
    ("Eager estimate", "eager_estimate", "eager"),
    ("Compile estimate (fused)", "fused_estimate", "fused"),
    ("CUDA-graph estimate", "cudagraph_estimate", "cudagraph"),
)


def _split(result: Result, mode: str) -> str:
    """``GPU 1.2 ms, host 80% LAUNCH-BOUND``: how one estimate divides between the GPU's busy
    time and the time the GPU waits for the host."""
    estimate = result.performance.modes[mode]
    verdict = " LAUNCH-BOUND" if estimate.launch_bound else ""
    busy = human_ms(estimate.gpu_busy_s * 1e3)
    return f"GPU {busy}, waits on host {estimate.host_bound_share:.0%}{verdict}"


def _band(result: Result, mode: str) -> str:
    """``band 2.1–6.1 ms``: the estimate's band (price/bands.py), never below the SoL."""
    low, high = (human_ms(end * 1e3) for end in result.performance.band_s(mode, result.sol_s))
    unit = high.rsplit(" ", 1)[-1]
    return f"band {low.removesuffix(' ' + unit)}–{high}"


def estimate_lines(result: Result) -> list[str]:
    """One line per estimate with its band, its GPU / host split and the launch-bound
    verdict."""
    return [
        _line(label, human_ms(result.time_ms[key]),
              f"{_band(result, mode)}, {_split(result, mode)}")
        for label, key, mode in ESTIMATE_ROWS
    ]


def _locked_clocks(result: Result) -> list[str]:
    """Each locked clock of the GPU the result was priced on, e.g. "SM clock 1500 MHz (nominal
    1980)"; none at nominal clocks."""
    gpu = result.gpu
    return [
        f"{name} {locked:g} MHz (nominal {nominal:g})"
        for name, locked, nominal in (
            ("SM clock", gpu.locked_clock_mhz, gpu.boost_clock_mhz),
            ("memory clock", gpu.locked_memory_clock_mhz, gpu.memory_clock_mhz),
        )
        if locked is not None
    ]


def _locked_clocks_line(result: Result) -> list[str]:
    """The text header's line for a GPU priced at locked clocks (nothing at nominal clocks)."""
    locks = _locked_clocks(result)
    return [f"  Locked: {', '.join(locks)}; peaks scaled to match"] if locks else []


def _prompt_clocks(result: Result) -> str:
    """The prompt header's note of locked clocks, e.g. " at SM clock 1500 MHz (nominal 1980)"."""
    locks = _locked_clocks(result)
    return f" at {', '.join(locks)}" if locks else ""


def _unconfirmed_line(result: Result) -> list[str]:
    figures = unconfirmed_figures(result)
    if not figures:
        return []
    return [f"  Unconfirmed GPU figures used: {', '.join(figures)} ('?' in torchroofline gpus)"]


def module_table(costs: list[ModuleCost]) -> list[str]:
    """The costliest modules: ops, FLOPs, eager bytes and eager roofline time (see
    :class:`~torchroofline.breakdown.ModuleCost`)."""
    width = max([len("module"), *(len(cost.path) for cost in costs)])
    header = (
        f"  {'module':<{width}} {'ops':>5} {'FLOPs':>11} {'bytes (eager)':>13} "
        f"{'roofline':>11}"
    )
    rows = [header, "  " + "-" * (len(header) - 2)]
    rows += [
        f"  {cost.path:<{width}} {cost.ops:>5} {si(cost.flops):>11} "
        f"{human_bytes(cost.bytes):>13} {human_ms(cost.time_ms):>11}"
        for cost in costs
    ]
    return rows


def _math_label(result: Result) -> str:
    """The header's math, when the bound assumes other than the program's own."""
    return "" if result.math == "program" else f"   Math: {rung_name(result.math, '')}"


def shortcut_lines(result: Result) -> list[str]:
    """Each algebraic shortcut the bound takes, e.g. "Algebraic shortcut (fc, sum through the
    linear map): 137.44 GFLOPs → 84 MFLOPs; SoL 2.05 ms → 90 µs"; where there are several,
    each with the time it saves and the bound as written once after them (DenseNet's three
    transition layers each said "SoL 116.3 µs → 103.9 µs", the whole program's change)."""
    if result.sol_as_written_ms is None:
        return []
    sol = f"SoL {human_ms(result.sol_as_written_ms)} → {human_ms(result.sol_ms)}"

    def named(s: Shortcut) -> str:
        return f"  Algebraic shortcut ({s.label}): {si(s.flops_before, 'FLOPs')} → " \
            f"{si(s.flops_after, 'FLOPs')}"

    if len(result.rewrites) == 1:
        return [f"{named(result.rewrites[0])}; {sol}"]
    return [
        *(f"{named(s)}; saves {human_ms(s.time_saved_ms)}" for s in result.rewrites),
        f"  {len(result.rewrites)} algebraic shortcuts in all: {sol}",
    ]


def bound_data_lines(result: Result) -> list[str]:
    """Which input values the bound holds for, and the bound for any values where it differs."""
    if result.plans.bound_data == "any":
        return ["  Bound for any input values"]
    line = "  Bound for the given input values"
    if result.sol_any_input_s is not None:
        line += f" (for any input values: {human_ms(result.sol_any_input_s * 1e3)})"
    return [line]


def ladder_line(result: Result, ladder: dict[str, float] | None = None) -> str:
    """The speed of light at each math rung, e.g. "fp32 2.05 ms · TF32 278 µs · …" (of
    ``ladder``, seconds per rung; default the bound's)."""
    return " · ".join(
        f"{rung_name(rung, result.precision)} {human_ms(sol * 1e3)}"
        for rung, sol in (ladder or result.sol_by_math_s).items()
    )


def as_written_ladder_lines(result: Result) -> list[str]:
    """The ladder of the program as written, where shortcuts lower the bound: a time between
    the two ladders may need the shortcut, lower math, or either."""
    written = result.sol_as_written_by_math_s
    return [] if written is None else [f"  SoL by math as written: {ladder_line(result, written)}"]


def _actual_lines(result: Result) -> list[str]:
    actual = result.actual
    assert actual is not None
    judged = actual.verdict
    fraction = "—" if actual.sol_fraction is None else percent(actual.sol_fraction)
    return [
        _line("Measured", human_ms(actual.ms)),
        _line("% of SoL", fraction, judged.sentence),
        _line("Achieved", f"{actual.tflops:.2f} TFLOP/s", f"{actual.gbps:.0f} GB/s compulsory"),
    ]


def _intensity(value: float, unit: str = "") -> str:
    """FLOPs per byte; "—" where no byte moves (the JSON's null), as for an empty output."""
    return "—" if value == float("inf") else f"{value:.2f}{unit}"


def kernel_table(
    kernels: Sequence[KernelEstimate],
    name_width: int = 34,
    gpu_s: Mapping[KernelEstimate, float] | None = None,
) -> list[str]:
    """Fixed-width table of kernels: number in execution order, name,
    FLOPs, bytes, intensity, roofline time at peak, bound and, given ``gpu_s`` (kernel →
    seconds), the performance model's GPU time. Names are never cut (two kernels cut to one
    prefix would look alike): the column widens to the longest."""
    name_width = max([name_width, *(len(kernel.name) for kernel in kernels)])
    number_width = max(len(f"#{kernel.number}") for kernel in kernels)
    header = (
        f"  {'#':<{number_width}} {'kernel':<{name_width}} {'FLOPs':>11} {'bytes':>10} "
        f"{'FLOP/B':>8} {'time':>11} {'bound':>7}"
        + (f" {'est. GPU':>10}" if gpu_s is not None else "")
    )
    rows = [header, "  " + "-" * (len(header) - 2)]
    for kernel in kernels:
        estimate = f" {human_ms(gpu_s[kernel] * 1e3):>10}" if gpu_s is not None else ""
        rows.append(
            f"  {f'#{kernel.number}':<{number_width}} {kernel.name:<{name_width}} "
            f"{si(kernel.flops):>11} "
            f"{human_bytes(kernel.bytes):>10} {_intensity(kernel.intensity):>8} "
            f"{human_ms(kernel.time_ms):>11} {kernel.bound:>7}" + estimate
        )
    return rows


#: What the kernel table's two times are, printed under it.
TIME_COLUMNS = (
    "  time: FLOPs and bytes at the GPU's peaks, plus a launch floor per launch",
    "  est. GPU: the performance model's GPU time under torch.compile (achievable rates; "
    "METHOD.md)",
)
#: A kernel whose time or estimate, beyond one launch's fixed cost, is this many times its FLOPs
#: and bytes at the peaks gets a note saying why (a recurrence, a family the libraries run far
#: below the peak, …). The fixed cost is left out so that tiny kernels are not all flagged.
FAR_ABOVE_PEAK = 10.0


def _far_reason(kernel: KernelEstimate, load: KernelLoad, params: EstimateParams) -> str:
    """Why a kernel takes far longer than its FLOPs and bytes at the peaks."""
    if kernel.launches > 1:
        return (
            f"a serial recurrence: {kernel.launches} launches, each step waiting for the one "
            f"before, so the launches ({human_ms(kernel.launches * kernel.launch_s * 1e3)} at "
            f"the launch floor) and not the FLOPs set its time"
        )
    if load.matmul_s:
        fraction = params.matmul_fraction[load.family]
        return f"{load.family} kernels reach about {fraction:.1%} of the unit's peak (fitted)"
    if load.rows is not None:
        return f"a row-per-block reduction over only {load.rows} rows: few blocks run at once"
    return "achievable rates far below the peaks (METHOD.md)"


def far_above_peak_lines(shown: Sequence[KernelEstimate], result: Result) -> list[str]:
    """The table's column definitions, and a note for each kernel whose time or estimate, less
    one launch's fixed cost, is :data:`FAR_ABOVE_PEAK` times its FLOPs and bytes at the peaks."""
    performance = result.performance
    loads = dict(zip(result.kernels, performance.program.fused, strict=True))
    gpu_s = result.kernel_gpu_s
    params = performance.params.for_gpu(result.gpu)
    lines = list(TIME_COLUMNS)
    for kernel in shown:
        at_peak_s = max(kernel.compute_s, kernel.memory_s)
        slowest_s = max(kernel.time_s - kernel.launch_s,
                        gpu_s[kernel] - fixed_latency_s(loads[kernel], params))
        if at_peak_s and slowest_s >= FAR_ABOVE_PEAK * at_peak_s:
            lines.append(
                f"  #{kernel.number} {kernel.name}: {slowest_s / at_peak_s:.0f}× its "
                f"{human_ms(at_peak_s * 1e3)} at the peaks: "
                f"{_far_reason(kernel, loads[kernel], params)}"
            )
    return lines


#: pairs shown per fusion rule under the kernel table; the JSON keeps every refusal
PAIRS_PER_REASON = 3


def refusal_lines(
    shown: Sequence[KernelEstimate],
    kernels: Sequence[KernelEstimate],
    pairs_per_reason: int = PAIRS_PER_REASON,
) -> list[str]:
    """Why the kernels of the table stayed apart from kernels they share a buffer with,
    grouped by the fusion rule's reason: each pair once (both kernels list it), the costliest
    shown kernel first, at most ``pairs_per_reason`` pairs per reason with a count of the rest.
    Pairs are written with both kernels' numbers and full names, since a neighbour may not be
    in the table."""
    pairs: dict[str, dict[frozenset[int], tuple[int, int]]] = {}
    for kernel in shown:
        for refusal in kernel.refusals:
            pair = (kernel.number, refusal.kernel)
            pairs.setdefault(refusal.reason, {}).setdefault(frozenset(pair), pair)
    if not pairs:
        return []
    lines = ["", "  Why kernels that share a buffer stayed apart (#: execution order):"]
    for reason, found in pairs.items():
        count = len(found)
        lines.append(f"    {reason} ({count} pair{'s' if count > 1 else ''}):")
        lines += [
            f"      #{a} {kernels[a - 1].name} — #{b} {kernels[b - 1].name}"
            for a, b in list(found.values())[:pairs_per_reason]
        ]
        if count > pairs_per_reason:
            lines.append(f"      … {count - pairs_per_reason} more (JSON: kernels[].refusals)")
    return lines


# --- Compact prompt block --------------------------------------------------------------------


def unit_line(result: Result) -> str:
    """The units and peaks the bound assumes, e.g. "fp32 convolutions on tf32 tensor cores
    (494.7 TFLOP/s); other math on CUDA cores (66.9 TFLOP/s); HBM 3350 GB/s"."""
    from ..price.precision import KIND_LABELS, op_precision, unit_for

    families = dict.fromkeys(
        (op_precision(op, result.precision), op.flops.kind)
        for op in result.ops
        if op.flops.tensor and op.flops.kind is not None
    )
    parts = []
    for precision, kind in families:
        unit = unit_for(result.gpu, precision, kind, result.switches)
        parts.append(f"{precision} {KIND_LABELS[kind]} on {unit.label} "
                     f"({unit.peak_flops_per_s / 1e12:.1f} TFLOP/s)")
    vector_peak = result.gpu.vector_peak(result.precision)
    parts.append(f"other math on CUDA cores ({vector_peak / 1e12:.1f} TFLOP/s)")
    parts.append(f"HBM {result.gpu.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s")
    return "; ".join(parts)


def _timed_line(label: str, actual: Actual, ref_ms: float | None = None) -> str:
    """A measured time against the bound, for the prompt."""
    speedup = f", {ref_ms / actual.ms:.2f}x the reference" if ref_ms else ""
    judged = actual.verdict
    verdict = (
        f"FASTER THAN LIGHT: {judged.text}"
        if judged.impossible
        else f"BELOW THE BOUND: {judged.text}"
        if actual.below_bound
        else f"at most {times(judged.headroom)} faster is physically possible, {judged.text}"
        if judged.shortcut
        else judged.text
        if not judged.measures_kernel
        else f"at most {times(judged.headroom)} faster is physically possible"
    )
    return f"- {label}: {human_ms(actual.ms)} = {judged.percent_of_sol}{speedup}; {verdict}"


def _prompt_shortcuts(result: Result) -> list[str]:
    """The shortcuts the bound assumes, said plainly for a kernel generator (one line)."""
    if result.sol_as_written_ms is None:
        return []
    shortcuts = "; ".join(
        f"{s.rule} at {s.module or 'the top level'} ({s.op.split('.')[1]}: "
        f"{si(s.flops_before)} → {si(s.flops_after)} FLOPs)"
        for s in result.rewrites
    )
    return [
        f"- Algebraic shortcut the bound assumes: {shortcuts}; computed as written the bound "
        f"is {human_ms(result.sol_as_written_ms)}"
    ]


def _prompt_math(result: Result) -> str:
    return "" if result.math == "program" else f" at {rung_name(result.math, '')} math"


def format_prompt(result: Result, top: int = 3, gen_ms: float | None = None) -> str:
    """At most 15 plain lines for an LLM kernel-generation prompt: the work, the traffic, the
    bound, the units it assumes and where the time goes; with ``gen_ms``, the generated
    kernel's time against the bound too."""
    lines = [
        f"Speed-of-light analysis ({result.gpu.name}{_prompt_clocks(result)}, "
        f"{_precision_label(result)}{_prompt_math(result)}, torchroofline):",
        f"- FLOPs: necessary {si(result.flops)} (tensor-core class {si(result.tensor_flops)}, "
        f"other {si(result.vector_flops)}); executed {si(result.executed_flops)}",
        f"- HBM bytes: unfused {human_bytes(result.unfused_bytes)}, fused "
        f"{human_bytes(result.fused_bytes)}, compulsory {human_bytes(result.compulsory_bytes)}",
        f"- Speed of light: {human_ms(result.sol_ms)} ({result.bottleneck}-bound; compute "
        f"{human_ms(result.time_ms['compute_sol'])}, "
        f"memory {human_ms(result.time_ms['memory_sol'])})",
        f"- Peaks the bound assumes: {unit_line(result)}",
        *_prompt_shortcuts(result),
        f"- Speed of light by math precision: {ladder_line(result)}",
        f"- Estimates: eager {human_ms(result.time_ms['eager_estimate'])} "
        f"({counted(result.unfused_kernel_count, 'kernel')}), torch.compile "
        f"{human_ms(result.time_ms['fused_estimate'])} "
        f"({counted(result.fused_kernel_count, 'kernel')}), "
        f"CUDA graphs {human_ms(result.time_ms['cudagraph_estimate'])}",
    ]
    lines += [f"  {label.split(' estimate')[0].lower()}: {_split(result, mode)}"
              for label, _, mode in ESTIMATE_ROWS[:2]]
    kernels = result.top_kernels(top)
    if kernels:
        lines.append("- Where the GPU time goes (fused kernels, estimated):")
        gpu_s = result.kernel_gpu_s
        total = sum(gpu_s[k] for k in result.kernels) or 1.0
        lines += [
            f"  {k.name}: {human_ms(gpu_s[k] * 1e3)} ({gpu_s[k] / total:.0%}), {k.bound}-bound, "
            f"{_intensity(k.intensity, ' FLOP/B')}"
            for k in kernels
        ]
    if result.actual is not None:
        lines.append(_timed_line("Measured reference", result.actual))
    generated = result.with_actual(gen_ms).actual if gen_ms else None
    if generated is not None:
        ref_ms = result.actual.ms if result.actual else None
        lines.append(_timed_line("Generated kernel", generated, ref_ms))
    return "\n".join(lines[:15])


# --- Batch (KernelBench suite) reports -------------------------------------------------------

#: Columns of the per-problem table: header → how to read it from a report's problem entry.
SUITE_COLUMNS: dict[str, Any] = {
    "level": lambda p: p.level,
    "problem": lambda p: p.file,
    "status": lambda p: p.status,
    "flops": lambda p: _from_result(p, lambda r: r["flops"]["total"]),
    "bytes_unfused": lambda p: _from_result(p, lambda r: r["bytes"]["unfused"]),
    "bytes_fused": lambda p: _from_result(p, lambda r: r["bytes"]["fused"]),
    "bytes_compulsory": lambda p: _from_result(p, lambda r: r["bytes"]["compulsory"]),
    "sol_ms": lambda p: _from_result(p, lambda r: r["time_ms"]["sol"]),
    "sol_as_written_ms": lambda p: p.sol_as_written_ms,
    "shortcut": lambda p: p.shortcut,
    "fused_estimate_ms": lambda p: _from_result(p, lambda r: r["time_ms"]["fused_estimate"]),
    "eager_estimate_ms": lambda p: _from_result(p, lambda r: r["time_ms"]["eager_estimate"]),
    "bottleneck": lambda p: _from_result(p, lambda r: r["bottleneck"]),
    "measured_ms": lambda p: p.measured_ms,
    "gen_ms": lambda p: p.gen_ms,
    "sol_fraction": lambda p: p.sol_fraction,
    "gen_sol_fraction": lambda p: p.gen_sol_fraction,
    "possible_with": lambda p: p.possible_with,
    "gen_possible_with": lambda p: p.gen_possible_with,
    "gen_faster_than_light": lambda p: p.gen_impossible if p.gen_ms is not None else None,
    "shortcut_verdict": lambda p: p.shortcut_verdict,
    "gen_shortcut_verdict": lambda p: p.gen_shortcut_verdict,
    "speedup": lambda p: p.speedup,
    "unkept_work": lambda p: _from_result(p, _unkept_work),
    "error": lambda p: p.error,
}


def _unkept_work(result: Mapping[str, Any]) -> str | None:
    """What makes a bound far below the executed work, where it is: a constant output, or the
    share of the executed FLOPs that feed no kept value (``notes`` say which output)."""
    if result.get("constant_output"):
        return CONSTANT_OUTPUT
    share = result.get("unkept", {}).get("flops_share", 0.0)
    return f"{share:.1%} of the FLOPs feed no kept value" if share >= UNKEPT_NOTE_SHARE else None


#: The unkept_work of a problem whose output needs no input: its SoL is the writing of it, and a
#: % of SoL says nothing of a kernel.
CONSTANT_OUTPUT = "constant output (reads no input)"


def _from_result(problem: ProblemReport, read: Any) -> Any:
    return read(problem.result) if problem.result else None


def suite_rows(report: BatchReport) -> list[dict[str, Any]]:
    """One flat dict per problem, keyed by :data:`SUITE_COLUMNS`."""
    return [{name: read(p) for name, read in SUITE_COLUMNS.items()} for p in report.problems]


def suite_csv(report: BatchReport) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(SUITE_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(suite_rows(report))
    return buffer.getvalue()


def _cell(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name == "flops":
        return si(value)
    if name.startswith("bytes"):
        return human_bytes(value)
    if name.endswith("_ms"):
        return f"{value:.4g}"
    if name.endswith("sol_fraction"):
        # SoL / time above 1: the time is that many times under the bound (possible_with says
        # whether lower-precision math could reach it)
        return f"**{value:,.4g}x under SoL**" if value > 1 else percent(value)
    if name == "speedup":
        return f"{value:.2f}x"
    if name == "gen_faster_than_light":
        return "**yes**" if value else "no"
    if name == "error":
        return str(value).replace("|", "\\|")[:120]
    return str(value)


def suite_summary_line(report: BatchReport, planned: int | None = None) -> str:
    """One line for the end of a batch: how many problems were analyzed, failed, and beat the
    speed of light; of the ``planned`` ones where an interrupt left some not run."""
    row = report.summary["all"]
    given = max(planned or 0, row["problems"])
    unrun = f" ({given - row['problems']} not run: interrupted)" if given > row["problems"] else ""
    line = f"{row['analyzed']} of {given} problems analyzed{unrun}, {row['failed']} failed"
    if any(p.measured_ms for p in report.problems):
        line += f"; {row['impossible']} measured time(s) below the speed of light"
    if any(p.gen_ms for p in report.problems):
        line += f"; {row['gen_impossible']} generated kernel time(s) below it"
    shortcut_only = row["shortcut_only"] + row["gen_shortcut_only"]
    if shortcut_only:
        line += f"; {shortcut_only} time(s) possible only with an algebraic shortcut"
    return line


def suite_markdown(report: BatchReport) -> str:
    """Summary per level, then one row per problem."""
    from ..suites.batch_report import unmeasured_cell

    lines = [
        f"# torchroofline KernelBench report — {report.gpu}, {report.precision}",
        "",
        "| level | problems | analyzed | failed | compute-bound | memory-bound "
        "| median % of SoL | median speedup | measured < SoL | only with a shortcut |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for level, row in report.summary.items():
        median = row["median_sol_fraction"]
        speedup = row["median_speedup"]
        lines.append(
            f"| {level} | {row['problems']} | {row['analyzed']} | {row['failed']} "
            f"| {row['compute_bound']} | {row['memory_bound']} "
            f"| {'' if median is None else percent(median)} "
            f"| {'' if speedup is None else f'{speedup:.2f}x'} | {row['impossible']} "
            f"| {row['shortcut_only']} |"
        )
    names = list(SUITE_COLUMNS)
    lines += ["", "| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for problem, row in zip(report.problems, suite_rows(report), strict=True):
        cells = {name: _cell(name, row[name]) for name in names}
        if row["unkept_work"] == CONSTANT_OUTPUT:  # its bound writes a constant
            cells["sol_ms"] += " (writes a constant)"
        for name, time_ms in (("sol_fraction", problem.measured_ms),
                              ("gen_sol_fraction", problem.gen_ms)):
            cells[name] = unmeasured_cell(problem.verdict(time_ms)) or cells[name]
        lines.append("| " + " | ".join(cells.values()) + " |")
    return "\n".join(lines) + "\n"
