"""Peak memory (memory.py): the caching allocator's rounding, closed-form peaks of small models,
the fit verdict, and agreement with PyTorch's own MemTracker on fake tensors."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode

from conftest import Fn, analyze, meta
from torchroofline.api import _traces_agree, max_batch
from torchroofline.errors import InputError
from torchroofline.plan.memory import (
    CachingAllocator,
    MemoryFit,
    MemoryTimeline,
    block_bytes,
    memory_timeline,
    segment_bytes,
)
from torchroofline.price.hardware import GPUSpec, get_gpu
from torchroofline.trace.tracer import trace_model
from torchroofline.trace.training import step_trace_options

MiB = 2**20


def timeline(model: nn.Module, *inputs: torch.Tensor, float_bytes: int = 4) -> MemoryTimeline:
    return memory_timeline(trace_model(model, inputs), float_bytes)


# --- the caching allocator's rules (c10/cuda/CUDACachingAllocator.cpp) ---


@pytest.mark.parametrize(
    ("requested", "block"),
    [(0, 0), (1, 512), (512, 512), (513, 1024), (12_000, 12_288), (MiB + 1, MiB + 512)],
)
def test_requests_round_up_to_512_byte_blocks(requested: int, block: int) -> None:
    assert block_bytes(requested) == block


@pytest.mark.parametrize(
    ("block", "segment"),
    [
        (512, 2 * MiB),  # small pool: a 2 MiB segment
        (MiB, 2 * MiB),  # 1 MiB is still small
        (MiB + 512, 20 * MiB),  # 1–10 MiB: a 20 MiB segment
        (10 * MiB - 512, 20 * MiB),
        (10 * MiB, 10 * MiB),  # from 10 MiB: its own segment, rounded up to 2 MiB
        (10 * MiB + 512, 12 * MiB),
    ],
)
def test_segment_sizes(block: int, segment: int) -> None:
    assert segment_bytes(block) == segment


def test_small_blocks_share_a_segment_until_it_is_full() -> None:
    allocator = CachingAllocator()
    for _ in range(2):
        allocator.malloc(600_000)  # 600,064-byte blocks: two fit in 2 MiB (2,097,152)
    assert allocator.reserved_bytes == 2 * MiB
    allocator.malloc(MiB)  # 2 MiB − 1,200,128 = 897,024 left: too small, a new segment
    assert allocator.reserved_bytes == 4 * MiB
    assert allocator.allocated_bytes == 2 * 600_064 + MiB


def test_a_large_block_keeps_a_remainder_of_1_mib_or_less() -> None:
    allocator = CachingAllocator()
    first = allocator.malloc(3 * MiB)  # opens a 20 MiB segment, split: 17 MiB stay free
    second = allocator.malloc(16 * MiB + MiB // 2)  # takes the 17 MiB block whole: 0.5 MiB
    # is no remainder worth a block in the large pool, so the allocation counts all 17 MiB
    assert allocator.reserved_bytes == 20 * MiB
    assert allocator.allocated_bytes == 20 * MiB
    allocator.free(first)
    allocator.free(second)  # coalesced back into one free 20 MiB block, which a 20 MiB
    allocator.malloc(20 * MiB)  # request reuses: nothing new is reserved
    assert allocator.reserved_bytes == 20 * MiB


def test_a_freed_block_is_reused_best_fit() -> None:
    allocator = CachingAllocator()
    big = allocator.malloc(12 * MiB)  # own segment of 12 MiB, nothing left over
    small = allocator.malloc(11 * MiB)  # own segment of 12 MiB: 1 MiB over, kept (≤ 1 MiB)
    allocator.free(big)
    allocator.free(small)
    allocator.malloc(11 * MiB)  # best fit: the 12 MiB block that held 11 MiB (lowest
    allocator.malloc(11 * MiB)  # address among equals), then the other
    assert allocator.reserved_bytes == 24 * MiB


# --- closed-form peaks ---


def test_mlp_forward_peak_is_the_hand_derived_sum_at_the_relu() -> None:
    # Linear(512→1024) → ReLU → Linear(1024→256), batch 64, fp32; every size is a multiple of
    # 512 bytes. Resident for the whole run: W1 512·1024·4 = 2,097,152, b1 4,096,
    # W2 1024·256·4 = 1,048,576, b2 1,024 (params 3,150,848) and x 64·512·4 = 131,072.
    # addmm #1 makes h (64·1024·4 = 262,144); relu makes r (262,144) while h is still read;
    # h dies after relu; addmm #2 makes y (64·256·4 = 65,536) while r is read.
    # Peak: at the relu, params + x + h + r = 3,150,848 + 131,072 + 524,288 = 3,806,208
    # (at addmm #2: params + x + r + y = 3,609,600).
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256))
    memory = timeline(model, torch.randn(64, 512))
    assert memory.peak_bytes == 3_806_208
    assert memory.peak_op_name == "aten.relu.default"
    assert memory.peak_phase == "forward"
    assert dict(memory.peak_breakdown) == {
        "parameters": 3_150_848, "inputs": 131_072, "activations": 524_288,
    }
    assert dict(memory.peak_activations_by_module) == {"0": 262_144, "1": 262_144}
    assert max(memory.live_bytes) == memory.peak_bytes
    assert memory.live_bytes[-1] == 3_150_848 + 131_072 + 262_144 + 65_536


def test_sizes_are_rounded_block_by_block() -> None:
    # Linear(100→30) → tanh, batch 3, fp32. W 30·100·4 = 12,000 → 12,288; b 120 → 512;
    # x 1,200 → 1,536; h and tanh(h) 360 → 512 each. Peak at the tanh:
    # 12,288 + 512 + 1,536 + 512 + 512 = 15,360.
    model = nn.Sequential(nn.Linear(100, 30), nn.Tanh())
    assert timeline(model, torch.randn(3, 100)).peak_bytes == 15_360


def test_a_large_block_keeps_its_unsplit_remainder_in_the_peak() -> None:
    # ReLU of an 11.5 MiB input (2,944 · 1,024 fp32): x gets a 12 MiB segment whose 0.5 MiB
    # remainder stays in its block (≤ 1 MiB: not split), and so does the output. Allocated at
    # the ReLU: 2 · 12 MiB; requested (MemTracker's 512-byte rounding): 2 · 11.5 MiB.
    memory = timeline(nn.ReLU(), torch.randn(2_944, 1_024))
    assert memory.peak_bytes == 24 * MiB
    assert memory.requested_peak_bytes == 23 * MiB
    assert memory.reserved_bytes == 24 * MiB


def test_an_unused_parameter_still_takes_memory() -> None:
    model = nn.Sequential(nn.Linear(128, 128), nn.ReLU())
    model.spare = nn.Parameter(torch.zeros(1000))  # never read by forward: 4,000 → 4,096 bytes
    with_spare = timeline(model, torch.randn(2, 128))
    del model.spare
    assert with_spare.peak_bytes - timeline(model, torch.randn(2, 128)).peak_bytes == 4_096


def test_a_tensor_kept_as_a_plain_attribute_is_held_like_a_buffer() -> None:
    # x @ w with w a plain attribute (256·256·4 = 262,144 bytes), x and y 4·256·4 = 4,096 each:
    # w is the model's for the whole run, not a value read once
    model = Fn(lambda x: x @ model.weight)
    model.weight = torch.randn(256, 256)
    memory = timeline(model, torch.randn(4, 256))
    assert dict(memory.peak_breakdown) == {"buffers": 262_144, "inputs": 4_096, "outputs": 4_096}


def test_bf16_precision_halves_float_storages() -> None:
    # Linear(1024→1024) at batch 256: W 4 MiB, b 4 KiB, x and y 1 MiB each in fp32; bf16 halves
    # every one (all stay multiples of 512 bytes)
    model = nn.Linear(1024, 1024)
    fp32 = timeline(model, torch.randn(256, 1024))
    bf16 = timeline(model, torch.randn(256, 1024), float_bytes=2)
    assert fp32.peak_bytes == 4 * MiB + 4096 + 2 * MiB
    assert bf16.peak_bytes == fp32.peak_bytes // 2


def train_timeline(model: nn.Module, *inputs: torch.Tensor, optimizer: str = "adamw",
                   float_bytes: int = 4) -> MemoryTimeline:
    options = step_trace_options("train", None, optimizer, None)
    return memory_timeline(trace_model(model, inputs, **options), float_bytes)


def test_mlp_training_step_peak_is_the_hand_derived_sum_in_adamw() -> None:
    # The MLP above, one AdamW step (foreach kernels, as on CUDA), the output's gradient seeded.
    # P = 3,150,848 bytes of parameters (every tensor a multiple of 512 bytes). Held through
    # the step: P of parameters, 2P of optimizer state (exp_avg, exp_avg_sq, alive across
    # steps), x (131,072) and the output y (65,536, the step's loss). Backward leaves P of
    # gradients. In the step, _foreach_sqrt(exp_avg_sq) makes one more P of temporaries,
    # alive until _foreach_addcdiv_ has read them: the peak, 5P + x + y = 15,950,848. The
    # forward's activations (2 · 262,144) were freed by backward long before.
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256))
    memory = train_timeline(model, torch.randn(64, 512))
    params = 3_150_848
    assert memory.peak_bytes == 5 * params + 131_072 + 65_536
    assert memory.peak_phase == "optimizer"
    assert memory.peak_op_name == "aten._foreach_sqrt.default"
    assert dict(memory.peak_breakdown) == {
        "parameters": params, "gradients": params, "optimizer_states": 2 * params,
        "inputs": 131_072, "outputs": 65_536, "temporaries": params,
    }
    # the SGD test below derives backward's peak: 2P + x + y + g_h (the same backward; the
    # two optimizer states are held throughout here, 2P more). The forward's: 3P + x + h + r
    assert dict(memory.peak_bytes_by_phase) == {
        "forward": 3 * params + 131_072 + 2 * 262_144,
        "backward": 4 * params + 131_072 + 65_536 + 262_144,
        "optimizer": 5 * params + 131_072 + 65_536,
    }


def test_sgd_step_peaks_at_the_end_of_backward() -> None:
    # The same MLP with plain SGD (no state, an in-place foreach add). Through backward, with
    # P = 3,150,848, x = 131,072, y = 65,536 always live: the seed dy (65,536) and dy·W2
    # (262,144) join the saved ReLU output r (262,144); dW2 (P2 = 1,048,576) and db2 (1,024)
    # are made and dy dies; threshold_backward makes g_h (262,144), after which r and dy·W2
    # die; dW1 (2,097,152) and db1 (4,096) are made while g_h is read. The last op that
    # reads g_h, the sum making db1, is the peak: parameters + every gradient + x + y + g_h
    # = 2P + 131,072 + 65,536 + 262,144 = 6,760,448. SGD's step allocates nothing more.
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256))
    memory = train_timeline(model, torch.randn(64, 512), optimizer="sgd")
    params = 3_150_848
    assert memory.peak_bytes == 2 * params + 131_072 + 65_536 + 262_144
    assert (memory.peak_phase, memory.peak_op_name) == ("backward", "aten.sum.dim_IntList")
    assert dict(memory.peak_breakdown) == {
        "parameters": params, "gradients": params, "inputs": 131_072, "outputs": 65_536,
        "temporaries": 262_144,
    }


def test_7b_parameters_with_adamw_in_fp32_need_112_gb_before_activations() -> None:
    # 7,000,120,000 parameters; fp32 AdamW holds 4 bytes each of parameter, gradient, exp_avg
    # and exp_avg_sq: 16 · 7e9 = 112 GB whatever the activations
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(50_000, 70_000), nn.ReLU(), nn.Linear(70_000, 50_000))
    memory = train_timeline(model, meta(4, 50_000))
    held = sum(memory.peak_breakdown[kind]
               for kind in ("parameters", "gradients", "optimizer_states"))
    assert held >= 16 * 7_000_120_000 >= 112e9
    assert memory.fit(get_gpu("h100-sxm")).verdict == "does not fit"
    # a GPU's name, as every other call takes it, raised AttributeError: 'str' object has no
    # attribute 'name'; now one line names the call that makes a GPUSpec of it
    with pytest.raises(InputError, match=r"^memory.fit takes a GPUSpec, got 'h100'; pass "
                       r"torchroofline.get_gpu\('h100'\)$"):
        memory.fit("h100")


# --- does it fit? ---


def test_eight_200k_linears_do_not_fit_an_h100() -> None:
    # 8 · (200,000² + 200,000) fp32 parameters = 1.28 TB
    with torch.device("meta"):
        model = nn.Sequential(*[nn.Linear(200_000, 200_000) for _ in range(8)])
    fit = timeline(model, meta(8, 200_000)).fit(get_gpu("h100-sxm"))
    assert fit.peak_bytes >= 8 * (200_000**2 + 200_000) * 4
    assert fit.verdict == "does not fit"
    assert not fit.fits


class Llama70BWeights(nn.Module):
    """Llama-3-70B's parameters (80 blocks: d 8,192, 64 query and 8 key/value heads of 128,
    SwiGLU 28,672, vocabulary 128,256, untied head): 70,553,706,496 of them. Its forward
    embeds and unembeds only: the blocks' weights are held as in the full model, which is what
    decides the fit, and the test stays fast (the full 80-block forward is 4,013 traced ops)."""

    def __init__(self) -> None:
        super().__init__()
        d, kv, ffn, vocab = 8_192, 1_024, 28_672, 128_256
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            nn.ModuleDict({
                "q": nn.Linear(d, d, bias=False), "k": nn.Linear(d, kv, bias=False),
                "v": nn.Linear(d, kv, bias=False), "o": nn.Linear(d, d, bias=False),
                "gate": nn.Linear(d, ffn, bias=False), "up": nn.Linear(d, ffn, bias=False),
                "down": nn.Linear(ffn, d, bias=False),
                "attn_norm": nn.RMSNorm(d), "mlp_norm": nn.RMSNorm(d),
            })
            for _ in range(80)
        )
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(tokens)))


def test_llama_70b_in_bf16_does_not_fit_an_h100() -> None:
    # 70,553,706,496 parameters · 2 bytes = 141.1 GB (each one a multiple of 512 bytes)
    with torch.device("meta"):
        model = Llama70BWeights().to(torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == 70_553_706_496
    result = analyze(model, meta(1, 16, dtype=torch.long), gpu="h100-sxm", precision="bf16")
    assert result.memory.peak_breakdown["parameters"] == 2 * 70_553_706_496
    assert result.to_dict()["memory"]["summary"] == (
        "needs 141 GB, H100 SXM has 80 GB: does not fit"
    )


@pytest.mark.parametrize(
    ("peak", "reserved", "verdict"),
    [(80, 80, "fits"), (80, 81, "tight"), (81, 81, "does not fit")],
)
def test_the_verdict_sets_blocks_and_segments_against_the_memory(
    peak: int, reserved: int, verdict: str
) -> None:
    # 80 bytes of memory: the blocks must fit; the segments too, or only the allocator's
    # retry (it frees its cache when cudaMalloc fails) saves the run
    assert MemoryFit("GPU", 80, peak, reserved).verdict == verdict


def test_the_report_says_whether_it_fits() -> None:
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256))
    result = analyze(model, torch.randn(64, 512), gpu="h100-sxm")
    memory = result.to_dict()["memory"]
    assert memory["peak_bytes"] == 3_806_208
    assert memory["summary"] == "needs 3.81 MB, H100 SXM has 80 GB: fits"
    text = result.format()
    assert "needs 3.81 MB, H100 SXM has 80 GB: fits" in text
    assert "activations by module: 0 262 KB, 1 262 KB" in text  # h and relu(h), 262,144 B each


# --- against PyTorch's MemTracker (torch.distributed._tools.mem_tracker) on fake tensors ---


def _memtracker_peak(build: type[nn.Module] | object, shape: tuple[int, ...]) -> int:
    """MemTracker's peak over a no-grad forward on fake CPU tensors: it frees a storage when
    Python drops its last reference and counts exact bytes (it rounds to 512 on CUDA only)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    with FakeTensorMode():
        model = build().eval()
        x = torch.randn(shape)
        tracker = MemTracker()
        tracker.track_external(model, x)
        with tracker, torch.no_grad():
            model(x)
        snapshot = tracker.get_tracker_snapshot("peak")
    return sum(device["Total"] for device in snapshot.values())


def _unrounded_peak(memory: MemoryTimeline, ops: int) -> int:
    """The most requested (unrounded) bytes live at once: the same lifetimes, no allocator."""
    return max(
        sum(a.request_bytes for a in memory.allocations if a.first_op <= position <= a.last_op)
        for position in range(ops)
    )


MODELS = {
    # every intermediate dies right after its one reader, and Sequential drops it then too
    "mlp": (lambda: nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256)),
            (64, 512)),
    # BatchNorm's buffers (136 bytes) and a conv's 1,728-byte weight are not multiples of 512
    "conv": (lambda: nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 16 * 16, 10)), (8, 3, 32, 32)),
    # GELU and LayerNorm: LayerNorm's mean and rstd outputs are made and dropped at once
    "gelu_mlp": (lambda: nn.Sequential(
        nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256), nn.LayerNorm(256)), (32, 256)),
}


def _gpt_block() -> nn.Module:
    """examples/kernelbench/level3/mini_gpt_block.py at width 64, 4 heads."""
    from torchroofline.suites.kernelbench import load_problem

    path = Path(__file__).parents[2] / "examples" / "kernelbench" / "level3" / "mini_gpt_block.py"
    return load_problem(path).model_class(64, 4)


def test_python_locals_keep_tensors_past_their_last_use() -> None:
    # mini_gpt_block's forward binds q, k, v (views of the qkv output, 3 · 2·16·64·4 = 24,576
    # bytes) and the attention output y (8,192) to locals, so eager PyTorch frees them only
    # when forward returns; the timeline frees them after their last reader. At the peak (the
    # GELU) MemTracker therefore holds 32,768 bytes more than the timeline's unrounded peak.
    trace = trace_model(_gpt_block().eval(), (torch.randn(2, 16, 64),), device="cpu")
    memory = memory_timeline(trace, 4)
    assert memory.peak_op_name == "aten.gelu.default"
    tracked = _memtracker_peak(_gpt_block, (2, 16, 64))
    assert tracked - _unrounded_peak(memory, len(trace.ops)) == 24_576 + 8_192


@pytest.mark.parametrize("name", MODELS)
def test_peak_matches_memtracker(name: str) -> None:
    build, shape = MODELS[name]
    # traced on fake CPU tensors as MemTracker runs: on CUDA, eval-mode batch norm also
    # returns its 16 means and inverse std-devs (128 bytes more), on the CPU two empty tensors
    trace = trace_model(build().eval(), (torch.randn(shape),), device="cpu")
    memory = memory_timeline(trace, 4)
    tracked = _memtracker_peak(build, shape)
    # Same lifetimes: on these models eager Python drops each intermediate right after its
    # last reader, which is the rule the timeline uses, so the unrounded peaks are equal.
    assert _unrounded_peak(memory, len(trace.ops)) == tracked
    # The timeline then rounds each live storage up to a 512-byte block, which MemTracker does
    # only for CUDA tensors: the difference is at most 511 bytes per live storage.
    live = sum(1 for a in memory.allocations if a.first_op <= memory.peak_op <= a.last_op)
    assert tracked <= memory.peak_bytes <= tracked + 511 * live


def _memtracker_step_peak(build: object, shape: tuple[int, ...], optimizer: str) -> int:
    """MemTracker's peak over one training step on fake CPU tensors, after a warm-up step that
    made the optimizer's state (the step the trace records is a steady-state one too)."""
    from torch.distributed._tools.mem_tracker import MemTracker

    make = {
        "adamw": lambda params: torch.optim.AdamW(params, foreach=True),
        "sgd": lambda params: torch.optim.SGD(params, lr=0.1, foreach=True),
    }[optimizer]
    with FakeTensorMode():
        model = build()
        x = torch.randn(shape)
        step = make(model.parameters())
        for tracked in (False, True):
            tracker = MemTracker()
            if tracked:
                tracker.track_external(model, step, x)
            with tracker if tracked else contextlib.nullcontext():
                out = model(x)
                out.backward(torch.ones_like(out))
                step.step()
            step.zero_grad()
            del out
        snapshot = tracker.get_tracker_snapshot("peak")
    return sum(device["Total"] for device in snapshot.values())


@pytest.mark.parametrize(
    ("name", "optimizer", "tracker_extra"),
    [
        # MemTracker also counts AdamW's step counters, one 4-byte CPU tensor per parameter
        # (4 here); on CUDA they stay on the host unless fused/capturable, so the timeline
        # leaves them out
        ("mlp", "adamw", 4 * 4),
        ("gelu_mlp", "adamw", 6 * 4),
        ("gpt_block", "adamw", 12 * 4),  # its locals die long before the optimizer's peak
        # the test's own script holds the seed ones_like(out) (64·256·4 = 65,536) in the
        # caller's frame until backward returns; the timeline frees it after the last backward
        # op that reads it, before the peak at the end of backward
        ("mlp", "sgd", 65_536),
    ],
)
def test_training_step_peak_matches_memtracker(name: str, optimizer: str,
                                               tracker_extra: int) -> None:
    build, shape = {**MODELS, "gpt_block": (_gpt_block, (2, 16, 64))}[name]
    options = step_trace_options("train", None, optimizer, None)
    trace = trace_model(build(), (torch.randn(shape),), **options)
    memory = memory_timeline(trace, 4)
    tracked = _memtracker_step_peak(build, shape, optimizer)
    assert tracked - _unrounded_peak(memory, len(trace.ops)) == tracker_extra


# --- the largest batch that fits ---


def _gpu_with_memory(capacity_bytes: int) -> GPUSpec:
    return dataclasses.replace(get_gpu("h100-sxm"), memory_bytes=capacity_bytes)


def test_max_batch_of_a_linear_layer_is_the_closed_form() -> None:
    # Linear(256→256) in fp32: W 262,144 + b 1,024 bytes held; x and y of b·1,024 bytes each
    # (small-pool blocks up to b = 1,024, so exactly their size): peak(b) = 263,168 + 2,048·b.
    # A GPU of 263,168 + 2,048·500 bytes holds batch 500 and not 501.
    capacity = 263_168 + 2_048 * 500
    fit = max_batch(nn.Linear(256, 256), torch.randn(4, 256), _gpu_with_memory(capacity))
    assert (fit.batch, fit.exact) == (500, True)
    assert fit.peak_bytes == capacity
    assert fit.peaks[501] == capacity + 2_048
    # traced at 4 and 8: every size is linear in the batch, so the search re-prices them and
    # traces only its answer and the batch above to confirm
    assert fit.traced == (4, 8, 500, 501)
    # 2 KB apart, both "1.29 MB": the line gives the bytes ("needs 80.00 GB; 266,411 needs
    # 80.00 GB" read as one figure)
    from torchroofline.present.report import batch_fit_line

    assert batch_fit_line(fit).endswith("500 (needs 1,287,168 B; 501 needs 1,289,216 B)")
    # a limit below the inputs' own batch answered that batch, above the limit (batch 4 of
    # limit 0): one line instead, before any trace
    with pytest.raises(InputError, match=r"^limit 3 is below the inputs' own batch \(4\); pass"):
        max_batch(nn.Linear(256, 256), torch.randn(4, 256), _gpu_with_memory(capacity), limit=3)


def test_max_batch_confirms_by_trace_only_the_batches_its_search_tried() -> None:
    traced: list[int] = []

    def traced_peak(batch: int) -> int:
        traced.append(batch)
        return 100 * batch

    # a search that stopped at batch 10 (its budget) before trying 11: 10 is traced, and 11,
    # with nothing re-priced to hold it against, is not
    assert _traces_agree({5: 500, 10: 1_000}, 10, traced_peak)
    assert traced == [10]
    # an exact answer: both traced, once each; 11's trace (1,100) is not its re-priced 1,050
    assert not _traces_agree({10: 1_000, 11: 1_050}, 10, traced_peak)
    assert traced == [10, 10, 11]


def test_max_batch_of_a_training_step_brackets_the_capacity() -> None:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
    capacity = 4 * MiB
    fit = max_batch(model, torch.randn(2, 64), _gpu_with_memory(capacity), mode="train")
    assert fit.exact
    assert fit.peaks[fit.batch] <= capacity < fit.peaks[fit.batch + 1]


def test_max_batch_is_zero_when_the_parameters_alone_do_not_fit() -> None:
    fit = max_batch(nn.Linear(256, 256), torch.randn(4, 256), _gpu_with_memory(200_000))
    assert (fit.batch, fit.exact) == (0, True)
    assert fit.peaks[1] > 200_000


def test_cli_max_batch_follows_the_allocators_2_mib_rounding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 23_Softmax: x and softmax(x), each b · 393,216 · 4 = 1.5·b MiB, from segments rounded up
    # to 2 MiB. A remainder of ≤ 1 MiB stays in the block: b = 4k+1 and 4k+2 hold 6k+2 and
    # 6k+4 MiB each, b = 4k+3 only its 6k+4.5 MiB (a 1.5 MiB remainder is split off), b = 4k
    # exactly 6k. On 80·10⁹ bytes (76,293.9 MiB for the two): b = 25,431 (4·6,357+3) holds
    # 2 · 38,146.5 = 76,293 MiB and fits; 25,432 needs 2 · 38,148 = 76,296 MiB and does not.
    from torchroofline.cli import main

    problem = Path(__file__).parents[1] / "fixtures" / "kernelbench" / "level1" / "23_Softmax.py"
    assert main(["analyze", str(problem), "--gpu", "h100-sxm", "--max-batch", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["max_batch"]
    assert (found["batch"], found["exact"]) == (25_431, True)
    assert found["peak_bytes"] == 76_293 * MiB
    assert found["peaks"]["25432"] == 76_296 * MiB
    assert found["traced"] == [4096, 8192, 25_431, 25_432]


def test_max_batch_retraces_when_the_batch_changes_the_ops() -> None:
    # from batch 6 on, forward runs one more op: sizes at 4 and 8 are no longer one program's
    # sizes at two batches, so every batch tried is traced
    model = Fn(lambda x: x.relu() if x.shape[0] < 6 else x.relu().exp())
    fit = max_batch(model, torch.randn(4, 256), _gpu_with_memory(MiB))
    assert fit.traced == tuple(sorted(fit.peaks))
    assert fit.exact
    assert fit.peaks[fit.batch] <= MiB < fit.peaks[fit.batch + 1]


def test_max_batch_names_a_dimension_that_is_no_batch() -> None:
    # a square matmul: dimension 0 of both inputs is 64, and resizing both breaks a @ b
    with pytest.raises(InputError, match="it is no batch dimension: pass batch_dim"):
        max_batch(Fn(lambda a, b: a @ b), (torch.randn(64, 64), torch.randn(64, 64)))
