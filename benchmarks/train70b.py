"""Speed of a training-step analysis at 70 B parameters: a Llama-2-70B-shaped decoder (80
blocks, width 8192, 64 heads with 8 KV heads, SwiGLU 28672, vocab 32000; benchmarks/models/gpt.py)
built on the meta device in bf16, one step of forward, backward and AdamW over 1 × 2048 tokens.
No weight is allocated. Prints the wall time of ``analyze`` and the step's figures; run it under
``/usr/bin/time -v`` for the peak RSS. Targets (issue 19): ≤ 20 s and ≤ 2 GB RSS on 2 cores.

    /usr/bin/time -v python benchmarks/train70b.py [--optimizer adamw] [--tokens 2048]
"""

import argparse
import sys
import time
from pathlib import Path

import torch

import torchroofline

sys.path.insert(0, str(Path(__file__).parent / "models"))
from gpt import Model  # noqa: E402

#: vocab, width, layers, heads, kv_heads, mlp, swiglu, tied, context (as benchmarks/run.py)
LLAMA_70B = (32000, 8192, 80, 64, 8, 28672, True, False, 4096)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    with torch.device("meta"):
        model = Model(*LLAMA_70B).to(torch.bfloat16)
    ids = torch.zeros(args.batch, args.tokens, dtype=torch.long, device="meta")
    start = time.perf_counter()
    result = torchroofline.analyze(model, (ids,), "h100-sxm", "bf16", mode="train",
                                   optimizer=args.optimizer)
    seconds = time.perf_counter() - start
    print(f"parameters: {result.params / 1e9:.2f} B, ops traced: {len(result.ops):,}")
    print(f"analyze (trace, plans, price): {seconds:.1f} s")
    print(f"step FLOPs {result.flops / 1e15:.1f} PFLOP, speed of light {result.sol_ms:.0f} ms")
    for figures in result.phases:
        print(f"  {figures.phase:<9} {figures.flops / 1e15:7.2f} PFLOP  "
              f"boundary {figures.boundary_bytes / 1e9:7.1f} GB  SoL {figures.sol_ms:8.1f} ms  "
              f"eager GPU {figures.eager_gpu_ms:8.1f} ms  "
              f"compile GPU {figures.compile_gpu_ms:8.1f} ms")
    start = time.perf_counter()
    peak = result.memory.peak_bytes
    print(f"peak memory {peak / 1e9:.0f} GB ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
