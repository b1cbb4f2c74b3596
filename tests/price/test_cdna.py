"""CDNA in the estimate: fp32 GEMMs and convolutions on the fp32 matrix cores (MFMA) at their
own share, and CDNA 4's GPUs (MI350X, MI355X) on CDNA's constants."""

from __future__ import annotations

import pytest
import torch

from conftest import Fn, analyze, meta
from torchroofline.price.estimate_params import CDNA_FILL_CYCLES, DEFAULT_PARAMS
from torchroofline.price.gemm_time import serial_epilogue_s

#: MI350X dense FP32 (vector and MFMA alike: AMD Instinct MI350X brochure): 144.2 TFLOP/s
MI350X_FP32 = 144.2e12
CDNA = DEFAULT_PARAMS.per_architecture["CDNA4"]


def _matmul(result, family: str):
    """The eager plan's kernel of ``family``: its load and its estimated GPU seconds."""
    program, eager = result.performance.program, result.performance.eager
    [index] = [i for i, load in enumerate(program.eager) if load.family == family]
    return program.eager[index], eager.kernel_gpu_s[index]


@pytest.mark.parametrize(("gpu", "clock_mhz"), [("mi350x", 2200), ("mi355x", 2400)])
def test_cdna4_gpus_take_cdnas_kernel_floor(gpu: str, clock_mhz: int) -> None:
    # a 4 KB relu: its bytes take nanoseconds, the kernel ROCm's fill, 9,900 cycles (the
    # MI350X's 4.5 µs floor at 2200 MHz, issue 39) at each part's clock: 4.5 and 4.125 µs
    result = analyze(Fn(torch.relu), meta(1024)).on(gpu)
    assert result.gpu.architecture == "CDNA4"
    assert result.performance.eager.kernel_gpu_s[0] == pytest.approx(
        9900 / (clock_mhz * 1e6), rel=0.01)


def test_fp32_gemms_use_the_fp32_matrix_share_on_cdna_only() -> None:
    # the same fp32 mm: CDNA's fp32 share on the MI300X, Hopper's SGEMM share on the H100 (whose
    # SIMT kernel stores its output after its K loop: serial_epilogue_s, 0 on CDNA's MFMA)
    result = analyze(Fn(torch.mm), meta(4096, 4096), meta(4096, 4096))
    shares = {}
    for gpu in ("h100-sxm", "mi300x"):
        load, busy = _matmul(result.on(gpu), "gemm")
        params = DEFAULT_PARAMS.for_gpu(result.on(gpu).gpu)
        fixed_s = (params.fill_latency_s + params.matmul_latency_s
                   + serial_epilogue_s(load, result.on(gpu).gpu, params, "cold"))
        shares[gpu] = load.matmul_s / (busy - fixed_s)
    # H100: 1,024 tiles over 132 SMs in 8 waves; MI300X: 1,024 over 304 CUs in 4 waves
    assert shares["h100-sxm"] == pytest.approx(
        DEFAULT_PARAMS.for_gpu(result.on("h100-sxm").gpu).cuda_core_gemm_fraction * 1024 / 1056,
        rel=1e-9)
    assert shares["mi300x"] == pytest.approx(CDNA["fp32_matrix_fraction"] * 1024 / 1216, rel=1e-9)


def test_an_fp32_convolution_on_the_mi350x_runs_at_the_fp32_matrix_share() -> None:
    # no TF32 on CDNA4: the TF32-allowed convolution runs on fp32 MFMA at CDNA's fp32 share;
    # 8·56² = 25,088 output rows × 64 channels: 128² tiles (196) leave CUs idle, 64² tiles
    # make 392, two waves over 256 CUs (392 / 512 busy); compute-bound (its bytes, 3.58 passes
    # over 12.8 MB, take 8 µs)
    conv = torch.nn.functional.conv2d
    result = analyze(Fn(lambda x, w: conv(x, w, padding=1)), meta(8, 64, 56, 56),
                     meta(64, 64, 3, 3), gpu="mi350x")
    load, busy = _matmul(result, "conv")
    flops = 2 * 8 * 56 * 56 * 64 * 64 * 9
    assert load.matmul_unit == "vector"
    assert load.matmul_s == pytest.approx(flops / MI350X_FP32, rel=1e-9)
    fill_s = CDNA_FILL_CYCLES / 2200e6  # at the MI350X's 2200 MHz
    fixed_s = fill_s * (1 + CDNA["library_kernels"]["conv"])
    fixed_s += DEFAULT_PARAMS.matmul_latency_s
    compute_s = load.matmul_s / (CDNA["fp32_matrix_fraction"] * 392 / 512)
    assert busy == pytest.approx(compute_s + fixed_s, rel=1e-9)
