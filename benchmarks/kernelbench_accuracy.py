"""KernelBench whole-problem accuracy of the committed performance model, per setup and mode:
the share of problems within 1.25× and within 2×, each setup's host speed fitted (one number,
as ``torchroofline validate`` fits it; the only number fitted on the held-out setups).

    python benchmarks/kernelbench_accuracy.py --data DIR

``DIR`` is the calibration data of ``benchmarks/calibrate.py`` (not in this repository). Unlike
that script it fits no model constant: it measures the model as committed.
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from calibrate import HELD_OUT, SETUPS, host_scale_only, load_samples, predicted

from torchroofline.price.estimate import DEFAULT_PARAMS

WITHIN = (1.25, 2.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the calibration data folder")
    args = parser.parse_args()
    samples = load_samples(args.data)
    pooled: dict[str, list[float]] = {}
    print("| set | mode | problems | host scale | within 1.25× | within 2× | median \\|log2\\| |")
    print("|---|---|---|---|---|---|---|")
    for setup in SETUPS:
        mine = [s for s in samples if s.setup == setup]
        scale = host_scale_only(mine, DEFAULT_PARAMS)
        params = DEFAULT_PARAMS.host_scaled(scale)
        errors: dict[str, list[float]] = {}
        for sample in mine:
            for mode, estimate in predicted(sample, params).items():
                errors.setdefault(mode, []).append(
                    abs(math.log2(estimate / sample.measured_s[mode])))
        for mode, found in errors.items():
            pooled.setdefault(mode, []).extend(found)
            shares = [sum(e <= math.log2(w) for e in found) / len(found) for w in WITHIN]
            held = " (held out)" if setup in HELD_OUT else ""
            print(f"| {setup}{held} | {mode} | {len(found)} | {scale:.2f} | {shares[0]:.0%} "
                  f"| {shares[1]:.0%} | {statistics.median(found):.2f} |")
    for mode, found in pooled.items():
        shares = [sum(e <= math.log2(w) for e in found) / len(found) for w in WITHIN]
        print(f"| all | {mode} | {len(found)} | — | {shares[0]:.1%} | {shares[1]:.1%} "
              f"| {statistics.median(found):.2f} |")


if __name__ == "__main__":
    main()
