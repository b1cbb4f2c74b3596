"""The performance model's terms for whole KernelBench problems (issue 39): window kernels that
gather element by element, 1×1 convolutions without layout transposes, a convolution's cuDNN
call on the host, the achieved stream bandwidth per memory type, and the harness's timing of
one synchronised call. Each test builds a case where one term alone sets the time."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import H100_BANDWIDTH, Fn, analyze, meta
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import DEFAULT_PARAMS, HostCosts
from torchroofline.price.hardware import get_gpu
from torchroofline.price.memory_time import l2_missed_bytes, loop_missed_bytes
from torchroofline.price.modes import timeline

H100 = get_gpu("h100-sxm")
#: H100 SXM: 132 SMs, each making strided_access_rate_per_sm element accesses per second
ACCESS_RATE = DEFAULT_PARAMS.strided_access_rate_per_sm * 132

#: Host costs that are all zero but one per-op cost and one per-convolution cost.
OP_AND_CONV = HostCosts(
    eager_call_s=0.0, eager_op_s=10e-6, eager_view_s=0.0, eager_module_s=0.0, launch_s=0.0,
    compile_call_s=0.0, compile_kernel_s=4e-6, cudagraph_call_s=0.0, conv_call_s=20e-6,
)


def only_load(result, base: str):
    [index] = [i for i, k in enumerate(result.eager_kernels) if base in k.name]
    return result.performance.program.eager[index], result.performance.eager.kernel_gpu_s[index]


def test_a_max_pool_gathers_each_window_element_at_the_strided_access_rate() -> None:
    # 4×4 windows at stride 1 over 8 × 64 × 256²: 8·64·253² outputs, 16 accesses each; every
    # access computes its offset, so the kernel takes accesses / rate, far above its stream time
    pool = nn.MaxPool2d(4, stride=1)
    load, busy = only_load(analyze(pool, meta(8, 64, 256, 256)), "max_pool")
    outputs = 8 * 64 * 253 * 253
    assert load.accesses == outputs * 16
    stream_s = load.bytes / (DEFAULT_PARAMS.hbm_fraction * H100_BANDWIDTH)
    assert load.accesses / ACCESS_RATE > stream_s
    assert busy == pytest.approx(load.accesses / ACCESS_RATE + DEFAULT_PARAMS.fill_latency_s,
                                 rel=1e-12)


def test_a_one_dimensional_pool_counts_its_window_once_not_squared() -> None:
    # MaxPool1d traces as max_pool2d_with_indices with kernel [1, 8]: 8 accesses per output
    load, _ = only_load(analyze(nn.MaxPool1d(8, stride=1), meta(4, 16, 1024)), "max_pool")
    assert load.accesses == 4 * 16 * (1024 - 8 + 1) * 8


def test_a_depthwise_convolution_makes_one_access_per_multiply_add() -> None:
    # 3×3 depthwise over 8 × 64 × 128²: 8·64·126² outputs of 9 multiply-adds each, run as a
    # direct convolution; an ungrouped or grouped (many channels per group) one has none
    depthwise = nn.Conv2d(64, 64, 3, groups=64, bias=False)
    load, _ = only_load(analyze(depthwise, meta(8, 64, 128, 128)), "conv")
    assert load.accesses == 8 * 64 * 126 * 126 * 9
    assert not load.layout_transposes
    dense, _ = only_load(analyze(nn.Conv2d(64, 64, 3, bias=False), meta(8, 64, 128, 128)), "conv")
    assert dense.accesses == 0
    # a group of 16 channels is a grouped GEMM (ShuffleNet's), not a direct convolution
    grouped = nn.Conv2d(64, 64, 3, groups=4, bias=False)
    assert only_load(analyze(grouped, meta(8, 64, 128, 128)), "conv")[0].accesses == 0


def test_a_one_by_one_convolution_is_priced_without_layout_transposes() -> None:
    # a 1×1, stride-1 convolution is a GEMM per image on NCHW: its time is the load's with no
    # layout passes; a 3×3 one pays (1 + conv_layout_passes) × its stream
    x = meta(16, 64, 256, 256)
    pointwise, busy = only_load(analyze(nn.Conv2d(64, 128, 1, bias=False), x), "conv")
    assert not pointwise.layout_transposes
    flat = replace(DEFAULT_PARAMS, conv_layout_passes=0.0)
    assert busy == pytest.approx(kernel_gpu_s(pointwise, H100, flat, "warm"), rel=1e-12)
    spatial, _ = only_load(analyze(nn.Conv2d(64, 128, 3, bias=False), x), "conv")
    assert spatial.layout_transposes
    strided, _ = only_load(analyze(nn.Conv2d(64, 128, 1, stride=2, bias=False), x), "conv")
    assert strided.layout_transposes  # a strided 1×1 reads a subsampled image: not one GEMM
    # compiled, Inductor's layout optimisation copies to channels-last whatever the filter
    compiled = analyze(nn.Conv2d(64, 128, 1, bias=False), x).performance.program.fused
    assert [load.layout_transposes for load in compiled if load.family == "conv"] == [True]


def test_a_convolution_adds_its_cudnn_call_to_the_host_in_both_modes() -> None:
    # one tiny convolution, no bias: eager issues it at eager_op_s + conv_call_s, compiled at
    # compile_kernel_s + conv_call_s; the GPU finishes it after that
    params = replace(DEFAULT_PARAMS, host=OP_AND_CONV)
    result = analyze(Fn(lambda x, w: F.conv2d(x, w)), meta(1, 4, 8, 8), meta(4, 4, 3, 3),
                     estimate_params=params)
    eager, compiled = result.performance.eager, result.performance.compile
    assert eager.host_s == pytest.approx(10e-6 + 20e-6, rel=1e-12)
    assert compiled.host_s == pytest.approx(4e-6 + 20e-6, rel=1e-12)
    assert eager.total_s == pytest.approx(eager.host_s + sum(eager.kernel_gpu_s), rel=1e-12)


@pytest.mark.parametrize(("gpu", "share"), [("h100-sxm", 0.9), ("a100-80gb", 0.9),
                                            ("l40s", 0.77), ("l4", 0.77), ("t4", 0.75),
                                            ("a10g", 0.81)])
def test_a_stream_reaches_its_memory_types_measured_share(gpu: str, share: float) -> None:
    # HBM parts reach 0.9 of the datasheet on a large stream, GDDR6 parts 0.75-0.81
    assert DEFAULT_PARAMS.for_gpu(get_gpu(gpu)).hbm_fraction == share


def test_a_three_dimensional_transposed_convolution_is_its_own_family() -> None:
    up3d = nn.ConvTranspose3d(8, 8, 3, bias=False)
    load, _ = only_load(analyze(up3d, meta(2, 8, 16, 16, 16)), "conv")
    assert load.family == "conv_transposed3d"
    up2d = nn.ConvTranspose2d(8, 8, 3, bias=False)
    assert only_load(analyze(up2d, meta(2, 8, 16, 16)), "conv")[0].family == "conv_transposed"


def test_a_synchronised_call_is_host_then_gpu_tail_not_their_maximum() -> None:
    # KernelBench records an event, calls the model, records an event and synchronises per
    # trial: the GPU starts idle, so a call whose host issues two kernels 10 µs apart, each
    # busy 30 µs, ends at 10 + 30 + 30 = 70 µs (the second waits for the first), not
    # max(host 20, GPU 60) = 60 µs as back-to-back trials would overlap them
    found = timeline("eager", 0.0, [10e-6, 10e-6], [30e-6, 30e-6])
    assert found.total_s == pytest.approx(70e-6, rel=1e-12)
    assert found.host_s == pytest.approx(20e-6, rel=1e-12)


@pytest.mark.parametrize(("rows", "length", "misses"), [(4096, 393216, True), (16, 16384, False)])
def test_a_long_softmax_row_is_reread_from_hbm_only_when_a_waves_rows_overflow_l2(
        rows: int, length: int, misses: bool) -> None:
    # aligned fp32 rows beyond 48 KiB: three passes, two of them re-reads. One wave holds
    # min(rows, 2 × 132) rows: 264 × 1.5 MiB = 396 MiB overflows the usable 25 MB of L2 (the
    # re-reads come from HBM), 16 × 64 KiB = 1 MiB fits (they hit L2 and cost nothing more)
    result = analyze(Fn(lambda x: torch.softmax(x, dim=1)), meta(rows, length))
    [load] = result.performance.program.eager
    assert load.l2_reread_bytes == 2 * rows * length * 4
    missed = l2_missed_bytes(load, H100, DEFAULT_PARAMS)
    assert missed == (load.l2_reread_bytes if misses else 0)
    stream_s = (load.bytes + missed) / (DEFAULT_PARAMS.hbm_fraction * H100_BANDWIDTH)
    if misses:  # many rows: the stream sets the time
        busy = result.performance.eager.kernel_gpu_s[0]
        assert busy == pytest.approx(stream_s + DEFAULT_PARAMS.fill_latency_s, rel=1e-12)


def test_a_batch_norms_apply_pass_is_not_charged_as_a_strided_kernel() -> None:
    # batch_norm_transform_input indexes its channel's statistics per block: its broadcast
    # scale and shift cost no per-element offset arithmetic, unlike a broadcast TensorIterator
    result = analyze(nn.BatchNorm2d(64), meta(8, 64, 64, 64))
    norm = [load for load in result.performance.program.eager if "norm" in load.name]
    assert len(norm) == 2 and all(load.accesses == 0 for load in norm)
    # the same broadcast as a plain mul: one access per element of x, s and the output
    scaled = analyze(Fn(lambda x, s: x * s), meta(8, 64, 64, 64), meta(1, 64, 1, 1))
    assert scaled.performance.program.eager[0].accesses == 3 * 8 * 64 * 64 * 64


@pytest.mark.parametrize(("length", "load_bytes"), [(16384, 16), (16383, 4)])
def test_an_aligned_softmax_row_streams_16_byte_vectors(length: int, load_bytes: int) -> None:
    # cunn_SoftMaxForward loads sizeof(float4) per instruction when the row length is a multiple
    # of 4 fp32 elements (one element otherwise): its block streams its row at load_bytes / 4
    # times the one-element rate. 16 rows of 64 KiB: the 16 blocks' rate sets the time (2 MB in
    # and out at 16 × 4 × 5.4 GB/s ≈ 6 µs, against well under 1 µs from L2 at the HBM rate)
    result = analyze(Fn(lambda x: torch.softmax(x, dim=1)), meta(16, length))
    [load] = result.performance.program.eager
    assert (load.rows, load.element_bytes) == (16, load_bytes)
    if load_bytes == 16:
        busy = result.performance.eager.kernel_gpu_s[0]
        scalar = kernel_gpu_s(replace(load, element_bytes=4), H100, DEFAULT_PARAMS, "warm")
        fill = DEFAULT_PARAMS.fill_latency_s
        assert scalar - fill == pytest.approx(4 * (busy - fill), rel=1e-12)


@pytest.mark.parametrize(("rows", "length", "stages"), [
    (4096, 393216, 2),  # softmax: max, then sum of exponentials, then the output: 3 loops
    (7168, 262144, 1),  # x / ‖x‖: the norm, then the output: 2 loops
])
def test_a_fused_reduction_over_long_rows_rereads_its_input_once_per_further_loop(
        rows: int, length: int, stages: int) -> None:
    # rows beyond Inductor's 1,024-element persistent reduction are looped over: each loop
    # after the first reads x again. In flight: min(rows, 2048 / 256 × 132 = 1,056) rows of
    # length × 4 B (≥ 1 MiB each) overflow the usable 25 MB of L2, so they come from HBM
    fns = {2: lambda x: torch.softmax(x, dim=1),
           1: lambda x: x / torch.linalg.vector_norm(x, dim=1, keepdim=True)}
    result = analyze(Fn(fns[stages]), meta(rows, length))
    [load] = result.performance.program.fused
    x_bytes = rows * length * 4
    assert load.loop_reread_bytes == stages * x_bytes
    assert load.loop_rows == rows and load.loop_row_bytes == length * 4
    assert loop_missed_bytes(load, H100, DEFAULT_PARAMS) == stages * x_bytes
    busy = result.performance.compile.kernel_gpu_s[0]
    stream_s = (load.bytes + stages * x_bytes) / (DEFAULT_PARAMS.hbm_fraction * H100_BANDWIDTH)
    assert busy == pytest.approx(stream_s + DEFAULT_PARAMS.fill_latency_s, rel=1e-12)


@pytest.mark.parametrize(("rows", "length", "reread"), [
    (64, 1024, 0),  # a persistent reduction: the row stays in registers, one pass
    (64, 2048, 2 * 64 * 2048 * 4),  # looped: two re-reads, but 64 rows of 8 KiB fit L2
])
def test_a_fused_softmax_rereads_only_rows_longer_than_a_persistent_reduction(
        rows: int, length: int, reread: int) -> None:
    result = analyze(Fn(lambda x: torch.softmax(x, dim=1)), meta(rows, length))
    [load] = result.performance.program.fused
    assert load.loop_reread_bytes == reread
    assert loop_missed_bytes(load, H100, DEFAULT_PARAMS) == 0


def test_a_fused_sum_over_long_rows_reads_its_input_once() -> None:
    # one stage and no output of the input's size: a single loop
    result = analyze(Fn(lambda x: x.sum(dim=1)), meta(4096, 65536))
    assert result.performance.program.fused[0].loop_reread_bytes == 0
