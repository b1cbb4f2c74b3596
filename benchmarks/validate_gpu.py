"""Time KernelBench-format problems on a real GPU and check every SoL bound stays below the time.

Run it on a machine with a CUDA GPU (never in tests):

    python benchmarks/validate_gpu.py tests/fixtures/kernelbench examples/kernelbench \
        --out validation.json [--trials 50] [--gpu h100-sxm]

Each problem is timed as KernelBench does: CUDA events around ``model(*inputs)``, with the L2
flushed before every trial (cold, the default bound) and, separately, without a flush (warm).
A bound above a measured time is a defect of torchroofline and is printed as VIOLATION; the
script exits 1 if there is any. The GPU is detected from ``torch.cuda.get_device_name()``
unless ``--gpu`` names it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from torchroofline import analyze_file, get_gpu
from torchroofline.suites.kernelbench import discover, load_problem

FLUSH_BYTES = 512 * 2**20  # larger than any L2 in the table (B200: 126 MB)


def _cuda(value):
    return value.cuda() if isinstance(value, torch.Tensor) else value


def time_problem(path: Path, trials: int, flush: bool) -> float:
    """Mean ms of ``model(*inputs)`` over ``trials`` after 3 warm-up runs."""
    problem = load_problem(path)
    torch.manual_seed(0)
    model = problem.model_class(*problem.get_init_inputs()).cuda()
    inputs = [_cuda(x) for x in problem.get_inputs()]
    scratch = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    times = []
    with torch.no_grad():
        for trial in range(trials + 3):
            if flush:
                scratch.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            if trial >= 3:
                times.append(start.elapsed_time(end))
    del model, inputs, scratch
    torch.cuda.empty_cache()
    return statistics.mean(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--gpu", help="GPU name in torchroofline's table (default: detected)")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--out", default="validation.json")
    args = parser.parse_args()
    gpu = get_gpu(args.gpu or torch.cuda.get_device_name())
    rows = []
    for path in discover(args.paths):
        row = {"problem": path.name, "level": path.parent.name}
        try:
            cold = analyze_file(path, gpu, "fp32")
            warm = cold.on(gpu, cache="warm")
            row |= {
                "sol_cold_ms": cold.sol_ms,
                "sol_warm_ms": warm.sol_ms,
                "fused_estimate_ms": cold.time_ms["fused_estimate"],
                "measured_cold_ms": time_problem(path, args.trials, flush=True),
                "measured_warm_ms": time_problem(path, args.trials, flush=False),
            }
            row["violation"] = (
                row["sol_cold_ms"] > row["measured_cold_ms"]
                or row["sol_warm_ms"] > row["measured_warm_ms"]
            )
        except Exception as error:  # noqa: BLE001 — one problem never stops the run
            row |= {"error": f"{type(error).__name__}: {error}"[:300], "violation": False}
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps({"gpu": gpu.name, "rows": rows}, indent=2))
    violations = [r["problem"] for r in rows if r["violation"]]
    for name in violations:
        print(f"VIOLATION: {name}: a bound exceeds the measured time", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
