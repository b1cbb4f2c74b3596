"""Two speed cases from issue 28, each timed in this process and printed as a markdown table.

- **Many slices**: ``torch.cat([x[i:i + 1] for i in range(n)]).sum()`` on a meta ``(n, 16)``
  ``x``: one traced op per slice (was quadratic in n: 156 s at n = 6,144).
- **Real inputs against meta ones**: the same program analysed on real tensors (the bound for
  the given values reads a sample of each known matmul operand) and on meta tensors of the same
  shapes; the median of alternating runs, after one warm-up of each. Goal: ≤ 1.2×.

``python benchmarks/speed_cases.py [--quick]`` prints both; ``run.py`` includes them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn as nn

import torchroofline

#: n of the many-slices case (quick: the first only)
SLICE_COUNTS = (1_024, 10_000, 100_000)


class _Slices(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[i:i + 1] for i in range(x.shape[0])]).sum()


class _Call(nn.Module):
    def __init__(self, body: Callable[..., Any]) -> None:
        super().__init__()
        self.body = body

    def forward(self, *args: Any) -> Any:
        return self.body(*args)


#: name → (model maker, input shapes); quick: the first only
REAL_CASES: dict[str, tuple[Callable[[], nn.Module], list[tuple[int, ...]]]] = {
    "a @ b, 4096² fp32": (lambda: _Call(torch.matmul), [(4096, 4096), (4096, 4096)]),
    "bmm, 32 × 512²": (lambda: _Call(torch.bmm), [(32, 512, 512), (32, 512, 512)]),
    "Linear 4096 → 4096, 2048 rows": (lambda: nn.Linear(4096, 4096), [(2048, 4096)]),
    "Conv2d 64 → 128, 3×3, 16 × 128²": (lambda: nn.Conv2d(64, 128, 3), [(16, 64, 128, 128)]),
    "softmax, 4096 × 8192": (lambda: _Call(lambda x: x.softmax(-1)), [(4096, 8192)]),
}


def many_slices(counts: Sequence[int]) -> list[dict]:
    torchroofline.analyze(_Slices(), (torch.empty(4, 16, device="meta"),))  # first-call costs
    rows = []
    for n in counts:
        started = time.perf_counter()
        result = torchroofline.analyze(_Slices(), (torch.empty(n, 16, device="meta"),))
        rows.append({"n": n, "seconds": time.perf_counter() - started,
                     "compulsory_bytes": result.compulsory_bytes})
    return rows


def real_against_meta(names: Sequence[str], runs: int = 7) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    rows = []
    for name in names:
        make, shapes = REAL_CASES[name]
        model = make()
        real = tuple(torch.randn(*shape, generator=generator) for shape in shapes)
        meta = tuple(torch.empty(*shape, device="meta") for shape in shapes)
        times: dict[str, list[float]] = {"real": [], "meta": []}
        for _ in range(runs + 1):  # the first pair warms up
            for kind, inputs in (("meta", meta), ("real", real)):
                started = time.perf_counter()
                torchroofline.analyze(model, inputs)
                times[kind].append(time.perf_counter() - started)
        real_s, meta_s = (statistics.median(times[kind][1:]) for kind in ("real", "meta"))
        rows.append({"case": name, "real_s": real_s, "meta_s": meta_s, "ratio": real_s / meta_s})
    return rows


def measure(quick: bool) -> dict:
    """Both cases (quick: their first rows)."""
    return {
        "slices": many_slices(SLICE_COUNTS[:1] if quick else SLICE_COUNTS),
        "real": real_against_meta(list(REAL_CASES)[:1] if quick else list(REAL_CASES)),
        "threads": torch.get_num_threads(),
    }


def render(data: dict) -> list[str]:
    lines = ["## Many ops, and real inputs", "",
             "`torch.cat([x[i:i + 1] for i in range(n)]).sum()` on a meta `(n, 16)` x: "
             "analysis time (one traced op per slice; it was quadratic in n, 156 s at "
             "n = 6,144).", "",
             "| n | analyze | compulsory bytes |", "|---|---|---|"]
    lines += [f"| {row['n']:,} | {row['seconds']:.2f} s | {row['compulsory_bytes']:,} |"
              for row in data["slices"]]
    lines += ["", "Real inputs against meta inputs of the same shapes (the bound for the given "
              f"values; median of alternating runs, torch on {data['threads']} thread(s)); "
              "goal ≤ 1.2×:", "", "| program | meta | real | real / meta |", "|---|---|---|---|"]
    lines += [f"| {row['case']} | {row['meta_s'] * 1e3:.2f} ms | {row['real_s'] * 1e3:.2f} ms "
              f"| {row['ratio']:.2f}× |" for row in data["real"]]
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first row of each case")
    print("\n".join(render(measure(parser.parse_args().quick))))


if __name__ == "__main__":
    main()
