"""Should regions be integer sets from ``islpy`` (isl)? The operations the demand walk makes,
timed in ``torchroofline.trace.regions`` and in islpy, with the distinct elements each counts.

    pip install islpy   # 8.5 MB wheel, not a dependency of torchroofline
    python benchmarks/islpy_regions.py

Two workloads: the walk's common case (two 4-D boxes of a (8, 64, 56, 56) activation, one
strided, united and counted, 2,000 times) and many random boxes of it united and counted once
(what a gather of many windows builds). ``Region.count`` is a lower bound (boxes that overlap
in ways it does not split are counted once, the smaller dropped); isl counts exactly.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable

from torchroofline.trace.regions import Region

SHAPE = (8, 64, 56, 56)
REPEATS = 2000
BOX_COUNTS = (10, 100, 400)


def random_boxes(count: int, seed: int = 0) -> list[list[tuple[int, int]]]:
    """``count`` random boxes of :data:`SHAPE`, each a [low, high) pair per dim."""
    draw = random.Random(seed)
    boxes = []
    for _ in range(count):
        box = []
        for size in SHAPE:
            low = draw.randrange(size)
            box.append((low, draw.randrange(low, size) + 1))
        boxes.append(box)
    return boxes


def ours_small(shift: int) -> int:
    first = Region.of([((range(8),), (range(64),), (range(shift, 56),), (range(56),))])
    second = Region.of([((range(2, 8),), (range(32),), (range(56),), (range(0, 56, 2),))])
    return first.union(second).count


def ours_many(boxes: list[list[tuple[int, int]]]) -> int:
    return Region.of([tuple((range(low, high),) for low, high in box) for box in boxes]).count


def isl_small(shift: int) -> int:
    import islpy as isl

    first = isl.Set(
        f"{{ [a,b,c,d] : 0 <= a < 8 and 0 <= b < 64 and {shift} <= c < 56 and 0 <= d < 56 }}"
    )
    second = isl.Set(
        "{ [a,b,c,d] : 2 <= a < 8 and 0 <= b < 32 and 0 <= c < 56 and 0 <= d < 56 and "
        "exists (k : d = 2k) }"
    )
    return first.union(second).coalesce().count_val().to_python()


def isl_many(boxes: list[list[tuple[int, int]]]) -> int:
    import islpy as isl

    united = None
    for box in boxes:
        limits = " and ".join(f"{low} <= i{d} < {high}" for d, (low, high) in enumerate(box))
        piece = isl.Set(f"{{ [i0,i1,i2,i3] : {limits} }}")
        united = piece if united is None else united.union(piece)
    return united.coalesce().count_val().to_python()


def timed(step: Callable[[], int]) -> tuple[float, int]:
    """(seconds, the count) of one call."""
    start = time.perf_counter()
    count = step()
    return time.perf_counter() - start, count


def main() -> int:
    try:
        import islpy  # noqa: F401
    except ImportError:
        print("islpy is not installed: pip install islpy (only this benchmark needs it)")
        return 1
    for name, small in (("regions.py", ours_small), ("islpy", isl_small)):
        seconds, _ = timed(lambda small=small: sum(small(i % 50) for i in range(REPEATS)))
        print(f"{name:>10}: two boxes united and counted: {seconds / REPEATS * 1e6:,.0f} µs each")
    for count in BOX_COUNTS:
        boxes = random_boxes(count)
        ours_s, ours_count = timed(lambda boxes=boxes: ours_many(boxes))
        isl_s, exact = timed(lambda boxes=boxes: isl_many(boxes))
        print(
            f"{count:>4} boxes: regions.py {ours_s * 1e3:,.1f} ms ({ours_count:,}, "
            f"{ours_count / exact:.1%} of exact), islpy {isl_s * 1e3:,.1f} ms ({exact:,})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
