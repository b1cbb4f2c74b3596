"""Sizes chosen by data are followed dim by dim, not by size (plan/demand/sized.py): where a
size the data chose equals a fixed one, the bound for any values still charges nothing that
some data makes empty, and still charges what every input needs."""

from __future__ import annotations

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from conftest import Fn
from torchroofline import analyze

FP32 = 4


def rows_mask(rows: int, columns: int, picked: int) -> torch.Tensor:
    """A (rows, columns) boolean mask whose first ``picked`` rows hold one True each."""
    mask = torch.zeros(rows, columns, dtype=torch.bool)
    for row in range(picked):
        mask[row, row % columns] = True
    return mask


def any_values(body, *inputs):  # noqa: ANN001, ANN201
    return analyze(Fn(body), inputs, data="any")


def test_a_slice_of_data_sized_rows_coinciding_with_a_fixed_size_may_be_empty() -> None:
    # nonzero of a (4, 2) mask with 3 hits is (3, 2); its [1:] is (2, 2), both sizes 2, the
    # second fixed (the mask's rank). A mask of one hit or none leaves [1:] empty: reading the
    # mask (4·2 bools) and writing nothing is all a correct program needs there
    result = any_values(lambda m: torch.nonzero(m)[1:].float() * 2, rows_mask(4, 2, 3))
    assert result.flops == 0
    assert result.compulsory_bytes <= 4 * 2


def test_rows_cat_onto_a_fixed_block_stay_data_sized_whatever_their_count() -> None:
    # x[m] (2 of 4 rows × 5) on top of y (3 × 5) is 5 × 5, a size y has too. No row picked
    # leaves y alone: 3·5 products, y read (15 floats), the mask (4 bools), 15 floats written
    x, y = torch.randn(4, 5), torch.randn(3, 5)
    m = torch.tensor([True, False, True, False])
    result = any_values(lambda x, m, y: torch.cat([x[m], y]) * 2, x, m, y)
    assert result.flops <= 3 * 5
    assert result.compulsory_bytes <= 4 + (15 + 15) * FP32


def test_a_sum_over_data_sized_rows_of_a_fixed_width_is_fixed() -> None:
    # nonzero of a (4, 2) mask with 2 hits is (2, 2): its column sums are 2 values whatever
    # the mask, written as every input needs; finding them reads the whole mask (8 bools)
    result = any_values(lambda m: torch.nonzero(m).float().sum(0), rows_mask(4, 2, 2))
    assert result.compulsory_bytes == 4 * 2 + 2 * FP32


def test_a_product_contracting_data_sized_rows_is_fixed() -> None:
    # x[m] is 2 of 4 rows × 2: x[m].T @ (2·x[m]) is 2 × 2 whatever the mask (zeros for none),
    # written as every input needs; the mask is read (4 bools), x's rows may be none
    x, m = torch.randn(4, 2), torch.tensor([True, True, False, False])
    result = any_values(lambda x, m: x[m].T @ (x[m] * 2), x, m)
    assert result.compulsory_bytes == 4 + 2 * 2 * FP32


def test_a_sum_over_rows_gathered_by_data_sized_indices_is_fixed() -> None:
    # idx = nonzero(m)[:, 0] holds 2 row numbers of x (4 × 2): x[idx] is 2 × 2, its rows the
    # data's, its columns x's. Their sums are 2 values whatever the mask, written as every
    # input needs; the column [:, 0] is part of nonzero's output, which the first mask element
    # examined may already give (one bool read), and the rows of x may be none
    m, x = rows_mask(4, 2, 2), torch.randn(4, 2)
    result = any_values(lambda m, x: x[torch.nonzero(m)[:, 0]].sum(0), m, x)
    assert result.compulsory_bytes == 1 + 2 * FP32


#: pipeline steps on a value whose rows data chose, each valid on no rows (name, step, inputs)
STEPS = {
    "drop the first row": lambda t, w, y: t[1:],
    "double": lambda t, w, y: t * 2,
    "a transposed copy": lambda t, w, y: t.T.contiguous().T,
    "a product": lambda t, w, y: t @ w,
    "a fixed block below": lambda t, w, y: torch.cat([t, y]),
    "its first column": lambda t, w, y: t[:, :1].expand(-1, t.shape[1]) + t,
}


@settings(max_examples=30, deadline=None)
@given(
    picked=st.integers(1, 4),
    width=st.sampled_from(["rows", "rows - 1", "rows + block", "2"]),
    block=st.integers(1, 3),
    steps=st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4),
    select=st.sampled_from(["nonzero", "boolean index"]),
)
@example(3, "rows - 1", 1, ["drop the first row", "double"], "nonzero")
@example(2, "rows + block", 3, ["a fixed block below", "double"], "boolean index")
def test_the_bound_for_any_values_is_no_more_than_an_empty_selection_needs(
    picked: int, width: str, block: int, steps: list[str], select: str
) -> None:
    # fixed sizes chosen to coincide with the data's (the width equal to the rows picked, to
    # the rows left after a slice, or to those of a fixed block below them): the bound for
    # any values holds for a mask picking nothing too, so it may charge no more than the same
    # bound traced on that mask, where every data-sized value is empty and no size coincides
    columns = {
        "rows": picked, "rows - 1": max(picked - 1, 1), "rows + block": picked + block, "2": 2
    }[width]

    def body(m, x, w, y):  # noqa: ANN001, ANN202
        t = torch.nonzero(m).float()[:, :1].expand(-1, columns) * x[0] if select == "nonzero" \
            else x[m.any(1)]
        for step in steps:
            t = STEPS[step](t, w, y)
        return t

    inputs = (torch.randn(6, columns), torch.randn(columns, columns), torch.randn(block, columns))
    traced = analyze(Fn(body), (rows_mask(6, 2, picked), *inputs), data="any")
    empty = analyze(Fn(body), (rows_mask(6, 2, 0), *inputs), data="any")
    assert traced.flops <= empty.flops
    assert traced.compulsory_bytes <= empty.compulsory_bytes
