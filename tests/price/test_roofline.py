"""Pricing: which unit runs what at each precision, SoL and estimates, cache modes, measured
times, and the JSON layout."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import (
    H100_BANDWIDTH,
    H100_BF16,
    H100_FP32,
    H100_L2_BYTES,
    H100_TF32,
    Fn,
    analyze,
    meta,
)
from torchroofline import analyze_file, get_gpu
from torchroofline.errors import InputError, PrecisionError
from torchroofline.price.precision import restoring_switches

M, K, N = 256, 512, 128
MATMUL_FLOPS = 2 * M * N * K


def _mm() -> tuple[Fn, torch.Tensor, torch.Tensor]:
    return Fn(torch.mm), meta(M, K), meta(K, N)


def _conv() -> tuple[nn.Module, torch.Tensor]:
    return nn.Conv2d(16, 32, 3, bias=False), meta(4, 16, 32, 32)


CONV_FLOPS = 2 * (4 * 30 * 30) * 32 * 9 * 16


def _sdpa() -> tuple[Fn, torch.Tensor, torch.Tensor, torch.Tensor]:
    q = meta(2, 4, 128, 64)
    return Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), q, q, q


SDPA_FLOPS = 4 * 2 * 4 * 128 * 128 * 64

# nn.GRU(32, 64) over 10 steps of a batch of 4: per step, the input GEMM (32 → 3 gates · 64)
# and the recurrent one (64 → 3 · 64), 2 FLOPs per multiply-add
GRU_STEPS, GRU_BATCH, GRU_IN, GRU_HIDDEN = 10, 4, 32, 64
GRU_GEMM_FLOPS = GRU_STEPS * 2 * GRU_BATCH * (GRU_IN + GRU_HIDDEN) * 3 * GRU_HIDDEN
# the gate math per hidden unit and step: 3 bias adds of the two GEMMs' gates, 2 sigmoids of
# 3 FLOPs, n = tanh(xn + r·hn) (3), h = (1 − z)·n + z·h (4)
GRU_GATE_FLOPS = GRU_STEPS * GRU_BATCH * GRU_HIDDEN * (3 + 2 * 3 + 3 + 4)


def _gru() -> tuple[nn.Module, torch.Tensor]:
    return nn.GRU(GRU_IN, GRU_HIDDEN), meta(GRU_STEPS, GRU_BATCH, GRU_IN)


# --- Units per precision -----------------------------------------------------------------------


def test_fp32_matmul_runs_on_cuda_cores() -> None:
    # torch.backends.cuda.matmul.allow_tf32 is False by default
    result = analyze(*_mm(), precision="fp32")
    assert result.flops == MATMUL_FLOPS
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / H100_FP32, rel=1e-12)


def test_tf32_puts_matmul_on_tf32_tensor_cores() -> None:
    result = analyze(*_mm(), precision="tf32")
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / H100_TF32, rel=1e-12)


def test_bf16_matmul_on_bf16_tensor_cores() -> None:
    result = analyze(*_mm(), precision="bf16")
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / H100_BF16, rel=1e-12)


def test_fp32_conv_uses_tf32() -> None:
    # torch.backends.cudnn.allow_tf32 is True by default
    result = analyze(*_conv(), precision="fp32")
    assert result.flops == CONV_FLOPS
    assert result.compute_sol_s == pytest.approx(CONV_FLOPS / H100_TF32, rel=1e-12)


def test_math_ladder_prices_matmul_work_on_each_rung() -> None:
    # a 256×512 @ 512×128 fp32 matmul on the H100 SXM: the program runs it on CUDA cores
    # (66.9 TFLOP/s); a TF32 kernel at 494.7, bf16 and fp16 at 989.4, fp8 at 1978.9 TFLOP/s.
    # The bytes stay fp32 on every rung (0.92 MB: 0.27 µs), which floors the lower rungs
    result = analyze(*_mm(), precision="fp32")
    peaks = {"program": H100_FP32, "tf32": H100_TF32, "bf16": H100_BF16, "fp16": H100_BF16,
             "fp8": 1978.9e12}
    memory_s = (M * K + K * N + M * N) * 4 / H100_BANDWIDTH
    for rung, peak in peaks.items():
        expected = max(MATMUL_FLOPS / peak, memory_s)
        assert result.sol_by_math_s[rung] == pytest.approx(expected, rel=1e-12), rung
    assert result.sol_by_math_s["program"] == result.sol_s
    assert result.time_ms["sol_by_math"]["tf32"] == pytest.approx(
        max(MATMUL_FLOPS / H100_TF32, memory_s) * 1e3, rel=1e-12)
    # a time between the TF32 and the fp32 bound needs TF32 (or lower) math; one below the fp8
    # bound is faster than any math
    between = (result.sol_by_math_s["tf32"] + result.sol_s) / 2
    assert result.possible_with(result.sol_s) == "program"
    assert result.possible_with(between) == "tf32"
    assert result.possible_with(result.sol_by_math_s["fp8"] / 2) is None


def test_math_ladder_of_a_4096_cubed_fp32_matmul_on_the_h100() -> None:
    # 2·4096³ = 137.44 GFLOPs; 3·4096²·4 B = 201.3 MB at 3.35 TB/s is 60.1 µs, below every
    # rung's compute time, so each rung is FLOPs / its peak: fp32 on CUDA cores 66.9 TFLOP/s
    # (2.054 ms), TF32 494.7 (277.8 µs), bf16 and fp16 989.4 (138.9 µs), fp8 1978.9 (69.45 µs)
    n = 4096
    flops = 2 * n**3
    result = analyze(Fn(torch.mm), meta(n, n), meta(n, n), actual_ms=0.2)
    expected_ms = {"program": 2.0544, "tf32": 0.27784, "bf16": 0.13892, "fp16": 0.13892,
                   "fp8": 0.069454}
    for rung, peak in (("program", H100_FP32), ("tf32", H100_TF32), ("bf16", H100_BF16),
                       ("fp16", H100_BF16), ("fp8", 1978.9e12)):
        assert result.time_ms["sol_by_math"][rung] == pytest.approx(flops / peak * 1e3)
        assert result.time_ms["sol_by_math"][rung] == pytest.approx(expected_ms[rung], rel=1e-4)
    # 0.2 ms beats the fp32 and TF32 bounds, not the bf16 one: possible with bf16 math
    assert result.actual.possible_with == "bf16" and not result.actual.impossible
    assert result.with_actual(0.05).actual.impossible  # below the fp8 bound: no math reaches it


def test_math_ladder_never_rises_above_the_program() -> None:
    # a bf16 program already runs on bf16 tensor cores: its TF32 rung keeps the faster bf16 unit
    # (a kernel may keep the program's precision), and every rung is at most the one above it
    result = analyze(*_mm(), precision="bf16")
    ladder = list(result.sol_by_math_s.values())
    assert result.sol_by_math_s["tf32"] == result.sol_s
    assert ladder == sorted(ladder, reverse=True)


def test_fp32_conv_on_v100_runs_on_cuda_cores() -> None:
    v100 = get_gpu("v100")
    assert not v100.has_tensor("tf32")
    result = analyze(*_conv(), gpu="v100", precision="fp32")
    assert result.compute_sol_s == pytest.approx(CONV_FLOPS / 15.7e12, rel=1e-12)
    assert any("V100 has no tf32 tensor cores" in note for note in result.notes)


def test_fp32_sdpa_uses_three_tf32_passes() -> None:
    result = analyze(*_sdpa(), precision="fp32")
    assert result.flops == SDPA_FLOPS
    assert result.compute_sol_s == pytest.approx(SDPA_FLOPS / (H100_TF32 / 3), rel=1e-12)


def test_fp32_rnn_uses_tf32() -> None:
    # cuDNN RNN GEMMs run on TF32 tensor cores (cudnn.allow_tf32); the gate math on the CUDA
    # cores takes less time (40,960 FLOPs at 66.9 TFLOP/s = 0.6 ns against 3 ns)
    result = analyze(*_gru(), precision="fp32")
    assert result.tensor_flops == GRU_GEMM_FLOPS
    assert result.compute_sol_s == pytest.approx(GRU_GEMM_FLOPS / H100_TF32, rel=1e-12)


# One fallback rule: a precision the GPU has no tensor cores for runs on the fastest unit that
# can run it, and a note names it. Peaks: A100 fp16 312 TFLOP/s (A100 datasheet, dense), T4 fp16
# 65 TFLOP/s (T4 datasheet), V100 fp32 15.7 TFLOP/s (V100 SXM2 datasheet).


def _fallback_note(result) -> str:
    (note,) = [note for note in result.notes if "priced on the fastest unit" in note]
    return note


def test_fp8_on_a100_runs_on_fp16_tensor_cores_with_a_note() -> None:
    result = analyze(*_mm(), gpu="a100", precision="fp8")
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / 312e12, rel=1e-12)
    assert result.compulsory_bytes == (M * K + K * N + M * N) * 1  # fp8 bytes are kept
    assert _fallback_note(result).startswith("fp8 matmuls on fp16 tensor cores")


def test_bf16_on_t4_runs_on_fp16_tensor_cores_with_a_note() -> None:
    result = analyze(*_mm(), gpu="t4", precision="bf16")
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / 65e12, rel=1e-12)
    assert "T4 has no bf16 tensor cores" in _fallback_note(result)


def test_tf32_on_v100_runs_on_cuda_cores_with_a_note() -> None:
    result = analyze(*_mm(), gpu="v100", precision="tf32")
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / 15.7e12, rel=1e-12)
    assert _fallback_note(result).startswith("tf32 matmuls on CUDA cores")


def test_no_note_where_the_gpu_has_the_unit() -> None:
    for precision in ("fp32", "tf32", "bf16", "fp8"):
        assert not analyze(*_mm(), gpu="h100", precision=precision).notes


def test_unknown_precision_is_refused_before_tracing() -> None:
    def never_called(x: torch.Tensor) -> torch.Tensor:
        raise AssertionError("traced although the precision was invalid")

    with pytest.raises(PrecisionError, match="unknown precision 'fp12'"):
        analyze(Fn(never_called), meta(4), precision="fp12")


# --- The user's torch switches (read at analysis time) ------------------------------------------


@pytest.fixture
def switches():
    """``torch.backends``, with every TF32 switch put back afterwards."""
    with restoring_switches():
        yield torch.backends


@pytest.mark.parametrize(
    ("switch", "peak", "spelled"),
    [
        (lambda b: setattr(b.cuda.matmul, "allow_tf32", True), H100_TF32, "allow_tf32 is True"),
        (lambda b: torch.set_float32_matmul_precision("high"), H100_TF32, "allow_tf32 is True"),
        (lambda b: setattr(b.cuda.matmul, "fp32_precision", "tf32"), H100_TF32, "is True"),
        (lambda b: torch.set_float32_matmul_precision("medium"), H100_BF16, "'medium'"),
    ],
)
def test_fp32_matmul_follows_the_tf32_switches(switches, switch, peak, spelled) -> None:
    switch(switches)
    result = analyze(*_mm(), precision="fp32")
    # 2·M·N·K FLOPs at the peak of the tensor cores the switch allows (TF32 494.7, bf16 989.4)
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / peak, rel=1e-12)
    (note,) = result.notes
    assert note.startswith("fp32 matmuls on") and spelled in note


def test_4096_cube_matmul_with_and_without_allow_tf32(switches) -> None:
    n = 4096
    off = analyze(Fn(torch.mm), meta(n, n), meta(n, n), precision="fp32")
    switches.cuda.matmul.allow_tf32 = True
    on = analyze(Fn(torch.mm), meta(n, n), meta(n, n), precision="fp32")
    assert off.compute_sol_s == pytest.approx(2 * n**3 / H100_FP32, rel=1e-12)  # 2.054 ms
    assert on.compute_sol_s == pytest.approx(2 * n**3 / H100_TF32, rel=1e-12)  # 0.278 ms


def test_cudnn_allow_tf32_false_puts_conv_and_rnn_on_cuda_cores(switches) -> None:
    switches.cudnn.allow_tf32 = False
    conv = analyze(*_conv(), precision="fp32")
    assert conv.compute_sol_s == pytest.approx(CONV_FLOPS / H100_FP32, rel=1e-12)
    assert conv.notes == (
        "fp32 convolutions on CUDA cores: torch.backends.cudnn.allow_tf32 is False "
        "(cudnn.conv.fp32_precision)",
    )
    rnn = analyze(*_gru(), precision="fp32")
    # GEMMs and gate math share the CUDA cores: their FLOPs add up
    expected_s = (GRU_GEMM_FLOPS + GRU_GATE_FLOPS) / H100_FP32
    assert rnn.compute_sol_s == pytest.approx(expected_s, rel=1e-12)


class _AllFamilies(nn.Module):
    """A matmul, a convolution, attention and a cuDNN RNN: every family a switch governs."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1)
        self.rnn = nn.GRU(64, 64)

    def forward(self, image: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, ...]:
        attention = F.scaled_dot_product_attention(q, q, q)
        return self.conv(image), attention, self.rnn(q[0])[0], q[0, 0] @ q[0, 0].mT


def test_more_permissive_switches_never_raise_the_bound(switches) -> None:
    inputs = (meta(8, 16, 64, 64), meta(2, 4, 256, 64))
    compute_s = []
    for precision in ("highest", "high", "medium"):
        torch.set_float32_matmul_precision(precision)
        compute_s.append(analyze(_AllFamilies(), *inputs, precision="fp32").compute_sol_s)
    assert compute_s[0] > compute_s[1] > compute_s[2]
    switches.cudnn.allow_tf32 = False  # convolutions and RNNs back on the CUDA cores
    assert analyze(_AllFamilies(), *inputs, precision="fp32").compute_sol_s > compute_s[2]


def test_switches_do_not_touch_requested_precisions(switches) -> None:
    switches.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("medium")
    tf32 = analyze(*_conv(), precision="tf32")
    assert tf32.compute_sol_s == pytest.approx(CONV_FLOPS / H100_TF32, rel=1e-12)
    assert not tf32.notes


def test_problem_file_switches_count_for_that_file_only(tmp_path) -> None:  # noqa: ANN001
    # KernelBench files (generated ones above all) often switch TF32 on at import
    problem = tmp_path / "tf32_matmul.py"
    problem.write_text(
        "import torch\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\n\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, a, b):\n"
        "        return a @ b\n\n"
        f"def get_inputs():\n    return [torch.randn({M}, {K}), torch.randn({K}, {N})]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    result = analyze_file(problem, "h100", "fp32")
    assert result.compute_sol_s == pytest.approx(MATMUL_FLOPS / H100_TF32, rel=1e-12)
    assert not torch.backends.cuda.matmul.allow_tf32  # the next file starts from the default


def test_switches_are_read_once_and_kept_by_on(switches) -> None:
    switches.cuda.matmul.allow_tf32 = True
    result = analyze(*_mm(), precision="fp32")
    switches.cuda.matmul.allow_tf32 = False
    # A100 80GB TF32 tensor cores: 156 TFLOP/s dense (A100 datasheet)
    assert result.on("a100").compute_sol_s == pytest.approx(MATMUL_FLOPS / 156e12, rel=1e-12)
    assert result.ridge_point == pytest.approx(H100_TF32 / H100_BANDWIDTH, rel=1e-12)
    assert result.to_dict()["math_switches"] == {
        "matmul": "high", "cudnn_conv": "tf32", "cudnn_rnn": "tf32"
    }


def test_precision_is_case_insensitive() -> None:
    assert analyze(*_mm(), precision="BF16").precision == "bf16"


# --- Compute SoL is the larger of the two units ------------------------------------------------


#: 1 / (1 + exp(-x)): an exp, an add and a division per element
SIGMOID_FLOPS = 3


def _matmul_then_pointwise(pointwise_ops: int) -> Fn:
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = a @ b
        for _ in range(pointwise_ops):
            y = torch.sigmoid(y)
        return y

    return Fn(forward)


@pytest.mark.parametrize("pointwise_ops", [1, 400])
def test_compute_sol_is_max_of_tensor_and_vector_time(pointwise_ops: int) -> None:
    model = _matmul_then_pointwise(pointwise_ops)
    result = analyze(model, meta(M, K), meta(K, N), precision="tf32")
    sigmoid_flops = pointwise_ops * SIGMOID_FLOPS * M * N
    assert result.tensor_flops == MATMUL_FLOPS
    assert result.vector_flops == sigmoid_flops
    tensor_s = MATMUL_FLOPS / H100_TF32
    vector_s = sigmoid_flops / H100_FP32
    assert result.compute_sol_s == pytest.approx(max(tensor_s, vector_s), rel=1e-12)
    assert result.compute_sol_s < tensor_s + vector_s  # the units overlap: not the sum


def test_fp32_matmul_and_pointwise_share_the_cuda_cores() -> None:
    result = analyze(_matmul_then_pointwise(10), meta(M, K), meta(K, N), precision="fp32")
    expected_s = (MATMUL_FLOPS + 10 * SIGMOID_FLOPS * M * N) / H100_FP32
    assert result.compute_sol_s == pytest.approx(expected_s, rel=1e-12)


def test_bf16_pointwise_uses_packed_fp16_vector_rate() -> None:
    result = analyze(Fn(torch.sigmoid), meta(1024, 1024), precision="bf16")
    # H100 SXM non-tensor fp16/bf16: 133.8 TFLOP/s, packed 2 × fp32 (Hopper whitepaper)
    expected_s = SIGMOID_FLOPS * 1024 * 1024 / 133.8e12
    assert result.compute_sol_s == pytest.approx(expected_s, rel=1e-12)


# --- SoL, estimates, bottleneck ----------------------------------------------------------------


def test_sol_is_the_slower_of_compute_and_memory() -> None:
    n = 4096
    compute_bound = analyze(Fn(torch.mm), meta(n, n), meta(n, n))
    # 2·n³ = 137.4 GFLOPs at 66.9 TFLOP/s = 2.054 ms; its 3·n²·4 B = 201 MB take 60 µs
    assert compute_bound.sol_ms == pytest.approx(2 * n**3 / H100_FP32 * 1e3, rel=1e-12)
    assert compute_bound.bottleneck == "compute"
    memory_bound = analyze(Fn(torch.relu), meta(n, n))
    # 2·n²·4 B = 134 MB at 3.35 TB/s = 40 µs; its n² FLOPs take 0.25 µs
    assert memory_bound.sol_ms == pytest.approx(2 * n * n * 4 / H100_BANDWIDTH * 1e3, rel=1e-12)
    assert memory_bound.bottleneck == "memory"


def test_cold_memory_sol_is_compulsory_over_bandwidth() -> None:
    result = analyze(Fn(torch.relu), meta(1024, 1024))
    relu_bytes = 2 * 1024 * 1024 * 4  # read x, write the result, fp32; one kernel: fused too
    assert result.compulsory_bytes == result.fused_bytes == relu_bytes
    assert result.memory_sol_s == pytest.approx(relu_bytes / H100_BANDWIDTH, rel=1e-12)
    assert result.memory_fused_s == pytest.approx(relu_bytes / H100_BANDWIDTH, rel=1e-12)


#: H100 SXM L2: 5120 B/clk at the 1980 MHz boost clock (hardware.py)
H100_L2_BANDWIDTH = 5120 * 1980e6


def test_warm_cache_reads_what_fits_l2_at_the_l2_bandwidth() -> None:
    gpu = get_gpu("h100-sxm")
    assert gpu.l2_bandwidth == H100_L2_BANDWIDTH and gpu.l2_bytes == H100_L2_BYTES
    result = analyze(Fn(torch.relu), meta(1024, 1024), cache="warm")
    relu_bytes = 2 * 1024 * 1024 * 4  # read x, write the result, fp32: fits the 50 MiB L2
    assert result.compulsory_bytes == relu_bytes
    assert result.memory_sol_s == pytest.approx(relu_bytes / H100_L2_BANDWIDTH, rel=1e-12)
    # 8 MiB over 10.1 TB/s (0.83 µs) is above the relu's 1024² FLOPs at 66.9 TFLOP/s (0.016 µs)
    assert result.sol_s == result.memory_sol_s > 0
    assert result.bottleneck == "memory"


def test_warm_cache_bound_is_l2_traffic_or_the_spill_past_l2() -> None:
    elements = 16 * 2**20  # 64 MiB in + 64 MiB out at fp32
    result = analyze(Fn(torch.relu), meta(elements), cache="warm")
    moved = 2 * 64 * 2**20
    spill = moved - H100_L2_BYTES  # 128 MiB moved, 50 MiB of it may be served by L2
    # every byte crosses the L2; the spill also comes from HBM; the two overlap: the larger
    assert result.memory_sol_s == pytest.approx(
        max(moved / H100_L2_BANDWIDTH, spill / H100_BANDWIDTH), rel=1e-12)
    cold = result.on("h100-sxm", cache="cold")
    assert cold.memory_sol_s == pytest.approx(moved / H100_BANDWIDTH, rel=1e-12)


def test_an_op_without_flops_is_memory_bound_warm_and_cold() -> None:
    # a copy: 0 FLOPs; warm it reads and writes 4 MiB through the L2, never "compute-bound"
    for cache in ("cold", "warm"):
        result = analyze(Fn(lambda x: x.clone()), meta(1024, 1024), cache=cache)
        assert result.flops == 0 and result.bottleneck == "memory"
        assert result.sol_s > 0


def test_kernel_bound_and_intensity() -> None:
    n = 4096
    result = analyze(Fn(torch.mm), meta(n, n), meta(n, n))
    [kernel] = result.kernels
    assert kernel.bound == "compute"
    # 2·n³ FLOPs over 3·n²·4 bytes = n/6 = 682.67 FLOP/B, far right of the 20 FLOP/B ridge
    assert kernel.intensity == pytest.approx(n / 6, rel=1e-12)
    assert result.arithmetic_intensity == pytest.approx(n / 6, rel=1e-12)


def test_sol_at_most_every_estimate() -> None:
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU(), nn.Flatten(),
                          nn.Linear(16 * 30 * 30, 10), nn.Softmax(-1))
    for precision in ("fp32", "bf16"):
        result = analyze(model, meta(8, 3, 32, 32), precision=precision)
        assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes
        assert result.sol_s <= min(result.fused_estimate_s, result.eager_estimate_s,
                                   result.cudagraph_estimate_s)
        assert result.fused_kernel_count <= result.unfused_kernel_count


# --- Precision changes bytes, never FLOPs ------------------------------------------------------


def test_bf16_halves_float_bytes_and_keeps_flops() -> None:
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32))
    fp32 = analyze(model, meta(16, 64), precision="fp32")
    bf16 = analyze(model, meta(16, 64), precision="bf16")
    assert bf16.flops == fp32.flops
    for figure in ("unfused_bytes", "fused_bytes", "compulsory_bytes"):
        assert 2 * getattr(bf16, figure) == getattr(fp32, figure), figure


def test_integer_tensors_keep_their_bytes() -> None:
    vocab, dim, batch, length = 100, 8, 4, 5
    indices = torch.zeros(batch, length, dtype=torch.int64)
    fp32 = analyze(nn.Embedding(vocab, dim), indices, precision="fp32")
    bf16 = analyze(nn.Embedding(vocab, dim), indices, precision="bf16")
    index_bytes = batch * length * 8
    # the rows a lookup picks are data (all zeros here: one row), so the bound charges one row;
    # it writes batch·length·dim
    floats = dim + batch * length * dim
    assert fp32.compulsory_bytes == floats * 4 + index_bytes
    assert bf16.compulsory_bytes == floats * 2 + index_bytes


def test_argmax_output_is_int64_at_every_precision() -> None:
    rows, cols = 64, 32
    fp32 = analyze(Fn(lambda x: x.argmax(-1)), meta(rows, cols), precision="fp32")
    bf16 = analyze(Fn(lambda x: x.argmax(-1)), meta(rows, cols), precision="bf16")
    assert fp32.compulsory_bytes == rows * cols * 4 + rows * 8
    assert bf16.compulsory_bytes == rows * cols * 2 + rows * 8


def test_target_precision_sets_bytes_but_never_widens_a_narrow_tensor() -> None:
    # fp64 inputs at fp32 are charged 4 bytes; fp16 inputs stay at 2 (never charge more bytes
    # than the program moves), and bf16 narrows fp32 inputs to 2
    wide = analyze(Fn(torch.relu), meta(1024, dtype=torch.float64), precision="fp32")
    half = analyze(Fn(torch.relu), meta(1024, dtype=torch.float16), precision="fp32")
    narrowed = analyze(Fn(torch.relu), meta(1024), precision="bf16")
    assert wide.compulsory_bytes == 2 * 1024 * 4
    assert half.compulsory_bytes == 2 * 1024 * 2
    assert narrowed.compulsory_bytes == 2 * 1024 * 2


# --- Measured time -----------------------------------------------------------------------------


def test_actual_ms_fraction_and_flags() -> None:
    base = analyze(*_mm())
    slower = base.with_actual(base.sol_ms * 4)
    assert slower.actual.sol_fraction == pytest.approx(0.25)
    assert slower.actual.headroom == pytest.approx(4.0)
    assert not slower.actual.impossible
    faster = analyze(*_mm(), actual_ms=base.sol_ms / 2)
    assert faster.actual.impossible
    assert faster.actual.sol_fraction == pytest.approx(2.0)
    at_limit = base.with_actual(base.sol_ms)
    assert not at_limit.actual.impossible


def test_actual_achieved_rates() -> None:
    ms = 0.5
    result = analyze(*_mm(), actual_ms=ms)
    # 2·256·128·512 = 33.6 MFLOPs in 0.5 ms = 0.067 TFLOP/s; (M·K + K·N + M·N)·4 = 917.5 KB
    assert result.actual.tflops == pytest.approx(MATMUL_FLOPS / (ms * 1e-3) / 1e12)
    compulsory = (M * K + K * N + M * N) * 4
    assert result.actual.gbps == pytest.approx(compulsory / (ms * 1e-3) / 1e9)


# nan was judged "IMPOSSIBLE: faster than any math", inf "infx headroom" (and Infinity in the
# JSON, which strict parsers refuse); True counted as 1 ms
@pytest.mark.parametrize("bad", [0, -1.0, "fast", float("nan"), float("inf"), True])
def test_actual_ms_must_be_a_positive_number(bad: object) -> None:
    with pytest.raises(InputError, match="actual_ms must be a finite time above 0"):
        analyze(*_mm(), actual_ms=bad)


def test_unknown_cache_mode() -> None:
    with pytest.raises(InputError, match="cache"):
        analyze(*_mm(), cache="hot")


def test_on_reprices_without_retracing() -> None:
    base = analyze(*_sdpa(), precision="fp32")
    moved = base.on("a100", precision="bf16")
    direct = analyze(*_sdpa(), gpu="a100", precision="bf16")
    assert moved.gpu.key == direct.gpu.key
    assert moved.sol_s == pytest.approx(direct.sol_s, rel=1e-12)
    assert moved.fused_bytes == direct.fused_bytes


# --- JSON ----------------------------------------------------------------------------------------


def test_to_dict_layout() -> None:
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU())
    result = analyze(model, meta(16, 64), actual_ms=0.01)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["schema_version"] == 1
    assert data["model"] == "Sequential"
    assert data["gpu"] == "H100 SXM"
    assert data["precision"] == "fp32"
    assert data["params"] == 64 * 128 + 128
    # addmm: 2·16·128·64 (torch's flop_counter: the bias add is free); relu: 1 per element
    tensor, vector = 2 * 16 * 128 * 64, 16 * 128
    assert data["flops"] == {"total": tensor + vector, "tensor": tensor, "vector": vector,
                             "executed": tensor + vector}  # nothing is dead
    # fp32 elements: x 16·64, W 128·64, bias 128, y 16·128. Eager: addmm reads x, W, bias and
    # writes y; relu reads and writes y. Fused: Inductor unfuses the addmm into a GEMM that
    # writes x·Wᵀ and one kernel for bias add + relu (the GEMM, an extern kernel, takes no
    # epilogue). Compulsory: x, W and bias in, y out.
    x, w, bias, y = 16 * 64, 128 * 64, 128, 16 * 128
    assert data["bytes"] == {"unfused": (x + w + bias + y + 2 * y) * 4,
                             "fused": (x + w + y + y + bias + y) * 4,
                             "compulsory": (x + w + bias + y) * 4}
    assert [kernel["bytes"] for kernel in data["kernels"]] == [(x + w + y) * 4,
                                                              (y + bias + y) * 4]
    assert data["kernel_count"] == {"unfused": 2, "fused": 2}
    for group in ("flops", "bytes", "kernel_count"):
        assert all(type(value) is int for value in data[group].values()), group
    fused_bytes = (x + w + y + y + bias + y) * 4
    assert data["arithmetic_intensity"] == pytest.approx((tensor + vector) / fused_bytes)
    assert data["ridge_point"] == pytest.approx(H100_FP32 / H100_BANDWIDTH)
    assert set(data["time_ms"]) == {"compute_sol", "memory_sol", "memory_fused", "sol",
                                    "sol_by_math", "fused_estimate", "eager_estimate",
                                    "cudagraph_estimate"}
    assert list(data["time_ms"]["sol_by_math"]) == ["program", "tf32", "bf16", "fp16", "fp8"]
    assert set(data["estimate"]) == {"eager", "fused", "cudagraph"}
    # memory-bound: 45,568 compulsory bytes take 13.6 ns at 3.35 TB/s, 264 KFLOPs take 3.9 ns
    sol_ms = (x + w + bias + y) * 4 / H100_BANDWIDTH * 1e3
    assert data["time_ms"]["sol"] == pytest.approx(sol_ms, rel=1e-12)
    assert data["bottleneck"] == "memory"
    for kernel in data["kernels"]:
        assert {"name", "ops", "flops", "bytes", "time_ms", "bound", "refusals"} <= set(kernel)
        assert type(kernel["flops"]) is int and type(kernel["bytes"]) is int
    assert data["notes"] == []
    assert set(data["actual"]) >= {"ms", "sol_fraction", "tflops", "gbps", "impossible"}
    assert data["actual"]["ms"] == 0.01
    assert data["actual"]["sol_fraction"] == pytest.approx(sol_ms / 0.01, rel=1e-12)
    assert data["actual"]["impossible"] is False  # 0.01 ms is 735 times the 13.6 ns bound


def test_ridge_point_fp32_h100() -> None:
    result = analyze(*_mm())
    assert result.ridge_point == pytest.approx(19.97, abs=0.01)
    assert analyze(*_mm(), precision="bf16").ridge_point == pytest.approx(
        H100_BF16 / H100_BANDWIDTH
    )


def test_a_model_in_a_narrower_dtype_is_headed_and_ridged_at_its_own() -> None:
    """An fp16 matmul analysed at the default "fp32" runs on fp16 tensor cores: its header,
    JSON and ridge point say fp16 (they once said fp32, ridge 19.97 FLOPs/B beside an fp16
    bound); the ridge is the fp16 dense peak over HBM: 989.4e12 / 3.35e12 = 295.3 FLOPs/B."""
    fp16 = Fn(torch.mm), meta(M, K, dtype=torch.float16), meta(K, N, dtype=torch.float16)
    result = analyze(*fp16)
    assert result.precision == "fp32" and result.computing_precision == "fp16"
    assert result.ridge_point == pytest.approx(H100_BF16 / H100_BANDWIDTH)
    assert json.loads(result.to_json())["computing_precision"] == "fp16"
    header = result.format().splitlines()[2]
    assert "Precision: fp16 (the model's dtypes; fp32 asked)" in header
    assert analyze(*_mm()).computing_precision == "fp32"  # an fp32 program at fp32: as asked
    # no tensor-core work: the vector FLOPs decide
    assert analyze(nn.ReLU(), meta(M, K, dtype=torch.float16)).computing_precision == "fp16"


def test_empty_model_serialises() -> None:
    result = analyze(nn.Identity(), meta(8))
    data = json.loads(result.to_json())
    assert data["flops"]["total"] == 0 and data["kernels"] == []
    assert data["arithmetic_intensity"] is None  # 0/0 is reported as null, not NaN
    assert result.sol_s == 0.0


def test_a_cast_inside_the_model_keeps_its_narrow_bytes_and_units() -> None:
    """An fp32 model that runs its matmul in fp16 is charged fp16 bytes and the fp16 tensor
    peak for it: a bound may not assume more work than the program does."""
    n = 1024

    def body(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a.half() @ b.half()).float()

    result = analyze(Fn(body), meta(n, n), meta(n, n), gpu="h100", precision="fp32")
    matmul = next(k for k in result.kernels if k.category == "compute")
    assert matmul.bytes == 3 * n * n * 2
    assert result.compute_sol_s == pytest.approx(2 * n**3 / 989.4e12)
