"""Regenerate every figure README.md, METHOD.md and the pages in docs/ show from the code itself.

Each generated block sits between ``<!-- BEGIN name -->`` and ``<!-- END name -->``; this script
replaces its body by what the code prints now. ``--check`` changes nothing and exits 1 naming
the stale blocks (a test runs it, so the docs cannot drift from the code).

    python docs/sync_docs.py          # rewrite the blocks
    python docs/sync_docs.py --check  # fail if any block is stale
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The documents with generated blocks: README and METHOD, and the reference pages in docs/.
DOCS = (
    ROOT / "README.md",
    ROOT / "METHOD.md",
    *(ROOT / "docs" / f"{page}.md"
      for page in ("api", "guide", "kernelbench", "estimates", "reference", "limitations",
                   "trace", "bytes_only_ops", "distributed")),
)
SUITE = "tests/fixtures/kernelbench"
_BLOCK = re.compile(r"(<!-- BEGIN (\S+) -->\n)(.*?)(<!-- END \2 -->)", re.DOTALL)


def _fenced(text: str, language: str = "text") -> str:
    return f"```{language}\n{text.rstrip()}\n```\n"


def _cli(*argv: str) -> str:
    from torchroofline.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(list(argv))
    return out.getvalue()


def _command(*argv: str) -> str:
    return _fenced(f"$ torchroofline {' '.join(argv)}\n{_cli(*argv)}", "console")


def quickstart() -> str:
    import torch
    import torch.nn as nn

    import torchroofline

    model = nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128))
    result = torchroofline.analyze(model, (torch.randn(1, 512),), gpu="h100-sxm", precision="fp32")
    return _fenced(result.format())


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def unit_rules() -> str:
    from torchroofline.price.precision import UNIT_RULES

    rows = [
        [precision, kind.value, rule.tensor_key or "CUDA cores (fp32 FMA)",
         f"{rule.throughput:.3g}", rule.reason]
        for (precision, kind), rule in UNIT_RULES.items()
    ]
    return _table(["precision", "op family", "unit", "× peak", "why"], rows)


def fp32_switches() -> str:
    from torchroofline.price.precision import FP32_SWITCHES, TORCH_DEFAULTS

    rows = []
    for kind, rule in FP32_SWITCHES.items():
        default = getattr(TORCH_DEFAULTS, rule.attribute)
        for state, precision in rule.precision_by_state.items():
            mark = "yes" if state == default else ""
            rows.append([kind.value, rule.spelling[state], mark, precision])
    return _table(["op family", "switch", "PyTorch default", "fp32 work runs at"], rows)


def fallback_units() -> str:
    from torchroofline.price.precision import FALLBACK_UNITS

    rows = [[key, f"{fallback} tensor cores" if fallback else "CUDA cores", why]
            for key, (fallback, why) in FALLBACK_UNITS.items()]
    return _table(["GPU lacks", "runs on", "why"], rows)


def _flop_table(table: dict[str, int], unit: str) -> str:
    by_flops: dict[int, list[str]] = {}
    for name, flops in table.items():
        by_flops.setdefault(flops, []).append(f"`{name}`")
    rows = [[str(flops), ", ".join(names)] for flops, names in sorted(by_flops.items())]
    return _table([f"FLOPs per {unit}", "ops"], rows)


def pointwise_flops() -> str:
    from torchroofline.costs import POINTWISE_FLOPS_PER_ELEMENT

    return _flop_table(POINTWISE_FLOPS_PER_ELEMENT, "output element")


def reduction_flops() -> str:
    from torchroofline.costs import REDUCTION_FLOPS_PER_INPUT_ELEMENT

    return _flop_table(REDUCTION_FLOPS_PER_INPUT_ELEMENT, "input element")


def categories() -> str:
    from torchroofline.costs import registered_ops

    rows = [[category, str(len(names)), ", ".join(f"`{n}`" for n in sorted(names))]
            for category, names in registered_ops().items()]
    return _table(["category", "ops", "names"], rows)


def rule_coverage() -> str:
    from torchroofline.costs import rule_coverage as coverage_of

    coverage = coverage_of()
    names = ", ".join(f"`{name}`" for name in coverage.unsupported)
    missing = ", ".join(f"`{name}`" for name in coverage.missing)
    gone = f" Named by rules but not in this release: {missing}." if missing else ""
    return (
        f"On torch {_torch_release()}: "
        f"**{coverage.total} aten ops have a cost rule**: {coverage.registered} registered in "
        f"`costs/` and {coverage.tagged_pointwise} more that PyTorch tags pointwise (1 FLOP per "
        f"element). {len(coverage.unsupported)} ops a forward model may meet have none; they are "
        "charged their input and output bytes with no FLOPs and named in `notes` and "
        f"`unsupported_ops`: {names}.{gone}\n"
    )


def _torch_release() -> str:
    """The installed torch's release, without the build tag (2.13.0, not 2.13.0+cpu)."""
    import torch

    return torch.__version__.split("+")[0]


#: Blocks that count the installed PyTorch's own ops: generated on the lowest supported
#: release, and checked only on the release they name (another release lists other ops).
def bytes_only_ops() -> str:
    """The ops priced as bytes alone, by the reason their rule gives (costs.bytes_only_ops)."""
    from torchroofline.costs import bytes_only_ops as by_reason

    rows = [[reason, str(len(names)), ", ".join(f"`{name}`" for name in names)]
            for reason, names in by_reason().items()]
    return f"On torch {_torch_release()}:\n\n" + _table(["why no FLOPs", "ops", "names"], rows)


RELEASE_DEPENDENT = {"rule-coverage", "bytes-only-ops"}


def performance() -> str:
    """The headline table of benchmarks/RESULTS.md (written by ``python benchmarks/run.py``)."""
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = results.split("## Headline\n", 1)[1].split("\n## ", 1)[0]
    return section.strip() + "\n"


def fusion_rules() -> str:
    from torchroofline.plan.fusion import FUSION_RULES

    rows = [[f"`{rule.__name__}`", " ".join((rule.__doc__ or "").split())] for rule in FUSION_RULES]
    return _table(["rule (in the order tried)", "refuses a pair when — and the Inductor source"],
                  rows)


def demand_rules() -> str:
    from torchroofline.plan import demand

    rules = {demand.pointwise_demand: ["every op of category pointwise"]}
    for name, rule in [*demand.DEMAND_RULES.items(), *demand.LIBRARY_DEMAND.items()]:
        rules.setdefault(rule, []).append(f"`{name}`")
    # in-place twins share their op's rule; a release that lacks an op has no twin to list
    for names in rules.values():
        names[:] = [n for n in names if not (n.endswith("_`") and n[:-2] + "`" in names)]
    rows = [
        [", ".join(names), " ".join((rule.__doc__ or "").split())] for rule, names in rules.items()
    ]
    return _table(["ops", "what a demanded output element needs, and the FLOPs"], rows)


def structure_rules() -> str:
    from torchroofline.plan.demand import STRUCTURE_RULES

    rows = [[f"`{name}`", text] for name, text in STRUCTURE_RULES.items()]
    return _table(["rule", "pattern, cheapest implementation priced, and why it is the same"], rows)


#: Constants set per architecture only (their default means "not this effect").
PER_ARCHITECTURE_ONLY = ("library_kernels", "fp32_matrix_fraction", "cuda_core_gemm_fraction",
                         "mma_sync_share")


def _readable(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _constant_value(params: object, name: str) -> str:
    """A DEFAULT_PARAMS field by its CONSTANT_NOTES name, in readable units."""
    owner, _, field = name.rpartition(".")
    if owner == "host":
        params, name = params.host, field
    if name == "matmul_fraction.*":
        return ", ".join(f"{k} {v:.3g}" for k, v in params.matmul_fraction.items())
    value = getattr(params, name)
    if name in PER_ARCHITECTURE_ONLY:
        return ", ".join(f"{arch} {_readable(entry[name])}"
                         for arch, entry in params.per_architecture.items()
                         if entry.get(name)) or "—"
    if name.endswith("bytes_per_s") and isinstance(value, dict):
        return ", ".join(f"{k} {v / 1e9:.0f} GB/s" for k, v in value.items())
    if name.endswith("bytes_per_s"):
        return f"{value / 1e9:.3g} GB/s"
    if name.endswith("_s"):
        return f"{value * 1e6:.3g} µs"
    return str(value) if isinstance(value, tuple) else f"{value:.3g}"


def estimate_constants() -> str:
    """Every constant of the performance model, its value and its source."""
    from torchroofline.price.estimate_params import CONSTANT_NOTES, DEFAULT_PARAMS

    rows = [[f"`{name}`", _constant_value(DEFAULT_PARAMS, name), note]
            for name, note in CONSTANT_NOTES.items()]
    return _table(["constant", "value", "meaning; source"], rows)


def estimate_accuracy() -> str:
    """The per-setup accuracy table of docs/calibration.md (written by benchmarks/calibrate.py)."""
    text = (ROOT / "docs" / "calibration.md").read_text(encoding="utf-8")
    section = text.split("## Accuracy per setup, each host's speed fitted\n", 1)[1]
    return section.split("\n## ", 1)[0].strip() + "\n"


MINI_GPT = "examples/kernelbench/level3/mini_gpt_block.py"


def _report_excerpt(argv: tuple[str, ...], *spans: tuple[str, str]) -> str:
    """``torchroofline *argv`` (its kernel table left out: ``--top 0``) as typed, and for each
    span of its output the lines from the first holding the span's first marker to the next
    holding its last."""
    lines = _cli(*argv, "--top", "0").splitlines()
    shown: list[str] = []
    for first_marker, last_marker in spans:
        first = next(i for i, line in enumerate(lines) if first_marker in line)
        last = next(i for i in range(first, len(lines)) if last_marker in lines[i])
        shown += lines[first:last + 1]
    typed = " ".join(f"'{arg}'" if arg == "*" else arg for arg in argv)
    return _fenced(f"$ torchroofline {typed}\n" + "\n".join(shown))


def memory_verdicts() -> str:
    """The fit line of two models too big for one GPU, analysed on the meta device (no weight
    is ever allocated): eight 200,000² linear layers, and a decoder of Llama-3-70B's shape
    (benchmarks/models/gpt.py; Meta's model card: 80 layers, width 8,192, 64 query and 8 KV
    heads, SwiGLU 28,672, vocabulary 128,256)."""
    import importlib.util

    import torch

    import torchroofline
    from torchroofline.present.report import fit_line

    spec = importlib.util.spec_from_file_location("gpt", ROOT / "benchmarks" / "models" / "gpt.py")
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    with torch.device("meta"):
        linears = torch.nn.Sequential(*(torch.nn.Linear(200_000, 200_000) for _ in range(8)))
        row = torch.empty(1, 200_000)
        llama = gpt.Model(128_256, 8192, 80, 64, 8, 28_672, True, False, 8192)
        tokens = torch.zeros(1, 128, dtype=torch.long)
    models = (
        ("eight `nn.Linear(200000, 200000)` layers, fp32, one row in", linears, row, "fp32"),
        ("a decoder of Llama-3-70B's shape (80 layers, width 8,192, 8 KV heads, SwiGLU 28,672, "
         "vocabulary 128,256), bf16, 128 tokens", llama, tokens, "bf16"),
    )
    return "".join(
        f'- {what}: "{fit_line(torchroofline.analyze(model, (x,), "h100-sxm", precision))}"\n'
        for what, model, x, precision in models
    )


def sweep_crossovers() -> str:
    """The README's sweep (docs/make_images.py draws it) as typed, its crossovers only (the
    table per GPU and the timing line left out)."""
    argv = ("sweep", "examples/kernelbench/level1/1_Square_matrix_multiplication_.py",
            "--set", "N=32:131072:*4", "--gpu", "h100,l40s", "--data", "any")
    lines = _cli(*argv).splitlines()
    first = lines.index("Crossovers")
    shown = lines[first:lines.index("", first)]
    return _fenced(f"$ torchroofline {' '.join(argv)}\n" + "\n".join(shown), "console")


BLOCKS: dict[str, Callable[[], str]] = {
    "quickstart": quickstart,
    # the training-step table and the checkpointing what-if
    "cli-train": lambda: _report_excerpt(
        ("analyze", MINI_GPT, "--train", "--checkpoint", "*"), ("Training step", "Checkpoint"),
    ),
    # the Memory lines and the largest batch that fits
    "cli-memory": lambda: _report_excerpt(
        ("analyze", MINI_GPT, "--train", "--max-batch"), ("Peak memory", " has "),
        ("largest batch", "largest batch"),
    ),
    # one rank of a 2-D job: the distributed block
    "cli-distributed": lambda: _report_excerpt(
        ("analyze", "examples/distributed/mlp_blocks.py", "--world", "16", "--mesh", "dp=2,tp=8",
         "--train"), ("Distributed:", "memory  "),
    ),
    "cli-distributed-collectives": lambda: _report_excerpt(
        ("analyze", "examples/distributed/mlp_blocks.py", "--world", "16", "--mesh", "dp=2,tp=8",
         "--train"), ("Distributed:", "====="),
    ),
    "cli-matmul": lambda: _command(
        "analyze", "examples/kernelbench/level1/1_Square_matrix_multiplication_.py",
        "--gpu", "h100", "--actual-ms", "2.66",
    ),
    "cli-prompt": lambda: _command(
        "analyze", MINI_GPT, "--gpu", "h100",
        "--format", "prompt", "--actual-ms", "2.9",
    ),
    "cli-gpus": lambda: _command("gpus"),
    # a real H100 trace (AMD-AGI/TraceLens, MIT) kept as a test fixture
    "cli-trace": lambda: _command(
        "trace", "tests/fixtures/traces/h100_gaunernst_bert-small-uncased__1016001.json.gz",
        "--top", "3",
    ),
    "cli-kernelbench": lambda: _command(
        "kernelbench", f"{SUITE}/level1", f"{SUITE}/level2",
        "--timings", f"{SUITE}/baseline_time_torch.json",
        "--gen-timings", f"{SUITE}/generated_time.json", "-j", "2",
    ),
    "cli-sweep": sweep_crossovers,
    "memory-verdicts": memory_verdicts,
    "performance": performance,
    "rule-coverage": rule_coverage,
    "bytes-only-ops": bytes_only_ops,
    "estimate-constants": estimate_constants,
    "estimate-accuracy": estimate_accuracy,
    "unit-rules": unit_rules,
    "fp32-switches": fp32_switches,
    "fallback-units": fallback_units,
    "pointwise-flops": pointwise_flops,
    "reduction-flops": reduction_flops,
    "categories": categories,
    "fusion-rules": fusion_rules,
    "demand-rules": demand_rules,
    "structure-rules": structure_rules,
}


def sync(check: bool) -> list[str]:
    """Rewrite (or, with ``check``, compare) every block; returns the names of stale blocks."""
    import os

    os.chdir(ROOT)  # commands in the docs use repository-relative paths
    cache: dict[str, str] = {}
    stale: list[str] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")

        def replace(match: re.Match, doc: Path = doc) -> str:
            name = match.group(2)
            if name not in BLOCKS:
                raise SystemExit(f"{doc.name}: unknown block '{name}'")
            if name not in cache:
                cache[name] = BLOCKS[name]()
            other_release = name in RELEASE_DEPENDENT and not match.group(3).startswith(
                f"On torch {_torch_release()}:"
            )
            if other_release and check:
                print(f"{doc.name}:{name} counts another torch release: not checked",
                      file=sys.stderr)
            elif match.group(3) != cache[name]:
                stale.append(f"{doc.name}:{name}")
            return match.group(1) + cache[name] + match.group(4)

        new_text = _BLOCK.sub(replace, text)
        if not check and new_text != text:
            doc.write_text(new_text, encoding="utf-8")
    return stale if check else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail on stale blocks, write nothing")
    stale = sync(parser.parse_args().check)
    if stale:
        print("stale: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
