"""The performance model (estimate.py) on closed cases built so each effect alone sets the time."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn as nn

from conftest import H100_BANDWIDTH, Fn, analyze, meta
from torchroofline.errors import InputError
from torchroofline.price.attention_time import ATTENTION_QUERY_ROWS
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import DEFAULT_PARAMS, EstimateParams, HostCosts
from torchroofline.price.gemm_time import wave_efficiency
from torchroofline.price.hardware import get_gpu
from torchroofline.price.kernel_load import GemmShape, KernelLoad
from torchroofline.price.modes import host_scale_totals_ms, host_scaled, timeline

H100 = get_gpu("h100-sxm")
H100_SMS = 132

#: Host costs that are all zero but one per-op cost: times follow in closed form.
OP_ONLY = HostCosts(
    eager_call_s=0.0, eager_op_s=10e-6, eager_view_s=0.0, eager_module_s=0.0, launch_s=0.0,
    compile_call_s=0.0, compile_kernel_s=0.0, cudagraph_call_s=0.0,
)


def chain(length: int) -> nn.Module:
    def forward(x: torch.Tensor) -> torch.Tensor:
        for _ in range(length):
            x = torch.relu(x)
        return x

    return Fn(forward)


def test_a_chain_of_tiny_kernels_is_launch_bound_at_the_host_cost_per_kernel() -> None:
    params = replace(DEFAULT_PARAMS, host=OP_ONLY)
    length = 20
    result = analyze(chain(length), meta(32), estimate_params=params)
    eager = result.performance.eager
    assert len(eager.kernel_gpu_s) == length
    last_kernel = eager.kernel_gpu_s[-1]
    assert max(eager.kernel_gpu_s) < OP_ONLY.eager_op_s  # each kernel hides behind the host
    # the host issues kernel k at k·10 µs; the GPU finishes the last one right after its issue
    assert eager.total_s == pytest.approx(length * OP_ONLY.eager_op_s + last_kernel, rel=1e-12)
    assert eager.launch_bound
    assert eager.host_bound_share == pytest.approx(1 - sum(eager.kernel_gpu_s) / eager.total_s)
    assert "LAUNCH-BOUND" in result.format()


def test_a_huge_streaming_kernel_runs_at_the_achieved_bandwidth() -> None:
    elements = 2**28  # 1 GiB in, 1 GiB out at fp32
    result = analyze(Fn(torch.relu), meta(elements))
    [kernel] = result.eager_kernels
    assert kernel.bytes == 2 * elements * 4
    achieved = DEFAULT_PARAMS.hbm_fraction * H100_BANDWIDTH
    expected = kernel.bytes / achieved + DEFAULT_PARAMS.fill_latency_s
    assert result.performance.eager.kernel_gpu_s[0] == pytest.approx(expected, rel=1e-12)
    assert not result.performance.eager.launch_bound


def test_bandwidth_share_grows_with_bytes_moved() -> None:
    small = analyze(Fn(torch.relu), meta(2**10)).performance.eager.kernel_gpu_s[0]
    large = analyze(Fn(torch.relu), meta(2**26)).performance.eager.kernel_gpu_s[0]
    assert (2**10 * 8 / small) < 0.01 * (2**26 * 8 / large)
    assert small >= DEFAULT_PARAMS.fill_latency_s  # no kernel is shorter than the fill latency


def gemm_load(tiles_m: int) -> KernelLoad:
    """A compute-bound GEMM of ``tiles_m`` × 1 output tiles of 128 (k = 64: no K split)."""
    shape = GemmShape(batch=1, m=128 * tiles_m, n=128, k=64)
    flops = 2 * shape.m * shape.n * shape.k
    return KernelLoad("mm", "gemm", matmul_s=flops / 66.9e12, vector_s=0.0, bytes=0,
                      launches=1, gemm=shape)


def test_one_tile_more_than_a_full_wave_costs_a_second_wave() -> None:
    full, one_more = gemm_load(H100_SMS), gemm_load(H100_SMS + 1)
    assert wave_efficiency(full.gemm, H100_SMS, DEFAULT_PARAMS) == 1.0
    assert wave_efficiency(one_more.gemm, H100_SMS, DEFAULT_PARAMS) == (133 / 264)
    fill = DEFAULT_PARAMS.fill_latency_s + DEFAULT_PARAMS.matmul_latency_s  # a library GEMM's
    full_s = kernel_gpu_s(full, H100, DEFAULT_PARAMS, "cold") - fill
    one_more_s = kernel_gpu_s(one_more, H100, DEFAULT_PARAMS, "cold") - fill
    assert one_more_s == pytest.approx(2 * full_s, rel=1e-12)  # the step, not 133/132


def test_too_few_tiles_take_smaller_tiles_then_split_k() -> None:
    small = GemmShape(batch=1, m=256, n=256, k=131072)  # 4 tiles of 128, 64 of 32: split K
    assert wave_efficiency(small, H100_SMS, DEFAULT_PARAMS) == 128 / H100_SMS  # 2 splits
    shallow = GemmShape(batch=1, m=256, n=256, k=64)  # 64 tiles of 32, nothing to split
    assert wave_efficiency(shallow, H100_SMS, DEFAULT_PARAMS) == 64 / H100_SMS


def test_a_16_row_layer_norm_is_parallelism_limited_in_eager_only() -> None:
    result = analyze(nn.LayerNorm((64, 256, 256)), meta(16, 64, 256, 256))
    [kernel] = [k for k in result.eager_kernels if "layer_norm" in k.name]
    load = result.performance.program.eager[result.eager_kernels.index(kernel)]
    assert load.rows == 16
    assert load.reread_bytes == 16 * 64 * 256 * 256 * 4  # statistics, then normalise: two reads
    rows_s = (kernel.bytes + load.reread_bytes) / (16 * DEFAULT_PARAMS.row_bandwidth_bytes_per_s)
    assert rows_s > kernel.bytes / (DEFAULT_PARAMS.hbm_fraction * H100_BANDWIDTH)
    eager_s = result.performance.eager.kernel_gpu_s[result.eager_kernels.index(kernel)]
    assert eager_s == pytest.approx(rows_s + DEFAULT_PARAMS.fill_latency_s, rel=1e-12)
    assert all(load.rows is None for load in result.performance.program.fused)
    assert result.performance.compile.gpu_busy_s < result.performance.eager.gpu_busy_s


@pytest.mark.parametrize("norm", [nn.GroupNorm(4, 64), nn.BatchNorm2d(64)])
def test_a_norm_run_as_two_kernels_reads_its_input_twice_not_four_times(norm) -> None:
    # eager group norm (RowwiseMoments, then the apply kernel) and batch norm in training:
    # the statistics kernel reads x, the normalize kernel reads x and writes y — 3·|x| in all,
    # plus the small statistics; no kernel adds a second pass of its own
    x_bytes = 16 * 64 * 32 * 32 * 4
    result = analyze(norm, meta(16, 64, 32, 32))
    loads = [load for load in result.performance.program.eager if "norm" in load.name]
    assert len(loads) == 2
    moved = sum(load.bytes + load.reread_bytes for load in loads)
    assert 3 * x_bytes <= moved < 3 * x_bytes + 4096
    # the statistics run a block per row: group norm's per (sample, group), 16 × 4; batch
    # norm's per channel, 64 (batch_norm_collect_statistics_kernel's grid); the apply pass is
    # parallel over elements
    expected = [16 * 4, None] if isinstance(norm, nn.GroupNorm) else [64, None]
    assert [load.rows for load in loads] == expected


def test_a_recurrence_is_at_least_its_serial_steps() -> None:
    gru = nn.GRU(64, 64, num_layers=2, batch_first=True)
    result = analyze(gru, meta(4, 100, 64))
    [load] = [k for k in result.performance.program.eager if k.family == "rnn"]
    index = result.performance.program.eager.index(load)
    assert load.launches == 2 * (1 + 100)
    assert result.performance.eager.kernel_gpu_s[index] >= load.launches * (
        DEFAULT_PARAMS.rnn_step_s
    )


def test_timeline_is_gpu_bound_when_kernels_outlast_the_host() -> None:
    mode = timeline("eager", 0.0, [1e-6] * 3, [10e-6] * 3)
    assert mode.total_s == pytest.approx(1e-6 + 30e-6)
    assert mode.gpu_busy_s == pytest.approx(30e-6)
    assert not mode.launch_bound


FAST_AS_LIGHT = EstimateParams(
    host=replace(OP_ONLY, eager_op_s=0.0),
    hbm_fraction=1.0,
    fill_latency_s=0.0,
    vector_fraction=1.0,
    matmul_fraction=dict.fromkeys(DEFAULT_PARAMS.matmul_fraction, 1.0),
    cudagraph_gap_s=0.0,
)


@pytest.mark.parametrize("params", [DEFAULT_PARAMS, FAST_AS_LIGHT])
@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_no_estimate_is_below_the_speed_of_light(params: EstimateParams, cache: str) -> None:
    models = [
        (nn.Sequential(nn.Conv2d(3, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 30 * 30, 10)),
         meta(8, 3, 32, 32)),
        (chain(4), meta(1024)),
        (Fn(torch.mm), (meta(512, 512), meta(512, 512))),
    ]
    for model, inputs in models:
        inputs = inputs if isinstance(inputs, tuple) else (inputs,)
        result = analyze(model, *inputs, cache=cache, estimate_params=params)
        for gpu in ("h100-sxm", "t4", "b200"):
            priced = result.on(gpu)
            assert priced.performance.params is params  # Result.on keeps the parameters
            for estimate in (priced.eager_estimate_s, priced.fused_estimate_s,
                             priced.cudagraph_estimate_s):
                assert priced.sol_s <= estimate


def test_host_profile_scales_every_cpu_cost() -> None:
    slow = DEFAULT_PARAMS.host.scaled(2.0)
    for name in ("eager_op_s", "compile_call_s", "cudagraph_call_s", "launch_s"):
        assert getattr(slow, name) == pytest.approx(2 * getattr(DEFAULT_PARAMS.host, name))


def test_a_host_scale_reruns_only_the_pipelines() -> None:
    # a launch-bound chain of 20 relus with only the per-op host cost: eager = 20 · 10 µs · s
    # plus the last kernel's GPU time, at any host scale s
    params = replace(DEFAULT_PARAMS, host=OP_ONLY)
    result = analyze(chain(20), meta(32), estimate_params=params)
    last_kernel = result.performance.eager.kernel_gpu_s[-1]
    for scale in (0.5, 2.0):
        fast = host_scaled(result.performance, scale)  # GPU times kept, pipelines rerun
        assert fast.eager.total_s == pytest.approx(20 * 10e-6 * scale + last_kernel, rel=1e-12)
        full = analyze(chain(20), meta(32), estimate_params=params.host_scaled(scale))
        assert fast.modes == full.performance.modes  # the same as pricing from scratch
    totals = host_scale_totals_ms(result.performance, (0.5, 1.0), floor_s=result.sol_s)
    assert totals["eager"][1] == pytest.approx(result.eager_estimate_s * 1e3, rel=1e-12)
    assert totals["eager"][0] == pytest.approx((10 * 10e-6 + last_kernel) * 1e3, rel=1e-12)


@pytest.mark.parametrize("factor", [0, -1.0, float("nan"), "2"])
def test_a_host_scale_is_a_positive_number(factor: object) -> None:
    with pytest.raises(InputError, match="a host scale is a number above 0"):
        DEFAULT_PARAMS.host_scaled(factor)


def test_json_has_each_mode_with_its_split() -> None:
    result = analyze(chain(3), meta(64))
    data = result.to_dict()
    assert data["time_ms"]["cudagraph_estimate"] == pytest.approx(result.cudagraph_estimate_s * 1e3)
    for mode in ("eager", "fused", "cudagraph"):
        entry = data["estimate"][mode]
        assert entry["total_ms"] == pytest.approx(data["time_ms"][f"{mode}_estimate"])
        assert 0.0 <= entry["host_bound_share"] <= 1.0
        assert math.isclose(sum(entry["gpu_ms_by_family"].values()), entry["gpu_busy_ms"])


def test_per_gpu_entries_replace_a_constant_on_that_gpu_only() -> None:
    params = replace(DEFAULT_PARAMS, per_gpu={"h100-sxm": {"hbm_fraction": 0.5}})
    result = analyze(Fn(torch.relu), meta(2**26), estimate_params=params)
    [kernel] = result.eager_kernels
    expected = kernel.bytes / (0.5 * H100_BANDWIDTH) + DEFAULT_PARAMS.fill_latency_s
    assert result.performance.eager.kernel_gpu_s[0] == pytest.approx(expected, rel=1e-12)
    a100 = result.on("a100-80gb").performance.eager.kernel_gpu_s[0]
    # the A100 keeps the common fraction, with its architecture's (Ampere's) fill latency
    ampere_fill_s = 3e-6  # Ampere's 4,230 fill cycles at the A100's 1410 MHz
    assert a100 == pytest.approx(
        kernel.bytes / (DEFAULT_PARAMS.hbm_fraction * 2039e9) + ampere_fill_s
    )


def _eager_load_and_time(result, family: str) -> tuple[KernelLoad, float]:
    program, eager = result.performance.program, result.performance.eager
    [index] = [i for i, load in enumerate(program.eager) if load.family == family]
    return program.eager[index], eager.kernel_gpu_s[index]


@pytest.mark.parametrize(("model", "inputs", "accesses"), [
    # a bias broadcast over rows: out, x and the bias are each visited once per output element
    (Fn(torch.add), (meta(4096, 4096), meta(4096)), 3 * 4096 * 4096),
    # a transposed copy: each element read at a stride, written contiguously
    (Fn(lambda x: x.t().contiguous()), (meta(4096, 4096),), 2 * 4096 * 4096),
    # cat along the last dim: inputs shaped unlike the output (CatArrayBatchedCopy)
    (Fn(lambda a, b: torch.cat([a, b], -1)), (meta(4096, 2048), meta(4096, 2048)),
     3 * 4096 * 4096),
])
def test_an_eager_kernel_that_cannot_vectorize_is_bound_by_its_element_accesses(
        model, inputs, accesses) -> None:
    result = analyze(model, *inputs)
    [load] = [load for load in result.performance.program.eager if load.accesses]
    assert load.accesses == accesses
    # the slower of accesses / (rate × 132 SMs) and bytes / (90 % of 3.35 TB/s): the add and
    # the cat (50.3 M accesses: 63.5 µs) are access-bound, the copy (33.6 M: 42.4 µs) is
    # bound by its bytes, its strided source read in whole 32-byte sectors, one per 4-byte
    # element (eager_kernels.sector_shares): 134 MB + 7 × 67 MB (200 µs)
    index = result.performance.program.eager.index(load)
    busy = result.performance.eager.kernel_gpu_s[index]
    access_s = accesses / (DEFAULT_PARAMS.strided_access_rate_per_sm * H100_SMS)
    assert load.sector_bytes == (7 * 4096 * 4096 * 4 if load.name == "clone" else 0)
    memory_s = (load.bytes + load.sector_bytes) / (DEFAULT_PARAMS.hbm_fraction
                                                   * H100_BANDWIDTH)
    assert busy == pytest.approx(max(access_s, memory_s) + DEFAULT_PARAMS.fill_latency_s,
                                 rel=1e-12)
    assert all(load.accesses == 0 for load in result.performance.program.fused)  # Triton


def test_a_same_shape_contiguous_pointwise_kernel_vectorizes() -> None:
    result = analyze(Fn(torch.add), meta(4096, 4096), meta(4096, 4096))
    assert [load.accesses for load in result.performance.program.eager] == [0]


def test_bf16_attention_runs_flash_kernels_in_waves_of_query_blocks() -> None:
    # 133 heads × 128 query rows = 133 thread blocks on 132 SMs: two waves of 10 µs, above its
    # 8.7 MB at 70 % of 3.35 TB/s (3.7 µs; its 0.28 GFLOP at 30 % of 989 TFLOP/s take less) plus
    # the fill and matmul latencies (4.5 µs)
    q = meta(1, 133, ATTENTION_QUERY_ROWS, 64, dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    result = analyze(Fn(sdpa), q, q, q)
    load, busy = _eager_load_and_time(result, "flash_attention")
    waves_s = 2 * DEFAULT_PARAMS.attention_wave_s
    assert busy == pytest.approx(waves_s, rel=1e-12)
    # in fp32 SDPA runs the memory-efficient kernel: no wave floor of its own
    fp32 = analyze(Fn(sdpa), *(meta(1, 133, ATTENTION_QUERY_ROWS, 64),) * 3)
    assert _eager_load_and_time(fp32, "attention")[1] < waves_s


def test_a_wide_head_attention_spreads_over_its_query_blocks_only() -> None:
    # one head of 512 over 4,500 queries and keys (HunyuanVideo's VAE attention): 36 blocks of
    # 128 query rows, each computing the whole head over every key in series, so 36 of the
    # H100's 132 SMs are busy (tiles of the head dimension would have made 4 × 36 = 144);
    # 41.5 GFLOP at 30 % of 989 TFLOP/s on 36/132 of the SMs: 512 µs, far above a 10 µs wave
    shape = GemmShape(batch=1, m=4500, n=512, k=9000)
    load = KernelLoad("sdpa", "flash_attention", matmul_s=4 * 4500**2 * 512 / 989e12,
                      vector_s=0.0, bytes=0, launches=1, gemm=shape, matmul_unit="tensor")
    params = DEFAULT_PARAMS.for_gpu(H100)
    compute_s = load.matmul_s / (0.3 * 36 / 132)
    fixed_s = params.fill_latency_s + params.matmul_latency_s
    assert kernel_gpu_s(load, H100, params, "cold") == pytest.approx(compute_s + fixed_s,
                                                                     rel=1e-12)


def test_the_mi300x_has_its_own_kernel_latency() -> None:
    # a 4 KB relu: its bytes take nanoseconds, the kernel its fill latency on each GPU
    result = analyze(Fn(torch.relu), meta(1024))
    h100 = result.performance.eager.kernel_gpu_s[0]
    mi300x = result.on("mi300x").performance.eager.kernel_gpu_s[0]
    assert h100 == pytest.approx(DEFAULT_PARAMS.fill_latency_s, rel=0.01)
    cdna3_fill_s = 9900 / 2100e6  # ROCm's 9,900 fill cycles at the MI300X's 2100 MHz
    assert mi300x == pytest.approx(cdna3_fill_s, rel=0.01)


@pytest.mark.parametrize(("gpu", "clock_mhz", "fill_s"), [
    ("h100-sxm", 990, 3e-6),          # Hopper's 2,970 cycles at half the H100's 1980 MHz
    ("b200", None, 2970 / 1980e6),    # Blackwell launches as Hopper: its cycles at 1980 MHz
    ("v100", None, 4230 / 1530e6),    # Volta as Ampere: 4,230 cycles at 1530 MHz (2.76 µs)
])
def test_a_kernel_fill_is_its_generations_cycles_at_the_gpus_clock(gpu, clock_mhz, fill_s):
    spec = get_gpu(gpu).at_clocks(clock_mhz)
    assert DEFAULT_PARAMS.for_gpu(spec).fill_latency_s == pytest.approx(fill_s, rel=1e-9)


def test_a_flash_attention_wave_is_its_librarys_cycles_at_the_tensor_clock() -> None:
    # FlashAttention-2's 18,300 cycles (10 µs at the H100's 1830 MHz tensor clock) on the B200's
    # 1860 MHz: 9.84 µs; AOTriton's 63,000 (30 µs at 2100 MHz) on the MI355X's 2400 MHz: 26.25
    b200 = DEFAULT_PARAMS.for_gpu(get_gpu("b200"))
    mi355x = DEFAULT_PARAMS.for_gpu(get_gpu("mi355x"))
    assert b200.attention_wave_s == pytest.approx(18300 / 1860e6, rel=1e-9)
    assert mi355x.attention_wave_s == pytest.approx(63000 / 2400e6, rel=1e-9)


def test_a_multi_tensor_apply_kernel_is_not_charged_per_element_offsets() -> None:
    # torch._foreach_add_ over tensors of different shapes: one kernel writing all of them
    params = [meta(1024, 1024), meta(4096), meta(64, 64)]
    result = analyze(Fn(lambda *ts: torch._foreach_add(list(ts), 1.0)), *params)
    assert [load.accesses for load in result.performance.program.eager] == [0]
