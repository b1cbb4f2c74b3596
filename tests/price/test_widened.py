"""The estimate prices each op in the dtype it runs in: values a program widens itself
(dequantized FP8/int8 data, an explicit upcast) or types narrower than fp32 keep their dtype
whatever ``precision=`` casts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_cdna import CDNA, MI350X_FP32, _matmul

from conftest import H100_BF16, H100_FP32, Fn, analyze, meta
from torchroofline.price.estimate_params import CDNA_FILL_CYCLES, DEFAULT_PARAMS
from torchroofline.price.gemm_time import serial_epilogue_s
from torchroofline.price.hardware import get_gpu
from torchroofline.price.precision import widened_value_ids
from torchroofline.suites.solexecbench import analyze_dir

FIXTURES = Path(__file__).parents[1] / "fixtures" / "solexecbench"
FP8_GEMM, INT8_GEMM = FIXTURES / "fp8_dequant_gemm", FIXTURES / "int8_dequant_gemm"
M = N = K = 4096  #: both fixtures' one workload

#: H100 SXM dense FP16 tensor cores, FP32 accumulate (Hopper whitepaper)
H100_FP16 = 989.4e12


def _gemm(result):
    """The eager plan's GEMM kernel: its load and its estimated GPU seconds."""
    return _matmul(result, "gemm")


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp8"])
def test_an_fp8_reference_that_multiplies_in_fp32_is_estimated_in_fp32(precision: str) -> None:
    # (A.to(fp32) * a) @ (B.to(fp32) * b).T: the mm reads and writes fp32 on any precision,
    # 2·M·N·K FLOPs on the MI350X's fp32 matrix cores at CDNA's fp32 share; 4096² outputs in
    # 128² tiles are 1,024 tiles, 4 whole waves over 256 CUs (wave efficiency 1)
    [result] = analyze_dir(FP8_GEMM, "mi350x", precision)
    load, busy = _gemm(result)
    flops = 2 * M * N * K
    assert load.matmul_unit == "vector"
    assert load.matmul_s == pytest.approx(flops / MI350X_FP32, rel=1e-9)
    assert load.bytes == 4 * (M * K + N * K + M * N)
    fixed_s = CDNA_FILL_CYCLES / 2200e6 + DEFAULT_PARAMS.matmul_latency_s  # at 2200 MHz
    share = CDNA["fp32_matrix_fraction"]
    assert busy == pytest.approx(flops / (MI350X_FP32 * share) + fixed_s, rel=1e-9)


def test_the_estimate_follows_the_programs_dtypes_and_the_bound_the_precision() -> None:
    by_precision = {p: analyze_dir(FP8_GEMM, "mi350x", p)[0] for p in ("fp32", "bf16", "fp8")}
    eager_ms = {p: r.time_ms["eager_estimate"] for p, r in by_precision.items()}
    sol_ms = {p: r.sol_ms for p, r in by_precision.items()}
    # the kernels' dtypes are the program's: only the two fp32 scales the precision casts move
    # (4 × 4,096 bytes each at most), far below the GEMM's millisecond
    assert eager_ms["bf16"] == pytest.approx(eager_ms["fp32"], rel=1e-3)
    assert eager_ms["fp8"] == pytest.approx(eager_ms["fp32"], rel=1e-3)
    # the bound keeps the precision's cast: the GEMM on bf16, then on fp8 matrix cores
    assert sol_ms["fp8"] < sol_ms["bf16"] < sol_ms["fp32"]


def test_a_definitions_fp16_inputs_stay_fp16_at_a_narrower_precision() -> None:
    # A @ B.T of fp16 inputs at precision fp8: the estimate keeps the dtype the definition gives
    # (2 bytes a value, fp16 tensor cores), the bound takes the cast to fp8
    fp16, fp8 = (analyze_dir(FIXTURES / "gemm", "h100-sxm", p)[1] for p in ("fp16", "fp8"))
    m, n, k = 128, 64, 32  # the second workload
    load, _ = _gemm(fp8)
    assert load.matmul_s == pytest.approx(2 * m * n * k / H100_FP16, rel=1e-3)
    assert load.bytes == 2 * (m * k + n * k + m * n)
    assert fp8.time_ms["eager_estimate"] == fp16.time_ms["eager_estimate"]
    assert fp8.sol_ms < fp16.sol_ms


def test_an_int8_weight_dequantized_to_fp32_runs_sgemm_on_the_cuda_cores() -> None:
    # X.to(fp32) @ (W.to(fp32) * s).T at precision bf16 on the H100: IEEE fp32 on the CUDA cores
    # at Hopper's SGEMM share (dedicated FP32 lanes); 1,024 tiles of 128² over 132 SMs take 8
    # waves: 1024 / 1056 busy; then each block stores its tile after its K loop, not overlapped
    # (serial_epilogue_s: the output's bytes at the memory rate)
    [result] = analyze_dir(INT8_GEMM, "h100-sxm", "bf16")
    load, busy = _gemm(result)
    flops = 2 * M * N * K
    assert load.matmul_unit == "vector"
    assert load.matmul_s == pytest.approx(flops / H100_FP32, rel=1e-3)
    share = DEFAULT_PARAMS.for_gpu(get_gpu("h100-sxm")).cuda_core_gemm_fraction * 1024 / 1056
    fixed_s = DEFAULT_PARAMS.fill_latency_s + DEFAULT_PARAMS.matmul_latency_s
    epilogue_s = serial_epilogue_s(load, result.gpu, DEFAULT_PARAMS.for_gpu(result.gpu), "cold")
    assert epilogue_s > 0
    assert busy == pytest.approx(load.matmul_s / share + fixed_s + epilogue_s, rel=1e-9)


def test_an_fp32_program_run_at_bf16_is_still_cast_whole() -> None:
    # KernelBench's reading of precision=: an fp32 program priced as if written in bf16; it
    # widens nothing itself, so its matmul runs on bf16 tensor cores at 2 bytes a value
    result = analyze(Fn(torch.mm), meta(4096, 4096), meta(4096, 4096), precision="bf16")
    assert not widened_value_ids(result.plans.trace.ops)
    load, _ = _gemm(result)
    assert load.matmul_unit == "tensor"
    assert load.matmul_s == pytest.approx(2 * 4096**3 / H100_BF16, rel=1e-3)
    assert load.bytes == 2 * 3 * 4096**2


@pytest.mark.parametrize(("forward", "inputs", "widened"), [
    # an upcast of bf16 data, and the product of two upcasts
    (lambda x, w: x.float() @ w.float(), (torch.bfloat16,) * 2, 3),
    # int8 data dequantized, then scaled: both values are fp32 by the program's choice
    (lambda q, s: q.float() * s, (torch.int8, torch.float32), 2),
    # bf16 times an fp32 scale promotes to fp32: the program computes that product in fp32
    (lambda x, s: x * s, (torch.bfloat16, torch.float32), 1),
    # must not fire: indices and masks become the default float, which a precision casts
    (lambda i, m: i.float() + m.float(), (torch.int64, torch.bool), 0),
    # must not fire: a narrowing cast and fp32 arithmetic on fp32 inputs
    (lambda x, y: x.half() + (x * y).half(), (torch.float32,) * 2, 0),
])
def test_values_the_program_widens_itself(forward, inputs, widened: int) -> None:
    tensors = [torch.ones(64, 64).to(dtype) for dtype in inputs]
    result = analyze(Fn(forward), *tensors, precision="bf16")
    assert len(widened_value_ids(result.plans.trace.ops)) == widened
