"""The per-kernel model's family rules (issue 39): GEMM alignment, softmax passes, host copies at
the host link, batch-norm rows, the accesses of an in-place scatter, per-architecture constants,
and the band every estimate carries. Closed forms, derived in the comments."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn as nn

from conftest import Fn, analyze, meta
from torchroofline.price.bands import DEFAULT_BAND, HOST_BAND, family_band
from torchroofline.price.estimate import kernel_gpu_s
from torchroofline.price.estimate_params import DEFAULT_PARAMS
from torchroofline.price.gemm_time import alignment_share
from torchroofline.price.hardware import get_gpu
from torchroofline.price.host_copies import as_host_copy
from torchroofline.price.memory_time import memory_s
from torchroofline.price.modes import beside_collective, estimate_modes, host_copies
from torchroofline.suites.kineto.pricing import COLLECTIVE, host_side

H100 = get_gpu("h100-sxm")


def _load(result, family: str):
    [(load, busy)] = [(load, busy) for load, busy in zip(
        result.performance.program.eager, result.performance.eager.kernel_gpu_s, strict=True)
        if load.family == family]
    return load, busy


def test_a_gemm_whose_rows_are_not_16_bytes_runs_at_the_align1_share() -> None:
    # bf16 rows of 255 elements: 510 bytes, divisible by 2 and no more → align 2 bytes;
    # 256 elements: 512 bytes → 16. The share: the load-bound kernel's rate grows with the bytes
    # a load moves, 0.25 measured at 2 bytes: 0.25 · align / 2, all of it from 8 bytes on
    odd = analyze(Fn(torch.mm), meta(255, 255, dtype=torch.bfloat16),
                  meta(255, 255, dtype=torch.bfloat16))
    assert _load(odd, "gemm")[0].align_bytes == 2
    assert [alignment_share(a, DEFAULT_PARAMS) for a in (1, 2, 4, 8, 16)] == [
        0.125, 0.25, 0.5, 1.0, 1.0]
    # a compute-bound 2048³ bf16 GEMM (17 GFLOP, 25 MB): at align 2 its compute time is 4×
    even = analyze(Fn(torch.mm), meta(2048, 2048, dtype=torch.bfloat16),
                   meta(2048, 2048, dtype=torch.bfloat16))
    load, busy = _load(even, "gemm")
    assert load.align_bytes == 16
    fixed = DEFAULT_PARAMS.fill_latency_s + DEFAULT_PARAMS.matmul_latency_s
    misaligned = kernel_gpu_s(replace(load, align_bytes=2), H100, DEFAULT_PARAMS, "warm")
    assert misaligned - fixed == pytest.approx(4 * (busy - fixed))


def test_fp32_gemms_on_the_cuda_cores_keep_their_rate_at_any_alignment() -> None:
    # SGEMM without TF32 loads no 16-byte tensor-core fragments: no alignment rule
    result = analyze(Fn(torch.mm), meta(1023, 1023), meta(1023, 1023))
    assert _load(result, "gemm")[0].align_bytes == 16


def test_an_sgemm_on_the_cuda_cores_stores_its_output_after_its_main_loop() -> None:
    # 4096 × 4096 output of depth 64 in fp32: the epilogue stores 4096² · 4 B = 64 MiB, at the
    # memory rate, on top of the multiply-adds; a bf16 tensor-core GEMM overlaps its epilogue
    result = analyze(Fn(torch.mm), meta(4096, 64), meta(64, 4096))
    load = _load(result, "gemm")[0]
    assert load.matmul_unit == "vector" and load.output_bytes == 4096 * 4096 * 4
    params = DEFAULT_PARAMS.for_gpu(H100)
    busy, overlapped = (kernel_gpu_s(replace(load, output_bytes=written), H100, params, "warm")
                        for written in (load.output_bytes, 0))
    assert busy - overlapped == pytest.approx(memory_s(4096 * 4096 * 4, H100, params, "warm"))
    half = analyze(Fn(torch.mm), meta(4096, 64, dtype=torch.bfloat16),
                   meta(64, 4096, dtype=torch.bfloat16))
    load = _load(half, "gemm")[0]
    assert load.matmul_unit == "tensor"
    assert (kernel_gpu_s(replace(load, output_bytes=0), H100, params, "warm")
            == kernel_gpu_s(load, H100, params, "warm"))


@pytest.mark.parametrize(("length", "dtype", "scalar"), [
    (5185, torch.bfloat16, True),   # 10,370 B: not a multiple of 16 → three scalar passes
    (8192, torch.bfloat16, False),  # 16 KiB, aligned → staged in shared memory
    (30000, torch.float32, False),  # 120,000 B, aligned: re-read from L2 in vector loads
    (30001, torch.float32, True),   # 120,004 B: misaligned → three scalar passes
    (1001, torch.float32, False),   # ≤ 1024 elements, ≤ 4 KiB → a warp per row in registers
])
def test_a_misaligned_softmax_row_too_long_for_registers_is_read_three_times(length, dtype,
                                                                            scalar):
    x = meta(64, length, dtype=dtype)
    result = analyze(Fn(lambda t: torch.softmax(t, -1)), x)
    [load] = result.performance.program.eager
    # three reads and one write per element, one element per access
    assert load.accesses == (4 * 64 * length if scalar else 0)
    assert load.reread_bytes == 0


def test_a_misaligned_bf16_bmm_runs_at_the_scalar_access_rate() -> None:
    # issue 39's bmm: 16 × (5185 × 64) @ (64 × 5185), bf16; rows of 5185 × 2 B = 10,370 B: align 2
    # → one element per load. Tiles of 128: ⌈5185 / 128⌉ = 41 per side. Loads: A's strips
    # 16·5185·64·41, B's 16·5185·64·41, the output 16·5185·5185 stored once.
    a, b = meta(16, 5185, 64, dtype=torch.bfloat16), meta(16, 64, 5185, dtype=torch.bfloat16)
    load, busy = _load(analyze(Fn(torch.bmm), a, b), "gemm")
    loads = 2 * 16 * 5185 * 64 * 41 + 16 * 5185 * 5185
    assert load.align_bytes == 2 and load.accesses == loads
    rate = DEFAULT_PARAMS.strided_access_rate_per_sm * H100.sm_count
    fixed = DEFAULT_PARAMS.fill_latency_s + DEFAULT_PARAMS.matmul_latency_s
    assert busy == pytest.approx(loads / rate + fixed)
    # 5184 = 81 × 64: 10,368 B rows, aligned → no scalar loads
    even = analyze(Fn(torch.bmm), meta(16, 5184, 64, dtype=torch.bfloat16),
                   meta(16, 64, 5184, dtype=torch.bfloat16))
    assert _load(even, "gemm")[0].accesses == 0


def test_a_16_bit_3d_convolution_runs_the_2d_tensor_core_kernels() -> None:
    conv = nn.Conv3d(16, 16, 3, bias=False)
    half = analyze(conv.to(torch.bfloat16), meta(1, 16, 6, 34, 34, dtype=torch.bfloat16))
    assert [k.family for k in half.performance.program.eager] == ["conv"]
    full = analyze(conv.float(), meta(1, 16, 6, 34, 34))
    assert [k.family for k in full.performance.program.eager] == ["conv3d"]


def test_batch_norm_backward_reads_twice_with_a_block_per_channel() -> None:
    x = meta(8, 32, 16, 16)
    result = analyze(nn.BatchNorm2d(32), x, mode="train", loss=lambda y: y.sum())
    [load] = [k for k in result.performance.program.eager if "batch_norm_backward" in k.name]
    # batch_norm_backward_kernel: grid of C = 32 blocks; grad_out and x read twice
    assert load.rows == 32
    assert load.reread_bytes == 2 * 8 * 32 * 16 * 16 * 4


def test_host_copies_run_at_the_host_link() -> None:
    assert H100.host_link == "PCIe 5.0 x16"
    # PCIe 5.0: 32 GT/s per lane, 128b/130b → 3.94 GB/s per lane and direction; ×16 = 63.0 GB/s
    assert H100.host_link_bytes_per_s == pytest.approx(32e9 / 8 * 128 / 130 * 16)
    assert get_gpu("gb200").host_link_bytes_per_s == 450e9  # NVLink-C2C, per direction
    result = analyze(Fn(lambda t: t.clone()), meta(2**24))
    [load] = result.performance.program.eager
    copied = load.bytes // 2  # the clone reads 64 MiB and writes 64 MiB: 64 MiB cross the link
    fill = DEFAULT_PARAMS.fill_latency_s
    pinned = kernel_gpu_s(as_host_copy(load, False), H100, DEFAULT_PARAMS, "warm")
    assert pinned == pytest.approx(copied / (0.45 * H100.host_link_bytes_per_s) + fill)
    pageable = kernel_gpu_s(as_host_copy(load, True), H100, DEFAULT_PARAMS, "warm")
    assert pageable == pytest.approx(copied / DEFAULT_PARAMS.pageable_copy_bytes_per_s + fill)
    assert host_copies(result.performance, pageable=True).eager.gpu_busy_s == pytest.approx(
        pageable)


def test_the_host_side_of_a_copy_comes_from_its_memcpy_name() -> None:
    assert host_side(["Memcpy HtoD (Pinned -> Device)"]) == "pinned"
    assert host_side(["Memcpy DtoH (Device -> Pageable)"]) == "pageable"
    assert host_side(["Memcpy DtoD (Device -> Device)"]) is None


def test_a_kernel_beside_a_collective_keeps_its_share_of_the_gpu() -> None:
    result = analyze(Fn(torch.relu), meta(2**20))
    alone = result.performance.eager.gpu_busy_s
    # every part of its time, the fill included, at collective_share of the rate (NVIDIA: 0.5)
    shared = beside_collective(result.performance).eager.gpu_busy_s
    assert shared == pytest.approx(alone / DEFAULT_PARAMS.collective_share) == 2 * alone
    mi300x = result.on("mi300x").performance  # CDNA: the RCCL kernel takes nothing measurable
    assert beside_collective(mi300x).eager.gpu_busy_s == pytest.approx(mi300x.eager.gpu_busy_s)
    assert COLLECTIVE.search("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)")
    assert COLLECTIVE.search("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)")
    assert not COLLECTIVE.search("void at::native::vectorized_elementwise_kernel<4>")


def test_an_in_place_write_into_a_kv_cache_is_charged_for_what_it_moves() -> None:
    class Cache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("cache", torch.zeros(8, 8, 4096, 128))

        def forward(self, position: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
            self.cache[:, :, position] = values
            return self.cache

    result = analyze(Cache(), torch.tensor([5, 6, 7, 8]), torch.randn(8, 8, 4, 128))
    kernels = result.plans.eager.kernels
    [kernel] = [k for k in kernels if "index_put" in k.name]
    load = result.performance.program.eager[kernels.index(kernel)]
    # each operand (the index and the values read, the cache written) makes at most one access
    # per element the kernel moves, not one per element of the 8·8·4096·128 cache
    [op] = kernel.ops
    operands = len([ref for ref in op.reads if ref.elements > 1]) + len(op.writes)
    moved = kernel.bytes(4) // 4
    assert load.accesses == operands * moved < 8 * 8 * 4096 * 128


@pytest.mark.parametrize(("shape", "order", "sectors_per_warp"), [
    # out[..., j, i] = x[..., i, j]: the walked dim i is 64 elements (128 B) apart in x, so
    # each of a warp's 32 lanes loads a sector of its own
    ((8, 12, 3137, 64), (0, 1, 3, 2), 32),
    # an innermost dim of 8 such elements: a warp covers 8 of them × 4 of the next dim, which
    # is contiguous in x (4 · 2 B in one sector): 8 sectors
    ((3136, 12, 8, 64), (0, 1, 3, 2), 8),
    # the innermost dim stays innermost (heads swapped with tokens): 32 · 2 B = 2 sectors, full
    ((8, 12, 3137, 64), (0, 2, 1, 3), 2),
])
def test_a_transposing_copy_moves_whole_sectors_of_its_strided_side(shape, order,
                                                                   sectors_per_warp) -> None:
    x = meta(*shape, dtype=torch.bfloat16)
    result = analyze(Fn(lambda t: t.permute(*order).contiguous()), x)
    [load] = result.performance.program.eager
    read = math.prod(shape) * 2
    # bytes moved per byte read: sectors · 32 B over 32 lanes · 2 B; what exceeds 1 is extra
    share = sectors_per_warp * 32 / (32 * 2)
    assert load.sector_bytes == round((share - 1) * read)
    # charged at the memory rate: the kernel takes at least its bytes and sectors there
    params = DEFAULT_PARAMS.for_gpu(H100)
    busy = kernel_gpu_s(load, H100, params, "cold")
    assert busy >= memory_s(load.bytes + load.sector_bytes, H100, params, "cold")
    # a broadcast operand (a transposed (128, 768) bias added to each of 196 rows) is reused
    # from cache: its own bytes only
    bias = analyze(Fn(lambda t, b: t + b), meta(196, 128, 768, dtype=torch.bfloat16),
                   meta(768, 128, dtype=torch.bfloat16).t())
    assert [k.sector_bytes for k in bias.performance.program.eager] == [0]


def test_a_copy_into_a_transposed_view_walks_the_output_s_innermost_stride() -> None:
    def into_transposed(t: torch.Tensor) -> torch.Tensor:
        return t.new_empty(t.shape[1], t.shape[0]).t().copy_(t)

    # TensorIterator walks the destination's stride-1 dim (dim 0 of the (3137, 64) view), along
    # which the contiguous source's elements lie 64 · 2 B apart: a sector per lane, 16× its
    # 401,536 bytes; the destination is written in full sectors
    x = meta(3137, 64, dtype=torch.bfloat16)
    [load] = analyze(Fn(into_transposed), x).performance.program.eager
    assert load.sector_bytes == 15 * 3137 * 64 * 2


def test_amd_gpus_take_their_architectures_constants() -> None:
    mi300x, mi355x = get_gpu("mi300x"), get_gpu("mi355x")
    for gpu in (mi300x, mi355x):
        params = DEFAULT_PARAMS.for_gpu(gpu)
        # ROCm's 9,900 fill cycles at the part's clock (2100, 2400 MHz)
        assert params.fill_latency_s == pytest.approx(9900 / (gpu.boost_clock_mhz * 1e6))
        assert params.library_kernels["conv"] == 5
    assert DEFAULT_PARAMS.for_gpu(H100).library_kernels == {}


@pytest.mark.parametrize(("shape", "dim", "split"), [
    ((1024, 512), None, True),     # 524,288 elements into one: 1,024 values a thread of 512
    ((1024, 96), None, False),     # 98,304 < 256 · 512: one block's threads keep up
    ((512, 1024), 1, False),       # 512 outputs of 1,024: a block per row
    ((256, 2048), 0, False),       # 2,048 outputs of 256
])
def test_a_reduction_too_long_per_output_splits_across_blocks(shape, dim, split) -> None:
    result = analyze(Fn(lambda t: t.sum(dim) if dim is not None else t.sum()), meta(*shape))
    [load] = result.performance.program.eager
    # the semaphores' memset: one launch more, a fill on the GPU and a launch on the host
    assert load.cpp_launches == int(split) and load.library_call == ""
    alone = kernel_gpu_s(replace(load, cpp_launches=0), H100, DEFAULT_PARAMS, "warm")
    busy = kernel_gpu_s(load, H100, DEFAULT_PARAMS, "warm")
    assert busy - alone == pytest.approx(DEFAULT_PARAMS.fill_latency_s if split else 0.0)


def test_an_unsplit_reduction_to_few_outputs_streams_through_one_block_each() -> None:
    # 1024 · 100 floats summed to one: 102,400 < 256 · 512 values, so reduce_kernel runs one
    # 512-thread block (not split); it loads 4 floats (16 B) an instruction: the row rate × 16/4
    params = DEFAULT_PARAMS.for_gpu(H100)
    [load] = analyze(Fn(lambda t: t.sum()), meta(1024, 100)).performance.program.eager
    assert (load.rows, load.element_bytes, load.cpp_launches) == (1, 16, 0)
    row_s = load.bytes / (params.row_bandwidth_bytes_per_s * 16 / 4)
    assert kernel_gpu_s(load, H100, params, "cold") == pytest.approx(
        row_s + params.fill_latency_s)
    # over an outer dim (a block spans outputs, not one row) or split across blocks: no row limit
    for fn, shape in ((lambda t: t.sum(0), (4096, 64)), (lambda t: t.sum(), (1024, 512))):
        [other] = analyze(Fn(fn), meta(*shape)).performance.program.eager
        assert other.rows is None


def test_every_estimate_carries_its_band() -> None:
    # one large relu, GPU-bound: the call's host time, then the kernel. At each end of the band
    # the host's costs scale by HOST_BAND's end and the kernel by its family's band end
    result = analyze(Fn(torch.relu), meta(2**26))
    performance = result.performance
    eager = performance.eager
    band = family_band("pointwise")
    low, high = performance.band_s("eager")
    [busy] = eager.kernel_gpu_s
    assert low == pytest.approx(eager.host_s * HOST_BAND.low + busy * band.low)
    assert high == pytest.approx(eager.host_s * HOST_BAND.high + busy * band.high)
    assert low < eager.total_s < high
    entry = performance.to_dict(result.sol_s)["eager"]
    # the JSON's band never goes below the speed of light (here above the low end)
    assert result.sol_s > low
    assert entry["estimate_low_us"] == pytest.approx(result.sol_s * 1e6)
    assert entry["top_kernels"][0]["estimate_high_us"] == pytest.approx(busy * band.high * 1e6)
    assert family_band("no such family") == DEFAULT_BAND


def test_a_cuda_graph_replay_first_copies_its_forward_arguments_not_its_parameters() -> None:
    # cudagraph trees copy each non-static input into the graph's buffer before the replay:
    # x (4096 × 4096 fp32 = 64 MiB) is read and written once, 128 MiB; the Linear's weight
    # (a parameter, static) is not copied. The replay issues nothing from the host, so the
    # copy adds its own GPU time and one gap: 128 MiB at the memory rate, its fill, the gap
    result = analyze(nn.Linear(4096, 4096), meta(4096, 4096), gpu="h100-sxm")
    program = result.performance.program
    [copy] = program.replay_copies
    assert copy.bytes == 2 * 4096 * 4096 * 4
    on_h100 = DEFAULT_PARAMS.for_gpu(H100)
    added = (memory_s(copy.bytes, H100, on_h100, program.cache) + on_h100.fill_latency_s
             + on_h100.cudagraph_gap_s)
    without = estimate_modes(replace(program, replay_copies=()), DEFAULT_PARAMS)
    assert result.performance.cudagraph.total_s - without.cudagraph.total_s == pytest.approx(
        added, rel=1e-9)
    # eager and torch.compile pass the argument as it is: no copy
    assert result.performance.eager.total_s == without.eager.total_s
    assert result.performance.compile.total_s == without.compile.total_s
