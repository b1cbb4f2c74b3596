"""Plans are facts of the program: built once, before pricing, and re-priced on any GPU."""

from __future__ import annotations

import pytest
import torch

from conftest import H100_BANDWIDTH, Fn, analyze, meta
from torchroofline.costs import Cost, total_cost
from torchroofline.plan import plans as plans_module
from torchroofline.plan.plans import make_plans
from torchroofline.price.context import PricingContext
from torchroofline.price.roofline import price
from torchroofline.trace.tracer import trace_model

M, K, N = 256, 128, 64
FP32 = 4  #: bytes per fp32 element


def mlp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w) * 2


def test_cost_adds_field_by_field() -> None:
    parts = [Cost(10, 1, 100), Cost(0, 5, 7), Cost(3, 0, 0)]
    assert total_cost(parts) == Cost(13, 6, 107)
    assert total_cost(parts).flops == 19
    assert total_cost([]) == Cost()


def test_result_on_reprices_the_same_plans_without_rebuilding(monkeypatch) -> None:
    result = analyze(Fn(mlp), meta(M, K), meta(K, N))

    def rebuild(*args: object) -> None:
        raise AssertionError("Result.on rebuilt a plan")

    for name in ("eager_plan", "fused_plan", "necessary_work", "cost_trace"):
        monkeypatch.setattr(plans_module, name, rebuild)
    on_a100 = result.on("a100-40gb")
    assert on_a100.plans is result.plans
    # the plans' bytes do not depend on the GPU: mm (x, w in; x@w out), then relu·2 fused
    mm_elements = M * K + K * N + M * N
    assert on_a100.fused_bytes == result.fused_bytes == (mm_elements + 2 * M * N) * FP32
    # …but their time does: the A100 40GB's HBM2 runs at 1,555 GB/s (datasheet)
    assert on_a100.memory_sol_s == pytest.approx(result.compulsory_bytes / 1555e9)
    assert result.memory_sol_s == pytest.approx(result.compulsory_bytes / H100_BANDWIDTH)


def test_totals_are_the_sums_of_the_kernels() -> None:
    result = analyze(Fn(mlp), meta(M, K), meta(K, N))
    # eager: mm, relu (M·N in, out), mul (M·N in, out)
    assert result.unfused_bytes == (M * K + K * N + M * N + 4 * M * N) * FP32
    assert result.unfused_kernel_count == len(result.eager_kernels) == 3
    assert result.fused_kernel_count == len(result.kernels) == 2
    # necessary: 2·M·N·K on the matmul units, relu and ·2 on the vector units
    assert (result.tensor_flops, result.vector_flops) == (2 * M * N * K, 2 * M * N)
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes


def test_price_takes_plans_built_from_the_stages() -> None:
    trace = trace_model(Fn(mlp), (meta(M, K), meta(K, N)))
    plans = make_plans(trace)
    half = price(plans, PricingContext.resolve("h100-sxm", "bf16"))
    full = price(plans, PricingContext.resolve("h100-sxm", "fp32"))
    # the same plans at two element sizes: every byte count halves
    assert 2 * half.fused_bytes == full.fused_bytes
    assert 2 * half.compulsory_bytes == full.compulsory_bytes
    assert half.flops == full.flops == 2 * M * N * K + 2 * M * N


def test_notes_added_to_a_result_survive_repricing() -> None:
    result = analyze(Fn(mlp), meta(M, K), meta(K, N)).with_notes(["built from problem.py"])
    assert result.notes[0] == "built from problem.py"
    assert result.on("a100-40gb").notes[0] == "built from problem.py"
    assert result.on("a100-40gb").notes.count("built from problem.py") == 1
