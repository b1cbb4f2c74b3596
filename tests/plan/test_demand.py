"""The bound charges what the kept outputs need: closed forms for the cases of issue 9, each
derived in a comment, and properties searched over generated programs."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import Fn, meta
from torchroofline import analyze
from torchroofline.costs import _RULES
from torchroofline.plan.demand import DEMAND_RULES
from torchroofline.plan.demand.numbered import _numbers_region
from torchroofline.trace.regions import (
    MAX_BOXES,
    Region,
    _union_set,
    positions_to_set,
    range_intersection,
    set_intersection,
)
from torchroofline.trace.storages import (
    _strided_boxes,
)

FP32 = 4


def bound(body, *inputs, gpu: str = "h100-sxm"):  # noqa: ANN001, ANN201
    return analyze(Fn(body), inputs, gpu)


def test_sliced_matmul_charges_the_kept_columns() -> None:
    # (x @ W)[:, :10]: 256 rows × 10 columns × K=512 multiply-adds; reads x and W[:, :10]
    result = bound(lambda x, w: (x @ w)[:, :10], meta(256, 512), meta(512, 4096))
    assert result.flops == 2 * 256 * 10 * 512
    assert result.compulsory_bytes == (256 * 512 + 512 * 10 + 256 * 10) * FP32


def test_indexed_pointwise_reads_one_row() -> None:
    result = bound(lambda x: torch.relu(x)[0], meta(256, 1024))
    assert result.flops == 1024  # one max per kept element
    assert result.compulsory_bytes == 2 * 1024 * FP32


def test_dead_code_changes_nothing() -> None:
    live = bound(lambda x: x + 1, meta(512, 512))
    dead = bound(lambda x: ((x.exp() @ x).sum(), x + 1)[1], meta(512, 512))
    assert (dead.flops, dead.compulsory_bytes, dead.sol_s) == (
        live.flops, live.compulsory_bytes, live.sol_s
    )
    assert any("feed no kept value" in note for note in dead.notes)


def test_tril_of_a_product_charges_the_triangle_or_less() -> None:
    n = 256
    result = bound(lambda a, b: torch.tril(a @ b), meta(n, n), meta(n, n))
    triangle = n * (n + 1) // 2  # kept entries; each costs 2·K FLOPs
    assert result.flops <= 2 * n * triangle
    # row bands keep the columns all their rows keep: short by at most 1/(2·64) of the area
    assert result.flops >= 2 * n * triangle * (1 - 1 / 64)


def test_diag_matmul_is_a_row_scaling() -> None:
    # diag(a) @ B = a[:, None] * B: N² multiplies; reads a and B, writes N²
    n = 4096
    result = bound(lambda a, b: torch.diag(a) @ b, meta(n), meta(n, n))
    assert (result.tensor_flops, result.vector_flops) == (0, n * n)
    assert result.compulsory_bytes == (n + 2 * n * n) * FP32
    assert result.sol_ms < 0.05  # the GEMM figure would be 2.05 ms on an H100
    assert any("diagonal matmul" in note for note in result.notes)


def test_expanded_batch_is_one_gemm() -> None:
    # x.expand(64, M, K) @ W: one M×N×K product, written 64 times
    m, k, n = 128, 256, 64
    result = bound(lambda x, w: x.expand(64, m, k) @ w, meta(m, k), meta(k, n))
    assert result.tensor_flops == 2 * m * n * k
    assert result.compulsory_bytes == (m * k + k * n + 64 * m * n) * FP32


def test_softmax_over_a_size_one_dim_needs_nothing_upstream() -> None:
    result = bound(lambda x, w: torch.softmax((x @ w)[:, :1], dim=1), meta(64, 32), meta(32, 8))
    assert result.flops == 0
    assert result.compulsory_bytes == 64 * FP32  # the constant output is still written


@pytest.mark.parametrize("norm", [
    lambda y: torch.linalg.vector_norm(y, dim=1), lambda y: y.norm(dim=-1),
    lambda y: torch.linalg.vector_norm(y, ord=float("inf"), dim=1),
])
def test_a_norm_over_a_size_one_dim_is_an_abs(norm) -> None:  # noqa: ANN001
    # ‖y[i, :1]‖ = |y[i, 0]|: one op per row, over column 0 of x @ w (2·K per row), which it
    # reads with all of x; writes 64
    result = bound(lambda x, w: norm((x @ w)[:, :1]), meta(64, 32), meta(32, 8))
    assert result.flops == 2 * 64 * 32 + 64
    assert result.compulsory_bytes == (64 * 32 + 32 + 64) * FP32


def test_template_ops_read_nothing() -> None:
    result = bound(lambda x: torch.zeros_like(x) + 1, meta(1024, 1024))
    assert result.compulsory_bytes == 1024 * 1024 * FP32  # the write only


def test_padding_taps_cost_nothing() -> None:
    # a 3×3 conv with padding 1 on a 1×1 image: only the centre tap sees data
    result = bound(lambda x, w: F.conv2d(x, w, padding=1), meta(8, 64, 1, 1), meta(64, 64, 3, 3))
    assert result.tensor_flops == 2 * 8 * 64 * 64
    assert result.compulsory_bytes == (8 * 64 + 64 * 64 + 8 * 64) * FP32  # centre taps only


def test_strided_pool_reads_only_its_windows() -> None:
    # kernel 1, stride 2: every other row and column
    result = bound(lambda x: F.max_pool2d(x, 1, stride=2), meta(2, 4, 64, 64))
    assert result.compulsory_bytes == 2 * (2 * 4 * 32 * 32) * FP32


def test_negative_padding_is_a_crop() -> None:
    result = bound(lambda x: F.pad(x, (-8, -8, -8, -8)), meta(2, 4, 64, 64))
    assert result.compulsory_bytes == 2 * (2 * 4 * 48 * 48) * FP32


def test_bilinear_downsampling_reads_two_taps_per_output() -> None:
    # 64 → 16 per dim, align_corners=False: centre (o+½)·4−½ = 4o+1.5 → source 4o+1 and 4o+2
    result = bound(
        lambda x: F.interpolate(x, size=(16, 16), mode="bilinear"), meta(1, 2, 64, 64)
    )
    assert result.compulsory_bytes == (2 * 32 * 32 + 2 * 16 * 16) * FP32


def test_kv_cache_step_reads_the_old_prefix() -> None:
    # cache[:, :, t] = k; cache[:, :, :t+1].sum(): the sum needs the old cache[:, :, :t] and k;
    # the slot t is written; the untouched rest of the buffer stays where it is
    b, h, length, d, t = 8, 16, 1024, 64, 100

    def step(cache, k):  # noqa: ANN001, ANN202
        cache[:, :, t] = k
        return cache[:, :, : t + 1].sum()

    result = bound(step, meta(b, h, length, d), meta(b, h, d))
    reads = b * h * t * d + b * h * d
    writes = b * h * d + 1
    assert result.compulsory_bytes == (reads + writes) * FP32


def test_disjoint_views_of_one_input_are_united() -> None:
    result = bound(lambda x: x[:, :512] + x[:, 512:], meta(1024, 1024))
    assert result.compulsory_bytes == (1024 * 1024 + 1024 * 512) * FP32
    assert result.fused_bytes >= result.compulsory_bytes


def test_inputs_sharing_a_storage_are_read_once() -> None:
    x = meta(1024, 1024)
    result = bound(lambda a, b: a + b, x[:512], x[256:768])
    assert result.compulsory_bytes == (768 * 1024 + 512 * 1024) * FP32


def test_partial_overwrite_keeps_the_kept_buffer_whole() -> None:
    def body(x):  # noqa: ANN001, ANN202
        y = x * 2
        t = y.sum(1)
        y[:, 0] += t
        return y

    result = bound(body, meta(1024, 1024))
    assert result.compulsory_bytes == 2 * 1024 * 1024 * FP32
    assert result.fused_bytes >= result.compulsory_bytes
    assert result.sol_s <= result.fused_estimate_s


# --- Region arithmetic ---------------------------------------------------------------------


@given(
    st.integers(0, 40), st.integers(1, 40), st.integers(1, 7),
    st.integers(0, 40), st.integers(1, 40), st.integers(1, 7),
)
def test_range_intersection_is_exact(a, n, s, b, m, t) -> None:  # noqa: ANN001
    first, second = range(a, a + n * s, s), range(b, b + m * t, t)
    assert set(range_intersection(first, second)) == set(first) & set(second)


boxes = st.lists(
    st.tuples(st.integers(0, 6), st.integers(1, 6), st.integers(0, 6), st.integers(1, 6)),
    min_size=1,
    max_size=5,
)


@given(boxes)
def test_union_count_never_exceeds_the_truth(parts) -> None:  # noqa: ANN001
    region = Region.of(
        [((range(r, r + h),), (range(c, c + w),)) for r, h, c, w in parts]
    )
    truth = {(i, j) for r, h, c, w in parts for i in range(r, r + h) for j in range(c, c + w)}
    assert max(h * w for _, h, _, w in parts) <= region.count <= len(truth)


positions = st.lists(st.integers(0, 300), max_size=120)


@given(positions, st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), max_size=4))
def test_positions_become_maximal_runs(scattered, blocks) -> None:  # noqa: ANN001
    # scattered positions and whole blocks (a kept row of a causal mask): the runs hold exactly
    # the positions, in order, and no step-1 run ends where the next one starts (a block is one
    # run however long: its end is found by bisection)
    picked = set(scattered) | {p for start, length in blocks for p in range(start, start + length)}
    runs = positions_to_set(picked)
    assert [p for r in runs for p in r] == sorted(picked)
    for before, after in itertools.pairwise(runs):
        assert not (before.step == after.step == 1 and before[-1] + 1 == after.start)


@given(positions, positions, st.integers(1, 5))
def test_sets_of_many_ranges_meet_and_unite_exactly(first, second, step) -> None:  # noqa: ANN001
    # rows picked by index: many short ranges (past 64 pairs an intersection bisects), and a
    # strided range among them
    strided = range(1, 250, step)
    a = positions_to_set(first)
    b = (*positions_to_set(p for p in second if p not in strided), strided)
    both = set(first) & ({*second} | set(strided))
    assert [i for r in a for i in r] == sorted(set(first))
    assert {i for r in set_intersection(a, b) for i in r} == both
    assert {i for r in set_intersection(b, a) for i in r} == both
    union = _union_set(a, b)
    if union is not None:  # None: no exact form, the boxes stay apart
        assert sorted(i for r in union for i in r) == sorted(set(first) | {*second, *strided})


@given(st.lists(st.integers(0, 4 * 5 * 6 - 1), max_size=120), st.sets(st.integers(0, 19)))
def test_picked_numbers_are_placed_exactly_or_counted(numbers, whole) -> None:  # noqa: ANN001
    # scattered elements and whole lines (rows picked by index) of a (4, 5, 6) tensor: boxes
    # holding exactly them, or a count of them
    picked = sorted(set(numbers) | {line * 6 + c for line in whole for c in range(6)})
    region = _numbers_region(torch.tensor(picked, dtype=torch.int64), (4, 5, 6))
    placed = {
        (i * 5 + j) * 6 + k
        for box in region.boxes
        for i in (p for r in box[0] for p in r)
        for j in (p for r in box[1] for p in r)
        for k in (p for r in box[2] for p in r)
    }
    assert region.count == len(picked)
    assert placed == (set(picked) if region.boxes else set())


# --- Generated programs ----------------------------------------------------------------------

ROWS, COLS = 16, 8


def _binary(choice: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b, a * b, torch.maximum(a, b), a - b)[choice % 4]


def _apply(kind: int, choice: int, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor,
           k: torch.Tensor) -> torch.Tensor:
    """One op of a generated program; every value keeps shape (ROWS, COLS)."""
    cut = 1 + choice % (COLS - 1)
    if kind == 0:
        return (torch.relu(a), a.exp(), a * 2, torch.tanh(a))[choice % 4]
    if kind == 1:
        return _binary(choice, a, b)
    if kind == 2:
        return a @ w
    if kind == 3:
        return a.sum(1, keepdim=True) * b
    if kind == 4:
        return torch.softmax(a, dim=choice % 2)
    if kind == 5:  # split and put back swapped
        left, right = a.split([cut, COLS - cut], dim=1)
        return torch.cat([right, left], 1)
    if kind == 6:  # a partial in-place overwrite of a fresh copy
        y = a.clone()
        y[:, :cut] = b[:, :cut]
        return y
    if kind == 7:
        return F.conv2d(a[None, None], k, padding=1)[0, 0]
    if kind == 8:  # a strided half, zero-padded back
        return F.pad(a[:, ::2], (0, COLS - len(range(0, COLS, 2))))
    return torch.tril(a, diagonal=choice % 3 - 1)


@st.composite
def programs(draw):  # noqa: ANN001, ANN201
    """A random DAG: each step applies an op to earlier values; then the values it returns."""
    steps = []
    for index in range(draw(st.integers(1, 7))):
        kind = draw(st.integers(0, 9))
        first = draw(st.integers(0, index))
        second = draw(st.integers(0, index))
        steps.append((kind, draw(st.integers(0, 7)), first, second))
    returned = draw(st.lists(st.integers(1, len(steps)), min_size=1, max_size=3, unique=True))
    return steps, sorted(returned)


def _run(steps, x, w, k):  # noqa: ANN001, ANN202
    values = [x]
    for kind, choice, first, second in steps:
        values.append(_apply(kind, choice, values[first], values[second], w, k))
    return values


@settings(max_examples=120, deadline=None)
@given(programs())
# a returned cat of x's swapped halves (a ConcatKernel: the clone also reads x) whose column
# a dead slice-assign reads: that read loaded both slices whole, fused bytes above unfused
@example(([(2, 0, 0, 0), (5, 0, 0, 0), (6, 0, 0, 2)], [1, 2]))
# a softmax of such a cat: its statistics read the first slice only, so they looked like an
# unrolled 7-element row reduction (a pointwise node) that could not fuse with the normalize
@example(([(5, 7, 0, 0), (4, 1, 1, 1), (6, 1, 1, 0)], [1, 2, 3]))
# a cat of a ConcatKernel output: its producer was taken to write the slice, but nothing
# does (a ConcatKernel's buffer has a fixed layout); the returned cat was never written
@example(([(6, 2, 0, 0), (5, 0, 0, 0), (1, 1, 1, 0), (5, 7, 2, 2), (6, 7, 0, 2), (3, 6, 3, 4)],
          [4, 5]))
def test_generated_programs_keep_the_invariants(program) -> None:  # noqa: ANN001
    steps, returned = program
    inputs = (meta(ROWS, COLS), meta(COLS, COLS), meta(1, 1, 3, 3))

    def kept(x, w, k):  # noqa: ANN001, ANN202
        values = _run(steps, x, w, k)
        return tuple(values[i] for i in returned)

    def fewer(x, w, k):  # noqa: ANN001, ANN202
        return kept(x, w, k)[:1]

    def with_dead(x, w, k):  # noqa: ANN001, ANN202
        (x @ w).exp().sum()
        return kept(x, w, k)

    full = analyze(Fn(kept), inputs)
    assert full.compulsory_bytes <= full.fused_bytes <= full.unfused_bytes
    assert full.sol_s <= min(full.fused_estimate_s, full.eager_estimate_s)
    # a program that returns a subset of the outputs is never bounded higher
    subset = analyze(Fn(fewer), inputs)
    assert subset.sol_s <= full.sol_s * (1 + 1e-9)
    assert subset.flops <= full.flops
    assert subset.compulsory_bytes <= full.compulsory_bytes
    # dead code changes nothing
    dead = analyze(Fn(with_dead), inputs)
    assert (dead.flops, dead.compulsory_bytes) == (full.flops, full.compulsory_bytes)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 64))
def test_equivalent_rewrites_never_raise_the_bound(m, k, n) -> None:  # noqa: ANN001
    # diag(a) @ b and a[:, None] * b compute the same function
    diagonal = bound(lambda a, b: torch.diag(a) @ b, meta(m), meta(m, n))
    scaling = bound(lambda a, b: a[:, None] * b, meta(m), meta(m, n))
    assert diagonal.sol_s <= scaling.sol_s * (1 + 1e-9)
    # x[:, :k] @ w[:k] is at most what (x @ w) restricted to... the same product costs
    sliced = bound(lambda x, w: (x @ w)[:, :n], meta(m, k), meta(k, 64))
    direct = bound(lambda x, w: x @ w[:, :n], meta(m, k), meta(k, 64))
    assert sliced.sol_s <= direct.sol_s * (1 + 1e-9)


def test_in_place_masked_fill_of_a_kept_input_reads_the_mask_only() -> None:
    # x.masked_fill_(m, 0) returned: unchanged elements are already in x; which change is data
    def fill(x, m):  # noqa: ANN001, ANN202
        x.masked_fill_(m, 0.0)
        return x

    mask = meta(1024, 1024, dtype=torch.bool)
    result = bound(fill, meta(1024, 1024), mask)
    assert result.compulsory_bytes == 1024 * 1024  # one byte per mask element

    def fill_then_sum(x, m):  # noqa: ANN001, ANN202
        x.masked_fill_(m, 0.0)
        return x.sum()

    # a later reader needs the unchanged elements, but which those are is data (an all-true
    # mask leaves none): the mask is read, x is charged nothing
    result = bound(fill_then_sum, meta(1024, 1024), mask)
    assert result.compulsory_bytes == 1024 * 1024 + FP32


def test_selections_charge_the_mask_not_the_picked_tensors() -> None:
    # where(mask, x @ w, 0): an all-false mask needs no product at all
    mask = meta(256, 256, dtype=torch.bool)
    result = bound(lambda m, x, w: torch.where(m, x @ w, 0.0), mask, meta(256, 64), meta(64, 256))
    assert result.tensor_flops == 0
    assert result.compulsory_bytes == 256 * 256 * (1 + FP32)


def test_im2col_with_a_long_stride_reads_only_its_windows() -> None:
    # kernel 2, stride 4 on 64: 16 windows × 2 positions = 32 of 64 per dim
    result = bound(lambda x: F.unfold(x, 2, stride=4), meta(1, 3, 64, 64))
    assert result.compulsory_bytes == (3 * 32 * 32 + 3 * 4 * 16 * 16) * FP32


def test_identity_matmul_is_a_copy() -> None:
    result = bound(lambda b: torch.eye(512, device=b.device) @ b, meta(512, 512))
    assert result.flops == 0
    assert result.compulsory_bytes == 2 * 512 * 512 * FP32


def test_batch_norm_training_writes_its_running_statistics() -> None:
    bn = torch.nn.BatchNorm2d(16, device="meta")
    result = analyze(bn, (meta(8, 16, 32, 32),))
    activations = 2 * 8 * 16 * 32 * 32 * FP32  # read x, write y
    running = 2 * 16 * FP32 + 8  # running mean and var, num_batches_tracked (int64)
    assert result.compulsory_bytes >= activations + running


def test_strided_rows_of_a_product() -> None:
    # (x @ W)[::2]: every other row of x, all of W, half the product
    result = bound(lambda x, w: (x @ w)[::2], meta(256, 512), meta(512, 1024))
    assert result.tensor_flops == 2 * 128 * 1024 * 512
    assert result.compulsory_bytes == (128 * 512 + 512 * 1024 + 128 * 1024) * FP32


def test_reduction_of_a_product_reads_each_operand_once() -> None:
    # (x @ W).sum(1): the whole product is needed, each operand read once
    result = bound(lambda x, w: (x @ w).sum(1), meta(256, 512), meta(512, 4096))
    assert result.compulsory_bytes == (256 * 512 + 512 * 4096 + 256) * FP32


def test_a_scan_needs_only_its_prefix() -> None:
    result = bound(lambda x: x.cumsum(1)[:, :10], meta(64, 4096))
    assert result.compulsory_bytes == 2 * 64 * 10 * FP32


def test_causal_attention_rows_read_the_keys_they_attend_to() -> None:
    # the first 16 query rows of a causal (top-left) attention see keys 0..15; row 0 sees key
    # 0 alone and is v[0] (a softmax of one score is 1), so q[0] is not read nor its pair
    # computed: q rows 1..15, k and v rows 0..15, the 16 output rows
    b, h, length, e = 1, 2, 1024, 64

    def first_rows(q, k, v):  # noqa: ANN001, ANN202
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)[:, :, :16]

    result = bound(first_rows, meta(b, h, length, e), meta(b, h, length, e), meta(b, h, length, e))
    assert result.compulsory_bytes == (15 + 16 + 16 + 16) * (b * h * e) * FP32
    pairs = 16 * 17 // 2 - 1
    assert result.tensor_flops == 2 * b * h * pairs * (e + e)


def test_conv_over_an_explicit_zero_pad_is_priced_as_implicit_padding() -> None:
    # F.pad(x, 1) then a 3×3 conv on a 1×1 image: only the centre tap sees data
    def padded(x, w):  # noqa: ANN001, ANN202
        return F.conv2d(F.pad(x, (1, 1, 1, 1)), w)

    result = bound(padded, meta(8, 64, 1, 1), meta(64, 64, 3, 3))
    assert result.tensor_flops == 2 * 8 * 64 * 64
    assert any("explicit padding" in note for note in result.notes)


def test_reduction_over_a_broadcast_dim_is_one_op_per_output() -> None:
    result = bound(lambda x: x.expand(4096, 4096).sum(0), meta(4096))
    assert result.vector_flops == 4096
    assert result.compulsory_bytes == 2 * 4096 * FP32


def test_transposed_conv_taps_in_the_cropped_border_cost_nothing() -> None:
    # 5×5, padding 2 on a 1×1 input: output 1×1, only the centre tap lands on it
    conv = torch.nn.ConvTranspose2d(4, 4, 5, padding=2, bias=False, device="meta")
    result = analyze(conv, (meta(1, 4, 1, 1),))
    assert result.tensor_flops == 2 * 4 * 4


def test_offset_diagonal_matmul_is_a_shifted_row_scaling() -> None:
    # diag(v, 1) @ B with v of n − 1: out[i] = v[i]·B[i + 1] for i < n − 1, the last row is 0;
    # reads v and rows 1.. of B, one multiply per nonzero output, writes n² (no GEMM)
    n = 2048
    result = bound(lambda v, b: torch.diag(v, 1) @ b, meta(n - 1), meta(n, n))
    assert (result.tensor_flops, result.vector_flops) == (0, (n - 1) * n)
    assert result.compulsory_bytes == ((n - 1) + (n - 1) * n + n * n) * FP32
    assert any("diagonal matmul" in note for note in result.notes)


@pytest.mark.parametrize("n", [8, 64, 512])
def test_a_diagonal_view_of_a_product_needs_its_rows_and_columns(n: int) -> None:
    # torch.diagonal(a @ b, 1) keeps out[i, i + 1], i < n − 1: row i of a and column i + 1 of b,
    # 2n FLOPs each. The view (stride n + 1) is no box of the product; up to MAX_BOXES its
    # elements are placed one by one, past it (n = 512) as a spread: rows 0..n − 2 and columns
    # 1..n − 1, each some kept element's. Either way (n − 1) · n elements of each operand,
    # plus the n − 1 outputs
    assert n - 1 > MAX_BOXES or n < MAX_BOXES  # both sides of the placing limit are tested
    result = bound(lambda a, b: torch.diagonal(a @ b, 1), meta(n, n), meta(n, n))
    assert result.tensor_flops == 2 * n * (n - 1)
    assert result.compulsory_bytes == (2 * (n - 1) * n + (n - 1)) * FP32


def test_sliced_diagonal_matmul_scales_the_rows_it_keeps() -> None:
    # diag(a)[:, :k] @ B[:k]: rows i < k are a[i]·B[i], rows ≥ k are 0 (their column was cut)
    n, k, m = 4096, 512, 4096
    result = bound(lambda a, b: torch.diag(a)[:, :k] @ b[:k], meta(n), meta(n, m))
    assert (result.tensor_flops, result.vector_flops) == (0, k * m)
    assert result.compulsory_bytes == (k + k * m + n * m) * FP32


def test_transposed_diagonal_on_the_right() -> None:
    # B @ diag(v, -2).T = B @ diag(v, 2): out[:, j] = B[:, j − 2]·v[j − 2] for j ≥ 2
    n, rows = 64, 32
    result = bound(lambda v, b: b @ torch.diag(v, -2).T, meta(n - 2), meta(rows, n))
    assert result.vector_flops == rows * (n - 2)
    assert result.compulsory_bytes == ((n - 2) + rows * (n - 2) + rows * n) * FP32


def test_block_diagonal_matmul_skips_the_zero_blocks() -> None:
    # block_diag(A1, A2) @ x = [A1 @ x[:p]; A2 @ x[p:]]: 2·(p² + q²)·r FLOPs, not 2·(p + q)²·r
    p, q, r = 32, 48, 16
    result = bound(
        lambda a, b, x: torch.block_diag(a, b) @ x, meta(p, p), meta(q, q), meta(p + q, r)
    )
    assert result.tensor_flops == 2 * (p * p + q * q) * r
    assert result.compulsory_bytes == (p * p + q * q + 2 * (p + q) * r) * FP32
    assert any("block-diagonal matmul" in note for note in result.notes)


def test_block_diagonal_slice_reads_the_blocks_it_covers() -> None:
    # block_diag(a (3×2), b (2×4)) is 5×6, a at rows 0..2 × columns 0..1, b at rows 3..4 ×
    # columns 2..5: its [2:4, 1:3] holds a[2, 1] and b[0, 0], the other two are zeros
    result = bound(lambda a, b: torch.block_diag(a, b)[2:4, 1:3] * 1, meta(3, 2), meta(2, 4))
    assert result.compulsory_bytes == (2 + 4) * FP32


def test_partial_diagonal_builders_read_the_entries_they_place() -> None:
    # diag_embed(d)[..., 0]: column 0 of each matrix holds d[:, 0] only
    b, n = 8, 256
    result = bound(lambda d: torch.diag_embed(d)[..., 0], meta(b, n))
    assert result.compulsory_bytes == (b + b * n) * FP32
    # diag(v, 1)[:1]: row 0 of the (n + 1)² matrix holds v[0] at column 1
    result = bound(lambda v: torch.diag(v, 1)[:1] * 1, meta(n))
    assert result.compulsory_bytes == (1 + (n + 1)) * FP32


def test_embedding_renorm_reads_the_indices_and_one_row() -> None:
    # max_norm renormalises, in place, the rows the indices pick whose norm is too large —
    # data: none may change. The lookup then needs the indices (8 × int64) and one row (16);
    # the output is 8 × 16
    embedding = torch.nn.Embedding(100, 16, max_norm=1.0, device="meta")
    result = analyze(embedding, (meta(8, dtype=torch.long),))
    assert result.compulsory_bytes == 8 * 8 + (16 + 8 * 16) * FP32


def test_a_host_scalar_is_a_kernel_argument() -> None:
    # x.index_put((idx,), torch.tensor(0.0)): the 0-d CPU value is passed by value, not read
    # from GPU memory; x is needed where the 16 indexed rows do not land, the output written
    n, d, k = 1024, 64, 16
    result = bound(
        lambda x, i: x.index_put((i,), torch.tensor(0.0)), meta(n, d), meta(k, dtype=torch.long)
    )
    assert result.compulsory_bytes == k * 8 + ((n - k) * d + n * d) * FP32


def test_outputs_sized_by_data_may_be_empty() -> None:
    # nonzero and boolean-mask indexing size their output by values (the trace drew random
    # ones): any input may leave it empty, but finding out reads every element of x
    result = bound(lambda x: torch.nonzero(x), meta(64, 64))
    assert result.compulsory_bytes == 64 * 64 * FP32
    result = bound(lambda x: x[x > 0], meta(16, 16))
    assert result.compulsory_bytes == 16 * 16 * FP32
    assert result.tensor_flops == 0 and result.vector_flops == 16 * 16  # the comparison only
    # what is computed from it may be empty too, and need nothing else (y, W); a sum of it is
    # one element however many it has; a part of nonzero's rows may come from its first element
    result = bound(lambda x, y: torch.cat([x[x > 0] + y[:1], y]), meta(16, 16), meta(100))
    assert result.compulsory_bytes == 16 * 16 * FP32
    result = bound(lambda x, w: x[x > 0][:, None] @ w, meta(16, 16), meta(1, 64))
    assert result.compulsory_bytes == 16 * 16 * FP32 and result.tensor_flops == 0
    result = bound(lambda x: x[x > 0].sum(), meta(16, 16))
    assert result.compulsory_bytes == (16 * 16 + 1) * FP32
    result = bound(lambda x: torch.nonzero(x)[:5], meta(64, 64))
    assert result.compulsory_bytes == 1 * FP32
    # a mask input (filled with zeros by the fallback) picks nothing, yet showing that reads it
    result = bound(lambda x, m: x[m], meta(16, 16), meta(16, 16, dtype=torch.bool))
    assert result.compulsory_bytes == 16 * 16  # one byte per bool


def test_an_in_place_metadata_op_passes_its_demand_on() -> None:
    # transpose_ makes a new version of the same elements: x * 2 is still needed in full
    result = bound(lambda x: (x * 2).transpose_(0, 1), meta(64, 32))
    assert result.vector_flops == 64 * 32
    assert result.compulsory_bytes == 2 * 64 * 32 * FP32


def test_a_downsampled_read_and_a_slice_of_one_input_are_united_by_what_they_touch() -> None:
    # nearest ×0.35 on 10×10 keeps source rows/columns 0, 2, 5: its [1, 1] is x[2, 2], which the
    # add also reads — one element read, one written. Fused, the kernel reads 9 + 1 elements of
    # x at most, no more than the two eager kernels
    def body(x):  # noqa: ANN001, ANN202
        return F.interpolate(x, scale_factor=0.35)[..., 1:2, 1:2] + x[..., 2:3, 2:3]

    result = bound(body, meta(1, 1, 10, 10))
    assert result.compulsory_bytes == 2 * FP32
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes


def test_convolution_of_a_broadcast_batch_is_one_convolution() -> None:
    # conv(x.expand(64, …)): 64 equal images, one 3×3 conv (pad 1) of 64 → 64 channels on
    # 32×32, written 64 times. In-bounds taps per dim on 32 with pad 1: 3·32 − 2 = 94
    def body(x, w):  # noqa: ANN001, ANN202
        return F.conv2d(x.expand(64, 64, 32, 32), w, padding=1)

    result = bound(body, meta(1, 64, 32, 32), meta(64, 64, 3, 3))
    assert result.tensor_flops == 2 * 64 * 64 * 94 * 94
    assert result.compulsory_bytes == (64 * 1024 + 64 * 64 * 9 + 64 * 64 * 1024) * FP32


def test_flip_roll_and_repeat_read_the_positions_they_move() -> None:
    # flip(x @ W, [0])[:k] is rows n − k.. of the product: k rows of x, all of W (K = 4)
    n, k, m = 4096, 1024, 4096
    result = bound(lambda x, w: torch.flip(x @ w, [0])[:k], meta(n, 4), meta(4, m))
    assert result.tensor_flops == 2 * 4 * k * m
    assert result.compulsory_bytes == (k * 4 + 4 * m + k * m) * FP32
    # roll(x, 1, 0)[1:]: output rows 1.. are input rows 0..n − 2
    result = bound(lambda x: torch.roll(x, 1, 0)[1:], meta(64, 512))
    assert result.compulsory_bytes == 2 * 63 * 512 * FP32
    # x.repeat(4, 1)[:10]: rows 0..9 of the first copy; (3, 6).repeat(1, 3)[:, ::4] reads
    # columns 0, 4, 8 → 2, 12 → 0, 16 → 4 of 6: {0, 2, 4}, writes 5 columns
    result = bound(lambda x: x.repeat(4, 1)[:10], meta(256, 512))
    assert result.compulsory_bytes == 2 * 10 * 512 * FP32
    result = bound(lambda x: x.repeat(1, 3)[:, ::4] * 1, meta(3, 6))
    assert result.compulsory_bytes == (3 * 3 + 3 * 5) * FP32


def test_stack_and_addbmm_read_what_their_kept_slices_need() -> None:
    # stack([a, b])[1] is b
    result = bound(lambda a, b: torch.stack([a, b])[1] * 1, meta(100, 64), meta(100, 64))
    assert result.compulsory_bytes == 2 * 100 * 64 * FP32
    # addbmm(c, A, B)[:1]: c[0], row 0 of every A[b] (16 × 32), all of every B[b]
    result = bound(
        lambda c, a, b: torch.addbmm(c, a, b)[:1], meta(64, 64), meta(16, 64, 32), meta(16, 32, 64)
    )
    assert result.tensor_flops == 2 * 16 * 32 * 64
    assert result.compulsory_bytes == (64 + 16 * 32 + 16 * 32 * 64 + 64) * FP32


def test_a_strided_window_reads_every_position_its_taps_cover() -> None:
    # 3×3, stride 2 on 7×7: outputs 0..2 read rows 0..2, 2..4, 4..6 — all 7 (taps 0 and 2 read
    # the even rows, tap 1 the odd ones); output channel 1 needs weight[1] only
    result = bound(lambda x, w: F.conv2d(x, w, stride=2)[:, 1], meta(2, 3, 7, 7), meta(4, 3, 3, 3))
    assert result.compulsory_bytes == (2 * 3 * 49 + 27 + 2 * 9) * FP32


def test_matrix_vector_rows() -> None:
    # (A @ v)[:10]: rows 0..9 of A, all of v, 2·K FLOPs per kept element
    n = 4096
    result = bound(lambda a, v: (a @ v)[:10], meta(n, n), meta(n))
    assert result.tensor_flops == 2 * n * 10
    assert result.compulsory_bytes == (10 * n + n + 10) * FP32


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    start=st.integers(0, 60),
    step=st.integers(1, 9),
    length=st.integers(0, 30),
)
def test_a_strided_walk_over_merged_dims_is_placed_exactly(sizes, start, step, length) -> None:
    total = math.prod(sizes)
    walk = range(start, min(start + step * length, total), step)
    boxes = _strided_boxes(walk, sizes)
    if boxes is None:
        return  # too many rows to place: counted instead (see to_base)
    strides = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
    placed = [
        sum(i * stride for i, stride in zip(position, strides, strict=True))
        for box in boxes
        for position in itertools.product(*(list(itertools.chain(*dim)) for dim in box))
    ]
    assert sorted(placed) == list(walk)  # every position once, nothing else


def test_strided_slices_of_a_reshaped_gemm_output_need_all_of_it() -> None:
    # Swin's patch merging: y = Linear(sin(x)) viewed (B, H, W, C), its four 2×2-strided
    # slices concatenated: every element of y is used, so sin and the GEMM are needed in full
    # and the bound reads x and w and writes the output (each B·H·W·C or C·C fp32 elements)
    b, h, c = 2, 4, 8

    class PatchMerging(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(c, c, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.linear(torch.sin(x))
            return torch.cat([y[:, i::2, j::2] for j in (0, 1) for i in (0, 1)], -1)

    result = analyze(PatchMerging(), (meta(b, h, h, c),))
    rows = b * h * h
    assert result.flops == rows * c + 2 * rows * c * c  # sin, then the GEMM
    assert result.compulsory_bytes == (rows * c + c * c + rows * c) * 4


def test_a_store_through_a_skipped_dim_leaves_the_rest_of_the_destination() -> None:
    # y = x·2; y[:, idx] = 1 with x (4, 8), idx 2 int64 entries: the store covers 4·2 = 8
    # elements, so the bound needs the other 24 of x (and 24 multiplies), the indices
    # (2 × 8 B) and writes all 32 of y: (24 + 32)·4 + 16 = 240 B
    def fn(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y[:, idx] = 1.0
        return y

    index = torch.zeros(2, dtype=torch.int64, device="meta")
    result = analyze(Fn(fn), (meta(4, 8), index))
    assert result.compulsory_bytes == (24 + 32) * 4 + 2 * 8
    assert result.flops == 24


def test_a_scalar_index_fill_needs_every_index() -> None:
    # x.index_fill(1, idx, 1.0), x (4, 8), idx 2 int64 entries (what torch ≥ 2.14 traces for
    # y[:, idx] = 1.0): any entry may name a column, so both are read (2 × 8 B); the other
    # 4·6 = 24 elements of x are read and all 32 written: (24 + 32)·4 + 16 = 240 B
    index = torch.zeros(2, dtype=torch.int64, device="meta")
    result = analyze(Fn(lambda x, idx: x.index_fill(1, idx, 1.0)), (meta(4, 8), index))
    assert result.compulsory_bytes == (24 + 32) * 4 + 2 * 8


@pytest.mark.parametrize("join", [torch.stack, torch.cat])
def test_outputs_with_no_position_are_charged_only_to_parts_they_must_read(join) -> None:
    # every 5th element from 24 on of join([x@w, y]) (24 + 24 elements) lies in y: the matmul
    # is not needed at all, and at most the 5 read elements of y plus the 5 outputs (40 B)
    def fn(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return join([x @ w, y]).reshape(-1)[24::5].clone()

    result = analyze(Fn(fn), (meta(6, 3), meta(3, 4), meta(6, 4)))
    assert result.flops == 0
    assert result.compulsory_bytes <= (5 + 5) * 4


# --- Issue 16: outputs that share work never collapse ------------------------------------------


class _With(torch.nn.Module):
    """A module whose forward is ``fn(self, *args)``, holding ``modules`` as submodules."""

    def __init__(self, fn, **modules: torch.nn.Module) -> None:  # noqa: ANN001
        super().__init__()
        self.fn = fn
        for name, module in modules.items():
            setattr(self, name, module)

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.fn(self, *args)


def _oracle_bytes(model: torch.nn.Module, *inputs: torch.Tensor) -> int:
    """What any implementation provably moves (tests/oracle.py), fp32."""
    from oracle import oracle

    return oracle(model, inputs).bytes(FP32)


def test_cross_entropy_charges_each_rows_log_sum_exp() -> None:
    # KernelBench level 1 #95 at issue 16's size: cross_entropy(p, t), p (32768, 4096). Each
    # loss term needs its row's log-sum-exp over every logit: max, subtract, exp and sum, 4
    # FLOPs per logit; then one subtract per picked log-probability and one negate-and-add
    # per target (nll): 4·N·C + 2·N. Was 1/C of the row's statistics (0.2 MFLOPs).
    n, c = 32768, 4096
    target = torch.zeros(n, dtype=torch.int64, device="meta")
    result = bound(lambda p, t: F.cross_entropy(p, t), meta(n, c), target)
    assert result.vector_flops == 4 * n * c + 2 * n


def test_one_softmax_element_costs_its_rows_statistics() -> None:
    # softmax(x, 1)[:, 0], x (1024, 4096): every row's max, exp and sum (4 FLOPs per element of
    # x), then one divide per kept element; reads all of x, writes 1024
    rows, cols = 1024, 4096
    result = bound(lambda x: torch.softmax(x, 1)[:, 0], meta(rows, cols))
    assert result.flops == 4 * rows * cols + rows
    assert result.compulsory_bytes == (rows * cols + rows) * FP32


def _group_norm_of_conv(x_shape: tuple[int, ...]) -> torch.nn.Module:
    conv = torch.nn.Conv2d(x_shape[1], 32, 3, padding=1)
    return _With(lambda s, x: s.norm(s.conv(x))[:, :, 0], conv=conv,
                 norm=torch.nn.GroupNorm(8, 32))


def test_group_norm_needs_every_conv_output_of_its_groups() -> None:
    # GroupNorm(8, 32)(conv(x))[:, :, 0], x (8, 16, 32, 32), conv 16→32, 3×3, padding 1: every
    # channel is kept, so every group, so every conv output: per spatial dim 32·3 − 2 = 94
    # in-bounds (output, tap) pairs, 2·16 FLOPs each per (image, out channel): 2·16·8·32·94²;
    # the group statistics 4 FLOPs per conv output (8·32·32·32), normalise and affine 4 per
    # kept element (8·32·32). Was 0.4 % of the convolution.
    n, c, h = 8, 16, 32
    result = analyze(_group_norm_of_conv((n, c, h, h)), (meta(n, c, h, h),))
    conv = 2 * c * n * 32 * 94 * 94
    assert result.tensor_flops == conv
    assert result.vector_flops == 4 * n * 32 * h * h + 4 * n * 32 * h


def test_group_norm_of_conv_charges_what_the_oracle_proves() -> None:
    torch.manual_seed(0)
    model, x = _group_norm_of_conv((2, 4, 6, 6)), torch.randn(2, 4, 6, 6)
    assert analyze(model, (x,)).compulsory_bytes >= 0.95 * _oracle_bytes(model, x)


def _attention_block(embed: int, need_weights: bool) -> torch.nn.Module:
    attention = torch.nn.MultiheadAttention(embed, 8, batch_first=True)
    return _With(
        lambda s, x: s.norm(x + s.attention(x, x, x, need_weights=need_weights)[0])[:, 0],
        attention=attention, norm=torch.nn.LayerNorm(embed),
    )


@pytest.mark.parametrize("need_weights", [False, True])
def test_one_query_row_needs_every_key_and_value(need_weights: bool) -> None:
    # LayerNorm(x + MHA(x))[:, 0], x (8, 197, 256), 8 heads: query row 0 of each sequence
    # attends to every position, so the K and V projections of all 8·197 positions are
    # needed, 2·(2·8·197·256·256) = 413 MFLOPs, and every element of x (1.6 MB); its own Q
    # projection, scores, output projection add 2·8·256·256 each at most. Was 2.68 MFLOPs.
    b, length, embed = 8, 197, 256
    result = analyze(_attention_block(embed, need_weights), (meta(b, length, embed),))
    key_value = 2 * (2 * b * length * embed * embed)
    assert key_value <= result.tensor_flops <= key_value + 4 * 2 * b * embed * embed
    assert result.compulsory_bytes >= b * length * embed * FP32


def test_attention_block_charges_what_the_oracle_proves() -> None:
    torch.manual_seed(0)
    model, x = _attention_block(16, need_weights=False), torch.randn(2, 5, 16)
    assert analyze(model, (x,)).compulsory_bytes >= 0.95 * _oracle_bytes(model, x)


def test_a_class_token_head_needs_every_token_of_earlier_layers() -> None:
    # a ViT encoder (3 batch-first layers, E 256, 8 heads, MLP 1024) read only at the class
    # token, x (8, 197, 256): the first two layers are needed whole, each QKV 6·B·L·E², scores
    # and values 4·B·L²·E, output projection 2·B·L·E², MLP 4·B·L·E·F; the last layer needs the
    # K and V projections of every token (4·B·L·E²) and the class token's row of the rest
    b, length, e, f = 8, 197, 256, 1024
    layer = torch.nn.TransformerEncoderLayer(e, 8, f, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
    model = _With(lambda s, x: s.encoder(x)[:, 0], encoder=encoder)
    result = analyze(model, (meta(b, length, e),))
    whole = 6 * b * length * e * e + 4 * b * length**2 * e + 2 * b * length * e * e
    whole += 4 * b * length * e * f
    hand = 2 * whole + 4 * b * length * e * e
    row = 6 * b * e * e + 4 * b * length * e + 2 * b * e * e + 4 * b * e * f  # the last layer's
    assert hand <= result.tensor_flops <= hand + row


def _transposed_conv_pools() -> torch.nn.Module:
    return _With(
        lambda s, x: s.pool2(s.pool1(s.conv(x))).sum(1, keepdim=True),
        conv=torch.nn.ConvTranspose3d(8, 16, 3, stride=2, padding=1),
        pool1=torch.nn.MaxPool3d(2), pool2=torch.nn.MaxPool3d(3),
    )


def _transposed_pairs(inputs: int, kept: int) -> int:
    """(input, tap) pairs of a kernel-3, stride-2, padding-1 transposed conv landing on
    outputs 0..kept−1: input i and tap t reach output 2i − 1 + t."""
    return sum(1 for t in range(3) for i in range(inputs) if 0 <= 2 * i - 1 + t < kept)


def test_windows_of_windows_compose_exactly() -> None:
    # KernelBench level 2 #78: ConvTranspose3d(8→16, 3, stride 2, padding 1) of x (16, 8, 16,
    # 32, 32) is (31, 63, 63) per channel; MaxPool3d(2) keeps (15, 31, 31), MaxPool3d(3) then
    # (5, 10, 10), which read pool-1 outputs 0..14 and 0..29, which read conv outputs 0..29 and
    # 0..59 (60 of 63): the conv needs its (input, tap) pairs landing there, 2·8 FLOPs each per
    # (image, out channel); pool 1 8 compares per kept output (16·16·15·30·30), pool 2 27 per
    # output and the channel sum one add per element (16·16·500 each). Was 0.1 % of the conv.
    n = 16
    result = analyze(_transposed_conv_pools(), (meta(n, 8, 16, 32, 32),))
    pairs = _transposed_pairs(16, 30) * _transposed_pairs(32, 60) ** 2
    assert result.tensor_flops == 2 * 8 * n * 16 * pairs
    assert result.vector_flops == n * 16 * (15 * 30 * 30 * 8 + 500 * 27 + 500)


def test_transposed_conv_and_pools_charge_what_the_oracle_proves() -> None:
    torch.manual_seed(0)
    model, x = _transposed_conv_pools(), torch.randn(1, 8, 4, 8, 8)
    assert analyze(model, (x,)).compulsory_bytes >= 0.95 * _oracle_bytes(model, x)


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    length = q.shape[-2]
    scores = q @ k.transpose(-2, -1)
    mask = torch.tril(torch.ones(length, length, device=q.device)).view(1, 1, length, length)
    scores = scores.masked_fill(mask == 0, float("-inf"))
    return torch.softmax(scores, -1) @ v


def test_a_causal_mask_built_from_constants_keeps_the_triangle_of_the_scores() -> None:
    # minGPT's attention with its tril(ones) mask built in forward, q, k, v (4, 8, 512, 64):
    # the mask is known: both products on the kept triangle but row 0
    # (:func:`_masked_attention_flops_range`). Was the second product in full, 2·512²·64,
    # and before that it alone
    b, h, t, d = 4, 8, 512, 64
    low, high = _masked_attention_flops_range(b, h, t, d)
    assert low <= bound(_causal_attention, *(meta(b, h, t, d),) * 3).tensor_flops <= high


def test_a_constant_mask_charges_the_scores_the_oracle_proves() -> None:
    # at length 8 every row band is one row: the scores charged are exactly the kept ones
    from oracle import oracle, per_op

    torch.manual_seed(0)
    inputs = tuple(torch.randn(1, 2, 8, 4) for _ in range(3))
    result = analyze(Fn(_causal_attention), inputs)
    proven = oracle(Fn(_causal_attention), inputs)
    rows = [row for row in per_op(result, proven) if "bmm" in row.name]
    assert rows and all(row.charged_flops >= 0.95 * row.proven_flops for row in rows)


@pytest.mark.parametrize(("n", "make"), [
    # over the 4 M floats values are evaluated to: known from the ops alone
    (4096, lambda n: torch.triu(torch.ones(n, n), 1).bool()),
    (4096, lambda n: ~torch.ones(n, n, dtype=torch.bool).tril()),
    (4096, lambda n: torch.tril(torch.full((n, n), 2.0))[None] == 0),
    # evaluated, cut into 64 row bands of 32 rows: the count is exact all the same
    (2048, lambda n: torch.triu(torch.ones(n, n), 1).bool()),
])
def test_a_triangular_mask_made_in_forward_keeps_the_exact_triangle(n: int, make) -> None:  # noqa: ANN001
    # (a @ b).masked_fill(mask, 0), the mask above the diagonal: the n(n + 1)/2 kept products
    # of 2n FLOPs each, n²(n + 1) (the oracle's), every row of a and column of b read, the
    # product written: 3n² elements. At 4096 it was 0 FLOPs (the mask, too big to evaluate,
    # was read as data: any product may be masked) or, with a bool mask, 6.77e10 (49.24 % of
    # the products, the 64-band staircase inside the triangle)
    result = bound(lambda a, b: (a @ b).masked_fill(make(n), 0), meta(n, n), meta(n, n))
    assert result.tensor_flops == n * n * (n + 1)
    assert result.compulsory_bytes == 3 * n * n * FP32
    # the lower triangle kept by where: the same products
    result = bound(lambda a, b: torch.where(make(n), 0.0, a @ b), meta(n, n), meta(n, n))
    assert result.tensor_flops == n * n * (n + 1)


def test_where_of_two_inputs_reads_the_narrower_one_per_element() -> None:
    # where(c, a, b), c bool, a fp32, b fp16, 1024 elements each: every element needs a[i] or
    # b[i], whichever c picks — at least the fp16 one: 1024·(1 + 2) B read, 1024·4 B written
    n = 1024
    condition = torch.zeros(n, dtype=torch.bool, device="meta")
    result = bound(torch.where, condition, meta(n), meta(n, dtype=torch.float16))
    assert result.compulsory_bytes == n * (1 + 2 + 4)


def test_a_crop_of_rows_split_into_windows_is_placed() -> None:
    # y = sin(x), x (2, 21, 8); y viewed as 3 windows of 7 rows (so its storage is split at
    # 7 rows) and cropped to rows 0..13: the crop is a box, not a count, so it unites exactly
    # with the windows' row 0, 7 and 14: sin needs 2·14·8 + 2·8 (row 14) = 240 elements; the
    # sum adds 2·3·8 = 48, exp 224
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.sin()
        return y.view(2, 3, 7, 8)[:, :, 0].sum(), y[:, :14].exp()

    assert bound(fn, meta(2, 21, 8)).flops == 240 + 48 + 224


def test_boxes_differing_in_one_dim_merge() -> None:
    # 100 one-row boxes of a (100, 8) matrix are the matrix (past 96 boxes the smallest would
    # be dropped), and the even and odd halves of a range are the range
    rows = Region.of([((range(i, i + 1),), (range(8),)) for i in range(100)])
    assert rows.count == 800 and len(rows.boxes) == 1
    halves = Region.of([((range(0, 60, 2),),), ((range(1, 60, 2),),)])
    assert halves.boxes == (((range(0, 60),),),)


def test_boxes_overlapping_three_at_a_time_are_counted_exactly() -> None:
    # A = rows, cols 0..9; B = 5..14; C = 8..17: |A∪B∪C| = 3·100 − (25 + 4 + 49) + 4 = 226
    # (Bonferroni's two terms give 222: the 4 elements all three share are subtracted twice)
    def square(low: int) -> tuple[tuple[range], tuple[range]]:
        return (range(low, low + 10),), (range(low, low + 10),)

    assert Region.of([square(0), square(5), square(8)]).count == 226


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_a_sum_over_a_products_columns_is_a_matrix_vector_product(reduce: str) -> None:
    # Linear(1024 → 512)(x).sum(1) (or .mean(1)), x (128, 1024): x @ W.sum(1) + b.sum(), so
    # 1024·512 adds to reduce W, 512 to reduce b, 2·1024 FLOPs per row for the 128 rows, one
    # divide per row for a mean; reads x, W and b, writes 128. The traced product would be
    # 2·128·1024·512 = 134 MFLOPs.
    rows, inner, columns = 128, 1024, 512
    linear = torch.nn.Linear(inner, columns)
    model = _With(lambda s, x: getattr(s.linear(x), reduce)(1), linear=linear)
    result = analyze(model, (meta(rows, inner),))
    assert result.tensor_flops == 2 * inner * rows
    assert result.vector_flops == inner * columns + columns + (rows if reduce == "mean" else 0)
    assert result.compulsory_bytes == (rows * inner + inner * columns + columns + rows) * FP32
    assert any("reduced product" in note for note in result.notes)
    necessary = result.plans.necessary  # the product is priced in the sum: absorbed, not dead
    assert (len(necessary.absorbed_ops), necessary.dead_ops) == (1, 0)


_MASKED_ATTENTION_FILE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """minGPT's attention core: the causal mask is a tril(ones) buffer made in __init__."""

    def __init__(self, length):
        super().__init__()
        self.register_buffer(
            "bias", torch.tril(torch.ones(length, length)).view(1, 1, length, length))

    def forward(self, q, k, v):
        t = q.shape[-2]
        att = (q @ k.transpose(-2, -1)).masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return torch.softmax(att, -1) @ v

def get_inputs():
    return [torch.randn(2, 4, 256, 32) for _ in range(3)]

def get_init_inputs():
    return [256]
'''


def _masked_attention_flops_range(b: int, h: int, t: int, d: int) -> tuple[int, int]:
    # the scores q @ kᵀ on the kept triangle but row 0 (a softmax of one finite score is 1:
    # out[0] = v[0], a copy), t·(t+1)/2 − 1 entries × 2·d FLOPs per (batch, head), short by
    # at most 1/128 of the t² scores (64 row bands); probabilities @ v at the same nonzero
    # probabilities (a masked score's is 0), exactly (masked probabilities; was in full, 2·t²·d)
    triangle = b * h * (t * (t + 1) // 2 - 1) * 2 * d
    short = b * h * t * t // 128 * 2 * d
    return 2 * triangle - short, 2 * triangle


def test_a_causal_mask_buffer_made_in_init_is_known(tmp_path) -> None:  # noqa: ANN001
    # KernelBench builds the model on fake tensors: the shadow keeps the small tril(ones)
    # buffer's values, so the scores are charged on the kept triangle (was: none of q @ kᵀ)
    from torchroofline import analyze_file

    path = tmp_path / "43_MinGPTCausalAttention.py"
    path.write_text(_MASKED_ATTENTION_FILE)
    low, high = _masked_attention_flops_range(2, 4, 256, 32)
    assert low <= analyze_file(path).tensor_flops <= high


def test_a_real_models_mask_buffer_is_known_but_its_weights_are_not() -> None:
    # the same model built for real and passed with meta inputs; a Linear's weight (real, small)
    # is a parameter, data to the bound: where(w > 0, ...) of it stays a data mask
    import importlib.util
    import sys
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "masked_attention.py"
        path.write_text(_MASKED_ATTENTION_FILE)
        spec = importlib.util.spec_from_file_location("masked_attention", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules.pop("masked_attention", None)
        spec.loader.exec_module(module)
    model = module.Model(256)
    low, high = _masked_attention_flops_range(2, 4, 256, 32)
    assert low <= analyze(model, tuple(meta(2, 4, 256, 32) for _ in range(3))).tensor_flops <= high

    class Gated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate = nn.Parameter(torch.ones(16, 16))  # all kept — but a weight is data

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.where(self.gate > 0, x @ x, 0.0)

    # a data mask may keep nothing, so the product is not charged; were the weight taken as a
    # known constant, all 2·16³ FLOPs would be
    assert analyze(Gated(), (meta(16, 16),)).tensor_flops == 0


def test_a_value_minus_its_own_size_one_mean_needs_nothing() -> None:
    # KernelBench level 2 #80: gelu(m − m.mean(1, keepdim)) with m = (x @ Wᵀ + b).max(1,
    # keepdim): m has one column, so its mean is m and the output is gelu(0) = 0 for any finite
    # x — a kernel that writes the 32 zeros is correct: the bound is the 32·4 B written and the
    # gelu's 4 FLOPs on each zero (no GEMM, no max: 2 ps against the 38 ps of the write)
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        m = (x @ w).max(1, keepdim=True).values
        return F.gelu(m - m.mean(1, keepdim=True))

    result = bound(fn, meta(32, 64), meta(64, 128))
    assert result.flops == 32 * 4 and result.compulsory_bytes == 32 * 4
    # not when the reduced dim has more than one element: the difference is data
    wide = bound(lambda x: x - x.mean(1, keepdim=True), meta(32, 64))
    assert wide.flops >= 32 * 64 and wide.compulsory_bytes == 2 * 32 * 64 * 4


class _GatheredOutputs(nn.Module):
    """``layer(x).flatten()[ids]``: the gather needs one output of ``layer`` somewhere (with data
    ids, "repeated indices may all pick one"), with no position."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return self.layer(x).flatten()[ids]


def _gathered_op_flops(layer: nn.Module, *shape: int, op: str) -> tuple:
    """(FlopCount of the ``op`` call, compulsory bytes) of ``_GatheredOutputs(layer)``."""
    ids = torch.empty(5, dtype=torch.long, device="meta")
    result = analyze(_GatheredOutputs(layer), (meta(*shape), ids), data="any")
    (found,) = [o for o in result.plans.necessary.ops if op in o.name]
    return found.flops, result.compulsory_bytes


def test_conv_and_pool_outputs_with_no_position_still_cost_their_cheapest_window() -> None:
    # Conv2d(3, 4, 3, padding=1) on 8×8: the cheapest output is a corner, whose 3×3 window has
    # 2×2 taps inside the input, so it costs 2 FLOPs × 3 channels × 4 taps = 24 and reads 3·4 =
    # 12 input and 12 weight elements (the bound charged it nothing before)
    flops, compulsory = _gathered_op_flops(
        nn.Conv2d(3, 4, 3, padding=1, bias=False), 1, 3, 8, 8, op="convolution"
    )
    assert flops.tensor == 2 * 3 * 4
    # bytes: 12 input + 12 weight floats, the 5 int64 ids and the 5 floats written
    assert compulsory == (12 + 12) * FP32 + 5 * 8 + 5 * FP32
    # MaxPool2d(3, stride=1, padding=1) likewise: a corner output compares its 4 taps
    flops, _ = _gathered_op_flops(nn.MaxPool2d(3, 1, 1), 1, 3, 8, 8, op="max_pool2d")
    assert flops.vector == 4
    # ConvTranspose2d(3, 4, 3) on 4×4 → 6×6: a corner output receives one (input, tap) pair
    # per channel, 2 FLOPs × 3 input channels
    flops, _ = _gathered_op_flops(
        nn.ConvTranspose2d(3, 4, 3, bias=False), 1, 3, 4, 4, op="convolution"
    )
    assert flops.tensor == 2 * 3


def test_pixel_shuffle_rows_read_the_channels_they_move() -> None:
    # pixel_shuffle(x, 2) of (1, 8, 6, 6) is (1, 2, 12, 12); rows 0–1 keep 2·2·12 = 48
    # elements, each one distinct input element (channel c·4 + i·2 + j, row 0, every column):
    # 48 read, 48 written
    result = bound(lambda x: F.pixel_shuffle(x, 2)[:, :, :2], meta(1, 8, 6, 6))
    assert result.compulsory_bytes == (48 + 48) * FP32


def test_reflection_pad_border_reads_its_mirror() -> None:
    # reflect-pad a length-6 row by 2 on the left: output columns 0–2 read input 2, 1, 0:
    # 3 read per row, 3 written, over 4 rows
    result = bound(lambda x: F.pad(x, (2, 2), mode="reflect")[..., :3], meta(1, 4, 6))
    assert result.compulsory_bytes == (4 * 3 + 4 * 3) * FP32


def test_unfold_columns_read_their_windows() -> None:
    # F.unfold(x, 3) of (1, 1, 5, 5): 9 rows (taps) × 9 columns (3 × 3 window positions);
    # column 0 is the window at (0, 0): the 3 × 3 top-left input block, 9 written
    result = bound(lambda x: F.unfold(x, 3)[..., :1], meta(1, 1, 5, 5))
    assert result.compulsory_bytes == (9 + 9) * FP32


def test_glu_row_reads_both_halves() -> None:
    # F.glu(x, 0) of (4, 6) is x[:2] · σ(x[2:]); row 0 reads x rows 0 and 2: 12 read, 6 written
    result = bound(lambda x: F.glu(x, 0)[:1], meta(4, 6))
    assert result.compulsory_bytes == (12 + 6) * FP32


def test_index_tensor_built_in_forward_is_known() -> None:
    # torch.tensor([1, 4]) in forward is a constant: index_select reads columns 1 and 4 of the
    # 4 rows (8 elements), the 2 int64 indices, and writes 4 × 2
    result = bound(lambda x: x.index_select(1, torch.tensor([1, 4])), meta(4, 6))
    assert result.compulsory_bytes == 8 * FP32 + 2 * 8 + 8 * FP32


def test_pdist_pairs_read_their_rows() -> None:
    # pdist of 5 rows lists pairs (0,1), (0,2), (0,3), (0,4), (1,2)…: the first 3 need rows
    # 0–3, 6 coordinates each (24 read), and write 3
    result = bound(lambda x: F.pdist(x)[:3], meta(5, 6))
    assert result.compulsory_bytes == (24 + 3) * FP32


# --- Counting a known pattern over boxes, and a causal mask's bands -------------------------


def _union_pattern_count(pattern: torch.Tensor, boxes: list, shape: list[int]) -> int:
    """The count by brute force: the union of ``boxes`` marked element by element."""
    union = torch.zeros(shape, dtype=torch.bool)
    for box in boxes:
        index = [torch.tensor([i for r in s for i in r], dtype=torch.long) for s in box]
        union[torch.meshgrid(*index, indexing="ij")] = True
    return int((union & pattern.expand(shape)).sum())


@pytest.mark.parametrize("seed", range(4))
def test_pattern_count_is_the_union_count(seed: int) -> None:
    """True elements of a pattern over a union of overlapping (some strided) boxes, each once:
    the class grid and the box-by-box cut both give the brute-force count."""
    from torchroofline.plan.demand import masked

    generator = torch.Generator().manual_seed(seed)

    def draw(high: int, size: int = 1) -> list[int]:
        return torch.randint(high, (size,), generator=generator).tolist()

    shape = [n + 1 for n in draw(7, 1 + draw(3)[0])]
    pattern_shape = [n if keep else 1 for n, keep in
                     zip(shape, draw(2, len(shape)), strict=True)]
    pattern = torch.rand(pattern_shape, generator=generator) < 0.6
    boxes = [tuple(positions_to_set(draw(n, 1 + draw(n)[0])) for n in shape)
             for _ in range(1 + draw(5)[0])]
    expected = _union_pattern_count(pattern, boxes, shape)
    assert masked.pattern_count(pattern, boxes) == expected
    grid_cells = masked._GRID_CELLS
    try:
        masked._GRID_CELLS = 0  # the box-by-box cut
        assert masked.pattern_count(pattern, boxes) == expected
    finally:
        masked._GRID_CELLS = grid_cells


@pytest.mark.parametrize("band", [1, 3, 8])
def test_causal_band_columns(band: int) -> None:
    """A band of a causal mask keeps the columns its first row keeps (all its rows keep them):
    columns 0..first row, shifted by where the columns start; a band of no row kept: none."""
    from torchroofline.plan.demand.constants import _band_columns

    rows, offset = 10, 5
    causal = torch.ones(rows, rows, dtype=torch.bool).tril()
    causal[0] = False  # a first row that keeps nothing
    columns = list(range(offset, offset + rows))
    sets = _band_columns(causal, band, columns)
    assert len(sets) == math.ceil(rows / band)
    for index, kept in enumerate(sets):
        first = index * band
        assert kept == (() if first == 0 else (range(offset, offset + first + 1),))


def test_every_op_with_a_demand_rule_has_a_cost_rule() -> None:
    # an op the bound walks by its own rule is priced by one too: permute_copy and the other
    # views made copies, native_channel_shuffle and embedding_renorm_ had demand rules but
    # were priced as "no cost rule" (their bytes, no FLOPs, named in the notes)
    assert [str(op) for op in DEMAND_RULES if op not in _RULES] == []
