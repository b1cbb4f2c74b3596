"""HBM bytes of the eager, fused and perfect-fusion (compulsory) plans against closed forms."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta
from torchroofline.costs import Category, cost_trace
from torchroofline.fusion import compulsory_refs, eager_plan, fused_plan
from torchroofline.trace import trace_model

N = 64 * 64  # elements of the test activations
FP32 = 4


def test_pointwise_chain_unfused_vs_fused() -> None:
    result = analyze(Fn(lambda x: torch.relu(x) * 2 + 1), meta(64, 64))
    # eager: three kernels, each reads its input and writes its output
    assert result.unfused_bytes == 3 * (N + N) * FP32
    assert result.unfused_kernel_count == 3
    # fused: one kernel reads x once and writes the result once
    assert result.fused_bytes == (N + N) * FP32
    assert result.fused_kernel_count == 1
    assert result.compulsory_bytes == result.fused_bytes


def test_pointwise_chain_with_second_input_read_once_per_kernel() -> None:
    # x is read by relu and by add: one load in the fused kernel, two in eager
    result = analyze(Fn(lambda x, w: torch.relu(x) * w + x), meta(64, 64), meta(64, 64))
    assert result.unfused_bytes == ((1 + 1) + (2 + 1) + (2 + 1)) * N * FP32
    assert result.fused_bytes == (2 + 1) * N * FP32


def test_broadcast_operand_reads_its_own_size() -> None:
    rows, cols = 64, 32
    result = analyze(Fn(lambda x, b: x + b), meta(rows, cols), meta(cols))
    assert result.fused_bytes == (rows * cols + cols + rows * cols) * FP32


def test_sliced_input_reads_the_elements_it_touches() -> None:
    result = analyze(Fn(lambda x: x[:, :4] * 2), meta(64, 32))
    assert result.compulsory_bytes == (64 * 4 + 64 * 4) * FP32


@pytest.mark.parametrize("softmax", [
    lambda x: torch.softmax(x, -1),
    # written out by hand: max, sub, exp, sum, div still form one persistent reduction
    lambda x: (x - x.amax(-1, keepdim=True)).exp() / (x - x.amax(-1, keepdim=True)).exp().sum(
        -1, keepdim=True
    ),
])
def test_softmax_is_one_kernel(softmax) -> None:  # noqa: ANN001
    result = analyze(Fn(softmax), meta(64, 64))
    assert result.fused_kernel_count == 1
    assert result.kernels[0].category == "reduction"
    assert result.fused_bytes == (N + N) * FP32


def test_layer_norm_is_one_kernel() -> None:
    rows, width = 64, 128
    result = analyze(nn.LayerNorm(width), meta(rows, width))
    assert result.fused_kernel_count == 1
    # x in, weight and bias in, y out; the saved mean / rstd are read by nobody and not written
    assert result.fused_bytes == (rows * width + 2 * width + rows * width) * FP32
    assert result.unfused_bytes == result.fused_bytes + 2 * rows * FP32


class ConvReluBias(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, bias=False)
        self.bias = nn.Parameter(torch.zeros(8, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


def test_conv_stays_alone_and_relu_add_fuse() -> None:
    result = analyze(ConvReluBias(), meta(2, 3, 16, 16))
    x, w, y, bias = 2 * 3 * 16 * 16, 8 * 3 * 3 * 3, 2 * 8 * 14 * 14, 8
    conv, epilogue = result.kernels
    assert conv.category == "compute" and conv.op_names == ("aten.convolution.default",)
    assert conv.bytes == (x + w + y) * FP32
    assert epilogue.op_names == ("aten.relu.default", "aten.add.Tensor")
    assert epilogue.bytes == (y + bias + y) * FP32
    assert result.unfused_bytes == ((x + w + y) + (y + y) + (y + bias + y)) * FP32
    assert result.compulsory_bytes == (x + w + bias + y) * FP32


def test_matmul_neither_absorbs_nor_joins_pointwise() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    result = analyze(model, meta(4, 16))
    assert [k.category for k in result.kernels] == ["compute", "pointwise", "compute"]
    h = 4 * 32
    assert result.kernels[1].bytes == (h + h) * FP32


def test_tensor_read_by_two_kernels_is_read_by_each() -> None:
    b, k, n = 8, 16, 4
    result = analyze(
        Fn(lambda x, w1, w2: (x @ w1, x @ w2)), meta(b, k), meta(k, n), meta(k, n)
    )
    assert result.fused_kernel_count == 2
    assert result.fused_bytes == 2 * (b * k + k * n + b * n) * FP32
    # perfect fusion would load x once
    assert result.compulsory_bytes == result.fused_bytes - b * k * FP32


def test_intermediate_is_written_once_and_read_by_each_consumer() -> None:
    b, k, n = 8, 16, 4
    result = analyze(
        Fn(lambda x, w1, w2: (torch.relu(x) @ w1, torch.relu(x) @ w2)),
        meta(b, k), meta(k, n), meta(k, n),
    )
    relu_kernels = [k_ for k_ in result.kernels if k_.category == "pointwise"]
    # the two relus share x and their iteration space: one kernel writes both results
    assert len(relu_kernels) == 1
    assert relu_kernels[0].bytes == (b * k + 2 * b * k) * FP32


def test_returned_intermediate_is_written() -> None:
    result = analyze(Fn(lambda x: (torch.relu(x), torch.relu(x) * 2)), meta(64, 64))
    assert result.fused_kernel_count == 1
    assert result.fused_bytes == (N + 2 * N) * FP32  # x in, both returned tensors out


def test_reduction_with_pointwise_epilogue_fuses() -> None:
    rows, cols = 64, 32
    result = analyze(Fn(lambda x: x.sum(-1) * 2), meta(rows, cols))
    assert result.fused_kernel_count == 1
    assert result.fused_bytes == (rows * cols + rows) * FP32


def test_independent_chains_stay_separate() -> None:
    result = analyze(Fn(lambda x, y: (x.relu(), y.relu())), meta(64, 64), meta(64, 64))
    assert result.fused_kernel_count == 2
    assert result.fused_bytes == result.unfused_bytes == 2 * (N + N) * FP32


def test_filling_fresh_memory_reads_nothing() -> None:
    # bernoulli_ overwrites an empty_like allocation: there is nothing to load from it
    def dropout_by_hand(x: torch.Tensor) -> torch.Tensor:
        return x * torch.empty_like(x).bernoulli_(0.5)

    result = analyze(Fn(dropout_by_hand), meta(64, 64))
    assert result.fused_bytes == (N + N) * FP32 == result.compulsory_bytes
    assert result.unfused_bytes == (N + (2 * N + N)) * FP32  # bernoulli_ writes; mul reads two


def test_native_dropout_mask_is_not_written_when_unused() -> None:
    result = analyze(nn.Dropout(0.5), meta(64, 64))
    assert result.fused_bytes == (N + N) * FP32
    assert result.unfused_bytes == (N + N) * FP32 + N  # eager also writes the bool mask


def test_in_place_update_of_a_buffer_is_kept() -> None:
    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("total", torch.zeros(16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.total.add_(x)
            return x * 2

    result = analyze(Counter(), meta(16))
    # eager: add_ reads total and x, writes total; mul reads x, writes the output
    assert result.unfused_bytes == (3 * 16 + 2 * 16) * FP32
    # fused (both read x, same size): total and x in once; the new total and the output out
    assert result.fused_kernel_count == 1
    assert result.fused_bytes == result.compulsory_bytes == (2 * 16 + 2 * 16) * FP32


def test_plans_from_the_stages_directly() -> None:
    trace = trace_model(Fn(lambda x: torch.relu(x) * 2 + 1), meta(64, 64))
    ops = cost_trace(trace)
    assert [op.category for op in ops] == [Category.POINTWISE] * 3
    fused = fused_plan(ops, trace.output_value_ids)
    eager = eager_plan(ops)
    assert len(fused.kernels) == 1 and len(eager.kernels) == 3
    assert fused.bytes(2) == (N + N) * 2  # bytes take the element size they are asked for
    assert eager.bytes(4) == 6 * N * 4
    refs = compulsory_refs(ops, trace.input_value_ids, trace.output_value_ids)
    assert sorted(ref.elements for ref in refs) == [N, N]


def test_compulsory_reads_each_input_once_at_its_largest_view() -> None:
    # x is read whole by relu and in part by the slice: perfect fusion loads it once, whole
    result = analyze(Fn(lambda x: (torch.relu(x), x[:, :4] * 2)), meta(64, 64))
    assert result.compulsory_bytes == (N + N + 64 * 4) * FP32


def test_gelu_mlp_block() -> None:
    rows, width, hidden = 32, 64, 256
    model = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))
    result = analyze(model, meta(rows, width))
    h = rows * hidden
    assert result.fused_kernel_count == 3
    assert result.kernels[1].bytes == 2 * h * FP32
    params = width * hidden + hidden + hidden * width + width
    assert result.compulsory_bytes == (rows * width + params + rows * width) * FP32
    assert result.flops == 2 * 2 * rows * width * hidden + 4 * h  # GELU: 4 FLOPs per element


def test_layer_norm_then_residual_does_not_fuse_different_sizes() -> None:
    # an epilogue on a per-row statistic joins; an unrelated, larger pointwise does not
    result = analyze(Fn(lambda x, y: (F.layer_norm(x, (32,)), y * 3)), meta(8, 32), meta(64, 64))
    assert result.fused_kernel_count == 2
