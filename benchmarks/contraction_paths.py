"""The contraction-order search of torchroofline.plan.algebra.contraction against opt_einsum.

    python benchmarks/contraction_paths.py [--networks 200] [--seed 0]

On random tensor networks of 3–8 factors (labels of sizes 2–512, each factor 1–3 labels, a
random output), each order is priced by the same roofline cost (contraction.pair_cost: tensor
FLOPs for a pair that contracts, CUDA-core FLOPs for a multiply, bytes moved): the hand-written
dynamic program (``best_order``), opt_einsum's ``optimal`` (exhaustive, FLOPs) and ``dp``
(dynamic programming, FLOPs) paths. It prints the time per search and how often each order is
as cheap as the best found, and opt_einsum's import time. Needs ``pip install opt_einsum``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from torchroofline.plan.algebra.contraction import best_order, pair_cost

ITEMSIZE = 4


def network(rng: random.Random, count: int) -> tuple[list[tuple[int, ...]], tuple[int, ...],
                                                     dict[int, int]]:
    labels = list(range(count + 2))
    sizes = {a: rng.choice([2, 8, 64, 512]) for a in labels}
    factors = [tuple(rng.sample(labels, rng.randint(1, 3))) for _ in range(count)]
    present = sorted(set().union(*factors))
    output = tuple(rng.sample(present, rng.randint(0, min(2, len(present)))))
    return factors, output, sizes


def replayed_cost(path: Sequence[tuple[int, ...]], kept: list[tuple[int, ...]],
                  output: tuple[int, ...], sizes: dict[int, int]) -> float:
    """The seconds of an opt_einsum path (pairs of positions in the shrinking list) under our
    pair cost, after the same per-factor sums."""
    items = list(kept)
    total = 0.0
    for step in path:
        if len(step) == 1:
            continue
        i, j = sorted(step)
        a, b = items[i], items[j]
        rest = [items[n] for n in range(len(items)) if n not in (i, j)]
        out = tuple(sorted((set(a) | set(b)) & set(output).union(*rest)))
        total += pair_cost(a, b, out, sizes, ITEMSIZE).seconds
        items = [*rest, out]
    return total


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    import opt_einsum

    import_s = time.perf_counter() - started
    cold = subprocess.run(
        [sys.executable, "-c", "import time; t = time.perf_counter(); import opt_einsum; "
         "print(time.perf_counter() - t)"], capture_output=True, text=True, check=True)
    rng = random.Random(args.seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    times: dict[str, list[float]] = {"ours": [], "optimal": [], "dp": []}
    best_count = dict.fromkeys(times, 0)
    worst_ratio = dict.fromkeys(times, 1.0)
    for _ in range(args.networks):
        factors, output, sizes = network(rng, rng.randint(3, 8))
        started = time.perf_counter()
        order = best_order(factors, output, sizes, ITEMSIZE)
        times["ours"].append(time.perf_counter() - started)
        ours = order.cost.seconds
        prepared = ours - replayed_cost(_tree_path(order.tree), list(order.kept), output, sizes)
        kept = list(order.kept)
        equation = ",".join("".join(letters[a] for a in f) or "" for f in kept) + "->" + "".join(
            letters[a] for a in output)
        shapes = [tuple(sizes[a] for a in f) for f in kept]
        costs = {"ours": ours}
        for name in ("optimal", "dp"):
            started = time.perf_counter()
            path, _ = opt_einsum.contract_path(equation, *shapes, shapes=True, optimize=name)
            times[name].append(time.perf_counter() - started)
            costs[name] = prepared + replayed_cost(path, kept, output, sizes)
        low = min(costs.values())
        for name, cost in costs.items():
            best_count[name] += cost <= low * (1 + 1e-9)
            worst_ratio[name] = max(worst_ratio[name], cost / low if low else 1.0)
    print(f"opt_einsum {opt_einsum.__version__}: import {float(cold.stdout) * 1e3:.0f} ms in a "
          f"fresh interpreter ({import_s * 1e3:.0f} ms here, torch already imported)")
    print(f"{args.networks} networks of 3-8 factors, each order priced by pair_cost")
    print("| search | median time | p95 time | cheapest found | worst / cheapest |")
    print("|---|---|---|---|---|")
    for name, measured in times.items():
        measured = sorted(measured)
        p95 = measured[int(0.95 * (len(measured) - 1))]
        print(f"| {name} | {statistics.median(measured) * 1e6:.0f} µs | {p95 * 1e6:.0f} µs | "
              f"{best_count[name]}/{args.networks} | {worst_ratio[name]:.2f}× |")
    return 0


def _tree_path(tree: object) -> list[tuple[int, int]]:
    """Our tree as an opt_einsum path: pairs of positions in the list as it shrinks (each
    contraction's result appended at the end)."""
    items: list[object] = []

    def leaves(node: object) -> None:
        if isinstance(node, int):
            items.append(node)
        else:
            for part in node:  # type: ignore[union-attr]
                leaves(part)

    leaves(tree)
    items.sort()
    path = []

    def walk(node: object) -> object:
        if isinstance(node, int):
            return node
        left, right = (walk(part) for part in node)  # type: ignore[union-attr]
        i, j = items.index(left), items.index(right)
        path.append((i, j))
        items[:] = [x for n, x in enumerate(items) if n not in (i, j)] + [(left, right)]
        return (left, right)

    if not isinstance(tree, int) and tree is not None:
        walk(tree)
    return path


if __name__ == "__main__":
    sys.exit(main())
