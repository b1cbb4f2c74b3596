"""HBM bytes of the eager, fused and perfect-fusion (compulsory) plans against closed forms."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta
from torchroofline.costs import Category, cost_trace
from torchroofline.plan.fusion import Refusal, eager_plan, fused_plan
from torchroofline.plan.plans import make_plans
from torchroofline.trace.tracer import trace_model

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
    # the first addmm's users are pointwise: its bias add moves into the relu kernel (32 floats)
    assert result.kernels[1].bytes == (h + 32 + h) * FP32


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
    # CSE: the two relus are one value, computed once, written once (an extern's input)
    assert len(relu_kernels) == 1
    assert relu_kernels[0].bytes == (b * k + b * k) * FP32


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
    # the plans stage builds the same schedules once, with the necessary work (x in, out out)
    plans = make_plans(trace, ops)
    assert plans.fused == fused and plans.eager == eager
    assert plans.necessary.bytes(4) == (N + N) * 4


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
    # the first Linear's bias add is unfused into the GELU kernel: it reads the bias
    assert result.kernels[1].bytes == (2 * h + hidden) * FP32
    params = width * hidden + hidden + hidden * width + width
    assert result.compulsory_bytes == (rows * width + params + rows * width) * FP32
    assert result.flops == 2 * 2 * rows * width * hidden + 4 * h  # GELU: 4 FLOPs per element


def test_layer_norm_then_residual_does_not_fuse_different_sizes() -> None:
    # an epilogue on a per-row statistic joins; an unrelated, larger pointwise does not
    result = analyze(Fn(lambda x, y: (F.layer_norm(x, (32,)), y * 3)), meta(8, 32), meta(64, 64))
    assert result.fused_kernel_count == 2


# --- Patterns checked against Inductor's rules (torch/_inductor: lowering.py, scheduler.py,
# codegen/simd.py, fx_passes/post_grad.py; CUDA backend, default config) ----------------------

R, C = 64, 32  # rows, columns of the pattern inputs
RC = R * C


def plan_of(fn, *inputs: torch.Tensor) -> tuple[list, object]:  # noqa: ANN001
    """The fused plan of ``fn`` with the trace it came from (kernels keep their refusals)."""
    trace = trace_model(Fn(fn), inputs)
    ops = cost_trace(trace)
    return list(fused_plan(ops, trace.output_value_ids).kernels), trace


def kernel_elements(kernel) -> int:  # noqa: ANN001
    return kernel.bytes(FP32) // FP32


def test_independent_pointwise_ops_joined_by_a_consumer_are_one_kernel() -> None:
    # Inductor inlines b.sin() and c.sin() into the add (single-use pointwise values are never
    # realized): one kernel loads b and c and stores the sum; a.cos() shares no buffer with it,
    # so it stays a kernel of its own (score_fusion_memory = 0).
    kernels, _ = plan_of(lambda a, b, c: (a.cos(), b.sin() + c.sin()),
                         meta(R, C), meta(R, C), meta(R, C))
    assert sorted(kernel_elements(k) for k in kernels) == [2 * RC, 3 * RC]


def test_pointwise_cat_of_pointwise_inputs_is_one_kernel() -> None:
    # lowering.cat: every input is an unrealized pointwise value with one user →
    # pointwise_cat; the cos and sin are computed where each output slice is stored
    kernels, _ = plan_of(lambda x, y: torch.cat([x.cos(), y.sin()]), meta(R, C), meta(R, C))
    assert len(kernels) == 1
    assert kernel_elements(kernels[0]) == RC + RC + 2 * RC


def test_pointwise_cat_fuses_into_its_consumer() -> None:
    # the pointwise_cat is itself a pointwise value with one (pointwise) user: inlined into relu
    kernels, _ = plan_of(lambda x, y: torch.cat([x.cos(), y.sin()]).relu(),
                         meta(R, C), meta(R, C))
    assert [k.name for k in kernels] == ["cos+sin+cat+relu"]  # every op named, none cut
    assert kernel_elements(kernels[0]) == RC + RC + 2 * RC


def test_cat_of_gemm_outputs_is_written_by_the_gemms() -> None:
    # without max-autotune mm and addmm keep a FlexibleLayout (choices._need_to_fix_layout:
    # "the historical implementation for mm and addmm allowed flexible layouts"), so
    # can_realize_into_without_copy accepts them: no input lowers in place → ConcatKernel, and
    # each cuBLAS call writes its (R, C) slice of the (R, 2C) result — no cat kernel
    k = 16
    kernels, _ = plan_of(lambda x, w1, w2: torch.cat([x @ w1, x @ w2], 1),
                         meta(R, k), meta(k, C), meta(k, C))
    assert [kern.name for kern in kernels] == ["mm", "mm"]
    assert [kernel_elements(kern) for kern in kernels] == [R * k + k * C + RC] * 2
    # test_perf test_cat: cat([mm(a, a), b.sin()]) moves 400 elements (mm 200, sin 200)
    kernels, _ = plan_of(lambda a, b: torch.cat([torch.mm(a, a), b.sin()]),
                         meta(10, 10), meta(10, 10))
    assert [kernel_elements(kern) for kern in kernels] == [200, 200]


def test_linear_feeding_a_cat_keeps_its_bias_and_writes_its_slice() -> None:
    # should_prefer_unfused_addmm: a cat is no pointwise use (is_pointwise_use wants
    # Tag.pointwise), so addmm stays whole; its flexible layout lets the ConcatKernel have it
    # write its (R, C) slice, and the graph input y is copied into the other one
    k = 16
    kernels, _ = plan_of(lambda x, w, b, y: torch.cat([F.linear(x, w, b), y], 1),
                         meta(R, k), meta(C, k), meta(C), meta(R, C))
    assert [kern.name for kern in kernels] == ["addmm", "cat"]
    assert [kernel_elements(kern) for kern in kernels] == [C + R * k + C * k + RC, 2 * RC]


def test_cat_of_bmm_outputs_copies_them() -> None:
    # bmm's layout is fixed (_need_to_fix_layout: only mm and addmm stay flexible): its output
    # needs a copy anyway, every input lowers in place and none reads a reduction →
    # pointwise_cat, one kernel that loads both products and stores the result
    kernels, _ = plan_of(lambda a, b: torch.cat([torch.bmm(a, b), torch.bmm(b, a)], 1),
                         meta(2, 8, 8), meta(2, 8, 8))
    assert [kern.name for kern in kernels] == ["bmm", "bmm", "cat"]
    assert [kernel_elements(kern) for kern in kernels] == [3 * 128, 3 * 128, 2 * 128 + 256]


def test_concat_kernel_copies_a_graph_input_and_a_gemm_writes_its_slice() -> None:
    # a graph input needs a copy (it lowers in place) but the GEMM output does not, and nothing
    # pointwise reads the cat: ConcatKernel — mm writes its slice, a pointwise kernel copies y
    k = 16
    kernels, _ = plan_of(lambda x, w, y: torch.cat([x @ w, y], 1),
                         meta(R, k), meta(k, C), meta(R, C))
    assert [kern.name for kern in kernels] == ["mm", "cat"]
    assert [kernel_elements(kern) for kern in kernels] == [R * k + k * C + RC, 2 * RC]


def test_concat_kernel_lets_a_reduction_write_its_slice() -> None:
    # a reduction's output buffer is still flexible: ConcatKernel realizes it into its slice
    # (no copy); the graph input y is copied into its own slice by a pointwise kernel
    kernels, _ = plan_of(lambda x, y: torch.cat([x.sum(1), y]), meta(R, C), meta(R))
    assert [kern.name for kern in kernels] == ["sum", "cat"]
    assert [kernel_elements(kern) for kern in kernels] == [RC + R, R + R]


def test_a_reader_of_a_concat_kernel_loads_only_the_slices_it_covers() -> None:
    # x has another pointwise reader (exp), so the cat is a ConcatKernel: x[:, 1:] and x[:, :1]
    # are copied into their slices by two kernels. y[:, :1] is column 0 of y, which lies in the
    # first slice (x[:, 1:]): the add loads R elements of it and nothing of the second slice
    # (loading both slices whole would move R·C elements, more than eager's R)
    def body(x):  # noqa: ANN001, ANN202
        y = torch.cat([x[:, 1:], x[:, :1]], 1)
        return y, x.exp(), y[:, :1] + 1

    kernels, _ = plan_of(body, meta(R, C))
    assert [(k.name, kernel_elements(k)) for k in kernels] == [
        ("cat", 2 * R * (C - 1)), ("cat", 2 * R), ("exp", 2 * RC), ("add", 2 * R)
    ]
    # eager: cat 2·RC, exp 2·RC, add 2·R — the same
    result = analyze(Fn(body), meta(R, C))
    assert result.fused_bytes == result.unfused_bytes == (4 * RC + 2 * R) * FP32


def test_a_softmax_of_a_concat_kernel_is_one_persistent_reduction() -> None:
    # the softmax's rows are those of the whole concatenation (C elements), not of its first
    # slice (C - 1): statistics and normalize share one loop, with the copy of x[:, :1] (R
    # points, the reduction's numel) and the exp (R·C, numel × rnumel). That kernel loads x
    # (R·C) and the other slice (R·(C-1)), and stores the slice (R), the softmax and the exp
    def body(x):  # noqa: ANN001, ANN202
        y = torch.cat([x[:, 1:], x[:, :1]], 1)
        return y, torch.softmax(y, 1), x.exp()

    kernels, _ = plan_of(body, meta(R, C))
    assert [(k.name, kernel_elements(k)) for k in kernels] == [
        ("cat", 2 * R * (C - 1)), ("cat+_softmax+exp", RC + R * (C - 1) + R + 2 * RC)
    ]


def test_cat_of_a_convolution_output_is_a_pointwise_copy() -> None:
    # a convolution allocates its own output (ExternKernelAlloc): it cannot be realized into a
    # slice, so it needs a copy anyway — every input lowers in place → pointwise_cat, which the
    # relu absorbs: one kernel loads the conv output and y, and stores the result
    conv = nn.Conv2d(3, 4, 1, bias=False)
    n, hw = 2, 8 * 8
    kernels, _ = plan_of(lambda x, y: torch.cat([conv(x), y], 1).relu(),
                         meta(n, 3, 8, 8), meta(n, 4, 8, 8))
    assert [k.name for k in kernels] == ["Conv2d: convolution", "cat+relu"]
    assert kernel_elements(kernels[1]) == 2 * n * 4 * hw + 2 * n * 4 * hw


def test_reduction_epilogue_reads_another_input() -> None:
    # b.cos() is inlined into the add; the add's loop (R points) is the sum's output loop, so
    # it is the reduction's epilogue (simd can_fuse: numel1 == numel2): a, b in, R out
    kernels, _ = plan_of(lambda a, b: b.cos() + a.sum(dim=1), meta(R, C), meta(R))
    assert len(kernels) == 1
    assert kernel_elements(kernels[0]) == RC + R + R


def test_keepdim_reduction_broadcast_into_a_full_size_epilogue() -> None:
    # mul's loop has R·C points = numel × rnumel of the row sum: a full-size epilogue (as in
    # softmax); the sum never leaves the kernel
    kernels, _ = plan_of(lambda a, b: a.sum(1, keepdim=True) * b.cos(), meta(R, C), meta(R, C))
    assert len(kernels) == 1
    assert kernel_elements(kernels[0]) == 3 * RC


def test_cse_computes_a_duplicate_subexpression_once() -> None:
    # FX CSE: both cos calls are one value; it is an extern input, so it is realized once.
    # cos kernel: x in, cos out; mm: reads that one value (both operands) and writes the product
    n = 64
    kernels, _ = plan_of(lambda x: torch.mm(x.cos(), x.cos()), meta(n, n))
    assert [kernel_elements(k) for k in kernels] == [2 * n * n, 2 * n * n]
    # the duplicate's FLOPs stay in the plan (the kernel table sums to the traced FLOPs)
    assert kernels[0].vector_flops == 2 * n * n


def test_cse_leaves_values_that_are_written_again() -> None:
    # FX CSE sees a functional graph: clones whose storage is then updated in place are two
    # buffers, and the returned one is written in full (x in, both columns' sums, y out)
    def fn(x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            y = x.clone()
            y[:, 0] += x.sum(1)
        return y

    result = analyze(Fn(fn), meta(R, C))
    assert result.compulsory_bytes <= result.fused_bytes
    kept = [k for k in result.kernels if k.bytes >= 2 * RC * FP32]
    assert len(kept) == 1 and kept[0].bytes == 2 * RC * FP32


def test_cse_keeps_different_arguments_apart() -> None:
    # x * 2 and x * 3 read the same value with different scalars: two values, both returned
    kernels, _ = plan_of(lambda x: (x * 2, x * 3), meta(R, C))
    assert [kernel_elements(k) for k in kernels] == [RC + 2 * RC]


def test_dead_code_is_not_compiled() -> None:
    # FX DCE: nothing reads x.cos(), so no kernel loads x
    kernels, _ = plan_of(lambda x, y: (x.cos(), y * 2)[1], meta(R, C), meta(R, C))
    assert [(k.name, kernel_elements(k)) for k in kernels] == [("mul", 2 * RC)]


def test_a_mutation_no_one_sees_is_not_compiled() -> None:
    # functionalized, z[:, :1] = 1 on a fresh clone is a slice_scatter nothing reads: DCE
    # drops it, then the clone
    def dead(x):  # noqa: ANN001, ANN202
        z = x.clone()
        z[:, :1] = 1.0
        return x * 2

    kernels, _ = plan_of(dead, meta(R, C))
    assert [(k.name, kernel_elements(k)) for k in kernels] == [("mul", 2 * RC)]

    # the same write into an input is what the model leaves in it: R elements stored
    def into_input(x, y):  # noqa: ANN001, ANN202
        x[:, :1] = 1.0
        return y * 2

    kernels, _ = plan_of(into_input, meta(R, C), meta(R, C))
    assert [(k.name, kernel_elements(k)) for k in kernels] == [("fill_", R), ("mul", 2 * RC)]

    # read later, it stays: one kernel loads x and stores the row sums
    def read_later(x):  # noqa: ANN001, ANN202
        z = x.clone()
        z[:, :1] = 1.0
        return z.sum(1)

    kernels, _ = plan_of(read_later, meta(R, C))
    assert [(k.name, kernel_elements(k)) for k in kernels] == [("clone+fill_+sum", RC + R)]


def test_addmm_bias_moves_into_its_pointwise_users() -> None:
    # post_grad.unfuse_bias_add_to_pointwise: addmm whose users are all pointwise → mm, and
    # bias + mm inlined into the relu kernel, which now reads the bias
    k = 16
    kernels, _ = plan_of(F.linear, meta(R, k), meta(C, k), meta(C))
    assert [kern.name for kern in kernels] == ["addmm"]  # returned: no pointwise user
    kernels, _ = plan_of(lambda x, w, b: F.linear(x, w, b).relu(), meta(R, k), meta(C, k),
                         meta(C))
    assert [kern.name for kern in kernels] == ["mm", "add+relu"]
    assert [kernel_elements(kern) for kern in kernels] == [R * k + k * C + RC, RC + C + RC]


def test_half_precision_addmm_stays_whole() -> None:
    # config.keep_addmm_fused_for_half_dtypes (True): fp16/bf16 addmm keeps its bias
    k = 16
    half = torch.float16
    kernels, _ = plan_of(lambda x, w, b: F.linear(x, w, b).relu(), meta(R, k, dtype=half),
                         meta(C, k, dtype=half), meta(C, dtype=half))
    assert [kern.name for kern in kernels] == ["addmm", "relu"]


@pytest.mark.parametrize("rows", [64, 48])
def test_reductions_over_different_dims_are_separate_kernels(rows: int) -> None:
    # CUDA Inductor fuses two reductions only over the same (numel, rnumel) and the same
    # reduced dims (mix-order reduction needs ≥ 5 M elements): each kernel loads x
    kernels, _ = plan_of(lambda x: (x.sum(0), x.sum(1)), meta(rows, 64))
    assert sorted(kernel_elements(k) for k in kernels) == sorted([rows * 64 + 64,
                                                                  rows * 64 + rows])
    reason = "reductions over different dims" if rows == 64 else "numel/rnumel mismatch"
    assert reason in kernels[0].refusals[0].reason


def test_a_reduction_through_a_transposed_view_is_the_same_loop() -> None:
    # x.t().sum(1) folds the same storage dim as x.sum(0): the loads match, one kernel
    kernels, _ = plan_of(lambda x: (x.sum(0), x.t().sum(1) * 2), meta(64, 64))
    assert [kernel_elements(k) for k in kernels] == [64 * 64 + 2 * 64]


def test_reductions_over_the_same_dims_share_one_kernel() -> None:
    # horizontal fusion: same loop, shared x → one kernel loads x once, stores both results
    kernels, _ = plan_of(lambda x: (x.sum(1), x.amax(1)), meta(R, C))
    assert [kernel_elements(k) for k in kernels] == [RC + 2 * R]


def test_normalize_is_recomputed_by_a_reader_over_other_dims() -> None:
    # softmax = row statistics (the amax and sum buffers of its decomposition) + a pointwise
    # normalize; the column sum cannot share the row kernel, so it recomputes
    # exp(x - max) / sum from x and the statistics:
    # statistics kernel x in, 2R out; column kernel x and 2R in, C out
    kernels, _ = plan_of(lambda x: torch.softmax(x, -1).sum(0), meta(R, C))
    assert [kernel_elements(k) for k in kernels] == [RC + 2 * R, RC + 2 * R + C]


def test_batch_norm_in_training_is_statistics_then_a_pointwise_kernel() -> None:
    # the statistics fold the outer dims (N, H, W per channel): the normalize + relu epilogue
    # cannot run in the reduction's kernel, so it loads x again with the statistics
    n, c, hw = 2, 8, 16 * 16
    params = 4 * c  # weight, bias, running mean and variance
    model = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU())
    kernels, _ = plan_of(model, meta(n, c, 16, 16))
    stats, normalize = [k for k in kernels if "batch_norm" in k.name]
    # statistics: the saved mean and inverse standard deviation (c each), and the running mean
    # and variance it updates (c each)
    assert kernel_elements(stats) == n * c * hw + params + 2 * c + 2 * c
    assert kernel_elements(normalize) == n * c * hw + params + 2 * c + n * c * hw
    assert "reduction over outer dims" in " ".join(map(str, normalize.refusals))


def test_eager_batch_norm_in_training_is_two_kernels() -> None:
    # ATen's CUDA batch norm runs batch_norm_stats then batch_norm_elemt: eager loads x twice,
    # as the fused plan does
    n, c, hw = 2, 8, 16 * 16
    result = analyze(nn.BatchNorm2d(c), meta(n, c, 16, 16))
    stats, normalize = [k for k in result.eager_kernels if "batch_norm" in k.name]
    # statistics: x and four parameter vectors in; the saved mean and inverse standard
    # deviation out (batch_norm_stats' mean and invstd), which the normalize reads, and the
    # updated running mean and variance
    assert stats.bytes == (n * c * hw + 4 * c + 2 * c + 2 * c) * FP32
    assert normalize.bytes == (n * c * hw + 4 * c + 2 * c + n * c * hw) * FP32
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes


def test_batch_norm_in_eval_is_pointwise() -> None:
    # eval batch norm scales and shifts with the running statistics: one pointwise kernel
    # with the relu (x, four parameter vectors in; y out)
    n, c = 2, 8
    model = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU()).eval()
    kernels, _ = plan_of(model, meta(n, c, 16, 16))
    assert [kernel_elements(k) for k in kernels] == [2 * n * c * 256 + 4 * c]


def test_cheap_value_with_two_readers_is_recomputed_in_each() -> None:
    # y = x.cos() has two users but loads one buffer (≤ realize_reads_threshold): Inductor does
    # not store it; each reduction kernel recomputes cos from x
    n = 64
    kernels, _ = plan_of(lambda x: (x.cos().sum(0), x.cos().sum(1)), meta(n, n))
    assert [kernel_elements(k) for k in kernels] == [n * n + n, n * n + n]
    assert [op.name for op in kernels[1].recomputed] == ["aten.cos.default"]
    assert kernels[1].vector_flops == n * n  # cos FLOPs count once, in the first kernel


def test_inlined_value_read_through_a_slice_loads_only_that_slice() -> None:
    # cos is inlined into the add, which loads x.cos()[:, :4]: the kernel loads x[:, :4] only,
    # and computes cos on those R·4 elements
    kernels, _ = plan_of(lambda x: x.cos()[:, :4] + 1, meta(R, C))
    assert [kernel_elements(k) for k in kernels] == [R * 4 + R * 4]
    assert kernels[0].vector_flops == 2 * R * 4


def test_two_readers_of_different_slices_load_both() -> None:
    # each reader recomputes cos on its own half of x; the halves fuse (shared x): x in once,
    # both halves out — what any implementation must move
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.cos()
        return y[:, :4] + 1, y[:, 4:] * 2

    result = analyze(Fn(fn), meta(R, 8))
    assert result.fused_bytes == result.compulsory_bytes == (R * 8 + R * 8) * FP32


def test_fusion_that_would_create_a_cycle_is_refused() -> None:
    # y feeds the GEMM and the final add; fusing cos with sin+add would put the GEMM, which
    # depends on cos and feeds the add, inside a loop (will_fusion_create_cycle)
    n = 64

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x.cos()
        return y.sin() + y @ w

    kernels, _ = plan_of(fn, meta(n, n), meta(n, n))
    assert [k.name for k in kernels] == ["cos", "mm", "sin+add"]
    assert [kernel_elements(k) for k in kernels] == [2 * n * n, 3 * n * n, 3 * n * n]
    assert any("will create cycle" in r.reason for r in kernels[0].refusals)


def test_refusals_name_the_rule_that_kept_kernels_apart() -> None:
    kernels, _ = plan_of(lambda x, w: (x @ w).relu(), meta(R, C), meta(C, C))
    assert kernels[1].refusals == (Refusal(1, "mm", "extern kernel (library call) is never fused"),)
    assert str(kernels[1].refusals[0]) == (
        "apart from kernel 1 (mm): extern kernel (library call) is never fused"
    )


def test_refusals_reach_the_kernel_table() -> None:
    result = analyze(Fn(lambda x, w: (x @ w).relu()), meta(R, C), meta(C, C))
    assert [k["refusals"] for k in result.to_dict()["kernels"]] == [
        ["apart from kernel 2 (relu): extern kernel (library call) is never fused"],
        ["apart from kernel 1 (mm): extern kernel (library call) is never fused"],
    ]


def slice_update(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    t = y.sum(1)
    y[:, 0] += t
    return y


def test_kept_buffer_is_written_in_full() -> None:
    # issue 9: the last version of y covers one column, but y is returned whole: the plan must
    # store every element any version wrote there (mul, sum and the add fuse: x in, y out)
    result = analyze(Fn(slice_update), meta(R, C))
    assert result.fused_kernel_count == 1
    assert result.fused_bytes == (RC + RC) * FP32
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes



# --- More patterns (test/inductor/test_perf.py's count_numel figures where it has them) ----


def test_reduction_over_fewer_than_8_elements_is_unrolled() -> None:
    # ir.Reduction.create: a reduction over fewer than config.unroll_reductions_threshold (8)
    # elements per output is a Pointwise; the squared-distance sum over 4 is inlined into the
    # amax: one kernel loads a and b (40 each) and stores 10 (test_perf test_neighbor: 90)
    kernels, _ = plan_of(lambda a, b: ((a - b) ** 2).sum(dim=-1).amax(dim=1),
                         meta(10, 1, 4), meta(1, 10, 4))
    assert [kernel_elements(k) for k in kernels] == [10 * 4 + 10 * 4 + 10]
    # over 8 elements it is a reduction of its own loop (100 × 8), which the amax's (10 × 10)
    # does not match: its 10 × 10 result is stored and loaded again
    kernels, _ = plan_of(lambda a, b: ((a - b) ** 2).sum(dim=-1).amax(dim=1),
                         meta(10, 1, 8), meta(1, 10, 8))
    assert [kernel_elements(k) for k in kernels] == [80 + 80 + 100, 100 + 10]


def test_outer_dim_softmax_stores_its_statistics() -> None:
    # the row max and sum fold dim 0 (a column reduction): the normalize cannot be their
    # epilogue, so both statistics (amax, sum: C each) are stored and the normalize loads x again
    kernels, _ = plan_of(lambda x: torch.softmax(x, dim=0), meta(R, C))
    assert [kernel_elements(k) for k in kernels] == [RC + 2 * C, RC + 2 * C + RC]


def test_group_norm_normalize_is_a_kernel_of_its_own() -> None:
    # the statistics are per (n, group); the normalize loop runs over (n, c, h·w) and reads them
    # at n·G + c // (C/G), not a prefix of its loop, so Scheduler.fusable_read_and_write cannot
    # match that load with the statistics' store: the normalize loads x again with the mean and
    # rstd (N·G each) and the weight and bias (C each)
    n, c, groups, hw = 2, 16, 4, 8 * 8
    kernels, _ = plan_of(nn.GroupNorm(groups, c), meta(n, c, 8, 8))
    x, stats = n * c * hw, 2 * n * groups
    assert [kernel_elements(k) for k in kernels] == [x + 2 * c + stats, x + 2 * c + stats + x]
    # one group is a layer norm over (C, H, W): its statistics index a prefix, one kernel
    kernels, _ = plan_of(nn.GroupNorm(1, c), meta(n, c, 8, 8))
    assert [kernel_elements(k) for k in kernels] == [x + 2 * c + x]


def test_cat_of_softmaxes_with_a_pointwise_user_is_a_pointwise_cat() -> None:
    # lowering.cat: each input is a softmax's normalize, an unrealized pointwise value; the
    # cos is a pointwise use, so pointwise_cat (fuse_pointwise_use) even though the inputs read
    # reductions: each statistics kernel loads its input (100) and stores amax and sum (10
    # each); the cat+cos kernel loads both inputs and statistics and stores 200
    # (test_perf test_cat_pointwise: 680)
    kernels, _ = plan_of(
        lambda a, b: torch.cat([torch.softmax(a, dim=-1), torch.softmax(b, dim=-1)]).cos(),
        meta(10, 10), meta(10, 10),
    )
    assert [kernel_elements(k) for k in kernels] == [120, 120, 2 * 120 + 200]
    # returned as it is, the inputs read reductions (can_fuse_reduction): a ConcatKernel, and
    # each softmax kernel writes its slice (test_perf: 400)
    kernels, _ = plan_of(
        lambda a, b: torch.cat([torch.softmax(a, dim=-1), torch.softmax(b, dim=-1)]),
        meta(10, 10), meta(10, 10),
    )
    assert [kernel_elements(k) for k in kernels] == [200, 200]


def test_convolution_bias_is_a_pointwise_add() -> None:
    # kernel/conv.py convolution: on GPU the bias is peeled off ("cudnn is slower with it") into
    # an add, which a pointwise user absorbs (the relu kernel reads the 8 biases)…
    conv = nn.Conv2d(3, 8, 3)
    n, x, w, y = 2, 2 * 3 * 16 * 16, 8 * 3 * 3 * 3, 2 * 8 * 14 * 14
    kernels, _ = plan_of(lambda inp: conv(inp).relu(), meta(n, 3, 16, 16))
    assert [k.name for k in kernels] == ["Conv2d: convolution", "Conv2d: add+relu"]
    assert [kernel_elements(k) for k in kernels] == [x + w + y, y + 8 + y]
    # …and, returned, is a kernel of its own — as in eager, where cuDNN has no bias and ATen
    # runs output.add_(bias) after it (Convolution.cpp): both plans move the same bytes
    result = analyze(conv, meta(n, 3, 16, 16))
    assert [k.bytes // FP32 for k in result.kernels] == [x + w + y, y + 8 + y]
    assert [k.bytes // FP32 for k in result.eager_kernels] == [x + w + y, y + 8 + y]


def test_matmul_over_an_inner_dim_of_1_is_pointwise() -> None:
    # decomposition.py addmm/mm/bmm: on GPU a product over K = 1 is a broadcast multiply, a
    # pointwise value the relu (and the bias add) absorb: one kernel loads x (R), w (C) and
    # b (C) and stores the R·C result
    kernels, _ = plan_of(lambda x, w, b: F.linear(x, w, b).relu(), meta(R, 1), meta(C, 1),
                         meta(C))
    assert [kernel_elements(k) for k in kernels] == [R + C + C + RC]
    kernels, _ = plan_of(lambda a, b: torch.bmm(a, b) * 2, meta(4, R, 1), meta(4, 1, C))
    assert [kernel_elements(k) for k in kernels] == [4 * R + 4 * C + 4 * RC]
    # a single row times a single column (mm's M = 1) stays a cuBLAS call
    kernels, _ = plan_of(lambda a, b: (a @ b).relu(), meta(1, 1), meta(1, C))
    assert [k.name for k in kernels] == ["mm", "relu"]


def unfusible(x: torch.Tensor) -> torch.Tensor:
    """A library call (no rule, no lowering): Inductor falls back to eager for it."""
    return torch.ops.aten._lazy_clone(x)


@pytest.mark.parametrize("noop", [
    lambda a: a.clone(),
    lambda a: torch.cat([a]),
    lambda a: torch.pow(a, 1),
    lambda a: a.repeat(1),
    lambda a: F.pad(a, (0, 0)),
    lambda a: torch.ops.aten.slice_scatter(a, a),
    lambda a: torch.ops.prims.convert_element_type(a, torch.float32),
])
def test_noop_ops_are_removed(noop) -> None:  # noqa: ANN001
    # post_grad.remove_noop_ops: an op that returns its input unchanged (same size, strides and
    # dtype) is its input: the library call loads a itself (test_perf NoopTests: 20)
    kernels, _ = plan_of(lambda a: unfusible(noop(a)), meta(10))
    assert [kernel_elements(k) for k in kernels] == [20]


def test_noop_that_would_alias_an_input_with_an_output_stays() -> None:
    # "don't introduce new aliasing between inputs and outputs": a returned clone of an input is
    # a copy kernel (10 + 10), and the library call reads it (test_perf test_noop_clones: 40)
    kernels, _ = plan_of(lambda a: (lambda b: (b, unfusible(b)))(a.clone()), meta(10))
    assert [kernel_elements(k) for k in kernels] == [20, 20]
    # a clone that changes the strides is a real copy
    kernels, _ = plan_of(lambda a: unfusible(a.t().contiguous()), meta(10, 10))
    assert [kernel_elements(k) for k in kernels] == [200, 200]

PATTERNS = {
    "joined": (lambda a, b, c: (a.cos(), b.sin() + c.sin()), [(R, C)] * 3),
    "cat": (lambda x, y: torch.cat([x.cos(), y.sin()]).relu(), [(R, C)] * 2),
    "cat-gemm": (lambda x, w: torch.cat([x @ w, x @ w.t()], 1), [(R, C), (C, C)]),
    "epilogue": (lambda a, b: b.cos() + a.sum(dim=1), [(R, C), (R,)]),
    "keepdim": (lambda a, b: a.sum(1, keepdim=True) * b.cos(), [(R, C)] * 2),
    "cse": (lambda x: torch.mm(x.cos(), x.cos()), [(R, R)]),
    "axes": (lambda x: (x.sum(0), x.sum(1)), [(R, R)]),
    "slice-update": (slice_update, [(R, C)]),
    "linear-gelu": (lambda x, w, b: F.gelu(F.linear(x, w, b)), [(R, C), (C, C), (C,)]),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_fused_between_compulsory_and_unfused(name: str) -> None:
    fn, shapes = PATTERNS[name]
    result = analyze(Fn(fn), *(meta(*shape) for shape in shapes))
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes
    assert result.fused_kernel_count <= result.unfused_kernel_count
    # the plan is a schedule: every value a kernel loads was stored by an earlier kernel
    kernels, trace = plan_of(fn, *(meta(*shape) for shape in shapes))
    stored: set[int] = set(trace.input_value_ids)
    for kernel in kernels:
        assert {ref.value_id for ref in kernel.reads} <= stored
        stored |= {ref.value_id for ref in kernel.writes}


def test_a_value_returned_through_an_in_place_transpose_is_stored() -> None:
    # stft returns its FFT's output after transpose_ (zero-copy, yet a new version): the FFT
    # must still store it. x: (4, 4096) fp32, n_fft 64, hop 16, centre-padded by 32 a side to
    # 4160; 257 frames × 33 bins, complex64 (8 B) out
    padded = 4 * 4160 * 4
    out = 4 * 33 * 257 * 8
    result = analyze(Fn(lambda x: torch.stft(x, 64, return_complex=True)), meta(4, 4096))
    assert [k.name for k in result.kernels] == ["reflection_pad1d", "_fft_r2c"]
    assert [k.bytes for k in result.kernels] == [4 * 4096 * 4 + padded, padded + out]
    assert result.compulsory_bytes == 4 * 4096 * 4 + out  # read x, write the spectrum
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes
