"""A program that holds FP8 values but runs its matmuls in fp32 (FP8-quantized weights
dequantized, or a reference emulating an FP8 GEMM) says which rung an FP8 kernel is held to and
how to ask for it (issue 38, item 7: a SOL-ExecBench FP8 problem read 1.01 ms, its FP8 rung
31.4 µs, and nothing said so)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from conftest import meta
from torchroofline import analyze, analyze_file, get_gpu
from torchroofline.units import human_ms

N = 4096
FIXTURES = __import__("pathlib").Path(__file__).parents[1] / "fixtures" / "quantized"


class DequantizedLinear(nn.Module):
    """An e4m3 weight with a scale per row, dequantized to fp32 and multiplied in fp32."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("weight", torch.empty(N, N, dtype=torch.float8_e4m3fn,
                                                   device="meta"))
        self.register_buffer("scale", torch.empty(N, device="meta"))

    def forward(self, x):
        return x @ (self.weight.float() * self.scale[:, None]).t()


def test_fp8_values_under_fp32_math_name_the_fp8_rung_and_the_option():
    result = analyze(DequantizedLinear(), meta(N, N), "h100-sxm")
    gpu = get_gpu("h100-sxm")
    # compute-bound: the matmul's 2·N³ FLOPs and the scaling's N², all on the CUDA cores at
    # fp32; at the FP8 rung the matmul runs on the FP8 tensor cores, the scaling beside it
    fp8_s = 2 * N**3 / gpu.tensor_peak("fp8")
    assert result.sol_by_math_s["fp8"] == pytest.approx(fp8_s, rel=1e-12)
    assert result.sol_s == pytest.approx((2 * N**3 + N**2) / gpu.vector_peak("fp32"), rel=1e-12)
    assert result.sol_s > 20 * fp8_s
    note = next(n for n in result.notes if n.startswith("the program holds FP8 values"))
    assert "(float8_e4m3fn)" in note and f"its bound, {human_ms(result.sol_ms)}," in note
    assert f"held to the FP8 rung, {human_ms(fp8_s * 1e3)}: pass --math fp8" in note
    assert note in result.to_dict()["notes"]


def test_no_hint_where_fp8_math_is_asked_or_already_run():
    asked = analyze(DequantizedLinear(), meta(N, N), "h100-sxm", math="fp8")
    assert not any("FP8 values" in note for note in asked.notes)
    # torch._scaled_mm runs on the FP8 tensor cores already: the program is at the FP8 rung
    native = analyze_file(FIXTURES / "fp8_scaled_mm.py")
    assert not any("FP8 values" in note for note in native.notes)
    plain = analyze(nn.Linear(64, 64), meta(8, 64))
    assert not any("FP8 values" in note for note in plain.notes)
