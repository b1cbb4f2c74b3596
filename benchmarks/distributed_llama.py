"""Speed of a distributed-step analysis: one rank of a 64-GPU Llama-3-8B-shaped training job
(32 blocks, width 4096, 32 heads with 8 KV heads, SwiGLU 14336, vocab 128256), tensor parallel
over 8 GPUs of a node and FSDP2 over 8 nodes (``--mesh dp=8,tp=8``), one step of forward,
backward and AdamW over 1 × 8192 tokens per rank, bf16, traced on a fake process group with
nothing allocated. Prints the wall time of ``analyze`` and the rank's distributed figures.

    python benchmarks/distributed_llama.py [--tokens 8192] [--layers 32]
"""

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torchroofline

#: vocab, width, heads, kv heads, SwiGLU width (Llama 3 8B)
LLAMA3_8B = (128256, 4096, 32, 8, 14336)


class Block(nn.Module):
    """A Llama block whose views take the head count from the tensors (-1), so that tensor
    parallelism's local shards (heads / tp per rank) run it unchanged."""

    def __init__(self, width: int, heads: int, kv_heads: int, mlp: int) -> None:
        super().__init__()
        self.head_dim = width // heads
        self.attention_norm, self.mlp_norm = nn.RMSNorm(width), nn.RMSNorm(width)
        self.q = nn.Linear(width, width, bias=False)
        self.k = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(width, kv_heads * self.head_dim, bias=False)
        self.o = nn.Linear(width, width, bias=False)
        self.gate = nn.Linear(width, mlp, bias=False)
        self.up = nn.Linear(width, mlp, bias=False)
        self.down = nn.Linear(mlp, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        y = self.attention_norm(x)
        q, k, v = (proj(y).view(batch, length, -1, self.head_dim).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(batch, length, -1))
        y = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    def __init__(self, vocab: int, width: int, heads: int, kv_heads: int, mlp: int,
                 layers: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width, heads, kv_heads, mlp) for _ in range(layers))
        self.norm = nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def parallelize(model: Llama, mesh) -> None:
    """torchtitan's recipe, in short: TP inside a node (column-wise q, k, v, gate, up; row-wise
    o, down), FSDP2 across nodes on every block and the root."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {name: ColwiseParallel() for name in ("q", "k", "v", "gate", "up")}
    plan.update(o=RowwiseParallel(), down=RowwiseParallel())
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], plan)
        fully_shard(block, mesh=mesh["dp"], mp_policy=bf16)
    fully_shard(model, mesh=mesh["dp"], mp_policy=bf16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=32)
    args = parser.parse_args()
    with torch.device("meta"):
        model = Llama(*LLAMA3_8B, layers=args.layers)
    ids = torch.zeros(1, args.tokens, dtype=torch.long, device="meta")
    start, cpu = time.perf_counter(), time.process_time()
    result = torchroofline.analyze(
        model, (ids,), "h100-sxm", "bf16", mode="train", world=64, mesh={"dp": 8, "tp": 8},
        parallelize=parallelize,
    )
    step = result.distributed
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(f"parameters: {result.params / 1e9:.2f} B, ops traced on rank 0: {len(result.ops):,}")
    print(f"analyze (trace, plans, price, schedule): {seconds:.1f} s wall, {cpu_seconds:.1f} s "
          "CPU")
    print(f"collectives: {len(step.collectives)}, communication SoL {step.comm_sol_s * 1e3:.1f} "
          f"ms, estimate {step.comm_estimate_s * 1e3:.1f} ms")
    print(f"compute SoL {step.compute_sol_s * 1e3:.1f} ms, estimate "
          f"{step.compute_estimate_s * 1e3:.1f} ms")
    print(f"step SoL {step.step_sol_s * 1e3:.1f} ms, estimate {step.step_estimate_s * 1e3:.1f} "
          f"ms, exposed communication {step.exposed_comm_s * 1e3:.1f} ms")
    print(f"peak memory per rank {step.peak_memory_bytes / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
