"""Programs where the bound collapsed or charged too much (issue 28): each a closed form.

Diagonals and traces of products past MAX_BOXES elements, a loss's picked scores under the
given targets, accumulating scatters, one DFT bin, host scalars, overlapping windows, and a
concatenation of many slices.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Fn, meta
from torchroofline import analyze
from torchroofline.trace.regions import (
    MAX_BOXES,
    NOWHERE,
    Region,
    Spread,
    diagonals_count,
    diagonals_through,
    distinct_offsets,
    full_box,
    make_diagonal,
)

FP32 = 4
INT64 = 8


def bound(body, *inputs, **options):  # noqa: ANN001, ANN201
    return analyze(Fn(body), inputs, "h100-sxm", **options)


def charged(result) -> dict[tuple[tuple[int, ...], str], int]:  # noqa: ANN001
    """Elements charged per input storage, by its shape and dtype."""
    return {(r.shape, r.dtype): r.elements for r in result.plans.necessary.input_refs}


# --- diagonals known dim by dim (spreads) ----------------------------------------------------


def test_the_trace_of_a_product_needs_both_operands_past_max_boxes() -> None:
    # trace(A @ B) = Σ_i Σ_k A[i, k]·B[k, i]: every element of A and B, n > MAX_BOXES (was one
    # row and one column: 2 KB of 524 KB). The product's n diagonal outputs, 2n FLOPs each,
    # and the trace's n adds
    n = 256
    assert n > MAX_BOXES
    result = bound(lambda a, b: torch.trace(a @ b), meta(n, n), meta(n, n))
    assert result.compulsory_bytes == (2 * n * n + 1) * FP32
    assert result.tensor_flops == 2 * n * n


def test_the_diagonal_of_a_gram_matrix_needs_every_row() -> None:
    # diagonal(X @ X.T)[i] = Σ_k X[i, k]²: all of X (once, both operands are X), n outputs
    n = 128
    result = bound(lambda x: torch.diagonal(x @ x.T), meta(n, n))
    assert result.compulsory_bytes == (n * n + n) * FP32


def test_a_batched_trace_keeps_each_batch_with_its_rows() -> None:
    # einsum('bii->b', bmm(A, B)): batch b's diagonal needs A[b]'s rows and B[b]'s columns,
    # all of them; the spread keeps the batch exact and rows, columns hit (not 1/n of it)
    b, n = 2, 128
    result = bound(
        lambda x, y: torch.einsum("bii->b", torch.bmm(x, y)), meta(b, n, n), meta(b, n, n)
    )
    assert result.compulsory_bytes == (2 * b * n * n + b) * FP32


def test_the_diagonal_of_a_softmax_needs_each_rows_statistics() -> None:
    # softmax(x, 1).diagonal(): output i needs row i's max and sum, every element of x
    n = 128
    result = bound(lambda x: torch.softmax(x, 1).diagonal(), meta(n, n))
    assert result.compulsory_bytes == (n * n + n) * FP32


def test_the_diagonal_of_a_scan_needs_no_more_than_each_rows_prefix() -> None:
    # cumsum(x, 1).diagonal()[i] = Σ_{j ≤ i} x[i, j]: n(n + 1)/2 elements of x at most. The
    # spread says row i holds some kept column, not which: its prefix up to the smallest kept
    # column only (never the whole row: that would be unsound); the first MAX_BOXES diagonal
    # elements are placed exactly, so their prefixes, Σ_{i < 96} (i + 1), are charged at least
    n = 128
    result = bound(lambda x: torch.cumsum(x, 1).diagonal(), meta(n, n))
    read = charged(result)[(n, n), "float32"]
    assert MAX_BOXES * (MAX_BOXES + 1) // 2 <= read <= n * (n + 1) // 2


def test_the_diagonal_of_a_cropped_product_needs_only_the_crop() -> None:
    # diagonal((A @ B)[:100, 28:]) keeps out[i, 28 + i], i < 100: rows 0..99 of A and columns
    # 28..127 of B, no more (the spread's rows and columns are those, not all of them)
    n, kept = 128, 100
    result = bound(lambda a, b: torch.diagonal((a @ b)[:kept, n - kept:]), meta(n, n), meta(n, n))
    assert result.compulsory_bytes == (2 * kept * n + kept) * FP32
    assert result.tensor_flops == 2 * n * kept


def test_a_spread_is_what_it_holds_dim_by_dim() -> None:
    # the diagonal of an 8 × 8 block: 8 elements, rows and columns 0..7 hit; whole rows through
    # it are a box; a box past MAX_BOXES points keeps their rows and columns
    diagonal = Spread(((range(8),), (range(8),)), (True, True))
    assert diagonal.count == 8
    rows = Region.of([], 0, [diagonal.lines({1: (range(16),)})])
    assert rows.boxes == (((range(8),), (range(16),)),) and rows.count == 8 * 16
    points = [((range(i, i + 1),), (range(i + 1, i + 2),)) for i in range(2 * MAX_BOXES)]
    region = Region.of(points)
    assert len(region.boxes) == MAX_BOXES and region.count == 2 * MAX_BOXES
    assert region.lines({1: (range(256),)})[0].box[0] == (range(MAX_BOXES, 2 * MAX_BOXES),)
    # a spread inside a written box stays, one the box cuts goes (its count too, but for the
    # elements the box must hold)
    assert region.intersect_box(full_box((256, 256)), 256 * 256, 256 * 256).spreads
    cut = region.intersect_box(((range(128),), (range(256),)), 128 * 256, 256 * 256)
    assert not cut.spreads
    assert region.minus_box(((range(1),), (range(1),))).spreads == region.spreads
    assert NOWHERE.union(region) is region


# --- a loss's picked scores under the given targets ------------------------------------------


def test_cross_entropy_for_the_given_targets_reads_every_logit() -> None:
    # F.cross_entropy(p, t), p (512, 1000): each loss term needs its row's log-sum-exp over
    # every logit, whichever class the given target picks. 512 picked scores are more boxes
    # than MAX_BOXES: their rows are kept as a spread. Reads p and t, writes the loss — the
    # same as for any targets (was 0.42 of it)
    torch.manual_seed(0)
    n, c = 512, 1000
    inputs = (torch.randn(n, c), torch.randint(0, c, (n,)))
    expected = (n * c + 1) * FP32 + n * INT64
    assert bound(lambda p, t: F.cross_entropy(p, t), *inputs, data="given").compulsory_bytes \
        == expected
    assert bound(lambda p, t: F.cross_entropy(p, t), *inputs, data="any").compulsory_bytes \
        == expected


# --- accumulating scatters for any indices ---------------------------------------------------


def test_index_add_for_any_indices_reads_every_source_row() -> None:
    # x.index_add(0, idx, src): out[idx[i]] += src[i], out = x elsewhere. Every output element
    # is x's plus whatever lands there, so all of x; every src row lands on some output row,
    # all of them demanded, so all of src and idx (was one src element)
    rows, k, width = 64, 100, 256
    inputs = (meta(rows, width), meta(k, dtype=torch.long), meta(k, width))
    result = bound(lambda x, i, s: x.index_add(0, i, s), *inputs)
    assert result.compulsory_bytes == (2 * rows * width + k * width) * FP32 + k * INT64
    # columns :3 of it: src[:, :3], every index, x[:, :3], the 3 columns written
    result = bound(lambda x, i, s: x.index_add(0, i, s)[:, :3], *inputs)
    assert result.compulsory_bytes == (2 * rows * 3 + k * 3) * FP32 + k * INT64


def test_scatter_add_for_any_indices_reads_the_sources_its_index_covers() -> None:
    # x.scatter_add(0, index, src): src[p] adds into out[index[p], p1] for p in index's shape;
    # a column wholly demanded takes every src element of it there: all of x, index and
    # src[:50, :100] for an index (50, 100)
    rows, width = 64, 256
    inputs = (meta(rows, width), meta(50, 100, dtype=torch.long), meta(100, width))
    expected = (2 * rows * width + 50 * 100) * FP32 + 50 * 100 * INT64
    result = bound(lambda x, i, s: x.scatter_add(0, i, s), *inputs)
    assert charged(result)[(100, width), "float32"] == 50 * 100
    assert result.compulsory_bytes == expected
    # scatter with reduce="add" lands the same sources
    assert bound(lambda x, i, s: x.scatter(0, i, s, reduce="add"), *inputs).compulsory_bytes \
        == expected


def test_a_copying_scatter_still_charges_one_source_element() -> None:
    # x.index_copy(0, idx, src): repeated indices may all copy onto one row, where one of them
    # wins: no source row is certain for any indices (the any-input floor of one element)
    inputs = (meta(64, 256), meta(100, dtype=torch.long), meta(100, 256))
    result = bound(lambda x, i, s: x.index_copy(0, i, s), *inputs)
    assert charged(result)[(100, 256), "float32"] == 1


# --- one DFT bin ------------------------------------------------------------------------------


def test_one_frequency_of_each_row_sums_the_row() -> None:
    # rfft(x, dim=1)[:, 0].real is each row's sum: every element of x (was half a row: the
    # real part's view was placed in complex units), and n − 1 adds per row at least
    # (was 64/513 of the transform's FLOPs)
    rows, n = 64, 1024
    result = bound(lambda x: torch.fft.rfft(x, dim=1)[:, 0].real, meta(rows, n))
    assert charged(result)[(rows, n), "float32"] == rows * n
    assert result.vector_flops == rows * (n - 1)
    # it writes the real parts only: 4 B each, not the 8 B of a complex element
    assert result.compulsory_bytes == (rows * n + rows) * FP32


# --- host scalars -----------------------------------------------------------------------------


def test_a_value_read_on_the_host_is_needed() -> None:
    # y * x.abs().max().item(): the scale the host reads is every element of x's max, so x is
    # read; y read and the product written. abs and max of every element, one multiply each
    torch.manual_seed(0)
    n = 256
    result = bound(lambda y, x: y * x.abs().max().item(), torch.randn(n, n), torch.randn(n, n))
    assert result.compulsory_bytes == 3 * n * n * FP32
    assert result.plans.necessary.dead_ops == 0


def test_a_reduction_traced_on_the_cpu_is_no_host_scalar() -> None:
    # x.sum() * torch.ones(4) mixes devices, so it is traced on fake CPU tensors, where the sum
    # is a 0-d CPU tensor: it is still the GPU's result, computed from x (not a constant)
    n = 64
    result = bound(lambda x: x.sum() * torch.ones(4), meta(n, n))
    assert result.compulsory_bytes == (n * n + 4) * FP32
    result = bound(lambda x, w, t: F.mse_loss(x @ w, t) * torch.ones(1),
                   meta(n, n), meta(n, n), meta(n, n))
    assert result.compulsory_bytes == (3 * n * n + 1) * FP32
    assert result.tensor_flops == 2 * n**3
    # a 0-d tensor made from a constant is still passed by value
    result = bound(lambda x: x * torch.tensor(3.0), meta(n, n))
    assert result.compulsory_bytes == 2 * n * n * FP32


# --- overlapping windows ----------------------------------------------------------------------


def test_overlapping_windows_read_their_distinct_elements() -> None:
    # a.as_strided((1000, 2), (1000, 1000)): element (i, j) is a[1000·(i + j)], i + j ≤ 1000:
    # 1,001 distinct elements read (was 2,000), 2,000 written
    a = meta(1000 * 1000 + 1)
    result = bound(lambda a: a.as_strided((1000, 2), (1000, 1000)) * 2, a)
    assert result.compulsory_bytes == (1001 + 2000) * FP32
    # its first 500 rows touch a[1000·s], s ≤ 500: 501 elements at most
    result = bound(lambda a: a.as_strided((1000, 2), (1000, 1000))[:500] * 2, a)
    assert charged(result)[(1000 * 1000 + 1,), "float32"] <= 501


@given(
    st.lists(st.tuples(st.integers(1, 6), st.integers(0, 12)), min_size=1, max_size=4)
)
def test_distinct_offsets_are_never_more_than_the_truth(dims) -> None:  # noqa: ANN001
    shape, strides = zip(*dims, strict=True)
    offsets = {
        sum(i * s for i, s in zip(index, strides, strict=True))
        for index in itertools.product(*map(range, shape))
    }
    assert distinct_offsets(shape, strides) == len(offsets)  # small: counted one by one


def test_distinct_offsets_of_large_views_in_closed_form() -> None:
    # nested dims: the product; windows of stride 1 and width 3 over 3000: 3000 + 2·2999
    assert distinct_offsets((64, 32, 16), (512, 16, 1)) == 64 * 32 * 16
    assert distinct_offsets((3000, 3000), (1, 2)) == 3000 + 2 * 2999
    assert distinct_offsets((1000, 2), (1000, 1000)) == 1001


# --- many slices ------------------------------------------------------------------------------


def test_a_concatenation_of_many_slices_reads_each_row_once() -> None:
    # cat([x[i:i + 1] for i in range(n)]).sum(): every row of x read once, n·d − 1 adds. The
    # rows unite into one box in one pass (issue 28: was quadratic in n)
    n, d = 2048, 8
    result = bound(lambda x: torch.cat([x[i:i + 1] for i in range(n)]).sum(), meta(n, d))
    assert result.compulsory_bytes == (n * d + 1) * FP32
    # every other row: one box of n rows, exactly
    rows = Region.of([((range(i, i + 1),), (range(d),)) for i in range(0, 2 * n, 2)])
    assert len(rows.boxes) == 1 and rows.count == n * d


# --- masks the program builds from constants -------------------------------------------------


def test_a_mask_built_from_constants_sizes_nothing_by_data() -> None:
    # x[arange(n) % 3 == 0]: the mask is known, so the output's size is too (rows 0, 3, …:
    # ⌈n/3⌉ of them), read and written once; was charged as possibly empty (0 B of 384 B at
    # n = 16, d = 8, the oracle's figure)
    n, d = 16, 8
    rows = -(-n // 3)
    result = bound(lambda x: x[torch.arange(n) % 3 == 0], meta(n, d))
    assert result.compulsory_bytes == 2 * rows * d * FP32
    # x[:, arange(d) < 5].sum(1): the first 5 columns read, n sums written
    columns = bound(lambda x: x[:, torch.arange(d) < 5].sum(1), meta(n, d))
    assert columns.compulsory_bytes == (n * 5 + n) * FP32
    # the same work as x[:, :5].sum(1), and the mask's d comparisons
    sliced = bound(lambda x: x[:, :5].sum(1), meta(n, d))
    assert columns.vector_flops == sliced.vector_flops + d


def test_a_mask_built_from_constants_over_4m_elements_is_still_known() -> None:
    # the same at n = 2²² + 2 rows of d = 4 (a mask of 4,194,306, over the 4 M floats values
    # are evaluated to: indices and masks go to 64 M; x of 16.8 M elements, too many to
    # number, counts the mask's true elements): ⌈n/3⌉ rows read and written — was 0 B
    n, d = 2**22 + 2, 4
    rows = -(-n // 3)
    result = bound(lambda x: x[torch.arange(n) % 3 == 0], meta(n, d))
    assert result.compulsory_bytes == 2 * rows * d * FP32 == 44_739_264


_MASK_BUFFER_FILE = """
import torch
import torch.nn as nn

N, D = 2**22 + 2, 4


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mask", torch.arange(N) % 3 == 0)

    def forward(self, x):
        return x[self.mask]


def get_inputs():
    return [torch.randn(N, D)]


def get_init_inputs():
    return []
"""


def test_a_mask_buffer_over_4m_elements_made_in_init_is_known(tmp_path) -> None:  # noqa: ANN001
    # the same mask registered in __init__ of a KernelBench problem (built on fake tensors):
    # the shadow records arange(n) % 3 == 0 as its recipe, made for real only when the trace
    # asks the buffer's value, so it is charged as the inline mask is (was 0 B: a data mask)
    from torchroofline import analyze_file

    path = tmp_path / "mask_buffer.py"
    path.write_text(_MASK_BUFFER_FILE)
    n, d = 2**22 + 2, 4
    rows = -(-n // 3)
    mask_bytes = n  # the bool buffer, read by the index
    assert analyze_file(path, gpu="h100-sxm").compulsory_bytes == \
        2 * rows * d * FP32 + mask_bytes


# --- picks at known positions past the placed boxes -----------------------------------------


def _arange_picks(rows, columns):  # noqa: ANN001, ANN202
    """log_softmax(x, 1)[rows(n), columns(n)] with both index tensors built in forward."""
    def body(x: torch.Tensor) -> torch.Tensor:
        n = torch.arange(x.shape[0])
        return torch.log_softmax(x, 1)[rows(n), columns(n)]
    return body


def test_an_anti_diagonal_pick_of_a_log_softmax_reads_every_row() -> None:
    # log_softmax(x, 1)[i, n − 1 − i]: pick i needs row i's log-sum-exp, every logit of it; the
    # n picks hold every row. Past 64 placed boxes the picks were a count of n elements (880 B
    # at n = 110, where the oracle proves 48,840 B: test_oracle's case); their rows and columns
    # are kept now. Reads all of x, writes n picks
    n = 110
    result = bound(_arange_picks(lambda i: i, lambda i: i.flip(0)), meta(n, n))
    assert result.compulsory_bytes == (n * n + n) * FP32


def test_picks_at_a_known_permutation_or_repeated_rows_read_those_rows() -> None:
    # rows (7i mod n) are a permutation of all n rows (7 and 110 are coprime); rows i // 2
    # repeat, n / 2 distinct rows of n logits each. n picks written either way
    n = 110
    permuted = bound(_arange_picks(lambda i: 7 * i % n, lambda i: 3 * i % n), meta(n, n))
    assert permuted.compulsory_bytes == (n * n + n) * FP32
    repeated = bound(_arange_picks(lambda i: i // 2, lambda i: 3 * i % n), meta(n, n))
    assert repeated.compulsory_bytes == (n // 2 * n + n) * FP32


def test_picks_at_given_indices_read_the_rows_they_name() -> None:
    # x[i, j] of a log-softmax with i, j given, i = 7k mod 100 (100 distinct rows, 10 of them
    # twice; more than 64 placed boxes): those rows whole, the two index tensors, the n picks
    n, distinct = 110, 100
    rows, columns = torch.arange(n) * 7 % distinct, torch.arange(n).flip(0)
    inputs = (torch.randn(n, n), rows, columns)
    given = bound(lambda x, i, j: torch.log_softmax(x, 1)[i, j], *inputs, data="given")
    assert given.compulsory_bytes == (distinct * n + n) * FP32 + 2 * n * INT64


# --- complex matrix products ----------------------------------------------------------------


C64 = torch.complex64


def test_a_complex_product_takes_three_real_products() -> None:
    # (Ar + i·Ai)(Br + i·Bi): Gauss's method forms it from Ar·Br, Ai·Bi and (Ar + Ai)(Br + Bi),
    # three real n³ products of 2n³ FLOPs each, 6n³ (the direct method: four, 8n³). Charged the
    # same as the cost rule, on shape-only and on real inputs, through mm, addmm and einsum
    n = 64
    square = 6 * n**3
    for data, make in (("any", lambda *s: meta(*s, dtype=C64)),
                       ("given", lambda *s: torch.randn(s, dtype=C64))):
        assert bound(lambda a, b: a @ b, make(n, n), make(n, n), data=data).tensor_flops \
            == square
        assert bound(torch.addmm, make(n), make(n, n), make(n, n), data=data).tensor_flops \
            == square
    # a batch of 3 (bmm, baddbmm, einsum): 3 · 6n³; rows :4 of one product: 4 · n · 6n
    batched = meta(3, n, n, dtype=C64)
    for body in (torch.bmm, lambda a, b: torch.einsum("bij,bjk->bik", a, b)):
        assert bound(body, batched, batched).tensor_flops == 3 * square
    assert bound(lambda c, a, b: torch.baddbmm(c, a, b), batched, batched, batched).tensor_flops \
        == 3 * square
    square_meta = meta(n, n, dtype=C64)
    assert bound(lambda a, b: (a @ b)[:4], square_meta, square_meta).tensor_flops == 4 * n * 6 * n
    # a matrix-vector product: 3 real ones of 2n² FLOPs
    assert bound(lambda a, v: a @ v, square_meta, meta(n, dtype=C64)).tensor_flops == 6 * n * n


def test_a_real_operand_cast_to_complex_takes_fewer_real_products() -> None:
    # A real: A·B = A·Br + i·A·Bi, two real products (4n³ FLOPs); both real: one (2n³). The same
    # for a given complex input whose imaginary part is zero
    n = 64
    real, complex_ = meta(n, n), meta(n, n, dtype=C64)
    assert bound(lambda a, b: a.to(C64) @ b, real, complex_).tensor_flops == 4 * n**3
    assert bound(lambda a, b: a.to(C64) @ b.to(C64), real, real).tensor_flops == 2 * n**3
    inputs = (torch.randn(n, n).to(C64), torch.randn(n, n, dtype=C64))
    assert bound(lambda a, b: a @ b, *inputs, data="given").tensor_flops == 4 * n**3
    assert bound(lambda a, b: a @ b, *inputs, data="any").tensor_flops == 6 * n**3


# --- tensors the program holds outside its modules --------------------------------------------

_GLOBAL_ROWS = torch.tensor([5, 3, 60, 3, 17, 42])


def test_a_global_index_tensor_is_a_known_constant() -> None:
    # x[_GLOBAL_ROWS[:4]].sum(1) with the rows a module-level tensor: program state, as a
    # buffer is, so its values are known: rows 5, 3, 60 (3 twice) of a 64 × 64 x read, 4 sums
    # written, the 4 int64 picks read (was one element of x: the index taken as unknown)
    result = bound(lambda x: x[_GLOBAL_ROWS[:4]].sum(1), meta(64, 64))
    assert result.compulsory_bytes == (3 * 64 + 4) * FP32 + 4 * INT64


def test_a_long_diagonal_of_a_conv_needs_the_input_under_every_window() -> None:
    # diagonal(conv2d(x, w))[i] with a 1×1 filter reads x[..., i, i]: n inputs, n > MAX_BOXES,
    # the filter's one weight and the n outputs (was the first MAX_BOXES inputs only)
    n = 160
    assert n > MAX_BOXES
    result = bound(lambda x, w: torch.diagonal(F.conv2d(x, w), dim1=-2, dim2=-1),
                   meta(1, 1, n, n), meta(1, 1, 1, 1))
    assert result.compulsory_bytes == (n + 1 + n) * FP32


def test_a_long_conv_diagonal_reads_the_union_of_its_windows() -> None:
    # 3×3 windows along a 128-output diagonal (past MAX_BOXES): window i covers rows and
    # columns i..i+2, and shares a 2 × 2 block with window i − 1, so the union holds
    # 9 + 5·127 = 5n + 4 positions per input channel (was 0.90 of it: the rows past the
    # kept boxes' windows a window's width each). Reads 2·(5n + 4) inputs and 3·2·9 weights,
    # writes 3·n outputs; the FLOPs: every (output, tap) pair in bounds, 2·Ci each
    n = 128
    result = bound(lambda x, w: torch.diagonal(F.conv2d(x, w), dim1=-2, dim2=-1),
                   meta(1, 2, n + 2, n + 2), meta(3, 2, 3, 3))
    assert result.compulsory_bytes == (2 * (5 * n + 4) + 3 * 2 * 9 + 3 * n) * FP32
    assert result.tensor_flops == 2 * 2 * 3 * n * 9


def test_a_diagonal_of_images_and_channels_reads_each_images_input() -> None:
    # y.diagonal(0, 0, 1): image i's output channel i, every position: each of the n images
    # read whole (a 3×3 valid conv's windows cover its 6 × 6), n filters of C·9 weights, n
    # 4 × 4 outputs written; 2·C·9 FLOPs per output (was 0.05 of it: the first MAX_BOXES
    # points only)
    n, c = 128, 2
    result = bound(lambda x, w: torch.diagonal(F.conv2d(x, w), 0, 0, 1),
                   meta(n, c, 6, 6), meta(n, c, 3, 3))
    assert result.compulsory_bytes == (n * c * 36 + n * c * 9 + n * 16) * FP32
    assert result.tensor_flops == 2 * c * 9 * 16 * n


def test_a_diagonal_is_exact_past_max_boxes() -> None:
    # the diagonal of a 200 × 200 matrix in 3 channels: one Diagonal through all 3 (each
    # channel's run of points, then the channels united), 600 elements; its 3 × 3 windows,
    # taps (a, b) shifting it by (a, b): the shifts of one a − b lie on one line, so 5 lines
    # (a − b = −2..2) of lengths 200, 201, 202, 201, 200 once united: 1,004 per channel
    points = [(c, i, i) for c in range(3) for i in range(200)]
    boxes, diagonals = diagonals_through(points)
    region = Region.of(boxes, 0, (), diagonals)
    assert not boxes and len(region.diagonals) == 1 and region.count == 600
    shifted = [
        make_diagonal(((range(3),), (), ()), (1, 2), (a, b), (1, 1), 200)
        for a in range(3) for b in range(3)
    ]
    assert diagonals_count(shifted) == 3 * (200 + 201 + 202 + 201 + 200)
    # an anti-diagonal walked either way is one normal form; a single point is a box
    down = make_diagonal(((),) * 2, (0, 1), (0, 9), (1, -1), 10)
    up = make_diagonal(((),) * 2, (0, 1), (9, 0), (-1, 1), 10)
    assert down == up and down.count == 10
    assert make_diagonal(((),) * 2, (0, 1), (4, 4), (1, 1), 1) == ((range(4, 5),),) * 2
    # lines of one step through different classes share nothing; through other steps or
    # sets, the larger alone is sure
    assert diagonals_count([down, make_diagonal(((),) * 2, (0, 1), (0, 8), (1, -1), 9)]) == 19
    assert diagonals_count([down, make_diagonal(((),) * 2, (0, 1), (0, 0), (1, 1), 4)]) == 10


@st.composite
def _conv_diagonals(draw: st.DrawFn) -> tuple:
    """A conv2d of random geometry and a part of its output kept along a diagonal past
    MAX_BOXES: of any offset, flipped (an anti-diagonal), strided, picked by an index, or
    over images and channels."""
    kernel, stride = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    dilation, padding = draw(st.integers(1, 2)), draw(st.integers(0, 2))
    groups = draw(st.sampled_from([1, 2]))
    channels_in, channels_out = groups * draw(st.integers(1, 2)), groups * draw(st.integers(1, 2))
    out_h, out_w = draw(st.integers(100, 130)), draw(st.integers(100, 130))
    size = [(o - 1) * stride + dilation * (kernel - 1) + 1 - 2 * padding for o in (out_h, out_w)]
    x = torch.randn(draw(st.integers(1, 2)), channels_in, *size)
    w = torch.randn(channels_out, channels_in // groups, kernel, kernel)
    offset, every = draw(st.integers(-3, 3)), draw(st.integers(1, 4))
    kept = draw(st.sampled_from(["diagonal", "anti-diagonal", "strided", "index", "images"]))

    def body(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        if kept == "index":
            n = min(y.shape[-2:])
            return y[..., torch.arange(n), torch.arange(n - 1, -1, -1)]
        if kept == "images":  # image i's output channel i
            return torch.diagonal(y, 0, 0, 1)
        if kept == "anti-diagonal":
            y = y.flip(-1)
        diagonal = torch.diagonal(y, offset, -2, -1)
        return diagonal[..., ::every] if kept == "strided" else diagonal

    return body, x, w


@settings(deadline=None, derandomize=True, database=None, max_examples=12,
          suppress_health_check=[HealthCheck.too_slow])
@given(_conv_diagonals())
def test_a_conv_diagonal_reads_what_the_oracle_proves(case: tuple) -> None:
    from oracle import oracle, per_op

    # the kept outputs' receptive fields, no more (sound) and no less (tight): with random
    # weights every input under a kept window has a nonzero gradient, so the oracle's
    # proven bytes are that union exactly, and its conv FLOPs every in-bounds (output, tap)
    body, x, w = case
    module = Fn(body)
    result = analyze(module, (x.to("meta"), w.to("meta")), "h100-sxm")
    proven = oracle(module, (x.double(), w.double()))
    assert result.compulsory_bytes == proven.bytes(FP32)
    (conv,) = [row for row in per_op(result, proven) if "convolution" in row.name]
    assert conv.charged_flops == round(conv.proven_flops)
