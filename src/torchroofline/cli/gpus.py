"""``torchroofline gpus``: the GPU table and its key peaks."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from .common import EXIT_OK, command


def register(commands: Any) -> None:
    """The ``gpus`` command's parser, added to ``commands``."""
    gpus = command(commands, "gpus", writes=False, help="list the GPU table and its key peaks")
    gpus.add_argument("names", nargs="*", metavar="GPU",
                      help="only these GPUs, named as --gpu takes them (default: every one)")
    gpus.add_argument("--json", action="store_true", help="JSON instead of a table")
    gpus.set_defaults(handler=cmd_gpus)


def _tflops(spec: Any, key: str, tensor: bool) -> str:
    peaks = spec.tensor_peak_flops_per_s if tensor else spec.vector_peak_flops_per_s
    if key not in peaks:
        return "—"
    mark = "?" if f"{'tensor' if tensor else 'vector'}.{key}" in spec.unconfirmed else ""
    return f"{peaks[key] / 1e12:.1f}{mark}"



GPU_COLUMNS: dict[str, Callable[[Any], str]] = {
    "key": lambda g: g.key,
    "name": lambda g: g.name,
    "mem GB": lambda g: f"{g.memory_bytes / 1e9:.0f}",
    "HBM GB/s": lambda g: f"{g.memory_bandwidth_bytes_per_s / 1e9:.0f}"
    + ("?" if "memory_bandwidth_bytes_per_s" in g.unconfirmed else ""),
    "L2 MB": lambda g: f"{g.l2_bytes / 2**20:.0f}" + ("?" if "l2_bytes" in g.unconfirmed else ""),
    "L2 TB/s": lambda g: f"{g.l2_bandwidth / 1e12:.1f}"
    + ("?" if "l2_bandwidth_bytes_per_s" in g.unconfirmed else ""),
    "FP32": lambda g: _tflops(g, "fp32", False),
    "FP16 vec": lambda g: _tflops(g, "fp16", False),
    "TF32": lambda g: _tflops(g, "tf32", True),
    "FP16": lambda g: _tflops(g, "fp16", True),
    "BF16": lambda g: _tflops(g, "bf16", True),
    "FP8": lambda g: _tflops(g, "fp8", True),
    "FP6": lambda g: _tflops(g, "fp6", True),
    "FP4": lambda g: _tflops(g, "fp4", True),
    "boost MHz": lambda g: "—"
    if g.boost_clock_mhz is None
    else f"{g.boost_clock_mhz:g}" + ("?" if "boost_clock_mhz" in g.unconfirmed else ""),
}



def cmd_gpus(args: argparse.Namespace) -> int:
    from ..price.hardware import get_gpu, list_gpus

    specs = [get_gpu(name) for name in args.names] if args.names else list_gpus()
    if args.json:
        print(json.dumps([spec.to_dict() for spec in specs], indent=2))
        return EXIT_OK
    rows = [[read(spec) for read in GPU_COLUMNS.values()] for spec in specs]
    headers = list(GPU_COLUMNS)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(
        "Dense peaks in TFLOP/s (no sparsity); FP32 and FP16 vec on the CUDA cores / vector ALUs "
        "(FP16 vec: packed half2; '—': priced at FP32), the rest on tensor cores. '?' = not "
        "confirmed in two sources or derived; L2 TB/s: the L2's peak, at which warm bounds read "
        "what fits in L2; boost MHz: the clock --clock-mhz scales from ('—': none published); "
        "sources: docs/gpu_sources.md."
    )
    return EXIT_OK

