"""Closed forms for the rules a systematic audit found wrong (issues 32 and 28), each from its
reproduction: arithmetic charged as none, complex products, out= spellings, the training-only
ops with no rule, and the batch-norm statistics a trace did not see written."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import Fn, analyze, meta
from torchroofline.costs import Category, flops_on_shapes

aten = torch.ops.aten
FP32 = 4


def _op_flops(result: object, name: str) -> int:
    [record] = [r for r in result.ops if r.name == name]
    return record.flops.tensor + record.flops.vector


def test_index_add_adds_every_source_element() -> None:
    # zeros(64, 256).index_add(0, idx, src (32, 256)): one add per src element, a multiply-add
    # with alpha ≠ 1
    z, idx, src = torch.zeros(64, 256), torch.randint(0, 64, (32,)), torch.randn(32, 256)
    plain = analyze(Fn(lambda z, i, s: z.index_add(0, i, s)), z, idx, src)
    assert _op_flops(plain, "aten.index_add.default") == 32 * 256
    scaled = analyze(Fn(lambda z, i, s: z.index_add(0, i, s, alpha=2)), z, idx, src)
    assert _op_flops(scaled, "aten.index_add.default") == 2 * 32 * 256


def test_scatters_fold_each_source_element() -> None:
    index = torch.randint(0, 64, (32, 256))
    add = analyze(Fn(lambda z, i, s: z.scatter_add(0, i, s)), meta(64, 256), index, meta(32, 256))
    assert _op_flops(add, "aten.scatter_add.default") == 32 * 256
    # a mean also divides each of the 64·256 destination elements by its count
    mean = analyze(Fn(lambda z, i, s: z.scatter_reduce(0, i, s, "mean")), meta(64, 256), index,
                   meta(32, 256))
    assert _op_flops(mean, "aten.scatter_reduce.two") == 32 * 256 + 64 * 256


def test_embedding_bag_sums_the_rows_it_gathers() -> None:
    # 40 indices into 4 bags of a (100, 16) table: 40·16 adds; a mean divides the 4·16 outputs
    weight, indices, offsets = meta(100, 16), torch.randint(0, 100, (40,)), torch.tensor(
        [0, 10, 20, 30])
    total = analyze(Fn(lambda w, i, o: F.embedding_bag(i, w, o, mode="sum")), weight, indices,
                    offsets)
    assert total.vector_flops == 40 * 16
    mean = analyze(Fn(lambda w, i, o: F.embedding_bag(i, w, o, mode="mean")), weight, indices,
                   offsets)
    assert mean.vector_flops == 40 * 16 + 4 * 16


@pytest.mark.parametrize(("mode", "shape", "size", "per_plane"), [
    # linear, 8 → 20 points: 2 taps, a multiply-add each, per output point
    ("linear", (2, 3, 8), (20,), 2 * 2 * 20),
    # bilinear, 8×8 → 16×16: one pass along W over the 8 source rows (8·16 points), one along
    # H over the output (16·16), 2 taps each: 2·2·(128 + 256), below 4 taps at once (2·4·256)
    ("bilinear", (2, 3, 8, 8), (16, 16), 2 * 2 * (8 * 16 + 16 * 16)),
    # bicubic: 4 taps per pass
    ("bicubic", (2, 3, 8, 8), (16, 16), 2 * 4 * (8 * 16 + 16 * 16)),
    # trilinear 4³ → 8³: passes write 4·4·8, 4·8·8, 8·8·8 points
    ("trilinear", (1, 2, 4, 4, 4), (8, 8, 8), 2 * 2 * (128 + 256 + 512)),
    # shrinking 8×8 → 4×4: the direct sum over 2×2 taps (2·4·16) beats the passes (2·2·48)
    ("bilinear", (2, 3, 8, 8), (4, 4), 2 * 4 * 16),
])
def test_interpolation_charges_its_taps(mode: str, shape: tuple, size: tuple,
                                        per_plane: int) -> None:
    result = analyze(Fn(lambda x: F.interpolate(x, size=size, mode=mode)), meta(*shape))
    assert result.vector_flops == shape[0] * shape[1] * per_plane


def test_antialiased_and_grid_resampling_charge_their_taps() -> None:
    # antialiased shrink: at least the plain bilinear taps, 2·4·16 per plane
    aa = analyze(Fn(lambda x: F.interpolate(x, size=(4, 4), mode="bilinear", antialias=True)),
                 meta(2, 3, 8, 8))
    assert aa.vector_flops == 6 * 2 * 4 * 16
    # grid_sample: 2×2 bilinear taps around each of the 5·5 grid points, per channel
    grid = analyze(Fn(lambda x, g: F.grid_sample(x, g, align_corners=False)), meta(2, 3, 8, 8),
                   meta(2, 5, 5, 2))
    assert grid.vector_flops == 2 * 4 * (2 * 3 * 5 * 5)


def test_fold_adds_the_columns_inside_the_image() -> None:
    # F.fold of (2, 3·9, 36) columns into 6×6 with a 3×3 kernel, padding 1: along each axis the
    # 6 blocks' 3 taps land 6·3 − 2 = 16 times inside the image (the first block's first tap
    # and the last block's last fall on the padding)
    result = analyze(Fn(lambda x: F.fold(x, (6, 6), 3, padding=1)), meta(2, 27, 36))
    assert _op_flops(result, "aten.col2im.default") == 2 * 3 * 16 * 16
    # the bound charges k − 1 adds per output k elements land on (the kernel's k adds into a
    # zeroed image are one more each): all of the image is kept, 6·6 outputs per plane
    assert result.flops == 2 * 3 * (16 * 16 - 6 * 6)


def test_fold_kept_in_part_is_charged_the_adds_of_that_part() -> None:
    # the 2×2 corner of the fold above: row 0 gathers 2 taps (ki = 0, 1; ki = 2 falls on the
    # padding), row 1 all 3; so 2 + 3 per axis, 5·5 landings on 2·2 outputs per plane, each
    # output one add fewer than its landings, 2·3 planes
    result = analyze(Fn(lambda x: F.fold(x, (6, 6), 3, padding=1)[..., :2, :2]), meta(2, 27, 36))
    assert result.flops == 2 * 3 * (5 * 5 - 2 * 2)


def test_a_fold_with_no_overlap_adds_nothing() -> None:
    # F.fold of 2×2 blocks at stride 2 into 4×4 places each column element on its own output
    # (one landing each, 2·2·4 per plane): a rearrangement, no add needed (the kernel's 16 adds
    # into zeros are all k − 1 = 0 short of that)
    result = analyze(Fn(lambda x: F.fold(x, (4, 4), 2, stride=2)), meta(1, 8, 4))
    assert _op_flops(result, "aten.col2im.default") == 2 * 16
    assert result.flops == 0


def test_complex_products_are_three_real_ones() -> None:
    # (Ar + iAi)(Br + iBi) by Gauss's 3M method: three real n³ products, 6·n³ FLOPs
    c = torch.complex64
    result = analyze(Fn(torch.mm), meta(32, 32, dtype=c), meta(32, 32, dtype=c))
    assert _op_flops(result, "aten.mm.default") == 6 * 32**3
    assert flops_on_shapes(aten.dot.default, meta(7, dtype=c), meta(7, dtype=c)).tensor == 6 * 7


def test_out_spellings_take_their_overloads_rule() -> None:
    # div(rounding_mode=) is keyed by overload (divide, then round); its out= spelling shares it
    x = meta(3, 4)
    functional = flops_on_shapes(aten.div.Scalar_mode, x, 2.0, rounding_mode="floor")
    spelled_out = flops_on_shapes(aten.div.Scalar_mode_out, x, 2.0, rounding_mode="floor",
                                  out=meta(3, 4))
    assert functional == spelled_out and functional.vector == 2 * 12


def test_in_place_matmul_reuses_flop_counter() -> None:
    # flop_counter keys addmm, not addmm_: the in-place spelling shares its formula
    args = (meta(5, 6), meta(5, 3), meta(3, 6))
    assert flops_on_shapes(aten.addmm_.default, *args).tensor == 2 * 5 * 6 * 3


def test_training_rules_for_mse_and_max_pool() -> None:
    # issue 28 #11: mse_loss_backward (mean: dx = (x − t)·2·dy/N, a subtract and a multiply per
    # element) and max_pool2d_with_indices_backward (a store per gradient: no FLOPs) have rules
    x = torch.randn(8, 16, requires_grad=True)
    mse = analyze(Fn(lambda x, t: F.mse_loss(x, t)), x, torch.randn(8, 16), mode="train")
    backward = next(r for r in mse.ops if r.name == "aten.mse_loss_backward.default")
    assert backward.has_rule and backward.flops.vector == 2 * 8 * 16
    pooled = analyze(Fn(lambda x: F.max_pool2d(x, 2).sum()),
                     torch.randn(2, 3, 8, 8, requires_grad=True), mode="train")
    [record] = [r for r in pooled.ops if r.name == "aten.max_pool2d_with_indices_backward.default"]
    assert record.has_rule and record.category is Category.DATA_MOVEMENT
    # it loads the output gradient and the indices, not the forward input it takes for shape
    assert sum(ref.elements for ref in record.reads) < 2 * 3 * 8 * 8


def test_batch_norm_training_reads_and_writes_its_running_statistics() -> None:
    # issue 28 #10: native_batch_norm's schema does not mark running_mean/var written; in
    # training the update reads both and writes both. x (8, 1024, 4, 4) read, y written,
    # weight and bias read, 2 statistics read and written, num_batches_tracked (int64) read
    # and written
    bn = nn.BatchNorm2d(1024).train()
    result = analyze(bn, meta(8, 1024, 4, 4))
    activations = 2 * 8 * 1024 * 16 * FP32
    assert result.compulsory_bytes == activations + 2 * 1024 * FP32 + 4 * 1024 * FP32 + 2 * 8
