"""Where an algebraic shortcut lowers the speed of light on KernelBench: every problem whose
bound the rules of torchroofline.algebra lower, the rule, and the bound before and after.

    python benchmarks/algebra.py [PROBLEMS] [--jobs 2] [--write]

``PROBLEMS`` is a KernelBench ``problems/`` folder (default: the calibration problems at
``/work/shared/calibration/problems``, which are not part of this repository; the script says
so when the folder is absent). Each problem is analysed on fake tensors (fp32, H100 SXM, cold
cache) in batch workers. ``--write`` replaces the generated table in docs/algebra.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from torchroofline.suites.batch import analyze_batch
from torchroofline.suites.kernelbench import discover, level_of
from torchroofline.units import human_ms

DEFAULT_PROBLEMS = Path("/work/shared/calibration/problems")
DOC = Path(__file__).resolve().parent.parent / "docs" / "algebra.md"
BEGIN, END = "<!-- BEGIN algebra-table -->", "<!-- END algebra-table -->"


def table(rows: Sequence[tuple[int | None, str, dict]], analysed: int, where: Path) -> str:
    """The generated part of docs/algebra.md: one row per problem a shortcut applies to."""
    lines = [
        f"Written by `python benchmarks/algebra.py --write` (fp32, H100 SXM, cold cache) over the "
        f"{analysed} problems analysed under `{where.parent.name}/{where.name}`: "
        f"{len(rows)} take a shortcut.",
        "",
        "| problem | shortcut (module: rule) | SoL as written | SoL |",
        "|---|---|---|---|",
    ]
    for level, file, result in sorted(rows, key=lambda row: (row[0] or 0, row[1])):
        rules = "; ".join(
            f"{r['module'] or 'top level'}: {r['rule']}" for r in result["rewrites"]
        )
        times = result["time_ms"]
        lines.append(
            f"| level{level}/{file} | {rules} | {human_ms(times['sol_as_written'])} | "
            f"{human_ms(times['sol'])} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="?", type=Path, default=DEFAULT_PROBLEMS)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--write", action="store_true",
                        help=f"write the table in {DOC.relative_to(DOC.parent.parent)}")
    args = parser.parse_args(argv)
    if not args.problems.is_dir():
        print(f"{args.problems}: no such folder; pass a KernelBench problems/ folder "
              "(the calibration problems are not part of this repository)", file=sys.stderr)
        return 2
    batch = analyze_batch(discover([args.problems], None), "h100-sxm", "fp32", jobs=args.jobs,
                          timeout_s=300)
    analysed = [p for p in batch.problems if p.ok]
    rows = [
        (level_of(Path(p.path)), p.file, p.result) for p in analysed if p.result["rewrites"]
    ]
    text = table(rows, len(analysed), args.problems)
    print(text)
    for p in batch.problems:
        if not p.ok:
            print(f"not analysed: {p.name} ({p.error or p.status})", file=sys.stderr)
    if args.write:
        doc = DOC.read_text()
        head, rest = doc.split(BEGIN)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END)[1]}")
        print(f"wrote {DOC}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
