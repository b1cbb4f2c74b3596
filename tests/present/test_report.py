"""The text report's kernel table: kernels numbered in execution order, and why kernels that
share a buffer stayed apart."""

from __future__ import annotations

import pytest
import torch

from conftest import Fn, analyze, meta
from torchroofline.errors import PrecisionError
from torchroofline.present.report import (
    FAR_ABOVE_PEAK,
    TIME_COLUMNS,
    far_above_peak_lines,
    format_prompt,
    format_result,
    ladder_line,
    refusal_lines,
    unit_line,
)

N = 1024  # large enough that a GEMM's 2·N³ FLOPs outweigh any pointwise kernel's time


def _gemm_relu_chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        x = (x @ w).relu()
    return x


def test_refusals_print_under_the_kernel_table() -> None:
    # the GEMM is an extern kernel (a cuBLAS call), so Inductor cannot fuse the relu into it:
    # kernel 1 (mm) and kernel 2 (relu) share mm's output and stay apart
    text = format_result(analyze(Fn(lambda x, w: (x @ w).relu()), meta(N, N), meta(N, N)))
    table = text.split("\n  #  kernel", 1)[1].split("\n\n  module", 1)[0]
    rows = table.splitlines()[2:]
    assert [row.split()[:2] for row in rows[:2]] == [["#1", "mm"], ["#2", "relu"]]
    assert rows[2:] == [
        *TIME_COLUMNS,  # no note: both kernels are within 10× of their time at the peaks
        "",
        "  Why kernels that share a buffer stayed apart (#: execution order):",
        "    extern kernel (library call) is never fused (1 pair):",
        "      #1 mm — #2 relu",
    ]


def test_each_pair_once_and_at_most_three_per_reason() -> None:
    # kernels: 1 mm, 2 relu, 3 mm, 4 relu, 5 mm, 6 relu. Pairs sharing a buffer: each producer
    # with its consumer (1-2, 2-3, 3-4, 4-5, 5-6) and the three GEMMs that all load w (1-3,
    # 1-5, 3-5): 8 pairs, every one with a GEMM in it. The GEMMs are the costliest (2·N³
    # FLOPs each, equal, so they rank in execution order); kernel 1 lists 2, 3 and 5.
    result = analyze(Fn(_gemm_relu_chain), meta(N, N), meta(N, N))
    shown = result.top_kernels(6)
    assert [kernel.number for kernel in shown[:3]] == [1, 3, 5]
    assert refusal_lines(shown, result.kernels)[1:] == [
        "  Why kernels that share a buffer stayed apart (#: execution order):",
        "    extern kernel (library call) is never fused (8 pairs):",
        "      #1 mm — #2 relu",
        "      #1 mm — #3 mm",
        "      #1 mm — #5 mm",
        "      … 5 more (JSON: kernels[].refusals)",
    ]
    every = refusal_lines(shown, result.kernels, pairs_per_reason=100)[3:]
    pairs = [frozenset(int(part.split()[0][1:]) for part in line.split(" — ")) for line in every]
    assert len(set(pairs)) == len(pairs) == 8


def test_only_pairs_with_a_kernel_of_the_table_are_listed() -> None:
    result = analyze(Fn(_gemm_relu_chain), meta(N, N), meta(N, N))
    shown = result.top_kernels(1)
    assert refusal_lines(shown, result.kernels)[2:] == [
        "    extern kernel (library call) is never fused (3 pairs):",
        "      #1 mm — #2 relu",
        "      #1 mm — #3 mm",
        "      #1 mm — #5 mm",
    ]


def test_no_refusal_block_when_everything_fused() -> None:
    text = format_result(analyze(Fn(lambda x: x.cos().sin()), meta(N, N)))
    assert "#1 cos+sin" in text
    assert "stayed apart" not in text


def test_a_recurrence_far_above_its_peak_time_says_why() -> None:
    # one GRU layer over 64 steps: 64 serial launches of a small GEMM; its FLOPs at the peaks
    # take well under a µs, its 64 launch floors far more
    gru = torch.nn.GRU(32, 32, batch_first=True)
    result = analyze(gru, meta(1, 64, 32))
    [kernel] = [k for k in result.kernels if k.launches > 1]
    at_peak_s = max(kernel.compute_s, kernel.memory_s)
    assert kernel.time_s >= FAR_ABOVE_PEAK * at_peak_s  # the case the note is for
    [note] = far_above_peak_lines([kernel], result)[len(TIME_COLUMNS):]
    assert note.startswith(f"  #{kernel.number} {kernel.name}: ")
    assert f"a serial recurrence: {kernel.launches} launches" in note


def test_a_tiny_kernel_gets_no_note_for_its_launch_cost() -> None:
    # 32 floats: ~0.1 ns of bytes at the peak, µs of launch and fill latency, which every
    # kernel pays once and the note leaves out
    result = analyze(Fn(torch.relu), meta(32))
    assert far_above_peak_lines(result.kernels, result) == list(TIME_COLUMNS)


def test_prompt_names_the_peaks_and_judges_the_generated_kernel() -> None:
    # fp32 GEMM at PyTorch's defaults: cuBLAS in IEEE fp32 on the CUDA cores, 66.9 TFLOP/s on
    # the H100 SXM; SoL = 2·N³ / 66.9e12 s = 32.1 µs for N = 1024
    result = analyze(Fn(lambda x, w: x @ w), meta(N, N), meta(N, N))
    assert unit_line(result).startswith("fp32 matmuls on CUDA cores (66.9 TFLOP/s); ")
    sol_ms = 2 * N**3 / 66.9e12 * 1e3
    prompt = format_prompt(result.with_actual(4 * sol_ms), gen_ms=2 * sol_ms).splitlines()
    assert len(prompt) <= 15
    assert prompt[-1] == (
        "- Generated kernel: 64.2 µs = 50.0% of SoL, 2.00x the reference; at most 2.00x faster "
        "is physically possible"
    )
    below = format_prompt(result, gen_ms=sol_ms / 2).splitlines()[-1]  # 16 µs: a TF32 time
    assert "= 200.0% of SoL; BELOW THE BOUND: faster than the fp32 bound; possible only " in below
    # 1 µs is below the memory term (3.76 µs, below), which no math can beat
    too_fast = format_prompt(result, gen_ms=1e-3).splitlines()[-1]
    assert "; FASTER THAN LIGHT: faster than any math on this GPU" in too_fast


def test_a_time_below_the_program_bound_names_the_math_that_could_reach_it() -> None:
    # the N = 1024 fp32 GEMM: 2·N³ = 2.15 GFLOPs; the program's bound is on CUDA cores
    # (66.9 TFLOP/s: 32.1 µs), a TF32 kernel's on TF32 tensor cores (494.7: 4.34 µs), an fp8
    # kernel's at 1978.9 TFLOP/s (1.09 µs), above the memory term (3 N² · 4 B at 3.35 TB/s:
    # 3.76 µs, which floors the bf16 and lower rungs)
    result = analyze(Fn(lambda x, w: x @ w), meta(N, N), meta(N, N))
    memory_ms = 3 * N * N * 4 / 3.35e12 * 1e3
    assert result.time_ms["sol_by_math"]["tf32"] == pytest.approx(
        max(2 * N**3 / 494.7e12 * 1e3, memory_ms))
    between = result.with_actual(10e-3)  # 10 µs: below 32.1 µs, above every lower rung
    assert between.actual.below_bound and between.actual.possible_with == "tf32"
    assert not between.actual.impossible and not between.to_dict()["actual"]["impossible"]
    assert "faster than the fp32 bound; possible only with TF32 or lower math" in between.format()
    assert "possible only with TF32" in format_prompt(between).splitlines()[-1]
    beyond = result.with_actual(memory_ms / 2)  # below the memory term: no math reaches it
    assert beyond.actual.possible_with is None and beyond.actual.impossible
    assert "faster than any math on this GPU" in beyond.format()


def test_a_chosen_math_makes_its_rung_the_speed_of_light() -> None:
    # the N = 1024 fp32 GEMM at math="tf32": SoL = 2·N³ / 494.7e12 s = 4.34 µs (above the
    # 3.76 µs memory term), the ladder unchanged; a 10 µs time then has 2.30x headroom
    result = analyze(Fn(lambda x, w: x @ w), meta(N, N), meta(N, N), math="tf32", actual_ms=10e-3)
    tf32_ms = 2 * N**3 / 494.7e12 * 1e3
    assert result.sol_ms == pytest.approx(tf32_ms)
    assert result.time_ms["sol_by_math"]["program"] == pytest.approx(2 * N**3 / 66.9e12 * 1e3)
    assert result.actual.headroom == pytest.approx(10e-3 / tf32_ms)
    assert not result.actual.below_bound and result.actual.possible_with == "tf32"
    assert result.to_dict()["math"] == "tf32"
    assert "Precision: fp32   Math: TF32" in result.format()
    assert result.on("h100-sxm").math == "tf32"  # re-pricing keeps the contract
    assert result.on("h100-sxm", math="program").sol_ms == pytest.approx(tf32_ms * 494.7 / 66.9)
    with pytest.raises(PrecisionError, match="unknown math 'int4'"):
        analyze(Fn(torch.relu), meta(8), math="int4")
    assert ladder_line(result) == (
        "fp32 32.1 µs · TF32 4.34 µs · BF16 3.76 µs · FP16 3.76 µs · FP8 3.76 µs")


def test_headline_flops_are_necessary_and_executed_flops_stand_beside_them():
    # Conv2d(8, 8, 3, padding=1, no bias) over (2, 8, 16, 16): per image and channel pair the
    # kernels run 9·16·16 = 2,304 taps; 46² = 2,116 of them read the image (16·3 − 2 = 46 taps
    # per axis land inside), the rest multiply the padding's zeros, which the bound leaves out.
    # FlopCounterMode counts what ran
    from torch.utils.flop_counter import FlopCounterMode

    from torchroofline.present.report import result_to_dict

    conv = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
    result = analyze(conv, meta(2, 8, 16, 16))
    executed = 2 * (2 * 8 * 8) * 9 * 16 * 16
    assert result.flops == 2 * (2 * 8 * 8) * 46 * 46
    assert result.executed_flops == executed
    with FlopCounterMode(display=False) as counter:
        conv(torch.randn(2, 8, 16, 16))
    assert counter.get_total_flops() == executed
    lines = format_result(result).splitlines()
    assert any(line.startswith("  FLOPs (necessary)") and "541.70 KFLOPs" in line
               for line in lines)
    assert any(line.startswith("  FLOPs (executed)") and "589.82 KFLOPs" in line
               for line in lines)
    assert result_to_dict(result)["flops"] == {
        "total": result.flops, "tensor": result.flops, "vector": 0, "executed": executed,
    }
    # the padding's products are left out, yet every output is kept: none is unkept
    assert result_to_dict(result)["unkept"] == {"flops_share": 0.0, "where": None}
    assert "necessary 541.70 K" in format_prompt(result) and "executed 589.82 K" in \
        format_prompt(result)
