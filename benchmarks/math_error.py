"""Measured error of lower-precision math on fp32 problems, against KernelBench's tolerances.

    python benchmarks/math_error.py [--write]

Runs on the CPU, in about a minute: matmuls, convolutions and attention at KernelBench sizes
(reduced where the CPU needs it; :data:`CASES` says how), each computed at every math rung a
kernel for an fp32 problem may use — IEEE fp32, TF32, bf16, fp16 and fp8 (e4m3) — and compared
with an fp64 reference of the same fp32 inputs. The inputs are unit-scale and drawn as the
problem draws them (``torch.randn`` or ``torch.rand``; weights as ``nn.Linear``/``nn.Conv2d``
initialise them). A rung is emulated as a tensor-core kernel computes it: the inputs are rounded
to the rung's format, the products are exact (a product of two values with ≤ 11 significant bits
fits fp32's 24) and summed in fp32, and the output is written in fp32. Attention rounds the
softmax probabilities to the rung's format before P @ V, as flash kernels do. TF32 keeps the top
10 of fp32's 23 mantissa bits, and the table shows both roundings a kernel may apply: masking
the other 13 (round toward zero) and rounding to nearest (``cvt.rna.tf32.f32``); which one a
cuBLAS kernel applies is not documented, and truncation's error is up to twice as large.

The check is ``torch.allclose``'s, ``|out − ref| ≤ atol + rtol·|ref|``: atol = rtol = 1e-2 for
KernelBench v0/v0.1 (every problem) and for fp16/bf16 problems of the current release, 1e-4 for
its fp32 problems. A case passes when every element does. KernelBench compares with an fp32 run
of the reference, not with fp64; an fp32 kernel that sums in another order is about as far from
that run as from fp64, so the fp32 rows say what a correct fp32 kernel can expect.

``--write`` writes docs/math_error.md.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

DOC = Path(__file__).resolve().parent.parent / "docs" / "math_error.md"

#: KernelBench's tolerances (atol = rtol): v0/v0.1 and current fp16/bf16, current fp32.
TOLERANCES = (1e-2, 1e-4)

#: fp32 mantissa bits TF32 drops (23 − 10), as a mask on the fp32 bit pattern, and half the
#: last kept bit (added first, it rounds to nearest, ties away from zero: ``cvt.rna.tf32.f32``).
TF32_MASK = ~((1 << 13) - 1)
TF32_HALF = 1 << 12


def tf32_truncated(x: torch.Tensor) -> torch.Tensor:
    """fp32 values with the low 13 mantissa bits cleared: TF32's 10 (round toward zero)."""
    return (x.view(torch.int32) & TF32_MASK).view(torch.float32)


def tf32_rounded(x: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded to TF32's 10 mantissa bits, to nearest (ties away from zero)."""
    return ((x.view(torch.int32) + TF32_HALF) & TF32_MASK).view(torch.float32)


def rounded_by(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """Round fp32 values to ``dtype`` (round to nearest even) and back: exact in fp32."""
    return lambda x: x.to(dtype).to(torch.float32)


#: Each rung: how fp32 inputs become the values its tensor cores multiply.
RUNGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "fp32": lambda x: x,
    "tf32 (truncated)": tf32_truncated,
    "tf32 (rounded)": tf32_rounded,
    "bf16": rounded_by(torch.bfloat16),
    "fp16": rounded_by(torch.float16),
    "fp8": rounded_by(torch.float8_e4m3fn),
}

Round = Callable[[torch.Tensor], torch.Tensor]


def matmul(round_: Round, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return round_(a) @ round_(b)


def conv2d(round_: Round, x: torch.Tensor, w: torch.Tensor, padding: int) -> torch.Tensor:
    return F.conv2d(round_(x), round_(w), padding=padding)


def attention(round_: Round, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ / √d) v with q, k, v and the probabilities at the rung's precision; the
    scores, the softmax and both sums in the working precision (fp32, or fp64 for the
    reference)."""
    scores = round_(q) @ round_(k).transpose(-2, -1) / q.shape[-1] ** 0.5
    return round_(torch.softmax(scores, dim=-1)) @ round_(v)


#: How KernelBench draws each input: ``torch.randn`` (unit normal), ``torch.rand`` (uniform on
#: [0, 1)), or a weight as ``nn.Linear``/``nn.Conv2d`` initialise it (uniform on ±1/√fan_in,
#: kaiming_uniform_ with a = √5), fan_in being the values each output sums.
Draw = Callable[[tuple[int, ...], torch.Generator], torch.Tensor]
DRAWS: dict[str, Draw] = {
    "randn": lambda shape, g: torch.randn(shape, generator=g),
    "rand": lambda shape, g: torch.rand(shape, generator=g),
    "init": lambda shape, g: (torch.rand(shape, generator=g) * 2 - 1)
    / math.prod(shape[1:]) ** 0.5,
}


@dataclass(frozen=True)
class Case:
    name: str
    kernelbench: str  #: the problem and size it stands for
    reduced: str  #: what was made smaller for the CPU ("" where nothing)
    reduction: int  #: values summed per output element (K)
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  #: (how it is drawn, shape) per input
    compute: Callable[..., torch.Tensor]  #: (round, *inputs) → output

    @property
    def data(self) -> str:
        return ", ".join(draw for draw, _ in self.inputs)


def _conv(padding: int) -> Callable[..., torch.Tensor]:
    return lambda round_, x, w: conv2d(round_, x, w, padding)


def _linear(round_: Round, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return matmul(round_, x, w.t())


#: The error of one output element depends on K and the data, not on how many elements there
#: are: where the CPU needs it, batch, rows or heads are cut and K is kept.
CASES = (
    Case("matmul 2048³", "L1 #1 square matmul, N 2048", "M 2048 → 512", 2048,
         (("randn", (512, 2048)), ("randn", (2048, 2048))), matmul),
    Case("matmul 2048³, rand", "L1 #1 drawn with torch.rand, as L1 #97 is", "M 2048 → 512",
         2048, (("rand", (512, 2048)), ("rand", (2048, 2048))), matmul),
    Case("matmul K 4096", "L1 #2 standard matmul, M 1024, K 4096, N 2048", "M 1024 → 256",
         4096, (("randn", (256, 4096)), ("randn", (4096, 2048))), matmul),
    Case("matmul K 131072", "L1 #6 large K, M = N = 256, K 131072", "", 131072,
         (("randn", (256, 131072)), ("randn", (131072, 256))), matmul),
    Case("matmul K 32", "L1 #7 small K, M = N = 16384, K 32", "M, N 16384 → 1024", 32,
         (("randn", (1024, 32)), ("randn", (32, 1024))), matmul),
    Case("linear 1024 → 512", "L2 #12 Gemm, batch 128, 1024 → 512 (nn.Linear)", "", 1024,
         (("randn", (128, 1024)), ("init", (512, 1024))), _linear),
    Case("conv2d 3 → 64, 3×3", "L1 #63 conv 2D, batch 16, 3 → 64 channels, 256²",
         "batch 16 → 1", 27, (("randn", (1, 3, 256, 256)), ("init", (64, 3, 3, 3))), _conv(0)),
    Case("conv2d 512 → 512, 3×3", "L3 #11 VGG16 last block, batch 10, 512 channels, 14²",
         "batch 10 → 2", 4608, (("randn", (2, 512, 14, 14)), ("init", (512, 512, 3, 3))),
         _conv(1)),
    Case("attention d 1024", "L1 #97 SDPA, batch 32, 32 heads, 512 tokens, d 1024",
         "batch 32 → 1, heads 32 → 2", 1024, (("rand", (1, 2, 512, 1024)),) * 3, attention),
)


@dataclass(frozen=True)
class Measured:
    case: str
    rung: str
    max_abs: float  #: max |out − ref|
    max_rel: float  #: max |out − ref| / max |ref|
    #: per tolerance: max |out − ref| / (tol + tol·|ref|) (≤ 1 passes) and the failing share
    margins: tuple[float, ...]
    failing: tuple[float, ...]

    def passes(self, index: int) -> bool:
        return self.margins[index] <= 1


def measure(case: Case) -> list[Measured]:
    generator = torch.Generator().manual_seed(0)
    inputs = [DRAWS[draw](shape, generator) for draw, shape in case.inputs]
    reference = case.compute(lambda x: x, *(x.double() for x in inputs))
    magnitude = reference.abs()
    rows = []
    for rung, round_ in RUNGS.items():
        error = (case.compute(round_, *inputs).double() - reference).abs()
        scaled = [error / (tol + tol * magnitude) for tol in TOLERANCES]
        rows.append(
            Measured(
                case.name,
                rung,
                float(error.max()),
                float(error.max() / magnitude.max()),
                tuple(float(s.max()) for s in scaled),
                tuple(float((s > 1).double().mean()) for s in scaled),
            )
        )
    return rows


def _verdict(row: Measured, index: int) -> str:
    if row.passes(index):
        return f"pass ({row.margins[index]:.2g})"
    return f"**fail** ({row.margins[index]:.2g}, {row.failing[index]:.1%} of elements)"


def table(rows: list[Measured]) -> str:
    lines = [
        "| case | math | max abs err | max abs err / max \\|ref\\| | atol = rtol = 1e-2 "
        "| atol = rtol = 1e-4 |",
        "|---|---|---:|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.case} | {row.rung} | {row.max_abs:.2e} | {row.max_rel:.2e} "
            f"| {_verdict(row, 0)} | {_verdict(row, 1)} |"
        )
    return "\n".join(lines)


def cases_table() -> str:
    lines = [
        "| case | KernelBench problem | K | data | reduced for the CPU |",
        "|---|---|---:|---|---|",
    ]
    for case in CASES:
        lines.append(
            f"| {case.name} | {case.kernelbench} | {case.reduction:,} | {case.data} "
            f"| {case.reduced or '—'} |"
        )
    return "\n".join(lines)


def summary(rows: list[Measured]) -> str:
    """Per case, the rungs that pass each tolerance."""
    lines = [
        "| case | data | passes atol = rtol = 1e-2 | passes 1e-4 |",
        "|---|---|---|---|",
    ]
    for case in CASES:
        mine = [row for row in rows if row.case == case.name]
        passing = [", ".join(r.rung for r in mine if r.passes(i)) or "none" for i in (0, 1)]
        lines.append(f"| {case.name} | {case.data} | {passing[0]} | {passing[1]} |")
    return "\n".join(lines)


def _markdown(docstring_text: str) -> str:
    """The module docstring's reST spelling as Markdown."""
    return docstring_text.replace("``", "`").replace(":data:`CASES`", "the script's `CASES`")


def document(rows: list[Measured]) -> str:
    intro = __doc__.split("\n\n", 2)[2].split("``--write``")[0].strip()
    return "\n\n".join(
        [
            "# Measured error of lower-precision math",
            "Written by `python benchmarks/math_error.py --write` (CPU, about a minute; torch "
            f"{torch.__version__.split('+')[0]}). Which math rung a correct kernel may use is "
            "the benchmark's tolerance to decide; these tables say which rungs pass "
            "KernelBench's checks on its own shapes and data. `time_ms.sol_by_math` gives the "
            "bound at each rung (README, \"Which math to choose\").",
            _markdown(intro),
            cases_table(),
            "## Which rungs pass",
            summary(rows),
            "## Errors",
            "Each cell of the last two columns is the worst element's "
            "`|out − ref| / (atol + rtol·|ref|)` (a case passes at ≤ 1) and, where it fails, "
            "the share of elements outside the tolerance.",
            table(rows),
        ]
    ) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {DOC.name}")
    args = parser.parse_args()
    rows = []
    for case in CASES:
        start = time.perf_counter()
        rows += measure(case)
        print(f"{case.name}: {time.perf_counter() - start:.1f} s", flush=True)
    print(table(rows))
    if args.write:
        DOC.write_text(document(rows))
        print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
