"""One rank of a distributed job traced on a fake process group: its collectives' counts and
sizes against closed forms (FSDP2, tensor parallel, DDP buckets, 2-D), per-rank shapes and
memory, and the process group's lifetime."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import torchroofline
from torchroofline.errors import InputError, ModelError

HIDDEN, BATCH, SEQ = 64, 4, 16


class MLPBlock(nn.Module):
    def __init__(self, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class MLPStack(nn.Module):
    def __init__(self, blocks: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(MLPBlock() for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class AttentionBlock(nn.Module):
    """Attention and an MLP, each a residual branch: tensor parallel splits the heads and the
    MLP's hidden units, so each branch ends in one all-reduce."""

    def __init__(self, hidden: int = HIDDEN, head_dim: int = 16) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.o = nn.Linear(hidden, hidden)
        self.mlp = MLPBlock(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (proj(x).view(b, s, -1, self.head_dim).transpose(1, 2)
                   for proj in (self.q, self.k, self.v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attended.transpose(1, 2).reshape(b, s, -1))
        return x + self.mlp(x)


class Transformer(nn.Module):
    def __init__(self, blocks: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(AttentionBlock() for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


TP_PLAN = {"blocks.*.q": "colwise", "blocks.*.k": "colwise", "blocks.*.v": "colwise",
           "blocks.*.o": "rowwise", "blocks.*.mlp.up": "colwise", "blocks.*.mlp.down": "rowwise"}

#: elements of one MLP block: up (4d × d + 4d) and down (d × 4d + d)
BLOCK_ELEMENTS = 8 * HIDDEN**2 + 5 * HIDDEN


def _inputs() -> torch.Tensor:
    return torch.randn(BATCH, SEQ, HIDDEN)


@pytest.fixture(scope="module")
def fsdp_step() -> torchroofline.Result:
    return torchroofline.analyze(MLPStack(), _inputs(), mode="train", optimizer="sgd",
                                 world=8, parallel="fsdp")


def _sizes(result: torchroofline.Result, kind: str) -> list[int]:
    return [p.call.size_bytes for p in result.distributed.collectives if p.call.kind == kind]


def test_fsdp_moves_the_parameter_bytes(fsdp_step: torchroofline.Result) -> None:
    # FSDP2 all-gathers each block's parameters before its forward and again before its
    # backward (reshard_after_forward), and reduce-scatters its gradients once: fp32, 4 bytes
    # per element, each collective the whole block (nccl-tests' size: gathered output,
    # scattered input); the root holds no parameters of its own
    block_bytes = 4 * BLOCK_ELEMENTS
    assert _sizes(fsdp_step, "all_gather") == [block_bytes] * 4
    assert _sizes(fsdp_step, "reduce_scatter") == [block_bytes] * 2
    assert {p.call.group_size for p in fsdp_step.distributed.collectives} == {8}
    assert {p.call.span for p in fsdp_step.distributed.collectives} == {"intra-node"}


def test_fsdp_communicates_in_its_mixed_precision_dtypes() -> None:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)

    def parallelize(model: nn.Module, mesh: object) -> None:
        for block in model.blocks:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)

    result = torchroofline.analyze(MLPStack(), _inputs(), mode="train", optimizer="sgd",
                                   world=8, parallelize=parallelize)
    # parameters gathered in bf16 (2 bytes an element), gradients reduced in fp32 (4)
    assert _sizes(result, "all_gather") == [2 * BLOCK_ELEMENTS] * 4
    assert _sizes(result, "reduce_scatter") == [4 * BLOCK_ELEMENTS] * 2


def test_fsdp_optimizer_updates_one_shard(fsdp_step: torchroofline.Result) -> None:
    # SGD's foreach update writes each parameter's shard: 1/8 of its elements on rank 0
    updates = [op for op in fsdp_step.trace.ops if op.phase == "optimizer"
               and op.name.startswith("aten._foreach_add_")]
    written = sum(ref.elements for op in updates for ref in op.writes)
    assert written == 2 * BLOCK_ELEMENTS // 8


def test_fsdp_memory_holds_shards(fsdp_step: torchroofline.Result) -> None:
    # resident parameters are rank 0's shards, each storage one allocator block rounded up to
    # 512 bytes: per block up.weight 32×64 fp32 (8192 B), up.bias 32 (128 → 512 B),
    # down.weight 8×256 (8192 B), down.bias 8 (32 → 512 B)
    shard_bytes = 2 * (8192 + 512 + 8192 + 512)
    resident = sum(size for kind, ref in fsdp_step.trace.resident if kind == "parameters"
                   for size in [ref.storage_elements * ref.itemsize])
    assert resident == 2 * 4 * BLOCK_ELEMENTS // 8
    assert fsdp_step.memory.peak_breakdown["parameters"] == shard_bytes
    # at the peak a whole block is gathered besides the shards
    assert fsdp_step.distributed.peak_memory_bytes >= shard_bytes + 4 * BLOCK_ELEMENTS


def test_tensor_parallel_all_reduces_per_block() -> None:
    result = torchroofline.analyze(Transformer(), _inputs(), world=4, parallel="tp",
                                   tp_plan=TP_PLAN)
    # each block's attention and MLP end in a row-wise linear: two all-reduces of the
    # block's output, batch × sequence × hidden fp32 elements
    assert _sizes(result, "all_reduce") == [4 * BATCH * SEQ * HIDDEN] * 4
    # per-rank shapes only: no matmul at a global shape (the sharding propagation's runs are
    # not the rank's work); a column-wise linear writes hidden/4 (q) or 4·hidden/4 (up) columns
    matmuls = [op for op in result.trace.ops if op.name.startswith(("aten.addmm", "aten.mm"))]
    assert matmuls and max(op.writes[0].elements for op in matmuls) == BATCH * SEQ * HIDDEN


def test_ddp_buckets() -> None:
    model = nn.Sequential(*(nn.Linear(1024, 1024) for _ in range(3)))
    result = torchroofline.analyze(model, torch.randn(8, 1024), mode="train", optimizer="sgd",
                                   world=16, parallel="ddp")
    # the parameters in backward order (b2, w2, b1, w1, b0, w0; a weight 4 MiB, a bias
    # 4 KiB) fill a first bucket up to 1 MiB (b2 + w2), the rest one bucket under 25 MiB
    weight, bias = 4 * 1024 * 1024, 4 * 1024
    assert _sizes(result, "all_reduce") == [weight + bias, 2 * (weight + bias)]
    # 16 ranks at 8 per node: the gradients cross two nodes
    assert {(p.call.nodes, p.call.span) for p in result.distributed.collectives} == {
        (2, "inter-node")}


def test_two_dimensional_job_from_the_command_line(capsys: pytest.CaptureFixture) -> None:
    import json

    from torchroofline.cli import main

    example = Path(__file__).parents[2] / "examples" / "distributed" / "mlp_blocks.py"
    code = main(["analyze", str(example), "--world", "8", "--mesh", "dp=2,tp=4",
                 "--gpus-per-node", "4", "--json"])
    assert code == 0
    job = json.loads(capsys.readouterr().out)["distributed"]
    assert (job["world"], job["mesh"]) == (8, {"dp": 2, "tp": 4})
    by_kind = {c["op"]: c for c in job["collectives"]}
    # TP inside a node (4 ranks); FSDP over dp pairs ranks 0 and 4: two nodes of 4 GPUs. A
    # block's TP shard: up 4d/4 × d + 4d/4, down d × 4d/4 + d (its bias replicated), fp32
    hidden = 2048  # the example's HIDDEN
    assert by_kind["all_gather"]["bytes"] == 4 * (2 * hidden**2 + 2 * hidden)
    assert (by_kind["all_gather"]["group_size"], by_kind["all_gather"]["span"]) == (
        2, "inter-node")
    assert (by_kind["all_reduce"]["group_size"], by_kind["all_reduce"]["span"]) == (
        4, "intra-node")
    assert job["step_sol_ms"] <= job["step_estimate_ms"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--mesh", "dp=2,tp=4"], "add --world N"),
    (["--world", "8"], "defines no parallelize"),
])
def test_command_line_job_errors(argv: list[str], message: str,
                                 capsys: pytest.CaptureFixture) -> None:
    from torchroofline.cli import main

    problem = Path(__file__).parents[1] / "fixtures" / "kernelbench" / "level1"
    first = sorted(problem.glob("*.py"))[0]
    assert main(["analyze", str(first), *argv]) == 2
    assert message in capsys.readouterr().err


def test_one_rank_is_the_single_gpu_analysis() -> None:
    model, x = MLPStack(), _inputs()
    alone = torchroofline.analyze(model, x, mode="train")
    job = torchroofline.analyze(model, x, mode="train", world=1, parallel="fsdp")
    document = job.to_dict()
    assert document.pop("distributed")["collectives"] == []
    assert document == alone.to_dict()
    assert job.distributed.step_estimate_s == pytest.approx(job.distributed.compute_estimate_s)


def test_the_process_group_is_destroyed_after_a_failure() -> None:
    def broken(model: nn.Module, mesh: object) -> None:
        raise ValueError("no such layer")

    with pytest.raises(ModelError, match="parallelize"):
        torchroofline.analyze(MLPStack(), _inputs(), world=4, parallelize=broken)
    assert not dist.is_initialized()


@pytest.mark.parametrize(("options", "message"), [
    ({"world": 8, "parallel": "ddp", "gpu": "t4"}, "no interconnect figures for T4"),
    ({"world": 8, "mesh": {"dp": 2, "tp": 2}, "parallel": "fsdp"}, "holds 4 ranks"),
    ({"world": 8}, "parallelize"),
    ({"world": 8, "parallel": "tp"}, "tp_plan"),
    # without world they were a one-GPU analysis, silently (the command line refuses --mesh
    # without --world)
    ({"mesh": {"dp": 2}, "parallel": "ddp"}, r"^mesh, parallel: distributed-job option\(s\), "
     r"which a one-GPU analysis has no use for; add world=N \(CLI: --world N\)"),
])
def test_job_errors(options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        torchroofline.analyze(MLPStack(), _inputs(), **options)


def test_a_rank_fits_a_larger_batch_than_one_gpu() -> None:
    # two 8192² linears (fp32 weights 268 MB each; gradients and AdamW's two moments add three
    # times that) on a 24 GB L4: a rank of FSDP over 8 holds an eighth of the parameters,
    # gradients and moments, so the same memory fits more of its rows than one GPU's
    from torchroofline import max_batch

    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(8192, 8192), nn.Linear(8192, 8192))
    rows = torch.empty(64, 8192, device="meta")
    alone = max_batch(model, rows, "l4", mode="train")
    rank = max_batch(model, rows, "l4", mode="train", world=8, parallel="fsdp")
    assert rank.batch > alone.batch


class ExpertParallel(nn.Module):
    """Tokens sent to the rank of their expert and back: an all-to-all either side of the
    local expert (expert parallelism's dispatch and combine)."""

    def __init__(self) -> None:
        super().__init__()
        self.expert = nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dispatched = torch.empty_like(x)
        dist.all_to_all_single(dispatched, x)
        y = self.expert(dispatched)
        combined = torch.empty_like(y)
        dist.all_to_all_single(combined, y)
        return combined


def test_expert_parallel_all_to_alls_sit_on_the_critical_path() -> None:
    result = torchroofline.analyze(ExpertParallel(), torch.randn(128, HIDDEN), world=8,
                                   parallelize=lambda model, mesh: None)
    step = result.distributed
    # each all-to-all sends the rank's 128 × 64 fp32 tokens; the expert reads the first one's
    # output and the second reads the expert's: compute and both run one after another
    assert _sizes(result, "all_to_all") == [4 * 128 * HIDDEN] * 2
    assert step.step_estimate_s == pytest.approx(
        step.compute_estimate_s + sum(p.estimate_s for p in step.collectives))
