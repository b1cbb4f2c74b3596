"""What a library call launches where ROCm and CUDA differ (price/library_calls.py): the threads
of PyTorch's batch-norm blocks, the GEMM kernels of a convolution and MIOpen's kernels around
them. Closed forms, derived in the comments."""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn as nn

from conftest import analyze, meta
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import DEFAULT_PARAMS
from torchroofline.price.gemm_time import layout_kernels_s, matmul_share
from torchroofline.price.hardware import get_gpu
from torchroofline.price.memory_time import fixed_latency_s

MI300X, H100 = get_gpu("mi300x"), get_gpu("h100-sxm")


def _batch_norm_loads(gpu: str):
    result = analyze(
        nn.BatchNorm2d(32), meta(8, 32, 64, 64), mode="train", loss=lambda y: y.sum(), gpu=gpu
    )
    eager = result.performance.program.eager
    forward = next(k for k in eager if k.rows and "backward" not in k.name)
    backward = next(k for k in eager if k.rows and "backward" in k.name)
    return forward, backward


def test_a_rocm_batch_norm_forward_block_streams_at_half_the_row_rate() -> None:
    # Normalization.cuh: 256 threads a block on ROCm, 512 on CUDA; the forward's statistics
    # stream the input alone (256 · 1 / 512 = 0.5), the backward grad_out and x side by side
    # (256 · 2 / 512 = 1, capped at the measured rate)
    forward, backward = _batch_norm_loads("mi300x")
    assert (forward.row_share, backward.row_share) == (0.5, 1.0)
    assert {load.row_share for load in _batch_norm_loads("h100-sxm")} == {1.0}
    # 32 rows of 8·64·64 fp32 values: row-bound, so the time past the fill doubles at half
    params = DEFAULT_PARAMS.for_gpu(MI300X)
    full = kernel_gpu_s(replace(forward, row_share=1.0), MI300X, params, "cold")
    half = kernel_gpu_s(forward, MI300X, params, "cold")
    fill = fixed_latency_s(forward, params)
    assert abs((half - fill) - 2 * (full - fill)) < 1e-12


def _conv_loads(gpu: str):
    # a 3x3 convolution on the input (no input gradient asked), then a strided 1x1 one
    model = nn.Sequential(
        nn.Conv2d(16, 32, 3, padding=1, bias=False),
        nn.Conv2d(32, 64, 1, stride=2, bias=False),
        nn.Conv2d(64, 64, 3, padding=1, bias=False),
    )
    result = analyze(model, meta(4, 16, 32, 32), mode="train", loss=lambda y: y.sum(), gpu=gpu)
    return [load for load in result.performance.program.eager if load.family == "conv"]


def test_miopen_launches_its_transposes_workspace_and_cast_around_each_gemm() -> None:
    loads = _conv_loads("mi300x")
    calls = [(load.library_call, load.gemm_kernels) for load in loads]
    # forward: two 3x3 NHWC GEMMs and the strided 1x1; backward: the last layer asks both
    # gradients (two GEMMs), the strided 1x1 its own, the first layer the weight's alone
    assert calls == [
        ("conv", 1),
        ("conv_1x1_strided", 1),
        ("conv", 1),
        ("conv_backward", 2),
        ("conv_backward_1x1_strided", 2),
        ("conv_backward_one", 1),
    ]
    params = DEFAULT_PARAMS.for_gpu(MI300X)
    # each GEMM pays its fill (ROCm's 9,900 cycles at the MI300X's 2100 MHz: 4.71 µs) and its
    # 3 µs prologue/epilogue, twice for a two-gradient backward; MIOpen's 5 kernels per GEMM at
    # the fill each
    fill_s = 9900 / 2100e6
    both = loads[3]
    assert abs(fixed_latency_s(both, params) - 2 * (fill_s + 3e-6)) < 1e-15
    extra = {call: params.library_kernels[call] for call, _ in calls}
    assert extra == {
        "conv": 5,
        "conv_1x1_strided": 2,
        "conv_backward": 10,
        "conv_backward_1x1_strided": 7,
        "conv_backward_one": 5,
    }
    one_less = replace(both, library_call="conv_backward_one")
    gap = kernel_gpu_s(both, MI300X, params, "cold") - kernel_gpu_s(
        one_less, MI300X, params, "cold"
    )
    assert abs(gap - 5 * fill_s) < 1e-12


def _bf16_conv_load(gpu: str):
    conv = nn.Conv2d(16, 32, 3, padding=1, bias=False).to(device="meta", dtype=torch.bfloat16)
    result = analyze(conv, meta(4, 16, 32, 32, dtype=torch.bfloat16), gpu=gpu)
    return next(k for k in result.performance.program.eager if k.family == "conv")


def test_miopen_transposes_run_in_series_with_the_gemm_one_element_per_access() -> None:
    # a bf16 3x3 convolution 16 -> 32 on 4x16x32x32: input 4·16·32·32 = 65,536 elements,
    # weight 32·16·9 = 4,608, output 4·32·32·32 = 131,072, taken in and out again:
    # 65,536 + 4,608 + 2 · 131,072 = 332,288 elements, each read and written once at
    # 6 G accesses/s on each of the MI300X's 304 CUs
    forward = _bf16_conv_load("mi300x")
    assert forward.layout_elements == 332_288
    params = DEFAULT_PARAMS.for_gpu(MI300X)
    layout_s = 2 * 332_288 / (6e9 * 304)
    assert abs(layout_kernels_s(forward, MI300X, params) - layout_s) < 1e-15
    # in series: the kernel takes exactly that longer than its GEMM alone (no transposes; nor
    # cuDNN's passes, which would overlap it)
    alone = replace(forward, layout_transposes=False)
    gap = (kernel_gpu_s(forward, MI300X, params, "cold")
           - kernel_gpu_s(alone, MI300X, params, "cold"))
    assert abs(gap - layout_s) < 1e-12
    # cuDNN runs no layout kernels of its own, and an fp32 convolution's MIOpen solver is not
    # known to transpose: neither is charged them
    h100 = _bf16_conv_load("h100-sxm")
    assert layout_kernels_s(h100, H100, DEFAULT_PARAMS.for_gpu(H100)) == 0.0
    assert _conv_loads("mi300x")[0].layout_elements == 0


def test_miopen_convolutions_reach_hipblaslt_s_share_of_the_peak() -> None:
    # a bf16 3x3 convolution: MIOpen's implicit GEMM at ROCm's GEMM share (0.45), cuDNN's at
    # its fitted 0.673 times the mma.sync share on Hopper (2/3)
    def share(gpu: str) -> float:
        conv = nn.Conv2d(64, 64, 3, padding=1).to(device="meta", dtype=torch.bfloat16)
        result = analyze(conv, meta(8, 64, 56, 56, dtype=torch.bfloat16), gpu=gpu)
        load = next(k for k in result.performance.program.eager if k.family == "conv")
        return matmul_share(load, DEFAULT_PARAMS.for_gpu(get_gpu(gpu)))

    assert share("mi300x") == 0.45
    assert abs(share("h100-sxm") - 0.673 * 2 / 3) < 1e-12


def test_a_pointwise_convolution_is_a_gemm_with_nothing_around_it() -> None:
    result = analyze(nn.Conv2d(32, 64, 1, bias=False), meta(4, 32, 16, 16), gpu="mi300x")
    [load] = [load for load in result.performance.program.eager if load.family == "conv"]
    assert (load.library_call, load.layout_transposes) == ("conv_pointwise", False)
    assert DEFAULT_PARAMS.for_gpu(MI300X).library_kernels.get("conv_pointwise", 0) == 0


def test_cuda_convolutions_launch_no_library_kernels_of_their_own() -> None:
    params = DEFAULT_PARAMS.for_gpu(H100)
    assert all(
        params.library_kernels.get(load.library_call, 0) == 0 for load in _conv_loads("h100-sxm")
    )


def _conv_load(module: nn.Module, shape: tuple[int, ...], gpu: str, family: str = "conv"):
    result = analyze(module, meta(*shape), gpu=gpu)
    return next(k for k in result.performance.program.eager if k.family.startswith(family))


def test_a_strided_transposed_convolution_computes_its_phases_ceil_k_over_s_taps() -> None:
    # stride 2, kernel 3 per dimension: each of the 2³ phases runs ceil(3/2) = 2 taps per
    # dimension where 3/2 reach a pixel on average: (2 · 2 / 3)³ = 64/27
    strided = _conv_load(nn.ConvTranspose3d(8, 16, 3, stride=2), (2, 8, 4, 4, 4), "h100-sxm")
    assert abs(strided.phase_work - 64 / 27) < 1e-12
    # kernel 4 at stride 2 divides evenly (2 taps a phase, all real); stride 1 has one phase;
    # a forward convolution has no phases
    even = _conv_load(nn.ConvTranspose2d(8, 16, 4, stride=2), (2, 8, 4, 4), "h100-sxm")
    unit = _conv_load(nn.ConvTranspose2d(8, 16, 3), (2, 8, 4, 4), "h100-sxm")
    forward = _conv_load(nn.Conv2d(8, 16, 3, stride=2), (2, 8, 8, 8), "h100-sxm")
    assert (even.phase_work, unit.phase_work, forward.phase_work) == (1.0, 1.0, 1.0)
    # compute-bound time past the fixed latency scales by exactly that factor
    params = DEFAULT_PARAMS.for_gpu(H100)
    big = replace(strided, bytes=0, vector_s=0.0)
    one = kernel_gpu_s(replace(big, phase_work=1.0), H100, params, "cold")
    fill = fixed_latency_s(big, params)
    assert abs((kernel_gpu_s(big, H100, params, "cold") - fill) - 64 / 27 * (one - fill)) < 1e-15


def test_a_tensor_core_convolution_computes_whole_channel_tiles() -> None:
    # 16 output channels: Hopper's warpgroup MMA computes 64 per tile (4x the FLOPs' time),
    # mma.sync (A100) 16 (no waste); 24 channels on the A100 round up to 32 (32/24)
    params = {key: DEFAULT_PARAMS.for_gpu(get_gpu(key)) for key in ("h100-sxm", "a100")}
    assert (params["h100-sxm"].conv_channel_tile, params["a100"].conv_channel_tile) == (64, 16)
    assert DEFAULT_PARAMS.for_gpu(get_gpu("rtx5090")).conv_channel_tile == 16  # sm_120: mma.sync
    for key, channels, waste in (("h100-sxm", 16, 4.0), ("a100", 16, 1.0), ("a100", 24, 4 / 3),
                                 ("h100-sxm", 128, 1.0)):
        gpu = get_gpu(key)
        load = _conv_load(nn.Conv3d(8, channels, 3), (2, 8, 6, 6, 6), key)
        assert load.matmul_unit == "tensor"
        compute = replace(load, bytes=0, vector_s=0.0)
        fill = fixed_latency_s(compute, params[key])
        tiled = kernel_gpu_s(compute, gpu, params[key], "cold") - fill
        exact = kernel_gpu_s(compute, gpu, replace(params[key], conv_channel_tile=1), "cold") - fill
        assert abs(tiled - waste * exact) < 1e-12 * exact + 1e-18


def test_hopper_runs_cudnn_conv2d_on_mma_sync_and_sgemm_on_dedicated_fp32_lanes() -> None:
    # a TF32 Conv2d's share of the tensor peak is its family's times mma.sync's share of it:
    # 2/3 on Hopper (only wgmma reaches the peak), 1 on the A100 and on sm_120 (mma.sync is
    # their full-rate MMA); an fp32 matmul (SGEMM, CUDA cores) takes 0.77 on Hopper, the fitted
    # gemm share elsewhere
    gemm_share = DEFAULT_PARAMS.matmul_fraction["gemm"]
    for key, mma, sgemm in (("h100-sxm", 2 / 3, 0.77), ("a100", 1.0, gemm_share),
                            ("rtx5090", 1.0, gemm_share)):
        params = DEFAULT_PARAMS.for_gpu(get_gpu(key))
        conv = _conv_load(nn.Conv2d(8, 64, 3), (2, 8, 16, 16), key)
        assert (conv.family, conv.matmul_unit) == ("conv", "tensor")
        assert abs(matmul_share(conv, params)
                   - DEFAULT_PARAMS.matmul_fraction["conv"] * mma) < 1e-12
        gemm = _conv_load(nn.Linear(64, 64), (32, 64), key, family="gemm")
        assert (gemm.family, gemm.matmul_unit) == ("gemm", "vector")
        assert abs(matmul_share(gemm, params) - sgemm) < 1e-12
    # a Conv3d (family conv3d) keeps its share: cuDNN's fp32 3D kernels, not the 2D ones
    conv3d = _conv_load(nn.Conv3d(8, 64, 3), (2, 8, 6, 6, 6), "h100-sxm")
    assert matmul_share(conv3d, DEFAULT_PARAMS.for_gpu(H100)) == (
        DEFAULT_PARAMS.matmul_fraction["conv3d"])
