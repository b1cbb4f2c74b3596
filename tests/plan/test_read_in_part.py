"""Work read in part: a whole RNN (one traced ``aten.lstm``/``gru``/``rnn_*`` op) is charged the
steps of each layer and direction its kept outputs need, a decomposition the matrices and
elements its kept outputs need: closed forms, each derived in a comment."""

from __future__ import annotations

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
