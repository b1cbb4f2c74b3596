"""The bound against the dependence oracle (tests/oracle.py) on the op families the other
generators leave out: resampling of every mode (``F.interpolate``, ``grid_sample`` on a known
grid), max pools that return their indices (and the unpool that puts them back), sliding
windows (``Tensor.unfold``, overlapping ``as_strided``), FFTs, norms and statistics over the
first dim, order statistics (``kthvalue``, ``median``, ``cummin``), scatters into views
(``slice_scatter``, ``select_scatter``, ``diagonal_scatter``) and picks along a dim by a known
index (``take_along_dim``, ``take``).

Programs: one to three stages over a small 2-D tensor (test_oracle_selection's
:func:`program`), each drawn with its sizes and modes, then a tail that keeps a part of the
result; checked for tightness and soundness as there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_oracle import FLOAT_BYTES, HYPOTHESIS, assert_tight, figures
from test_oracle_selection import Draw, Stage, assert_generated_tight_and_sound, assert_sound

from conftest import Fn
from torchroofline import analyze


def _image(x: torch.Tensor) -> torch.Tensor:
    return x[None, None]


def _interpolate(draw: Draw, rows: int, columns: int) -> Stage:
    """x as a one-channel image resized to drawn sizes (up or down) in every mode."""
    mode = draw(st.sampled_from(["nearest", "nearest-exact", "bilinear", "bilinear_corners",
                                 "bicubic", "area"]))
    size = draw(st.integers(2, 2 * rows)), draw(st.integers(2, 2 * columns))
    corners = {"align_corners": mode == "bilinear_corners"} if "linear" in mode or (
        mode == "bicubic") else {}
    name = "bilinear" if mode == "bilinear_corners" else mode
    return (lambda x: F.interpolate(_image(x), size=size, mode=name, **corners)[0, 0]), size


def _grid_sample(draw: Draw, rows: int, columns: int) -> Stage:
    """x sampled on the grid of a known affine map (a scaling and a shift), bilinear or
    nearest, with zeros or the border outside."""
    scale, shift = draw(st.sampled_from([0.5, 1.0, 1.5])), draw(st.sampled_from([0.0, 0.3]))
    mode = draw(st.sampled_from(["bilinear", "nearest"]))
    padding = draw(st.sampled_from(["zeros", "border"]))
    size = draw(st.integers(1, rows)), draw(st.integers(1, columns))

    def sample(x: torch.Tensor) -> torch.Tensor:
        theta = torch.tensor([[[scale, 0.0, shift], [0.0, scale, -shift]]], dtype=x.dtype)
        grid = F.affine_grid(theta, [1, 1, *size], align_corners=False)
        return F.grid_sample(_image(x), grid, mode=mode, padding_mode=padding,
                             align_corners=False)[0, 0]

    return sample, size


def _pool_indices(draw: Draw, rows: int, columns: int) -> Stage:
    """2×2 max pools that return their indices: the maxima plus the indices' values; an
    adaptive max pool. (The unpool that puts maxima back at their indices writes positions
    data chose, which the oracle's union over draws claims in part: its closed form is
    test_an_unpool_read_in_part_needs_the_indices_of_its_plane.)"""
    kind = draw(st.sampled_from(["values", "adaptive"]))
    pooled = rows // 2, columns // 2
    if kind == "adaptive" or 0 in pooled:
        size = draw(st.integers(1, rows)), draw(st.integers(1, columns))
        return (lambda x: F.adaptive_max_pool2d(_image(x), size)[0, 0]), size

    def values(x: torch.Tensor) -> torch.Tensor:
        maxima, where = F.max_pool2d(_image(x), 2, return_indices=True)
        return (maxima + where.to(x.dtype))[0, 0]

    return values, pooled


def _windows(draw: Draw, rows: int, columns: int) -> Stage:
    """Sliding windows of each row (``Tensor.unfold``) or overlapping ``as_strided`` windows
    over the flat storage, reduced by a sum or a max."""
    size = draw(st.integers(1, columns))
    step = draw(st.integers(1, 2))
    windows = (columns - size) // step + 1
    reduce = draw(st.sampled_from(["sum", "amax"]))
    if draw(st.booleans()):
        return (lambda x: getattr(x.exp().unfold(1, size, step), reduce)(-1)), (rows, windows)
    count = (rows * columns - size) // step + 1
    flat = count // rows

    def strided(x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        return getattr(y.as_strided((rows, flat, size), (flat * step, step, 1)), reduce)(-1)

    return strided, (rows, flat)


def _fft(draw: Draw, rows: int, columns: int) -> Stage:
    """Real FFTs along a dim: magnitudes of ``rfft``, the round trip ``irfft(rfft)``, the
    real part of a complex ``fft``."""
    dim = draw(st.integers(0, 1))
    kind = draw(st.sampled_from(["rfft_abs", "round_trip", "fft_real"]))
    length = (rows, columns)[dim]
    if kind == "rfft_abs":
        shape = (length // 2 + 1, columns) if dim == 0 else (rows, length // 2 + 1)
        return (lambda x: torch.fft.rfft(x, dim=dim).abs()), shape
    if kind == "round_trip":
        return (lambda x: torch.fft.irfft(torch.fft.rfft(x, dim=dim), n=length, dim=dim)), (
            rows, columns
        )
    return (lambda x: torch.fft.fft(x, dim=dim).real), (rows, columns)


def _statistics(draw: Draw, rows: int, columns: int) -> Stage:
    """Norms and statistics of each column (over the first dim) or each row, kept as a
    line: vector norms of orders 1, 2, 3 and ∞, the standard deviation, the variance without
    correction, ``logsumexp``, ``F.normalize``."""
    dim = draw(st.integers(0, 1))
    kind = draw(st.sampled_from(["norm1", "norm2", "norm3", "norm_inf", "std", "var",
                                 "logsumexp", "normalize"]))
    line = (1, columns) if dim == 0 else (rows, 1)
    if kind == "std" and (rows, columns)[dim] < 2:
        kind = "var"  # (the corrected deviation of one element is NaN)
    order = {"norm1": 1, "norm2": 2, "norm3": 3, "norm_inf": float("inf")}
    if kind in order:
        return (lambda x: torch.linalg.vector_norm(x, order[kind], dim=dim, keepdim=True)), line
    if kind == "normalize":
        return (lambda x: F.normalize(x, dim=dim)), (rows, columns)
    return {
        "std": lambda x: x.std(dim, keepdim=True),
        "var": lambda x: x.var(dim, keepdim=True, correction=0),
        "logsumexp": lambda x: x.logsumexp(dim, keepdim=True),
    }[kind], line


def _order(draw: Draw, rows: int, columns: int) -> Stage:
    """Order statistics along a dim: the k-th smallest, the median, the running minimum."""
    dim = draw(st.integers(0, 1))
    length = (rows, columns)[dim]
    line = (1, columns) if dim == 0 else (rows, 1)
    kind = draw(st.sampled_from(["kthvalue", "median", "cummin"]))
    if kind == "kthvalue":
        k = draw(st.integers(1, length))
        return (lambda x: x.kthvalue(k, dim, keepdim=True).values), line
    if kind == "median":
        return (lambda x: x.median(dim, keepdim=True).values), line
    return (lambda x: x.cummin(dim).values), (rows, columns)


def _view_scatter(draw: Draw, rows: int, columns: int) -> Stage:
    """The exps of some of x's elements written into a view of x: a slice of rows, one
    column, the diagonal."""
    kind = draw(st.sampled_from(["slice", "select", "diagonal"]))
    if kind == "slice":
        start = draw(st.integers(0, rows - 1))
        return (lambda x: x.slice_scatter(x[: rows - start].exp(), 0, start)), (rows, columns)
    if kind == "select":
        column = draw(st.integers(0, columns - 1))
        return (lambda x: x.select_scatter(x[:, 0].exp(), 1, column)), (rows, columns)
    side = min(rows, columns)
    return (lambda x: x.diagonal_scatter(x[0, :side].exp())), (rows, columns)


def _take(draw: Draw, rows: int, columns: int) -> Stage:
    """Picks by a known index: ``take_along_dim`` down the columns, ``take`` of flat
    positions (negative ones from the end)."""
    if draw(st.booleans()):
        picks = draw(st.lists(st.lists(st.integers(0, rows - 1), min_size=columns,
                                       max_size=columns), min_size=1, max_size=rows))
        return (lambda x: x.take_along_dim(torch.tensor(picks, device=x.device), 0)), (
            len(picks), columns
        )
    flat = draw(st.lists(st.integers(-rows * columns, rows * columns - 1), min_size=1,
                         max_size=6))
    return (lambda x: x.take(torch.tensor(flat, device=x.device))[None]), (1, len(flat))


FAMILIES = {
    "interpolate": _interpolate, "grid_sample": _grid_sample, "pool_indices": _pool_indices,
    "windows": _windows, "fft": _fft, "statistics": _statistics, "order": _order,
    "view_scatter": _view_scatter, "take": _take,
}


@settings(HYPOTHESIS, max_examples=40)
@given(st.data())
def test_generated_window_programs_are_tight_and_sound(data):
    assert_generated_tight_and_sound(data.draw, FAMILIES)


# --- the cases the generator found -----------------------------------------------------------


def test_a_write_into_a_view_read_in_part_reads_what_it_copies() -> None:
    # x (3, 3); x.slice_scatter(exp(x[:2]), 0, 1) is [x[0], exp(x[0]), exp(x[1])], and its
    # inner element [1, 1] is exp(x[0, 1]): one read, one exp, one write (8 B, 1 FLOP). Was
    # 4 B and no FLOP: with no rule of its own, a part of a layout copy charged no input
    # (select_scatter and diagonal_scatter likewise)
    found = figures(lambda x: x.slice_scatter(x[:2].exp(), 0, 1)[1:-1, 1:-1], torch.randn(3, 3))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 2 * FLOAT_BYTES
    assert found.result.flops == 1
    # the diagonal of x (3, 4) replaced by exp(x[0, :3]), row 2 kept: x[2, 0], x[2, 1],
    # exp(x[0, 2]), x[2, 3]: 4 reads and 4 writes, 1 exp
    found = figures(lambda x: x.diagonal_scatter(x[0, :3].exp())[2], torch.randn(3, 4))
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == 8 * FLOAT_BYTES
    assert found.result.flops == 1


def test_a_grid_sample_on_a_known_grid_reads_the_taps_it_weighs() -> None:
    # a (3, 3) image sampled at half scale into (2, 2), bilinear, align_corners=False: output
    # (i, j) lies at ((2i − 1)/4 + 1, …) in pixels, i.e. at 0.5 and 1.5 along each dim: taps
    # at rows {0, 1} and {1, 2}, so every one of the 9 pixels is weighed (36 B), the 4 outputs
    # written (16 B), and the map's 6 known floats read (24 B, to build the grid): 76 B. Was
    # 40 B: a grid sample may land on padding only, so it charged none of its source
    def sample(x: torch.Tensor) -> torch.Tensor:
        theta = torch.tensor([[[0.5, 0.0, 0.0], [0.0, 0.5, 0.0]]], dtype=x.dtype)
        grid = F.affine_grid(theta, [1, 1, 2, 2], align_corners=False)
        return F.grid_sample(_image(x), grid, align_corners=False)[0, 0]

    found = figures(sample, torch.randn(3, 3))
    assert found.proven.bytes(FLOAT_BYTES) == (9 + 4) * FLOAT_BYTES
    assert found.result.compulsory_bytes == (9 + 4 + 6) * FLOAT_BYTES
    assert_sound(found)


def test_a_grid_sample_on_a_grid_of_data_reads_the_taps_of_the_given_grid() -> None:
    # x (2, 3, 4, 4) sampled (bilinear, zero padding) at tanh(g), g (2, 2, 3, 2), the first
    # output row of each plane kept: for the given g, the source pixels the 18 kept outputs
    # weigh (the oracle's, whose count the given grid decides), half of g (12 of 24) and the
    # 18 outputs. Was none of the source: the grid, though computed from given values, was
    # taken as unknown, and a grid sample may land on padding only
    def sample(x: torch.Tensor, g: torch.Tensor, mode: str = "zeros") -> torch.Tensor:
        return F.grid_sample(x, g.tanh(), padding_mode=mode, align_corners=False)[:, :, :1]

    x, g = torch.randn(2, 3, 4, 4), torch.randn(2, 2, 3, 2)
    found = figures(sample, x, g, data="given")
    source = found.proven.leaves[0].necessary
    assert found.result.compulsory_bytes == found.proven.bytes(FLOAT_BYTES) == (
        source + 12 + 18) * FLOAT_BYTES
    # for any grid, padded by the border: every sample lands inside its (n, c) plane, so the
    # 6 planes' kept outputs read one pixel each at least (all may weigh the same one): 6
    # pixels, 12 of g, 18 written (was no pixel); zero padding may read none
    border = analyze(Fn(lambda x, g: sample(x, g, "border")), (x, g), "h100-sxm", data="any")
    assert border.compulsory_bytes == (6 + 12 + 18) * FLOAT_BYTES
    # zero padding on that grid too: tanh(g) lies in [−1, 1], pixel coordinates in [−0.5,
    # 3.5], where a bilinear sample's nearer tap is inside with weight ≥ ½, so each plane
    # reads a pixel as well (was none: the grid's range was not looked at)
    zeros = analyze(Fn(sample), (x, g), "h100-sxm", data="any")
    assert zeros.compulsory_bytes == (6 + 12 + 18) * FLOAT_BYTES
    # a grid of any range (g itself) may land off the image only: no pixel
    off = analyze(Fn(lambda x, g: F.grid_sample(x, g, align_corners=False)[:, :, :1]), (x, g),
                  "h100-sxm", data="any")
    assert off.compulsory_bytes == (12 + 18) * FLOAT_BYTES
    # nearest on it, align_corners=False: a saturated tanh (1.0) lies at 3.5, which rounds to
    # 4 (half to even), off the image: no pixel either
    nearest = analyze(Fn(lambda x, g: F.grid_sample(x, g.tanh(), mode="nearest",
                                                    align_corners=False)[:, :, :1]),
                      (x, g), "h100-sxm", data="any")
    assert nearest.compulsory_bytes == (12 + 18) * FLOAT_BYTES


def test_an_unpool_read_in_part_needs_the_indices_of_its_plane() -> None:
    # u = max_unpool2d(exp(m), i) of m, i = max_pool2d(x, 2, return_indices=True), x (3, 3):
    # u[1, 1] is exp(max(x[:2, :2])) where the argmax is (1, 1), else 0. Which it is is known
    # only from the index, so the pool's 4 reads and 3 compares are needed whatever the data
    # (16 B + the 4 B written, 3 FLOPs); the exp may land elsewhere: not charged. Was 4 B
    # and no FLOP (an unpool had no rule: a part of it charged none of its inputs)
    def unpool(x: torch.Tensor) -> torch.Tensor:
        maxima, where = F.max_pool2d(_image(x), 2, return_indices=True)
        return F.max_unpool2d(maxima.exp(), where, 2, output_size=(3, 3))[0, 0]

    found = figures(lambda x: unpool(x)[1:-1, 1:-1], torch.randn(3, 3))
    assert found.result.compulsory_bytes == (4 + 1) * FLOAT_BYTES
    assert found.result.flops >= 3
    assert_sound(found)
    # the whole of u: each plane takes one value at least (all may land on one position)
    whole = figures(unpool, torch.randn(3, 3))
    assert_tight(whole)
    assert_sound(whole)


def test_an_fft_read_in_part_takes_its_lines_adds_and_one_op_per_further_output() -> None:
    # rfft(x)[:, :2] of x (3, 8): each kept frequency is a form with a nonzero weight on all 8
    # samples of its row, so a row's first needs 7 adds and its second 1 op more: 3·(7 + 1) =
    # 24 FLOPs, and the abs one each of the 6 (its cost rule). Was 21 for the transform
    # (3 rows × 7), below the oracle's 24
    found = figures(lambda x: torch.fft.rfft(x)[:, :2].abs(), torch.randn(3, 8))
    assert found.result.flops == 3 * (7 + 1) + 6
    assert_tight(found)
    # fft of x (2, 3) along its 2 rows, real parts kept: 3 two-point transforms, each 2
    # outputs of 2 points, (1 + 1) apiece: 6 (was 0: the count Johnson and Frigo's formula
    # gives below 4 points is negative, clamped to 0)
    found = figures(lambda x: torch.fft.fft(x, dim=0).real, torch.randn(2, 3))
    assert found.result.flops == 3 * 2
    assert_tight(found)


def test_the_imaginary_part_of_a_real_fft_skips_its_first_sample() -> None:
    # fft(x).imag[:, 1:] of x (2, 3): Im X_k = −Σ_j x_j sin(2πjk/3) weighs x_0 by sin 0 = 0,
    # so each row needs x[:, 1:] alone: 4 reads and 4 writes, 32 B (the oracle's). Was whole
    # rows (40 B), above that hand minimum: a demand on a complex element did not say which of
    # its parts is kept. FLOPs per row: Im X_1 weighs 2 samples (1 add), Im X_2 one op more: 4
    found = figures(lambda x: torch.fft.fft(x).imag[:, 1:], torch.randn(2, 3))
    assert found.proven.bytes(FLOAT_BYTES) == found.result.compulsory_bytes == 8 * FLOAT_BYTES
    assert found.result.flops == 2 * (1 + 1)
    assert_tight(found)
    # n = 4: sin(2πjk/4) is 0 for every j at k = 2 (Im X_2 = 0, no work) and at j = 0, 2, so
    # Im X_1 and Im X_3 weigh x_1 and x_3 alone: 2 reads and 3 writes a row
    found = figures(lambda x: torch.fft.fft(x).imag[:, 1:], torch.randn(2, 4))
    assert found.proven.bytes(FLOAT_BYTES) == found.result.compulsory_bytes == 10 * FLOAT_BYTES
    assert_tight(found)
    # the real part of rfft(x) at n = 4: cos(2πjk/4) is 0 at jk = 1, 3 (mod 4), so Re X_1
    # weighs x_0 and x_2 alone; Re X_0 and Re X_2 weigh all four: every sample still read
    found = figures(lambda x: torch.fft.rfft(x).real[:, 1:2], torch.randn(2, 4))
    assert found.proven.bytes(FLOAT_BYTES) == found.result.compulsory_bytes == (4 + 2) * FLOAT_BYTES
