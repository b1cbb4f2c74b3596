"""Should the algebraic rules run as equality saturation in ``egglog``? The same programs
rewritten by the hand-written pass (``torchroofline.plan.algebra``) and by an e-graph holding
the linearity and reassociation identities, timed per op.

    pip install egglog   # not a dependency of torchroofline
    python benchmarks/egglog_algebra.py

The programs: MLPs of L layers (Linear → ReLU) ending in a Linear whose outputs are summed, the
shape of KernelBench's GEMM → sum problems. Ours: ``cheapest_program`` on the traced program
(the rewrite found, the replacement traced and spliced). egglog: the program as a term, five
rounds of the rules, and the cheapest term extracted; the trace itself is not counted for
either. The budget is the per-op overhead of the whole analysis: at most 2× a bare
FakeTensorMode run (benchmarks/RESULTS.md: about 0.18 ms per op on the 2-core reference
machine).
"""

from __future__ import annotations

import sys
import time

import torch
from torch import nn

from torchroofline.costs import cost_trace
from torchroofline.plan.algebra import cheapest_program
from torchroofline.trace.tracer import trace_model

LAYERS = (10, 30, 60)
WIDTH = 256


def mlp(layers: int, shortcut: bool = True) -> nn.Module:
    """The MLP, its head's outputs summed (``shortcut=False``: a ReLU before the sum, so no
    rule applies and the pass only looks)."""
    blocks = [m for _ in range(layers) for m in (nn.Linear(WIDTH, WIDTH), nn.ReLU())]
    head = nn.Sequential(*blocks, nn.Linear(WIDTH, WIDTH), *([] if shortcut else [nn.ReLU()]))

    class Summed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = head

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x).sum(1)

    return Summed()


def ours(layers: int, shortcut: bool = True) -> tuple[float, int, int]:
    """(seconds, traced ops, shortcuts found) of the hand-written pass."""
    trace = trace_model(mlp(layers, shortcut), (torch.empty(64, WIDTH, device="meta"),))
    records = cost_trace(trace)
    start = time.perf_counter()
    found = cheapest_program(trace, records)
    return time.perf_counter() - start, len(trace.ops), len(found.rewrites) if found else 0


def egglog_run(layers: int) -> float:
    """Seconds to saturate and extract the same program as an egglog term."""
    from egglog import EGraph, Expr, StringLike, rewrite, ruleset, vars_

    class M(Expr):
        def __init__(self, name: StringLike) -> None: ...
        def __matmul__(self, other: M) -> M: ...
        def __add__(self, other: M) -> M: ...
        def sum1(self) -> M: ...
        def relu(self) -> M: ...

    a, b, c = vars_("a b c", M)
    rules = ruleset(
        rewrite((a @ b).sum1()).to(a @ b.sum1()),
        rewrite((a + b).sum1()).to(a.sum1() + b.sum1()),
        rewrite((a @ b) @ c).to(a @ (b @ c)),
        rewrite(a @ (b @ c)).to((a @ b) @ c),
    )
    x = M("x")
    for layer in range(layers):
        x = (x @ M(f"w{layer}") + M(f"b{layer}")).relu()
    program = (x @ M("w") + M("b")).sum1()
    start = time.perf_counter()
    graph = EGraph()
    term = graph.let("out", program)
    graph.run(rules * 5)
    graph.extract(term)
    return time.perf_counter() - start


def main() -> int:
    ours(1)  # the first replacement traced pays torch's one-off start-up
    for layers in LAYERS:
        for shortcut in (True, False):
            seconds, ops, found = ours(layers, shortcut)
            print(f"ours, {layers} layers: {ops} traced ops, {found} shortcut(s), "
                  f"{seconds / ops * 1e6:.1f} µs per op")
    try:
        start = time.perf_counter()
        import egglog  # noqa: F401
    except ImportError:
        print("egglog is not installed (pip install egglog): its half is skipped")
        return 0
    print(f"egglog import: {(time.perf_counter() - start) * 1e3:.0f} ms")
    egglog_run(1)
    for layers in LAYERS:
        seconds = egglog_run(layers)
        ops = 3 * layers + 3  # linear, bias add, relu per layer; the head and the sum
        print(f"egglog, {layers} layers: {seconds / ops * 1e6:.0f} µs per op")
    try:
        egglog_run(100)
    except RecursionError:
        print("egglog, 100 layers: RecursionError building the 303-op term")
    return 0


if __name__ == "__main__":
    sys.exit(main())
