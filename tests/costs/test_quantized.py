"""Quantized programs priced per op: FP8, NVFP4 and MXFP8 scaled matmuls against closed forms.

The fixtures in tests/fixtures/quantized/ are written from the public format descriptions (OCP
OFP8 and MX v1.0, NVIDIA's NVFP4); each docstring there states the layout the byte counts
below follow. FLOPs are 2·M·N·K with K counted in values (two per ``float4_e2m1fn_x2`` byte);
bytes are the data, the scales and the output, each at its own element size.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta
from torchroofline.costs import Category, MatmulKind
from torchroofline.errors import ModelError
from torchroofline.price.gpu_spec import TENSOR_PRECISIONS
from torchroofline.price.hardware import get_gpu
from torchroofline.price.precision import op_precision, unit_for
from torchroofline.suites.kernelbench import analyze_file

FIXTURES = Path(__file__).parents[1] / "fixtures" / "quantized"
E4M3, E8M0, FP4 = torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2
H100_FP8 = 1978.9e12  #: H100 SXM dense FP8 tensor cores (Hopper whitepaper)
BF16 = torch.bfloat16


def scaled_ops(result):
    return [op for op in result.ops if "scaled" in op.name]


def fp8_program():
    return analyze_file(FIXTURES / "fp8_scaled_mm.py", "h100-sxm")


def test_fp8_per_tensor_and_per_row_scales_price_per_op() -> None:
    # M, K, N1, N2 = 128, 256, 512, 256 (the fixture)
    result = fp8_program()
    first, second = scaled_ops(result)
    # layer 1: 2·128·512·256 FLOPs; x 128·256 + w1 512·256 (1 B each) + two fp32 scalar
    # scales (8 B) + the bf16 output 128·512·2
    assert first.flops.tensor == 2 * 128 * 512 * 256 == 33_554_432
    assert first.eager_bytes(4) == 32_768 + 131_072 + 8 + 131_072 == 294_920
    # layer 2: 2·128·256·512 FLOPs; h8 128·512 + w2 256·512 + row scales 128·4 + column scales
    # 256·4 + the output 128·256·2
    assert second.flops.tensor == 2 * 128 * 256 * 512
    assert second.eager_bytes(4) == 65_536 + 131_072 + 512 + 1_024 + 65_536 == 263_680
    assert {op_precision(op, "fp32") for op in (first, second)} == {"fp8"}
    # the conversion between them: a pointwise copy reading bf16 (2 B) and writing e4m3 (1 B)
    [cast] = [op for op in result.ops if op.name == "aten._to_copy.default"]
    assert cast.category is Category.POINTWISE
    assert cast.eager_bytes(4) == 128 * 512 * (2 + 1)
    # both products on FP8 tensor cores; graph inputs once plus the kept output:
    # x 32,768 + 4 + w1 131,072 + 4 + w2 131,072 + 1,024 + h_scale 512 + out 65,536
    assert result.compute_sol_s == pytest.approx(2 * 33_554_432 / H100_FP8)
    assert result.compulsory_bytes == 361_992


@pytest.mark.parametrize(
    ("precision", "expected"),
    [
        # fp32/bf16 tensors at most 2 B: the fp32 scales shrink (scalars 2 B, rows 128·2,
        # columns 256·2); the fp8 data and the bf16 output keep their size
        ("bf16", 32_768 + 2 + 131_072 + 2 + 131_072 + 512 + 256 + 65_536),
        # every float at most 1 B: the output too; e4m3 data cannot get narrower
        ("fp8", 32_768 + 1 + 131_072 + 1 + 131_072 + 256 + 128 + 32_768),
    ],
)
def test_precision_casts_wider_floats_and_keeps_fp8_data(precision: str, expected: int) -> None:
    """``precision=`` keeps its meaning, the whole program cast to that element size: fp32 and
    bf16 tensors shrink to it, fp8/fp4 data and their scales are never widened or narrowed."""
    result = analyze_file(FIXTURES / "fp8_scaled_mm.py", "h100-sxm", precision)
    assert result.compulsory_bytes == expected
    assert result.tensor_flops == 2 * 33_554_432


def test_nvfp4_counts_two_values_per_byte_and_its_scales() -> None:
    # M, K, N = 256, 1024, 512: data (M, K/2) and (N, K/2) bytes, e4m3 scales M·K/16 and N·K/16,
    # two fp32 global scales, the bf16 output M·N·2
    result = analyze_file(FIXTURES / "nvfp4_scaled_mm.py", "h100-sxm")
    [op] = scaled_ops(result)
    assert op.flops.tensor == 2 * 256 * 512 * 1024 == 268_435_456
    assert op.flops.kind is MatmulKind.MATMUL
    data, scales, output = 256 * 512 + 512 * 512, 256 * 64 + 512 * 64 + 2 * 4, 256 * 512 * 2
    assert op.eager_bytes(4) == data + scales + output == 704_520
    assert result.compulsory_bytes == 704_520
    assert op_precision(op, "fp32") == "fp4"


NVFP4_FLOPS = 268_435_456  #: the fixture's 2·256·512·1024


@pytest.mark.skipif("fp4" not in TENSOR_PRECISIONS, reason="the GPU table has no fp4 peaks yet")
def test_fp4_runs_at_the_fp4_rate() -> None:
    h100 = get_gpu("h100-sxm")
    peaks = dict(h100.tensor_peak_flops_per_s)
    with_fp4 = replace(h100, name="FP4 part", tensor_peak_flops_per_s={**peaks, "fp4": 4e15})
    result = analyze_file(FIXTURES / "nvfp4_scaled_mm.py", with_fp4)
    assert result.compute_sol_s == pytest.approx(NVFP4_FLOPS / 4e15)


def test_fp4_runs_at_the_fp8_rate_where_the_gpu_lists_no_fp4() -> None:
    h100 = get_gpu("h100-sxm")
    # the H100 has no FP4 tensor cores: fp4 values are exact in e4m3, so FP8 tensor cores
    # bound the work (every GPU with FP4 units runs them at least as fast as FP8), with a note
    result = analyze_file(FIXTURES / "nvfp4_scaled_mm.py", h100)
    assert result.compute_sol_s == pytest.approx(NVFP4_FLOPS / H100_FP8)
    assert any("no fp4 tensor cores" in note for note in result.notes)
    unit = unit_for(h100, "fp4", MatmulKind.MATMUL)
    assert unit.label == "fp8 tensor cores"


def test_mxfp8_reads_one_e8m0_scale_per_32_values() -> None:
    # M, K, N = 128, 512, 256: x 128·512 + w 256·512 (1 B) + scales 128·16 + 256·16 (1 B) +
    # the bf16 output 128·256·2
    result = analyze_file(FIXTURES / "mxfp8_scaled_mm.py", "h100-sxm")
    [op] = scaled_ops(result)
    assert op.flops.tensor == 2 * 128 * 256 * 512
    assert op.eager_bytes(4) == 65_536 + 131_072 + 2_048 + 4_096 + 65_536 == 268_288
    assert op_precision(op, "fp32") == "fp8"


def test_dequantize_then_matmul_is_priced_as_written() -> None:
    """An fp8 weight converted to bf16 and scaled, then a bf16 matmul: the conversion is a
    pointwise copy, the product runs on bf16 tensor cores (not fp8 ones)."""

    class Dequantized(nn.Module):
        def forward(self, x, w8, scale):
            return F.linear(x, w8.to(BF16) * scale)

    m, k, n = 64, 128, 32
    result = analyze(
        Dequantized(), meta(m, k, dtype=BF16), meta(n, k, dtype=E4M3), meta(dtype=BF16)
    )
    [product] = [op for op in result.ops if op.flops.tensor]
    assert product.flops.tensor == 2 * m * n * k
    assert op_precision(product, "fp32") == "bf16"
    [cast] = [op for op in result.ops if op.name == "aten._to_copy.default"]
    assert cast.eager_bytes(4) == n * k * (1 + 2)  # e4m3 in, bf16 out


def row_scaled(x, w, x_scale, w_scale):
    return torch._scaled_mm(x, w.t(), x_scale, w_scale, out_dtype=BF16)


def test_a_kept_slice_needs_its_rows_and_their_scales() -> None:
    m, k, n, rows = 128, 256, 64, 16
    model = Fn(lambda *args: row_scaled(*args)[:rows])
    result = analyze(model, meta(m, k, dtype=E4M3), meta(n, k, dtype=E4M3), meta(m, 1), meta(1, n))
    # 16 rows of x (1 B) and of its row scales (4 B), all of w and its column scales, the kept
    # 16·n bf16 outputs; 2·K FLOPs per kept output
    assert result.compulsory_bytes == rows * k + n * k + rows * 4 + n * 4 + rows * n * 2
    assert result.tensor_flops == 2 * k * rows * n


def test_a_kept_slice_of_nvfp4_needs_a_block_scale_per_16_values_of_its_rows() -> None:
    m, k, n, rows = 128, 256, 64, 16
    model = Fn(lambda *args: row_scaled(*args)[:rows])
    inputs = (meta(m, k // 2, dtype=FP4), meta(n, k // 2, dtype=FP4),
              meta(m * k // 16, dtype=E4M3), meta(n * k // 16, dtype=E4M3))
    result = analyze(model, *inputs)
    # x: 16 rows of K/2 bytes and at least 16·K/16 of its swizzled scales; w and its scales whole
    expected = rows * k // 2 + rows * k // 16 + n * k // 2 + n * k // 16 + rows * n * 2
    assert result.compulsory_bytes == expected
    assert result.tensor_flops == 2 * k * rows * n


def test_a_kept_block_of_nvfp4_needs_its_rows_columns_and_global_scales() -> None:
    recipe = [F.ScalingType.BlockWise1x16, F.ScalingType.TensorWise]
    swizzle = [F.SwizzleType.SWIZZLE_32_4_4, F.SwizzleType.NO_SWIZZLE]

    def block(x, w, x_scale, x_global, w_scale, w_global):
        out = F.scaled_mm(x, w.t(), [x_scale, x_global], recipe, [w_scale, w_global], recipe,
                          swizzle_a=swizzle, swizzle_b=swizzle, output_dtype=BF16)
        return out[:16, 8:40]

    m, k, n = 256, 512, 128
    result = analyze(Fn(block), meta(m, k // 2, dtype=FP4), meta(n, k // 2, dtype=FP4),
                     meta(m * k // 16, dtype=E4M3), meta(), meta(n * k // 16, dtype=E4M3), meta())
    # 16 rows and 32 columns, each K/2 bytes of codes and K/16 e4m3 scales; both fp32 globals;
    # the kept 16·32 bf16 outputs; 2·K FLOPs per kept output
    rows, columns = 16, 32
    expected = (rows + columns) * (k // 2 + k // 16) + 2 * 4 + rows * columns * 2
    assert result.compulsory_bytes == expected
    assert result.tensor_flops == 2 * k * rows * columns


def test_fp4_packed_in_forward_is_integer_work_and_a_free_view() -> None:
    """fp4 has no conversion op: code packs two 4-bit codes per uint8, then views the bytes as
    float4_e2m1fn_x2. The shifts and ors are pointwise, the dtype view costs nothing, and the
    bound reads the codes once (1 B per value)."""

    def packed_product(codes, w, x_scale, w_scale):
        packed = (codes[:, 1::2] << 4) | codes[:, 0::2]
        return row_scaled(packed.view(FP4), w, x_scale, w_scale)

    m, k, n = 128, 256, 64
    result = analyze(Fn(packed_product), meta(m, k, dtype=torch.uint8),
                     meta(n, k // 2, dtype=FP4), meta(m * k // 16, dtype=E4M3),
                     meta(n * k // 16, dtype=E4M3))
    [view] = [op for op in result.ops if op.name == "aten.view.dtype"]
    assert view.category is Category.ZERO_COPY
    assert result.tensor_flops == 2 * m * n * k
    assert result.compulsory_bytes == m * k + n * k // 2 + (m + n) * k // 16 + m * n * 2


def test_unpadded_block_scales_trace_as_given() -> None:
    """cuBLAS wants block scales padded to 128-row tiles, and the meta kernel refuses others
    ("Invalid blockwise scaling configuration"); the trace makes the output from shapes, so 16
    rows with their 16·K/16 scales are read as the bytes they are."""
    m, k, n = 16, 128, 32
    inputs = (meta(m, k // 2, dtype=FP4), meta(n, k // 2, dtype=FP4),
              meta(m * k // 16, dtype=E4M3), meta(n * k // 16, dtype=E4M3))
    [op] = scaled_ops(analyze(Fn(row_scaled), *inputs))
    assert op.flops.tensor == 2 * m * n * k
    assert op.eager_bytes(4) == (m + n) * (k // 2 + k // 16) + m * n * 2


def test_mismatched_operands_name_the_shapes() -> None:
    inputs = (meta(16, 64, dtype=E4M3), meta(32, 48, dtype=E4M3), meta(), meta())
    with pytest.raises(ModelError, match="cannot be multiplied"):
        analyze(Fn(row_scaled), *inputs)


@pytest.mark.parametrize(
    ("left", "right", "flops"),
    [
        # 2D × 3D (mixture of experts): 64 token rows, each multiplied by its group's (K, N)
        ((64, 128), (4, 256, 128), 2 * 64 * 256 * 128),
        # 2D × 2D (weight gradients): K split among 4 groups, four (32, 256) outputs
        ((32, 128), (256, 128), 2 * 32 * 256 * 128),
        # 3D × 3D: a batch of 4 products
        ((4, 16, 128), (4, 256, 128), 2 * 4 * 16 * 256 * 128),
    ],
)
def test_scaled_grouped_mm_is_2mnk_per_group(left, right, flops) -> None:
    def grouped(a, b, scale_a, scale_b, offs):
        return torch._scaled_grouped_mm(a, b.transpose(-2, -1), scale_a, scale_b, offs=offs,
                                        out_dtype=BF16)

    inputs = (meta(*left, dtype=E4M3), meta(*right, dtype=E4M3), meta(left[0]), meta(right[0]),
              meta(4, dtype=torch.int32))
    [op] = scaled_ops(analyze(Fn(grouped), *inputs))
    assert op.flops.tensor == flops
    assert op_precision(op, "fp32") == "fp8"


@pytest.mark.skipif(not hasattr(torch.ops.aten, "_scaled_addmm"), reason="torch >= 2.15")
def test_scaled_addmm_accumulates_into_its_first_argument() -> None:
    tensor_wise = F.ScalingType.TensorWise

    def accumulate(c, a, b, scale_a, scale_b):
        return F.scaled_addmm(c, a, b.t(), scale_a, tensor_wise, scale_b, tensor_wise)

    m, k, n = 128, 512, 256
    inputs = (meta(m, n, dtype=BF16), meta(m, k, dtype=E4M3), meta(n, k, dtype=E4M3), meta(),
              meta())
    [op] = scaled_ops(analyze(Fn(accumulate), *inputs))
    # 2·M·N·K on FP8 tensor cores; C read and the result written in bf16, A and B 1 B each
    assert op.flops.tensor == 2 * m * n * k
    assert op_precision(op, "fp32") == "fp8"
    assert op.eager_bytes(4) == m * n * 2 + m * k + n * k + 8 + m * n * 2


# --- benchmarks/math_error.py: the emulation the measured-error table rests on ------------------


def math_error_module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "math_error.py"
    spec = importlib.util.spec_from_file_location("_bench_math_error", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_tf32_emulation_keeps_ten_mantissa_bits() -> None:
    bench = math_error_module()
    # 1 + 2⁻¹⁰ is a TF32 value; 1 + 2⁻¹¹ is half its last bit (a tie); 1 + 3·2⁻¹² is 3/4 of it
    values = torch.tensor([1 + 2**-10, 1 + 2**-11, 1 + 3 * 2**-12])
    assert bench.tf32_truncated(values).tolist() == [1 + 2**-10, 1.0, 1.0]
    assert bench.tf32_rounded(values).tolist() == [1 + 2**-10] * 3  # ties away from zero


def test_math_error_grows_as_the_mantissa_shrinks() -> None:
    """fp32 (23 bits) < fp16 (10) < bf16 (7) < fp8 e4m3 (3) on one small unit-normal product."""
    bench = math_error_module()
    case = bench.Case("8x64x8", "", "", 64, (("randn", (8, 64)), ("randn", (64, 8))), bench.matmul)
    error = {row.rung: row.max_abs for row in bench.measure(case)}
    assert error["fp32"] < error["fp16"] < error["bf16"] < error["fp8"]
    assert error["tf32 (rounded)"] == error["fp16"]  # the same 10 bits, rounded the same way


class IntMatmul(nn.Module):
    """``torch._int_mm``: int8 (M, K) @ (K, N) → int32, optionally a slice of its rows kept."""

    def __init__(self, kept_rows: int | None = None) -> None:
        super().__init__()
        self.kept_rows = kept_rows

    def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        return torch._int_mm(left, right)[: self.kept_rows]


def int8_operands(m: int = 256, k: int = 4096, n: int = 4096) -> tuple[torch.Tensor, ...]:
    return (torch.randint(-128, 128, (m, k), dtype=torch.int8),
            torch.randint(-128, 128, (k, n), dtype=torch.int8))


@pytest.mark.parametrize(("gpu", "peak"), [
    ("h100-sxm", 1978.9e12),  # Hopper int8 tensor cores, dense
    ("b300", 2250e12),  # Blackwell Ultra: int8 150 TOPS, fp16 2,250: int8 values exact in fp16
    ("v100", 125e12),  # no int8 tensor cores: the fp16 ones run int8 values exactly
])
def test_int_mm_runs_at_the_fastest_unit_holding_int8_exactly(gpu: str, peak: float) -> None:
    # 2·M·N·K = 2·256·4096·4096 integer products and sums; before its rule it had none
    result = analyze(IntMatmul(), *int8_operands(), gpu=gpu)
    products = 2 * 256 * 4096 * 4096
    assert result.flops == products
    assert result.time_ms["compute_sol"] == pytest.approx(products / peak * 1e3)


def test_a_kept_slice_of_int_mm_needs_its_rows_products() -> None:
    # 32 of 256 output rows kept: 2·32·N·K necessary products (the demand rule of mm)
    result = analyze(IntMatmul(kept_rows=32), *int8_operands(), gpu="h100-sxm")
    assert sum(op.flops.tensor for op in result.necessary.ops) == 2 * 32 * 4096 * 4096
