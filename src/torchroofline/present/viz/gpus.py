"""One workload across GPUs: speed of light and fused estimate per GPU, as bars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError
from ...units import human_bytes, human_ms, si
from .canvas import BOUND_COLOURS, GPUS_FIGSIZE_IN, new_figure, save, save_target, time_formatter

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ...price.hardware import GPUSpec
    from ...price.roofline import Result

#: GPUs :func:`plot_gpus` compares unless told otherwise: NVIDIA's data-centre generations from
#: Volta to Blackwell, an inference card (L40S) and AMD's MI300X.
DEFAULT_GPUS = ("v100", "a100-80gb", "h100-sxm", "h200", "b200", "l40s", "mi300x")


def plot_gpus(
    results: Result | Sequence[Result],
    gpus: Sequence[str | GPUSpec] = DEFAULT_GPUS,
    precision: str | None = None,
    path: str | Path | None = None,
) -> Figure:
    """Speed of light and fused estimate of one workload on each of several GPUs.

    Given one :class:`Result` (``torchroofline.analyze(model, inputs)``), it is re-priced on each
    of ``gpus`` at ``precision`` (default: its own) with ``Result.on``, which does not trace
    again; given several Results, they are drawn as they are, in order.
    Left: SoL per GPU, coloured by bottleneck. Right: the fused estimate split into time in
    compute-bound kernels and in memory-bound kernels (each kernel's estimated GPU time), and the
    time the GPU waits on the host (launches).
    """
    target = save_target(path)
    results = _priced(results, gpus, precision)
    fig, (sol_ax, fused_ax) = new_figure(GPUS_FIGSIZE_IN, ncols=2, sharey=True)
    rows = list(range(len(results)))[::-1]  # first GPU at the top
    sol = [result.sol_ms for result in results]
    sol_ax.barh(
        rows, sol, color=[BOUND_COLOURS[r.bottleneck] for r in results], height=0.6, gid="bars:sol"
    )
    for row, result in zip(rows, results, strict=True):
        sol_ax.annotate(
            f" {human_ms(result.sol_ms)} ({result.bottleneck})",
            (result.sol_ms, row),
            va="center",
            fontsize=8,
        )
    left = [0.0] * len(results)
    parts = [_fused_parts_ms(result) for result in results]
    for part in FUSED_PARTS:
        widths = [split[part] for split in parts]
        fused_ax.barh(
            rows, widths, left=left, color=BOUND_COLOURS[part], height=0.6, gid=f"bars:fused:{part}"
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    for row, total in zip(rows, left, strict=True):
        fused_ax.annotate(f" {human_ms(total)}", (total, row), va="center", fontsize=8)
    sol_ax.set_yticks(rows, [result.gpu.name for result in results])
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    for ax, heading, widest in (
        (sol_ax, "speed of light (bottleneck)", max(sol)),
        (fused_ax, "fused estimate (GPU time by kernel bound, host)", max(left)),
    ):
        ax.set_title(heading, fontsize=10)
        ax.set_xlabel("time")
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.xaxis.set_major_formatter(time_formatter(widest))
        ax.set_xlim(0, widest * 1.45)  # room for the value labels
        ax.grid(True, axis="x", color="0.9", lw=0.6)
    fig.legend(
        handles=[
            Patch(color=BOUND_COLOURS["compute"], label="compute bound"),
            Patch(color=BOUND_COLOURS["memory"], label="memory bound"),
            Patch(color=BOUND_COLOURS["host"], label="waiting on the host"),
        ],
        loc="outside lower center",
        ncols=3,
        fontsize=8,
        frameon=False,
    )
    first = results[0]
    fig.suptitle(
        f"{first.model_name}, {first.precision}: {si(first.flops, 'FLOPs')}, "
        f"{human_bytes(first.compulsory_bytes)} compulsory",
        fontsize=11,
    )
    return save(fig, target)


def _priced(
    results: Any, gpus: Sequence[str | GPUSpec], precision: str | None
) -> list[Result]:
    from ...price.roofline import Result

    if isinstance(results, Result):
        if not gpus:
            raise InputError("plot_gpus needs at least one GPU in gpus=")
        return [results.on(gpu, precision) for gpu in gpus]
    drawn = list(results) if isinstance(results, Sequence) else []
    if not drawn or not all(isinstance(result, Result) for result in drawn):
        raise InputError(
            "plot_gpus draws Results: pass torchroofline.analyze(model, inputs), which it "
            "re-prices on each GPU, or a list of Results"
        )
    return drawn


#: The fused estimate's parts, in drawing order.
FUSED_PARTS = ("compute", "memory", "host")


def _fused_parts_ms(result: Result) -> dict[str, float]:
    """The fused estimate (ms) split into its kernels' estimated GPU time by bound
    (``Result.kernel_gpu_s``) and the rest, the time the GPU waits on the host."""
    gpu_s = result.kernel_gpu_s
    parts = {
        bound: sum(s for kernel, s in gpu_s.items() if kernel.bound == bound) * 1e3
        for bound in ("compute", "memory")
    }
    parts["host"] = max(result.time_ms["fused_estimate"] - sum(parts.values()), 0.0)
    return parts
