"""The real-kernel figures behind the performance model's trace-measured constants
(``EstimateParams.fill_latency_s``, ``matmul_latency_s``, ``strided_access_rate_per_sm``,
``attention_wave_s``, the flash-attention and per-GPU values), read from profiler traces:

    python benchmarks/trace_constants.py ../shared/traces

Per GPU, the median over op instances of: a tiny kernel's duration (ops moving < 256 KiB with
no matmul); a tiny GEMM's kernel (< 0.1 GFLOP); the element accesses per second and SM of the
kernels that cannot vectorize (``strided_accesses``, ops of ≥ 10 µs); a flash-attention kernel's
time per wave of query blocks; and the share of the tensor peak large GEMMs (≥ 10 GFLOP) reach.
These are measurements, not a fit: the constants are rounded from them (docs/validation.md).
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from pathlib import Path

from torchroofline.plan.plans import make_plans
from torchroofline.price.attention_time import attention_waves
from torchroofline.price.context import PricingContext
from torchroofline.price.kernel_load import KernelLoad
from torchroofline.price.roofline import price
from torchroofline.suites.kineto import analyze_trace, read_trace
from torchroofline.suites.kineto.pricing import PRICING_PRECISION, OpInstance, list_dtype
from torchroofline.suites.kineto.rebuild import RebuildError, rebuild
from torchroofline.trace.tracer import trace_model

#: figure → (what it is, unit scale, unit)
FIGURES = {
    "tiny kernel": ("shortest kernels: their own GPU time", 1e6, "µs"),
    "tiny GEMM": ("a < 0.1 GFLOP GEMM's kernel", 1e6, "µs"),
    "strided rate": ("element accesses / s / SM of kernels that cannot vectorize", 1e-9, "G"),
    "attention wave": ("a flash-attention kernel's time per wave", 1e6, "µs"),
    "GEMM share": ("share of the tensor peak of ≥ 10 GFLOP GEMMs", 100, "%"),
}


def eager_loads(instance: OpInstance, report, dtype) -> tuple[KernelLoad, ...]:
    """The model's eager kernels for one op instance (the op rebuilt and priced again)."""
    try:
        rebuilt = rebuild(instance.op.name, instance.op.args, dtype)
    except RebuildError:
        return ()
    traced = trace_model(rebuilt.module, rebuilt.tensors, name=instance.op.name)
    context = PricingContext.resolve(report.gpu, PRICING_PRECISION, "warm")
    return price(make_plans(traced), context).performance.program.eager


def measure(paths: list[Path]) -> dict[str, dict[str, list[float]]]:
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in paths:
        report = analyze_trace(path)
        gpu, dtype = report.gpu, list_dtype(read_trace(path))
        mine = found[gpu.name]
        for instance in report.priced:
            figures, seconds = instance.figures, instance.measured_us * 1e-6
            kernels = [a.duration_us * 1e-6 for a in instance.activities if a.kind == "kernel"]
            loads = eager_loads(instance, report, dtype)
            if not kernels or len(loads) != 1:
                continue
            [load] = loads
            if not load.matmul_s and figures.bytes < 256 * 1024:
                mine["tiny kernel"].extend(kernels)
            elif load.family == "gemm" and figures.flops < 1e8:
                mine["tiny GEMM"].append(max(kernels))
            elif load.family == "gemm" and figures.flops >= 1e10:
                mine["GEMM share"].append(load.matmul_s / seconds)
            if load.accesses and instance.measured_us >= 10:
                mine["strided rate"].append(load.accesses / (seconds * gpu.sm_count))
            if load.family == "flash_attention" and load.gemm is not None:
                mine["attention wave"].append(seconds / attention_waves(load.gemm, gpu.sm_count))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a folder of torch.profiler traces")
    args = parser.parse_args()
    paths = sorted(p for p in args.folder.iterdir() if re.search(r"\.json(\.gz)?$", p.name))
    found = measure(paths)
    print("| figure | " + " | ".join(found) + " |")
    print("|---|" + "---|" * len(found))
    for name, (what, scale, unit) in FIGURES.items():
        cells = [f"{statistics.median(values) * scale:.3g} {unit} (n = {len(values)})"
                 if (values := found[gpu].get(name)) else "—" for gpu in found]
        print(f"| {what} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
