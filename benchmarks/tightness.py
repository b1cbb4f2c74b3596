"""How tight the bound is on KernelBench problems: necessary / executed FLOPs and compulsory /
fused bytes, per level, and every problem whose necessary FLOPs fall below 0.9 of the executed.

    python benchmarks/tightness.py [PROBLEMS] [--level 1,2] [--jobs 2] [--write]

``PROBLEMS`` is a KernelBench ``problems/`` folder (default: the calibration problems at
``/work/shared/calibration/problems``, which are not part of this repository; the script says so
when the folder is absent). Each problem is analysed on fake tensors (fp32, H100 SXM, cold cache)
in batch workers. A ratio below 1 is either a real saving (a correct kernel may skip work the
reference runs: a cropped window, a triangular output) or a defect of the demand walk, where it
loses track of which elements are needed and charges too little ("collapse: <op>"); the reasons
of each known problem are in :data:`REASONS`, checked by hand.

``--write`` writes docs/tightness.md, and only after a full run (no ``--level``): a partial run
never overwrites the tracked results.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torchroofline.suites.batch import analyze_batch
from torchroofline.suites.kernelbench import discover, level_of

DEFAULT_PROBLEMS = Path("/work/shared/calibration/problems")
DOC = Path(__file__).resolve().parent.parent / "docs" / "tightness.md"
#: necessary / executed FLOPs below this are listed one by one
LISTED_BELOW = 0.9

#: why a problem's necessary FLOPs fall below ``LISTED_BELOW`` of the executed ones, keyed by
#: ``level/number``; checked by hand against the problem's source. "saving: ..." is work a
#: correct kernel may skip; "collapse: <op>" is a defect of the demand walk (issue 16).
REASONS: dict[str, str] = {
    "1/12": "saving: diag(A) @ B is a row scaling of B (structure rule `diagonal matmul`)",
    "1/14": "saving: triangular output of triangular inputs (the bound for the given "
    "triu(randn) values) — triu(A @ B) keeps one triangle, and of its dot products only the "
    "nonzero pairs, Σ_{i≤j}(j−i+1) ≈ N³/6 multiply-adds",
    "1/15": "saving: triangular output of triangular inputs (the bound for the given "
    "tril(randn) values) — tril(A @ B) keeps one triangle, and of its dot products only the "
    "nonzero pairs, Σ_{i≥j}(i−j+1) ≈ N³/6 multiply-adds",
    "1/73": "saving: cropped window — padding 3 crops 3 planes off each side of the transposed "
    "convolution's output, whose contributions a kernel never computes",
    "1/95": "saving: only the picked class's log-probability is formed; each row's "
    "log-sum-exp is charged in full",
    "2/6": "saving: cropped window — the pools cover 12 of 14 and 28 of 30 conv outputs per "
    "dim",
    "2/80": "saving: the max over dim 1 leaves one column, so x − x.mean(1) is 0 and the "
    "output gelu(0) = 0 for any finite input (structure rule `self difference`)",
    "2/13": "saving: softmax over a size-1 dim is 1, so the output is a constant "
    "(tanh(1) · 2): nothing upstream is needed",
    "2/18": "saving: linearity — the sum over the Linear's output columns is x @ W.sum(1) + "
    "b.sum() (structure rule), and the max, mean and logsumexps after it reduce size-1 dims",
    "2/50": "saving: cropped window — AvgPool3d(2) covers 30 of 31 and 62 of 63 conv outputs "
    "per dim",
    "2/51": "saving: algebraic shortcut — the mean over the Linear's outputs is x @ W.mean(0) "
    "+ mean(b) − mean(c), a matrix-vector product (docs/algebra.md, `sum through the linear "
    "map`)",
    "2/55": "saving: cropped window — MaxPool1d(2) covers 4 of the 5 matmul columns",
    "2/66": "saving: softmax over a size-1 dim is 1, so the output is a constant: nothing "
    "upstream is needed",
    "2/78": "saving: cropped window — the two max-pools cover 30 of 31 and 60 of 63 conv "
    "outputs per dim",
    "2/96": "saving: cropped window — MaxPool3d(2) covers 30 of 31 and 62 of 63 conv outputs "
    "per dim",
    "3/28": "saving: TransformerEncoderLayer without batch_first reads (B, 197, dim) as "
    "sequence B × batch 197, so x[:, 0] is the class-token slot only: the image is never "
    "needed (the oracle's gradient on it is zero)",
    "3/32": "saving: TransformerEncoderLayer without batch_first reads (B, 2, dim) as "
    "sequence B × batch 2, so x[:, 0] is the class-token slot only: the image is never "
    "needed (the oracle's gradient on it is zero)",
    "3/50": "saving: causal mask — q @ kᵀ is needed on the kept triangle only (relu(-inf) "
    "= 0 would let a kernel skip the masked half of att @ v too; the bound charges it whole)",
}


@dataclass(frozen=True)
class Tightness:
    """One analysed problem's bound against the work its plans move."""

    level: int | None
    file: str
    necessary_flops: int
    executed_flops: int  #: FLOPs of the fused plan's kernels (what the reference computes)
    compulsory_bytes: int
    fused_bytes: int

    @property
    def key(self) -> str:
        return f"{self.level}/{self.file.split('_', 1)[0]}"

    @property
    def flop_ratio(self) -> float | None:
        return self.necessary_flops / self.executed_flops if self.executed_flops else None

    @property
    def byte_ratio(self) -> float | None:
        return self.compulsory_bytes / self.fused_bytes if self.fused_bytes else None


def tightness_of(level: int | None, file: str, result: dict) -> Tightness:
    """The figures of one problem's ``Result.to_dict()``."""
    return Tightness(
        level=level,
        file=file,
        necessary_flops=result["flops"]["total"],
        executed_flops=sum(kernel["flops"] for kernel in result["kernels"]),
        compulsory_bytes=result["bytes"]["compulsory"],
        fused_bytes=result["bytes"]["fused"],
    )


def quantiles(values: Sequence[float]) -> tuple[float, float, float, float]:
    """min, p10, median, p90 (nearest rank)."""
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return ordered[0], rank(0.1), statistics.median(ordered), rank(0.9)


def distribution_table(rows: Sequence[Tightness]) -> list[str]:
    lines = [
        "| level | problems | FLOPs min | p10 | median | p90 | bytes min | p10 | median | p90 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for level in sorted({row.level for row in rows}, key=lambda lv: lv or 0):
        mine = [row for row in rows if row.level == level]
        flops = [r.flop_ratio for r in mine if r.flop_ratio is not None]
        moved = [r.byte_ratio for r in mine if r.byte_ratio is not None]
        cells = [
            f"{q:.3f}" if values else "—"
            for values in (flops, moved)
            for q in (quantiles(values) if values else range(4))
        ]
        lines.append(f"| {level} | {len(mine)} | " + " | ".join(cells) + " |")
    return lines


def below_table(rows: Sequence[Tightness]) -> list[str]:
    low = [r for r in rows if r.flop_ratio is not None and r.flop_ratio < LISTED_BELOW]
    lines = [
        "| problem | necessary / executed FLOPs | compulsory / fused bytes | reason |",
        "|---|---|---|---|",
    ]
    for row in sorted(low, key=lambda r: r.flop_ratio):
        reason = REASONS.get(row.key, "unexplained")
        lines.append(
            f"| level{row.level}/{row.file} | {row.flop_ratio:.4f} "
            f"({row.necessary_flops:,} / {row.executed_flops:,}) | "
            f"{'—' if row.byte_ratio is None else f'{row.byte_ratio:.4f}'} | {reason} |"
        )
    return lines


def report(rows: Sequence[Tightness], failed: Sequence[str], where: Path) -> str:
    """docs/tightness.md's text."""
    lines = [
        "# How tight the bound is on KernelBench",
        "",
        "Written by `python benchmarks/tightness.py --write` (fp32, H100 SXM, cold cache) over "
        f"the {len(rows)} problems analysed under `{where.parent.name}/{where.name}`. FLOPs: "
        "necessary (what the speed of light charges) over executed (the fused plan's kernels); "
        "bytes: compulsory over fused. A ratio below 1 is either a saving a correct kernel can "
        "really make, or a collapse of the demand walk (the bound charges too little; issue 16).",
        "",
        *distribution_table(rows),
        "",
        f"Problems below {LISTED_BELOW} on FLOPs, lowest first, each with its reason (checked "
        "by hand; `collapse: <op>` names the op where the demand walk loses track):",
        "",
        *below_table(rows),
    ]
    if failed:
        lines += ["", "Not analysed: " + ", ".join(failed) + "."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="?", type=Path, default=DEFAULT_PROBLEMS)
    parser.add_argument("--level", help="only these levels, e.g. 1,2 (a partial run)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--write", action="store_true",
                        help=f"write {DOC.relative_to(DOC.parent.parent)} (full runs only)")
    args = parser.parse_args(argv)
    if not args.problems.is_dir():
        print(f"{args.problems}: no such folder; pass a KernelBench problems/ folder "
              "(the calibration problems are not part of this repository)", file=sys.stderr)
        return 2
    if args.write and args.level:
        print("--write needs a full run: drop --level", file=sys.stderr)
        return 2
    levels = {int(part) for part in args.level.split(",")} if args.level else None
    paths = discover([args.problems], levels)
    batch = analyze_batch(paths, "h100-sxm", "fp32", jobs=args.jobs, timeout_s=300)
    rows = [
        tightness_of(level_of(Path(p.path)), p.file, p.result) for p in batch.problems if p.ok
    ]
    failed = [
        f"{p.name} ({(p.error or p.status).removeprefix(p.path + ': ')})"
        for p in batch.problems if not p.ok
    ]
    text = report(rows, failed, args.problems)
    print(text)
    if args.write:
        DOC.write_text(text)
        print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
