"""A value times itself transposed (x.T @ x, a Gram matrix) is symmetric: a kernel computes one
triangle and mirrors it (SYRK), so the bound charges n(n+1)/2 outputs of the n², names the
shortcut, and never takes the product for an earlier copy of itself."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import Fn
from torchroofline import analyze

FP32 = 4


def shapes_only(body, *shapes):  # noqa: ANN001, ANN201
    return analyze(Fn(body), tuple(torch.empty(s, device="meta") for s in shapes))


def test_a_gram_matrix_charges_one_triangle_of_products() -> None:
    # x (64, 32): x.T @ x is 32 × 32, symmetric; one triangle is 32·33/2 = 528 outputs of
    # 2·64 FLOPs each = 67,584 (the full product: 2·64·32² = 131,072). Every element of x is
    # read (4·64·32 B) and every output written (4·32² B)
    result = shapes_only(lambda x: x.T @ x, (64, 32))
    assert result.flops == 2 * 64 * (32 * 33 // 2) == 67_584
    assert result.compulsory_bytes == FP32 * (64 * 32 + 32 * 32)


def test_a_batched_gram_matrix_charges_one_triangle_per_matrix() -> None:
    # bmm(x, x.mT), x (8, 256, 64): 8 symmetric 256 × 256 outputs, 256·257/2 = 32,896 each,
    # 2·64 FLOPs per output: 8·32,896·128 = 33,685,504
    result = shapes_only(lambda x: torch.bmm(x, x.transpose(1, 2)), (8, 256, 64))
    assert result.flops == 8 * (256 * 257 // 2) * 2 * 64 == 33_685_504


def test_a_batch_of_one_read_at_other_strides_is_symmetric() -> None:
    # bmm(x[None], x.T[None]), x (64, 32): x @ x.T, 64 × 64 symmetric; the batch dim of size 1
    # has stride 64·32 on the left and 64 on the right (unsqueeze of a transposed view), which
    # place no element: 64·65/2 = 2,080 outputs of 2·32 FLOPs = 133,120 (the full 262,144)
    result = shapes_only(lambda x: torch.bmm(x[None], x.T[None]), (64, 32))
    assert result.flops == 2 * 32 * (64 * 65 // 2) == 133_120


def test_the_shortcut_is_named_with_the_product_as_written() -> None:
    # compute-bound (2·4096·1024² FLOPs over 4·(4096 + 1024)·1024 B, 410 FLOPs per byte): the
    # product as written computes all 1024² outputs, the triangle halves the time to light
    result = shapes_only(lambda x: x.T @ x, (4096, 1024))
    (shortcut,) = result.rewrites
    assert "one triangle" in shortcut.rule
    assert result.time_ms["sol_as_written"] > result.time_ms["sol"] > 0


def test_a_product_of_two_values_is_not_symmetric() -> None:
    # x.T @ y: no symmetry, every one of the 32² outputs costs 2·64 FLOPs
    result = shapes_only(lambda x, y: x.T @ y, (64, 32), (64, 32))
    assert result.flops == 2 * 64 * 32 * 32
    assert not result.rewrites


#: x (64, 32): s = xᵀx is 32 × 32, one triangle 528 outputs of 2·64 FLOPs = 67,584
GRAM = 32 * 33 // 2 * 2 * 64


@pytest.mark.parametrize(("body", "flops"), [
    # s·s = s·sᵀ (s symmetric): one triangle again, 528 outputs of 2·32 FLOPs = 33,792
    # (it charged the full 2·32³ = 65,536)
    (lambda x: (lambda s: s @ s)(x.T @ x), GRAM + 33_792),
    (lambda x: (lambda s: s.T @ s.T)(x.T @ x), GRAM + 33_792),
    # (s·s)·(s·s): s² is symmetric too, so its square is one triangle as well
    (lambda x: (lambda t: t @ t)((lambda s: s @ s)(x.T @ x)), GRAM + 2 * 33_792),
    # a bias makes b + xᵀx no symmetric value: its square is the full product
    (lambda x: (lambda s: s @ s)(torch.addmm(x[:32], x.T, x)), GRAM + 65_536),
], ids=["square", "transposed-square", "fourth-power", "bias"])
def test_a_symmetric_value_squared_charges_one_triangle(body, flops: int) -> None:
    assert shapes_only(body, (64, 32)).flops == flops


def test_part_of_a_gram_matrix_charges_its_folded_elements() -> None:
    # (x.T @ x)[:, :5] keeps the 32·5 = 160 outputs R of columns 0-4; a kernel computes the
    # folded set {(min(i, j), max(i, j))}: (|R ∪ Rᵀ| + |diagonal of R|) / 2 = (2·160 − 5·5 + 5)
    # / 2 = 150 (the 5 × 5 corner folds to 15, the other 27·5 rows stay): 2·64·150 FLOPs
    result = shapes_only(lambda x: (x.T @ x)[:, :5].contiguous(), (64, 32))
    assert result.flops == 2 * 64 * 150


def test_an_off_diagonal_block_charges_its_folded_elements() -> None:
    # [3:9, 2:7] is R = rows 3-8 × columns 2-6 (30); Rᵀ = rows 2-6 × columns 3-8; they share
    # rows 3-6 × columns 3-6 (16), so |R ∪ Rᵀ| = 44, and R holds 4 diagonal elements (3-6):
    # (44 + 4) / 2 = 24 outputs, 2·64 FLOPs each
    result = shapes_only(lambda x: (x.T @ x)[3:9, 2:7].contiguous(), (64, 32))
    assert result.flops == 2 * 64 * 24


def test_the_diagonal_of_a_gram_matrix_folds_onto_itself() -> None:
    # diag(x @ x.T), x (100, 100): every kept element is on the diagonal, its own mirror, so
    # all 100 are computed, 2·100 FLOPs each (the oracle proves 20,000: tests/plan/test_oracle)
    result = shapes_only(lambda x: torch.diagonal(x @ x.T).contiguous(), (100, 100))
    assert result.flops == 2 * 100 * 100


@settings(max_examples=15, deadline=None)
@given(
    rows=st.tuples(st.integers(0, 12), st.integers(0, 12)).map(sorted),
    columns=st.tuples(st.integers(0, 12), st.integers(0, 12)).map(sorted),
    step=st.integers(1, 3),
)
def test_a_slice_of_a_gram_matrix_charges_exactly_its_folded_elements(
    rows: list[int], columns: list[int], step: int
) -> None:
    # any slice R of x.T @ x, x (8, 12): a kernel computes {(min(i, j), max(i, j)) : (i, j) ∈
    # R}, 2·8 FLOPs each, counted here by brute force: the bound charges no more (sound: a
    # SYRK-style kernel needs no more) and, for a slice's boxes, no less
    (r0, r1), (c0, c1) = rows, columns
    kept = {(i, j) for i in range(r0, r1, step) for j in range(c0, c1)}
    folded = {(min(i, j), max(i, j)) for i, j in kept}
    result = shapes_only(lambda x: (x.T @ x)[r0:r1:step, c0:c1].contiguous(), (8, 12))
    assert result.flops == 2 * 8 * len(folded)
