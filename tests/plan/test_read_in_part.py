"""Work read in part: a whole RNN (one traced ``aten.lstm``/``gru``/``rnn_*`` op) is charged the
steps of each layer and direction its kept outputs need, a decomposition the matrices and
elements its kept outputs need: closed forms, each derived in a comment."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from conftest import Fn, meta
from torchroofline import analyze

FP32 = 4


def _bound(rnn: nn.Module, pick, x):  # noqa: ANN001, ANN202
    return analyze(nn.Sequential(rnn, Fn(pick)), (x,), "h100-sxm")


def test_first_step_of_an_lstm_needs_one_step() -> None:
    # out[0] of LSTM(I=3, H=4), T=5, B=2, zero initial state: step 0 only. c₁ = i·g (the forget
    # gate multiplies c₀ = 0) and W_hh·h₀ = 0, so 3 of 4 gate rows of w_ih (36 of 48) and of
    # each bias (12 + 12 of 32), x[0] (2·3), out[0] written (2·4): 74 floats. FLOPs: the input
    # GEMM 2·B·36 = 144, the cell math ¾ of B·H·19 = 114.
    result = _bound(nn.LSTM(3, 4), lambda out: out[0][0], meta(5, 2, 3))
    assert result.compulsory_bytes == (36 + 24 + 6 + 8) * FP32
    assert result.flops == 144 + 114


def test_final_state_of_the_first_layer_needs_the_first_layer_only() -> None:
    # h_n[0] of GRU(I=3, H=4, 2 layers), T=5, B=2: every step of layer 0, nothing of layer 1.
    # Reads x (30), layer 0's w_ih (36), w_hh (48), biases (24), h₀[0] (made in forward: no
    # read); writes 2·4. FLOPs: 2·B·T·(36 + 48) = 1,680 GEMM, B·T·H·16 = 640 cell math.
    result = _bound(nn.GRU(3, 4, 2), lambda out: out[1][0], meta(5, 2, 3))
    assert result.compulsory_bytes == (30 + 36 + 48 + 24 + 8) * FP32
    assert result.flops == 1_680 + 640


def test_last_step_of_a_one_direction_rnn_needs_every_step() -> None:
    # out[-1] of RNN(I=3, H=4, 2 layers), T=5, B=2: every step of both layers, as the whole
    # output: 2·B·T·((4·3 + 4·4) + (4·4 + 4·4)) = 1,200 GEMM, B·T·H·2 = 80 per layer: 1,360.
    last = _bound(nn.RNN(3, 4, 2), lambda out: out[0][-1], meta(5, 2, 3))
    whole = _bound(nn.RNN(3, 4, 2), lambda out: out[0], meta(5, 2, 3))
    assert last.flops == whole.flops == 1_200 + 160


def test_a_cholesky_entry_reads_the_triangle_above_it_and_its_row() -> None:
    # L[3, 1] of a 6×6 Cholesky factor: A's lower triangle in rows 0..1 (1 + 2 = 3 elements)
    # and row 3 up to column 1 (2): 5 elements read, 1 written; row 2 is not needed
    result = analyze(Fn(lambda a: torch.linalg.cholesky(a)[3, 1]), (meta(6, 6),), "h100-sxm")
    assert result.compulsory_bytes == (5 + 1) * FP32


def test_one_singular_value_reads_its_whole_matrix() -> None:
    # svdvals(a)[1, 0]: matrix 1 of 3 whole (5·4 = 20 elements) and one value written
    result = analyze(Fn(lambda a: torch.linalg.svdvals(a)[1, 0]), (meta(3, 5, 4),), "h100-sxm")
    assert result.compulsory_bytes == (20 + 1) * FP32


aten = torch.ops.aten


@pytest.mark.parametrize(("copy", "read"), [
    # narrow_copy(x, 1, 1, 3)[:2] of x (4, 5): rows 0..1 of columns 1..3, 6 elements
    (lambda x: aten.narrow_copy(x, 1, 1, 3)[:2], 6),
    # unfold_copy(x, 1, 2, 2) is (4, 2, 2), windows of columns 0..1 and 2..3; rows 1..2 of
    # it copy 2 rows × 4 columns of x (column 4 in no window), and write 8
    (lambda x: aten.unfold_copy(x, 1, 2, 2)[1:3], 8),
    # permute_copy(x, [1, 0])[:2] is columns 0..1 of x: 2 × 4
    (lambda x: aten.permute_copy(x, [1, 0])[:2], 8),
    # expand_copy(x[:1], [3, 5])[:2, :2]: 4 copies of x[0, :2], 2 elements read
    (lambda x: aten.expand_copy(x[:1], [3, 5])[:2, :2], 2),
    # split_with_sizes_copy(x, [1, 3])[1][:1] is row 1 of x
    (lambda x: aten.split_with_sizes_copy(x, [1, 3])[1][:1], 5),
])
def test_a_view_made_a_copy_read_in_part_reads_the_elements_it_copies(copy, read) -> None:
    # each output element copies one input element (no FLOPs); was none read (a layout copy
    # with no demand rule read in part charges no input). Each has a cost rule too (a layout
    # copy: was priced as "no cost rule", named in the notes)
    result = analyze(Fn(copy), (meta(4, 5),), "h100-sxm")
    written = copy(torch.zeros(4, 5)).numel()
    assert result.compulsory_bytes == (read + written) * FP32
    assert result.flops == 0
    assert not any("no cost rule" in note for note in result.notes), result.notes
    assert result.compulsory_bytes <= result.fused_bytes <= result.unfused_bytes


def test_lu_unpack_read_in_part_copies_its_triangles_and_needs_its_pivots_for_p() -> None:
    # lu_unpack(LU, pivots) of LU (2, 4, 4): U[:, :1] is row 0 of each LU (8 read, 8
    # written); L[:, 1:2] is [LU[1, 0], 1, 0, 0] in each (2 read, 8 written); P[:1] needs
    # matrix 0's 4 int32 pivots (16 B) and writes 16
    lu, pivots = meta(2, 4, 4), meta(2, 4, dtype=torch.int32)
    picks = [lambda out: out[0][:1], lambda out: out[1][:, 1:2], lambda out: out[2][:, :1]]
    unpacked = [
        analyze(Fn(lambda a, p, pick=pick: pick(torch.lu_unpack(a, p))), (lu, pivots), "h100-sxm")
        for pick in picks
    ]
    assert [r.compulsory_bytes for r in unpacked] == [16 + 16 * FP32, (2 + 8) * FP32,
                                                     (8 + 8) * FP32]
